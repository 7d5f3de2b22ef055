//! The statuses the operator wrote and its watch caches have not shown yet.

use serde::Serialize;

/// The last status the operator wrote to each object (by UID), until its watch cache shows
/// it. A reconcile that runs on a cached object older than our own last write (another event
/// came in before the write's) would otherwise write the same status again.
#[derive(Debug, Default)]
pub struct WrittenStatus {
    last: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

impl WrittenStatus {
    /// Entries kept at most; past that the memory is dropped (costing at worst one repeated
    /// write per object), so objects deleted before their cache caught up cannot pile up.
    const MAX: usize = 16_384;

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, u64>> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `new` is what was last written to `uid` and the cache (`old`) has not caught
    /// up with it yet. Forgets the write once the cache shows it. Statuses are serialized only
    /// while a write of `uid` is remembered, not on every reconcile.
    pub fn already_written<S: Serialize>(&self, uid: &str, old: &S, new: &S) -> bool {
        let Some(written) = self.lock().get(uid).copied() else {
            return false;
        };
        if written == digest_of(old) {
            self.lock().remove(uid);
            return false;
        }
        written == digest_of(new)
    }

    /// Remembers that `status` was written to `uid`.
    pub fn remember<S: Serialize>(&self, uid: &str, status: &S) {
        let written = digest_of(status);
        let mut last = self.lock();
        if last.len() >= Self::MAX {
            last.clear();
        }
        last.insert(uid.to_string(), written);
    }
}

fn digest_of<S: Serialize>(status: &S) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(status)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_written_is_not_written_again_from_a_cache_that_has_not_seen_it() {
        let written = WrittenStatus::default();
        let (before, after) = (&"Pending", &"Running");
        assert!(
            !written.already_written("uid", before, after),
            "nothing written yet"
        );
        written.remember("uid", after);
        // A reconcile on the stale object plans the same status: no second write.
        assert!(written.already_written("uid", before, after));
        // It plans something else: that is written.
        assert!(!written.already_written("uid", before, &"Completed"));
    }

    #[test]
    fn the_memory_of_a_write_ends_when_the_cache_shows_it() {
        let written = WrittenStatus::default();
        let (before, after) = (&"Pending", &"Running");
        written.remember("uid", after);
        assert!(
            !written.already_written("uid", after, after),
            "the cache caught up"
        );
        // Forgotten: if the status is changed back by someone else, it is written again.
        assert!(!written.already_written("uid", before, after));
        assert!(written.lock().is_empty());
    }
}

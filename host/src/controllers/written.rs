//! The statuses the operator wrote and its watch caches have not shown yet, and the watch
//! events of its own settled writes, which need not reconcile again.

use kube::{Resource, ResourceExt as _};
use serde::Serialize;

/// The last status the operator wrote to each object (by UID), until its watch cache shows
/// it. A reconcile that runs on a cached object older than our own last write (another event
/// came in before the write's) would otherwise write the same status again.
///
/// Also the `resourceVersion` each status write made, and whether the reconcile that wrote it
/// carried out all its plan ([`WrittenStatus::settled`]): the watch event of that version is
/// the write coming back, and a reconcile on it would plan what was just written and do
/// nothing (about a quarter of a Workflow's reconciles, one per status write).
#[derive(Debug, Default)]
pub struct WrittenStatus {
    last: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    versions: std::sync::Mutex<std::collections::HashMap<String, WrittenVersion>>,
}

/// The version a status write made, and whether its writer settled.
#[derive(Debug)]
struct WrittenVersion {
    resource_version: String,
    settled: bool,
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

    /// Remembers that the last status write to `uid` made `resource_version`.
    pub fn wrote_version(&self, uid: &str, resource_version: String) {
        let mut versions = self.versions();
        if versions.len() >= Self::MAX {
            versions.clear();
        }
        let written = WrittenVersion {
            resource_version,
            settled: false,
        };
        versions.insert(uid.to_string(), written);
    }

    /// Says that the reconcile that last wrote `uid`'s status carried out all its plan:
    /// planned again on what it wrote and on the same children, it would write and create
    /// nothing, so that write's own watch event is [`WrittenStatus::is_echo`]. (A change of the
    /// object's children, or of anything else it reads, still reconciles it.)
    pub fn settled(&self, uid: &str) {
        if let Some(written) = self.versions().get_mut(uid) {
            written.settled = true;
        }
    }

    /// Whether `obj`, as a watch delivers it, is the version a settled write of ours made
    /// (then forgotten: the same version delivered again, by a relist, reconciles). Another
    /// version leaves the memory as it is: an older one may come first, and a newer one is
    /// someone else's change after ours, whose event reconciles.
    pub fn is_echo(&self, obj: &impl Resource) -> bool {
        let (Some(uid), Some(version)) = (obj.uid(), obj.resource_version()) else {
            return false;
        };
        let mut versions = self.versions();
        let Some(written) = versions.get(&uid).filter(|w| w.resource_version == version) else {
            return false;
        };
        let settled = written.settled;
        versions.remove(&uid);
        settled
    }

    fn versions(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, WrittenVersion>> {
        self.versions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
    use crate::api::Workflow;

    fn delivered(uid: &str, version: &str) -> Workflow {
        let mut workflow = Workflow::new("w", Default::default());
        workflow.metadata.uid = Some(uid.into());
        workflow.metadata.resource_version = Some(version.into());
        workflow
    }

    #[test]
    fn the_event_of_a_settled_write_is_its_echo_once_and_no_other_event_is() {
        let written = WrittenStatus::default();
        assert!(
            !written.is_echo(&delivered("uid", "7")),
            "nothing written yet"
        );
        written.wrote_version("uid", "7".into());
        written.settled("uid");
        // An older version delivered late, and another object's, are not the write.
        assert!(!written.is_echo(&delivered("uid", "6")));
        assert!(!written.is_echo(&delivered("other", "7")));
        assert!(written.is_echo(&delivered("uid", "7")));
        // Delivered again (a relist): reconciled.
        assert!(!written.is_echo(&delivered("uid", "7")));
        // A later write's version replaces the earlier one.
        written.wrote_version("uid", "8".into());
        written.settled("uid");
        written.wrote_version("uid", "9".into());
        written.settled("uid");
        assert!(!written.is_echo(&delivered("uid", "8")));
        assert!(written.is_echo(&delivered("uid", "9")));
    }

    #[test]
    fn the_event_of_a_write_whose_reconcile_did_not_settle_reconciles() {
        let written = WrittenStatus::default();
        written.wrote_version("uid", "7".into());
        assert!(
            !written.is_echo(&delivered("uid", "7")),
            "a write whose own event takes the next step (a re-run's first)"
        );
        written.settled("uid");
        assert!(
            !written.is_echo(&delivered("uid", "7")),
            "forgotten once delivered"
        );
    }

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

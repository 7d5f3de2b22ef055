//! Which lock Leases each group holds, kept from the Lease watch beside its store: what a group
//! holds is looked up by its UID, not by scanning every cached Lease (at a thousand groups the
//! scan was the operator's largest cost).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::runtime::watcher::Event;

use super::LABEL_LOCK_HOLDER;

/// The lock Leases by holder UID (the [`LABEL_LOCK_HOLDER`] label), as the watch shows them.
#[derive(Default)]
pub struct Holdings {
    index: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    /// Lease names by holder UID.
    by_holder: HashMap<String, BTreeSet<String>>,
    /// Holder UID by Lease name.
    holder: HashMap<String, String>,
    /// A relist being read: it replaces the index once complete.
    relist: Option<Vec<(String, String)>>,
}

impl Index {
    fn remove(&mut self, name: &str) {
        let Some(uid) = self.holder.remove(name) else {
            return;
        };
        if let Some(names) = self.by_holder.get_mut(&uid) {
            names.remove(name);
            if names.is_empty() {
                self.by_holder.remove(&uid);
            }
        }
    }

    fn insert(&mut self, name: String, uid: String) {
        self.remove(&name);
        self.by_holder
            .entry(uid.clone())
            .or_default()
            .insert(name.clone());
        self.holder.insert(name, uid);
    }
}

/// The holder UID and name of `lease`; `None` for one without a holder label.
fn entry(lease: &Lease) -> Option<(String, String)> {
    let uid = lease.labels().get(LABEL_LOCK_HOLDER)?;
    Some((lease.name_any(), uid.clone()))
}

impl Holdings {
    /// Follows one event of the Lease watch (after its store took it).
    pub fn observe(&self, event: &Event<Lease>) {
        let mut index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            Event::Apply(lease) => match entry(lease) {
                Some((name, uid)) => index.insert(name, uid),
                None => index.remove(&lease.name_any()),
            },
            Event::Delete(lease) => index.remove(&lease.name_any()),
            Event::Init => index.relist = Some(Vec::new()),
            Event::InitApply(lease) => {
                if let (Some(relist), Some(entry)) = (index.relist.as_mut(), entry(lease)) {
                    relist.push(entry);
                }
            }
            Event::InitDone => {
                let relist = index.relist.take().unwrap_or_default();
                index.by_holder.clear();
                index.holder.clear();
                for (name, uid) in relist {
                    index.insert(name, uid);
                }
            }
        }
    }

    /// The names of the Leases the group with `uid` holds.
    pub fn of(&self, uid: &str) -> Vec<String> {
        let index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        index
            .by_holder
            .get(uid)
            .map(|names| names.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kube::api::ObjectMeta;

    use super::*;

    fn lease(name: &str, holder: Option<&str>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: holder.map(|h| BTreeMap::from([(LABEL_LOCK_HOLDER.into(), h.into())])),
                ..ObjectMeta::default()
            },
            spec: None,
        }
    }

    #[test]
    fn a_holders_leases_follow_the_watch_through_creates_deletes_and_relists() {
        let holdings = Holdings::default();
        holdings.observe(&Event::Init);
        holdings.observe(&Event::InitApply(lease("l1", Some("a"))));
        holdings.observe(&Event::InitApply(lease("l2", Some("b"))));
        // Until the relist is complete, nothing of it counts.
        assert!(holdings.of("a").is_empty());
        holdings.observe(&Event::InitDone);
        assert_eq!(holdings.of("a"), ["l1"]);
        assert_eq!(holdings.of("b"), ["l2"]);

        holdings.observe(&Event::Apply(lease("l3", Some("a"))));
        assert_eq!(holdings.of("a"), ["l1", "l3"]);
        holdings.observe(&Event::Delete(lease("l1", Some("a"))));
        assert_eq!(holdings.of("a"), ["l3"]);
        // A Lease seen again under another holder (or none) moves.
        holdings.observe(&Event::Apply(lease("l3", Some("b"))));
        assert!(holdings.of("a").is_empty());
        assert_eq!(holdings.of("b"), ["l2", "l3"]);
        holdings.observe(&Event::Apply(lease("l2", None)));
        assert_eq!(holdings.of("b"), ["l3"]);

        // A relist replaces everything: what it does not list is gone.
        holdings.observe(&Event::Init);
        holdings.observe(&Event::InitApply(lease("l9", Some("c"))));
        holdings.observe(&Event::InitDone);
        assert!(holdings.of("b").is_empty());
        assert_eq!(holdings.of("c"), ["l9"]);
    }
}

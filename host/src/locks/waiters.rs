//! Groups waiting for locks, woken one at a time as locks are freed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::{LABEL_LOCK_HOLDER, arrival};
use crate::api::WorkflowGroup;

/// Groups waiting for a lock, by Lease name, woken when it is deleted; and the Leases given
/// back a moment ago, which the cache may still list.
pub struct Waiters {
    waiting: Mutex<HashMap<String, HashSet<ObjectRef<WorkflowGroup>>>>,
    /// The groups in line for locks (their condition says they wait), as the group watch
    /// shows them: first come, first served looks at these, not at every group.
    line: Mutex<HashSet<ObjectRef<WorkflowGroup>>>,
    wake: UnboundedSender<ObjectRef<WorkflowGroup>>,
    /// Object UIDs of Leases deleted by a release, with when.
    released: Mutex<HashMap<String, std::time::Instant>>,
    /// Groups (by UID) that gave back all their locks, with when, by the clock that stamps a
    /// Lease's `acquireTime`: a Lease of theirs acquired before then was deleted with the rest,
    /// though the cache may not have seen it yet (nor, for one created a moment before, its
    /// creation).
    gave_back: Mutex<HashMap<String, (Timestamp, std::time::Instant)>>,
}

/// How soon a group looks again at a lock freed while it looked (not at once: a Lease another
/// group created a moment ago may not be in the cache yet either).
const LOOK_AGAIN: Duration = Duration::from_millis(500);

/// How long a released Lease is remembered: far longer than the cache takes to see it go.
const REMEMBER_RELEASED: Duration = Duration::from_secs(120);

impl Waiters {
    pub fn new(wake: UnboundedSender<ObjectRef<WorkflowGroup>>) -> Self {
        Self {
            waiting: Mutex::default(),
            line: Mutex::default(),
            wake,
            released: Mutex::default(),
            gave_back: Mutex::default(),
        }
    }

    /// Notes whether `group` is in line for locks (from the group watch).
    pub fn in_line(&self, group: &WorkflowGroup, waiting: bool) {
        let mut line = self.line.lock().unwrap_or_else(PoisonError::into_inner);
        let me = ObjectRef::from_obj(group);
        if waiting {
            line.insert(me);
        } else {
            line.remove(&me);
        }
    }

    /// The groups in line for locks.
    pub(super) fn line(&self) -> Vec<ObjectRef<WorkflowGroup>> {
        let line = self.line.lock().unwrap_or_else(PoisonError::into_inner);
        line.iter().cloned().collect()
    }

    /// A group in line (other than `me`) that waits for one of `leases`.
    pub(super) fn in_line_for(
        &self,
        leases: &[String],
        me: &ObjectRef<WorkflowGroup>,
    ) -> Option<ObjectRef<WorkflowGroup>> {
        let waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let line = self.line.lock().unwrap_or_else(PoisonError::into_inner);
        leases
            .iter()
            .filter_map(|lease| waiting.get(lease))
            .flatten()
            .find(|g| *g != me && line.contains(g))
            .cloned()
    }

    /// Notes that the group with `uid` gives back all its locks now (before the delete).
    pub(super) fn giving_back(&self, uid: &str) {
        let Ok(mut gave_back) = self.gave_back.lock() else {
            return;
        };
        let now = std::time::Instant::now();
        gave_back.retain(|_, (_, at)| now.duration_since(*at) < REMEMBER_RELEASED);
        gave_back.insert(uid.to_string(), (Timestamp::now(), now));
    }

    pub(super) fn released(&self, leases: &[Arc<Lease>]) {
        let Ok(mut released) = self.released.lock() else {
            return;
        };
        let now = std::time::Instant::now();
        released.retain(|_, at| now.duration_since(*at) < REMEMBER_RELEASED);
        for uid in leases.iter().filter_map(|l| l.uid()) {
            released.insert(uid, now);
        }
    }

    /// Whether `lease` (as a cache shows it) was deleted by a release: known by its UID, or
    /// acquired by a group before that group gave back all it held.
    pub(super) fn was_released(&self, lease: &Lease) -> bool {
        let uid = lease.metadata.uid.as_deref().unwrap_or_default();
        if self
            .released
            .lock()
            .is_ok_and(|released| released.contains_key(uid))
        {
            return true;
        }
        let acquired = lease.spec.as_ref().and_then(|s| s.acquire_time.as_ref());
        let holder = lease.labels().get(LABEL_LOCK_HOLDER);
        let (Some(acquired), Some(holder)) = (acquired, holder) else {
            return false;
        };
        self.gave_back.lock().is_ok_and(|gave_back| {
            gave_back
                .get(holder)
                .is_some_and(|(when, _)| acquired.0 < *when)
        })
    }

    pub(super) fn wait(&self, group: &WorkflowGroup, leases: &[String]) {
        let Ok(mut waiting) = self.waiting.lock() else {
            return;
        };
        let me = ObjectRef::from_obj(group);
        for lease in leases {
            waiting.entry(lease.clone()).or_default().insert(me.clone());
        }
    }

    /// Puts `group` in line for the Leases `leases`, which it found held, now that it looked:
    /// one deleted since (`gone` says which the cache no longer holds) woke whoever was in line
    /// before it, so it looks again in a moment ([`LOOK_AGAIN`]) instead of at its next look.
    /// Race-free with [`Waiters::freed`]: the cache drops a Lease before its deletion wakes
    /// anyone, so a deletion this line missed is one the cache shows already.
    pub(super) fn wait_for_held(
        &self,
        group: &WorkflowGroup,
        leases: &[String],
        gone: impl Fn(&str) -> bool,
    ) {
        self.wait(group, leases);
        if leases.iter().any(|lease| gone(lease)) {
            let wake = self.wake.clone();
            let me = ObjectRef::from_obj(group);
            tokio::spawn(async move {
                tokio::time::sleep(LOOK_AGAIN).await;
                let _ = wake.unbounded_send(me);
            });
        }
    }

    /// Notes that `group` holds what it waited for: it waits no longer. Left in line, it would
    /// be the group that waited longest when it gives its lock back, and woken for it in place
    /// of the group really waiting next (which then waited for its 10 s look again).
    pub(super) fn took(&self, group: &WorkflowGroup) {
        let Ok(mut waiting) = self.waiting.lock() else {
            return;
        };
        let me = ObjectRef::from_obj(group);
        waiting.retain(|_, waiters| {
            waiters.remove(&me);
            !waiters.is_empty()
        });
    }

    /// Reconciles the group that has waited longest for the Lease `name` (it was deleted): the
    /// one first come, first served lets take it. The others wait on (and look again every 10 s,
    /// updating what they say); waking them all would cost a write of each one's status and
    /// Event per hand-over, for a lock only one of them gets.
    pub fn freed(&self, name: &str, groups: &Store<WorkflowGroup>) {
        let Ok(mut waiting) = self.waiting.lock() else {
            return;
        };
        let Some(waiters) = waiting.get_mut(name) else {
            return;
        };
        // Gone groups leave; the first come of the rest is woken.
        waiters.retain(|g| groups.get(g).is_some());
        let first = waiters
            .iter()
            .filter_map(|g| groups.get(g))
            .min_by_key(|g| arrival(g))
            .map(|g| ObjectRef::from_obj(&*g));
        if let Some(first) = first {
            waiters.remove(&first);
            let _ = self.wake.unbounded_send(first);
        }
        if waiters.is_empty() {
            waiting.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use kube::api::ObjectMeta;

    use super::*;

    fn lease(uid: &str, holder: &str, acquired: Timestamp) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(format!("wfl-{uid}")),
                uid: Some(uid.into()),
                labels: Some(BTreeMap::from([(LABEL_LOCK_HOLDER.into(), holder.into())])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                acquire_time: Some(MicroTime(acquired)),
                ..LeaseSpec::default()
            }),
        }
    }

    fn group(name: &str, created: &str) -> WorkflowGroup {
        let mut group = WorkflowGroup::new(name, crate::api::WorkflowGroupSpec::default());
        group.metadata.namespace = Some("ns".into());
        group.metadata.uid = Some(format!("uid-{name}"));
        group.metadata.creation_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(created.parse().expect("a time")),
        );
        group
    }

    #[test]
    fn a_freed_lock_wakes_the_group_waiting_longest_and_not_one_that_took_it_meanwhile() {
        let (wake, mut woken) = futures::channel::mpsc::unbounded();
        let waiters = Waiters::new(wake);
        let (store, mut writer) = kube::runtime::reflector::store();
        let (first, second) = (
            group("first", "2026-01-01T00:00:00Z"),
            group("second", "2026-01-01T00:00:01Z"),
        );
        for g in [&first, &second] {
            writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(g.clone()));
        }
        let lease = "wfl-a".to_string();
        waiters.wait(&first, std::slice::from_ref(&lease));
        waiters.wait(&second, std::slice::from_ref(&lease));
        // The first took the lock (its look again found it free) and now gives it back.
        waiters.took(&first);
        waiters.freed(&lease, &store);
        let woken = woken.try_recv().expect("a group woken");
        assert_eq!(woken.name, "second");
    }

    #[tokio::test]
    async fn a_group_in_line_for_a_lock_freed_while_it_looked_looks_again_soon() {
        use futures::StreamExt;
        let (wake, mut woken) = futures::channel::mpsc::unbounded();
        let waiters = Waiters::new(wake);
        let me = group("late", "2026-01-01T00:00:00Z");
        let lease = "wfl-a".to_string();
        // Still held: it waits for the deletion to wake it.
        waiters.wait_for_held(&me, std::slice::from_ref(&lease), |_| false);
        tokio::time::sleep(LOOK_AGAIN * 2).await;
        assert!(woken.try_recv().is_err(), "woken though the lock is held");
        // Deleted between its look and its place in line: nobody else will wake it.
        waiters.wait_for_held(&me, std::slice::from_ref(&lease), |_| true);
        let next = tokio::time::timeout(Duration::from_secs(30), woken.next()).await;
        assert_eq!(next.expect("woken in time").expect("open").name, "late");
    }

    #[test]
    fn a_lease_acquired_before_its_group_gave_back_everything_is_gone_whatever_the_cache_shows() {
        let (wake, _woken) = futures::channel::mpsc::unbounded();
        let waiters = Waiters::new(wake);
        // Acquired a moment before the release, not yet in the cache when it was given back.
        let before = lease("l1", "g1", Timestamp::now());
        let other = lease("l2", "g2", Timestamp::now());
        assert!(!waiters.was_released(&before));
        std::thread::sleep(Duration::from_millis(2));
        waiters.giving_back("g1");
        std::thread::sleep(Duration::from_millis(2));
        assert!(waiters.was_released(&before));
        // Another group's, and the group's own taken again afterwards, stand.
        assert!(!waiters.was_released(&other));
        assert!(!waiters.was_released(&lease("l3", "g1", Timestamp::now())));
        // Known by UID too.
        waiters.released(&[Arc::new(other.clone())]);
        assert!(waiters.was_released(&other));
    }
}

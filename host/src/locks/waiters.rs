//! Groups waiting for locks, woken one at a time as locks are freed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::arrival;
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
}

/// How long a released Lease is remembered: far longer than the cache takes to see it go.
const REMEMBER_RELEASED: Duration = Duration::from_secs(120);

impl Waiters {
    pub fn new(wake: UnboundedSender<ObjectRef<WorkflowGroup>>) -> Self {
        Self {
            waiting: Mutex::default(),
            line: Mutex::default(),
            wake,
            released: Mutex::default(),
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

    pub(super) fn was_released(&self, lease: &Lease) -> bool {
        let uid = lease.metadata.uid.as_deref().unwrap_or_default();
        self.released
            .lock()
            .is_ok_and(|released| released.contains_key(uid))
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

//! Locks that keep groups apart: at most one group at a time acts on a target, cluster-wide
//! (or, with `spec.exclusion.scope: Type`, at most N groups of a group type run at once).
//!
//! A lock is a `coordination.k8s.io` Lease in the operator's namespace, named by a hash of
//! what it locks: a target's cluster name and normalised address, or one slot of a group type.
//! It exists only while it is held:
//! - A group takes a lock by creating its Lease. The API server lets one create win, so two
//!   groups (or two operators in a failover) never both hold it.
//! - The holder is the group (`spec.holderIdentity` is `<namespace>/<name>/<uid>`, the label
//!   [`LABEL_LOCK_HOLDER`] its UID), not an operator process. A lock therefore survives
//!   operator restarts, failover and apiserver restarts, and needs no renewals.
//! - A group gives its locks back by deleting its Leases (one delete-collection by that
//!   label, or its one Lease by name): when it finishes and none of its step pods still runs,
//!   between waves, and when it is deleted.
//! - A holder that is gone (deleted, or finished) loses its locks: a group that finds one
//!   takes it over, and the leader's sweeper deletes what is left within the lease time
//!   (`spec.leaseDurationSeconds`, [`LockConfig::lease_duration`]).
//!
//! Waiting groups are served first come, first served: a group takes a free lock only when no
//! older group waits for it too. A group takes all the locks it needs or none (what it took in
//! a failed attempt is given back), so two groups never hold half of each other's targets.
//!
//! A group whose Workflow waits with nothing running (a schedule, an approval, a pause) for
//! longer than [`LockConfig::idle`] gives its locks to the groups waiting for them: it marks the
//! Workflow `spec.awaitingLocks` (no step starts), and once the Workflow has seen that, deletes
//! its Leases. When a step would start, the group gets in line again with its own arrival. A
//! group is in line only while a step of it is ready, so waiting for something else holds no
//! place in line and no lock for longer than that bound.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use tracing::{info, warn};

mod claim;
mod holdings;
mod lease;
pub mod plan;
mod waiters;

pub use self::claim::{
    Claim, HolderId, LockKind, RANGES, by_key, claims, locked_by, locked_in, ranged, target_key,
};
pub use self::holdings::Holdings;
use self::lease::Deleted;
pub use self::lease::{holder_name, release_deleted};
use self::plan::{Arrival, LockMove, Waiting};
pub use self::waiters::Waiters;
use crate::api::{Target, Workflow, WorkflowGroup};
use crate::cached_pod::{CachedPod, CachedPodStatus};
use crate::names;

/// Label on every lock Lease: `target` or `type`.
pub const LABEL_LOCK: &str = "workflow.rxg456.cn/lock";
/// Label with the UID of the group holding a lock Lease.
pub const LABEL_LOCK_HOLDER: &str = "workflow.rxg456.cn/lock-holder";
/// Annotation saying what a lock Lease locks (`<cluster>/<address>`, or `type <type> slot N`).
pub const ANNOTATION_LOCKS: &str = "workflow.rxg456.cn/locks";
/// Annotation naming the group holding a lock Lease (`<namespace>/<name>`).
pub const ANNOTATION_HOLDER: &str = "workflow.rxg456.cn/holder";

/// Where the locks live and how long a gone holder's lock may outlive it.
#[derive(Debug, Clone)]
pub struct LockConfig {
    /// Namespace of the lock Leases (the operator's own).
    pub namespace: String,
    /// The Leases' `leaseDurationSeconds`: the sweeper frees a gone holder's lock within it.
    pub lease_duration: Duration,
    /// How long a group holds locks while nothing of it runs before it gives them to groups
    /// waiting for them.
    pub idle: Duration,
    /// A group that acts on more targets at once than this locks them by range ([`ranged`]);
    /// 0: never (and per-target locks are not checked against ranges).
    pub ranges_above: usize,
}

impl LockConfig {
    /// The Leases `group` takes for `claims` (its target claims, from [`claims`]): one per
    /// target, or, for more targets than [`LockConfig::ranges_above`], one per range.
    pub fn lock_set(&self, group: &WorkflowGroup, claims: Vec<Claim>) -> (Vec<Claim>, bool) {
        let targets = claims.iter().filter(|c| c.kind == LockKind::Target).count();
        if self.ranges_above > 0 && targets > self.ranges_above {
            (ranged(group, &claims), true)
        } else {
            (claims, false)
        }
    }
}

/// What [`Locks::acquire`] got.
#[derive(Debug, PartialEq, Eq)]
pub enum Acquired {
    /// The group holds every lock it needs.
    Held,
    /// It waits; the message names what for and who holds it.
    Waiting(String),
}

/// `(creation time, uid)` of `group`: who came first.
pub fn arrival(group: &WorkflowGroup) -> Arrival {
    (
        group.metadata.creation_timestamp.as_ref().map(|t| t.0),
        group.uid().unwrap_or_default(),
    )
}

/// Most Leases a group creates at once: a large group's creates then run at the client's rate
/// limit (`--kube-api-qps`) rather than one round trip at a time, and the bound keeps it from
/// filling the client's connections and the server's mutating requests in flight (200 by
/// default) for everyone else.
const TAKEN_AT_ONCE: usize = 64;

/// Who holds a lock, as the caches say.
#[derive(Debug)]
enum Holder {
    /// The group asking.
    Me,
    /// A group that exists and has not finished (or whose step pods still run).
    Live(String),
    /// A group that is gone or finished; or a Lease without a holder.
    Gone,
    /// A group in a namespace this operator does not watch: left alone.
    Unknown(String),
}

/// The locks, as the controllers use them: the caches they are judged by and the groups
/// waiting for them.
pub struct Locks {
    client: Client,
    config: LockConfig,
    /// The namespace the operator watches; all when `None`.
    watched: Option<String>,
    leases: Store<Lease>,
    holdings: Arc<Holdings>,
    groups: Store<WorkflowGroup>,
    workflows: Store<Workflow>,
    pods: Store<CachedPod>,
    waiters: Arc<Waiters>,
}

/// The watch caches the locks are judged by.
#[derive(Clone)]
pub struct LockCaches {
    pub leases: Store<Lease>,
    /// The lock Leases by holder, kept by the Lease watch.
    pub holdings: Arc<Holdings>,
    pub groups: Store<WorkflowGroup>,
    pub workflows: Store<Workflow>,
    pub pods: Store<CachedPod>,
}

impl Locks {
    pub fn new(
        client: Client,
        config: LockConfig,
        watched: Option<String>,
        caches: LockCaches,
        waiters: Arc<Waiters>,
    ) -> Self {
        Self {
            client,
            config,
            watched,
            leases: caches.leases,
            holdings: caches.holdings,
            groups: caches.groups,
            workflows: caches.workflows,
            pods: caches.pods,
            waiters,
        }
    }

    fn api(&self) -> Api<Lease> {
        Api::namespaced(self.client.clone(), &self.config.namespace)
    }

    fn cached(&self, name: &str) -> Option<Arc<Lease>> {
        self.leases
            .get(&ObjectRef::new(name).within(&self.config.namespace))
    }

    /// The Lease `name` as the cache has it, unless a release deleted it (the cache may still
    /// list it for a moment).
    fn current(&self, name: &str) -> Option<Arc<Lease>> {
        self.cached(name).filter(|l| !self.waiters.was_released(l))
    }

    /// The Leases the group with `uid` holds, as the cache has them (less those it gave back,
    /// which the cache may still list for a moment).
    pub fn held_by(&self, uid: &str) -> Vec<Arc<Lease>> {
        self.holdings
            .of(uid)
            .iter()
            .filter_map(|name| self.current(name))
            .filter(|l| l.labels().get(LABEL_LOCK_HOLDER).map(String::as_str) == Some(uid))
            .collect()
    }

    /// Whether a step pod of one of `group`'s Workflows has not finished yet (a Workflow fails
    /// at its first failed step, while other steps may still run). Looked up by the pods'
    /// names, not by scanning every pod.
    pub fn steps_running(&self, group: &WorkflowGroup) -> bool {
        let ns = group.namespace().unwrap_or_default();
        group
            .status
            .iter()
            .flat_map(|s| &s.workflows)
            .filter_map(|w| self.workflows.get(&ObjectRef::new(&w.name).within(&ns)))
            .any(|workflow| {
                let uid = workflow.uid().unwrap_or_default();
                names::step_pod_names(&workflow).any(|name| {
                    self.pods
                        .get(&ObjectRef::new(&name).within(&ns))
                        .is_some_and(|pod| running_step_of(&pod, &uid))
                })
            })
    }

    fn holder_of(&self, lease: &Lease, me: Option<&str>) -> Holder {
        let identity = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref());
        let Some(holder) = identity.and_then(HolderId::parse) else {
            return Holder::Gone;
        };
        if me == Some(holder.uid.as_str()) {
            return Holder::Me;
        }
        if self
            .watched
            .as_deref()
            .is_some_and(|w| w != holder.namespace)
        {
            return Holder::Unknown(holder.shown());
        }
        let key = ObjectRef::new(&holder.name).within(&holder.namespace);
        match self.groups.get(&key) {
            Some(group) if group.uid().as_deref() == Some(holder.uid.as_str()) => {
                let finished = group
                    .status
                    .as_ref()
                    .and_then(|s| s.phase)
                    .is_some_and(|p| p.is_finished());
                if finished && !self.steps_running(&group) {
                    Holder::Gone
                } else {
                    Holder::Live(holder.shown())
                }
            }
            _ => Holder::Gone,
        }
    }

    /// Takes every lock `group` needs to act on `targets`, or none. `waiting_for` says which
    /// targets another group waits for (its current wave's), `None` when it does not wait.
    ///
    /// # Errors
    /// The API server failed otherwise than by refusing a taken lock.
    pub async fn acquire(
        &self,
        group: &WorkflowGroup,
        targets: &[Target],
        waiting_for: impl Fn(&WorkflowGroup) -> Option<&[Target]>,
    ) -> kube::Result<Acquired> {
        let uid = group.uid().unwrap_or_default();
        let per_target = claims(group, targets);
        let (claims, ranged) = self.config.lock_set(group, per_target.clone());
        let held = self.held_for(&uid, &claims);
        let me = arrival(group);
        let plan = plan::decide(&claims, &held, &me, || self.waiting(group, &waiting_for));
        if plan.release_first {
            self.release(&uid).await?;
        }
        let held = if plan.release_first {
            BTreeSet::new()
        } else {
            held
        };
        let take = match plan.next {
            LockMove::Held => {
                self.waiters.took(group);
                return Ok(Acquired::Held);
            }
            LockMove::WaitBehind { older, claims } => {
                let leases: Vec<String> = claims.iter().flat_map(|c| c.leases.clone()).collect();
                self.waiters.wait(group, &leases);
                let holders = leases
                    .iter()
                    .filter_map(|l| self.cached(l))
                    .map(|l| lease::holder_name(&l))
                    .collect();
                return Ok(Acquired::Waiting(plan::waiting_behind(
                    &claims, &older, holders,
                )));
            }
            LockMove::Take(claims) => claims,
        };

        let api = self.api();
        let mut taken = 0;
        let mut blocked: BTreeMap<String, Vec<&Claim>> = BTreeMap::new();
        let mut wait_for: Vec<String> = Vec::new();
        // What the cache already shows held by a live group is not tried: all or nothing then
        // costs no write (a create of each free Lease, and a delete of them all).
        for claim in &take {
            if let Some(holder) = self.visibly_held(claim, &uid) {
                blocked.entry(holder).or_default().push(claim);
                wait_for.extend(claim.leases.iter().cloned());
            }
        }
        let take = if blocked.is_empty() { take } else { Vec::new() };
        // A batch at a time, in the claims' order: a large group takes its thousands of
        // Leases in a few round trips' time, and two groups after the same locks still meet
        // at the first batch they share, where one of them stops.
        for batch in take.chunks(TAKEN_AT_ONCE) {
            let tries = batch.iter().map(|claim| self.take_one(&api, group, claim));
            let results = futures::future::join_all(tries).await;
            for (claim, result) in batch.iter().zip(results) {
                match result {
                    Ok(None) => taken += 1,
                    Ok(Some(holders)) => {
                        blocked.entry(holders).or_default().push(claim);
                        wait_for.extend(claim.leases.iter().cloned());
                    }
                    Err(error) => {
                        // Half taken is given back here too; the next reconcile starts over.
                        if let Err(release) = self.release(&uid).await {
                            warn!(error = %release, "could not give back locks after a failed take");
                        }
                        return Err(error);
                    }
                }
            }
            // All or nothing: no point taking more.
            if !blocked.is_empty() {
                break;
            }
        }
        if blocked.is_empty() && self.config.ranges_above > 0 {
            // Per-target and range Leases of the same target have different names: each side
            // looks for the other's after taking its own, in the API server (not the cache).
            // Whichever of two groups looks second sees the first, so they never both go on.
            let crossing = self.crossing(&api, &uid, &per_target, ranged).await;
            let crossing = match crossing {
                Ok(crossing) => crossing,
                Err(error) => {
                    if let Err(release) = self.release(&uid).await {
                        warn!(error = %release, "could not give back locks after a failed look");
                    }
                    return Err(error);
                }
            };
            for (holder, claim, lease) in crossing {
                blocked.entry(holder).or_default().push(claim);
                wait_for.push(lease);
            }
        }
        if blocked.is_empty() {
            self.waiters.took(group);
            info!(locks = taken, ranged, "took locks");
            return Ok(Acquired::Held);
        }
        // What it holds goes back (taken now, or before a crash), so that no group holds half
        // of what it needs while it waits.
        if taken > 0 || !held.is_empty() {
            self.release(&uid).await?;
        }
        self.waiters
            .wait_for_held(group, &wait_for, |lease| self.current(lease).is_none());
        Ok(Acquired::Waiting(plan::waiting_for_held(&blocked)))
    }

    /// The Leases the group with `uid` holds, by name, as far as they serve `claims`: a range
    /// Lease that locks other targets than its claim (an earlier wave's) does not count as the
    /// same lock and is given back first.
    fn held_for(&self, uid: &str, claims: &[Claim]) -> BTreeSet<String> {
        let ranges: BTreeMap<&str, &str> = claims
            .iter()
            .filter(|c| c.kind == LockKind::Range)
            .flat_map(|c| c.leases.iter().map(|l| (l.as_str(), c.key.as_str())))
            .collect();
        self.held_by(uid)
            .iter()
            .map(|lease| {
                let name = lease.name_any();
                let locks = lease.annotations().get(ANNOTATION_LOCKS);
                let is_range = lease.labels().get(LABEL_LOCK).map(String::as_str)
                    == Some(LockKind::Range.as_str());
                if is_range && ranges.get(name.as_str()).copied() != locks.map(String::as_str) {
                    format!("{name} (other targets)")
                } else {
                    name
                }
            })
            .collect()
    }

    /// Who holds every Lease of `claim`, when the cache shows them all held by live groups
    /// other than the one with `uid`; `None` when one may be had.
    fn visibly_held(&self, claim: &Claim, uid: &str) -> Option<String> {
        let mut holders = Vec::new();
        for name in &claim.leases {
            let lease = self.current(name)?;
            match self.holder_of(&lease, Some(uid)) {
                Holder::Live(who) | Holder::Unknown(who) => holders.push(who),
                Holder::Me | Holder::Gone => return None,
            }
        }
        holders.sort();
        holders.dedup();
        Some(holders.join(", "))
    }

    /// The live groups other than the one with `uid` whose Leases of the other kind lock one
    /// of `mine` (target claims): range Leases when it took per-target ones, per-target ones
    /// when it took ranges. For each: who, which claim, the Lease to wait for. Read from the
    /// API server: a Lease created a moment ago is not in the cache yet.
    async fn crossing<'a>(
        &self,
        api: &Api<Lease>,
        uid: &str,
        mine: &'a [Claim],
        ranged: bool,
    ) -> kube::Result<Vec<(String, &'a Claim, String)>> {
        if !mine.iter().any(|c| c.kind == LockKind::Target) {
            return Ok(Vec::new());
        }
        let other = if ranged {
            LockKind::Target
        } else {
            LockKind::Range
        };
        let selector = format!("{LABEL_LOCK}={}", other.as_str());
        let listed = api.list(&ListParams::default().labels(&selector)).await?;
        // Indexed once: a ranged group may meet thousands of per-target Leases.
        let mine_by_key = by_key(mine);
        let mut found = Vec::new();
        for lease in &listed.items {
            let locks = lease.annotations().get(ANNOTATION_LOCKS);
            let hits = locked_in(&mine_by_key, locks.map_or("", String::as_str));
            if hits.is_empty() {
                continue;
            }
            if let Holder::Live(who) | Holder::Unknown(who) = self.holder_of(lease, Some(uid)) {
                for claim in hits {
                    found.push((who.clone(), claim, lease.name_any()));
                }
            }
        }
        Ok(found)
    }

    /// The other groups that wait for locks, with the Leases each waits for.
    fn waiting(
        &self,
        group: &WorkflowGroup,
        waiting_for: &impl Fn(&WorkflowGroup) -> Option<&[Target]>,
    ) -> Vec<Waiting> {
        self.waiters
            .line()
            .iter()
            .filter_map(|other| self.groups.get(other))
            .filter(|other| other.uid() != group.uid())
            .filter_map(|other| {
                let other = &*other;
                let targets = waiting_for(other)?;
                let (claims, _) = self.config.lock_set(other, claims(other, targets));
                Some(Waiting {
                    shown: HolderId::of(other).shown(),
                    arrival: arrival(other),
                    leases: claims
                        .into_iter()
                        .flat_map(|c| c.leases.into_iter().chain(c.covers))
                        .collect(),
                })
            })
            .collect()
    }

    /// Takes the first Lease of `claim` that can be had for `group`; none taken: who holds
    /// them (for people).
    async fn take_one(
        &self,
        api: &Api<Lease>,
        group: &WorkflowGroup,
        claim: &Claim,
    ) -> kube::Result<Option<String>> {
        let mut holders = Vec::new();
        for name in &claim.leases {
            match self.take(api, group, claim, name).await? {
                Taken::Yes => return Ok(None),
                Taken::HeldBy(holder) => holders.push(holder),
            }
        }
        holders.sort();
        holders.dedup();
        Ok(Some(holders.join(", ")))
    }

    /// Takes the Lease `name` for `group`: creates it, or replaces a gone holder's.
    async fn take(
        &self,
        api: &Api<Lease>,
        group: &WorkflowGroup,
        claim: &Claim,
        name: &str,
    ) -> kube::Result<Taken> {
        let uid = group.uid().unwrap_or_default();
        if let Some(lease) = self.current(name).map(|l| (*l).clone()) {
            match self.holder_of(&lease, Some(&uid)) {
                Holder::Me => return Ok(Taken::Yes),
                Holder::Live(who) | Holder::Unknown(who) => return Ok(Taken::HeldBy(who)),
                Holder::Gone => {
                    // Deleted only as it was seen: a Lease taken since stays.
                    // Gone already (given back by its holder): it is free, as if not cached.
                    match lease::delete_exact(api, &lease).await? {
                        Deleted::Changed => return Ok(Taken::HeldBy(lease::holder_name(&lease))),
                        Deleted::Now | Deleted::Already => {}
                    }
                    info!(lease = name, holder = %lease::holder_name(&lease), "took over the lock of a gone group");
                }
            }
        }
        let new = lease::new_lease(&self.config, group, claim, name);
        if lease::create(api, &new).await? {
            return Ok(Taken::Yes);
        }
        // Taken a moment ago: whose, from the API server (the cache may not have it yet).
        let who = match api.get_opt(name).await? {
            Some(lease) => match self.holder_of(&lease, Some(&uid)) {
                Holder::Me => return Ok(Taken::Yes),
                _ => lease::holder_name(&lease),
            },
            None => "another group".into(),
        };
        Ok(Taken::HeldBy(who))
    }

    /// The lock configuration.
    pub fn config(&self) -> &LockConfig {
        &self.config
    }

    /// A group other than `group` that is in line for a lock `group` holds: one it gives way
    /// to when it has held them idle for too long.
    pub fn waited_for_by(&self, group: &WorkflowGroup) -> Option<String> {
        let uid = group.uid().unwrap_or_default();
        let held: Vec<String> = self.held_by(&uid).iter().map(|l| l.name_any()).collect();
        let other = self
            .waiters
            .in_line_for(&held, &ObjectRef::from_obj(group))?;
        Some(match other.namespace {
            Some(ns) => format!("{ns}/{}", other.name),
            None => other.name,
        })
    }

    /// Gives back every lock the group with `uid` holds.
    ///
    /// # Errors
    /// The API server refused the delete.
    pub async fn release(&self, uid: &str) -> kube::Result<()> {
        self.give_back(uid, false).await
    }

    /// Gives back every lock the group with `uid` holds, all of them taken in an earlier
    /// reconcile (its Workflows ran with them): as [`Locks::release`], but when the cache
    /// shows it holding one Lease, that Lease is deleted by name. A delete-collection first
    /// lists, and the API server serves that list only once its watch cache is as fresh as
    /// etcd: 40 ms a request under load, where a Lease create takes 5, and this delete is what
    /// a group in line waits for. A Lease taken long enough ago is in the cache; if one were
    /// not (a watch reconnecting), it is not lost: its holder has finished, so a group in line
    /// takes it over as any Lease of a gone holder, and the sweeper deletes it.
    ///
    /// # Errors
    /// The API server refused the delete.
    pub async fn release_taken(&self, uid: &str) -> kube::Result<()> {
        self.give_back(uid, true).await
    }

    /// Deletes the Leases of the group with `uid`: one delete-collection by its holder label,
    /// or, when `one_by_name` and the cache shows it holding exactly one, that one by name
    /// (still by label if it changed since it was cached).
    async fn give_back(&self, uid: &str, one_by_name: bool) -> kube::Result<()> {
        let held = self.held_by(uid);
        // Before the delete: every Lease of the group acquired until now goes with it, those
        // the cache has not shown yet too.
        self.waiters.giving_back(uid);
        let by_name = match held.as_slice() {
            [lease] if one_by_name => {
                lease::delete_exact(&self.api(), lease).await? != Deleted::Changed
            }
            _ => false,
        };
        if by_name {
            info!(holder = uid, "gave back its lock");
        } else {
            lease::delete_held(&self.api(), uid).await?;
        }
        self.waiters.released(&held);
        Ok(())
    }

    /// The leader's sweeper: every third of the lease time, deletes the lock Leases whose
    /// holder is gone (deleted, or finished with no step pod running), so that none outlives
    /// its holder by more than the lease time, whatever happened to the operator meanwhile.
    /// To be started once the group cache is complete (an empty cache would make every holder
    /// look gone).
    pub async fn sweep(&self) {
        let every = self.config.lease_duration / 3;
        let api = self.api();
        loop {
            tokio::time::sleep(every.max(Duration::from_secs(1))).await;
            for held in self.leases.state() {
                if !matches!(self.holder_of(&held, None), Holder::Gone) {
                    continue;
                }
                match lease::delete_exact(&api, &held).await {
                    Ok(Deleted::Now) => {
                        info!(lease = %held.name_any(), holder = %lease::holder_name(&held), "freed the lock of a gone group");
                    }
                    Ok(Deleted::Already | Deleted::Changed) => {}
                    Err(error) => warn!(%error, lease = %held.name_any(), "could not free a lock"),
                }
            }
        }
    }
}

enum Taken {
    Yes,
    HeldBy(String),
}

/// Whether `pod` is a step pod of the Workflow with `uid` that has not finished: one the
/// operator made (a pod someone else made under its name holds no lock).
fn running_step_of(pod: &CachedPod, uid: &str) -> bool {
    let ours = pod.made_for(uid);
    let finished = pod.status.as_ref().is_some_and(CachedPodStatus::finished);
    ours && !finished
}

#[cfg(test)]
mod tests {
    use super::plan::listed;
    use super::*;
    use crate::api::{Exclusion, ExclusionScope, WorkflowGroupSpec};
    use crate::names::lease_name;

    fn group(scope: ExclusionScope, max: Option<u32>) -> WorkflowGroup {
        let mut g = WorkflowGroup::new(
            "g",
            WorkflowGroupSpec {
                type_: "cluster-expansion".into(),
                cluster_name: "test-cluster".into(),
                exclusion: Some(Exclusion {
                    scope,
                    max_concurrent: max,
                }),
                ..WorkflowGroupSpec::default()
            },
        );
        g.metadata.namespace = Some("ns".into());
        g.metadata.uid = Some("u-1".into());
        g
    }

    fn target(name: &str, ip: &str) -> Target {
        Target {
            name: name.into(),
            ip: ip.into(),
            role: String::new(),
        }
    }

    #[test]
    fn a_target_is_its_cluster_and_normalised_address() {
        assert_eq!(target_key("c", " 10.0.0.1 "), "c/10.0.0.1");
        assert_eq!(target_key("c", "2001:DB8:0:0::1"), "c/2001:db8::1");
        assert_eq!(target_key("c", "::ffff:10.0.0.1"), "c/10.0.0.1");
        assert_ne!(
            lease_name("target", &target_key("a", "10.0.0.1")),
            lease_name("target", &target_key("b", "10.0.0.1"))
        );
        assert_eq!(
            lease_name("target", &target_key("c", "2001:db8::1")),
            lease_name("target", &target_key("c", "2001:0db8::0001"))
        );
        let name = lease_name("target", "c/10.0.0.1");
        assert_eq!(name.len(), 28);
        assert!(name.starts_with("wfl-"));
    }

    #[test]
    fn claims_follow_the_scope() {
        let targets = [
            target("n1", "10.0.0.1"),
            target("n2", "10.0.0.2"),
            target("n1-again", "10.0.0.1"),
        ];
        let by_target = claims(&group(ExclusionScope::Target, None), &targets);
        // One claim per distinct target.
        assert_eq!(by_target.len(), 2);
        assert!(
            by_target
                .iter()
                .all(|c| c.leases.len() == 1 && c.kind == LockKind::Target)
        );
        assert!(claims(&group(ExclusionScope::None, None), &targets).is_empty());
        let by_type = claims(&group(ExclusionScope::Type, Some(3)), &targets);
        assert_eq!(by_type.len(), 1);
        assert_eq!(by_type[0].leases.len(), 3);
        assert!(by_type[0].what.contains("cluster-expansion"));
        // Without spec.exclusion: per target.
        let mut plain = group(ExclusionScope::None, None);
        plain.spec.exclusion = None;
        assert_eq!(claims(&plain, &targets).len(), 2);
    }

    fn config(ranges_above: usize) -> LockConfig {
        LockConfig {
            namespace: "locks".into(),
            lease_duration: Duration::from_secs(30),
            idle: Duration::from_secs(60),
            ranges_above,
        }
    }

    #[test]
    fn a_large_group_locks_by_range_and_each_range_lists_exactly_its_targets() {
        let targets: Vec<Target> = (0..600)
            .map(|i| target(&format!("n{i}"), &format!("10.0.{}.{}", i / 250, i % 250)))
            .collect();
        let g = group(ExclusionScope::Target, None);
        let per_target = claims(&g, &targets);
        let (small, ranged) = config(600).lock_set(&g, per_target.clone());
        assert!(!ranged);
        assert_eq!(small, per_target);
        let (never, ranged) = config(0).lock_set(&g, per_target.clone());
        assert!(!ranged && never.len() == 600);

        let (ranges, ranged) = config(256).lock_set(&g, per_target.clone());
        assert!(ranged);
        assert!(
            ranges.len() <= RANGES && ranges.len() > 200,
            "{}",
            ranges.len()
        );
        let mut covered = 0;
        for range in &ranges {
            assert_eq!(range.kind, LockKind::Range);
            assert_eq!(range.leases.len(), 1);
            // The Lease lists the targets it locks, and they are those it stands for.
            let locked = locked_by(&per_target, &range.key);
            let leases: Vec<String> = locked.iter().map(|c| c.leases[0].clone()).collect();
            assert_eq!(leases, range.covers);
            assert_eq!(range.key.lines().count(), range.covers.len());
            covered += range.covers.len();
        }
        assert_eq!(covered, 600, "every target in exactly one range");
        // The same target in another cluster is in another range Lease.
        let mut other = g.clone();
        other.spec.cluster_name = "another-cluster".into();
        let (theirs, _) = config(256).lock_set(&other, claims(&other, &targets));
        assert!(
            theirs
                .iter()
                .all(|t| ranges.iter().all(|r| r.leases != t.leases))
        );
        // A small group's target is found in the range that covers it, and only there.
        let one = claims(&g, &targets[17..18]);
        let hits: Vec<&Claim> = ranges
            .iter()
            .filter(|r| !locked_by(&one, &r.key).is_empty())
            .collect();
        assert_eq!(hits.len(), 1);
        assert!(hits[0].covers.contains(&one[0].leases[0]));
        // Shown as the targets they stand for.
        let all: Vec<&Claim> = ranges.iter().collect();
        assert!(
            listed(&all).ends_with(&format!(" and {} more", 600 - 5)),
            "{}",
            listed(&all)
        );
    }

    #[test]
    fn waiting_messages_name_the_targets() {
        let targets: Vec<Target> = (1..=7)
            .map(|i| target(&format!("n{i}"), &format!("10.0.0.{i}")))
            .collect();
        let claims = claims(&group(ExclusionScope::Target, None), &targets);
        let one: Vec<&Claim> = claims.iter().take(1).collect();
        assert_eq!(listed(&one), "target n1 (10.0.0.1)");
        let all: Vec<&Claim> = claims.iter().collect();
        assert!(listed(&all).starts_with("targets n1 (10.0.0.1), n2 (10.0.0.2)"));
        assert!(listed(&all).ends_with(" and 2 more"));
    }
}

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
//!   label): when it finishes and none of its step pods still runs, between waves, and when
//!   it is deleted.
//! - A holder that is gone (deleted, or finished) loses its locks: a group that finds one
//!   takes it over, and the leader's sweeper deletes what is left within the lease time
//!   (`spec.leaseDurationSeconds`, [`LockConfig::lease_duration`]).
//!
//! Waiting groups are served first come, first served: a group takes a free lock only when no
//! older group waits for it too. A group takes all the locks it needs or none (what it took in
//! a failed attempt is given back), so two groups never hold half of each other's targets.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use super::context::Context;
use super::error::{Error, Result};
use super::status::succeeded;
use crate::api::{ExclusionScope, Target, Workflow, WorkflowGroup};
use crate::controllers::reason;

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
}

/// One thing a group must hold to act: one of `leases` (a target has one; a group type's
/// limit has one per slot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The Lease names that satisfy it, any one of them.
    pub leases: Vec<String>,
    /// What it is, for people (`node-1 (192.168.1.101)`, `a slot of type cluster-expansion`).
    pub what: String,
    /// What the Lease's annotation says it locks.
    pub key: String,
    /// `target` or `type`.
    pub kind: &'static str,
}

/// A target's identity for locking: its cluster name and its address, normalised (an IPv6
/// address in its canonical form, an IPv4-mapped one as IPv4).
pub fn target_key(cluster_name: &str, ip: &str) -> String {
    let ip = ip.trim().parse::<IpAddr>().map_or_else(
        |_| ip.trim().to_ascii_lowercase(),
        |a| a.to_canonical().to_string(),
    );
    format!("{}/{ip}", cluster_name.trim())
}

/// The name of the Lease locking `key`: `wfl-` and 24 hex digits of its sha256.
pub fn lease_name(kind: &str, key: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(kind.as_bytes());
    hasher.update([0]);
    hasher.update(key.as_bytes());
    format!("wfl-{}", &hex::encode(hasher.finalize())[..24])
}

/// What `group` must hold to act on `targets` (the targets of the Workflow it is about to
/// create: all of them, or one wave's).
pub fn claims(group: &WorkflowGroup, targets: &[Target]) -> Vec<Claim> {
    let exclusion = group.spec.exclusion.clone().unwrap_or_default();
    match exclusion.scope {
        ExclusionScope::None => Vec::new(),
        ExclusionScope::Target => {
            let keyed: BTreeMap<String, &Target> = targets
                .iter()
                .map(|t| (target_key(&group.spec.cluster_name, &t.ip), t))
                .collect();
            keyed
                .into_iter()
                .map(|(key, t)| Claim {
                    leases: vec![lease_name("target", &key)],
                    what: format!("{} ({})", t.name, t.ip),
                    key,
                    kind: "target",
                })
                .collect()
        }
        ExclusionScope::Type => {
            let slots = exclusion.max_concurrent.unwrap_or(1).max(1);
            let type_ = group.spec.type_.trim();
            let key = format!("type {type_}");
            vec![Claim {
                leases: (0..slots)
                    .map(|i| lease_name("type", &format!("{type_}/{i}")))
                    .collect(),
                what: format!("one of the {slots} running slots of group type {type_:?}"),
                key,
                kind: "type",
            }]
        }
    }
}

/// `<namespace>/<name>/<uid>` of `group`: a lock's holder.
pub fn holder_identity(group: &WorkflowGroup) -> String {
    format!(
        "{}/{}/{}",
        group.namespace().unwrap_or_default(),
        group.name_any(),
        group.uid().unwrap_or_default()
    )
}

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

fn holder_of(lease: &Lease, me: Option<&str>, ctx: &Context) -> Holder {
    let identity = lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default();
    let mut parts = identity.splitn(3, '/');
    let (Some(ns), Some(name), Some(uid)) = (parts.next(), parts.next(), parts.next()) else {
        return Holder::Gone;
    };
    if me == Some(uid) {
        return Holder::Me;
    }
    let shown = format!("{ns}/{name}");
    if ctx.config.namespace.as_deref().is_some_and(|w| w != ns) {
        return Holder::Unknown(shown);
    }
    match ctx.groups.get(&ObjectRef::new(name).within(ns)) {
        Some(group) if group.uid().as_deref() == Some(uid) => {
            let finished = group
                .status
                .as_ref()
                .and_then(|s| s.phase)
                .is_some_and(|p| p.is_finished());
            if finished && !steps_running(&group, ctx) {
                Holder::Gone
            } else {
                Holder::Live(shown)
            }
        }
        _ => Holder::Gone,
    }
}

/// Whether a step pod of one of `group`'s Workflows has not finished yet (a Workflow fails
/// at its first failed step, while other steps may still run).
pub fn steps_running(group: &WorkflowGroup, ctx: &Context) -> bool {
    let ns = group.namespace().unwrap_or_default();
    let uids: HashSet<String> = group
        .status
        .iter()
        .flat_map(|s| &s.workflows)
        .filter_map(|w| {
            ctx.workflows
                .get(&ObjectRef::<Workflow>::new(&w.name).within(&ns))
        })
        .filter_map(|w| w.uid())
        .collect();
    if uids.is_empty() {
        return false;
    }
    ctx.pods.state().iter().any(|pod| {
        let ours = pod
            .owner_references()
            .iter()
            .any(|r| r.controller == Some(true) && uids.contains(&r.uid));
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        ours && !finished
    })
}

/// The Leases `uid` holds, as the cache has them (less those it gave back, which the cache may
/// still list for a moment).
pub fn held_by(ctx: &Context, uid: &str) -> Vec<Arc<Lease>> {
    ctx.leases
        .state()
        .into_iter()
        .filter(|l| l.labels().get(LABEL_LOCK_HOLDER).map(String::as_str) == Some(uid))
        .filter(|l| !ctx.lock_waiters.was_released(l))
        .collect()
}

/// What [`acquire`] got.
#[derive(Debug, PartialEq, Eq)]
pub enum Acquired {
    /// The group holds every lock it needs.
    Held,
    /// It waits; the message names what for and who holds it.
    Waiting(String),
}

/// Whether `group` waits in line for locks (its condition says so).
pub fn waits_for_locks(group: &WorkflowGroup) -> bool {
    let status = group.status.as_ref();
    !status
        .and_then(|s| s.phase)
        .is_some_and(|p| p.is_finished())
        && status
            .and_then(|s| succeeded(&s.conditions))
            .is_some_and(|c| c.reason == reason::WAITING_FOR_TARGETS)
}

/// `(creation time, uid)`: who came first.
fn arrival(group: &WorkflowGroup) -> (Option<Timestamp>, String) {
    (
        group.metadata.creation_timestamp.as_ref().map(|t| t.0),
        group.uid().unwrap_or_default(),
    )
}

/// Takes every lock `group` needs to act on `targets`, or none. `waiting_targets` says which
/// targets another waiting group waits for (its current wave's).
///
/// # Errors
/// The API server failed otherwise than by refusing a taken lock.
pub async fn acquire(
    ctx: &Context,
    group: &WorkflowGroup,
    targets: &[Target],
    waiting_targets: impl Fn(&WorkflowGroup) -> &[Target],
) -> Result<Acquired> {
    let uid = group.uid().unwrap_or_default();
    let claims = claims(group, targets);
    let wanted: BTreeSet<&String> = claims.iter().flat_map(|c| &c.leases).collect();
    let cached = held_by(ctx, &uid);
    // Locks of an earlier wave (or of changed targets or scope) are given back first, and with
    // them all (the cache still lists them for a moment).
    let held: BTreeSet<String> = if cached.iter().any(|l| !wanted.contains(&l.name_any())) {
        release(ctx, &uid).await?;
        BTreeSet::new()
    } else {
        cached.iter().map(|l| l.name_any()).collect()
    };
    if claims.is_empty() {
        return Ok(Acquired::Held);
    }
    if claims
        .iter()
        .all(|c| c.leases.iter().any(|l| held.contains(l)))
    {
        return Ok(Acquired::Held);
    }

    // First come, first served: an older group waiting for one of these goes first.
    let me = arrival(group);
    let mut before: BTreeMap<String, Vec<&Claim>> = BTreeMap::new();
    for other in ctx.groups.state() {
        if other.uid() == group.uid() || !waits_for_locks(&other) || arrival(&other) >= me {
            continue;
        }
        let theirs: BTreeSet<String> = claims_of(&other, waiting_targets(&other));
        for claim in &claims {
            if claim.leases.iter().any(|l| theirs.contains(l)) {
                let shown = format!(
                    "{}/{}",
                    other.namespace().unwrap_or_default(),
                    other.name_any()
                );
                before.entry(shown).or_default().push(claim);
            }
        }
    }
    if let Some((older, claims)) = before.into_iter().next() {
        let leases: Vec<String> = claims.iter().flat_map(|c| c.leases.clone()).collect();
        ctx.lock_waiters.wait(group, &leases);
        let mut holders: Vec<String> = leases
            .iter()
            .filter_map(|l| ctx.leases.get(&ObjectRef::new(l).within(api_ns(ctx))))
            .map(|l| holder_name(&l))
            .collect();
        holders.sort();
        holders.dedup();
        let (verb, it) = if claims.len() == 1 {
            ("is", "it")
        } else {
            ("are", "them")
        };
        let state = if holders.is_empty() {
            format!("{verb} free")
        } else {
            format!("{verb} held by group {}", holders.join(", "))
        };
        return Ok(Acquired::Waiting(format!(
            "waiting: {} {state}, and group {older} came first and waits for {it} too",
            listed(&claims),
        )));
    }

    let api: Api<Lease> = Api::namespaced(ctx.client.clone(), &ctx.config.locks.namespace);
    let mut taken = Vec::new();
    let mut blocked: BTreeMap<String, Vec<&Claim>> = BTreeMap::new();
    for claim in &claims {
        if claim.leases.iter().any(|l| held.contains(l)) {
            continue;
        }
        let mut holders = Vec::new();
        let mut got = false;
        for name in &claim.leases {
            match take(ctx, &api, group, claim, name).await? {
                Taken::Yes => {
                    taken.push(name.clone());
                    got = true;
                    break;
                }
                Taken::HeldBy(holder) => holders.push(holder),
            }
        }
        if !got {
            holders.sort();
            holders.dedup();
            blocked.entry(holders.join(", ")).or_default().push(claim);
            // All or nothing: no point taking more.
            break;
        }
    }
    if blocked.is_empty() {
        info!(locks = taken.len(), "took locks");
        return Ok(Acquired::Held);
    }
    // What it holds goes back (taken now, or before a crash), so that no group holds half of
    // what it needs while it waits.
    if !taken.is_empty() || !held.is_empty() {
        release(ctx, &uid).await?;
    }
    let leases: Vec<String> = blocked
        .values()
        .flatten()
        .flat_map(|c| c.leases.clone())
        .collect();
    ctx.lock_waiters.wait(group, &leases);
    let message = blocked
        .into_iter()
        .map(|(holders, claims)| {
            let verb = if claims.len() == 1 { "is" } else { "are" };
            format!("{} {verb} held by group {holders}", listed(&claims))
        })
        .collect::<Vec<_>>()
        .join("; ");
    Ok(Acquired::Waiting(format!("waiting: {message}")))
}

fn claims_of(group: &WorkflowGroup, targets: &[Target]) -> BTreeSet<String> {
    claims(group, targets)
        .into_iter()
        .flat_map(|c| c.leases)
        .collect()
}

/// `target node-1 (…)`, `targets node-1 (…), node-2 (…) and 3 more`.
fn listed(claims: &[&Claim]) -> String {
    const SHOWN: usize = 5;
    let kind = claims.first().map_or("target", |c| c.kind);
    if kind == "type" {
        return claims.first().map(|c| c.what.clone()).unwrap_or_default();
    }
    let names: Vec<&str> = claims.iter().take(SHOWN).map(|c| c.what.as_str()).collect();
    let more = claims.len().saturating_sub(SHOWN);
    let s = if claims.len() == 1 { "" } else { "s" };
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!("target{s} {}{tail}", names.join(", "))
}

enum Taken {
    Yes,
    HeldBy(String),
}

/// Takes the Lease `name` for `group`: creates it, or replaces a gone holder's.
async fn take(
    ctx: &Context,
    api: &Api<Lease>,
    group: &WorkflowGroup,
    claim: &Claim,
    name: &str,
) -> Result<Taken> {
    let uid = group.uid().unwrap_or_default();
    let cached = ctx.leases.get(&ObjectRef::new(name).within(api_ns(ctx)));
    if let Some(lease) = cached.map(|l| (*l).clone()) {
        match holder_of(&lease, Some(&uid), ctx) {
            Holder::Me => return Ok(Taken::Yes),
            Holder::Live(who) | Holder::Unknown(who) => return Ok(Taken::HeldBy(who)),
            Holder::Gone => {
                // Deleted only as it was seen: a Lease taken since stays.
                if !delete_exact(api, &lease).await? {
                    return Ok(Taken::HeldBy(holder_name(&lease)));
                }
                info!(lease = name, holder = %holder_name(&lease), "took over the lock of a gone group");
            }
        }
    }
    let lease = new_lease(ctx, group, claim, name);
    match api.create(&PostParams::default(), &lease).await {
        Ok(_) => Ok(Taken::Yes),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            // Taken a moment ago: whose, from the API server (the cache may not have it yet).
            let who = match api.get_opt(name).await.map_err(Error::Kube)? {
                Some(lease) => match holder_of(&lease, Some(&uid), ctx) {
                    Holder::Me => return Ok(Taken::Yes),
                    _ => holder_name(&lease),
                },
                None => "another group".into(),
            };
            Ok(Taken::HeldBy(who))
        }
        Err(e) => Err(Error::Kube(e)),
    }
}

fn api_ns(ctx: &Context) -> &str {
    &ctx.config.locks.namespace
}

fn holder_name(lease: &Lease) -> String {
    lease
        .annotations()
        .get(ANNOTATION_HOLDER)
        .cloned()
        .unwrap_or_else(|| "another group".into())
}

fn new_lease(ctx: &Context, group: &WorkflowGroup, claim: &Claim, name: &str) -> Lease {
    let now = MicroTime(Timestamp::now());
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(api_ns(ctx).to_string()),
            labels: Some(BTreeMap::from([
                (LABEL_LOCK.to_string(), claim.kind.to_string()),
                (
                    LABEL_LOCK_HOLDER.to_string(),
                    group.uid().unwrap_or_default(),
                ),
            ])),
            annotations: Some(BTreeMap::from([
                (ANNOTATION_LOCKS.to_string(), claim.key.clone()),
                (
                    ANNOTATION_HOLDER.to_string(),
                    format!(
                        "{}/{}",
                        group.namespace().unwrap_or_default(),
                        group.name_any()
                    ),
                ),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder_identity(group)),
            lease_duration_seconds: i32::try_from(ctx.config.locks.lease_duration.as_secs()).ok(),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..LeaseSpec::default()
        }),
    }
}

/// Deletes `lease` if it is still the object seen (same UID and resourceVersion); false when
/// it changed or is gone.
async fn delete_exact(api: &Api<Lease>, lease: &Lease) -> Result<bool> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: lease.uid(),
            resource_version: lease.resource_version(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&lease.name_any(), &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(false),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// Gives back every lock the group with `uid` holds: one delete-collection by the holder label
/// (a lock changes holder only by being deleted and created again, so the label is exact).
///
/// # Errors
/// The API server refused the delete.
pub async fn release(ctx: &Context, uid: &str) -> Result<()> {
    let api: Api<Lease> = Api::namespaced(ctx.client.clone(), api_ns(ctx));
    let held = held_by(ctx, uid);
    release_with(&api, uid).await.map_err(Error::Kube)?;
    ctx.lock_waiters.released(&held);
    Ok(())
}

async fn release_with(api: &Api<Lease>, uid: &str) -> kube::Result<()> {
    if uid.is_empty() {
        return Ok(());
    }
    let selector = ListParams::default().labels(&format!("{LABEL_LOCK_HOLDER}={uid}"));
    api.delete_collection(&DeleteParams::default(), &selector)
        .await?;
    info!(holder = uid, "gave back locks");
    Ok(())
}

/// Gives back the locks of a group that was deleted (from the group watch), at once.
pub async fn release_deleted(client: kube::Client, namespace: String, group: WorkflowGroup) {
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let uid = group.uid().unwrap_or_default();
    if let Err(error) = release_with(&api, &uid).await {
        warn!(%error, group = %group.name_any(), "could not give back the locks of a deleted group; the sweeper will");
    }
}

/// Groups waiting for a lock, by Lease name, woken when it is deleted; and the Leases given
/// back a moment ago, which the cache may still list.
pub struct Waiters {
    waiting: Mutex<HashMap<String, HashSet<ObjectRef<WorkflowGroup>>>>,
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
            wake,
            released: Mutex::default(),
        }
    }

    fn released(&self, leases: &[Arc<Lease>]) {
        let Ok(mut released) = self.released.lock() else {
            return;
        };
        let now = std::time::Instant::now();
        released.retain(|_, at| now.duration_since(*at) < REMEMBER_RELEASED);
        for uid in leases.iter().filter_map(|l| l.uid()) {
            released.insert(uid, now);
        }
    }

    fn was_released(&self, lease: &Lease) -> bool {
        let uid = lease.metadata.uid.as_deref().unwrap_or_default();
        self.released
            .lock()
            .is_ok_and(|released| released.contains_key(uid))
    }

    fn wait(&self, group: &WorkflowGroup, leases: &[String]) {
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
    pub fn freed(&self, name: &str, groups: &kube::runtime::reflector::Store<WorkflowGroup>) {
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

/// The leader's sweeper: every third of the lease time, deletes the lock Leases whose holder
/// is gone (deleted, or finished with no step pod running), so that none outlives its holder
/// by more than the lease time, whatever happened to the operator meanwhile. Starts once the
/// group cache is complete (an empty cache would make every holder look gone).
pub async fn sweep(ctx: Arc<Context>) {
    let every = ctx.config.locks.lease_duration / 3;
    let api: Api<Lease> = Api::namespaced(ctx.client.clone(), api_ns(&ctx));
    loop {
        tokio::time::sleep(every.max(Duration::from_secs(1))).await;
        for lease in ctx.leases.state() {
            if !matches!(holder_of(&lease, None, &ctx), Holder::Gone) {
                continue;
            }
            match delete_exact(&api, &lease).await {
                Ok(true) => {
                    info!(lease = %lease.name_any(), holder = %holder_name(&lease), "freed the lock of a gone group");
                }
                Ok(false) => {}
                Err(error) => warn!(%error, lease = %lease.name_any(), "could not free a lock"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Exclusion, WorkflowGroupSpec};

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
                .all(|c| c.leases.len() == 1 && c.kind == "target")
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

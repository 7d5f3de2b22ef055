//! The two controllers and what they share.
//!
//! - [`workflowgroup`] and [`workflow`]: one module each, a pure plan (`plan`) beside the
//!   reconcile that reads, calls the plan and writes (`mod.rs`).
//! - [`write`]: the write layer around the plans (controlled children, idempotent creates,
//!   status writes, Events, the error policy, instrumentation).
//! - [`status`]: the `Succeeded` condition and the transitions published as Events;
//!   [`reason`]: every condition and Event reason.
//! - [`written`]: the statuses written and not yet seen in the caches.
//! - [`context`], [`error`], [`metrics`].
//!
//! The locks on targets ([`crate::locks`]) and the approvals of steps ([`crate::approvals`])
//! are rooms of their own that the controllers use.

pub mod context;
pub mod error;
pub mod metrics;
pub mod reason;
pub mod status;
pub mod workflow;
pub mod workflowgroup;
pub mod write;
pub mod written;

use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{info, warn};

pub use context::{Context, OperatorConfig, Rooms};
pub use error::{Error, Result};
pub use metrics::Metrics;

use crate::api::{Approval, LABEL_WORKFLOW_UID, Workflow, WorkflowGroup};
use crate::approvals::Approvals;
use crate::cached_pod::CachedPod;
use crate::http::Readiness;
use crate::locks::{Holdings, LockCaches, Waiters};
use crate::plugin::PluginRegistry;
use crate::provenance::Provenance;

/// A stream that yields whenever the set of loaded plugins changes, or their problems do (a
/// group waiting for a type says why it is missing).
fn plugin_changes(registry: &PluginRegistry) -> impl futures::Stream<Item = ()> + Send + 'static {
    let changes = |rx: tokio::sync::watch::Receiver<u64>| {
        futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        })
    };
    futures::stream::select(
        changes(registry.subscribe()),
        changes(registry.subscribe_problems()),
    )
}

/// The group that controls `workflow`, by its ownerReference.
fn owning_group(workflow: &Workflow) -> Option<ObjectRef<WorkflowGroup>> {
    let owner = workflow
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "WorkflowGroup")?;
    let ns = workflow.namespace()?;
    Some(ObjectRef::new(&owner.name).within(&ns))
}

/// Drops what nothing here reads of an object before it is cached: its managedFields, and the
/// copy of itself a client-side `kubectl apply` keeps in an annotation (a group's whole spec
/// again, targets and all).
fn strip_unread_metadata<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

/// The annotation of a client-side `kubectl apply`.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether `store` became ready (false: its writer is gone). Asked again every 100 ms: kube's
/// readiness signal wakes only the last task waiting on it, and the controllers wait on it too.
async fn store_ready<K>(store: &reflector::Store<K>) -> bool
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        let wait = tokio::time::timeout(Duration::from_millis(100), store.wait_until_ready());
        if let Ok(ready) = wait.await {
            return ready.is_ok();
        }
    }
}

/// The API of `K` in the watched namespace, or in all.
fn api_of<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The watch of the lock Leases into their store; a deleted one wakes the group waiting
/// longest for it.
fn lease_watch(
    api: Api<Lease>,
    writer: reflector::store::Writer<Lease>,
    (waiters, holdings): (Arc<Waiters>, Arc<Holdings>),
    groups: reflector::Store<WorkflowGroup>,
) -> impl std::future::Future<Output = ()> {
    watcher(
        api,
        watcher::Config::default().labels(crate::locks::LABEL_LOCK),
    )
    .default_backoff()
    .modify(strip_unread_metadata)
    .reflect(writer)
    .for_each(move |event| {
        match event {
            Ok(event) => {
                holdings.observe(&event);
                if let watcher::Event::Delete(lease) = event {
                    waiters.freed(&lease.name_any(), &groups);
                }
            }
            Err(error) => warn!(%error, "lock lease watch"),
        }
        futures::future::ready(())
    })
}

/// The groups' watch into their store. It keeps the line of groups waiting for locks, and a
/// deleted group gives back its locks at once.
fn group_watch(
    api: Api<WorkflowGroup>,
    line: Arc<Waiters>,
    client: Client,
    lock_namespace: String,
) -> (
    reflector::Store<WorkflowGroup>,
    impl futures::Stream<Item = WatchItem<WorkflowGroup>> + Send + 'static,
) {
    let (store, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(strip_unread_metadata)
        .reflect(writer)
        .inspect(move |event| match event {
            Ok(watcher::Event::Apply(group) | watcher::Event::InitApply(group)) => {
                let group = group.with_targets();
                line.in_line(&group, workflowgroup::plan::waiting_for(&group).is_some());
            }
            Ok(watcher::Event::Delete(group)) => {
                line.in_line(group, false);
                tokio::spawn(crate::locks::release_deleted(
                    client.clone(),
                    lock_namespace.clone(),
                    group.clone(),
                ));
            }
            _ => {}
        })
        .applied_objects();
    (store, stream)
}

/// One watch of Workflows feeding a shared store: the Workflow controller runs on it, and the
/// group controller is told of its Workflows' changes by it, only once the store holds them (a
/// second watch could tell it before the store it reads has caught up).
struct WorkflowWatch<W> {
    store: reflector::Store<Workflow>,
    /// The Workflow controller's stream and the group controller's; `None` if the store
    /// refused a subscriber.
    subscribers: Option<(
        reflector::ReflectHandle<Workflow>,
        reflector::ReflectHandle<Workflow>,
    )>,
    /// The watch itself, which runs until the controllers stop reading from it.
    watch: W,
}

fn workflow_watch(
    api: Api<Workflow>,
    provenance: &Provenance,
    wake_owner: futures::channel::mpsc::UnboundedSender<ObjectRef<WorkflowGroup>>,
) -> WorkflowWatch<impl std::future::Future<Output = ()> + use<>> {
    let (store, writer) = reflector::store_shared(1024);
    let subscribers = writer.subscribe().zip(writer.subscribe());
    let provenance = provenance.clone();
    let mut verdicts = workflow::Verdicts::default();
    let watch = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(move |w| workflow::keep_what_is_read(w, &provenance, &mut verdicts))
        .reflect_shared(writer)
        .for_each(move |event| {
            match event {
                // The shared store tells its subscribers of changes, not of deletions: the
                // group of a deleted Workflow is woken here.
                Ok(watcher::Event::Delete(workflow)) => {
                    if let Some(group) = owning_group(&workflow) {
                        let _ = wake_owner.unbounded_send(group);
                    }
                }
                Ok(_) => {}
                Err(error) => warn!(%error, "workflow watch"),
            }
            futures::future::ready(())
        });
    WorkflowWatch {
        store,
        subscribers,
        watch,
    }
}

/// The step pods' watch into their store; what is kept of a pod is its evidence, and only
/// what that needs is decoded ([`WirePod`](workflow::pod::wire::WirePod)).
fn pod_watch(
    api: Api<workflow::pod::wire::WirePod>,
    provenance: &Provenance,
) -> (
    reflector::Store<CachedPod>,
    impl futures::Stream<Item = WatchItem<CachedPod>> + Send + 'static,
) {
    let (store, writer) = reflector::store();
    let provenance = provenance.clone();
    let stream = watcher(api, watcher::Config::default().labels(LABEL_WORKFLOW_UID))
        .default_backoff()
        .map_ok(move |event| workflow::pod::wire::pod_event(event, &provenance))
        .reflect(writer)
        .touched_objects();
    (store, stream)
}

/// The Approvals' watch: the approvals room indexes each one by the Workflow it names, and a
/// new one wakes that Workflow.
fn approval_watch(
    api: Api<Approval>,
    client: Client,
) -> (
    Arc<Approvals>,
    impl futures::Stream<Item = WatchItem<Approval>> + Send + 'static,
) {
    let (store, writer) = reflector::store();
    let room = Arc::new(Approvals::new(client, store));
    let index = room.clone();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(strip_unread_metadata)
        .reflect(writer)
        .inspect(move |event| {
            if let Ok(watcher::Event::Apply(a) | watcher::Event::InitApply(a)) = event {
                index.saw(a);
            }
        })
        .touched_objects();
    (room, stream)
}

/// Runs `then` once every store named has synced; not at all if one of their writers is gone.
fn when_synced<F>(stores: Vec<Box<dyn SyncedStore>>, then: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        for store in &stores {
            if !store.synced().await {
                return;
            }
        }
        then.await;
    });
}

/// A store whose first sync can be awaited, whatever it holds.
trait SyncedStore: Send + Sync {
    fn synced(&self) -> futures::future::BoxFuture<'_, bool>;
}

impl<K> SyncedStore for reflector::Store<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    fn synced(&self) -> futures::future::BoxFuture<'_, bool> {
        Box::pin(store_ready(self))
    }
}

/// What a controller's stream ends each reconcile with: its error, if any, logged.
fn log_error<T, E: std::fmt::Display>(
    controller: &'static str,
) -> impl FnMut(std::result::Result<T, E>) -> futures::future::Ready<()> {
    move |res| {
        if let Err(error) = res {
            warn!(%error, "{controller}");
        }
        futures::future::ready(())
    }
}

/// What starts once the caches are complete: the sweeper of gone holders' locks (once the
/// groups and Leases it judges by are), and readiness (once the controllers' caches are).
fn once_synced(ctx: &Arc<Context>, caches: &LockCaches, readiness: Readiness) {
    let sweeper = ctx.clone();
    let (groups, leases) = (caches.groups.clone(), caches.leases.clone());
    when_synced(vec![Box::new(groups), Box::new(leases)], async move {
        sweeper.locks.sweep().await;
    });
    let synced: Vec<Box<dyn SyncedStore>> = vec![
        Box::new(caches.groups.clone()),
        Box::new(caches.workflows.clone()),
        Box::new(caches.pods.clone()),
    ];
    when_synced(synced, async move {
        info!("controller caches synced");
        readiness.set_controllers_synced();
    });
}

/// What a watch stream yields.
type WatchItem<K> = std::result::Result<K, watcher::Error>;

/// The group controller: a group is reconciled when it changes, when what it reads of one of
/// its Workflows does, when a lock it waits for is freed (`woken`), and when the plugins
/// change.
fn group_controller(
    ctx: Arc<Context>,
    registry: &PluginRegistry,
    (store, groups): (
        reflector::Store<WorkflowGroup>,
        impl futures::Stream<Item = WatchItem<WorkflowGroup>> + Send + 'static,
    ),
    workflows: reflector::ReflectHandle<Workflow>,
    woken: futures::channel::mpsc::UnboundedReceiver<ObjectRef<WorkflowGroup>>,
) -> impl std::future::Future<Output = ()> {
    let config = ControllerConfig::default().concurrency(ctx.config.concurrent_reconciles);
    let mut wake = workflowgroup::wake::GroupWake::default();
    Controller::for_stream(groups, store)
        .owns_shared_stream(workflows.filter(move |w| futures::future::ready(wake.wakes(w))))
        .reconcile_on(woken)
        .reconcile_all_on(plugin_changes(registry))
        .with_config(config)
        .shutdown_on_signal()
        .run(
            workflowgroup::reconcile,
            write::error_policy::<WorkflowGroup>,
            ctx,
        )
        .for_each(log_error("workflowgroup controller"))
}

/// The Workflow controller: a Workflow is reconciled when it changes, when one of its pods
/// does, when an Approval names it, and when the plugins change.
fn workflow_controller(
    ctx: Arc<Context>,
    registry: &PluginRegistry,
    (store, workflows): (
        reflector::Store<Workflow>,
        reflector::ReflectHandle<Workflow>,
    ),
    pods: impl futures::Stream<Item = WatchItem<CachedPod>> + Send + 'static,
    approvals: impl futures::Stream<Item = WatchItem<Approval>> + Send + 'static,
) -> impl std::future::Future<Output = ()> {
    let config = ControllerConfig::default().concurrency(ctx.config.concurrent_reconciles);
    Controller::for_shared_stream(workflows, store)
        .owns_stream(pods)
        .watches_stream(approvals, |approval: Approval| {
            let ns = approval.namespace();
            ns.map(|ns| ObjectRef::<Workflow>::new(&approval.spec.workflow).within(&ns))
        })
        .reconcile_all_on(plugin_changes(registry))
        .with_config(config)
        .shutdown_on_signal()
        .run(workflow::reconcile, write::error_policy::<Workflow>, ctx)
        .for_each(log_error("workflow controller"))
}

/// Runs both controllers until a shutdown signal. `readiness` learns when both controllers'
/// caches have synced.
pub async fn run(
    client: Client,
    registry: PluginRegistry,
    config: OperatorConfig,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    reporter: Reporter,
) {
    // What the operator creates is signed, and what it finds checked, with its key.
    let provenance = Provenance::load(&client, &config.locks.namespace).await;
    let watched = config.namespace.as_deref();
    // Every watched object goes through a reflector store that the reconciles read instead of
    // listing from the API server; managedFields (a quarter of an object) are dropped first.
    let (wake, woken) = futures::channel::mpsc::unbounded();
    let lock_waiters = Arc::new(Waiters::new(wake.clone()));
    let (group_store, group_stream) = group_watch(
        api_of(&client, watched),
        lock_waiters.clone(),
        client.clone(),
        config.locks.namespace.clone(),
    );
    let (lease_store, lease_writer) = reflector::store();
    let holdings = Arc::new(Holdings::default());
    let lease_watch = lease_watch(
        Api::namespaced(client.clone(), &config.locks.namespace),
        lease_writer,
        (lock_waiters.clone(), holdings.clone()),
        group_store.clone(),
    );
    let workflows = workflow_watch(api_of(&client, watched), &provenance, wake);
    let workflow_store = workflows.store.clone();
    let (pod_store, pod_stream) = pod_watch(api_of(&client, watched), &provenance);
    let (approvals, approval_stream) = approval_watch(api_of(&client, watched), client.clone());
    let caches = LockCaches {
        leases: lease_store.clone(),
        holdings,
        groups: group_store.clone(),
        workflows: workflow_store.clone(),
        pods: pod_store.clone(),
    };
    let rooms = Rooms {
        waiters: lock_waiters,
        approvals,
        provenance,
    };
    let settings = (config, metrics, reporter);
    let ctx = Arc::new(Context::new(
        client,
        registry.clone(),
        settings,
        caches.clone(),
        rooms,
    ));
    once_synced(&ctx, &caches, readiness);
    let Some((workflow_events, group_triggers)) = workflows.subscribers else {
        warn!("the shared Workflow store has no subscribers; not starting the controllers");
        return;
    };
    let group_controller = group_controller(
        ctx.clone(),
        &registry,
        (group_store, group_stream),
        group_triggers,
        woken,
    );
    let workflow_controller = workflow_controller(
        ctx,
        &registry,
        (workflow_store, workflow_events),
        pod_stream,
        approval_stream,
    );
    info!("controllers started");
    // The shared watch ends with the controllers (on shutdown they stop reading from it).
    tokio::select! {
        _ = workflows.watch => {}
        _ = lease_watch => {}
        _ = futures::future::join(group_controller, workflow_controller) => {}
    }
    info!("controllers stopped");
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;

    #[test]
    fn a_cached_object_keeps_its_annotations_but_not_the_copy_kubectl_apply_left() {
        let mut lease = Lease::default();
        lease.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        lease.metadata.annotations = Some(BTreeMap::from([
            (LAST_APPLIED.to_string(), "{\"spec\":{}}".to_string()),
            (
                crate::api::ANNOTATION_REQUESTED_BY.to_string(),
                "alice".to_string(),
            ),
        ]));
        strip_unread_metadata(&mut lease);
        assert_eq!(lease.metadata.managed_fields, None);
        assert_eq!(
            lease.metadata.annotations,
            Some(BTreeMap::from([(
                crate::api::ANNOTATION_REQUESTED_BY.to_string(),
                "alice".to_string()
            )]))
        );
    }
}

//! What every reconcile needs: handles to the client, the plugins, the event recorder,
//! metrics, settings, the watch caches, the locks and the approvals.

use std::sync::Arc;

use crate::cached_pod::CachedPod;
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::Store;

use super::error::Backoff;
use super::metrics::Metrics;
use super::written::WrittenStatus;
use crate::api::{Workflow, WorkflowGroup};
use crate::approvals::Approvals;
use crate::locks::{LockCaches, LockConfig, Locks, Waiters};
use crate::plugin::PluginRegistry;
use crate::provenance::Provenance;

/// Settings of the controllers.
#[derive(Debug, Clone)]
pub struct OperatorConfig {
    /// What a step pod gets when neither its step nor its pod template says otherwise.
    pub step_defaults: StepDefaults,
    /// Watch only this namespace; all namespaces when `None`.
    pub namespace: Option<String>,
    /// Reconciles each controller runs at once.
    pub concurrent_reconciles: u16,
    /// Where the locks on targets live.
    pub locks: LockConfig,
}

/// What a step pod gets when neither its step nor its pod template says otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepDefaults {
    /// The image of a step that names none (the step image, with `workflow-runner`).
    pub image: String,
    /// A `kubernetes.io/ssh-auth` Secret of the group's namespace mounted at `/etc/workflow/ssh` when
    /// the pod template mounts nothing there; optional, so a step that needs no SSH still runs
    /// where it does not exist.
    pub ssh_secret: Option<String>,
}

impl StepDefaults {
    /// Defaults of `image` and no SSH Secret.
    pub fn image(image: &str) -> Self {
        StepDefaults {
            image: image.into(),
            ssh_secret: None,
        }
    }
}

/// What every reconcile needs.
pub struct Context {
    pub client: Client,
    pub registry: PluginRegistry,
    pub recorder: Recorder,
    /// Who publishes the Events (the recorder's reporter).
    pub reporter: Reporter,
    pub metrics: Arc<Metrics>,
    pub config: OperatorConfig,
    /// Consecutive failures per object, for exponential retry delays.
    pub backoff: Backoff,
    /// Every Workflow the operator watches, as its watch last said (no LIST per reconcile).
    pub workflows: Store<Workflow>,
    /// Every step pod the operator watches (labelled with a workflow UID).
    pub pods: Store<CachedPod>,
    /// Every WorkflowGroup the operator watches.
    pub groups: Store<WorkflowGroup>,
    /// The locks on targets, and the groups waiting for them.
    pub locks: Locks,
    /// The Approvals of steps, and whether they can be trusted.
    pub approvals: Arc<Approvals>,
    /// The statuses written and not yet seen in the caches.
    pub written: WrittenStatus,
    /// The key the operator signs what it creates with, and checks what it finds by.
    pub provenance: Provenance,
}

/// What the controllers use beside the caches: the line of groups waiting for locks, the
/// Approvals, and the operator's key.
pub struct Rooms {
    pub waiters: Arc<Waiters>,
    pub approvals: Arc<Approvals>,
    pub provenance: Provenance,
}

impl Context {
    /// The handles of every reconcile: the settings, the metrics and the Events' reporter, and
    /// the rooms, reading `caches`.
    pub fn new(
        client: Client,
        registry: PluginRegistry,
        (config, metrics, reporter): (OperatorConfig, Arc<Metrics>, Reporter),
        caches: LockCaches,
        rooms: Rooms,
    ) -> Self {
        let (workflows, pods, groups) = (
            caches.workflows.clone(),
            caches.pods.clone(),
            caches.groups.clone(),
        );
        let locks = Locks::new(
            client.clone(),
            config.locks.clone(),
            config.namespace.clone(),
            caches,
            rooms.waiters,
        );
        Context {
            recorder: Recorder::new(client.clone(), reporter.clone()),
            client,
            registry,
            reporter,
            metrics,
            config,
            backoff: Backoff::default(),
            workflows,
            pods,
            groups,
            locks,
            approvals: rooms.approvals,
            written: WrittenStatus::default(),
            provenance: rooms.provenance,
        }
    }
}

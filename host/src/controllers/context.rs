//! What every reconcile needs: the client, the plugins, the event recorder, metrics, settings
//! and the per-object backoff.

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::Store;

use super::error::Backoff;
use super::locks::{LockConfig, Waiters};
use super::metrics::Metrics;
use super::workflow::pod::StepDefaults;
use crate::api::{Approval, Workflow, WorkflowGroup};
use crate::plugin::PluginRegistry;

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
    pub pods: Store<Pod>,
    /// Every WorkflowGroup the operator watches (lock holders, groups waiting in line).
    pub groups: Store<WorkflowGroup>,
    /// The lock Leases.
    pub leases: Store<Lease>,
    /// Every Approval of a step the operator watches.
    pub approvals: Store<Approval>,
    /// Whether Approvals can be trusted (the approval policy is in force), when last asked.
    pub approval_trust:
        std::sync::Mutex<Option<(std::time::Instant, super::workflow::approval::Trust)>>,
    /// Groups waiting for a lock, woken when it is freed.
    pub lock_waiters: Arc<Waiters>,
    /// The statuses written and not yet seen in the caches.
    pub written: super::write::WrittenStatus,
}

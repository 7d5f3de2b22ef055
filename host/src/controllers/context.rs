//! What every reconcile needs: the client, the plugins, the event recorder, metrics, settings
//! and the per-object backoff.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::events::{Event, Recorder};
use kube::runtime::reflector::Store;
use kube::{Client, Resource};
use tracing::warn;

use super::error::Backoff;
use super::metrics::Metrics;
use super::status::{Transition, printable};
use crate::api::Workflow;
use crate::plugin::PluginRegistry;

/// Settings of the controllers.
#[derive(Debug, Clone)]
pub struct OperatorConfig {
    /// Image of a step's container when the step names none.
    pub default_image: String,
    /// Watch only this namespace; all namespaces when `None`.
    pub namespace: Option<String>,
}

/// What every reconcile needs.
pub struct Context {
    pub client: Client,
    pub registry: PluginRegistry,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub config: OperatorConfig,
    /// Consecutive failures per object, for exponential retry delays.
    pub backoff: Backoff,
    /// Every Workflow the operator watches, as its watch last said (no LIST per reconcile).
    pub workflows: Store<Workflow>,
    /// Every step pod the operator watches (labelled with a workflow UID).
    pub pods: Store<Pod>,
    /// The statuses written and not yet seen in the caches.
    pub written: super::sync::WrittenStatus,
}

impl Context {
    /// Publishes `transition` as a Kubernetes Event on `obj`; a failure to publish is logged,
    /// never fatal.
    pub async fn publish<K: Resource<DynamicType = ()>>(&self, obj: &K, transition: &Transition) {
        let event = Event {
            type_: transition.type_,
            reason: transition.reason.clone(),
            note: Some(printable(&transition.message, 1000)),
            // The recorder folds events of one object, reason and action into a series.
            action: transition
                .subject
                .clone()
                .unwrap_or_else(|| "Reconcile".into()),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &obj.object_ref(&())).await {
            warn!(%error, reason = %transition.reason, "could not publish event");
        }
    }
}

//! What every reconcile needs: the client, the plugins, the event recorder, metrics, settings
//! and the per-object backoff.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
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
    /// Reconciles each controller runs at once.
    pub concurrent_reconciles: u16,
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
    /// The statuses written and not yet seen in the caches.
    pub written: super::sync::WrittenStatus,
}

impl Context {
    /// Publishes `transition` as a Kubernetes Event on `obj`; a failure to publish is logged,
    /// never fatal.
    pub async fn publish<K: Resource<DynamicType = ()>>(&self, obj: &K, transition: &Transition) {
        let published = if transition.once {
            self.create_event(obj.object_ref(&()), transition).await
        } else {
            self.record(obj.object_ref(&()), transition).await
        };
        if let Err(error) = published {
            warn!(%error, reason = %transition.reason, "could not publish event");
        }
    }

    /// Through the recorder, which folds a repeated event into a series and remembers every
    /// event it published for six minutes to do so.
    async fn record(
        &self,
        regarding: ObjectReference,
        transition: &Transition,
    ) -> kube::Result<()> {
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
        self.recorder.publish(&event, &regarding).await
    }

    /// Created as the recorder creates a new event, without remembering it: an event that
    /// happens once per object would fill the recorder's memory at scale (thousands of
    /// finished Workflows) for a series that never comes.
    async fn create_event(
        &self,
        regarding: ObjectReference,
        transition: &Transition,
    ) -> kube::Result<()> {
        let now = Timestamp::now();
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = format!(
            "{}.{:x}",
            regarding
                .name
                .as_deref()
                .unwrap_or(&self.reporter.controller),
            now.as_nanosecond()
        );
        let event = KubeEvent {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            action: Some(
                transition
                    .subject
                    .clone()
                    .unwrap_or_else(|| "Reconcile".into()),
            ),
            reason: Some(transition.reason.clone()),
            note: Some(printable(&transition.message, 1000)),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(
                match transition.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .into(),
            ),
            ..KubeEvent::default()
        };
        Api::<KubeEvent>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await
            .map(drop)
    }
}

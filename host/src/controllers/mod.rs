//! The two controllers and what they share: the context, the error type, conditions, events
//! and metrics.

pub mod job;
pub mod metrics;
pub mod workflow;
pub mod workflowgroup;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use tracing::{info, warn};

use crate::api::{CONDITION_SUCCEEDED, Workflow, WorkflowGroup};
use crate::plugin::{self, Gate, PluginRegistry, StepOutcome, Verdict};

pub use metrics::Metrics;

/// Why a reconcile failed. The controller retries with backoff; none of these is the user's
/// fault (those end up in conditions instead).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the Kubernetes API failed.
    #[error("kubernetes api: {0}")]
    Kube(#[source] kube::Error),
    /// A namespaced object came without a namespace.
    #[error("object has no namespace")]
    MissingNamespace,
}

impl Error {
    /// How long to wait before retrying. A 409 conflict is a race with another writer, not a
    /// failure: retry at once.
    pub fn backoff(&self) -> Duration {
        if self.is_conflict() {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(5)
        }
    }

    /// Whether this is a 409 conflict from the API server.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(e)) if e.code == 409)
    }
}

/// Result of a reconcile.
pub type Result<T, E = Error> = std::result::Result<T, E>;

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
}

impl Context {
    /// Publishes `transition` as a Kubernetes Event on `obj`; a failure to publish is logged,
    /// never fatal.
    pub async fn publish<K: Resource<DynamicType = ()>>(&self, obj: &K, transition: &Transition) {
        let event = Event {
            type_: transition.type_,
            reason: transition.reason.clone(),
            note: Some(truncate(&transition.message, 1000)),
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

/// A change a user cares about, published as an Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub type_: EventType,
    pub reason: String,
    pub message: String,
    /// What the event is about (a step, a workflow type). Events with the same reason about
    /// different subjects stay separate instead of being counted as one series.
    pub subject: Option<String>,
}

impl Transition {
    pub fn normal(reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: EventType::Normal,
            reason: reason.into(),
            message: message.into(),
            subject: None,
        }
    }
    pub fn warning(reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: EventType::Warning,
            reason: reason.into(),
            message: message.into(),
            subject: None,
        }
    }
    /// The same transition, about `subject`.
    pub fn about(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }
}

/// How a controller sees a plugin: the two calls the Workflow controller makes. Implemented by
/// the runtime's `Plugin`; tests give their own.
pub trait StepJudge {
    /// Whether `step` may start.
    fn gate(&self, step: &plugin::Step, ctx: &plugin::GroupContext) -> Result<Gate, String>;
    /// Judges a finished attempt of `step`.
    fn evaluate(&self, step: &plugin::Step, outcome: &StepOutcome) -> Result<Verdict, String>;
}

impl StepJudge for plugin::Plugin {
    fn gate(&self, step: &plugin::Step, ctx: &plugin::GroupContext) -> Result<Gate, String> {
        plugin::Plugin::gate(self, step, ctx).map_err(|e| e.to_string())
    }
    fn evaluate(&self, step: &plugin::Step, outcome: &StepOutcome) -> Result<Verdict, String> {
        plugin::Plugin::evaluate(self, step, outcome).map_err(|e| e.to_string())
    }
}

/// The `Succeeded` condition.
pub fn succeeded_condition(
    status: &str,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: CONDITION_SUCCEEDED.into(),
        status: status.into(),
        reason: reason.into(),
        message: truncate(message, 32 * 1024),
        observed_generation: generation,
        last_transition_time: Time(now),
    }
}

/// Puts `new` into `conditions`, keeping the old transition time when its status is unchanged
/// (API conventions: `lastTransitionTime` moves only when `status` does).
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    if let Some(old) = conditions.iter_mut().find(|c| c.type_ == new.type_) {
        if old.status == new.status {
            new.last_transition_time = old.last_transition_time.clone();
        }
        *old = new;
    } else {
        conditions.push(new);
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A stream that yields whenever the set of loaded plugins changes.
fn plugin_changes(registry: &PluginRegistry) -> impl futures::Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(registry.subscribe(), |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    })
}

/// Runs both controllers until a shutdown signal.
pub async fn run(
    client: Client,
    registry: PluginRegistry,
    config: OperatorConfig,
    metrics: Arc<Metrics>,
) {
    let reporter = Reporter {
        controller: "workflow-operator".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ctx = Arc::new(Context {
        client: client.clone(),
        registry: registry.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        metrics,
        config,
    });
    let (groups, workflows, jobs): (Api<WorkflowGroup>, Api<Workflow>, Api<Job>) =
        match &ctx.config.namespace {
            Some(ns) => (
                Api::namespaced(client.clone(), ns),
                Api::namespaced(client.clone(), ns),
                Api::namespaced(client.clone(), ns),
            ),
            None => (
                Api::all(client.clone()),
                Api::all(client.clone()),
                Api::all(client.clone()),
            ),
        };
    let controller_config = ControllerConfig::default().concurrency(8);

    let group_controller = Controller::new(groups, watcher::Config::default())
        .owns(workflows.clone(), watcher::Config::default())
        .reconcile_all_on(plugin_changes(&registry))
        .with_config(controller_config.clone())
        .shutdown_on_signal()
        .run(
            workflowgroup::reconcile,
            workflowgroup::error_policy,
            ctx.clone(),
        )
        .for_each(|res| async move {
            if let Err(error) = res {
                warn!(%error, "workflowgroup controller");
            }
        });
    let workflow_controller = Controller::new(workflows, watcher::Config::default())
        .owns(
            jobs,
            watcher::Config::default().labels(crate::api::LABEL_WORKFLOW_UID),
        )
        .reconcile_all_on(plugin_changes(&registry))
        .with_config(controller_config)
        .shutdown_on_signal()
        .run(workflow::reconcile, workflow::error_policy, ctx)
        .for_each(|res| async move {
            if let Err(error) = res {
                warn!(%error, "workflow controller");
            }
        });
    info!("controllers started");
    futures::join!(group_controller, workflow_controller);
    info!("controllers stopped");
}

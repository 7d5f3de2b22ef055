//! The two controllers and what they share.
//!
//! - [`workflowgroup`] and [`workflow`]: one module each, a pure plan (`plan.rs`) beside the
//!   reconcile that reads, calls the plan and writes (`mod.rs`).
//! - [`sync`]: the frame around the plans (controlled children, idempotent creates, status
//!   writes, events, the error policy, instrumentation).
//! - [`status`]: the `Succeeded` condition, its reasons, and Events.
//! - [`context`], [`error`], [`metrics`].

pub mod context;
pub mod error;
pub mod metrics;
pub mod status;
pub mod sync;
pub mod workflow;
pub mod workflowgroup;

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client};
use tracing::{info, warn};

pub use context::{Context, OperatorConfig};
pub use error::{Error, Result};
pub use metrics::Metrics;

use crate::api::{LABEL_WORKFLOW_UID, Workflow, WorkflowGroup};
use crate::http::Readiness;
use crate::plugin::PluginRegistry;

/// A stream that yields whenever the set of loaded plugins changes.
fn plugin_changes(registry: &PluginRegistry) -> impl futures::Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(registry.subscribe(), |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    })
}

/// Runs both controllers until a shutdown signal. `readiness` learns when both controllers'
/// caches have synced.
pub async fn run(
    client: Client,
    registry: PluginRegistry,
    config: OperatorConfig,
    metrics: Arc<Metrics>,
    readiness: Readiness,
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
        backoff: error::Backoff::default(),
    });
    let (groups, workflows, pods): (Api<WorkflowGroup>, Api<Workflow>, Api<Pod>) =
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
        .with_config(controller_config.clone());
    let workflow_controller = Controller::new(workflows, watcher::Config::default())
        .owns(pods, watcher::Config::default().labels(LABEL_WORKFLOW_UID))
        .reconcile_all_on(plugin_changes(&registry))
        .with_config(controller_config);

    let (group_store, workflow_store) = (group_controller.store(), workflow_controller.store());
    tokio::spawn(async move {
        if group_store.wait_until_ready().await.is_ok()
            && workflow_store.wait_until_ready().await.is_ok()
        {
            info!("controller caches synced");
            readiness.set_controllers_synced();
        }
    });

    let group_controller = group_controller
        .shutdown_on_signal()
        .run(
            workflowgroup::reconcile,
            sync::error_policy::<WorkflowGroup>,
            ctx.clone(),
        )
        .for_each(|res| async move {
            if let Err(error) = res {
                warn!(%error, "workflowgroup controller");
            }
        });
    let workflow_controller = workflow_controller
        .shutdown_on_signal()
        .run(workflow::reconcile, sync::error_policy::<Workflow>, ctx)
        .for_each(|res| async move {
            if let Err(error) = res {
                warn!(%error, "workflow controller");
            }
        });
    info!("controllers started");
    futures::join!(group_controller, workflow_controller);
    info!("controllers stopped");
}

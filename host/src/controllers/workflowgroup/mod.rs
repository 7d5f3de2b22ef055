//! The WorkflowGroup controller: creates a group's Workflows in order, each after the previous
//! one completed, and fails the group with the first Workflow that fails.
//!
//! Workflow names are deterministic (group, type, group UID), so creation is idempotent: a
//! crash between creating a Workflow and writing the group's status finds the Workflow again
//! instead of making a second one. What to do is decided in [`plan`]; this module reads,
//! calls the plan and writes.

pub mod plan;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::info;

use self::plan::{
    GroupPlugins, ObservedWorkflow, PluginState, name_taken, plan_group, workflow_refused,
};
use super::context::Context;
use super::error::{Error, Result};
use super::write;
use crate::api::{Phase, Workflow, WorkflowGroup};
use crate::plugin::PluginRegistry;
use crate::render::{RenderError, render_workflow, type_params, workflow_name};

/// Reconciles one WorkflowGroup.
pub async fn reconcile(group: Arc<WorkflowGroup>, ctx: Arc<Context>) -> Result<Action> {
    write::instrumented(&*group, &ctx, reconcile_group(&group, &ctx)).await
}

async fn reconcile_group(group: &WorkflowGroup, ctx: &Context) -> Result<Action> {
    let ns = group.namespace().ok_or(Error::MissingNamespace)?;
    let old = group.status.clone().unwrap_or_default();
    let groups: Api<WorkflowGroup> = Api::namespaced(ctx.client.clone(), &ns);
    let workflows_api: Api<Workflow> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = group.uid().unwrap_or_default();

    // From the watch cache: a Workflow created a moment ago may be missing yet, and creating
    // it again finds it (its name is deterministic).
    // Looked up by their deterministic names, not by scanning every Workflow in the cache.
    let workflows: BTreeMap<String, ObservedWorkflow> = group
        .spec
        .workflow_steps
        .iter()
        .filter_map(|type_name| {
            let key = ObjectRef::new(&workflow_name(group, type_name)).within(&ns);
            ctx.workflows.get(&key)
        })
        .filter(|w| write::controlled_by(&**w, &uid))
        .map(|w| (w.spec.type_.clone(), ObservedWorkflow::of(&w)))
        .collect();

    let now = Timestamp::now();
    let plugins = RegistryPlugins {
        registry: &ctx.registry,
        group,
        now,
    };
    let mut plan = plan_group(group, &workflows, &plugins, now);

    if let Some(workflow) = &plan.create {
        match write::create_controlled(&workflows_api, workflow, &uid).await {
            Ok(()) => {
                info!(workflow = %workflow.name_any(), type_name = %workflow.spec.type_, "created workflow");
            }
            Err(Error::NameTaken { .. }) => plan = name_taken(group, plan, now),
            Err(Error::Kube(kube::Error::Api(e))) if e.code == 422 => {
                plan = workflow_refused(group, plan, &e.message, now);
            }
            Err(e) => return Err(e),
        }
    }
    let written =
        write::record_transition(ctx, &groups, group, &old, &plan.status, &plan.events).await?;
    // Counted when it finished, not when a finished group's conditions are brought up to date.
    let finished_now = written && !old.phase.is_some_and(Phase::is_finished);
    if let Some(phase) = plan
        .status
        .phase
        .filter(|p| finished_now && p.is_finished())
    {
        ctx.metrics.group_finished(phase.as_str());
        info!(%phase, "group finished");
    }
    match plan.unavailable {
        Some(error) => Err(Error::PluginUnavailable(error)),
        None => Ok(Action::await_change()),
    }
}

/// The group's plugins, as the registry has them now.
struct RegistryPlugins<'a> {
    registry: &'a PluginRegistry,
    group: &'a WorkflowGroup,
    now: Timestamp,
}

impl GroupPlugins for RegistryPlugins<'_> {
    fn check(&self, type_name: &str) -> PluginState {
        match self.registry.get(type_name) {
            None => PluginState::Missing,
            Some(plugin) => {
                PluginState::Loaded(plugin.validate(&type_params(self.group, type_name)))
            }
        }
    }

    fn render(&self, type_name: &str) -> Result<Workflow, RenderError> {
        let plugin = self
            .registry
            .get(type_name)
            .ok_or_else(|| RenderError::NoPlugin(type_name.to_string()))?;
        render_workflow(self.group, &plugin, self.now.as_second())
    }
}

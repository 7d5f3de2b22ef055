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
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::{info, warn};

use self::plan::{
    GroupPlugins, ObservedWorkflow, PluginState, Unit, current_targets, name_taken, plan_group,
    unit_key, units, waiting_for_locks, workflow_refused,
};
use super::context::Context;
use super::error::{Error, Result};
use super::locks::{self, Acquired};
use super::write;
use crate::api::{Phase, Workflow, WorkflowGroup, WorkflowGroupStatus};
use crate::plugin::PluginRegistry;
use crate::render::{RenderError, render_wave, type_params, wave_workflow_name};

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
    let mut workflows: BTreeMap<String, ObservedWorkflow> = units(group)
        .iter()
        .filter_map(|unit| {
            let name = wave_workflow_name(group, &unit.type_, unit.wave);
            let w = ctx.workflows.get(&ObjectRef::new(&name).within(&ns))?;
            write::controlled_by(&*w, &uid).then(|| (unit.key(), ObservedWorkflow::of(&w)))
        })
        .collect();
    if !old.phase.is_some_and(Phase::is_finished) {
        recorded_but_missing(&old, &workflows_api, &uid, &mut workflows).await?;
    }

    let now = Timestamp::now();
    let plugins = RegistryPlugins {
        registry: &ctx.registry,
        group,
        now,
    };
    let mut plan = plan_group(group, &workflows, &plugins, now);

    // The Workflow to create, or to run again, acts on its targets only with their locks held.
    let mut waiting = false;
    let claim = match (&plan.create, &plan.rerun) {
        (Some(workflow), _) => Some(workflow.spec.targets.clone()),
        (None, Some(patch)) => Some(patch.targets.clone()),
        (None, None) => None,
    };
    if let Some(targets) = claim
        && let Acquired::Waiting(message) =
            locks::acquire(ctx, group, &targets, current_targets).await?
    {
        plan = waiting_for_locks(group, plan, message, now);
        waiting = true;
    }
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
    if let Some(patch) = &plan.rerun {
        // Every field, so that a merge patch leaves nothing of an earlier run's request.
        let body = serde_json::json!({"spec": {"rerun": {
            "run": patch.rerun.run,
            "from": patch.rerun.from,
            "steps": patch.rerun.steps,
        }}});
        workflows_api
            .patch(
                &patch.workflow,
                &PatchParams::default(),
                &Patch::Merge(&body),
            )
            .await
            .map_err(Error::Kube)?;
        info!(workflow = %patch.workflow, run = patch.rerun.run, "asked workflow to run again");
    }
    if plan.pause && !group.spec.paused {
        // Before the status that says so: a crash between the two pauses it again.
        let patch = serde_json::json!({"spec": {"paused": true}});
        groups
            .patch(
                &group.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(Error::Kube)?;
        info!("paused: the rollout's failure budget is exceeded");
    }
    let written =
        write::record_transition(ctx, &groups, group, &old, &plan.status, &plan.events).await?;
    // Counted when it finished, not when a finished group's conditions are brought up to date.
    let finished_now = written && !old.phase.is_some_and(Phase::is_finished);
    let finished = plan.status.phase.is_some_and(Phase::is_finished);
    if let Some(phase) = plan.status.phase.filter(|_| finished_now && finished) {
        ctx.metrics.group_finished(phase.as_str());
        info!(%phase, "group finished");
    }
    // Locks go back once the group no longer acts on their targets: finished (with no step
    // pod left running), between waves, paused between waves.
    let mut release_later = false;
    if (finished || !plan.keep_locks)
        && plan.create.is_none()
        && plan.rerun.is_none()
        && !waiting
        && !locks::held_by(ctx, &uid).is_empty()
    {
        // A Workflow of its own still acting (a spec made invalid while it ran), or a step pod
        // still running after its Workflow failed: later.
        let acting = workflows
            .values()
            .any(|w| !w.phase.is_some_and(Phase::is_finished));
        if acting || locks::steps_running(group, ctx) {
            release_later = true;
        } else {
            locks::release(ctx, &uid).await?;
        }
    }
    match plan.unavailable {
        Some(error) => Err(Error::PluginUnavailable(error)),
        // Woken when a lock it waits for is freed; asked again meanwhile in case a wake-up is
        // missed (a holder that disappears without deleting its lock).
        None if waiting => Ok(Action::requeue(LOCK_RECHECK)),
        None if release_later => Ok(Action::requeue(Duration::from_secs(2))),
        None => Ok(Action::await_change()),
    }
}

/// The Workflows the group's status lists that the cache lacks, asked of the API server: one
/// created a moment ago that the cache has not seen yet is there, one deleted by someone is
/// not (and is [`ObservedWorkflow::deleted`]). Only then: a GET per such Workflow.
async fn recorded_but_missing(
    old: &WorkflowGroupStatus,
    api: &Api<Workflow>,
    uid: &str,
    workflows: &mut BTreeMap<String, ObservedWorkflow>,
) -> Result<()> {
    for recorded in &old.workflows {
        let key = unit_key(&recorded.type_, recorded.wave);
        if workflows.contains_key(&key) {
            continue;
        }
        match api.get_opt(&recorded.name).await.map_err(Error::Kube)? {
            Some(w) if write::controlled_by(&w, uid) => {
                workflows.insert(key, ObservedWorkflow::of(&w));
            }
            // Another's Workflow of that name: the plan's create says the name is taken.
            Some(_) => {}
            None => {
                warn!(workflow = %recorded.name, "a workflow of the group was deleted");
                workflows.insert(key, ObservedWorkflow::deleted(recorded));
            }
        }
    }
    Ok(())
}

/// How often a group waiting for locks looks again without being woken.
const LOCK_RECHECK: Duration = Duration::from_secs(10);

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

    fn render(&self, unit: &Unit<'_>) -> Result<Workflow, RenderError> {
        let plugin = self
            .registry
            .get(&unit.type_)
            .ok_or_else(|| RenderError::NoPlugin(unit.type_.clone()))?;
        let wave = unit.wave.map(|w| (w, unit.targets));
        render_wave(self.group, &plugin, self.now.as_second(), wave)
    }
}

//! The WorkflowGroup controller: creates a group's Workflows in order, each after the previous
//! one completed, and fails the group with the first Workflow that fails.
//!
//! Workflow names are deterministic (group, type, group UID), so creation is idempotent: a
//! crash between creating a Workflow and writing the group's status finds the Workflow again
//! instead of making a second one. What to do is decided in [`plan`]; this module reads,
//! calls the plan and writes.

pub mod plan;
pub mod select;
pub mod wake;

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
    Attempt, GroupPlan, GroupPlugins, LockWish, ObservedWorkflow, PluginState, Unit, after_attempt,
    current_targets, lock_wish, plan_group, unit_key, units, waiting_for,
};
use self::select::Choice;
use super::context::Context;
use super::error::{Error, Result};
use super::reason;
use super::status::Transition;
use super::workflow::group_signed;
use super::write;
use crate::api::{Phase, Workflow, WorkflowGroup, WorkflowGroupStatus};
use crate::locks::Acquired;
use crate::names::wave_workflow_name;
use crate::plugin::PluginRegistry;
use crate::render::{RenderError, render_wave, type_params};

/// Reconciles one WorkflowGroup.
pub async fn reconcile(group: Arc<WorkflowGroup>, ctx: Arc<Context>) -> Result<Action> {
    write::instrumented(&*group, &ctx, reconcile_group(&group, &ctx)).await
}

async fn reconcile_group(group: &WorkflowGroup, ctx: &Context) -> Result<Action> {
    // A group that selects Nodes acts on those it chose when it started.
    let chosen = match select::choose(ctx, group).await? {
        Choice::Made => None,
        Choice::Chosen(group) => Some(group),
        Choice::Wait(action) => return Ok(action),
    };
    let group = &*chosen.as_deref().unwrap_or(group).with_targets();
    let ns = group.namespace().ok_or(Error::MissingNamespace)?;
    let old = group.status.clone().unwrap_or_default();
    let groups: Api<WorkflowGroup> = Api::namespaced(ctx.client.clone(), &ns);
    let workflows_api: Api<Workflow> = Api::namespaced(ctx.client.clone(), &ns);
    let workflows = observed_workflows(ctx, group, &old, &workflows_api).await?;
    let now = Timestamp::now();
    let plugins = RegistryPlugins {
        registry: &ctx.registry,
        group,
        now,
    };
    let plan = plan_group(group, &workflows, &plugins, now);
    let attempt = carry_out(ctx, group, &plan, &workflows, &workflows_api).await?;
    let waiting = matches!(attempt, Attempt::Locked(_));
    let plan = after_attempt(group, plan, attempt, now);
    // What the group wants of its locks now that the attempt is made: to give them way while
    // it only waits, or to give them back. A group waiting for locks keeps what it holds (what
    // it took in a failed attempt is already given back).
    let (idle, release) = match lock_wish(&plan, &workflows) {
        _ if waiting => (None, None),
        LockWish::Idle { workflows, since } => (
            Some((
                workflows.into_iter().map(String::from).collect::<Vec<_>>(),
                since,
            )),
            None,
        ),
        LockWish::Release { acting } => (None, Some(acting)),
        _ => (None, None),
    };
    if let Some((idle, since)) = &idle
        && let Some(event) = give_way(ctx, group, idle, *since, &workflows_api, now).await?
    {
        // Published whether or not the status changes with it (the status says nothing of it).
        write::publish(ctx, group, &event).await;
    }
    if plan.pause && !group.spec.paused {
        // Before the status that says so: a crash between the two pauses it again.
        pause(&groups, group).await?;
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
    let release_later = match release {
        Some(acting) => give_back(ctx, group, acting).await?,
        None => false,
    };
    match plan.unavailable {
        Some(error) => Err(Error::PluginUnavailable(error)),
        // Woken when a lock it waits for is freed; asked again meanwhile in case a wake-up is
        // missed (a holder that disappears without deleting its lock).
        None if waiting || idle.is_some() => Ok(Action::requeue(LOCK_RECHECK)),
        None if release_later => Ok(Action::requeue(Duration::from_secs(2))),
        // The next wave's window opens, or its rest after the last wave ends.
        None => Ok(plan
            .requeue_after
            .map_or_else(Action::await_change, Action::requeue)),
    }
}

/// The group's own Workflows, by unit: from the watch cache, looked up by their deterministic
/// names (not by scanning every Workflow in the cache), and those the status records and the
/// cache does not hold yet. A Workflow created a moment ago may be missing still: creating it
/// again finds it.
async fn observed_workflows(
    ctx: &Context,
    group: &WorkflowGroup,
    old: &WorkflowGroupStatus,
    workflows_api: &Api<Workflow>,
) -> Result<BTreeMap<String, ObservedWorkflow>> {
    let ns = group.namespace().ok_or(Error::MissingNamespace)?;
    let uid = group.uid().unwrap_or_default();
    let mut workflows: BTreeMap<String, ObservedWorkflow> = units(group)
        .iter()
        .filter_map(|unit| {
            let name = wave_workflow_name(group, &unit.type_, unit.wave);
            let w = ctx.workflows.get(&ObjectRef::new(&name).within(&ns))?;
            // Only one it made, as it made it: a Workflow someone else made under its name (an
            // ownerReference is a claim anyone can write) or changed since is not its own.
            (write::controlled_by(&*w, &uid) && group_signed(&w))
                .then(|| (unit.key(), ObservedWorkflow::of(&w)))
        })
        .collect();
    if !old.phase.is_some_and(Phase::is_finished) {
        recorded_but_missing(old, workflows_api, &uid, &mut workflows).await?;
    }
    Ok(workflows)
}

/// Sets the group's `spec.paused`.
async fn pause(groups: &Api<WorkflowGroup>, group: &WorkflowGroup) -> Result<()> {
    // The operator pauses, not whoever asked for something last: their name goes.
    let patch = serde_json::json!({
        "metadata": {"annotations": {crate::api::ANNOTATION_REQUESTED_BY: null}},
        "spec": {"paused": true},
    });
    groups
        .patch(
            &group.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(Error::Kube)?;
    Ok(())
}

/// Carries out the plan's create or re-run: the locks on its targets first, then the write.
async fn carry_out(
    ctx: &Context,
    group: &WorkflowGroup,
    plan: &GroupPlan,
    workflows: &BTreeMap<String, ObservedWorkflow>,
    api: &Api<Workflow>,
) -> Result<Attempt> {
    let targets = match lock_wish(plan, workflows) {
        LockWish::Take(targets) => targets,
        LockWish::TakeBack { workflows } => return take_back(ctx, group, &workflows, api).await,
        _ => return Ok(Attempt::Done),
    };
    let acquired = ctx.locks.acquire(group, targets, waiting_for).await;
    if let Acquired::Waiting(message) = acquired.map_err(Error::Kube)? {
        return Ok(Attempt::Locked(message));
    }
    if let Some(workflow) = &plan.create {
        let uid = group.uid().unwrap_or_default();
        match create_signed(ctx, api, workflow, &uid).await {
            Ok(()) => {
                info!(workflow = %workflow.name_any(), type_name = %workflow.spec.type_, "created workflow");
            }
            Err(Error::NameTaken { .. }) => return Ok(Attempt::NameTaken),
            Err(Error::Kube(kube::Error::Api(e))) if e.code == 422 => {
                return Ok(Attempt::Refused(e.message));
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
            "targets": patch.rerun.targets,
        }}});
        api.patch(
            &patch.workflow,
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await
        .map_err(Error::Kube)?;
        info!(workflow = %patch.workflow, run = patch.rerun.run, "asked workflow to run again");
    }
    Ok(Attempt::Done)
}

/// Takes the locks of the group's current targets again for its `workflows`, whose locks it
/// gave away and of which a step would start; then lets them go on.
async fn take_back(
    ctx: &Context,
    group: &WorkflowGroup,
    workflows: &[&str],
    api: &Api<Workflow>,
) -> Result<Attempt> {
    let acquired = ctx
        .locks
        .acquire(group, current_targets(group), waiting_for)
        .await;
    if let Acquired::Waiting(message) = acquired.map_err(Error::Kube)? {
        return Ok(Attempt::Locked(message));
    }
    set_awaiting_locks(api, workflows, false).await?;
    info!(workflows = %workflows.join(", "), "took the locks again");
    Ok(Attempt::Done)
}

/// Gives the group's locks to a group in line for them once its `idle` Workflows have waited
/// with nothing running since `since` for longer than the lock configuration allows. The
/// Workflows are marked `spec.awaitingLocks` first, so that none starts a step without them;
/// the locks go in a later reconcile, once they have seen it. The Event that says so.
async fn give_way(
    ctx: &Context,
    group: &WorkflowGroup,
    idle: &[String],
    since: Timestamp,
    api: &Api<Workflow>,
    now: Timestamp,
) -> Result<Option<Transition>> {
    let waited = now.as_second() - since.as_second();
    let bound = i64::try_from(ctx.locks.config().idle.as_secs()).unwrap_or(i64::MAX);
    if waited < bound || ctx.locks.steps_running(group) {
        return Ok(None);
    }
    let Some(other) = ctx.locks.waited_for_by(group) else {
        return Ok(None);
    };
    let names: Vec<&str> = idle.iter().map(String::as_str).collect();
    set_awaiting_locks(api, &names, true).await?;
    info!(to = %other, workflows = %names.join(", "), "giving locks to a waiting group");
    Ok(Some(Transition::normal(
        reason::GAVE_WAY,
        format!(
            "gave the locks of its targets to group {other}, which waits for them: workflow {} has waited {waited}s with nothing running; they are taken again, first come first served, before a step starts",
            names.join(", ")
        ),
    )))
}

/// Sets (or clears) `spec.awaitingLocks` on the group's Workflows named.
async fn set_awaiting_locks(api: &Api<Workflow>, names: &[&str], awaiting: bool) -> Result<()> {
    let value = if awaiting {
        serde_json::Value::Bool(true)
    } else {
        serde_json::Value::Null
    };
    let patch = serde_json::json!({"spec": {"awaitingLocks": value}});
    for name in names {
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(Error::Kube)?;
    }
    Ok(())
}

/// Creates `workflow`, signed as made by the group `uid`. One of its name that exists counts
/// as created only when it carries that signature for what it is (an earlier reconcile made it
/// and the status write was lost); otherwise [`Error::NameTaken`].
async fn create_signed(
    ctx: &Context,
    api: &Api<Workflow>,
    workflow: &Workflow,
    uid: &str,
) -> Result<()> {
    let mut workflow = workflow.clone();
    ctx.provenance.sign_workflow(&mut workflow, uid);
    write::create_or_accept(api, &workflow, |existing| {
        write::controlled_by(existing, uid) && ctx.provenance.workflow_is_ours(existing, uid)
    })
    .await
}

/// Gives back the group's locks unless something of it still acts (a Workflow of its own, or
/// a step pod still running after its Workflow failed); true when that is so and it must look
/// again later.
async fn give_back(ctx: &Context, group: &WorkflowGroup, acting: bool) -> Result<bool> {
    let uid = group.uid().unwrap_or_default();
    if ctx.locks.held_by(&uid).is_empty() {
        return Ok(false);
    }
    if acting || ctx.locks.steps_running(group) {
        return Ok(true);
    }
    ctx.locks.release_taken(&uid).await.map_err(Error::Kube)?;
    Ok(false)
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

    fn why_missing(&self, type_name: &str) -> Option<String> {
        let problem = self.registry.problem_for(type_name)?;
        Some(format!("{}: {}", problem.file, problem.message()))
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

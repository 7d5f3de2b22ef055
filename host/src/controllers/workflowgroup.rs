//! The WorkflowGroup controller: creates a group's Workflows in order, each after the previous
//! one completed, and fails the group with the first Workflow that fails.
//!
//! Workflow names are deterministic (group, type, group UID), so creation is idempotent: a
//! crash between creating a Workflow and writing the group's status finds the Workflow again
//! instead of making a second one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use tracing::{info, warn};

use super::{Context, Error, Result, Transition, set_condition, succeeded_condition};
use crate::api::{
    CONDITION_SUCCEEDED, LABEL_GROUP_NAME, Workflow, WorkflowGroup, WorkflowGroupStatus,
    WorkflowReference, phase,
};
use crate::graph::check_dns_label;
use crate::render::{render_workflow, type_params};

/// A Workflow of the group, as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedWorkflow {
    pub name: String,
    /// Its phase, `Pending` until its controller says otherwise.
    pub phase: String,
    /// Its `Succeeded` condition's message.
    pub message: String,
}

/// What the registry says about a workflow type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginState {
    /// No plugin of this type is loaded.
    Missing,
    /// Loaded; the group's params for it are valid, or why not.
    Loaded(Result<(), String>),
}

/// What the WorkflowGroup controller decided for one reconcile.
#[derive(Debug, Default, PartialEq)]
pub struct GroupPlan {
    /// The status to write.
    pub status: WorkflowGroupStatus,
    /// The workflow type whose Workflow to create now.
    pub create: Option<String>,
    /// Events to publish.
    pub events: Vec<Transition>,
}

/// Decides what to do with `group`, given its Workflows by type and a way to ask about the
/// plugin of a type. `plugin_state` is asked only for the types due to be checked now (a
/// params check is a sandboxed plugin call, so a running group does not pay for it on every
/// reconcile).
///
/// Pure: no I/O, so the whole state machine is tested without a cluster.
pub fn plan_group(
    group: &WorkflowGroup,
    workflows: &BTreeMap<String, ObservedWorkflow>,
    plugin_state: &dyn Fn(&str) -> PluginState,
    now: Timestamp,
) -> GroupPlan {
    let old = group.status.clone().unwrap_or_default();
    let mut plan = GroupPlan::default();
    if old.phase.as_deref().is_some_and(phase::is_finished) {
        plan.status = old;
        return plan;
    }
    let generation = group.metadata.generation;
    let mut status = old.clone();
    status.observed_generation = generation;
    status.start_time.get_or_insert(Time(now));
    let types = &group.spec.workflow_steps;

    status.workflows = types
        .iter()
        .filter_map(|t| {
            workflows.get(t).map(|w| WorkflowReference {
                name: w.name.clone(),
                type_: t.clone(),
                status: w.phase.clone(),
            })
        })
        .collect();
    let completed = status
        .workflows
        .iter()
        .filter(|w| w.status == phase::COMPLETED)
        .count();
    status.progress = Some(format!("{completed}/{}", types.len()));
    let started = !status.workflows.is_empty();

    let wait = |status: &mut WorkflowGroupStatus,
                reason: &str,
                message: String,
                events: &mut Vec<Transition>| {
        status.phase = Some(
            if started {
                phase::RUNNING
            } else {
                phase::PENDING
            }
            .into(),
        );
        let changed = !old
            .conditions
            .iter()
            .any(|c| c.type_ == CONDITION_SUCCEEDED && c.reason == reason && c.message == message);
        if changed && reason != "Running" {
            events.push(Transition::warning(reason, message.clone()));
        }
        set_condition(
            &mut status.conditions,
            succeeded_condition("Unknown", reason, &message, generation, now),
        );
    };

    if let Some(problem) = spec_problem(group) {
        wait(&mut status, "InvalidSpec", problem, &mut plan.events);
        plan.status = status;
        return plan;
    }

    // Before anything starts, every type must be runnable: don't begin what cannot finish.
    // Once started, the next type is checked when its turn comes.
    let all_done = workflows.values().all(|w| w.phase == phase::COMPLETED);
    let due: Vec<&String> = if !started {
        types.iter().collect()
    } else if all_done {
        types
            .iter()
            .filter(|t| !workflows.contains_key(*t))
            .take(1)
            .collect()
    } else {
        Vec::new()
    };
    let states: Vec<(&String, PluginState)> =
        due.into_iter().map(|t| (t, plugin_state(t))).collect();
    let missing: Vec<&str> = states
        .iter()
        .filter(|(_, state)| *state == PluginState::Missing)
        .map(|(t, _)| t.as_str())
        .collect();
    let invalid: Vec<String> = states
        .iter()
        .filter_map(|(t, state)| match state {
            PluginState::Loaded(Err(e)) => Some(format!("spec.params.{t}: {e}")),
            _ => None,
        })
        .collect();
    if !missing.is_empty() {
        let message = format!(
            "no plugin is loaded for workflow type{} {}; the group starts when {} added to the plugin directory",
            if missing.len() > 1 { "s" } else { "" },
            missing
                .iter()
                .map(|t| format!("{t:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            if missing.len() > 1 {
                "they are"
            } else {
                "it is"
            },
        );
        wait(&mut status, "PluginMissing", message, &mut plan.events);
        plan.status = status;
        return plan;
    }
    if !invalid.is_empty() {
        wait(
            &mut status,
            "InvalidParams",
            invalid.join("; "),
            &mut plan.events,
        );
        plan.status = status;
        return plan;
    }

    for t in types {
        match workflows.get(t) {
            Some(w) if w.phase == phase::COMPLETED => continue,
            Some(w) if w.phase == phase::FAILED => {
                let message = format!("workflow {} ({t}) failed: {}", w.name, w.message);
                status.phase = Some(phase::FAILED.into());
                status.completion_time.get_or_insert(Time(now));
                set_condition(
                    &mut status.conditions,
                    succeeded_condition("False", "WorkflowFailed", &message, generation, now),
                );
                plan.events
                    .push(Transition::warning("GroupFailed", message));
                plan.status = status;
                return plan;
            }
            Some(w) => {
                let message = format!("workflow {} ({t}) is {}", w.name, w.phase.to_lowercase());
                wait(&mut status, "Running", message, &mut plan.events);
                plan.status = status;
                return plan;
            }
            None if group.spec.paused => {
                wait(
                    &mut status,
                    "Paused",
                    "paused: no new workflow starts until spec.paused is cleared".into(),
                    &mut plan.events,
                );
                plan.status = status;
                return plan;
            }
            None => {
                plan.create = Some(t.clone());
                status.phase = Some(phase::RUNNING.into());
                let message = format!("starting workflow {t}");
                set_condition(
                    &mut status.conditions,
                    succeeded_condition("Unknown", "Running", &message, generation, now),
                );
                plan.status = status;
                return plan;
            }
        }
    }
    let message = format!("all {} workflows completed", types.len());
    status.phase = Some(phase::COMPLETED.into());
    status.completion_time.get_or_insert(Time(now));
    set_condition(
        &mut status.conditions,
        succeeded_condition("True", "Completed", &message, generation, now),
    );
    plan.events
        .push(Transition::normal("GroupCompleted", message));
    plan.status = status;
    plan
}

/// What is wrong with the group's spec itself, if anything.
fn spec_problem(group: &WorkflowGroup) -> Option<String> {
    let types = &group.spec.workflow_steps;
    if types.is_empty() {
        return Some("spec.workflowSteps is empty: list at least one workflow type".into());
    }
    let mut seen = BTreeSet::new();
    for t in types {
        if let Err(reason) = check_dns_label(t) {
            return Some(format!(
                "spec.workflowSteps: workflow type {t:?} is not a valid name: {reason}"
            ));
        }
        if !seen.insert(t) {
            return Some(format!(
                "spec.workflowSteps: workflow type {t:?} is listed twice"
            ));
        }
    }
    group
        .spec
        .params
        .keys()
        .find(|k| !seen.contains(k))
        .map(|k| format!("spec.params.{k}: {k:?} is not one of spec.workflowSteps"))
}

/// Reconciles one WorkflowGroup.
pub async fn reconcile(group: Arc<WorkflowGroup>, ctx: Arc<Context>) -> Result<Action> {
    let name = group.name_any();
    let ns = group.namespace().ok_or(Error::MissingNamespace)?;
    let status = group.status.clone().unwrap_or_default();
    if status.phase.as_deref().is_some_and(phase::is_finished) {
        return Ok(Action::await_change());
    }
    let groups: Api<WorkflowGroup> = Api::namespaced(ctx.client.clone(), &ns);
    let workflows_api: Api<Workflow> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = group.uid().unwrap_or_default();

    let listed = workflows_api
        .list(&ListParams::default().labels(&format!("{LABEL_GROUP_NAME}={name}")))
        .await
        .map_err(Error::Kube)?;
    let workflows: BTreeMap<String, ObservedWorkflow> = listed
        .items
        .into_iter()
        .filter(|w| {
            w.owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .map(|w| (w.spec.type_.clone(), observe(&w)))
        .collect();

    let plugin_state = |t: &str| match ctx.registry.get(t) {
        None => PluginState::Missing,
        Some(plugin) => PluginState::Loaded(
            plugin
                .validate(&type_params(&group, t))
                .map_err(|e| e.to_string()),
        ),
    };

    let now = Timestamp::now();
    let mut plan = plan_group(&group, &workflows, &plugin_state, now);

    if let Some(type_name) = &plan.create {
        match create_workflow(&group, type_name, &workflows_api, &ctx, now).await {
            Ok(created) => {
                plan.status.workflows.push(WorkflowReference {
                    name: created.clone(),
                    type_: type_name.clone(),
                    status: phase::PENDING.into(),
                });
                plan.events.push(
                    Transition::normal(
                        "WorkflowCreated",
                        format!("created workflow {created} ({type_name})"),
                    )
                    .about(type_name),
                );
            }
            Err(CreateError::Kube(e)) => return Err(Error::Kube(e)),
            Err(CreateError::User(message)) => {
                let reason = "TemplateFailed";
                let first = !status
                    .conditions
                    .iter()
                    .any(|c| c.reason == reason && c.message == message);
                set_condition(
                    &mut plan.status.conditions,
                    succeeded_condition(
                        "Unknown",
                        reason,
                        &message,
                        group.metadata.generation,
                        now,
                    ),
                );
                if plan.status.workflows.is_empty() {
                    plan.status.phase = Some(phase::PENDING.into());
                }
                if first {
                    plan.events.push(Transition::warning(reason, message));
                }
            }
        }
    }

    if plan.status != status {
        let patch = serde_json::json!({ "status": plan.status });
        groups
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(Error::Kube)?;
    }
    for event in &plan.events {
        ctx.publish(&*group, event).await;
    }
    if let Some(p) = &plan.status.phase
        && phase::is_finished(p)
    {
        ctx.metrics.group_finished(p);
        info!(group = %name, namespace = %ns, phase = %p, "group finished");
    }
    Ok(Action::await_change())
}

enum CreateError {
    /// The API failed: retry.
    Kube(kube::Error),
    /// The plugin or the group is at fault: tell the user.
    User(String),
}

/// Renders and creates the Workflow of `type_name`; returns its name. An existing Workflow of
/// that name (an earlier create whose status write was lost) counts as created.
async fn create_workflow(
    group: &WorkflowGroup,
    type_name: &str,
    api: &Api<Workflow>,
    ctx: &Context,
    now: Timestamp,
) -> Result<String, CreateError> {
    let plugin = ctx.registry.get(type_name).ok_or_else(|| {
        CreateError::User(format!(
            "no plugin is loaded for workflow type {type_name:?}"
        ))
    })?;
    let workflow = render_workflow(group, &plugin, now.as_second()).map_err(|e| {
        CreateError::User(format!(
            "plugin {type_name} could not template the workflow: {e}"
        ))
    })?;
    let name = workflow.name_any();
    match api.create(&PostParams::default(), &workflow).await {
        Ok(_) => {
            info!(group = %group.name_any(), workflow = %name, %type_name, "created workflow");
            Ok(name)
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let existing = api.get(&name).await.map_err(CreateError::Kube)?;
            let uid = group.uid().unwrap_or_default();
            if existing.owner_references().iter().any(|o| o.uid == uid) {
                Ok(name)
            } else {
                warn!(workflow = %name, "a workflow of that name exists and is not ours");
                Err(CreateError::User(format!(
                    "a Workflow named {name} already exists and does not belong to this group"
                )))
            }
        }
        Err(e) => Err(CreateError::Kube(e)),
    }
}

fn observe(workflow: &Workflow) -> ObservedWorkflow {
    let status = workflow.status.as_ref();
    ObservedWorkflow {
        name: workflow.name_any(),
        phase: status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| phase::PENDING.into()),
        message: status
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == CONDITION_SUCCEEDED))
            .map(|c| c.message.clone())
            .unwrap_or_default(),
    }
}

/// Logs a reconcile error; the controller retries it with backoff. A conflict is a race with
/// another writer, retried at once and not counted as a failure.
pub fn error_policy(group: Arc<WorkflowGroup>, error: &Error, ctx: Arc<Context>) -> Action {
    if error.is_conflict() {
        tracing::debug!(group = %group.name_any(), %error, "conflict, retrying");
    } else {
        warn!(group = %group.name_any(), namespace = ?group.namespace(), %error, "reconcile failed");
        ctx.metrics.reconcile_failed("workflowgroup");
    }
    Action::requeue(error.backoff())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> WorkflowGroup {
        let mut group: WorkflowGroup =
            serde_yaml::from_str(include_str!("../../../examples/workflowgroup-sample.yaml"))
                .unwrap();
        group.metadata.uid = Some("uid-g".into());
        group.metadata.generation = Some(1);
        group
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn all_loaded() -> BTreeMap<String, PluginState> {
        ["pre-check", "setup", "post-check"]
            .into_iter()
            .map(|t| (t.to_string(), PluginState::Loaded(Ok(()))))
            .collect()
    }

    fn lookup(plugins: &BTreeMap<String, PluginState>) -> impl Fn(&str) -> PluginState + '_ {
        |t| plugins.get(t).cloned().unwrap_or(PluginState::Missing)
    }

    fn observed(entries: &[(&str, &str)]) -> BTreeMap<String, ObservedWorkflow> {
        entries
            .iter()
            .map(|(t, p)| {
                (
                    t.to_string(),
                    ObservedWorkflow {
                        name: format!("wf-{t}"),
                        phase: p.to_string(),
                        message: "step x failed: boom".into(),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn a_new_group_creates_only_its_first_workflow() {
        let plan = plan_group(&sample(), &BTreeMap::new(), &lookup(&all_loaded()), now());
        assert_eq!(plan.create.as_deref(), Some("pre-check"));
        assert_eq!(plan.status.phase.as_deref(), Some(phase::RUNNING));
        assert_eq!(plan.status.progress.as_deref(), Some("0/3"));
    }

    #[test]
    fn the_next_workflow_waits_for_the_previous_to_complete() {
        let plan = plan_group(
            &sample(),
            &observed(&[("pre-check", "Running")]),
            &lookup(&all_loaded()),
            now(),
        );
        assert_eq!(plan.create, None);
        let plan = plan_group(
            &sample(),
            &observed(&[("pre-check", "Completed")]),
            &lookup(&all_loaded()),
            now(),
        );
        assert_eq!(plan.create.as_deref(), Some("setup"));
        assert_eq!(plan.status.workflows.len(), 1);
        assert_eq!(plan.status.progress.as_deref(), Some("1/3"));
    }

    #[test]
    fn the_first_failed_workflow_fails_the_group_and_nothing_more_is_created() {
        let plan = plan_group(
            &sample(),
            &observed(&[("pre-check", "Completed"), ("setup", "Failed")]),
            &lookup(&all_loaded()),
            now(),
        );
        assert_eq!(plan.create, None);
        assert_eq!(plan.status.phase.as_deref(), Some(phase::FAILED));
        let cond = &plan.status.conditions[0];
        assert_eq!(cond.status, "False");
        assert!(
            cond.message.contains("wf-setup") && cond.message.contains("boom"),
            "{}",
            cond.message
        );
    }

    #[test]
    fn all_completed_completes_the_group() {
        let plan = plan_group(
            &sample(),
            &observed(&[
                ("pre-check", "Completed"),
                ("setup", "Completed"),
                ("post-check", "Completed"),
            ]),
            &lookup(&all_loaded()),
            now(),
        );
        assert_eq!(plan.status.phase.as_deref(), Some(phase::COMPLETED));
        assert_eq!(plan.status.progress.as_deref(), Some("3/3"));
        assert!(plan.events.iter().any(|e| e.reason == "GroupCompleted"));
    }

    #[test]
    fn a_missing_plugin_keeps_a_new_group_pending_naming_the_type() {
        let mut plugins = all_loaded();
        plugins.insert("post-check".into(), PluginState::Missing);
        let plan = plan_group(&sample(), &BTreeMap::new(), &lookup(&plugins), now());
        assert_eq!(plan.create, None);
        assert_eq!(plan.status.phase.as_deref(), Some(phase::PENDING));
        let cond = &plan.status.conditions[0];
        assert_eq!(
            (cond.status.as_str(), cond.reason.as_str()),
            ("Unknown", "PluginMissing")
        );
        assert!(cond.message.contains("\"post-check\""), "{}", cond.message);
    }

    #[test]
    fn invalid_params_keep_the_group_pending_with_the_plugins_message() {
        let mut plugins = all_loaded();
        plugins.insert(
            "setup".into(),
            PluginState::Loaded(Err("missing field `version`".into())),
        );
        let plan = plan_group(&sample(), &BTreeMap::new(), &lookup(&plugins), now());
        assert_eq!(plan.create, None);
        assert_eq!(plan.status.conditions[0].reason, "InvalidParams");
        assert!(
            plan.status.conditions[0]
                .message
                .contains("spec.params.setup: missing field `version`")
        );
    }

    #[test]
    fn a_paused_group_creates_nothing_and_resumes_when_unpaused() {
        let mut group = sample();
        group.spec.paused = true;
        let plan = plan_group(
            &group,
            &observed(&[("pre-check", "Completed")]),
            &lookup(&all_loaded()),
            now(),
        );
        assert_eq!(plan.create, None);
        assert_eq!(plan.status.conditions[0].reason, "Paused");
        group.spec.paused = false;
        let plan = plan_group(
            &group,
            &observed(&[("pre-check", "Completed")]),
            &lookup(&all_loaded()),
            now(),
        );
        assert_eq!(plan.create.as_deref(), Some("setup"));
    }

    #[test]
    fn a_type_listed_twice_or_params_for_an_unknown_type_is_an_invalid_spec() {
        let mut group = sample();
        group.spec.workflow_steps.push("setup".into());
        let plan = plan_group(&group, &BTreeMap::new(), &lookup(&all_loaded()), now());
        assert_eq!(plan.status.conditions[0].reason, "InvalidSpec");
        assert!(plan.status.conditions[0].message.contains("listed twice"));

        let mut group = sample();
        group
            .spec
            .params
            .insert("nope".into(), serde_json::json!({}));
        let plan = plan_group(&group, &BTreeMap::new(), &lookup(&all_loaded()), now());
        assert_eq!(plan.status.conditions[0].reason, "InvalidSpec");
        assert!(
            plan.status.conditions[0]
                .message
                .contains("spec.params.nope")
        );
    }

    #[test]
    fn a_finished_group_is_left_alone() {
        let mut group = sample();
        group.status = Some(WorkflowGroupStatus {
            phase: Some(phase::COMPLETED.into()),
            ..Default::default()
        });
        let plan = plan_group(&group, &BTreeMap::new(), &lookup(&all_loaded()), now());
        assert_eq!(plan.create, None);
        assert_eq!(plan.status, group.status.clone().unwrap());
    }
}

//! The plans of a Workflow whose steps need not be looked at.

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::WorkflowPlan;
use super::conclusion::finish;
use crate::api::{ANNOTATION_PLUGIN_DIGEST, ConditionStatus, Phase, Workflow, WorkflowStatus};
use crate::controllers::reason;
use crate::controllers::status::{
    Transition, derive_kstatus_conditions, set_succeeded, succeeded_condition,
};

/// Which plugin version judges a Workflow: it is pinned for the workflow's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginChoice {
    /// The version with this digest: the one recorded in status, else the one that templated
    /// the workflow (annotation).
    Pinned(String),
    /// A Workflow made by hand: whichever version is loaded now (then recorded in status).
    Current,
}

/// Which plugin version judges `workflow`.
pub fn plugin_choice(workflow: &Workflow) -> PluginChoice {
    let recorded = workflow
        .status
        .as_ref()
        .and_then(|s| s.plugin.as_ref())
        .map(|p| p.digest.clone());
    match recorded.or_else(|| {
        workflow
            .annotations()
            .get(ANNOTATION_PLUGIN_DIGEST)
            .cloned()
    }) {
        Some(digest) => PluginChoice::Pinned(digest),
        None => PluginChoice::Current,
    }
}

/// The plan of a Workflow that names a group as its controller but carries no signature of
/// that group for what it is now: it was made by someone else, or changed after its group
/// made it. It fails, naming why; none of its steps runs, and its group does not count it.
pub fn plan_not_made_by_group(workflow: &Workflow, now: Timestamp) -> WorkflowPlan {
    let old = workflow.status.clone().unwrap_or_default();
    if old.phase.is_some_and(|p| p.is_finished()) {
        return WorkflowPlan {
            status: old,
            ..WorkflowPlan::default()
        };
    }
    let message = "this Workflow names a WorkflowGroup as its controller, but that group did not make it as it is now (it was made by someone else, or its spec was changed since): none of its steps runs".to_string();
    let mut status = old;
    status.observed_generation = workflow.metadata.generation;
    finish(
        &mut status,
        Phase::Failed,
        reason::NOT_MADE_BY_GROUP,
        &message,
        now,
    );
    WorkflowPlan {
        status,
        events: vec![Transition::warning(reason::NOT_MADE_BY_GROUP, message)],
        ..WorkflowPlan::default()
    }
}

/// The plan when the chosen plugin is not loaded: the workflow waits (Pending, or where it
/// was) with a condition naming the version it needs. The registry's change notification
/// reconciles it again when plugins change.
pub fn plan_plugin_missing(
    workflow: &Workflow,
    choice: &PluginChoice,
    now: Timestamp,
) -> WorkflowPlan {
    let type_ = &workflow.spec.type_;
    let message = match choice {
        PluginChoice::Pinned(digest) => format!(
            "the plugin version this workflow was started with ({type_} sha256:{short}) is not loaded; load that version again (or delete the workflow to start over)",
            short = digest.chars().take(12).collect::<String>()
        ),
        PluginChoice::Current => format!(
            "no plugin is loaded for workflow type {type_:?}; add {type_}.wasm to the plugin directory"
        ),
    };
    let old = workflow.status.clone().unwrap_or_default();
    let mut status = old.clone();
    status.phase.get_or_insert(Phase::Pending);
    status.observed_generation = workflow.metadata.generation;
    set_succeeded(
        &mut status.conditions,
        succeeded_condition(
            ConditionStatus::Unknown,
            reason::PLUGIN_MISSING,
            &message,
            workflow.metadata.generation,
            now,
        ),
    );
    let events = if status != old {
        vec![Transition::warning(reason::PLUGIN_MISSING, message)]
    } else {
        Vec::new()
    };
    WorkflowPlan {
        status,
        events,
        ..WorkflowPlan::default()
    }
}

/// Whether [`plan_finished`] would write `status` (its conditions are not all derived yet).
pub fn plan_finished_writes(status: &WorkflowStatus) -> bool {
    let mut conditions = status.conditions.clone();
    derive_kstatus_conditions(&mut conditions);
    conditions != status.conditions
}

/// The plan for a finished workflow: nothing moves after the end; one that finished before the
/// conditions GitOps tools read existed gets them.
pub fn plan_finished(workflow: &Workflow) -> WorkflowPlan {
    let mut status = workflow.status.clone().unwrap_or_default();
    derive_kstatus_conditions(&mut status.conditions);
    WorkflowPlan {
        status,
        ..WorkflowPlan::default()
    }
}

//! A finished Workflow started again in its group's next run.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;

use super::WorkflowPlan;
use crate::api::{
    ConditionStatus, Phase, RerunFrom, RerunTargets, Step, StepDetail, Workflow, WorkflowStatus,
    rerun_pending,
};
use crate::controllers::reason;
use crate::controllers::status::{Transition, set_succeeded, succeeded_condition};

/// Sets the steps of `again` Pending with nothing of their earlier attempts, each narrowed to
/// the targets it failed on when `targets` says so: those narrowed (`<step> on <targets>`).
fn reset(
    status: &mut WorkflowStatus,
    again: &BTreeSet<&str>,
    targets: RerunTargets,
    workflow: &Workflow,
) -> Vec<String> {
    let mut narrowed = Vec::new();
    for name in again {
        status.step_status.insert(name.to_string(), Phase::Pending);
        let before = status.step_details.remove(*name);
        let only = match targets {
            RerunTargets::Failed => before.as_ref().and_then(|d| failed_targets(d, workflow)),
            RerunTargets::All => None,
        };
        if let Some(only) = only {
            narrowed.push(format!("{name} on {}", only.join(", ")));
            let detail = StepDetail {
                only_targets: only,
                ..StepDetail::default()
            };
            status.step_details.insert(name.to_string(), detail);
        }
    }
    narrowed
}

/// The names of the targets of `workflow` its step, which ended as `detail` says, failed on or
/// could not reach, in the Workflow's order; `None` when that is not known for every one (no
/// report, a report cut short, no target named) or they are too many for a pod to carry.
fn failed_targets(detail: &StepDetail, workflow: &Workflow) -> Option<Vec<String>> {
    let report = detail.targets.as_ref()?;
    let named: BTreeSet<&str> = report.problems.iter().map(|p| p.name.as_str()).collect();
    let reported = report.failed.saturating_add(report.unreachable);
    if named.is_empty() || named.len() < reported as usize {
        return None;
    }
    let only: Vec<&crate::api::Target> = workflow
        .spec
        .targets
        .iter()
        .filter(|t| named.contains(t.name.as_str()))
        .collect();
    let fits = serde_json::to_string(&only)
        .is_ok_and(|j| j.len() <= crate::controllers::workflow::pod::MAX_TARGETS_IN_POD);
    (fits && only.len() == named.len()).then(|| only.iter().map(|t| t.name.clone()).collect())
}

/// The plan that starts a finished workflow again in its group's run `spec.rerun.run`: the steps
/// to run again go back to Pending (with nothing of their earlier attempts), the others keep
/// what they had. Which ones: those that did not complete (`from: Failed`) or all (`All`), the
/// completed steps named, and the steps their plugin says must follow any of these
/// (`rerunWith`). `None` when nothing is pending.
pub fn plan_rerun(workflow: &Workflow, now: Timestamp) -> Option<WorkflowPlan> {
    if !rerun_pending(workflow) {
        return None;
    }
    let rerun = workflow.spec.rerun.as_ref()?;
    let old = workflow.status.clone().unwrap_or_default();
    let steps = &workflow.spec.steps;
    let by_name: BTreeMap<&str, &Step> = steps.iter().map(|s| (s.name.as_str(), s)).collect();
    let mut again: BTreeSet<&str> = steps
        .iter()
        .filter(|s| {
            rerun.from == RerunFrom::All
                || old.step_status.get(&s.name) != Some(&Phase::Completed)
                || rerun.steps.contains(&s.name)
        })
        .map(|s| s.name.as_str())
        .collect();
    let mut queue: Vec<&str> = again.iter().copied().collect();
    while let Some(name) = queue.pop() {
        for next in by_name.get(name).into_iter().flat_map(|s| &s.rerun_with) {
            if let Some((known, _)) = by_name.get_key_value(next.as_str())
                && again.insert(known)
            {
                queue.push(known);
            }
        }
    }
    let mut status = old.clone();
    status.run = Some(rerun.run);
    status.observed_generation = workflow.metadata.generation;
    if again.is_empty() {
        // Nothing of it runs again: it stays as it ended, in the new run.
        return Some(WorkflowPlan {
            status,
            ..WorkflowPlan::default()
        });
    }
    let narrowed = reset(&mut status, &again, rerun.targets, workflow);
    let done = status
        .step_status
        .values()
        .filter(|p| **p == Phase::Completed)
        .count();
    status.progress = Some(format!("{done}/{}", steps.len()));
    status.phase = Some(Phase::Running);
    status.completion_time = None;
    let kept: Vec<&str> = steps
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| !again.contains(n))
        .collect();
    let mut message = format!(
        "run {}: running {} again",
        rerun.run,
        again.iter().copied().collect::<Vec<_>>().join(", ")
    );
    if !narrowed.is_empty() {
        message.push_str(&format!("; only where it failed: {}", narrowed.join("; ")));
    }
    if !kept.is_empty() {
        message.push_str(&format!("; kept as completed: {}", kept.join(", ")));
    }
    set_succeeded(
        &mut status.conditions,
        succeeded_condition(
            ConditionStatus::Unknown,
            reason::RERUNNING,
            &message,
            workflow.metadata.generation,
            now,
        ),
    );
    Some(WorkflowPlan {
        status,
        events: vec![Transition::normal(reason::RERUNNING, message).once()],
        ..WorkflowPlan::default()
    })
}

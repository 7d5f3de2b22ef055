//! The Workflow's status, pods, phase and reason from the decisions about its steps.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use workflow_model::text;

use crate::controllers::workflow::pod::build_pod;

use super::{Decided, MIN_REQUEUE, StepPod, WorkflowPlan};
use crate::api::{ConditionStatus, Phase, StepDetail, Workflow, WorkflowStatus, fmt_time};
use crate::controllers::context::StepDefaults;
use crate::controllers::reason;
use crate::controllers::status::{Transition, set_succeeded, succeeded, succeeded_condition};

/// The workflow's status, pods and events from the decisions about its steps.
pub(super) fn summarize(
    workflow: &Workflow,
    mut plan: WorkflowPlan,
    decided: Decided<'_>,
    defaults: &StepDefaults,
    now: Timestamp,
) -> WorkflowPlan {
    let steps = &decided.steps;
    let effects = || steps.iter().map(|(_, d)| &d.effects);
    plan.create = steps
        .iter()
        .filter_map(|(name, d)| {
            let attempt = d.effects.start?;
            let step = workflow.spec.steps.iter().find(|s| s.name == *name)?;
            Some(StepPod {
                step: name.to_string(),
                attempt,
                pod: build_pod(workflow, step, attempt, defaults),
                ready_since: d.effects.ready_since,
            })
        })
        .collect();
    plan.stop = effects().filter_map(|e| e.stop.clone()).collect();
    plan.events = effects().filter_map(|e| e.event.clone()).collect();
    plan.unavailable = effects().find_map(|e| e.unavailable.clone());
    plan.refused = steps.iter().find_map(|(name, d)| {
        let why = d.effects.refused.as_ref()?;
        Some(format!("step {name} waits: its pod was refused: {why}"))
    });
    plan.requeue_after = effects().filter_map(|e| e.wake_at).min().map(|t| {
        let wait = Duration::from_secs((t - now.as_second()).max(0).unsigned_abs());
        wait.max(MIN_REQUEUE)
    });
    let state = WorkflowState {
        failure: effects().find_map(|e| e.failure.clone()),
        scheduled: effects().filter_map(|e| e.scheduled).min(),
        approval: effects().find_map(|e| e.approval.clone()),
        total: steps.len(),
        done: steps
            .iter()
            .filter(|(_, d)| d.phase == Phase::Completed)
            .count(),
        running: !plan.create.is_empty() || steps.iter().any(|(_, d)| d.phase != Phase::Pending),
        awaiting_locks: effects().any(|e| e.awaiting_locks),
    };
    plan.status.step_status = steps
        .iter()
        .map(|(name, d)| (name.to_string(), d.phase))
        .collect();
    plan.status.step_details = decided
        .steps
        .into_iter()
        .map(|(name, d)| (name.to_string(), inert(d.detail)))
        .collect();
    plan.status.progress = Some(format!("{}/{}", state.done, state.total));
    conclude(workflow, plan, state, now)
}

/// A step's detail as its status shows it: what the step, its targets and its plugin said
/// (its message, each target's name and reason, the approval's reason) with control characters
/// escaped, so that `kubectl get -o yaml`, `describe` and `workflow-operator get` print it
/// inert. Escaping is idempotent: a status read back is written the same.
fn inert(mut detail: StepDetail) -> StepDetail {
    let escape = |s: &mut String| *s = text::escape_controls(s).into_owned();
    if let Some(message) = detail.message.as_mut() {
        escape(message);
    }
    if let Some(report) = detail.targets.as_mut() {
        for problem in &mut report.problems {
            escape(&mut problem.name);
            escape(&mut problem.reason);
        }
    }
    if let Some(approval) = detail.approval.as_mut() {
        escape(&mut approval.reason);
    }
    detail
}

/// What the steps say of the workflow as a whole.
struct WorkflowState {
    /// The first step failure, in dependency order.
    failure: Option<String>,
    /// The earliest time a gate holds a step until.
    scheduled: Option<i64>,
    /// What the first step that waits for approval says.
    approval: Option<String>,
    total: usize,
    done: usize,
    /// Whether a step started (now or before).
    running: bool,
    /// A step would start and waits for its group to hold the locks again.
    awaiting_locks: bool,
}

/// The workflow's phase, condition and final Event from its steps' state: Failed with the
/// first failure, Completed when every step is, else Running or Pending with the reason it
/// waits.
fn conclude(
    workflow: &Workflow,
    mut plan: WorkflowPlan,
    state: WorkflowState,
    now: Timestamp,
) -> WorkflowPlan {
    if let Some(message) = state.failure.clone() {
        let ended = ended_at(&plan.status, Phase::Failed, now);
        finish(
            &mut plan.status,
            Phase::Failed,
            reason::STEP_FAILED,
            &message,
            ended,
        );
        plan.events
            .push(Transition::warning(reason::WORKFLOW_FAILED, message).once());
        return plan;
    }
    if state.done == state.total {
        let message = format!("all {} steps completed", state.total);
        let ended = ended_at(&plan.status, Phase::Completed, now);
        finish(
            &mut plan.status,
            Phase::Completed,
            reason::COMPLETED,
            &message,
            ended,
        );
        plan.events
            .push(Transition::normal(reason::WORKFLOW_COMPLETED, message).once());
        return plan;
    }
    let running = state.running;
    let (why, message) = waiting_reason(workflow, &plan, state);
    plan.status.idle_since = if IDLE.contains(&why) && !running {
        plan.status.idle_since.take().or(Some(Time(now)))
    } else {
        None
    };
    let old_reason = succeeded(&plan.status.conditions).map(|c| c.reason.as_str());
    // A wait that is retried with backoff is said once, not at every retry.
    if [reason::PLUGIN_UNAVAILABLE, reason::POD_REFUSED].contains(&why) && old_reason != Some(why) {
        plan.events.push(Transition::warning(why, message.clone()));
    }
    let old_message = succeeded(&plan.status.conditions).map(|c| c.message.as_str());
    if why == reason::WAITING_FOR_APPROVAL && old_message != Some(message.as_str()) {
        plan.events.push(Transition::normal(why, message.clone()));
    }
    plan.status.phase = Some(if running {
        Phase::Running
    } else {
        Phase::Pending
    });
    set_succeeded(
        &mut plan.status.conditions,
        succeeded_condition(
            ConditionStatus::Unknown,
            why,
            &message,
            workflow.metadata.generation,
            now,
        ),
    );
    plan
}

/// When the steps that end the workflow in `phase` ended: the latest `finishedAt` of its
/// steps in that phase (to the second, as recorded), or `now` when one of them has none (a
/// step failed before it had a pod). A reconcile that runs on a Workflow cached before the
/// write of its end concludes the same status, so it writes nothing again.
fn ended_at(status: &WorkflowStatus, phase: Phase, now: Timestamp) -> Timestamp {
    status
        .step_status
        .iter()
        .filter(|(_, p)| **p == phase)
        .map(|(name, _)| {
            let detail = status.step_details.get(name)?;
            detail.finished_at.as_ref().map(|t| t.0)
        })
        .collect::<Option<Vec<_>>>()
        .and_then(|ends| ends.into_iter().max())
        .map_or(now, |ended| ended.min(now))
}

/// The reasons a workflow waits for with nothing started: its group may give its locks to
/// groups waiting for them meanwhile ([`crate::api::WorkflowSpec::awaiting_locks`]).
pub const IDLE: [&str; 3] = [
    reason::WAITING_FOR_SCHEDULE,
    reason::WAITING_FOR_APPROVAL,
    reason::PAUSED,
];

/// Why a workflow that has not finished is where it is: paused, a plugin that cannot answer, a
/// pod refused for now, an approval, a schedule, or running.
fn waiting_reason(
    workflow: &Workflow,
    plan: &WorkflowPlan,
    state: WorkflowState,
) -> (&'static str, String) {
    let WorkflowState {
        scheduled,
        approval,
        total,
        done,
        running,
        awaiting_locks,
        ..
    } = state;
    if workflow.spec.paused {
        (
            reason::PAUSED,
            "paused: no new step starts until spec.paused is cleared".to_string(),
        )
    } else if let Some(error) = &plan.unavailable {
        (
            reason::PLUGIN_UNAVAILABLE,
            format!("{error}; asking again shortly"),
        )
    } else if let Some(why) = &plan.refused {
        (reason::POD_REFUSED, format!("{why}; trying again shortly"))
    } else if awaiting_locks {
        (
            reason::WAITING_FOR_TARGETS,
            "a step is ready: waiting for its group to hold the locks of its targets again (given to waiting groups while this workflow waited)".to_string(),
        )
    } else if let Some(message) = approval {
        (reason::WAITING_FOR_APPROVAL, message)
    } else if let (false, Some(t)) = (running, scheduled) {
        (
            reason::WAITING_FOR_SCHEDULE,
            format!("waiting until {} to start", fmt_time(t)),
        )
    } else {
        (reason::RUNNING, format!("{done}/{total} steps completed"))
    }
}

pub(super) fn finish(
    status: &mut WorkflowStatus,
    to: Phase,
    why: &str,
    message: &str,
    now: Timestamp,
) {
    status.phase = Some(to);
    status.completion_time.get_or_insert(Time(now));
    let condition = if to == Phase::Completed {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    let generation = status.observed_generation;
    set_succeeded(
        &mut status.conditions,
        succeeded_condition(condition, why, message, generation, now),
    );
}

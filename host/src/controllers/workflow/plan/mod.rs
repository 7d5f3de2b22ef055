//! What the Workflow controller decides, as pure functions of the Workflow, the latest
//! attempt of each step and its plugin's answers: tested without a cluster.
//!
//! - this module: the fold of one decision per step ([`plan_workflow`], [`plan_step`]);
//! - [`without_steps`]: the plans that need no step looked at (which plugin version judges
//!   a Workflow, one not made by its group, a plugin missing, a finished Workflow);
//! - [`rerun`]: a finished Workflow started again in its group's next run;
//! - [`conclusion`]: the Workflow's status, pods, phase and reason from its steps' decisions.

mod conclusion;
mod rerun;
mod without_steps;

pub use self::conclusion::IDLE;
use self::conclusion::{finish, summarize};
pub use self::rerun::plan_rerun;
pub use self::without_steps::{
    PluginChoice, plan_finished, plan_finished_writes, plan_not_made_by_group, plan_plugin_missing,
    plugin_choice,
};

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use workflow_model::ApprovalRequest;
use workflow_model::text;

use super::pod::approval_content;
use super::refusal::PodRefusal;
use super::step::{
    Attempt, StepDecision, StepJudge, StepMove, StepView, apply_move, decide_step, locks_move,
    refused_move,
};
use crate::api::{
    ConditionStatus, MAX_STEP_LOG, Phase, PluginRef, Step, StepDetail, Workflow, WorkflowStatus,
    run_of,
};
use crate::approvals::judge::{self as approval, Given, Judged};
use crate::controllers::context::StepDefaults;
use crate::controllers::reason;
use crate::controllers::status::{Transition, set_succeeded, succeeded, succeeded_condition};
use crate::graph::StepGraph;
use crate::names::pod_name;
use crate::plugin::{self, PluginError, StepOutcome};
use crate::render::workflow_context;

/// The shortest wait before looking at a workflow again: a deadline or a schedule just past
/// (clocks of the node and the operator differ a little) is not polled in a tight loop.
const MIN_REQUEUE: Duration = Duration::from_millis(200);

/// What the Workflow controller decided for one reconcile.
#[derive(Debug, Default, PartialEq)]
pub struct WorkflowPlan {
    /// The status to write.
    pub status: WorkflowStatus,
    /// Step pods to create, in dependency order.
    pub create: Vec<StepPod>,
    /// Events to publish.
    pub events: Vec<Transition>,
    /// When to look again even if nothing changes (a gate's schedule, a step's deadline).
    pub requeue_after: Option<Duration>,
    /// A plugin could not answer now: the reconcile is retried with backoff.
    pub unavailable: Option<PluginError>,
    /// A step's pod was refused for now (a full quota): the reconcile is retried with backoff.
    pub refused: Option<String>,
    /// Pods to delete: unfinished past their step's timeout.
    pub stop: Vec<String>,
}

/// A step's attempt to start: its pod.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPod {
    pub step: String,
    /// From 1.
    pub attempt: u32,
    pub pod: Pod,
    /// Since when it could have started (its last dependency, or its previous attempt, seen
    /// finished), when this reconcile saw that happen; for the step start latency.
    pub ready_since: Option<Timestamp>,
}

/// What the Workflow controller observed of a workflow's steps.
#[derive(Debug, Default)]
pub struct Observed {
    /// The latest attempt of each step that has one.
    pub attempts: BTreeMap<String, Attempt>,
    /// The steps whose pod the API server refused in this reconcile, and why.
    pub refused: BTreeMap<String, PodRefusal>,
    /// The Approvals of each step in the workflow's current run that can be trusted.
    pub approvals: BTreeMap<String, Vec<Given>>,
    /// What to say of Approvals that could not be trusted, by step.
    pub approval_notes: BTreeMap<String, String>,
}

/// Decides what to do with `workflow`, given what is observed of its steps, its plugin and the
/// time: a fold of one decision per step, in dependency order ([`plan_step`]), then the
/// workflow's status from them ([`summarize`]).
pub fn plan_workflow(
    workflow: &Workflow,
    observed: &Observed,
    judge: &dyn StepJudge,
    plugin: &PluginRef,
    defaults: &StepDefaults,
    now: Timestamp,
) -> WorkflowPlan {
    let judge = &super::step::WithOperatorSteps {
        plugin: judge,
        workflow,
    };
    let old = workflow.status.clone().unwrap_or_default();
    let mut plan = WorkflowPlan {
        status: old.clone(),
        ..WorkflowPlan::default()
    };
    plan.status.observed_generation = workflow.metadata.generation;
    plan.status.plugin = Some(plugin.clone());
    plan.status.start_time.get_or_insert(Time(now));
    plan.status.run = Some(run_of(workflow)).filter(|r| *r > 1);

    let steps = &workflow.spec.steps;
    let graph = match StepGraph::new(
        steps
            .iter()
            .map(|s| (s.name.as_str(), s.depends_on.iter().map(String::as_str))),
    ) {
        Ok(graph) => graph,
        Err(err) => {
            let message = format!("invalid spec.steps: {err}");
            finish(
                &mut plan.status,
                Phase::Failed,
                reason::INVALID_STEPS,
                &message,
                now,
            );
            plan.events
                .push(Transition::warning(reason::INVALID_STEPS, message));
            return plan;
        }
    };
    let ctx = workflow_context(workflow, now.as_second());
    if params_due_for_check(workflow, &old, &observed.attempts)
        && let Err(error) = judge.validate(&ctx.params)
    {
        return params_refused(workflow, plan, error, now);
    }
    let by_name: BTreeMap<&str, &Step> = steps.iter().map(|s| (s.name.as_str(), s)).collect();
    let decided = graph
        .order()
        .iter()
        .filter_map(|name| by_name.get(name.as_str()))
        .fold(Decided::default(), |mut decided, step| {
            let deps = graph.dependencies(&step.name);
            let inputs = Inputs {
                workflow,
                observed,
                judge,
                defaults,
                ctx: &ctx,
            };
            let decision = plan_step(&inputs, step, deps, &decided);
            decided.push(&step.name, decision);
            decided
        });
    summarize(workflow, plan, decided, defaults, now)
}

/// The steps decided so far, in dependency order.
#[derive(Default)]
struct Decided<'a> {
    steps: Vec<(&'a str, StepDecision)>,
    index: BTreeMap<&'a str, usize>,
}

impl<'a> Decided<'a> {
    fn push(&mut self, name: &'a str, decision: StepDecision) {
        self.index.insert(name, self.steps.len());
        self.steps.push((name, decision));
    }

    fn get(&self, name: &str) -> Option<&StepDecision> {
        self.index.get(name).map(|i| &self.steps[*i].1)
    }

    /// Whether a step decided so far failed for good: nothing new may start.
    fn failed(&self) -> bool {
        self.steps.iter().any(|(_, d)| d.effects.failure.is_some())
    }
}

/// What every step's decision reads: the Workflow, what was observed of it, its plugin, the
/// operator's step defaults and the plugin's view of the group.
struct Inputs<'a> {
    workflow: &'a Workflow,
    observed: &'a Observed,
    judge: &'a dyn StepJudge,
    defaults: &'a StepDefaults,
    ctx: &'a plugin::GroupContext,
}

/// The decision about one step, given the steps before it in dependency order.
fn plan_step(
    inputs: &Inputs<'_>,
    step: &Step,
    deps: &[String],
    decided: &Decided<'_>,
) -> StepDecision {
    let Inputs {
        workflow,
        observed,
        judge,
        ctx,
        ..
    } = *inputs;
    let attempts = &observed.attempts;
    let old = workflow.status.as_ref();
    let name = &step.name;
    let detail = old
        .and_then(|s| s.step_details.get(name))
        .cloned()
        .unwrap_or_default();
    let old_phase = old.and_then(|s| s.step_status.get(name));
    if old_phase == Some(&Phase::Completed) {
        return StepDecision::completed_before(detail);
    }
    let (latest, stop) = old
        .and_then(|s| vanished_attempt(name, s, attempts.get(name)))
        .or_else(|| attempts.get(name).cloned())
        .map_or((None, false), |attempt| {
            let (attempt, stop) = attempt.at(ctx.now);
            (Some(attempt), stop)
        });
    let view = StepView {
        step,
        ready: deps
            .iter()
            .all(|d| decided.get(d).is_some_and(|d| d.phase == Phase::Completed)),
        held: decided.failed() || workflow.spec.paused,
        latest: latest.as_ref(),
    };
    let deps_completed_at = deps_completed_at(deps, decided);
    let mut detail = detail;
    let step_move = match decide_step(view, judge, ctx) {
        StepMove::NeedsApproval(request) => approval_move(inputs, step, &request, &mut detail),
        step_move => step_move,
    };
    let step_move = locks_move(step_move, workflow.spec.awaiting_locks);
    let step_move = refused_move(step_move, name, observed.refused.get(name));
    // The start the status already records, of the attempt it records.
    let recorded_start = detail.started_at.clone().map(|t| (detail.attempts, t));
    let mut decision = apply_move(
        step_move,
        &view,
        detail,
        &|attempt| pod_name(workflow, name, attempt),
        deps_completed_at,
        old_phase == Some(&Phase::Failed),
    );
    if stop && let Some(attempt) = &latest {
        decision.effects.stop = Some(attempt.pod.clone());
    }
    // A step that started after its approvals keeps saying who approved it.
    if latest.is_some()
        && let Some(record) = decision.detail.approval.as_mut()
    {
        let given = observed.approvals.get(name).map_or(&[][..], Vec::as_slice);
        let uid = workflow.metadata.uid.as_deref().unwrap_or_default();
        record.approved_by = approval::approved_by(record, uid, given);
    }
    let now = Timestamp::from_second(ctx.now).unwrap_or(Timestamp::UNIX_EPOCH);
    stamp(&mut decision, latest.as_ref(), recorded_start, now);
    decision
}

/// Since when a step could have started: when this reconcile saw its last dependency finish
/// Completed, if it saw them all.
fn deps_completed_at(deps: &[String], decided: &Decided<'_>) -> Option<Timestamp> {
    deps.iter()
        .map(|d| decided.get(d).and_then(|d| d.effects.completed_at))
        .collect::<Option<Vec<_>>>()
        .and_then(|seen| seen.into_iter().max())
}

/// The move of `step`, whose gate asks for approval (`request`), given the Approvals
/// observed: start, fail (rejected, or not approved in time) or wait. `detail` records where
/// the approval stands and what it approves.
fn approval_move(
    inputs: &Inputs<'_>,
    step: &Step,
    request: &ApprovalRequest,
    detail: &mut StepDetail,
) -> StepMove {
    let (name, now, observed) = (&step.name, inputs.ctx.now, inputs.observed);
    let since = detail
        .approval
        .as_ref()
        .map_or(now, |a| a.since.0.as_second());
    let given = observed.approvals.get(name).map_or(&[][..], Vec::as_slice);
    let (digest, content) = approval_content(inputs.workflow, step, inputs.defaults);
    let asked = approval::Asked {
        workflow_uid: inputs.workflow.metadata.uid.as_deref().unwrap_or_default(),
        digest: &digest,
        content: &content,
    };
    match approval::judge(name, request, asked, since, given, now) {
        Judged::Start(record) => {
            detail.approval = Some(record);
            StepMove::Start
        }
        Judged::Refused(why) => StepMove::Failed(why),
        Judged::Waiting(record, mut message, deadline) => {
            detail.approval = Some(record);
            if let Some(note) = observed.approval_notes.get(name) {
                message.push_str("; ");
                message.push_str(note);
            }
            StepMove::AwaitingApproval(message, deadline)
        }
    }
}

/// When the step's latest attempt started and finished, its exit code and the end of its
/// output: what `workflow-operator get` and `logs` show, once its pod is gone too.
/// `recorded_start` is the attempt and start the status already has: an attempt started again
/// (its pod not in the cache yet) keeps its start, and its status is not written again.
fn stamp(
    decision: &mut StepDecision,
    latest: Option<&Attempt>,
    recorded_start: Option<(u32, Time)>,
    now: Timestamp,
) {
    let detail = &mut decision.detail;
    if let Some(attempt) = decision.effects.start {
        detail.started_at = Some(match recorded_start {
            Some((recorded, at)) if recorded == attempt => at,
            _ => Time(now),
        });
        detail.finished_at = None;
        detail.exit_code = None;
        detail.log = None;
        return;
    }
    // A status read before its start was written (a stale cache) takes the start from the
    // pod: the same second as the start written, so the same status, not another write.
    if detail.started_at.is_none()
        && let Some(created) = latest.and_then(|a| a.created)
    {
        detail.started_at = Some(Time(created));
    }
    let outcome = latest.and_then(|a| a.outcome.as_ref());
    if let (true, None, Some(outcome)) =
        (decision.phase.is_finished(), &detail.finished_at, outcome)
    {
        // To the second, as the API server keeps it: a finer time would differ from the cached
        // copy of what was written, and be written again.
        let finished = latest.and_then(|a| a.observed).unwrap_or(now);
        let finished = Timestamp::from_second(finished.as_second()).unwrap_or(finished);
        detail.finished_at = Some(Time(finished));
        detail.exit_code = outcome.exit_code;
        let message = outcome.message.trim_end();
        detail.log = (!message.is_empty()).then(|| text::printable_tail(message, MAX_STEP_LOG));
    }
}

/// Whether the params must be checked in this reconcile: before any step started (a Workflow
/// applied by hand has had no group check them) and after each change of the spec. A running
/// workflow whose spec is unchanged was checked already.
fn params_due_for_check(
    workflow: &Workflow,
    old: &WorkflowStatus,
    attempts: &BTreeMap<String, Attempt>,
) -> bool {
    let started = !attempts.is_empty()
        || old
            .step_details
            .values()
            .any(|d| d.attempts > 0 || d.pod.is_some());
    !started || old.observed_generation != workflow.metadata.generation
}

/// The plan when the plugin refuses the params (`Failed`, `InvalidParams`, naming
/// `spec.params`) or cannot answer now (`PluginUnavailable`, asked again with backoff).
fn params_refused(
    workflow: &Workflow,
    mut plan: WorkflowPlan,
    error: PluginError,
    now: Timestamp,
) -> WorkflowPlan {
    if error.is_transient() {
        let message = format!("{error}; asking again shortly");
        let old = workflow.status.clone().unwrap_or_default();
        if succeeded(&old.conditions).is_none_or(|c| c.reason != reason::PLUGIN_UNAVAILABLE) {
            plan.events.push(Transition::warning(
                reason::PLUGIN_UNAVAILABLE,
                message.clone(),
            ));
        }
        plan.status.phase.get_or_insert(Phase::Pending);
        set_succeeded(
            &mut plan.status.conditions,
            succeeded_condition(
                ConditionStatus::Unknown,
                reason::PLUGIN_UNAVAILABLE,
                &message,
                workflow.metadata.generation,
                now,
            ),
        );
        plan.unavailable = Some(error);
        return plan;
    }
    let message = format!("spec.params: {error}");
    finish(
        &mut plan.status,
        Phase::Failed,
        reason::INVALID_PARAMS,
        &message,
        now,
    );
    plan.events
        .push(Transition::warning(reason::INVALID_PARAMS, message));
    plan
}

/// The attempt whose pod is gone: the status records that attempt `n` of `step` was started
/// (its pod is created before the status is written), its pod's name and the step Running,
/// but no pod of attempt `n` is observed (the reconcile asks the API server for a pod its
/// cache lacks, so this means gone). It was deleted before it finished: a failed attempt.
fn vanished_attempt(
    step: &str,
    old: &WorkflowStatus,
    observed: Option<&Attempt>,
) -> Option<Attempt> {
    let recorded = old.step_details.get(step)?;
    let pod = recorded.pod.clone()?;
    let running = old.step_status.get(step) == Some(&Phase::Running);
    let seen = observed.map_or(0, |a| a.number);
    (running && recorded.attempts > seen).then(|| Attempt {
        number: recorded.attempts,
        pod,
        created: None,
        outcome: Some(StepOutcome {
            succeeded: false,
            exit_code: None,
            message: "its pod was deleted before it finished".into(),
            attempt: recorded.attempts,
            duration_ms: 0,
            targets: None,
        }),
        deadline: None,
        at_deadline: None,
        observed: None,
    })
}

#[cfg(test)]
mod tests;

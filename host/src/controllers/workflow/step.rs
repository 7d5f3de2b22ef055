//! One step's next move, decided from what is observed of it and what its plugin answers:
//! one step in, one decision out, as the Job controller's `matchPodFailurePolicy` is; and what
//! that move means for the step's phase, its status detail and the workflow's plan.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::refusal::PodRefusal;
use crate::api::{Phase, Step, StepDetail, Workflow, fmt_time};
use crate::controllers::reason;
use crate::controllers::status::Transition;
use crate::operator_steps;
use crate::plugin::{self, Gate, PluginError, StepOutcome, Verdict};

/// How the Workflow controller sees a plugin: the calls it makes about a workflow's params and
/// steps. Implemented by the runtime's `Plugin`; tests give their own.
pub trait StepJudge {
    /// Checks a workflow's params as a group's are checked: the plugin's schema, then its
    /// `validate`.
    fn validate(&self, params: &serde_json::Value) -> Result<(), PluginError>;
    /// Whether `step` may start.
    fn gate(&self, step: &Step, ctx: &plugin::GroupContext) -> Result<Gate, PluginError>;
    /// Judges a finished attempt of `step`.
    fn evaluate(
        &self,
        step: &Step,
        outcome: &StepOutcome,
        ctx: &plugin::GroupContext,
    ) -> Result<Verdict, PluginError>;
}

impl StepJudge for plugin::Plugin {
    fn validate(&self, params: &serde_json::Value) -> Result<(), PluginError> {
        plugin::Plugin::validate(self, params)
    }
    fn gate(&self, step: &Step, ctx: &plugin::GroupContext) -> Result<Gate, PluginError> {
        plugin::Plugin::gate(self, step, ctx)
    }
    fn evaluate(
        &self,
        step: &Step,
        outcome: &StepOutcome,
        ctx: &plugin::GroupContext,
    ) -> Result<Verdict, PluginError> {
        plugin::Plugin::evaluate(self, step, outcome, ctx)
    }
}

/// The plugin's judge, with the operator's steps judged by the operator: they start as soon
/// as they are ready, and complete when their pod succeeded (for the drain's, when every target
/// is done).
pub struct WithOperatorSteps<'a> {
    pub plugin: &'a dyn StepJudge,
    pub workflow: &'a Workflow,
}

impl StepJudge for WithOperatorSteps<'_> {
    fn validate(&self, params: &serde_json::Value) -> Result<(), PluginError> {
        self.plugin.validate(params)
    }

    fn gate(&self, step: &Step, ctx: &plugin::GroupContext) -> Result<Gate, PluginError> {
        if operator_steps::is_operator_step(self.workflow, &step.name) {
            return Ok(Gate::StartNow);
        }
        self.plugin.gate(step, ctx)
    }

    fn evaluate(
        &self,
        step: &Step,
        outcome: &StepOutcome,
        ctx: &plugin::GroupContext,
    ) -> Result<Verdict, PluginError> {
        if operator_steps::is_operator_step(self.workflow, &step.name) {
            return Ok(operator_steps::verdict(outcome));
        }
        self.plugin.evaluate(step, outcome, ctx)
    }
}

/// The latest attempt of a step, as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// From 1.
    pub number: u32,
    /// The pod that runs it.
    pub pod: String,
    /// Its evidence once it has finished; `None` while it runs.
    pub outcome: Option<StepOutcome>,
    /// When it fails if still unfinished (Unix seconds), from the step's timeout.
    pub deadline: Option<i64>,
    /// Its evidence should it still be unfinished at its deadline: `DeadlineExceeded`, with
    /// why its pod still waits (unschedulable, an image that cannot be pulled).
    pub at_deadline: Option<StepOutcome>,
    /// When the operator's watch first delivered it finished (for the step start latency).
    pub observed: Option<Timestamp>,
    /// When its pod was created.
    pub created: Option<Timestamp>,
}

impl Attempt {
    /// The attempt as it stands at `now` (Unix seconds), and whether its pod must be stopped:
    /// one still unfinished at its deadline has failed with its deadline evidence, and its pod
    /// (unschedulable, or stuck pulling its image, so the kubelet's own deadline never fires)
    /// is deleted.
    pub fn at(self, now: i64) -> (Attempt, bool) {
        let overdue = self.outcome.is_none() && self.deadline.is_some_and(|d| now >= d);
        match self.at_deadline.clone().filter(|_| overdue) {
            Some(evidence) => (
                Attempt {
                    outcome: Some(evidence),
                    // It ended then, whenever this reconcile runs.
                    observed: self.deadline.and_then(|d| Timestamp::from_second(d).ok()),
                    deadline: None,
                    at_deadline: None,
                    ..self
                },
                true,
            ),
            None => (self, false),
        }
    }
}

/// What the plan knows of one step when it decides it.
#[derive(Debug, Clone, Copy)]
pub struct StepView<'a> {
    pub step: &'a Step,
    /// Whether every dependency is Completed.
    pub ready: bool,
    /// Whether nothing new may start: another step failed, or the workflow is paused.
    pub held: bool,
    /// The latest attempt, if any started.
    pub latest: Option<&'a Attempt>,
}

/// A step's next move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepMove {
    /// Stays Pending: dependencies not Completed yet, or nothing new may start.
    Wait,
    /// Its gate holds it until this time (Unix seconds).
    Scheduled(i64),
    /// Its gate asks for approval: the plan looks at the Approvals given
    /// ([`super::approval::judge`]).
    NeedsApproval(workflow_model::ApprovalRequest),
    /// It waits for approval: what to tell, and when the wait times out (Unix seconds).
    AwaitingApproval(String, Option<i64>),
    /// Start attempt 1 now.
    Start,
    /// The latest attempt is still running.
    Running,
    /// The latest attempt was judged completed; its message (may be empty).
    Completed(String),
    /// Judged worth another try: start the next attempt now, for this reason.
    Retry(String),
    /// Worth another try, but nothing new may start now.
    RetryHeld(String),
    /// Failed for good; the message names the step and why.
    Failed(String),
    /// The plugin could not answer now (it ran out of time, or could not be started): the
    /// step stays as it is and the question is asked again after a backoff.
    Unanswered(PluginError),
    /// Its pod was to start, and the API server refused it for now (a full quota): the step
    /// stays as it is and its pod is tried again after a backoff.
    Refused(String),
    /// It was to start (or start its next attempt), and its group gave the locks of its
    /// targets away meanwhile (`spec.awaitingLocks`): it waits until the group holds them.
    AwaitingLocks,
}

/// Decides the next move of one step.
pub fn decide_step(
    view: StepView<'_>,
    judge: &dyn StepJudge,
    ctx: &plugin::GroupContext,
) -> StepMove {
    let name = &view.step.name;
    let Some(attempt) = view.latest else {
        if !view.ready || view.held {
            return StepMove::Wait;
        }
        return match judge.gate(view.step, ctx) {
            Ok(Gate::NotBefore(t)) if t > ctx.now => StepMove::Scheduled(t),
            Ok(Gate::NeedsApproval(request)) => StepMove::NeedsApproval(request),
            Ok(_) => StepMove::Start,
            Err(e) if e.is_transient() => StepMove::Unanswered(e),
            Err(e) => StepMove::Failed(format!("step {name}: plugin gate failed: {e}")),
        };
    };
    let Some(outcome) = &attempt.outcome else {
        return StepMove::Running;
    };
    let budget = 1 + view.step.retries.unwrap_or(0);
    match judge.evaluate(view.step, outcome, ctx) {
        Ok(Verdict::Completed) => StepMove::Completed(outcome.message.clone()),
        Ok(Verdict::Retry(reason)) if attempt.number < budget && !view.held => {
            StepMove::Retry(reason)
        }
        Ok(Verdict::Retry(reason)) if attempt.number < budget => StepMove::RetryHeld(reason),
        Ok(Verdict::Retry(reason)) => StepMove::Failed(format!(
            "step {name} failed after {} attempt(s): {reason}",
            attempt.number
        )),
        Ok(Verdict::Failed(reason)) => StepMove::Failed(format!("step {name} failed: {reason}")),
        Err(e) if e.is_transient() => StepMove::Unanswered(e),
        Err(e) => StepMove::Failed(format!("step {name}: plugin could not judge it: {e}")),
    }
}

/// What a step's move does beyond its phase and status detail: what the workflow's plan
/// gathers from every step.
#[derive(Debug, Default)]
pub struct StepEffects {
    /// The attempt to start now.
    pub start: Option<u32>,
    /// For a step that starts: since when it could have (its last dependency, or its previous
    /// attempt, seen finished), when this reconcile saw that happen.
    pub ready_since: Option<Timestamp>,
    /// The pod of an attempt past its deadline, to delete.
    pub stop: Option<String>,
    /// When to look again: an unfinished attempt's deadline, or the time a gate named (Unix
    /// seconds).
    pub wake_at: Option<i64>,
    /// The time its gate named, when that holds it.
    pub scheduled: Option<i64>,
    /// It waits for approval: what the workflow says of it.
    pub approval: Option<String>,
    /// When this reconcile's observations saw it finish Completed.
    pub completed_at: Option<Timestamp>,
    /// It failed for good: the message names the step and why.
    pub failure: Option<String>,
    /// It would start, and waits for its group to hold the locks again.
    pub awaiting_locks: bool,
    /// Its plugin could not answer now.
    pub unavailable: Option<PluginError>,
    /// Its pod was refused for now: why, as the API server said it.
    pub refused: Option<String>,
    /// What to tell people about it (a retry, a failure).
    pub event: Option<Transition>,
}

/// A step as the plan leaves it: its phase, its status detail and its effects.
#[derive(Debug)]
pub struct StepDecision {
    pub phase: Phase,
    pub detail: StepDetail,
    pub effects: StepEffects,
}

impl StepDecision {
    /// A step judged Completed before (by the same pinned plugin): not asked about again, so a
    /// pod removed since then never makes it run twice.
    pub fn completed_before(detail: StepDetail) -> Self {
        StepDecision {
            phase: Phase::Completed,
            detail,
            effects: StepEffects::default(),
        }
    }
}

/// The per-target report of the latest finished attempt, if it made one.
fn reported_targets(latest: Option<&Attempt>) -> Option<workflow_model::TargetReport> {
    latest?.outcome.as_ref()?.targets.clone()
}

/// What the move of a step means: its phase, what its status detail says, and its effects.
/// `detail` is what the status said of the step before; `pod_name` names the pod of an
/// attempt; `deps_completed_at` is when this reconcile saw its last dependency completed (if
/// it saw them all finish); `failed_before` whether the step was Failed already (its failure
/// was announced then).
pub fn apply_move(
    step_move: StepMove,
    view: &StepView<'_>,
    mut detail: StepDetail,
    pod_name: &dyn Fn(u32) -> String,
    deps_completed_at: Option<Timestamp>,
    failed_before: bool,
) -> StepDecision {
    let name = &view.step.name;
    let latest = view.latest;
    let mut effects = StepEffects {
        wake_at: latest
            .filter(|a| a.outcome.is_none())
            .and_then(|a| a.deadline),
        ..StepEffects::default()
    };
    if let Some(attempt) = latest {
        detail.attempts = attempt.number;
        detail.pod = Some(attempt.pod.clone());
    }
    let phase = match step_move {
        StepMove::Start => {
            effects.start = Some(1);
            effects.ready_since = deps_completed_at;
            detail.attempts = 1;
            detail.pod = Some(pod_name(1));
            detail.message = None;
            detail.targets = None;
            // No Event for a step that starts or completes: its pod and this status say so,
            // and an Event per step would double the API writes a step costs.
            Phase::Running
        }
        StepMove::Running => Phase::Running,
        StepMove::Completed(message) => {
            effects.completed_at = latest.and_then(|a| a.observed);
            detail.message = (!message.is_empty()).then_some(message);
            detail.targets = reported_targets(latest);
            Phase::Completed
        }
        StepMove::Retry(why) => {
            retry(view, &mut detail, &mut effects, pod_name, &why);
            Phase::Running
        }
        StepMove::Failed(message) => {
            detail.message = Some(message.clone());
            detail.targets = reported_targets(latest);
            if !failed_before {
                effects.event =
                    Some(Transition::warning(reason::STEP_FAILED, message.clone()).about(name));
            }
            effects.failure = Some(message);
            Phase::Failed
        }
        waiting => apply_wait(waiting, latest.is_some(), &mut detail, &mut effects),
    };
    StepDecision {
        phase,
        detail,
        effects,
    }
}

/// What a step that waits shows: why, and when to look again. It stays Pending, or Running
/// once an attempt `started`, while its plugin does not answer, its pod is refused or its
/// group takes its locks back.
fn apply_wait(
    waiting: StepMove,
    started: bool,
    detail: &mut StepDetail,
    effects: &mut StepEffects,
) -> Phase {
    let started = if started {
        Phase::Running
    } else {
        Phase::Pending
    };
    match waiting {
        StepMove::AwaitingApproval(message, deadline) => {
            if let Some(t) = deadline {
                effects.wake_at = Some(effects.wake_at.map_or(t, |d| d.min(t)));
            }
            detail.message = Some(message.clone());
            effects.approval = Some(message);
            Phase::Pending
        }
        StepMove::Scheduled(t) => {
            effects.scheduled = Some(t);
            effects.wake_at = Some(effects.wake_at.map_or(t, |d| d.min(t)));
            detail.not_before = Timestamp::from_second(t).ok().map(Time);
            detail.message = Some(format!("waiting for its schedule ({})", fmt_time(t)));
            Phase::Pending
        }
        StepMove::RetryHeld(why) => {
            detail.message = Some(format!("retry pending: {why}"));
            Phase::Pending
        }
        StepMove::Unanswered(error) => {
            detail.message = Some(format!("waiting for its plugin: {error}"));
            effects.unavailable = Some(error);
            started
        }
        StepMove::Refused(why) => {
            detail.message = Some(format!("waiting: its pod was refused: {why}"));
            effects.refused = Some(why);
            started
        }
        StepMove::AwaitingLocks => {
            detail.message =
                Some("waiting for its group to hold the locks of its targets again".to_string());
            effects.awaiting_locks = true;
            started
        }
        // (Resolved by the plan before it comes here; the others are not waits.)
        StepMove::Wait
        | StepMove::NeedsApproval(_)
        | StepMove::Start
        | StepMove::Running
        | StepMove::Completed(_)
        | StepMove::Retry(_)
        | StepMove::Failed(_) => Phase::Pending,
    }
}

/// A retry the step's plugin asked for: the next attempt starts, and an Event says so.
fn retry(
    view: &StepView<'_>,
    detail: &mut StepDetail,
    effects: &mut StepEffects,
    pod_name: &dyn Fn(u32) -> String,
    why: &str,
) {
    let name = &view.step.name;
    let (attempt, budget) = (detail.attempts, 1 + view.step.retries.unwrap_or(0));
    let next = attempt + 1;
    effects.start = Some(next);
    effects.ready_since = view.latest.and_then(|a| a.observed);
    detail.attempts = next;
    detail.pod = Some(pod_name(next));
    detail.message = Some(format!("retrying: {why}"));
    detail.targets = None;
    effects.event = Some(
        Transition::warning(
            reason::STEP_RETRIED,
            format!("step {name} attempt {attempt} asked for a retry ({why}); starting attempt {next} of {budget}"),
        )
        .about(format!("{name}/{next}")),
    );
}

/// The move of a step whose pod the API server refused: one that was to start a pod waits
/// for a refusal that clears by itself and fails for any other; other moves start no pod and
/// stand.
/// A step that would start while its group does not hold the locks of its targets
/// (`awaiting`: the group gave them to waiting groups) waits for them instead.
pub fn locks_move(step_move: StepMove, awaiting: bool) -> StepMove {
    match step_move {
        StepMove::Start | StepMove::Retry(_) if awaiting => StepMove::AwaitingLocks,
        step_move => step_move,
    }
}

pub fn refused_move(step_move: StepMove, name: &str, refusal: Option<&PodRefusal>) -> StepMove {
    match (step_move, refusal) {
        (StepMove::Start | StepMove::Retry(_), Some(r)) if r.clears_by_itself => {
            StepMove::Refused(r.message.clone())
        }
        (StepMove::Start | StepMove::Retry(_), Some(r)) => {
            StepMove::Failed(format!("step {name}: its pod was refused: {}", r.message))
        }
        (step_move, _) => step_move,
    }
}

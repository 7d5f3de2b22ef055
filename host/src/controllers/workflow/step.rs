//! One step's next move, decided from what is observed of it and what its plugin answers:
//! one step in, one decision out, as the Job controller's `matchPodFailurePolicy` is.

use k8s_openapi::jiff::Timestamp;

use crate::api::Step;
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
    fn evaluate(&self, step: &Step, outcome: &StepOutcome) -> Result<Verdict, PluginError>;
}

impl StepJudge for plugin::Plugin {
    fn validate(&self, params: &serde_json::Value) -> Result<(), PluginError> {
        plugin::Plugin::validate(self, params)
    }
    fn gate(&self, step: &Step, ctx: &plugin::GroupContext) -> Result<Gate, PluginError> {
        plugin::Plugin::gate(self, step, ctx)
    }
    fn evaluate(&self, step: &Step, outcome: &StepOutcome) -> Result<Verdict, PluginError> {
        plugin::Plugin::evaluate(self, step, outcome)
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
    /// Its pod is past the deadline and unfinished: it must be deleted.
    pub stop: bool,
    /// When the operator's watch first delivered it finished (for the step start latency).
    pub observed: Option<Timestamp>,
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
            Ok(_) => StepMove::Start,
            Err(e) if e.is_transient() => StepMove::Unanswered(e),
            Err(e) => StepMove::Failed(format!("step {name}: plugin gate failed: {e}")),
        };
    };
    let Some(outcome) = &attempt.outcome else {
        return StepMove::Running;
    };
    let budget = 1 + view.step.retries.unwrap_or(0);
    match judge.evaluate(view.step, outcome) {
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

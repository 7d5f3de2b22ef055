//! Every reason the operator gives people, in one place: the reasons of the `Succeeded`
//! condition and of the Events it publishes (CamelCase, as the API conventions ask). Several
//! are both: a step that fails is the `StepFailed` reason of the Workflow's condition and of
//! the Warning Event about it.

// Reasons of the `Succeeded` condition (most are also the reason of the Event that announces
// the change).

/// Running: the message says how far.
pub const RUNNING: &str = "Running";
/// Completed.
pub const COMPLETED: &str = "Completed";
/// A re-run of a finished group (or of a Workflow in it) started.
pub const RERUNNING: &str = "Rerunning";
/// Stopped by `spec.paused`.
pub const PAUSED: &str = "Paused";
/// No plugin of a needed type (or of the pinned version) is loaded.
pub const PLUGIN_MISSING: &str = "PluginMissing";
/// A plugin could not answer now (time limit under load, no free instance); retried.
pub const PLUGIN_UNAVAILABLE: &str = "PluginUnavailable";
/// A group's params for a type, or a Workflow's params, are refused by its plugin.
pub const INVALID_PARAMS: &str = "InvalidParams";
/// The group's spec itself is wrong.
pub const INVALID_SPEC: &str = "InvalidSpec";
/// A plugin refused to template, or returned an unusable template.
pub const TEMPLATE_FAILED: &str = "TemplateFailed";
/// A Workflow of the group failed.
pub const WORKFLOW_FAILED: &str = "WorkflowFailed";
/// A Workflow of the group was deleted by someone (its own condition could not say so).
pub const WORKFLOW_DELETED: &str = "WorkflowDeleted";
/// The workflow's step graph is invalid.
pub const INVALID_STEPS: &str = "InvalidSteps";
/// A Workflow names a group as its controller that did not make it as it is (someone else
/// made it, or changed it since): none of its steps runs.
pub const NOT_MADE_BY_GROUP: &str = "NotMadeByItsGroup";
/// A step failed (also the Warning Event about that step).
pub const STEP_FAILED: &str = "StepFailed";
/// A step waits for the time its plugin's gate named.
pub const WAITING_FOR_SCHEDULE: &str = "WaitingForSchedule";
/// A step waits for the approvals its plugin's gate asked for.
pub const WAITING_FOR_APPROVAL: &str = "WaitingForApproval";
/// A group waits for locks on its targets (or a slot of its type) that other groups hold.
pub const WAITING_FOR_TARGETS: &str = "WaitingForTargets";
/// `spec.targetSelector` selects no Node (with the address asked for) yet.
pub const NO_NODES_SELECTED: &str = "NoNodesSelected";
/// The Nodes `spec.targetSelector` chose as the group's targets (an Event).
pub const TARGETS_SELECTED: &str = "TargetsSelected";
/// The next wave of a rollout waits for its maintenance window (`spec.rollout.window`).
pub const WAITING_FOR_WINDOW: &str = "WaitingForWindow";
/// The next wave of a rollout rests after the last (`spec.rollout.pauseBetweenWaves`).
pub const WAITING_BETWEEN_WAVES: &str = "WaitingBetweenWaves";
/// A group gave its locks to groups waiting for them, as its Workflows had waited with nothing
/// running for longer than the operator allows (`--lock-idle-seconds`).
pub const GAVE_WAY: &str = "GaveWay";
/// More targets failed in a group's rollout than its failure budget allows: it failed, or
/// paused (`spec.rollout.onBudgetExceeded: Pause`).
pub const FAILURE_BUDGET_EXCEEDED: &str = "FailureBudgetExceeded";
/// The API server refused a step's pod for now (a full quota): the step waits and its pod is
/// tried again with backoff. (A refusal that does not clear by itself fails the step.)
pub const POD_REFUSED: &str = "PodRefused";

// Reasons of Events only.

/// A step's attempt asked for a retry and the next attempt started.
pub const STEP_RETRIED: &str = "StepRetried";
/// A Workflow completed (once in its life).
pub const WORKFLOW_COMPLETED: &str = "WorkflowCompleted";
/// A wave of a group's rollout completed.
pub const WAVE_COMPLETED: &str = "WaveCompleted";
/// A wave of a group's rollout failed.
pub const WAVE_FAILED: &str = "WaveFailed";
/// A group completed (once in its life).
pub const GROUP_COMPLETED: &str = "GroupCompleted";
/// A group failed (once in its life).
pub const GROUP_FAILED: &str = "GroupFailed";
/// A plugin ConfigMap's entry cannot be used (on that ConfigMap).
pub const PLUGIN_INVALID: &str = "PluginInvalid";
/// A plugin ConfigMap's entry names an OCI artifact that is being pulled.
pub const PLUGIN_PULLING: &str = "PluginPulling";

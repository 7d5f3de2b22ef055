//! The one model of what a workflow is made of: [`Target`], [`Step`] and [`EnvVar`], and of what
//! a plugin decides about a step: [`Gate`], [`StepOutcome`] and [`Verdict`].
//!
//! The operator's API types (`Workflow.spec.steps`, `spec.targets`), its plugin runtime and
//! the plugin SDK all use these types, so a step field is added in one place. They know
//! nothing of Kubernetes or WebAssembly: each side converts only at its own edge (the WIT
//! bindings). The serde names of targets and steps are the API's wire format (camelCase; empty
//! optional fields are left out), and their doc comments are the CRD's field descriptions.
//!
//! Beside the types: [`graph`], a workflow's steps as a validated dependency graph,
//! [`text`], how text from plugins and targets is made fit for conditions, Events, status and
//! the command line, and [`words`], one validator per kind of word (package and command names,
//! paths, endpoints, target names and roles).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod graph;
pub mod report;
pub mod text;
pub mod words;

pub use report::{TargetOutcome, TargetReport, TargetResult};

/// A node a workflow acts on (a group's `spec.targets[]`). Data only: nothing connects to it.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Target {
    /// Name of the target, e.g. `node-1`: a DNS-1123 subdomain (the Node's name when it joins).
    #[schemars(length(max = words::DNS_SUBDOMAIN_MAX), regex(pattern = words::DNS_SUBDOMAIN_PATTERN))]
    pub name: String,
    /// IP address of the target (IPv4 or IPv6).
    // 45 characters is the longest IPv6 text (with an embedded IPv4 address); the bound lets
    // the API server bound the cost of the CRD's `isIP` rule.
    #[schemars(length(max = 45))]
    pub ip: String,
    /// Role of the target (e.g. Master, Worker): a label value (letters, digits, '-', '_' and
    /// '.', starting and ending with a letter or digit).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = words::ROLE_MAX), regex(pattern = words::ROLE_PATTERN))]
    pub role: String,
}

impl Target {
    /// Checks the target's words: its name a DNS-1123 subdomain, its role (when it has one) a
    /// role. `field` names the target, e.g. `spec.targets[2]`.
    ///
    /// ```
    /// use workflow_model::Target;
    ///
    /// let target = Target { name: "Node_1".into(), ip: "10.0.0.1".into(), role: "Worker".into() };
    /// let refused = target.check_words("spec.targets[0]").unwrap_err();
    /// assert_eq!(refused.field, "spec.targets[0].name");
    /// ```
    ///
    /// # Errors
    /// The first word refused.
    pub fn check_words(&self, field: &str) -> Result<(), words::WordError> {
        words::dns_subdomain(&format!("{field}.name"), &self.name)?;
        if self.role.is_empty() {
            return Ok(());
        }
        words::role(&format!("{field}.role"), &self.role)
    }
}

/// An environment variable of a step's container.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct EnvVar {
    /// Variable name.
    pub name: String,
    /// Variable value.
    #[serde(default)]
    pub value: String,
}

/// One step of a workflow, run as a Kubernetes Pod.
// (One line only: the doc comment is the CRD's description. The builder is shown on `impl`.)
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Step name, unique within the workflow (a DNS-1123 label).
    pub name: String,
    /// What the step does.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Command run by `/bin/sh -c` in the step's container.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// Steps that must be Completed before this one starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Container image; the operator's default image when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Environment variables of the step's container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Wall-clock limit of one attempt, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u32>,
    /// How many times the step may be retried when its plugin asks for a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// Steps that run again whenever this one runs again in a re-run of its group (those that
    /// use what it made), though they completed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rerun_with: Vec<String>,
}

/// Build a step with [`Step::new`] and the builder methods:
///
/// ```
/// use workflow_model::Step;
///
/// let step = Step::new("check-network", "check-network.sh")
///     .description("Check the network")
///     .depends_on(["validate-nodes"])
///     .image("busybox:1.36")
///     .env("TIMEOUT", "5")
///     .timeout_secs(300)
///     .retries(2);
/// assert_eq!(step.depends_on, ["validate-nodes"]);
/// ```
impl Step {
    /// A step named `name` that runs `command`, with no description, dependencies, image,
    /// environment, timeout or retries.
    ///
    /// ```
    /// let step = workflow_model::Step::new("verify-installation", "verify-installation.sh");
    /// assert_eq!(step.command, "verify-installation.sh");
    /// ```
    pub fn new(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            command: command.into(),
            ..Self::default()
        }
    }

    /// Sets the description.
    ///
    /// ```
    /// let step = workflow_model::Step::new("a", "true").description("Does nothing");
    /// assert_eq!(step.description, "Does nothing");
    /// ```
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Adds steps this one depends on (they must be Completed first).
    ///
    /// ```
    /// let step = workflow_model::Step::new("c", "true").depends_on(["a", "b"]);
    /// assert_eq!(step.depends_on, ["a", "b"]);
    /// ```
    #[must_use]
    pub fn depends_on<I, S>(mut self, steps: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.depends_on.extend(steps.into_iter().map(Into::into));
        self
    }

    /// Adds steps that run again whenever this one runs again in a re-run of its group (the
    /// dependents that use what it made), though they completed.
    ///
    /// ```
    /// let step = workflow_model::Step::new("install", "true").rerun_with(["verify"]);
    /// assert_eq!(step.rerun_with, ["verify"]);
    /// ```
    #[must_use]
    pub fn rerun_with<I, S>(mut self, steps: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.rerun_with.extend(steps.into_iter().map(Into::into));
        self
    }

    /// Sets the container image.
    ///
    /// ```
    /// let step = workflow_model::Step::new("a", "true").image("busybox:1.36");
    /// assert_eq!(step.image.as_deref(), Some("busybox:1.36"));
    /// ```
    #[must_use]
    pub fn image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }

    /// Adds an environment variable.
    ///
    /// ```
    /// let step = workflow_model::Step::new("a", "true").env("MODE", "fast");
    /// assert_eq!(step.env[0].name, "MODE");
    /// ```
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push(EnvVar {
            name: name.into(),
            value: value.into(),
        });
        self
    }

    /// Sets the wall-clock limit of one attempt.
    ///
    /// ```
    /// let step = workflow_model::Step::new("a", "true").timeout_secs(60);
    /// assert_eq!(step.timeout_seconds, Some(60));
    /// ```
    #[must_use]
    pub fn timeout_secs(mut self, seconds: u32) -> Self {
        self.timeout_seconds = Some(seconds);
        self
    }

    /// Sets how many times a failed attempt may be retried (when `evaluate` says retry).
    ///
    /// ```
    /// let step = workflow_model::Step::new("a", "true").retries(3);
    /// assert_eq!(step.retries, Some(3));
    /// ```
    #[must_use]
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = Some(retries);
        self
    }
}

/// Whether a step may start: a plugin's `gate` answer.
///
/// ```
/// use workflow_model::Gate;
///
/// let now = 1_700_000_000;
/// let gate = Gate::NotBefore(now + 60);
/// assert!(matches!(gate, Gate::NotBefore(t) if t > now));
/// ```
// Not part of the API: serialized under its Rust names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Gate {
    /// Start it as soon as its dependencies are Completed.
    StartNow,
    /// Not before this time, in seconds since the Unix epoch (UTC).
    NotBefore(i64),
    /// Once approved: by whom, how many, until when and what then (contract 0.3.0).
    NeedsApproval(ApprovalRequest),
}

/// The approvals a step needs before it starts ([`Gate::NeedsApproval`]).
///
/// ```
/// use workflow_model::{ApprovalRequest, ApprovalTimeout};
///
/// let request = ApprovalRequest::new("restarts the database")
///     .approvers(["alice", "group:dba"])
///     .count(2)
///     .timeout_secs(3600, ApprovalTimeout::Fail);
/// assert_eq!(request.count, 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// Why, for the approvers.
    pub reason: String,
    /// Who may approve: user names, and groups as `group:<name>`. Empty: anyone allowed to
    /// create an Approval in the group's namespace.
    pub approvers: Vec<String>,
    /// How many different approvers must approve (at least 1).
    pub count: u32,
    /// How long to wait, in seconds from when the step began to wait; `None`: no limit.
    pub timeout_seconds: Option<u32>,
    /// What happens at the timeout.
    pub on_timeout: ApprovalTimeout,
}

impl ApprovalRequest {
    /// One approval by anyone allowed, for `reason`, with no time limit.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            approvers: Vec::new(),
            count: 1,
            timeout_seconds: None,
            on_timeout: ApprovalTimeout::Fail,
        }
    }

    /// Adds who may approve (user names, `group:<name>`).
    #[must_use]
    pub fn approvers<I, S>(mut self, approvers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.approvers.extend(approvers.into_iter().map(Into::into));
        self
    }

    /// Sets how many different approvers must approve.
    #[must_use]
    pub fn count(mut self, count: u32) -> Self {
        self.count = count;
        self
    }

    /// Sets how long to wait and what happens then.
    #[must_use]
    pub fn timeout_secs(mut self, seconds: u32, then: ApprovalTimeout) -> Self {
        self.timeout_seconds = Some(seconds);
        self.on_timeout = then;
        self
    }
}

/// What happens to a step whose approvals did not come in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
pub enum ApprovalTimeout {
    /// It fails.
    #[default]
    Fail,
    /// It starts.
    Start,
}

/// The evidence of one finished attempt of a step, handed to a plugin's `evaluate`.
///
/// ```
/// use workflow_model::StepOutcome;
///
/// let outcome = StepOutcome { exit_code: Some(1), message: "disk full".into(), attempt: 1, ..StepOutcome::default() };
/// assert!(!outcome.succeeded);
/// ```
// Not part of the API: serialized under its Rust names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct StepOutcome {
    /// Whether the step's pod succeeded.
    pub succeeded: bool,
    /// The container's exit code, when known.
    pub exit_code: Option<i32>,
    /// The container's termination message (its last output), possibly empty.
    pub message: String,
    /// Which attempt this was, from 1.
    pub attempt: u32,
    /// How long the attempt ran, in milliseconds.
    pub duration_ms: u64,
    /// Per target, when the step reported so (its message is a `workflow-runner` report,
    /// see [`report`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<TargetReport>,
}

/// A plugin's judgement of a finished attempt.
///
/// ```
/// use workflow_model::Verdict;
///
/// let verdict = Verdict::Retry("the mirror timed out".into());
/// assert_ne!(verdict, Verdict::Completed);
/// ```
// Not part of the API: serialized under its Rust names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// The step succeeded.
    Completed,
    /// The step failed, for this reason (shown to users).
    Failed(String),
    /// Run the step again, within its `retries`, for this reason.
    Retry(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_builder_sets_every_field() {
        let step = Step::new("check-network", "check-network.sh")
            .description("检查网络连接")
            .depends_on(["validate-nodes"])
            .depends_on(vec![String::from("other")])
            .image("busybox")
            .env("A", "1")
            .env("B", "2")
            .timeout_secs(30)
            .retries(4)
            .rerun_with(["verify"]);
        assert_eq!(
            step,
            Step {
                name: "check-network".into(),
                description: "检查网络连接".into(),
                command: "check-network.sh".into(),
                depends_on: vec!["validate-nodes".into(), "other".into()],
                image: Some("busybox".into()),
                env: vec![
                    EnvVar {
                        name: "A".into(),
                        value: "1".into()
                    },
                    EnvVar {
                        name: "B".into(),
                        value: "2".into()
                    },
                ],
                timeout_seconds: Some(30),
                retries: Some(4),
                rerun_with: vec!["verify".into()],
            }
        );
    }

    #[test]
    fn a_bare_step_sets_nothing_optional() {
        let step = Step::new("a", "b");
        assert!(step.description.is_empty() && step.depends_on.is_empty() && step.env.is_empty());
        assert_eq!(
            (step.image, step.timeout_seconds, step.retries),
            (None, None, None)
        );
    }

    #[test]
    fn a_step_serializes_in_the_api_shape_and_leaves_out_what_is_unset() {
        let json = serde_json::to_string(&Step::new("a", "true").depends_on(["b"]).timeout_secs(5))
            .expect("a step serializes");
        assert_eq!(
            json,
            r#"{"name":"a","command":"true","dependsOn":["b"],"timeoutSeconds":5}"#
        );
    }

    #[test]
    fn gates_outcomes_and_verdicts_serialize_under_their_rust_names() {
        fn json<T: Serialize>(value: &T) -> String {
            serde_json::to_string(value).expect("it serializes")
        }
        assert_eq!(json(&Gate::StartNow), r#""StartNow""#);
        assert_eq!(json(&Gate::NotBefore(5)), r#"{"NotBefore":5}"#);
        assert_eq!(json(&Verdict::Completed), r#""Completed""#);
        assert_eq!(json(&Verdict::Failed("x".into())), r#"{"Failed":"x"}"#);
        assert_eq!(json(&Verdict::Retry("y".into())), r#"{"Retry":"y"}"#);
        let outcome = StepOutcome {
            succeeded: true,
            exit_code: Some(0),
            message: "ok".into(),
            attempt: 2,
            duration_ms: 30,
            targets: None,
        };
        assert_eq!(
            json(&outcome),
            r#"{"succeeded":true,"exit_code":0,"message":"ok","attempt":2,"duration_ms":30}"#
        );
    }
}

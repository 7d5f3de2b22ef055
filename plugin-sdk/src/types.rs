//! The plain data a plugin works with, in Rust shape (the bindings' types stay hidden).

use std::fmt;

use workflow_model::text::{self, Marker};
pub use workflow_model::{
    ApprovalRequest, ApprovalTimeout, EnvVar, Gate, Step, StepOutcome, Target, TargetOutcome,
    TargetReport, TargetResult, Verdict,
};

/// What a plugin knows of the group it works for, with its parameters already deserialized.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Context<P> {
    /// The WorkflowGroup's name.
    pub group_name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its `spec.clusterName`.
    pub cluster_name: String,
    /// Its `spec.targets`, in order.
    pub targets: Vec<Target>,
    /// This type's parameters (`spec.params.<type>`).
    pub params: P,
    /// The current time, from the operator: seconds since the Unix epoch (UTC).
    pub now: i64,
}

impl<P> Context<P> {
    /// All targets, in the group's order.
    ///
    /// ```
    /// # use workflow_plugin_sdk::{Context, NoParams, Target};
    /// let ctx = Context { targets: vec![Target { name: "n1".into(), ..Target::default() }], ..Context::<NoParams>::default() };
    /// assert_eq!(ctx.targets().count(), 1);
    /// ```
    pub fn targets(&self) -> impl Iterator<Item = &Target> {
        self.targets.iter()
    }

    /// The targets whose role is `role`, compared ignoring ASCII case (`Worker` = `worker`).
    ///
    /// ```
    /// # use workflow_plugin_sdk::{Context, NoParams, Target};
    /// let node = |name: &str, role: &str| Target { name: name.into(), ip: String::new(), role: role.into() };
    /// let ctx = Context { targets: vec![node("m", "Master"), node("w", "Worker")], ..Context::<NoParams>::default() };
    /// assert_eq!(ctx.targets_with_role("worker").map(|t| t.name.as_str()).collect::<Vec<_>>(), ["w"]);
    /// ```
    pub fn targets_with_role<'a>(&'a self, role: &str) -> impl Iterator<Item = &'a Target> {
        let role = role.to_owned();
        self.targets
            .iter()
            .filter(move |t| t.role.eq_ignore_ascii_case(&role))
    }

    /// The names of all targets, in the group's order.
    ///
    /// ```
    /// # use workflow_plugin_sdk::{Context, NoParams, Target};
    /// let ctx = Context { targets: vec![Target { name: "n1".into(), ..Target::default() }], ..Context::<NoParams>::default() };
    /// assert_eq!(ctx.target_names(), ["n1"]);
    /// ```
    pub fn target_names(&self) -> Vec<&str> {
        self.targets.iter().map(|t| t.name.as_str()).collect()
    }

    /// The names of the targets whose role is `role` (ignoring ASCII case).
    ///
    /// ```
    /// # use workflow_plugin_sdk::{Context, NoParams, Target};
    /// let ctx = Context { targets: vec![Target { name: "m".into(), ip: String::new(), role: "Master".into() }], ..Context::<NoParams>::default() };
    /// assert_eq!(ctx.target_names_with_role("master"), ["m"]);
    /// ```
    pub fn target_names_with_role(&self, role: &str) -> Vec<&str> {
        self.targets_with_role(role)
            .map(|t| t.name.as_str())
            .collect()
    }
}

/// What a plugin says about itself (the SDK adds the parameters' JSON Schema).
///
/// ```
/// use workflow_plugin_sdk::Info;
///
/// let info = Info::new("pre-check", env!("CARGO_PKG_VERSION")).description("Checks nodes");
/// assert_eq!(info.type_name, "pre-check");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Info {
    /// The workflow type, as users write it in `workflowSteps` (e.g. `pre-check`).
    pub type_name: String,
    /// The plugin's own version (semver); `env!("CARGO_PKG_VERSION")` is a good choice.
    pub version: String,
    /// One line about what the type does.
    pub description: String,
}

impl Info {
    /// Info for type `type_name` at `version`, without a description.
    pub fn new(type_name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            type_name: type_name.into(),
            version: version.into(),
            description: String::new(),
        }
    }

    /// Sets the description.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }
}

/// Longest part of a termination message quoted in a verdict's reason, in bytes.
const MAX_QUOTED: usize = 1024;

/// The default success logic: an attempt whose pod succeeded with exit code 0 (or no known
/// code) is [`Verdict::Completed`]; anything else is [`Verdict::Failed`] with a reason built
/// from the exit code and the termination message.
///
/// ```
/// use workflow_plugin_sdk::{default_verdict, StepOutcome, Verdict};
///
/// let ok = StepOutcome { succeeded: true, exit_code: Some(0), ..StepOutcome::default() };
/// assert_eq!(default_verdict(&ok), Verdict::Completed);
///
/// let bad = StepOutcome { exit_code: Some(2), message: "no such host\n".into(), ..StepOutcome::default() };
/// assert_eq!(default_verdict(&bad), Verdict::Failed("exit code 2: no such host".into()));
/// ```
pub fn default_verdict(outcome: &StepOutcome) -> Verdict {
    match outcome.exit_code {
        Some(0) | None if outcome.succeeded => Verdict::Completed,
        _ => Verdict::Failed(failure_reason(outcome)),
    }
}

/// `exit code N: <message>`, or the parts of it that are known.
pub(crate) fn failure_reason(outcome: &StepOutcome) -> String {
    let head = match outcome.exit_code {
        Some(code) => format!("exit code {code}"),
        None => "the step failed".to_owned(),
    };
    let message = quote(&outcome.message);
    if message.is_empty() {
        head
    } else {
        format!("{head}: {message}")
    }
}

/// The message trimmed, and cut (on a character boundary) to at most [`MAX_QUOTED`] bytes.
pub(crate) fn quote(message: &str) -> String {
    text::truncate(message.trim(), MAX_QUOTED, Marker::Dots).into_owned()
}

/// An error a plugin returns: a message for the user, naming what is wrong.
///
/// ```
/// use workflow_plugin_sdk::Error;
///
/// let err = Error::new("`schedule` must be in the future");
/// assert_eq!(err.to_string(), "`schedule` must be in the future");
/// let err: Error = format!("no target has role {}", "Worker").into();
/// assert_eq!(err.message(), "no target has role Worker");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Self {
        Self(message.to_owned())
    }
}

/// A word of the params that [`words`](crate::words) refused, as ``invalid params at
/// `<field>`: ...``: `?` turns a validator's refusal into the answer of `validate`.
///
/// ```
/// use workflow_plugin_sdk::{Error, words};
///
/// fn check(packages: &[String]) -> Result<(), Error> {
///     words::each("packages", packages, words::package_name)?;
///     Ok(())
/// }
/// let refused = check(&["curl-".to_string()]).unwrap_err();
/// assert!(refused.message().starts_with("invalid params at `packages[0]`: \"curl-\" is not a valid package name"));
/// ```
impl From<workflow_model::words::WordError> for Error {
    fn from(refused: workflow_model::words::WordError) -> Self {
        Self(format!(
            "invalid params at `{}`: {}",
            refused.field,
            refused.reason()
        ))
    }
}

/// The `Params` of a workflow type that takes no parameters.
///
/// It accepts only an empty object (`{}`, or no `spec.params.<type>` at all), so a parameter
/// given to such a type by mistake is reported rather than ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(succeeded: bool, exit_code: Option<i32>, message: &str) -> StepOutcome {
        StepOutcome {
            succeeded,
            exit_code,
            message: message.to_owned(),
            attempt: 1,
            duration_ms: 1000,
            targets: None,
        }
    }

    #[test]
    fn default_verdict_completes_on_success_with_exit_code_zero_or_unknown() {
        assert_eq!(
            default_verdict(&outcome(true, Some(0), "")),
            Verdict::Completed
        );
        assert_eq!(
            default_verdict(&outcome(true, None, "done")),
            Verdict::Completed
        );
    }

    #[test]
    fn default_verdict_fails_with_exit_code_and_trimmed_message() {
        assert_eq!(
            default_verdict(&outcome(false, Some(1), "  ping: node-2: timeout\n")),
            Verdict::Failed("exit code 1: ping: node-2: timeout".into())
        );
        assert_eq!(
            default_verdict(&outcome(false, Some(137), "")),
            Verdict::Failed("exit code 137".into())
        );
        assert_eq!(
            default_verdict(&outcome(false, None, "")),
            Verdict::Failed("the step failed".into())
        );
        assert_eq!(
            default_verdict(&outcome(false, None, "DeadlineExceeded")),
            Verdict::Failed("the step failed: DeadlineExceeded".into())
        );
    }

    #[test]
    fn default_verdict_fails_a_succeeded_job_with_a_nonzero_exit_code() {
        assert_eq!(
            default_verdict(&outcome(true, Some(2), "")),
            Verdict::Failed("exit code 2".into())
        );
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let message = "é".repeat(2000);
        let Verdict::Failed(reason) = default_verdict(&outcome(false, Some(1), &message)) else {
            panic!("expected a failure");
        };
        assert!(reason.len() <= "exit code 1: ".len() + MAX_QUOTED + 3);
        assert!(reason.ends_with("é..."));
    }

    #[test]
    fn target_helpers_filter_by_role_ignoring_case() {
        let node = |name: &str, role: &str| Target {
            name: name.into(),
            ip: "10.0.0.1".into(),
            role: role.into(),
        };
        let ctx = Context {
            targets: vec![
                node("m", "Master"),
                node("w1", "Worker"),
                node("w2", "WORKER"),
            ],
            ..Context::<NoParams>::default()
        };
        assert_eq!(ctx.target_names(), ["m", "w1", "w2"]);
        assert_eq!(ctx.target_names_with_role("worker"), ["w1", "w2"]);
        assert_eq!(ctx.targets_with_role("etcd").count(), 0);
        assert_eq!(ctx.targets().count(), 3);
    }
}

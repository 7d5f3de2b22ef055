//! The `at` workflow type (seed 003, the "cloud native `at`"): runs one command no earlier
//! than a scheduled time.
//!
//! # Parameters (`spec.params.at`)
//!
//! | field | required | meaning |
//! |---|---|---|
//! | `schedule` | yes | when to run, RFC 3339, e.g. `2026-01-30T21:04:00Z` or `2026-01-30T22:04:00+01:00` |
//! | `command` | yes | run by `/bin/sh -c` in the step's container |
//! | `image` | no | the container image; the operator's default image when absent |
//! | `timeoutSeconds` | no | the command is stopped (and fails) when it runs longer |
//! | `onTargets` | no | `true`: run the command on every target over SSH (`workflow-runner`, see [`workflow_plugin_sdk::remote`]) instead of in the step's container |
//! | `ssh`, `maxFailedTargets`, `minHealthyPercent` | no | with `onTargets`: how to log in, and how many targets may fail |
//! | `approval` | no | approval before the command runs: `approvers` (users, `group:<name>`), `count`, `timeoutSeconds`, `onTimeout` (`Fail` or `Start`), `reason` ([`ApprovalParams`]) |
//!
//! ```yaml
//! spec:
//!   workflowSteps: [at]
//!   params:
//!     at:
//!       schedule: "2026-01-30T21:04:00Z"
//!       command: echo QAQ
//!       image: busybox
//! ```
//!
//! # Workflow
//!
//! One step, `run`, running `command`. Its gate holds it until the operator's clock reaches
//! `schedule` ([`Gate::NotBefore`]); a schedule in the past starts it at once. With `approval`,
//! it then waits for the approvals asked for ([`Gate::NeedsApproval`]). Success logic
//! is the default: exit code 0 is success, anything else fails with the exit code and message;
//! with `onTargets`, per target within `maxFailedTargets` / `minHealthyPercent`
//! ([`remote::verdict`]).

use workflow_plugin_sdk::approval::ApprovalParams;
use workflow_plugin_sdk::prelude::*;
use workflow_plugin_sdk::remote::{self, SshParams, TargetBudget};

mod rfc3339;

pub use rfc3339::parse_rfc3339;

/// The parameters of an `at` workflow.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
// The derives come from the SDK's re-exports, so they are told where serde and schemars are.
#[serde(crate = "workflow_plugin_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "workflow_plugin_sdk::schemars")]
pub struct AtParams {
    /// When to run the command: an RFC 3339 time, e.g. `2026-01-30T21:04:00Z`.
    #[schemars(extend("format" = "date-time"))]
    pub schedule: String,
    /// The command, run by `/bin/sh -c` in the step's container.
    pub command: String,
    /// The container image; the operator's default image when absent.
    pub image: Option<String>,
    /// Stop the command, and fail, when it runs longer than this many seconds.
    #[serde(rename = "timeoutSeconds")]
    #[schemars(rename = "timeoutSeconds", range(min = 1))]
    pub timeout_seconds: Option<u32>,
    /// Run the command on every target over SSH instead of in the step's container.
    #[serde(rename = "onTargets", default)]
    #[schemars(rename = "onTargets")]
    pub on_targets: bool,
    /// With `onTargets`: how to log in to the targets.
    #[serde(default)]
    pub ssh: SshParams,
    /// With `onTargets`: at most this many targets may fail.
    #[serde(rename = "maxFailedTargets")]
    #[schemars(rename = "maxFailedTargets")]
    pub max_failed_targets: Option<u32>,
    /// With `onTargets`: at least this percentage of the targets must succeed.
    #[serde(rename = "minHealthyPercent")]
    #[schemars(rename = "minHealthyPercent", range(max = 100))]
    pub min_healthy_percent: Option<u8>,
    /// Approval before the command runs, once its schedule has come.
    pub approval: Option<ApprovalParams>,
}

impl AtParams {
    /// The schedule in seconds since the Unix epoch.
    ///
    /// # Errors
    ///
    /// When `schedule` is not an RFC 3339 time; the message names the field and quotes it.
    pub fn schedule_epoch(&self) -> Result<i64, Error> {
        parse_rfc3339(&self.schedule).map_err(|why| {
            Error::new(format!(
                "invalid params at `schedule`: {:?} is not an RFC 3339 time such as \
                 \"2026-01-30T21:04:00Z\" ({why})",
                self.schedule
            ))
        })
    }
}

/// The name of the single step of an `at` workflow.
pub const STEP_NAME: &str = "run";

/// The `at` workflow type.
pub struct At;

impl WorkflowType for At {
    type Params = AtParams;

    fn info() -> Info {
        Info::new("at", env!("CARGO_PKG_VERSION"))
            .description("Runs a command no earlier than a scheduled time")
    }

    fn validate(params: &AtParams) -> Result<(), Error> {
        params.schedule_epoch()?;
        if params.command.trim().is_empty() {
            return Err(Error::new("invalid params at `command`: must not be empty"));
        }
        if params.timeout_seconds == Some(0) {
            return Err(Error::new(
                "invalid params at `timeoutSeconds`: must be at least 1",
            ));
        }
        if let Some(image) = &params.image {
            words::image("image", image)?;
        }
        params.ssh.validate()
    }

    fn template(ctx: &Context<AtParams>) -> Result<Vec<Step>, Error> {
        Self::validate(&ctx.params)?;
        ctx.params.ssh.validate_targets(&ctx.targets)?;
        let params = &ctx.params;
        let step = if params.on_targets {
            let budget = TargetBudget {
                max_failed_targets: params.max_failed_targets,
                min_healthy_percent: params.min_healthy_percent,
            };
            remote::on_targets(STEP_NAME, params.command.clone(), &params.ssh, budget)
        } else {
            Step::new(STEP_NAME, params.command.clone())
        };
        let mut step = step.description(format!(
            "run the command at the scheduled time ({})",
            params.schedule
        ));
        if let Some(image) = &params.image {
            step = step.image(image.clone());
        }
        if let Some(seconds) = params.timeout_seconds {
            step = step.timeout_secs(seconds);
        }
        Ok(vec![step])
    }

    fn evaluate(step: &Step, outcome: &StepOutcome) -> Verdict {
        if step.command == remote::RUNNER {
            remote::verdict(step, outcome)
        } else {
            default_verdict(outcome)
        }
    }

    fn gate(_step: &Step, ctx: &Context<AtParams>) -> Gate {
        match ctx.params.schedule_epoch() {
            Ok(at) if ctx.now < at => Gate::NotBefore(at),
            Ok(_) => match &ctx.params.approval {
                Some(approval) => approval.gate(&format!("runs: {}", ctx.params.command)),
                None => Gate::StartNow,
            },
            Err(e) => {
                // `validate` rejects such params before any workflow exists; never run early.
                log::error(&format!("{e}; holding the step"));
                Gate::NotBefore(i64::MAX)
            }
        }
    }
}

export_workflow_type!(At);

#[cfg(test)]
mod tests {
    use super::*;

    fn params(schedule: &str) -> AtParams {
        AtParams {
            schedule: schedule.into(),
            command: "echo QAQ".into(),
            image: None,
            timeout_seconds: None,
            on_targets: false,
            ssh: SshParams::default(),
            max_failed_targets: None,
            min_healthy_percent: None,
            approval: None,
        }
    }

    #[test]
    fn on_targets_the_command_runs_on_every_target_through_the_runner() {
        let mut p = params("2016-01-30T21:04:00Z");
        p.on_targets = true;
        p.max_failed_targets = Some(1);
        let steps = At::template(&ctx(p, 0)).unwrap_or_default();
        assert_eq!(steps[0].command, "workflow-runner");
        let env: Vec<(&str, &str)> = steps[0]
            .env
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(
            env,
            [
                ("WORKFLOW_SSH_COMMAND", "echo QAQ"),
                ("WORKFLOW_MAX_FAILED_TARGETS", "1")
            ]
        );
        let one_failed = StepOutcome {
            exit_code: Some(1),
            message:
                "targets 3: 2 ok, 1 failed, 0 unreachable\nFAIL n2: exit code 1 after 0.01 s\n"
                    .into(),
            ..StepOutcome::default()
        };
        assert_eq!(At::evaluate(&steps[0], &one_failed), Verdict::Completed);
    }

    fn ctx(params: AtParams, now: i64) -> Context<AtParams> {
        Context {
            group_name: "g".into(),
            namespace: "default".into(),
            cluster_name: "c".into(),
            targets: Vec::new(),
            params,
            now,
        }
    }

    /// 2016-01-30T21:04:00Z, the seed's example.
    const SEED_TIME: i64 = 1_454_187_840;

    #[test]
    fn template_is_one_run_step_with_the_command() {
        let mut p = params("2016-01-30T21:04:00Z");
        p.image = Some("busybox".into());
        let steps = At::template(&ctx(p, 0)).unwrap_or_default();
        assert_eq!(
            steps,
            [Step::new("run", "echo QAQ")
                .description("run the command at the scheduled time (2016-01-30T21:04:00Z)")
                .image("busybox")]
        );
    }

    #[test]
    fn a_timeout_becomes_the_steps_timeout_and_zero_is_refused() {
        let mut p = params("2016-01-30T21:04:00Z");
        p.timeout_seconds = Some(30);
        let steps = At::template(&ctx(p.clone(), 0)).unwrap_or_default();
        assert_eq!(steps.first().and_then(|s| s.timeout_seconds), Some(30));
        p.timeout_seconds = Some(0);
        assert!(At::validate(&p).is_err_and(|e| e.message().contains("`timeoutSeconds`")));
    }

    #[test]
    fn gate_holds_the_step_until_the_schedule() {
        let step = Step::new("run", "echo QAQ");
        let p = params("2016-01-30T21:04:00Z");
        assert_eq!(
            At::gate(&step, &ctx(p.clone(), SEED_TIME - 51)),
            Gate::NotBefore(SEED_TIME)
        );
        assert_eq!(At::gate(&step, &ctx(p.clone(), SEED_TIME)), Gate::StartNow);
        assert_eq!(At::gate(&step, &ctx(p, SEED_TIME + 3600)), Gate::StartNow);
    }

    #[test]
    fn with_approval_the_gate_asks_for_it_once_the_schedule_has_come() {
        let step = Step::new("run", "echo QAQ");
        let mut p = params("2016-01-30T21:04:00Z");
        p.approval = Some(
            workflow_plugin_sdk::serde_json::from_value(
                workflow_plugin_sdk::serde_json::json!({"approvers": ["alice"], "count": 1}),
            )
            .unwrap_or_else(|e| panic!("{e}")),
        );
        assert_eq!(
            At::gate(&step, &ctx(p.clone(), SEED_TIME - 1)),
            Gate::NotBefore(SEED_TIME)
        );
        let Gate::NeedsApproval(request) = At::gate(&step, &ctx(p, SEED_TIME)) else {
            panic!("asks for approval");
        };
        assert_eq!(request.approvers, ["alice"]);
        assert_eq!(request.reason, "runs: echo QAQ");
    }

    #[test]
    fn gate_honours_the_offset() {
        let step = Step::new("run", "echo QAQ");
        let p = params("2016-01-30T22:04:00+01:00");
        assert_eq!(At::gate(&step, &ctx(p, 0)), Gate::NotBefore(SEED_TIME));
    }

    #[test]
    fn validate_names_schedule_and_quotes_a_bad_value() {
        let Err(e) = At::validate(&params("tomorrow at noon")) else {
            panic!("accepted a bad schedule");
        };
        let message = e.to_string();
        assert!(message.contains("`schedule`"), "{message}");
        assert!(message.contains("\"tomorrow at noon\""), "{message}");
    }

    #[test]
    fn validate_rejects_an_empty_command() {
        let mut p = params("2016-01-30T21:04:00Z");
        p.command = "  ".into();
        assert!(At::validate(&p).is_err_and(|e| e.message().contains("`command`")));
    }

    #[test]
    fn validate_refuses_an_image_that_is_not_an_image_reference_naming_the_rule() {
        let mut p = params("2016-01-30T21:04:00Z");
        for (image, says) in [
            ("", "it is empty"),
            ("busybox --privileged", "it holds a blank"),
            ("-busybox", "it starts with '-'"),
            ("busybox\u{1b}[2J", "it holds a control character"),
        ] {
            p.image = Some(image.into());
            let message = At::validate(&p)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                message.starts_with("invalid params at `image`: ") && message.contains(says),
                "{image:?}: {message}"
            );
        }
        p.image = Some("busybox:1.36".into());
        assert_eq!(At::validate(&p), Ok(()));
    }

    #[test]
    fn validate_accepts_the_seed_params() {
        assert_eq!(At::validate(&params("2016-01-30T21:04:00Z")), Ok(()));
    }

    #[test]
    fn missing_schedule_is_reported_by_the_sdk() {
        let error = workflow_plugin_sdk::__private::validate::<At>(r#"{"command":"date"}"#);
        assert_eq!(
            error,
            Err("invalid params: missing field `schedule`".into())
        );
    }

    #[test]
    fn template_rejects_a_bad_schedule() {
        assert!(At::template(&ctx(params("2016-13-01T00:00:00Z"), 0)).is_err());
    }

    #[test]
    fn schema_marks_schedule_and_command_required() {
        let info = workflow_plugin_sdk::__private::info::<At>();
        let schema: serde_json::Value =
            serde_json::from_str(&info.params_schema).unwrap_or_default();
        assert_eq!(
            schema["required"],
            serde_json::json!(["schedule", "command"])
        );
        assert_eq!(schema["properties"]["schedule"]["format"], "date-time");
        assert!(schema["properties"]["image"].get("default").is_none());
    }

    use workflow_plugin_sdk::serde_json;
}

//! The `setup` workflow type: installs the needed packages, then configures the nodes. Its
//! steps are the seed's `setup` template, unchanged:
//!
//! | step | description | command | depends on |
//! |---|---|---|---|
//! | `install-packages` | 安装必要软件包 | `install-packages.sh` | |
//! | `configure-nodes` | 配置节点 | `configure-nodes.sh` | `install-packages` |
//!
//! It takes no parameters.
//!
//! # Success logic
//!
//! - Exit code 0 with no problem reported is Completed.
//! - Exit code [`EX_TEMPFAIL`] (75, "temporary failure, try again": a package mirror down, a
//!   lock held) asks the operator to **retry** the step, within its `retries`.
//! - Any other failure fails the step with the exit code and the termination message.
//! - Exit code 0 whose termination message reports a problem for a target, one line each
//!   (see [`workflow_plugin_sdk::report`]), fails the step naming those targets:
//!
//! ```text
//! FAIL <target>: <reason>
//! UNREACHABLE <target>: <reason>
//! ```

use workflow_plugin_sdk::prelude::*;

/// The exit code (`EX_TEMPFAIL` of `sysexits.h`) by which a setup script asks to be retried.
pub const EX_TEMPFAIL: i32 = 75;

/// The `setup` workflow type.
pub struct Setup;

impl WorkflowType for Setup {
    type Params = NoParams;

    fn info() -> Info {
        Info::new("setup", env!("CARGO_PKG_VERSION"))
            .description("Installs the needed packages, then configures the nodes")
    }

    fn template(_ctx: &Context<NoParams>) -> Result<Vec<Step>, Error> {
        Ok(vec![
            Step::new("install-packages", "install-packages.sh").description("安装必要软件包"),
            Step::new("configure-nodes", "configure-nodes.sh")
                .description("配置节点")
                .depends_on(["install-packages"]),
        ])
    }

    fn evaluate(_step: &Step, outcome: &StepOutcome) -> Verdict {
        match (outcome.succeeded, outcome.exit_code) {
            (false, Some(EX_TEMPFAIL)) => match report::verdict(outcome) {
                Verdict::Failed(reason) => Verdict::Retry(format!("temporary failure ({reason})")),
                other => other,
            },
            _ => report::verdict(outcome),
        }
    }
}

export_workflow_type!(Setup);

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(exit_code: i32, message: &str) -> StepOutcome {
        StepOutcome {
            succeeded: exit_code == 0,
            exit_code: Some(exit_code),
            message: message.to_owned(),
            attempt: 1,
            duration_ms: 30_000,
        }
    }

    #[test]
    fn template_is_the_seeds_setup() {
        let steps = Setup::template(&Context::default()).unwrap_or_default();
        assert_eq!(
            steps,
            [
                Step {
                    name: "install-packages".into(),
                    description: "安装必要软件包".into(),
                    command: "install-packages.sh".into(),
                    ..Step::default()
                },
                Step {
                    name: "configure-nodes".into(),
                    description: "配置节点".into(),
                    command: "configure-nodes.sh".into(),
                    depends_on: vec!["install-packages".into()],
                    ..Step::default()
                },
            ]
        );
    }

    #[test]
    fn info_names_the_type() {
        assert_eq!(Setup::info().type_name, "setup");
    }

    #[test]
    fn tempfail_exit_code_asks_for_a_retry() {
        let step = Step::new("install-packages", "install-packages.sh");
        assert_eq!(
            Setup::evaluate(&step, &outcome(75, "mirror unavailable")),
            Verdict::Retry("temporary failure (exit code 75: mirror unavailable)".into())
        );
    }

    #[test]
    fn other_failures_fail_the_step() {
        let step = Step::new("install-packages", "install-packages.sh");
        assert_eq!(
            Setup::evaluate(&step, &outcome(100, "E: Unable to locate package foo")),
            Verdict::Failed("exit code 100: E: Unable to locate package foo".into())
        );
    }

    #[test]
    fn success_with_a_failed_target_fails_the_step() {
        let step = Step::new("configure-nodes", "configure-nodes.sh");
        assert_eq!(
            Setup::evaluate(&step, &outcome(0, "OK node-1\nFAIL node-2: sysctl denied")),
            Verdict::Failed("node-2 failed: sysctl denied".into())
        );
        assert_eq!(
            Setup::evaluate(&step, &outcome(0, "done")),
            Verdict::Completed
        );
    }
}

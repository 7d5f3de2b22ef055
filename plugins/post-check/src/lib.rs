//! The `post-check` workflow type: verifies the installation after `setup`. Its step is the
//! seed's `post-check` template, unchanged:
//!
//! | step | description | command | depends on |
//! |---|---|---|---|
//! | `verify-installation` | 验证安装结果 | `verify-installation.sh` | |
//!
//! It takes no parameters.
//!
//! # Success logic
//!
//! The step succeeds when its pod succeeds with exit code 0 **and** its termination message
//! reports no problem. A check reports a problem with one line per target (see
//! [`workflow_plugin_sdk::report`]), case-insensitively:
//!
//! ```text
//! FAIL <target>: <reason>
//! UNREACHABLE <target>: <reason>
//! ```
//!
//! Such a step fails with a reason naming every reported target, e.g.
//! `node-1 failed: kubelet not running`. A non-zero exit fails with the exit code and the
//! message, e.g. `exit code 1: ...`.

use workflow_plugin_sdk::prelude::*;

/// The `post-check` workflow type.
pub struct PostCheck;

impl WorkflowType for PostCheck {
    type Params = NoParams;

    fn info() -> Info {
        Info::new("post-check", env!("CARGO_PKG_VERSION"))
            .description("Verifies the installation on every node")
    }

    fn template(_ctx: &Context<NoParams>) -> Result<Vec<Step>, Error> {
        Ok(vec![
            Step::new("verify-installation", "verify-installation.sh").description("验证安装结果"),
        ])
    }

    fn evaluate(_step: &Step, outcome: &StepOutcome) -> Verdict {
        report::verdict(outcome)
    }
}

export_workflow_type!(PostCheck);

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(exit_code: i32, message: &str) -> StepOutcome {
        StepOutcome {
            succeeded: exit_code == 0,
            exit_code: Some(exit_code),
            message: message.to_owned(),
            attempt: 1,
            duration_ms: 900,
        }
    }

    #[test]
    fn template_is_the_seeds_post_check() {
        let steps = PostCheck::template(&Context::default()).unwrap_or_default();
        assert_eq!(
            steps,
            [Step {
                name: "verify-installation".into(),
                description: "验证安装结果".into(),
                command: "verify-installation.sh".into(),
                ..Step::default()
            }]
        );
    }

    #[test]
    fn info_names_the_type() {
        assert_eq!(PostCheck::info().type_name, "post-check");
    }

    #[test]
    fn reported_failures_fail_the_step_naming_each_target() {
        let step = Step::new("verify-installation", "verify-installation.sh");
        let verdict = PostCheck::evaluate(
            &step,
            &outcome(
                0,
                "FAIL node-1: kubelet not running\nFAIL node-2: containerd missing\n",
            ),
        );
        assert_eq!(
            verdict,
            Verdict::Failed(
                "node-1 failed: kubelet not running; node-2 failed: containerd missing".into()
            )
        );
    }

    #[test]
    fn clean_exit_is_completed_and_nonzero_exit_fails() {
        let step = Step::new("verify-installation", "verify-installation.sh");
        assert_eq!(
            PostCheck::evaluate(&step, &outcome(0, "all good")),
            Verdict::Completed
        );
        assert_eq!(
            PostCheck::evaluate(&step, &outcome(1, "")),
            Verdict::Failed("exit code 1".into())
        );
    }
}

//! The `pre-check` workflow type: checks the nodes and their network before anything is
//! installed. Its steps are the seed's `pre-check` template, unchanged:
//!
//! | step | description | command | depends on |
//! |---|---|---|---|
//! | `validate-nodes` | 验证节点配置 | `validate-nodes.sh` | |
//! | `check-network` | 检查网络连接 | `check-network.sh` | `validate-nodes` |
//!
//! It takes no parameters.
//!
//! # Success logic
//!
//! A step succeeds when its pod succeeds with exit code 0 **and** its termination message
//! reports no problem. A check reports a problem with one line per target (see
//! [`workflow_plugin_sdk::report`]), case-insensitively:
//!
//! ```text
//! FAIL <target>: <reason>
//! UNREACHABLE <target>: <reason>
//! ```
//!
//! Such a step fails with a reason naming every reported target, e.g.
//! `node-2 unreachable: no route to host`. A non-zero exit fails with the exit code and the
//! message, e.g. `exit code 1: ...`.

use workflow_plugin_sdk::prelude::*;

/// The `pre-check` workflow type.
pub struct PreCheck;

impl WorkflowType for PreCheck {
    type Params = NoParams;

    fn info() -> Info {
        Info::new("pre-check", env!("CARGO_PKG_VERSION"))
            .description("Validates node configuration, then network connectivity")
    }

    fn template(_ctx: &Context<NoParams>) -> Result<Vec<Step>, Error> {
        Ok(vec![
            Step::new("validate-nodes", "validate-nodes.sh").description("验证节点配置"),
            Step::new("check-network", "check-network.sh")
                .description("检查网络连接")
                .depends_on(["validate-nodes"]),
        ])
    }

    fn evaluate(_step: &Step, outcome: &StepOutcome) -> Verdict {
        report::verdict(outcome)
    }
}

export_workflow_type!(PreCheck);

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(exit_code: i32, message: &str) -> StepOutcome {
        StepOutcome {
            succeeded: exit_code == 0,
            exit_code: Some(exit_code),
            message: message.to_owned(),
            attempt: 1,
            duration_ms: 1200,
        }
    }

    #[test]
    fn template_is_the_seeds_pre_check() {
        let steps = PreCheck::template(&Context::default()).unwrap_or_default();
        assert_eq!(
            steps,
            [
                Step {
                    name: "validate-nodes".into(),
                    description: "验证节点配置".into(),
                    command: "validate-nodes.sh".into(),
                    ..Step::default()
                },
                Step {
                    name: "check-network".into(),
                    description: "检查网络连接".into(),
                    command: "check-network.sh".into(),
                    depends_on: vec!["validate-nodes".into()],
                    ..Step::default()
                },
            ]
        );
    }

    #[test]
    fn info_names_the_type() {
        let info = PreCheck::info();
        assert_eq!(info.type_name, "pre-check");
        assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn clean_exit_is_completed() {
        let step = Step::new("check-network", "check-network.sh");
        let verdict = PreCheck::evaluate(&step, &outcome(0, "OK node-1\nOK node-2"));
        assert_eq!(verdict, Verdict::Completed);
    }

    #[test]
    fn unreachable_target_fails_the_step_naming_it() {
        let step = Step::new("check-network", "check-network.sh");
        let verdict = PreCheck::evaluate(
            &step,
            &outcome(0, "OK node-1\nunreachable node-3: no route to host"),
        );
        assert_eq!(
            verdict,
            Verdict::Failed("node-3 unreachable: no route to host".into())
        );
    }

    #[test]
    fn nonzero_exit_fails_with_code_and_message() {
        let step = Step::new("validate-nodes", "validate-nodes.sh");
        let verdict = PreCheck::evaluate(&step, &outcome(2, "validate-nodes.sh: not found"));
        assert_eq!(
            verdict,
            Verdict::Failed("exit code 2: validate-nodes.sh: not found".into())
        );
    }
}

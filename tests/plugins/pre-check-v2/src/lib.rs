//! Test plugin: type `pre-check` at version 2.0.0, whose template adds a third step
//! (`check-dns`, after `check-network`). Hot-reload tests replace the built-in `pre-check`
//! with it and expect new Workflows to have three steps.

use workflow_plugin_sdk::prelude::*;

/// `pre-check`, version 2.
pub struct PreCheckV2;

impl WorkflowType for PreCheckV2 {
    type Params = NoParams;

    fn info() -> Info {
        Info::new("pre-check", env!("CARGO_PKG_VERSION"))
            .description("Validates nodes, network and DNS (test version 2)")
    }

    fn template(_ctx: &Context<NoParams>) -> Result<Vec<Step>, Error> {
        Ok(vec![
            Step::new("validate-nodes", "validate-nodes.sh").description("验证节点配置"),
            Step::new("check-network", "check-network.sh")
                .description("检查网络连接")
                .depends_on(["validate-nodes"]),
            Step::new("check-dns", "check-dns.sh")
                .description("检查 DNS 解析")
                .depends_on(["check-network"]),
        ])
    }

    fn evaluate(_step: &Step, outcome: &StepOutcome) -> Verdict {
        report::verdict(outcome)
    }
}

export_workflow_type!(PreCheckV2);

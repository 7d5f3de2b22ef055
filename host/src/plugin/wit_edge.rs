//! The WIT edge: the only conversions between the host's plugin types (the shared model) and
//! the bindings generated from `plugin-sdk/wit/workflow-plugin.wit`.

use super::bindings::v0_1::workflow::plugin::types as v0_1;
use super::bindings::v0_2::workflow::plugin::types as v0_2;
use super::bindings::workflow::plugin::types as wit;
use super::types::{EnvVar, Gate, GroupContext, PluginInfo, Step, StepOutcome, Target, Verdict};
use workflow_model::{ApprovalRequest, ApprovalTimeout, TargetOutcome, TargetReport};

impl From<&Target> for wit::Target {
    fn from(t: &Target) -> Self {
        Self {
            name: t.name.clone(),
            ip: t.ip.clone(),
            role: t.role.clone(),
        }
    }
}

impl From<&EnvVar> for wit::EnvVar {
    fn from(e: &EnvVar) -> Self {
        Self {
            name: e.name.clone(),
            value: e.value.clone(),
        }
    }
}

impl From<wit::EnvVar> for EnvVar {
    fn from(e: wit::EnvVar) -> Self {
        Self {
            name: e.name,
            value: e.value,
        }
    }
}

impl From<&Step> for wit::Step {
    fn from(s: &Step) -> Self {
        Self {
            name: s.name.clone(),
            description: s.description.clone(),
            command: s.command.clone(),
            depends_on: s.depends_on.clone(),
            image: s.image.clone(),
            env: s.env.iter().map(Into::into).collect(),
            timeout_seconds: s.timeout_seconds,
            retries: s.retries,
            rerun_with: s.rerun_with.clone(),
        }
    }
}

impl From<wit::Step> for Step {
    fn from(s: wit::Step) -> Self {
        Self {
            name: s.name,
            description: s.description,
            command: s.command,
            depends_on: s.depends_on,
            image: s.image,
            env: s.env.into_iter().map(Into::into).collect(),
            timeout_seconds: s.timeout_seconds,
            retries: s.retries,
            rerun_with: s.rerun_with,
        }
    }
}

// Plugins of contracts 0.2.0 and 0.1.0 (whose records have the same shape) know steps without
// `rerun-with` and gates without approvals.

impl From<&Step> for v0_2::Step {
    fn from(s: &Step) -> Self {
        Self {
            name: s.name.clone(),
            description: s.description.clone(),
            command: s.command.clone(),
            depends_on: s.depends_on.clone(),
            image: s.image.clone(),
            env: s
                .env
                .iter()
                .map(|e| v0_2::EnvVar {
                    name: e.name.clone(),
                    value: e.value.clone(),
                })
                .collect(),
            timeout_seconds: s.timeout_seconds,
            retries: s.retries,
        }
    }
}

impl From<v0_2::Step> for wit::Step {
    fn from(s: v0_2::Step) -> Self {
        Self {
            name: s.name,
            description: s.description,
            command: s.command,
            depends_on: s.depends_on,
            image: s.image,
            env: s
                .env
                .into_iter()
                .map(|e| wit::EnvVar {
                    name: e.name,
                    value: e.value,
                })
                .collect(),
            timeout_seconds: s.timeout_seconds,
            retries: s.retries,
            rerun_with: Vec::new(),
        }
    }
}

impl From<v0_2::GateDecision> for wit::GateDecision {
    fn from(decision: v0_2::GateDecision) -> Self {
        match decision {
            v0_2::GateDecision::StartNow => Self::StartNow,
            v0_2::GateDecision::NotBefore(t) => Self::NotBefore(t),
        }
    }
}

impl From<&GroupContext> for wit::Context {
    fn from(c: &GroupContext) -> Self {
        Self {
            group_name: c.group_name.clone(),
            namespace: c.namespace.clone(),
            cluster_name: c.cluster_name.clone(),
            targets: c.targets.iter().map(Into::into).collect(),
            params: if c.params.is_null() {
                "{}".to_string()
            } else {
                c.params.to_string()
            },
            now: c.now,
        }
    }
}

impl From<&StepOutcome> for wit::StepOutcome {
    fn from(o: &StepOutcome) -> Self {
        Self {
            succeeded: o.succeeded,
            exit_code: o.exit_code,
            message: o.message.clone(),
            attempt: o.attempt,
            duration_ms: o.duration_ms,
            targets: o.targets.as_ref().map(Into::into),
        }
    }
}

impl From<&TargetReport> for wit::TargetReport {
    fn from(r: &TargetReport) -> Self {
        Self {
            total: r.total,
            ok: r.ok,
            failed: r.failed,
            unreachable: r.unreachable,
            problems: r
                .problems
                .iter()
                .map(|p| wit::TargetResult {
                    name: p.name.clone(),
                    outcome: match p.outcome {
                        TargetOutcome::Ok => wit::TargetOutcome::Ok,
                        TargetOutcome::Failed => wit::TargetOutcome::Failed,
                        TargetOutcome::Unreachable => wit::TargetOutcome::Unreachable,
                    },
                    reason: p.reason.clone(),
                })
                .collect(),
        }
    }
}

/// A plugin of contract 0.1.0 gets the outcome without the per-target report.
impl From<&StepOutcome> for v0_1::StepOutcome {
    fn from(o: &StepOutcome) -> Self {
        Self {
            succeeded: o.succeeded,
            exit_code: o.exit_code,
            message: o.message.clone(),
            attempt: o.attempt,
            duration_ms: o.duration_ms,
        }
    }
}

impl From<wit::GateDecision> for Gate {
    fn from(decision: wit::GateDecision) -> Self {
        match decision {
            wit::GateDecision::StartNow => Self::StartNow,
            wit::GateDecision::NotBefore(t) => Self::NotBefore(t),
            wit::GateDecision::NeedsApproval(r) => Self::NeedsApproval(ApprovalRequest {
                reason: r.reason,
                approvers: r.approvers,
                count: r.count,
                timeout_seconds: r.timeout_seconds,
                on_timeout: match r.on_timeout {
                    wit::ApprovalTimeout::Fail => ApprovalTimeout::Fail,
                    wit::ApprovalTimeout::Start => ApprovalTimeout::Start,
                },
            }),
        }
    }
}

impl From<wit::Verdict> for Verdict {
    fn from(verdict: wit::Verdict) -> Self {
        match verdict {
            wit::Verdict::Completed => Self::Completed,
            wit::Verdict::Failed(reason) => Self::Failed(reason),
            wit::Verdict::Retry(reason) => Self::Retry(reason),
        }
    }
}

/// What `info` said, with its params schema already parsed and checked (`schema.rs`).
pub(super) fn plugin_info(raw: wit::PluginInfo, params_schema: serde_json::Value) -> PluginInfo {
    PluginInfo {
        type_name: raw.type_name,
        version: raw.version,
        description: raw.description,
        params_schema,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_decisions_and_verdicts_become_the_model_unchanged() {
        assert_eq!(Gate::from(wit::GateDecision::StartNow), Gate::StartNow);
        assert_eq!(
            Gate::from(wit::GateDecision::NotBefore(42)),
            Gate::NotBefore(42)
        );
        assert_eq!(Verdict::from(wit::Verdict::Completed), Verdict::Completed);
        assert_eq!(
            Verdict::from(wit::Verdict::Failed("no".into())),
            Verdict::Failed("no".into())
        );
        assert_eq!(
            Verdict::from(wit::Verdict::Retry("again".into())),
            Verdict::Retry("again".into())
        );
    }

    #[test]
    fn steps_and_outcomes_cross_the_edge_field_by_field() {
        let step = Step::new("a", "echo")
            .description("d")
            .depends_on(["b"])
            .image("i")
            .env("K", "V")
            .timeout_secs(5)
            .retries(2)
            .rerun_with(["c"]);
        assert_eq!(Step::from(wit::Step::from(&step)), step);
        // A plugin of 0.2.0 gets it without `rerun-with`, and its own steps have none.
        let old = wit::Step::from(v0_2::Step::from(&step));
        assert_eq!(
            Step::from(old),
            Step {
                rerun_with: Vec::new(),
                ..step
            }
        );
        let outcome = wit::StepOutcome::from(&StepOutcome {
            succeeded: true,
            exit_code: Some(0),
            message: "m".into(),
            attempt: 2,
            duration_ms: 7,
            targets: TargetReport::parse("targets 1: 0 ok, 1 failed, 0 unreachable\nFAIL a: b"),
        });
        let report = outcome.targets.as_ref().expect("the report crosses too");
        assert_eq!((report.total, report.failed), (1, 1));
        assert_eq!(
            (
                report.problems[0].name.as_str(),
                report.problems[0].outcome,
                report.problems[0].reason.as_str()
            ),
            ("a", wit::TargetOutcome::Failed, "b")
        );
        assert_eq!(
            (
                outcome.succeeded,
                outcome.exit_code,
                outcome.message.as_str()
            ),
            (true, Some(0), "m")
        );
        assert_eq!((outcome.attempt, outcome.duration_ms), (2, 7));
    }
}

//! The steps the operator adds to a Workflow, beside its plugin's: cordon and drain around
//! disruptive work (`spec.drain`), and the health gate before a wave
//! (`spec.rollout.healthGate`); how they are judged, and the account the drain's run as.
//! These steps are the operator's: no plugin gates or judges them (the Workflow controller
//! judges them by [`verdict`]).
//!
//! ## Cordon and drain
//!
//! The first step, [`DRAIN_STEP`], cordons each target's Node (recording the group on it) and
//! evicts its pods through the Eviction API (`workflow-runner --drain`); every step of the
//! plugin without dependencies waits for it. The last, [`UNCORDON_STEP`], waits for every
//! step nothing else waits for and makes schedulable again the Nodes this group cordoned
//! (`workflow-runner --uncordon`). A drain that cannot finish fails its target, naming the
//! pods that block it, and the Workflow fails as any failed step fails it: the steps after it
//! do not run and its Nodes stay cordoned, as `kubectl drain` leaves them, for a person or a
//! re-run to look at.
//!
//! ## The health gate
//!
//! The first Workflow of each wave after the first begins with [`GATE_STEP`], the group's
//! command; every other step of the Workflow (the drain's too) waits for it. Its failure, after
//! its retries, fails the Workflow and so the wave before it touched a target, and the wave's
//! targets count against the failure budget.

use workflow_model::{Step, StepOutcome, Verdict};

use crate::api::{Drain, HealthGate, Workflow};

/// The step that cordons and drains the targets' Nodes.
pub const DRAIN_STEP: &str = "cordon-and-drain";
/// The step that uncordons the Nodes the drain cordoned.
pub const UNCORDON_STEP: &str = "uncordon";
/// The health gate's step.
pub const GATE_STEP: &str = "health-gate";
/// How long an uncordon may take, in seconds.
const UNCORDON_TIMEOUT: u32 = 300;
/// What a drain step's attempt may take beyond the drain's own timeout: the pod's start and
/// its report.
const DRAIN_STEP_SLACK: u32 = 120;

/// Why a plugin's steps cannot be wrapped in the operator's.
#[derive(Debug, thiserror::Error)]
#[error(
    "{field}: the plugin's step {step:?} has the name of a step this field adds; rename the step"
)]
pub struct ReservedStep {
    pub step: String,
    /// The field that adds the step: `spec.drain` or `spec.rollout.healthGate`.
    pub field: &'static str,
}

/// `steps` after the health gate.
///
/// # Errors
/// A step of the plugin already has its name.
pub fn with_gate(mut steps: Vec<Step>, gate: &HealthGate) -> Result<Vec<Step>, ReservedStep> {
    if steps.iter().any(|s| s.name == GATE_STEP) {
        return Err(ReservedStep {
            step: GATE_STEP.into(),
            field: "spec.rollout.healthGate",
        });
    }
    for step in &mut steps {
        if step.depends_on.is_empty() {
            step.depends_on.push(GATE_STEP.into());
        }
    }
    let mut check = Step::new(GATE_STEP, gate.command.clone())
        .description("Checks the fleet's health before the wave (spec.rollout.healthGate)")
        .timeout_secs(gate.timeout_seconds)
        .retries(gate.retries);
    if let Some(image) = &gate.image {
        check = check.image(image.clone());
    }
    steps.insert(0, check);
    Ok(steps)
}

/// `steps` with the drain before them and the uncordon after them.
///
/// # Errors
/// A step of the plugin already has one of the two names.
pub fn with_drain(mut steps: Vec<Step>, drain: &Drain) -> Result<Vec<Step>, ReservedStep> {
    if let Some(taken) = steps
        .iter()
        .find(|s| s.name == DRAIN_STEP || s.name == UNCORDON_STEP)
    {
        return Err(ReservedStep {
            step: taken.name.clone(),
            field: "spec.drain",
        });
    }
    let leaves: Vec<String> = steps
        .iter()
        .filter(|s| !steps.iter().any(|o| o.depends_on.contains(&s.name)))
        .map(|s| s.name.clone())
        .collect();
    for step in &mut steps {
        if step.depends_on.is_empty() {
            step.depends_on.push(DRAIN_STEP.into());
        }
    }
    let mut cordon = Step::new(DRAIN_STEP, "workflow-runner")
        .description("Cordons the targets' Nodes and evicts their pods (spec.drain)")
        .env("WORKFLOW_DRAIN", "true")
        .env("WORKFLOW_DRAIN_TIMEOUT", drain.timeout_seconds.to_string())
        .timeout_secs(drain.timeout_seconds.saturating_add(DRAIN_STEP_SLACK));
    if let Some(grace) = drain.grace_period_seconds {
        cordon = cordon.env("WORKFLOW_DRAIN_GRACE_PERIOD", grace.to_string());
    }
    if drain.delete_empty_dir_data {
        cordon = cordon.env("WORKFLOW_DRAIN_DELETE_EMPTYDIR_DATA", "true");
    }
    if drain.force {
        cordon = cordon.env("WORKFLOW_DRAIN_FORCE", "true");
    }
    let uncordon = Step::new(UNCORDON_STEP, "workflow-runner")
        .description("Makes schedulable again the Nodes this group cordoned (spec.drain)")
        .depends_on(if leaves.is_empty() {
            vec![DRAIN_STEP.to_string()]
        } else {
            leaves
        })
        .env("WORKFLOW_UNCORDON", "true")
        .timeout_secs(UNCORDON_TIMEOUT);
    steps.insert(0, cordon);
    steps.push(uncordon);
    Ok(steps)
}

/// Whether `step` of `workflow` is one of the two the operator added for its drain.
pub fn is_drain_step(workflow: &Workflow, step: &str) -> bool {
    workflow.spec.drain.is_some() && (step == DRAIN_STEP || step == UNCORDON_STEP)
}

/// Whether `step` of `workflow` is one the operator added (and judges).
pub fn is_operator_step(workflow: &Workflow, step: &str) -> bool {
    is_drain_step(workflow, step) || (workflow.spec.health_gate.is_some() && step == GATE_STEP)
}

/// The service account `step`'s pod runs as when it is one of the drain's steps.
pub fn service_account<'a>(workflow: &'a Workflow, step: &str) -> Option<&'a str> {
    let drain = workflow.spec.drain.as_ref()?;
    is_drain_step(workflow, step).then_some(drain.service_account_name.as_str())
}

/// An operator step's verdict: completed when its pod succeeded, else worth another try
/// (within the step's retries: none but the health gate's) naming each target that is not done
/// and why, or what the step said.
pub fn verdict(outcome: &StepOutcome) -> Verdict {
    if outcome.succeeded {
        return Verdict::Completed;
    }
    let why = match &outcome.targets {
        Some(report) if !report.problems.is_empty() => report
            .problems
            .iter()
            .map(|p| format!("{}: {}", p.name, p.reason))
            .collect::<Vec<_>>()
            .join("; "),
        _ => match outcome.message.trim() {
            "" => format!("exit code {}", outcome.exit_code.unwrap_or(-1)),
            message => message.to_string(),
        },
    };
    Verdict::Retry(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain() -> Drain {
        serde_json::from_value(serde_json::json!({"gracePeriodSeconds": 5, "force": true}))
            .expect("a drain")
    }

    #[test]
    fn the_drain_comes_before_every_step_and_the_uncordon_after_them_all() {
        let steps = vec![
            Step::new("a", "a.sh"),
            Step::new("b", "b.sh").depends_on(["a"]),
            Step::new("c", "c.sh"),
        ];
        let wrapped = with_drain(steps, &drain()).expect("wrapped");
        let graph: Vec<(&str, Vec<&str>)> = wrapped
            .iter()
            .map(|s| {
                let deps = s.depends_on.iter().map(String::as_str).collect();
                (s.name.as_str(), deps)
            })
            .collect();
        assert_eq!(
            graph,
            [
                (DRAIN_STEP, vec![]),
                ("a", vec![DRAIN_STEP]),
                ("b", vec!["a"]),
                ("c", vec![DRAIN_STEP]),
                (UNCORDON_STEP, vec!["b", "c"]),
            ]
        );
        let env = |step: &Step, name: &str| {
            step.env
                .iter()
                .find(|e| e.name == name)
                .map(|e| e.value.clone())
        };
        let cordon = &wrapped[0];
        assert_eq!(env(cordon, "WORKFLOW_DRAIN").as_deref(), Some("true"));
        assert_eq!(
            env(cordon, "WORKFLOW_DRAIN_TIMEOUT").as_deref(),
            Some("300")
        );
        assert_eq!(
            env(cordon, "WORKFLOW_DRAIN_GRACE_PERIOD").as_deref(),
            Some("5")
        );
        assert_eq!(env(cordon, "WORKFLOW_DRAIN_FORCE").as_deref(), Some("true"));
        assert_eq!(env(cordon, "WORKFLOW_DRAIN_DELETE_EMPTYDIR_DATA"), None);
        assert_eq!(cordon.timeout_seconds, Some(420));
        assert_eq!(
            env(&wrapped[4], "WORKFLOW_UNCORDON").as_deref(),
            Some("true")
        );
        graph_is_valid(&wrapped);
    }

    #[test]
    fn the_health_gate_comes_before_every_step_the_drain_included() {
        let gate: HealthGate = serde_json::from_value(serde_json::json!({
            "command": "curl -sf http://metrics/ok", "image": "curl:8", "retries": 2
        }))
        .expect("a gate");
        let steps = with_drain(vec![Step::new("a", "a.sh")], &drain()).expect("drained");
        let gated = with_gate(steps, &gate).expect("gated");
        let graph: Vec<(&str, Vec<&str>)> = gated
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.depends_on.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            graph,
            [
                (GATE_STEP, vec![]),
                (DRAIN_STEP, vec![GATE_STEP]),
                ("a", vec![DRAIN_STEP]),
                (UNCORDON_STEP, vec!["a"]),
            ]
        );
        let check = &gated[0];
        assert_eq!(check.command, "curl -sf http://metrics/ok");
        assert_eq!(check.image.as_deref(), Some("curl:8"));
        assert_eq!((check.timeout_seconds, check.retries), (Some(300), Some(2)));
        graph_is_valid(&gated);
        let err = with_gate(gated, &gate).unwrap_err();
        assert_eq!(err.field, "spec.rollout.healthGate");
    }

    fn graph_is_valid(steps: &[Step]) {
        crate::graph::StepGraph::new(
            steps
                .iter()
                .map(|s| (s.name.as_str(), s.depends_on.iter().map(String::as_str))),
        )
        .expect("a valid step graph");
    }

    #[test]
    fn a_plugin_step_named_as_the_drains_is_refused_naming_it() {
        let err = with_drain(vec![Step::new(UNCORDON_STEP, "x")], &drain()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.drain: the plugin's step \"uncordon\" has the name of a step this field adds; \
             rename the step"
        );
    }

    #[test]
    fn a_failed_drain_names_each_target_and_what_blocks_it() {
        let report = workflow_model::TargetReport::parse(
            "targets 2: 1 ok, 1 failed, 0 unreachable\nFAIL node-2: the drain of Node node-2 did not finish in 5 s: blocked: shop/web-0: budget\nOK node-1 (1.0 s)",
        );
        let failed = StepOutcome {
            succeeded: false,
            exit_code: Some(1),
            message: String::new(),
            attempt: 1,
            duration_ms: 10,
            targets: report,
        };
        assert_eq!(
            verdict(&failed),
            Verdict::Retry(
                "node-2: the drain of Node node-2 did not finish in 5 s: blocked: shop/web-0: budget"
                    .into()
            )
        );
        let done = StepOutcome {
            succeeded: true,
            ..failed
        };
        assert_eq!(verdict(&done), Verdict::Completed);
    }
}

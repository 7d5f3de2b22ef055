//! Test plugin: the workflow type `mid-check` built against contract `workflow:plugin@0.2.0`
//! (the host's copy of that WIT, `host/wit/v0.2.0`), as every plugin built before 0.3.0 was.
//! The host must load it and call all five functions: its steps have no `rerun-with`, its gate
//! cannot ask for approval, and its `evaluate` gets the context and the per-target evidence.

#![allow(unsafe_code)]

#[allow(missing_docs, clippy::all)]
mod bindings {
    wit_bindgen::generate!({ path: "../../../host/wit/v0.2.0", world: "plugin" });
}

use bindings::exports::workflow::plugin::workflow_type::{
    Context, GateDecision, Guest, PluginInfo, Step, StepOutcome, Verdict,
};

// Only the component (wasm32) exports it; native builds see it unused.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct MidCheck;

fn step(name: &str, depends_on: &[&str]) -> Step {
    Step {
        name: name.into(),
        description: format!("{name}, from a 0.2.0 plugin"),
        command: format!("echo {name}"),
        depends_on: depends_on.iter().map(|d| d.to_string()).collect(),
        image: None,
        env: Vec::new(),
        timeout_seconds: None,
        retries: Some(1),
    }
}

impl Guest for MidCheck {
    fn info() -> PluginInfo {
        PluginInfo {
            type_name: "mid-check".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "built against workflow:plugin@0.2.0".into(),
            params_schema: r#"{"type": "object", "properties": {"delay": {"type": "integer"}}, "additionalProperties": false}"#.into(),
        }
    }

    fn validate(_params: String) -> Result<(), String> {
        Ok(())
    }

    fn template(ctx: Context) -> Result<Vec<Step>, String> {
        Ok(vec![
            step("first", &[]),
            step(&format!("for-{}", ctx.targets.len()), &["first"]),
        ])
    }

    fn gate(step: Step, ctx: Context) -> GateDecision {
        if ctx.params.contains("delay") && step.retries == Some(1) {
            GateDecision::NotBefore(ctx.now + 60)
        } else {
            GateDecision::StartNow
        }
    }

    fn evaluate(_step: Step, outcome: StepOutcome, ctx: Context) -> Verdict {
        match (outcome.exit_code, outcome.targets) {
            (Some(0), _) => Verdict::Completed,
            (code, Some(report)) => Verdict::Failed(format!(
                "mid-check saw exit code {code:?} in group {}: {} of {} targets failed",
                ctx.group_name, report.failed, report.total
            )),
            (code, None) => Verdict::Failed(format!("mid-check saw exit code {code:?}")),
        }
    }
}

// Only in the component: native builds cannot carry the component ABI's symbol names.
#[cfg(target_arch = "wasm32")]
bindings::export!(MidCheck with_types_in bindings);

//! Test plugin: the workflow type `old-check` built against contract `workflow:plugin@0.1.0`
//! (the host's copy of that WIT, `host/wit/v0.1.0`), as every plugin built before 0.2.0 was.
//! The host must load it and call all five functions: its `evaluate` gets no context and no
//! per-target evidence, only the termination message.

#![allow(unsafe_code)]

#[allow(missing_docs, clippy::all)]
mod bindings {
    wit_bindgen::generate!({ path: "../../../host/wit/v0.1.0", world: "plugin" });
}

use bindings::exports::workflow::plugin::workflow_type::{
    Context, GateDecision, Guest, PluginInfo, Step, StepOutcome, Verdict,
};

// Only the component (wasm32) exports it; native builds see it unused.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct OldCheck;

fn step(name: &str, depends_on: &[&str]) -> Step {
    Step {
        name: name.into(),
        description: format!("{name}, from a 0.1.0 plugin"),
        command: format!("echo {name}"),
        depends_on: depends_on.iter().map(|d| d.to_string()).collect(),
        image: None,
        env: Vec::new(),
        timeout_seconds: None,
        retries: None,
    }
}

impl Guest for OldCheck {
    fn info() -> PluginInfo {
        PluginInfo {
            type_name: "old-check".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "built against workflow:plugin@0.1.0".into(),
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

    fn gate(_step: Step, ctx: Context) -> GateDecision {
        if ctx.params.contains("delay") {
            GateDecision::NotBefore(ctx.now + 60)
        } else {
            GateDecision::StartNow
        }
    }

    fn evaluate(_step: Step, outcome: StepOutcome) -> Verdict {
        match outcome.exit_code {
            Some(0) => Verdict::Completed,
            code => Verdict::Failed(format!(
                "old-check saw exit code {code:?} on attempt {}: {}",
                outcome.attempt, outcome.message
            )),
        }
    }
}

// Only in the component: native builds cannot carry the component ABI's symbol names.
#[cfg(target_arch = "wasm32")]
bindings::export!(OldCheck with_types_in bindings);

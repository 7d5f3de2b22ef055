//! Test plugin: a well-behaved `pre-check`-like workflow type built against contract
//! `workflow:plugin@0.9.0` (a copy of the WIT in `wit/`), so the host must refuse it at load,
//! naming both versions.

#![allow(unsafe_code)]

#[allow(missing_docs, clippy::all)]
mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "plugin" });
}

use bindings::exports::workflow::plugin::workflow_type::{
    Context, GateDecision, Guest, PluginInfo, Step, StepOutcome, Verdict,
};

// Only the component (wasm32) exports it; native builds see it unused.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct WrongContract;

impl Guest for WrongContract {
    fn info() -> PluginInfo {
        PluginInfo {
            type_name: "wrong-contract".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: "built against workflow:plugin@0.9.0".into(),
            params_schema: "{}".into(),
        }
    }

    fn validate(_params: String) -> Result<(), String> {
        Ok(())
    }

    fn template(_ctx: Context) -> Result<Vec<Step>, String> {
        Ok(vec![Step {
            name: "only".into(),
            description: String::new(),
            command: "true".into(),
            depends_on: Vec::new(),
            image: None,
            env: Vec::new(),
            timeout_seconds: None,
            retries: None,
        }])
    }

    fn gate(_step: Step, _ctx: Context) -> GateDecision {
        GateDecision::StartNow
    }

    fn evaluate(_step: Step, _outcome: StepOutcome) -> Verdict {
        Verdict::Completed
    }
}

// Only in the component: native builds cannot carry the component ABI's symbol names.
#[cfg(target_arch = "wasm32")]
bindings::export!(WrongContract with_types_in bindings);

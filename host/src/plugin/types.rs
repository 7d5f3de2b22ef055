//! The plain data a plugin works on: the host-side twin of the WIT `types` interface.
//!
//! These types carry no Kubernetes or wasmtime types. Targets, steps, gates, outcomes and
//! verdicts are the shared model (`workflow-model`) that the API types and the plugin SDK use
//! too; the runtime converts them to and from the component's bindings only at the WIT edge
//! (`wit_edge.rs`).

use serde::{Deserialize, Serialize};

pub use workflow_model::{EnvVar, Gate, Step, StepOutcome, Target, Verdict};

/// What a plugin knows of the group it works for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct GroupContext {
    pub group_name: String,
    pub namespace: String,
    pub cluster_name: String,
    pub targets: Vec<Target>,
    /// This type's parameters; `{}` when the group gives none.
    pub params: serde_json::Value,
    /// Seconds since the Unix epoch, as the operator sees it now.
    pub now: i64,
}

/// What a plugin says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginInfo {
    pub type_name: String,
    pub version: String,
    pub description: String,
    pub params_schema: serde_json::Value,
}

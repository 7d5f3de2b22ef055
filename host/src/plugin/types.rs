//! The plain data a plugin works on: the host-side twin of the WIT `types` interface.
//!
//! These types carry no Kubernetes or wasmtime types. Targets and steps are the shared model
//! (`workflow-model`) that the API types use too; the runtime converts them to and from the
//! component's bindings only at the WIT edge (`wit_edge.rs`).

use serde::{Deserialize, Serialize};

pub use workflow_model::{EnvVar, Step, Target};

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

/// Whether a step may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Gate {
    StartNow,
    /// Not before this many seconds since the Unix epoch.
    NotBefore(i64),
}

/// The evidence of one finished attempt of a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct StepOutcome {
    pub succeeded: bool,
    pub exit_code: Option<i32>,
    pub message: String,
    /// From 1.
    pub attempt: u32,
    pub duration_ms: u64,
}

/// A plugin's judgement of a finished attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    Completed,
    Failed(String),
    Retry(String),
}

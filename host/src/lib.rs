//! workflow-operator: runs WorkflowGroups of typed Workflows whose types are WebAssembly plugins.
//!
//! - [`api`]: the `WorkflowGroup` and `Workflow` custom resources (seed-compatible), built on
//!   the Kubernetes-free model of targets and steps (`workflow-model`).
//! - [`plugin`]: the sandboxed plugin runtime and the hot-reloading registry (no Kubernetes types).
//! - [`render`]: group + plugin -> Workflow, shared by the controller and the CLI.
//! - [`names`]: the name of every object the operator creates.
//! - [`graph`]: a workflow's steps as a validated dependency graph (from `workflow-model`).
//! - [`controllers`]: the WorkflowGroup and Workflow controllers.
//! - [`operator_steps`]: the steps the operator adds to a Workflow: cordon and drain, uncordon, the health gate.
//! - [`cached_pod`]: a step pod as the cache keeps it, read by the controllers and the locks.
//! - [`locks`]: the locks on targets that keep groups apart; [`approvals`]: which approvals
//!   of steps count.
//! - [`cli`]: subcommands of the `workflow-operator` binary.
//! - [`http`]: health, readiness, metrics and the loaded plugins.
//! - [`view`]: one model of a group's tree and its waves' grid, for `get` and the web view.
//! - [`plugin_configmaps`]: plugins from labelled ConfigMaps, read through the API.
//! - [`leader`]: leader election on a Lease, so that replicas wait as standbys.
//! - [`webhook`]: the validating admission webhook: plugins refuse bad groups at apply time.

pub mod api;
pub mod approvals;
pub mod cached_pod;
pub mod cli;
pub mod controllers;
pub mod http;
pub mod leader;
pub mod locks;
pub mod names;
pub mod oci;
pub mod operator_steps;
pub mod plugin;
pub mod plugin_configmaps;
pub mod provenance;
pub mod render;
pub mod view;
pub mod webhook;

pub use workflow_model::graph;

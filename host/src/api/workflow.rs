//! `Workflow`: a DAG of steps of one type, run against targets.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::pod_template::pod_template_schema;
use super::rules::*;
use super::*;

/// A desired Workflow: a DAG of steps of one type, run against targets.
#[derive(CustomResource, KubeSchema, Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "workflow.rxg456.cn",
    version = "v1alpha1",
    kind = "Workflow",
    namespaced,
    status = "WorkflowStatus",
    shortname = "wf",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Progress","type":"string","jsonPath":".status.progress"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Succeeded\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSpec {
    /// Workflow type: which plugin templates and judges it.
    #[serde(rename = "type")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(TYPE_IS_A_DNS_LABEL)
        .message(Message::Expression(TYPE_IS_A_DNS_LABEL_MESSAGE.into())))]
    pub type_: String,
    /// The steps, a dependency graph.
    pub steps: Vec<Step>,
    /// Nodes the workflow acts on.
    #[schemars(schema_with = "targets_schema")]
    pub targets: Vec<Target>,
    /// Name of the cluster the targets belong to (at most 100 characters, no control
    /// characters).
    #[schemars(length(max = workflow_model::words::CLUSTER_NAME_MAX), regex(pattern = workflow_model::words::CLUSTER_NAME_PATTERN))]
    pub cluster_name: String,
    /// Stops progress: no new step starts while true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// This type's parameters, copied from the group (`spec.params.<type>`), for the plugin's
    /// `gate` (e.g. the `at` type's schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "workflow_params_schema")]
    pub params: Option<serde_json::Value>,
    /// What the step pods get beyond their command (the group's `podTemplate`, with its
    /// type's laid over it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Boxed: laid out inline it takes 1.3 KiB of every cached object, most of which have none.
    #[schemars(schema_with = "pod_template_schema")]
    pub pod_template: Option<Box<StepPodTemplate>>,
    /// Its group's `spec.drain`, when its type drains: the Workflow's first step cordons and
    /// drains its targets' Nodes and its last uncordons them, and these steps' pods run as
    /// its service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<Drain>,
    /// Its group's `spec.rollout.healthGate`, when it is the first Workflow of a wave after the
    /// first: its first step checks the fleet's health before the wave goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_gate: Option<HealthGate>,
    /// Set by its group: the run of the group this workflow belongs to, and for a finished
    /// workflow what to run again in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<WorkflowRerun>,
    /// Set by its group when it gave the locks of its targets to groups waiting for them while
    /// this workflow waited (a schedule, an approval, a pause) with nothing running: no step
    /// starts until the group holds them again and clears it. The workflow says
    /// `WaitingForTargets` once a step would start.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub awaiting_locks: bool,
}

/// What a Workflow runs again, in which run of its group (`spec.rerun`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowRerun {
    /// The group's run, from 2.
    pub run: u32,
    /// `Failed`: the steps that did not complete; `All`: every step.
    #[serde(default)]
    pub from: RerunFrom,
    /// Completed steps to run again too, with the dependents their plugin names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
    /// `Failed`: a step that ran before runs only on the targets where it failed.
    #[serde(default, skip_serializing_if = "RerunTargets::is_all")]
    pub targets: RerunTargets,
}

fn workflow_params_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// What the operator knows of one step beyond its phase.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepDetail {
    /// Attempts started so far.
    #[serde(default)]
    pub attempts: u32,
    /// The names of the targets it runs on in this run, when fewer than the Workflow's: those
    /// it failed on or could not reach when it ran before (a re-run of `targets: Failed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only_targets: Vec<String>,
    /// The pod of the latest attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// Why the step is where it is (the plugin's verdict, a schedule, an error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The step does not start before this time (a plugin's gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Time>,
    /// What the finished attempt reported per target (a step that acts on the targets): the
    /// counts, and each target that failed or could not be reached, with why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<workflow_model::TargetReport>,
    /// When the latest attempt started (its pod was created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the latest attempt finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// The latest finished attempt's exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The end of the latest finished attempt's output, as its pod's termination message kept it
    /// (at most 2 KiB): `workflow-operator logs` prints it once the pod is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// The approvals its plugin asked for before it starts, and those given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<StepApproval>,
}

/// Most of a step's output its status keeps ([`StepDetail::log`]).
pub const MAX_STEP_LOG: usize = 2048;

/// Observed state of a Workflow.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
// `observedGeneration: 0` until the first status write, as for a group.
#[schemars(extend("default" = {"observedGeneration": 0}))]
pub struct WorkflowStatus {
    /// Pending, Running, Completed or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// When the workflow was first seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the workflow reached Completed or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Phase of each step: Pending, Running, Completed or Failed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub step_status: BTreeMap<String, Phase>,
    /// Attempts, pod and last message of each step.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub step_details: BTreeMap<String, StepDetail>,
    /// Completed steps out of all, e.g. `1/2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// The `Succeeded` condition says why the workflow is where it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation of the spec this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The plugin that judges this workflow, pinned for its whole life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginRef>,
    /// The run of its group the status reflects (absent: the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
    /// Since when it has waited with nothing started (a schedule, an approval, a pause): how
    /// long its group has held locks for nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_since: Option<Time>,
}

/// A plugin version, as recorded on a Workflow.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginRef {
    /// The plugin's own version.
    pub version: String,
    /// sha256 of the plugin's `.wasm`.
    pub digest: String,
}

/// The run of its group `workflow` is in: the one its status records; for a workflow that has
/// not finished, the one its group asked for when that is later (a Workflow created in a
/// re-run).
pub fn run_of(workflow: &Workflow) -> u32 {
    let (finished, recorded, asked) = runs(workflow);
    if finished {
        recorded
    } else {
        recorded.max(asked)
    }
}

/// Whether `workflow` finished and its group asked it to run again in a later run.
pub fn rerun_pending(workflow: &Workflow) -> bool {
    let (finished, recorded, asked) = runs(workflow);
    finished && asked > recorded
}

/// Whether `workflow` finished, the run its status records, and the run its group asked for
/// (each 1 when unset).
fn runs(workflow: &Workflow) -> (bool, u32, u32) {
    let status = workflow.status.as_ref();
    let finished = status.and_then(|s| s.phase).is_some_and(Phase::is_finished);
    let recorded = status.and_then(|s| s.run).unwrap_or(1);
    let asked = workflow.spec.rerun.as_ref().map_or(1, |r| r.run);
    (finished, recorded, asked)
}

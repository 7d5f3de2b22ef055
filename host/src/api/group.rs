//! `WorkflowGroup`: workflow types to run, in order, against targets; its re-runs, locks and
//! waves.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, LabelSelectorRequirement, Time,
};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use workflow_model::words;

use super::pod_template::{pod_template_schema, pod_templates_schema};
use super::rules::*;
use super::*;

/// A desired WorkflowGroup: workflow types to run, in order, against targets.
#[derive(CustomResource, KubeSchema, Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "workflow.rxg456.cn",
    version = "v1alpha1",
    kind = "WorkflowGroup",
    namespaced,
    // The group's name goes into its Workflows' label `workflow.rxg456.cn/group-name`, and a
    // label value holds at most 63 characters: refused at `kubectl apply`, with this message.
    validation = Rule::new("self.metadata.name.size() <= 63").message("metadata.name must be at most 63 characters: the group's name is a label value on its Workflows and pods"),
    status = "WorkflowGroupStatus",
    shortname = "wfg",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Progress","type":"string","jsonPath":".status.progress"}"#,
    printcolumn = r#"{"name":"Waves","type":"string","jsonPath":".status.rollout.progress"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Succeeded\")].reason"}"#,
    printcolumn = r#"{"name":"Next Window","type":"string","priority":1,"jsonPath":".status.rollout.nextWindow"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new(SELECTOR_SELECTS)
    .message(Message::Expression(SELECTOR_SELECTS_MESSAGE.into()))
    .field_path(".targetSelector"))]
#[x_kube(validation = Rule::new(TARGETS_OR_SELECTOR)
    .message(Message::Expression(TARGETS_OR_SELECTOR_MESSAGE.into()))
    .field_path(".targetSelector"))]
#[x_kube(validation = Rule::new(PARAMS_ONLY_FOR_LISTED_TYPES)
    .message(Message::Expression(PARAMS_ONLY_FOR_LISTED_TYPES_MESSAGE.into()))
    .field_path(".params"))]
#[x_kube(validation = Rule::new(POD_TEMPLATES_ONLY_FOR_LISTED_TYPES)
    .message(Message::Expression(POD_TEMPLATES_ONLY_FOR_LISTED_TYPES_MESSAGE.into()))
    .field_path(".podTemplates"))]
#[serde(rename_all = "camelCase")]
pub struct WorkflowGroupSpec {
    /// Kind of group (free text, e.g. cluster-expansion).
    #[serde(rename = "type")]
    pub type_: String,
    /// Name of the cluster the targets belong to (at most 100 characters, no control
    /// characters).
    #[schemars(length(max = words::CLUSTER_NAME_MAX), regex(pattern = words::CLUSTER_NAME_PATTERN))]
    pub cluster_name: String,
    /// Workflow types, run in this order, one after the other.
    // Bounded so that the API server can bound the cost of the CEL rules.
    #[schemars(length(min = 1, max = MAX_WORKFLOW_STEPS), inner(length(max = 63)))]
    #[x_kube(
        validation = Rule::new(WORKFLOW_TYPES_ARE_DNS_LABELS)
            .message(Message::Expression(WORKFLOW_TYPES_ARE_DNS_LABELS_MESSAGE.into())),
        // (Not `reason: FieldValueDuplicate`: the API server prints no message with that.)
        validation = Rule::new(WORKFLOW_TYPES_ARE_UNIQUE)
            .message(Message::Expression(WORKFLOW_TYPES_ARE_UNIQUE_MESSAGE.into()))
    )]
    pub workflow_steps: Vec<String>,
    /// Nodes the workflows act on. Empty with `targetSelector`.
    #[serde(default)]
    #[schemars(schema_with = "targets_schema")]
    pub targets: Vec<Target>,
    /// Instead of `targets`: the Nodes with these labels, chosen once when the group starts
    /// and kept in `status.targets` (a Node labelled later is not added). Each target is
    /// named as its Node, so steps that look for the Node find it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_selector: Option<TargetSelector>,
    /// Stops progress: no new step or workflow starts while true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Parameters per workflow type, checked against the schema its plugin declares
    /// (e.g. `params: {at: {schedule: "2026-01-01T00:00:00Z", command: "date"}}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "params_schema")]
    pub params: BTreeMap<String, serde_json::Value>,
    /// What every step pod of the group gets: service account, environment and volumes from
    /// Secrets and ConfigMaps, placement, resources, security context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Boxed: laid out inline it takes 1.3 KiB of every cached object, most of which have none.
    #[schemars(schema_with = "pod_template_schema")]
    pub pod_template: Option<Box<StepPodTemplate>>,
    /// Per workflow type, laid over `podTemplate`: lists and maps merge by name or key (the
    /// type's entry wins), any other field the type sets replaces the group's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "pod_templates_schema")]
    pub pod_templates: BTreeMap<String, StepPodTemplate>,
    /// How the group shares its targets with other groups: by default at most one group at a
    /// time acts on a target, cluster-wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusion: Option<Exclusion>,
    /// Roll the workflow types over the targets in waves (all types on one wave's targets,
    /// then the next wave), stopping when too many targets failed. Without it, one wave of all
    /// targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Run a finished group again: a new `id` starts one re-run (an id already in
    /// `status.runs` does nothing), from the failed steps by default. The annotation
    /// `workflow.rxg456.cn/rerun: <id>` does the same with the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<RerunRequest>,
    /// Cordon and drain the targets' Nodes before the Workflows of some types (each wave's
    /// Workflow, in a rollout) and uncordon them after: for disruptive work on Nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<Drain>,
}

/// Cordoning and draining the targets' Nodes around disruptive work (`spec.drain`): a Workflow
/// of a type it names first cordons its targets' Nodes and evicts their pods, as `kubectl
/// drain` does, then runs its steps, then makes schedulable again the Nodes it cordoned.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Drain {
    /// The workflow types that drain; every type of the group when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 63)))]
    pub types: Vec<String>,
    /// Seconds a Node's drain may take (from 1; default 300). A drain that cannot finish fails
    /// its target, naming the pods that block it; the Node stays cordoned.
    #[serde(default = "default_drain_timeout")]
    #[schemars(range(min = 1, max = 86400))]
    pub timeout_seconds: u32,
    /// The evicted pods' grace period in seconds; their own when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 86400))]
    pub grace_period_seconds: Option<u32>,
    /// Evict pods with `emptyDir` volumes too (their data is lost); otherwise such a pod stops
    /// the drain.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete_empty_dir_data: bool,
    /// Evict pods no controller manages too (nothing makes them again); otherwise such a pod
    /// stops the drain.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// The service account of the drain's and the uncordon's step pods, in the group's
    /// namespace: it must be allowed to get and patch nodes, list pods and create
    /// pods/eviction (`deploy/join/` grants `workflow-node-joiner` in `workflow-nodes`).
    #[serde(default = "default_drain_account")]
    #[schemars(length(min = 1, max = 253))]
    pub service_account_name: String,
}

fn default_drain_timeout() -> u32 {
    300
}

fn default_drain_account() -> String {
    "workflow-node-joiner".into()
}

impl Drain {
    /// Whether the Workflows of `type_name` drain.
    pub fn covers(&self, type_name: &str) -> bool {
        self.types.is_empty() || self.types.iter().any(|t| t == type_name)
    }
}

/// Nodes as targets (`spec.targetSelector`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetSelector {
    /// Labels every selected Node has.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements every selected Node's labels meet (`In`, `NotIn`, `Exists`,
    /// `DoesNotExist`), as in a Deployment's selector.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
    /// Which of a Node's addresses its target gets.
    #[serde(default)]
    pub address_type: NodeAddressType,
}

/// A Node's address of one type (`status.addresses[].type`).
// Plain comments on the variants, as for `Phase`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum NodeAddressType {
    // The address within the cluster's network.
    #[default]
    InternalIP,
    // The address reachable from outside the cluster.
    ExternalIP,
}

impl NodeAddressType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InternalIP => "InternalIP",
            Self::ExternalIP => "ExternalIP",
        }
    }
}

impl TargetSelector {
    /// The selector as the API server takes it, or why it is none: it selects every Node (no
    /// label and no requirement), or a requirement is malformed.
    ///
    /// # Errors
    /// The field and why.
    pub fn selector(&self) -> Result<kube::core::Selector, FieldError> {
        if self.match_labels.is_empty() && self.match_expressions.is_empty() {
            return Err(FieldError {
                field: "spec.targetSelector",
                problem: "it selects every Node; give matchLabels or matchExpressions".into(),
            });
        }
        let selector = LabelSelector {
            match_labels: Some(self.match_labels.clone()),
            match_expressions: Some(self.match_expressions.clone()),
        };
        kube::core::Selector::try_from(selector).map_err(|e| FieldError {
            field: "spec.targetSelector.matchExpressions",
            problem: e.to_string(),
        })
    }
}

impl WorkflowGroup {
    /// The group with the targets it acts on: those it lists, or, with `targetSelector`, the
    /// Nodes it chose when it started (`status.targets`; none before it has chosen).
    pub fn with_targets(&self) -> std::borrow::Cow<'_, WorkflowGroup> {
        let chosen = self.status.as_ref().map(|s| &s.targets);
        match chosen {
            Some(chosen) if self.spec.target_selector.is_some() && self.spec.targets.is_empty() => {
                let mut group = self.clone();
                group.spec.targets.clone_from(chosen);
                std::borrow::Cow::Owned(group)
            }
            _ => std::borrow::Cow::Borrowed(self),
        }
    }
}

/// A re-run of a finished group (`spec.rerun`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RerunRequest {
    /// Names this re-run: the operator acts once per id.
    #[schemars(length(min = 1, max = 63))]
    pub id: String,
    /// `Failed` (the default): the steps that did not complete run again, completed steps are
    /// kept. `All`: every step runs again.
    #[serde(default)]
    pub from: RerunFrom,
    /// Steps to run again although they completed (`<step>` or `<type>/<step>`), with the
    /// dependents their plugin says must follow them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub steps: Vec<String>,
    /// Workflow types whose steps all run again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub types: Vec<String>,
    /// `All` (the default): a step that runs again runs on all its targets. `Failed`: a step
    /// that ran before runs again only on the targets it reported failed or unreachable (on all
    /// of them when it never ran, or its report did not name every one).
    #[serde(default, skip_serializing_if = "RerunTargets::is_all")]
    pub targets: RerunTargets,
}

/// On which targets a re-run's steps run (`spec.rerun.targets`).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RerunTargets {
    /// Every target of the step.
    #[default]
    All,
    /// The targets where the step failed or that it could not reach.
    Failed,
}

impl RerunTargets {
    pub fn is_all(&self) -> bool {
        *self == RerunTargets::All
    }
}

/// Where a re-run starts.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RerunFrom {
    /// The steps that did not complete.
    #[default]
    Failed,
    /// Every step.
    All,
}

impl RerunFrom {
    pub fn as_str(self) -> &'static str {
        match self {
            RerunFrom::Failed => "Failed",
            RerunFrom::All => "All",
        }
    }
}

/// One run of a group (`status.runs`): the first, and each re-run.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    /// Its number, from 1; step pods of run 2 on carry it in their names.
    pub run: u32,
    /// A generated id (a UUID), unique to this run.
    pub run_id: String,
    /// The `spec.rerun.id` (or annotation) that asked for it; none for the first run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Where it started (a re-run): `Failed` or `All`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<RerunFrom>,
    /// The completed steps it ran again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
    /// The types it ran again whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    /// `Failed`: its steps ran again only on the targets where they had failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<RerunTargets>,
    /// Who asked for this re-run: the user the API server vouched for in the annotation
    /// `workflow.rxg456.cn/requested-by`; none when the request did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    /// Its pauses (`spec.paused`), the newest last (at most 20): when and by whom.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pauses: Vec<PauseRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Running, Completed or Failed.
    pub phase: Phase,
    /// How it ended (the group's message when it finished).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// A pause of a run (`status.runs[].pauses`): as the group saw `spec.paused` set and cleared.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PauseRecord {
    /// When the group saw it paused.
    pub paused_at: Time,
    /// Who paused it (the annotation `workflow.rxg456.cn/requested-by` then), or
    /// `spec.rollout.onBudgetExceeded` when the operator did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_by: Option<String>,
    /// When the group saw it resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_at: Option<Time>,
    /// Who resumed it, as the annotation said then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_by: Option<String>,
}

/// Most pauses a run lists.
pub const MAX_LISTED_PAUSES: usize = 20;

/// Most runs `status.runs` lists (the newest; run numbers keep counting).
pub const MAX_LISTED_RUNS: usize = 20;

/// Most re-run ids `status.rerunIdDigests` remembers: 4096 × 17 bytes stays far below the
/// object size limit, and a group re-run that often is better made anew.
pub const MAX_REMEMBERED_RERUN_IDS: usize = 4096;

/// What `status.rerunIdDigests` keeps of a re-run id: 16 hex digits of its sha256.
pub fn rerun_id_digest(id: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(id.as_bytes())[..8])
}

/// What a group locks while it acts (`spec.exclusion`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Exclusion {
    /// `Target` (the default): at most one group at a time acts on each target (its cluster
    /// name and address), cluster-wide. `Type`: at most `maxConcurrent` groups of this group's
    /// `spec.type` run at once, cluster-wide, and targets are not locked. `None`: no lock.
    #[serde(default)]
    pub scope: ExclusionScope,
    /// With `scope: Type`: how many groups of the type may run at once (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_concurrent: Option<u32>,
}

/// The scope of a group's lock.
// Plain comments on the variants, as for `Phase`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ExclusionScope {
    // One group at a time per target.
    #[default]
    Target,
    // A cluster-wide limit of running groups per group type.
    Type,
    // No lock.
    None,
}

/// Waves over the targets (`spec.rollout`).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// Targets per wave, which is also the most targets out at once: a number, or a percentage
    /// of the targets (`"25%"`, rounded up). At least one.
    pub wave_size: IntOrString,
    /// Failed targets tolerated over all waves: a number, or a percentage of the targets
    /// (rounded down). Default 0. Once more have failed, no new wave starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failed_targets: Option<IntOrString>,
    /// When more targets failed than `maxFailedTargets`: `Fail` the group (the default), or
    /// `Pause` it: the operator sets `spec.paused`, and clearing it accepts the failures so far
    /// and starts the next wave.
    #[serde(default)]
    pub on_budget_exceeded: BudgetPolicy,
    /// How long to rest after a wave finished before the next one starts: `30s`, `5m`,
    /// `1h30m` (at most a week). The group holds no lock meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_between_waves: Option<String>,
    /// When waves may start: a wave starts only while the window is open, and a wave that
    /// started runs to its end. The group says when the window opens next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<MaintenanceWindow>,
    /// A check of the fleet's health before each wave after the first (after the rest between
    /// waves): the first step of the wave's first Workflow. While it fails the wave does not
    /// go on: it fails, and counts against `maxFailedTargets`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_gate: Option<HealthGate>,
}

/// A check before a wave (`spec.rollout.healthGate`): a command whose exit code says whether
/// the fleet is healthy enough for the next wave, e.g. a query of the metrics.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthGate {
    /// Run by `/bin/sh -c` in the step pod (with the wave's targets in its environment, as
    /// every step has them); exit code 0 lets the wave go on.
    #[schemars(length(min = 1, max = 4096))]
    pub command: String,
    /// The step pod's image; the step image when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
    /// Seconds one check may take (from 1; default 300).
    #[serde(default = "default_gate_timeout")]
    #[schemars(range(min = 1, max = 86400))]
    pub timeout_seconds: u32,
    /// Checks after a failed first one before the wave fails (default 0), each started as soon
    /// as the one before failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(max = 20))]
    pub retries: u32,
}

fn default_gate_timeout() -> u32 {
    300
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Rollout {
    /// What is wrong with when its waves may start: a `pauseBetweenWaves` that is no
    /// duration, or a `window` that cannot be read or never opens.
    pub fn timing_problem(&self) -> Option<FieldError> {
        if let Some(Err(e)) = self
            .pause_between_waves
            .as_deref()
            .map(window::pause_between_waves)
        {
            return Some(e);
        }
        self.window.as_ref()?.schedule().err()
    }
}

/// What a rollout does when its failure budget is exceeded.
// Plain comments on the variants, as for `Phase`.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum BudgetPolicy {
    // The group fails.
    #[default]
    Fail,
    // The group pauses (spec.paused) until a person resumes it.
    Pause,
}

impl WorkflowGroupSpec {
    /// The first of the group's own words that is not a word of its kind: `clusterName`, the
    /// workflow types, each target's name and role. The CRD refuses them at apply; this is
    /// for the admission webhook and the controller (objects stored before a rule existed).
    pub fn words_problem(&self) -> Option<words::WordError> {
        let checked = words::cluster_name("spec.clusterName", &self.cluster_name)
            .and_then(|()| {
                words::each("spec.workflowSteps", &self.workflow_steps, words::dns_label)
            })
            .and_then(|()| {
                self.targets
                    .iter()
                    .enumerate()
                    .try_for_each(|(i, t)| t.check_words(&format!("spec.targets[{i}]")))
            });
        checked.err()
    }

    /// The pod template of `workflow_type`'s steps: the type's laid over the group's.
    pub fn pod_template_of(&self, workflow_type: &str) -> Option<StepPodTemplate> {
        match (&self.pod_template, self.pod_templates.get(workflow_type)) {
            (None, None) => None,
            (Some(group), None) => Some(StepPodTemplate::clone(group)),
            (None, Some(of_type)) => Some(of_type.clone()),
            (Some(group), Some(of_type)) => Some(group.overlaid(of_type)),
        }
    }
}

/// A Workflow created for a group, as the group's status lists it (seed).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct WorkflowReference {
    /// Name of the Workflow.
    pub name: String,
    /// Its workflow type.
    #[serde(rename = "type")]
    pub type_: String,
    /// Its phase.
    pub status: Phase,
    /// The wave it runs in (from 1), in a group with `spec.rollout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<u32>,
}

/// How a group's rollout goes (`spec.rollout`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// Waves finished out of all, e.g. `2/3`.
    pub progress: String,
    /// Targets that failed so far, over all waves.
    pub failed_targets: u32,
    /// Each wave started so far: its targets and how it went.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waves: Vec<WaveStatus>,
    /// The wave after which the group paused itself because its failure budget was exceeded;
    /// clearing `spec.paused` accepts the failures up to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_after_wave: Option<u32>,
    /// While the next wave waits for `spec.rollout.window`: when the window opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_window: Option<Time>,
    /// While the next wave rests (`spec.rollout.pauseBetweenWaves`): when it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_wave_at: Option<Time>,
}

/// One wave of a rollout.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaveStatus {
    /// Its number, from 1.
    pub wave: u32,
    /// Running while its workflows run; Completed when they all completed; Failed when one
    /// failed.
    pub phase: Phase,
    /// Its targets' names.
    pub targets: Vec<String>,
    /// Its targets that failed, each with why (`name: reason`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// When the group saw it finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
}

/// Observed state of a WorkflowGroup.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
// Until the operator's first status write, the API server shows `observedGeneration: 0`: a
// GitOps tool that compares it with `metadata.generation` (kstatus: Flux, kpt) reads a group
// just applied as in progress, not as current.
#[schemars(extend("default" = {"observedGeneration": 0}))]
pub struct WorkflowGroupStatus {
    /// Pending, Running, Completed or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The Workflows created so far, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workflows: Vec<WorkflowReference>,
    /// With `spec.targetSelector`: the Nodes it chose when it started, as its targets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<Target>,
    /// When the group was first seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the group reached Completed or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Completed workflows out of all, e.g. `2/3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// The `Succeeded` condition says why the group is where it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation of the spec this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The waves of a group with `spec.rollout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
    /// Each run once the group was re-run: the first, then every re-run (the newest last).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<RunStatus>,
    /// Every re-run id acted on, as the first 16 hex digits of its sha256 (the newest last, at
    /// most [`MAX_REMEMBERED_RERUN_IDS`]): an id stays spent after its run has left
    /// `status.runs`, so an id kept in git never acts twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4096))]
    pub rerun_id_digests: Vec<String>,
}

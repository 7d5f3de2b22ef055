//! The API: `WorkflowGroup` and `Workflow` in `workflow.rxg456.cn/v1alpha1`.
//!
//! Seed-compatible: every field, phase string and label of the original Go types keeps its
//! name and meaning, so the seed's sample YAML applies unchanged. What we add is optional.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ConfigMapVolumeSource, EmptyDirVolumeSource, EnvFromSource, LocalObjectReference,
    PodSecurityContext, ResourceRequirements, SecretVolumeSource, SecurityContext, Toleration,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::core::{Message, Rule};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of both kinds.
pub const GROUP: &str = "workflow.rxg456.cn";
/// Label naming the WorkflowGroup a Workflow belongs to (seed).
pub const LABEL_GROUP_NAME: &str = "workflow.rxg456.cn/group-name";
/// Label naming a Workflow's type (seed).
pub const LABEL_WORKFLOW_TYPE: &str = "workflow.rxg456.cn/workflow-type";
/// Label naming the Workflow a step pod runs a step of.
pub const LABEL_WORKFLOW_NAME: &str = "workflow.rxg456.cn/workflow-name";
/// Label with the UID of the Workflow a step pod belongs to (names may exceed a label's 63 characters).
pub const LABEL_WORKFLOW_UID: &str = "workflow.rxg456.cn/workflow-uid";
/// Label naming the step a pod runs.
pub const LABEL_STEP: &str = "workflow.rxg456.cn/step";
/// Label with the attempt (from 1) a step pod is.
pub const LABEL_ATTEMPT: &str = "workflow.rxg456.cn/attempt";
/// Label with the wave (from 1) a Workflow of a group with `spec.rollout` runs in.
pub const LABEL_WAVE: &str = "workflow.rxg456.cn/wave";
/// Annotation recording the digest of the plugin that templated a Workflow.
pub const ANNOTATION_PLUGIN_DIGEST: &str = "workflow.rxg456.cn/plugin-digest";
/// On a group: `kubectl annotate` shortcut for `spec.rerun` (its value is the re-run's id; the
/// re-run starts from the failed steps).
pub const ANNOTATION_RERUN: &str = "workflow.rxg456.cn/rerun";
/// On a step pod: the run of its group it belongs to (absent in the first run).
pub const LABEL_RUN: &str = "workflow.rxg456.cn/run";

/// The phase of a WorkflowGroup, a Workflow or a step. Serialized as the seed's strings.
// The variants carry plain comments: doc comments would turn the CRD schema's `enum` into a
// `oneOf` of constants.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum Phase {
    // Not started yet (waiting for a plugin, a dependency, a schedule, or unpaused).
    #[default]
    Pending,
    // Started and not finished.
    Running,
    // Finished successfully.
    Completed,
    // Finished unsuccessfully.
    Failed,
}

impl Phase {
    /// Whether the phase is final: nothing moves after Completed or Failed.
    pub fn is_finished(self) -> bool {
        matches!(self, Phase::Completed | Phase::Failed)
    }

    /// The seed's string for this phase.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Completed => "Completed",
            Phase::Failed => "Failed",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The status of a condition, as the Kubernetes API conventions spell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// The condition holds (for `Succeeded`: completed).
    True,
    /// It does not (for `Succeeded`: failed).
    False,
    /// Not known yet (for `Succeeded`: pending or running).
    Unknown,
}

impl ConditionStatus {
    /// The API's string for this status.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// The condition type both kinds report, as Tekton does: `Unknown` while pending or running
/// (the reason says why), `True` when completed, `False` when failed.
pub const CONDITION_SUCCEEDED: &str = "Succeeded";

// The conditions kstatus reads (sigs.k8s.io/cli-utils, which Flux and kpt wait with): it knows
// nothing of `Succeeded`, so both kinds carry these too, derived from `Succeeded`
// (`controllers::status::set_succeeded`).

/// `True` while pending or running, with `Succeeded`'s reason and message; absent once finished.
pub const CONDITION_RECONCILING: &str = "Reconciling";
/// `True` when completed, `False` when failed; absent before.
pub const CONDITION_READY: &str = "Ready";
/// `True` when failed; absent otherwise.
pub const CONDITION_STALLED: &str = "Stalled";

pub use workflow_model::{EnvVar, Step, Target};

/// Most workflow types one group may list (`spec.workflowSteps`).
pub const MAX_WORKFLOW_STEPS: u32 = 64;
/// Most targets one group or Workflow may have (the largest cluster Kubernetes supports).
pub const MAX_TARGETS: u32 = 5000;

// The rules the API server checks at `kubectl apply` (CEL `x-kubernetes-validations`), with
// messages that name the offending value. The controllers check the same again for objects
// stored before a rule existed.

/// A DNS-1123 label, as CEL's `matches` takes it (what `graph::check_dns_label` accepts).
macro_rules! dns_label {
    () => {
        "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    };
}
const WORKFLOW_TYPES_ARE_DNS_LABELS: &str = concat!("self.all(t, t.matches('", dns_label!(), "'))");
const WORKFLOW_TYPES_ARE_DNS_LABELS_MESSAGE: &str = concat!(
    "'workflow type \"' + self.filter(t, !t.matches('",
    dns_label!(),
    "'))[0] + '\" is not a valid name: a DNS label of lowercase letters, digits and \"-\", starting and ending with a letter or digit, at most 63 characters'"
);
const WORKFLOW_TYPES_ARE_UNIQUE: &str = "self.all(t, self.exists_one(u, u == t))";
const WORKFLOW_TYPES_ARE_UNIQUE_MESSAGE: &str = "'workflow type \"' + self.filter(t, !self.exists_one(u, u == t))[0] + '\" is listed more than once: each type runs once per group'";
const PARAMS_ONLY_FOR_LISTED_TYPES: &str =
    "!has(self.params) || self.params.all(t, t in self.workflowSteps)";
const PARAMS_ONLY_FOR_LISTED_TYPES_MESSAGE: &str = "'params are given for workflow type \"' + self.params.filter(t, !(t in self.workflowSteps))[0] + '\", which spec.workflowSteps does not list'";
const POD_TEMPLATES_ONLY_FOR_LISTED_TYPES: &str =
    "!has(self.podTemplates) || self.podTemplates.all(t, t in self.workflowSteps)";
const POD_TEMPLATES_ONLY_FOR_LISTED_TYPES_MESSAGE: &str = "'a pod template is given for workflow type \"' + self.podTemplates.filter(t, !(t in self.workflowSteps))[0] + '\", which spec.workflowSteps does not list'";
const IP_IS_AN_IP: &str = "isIP(self)";
const IP_IS_AN_IP_MESSAGE: &str = "'\"' + self + '\" is not an IPv4 or IPv6 address'";
const TYPE_IS_A_DNS_LABEL: &str = concat!("self.matches('", dns_label!(), "')");
const TYPE_IS_A_DNS_LABEL_MESSAGE: &str = "'workflow type \"' + self + '\" is not a valid name: a DNS label of lowercase letters, digits and \"-\", starting and ending with a letter or digit, at most 63 characters'";

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
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
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
    /// Name of the cluster the targets belong to.
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
    /// Nodes the workflows act on.
    #[schemars(schema_with = "targets_schema")]
    pub targets: Vec<Target>,
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
    #[schemars(schema_with = "pod_template_schema")]
    pub pod_template: Option<StepPodTemplate>,
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

/// Most runs `status.runs` lists (the newest; run numbers keep counting).
pub const MAX_LISTED_RUNS: usize = 20;

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
    /// The pod template of `workflow_type`'s steps: the type's laid over the group's.
    pub fn pod_template_of(&self, workflow_type: &str) -> Option<StepPodTemplate> {
        match (&self.pod_template, self.pod_templates.get(workflow_type)) {
            (None, None) => None,
            (Some(group), None) => Some(group.clone()),
            (None, Some(of_type)) => Some(of_type.clone()),
            (Some(group), Some(of_type)) => Some(group.overlaid(of_type)),
        }
    }
}

/// What a step pod gets beyond its command, in the shape of a pod spec's fields.
///
/// Credentials come from Secrets (`env[].valueFrom.secretKeyRef`, `envFrom`, a `secret`
/// volume), never as params. Without a `securityContext` and a `containerSecurityContext` a
/// step pod passes the `restricted` Pod Security Standard: user 65534, non-root, the
/// RuntimeDefault seccomp profile, no privilege escalation, every capability dropped.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepPodTemplate {
    /// The service account the step pods run as (its token is mounted only if this is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Environment of the step container, as in a container spec (`valueFrom` a Secret or a
    /// ConfigMap key included).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub env: Vec<k8s_openapi::api::core::v1::EnvVar>,
    /// Environment from whole Secrets and ConfigMaps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub env_from: Vec<EnvFromSource>,
    /// Volumes of the pod: Secrets, ConfigMaps and empty directories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub volumes: Vec<StepVolume>,
    /// Where the step container mounts them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub volume_mounts: Vec<VolumeMount>,
    /// Nodes the step pods may run on, by label.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Node and pod affinity of the step pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Taints the step pods tolerate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub tolerations: Vec<Toleration>,
    /// Requests and limits of the step container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Secrets to pull the step images with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// The pod's security context, instead of the restricted default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
    /// The step container's security context, instead of the restricted default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_security_context: Option<SecurityContext>,
    /// The step pods' priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
}

impl StepPodTemplate {
    /// `over` laid over `self`: lists and maps are merged by name (env, volumes, image pull
    /// secrets), mount path (volume mounts), key (node selector) or whole entry (tolerations),
    /// `over`'s entry winning; any other field `over` sets replaces `self`'s.
    pub fn overlaid(&self, over: &StepPodTemplate) -> StepPodTemplate {
        StepPodTemplate {
            service_account_name: over
                .service_account_name
                .clone()
                .or_else(|| self.service_account_name.clone()),
            env: merged(&self.env, &over.env, |e| e.name.clone()),
            env_from: merged(&self.env_from, &over.env_from, |e| {
                serde_json::to_string(e).unwrap_or_default()
            }),
            volumes: merged(&self.volumes, &over.volumes, |v| v.name.clone()),
            volume_mounts: merged(&self.volume_mounts, &over.volume_mounts, |m| {
                m.mount_path.clone()
            }),
            node_selector: self
                .node_selector
                .iter()
                .chain(&over.node_selector)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            affinity: over.affinity.clone().or_else(|| self.affinity.clone()),
            tolerations: merged(&self.tolerations, &over.tolerations, |t| {
                serde_json::to_string(t).unwrap_or_default()
            }),
            resources: over.resources.clone().or_else(|| self.resources.clone()),
            image_pull_secrets: merged(&self.image_pull_secrets, &over.image_pull_secrets, |s| {
                s.name.clone()
            }),
            security_context: over
                .security_context
                .clone()
                .or_else(|| self.security_context.clone()),
            container_security_context: over
                .container_security_context
                .clone()
                .or_else(|| self.container_security_context.clone()),
            priority_class_name: over
                .priority_class_name
                .clone()
                .or_else(|| self.priority_class_name.clone()),
        }
    }
}

/// The schema of a pod template. The Kubernetes types it embeds bring their whole API
/// documentation, which would make it ten times the size (and each CRD past what a client-side
/// `kubectl apply` can annotate): below the template's own fields it goes, as `kubectl explain
/// pod.spec` has it.
fn pod_template_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<StepPodTemplate>();
    if let Some(fields) = schema
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
    {
        for field in fields.values_mut() {
            if let Some(field) = field.as_object_mut() {
                for (key, value) in field.iter_mut() {
                    if key != "description" {
                        drop_descriptions(value);
                    }
                }
            }
        }
    }
    schema
}

fn pod_templates_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        // One entry per listed type at most (a CEL rule says so); bounded for its cost.
        "maxProperties": MAX_WORKFLOW_STEPS,
        "additionalProperties": pod_template_schema(generator),
    })
}

fn drop_descriptions(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("description");
            map.values_mut().for_each(drop_descriptions);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(drop_descriptions),
        _ => {}
    }
}

/// `base`'s entries, those of `over` replacing the ones with the same key in place, then
/// `over`'s new ones.
fn merged<T: Clone>(base: &[T], over: &[T], key: impl Fn(&T) -> String) -> Vec<T> {
    let mut out: Vec<T> = base
        .iter()
        .map(|b| {
            let k = key(b);
            over.iter().find(|o| key(o) == k).unwrap_or(b).clone()
        })
        .collect();
    out.extend(
        over.iter()
            .filter(|o| !base.iter().any(|b| key(b) == key(o)))
            .cloned(),
    );
    out
}

/// A volume of a step pod: a Secret, a ConfigMap or an empty directory.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "(has(self.secret) ? 1 : 0) + (has(self.configMap) ? 1 : 0) + (has(self.emptyDir) ? 1 : 0) == 1",
    "message": "a step volume is exactly one of secret, configMap or emptyDir"
}]))]
pub struct StepVolume {
    /// The volume's name, as `volumeMounts` refer to it.
    pub name: String,
    /// A Secret's keys as files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretVolumeSource>,
    /// A ConfigMap's keys as files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapVolumeSource>,
    /// An empty directory for the pod's life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDirVolumeSource>,
}

/// `spec.targets` of both kinds: the model's targets, at most [`MAX_TARGETS`], each `ip` an IP
/// address. The rule sits on `ip` itself, so the API server's message names the target by its
/// index (`spec.targets[1].ip`); the model crate knows nothing of Kubernetes, so it is added here.
fn targets_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = <Vec<Target> as JsonSchema>::json_schema(generator);
    schema.insert("maxItems".into(), MAX_TARGETS.into());
    let rule = Rule::new(IP_IS_AN_IP).message(Message::Expression(IP_IS_AN_IP_MESSAGE.into()));
    if let (Some(ip), Ok(rule)) = (
        schema.pointer_mut("/items/properties/ip"),
        serde_json::to_value(rule),
    ) && let Some(ip) = ip.as_object_mut()
    {
        ip.insert("x-kubernetes-validations".into(), serde_json::json!([rule]));
    }
    schema
}

fn params_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        // One entry per listed type at most (a CEL rule says so); bounded for its cost.
        "maxProperties": MAX_WORKFLOW_STEPS,
        "additionalProperties": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true
        }
    })
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
}

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
    /// Name of the cluster the targets belong to.
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
    #[schemars(schema_with = "pod_template_schema")]
    pub pod_template: Option<StepPodTemplate>,
    /// Set by its group: the run of the group this workflow belongs to, and for a finished
    /// workflow what to run again in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<WorkflowRerun>,
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

/// An approval of one step of a Workflow, in one run of its group: the step starts once its
/// plugin's gate has the approvals it asked for. Who may create one is the cluster's RBAC
/// (`create` on `approvals`); that `spec.approver` is the user who created it is checked at
/// admission by the ValidatingAdmissionPolicy in `crds/approval-policy.yaml`; and it cannot be
/// changed afterwards.
#[derive(CustomResource, KubeSchema, Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "workflow.rxg456.cn",
    version = "v1alpha1",
    kind = "Approval",
    namespaced,
    shortname = "wfapproval",
    printcolumn = r#"{"name":"Workflow","type":"string","jsonPath":".spec.workflow"}"#,
    printcolumn = r#"{"name":"Step","type":"string","jsonPath":".spec.step"}"#,
    printcolumn = r#"{"name":"Run","type":"integer","jsonPath":".spec.run"}"#,
    printcolumn = r#"{"name":"Decision","type":"string","jsonPath":".spec.decision"}"#,
    printcolumn = r#"{"name":"Approver","type":"string","jsonPath":".spec.approver"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("an Approval cannot be changed: delete it and create another"))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalSpec {
    /// The Workflow whose step it approves.
    #[schemars(length(min = 1, max = 253))]
    pub workflow: String,
    /// The step.
    #[schemars(length(min = 1, max = 63))]
    pub step: String,
    /// The run of the group it approves the step in (1 until the group is re-run).
    #[serde(default = "first_run")]
    #[schemars(range(min = 1))]
    pub run: u32,
    /// Who approves: the user who creates it (checked at admission).
    #[schemars(length(min = 1, max = 256))]
    pub approver: String,
    /// Groups of that user that it approves as (each checked at admission), for gates that
    /// name `group:<name>` approvers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub groups: Vec<String>,
    /// `Approve` (the default) or `Reject`: a rejection by an approver fails the step.
    #[serde(default)]
    pub decision: ApprovalDecision,
    /// Why, for the record.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub comment: String,
}

fn first_run() -> u32 {
    1
}

/// What an approver decided.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ApprovalDecision {
    #[default]
    Approve,
    Reject,
}

/// Where a step waiting for approval stands (`stepDetails.<step>.approval`).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepApproval {
    /// Why its plugin asks for approval.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Who may approve (user names, `group:<name>`); empty: anyone allowed to create one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// How many different approvers must approve.
    pub required: u32,
    /// The approvers whose approval counts, so far.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved_by: Vec<String>,
    /// When the step began to wait.
    pub since: Time,
    /// When the wait ends, if it has a limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Time>,
    /// What happens then: `Fail` or `Start`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub on_timeout: String,
}

/// Both CustomResourceDefinitions as one multi-document YAML, as `crdgen` prints and
/// `crds/` holds.
///
/// # Errors
/// Serialization failed (never for these types).
pub fn crds_yaml() -> Result<String, serde_saphyr::SerializeError> {
    use kube::CustomResourceExt;
    let mut out =
        String::from("# Generated by `workflow-operator crdgen` (make manifests). Do not edit.\n");
    for crd in [WorkflowGroup::crd(), Workflow::crd(), Approval::crd()] {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_in_crds_match_the_types() {
        let generated = crds_yaml().unwrap();
        let checked_in = include_str!("../../crds/workflow.rxg456.cn.yaml");
        assert!(
            generated == checked_in,
            "crds/workflow.rxg456.cn.yaml is out of date with the Rust types: run `make manifests`"
        );
    }

    #[test]
    fn a_types_pod_template_is_laid_over_the_groups() {
        let group: WorkflowGroupSpec = serde_json::from_value(serde_json::json!({
            "type": "t", "clusterName": "c", "workflowSteps": ["pre-check", "setup"], "targets": [],
            "podTemplate": {
                "serviceAccountName": "ops",
                "env": [{"name": "A", "value": "group"}, {"name": "B", "value": "group"}],
                "nodeSelector": {"zone": "a", "disk": "ssd"},
                "volumes": [{"name": "key", "secret": {"secretName": "group-key"}}],
                "priorityClassName": "low"
            },
            "podTemplates": {"setup": {
                "env": [{"name": "B", "value": "setup"}, {"name": "C", "value": "setup"}],
                "nodeSelector": {"zone": "b"},
                "volumes": [{"name": "key", "secret": {"secretName": "setup-key"}}],
                "priorityClassName": "high"
            }}
        }))
        .unwrap();
        let plain = group.pod_template_of("pre-check").unwrap();
        assert_eq!(Some(&plain), group.pod_template.as_ref());
        let setup = group.pod_template_of("setup").unwrap();
        assert_eq!(setup.service_account_name.as_deref(), Some("ops"));
        let env: Vec<(&str, Option<&str>)> = setup
            .env
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_deref()))
            .collect();
        assert_eq!(
            env,
            [
                ("A", Some("group")),
                ("B", Some("setup")),
                ("C", Some("setup"))
            ]
        );
        assert_eq!(setup.node_selector["zone"], "b");
        assert_eq!(setup.node_selector["disk"], "ssd");
        assert_eq!(setup.volumes.len(), 1);
        assert_eq!(
            setup.volumes[0]
                .secret
                .as_ref()
                .and_then(|s| s.secret_name.as_deref()),
            Some("setup-key")
        );
        assert_eq!(setup.priority_class_name.as_deref(), Some("high"));
        let none = WorkflowGroupSpec {
            pod_template: None,
            ..group.clone()
        };
        assert_eq!(none.pod_template_of("pre-check"), None);
    }

    const SEED_SAMPLE: &str = include_str!("../../examples/workflowgroup-sample.yaml");

    #[test]
    fn the_seed_sample_group_parses_and_keeps_its_fields() {
        let group: WorkflowGroup = serde_saphyr::from_str(SEED_SAMPLE).unwrap();
        assert_eq!(group.spec.type_, "cluster-expansion");
        assert_eq!(group.spec.cluster_name, "test-cluster");
        assert_eq!(
            group.spec.workflow_steps,
            ["pre-check", "setup", "post-check"]
        );
        assert_eq!(group.spec.targets.len(), 3);
        assert_eq!(group.spec.targets[0].role, "Master");
        assert!(!group.spec.paused);
        assert!(group.spec.params.is_empty());
    }
}

//! What a step pod gets beyond its command (`spec.podTemplate` of both kinds).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ConfigMapVolumeSource, EmptyDirVolumeSource, EnvFromSource, LocalObjectReference,
    PodSecurityContext, ResourceRequirements, SecretVolumeSource, SecurityContext, Toleration,
    VolumeMount,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::*;

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
pub(super) fn pod_template_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
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

pub(super) fn pod_templates_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
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

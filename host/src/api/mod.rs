//! The API: `WorkflowGroup` and `Workflow` in `workflow.rxg456.cn/v1alpha1`.
//!
//! Seed-compatible: every field, phase string and label of the original Go types keeps its
//! name and meaning, so the seed's sample YAML applies unchanged. What we add is optional.

pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
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
/// On a group: the user who asked for its re-run or its pause (or its resumption), which the
/// admission policy `requests.workflow.rxg456.cn` lets be only the user who makes that
/// request; `status.runs` records it.
pub const ANNOTATION_REQUESTED_BY: &str = "workflow.rxg456.cn/requested-by";
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

mod approval;
mod group;
mod pod_template;
mod rules;
pub mod window;
mod workflow;

pub use approval::*;
pub use group::*;
pub use pod_template::*;
pub use window::{FieldError, MaintenanceWindow, Weekday};
pub use workflow::*;

/// A time a gate named, as people read it.
pub fn fmt_time(unix: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(unix)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| {
            format!("{unix}s after the epoch, which is no valid time: the plugin holds this step")
        })
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
    use super::rules::dns_label_pattern;
    use super::*;

    #[test]
    fn checked_in_crds_match_the_types() {
        let generated = crds_yaml().unwrap();
        let checked_in = include_str!("../../../crds/workflow.rxg456.cn.yaml");
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
        assert_eq!(Some(&plain), group.pod_template.as_deref());
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

    /// What the CRD's schema refuses of `word` by `pattern` and `max` (characters).
    fn crd_accepts(pattern: &str, max: usize, word: &str) -> bool {
        let schema = serde_json::json!({"type": "string", "pattern": pattern, "maxLength": max});
        jsonschema::validator_for(&schema)
            .expect("the CRD's pattern compiles")
            .is_valid(&serde_json::json!(word))
    }

    #[test]
    fn the_crd_refuses_the_target_names_roles_and_cluster_names_the_validators_refuse() {
        use workflow_model::words;
        let names = [
            "node-1",
            "ip-10-0-0-1.ec2.internal",
            "a",
            "7",
            "Node-1",
            "node_1",
            "node 1",
            "-node",
            "node-",
            "node.",
            ".node",
            "a..b",
            "node-1;reboot",
            "node\u{1b}[2J",
            "",
        ];
        for name in names {
            assert_eq!(
                crd_accepts(words::DNS_SUBDOMAIN_PATTERN, words::DNS_SUBDOMAIN_MAX, name),
                words::dns_subdomain("f", name).is_ok(),
                "target name {name:?}"
            );
        }
        let roles: [&str; 13] = [
            "",
            "Master",
            "Worker",
            "etcd",
            "control_plane.v2",
            "-Master",
            "Master-",
            "a,b",
            "a b",
            "a:b",
            "a\u{0}",
            &"r".repeat(63),
            &"r".repeat(64),
        ];
        for role in roles {
            assert_eq!(
                crd_accepts(words::ROLE_PATTERN, words::ROLE_MAX, role),
                role.is_empty() || words::role("f", role).is_ok(),
                "role {role:?}"
            );
        }
        let clusters: [&str; 7] = [
            "",
            "test-cluster",
            "Prod EU 1",
            "a\u{1b}b",
            "a\u{85}b",
            "a\nb",
            &"c".repeat(101),
        ];
        for cluster in clusters {
            assert_eq!(
                crd_accepts(
                    words::CLUSTER_NAME_PATTERN,
                    words::CLUSTER_NAME_MAX,
                    cluster
                ),
                words::cluster_name("f", cluster).is_ok(),
                "cluster name {cluster:?}"
            );
        }
        assert_eq!(dns_label_pattern(), words::DNS_LABEL_PATTERN);
    }

    #[test]
    fn both_crds_hold_the_word_rules_of_targets_and_the_cluster_name() {
        use kube::CustomResourceExt;
        for crd in [WorkflowGroup::crd(), Workflow::crd()] {
            let json = serde_json::to_string(&crd).expect("a CRD serializes");
            for rule in [
                workflow_model::words::DNS_SUBDOMAIN_PATTERN,
                workflow_model::words::ROLE_PATTERN,
                workflow_model::words::CLUSTER_NAME_PATTERN,
            ] {
                let quoted = serde_json::to_string(rule).expect("a string serializes");
                assert!(
                    json.contains(&quoted),
                    "{rule} is not in {}",
                    crd.spec.names.kind
                );
            }
        }
    }

    const SEED_SAMPLE: &str = include_str!("../../../examples/workflowgroup-sample.yaml");

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

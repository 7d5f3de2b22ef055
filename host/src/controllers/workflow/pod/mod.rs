//! A step's attempt as a bare Pod, as Argo Workflows and Tekton run steps, and the evidence
//! read back from it.
//!
//! A `batch/v1` Job would add a second object per step and at least a second of the Job
//! controller's batching; retries and timeouts are ours anyway (the plugin's `evaluate`
//! decides retries). What a Job did for us is done here: a pod deleted or evicted before it
//! finished is a failed attempt with that reason, and a pod that is still unfinished when the
//! step's timeout has passed (stuck unschedulable, pulling its image, or running) is a failed
//! attempt and is deleted.
//!
//! This module builds the pod and what it mounts; [`evidence`] reads the attempt back from it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, DownwardAPIVolumeFile,
    DownwardAPIVolumeSource, EnvVar, ObjectFieldSelector, Pod, PodSecurityContext, PodSpec,
    SeccompProfile, SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::api::{
    LABEL_ATTEMPT, LABEL_GROUP_NAME, LABEL_RUN, LABEL_STEP, LABEL_WORKFLOW_NAME,
    LABEL_WORKFLOW_TYPE, LABEL_WORKFLOW_UID, Step, StepPodTemplate, Target, Workflow, run_of,
};
use crate::controllers::context::StepDefaults;
use crate::names::{pod_name, targets_config_map_name};
use sha2::{Digest, Sha256};
use workflow_model::text;

pub mod evidence;
pub mod wire;

pub use self::evidence::{keep_pod_evidence, latest_attempts, observe_pod};
pub use crate::cached_pod::{CONTAINER, CachedPod};

/// Where `workflow-runner` looks for its SSH key and known hosts.
pub const SSH_DIR: &str = "/etc/workflow/ssh";
/// The environment variable holding the command `workflow-runner` runs on each target.
pub const REMOTE_COMMAND_ENV: &str = "WORKFLOW_SSH_COMMAND";
/// Name of the volume of the default SSH Secret.
const SSH_VOLUME: &str = "workflow-ssh";

/// The labels every pod of `workflow` carries: the Workflow's own labels (so a group's labels
/// reach its pods, as Tekton propagates them), then ours.
pub fn pod_labels(workflow: &Workflow, step: &str, attempt: u32) -> BTreeMap<String, String> {
    let mut labels = workflow.labels().clone();
    let name = workflow.name_any();
    if name.len() <= 63 {
        labels.insert(LABEL_WORKFLOW_NAME.into(), name);
    }
    labels.insert(
        LABEL_WORKFLOW_UID.into(),
        workflow.uid().unwrap_or_default(),
    );
    labels.insert(LABEL_WORKFLOW_TYPE.into(), workflow.spec.type_.clone());
    labels.insert(LABEL_STEP.into(), step.into());
    labels.insert(LABEL_ATTEMPT.into(), attempt.to_string());
    match run_of(workflow) {
        1 => {}
        run => {
            labels.insert(LABEL_RUN.into(), run.to_string());
        }
    }
    labels
}

/// Where a step container finds the Workflow's targets, as the JSON of `WORKFLOW_TARGETS`.
pub const TARGETS_FILE: &str = "/etc/workflow/targets.json";
const TARGETS_DIR: &str = "/etc/workflow";
const TARGETS_KEY: &str = "targets.json";
const TARGETS_VOLUME: &str = "workflow-targets";
/// On a step pod: its targets, as JSON, which its targets file is made of (through the
/// downward API). Absent when they are too long for it: the file is then the Workflow's
/// targets ConfigMap.
pub const ANNOTATION_TARGETS: &str = "workflow.rxg456.cn/targets";

/// Longest target list (as JSON) a step pod carries in its own annotation; a longer one is in a
/// ConfigMap of the Workflow's (all of a pod's annotations together may not pass 256 KiB). Most
/// groups' lists fit, and their Workflows then write no ConfigMap at all.
pub const MAX_TARGETS_IN_POD: usize = 128 * 1024;

/// Whether `workflow`'s targets are too long for its step pods to carry: then its steps mount
/// them from a ConfigMap, written before its first pod.
pub fn needs_targets_config_map(workflow: &Workflow) -> bool {
    targets_json(&workflow.spec.targets).len() > MAX_TARGETS_IN_POD
}

/// Largest target list (as JSON) that also travels in `WORKFLOW_TARGETS`,
/// `WORKFLOW_TARGET_NAMES` and `WORKFLOW_TARGET_IPS`. The kernel refuses any single
/// environment string over 128 KiB and all of them together over about 2 MiB; a longer list is
/// only in the file.
pub const MAX_TARGETS_IN_ENV: usize = 32 * 1024;

/// The user and group a step runs as when its template names no security context.
pub const DEFAULT_STEP_USER: i64 = 65534;

/// Whether `existing`, a ConfigMap of the name of `workflow`'s targets' ConfigMap, holds what
/// that one would, for good (immutable): then it does not matter who made it.
pub fn targets_config_map_fits(existing: &ConfigMap, workflow: &Workflow) -> bool {
    let ours = targets_config_map(workflow);
    existing.immutable == Some(true)
        && existing.data == ours.data
        && existing.binary_data.as_ref().is_none_or(BTreeMap::is_empty)
}

/// The ConfigMap holding `workflow`'s targets, owned by it (deleted with it).
pub fn targets_config_map(workflow: &Workflow) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(targets_config_map_name(workflow)),
            namespace: workflow.namespace(),
            labels: Some(BTreeMap::from([(
                LABEL_WORKFLOW_UID.to_string(),
                workflow.uid().unwrap_or_default(),
            )])),
            owner_references: workflow.controller_owner_ref(&()).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            TARGETS_KEY.to_string(),
            targets_json(&workflow.spec.targets),
        )])),
        immutable: Some(true),
        ..ConfigMap::default()
    }
}

fn targets_json(targets: &[Target]) -> String {
    serde_json::to_string(targets).unwrap_or_default()
}

/// The targets `step` runs on: those its status narrows it to in this run (a re-run of the
/// failed ones), else all of the Workflow's, in the Workflow's order.
pub fn step_targets<'a>(workflow: &'a Workflow, step: &Step) -> Cow<'a, [Target]> {
    let only = workflow
        .status
        .as_ref()
        .and_then(|s| s.step_details.get(&step.name))
        .map(|d| &d.only_targets)
        .filter(|only| !only.is_empty());
    match only {
        Some(only) => Cow::Owned(
            workflow
                .spec
                .targets
                .iter()
                .filter(|t| only.contains(&t.name))
                .cloned()
                .collect(),
        ),
        None => Cow::Borrowed(&workflow.spec.targets),
    }
}

/// The pod running `attempt` of `step`: `/bin/sh -c <command>` in the step's image, owned by
/// the Workflow, never restarted by Kubernetes (the plugin decides about retries), stopped by
/// the kubelet when it runs longer than the step's timeout. The Workflow's pod template gives
/// it what real work needs (service account, Secrets, placement, resources); without a
/// security context of its own it passes the `restricted` Pod Security Standard.
pub fn build_pod(workflow: &Workflow, step: &Step, attempt: u32, defaults: &StepDefaults) -> Pod {
    let mut template = workflow
        .spec
        .pod_template
        .as_deref()
        .cloned()
        .unwrap_or_default();
    if let Some(account) = crate::operator_steps::service_account(workflow, &step.name) {
        // The drain's steps act on Nodes through the API server, as the drain's account.
        template.service_account_name = Some(account.to_string());
    }
    let targets = step_targets(workflow, step);
    // A list narrowed to fewer targets (a re-run of the failed ones) always fits.
    let json = targets_json(&targets);
    let in_pod = matches!(targets, Cow::Owned(_)) || json.len() <= MAX_TARGETS_IN_POD;
    let env = step_env(workflow, step, attempt, &template, &targets);
    let (volumes, mounts) = step_volumes(workflow, step, &template, defaults, in_pod);
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(workflow, &step.name, attempt)),
            namespace: workflow.namespace(),
            labels: Some(pod_labels(workflow, &step.name, attempt)),
            annotations: in_pod.then(|| BTreeMap::from([(ANNOTATION_TARGETS.into(), json)])),
            owner_references: workflow.controller_owner_ref(&()).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            // A service account's token only where the template asks for one.
            automount_service_account_token: Some(template.service_account_name.is_some()),
            service_account_name: template.service_account_name,
            active_deadline_seconds: step.timeout_seconds.map(i64::from),
            node_selector: (!template.node_selector.is_empty()).then_some(template.node_selector),
            affinity: template.affinity,
            tolerations: (!template.tolerations.is_empty()).then_some(template.tolerations),
            image_pull_secrets: (!template.image_pull_secrets.is_empty())
                .then_some(template.image_pull_secrets),
            priority_class_name: template.priority_class_name,
            security_context: Some(
                template
                    .security_context
                    .unwrap_or_else(restricted_pod_security),
            ),
            volumes: Some(volumes),
            containers: vec![Container {
                name: CONTAINER.into(),
                image: Some(step.image.clone().unwrap_or_else(|| defaults.image.clone())),
                command: Some(vec!["/bin/sh".into(), "-c".into(), step.command.clone()]),
                env: Some(env),
                env_from: (!template.env_from.is_empty()).then_some(template.env_from),
                volume_mounts: Some(mounts),
                resources: template.resources,
                security_context: Some(
                    template
                        .container_security_context
                        .unwrap_or_else(restricted_container_security),
                ),
                termination_message_policy: Some("FallbackToLogsOnError".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The step container's environment: the operator's variables (the Workflow, the step, the
/// attempt, the targets), then the template's and the step's, which cannot change the
/// operator's.
fn step_env(
    workflow: &Workflow,
    step: &Step,
    attempt: u32,
    template: &StepPodTemplate,
    targets: &[Target],
) -> Vec<EnvVar> {
    let json = targets_json(targets);
    let join = |f: fn(&Target) -> &str| targets.iter().map(f).collect::<Vec<_>>().join(" ");
    let mut env = vec![
        env_var(
            "WORKFLOW_GROUP",
            workflow
                .labels()
                .get(LABEL_GROUP_NAME)
                .map(String::as_str)
                .unwrap_or(""),
        ),
        env_var("WORKFLOW_NAME", &workflow.name_any()),
        env_var("WORKFLOW_TYPE", &workflow.spec.type_),
        env_var("WORKFLOW_STEP", &step.name),
        env_var("WORKFLOW_ATTEMPT", &attempt.to_string()),
        env_var("WORKFLOW_CLUSTER_NAME", &workflow.spec.cluster_name),
        env_var("WORKFLOW_TARGET_COUNT", &targets.len().to_string()),
        env_var("WORKFLOW_TARGETS_FILE", TARGETS_FILE),
        // The runner refuses a targets file with other content: a ConfigMap of this name
        // that someone else made or replaced never redirects the step.
        env_var(
            "WORKFLOW_TARGETS_SHA256",
            &hex::encode(Sha256::digest(json.as_bytes())),
        ),
    ];
    if json.len() <= MAX_TARGETS_IN_ENV {
        env.extend([
            env_var("WORKFLOW_TARGETS", &json),
            env_var("WORKFLOW_TARGET_NAMES", &join(|t| &t.name)),
            env_var("WORKFLOW_TARGET_IPS", &join(|t| &t.ip)),
        ]);
    }
    // The operator's variables are not the template's or the plugin's to change.
    let ours = |name: &str| env.iter().any(|e| e.name == name);
    let theirs: Vec<EnvVar> = template
        .env
        .iter()
        .filter(|e| !ours(&e.name))
        .cloned()
        .chain(
            step.env
                .iter()
                .filter(|e| !ours(&e.name))
                .map(|e| env_var(&e.name, &e.value)),
        )
        .collect();
    env.extend(theirs);

    env
}

/// The volume of the targets file: the pod's own annotation of them when it carries them
/// (`in_pod`), else the Workflow's ConfigMap.
fn targets_volume(workflow: &Workflow, in_pod: bool) -> Volume {
    if !in_pod {
        return Volume {
            name: TARGETS_VOLUME.into(),
            config_map: Some(ConfigMapVolumeSource {
                name: targets_config_map_name(workflow),
                optional: Some(false),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        };
    }
    Volume {
        name: TARGETS_VOLUME.into(),
        downward_api: Some(DownwardAPIVolumeSource {
            items: Some(vec![DownwardAPIVolumeFile {
                path: TARGETS_KEY.into(),
                field_ref: Some(ObjectFieldSelector {
                    field_path: format!("metadata.annotations['{ANNOTATION_TARGETS}']"),
                    ..ObjectFieldSelector::default()
                }),
                ..DownwardAPIVolumeFile::default()
            }]),
            ..DownwardAPIVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// The pod's volumes and the container's mounts: the targets (the pod's own annotation of them
/// when it carries them, `in_pod`, else the Workflow's ConfigMap), the template's, and the
/// fleet's SSH key for a step that logs in through the runner (unless the template mounts
/// something there already).
fn step_volumes(
    workflow: &Workflow,
    step: &Step,
    template: &StepPodTemplate,
    defaults: &StepDefaults,
    in_pod: bool,
) -> (Vec<Volume>, Vec<VolumeMount>) {
    let mut volumes = vec![targets_volume(workflow, in_pod)];
    volumes.extend(
        template
            .volumes
            .iter()
            .filter(|v| v.name != TARGETS_VOLUME)
            .map(|v| Volume {
                name: v.name.clone(),
                secret: v.secret.clone(),
                config_map: v.config_map.clone(),
                empty_dir: v.empty_dir.clone(),
                ..Volume::default()
            }),
    );
    let mut mounts = vec![VolumeMount {
        name: TARGETS_VOLUME.into(),
        mount_path: TARGETS_DIR.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    }];
    mounts.extend(
        template
            .volume_mounts
            .iter()
            .filter(|m| m.mount_path != TARGETS_DIR)
            .cloned(),
    );
    let ssh_mounted = |path: &str| path.trim_end_matches('/') == SSH_DIR;
    if let Some(secret) = &defaults.ssh_secret
        && logs_in_through_runner(step, defaults)
        && !mounts.iter().any(|m| ssh_mounted(&m.mount_path))
        && !volumes.iter().any(|v| v.name == SSH_VOLUME)
    {
        volumes.push(Volume {
            name: SSH_VOLUME.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.clone()),
                optional: Some(true),
                // The step's group (fsGroup) reads the key; no one else.
                default_mode: Some(0o440),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
        mounts.push(VolumeMount {
            name: SSH_VOLUME.into(),
            mount_path: SSH_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    (volumes, mounts)
}

/// The runner's command: a step whose command is this alone runs `workflow-runner`.
pub const RUNNER: &str = "workflow-runner";

/// The runner's modes that act through the API server instead of logging in to targets.
const API_SERVER_MODES: [&str; 3] = [
    "WORKFLOW_CHECK_NODE_READY",
    "WORKFLOW_DRAIN",
    "WORKFLOW_DELETE_NODES",
];

/// Whether `step` logs in to its targets through the runner: its command is `workflow-runner`
/// alone, in the operator's step image, in a mode that logs in. Only such a step gets the
/// fleet's SSH key (`--ssh-secret`): a step whose command or image was chosen freely, or a
/// runner that only talks to the API server, does not. (A pod template may still mount a
/// Secret of its own choosing there.) The runner, in turn, sends no file under the key's or
/// the service account's mount to a target.
pub fn logs_in_through_runner(step: &Step, defaults: &StepDefaults) -> bool {
    step.command.trim() == RUNNER
        && step.image.as_deref().is_none_or(|i| i == defaults.image)
        && !step
            .env
            .iter()
            .any(|e| API_SERVER_MODES.contains(&e.name.as_str()) && e.value != "false")
}

/// What an approval of `step` approves: the digest (`sha256:<hex>`) of the pod spec its
/// attempts run (command, image, environment, volumes, the pod template: all but the attempt's
/// number) and of the Workflow's targets, and the same in one line for a person. Any change of
/// what would run changes the digest, and an approval of the old one no longer counts.
pub fn approval_content(
    workflow: &Workflow,
    step: &Step,
    defaults: &StepDefaults,
) -> (String, String) {
    let mut spec = build_pod(workflow, step, 1, defaults)
        .spec
        .unwrap_or_default();
    for container in &mut spec.containers {
        if let Some(env) = container.env.as_mut() {
            env.retain(|e| e.name != "WORKFLOW_ATTEMPT");
        }
    }
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(&spec).unwrap_or_default());
    hasher.update([0]);
    hasher.update(targets_json(&step_targets(workflow, step)));
    let digest = format!("sha256:{}", hex::encode(hasher.finalize()));
    (digest, content_line(workflow, step, defaults))
}

/// What `step` runs, in one line: its command (on each target, for the runner's remote
/// command), its image and its targets.
fn content_line(workflow: &Workflow, step: &Step, defaults: &StepDefaults) -> String {
    let remote = step
        .env
        .iter()
        .find(|e| e.name == REMOTE_COMMAND_ENV && !e.value.is_empty());
    let command = match remote {
        Some(remote) => format!("`{}` on each target, by `{}`", remote.value, step.command),
        None => format!("`{}`", step.command),
    };
    let image = step.image.as_deref().unwrap_or(&defaults.image);
    let targets = step_targets(workflow, step);
    let named: Vec<String> = targets
        .iter()
        .take(3)
        .map(|t| format!("{} ({})", t.name, t.ip))
        .collect();
    let more = targets.len().saturating_sub(named.len());
    let mut line = format!(
        "{command} in {image} with {} target{}",
        targets.len(),
        if targets.len() == 1 { "" } else { "s" }
    );
    if !named.is_empty() {
        line.push_str(&format!(": {}", named.join(", ")));
    }
    if more > 0 {
        line.push_str(&format!(" and {more} more"));
    }
    text::printable(&text::fold(&line), 400)
}

/// The pod half of the `restricted` Pod Security Standard: a numeric non-root user, the
/// runtime's default seccomp profile; volumes owned by the user's group.
fn restricted_pod_security() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(DEFAULT_STEP_USER),
        run_as_group: Some(DEFAULT_STEP_USER),
        // Volumes (a Secret's key files) belong to this group: `defaultMode: 0440` keeps them
        // from other users and readable by the step.
        fs_group: Some(DEFAULT_STEP_USER),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

/// The container half: no privilege escalation, every capability dropped.
fn restricted_container_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    }
}

fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
        PodCondition, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::WorkflowSpec;
    use crate::cached_pod::CachedPodStatus;
    use crate::controllers::write;
    use crate::provenance::Provenance;

    fn workflow() -> Workflow {
        let mut wf = Workflow::new(
            "wf",
            WorkflowSpec {
                type_: "pre-check".into(),
                steps: vec![
                    Step::new("validate-nodes", "true"),
                    Step::new("check-network", "true")
                        .depends_on(["validate-nodes"])
                        .timeout_secs(60),
                ],
                cluster_name: "c".into(),
                ..WorkflowSpec::default()
            },
        );
        wf.metadata.namespace = Some("ns".into());
        wf.metadata.uid = Some("uid-1".into());
        wf
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    /// The pod of `attempt` of `step`, created at second 1000, in `phase` with `status`.
    fn pod(wf: &Workflow, step: &str, attempt: u32, phase: &str, status: PodStatus) -> Pod {
        let step = wf.spec.steps.iter().find(|s| s.name == step).unwrap();
        let mut pod = build_pod(wf, step, attempt, &StepDefaults::image("busybox"));
        pod.metadata.creation_timestamp = Some(Time(at(1000)));
        pod.status = Some(PodStatus {
            phase: Some(phase.into()),
            ..status
        });
        pod
    }

    fn terminated_with(exit_code: i32, message: &str) -> PodStatus {
        PodStatus {
            container_statuses: Some(vec![ContainerStatus {
                name: CONTAINER.into(),
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code,
                        message: Some(message.into()),
                        ..ContainerStateTerminated::default()
                    }),
                    ..ContainerState::default()
                }),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        }
    }

    #[test]
    fn a_step_pod_runs_the_command_owned_by_its_workflow_and_never_restarts() {
        let wf = workflow();
        let pod = build_pod(
            &wf,
            &wf.spec.steps[1],
            2,
            &StepDefaults::image("busybox:1.36"),
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(spec.active_deadline_seconds, Some(60));
        let container = &spec.containers[0];
        assert_eq!(
            container.command.as_ref().unwrap(),
            &["/bin/sh", "-c", "true"]
        );
        assert_eq!(
            container.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("Workflow", Some(true))
        );
        assert_eq!(pod.labels()[LABEL_ATTEMPT], "2");
        assert_eq!(pod.labels()[LABEL_STEP], "check-network");
    }

    fn env_of(pod: &Pod) -> BTreeMap<String, Option<String>> {
        pod.spec.as_ref().unwrap().containers[0]
            .env
            .iter()
            .flatten()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect()
    }

    #[test]
    fn without_a_template_a_step_pod_passes_the_restricted_pod_security_standard() {
        let wf = workflow();
        let pod = build_pod(
            &wf,
            &wf.spec.steps[0],
            1,
            &StepDefaults::image("busybox:1.36"),
        );
        let spec = pod.spec.as_ref().unwrap();
        let security = spec.security_context.as_ref().unwrap();
        assert_eq!(security.run_as_non_root, Some(true));
        assert!(security.run_as_user.is_some_and(|u| u > 0));
        assert_eq!(security.fs_group, security.run_as_group);
        assert_eq!(
            security.seccomp_profile.as_ref().map(|p| p.type_.as_str()),
            Some("RuntimeDefault")
        );
        let container = spec.containers[0].security_context.as_ref().unwrap();
        assert_eq!(container.allow_privilege_escalation, Some(false));
        assert_eq!(
            container.capabilities.as_ref().and_then(|c| c.drop.clone()),
            Some(vec!["ALL".to_string()])
        );
        assert_eq!(container.privileged, None);
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(spec.service_account_name, None);
    }

    #[test]
    fn the_default_ssh_secret_is_mounted_optionally_unless_the_template_mounts_its_own() {
        let defaults = StepDefaults {
            image: "workflow-step:dev".into(),
            ssh_secret: Some("workflow-ssh".into()),
        };
        let mut wf = workflow();
        wf.spec.steps[0] =
            Step::new("validate-nodes", "workflow-runner").env("WORKFLOW_SSH_COMMAND", "true");
        let pod = build_pod(&wf, &wf.spec.steps[0], 1, &defaults);
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some("workflow-step:dev")
        );
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == SSH_VOLUME)
            .expect("the default SSH Secret's volume");
        let secret = volume.secret.as_ref().unwrap();
        assert_eq!(
            (
                secret.secret_name.as_deref(),
                secret.optional,
                secret.default_mode
            ),
            (Some("workflow-ssh"), Some(true), Some(0o440))
        );
        let mount = spec.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == SSH_VOLUME)
            .expect("mounted");
        assert_eq!(
            (mount.mount_path.as_str(), mount.read_only),
            (SSH_DIR, Some(true))
        );

        // A pod template that mounts its own Secret there gets only its own.
        wf.spec.pod_template = Some(
            serde_json::from_value(serde_json::json!({
                "volumes": [{"name": "ssh", "secret": {"secretName": "node-ssh"}}],
                "volumeMounts": [{"name": "ssh", "mountPath": "/etc/workflow/ssh/", "readOnly": true}],
            }))
            .unwrap(),
        );
        let pod = build_pod(&wf, &wf.spec.steps[0], 1, &defaults);
        let spec = pod.spec.as_ref().unwrap();
        let mounts: Vec<&str> = spec.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(mounts, ["workflow-targets", "ssh"]);

        // No default Secret configured: nothing is mounted.
        let pod = build_pod(&workflow(), &wf.spec.steps[0], 1, &StepDefaults::image("x"));
        assert_eq!(pod.spec.unwrap().volumes.unwrap().len(), 1);
    }

    #[test]
    fn the_fleets_key_goes_only_to_a_step_that_logs_in_through_the_runner() {
        let defaults = StepDefaults {
            image: "workflow-step:dev".into(),
            ssh_secret: Some("workflow-ssh".into()),
        };
        let has_key = |step: Step| {
            let mut wf = workflow();
            wf.spec.steps = vec![step];
            let pod = build_pod(&wf, &wf.spec.steps[0], 1, &defaults);
            let spec = pod.spec.unwrap();
            spec.volumes.iter().flatten().any(|v| v.name == SSH_VOLUME)
                || spec.containers[0]
                    .volume_mounts
                    .iter()
                    .flatten()
                    .any(|m| m.mount_path == SSH_DIR)
        };
        let runner = || Step::new("s", "workflow-runner").env("WORKFLOW_SSH_COMMAND", "uptime");
        assert!(has_key(runner()));
        // A command of the user's choosing, in the step image, cannot read it.
        assert!(!has_key(Step::new(
            "s",
            "cat /etc/workflow/ssh/ssh-privatekey"
        )));
        assert!(!has_key(Step::new(
            "s",
            "workflow-runner; cat /etc/workflow/ssh/*"
        )));
        // Nor can the runner in another image (which may be anything under that name).
        assert!(!has_key(runner().image("busybox")));
        assert!(has_key(runner().image("workflow-step:dev")));
        // Nor a runner that only talks to the API server.
        for mode in API_SERVER_MODES {
            assert!(!has_key(runner().env(mode, "true")), "{mode}");
        }
    }

    #[test]
    fn a_step_pod_gets_what_its_template_gives() {
        let mut wf = workflow();
        wf.spec.pod_template = Some(
            serde_json::from_value(serde_json::json!({
                "serviceAccountName": "node-ops",
                "env": [
                    {"name": "SSH_KEY", "valueFrom": {"secretKeyRef": {"name": "ssh", "key": "id"}}},
                    {"name": "WORKFLOW_STEP", "value": "not yours"}
                ],
                "envFrom": [{"configMapRef": {"name": "settings"}}],
                "volumes": [{"name": "ssh", "secret": {"secretName": "ssh", "defaultMode": 256}}],
                "volumeMounts": [{"name": "ssh", "mountPath": "/ssh", "readOnly": true}],
                "nodeSelector": {"workflow.rxg456.cn/node": "real"},
                "tolerations": [{"key": "workflow.rxg456.cn/real-node", "operator": "Exists"}],
                "resources": {"limits": {"memory": "64Mi"}},
                "imagePullSecrets": [{"name": "registry"}],
                "containerSecurityContext": {"privileged": true},
                "priorityClassName": "node-ops"
            }))
            .unwrap(),
        );
        let pod = build_pod(
            &wf,
            &wf.spec.steps[0],
            1,
            &StepDefaults::image("busybox:1.36"),
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.service_account_name.as_deref(), Some("node-ops"));
        assert_eq!(spec.automount_service_account_token, Some(true));
        assert_eq!(
            spec.node_selector.as_ref().unwrap()["workflow.rxg456.cn/node"],
            "real"
        );
        assert_eq!(spec.tolerations.as_ref().unwrap().len(), 1);
        assert_eq!(
            spec.image_pull_secrets.as_ref().unwrap()[0].name,
            "registry"
        );
        assert_eq!(spec.priority_class_name.as_deref(), Some("node-ops"));
        let volumes = spec.volumes.as_ref().unwrap();
        let ssh = volumes.iter().find(|v| v.name == "ssh").unwrap();
        assert_eq!(ssh.secret.as_ref().unwrap().default_mode, Some(256));
        let container = &spec.containers[0];
        let secret_env = container.env.iter().flatten().find(|e| e.name == "SSH_KEY");
        let secret_ref = secret_env
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.secret_key_ref.as_ref())
            .unwrap();
        assert_eq!(
            (secret_ref.name.as_str(), secret_ref.key.as_str()),
            ("ssh", "id")
        );
        // The operator's variables stay the operator's.
        assert_eq!(
            env_of(&pod)["WORKFLOW_STEP"].as_deref(),
            Some("validate-nodes")
        );
        assert_eq!(
            container
                .env
                .iter()
                .flatten()
                .filter(|e| e.name == "WORKFLOW_STEP")
                .count(),
            1
        );
        assert_eq!(container.env_from.as_ref().unwrap().len(), 1);
        assert!(
            container
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| m.mount_path == "/ssh")
        );
        assert_eq!(
            container
                .resources
                .as_ref()
                .unwrap()
                .limits
                .as_ref()
                .unwrap()["memory"]
                .0,
            "64Mi"
        );
        // The template's security context replaces the restricted default.
        assert_eq!(
            container.security_context.as_ref().unwrap().privileged,
            Some(true)
        );
        assert_eq!(
            container.security_context.as_ref().unwrap().capabilities,
            None
        );
    }

    fn targets_volume_of(pod: &Pod) -> &Volume {
        let spec = pod.spec.as_ref().unwrap();
        let volumes = spec.volumes.as_ref().unwrap();
        volumes.iter().find(|v| v.name == TARGETS_VOLUME).unwrap()
    }

    #[test]
    fn targets_of_any_allowed_count_reach_the_step_as_a_file_and_small_lists_also_as_env() {
        let mut wf = workflow();
        wf.spec.targets = vec![Target {
            name: "node-1".into(),
            ip: "192.168.1.101".into(),
            role: "Master".into(),
        }];
        let small = build_pod(&wf, &wf.spec.steps[0], 1, &StepDefaults::image("busybox"));
        let env = env_of(&small);
        assert_eq!(env["WORKFLOW_TARGET_NAMES"].as_deref(), Some("node-1"));
        assert_eq!(env["WORKFLOW_TARGET_COUNT"].as_deref(), Some("1"));
        assert_eq!(env["WORKFLOW_TARGETS_FILE"].as_deref(), Some(TARGETS_FILE));
        // A short list travels in the pod itself: its annotation, mounted as the file, with the
        // digest the runner checks; the Workflow writes no ConfigMap for it.
        let carried = &small.metadata.annotations.as_ref().unwrap()[ANNOTATION_TARGETS];
        assert_eq!(
            serde_json::from_str::<Vec<Target>>(carried).unwrap(),
            wf.spec.targets
        );
        assert_eq!(
            env["WORKFLOW_TARGETS_SHA256"].as_deref(),
            Some(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(carried.as_bytes())).as_str())
        );
        let volume = targets_volume_of(&small);
        assert!(volume.config_map.is_none() && volume.downward_api.is_some());
        assert!(!needs_targets_config_map(&wf));

        wf.spec.targets = (0..5000)
            .map(|i| Target {
                name: format!("node-with-a-rather-long-name-{i:05}"),
                ip: format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256),
                role: "Worker".into(),
            })
            .collect();
        let large = build_pod(&wf, &wf.spec.steps[0], 1, &StepDefaults::image("busybox"));
        let env = env_of(&large);
        assert_eq!(env["WORKFLOW_TARGET_COUNT"].as_deref(), Some("5000"));
        assert!(!env.contains_key("WORKFLOW_TARGETS"));
        // No environment string comes near the kernel's 128 KiB a string, nor all of them
        // near its 2 MiB.
        let sizes: Vec<usize> = env
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, String::len) + 2)
            .collect();
        assert!(sizes.iter().all(|&s| s < 128 * 1024));
        assert!(sizes.iter().sum::<usize>() < 256 * 1024);
        // The file has every target, from a ConfigMap the Workflow owns.
        let map = targets_config_map(&wf);
        let listed: Vec<Target> =
            serde_json::from_str(&map.data.as_ref().unwrap()[TARGETS_KEY]).unwrap();
        assert_eq!(listed, wf.spec.targets);
        assert!(write::controlled_by(&map, "uid-1"));
        assert!(needs_targets_config_map(&wf));
        let annotations = large.metadata.annotations.as_ref();
        assert!(annotations.is_none_or(|a| !a.contains_key(ANNOTATION_TARGETS)));
        let spec = large.spec.as_ref().unwrap();
        let volume = targets_volume_of(&large);
        assert_eq!(
            volume.config_map.as_ref().map(|c| c.name.clone()),
            map.metadata.name
        );
        assert!(
            spec.containers[0]
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| TARGETS_FILE.starts_with(&m.mount_path) && m.name == TARGETS_VOLUME)
        );
    }

    #[test]
    fn the_latest_attempt_of_each_step_carries_its_pods_evidence() {
        let wf = workflow();
        let first = pod(
            &wf,
            "validate-nodes",
            1,
            "Failed",
            terminated_with(1, "flaky"),
        );
        let second = pod(
            &wf,
            "validate-nodes",
            2,
            "Succeeded",
            terminated_with(0, "all good\n"),
        );
        let running = pod(&wf, "check-network", 1, "Running", PodStatus::default());
        let pods = [second.clone(), first, running.clone()].map(CachedPod::from);
        let attempts = latest_attempts(&wf, &pods, at(1001));
        let validate = &attempts["validate-nodes"];
        assert_eq!(validate.number, 2);
        assert_eq!(validate.pod, second.name_any());
        let outcome = validate.outcome.as_ref().expect("finished");
        assert!(outcome.succeeded);
        assert_eq!(
            (outcome.exit_code, outcome.message.as_str()),
            (Some(0), "all good")
        );
        let network = &attempts["check-network"];
        assert_eq!(network.outcome, None);
        assert_eq!(
            network.deadline,
            Some(1060),
            "created at 1000 with a 60 s timeout"
        );
        assert_eq!(network.pod, running.name_any());
    }

    #[test]
    fn an_evicted_pod_is_a_failed_attempt_with_the_eviction_as_reason() {
        let wf = workflow();
        let evicted = PodStatus {
            reason: Some("Evicted".into()),
            message: Some("The node was low on resource: memory.".into()),
            ..PodStatus::default()
        };
        let attempt = observe_pod(
            &pod(&wf, "validate-nodes", 1, "Failed", evicted).into(),
            1,
            None,
            at(1001),
        );
        let outcome = attempt.outcome.expect("finished");
        assert!(!outcome.succeeded);
        assert_eq!(outcome.exit_code, None);
        assert_eq!(
            outcome.message,
            "Evicted: The node was low on resource: memory."
        );
    }

    #[test]
    fn a_pod_being_deleted_before_it_finished_is_a_failed_attempt() {
        let wf = workflow();
        let mut deleted = pod(&wf, "validate-nodes", 1, "Running", PodStatus::default());
        deleted.metadata.deletion_timestamp = Some(Time(at(1001)));
        let outcome = observe_pod(&deleted.into(), 1, None, at(1002))
            .outcome
            .expect("finished");
        assert!(!outcome.succeeded);
        assert!(outcome.message.contains("deleted"), "{}", outcome.message);
    }

    #[test]
    fn a_pod_that_failed_before_its_deadline_keeps_its_evidence_when_deleted_after_it() {
        let wf = workflow();
        let mut status = terminated_with(2, "disk full");
        if let Some(t) = status.container_statuses.as_mut().unwrap()[0]
            .state
            .as_mut()
            .and_then(|s| s.terminated.as_mut())
        {
            t.finished_at = Some(Time(at(1010)));
        }
        let mut failed = pod(&wf, "validate-nodes", 1, "Failed", status);
        failed.metadata.deletion_timestamp = Some(Time(at(1100)));
        failed.metadata.deletion_grace_period_seconds = Some(30);
        let outcome = observe_pod(&failed.clone().into(), 1, Some(60), at(1101))
            .outcome
            .expect("finished");
        assert_eq!(
            (outcome.exit_code, outcome.message.as_str()),
            (Some(2), "disk full")
        );
        // Had it still been running when stopped past its deadline: the deadline's evidence.
        failed.status = Some(PodStatus {
            phase: Some("Running".into()),
            ..PodStatus::default()
        });
        let attempt = observe_pod(&failed.into(), 1, Some(60), at(1101));
        let outcome = attempt.outcome.expect("finished");
        assert_eq!(
            (
                outcome.message.as_str(),
                outcome.duration_ms,
                attempt.observed
            ),
            (
                "DeadlineExceeded: not finished within 60s",
                60_000,
                Some(at(1060))
            )
        );
    }

    #[test]
    fn an_unschedulable_pod_past_the_steps_timeout_fails_and_is_stopped() {
        let wf = workflow();
        let unschedulable = PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                message: Some("0/1 nodes are available".into()),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        };
        let stuck = CachedPod::from(pod(&wf, "check-network", 1, "Pending", unschedulable));
        let (before, stop) = observe_pod(&stuck, 1, Some(60), at(1059)).at(1059);
        assert_eq!(
            (before.outcome, stop, before.deadline),
            (None, false, Some(1060))
        );
        let (after, stop) = observe_pod(&stuck, 1, Some(60), at(1060)).at(1060);
        assert!(stop);
        let outcome = after.outcome.expect("failed at the deadline");
        assert_eq!(
            outcome.message,
            "DeadlineExceeded: not finished within 60s (Unschedulable: 0/1 nodes are available)"
        );
    }

    #[test]
    fn a_pod_that_cannot_pull_its_image_says_so_at_the_deadline() {
        let wf = workflow();
        let pulling = PodStatus {
            container_statuses: Some(vec![ContainerStatus {
                name: CONTAINER.into(),
                state: Some(ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some("ImagePullBackOff".into()),
                        message: Some("Back-off pulling image".into()),
                    }),
                    ..ContainerState::default()
                }),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        };
        let stuck = CachedPod::from(pod(&wf, "check-network", 1, "Pending", pulling));
        let (attempt, stop) = observe_pod(&stuck, 1, Some(60), at(2000)).at(2000);
        assert!(stop);
        let outcome = attempt.outcome.expect("failed");
        assert!(
            outcome.message.contains("ImagePullBackOff"),
            "{}",
            outcome.message
        );
    }

    #[test]
    fn pod_names_fit_in_63_characters_and_differ_per_attempt() {
        let mut wf = workflow();
        wf.metadata.name = Some("w".repeat(60));
        let a1 = pod_name(&wf, "validate-nodes", 1);
        let a2 = pod_name(&wf, "validate-nodes", 2);
        assert!(a1.len() <= 63 && a2.len() <= 63);
        assert_ne!(a1, a2);
        assert_eq!(a1, pod_name(&wf, "validate-nodes", 1));
    }

    #[test]
    fn a_cached_pod_keeps_its_evidence_and_notes_when_it_was_seen_finished() {
        let wf = workflow();
        let mut running = pod(&wf, "validate-nodes", 1, "Running", PodStatus::default());
        running.labels_mut().insert("team".into(), "infra".into());
        running.status.as_mut().unwrap().pod_ip = Some("10.0.0.1".into());
        let running = keep_pod_evidence(running, &Provenance::new(b"test"));
        assert_eq!(running.metadata.annotations, None);
        assert_eq!(
            running.metadata.labels, None,
            "no label is cached as a label"
        );
        assert_eq!(running.step.as_deref(), Some("validate-nodes"));
        assert_eq!(running.attempt, Some(1));
        assert_eq!(running.observed_finished, None);
        assert_eq!(
            running.status,
            Some(CachedPodStatus {
                phase: Some("Running".into()),
                ..CachedPodStatus::default()
            })
        );
        assert!(write::controlled_by(&running, &wf.uid().unwrap()));

        let done = pod(
            &wf,
            "validate-nodes",
            1,
            "Succeeded",
            terminated_with(0, "ok"),
        );
        let done = keep_pod_evidence(done, &Provenance::new(b"test"));
        let attempt = observe_pod(&done, 1, None, Timestamp::now());
        assert!(attempt.outcome.is_some_and(|o| o.succeeded));
        assert!(done.observed_finished.is_some());
        assert_eq!(attempt.observed, done.observed_finished);
    }

    #[test]
    fn a_pod_decoded_off_the_wire_is_cached_as_the_whole_pod_would_be() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let wf = workflow();
        let provenance = Provenance::new(b"test");
        let sign = |mut pod: Pod| {
            provenance.sign_pod(&mut pod, &wf.uid().unwrap());
            pod
        };
        let mut busy = sign(pod(
            &wf,
            "validate-nodes",
            3,
            "Failed",
            terminated_with(2, "disk full"),
        ));
        // What a pod carries and the cache does not keep, read off the wire all the same.
        busy.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kubelet".into()),
            operation: Some("Update".into()),
            ..ManagedFieldsEntry::default()
        }]);
        busy.annotations_mut().insert(
            "workflow.rxg456.cn/targets".into(),
            format!("[{}]", vec!["\"10.0.0.1\""; 2000].join(",")),
        );
        busy.labels_mut().insert("team".into(), "infra".into());
        busy.metadata.deletion_timestamp = Some(Time(at(1500)));
        let status = busy.status.as_mut().unwrap();
        status.pod_ip = Some("10.0.0.9".into());
        status.reason = Some("DeadlineExceeded".into());
        status.conditions = Some(vec![PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            ..PodCondition::default()
        }]);
        let forged = {
            let mut pod = busy.clone();
            pod.spec.as_mut().unwrap().containers[0].command = Some(vec!["rm".into()]);
            pod
        };
        let unsigned = pod(&wf, "check-network", 1, "Running", PodStatus::default());
        let bare = Pod {
            metadata: ObjectMeta {
                name: Some("bare".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        let mut signatures = Vec::new();
        for whole in [busy, forged, unsigned, bare] {
            let json = serde_json::to_string(&whole).unwrap();
            let decoded = serde_json::from_str::<wire::WirePod>(&json).unwrap().0;
            let mut decoded = keep_pod_evidence(decoded, &provenance);
            let mut expected = keep_pod_evidence(whole.clone(), &provenance);
            // When each was seen finished: a moment apart.
            for pod in [&mut decoded, &mut expected] {
                pod.observed_finished = None;
            }
            assert_eq!(decoded, expected, "{json}");
            signatures.push(decoded.signed);
        }
        assert_eq!(signatures, [true, false, false, false]);
        // Fields written as null decode as absent.
        let null =
            r#"{"metadata": {"name": "n", "annotations": null, "labels": null}, "spec": null}"#;
        let decoded = serde_json::from_str::<wire::WirePod>(null).unwrap().0;
        assert_eq!(decoded.metadata.annotations, None);
        assert_eq!(decoded.spec, None);
    }

    #[test]
    fn a_cached_pod_tells_the_same_about_its_attempt_as_the_pod() {
        let wf = workflow();
        let scheduled = PodCondition {
            type_: "Initialized".into(),
            status: "True".into(),
            ..PodCondition::default()
        };
        let unschedulable = PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            message: Some("0/1 nodes are available".into()),
            ..PodCondition::default()
        };
        let waiting = ContainerStatus {
            name: CONTAINER.into(),
            image: "busybox".into(),
            state: Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("ErrImagePull".into()),
                    message: None,
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        };
        let sidecar = ContainerStatus {
            name: "sidecar".into(),
            ..ContainerStatus::default()
        };
        let shapes = [
            ("Succeeded", terminated_with(0, "all 3 nodes ready")),
            (
                "Failed",
                terminated_with(3, "node 192.168.1.12 unreachable"),
            ),
            (
                "Failed",
                PodStatus {
                    reason: Some("DeadlineExceeded".into()),
                    message: Some("Pod was active longer than allowed".into()),
                    ..PodStatus::default()
                },
            ),
            (
                "Pending",
                PodStatus {
                    conditions: Some(vec![scheduled, unschedulable]),
                    ..PodStatus::default()
                },
            ),
            (
                "Pending",
                PodStatus {
                    container_statuses: Some(vec![sidecar, waiting]),
                    ..PodStatus::default()
                },
            ),
        ];
        for (phase, status) in shapes {
            let pod = pod(&wf, "check-network", 2, phase, status);
            let cached = keep_pod_evidence(pod.clone(), &Provenance::new(b"test"));
            for now in [at(1001), at(2000)] {
                let mut seen = observe_pod(&cached, 2, Some(60), now);
                seen.observed = None;
                assert_eq!(
                    seen,
                    observe_pod(&pod.clone().into(), 2, Some(60), now),
                    "{phase}: {pod:?}"
                );
            }
            assert_eq!(cached.attempt, Some(2));
            assert_eq!(cached.step.as_deref(), Some("check-network"));
        }
    }
}

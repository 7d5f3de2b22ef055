//! A step's attempt as a `batch/v1` Job, and the evidence read back from it.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec, PodTemplateSpec};
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::api::{
    LABEL_ATTEMPT, LABEL_GROUP_NAME, LABEL_STEP, LABEL_WORKFLOW_NAME, LABEL_WORKFLOW_TYPE,
    LABEL_WORKFLOW_UID, Workflow, WorkflowStep,
};
use crate::plugin::StepOutcome;
use crate::render::{bounded_name, short_hash};

/// Name of the single container of a step's pod.
pub const CONTAINER: &str = "step";

/// The deterministic name of the Job for `attempt` of `step` in `workflow` (at most 63
/// characters, as Job names must be).
pub fn job_name(workflow: &Workflow, step: &str, attempt: u32) -> String {
    let uid = workflow.uid().unwrap_or_default();
    let suffix = format!("{attempt}-{}", short_hash(&[&uid, step]));
    bounded_name(&[&workflow.name_any(), step], &suffix, 63)
}

/// The labels every Job (and its pod) of `workflow` carries: the Workflow's own labels (so a
/// group's labels reach its pods, as Tekton propagates them), then ours.
pub fn job_labels(workflow: &Workflow, step: &str, attempt: u32) -> BTreeMap<String, String> {
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
    labels
}

/// The Job running `attempt` of `step`: `/bin/sh -c <command>` in the step's image, owned by
/// the Workflow, never retried by Kubernetes itself (the plugin decides about retries).
pub fn build_job(
    workflow: &Workflow,
    step: &WorkflowStep,
    attempt: u32,
    default_image: &str,
) -> Job {
    let labels = job_labels(workflow, &step.name, attempt);
    let targets = &workflow.spec.targets;
    let join =
        |f: fn(&crate::api::Target) -> &str| targets.iter().map(f).collect::<Vec<_>>().join(" ");
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
        env_var(
            "WORKFLOW_TARGETS",
            &serde_json::to_string(targets).unwrap_or_default(),
        ),
        env_var("WORKFLOW_TARGET_NAMES", &join(|t| &t.name)),
        env_var("WORKFLOW_TARGET_IPS", &join(|t| &t.ip)),
    ];
    env.extend(step.env.iter().map(|e| env_var(&e.name, &e.value)));

    Job {
        metadata: ObjectMeta {
            name: Some(job_name(workflow, &step.name, attempt)),
            namespace: workflow.namespace(),
            labels: Some(labels.clone()),
            owner_references: workflow.controller_owner_ref(&()).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: step.timeout_seconds.map(i64::from),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    automount_service_account_token: Some(false),
                    containers: vec![Container {
                        name: CONTAINER.into(),
                        image: Some(step.image.clone().unwrap_or_else(|| default_image.into())),
                        command: Some(vec!["/bin/sh".into(), "-c".into(), step.command.clone()]),
                        env: Some(env),
                        termination_message_policy: Some("FallbackToLogsOnError".into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

/// The attempt a Job runs, from its label.
pub fn job_attempt(job: &Job) -> Option<u32> {
    job.labels().get(LABEL_ATTEMPT)?.parse().ok()
}

/// The step a Job runs, from its label.
pub fn job_step(job: &Job) -> Option<&str> {
    job.labels().get(LABEL_STEP).map(String::as_str)
}

/// `Some(true)` when the Job completed, `Some(false)` when it failed, `None` while it runs.
pub fn job_finished(job: &Job) -> Option<bool> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    let is_true = |t: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == t && c.status == "True")
    };
    if is_true("Complete") {
        Some(true)
    } else if is_true("Failed") {
        Some(false)
    } else {
        None
    }
}

/// The evidence of a finished Job: whether it succeeded, and the exit code and termination
/// message of its pod's container (when the pod still exists).
pub fn job_outcome(job: &Job, pod: Option<&Pod>, attempt: u32) -> StepOutcome {
    let succeeded = job_finished(job) == Some(true);
    let status = job.status.as_ref();
    let terminated = pod
        .and_then(|p| p.status.as_ref())
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == CONTAINER))
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    let mut message = terminated
        .and_then(|t| t.message.clone())
        .unwrap_or_default();
    if message.is_empty() && !succeeded {
        // No pod evidence (e.g. a deadline killed it): the Job's own reason is the best we have.
        message = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.type_ == "Failed" && c.status == "True")
            })
            .map(|c| {
                let reason = c.reason.clone().unwrap_or_default();
                match &c.message {
                    Some(m) if !m.is_empty() => format!("{reason}: {m}"),
                    _ => reason,
                }
            })
            .unwrap_or_default();
    }
    let duration_ms = status
        .and_then(|s| Some((s.start_time.as_ref()?, s.completion_time.as_ref().or(None)?)))
        .map(|(start, end)| (end.0.as_millisecond() - start.0.as_millisecond()).max(0) as u64)
        .unwrap_or(0);
    StepOutcome {
        succeeded,
        exit_code: terminated.map(|t| t.exit_code),
        message: message.trim_end().to_string(),
        attempt,
        duration_ms,
    }
}

//! A step's attempt as a `batch/v1` Job, and the evidence read back from it.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec, PodTemplateSpec};
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use super::step::Attempt;
use crate::api::{
    LABEL_ATTEMPT, LABEL_GROUP_NAME, LABEL_STEP, LABEL_WORKFLOW_NAME, LABEL_WORKFLOW_TYPE,
    LABEL_WORKFLOW_UID, Step, Target, Workflow,
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
pub fn build_job(workflow: &Workflow, step: &Step, attempt: u32, default_image: &str) -> Job {
    let labels = job_labels(workflow, &step.name, attempt);
    let targets = &workflow.spec.targets;
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

/// The latest attempt of each step, from the Jobs of one Workflow and their pods.
pub fn latest_attempts(jobs: &[Job], pods: &[Pod]) -> BTreeMap<String, Attempt> {
    let mut latest: BTreeMap<String, (u32, &Job)> = BTreeMap::new();
    for job in jobs {
        let (Some(step), Some(attempt)) = (job_step(job), job_attempt(job)) else {
            continue;
        };
        match latest.entry(step.to_string()) {
            Entry::Vacant(e) => {
                e.insert((attempt, job));
            }
            Entry::Occupied(mut e) if e.get().0 < attempt => {
                e.insert((attempt, job));
            }
            Entry::Occupied(_) => {}
        }
    }
    latest
        .into_iter()
        .map(|(step, (number, job))| {
            let job_name = job.name_any();
            let outcome = job_finished(job).map(|_| {
                let pod = pods
                    .iter()
                    .filter(|p| {
                        p.labels().get("batch.kubernetes.io/job-name") == Some(&job_name)
                            || p.labels().get("job-name") == Some(&job_name)
                    })
                    .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
                job_outcome(job, pod, number)
            });
            let attempt = Attempt {
                number,
                job: job_name,
                outcome,
            };
            (step, attempt)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStatus, PodStatus,
    };

    use super::*;
    use crate::api::WorkflowSpec;

    fn workflow() -> Workflow {
        let mut wf = Workflow::new(
            "wf",
            WorkflowSpec {
                type_: "pre-check".into(),
                steps: vec![
                    Step::new("validate-nodes", "true"),
                    Step::new("check-network", "true").depends_on(["validate-nodes"]),
                ],
                cluster_name: "c".into(),
                ..WorkflowSpec::default()
            },
        );
        wf.metadata.namespace = Some("ns".into());
        wf.metadata.uid = Some("uid-1".into());
        wf
    }

    fn job(wf: &Workflow, step: &str, attempt: u32, finished: Option<bool>) -> Job {
        let step = wf.spec.steps.iter().find(|s| s.name == step).unwrap();
        let mut job = build_job(wf, step, attempt, "busybox");
        job.status = finished.map(|ok| JobStatus {
            conditions: Some(vec![JobCondition {
                type_: if ok { "Complete" } else { "Failed" }.into(),
                status: "True".into(),
                ..JobCondition::default()
            }]),
            ..JobStatus::default()
        });
        job
    }

    fn pod_of(job: &Job, exit_code: i32, message: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("{}-pod", job.name_any())),
                labels: Some([("batch.kubernetes.io/job-name".to_string(), job.name_any())].into()),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(PodStatus {
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
            }),
        }
    }

    #[test]
    fn the_latest_attempt_of_each_step_carries_its_pods_evidence() {
        let wf = workflow();
        let first = job(&wf, "validate-nodes", 1, Some(false));
        let second = job(&wf, "validate-nodes", 2, Some(true));
        let running = job(&wf, "check-network", 1, None);
        let pods = [pod_of(&first, 1, "flaky"), pod_of(&second, 0, "all good\n")];
        let attempts = latest_attempts(&[second.clone(), first, running.clone()], &pods);
        let validate = &attempts["validate-nodes"];
        assert_eq!(validate.number, 2);
        assert_eq!(validate.job, second.name_any());
        let outcome = validate.outcome.as_ref().expect("finished");
        assert!(outcome.succeeded);
        assert_eq!(
            (outcome.exit_code, outcome.message.as_str()),
            (Some(0), "all good")
        );
        assert_eq!(attempts["check-network"].outcome, None);
        assert_eq!(attempts["check-network"].job, running.name_any());
    }

    #[test]
    fn job_names_fit_in_63_characters_and_differ_per_attempt() {
        let mut wf = workflow();
        wf.metadata.name = Some("w".repeat(60));
        let a1 = job_name(&wf, "validate-nodes", 1);
        let a2 = job_name(&wf, "validate-nodes", 2);
        assert!(a1.len() <= 63 && a2.len() <= 63);
        assert_ne!(a1, a2);
        assert_eq!(a1, job_name(&wf, "validate-nodes", 1));
    }
}

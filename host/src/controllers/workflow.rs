//! The Workflow controller: runs a workflow's steps as Jobs, in dependency order, each started
//! after its plugin's `gate` and judged by its plugin's `evaluate`.
//!
//! Step state is derived each time from the Jobs that exist (their attempt labels and
//! conditions) and the pinned plugin's verdicts, so a lost status write or an operator restart
//! loses nothing: the next reconcile computes the same state again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use tracing::{info, warn};

use super::job::{build_job, job_attempt, job_finished, job_outcome, job_step};
use super::{Context, Error, Result, StepJudge, Transition, set_condition, succeeded_condition};
use crate::api::{
    ANNOTATION_PLUGIN_DIGEST, LABEL_WORKFLOW_UID, PluginRef, StepDetail, Workflow, WorkflowStatus,
    phase,
};
use crate::graph::StepGraph;
use crate::plugin::{Gate, Verdict};
use crate::render::{to_plugin_step, to_plugin_target};

/// What the Workflow controller decided for one reconcile.
#[derive(Debug, Default, PartialEq)]
pub struct WorkflowPlan {
    /// The status to write.
    pub status: WorkflowStatus,
    /// Jobs to create: (step, attempt).
    pub start: Vec<(String, u32)>,
    /// Events to publish.
    pub events: Vec<Transition>,
    /// When to look again even if nothing changes (a gate's schedule).
    pub requeue_after: Option<Duration>,
}

/// The Jobs of one step, with their pods, as observed.
#[derive(Debug, Default, Clone)]
pub struct ObservedJobs {
    /// step -> attempt -> (job, its pod)
    by_step: BTreeMap<String, BTreeMap<u32, (Job, Option<Pod>)>>,
}

impl ObservedJobs {
    /// Groups `jobs` by step and attempt, pairing each with its pod.
    pub fn new(jobs: Vec<Job>, pods: Vec<Pod>) -> Self {
        let mut by_step: BTreeMap<String, BTreeMap<u32, (Job, Option<Pod>)>> = BTreeMap::new();
        for job in jobs {
            let (Some(step), Some(attempt)) =
                (job_step(&job).map(str::to_string), job_attempt(&job))
            else {
                continue;
            };
            let job_name = job.name_any();
            let pod = pods
                .iter()
                .filter(|p| {
                    p.labels().get("batch.kubernetes.io/job-name") == Some(&job_name)
                        || p.labels().get("job-name") == Some(&job_name)
                })
                .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0))
                .cloned();
            by_step.entry(step).or_default().insert(attempt, (job, pod));
        }
        Self { by_step }
    }

    fn latest(&self, step: &str) -> Option<(u32, &(Job, Option<Pod>))> {
        self.by_step
            .get(step)?
            .iter()
            .next_back()
            .map(|(a, j)| (*a, j))
    }
}

/// Decides what to do with `workflow`, given its Jobs, its plugin and the time (Unix seconds).
///
/// Pure: no I/O, so the whole state machine is tested without a cluster.
pub fn plan_workflow(
    workflow: &Workflow,
    observed: &ObservedJobs,
    judge: &dyn StepJudge,
    plugin: &PluginRef,
    now: Timestamp,
) -> WorkflowPlan {
    let old = workflow.status.clone().unwrap_or_default();
    let mut status = old.clone();
    status.observed_generation = workflow.metadata.generation;
    status.plugin = Some(plugin.clone());
    status.start_time.get_or_insert(Time(now));
    let mut plan = WorkflowPlan::default();

    let graph = match StepGraph::new(
        workflow
            .spec
            .steps
            .iter()
            .map(|s| (s.name.as_str(), s.depends_on.iter().map(String::as_str))),
    ) {
        Ok(graph) => graph,
        Err(err) => {
            let message = format!("invalid steps: {err}");
            finish(&mut status, phase::FAILED, "InvalidSteps", &message, now);
            plan.events
                .push(Transition::warning("InvalidSteps", message));
            plan.status = status;
            return plan;
        }
    };

    let steps: BTreeMap<&str, _> = workflow
        .spec
        .steps
        .iter()
        .map(|s| (s.name.as_str(), s))
        .collect();
    let ctx = crate::plugin::GroupContext {
        group_name: workflow
            .labels()
            .get(crate::api::LABEL_GROUP_NAME)
            .cloned()
            .unwrap_or_default(),
        namespace: workflow.namespace().unwrap_or_default(),
        cluster_name: workflow.spec.cluster_name.clone(),
        targets: workflow.spec.targets.iter().map(to_plugin_target).collect(),
        params: workflow
            .spec
            .params
            .clone()
            .unwrap_or_else(|| serde_json::json!({})),
        now: now.as_second(),
    };
    let mut states: BTreeMap<String, String> = BTreeMap::new();
    let mut details: BTreeMap<String, StepDetail> = BTreeMap::new();
    let mut failure: Option<String> = None;
    let mut earliest_gate: Option<i64> = None;

    for name in graph.order() {
        let Some(step) = steps.get(name.as_str()) else {
            continue;
        };
        let plugin_step = to_plugin_step(step);
        let mut detail = old.step_details.get(name).cloned().unwrap_or_default();
        let deps_done = graph
            .dependencies(name)
            .iter()
            .all(|d| states.get(d).map(String::as_str) == Some(phase::COMPLETED));
        let state = match observed.latest(name) {
            None if !deps_done || failure.is_some() || workflow.spec.paused => phase::PENDING,
            None => match judge.gate(&plugin_step, &ctx) {
                Ok(Gate::NotBefore(t)) if t > ctx.now => {
                    earliest_gate = Some(earliest_gate.map_or(t, |e| e.min(t)));
                    detail.not_before = Timestamp::from_second(t).ok().map(Time);
                    detail.message = Some(format!("waiting for its schedule ({})", fmt_time(t)));
                    phase::PENDING
                }
                Ok(_) => {
                    plan.start.push((name.clone(), 1));
                    detail.attempts = 1;
                    detail.message = None;
                    plan.events.push(
                        Transition::normal(
                            "StepStarted",
                            format!("step {name} started (attempt 1)"),
                        )
                        .about(format!("{name}/1")),
                    );
                    phase::RUNNING
                }
                Err(err) => {
                    let message = format!("step {name}: plugin gate failed: {err}");
                    detail.message = Some(message.clone());
                    failure.get_or_insert(message);
                    phase::FAILED
                }
            },
            Some((attempt, (job, pod))) => {
                detail.attempts = attempt;
                detail.job = Some(job.name_any());
                match job_finished(job) {
                    None => phase::RUNNING,
                    Some(_) => {
                        let outcome = job_outcome(job, pod.as_ref(), attempt);
                        let budget = 1 + step.retries.unwrap_or(0);
                        match judge.evaluate(&plugin_step, &outcome) {
                            Ok(Verdict::Completed) => {
                                detail.message = non_empty(&outcome.message);
                                phase::COMPLETED
                            }
                            Ok(Verdict::Retry(reason))
                                if attempt < budget
                                    && failure.is_none()
                                    && !workflow.spec.paused =>
                            {
                                let next = attempt + 1;
                                plan.start.push((name.clone(), next));
                                detail.attempts = next;
                                detail.message = Some(format!("retrying: {reason}"));
                                plan.events.push(
                                    Transition::warning(
                                        "StepRetried",
                                        format!("step {name} attempt {attempt} asked for a retry ({reason}); starting attempt {next} of {budget}"),
                                    )
                                    .about(format!("{name}/{next}")),
                                );
                                phase::RUNNING
                            }
                            Ok(Verdict::Retry(reason)) if attempt < budget => {
                                detail.message = Some(format!("retry pending: {reason}"));
                                phase::PENDING
                            }
                            Ok(Verdict::Retry(reason)) => {
                                let message = format!(
                                    "step {name} failed after {attempt} attempt(s): {reason}"
                                );
                                detail.message = Some(message.clone());
                                failure.get_or_insert(message);
                                phase::FAILED
                            }
                            Ok(Verdict::Failed(reason)) => {
                                let message = format!("step {name} failed: {reason}");
                                detail.message = Some(message.clone());
                                failure.get_or_insert(message);
                                phase::FAILED
                            }
                            Err(err) => {
                                let message =
                                    format!("step {name}: plugin could not judge it: {err}");
                                detail.message = Some(message.clone());
                                failure.get_or_insert(message);
                                phase::FAILED
                            }
                        }
                    }
                }
            }
        };
        states.insert(name.clone(), state.to_string());
        details.insert(name.clone(), detail);
    }

    for (name, state) in &states {
        let before = old.step_status.get(name).map(String::as_str);
        if before != Some(state.as_str()) {
            match state.as_str() {
                phase::COMPLETED => plan.events.push(
                    Transition::normal("StepCompleted", format!("step {name} completed"))
                        .about(name),
                ),
                phase::FAILED => plan.events.push(
                    Transition::warning(
                        "StepFailed",
                        details
                            .get(name)
                            .and_then(|d| d.message.clone())
                            .unwrap_or_default(),
                    )
                    .about(name),
                ),
                _ => {}
            }
        }
    }

    let total = states.len();
    let done = states.values().filter(|s| *s == phase::COMPLETED).count();
    let running = states.values().any(|s| s != phase::PENDING) || !plan.start.is_empty();
    status.step_status = states;
    status.step_details = details;
    status.progress = Some(format!("{done}/{total}"));

    if let Some(message) = failure {
        finish(&mut status, phase::FAILED, "StepFailed", &message, now);
        plan.events
            .push(Transition::warning("WorkflowFailed", message));
    } else if done == total {
        finish(
            &mut status,
            phase::COMPLETED,
            "Completed",
            &format!("all {total} steps completed"),
            now,
        );
        plan.events.push(Transition::normal(
            "WorkflowCompleted",
            format!("all {total} steps completed"),
        ));
    } else {
        let (reason, message) = if workflow.spec.paused {
            (
                "Paused",
                "paused: no new step starts until spec.paused is cleared".to_string(),
            )
        } else if let (false, Some(t)) = (running, earliest_gate) {
            (
                "WaitingForSchedule",
                format!("waiting until {} to start", fmt_time(t)),
            )
        } else {
            ("Running", format!("{done}/{total} steps completed"))
        };
        status.phase = Some(
            if running {
                phase::RUNNING
            } else {
                phase::PENDING
            }
            .into(),
        );
        set_condition(
            &mut status.conditions,
            succeeded_condition(
                "Unknown",
                reason,
                &message,
                workflow.metadata.generation,
                now,
            ),
        );
    }
    if let Some(t) = earliest_gate {
        let wait = (t - now.as_second()).max(0) as u64;
        plan.requeue_after = Some(Duration::from_secs(wait));
    }
    plan.status = status;
    plan
}

fn finish(status: &mut WorkflowStatus, to: &str, reason: &str, message: &str, now: Timestamp) {
    status.phase = Some(to.into());
    status.completion_time.get_or_insert(Time(now));
    let cond = if to == phase::COMPLETED {
        "True"
    } else {
        "False"
    };
    let generation = status.observed_generation;
    set_condition(
        &mut status.conditions,
        succeeded_condition(cond, reason, message, generation, now),
    );
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn fmt_time(unix: i64) -> String {
    Timestamp::from_second(unix)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| {
            format!("{unix}s after the epoch, which is no valid time: the plugin holds this step")
        })
}

/// Reconciles one Workflow.
pub async fn reconcile(workflow: Arc<Workflow>, ctx: Arc<Context>) -> Result<Action> {
    let name = workflow.name_any();
    let ns = workflow.namespace().ok_or(Error::MissingNamespace)?;
    let status = workflow.status.clone().unwrap_or_default();
    if status.phase.as_deref().is_some_and(phase::is_finished) {
        return Ok(Action::await_change());
    }
    let workflows: Api<Workflow> = Api::namespaced(ctx.client.clone(), &ns);

    // The plugin is pinned for the workflow's life: the digest recorded in status, else the one
    // that templated it (annotation), else the one loaded now.
    let pinned = status
        .plugin
        .as_ref()
        .map(|p| p.digest.clone())
        .or_else(|| {
            workflow
                .annotations()
                .get(ANNOTATION_PLUGIN_DIGEST)
                .cloned()
        });
    let plugin = match &pinned {
        Some(digest) => ctx.registry.get_pinned(&workflow.spec.type_, digest),
        None => ctx.registry.get(&workflow.spec.type_),
    };
    let Some(plugin) = plugin else {
        let message = match &pinned {
            Some(digest) => format!(
                "the plugin version this workflow was started with ({type_} sha256:{short}) is not loaded; load that version again (or delete the workflow to start over)",
                type_ = workflow.spec.type_,
                short = digest.chars().take(12).collect::<String>()
            ),
            None => format!(
                "no plugin is loaded for workflow type {:?}; add {}.wasm to the plugin directory",
                workflow.spec.type_, workflow.spec.type_
            ),
        };
        let mut new_status = status.clone();
        new_status
            .phase
            .get_or_insert_with(|| phase::PENDING.into());
        new_status.observed_generation = workflow.metadata.generation;
        set_condition(
            &mut new_status.conditions,
            succeeded_condition(
                "Unknown",
                "PluginMissing",
                &message,
                workflow.metadata.generation,
                Timestamp::now(),
            ),
        );
        if new_status != status {
            ctx.publish(&*workflow, &Transition::warning("PluginMissing", message))
                .await;
            patch_status(&workflows, &name, &new_status).await?;
        }
        // The registry's change notification reconciles us again when plugins change.
        return Ok(Action::await_change());
    };
    let plugin_ref = PluginRef {
        version: plugin.info().version.clone(),
        digest: plugin.digest().to_string(),
    };

    let uid = workflow.uid().unwrap_or_default();
    let selector = ListParams::default().labels(&format!("{LABEL_WORKFLOW_UID}={uid}"));
    let jobs_api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let jobs = jobs_api.list(&selector).await.map_err(Error::Kube)?.items;
    // Only Jobs this Workflow controls count: a label alone could be copied.
    let jobs: Vec<Job> = jobs
        .into_iter()
        .filter(|j| {
            j.owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .collect();
    let pods = if jobs.iter().any(|j| job_finished(j).is_some()) {
        pods_api.list(&selector).await.map_err(Error::Kube)?.items
    } else {
        Vec::new()
    };
    let observed = ObservedJobs::new(jobs, pods);
    let plan = plan_workflow(
        &workflow,
        &observed,
        plugin.as_ref(),
        &plugin_ref,
        Timestamp::now(),
    );

    for (step_name, attempt) in &plan.start {
        let Some(step) = workflow.spec.steps.iter().find(|s| &s.name == step_name) else {
            continue;
        };
        let job = build_job(&workflow, step, *attempt, &ctx.config.default_image);
        match jobs_api.create(&PostParams::default(), &job).await {
            Ok(_) => {
                info!(workflow = %name, namespace = %ns, step = %step_name, attempt, "started step")
            }
            // Created by an earlier reconcile whose status write we have not seen yet.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(Error::Kube(e)),
        }
    }
    if plan.status != status {
        patch_status(&workflows, &name, &plan.status).await?;
    }
    for event in &plan.events {
        ctx.publish(&*workflow, event).await;
    }
    if let Some(phase) = &plan.status.phase
        && phase::is_finished(phase)
        && status.phase.as_deref() != Some(phase.as_str())
    {
        ctx.metrics.workflow_finished(phase);
        info!(workflow = %name, namespace = %ns, phase = %phase, "workflow finished");
    }
    Ok(match plan.requeue_after {
        Some(after) => Action::requeue(after.max(Duration::from_millis(200))),
        None => Action::await_change(),
    })
}

async fn patch_status(api: &Api<Workflow>, name: &str, status: &WorkflowStatus) -> Result<()> {
    let patch = serde_json::json!({ "status": status });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::Kube)?;
    Ok(())
}

/// Logs a reconcile error; the controller retries it with backoff. A conflict is a race with
/// another writer, retried at once and not counted as a failure.
pub fn error_policy(workflow: Arc<Workflow>, error: &Error, ctx: Arc<Context>) -> Action {
    if error.is_conflict() {
        tracing::debug!(workflow = %workflow.name_any(), %error, "conflict, retrying");
    } else {
        warn!(workflow = %workflow.name_any(), namespace = ?workflow.namespace(), %error, "reconcile failed");
        ctx.metrics.reconcile_failed("workflow");
    }
    Action::requeue(error.backoff())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStatus, PodStatus,
    };
    use kube::api::ObjectMeta;

    use super::*;
    use crate::api::{WorkflowSpec, WorkflowStep};
    use crate::plugin::{GroupContext, Step, StepOutcome};

    /// A plugin stand-in: gates by a fixed answer and judges by exit code, recording what it saw.
    struct Judge {
        gate: Gate,
        seen: RefCell<Vec<StepOutcome>>,
        retry_exit_code: Option<i32>,
    }

    impl Judge {
        fn new() -> Self {
            Judge {
                gate: Gate::StartNow,
                seen: RefCell::default(),
                retry_exit_code: None,
            }
        }
    }

    impl StepJudge for Judge {
        fn gate(&self, _: &Step, _: &GroupContext) -> Result<Gate, String> {
            Ok(self.gate)
        }
        fn evaluate(&self, _: &Step, outcome: &StepOutcome) -> Result<Verdict, String> {
            self.seen.borrow_mut().push(outcome.clone());
            Ok(match outcome.exit_code {
                Some(0) => Verdict::Completed,
                code if code == self.retry_exit_code => Verdict::Retry("temporary".into()),
                _ => Verdict::Failed(format!(
                    "exit code {:?}: {}",
                    outcome.exit_code, outcome.message
                )),
            })
        }
    }

    fn workflow(steps: &[(&str, &[&str])]) -> Workflow {
        let mut wf = Workflow::new(
            "wf",
            WorkflowSpec {
                type_: "pre-check".into(),
                steps: steps
                    .iter()
                    .map(|(name, deps)| WorkflowStep {
                        name: (*name).into(),
                        command: format!("{name}.sh"),
                        depends_on: deps.iter().map(|d| (*d).into()).collect(),
                        ..WorkflowStep::default()
                    })
                    .collect(),
                targets: vec![],
                cluster_name: "c".into(),
                paused: false,
                params: None,
            },
        );
        wf.metadata.namespace = Some("ns".into());
        wf.metadata.uid = Some("uid-1".into());
        wf
    }

    fn finished_job(
        wf: &Workflow,
        step: &str,
        attempt: u32,
        exit_code: i32,
        message: &str,
    ) -> (Job, Pod) {
        let mut job = running_job(wf, step, attempt);
        let ok = exit_code == 0;
        job.status = Some(JobStatus {
            conditions: Some(vec![JobCondition {
                type_: if ok { "Complete" } else { "Failed" }.into(),
                status: "True".into(),
                ..JobCondition::default()
            }]),
            ..JobStatus::default()
        });
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(format!("{}-pod", job.name_any())),
                labels: Some([("batch.kubernetes.io/job-name".to_string(), job.name_any())].into()),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    name: "step".into(),
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
        };
        (job, pod)
    }

    fn running_job(wf: &Workflow, step: &str, attempt: u32) -> Job {
        build_job(
            wf,
            wf.spec.steps.iter().find(|s| s.name == step).unwrap(),
            attempt,
            "busybox",
        )
    }

    /// The plan for `wf` with the test plugin, at [`now`].
    fn plan_now(wf: &Workflow, observed: &ObservedJobs, judge: &Judge) -> WorkflowPlan {
        plan_workflow(wf, observed, judge, &plugin_ref(), now())
    }

    fn plugin_ref() -> PluginRef {
        PluginRef {
            version: "0.1.0".into(),
            digest: "abc".into(),
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    const SEED: &[(&str, &[&str])] = &[
        ("validate-nodes", &[]),
        ("check-network", &["validate-nodes"]),
    ];

    #[test]
    fn a_new_workflow_starts_only_the_steps_without_dependencies() {
        let wf = workflow(&[("a", &[]), ("b", &["a"]), ("c", &[])]);
        let plan = plan_now(&wf, &ObservedJobs::default(), &Judge::new());
        assert_eq!(plan.start, [("a".to_string(), 1), ("c".to_string(), 1)]);
        assert_eq!(plan.status.phase.as_deref(), Some(phase::RUNNING));
        assert_eq!(plan.status.step_status["b"], phase::PENDING);
        assert_eq!(plan.status.progress.as_deref(), Some("0/3"));
        assert_eq!(plan.status.plugin, Some(plugin_ref()));
    }

    #[test]
    fn a_dependent_starts_once_its_dependency_is_judged_completed() {
        let wf = workflow(SEED);
        let (job, pod) = finished_job(&wf, "validate-nodes", 1, 0, "all good");
        let observed = ObservedJobs::new(vec![job], vec![pod]);
        let judge = Judge::new();
        let plan = plan_now(&wf, &observed, &judge);
        assert_eq!(plan.start, [("check-network".to_string(), 1)]);
        assert_eq!(plan.status.step_status["validate-nodes"], phase::COMPLETED);
        assert_eq!(judge.seen.borrow()[0].message, "all good");
        assert_eq!(judge.seen.borrow()[0].exit_code, Some(0));
    }

    #[test]
    fn a_running_job_is_not_started_twice() {
        let wf = workflow(SEED);
        let observed = ObservedJobs::new(vec![running_job(&wf, "validate-nodes", 1)], vec![]);
        let plan = plan_now(&wf, &observed, &Judge::new());
        assert!(plan.start.is_empty());
        assert_eq!(plan.status.step_status["validate-nodes"], phase::RUNNING);
    }

    #[test]
    fn all_steps_completed_completes_the_workflow() {
        let wf = workflow(SEED);
        let (j1, p1) = finished_job(&wf, "validate-nodes", 1, 0, "");
        let (j2, p2) = finished_job(&wf, "check-network", 1, 0, "");
        let plan = plan_now(
            &wf,
            &ObservedJobs::new(vec![j1, j2], vec![p1, p2]),
            &Judge::new(),
        );
        assert_eq!(plan.status.phase.as_deref(), Some(phase::COMPLETED));
        assert_eq!(plan.status.conditions[0].status, "True");
        assert!(plan.status.completion_time.is_some());
        assert!(plan.events.iter().any(|e| e.reason == "WorkflowCompleted"));
    }

    #[test]
    fn a_failed_verdict_fails_the_workflow_naming_the_step_and_reason() {
        let wf = workflow(SEED);
        let (job, pod) = finished_job(&wf, "validate-nodes", 1, 3, "disk full");
        let plan = plan_now(&wf, &ObservedJobs::new(vec![job], vec![pod]), &Judge::new());
        assert!(plan.start.is_empty(), "nothing starts after a failure");
        assert_eq!(plan.status.phase.as_deref(), Some(phase::FAILED));
        assert_eq!(plan.status.step_status["validate-nodes"], phase::FAILED);
        assert_eq!(plan.status.step_status["check-network"], phase::PENDING);
        let cond = &plan.status.conditions[0];
        assert_eq!(
            (cond.status.as_str(), cond.reason.as_str()),
            ("False", "StepFailed")
        );
        assert!(
            cond.message.contains("validate-nodes") && cond.message.contains("disk full"),
            "{}",
            cond.message
        );
        assert!(
            plan.events
                .iter()
                .any(|e| e.reason == "StepFailed" && e.message.contains("disk full"))
        );
    }

    #[test]
    fn a_retry_verdict_starts_the_next_attempt_within_the_budget_and_fails_after_it() {
        let mut wf = workflow(&[("flaky", &[])]);
        wf.spec.steps[0].retries = Some(1);
        let judge = Judge {
            retry_exit_code: Some(75),
            ..Judge::new()
        };
        let (job, pod) = finished_job(&wf, "flaky", 1, 75, "busy");
        let plan = plan_now(
            &wf,
            &ObservedJobs::new(vec![job.clone()], vec![pod.clone()]),
            &judge,
        );
        assert_eq!(plan.start, [("flaky".to_string(), 2)]);
        assert_eq!(plan.status.step_details["flaky"].attempts, 2);

        let (job2, pod2) = finished_job(&wf, "flaky", 2, 75, "still busy");
        let plan = plan_now(
            &wf,
            &ObservedJobs::new(vec![job, job2], vec![pod, pod2]),
            &judge,
        );
        assert!(plan.start.is_empty());
        assert_eq!(plan.status.phase.as_deref(), Some(phase::FAILED));
        assert!(
            plan.status.conditions[0]
                .message
                .contains("after 2 attempt(s)")
        );
    }

    #[test]
    fn a_gated_step_waits_and_requeues_for_exactly_its_time() {
        let wf = workflow(&[("run", &[])]);
        let at = now().as_second() + 42;
        let judge = Judge {
            gate: Gate::NotBefore(at),
            ..Judge::new()
        };
        let plan = plan_now(&wf, &ObservedJobs::default(), &judge);
        assert!(plan.start.is_empty());
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(42)));
        assert_eq!(plan.status.phase.as_deref(), Some(phase::PENDING));
        assert_eq!(plan.status.conditions[0].reason, "WaitingForSchedule");

        let judge = Judge {
            gate: Gate::NotBefore(now().as_second()),
            ..Judge::new()
        };
        let plan = plan_now(&wf, &ObservedJobs::default(), &judge);
        assert_eq!(plan.start, [("run".to_string(), 1)]);
    }

    #[test]
    fn a_paused_workflow_starts_nothing() {
        let mut wf = workflow(SEED);
        wf.spec.paused = true;
        let plan = plan_now(&wf, &ObservedJobs::default(), &Judge::new());
        assert!(plan.start.is_empty());
        assert_eq!(plan.status.conditions[0].reason, "Paused");
    }

    #[test]
    fn a_cyclic_graph_fails_the_workflow_with_the_cycle_named() {
        let wf = workflow(&[("a", &["b"]), ("b", &["a"])]);
        let plan = plan_now(&wf, &ObservedJobs::default(), &Judge::new());
        assert!(plan.start.is_empty());
        assert_eq!(plan.status.phase.as_deref(), Some(phase::FAILED));
        assert_eq!(plan.status.conditions[0].reason, "InvalidSteps");
        assert!(plan.status.conditions[0].message.contains("a -> b -> a"));
    }

    #[test]
    fn job_names_fit_in_63_characters_and_differ_per_attempt() {
        let mut wf = workflow(SEED);
        wf.metadata.name = Some("w".repeat(60));
        let a1 = job_name(&wf, "validate-nodes", 1);
        let a2 = job_name(&wf, "validate-nodes", 2);
        assert!(a1.len() <= 63 && a2.len() <= 63);
        assert_ne!(a1, a2);
        assert_eq!(a1, job_name(&wf, "validate-nodes", 1));
    }

    use super::super::job::job_name;
}

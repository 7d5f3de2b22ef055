//! The text renderer of a group's tree (`workflow-operator get`): group -> Workflows -> steps
//! -> targets, with each one's phase, start, duration, attempts, exit code and why it is where
//! it is, drawn from the [`GroupView`].
//!
//! Output is inert: every name and message it prints from the objects (what steps, targets
//! and plugins said, names in a hand-made Workflow) has its control characters escaped
//! (`\u{1b}`), so nothing in a status can drive the terminal.

use std::borrow::Cow;
use std::fmt::Write as _;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{Timestamp, tz::TimeZone};
use workflow_model::text;

use super::{ApprovalState, GroupView, StepView, WorkflowView};
use crate::api::{Phase, Workflow, WorkflowGroup};

/// Most failed targets listed under a step; the rest are counted.
const MAX_TARGETS_SHOWN: usize = 10;

/// The tree of `group` and its `workflows` (in any order), at `now`.
pub fn group_tree(group: &WorkflowGroup, workflows: &[Workflow], now: Timestamp) -> String {
    render(&GroupView::new(group, workflows), now)
}

/// The tree of `view`, at `now`.
pub fn render(view: &GroupView, now: Timestamp) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "WorkflowGroup {}/{}  {}  {}",
        word(&view.namespace),
        word(&view.name),
        view.phase,
        timing(view.started.as_ref(), view.finished.as_ref(), now),
    );
    if let (Some(reason), Some(message)) = (&view.reason, &view.message) {
        let _ = writeln!(out, "│ {}: {}", word(reason), brief(message));
    }
    if let Some(rollout) = &view.rollout {
        let _ = writeln!(
            out,
            "│ waves {} done, {} target(s) failed",
            rollout.progress, rollout.failed_targets
        );
        if let Some(at) = &rollout.next_window {
            let _ = writeln!(out, "│ next window opens at {}", at.0);
        }
        if let Some(at) = &rollout.next_wave_at {
            let _ = writeln!(out, "│ next wave starts at {}", at.0);
        }
    }
    if let Some(run) = view.runs.last() {
        let _ = writeln!(
            out,
            "│ run {} ({}){}: {}, {} run(s) listed",
            run.run,
            word(&run.run_id),
            run.id
                .as_ref()
                .map(|id| format!(" for re-run {id:?}"))
                .unwrap_or_default(),
            run.phase,
            view.runs.len()
        );
    }
    for (i, workflow) in view.workflows.iter().enumerate() {
        let last = i + 1 == view.workflows.len() && view.not_started.is_empty();
        workflow_branch(&mut out, workflow, last, now);
    }
    if !view.not_started.is_empty() {
        let _ = writeln!(
            out,
            "└── not started: {}",
            word(&view.not_started.join(", "))
        );
    }
    out
}

fn workflow_branch(out: &mut String, workflow: &WorkflowView, last: bool, now: Timestamp) {
    let (branch, indent) = if last {
        ("└── ", "    ")
    } else {
        ("├── ", "│   ")
    };
    let wave = workflow
        .wave
        .map(|w| format!(" wave {w}"))
        .unwrap_or_default();
    let run = workflow
        .run
        .map(|r| format!(", run {r}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{branch}Workflow {} ({}{wave}{run})  {}  {}",
        word(&workflow.name),
        word(&workflow.type_),
        workflow.phase,
        timing(workflow.started.as_ref(), workflow.finished.as_ref(), now),
    );
    if let (Some(reason), Some(message)) = (&workflow.reason, &workflow.message) {
        let _ = writeln!(out, "{indent}│ {}: {}", word(reason), brief(message));
    }
    for (i, step) in workflow.steps.iter().enumerate() {
        step_branch(out, indent, step, i + 1 == workflow.steps.len(), now);
    }
}

fn step_branch(out: &mut String, indent: &str, step: &StepView, last: bool, now: Timestamp) {
    let (branch, more) = if last {
        ("└── ", "    ")
    } else {
        ("├── ", "│   ")
    };
    let phase = step.phase;
    let mut line = format!("{indent}{branch}{}  {phase}", word(&step.name));
    if step.started.is_some() {
        line.push_str("  ");
        line.push_str(&timing(step.started.as_ref(), step.finished.as_ref(), now));
    }
    if step.attempts > 0 {
        let _ = write!(line, "  attempts {}", step.attempts);
    }
    if let Some(code) = step.exit_code {
        let _ = write!(line, "  exit {code}");
    }
    if let Some(approval) = &step.approval {
        match approval.state {
            ApprovalState::Waiting => {}
            ApprovalState::TimedOut => line.push_str("  started without approval (its timeout)"),
            ApprovalState::Approved => {
                let _ = write!(
                    line,
                    "  approved by {}",
                    word(&approval.approved_by.join(", "))
                );
            }
        }
    }
    if let Some(message) = &step.message {
        let _ = write!(line, "  {}", brief(message));
    } else if phase == Phase::Pending && step.attempts == 0 {
        line.push_str("  (waiting for its dependencies)");
    }
    let _ = writeln!(out, "{line}");
    if let Some(asked) = step.approval.as_ref().filter(|_| step.waits_for_approval()) {
        let _ = writeln!(
            out,
            "{indent}{more}└── to approve: {} (content {})",
            brief(&asked.content),
            crate::approvals::judge::short(&asked.digest)
        );
    }
    if let Some(report) = &step.targets {
        let _ = writeln!(
            out,
            "{indent}{more}└── targets {}: {} ok, {} failed, {} unreachable",
            report.total, report.ok, report.failed, report.unreachable
        );
        for problem in report.problems.iter().take(MAX_TARGETS_SHOWN) {
            let _ = writeln!(
                out,
                "{indent}{more}    · {} {:?}: {}",
                word(&problem.name),
                problem.outcome,
                brief(&problem.reason)
            );
        }
        let hidden = report.problems.len().saturating_sub(MAX_TARGETS_SHOWN);
        if hidden > 0 {
            let _ = writeln!(out, "{indent}{more}    · and {hidden} more");
        }
    }
}

/// `started 12:00:01, 3.2s` (or `running 3.2s`), in UTC.
fn timing(start: Option<&Time>, end: Option<&Time>, now: Timestamp) -> String {
    let Some(start) = start.map(|t| t.0) else {
        return "not started".into();
    };
    let clock = start
        .to_zoned(TimeZone::UTC)
        .strftime("%H:%M:%S")
        .to_string();
    let (to, verb) = match end {
        Some(end) => (end.0, "took"),
        None => (now, "running for"),
    };
    let seconds = to.duration_since(start).as_secs_f64().max(0.0);
    format!("started {clock}Z, {verb} {}", duration(seconds))
}

fn duration(seconds: f64) -> String {
    if seconds < 60.0 {
        format!("{seconds:.1}s")
    } else if seconds < 3600.0 {
        format!(
            "{}m{:02}s",
            (seconds / 60.0) as u64,
            (seconds % 60.0) as u64
        )
    } else {
        format!(
            "{}h{:02}m",
            (seconds / 3600.0) as u64,
            ((seconds % 3600.0) / 60.0) as u64
        )
    }
}

/// `message` on one line, its control characters escaped, cut to 200 bytes.
fn brief(message: &str) -> String {
    text::prefix(&text::fold(message), 200).to_string()
}

/// A name or reason from the objects, its control characters escaped.
fn word(s: &str) -> Cow<'_, str> {
    text::escape_controls(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::StepDetail;

    fn objects() -> (WorkflowGroup, Vec<Workflow>) {
        let group: WorkflowGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "workflow.rxg456.cn/v1alpha1", "kind": "WorkflowGroup",
            "metadata": {"name": "g", "namespace": "ns"},
            "spec": {"type": "t", "clusterName": "c", "workflowSteps": ["pre-check", "setup"], "targets": []},
            "status": {
                "phase": "Failed",
                "startTime": "2026-12-01T10:00:00Z", "completionTime": "2026-12-01T10:00:09Z",
                "workflows": [{"name": "g-pre-check-1", "type": "pre-check", "status": "Failed"}],
                "conditions": [{"type": "Succeeded", "status": "False", "reason": "WorkflowFailed",
                    "message": "workflow g-pre-check-1 (pre-check) failed: step check-network failed",
                    "lastTransitionTime": "2026-12-01T10:00:09Z"}]
            }
        }))
        .unwrap();
        let workflow: Workflow = serde_json::from_value(serde_json::json!({
            "apiVersion": "workflow.rxg456.cn/v1alpha1", "kind": "Workflow",
            "metadata": {"name": "g-pre-check-1", "namespace": "ns"},
            "spec": {"type": "pre-check", "clusterName": "c", "targets": [], "steps": [
                {"name": "validate-nodes", "command": "true"},
                {"name": "check-network", "command": "false", "dependsOn": ["validate-nodes"]},
                {"name": "report", "command": "true", "dependsOn": ["check-network"]}
            ]},
            "status": {
                "phase": "Failed", "startTime": "2026-12-01T10:00:00Z", "completionTime": "2026-12-01T10:00:09Z",
                "stepStatus": {"validate-nodes": "Completed", "check-network": "Failed", "report": "Pending"},
                "stepDetails": {
                    "validate-nodes": {"attempts": 1, "startedAt": "2026-12-01T10:00:00Z", "finishedAt": "2026-12-01T10:00:02Z", "exitCode": 0},
                    "check-network": {"attempts": 2, "startedAt": "2026-12-01T10:00:04Z", "finishedAt": "2026-12-01T10:00:09Z", "exitCode": 1,
                        "message": "exit code 1: targets 2: 1 ok, 1 failed, 0 unreachable",
                        "targets": {"total": 2, "ok": 1, "failed": 1, "unreachable": 0,
                            "problems": [{"name": "node-2", "outcome": "Failed", "reason": "exit code 1: no route"}]}}
                },
                "conditions": [{"type": "Succeeded", "status": "False", "reason": "StepFailed",
                    "message": "step check-network failed", "lastTransitionTime": "2026-12-01T10:00:09Z"}]
            }
        }))
        .unwrap();
        (group, vec![workflow])
    }

    #[test]
    fn the_tree_shows_each_level_with_phase_timing_attempts_exit_code_and_why() {
        let (group, workflows) = objects();
        let now: Timestamp = "2026-12-01T10:05:00Z".parse().unwrap();
        let tree = group_tree(&group, &workflows, now);
        let lines: Vec<&str> = tree.lines().collect();
        assert_eq!(
            lines[0],
            "WorkflowGroup ns/g  Failed  started 10:00:00Z, took 9.0s"
        );
        assert!(
            lines[1].contains("WorkflowFailed: workflow g-pre-check-1"),
            "{tree}"
        );
        assert!(
            tree.contains(
                "├── Workflow g-pre-check-1 (pre-check)  Failed  started 10:00:00Z, took 9.0s"
            ),
            "{tree}"
        );
        assert!(
            tree.contains(
                "validate-nodes  Completed  started 10:00:00Z, took 2.0s  attempts 1  exit 0"
            ),
            "{tree}"
        );
        assert!(
            tree.contains(
                "check-network  Failed  started 10:00:04Z, took 5.0s  attempts 2  exit 1"
            ),
            "{tree}"
        );
        assert!(
            tree.contains("targets 2: 1 ok, 1 failed, 0 unreachable"),
            "{tree}"
        );
        assert!(
            tree.contains("· node-2 Failed: exit code 1: no route"),
            "{tree}"
        );
        assert!(
            tree.contains("report  Pending  (waiting for its dependencies)"),
            "{tree}"
        );
        assert!(tree.ends_with("└── not started: setup\n"), "{tree}");
    }

    #[test]
    fn a_rerun_and_an_approval_are_shown() {
        let (mut group, mut workflows) = objects();
        group.status.as_mut().unwrap().runs = vec![crate::api::RunStatus {
            run: 2,
            run_id: "9b21".into(),
            id: Some("fix-1".into()),
            phase: Phase::Running,
            ..crate::api::RunStatus::default()
        }];
        let status = workflows[0].status.as_mut().unwrap();
        status.run = Some(2);
        status
            .step_details
            .get_mut("validate-nodes")
            .unwrap()
            .approval = Some(crate::api::StepApproval {
            reason: String::new(),
            approvers: vec!["alice".into()],
            required: 1,
            approved_by: vec!["alice".into()],
            since: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
            deadline: None,
            on_timeout: "Fail".into(),
            digest: "sha256:0123456789abcdef".into(),
            content: "`reboot` in workflow-step:dev with 1 target: node-1 (10.0.0.1)".into(),
        });
        let mut asked = status.step_details["validate-nodes"]
            .approval
            .clone()
            .unwrap();
        asked.approved_by.clear();
        let waiting = StepDetail {
            approval: Some(asked),
            message: Some("step report waits for approval (0 of 1, by alice)".into()),
            ..StepDetail::default()
        };
        status.step_details.insert("report".into(), waiting);
        let tree = group_tree(&group, &workflows, Timestamp::UNIX_EPOCH);
        // A step that waits shows what an approval approves.
        assert!(
            tree.contains("└── to approve: `reboot` in workflow-step:dev with 1 target: node-1 (10.0.0.1) (content sha256:0123456789ab)"),
            "{tree}"
        );
        assert!(
            tree.contains("│ run 2 (9b21) for re-run \"fix-1\": Running, 1 run(s) listed"),
            "{tree}"
        );
        assert!(tree.contains("(pre-check, run 2)  Failed"), "{tree}");
        assert!(tree.contains("exit 0  approved by alice"), "{tree}");
    }

    #[test]
    fn escape_sequences_from_a_target_or_a_step_are_shown_escaped_not_sent_to_the_terminal() {
        let (group, mut workflows) = objects();
        let detail = workflows[0]
            .status
            .as_mut()
            .and_then(|s| s.step_details.get_mut("check-network"))
            .expect("the step's detail");
        detail.message = Some("exit code 1:\n\u{1b}[2J\u{1b}]0;owned\u{7}cleared".into());
        if let Some(problem) = detail.targets.as_mut().and_then(|t| t.problems.first_mut()) {
            problem.name = "node-2\u{1b}[31m".into();
            problem.reason = "disk \u{9b}2Jfull\u{7f}".into();
        }
        let tree = group_tree(&group, &workflows, Timestamp::UNIX_EPOCH);
        assert!(
            !tree.chars().any(|c| c.is_control() && c != '\n'),
            "a control character reached the terminal: {tree:?}"
        );
        assert!(
            tree.contains("exit code 1: \\u{1b}[2J\\u{1b}]0;owned\\u{7}cleared"),
            "{tree}"
        );
        assert!(
            tree.contains("· node-2\\u{1b}[31m Failed: disk \\u{9b}2Jfull\\u{7f}"),
            "{tree}"
        );
    }

    #[test]
    fn a_running_step_counts_its_time_to_now() {
        let (group, mut workflows) = objects();
        if let Some(d) = workflows[0]
            .status
            .as_mut()
            .and_then(|s| s.step_details.get_mut("check-network"))
        {
            d.finished_at = None;
        }
        let now: Timestamp = "2026-12-01T10:01:34Z".parse().unwrap();
        let tree = group_tree(&group, &workflows, now);
        assert!(
            tree.contains("check-network  Failed  started 10:00:04Z, running for 1m30s"),
            "{tree}"
        );
    }
}

//! A group's targets wave by wave, each with how each of its types went there: a cell per
//! target and type, from the steps' per-target reports, the Workflow's phase and why it waits.

use std::collections::HashMap;

use serde::Serialize;
use workflow_model::TargetOutcome;

use super::{StepView, WorkflowView};
use crate::api::{Phase, WorkflowGroup};
use crate::controllers::workflowgroup::plan::waves as planned_waves;

/// One wave: its targets, each a row of cells in the order of the group's types.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WaveView {
    /// Its number, from 1.
    pub wave: u32,
    /// How it went; none before it started.
    pub phase: Option<Phase>,
    pub targets: Vec<TargetRow>,
}

/// A target and how each type went there.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TargetRow {
    pub name: String,
    pub cells: Vec<Cell>,
}

/// How one type went on one target, and why.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Cell {
    #[serde(rename = "type")]
    pub type_: String,
    pub state: CellState,
    pub reason: String,
}

/// Where a type stands on a target.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum CellState {
    Ok,
    Failed,
    Unreachable,
    Running,
    Waiting,
    NotStarted,
}

/// The waves of `group` with their cells, from its `workflows`.
pub(super) fn waves(group: &WorkflowGroup, workflows: &[WorkflowView]) -> Vec<WaveView> {
    let status = group.status.clone().unwrap_or_default();
    let started = status.rollout.map(|r| r.waves).unwrap_or_default();
    let mut planned: Vec<Vec<String>> = planned_waves(group)
        .unwrap_or_default()
        .iter()
        .map(|w| w.iter().map(|t| t.name.clone()).collect())
        .collect();
    // The Nodes a selector chose are the Workflows' targets.
    if planned.iter().all(Vec::is_empty) {
        planned = vec![
            workflows
                .first()
                .map(|w| w.targets.clone())
                .unwrap_or_default(),
        ];
    }
    let ended = matches!(status.phase, Some(Phase::Completed) | Some(Phase::Failed));
    let count = planned.len().max(started.len());
    (1..=count as u32)
        .map(|wave| {
            let ran = started.iter().find(|w| w.wave == wave);
            let targets = ran.map_or_else(
                || planned.get(wave as usize - 1).cloned().unwrap_or_default(),
                |w| w.targets.clone(),
            );
            let failed: HashMap<&str, &str> = ran
                .iter()
                .flat_map(|w| &w.failed)
                .filter_map(|f| f.split_once(": "))
                .collect();
            let of_types: Vec<(&String, Option<Judged<'_>>)> = group
                .spec
                .workflow_steps
                .iter()
                .map(|t| (t, latest(workflows, t, wave).map(Judged::new)))
                .collect();
            let targets = targets
                .into_iter()
                .map(|name| TargetRow {
                    cells: of_types
                        .iter()
                        .map(|(t, judged)| Cell {
                            type_: (*t).clone(),
                            ..cell(&name, judged.as_ref(), &failed, ended, group)
                        })
                        .collect(),
                    name,
                })
                .collect();
            WaveView {
                wave,
                phase: ran.map(|w| w.phase),
                targets,
            }
        })
        .collect()
}

/// The latest run's Workflow of type `type_` in wave `wave`.
fn latest<'a>(workflows: &'a [WorkflowView], type_: &str, wave: u32) -> Option<&'a WorkflowView> {
    workflows
        .iter()
        .filter(|w| w.type_ == type_ && w.wave.unwrap_or(1) == wave)
        .max_by_key(|w| w.run.unwrap_or(0))
}

/// A Workflow with the first problem each target had, by target.
struct Judged<'a> {
    workflow: &'a WorkflowView,
    problems: HashMap<&'a str, (TargetOutcome, String)>,
}

impl<'a> Judged<'a> {
    fn new(workflow: &'a WorkflowView) -> Self {
        let mut problems = HashMap::new();
        for step in &workflow.steps {
            for p in step.targets.iter().flat_map(|r| &r.problems) {
                problems
                    .entry(p.name.as_str())
                    .or_insert_with(|| (p.outcome, format!("step {}: {}", step.name, p.reason)));
            }
        }
        Judged { workflow, problems }
    }

    /// Every step finished, and each one that reported per target did not name `target`.
    fn done_on(&self, target: &str) -> bool {
        !self.problems.contains_key(target)
            && self
                .workflow
                .steps
                .iter()
                .all(|s| s.phase == Phase::Completed || s.targets.is_some())
    }
}

fn cell(
    target: &str,
    judged: Option<&Judged<'_>>,
    failed: &HashMap<&str, &str>,
    ended: bool,
    group: &WorkflowGroup,
) -> Cell {
    let at = |state, reason: String| Cell {
        type_: String::new(),
        state,
        reason,
    };
    let Some(judged) = judged else {
        return at(
            CellState::NotStarted,
            if ended {
                "the group ended before this type ran here".into()
            } else {
                "not started yet".into()
            },
        );
    };
    let workflow = judged.workflow;
    if let Some((outcome, reason)) = judged.problems.get(target) {
        let state = match outcome {
            TargetOutcome::Unreachable => CellState::Unreachable,
            _ => CellState::Failed,
        };
        return at(state, reason.clone());
    }
    let why = || {
        workflow
            .message
            .clone()
            .or_else(|| group_message(group))
            .unwrap_or_default()
    };
    match workflow.phase {
        Phase::Completed => at(CellState::Ok, format!("{} completed", workflow.name)),
        Phase::Failed => match failed.get(target) {
            Some(reason) => at(CellState::Failed, (*reason).to_string()),
            None if judged.done_on(target) => at(
                CellState::Ok,
                format!("every step passed here; {} failed elsewhere", workflow.name),
            ),
            None => at(CellState::NotStarted, format!("stopped: {}", why())),
        },
        Phase::Running | Phase::Pending => {
            if let Some(step) = workflow.steps.iter().find(|s| s.phase == Phase::Running) {
                return at(CellState::Running, running(step));
            }
            let waiting = workflow.steps.iter().find(|s| s.waits_for_approval());
            match waiting.and_then(|s| s.message.clone()) {
                Some(message) => at(CellState::Waiting, message),
                None => at(CellState::Waiting, why()),
            }
        }
    }
}

fn running(step: &StepView) -> String {
    format!(
        "step {} running (attempt {})",
        step.name,
        step.attempts.max(1)
    )
}

fn group_message(group: &WorkflowGroup) -> Option<String> {
    let status = group.status.as_ref()?;
    crate::controllers::status::succeeded(&status.conditions).map(|c| c.message.clone())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::Workflow;
    use crate::view::GroupView;

    /// A rollout of `at` over four hosts in waves of two: wave 1 ran (host-2 failed), wave 2
    /// waits for an approval.
    fn rollout() -> (WorkflowGroup, Vec<Workflow>) {
        let target = |n: u32| json!({"name": format!("host-{n}"), "ip": format!("10.0.0.{n}")});
        let group = serde_json::from_value(json!({
            "apiVersion": "workflow.rxg456.cn/v1alpha1", "kind": "WorkflowGroup",
            "metadata": {"name": "g", "namespace": "ns"},
            "spec": {"type": "t", "clusterName": "c", "workflowSteps": ["at", "post-check"],
                "targets": [target(1), target(2), target(3), target(4)],
                "rollout": {"waveSize": 2, "maxFailedTargets": 1}},
            "status": {"phase": "Running",
                "workflows": [{"name": "g-at-w1", "type": "at", "status": "Failed"},
                              {"name": "g-at-w2", "type": "at", "status": "Pending"}],
                "rollout": {"progress": "1/2", "failedTargets": 1, "waves": [
                    {"wave": 1, "phase": "Completed", "targets": ["host-1", "host-2"],
                     "failed": ["host-2: run: connect refused"]},
                    {"wave": 2, "phase": "Running", "targets": ["host-3", "host-4"]}]},
                "conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "WaitingForApproval",
                    "message": "step run waits for approval", "lastTransitionTime": "2026-12-01T10:00:00Z"}]}
        }))
        .expect("a group");
        let workflow = |name: &str, wave: u32, status: serde_json::Value| {
            serde_json::from_value::<Workflow>(json!({
                "apiVersion": "workflow.rxg456.cn/v1alpha1", "kind": "Workflow",
                "metadata": {"name": name, "namespace": "ns",
                    "labels": {"workflow.rxg456.cn/wave": wave.to_string()}},
                "spec": {"type": "at", "clusterName": "c", "targets": [],
                    "steps": [{"name": "run", "command": "true"}]},
                "status": status
            }))
            .expect("a workflow")
        };
        let first = workflow(
            "g-at-w1",
            1,
            json!({"phase": "Failed",
            "stepStatus": {"run": "Failed"},
            "stepDetails": {"run": {"attempts": 1, "pod": "p", "exitCode": 1, "targets": {
                "total": 2, "ok": 1, "failed": 0, "unreachable": 1,
                "problems": [{"name": "host-2", "outcome": "Unreachable", "reason": "connect refused"}]}}}}),
        );
        let second = workflow(
            "g-at-w2",
            2,
            json!({"phase": "Pending",
            "stepStatus": {"run": "Pending"},
            "stepDetails": {"run": {"attempts": 0,
                "message": "step run waits for approval (0 of 1, by alice)",
                "approval": {"approvers": ["alice"], "required": 1, "digest": "sha256:00",
                    "content": "`true`", "since": "2026-12-01T10:00:00Z", "onTimeout": "Fail"}}}}),
        );
        (group, vec![second, first])
    }

    fn states(view: &GroupView) -> Vec<(u32, String, String, CellState)> {
        view.waves
            .iter()
            .flat_map(|w| {
                w.targets.iter().flat_map(move |t| {
                    t.cells
                        .iter()
                        .map(move |c| (w.wave, t.name.clone(), c.type_.clone(), c.state))
                })
            })
            .collect()
    }

    #[test]
    fn each_target_of_each_wave_shows_how_each_type_went_there_and_why() {
        let (group, workflows) = rollout();
        let view = GroupView::new(&group, &workflows);
        let at = |w: u32, t: &str, ty: &str, s: CellState| (w, t.to_string(), ty.to_string(), s);
        assert_eq!(
            states(&view),
            [
                at(1, "host-1", "at", CellState::Ok),
                at(1, "host-1", "post-check", CellState::NotStarted),
                at(1, "host-2", "at", CellState::Unreachable),
                at(1, "host-2", "post-check", CellState::NotStarted),
                at(2, "host-3", "at", CellState::Waiting),
                at(2, "host-3", "post-check", CellState::NotStarted),
                at(2, "host-4", "at", CellState::Waiting),
                at(2, "host-4", "post-check", CellState::NotStarted),
            ]
        );
        let cell = |w: usize, t: usize| &view.waves[w].targets[t].cells[0];
        assert_eq!(cell(0, 1).reason, "step run: connect refused");
        assert_eq!(
            cell(1, 0).reason,
            "step run waits for approval (0 of 1, by alice)"
        );
        assert_eq!(view.waves[0].phase, Some(Phase::Completed));
        // The Workflows in the order the group lists them, whatever order they came in.
        let names: Vec<&str> = view.workflows.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["g-at-w1", "g-at-w2"]);
        assert!(view.workflows[1].steps[0].waits_for_approval());
    }

    #[test]
    fn waves_not_started_come_from_the_spec_and_a_running_step_says_so() {
        let (mut group, mut workflows) = rollout();
        if let Some(r) = group.status.as_mut().and_then(|s| s.rollout.as_mut()) {
            r.waves.truncate(1);
        }
        workflows.retain(|w| w.metadata.name.as_deref() == Some("g-at-w1"));
        let view = GroupView::new(&group, &workflows);
        assert_eq!(view.waves.len(), 2);
        assert_eq!(view.waves[1].phase, None);
        let names: Vec<&str> = view.waves[1]
            .targets
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names, ["host-3", "host-4"]);
        assert_eq!(
            view.waves[1].targets[0].cells[0].state,
            CellState::NotStarted
        );
        assert_eq!(view.waves[1].targets[0].cells[0].reason, "not started yet");

        let status = workflows[0].status.as_mut().expect("a status");
        status.phase = Some(Phase::Running);
        status.step_status.insert("run".into(), Phase::Running);
        if let Some(d) = status.step_details.get_mut("run") {
            d.targets = None;
        }
        let view = GroupView::new(&group, &workflows);
        let cell = &view.waves[0].targets[0].cells[0];
        assert_eq!(
            (cell.state, cell.reason.as_str()),
            (CellState::Running, "step run running (attempt 1)")
        );
    }

    #[test]
    fn the_view_as_json_names_its_fields_as_the_page_reads_them() {
        let (group, workflows) = rollout();
        let json = serde_json::to_value(GroupView::new(&group, &workflows)).expect("JSON");
        assert_eq!(
            json["waves"][0]["targets"][1]["cells"][0]["state"],
            "unreachable"
        );
        assert_eq!(
            json["waves"][1]["targets"][0]["cells"][1]["state"],
            "notStarted"
        );
        assert_eq!(
            json["workflows"][1]["steps"][0]["approval"]["state"],
            "waiting"
        );
        assert_eq!(json["rollout"]["failedTargets"], 1);
        assert_eq!(json["type"], "t");
        assert!(json["workflows"][0].get("targets").is_none(), "{json}");
    }
}

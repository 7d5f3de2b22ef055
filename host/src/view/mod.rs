//! One model of a group's tree, group -> Workflows -> steps -> targets, and the grid of its
//! waves' targets by type: what `workflow-operator get` prints ([`text`]) and what the web view
//! shows (`workflow-operator ui`, as JSON). A pure function of the objects, tested without a
//! cluster; the renderers decide how it reads, not what it says.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use serde::Serialize;
use workflow_model::TargetReport;

use crate::api::{LABEL_WAVE, Phase, RunStatus, StepApproval, StepDetail, Workflow, WorkflowGroup};
use crate::controllers::status::succeeded;

mod grid;
pub mod text;

pub use self::grid::{Cell, CellState, TargetRow, WaveView};

/// A WorkflowGroup and its Workflows, as people look at them.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GroupView {
    pub namespace: String,
    pub name: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub phase: Phase,
    pub paused: bool,
    pub started: Option<Time>,
    pub finished: Option<Time>,
    /// Its `Succeeded` condition's reason and message: why it is where it is.
    pub reason: Option<String>,
    pub message: Option<String>,
    /// Its workflow types, in the order they run: the grid's columns.
    pub types: Vec<String>,
    pub rollout: Option<RolloutView>,
    /// Its runs, the first one first.
    pub runs: Vec<RunStatus>,
    /// Its targets wave by wave, each with how each type went there.
    pub waves: Vec<WaveView>,
    /// Its Workflows in the order they ran, then any the group does not list.
    pub workflows: Vec<WorkflowView>,
    /// Types no Workflow was created for yet (a group without a rollout).
    pub not_started: Vec<String>,
}

/// A rollout's progress.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutView {
    /// Waves finished out of all, e.g. `2/3`.
    pub progress: String,
    pub failed_targets: u32,
    pub paused_after_wave: Option<u32>,
    pub next_window: Option<Time>,
    pub next_wave_at: Option<Time>,
}

/// One Workflow and its steps.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowView {
    pub name: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub wave: Option<u32>,
    pub run: Option<u32>,
    pub phase: Phase,
    pub started: Option<Time>,
    pub finished: Option<Time>,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub steps: Vec<StepView>,
    /// Its targets' names (the grid's rows when the group lists none itself).
    #[serde(skip)]
    pub targets: Vec<String>,
}

/// One step of a Workflow.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepView {
    pub name: String,
    pub phase: Phase,
    pub started: Option<Time>,
    pub finished: Option<Time>,
    pub attempts: u32,
    pub exit_code: Option<i32>,
    pub message: Option<String>,
    pub pod: Option<String>,
    pub approval: Option<ApprovalView>,
    pub targets: Option<TargetReport>,
}

/// Where a step's approval stands.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalState {
    /// It has not started and waits for approvals.
    Waiting,
    /// It started with the approvals it needed.
    Approved,
    /// It started without them, as its gate said to at its timeout.
    TimedOut,
}

/// What a step asked to be approved, and who approved it.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalView {
    pub state: ApprovalState,
    pub required: u32,
    pub approvers: Vec<String>,
    pub approved_by: Vec<String>,
    /// What an approval approves, and its digest (empty before the gate asked).
    pub content: String,
    pub digest: String,
}

impl GroupView {
    /// The view of `group` and its `workflows` (in any order).
    pub fn new(group: &WorkflowGroup, workflows: &[Workflow]) -> Self {
        let status = group.status.clone().unwrap_or_default();
        let condition = succeeded(&status.conditions);
        let mut ordered: Vec<&Workflow> = status
            .workflows
            .iter()
            .filter_map(|r| workflows.iter().find(|w| w.name_any() == r.name))
            .collect();
        for w in workflows {
            if !ordered.iter().any(|o| o.name_any() == w.name_any()) {
                ordered.push(w);
            }
        }
        let created: Vec<&str> = status.workflows.iter().map(|w| w.type_.as_str()).collect();
        let not_started = group
            .spec
            .workflow_steps
            .iter()
            .filter(|t| !created.contains(&t.as_str()) && group.spec.rollout.is_none())
            .cloned()
            .collect();
        let workflows: Vec<WorkflowView> = ordered.into_iter().map(WorkflowView::new).collect();
        GroupView {
            namespace: group.namespace().unwrap_or_default(),
            name: group.name_any(),
            type_: group.spec.type_.clone(),
            phase: status.phase.unwrap_or_default(),
            paused: group.spec.paused,
            started: status.start_time.clone(),
            finished: status.completion_time.clone(),
            reason: condition.map(|c| c.reason.clone()),
            message: condition.map(|c| c.message.clone()),
            types: group.spec.workflow_steps.clone(),
            rollout: status.rollout.as_ref().map(|r| RolloutView {
                progress: r.progress.clone(),
                failed_targets: r.failed_targets,
                paused_after_wave: r.paused_after_wave,
                next_window: r.next_window.clone(),
                next_wave_at: r.next_wave_at.clone(),
            }),
            waves: grid::waves(group, &workflows),
            runs: status.runs,
            workflows,
            not_started,
        }
    }
}

impl WorkflowView {
    fn new(workflow: &Workflow) -> Self {
        let status = workflow.status.clone().unwrap_or_default();
        let condition = succeeded(&status.conditions).filter(|c| c.reason != "Running");
        let steps = workflow
            .spec
            .steps
            .iter()
            .map(|step| {
                let phase = status
                    .step_status
                    .get(&step.name)
                    .copied()
                    .unwrap_or_default();
                let detail = status.step_details.get(&step.name);
                StepView::new(&step.name, phase, detail.cloned().unwrap_or_default())
            })
            .collect();
        WorkflowView {
            name: workflow.name_any(),
            type_: workflow.spec.type_.clone(),
            wave: workflow
                .labels()
                .get(LABEL_WAVE)
                .and_then(|w| w.parse().ok()),
            run: status.run,
            phase: status.phase.unwrap_or_default(),
            started: status.start_time,
            finished: status.completion_time,
            reason: condition.map(|c| c.reason.clone()),
            message: condition.map(|c| c.message.clone()),
            steps,
            targets: workflow
                .spec
                .targets
                .iter()
                .map(|t| t.name.clone())
                .collect(),
        }
    }
}

impl StepView {
    fn new(name: &str, phase: Phase, detail: StepDetail) -> Self {
        StepView {
            name: name.to_string(),
            phase,
            started: detail.started_at,
            finished: detail.finished_at,
            attempts: detail.attempts,
            exit_code: detail.exit_code,
            message: detail.message,
            approval: detail.approval.map(|a| ApprovalView::new(a, phase)),
            pod: detail.pod,
            targets: detail.targets,
        }
    }

    /// It waits for approvals now: its gate asked, and it has not started.
    pub fn waits_for_approval(&self) -> bool {
        self.pod.is_none()
            && self
                .approval
                .as_ref()
                .is_some_and(|a| a.state == ApprovalState::Waiting && !a.digest.is_empty())
    }
}

impl ApprovalView {
    fn new(approval: StepApproval, phase: Phase) -> Self {
        let state = match (phase, approval.approved_by.is_empty()) {
            (Phase::Pending, _) => ApprovalState::Waiting,
            (_, true) => ApprovalState::TimedOut,
            (_, false) => ApprovalState::Approved,
        };
        ApprovalView {
            state,
            required: approval.required,
            approvers: approval.approvers,
            approved_by: approval.approved_by,
            content: approval.content,
            digest: approval.digest,
        }
    }
}

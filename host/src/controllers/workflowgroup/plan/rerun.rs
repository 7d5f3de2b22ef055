//! Re-runs of a finished group: which run it is in, what a new request asks, what each
//! Workflow runs again; and the pauses of a run, with who asked for each.

use super::*;

/// The run the group is in: 1 until it is re-run, then the newest of `status.runs`.
pub fn current_run(status: &WorkflowGroupStatus) -> u32 {
    status.runs.last().map_or(1, |r| r.run)
}

/// The re-run asked for and not acted on yet: `spec.rerun`, else the annotation
/// `workflow.rxg456.cn/rerun`, whose id neither `status.runs` lists nor
/// `status.rerunIdDigests` remembers.
pub fn rerun_request(group: &WorkflowGroup, status: &WorkflowGroupStatus) -> Option<RerunRequest> {
    let acted = |id: &str| {
        status.runs.iter().any(|r| r.id.as_deref() == Some(id))
            || status.rerun_id_digests.contains(&rerun_id_digest(id))
    };
    let annotated = group
        .annotations()
        .get(ANNOTATION_RERUN)
        .map(|id| RerunRequest {
            id: id.trim().to_string(),
            ..RerunRequest::default()
        });
    group
        .spec
        .rerun
        .clone()
        .into_iter()
        .chain(annotated)
        .find(|r| !r.id.is_empty() && !acted(&r.id))
}

/// Adds the ids of `status.runs` that `status.rerunIdDigests` lacks (a group re-run before
/// the digests were kept has its listed ids added the first time), keeping the newest
/// [`MAX_REMEMBERED_RERUN_IDS`].
pub(super) fn remember_rerun_ids(status: &mut WorkflowGroupStatus) {
    for id in status.runs.iter().filter_map(|r| r.id.as_deref()) {
        let digest = rerun_id_digest(id);
        if !status.rerun_id_digests.contains(&digest) {
            status.rerun_id_digests.push(digest);
        }
    }
    let excess = status
        .rerun_id_digests
        .len()
        .saturating_sub(MAX_REMEMBERED_RERUN_IDS);
    status.rerun_id_digests.drain(..excess);
}

/// What `run` asks of a Workflow of `type_name` from an earlier run that ended `phase`; `None`
/// when the Workflow stays as it is (it completed, and the run names none of it).
pub fn workflow_rerun(run: &RunStatus, type_name: &str, phase: Phase) -> Option<WorkflowRerun> {
    let whole = run.from == Some(RerunFrom::All) || run.types.iter().any(|t| t == type_name);
    let steps: Vec<String> = run
        .steps
        .iter()
        .filter_map(|s| match s.split_once('/') {
            Some((t, step)) => (t == type_name).then(|| step.to_string()),
            None => Some(s.clone()),
        })
        .collect();
    if !whole && steps.is_empty() && phase == Phase::Completed {
        return None;
    }
    Some(WorkflowRerun {
        run: run.run,
        from: if whole {
            RerunFrom::All
        } else {
            RerunFrom::Failed
        },
        steps,
        targets: run.targets.unwrap_or_default(),
    })
}

/// The plan that starts a re-run of a finished group: a new entry in `status.runs` (the first
/// run listed too, the first time), the group Running again. Its Workflows are asked to run
/// again in turn by the plans that follow.
pub(super) fn start_rerun(
    group: &WorkflowGroup,
    old: &WorkflowGroupStatus,
    request: RerunRequest,
    now: Timestamp,
) -> GroupPlan {
    let mut plan = Planner::new(group, old, now);
    let runs = &mut plan.status.runs;
    if runs.is_empty() {
        runs.push(first_run(old, old.phase.unwrap_or(Phase::Failed)));
    }
    let run = runs.last().map_or(1, |r| r.run) + 1;
    let requested_by = requested_by(group);
    let run_id = uuid::Uuid::new_v4().to_string();
    let mut what = format!("from {}", request.from.as_str());
    if !request.steps.is_empty() {
        what.push_str(&format!(", steps {}", request.steps.join(", ")));
    }
    if !request.types.is_empty() {
        what.push_str(&format!(", types {}", request.types.join(", ")));
    }
    if request.targets == RerunTargets::Failed {
        what.push_str(", on the targets that failed");
    }
    if let Some(by) = &requested_by {
        what.push_str(&format!(", asked by {by}"));
    }
    let message = format!("run {run} ({run_id}): re-run {:?} {what}", request.id);
    runs.push(RunStatus {
        run,
        run_id,
        id: Some(request.id),
        from: Some(request.from),
        steps: request.steps,
        types: request.types,
        targets: (!request.targets.is_all()).then_some(request.targets),
        requested_by,
        pauses: Vec::new(),
        start_time: Some(Time(now)),
        completion_time: None,
        phase: Phase::Running,
        message: String::new(),
    });
    let excess = runs.len().saturating_sub(MAX_LISTED_RUNS);
    runs.drain(..excess);
    remember_rerun_ids(&mut plan.status);
    plan.status.phase = Some(Phase::Running);
    plan.status.completion_time = None;
    plan.condition(ConditionStatus::Unknown, reason::RERUNNING, &message);
    plan.events
        .push(Transition::normal(reason::RERUNNING, message).once());
    plan.done()
}

/// The entry of the first run in `status.runs`, made when the group is first re-run or paused,
/// as `status` says the run is (`phase`).
fn first_run(status: &WorkflowGroupStatus, phase: Phase) -> RunStatus {
    RunStatus {
        run: 1,
        run_id: uuid::Uuid::new_v4().to_string(),
        start_time: status.start_time.clone(),
        completion_time: status.completion_time.clone(),
        phase,
        message: succeeded(&status.conditions)
            .filter(|_| phase.is_finished())
            .map(|c| c.message.clone())
            .unwrap_or_default(),
        ..RunStatus::default()
    }
}

/// Who asked for what the group's spec asks now: the annotation `workflow.rxg456.cn/requested-by`,
/// which the admission policy lets be only the user who makes the request.
fn requested_by(group: &WorkflowGroup) -> Option<String> {
    group
        .annotations()
        .get(ANNOTATION_REQUESTED_BY)
        .map(|by| by.trim().to_string())
        .filter(|by| !by.is_empty())
}

/// Records in the current run's entry of `status.runs` a pause or a resumption that
/// `spec.paused` shows and the entry does not have yet, when (`now`) and by whom; the operator
/// pausing a rollout over its failure budget is named as `spec.rollout.onBudgetExceeded`.
pub(super) fn note_pause(status: &mut WorkflowGroupStatus, group: &WorkflowGroup, now: Timestamp) {
    let paused = group.spec.paused;
    let open = status
        .runs
        .last()
        .and_then(|r| r.pauses.last())
        .is_some_and(|p| p.resumed_at.is_none());
    if paused == open || (!paused && status.runs.is_empty()) {
        return;
    }
    let by_budget = status
        .rollout
        .as_ref()
        .is_some_and(|r| r.paused_after_wave.is_some());
    let by = requested_by(group);
    if status.runs.is_empty() {
        let first = first_run(status, status.phase.unwrap_or(Phase::Running));
        status.runs.push(first);
    }
    let Some(run) = status.runs.last_mut() else {
        return;
    };
    if paused {
        let by = by.or_else(|| by_budget.then(|| "spec.rollout.onBudgetExceeded".to_string()));
        run.pauses.push(PauseRecord {
            paused_at: Time(now),
            paused_by: by,
            resumed_at: None,
            resumed_by: None,
        });
        let excess = run.pauses.len().saturating_sub(MAX_LISTED_PAUSES);
        run.pauses.drain(..excess);
    } else if let Some(pause) = run.pauses.last_mut() {
        pause.resumed_at = Some(Time(now));
        pause.resumed_by = by;
    }
}

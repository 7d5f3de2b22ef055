//! Re-runs of a finished group: which run it is in, what a new request asks, what each
//! Workflow runs again.

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
        runs.push(RunStatus {
            run: 1,
            run_id: uuid::Uuid::new_v4().to_string(),
            start_time: old.start_time.clone(),
            completion_time: old.completion_time.clone(),
            phase: old.phase.unwrap_or(Phase::Failed),
            message: succeeded(&old.conditions)
                .map(|c| c.message.clone())
                .unwrap_or_default(),
            ..RunStatus::default()
        });
    }
    let run = runs.last().map_or(1, |r| r.run) + 1;
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
    let message = format!("run {run} ({run_id}): re-run {:?} {what}", request.id);
    runs.push(RunStatus {
        run,
        run_id,
        id: Some(request.id),
        from: Some(request.from),
        steps: request.steps,
        types: request.types,
        targets: (!request.targets.is_all()).then_some(request.targets),
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

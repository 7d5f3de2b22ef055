//! What became of a create or re-run, and what a plan wants of its locks.

use super::*;

/// What became of the Workflow the plan meant to create, or to run again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// Created, or asked to run again.
    Done,
    /// The locks on its targets were not all free; the message says for what and who holds
    /// them.
    Locked(String),
    /// A Workflow of that name exists and is not this group's.
    NameTaken,
    /// The API server refused it as invalid (a group stored before the CRD's rules existed
    /// can carry what the Workflow's rules refuse); its message.
    Refused(String),
}

/// The plan once its create or re-run was attempted: unchanged when it was done; otherwise
/// the group waits with a condition saying why (a refusal is not retried for ever).
pub fn after_attempt(
    group: &WorkflowGroup,
    mut plan: GroupPlan,
    attempt: Attempt,
    now: Timestamp,
) -> GroupPlan {
    let (reason, message) = match attempt {
        Attempt::Done => return plan,
        Attempt::Locked(message) => {
            let mut plan = match plan.rerun.take() {
                // Not asked to run again yet: listed as waiting, as before.
                Some(patch) => {
                    for r in plan.status.workflows.iter_mut() {
                        if r.name == patch.workflow {
                            r.status = Phase::Pending;
                        }
                    }
                    waiting(group, plan, reason::WAITING_FOR_TARGETS, message, now)
                }
                None if plan.create.is_some() => {
                    not_created(group, plan, reason::WAITING_FOR_TARGETS, message, now)
                }
                // A Workflow whose locks it gave away would start a step.
                None => waiting(group, plan, reason::WAITING_FOR_TARGETS, message, now),
            };
            plan.keep_locks = false;
            return plan;
        }
        Attempt::NameTaken => {
            let Some(name) = plan.create.as_ref().map(ResourceExt::name_any) else {
                return plan;
            };
            (
                reason::TEMPLATE_FAILED,
                format!("a Workflow named {name} already exists and does not belong to this group"),
            )
        }
        Attempt::Refused(why) => {
            let Some(type_name) = plan.create.as_ref().map(|w| w.spec.type_.clone()) else {
                return plan;
            };
            (
                reason::TEMPLATE_FAILED,
                format!("the API server refused the Workflow for {type_name}: {why}"),
            )
        }
    };
    not_created(group, plan, reason, message, now)
}

/// What a plan wants of the locks on the group's targets.
#[derive(Debug, PartialEq, Eq)]
pub enum LockWish<'a> {
    /// Hold the locks of these targets first: the plan creates or re-runs a Workflow on them.
    Take(&'a [Target]),
    /// Keep what it holds: it acts on its (current wave's) targets.
    Keep,
    /// Give them back (before it starts, between waves, once finished, or to groups waiting
    /// for them while its Workflow waits), but only once nothing of the group acts any more:
    /// `acting` while a Workflow of its own has not finished (a spec made invalid while it
    /// ran); a step pod still running is the reconcile's to see.
    Release { acting: bool },
    /// Keep what it holds, while its unfinished `workflows` wait with nothing started (since
    /// `since`): the reconcile gives them to waiting groups once that has lasted too long.
    Idle {
        workflows: Vec<&'a str>,
        since: Timestamp,
    },
    /// Take the locks of its current targets again: a step of its `workflows`, whose locks it
    /// gave away, would start.
    TakeBack { workflows: Vec<&'a str> },
}

/// What `plan` wants of the group's locks, given its `workflows`.
pub fn lock_wish<'a>(
    plan: &'a GroupPlan,
    workflows: &'a BTreeMap<String, ObservedWorkflow>,
) -> LockWish<'a> {
    if let Some(workflow) = &plan.create {
        return LockWish::Take(&workflow.spec.targets);
    }
    if let Some(patch) = &plan.rerun {
        return LockWish::Take(&patch.targets);
    }
    let finished = plan.status.phase.is_some_and(Phase::is_finished);
    if plan.keep_locks && !finished {
        return idle_turn(workflows).unwrap_or(LockWish::Keep);
    }
    LockWish::Release {
        acting: workflows
            .values()
            .any(|w| !w.phase.is_some_and(Phase::is_finished)),
    }
}

/// What the group's unfinished Workflows say of its locks, when they say anything: all wait
/// idle (the locks may go to waiting groups), all have seen that the locks went (they go), or a
/// step of one whose locks went is ready (they are taken again).
fn idle_turn<'a>(workflows: &'a BTreeMap<String, ObservedWorkflow>) -> Option<LockWish<'a>> {
    let acting: Vec<&ObservedWorkflow> = workflows
        .values()
        .filter(|w| !w.phase.is_some_and(Phase::is_finished) && !w.deleted)
        .collect();
    let idle = |w: &ObservedWorkflow| {
        w.locks.seen && crate::controllers::workflow::plan::IDLE.contains(&w.reason.as_str())
    };
    let names = |ws: &[&'a ObservedWorkflow]| ws.iter().map(|w| w.name.as_str()).collect();
    let ready = |w: &&ObservedWorkflow| {
        w.locks.awaiting && w.locks.seen && w.reason == reason::WAITING_FOR_TARGETS
    };
    if acting.iter().any(ready) {
        let awaiting: Vec<&ObservedWorkflow> = acting
            .iter()
            .copied()
            .filter(|w| w.locks.awaiting)
            .collect();
        return Some(LockWish::TakeBack {
            workflows: names(&awaiting),
        });
    }
    if acting.is_empty() || !acting.iter().all(|w| idle(w)) {
        // Something runs (or a Workflow has not seen that its locks went yet).
        return None;
    }
    if acting.iter().all(|w| w.locks.awaiting) {
        return Some(LockWish::Release { acting: false });
    }
    let since = acting
        .iter()
        .map(|w| w.locks.idle_since)
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .max()?;
    Some(LockWish::Idle {
        workflows: names(&acting),
        since,
    })
}

/// The targets `group` waits for locks on (its current wave's), when it waits for locks: what
/// other groups serve first come, first served.
pub fn waiting_for(group: &WorkflowGroup) -> Option<&[Target]> {
    let status = group.status.as_ref()?;
    let waits = !status.phase.is_some_and(Phase::is_finished)
        && succeeded(&status.conditions).is_some_and(|c| c.reason == reason::WAITING_FOR_TARGETS);
    waits.then(|| current_targets(group))
}

/// The plan when the Workflow it meant to create was not created: waiting, saying why.
pub(super) fn not_created(
    group: &WorkflowGroup,
    mut plan: GroupPlan,
    reason: &str,
    message: String,
    now: Timestamp,
) -> GroupPlan {
    let Some(workflow) = plan.create.take() else {
        return plan;
    };
    let name = workflow.name_any();
    let wave = plan
        .status
        .workflows
        .iter()
        .find(|w| w.name == name)
        .and_then(|w| w.wave);
    plan.status.workflows.retain(|w| w.name != name);
    // A wave that has not begun after all is not listed.
    if let (Some(wave), Some(rollout)) = (wave, plan.status.rollout.as_mut())
        && !plan.status.workflows.iter().any(|w| w.wave == Some(wave))
    {
        rollout.waves.retain(|w| w.wave != wave);
    }
    waiting(group, plan, reason, message, now)
}

/// `plan` turned into one that waits, for `reason`.
pub(super) fn waiting(
    group: &WorkflowGroup,
    plan: GroupPlan,
    reason: &str,
    message: String,
    now: Timestamp,
) -> GroupPlan {
    let old = group.status.clone().unwrap_or_default();
    let mut planner = Planner::new(group, &old, now);
    planner.status = plan.status;
    planner.events = plan.events;
    planner.update_progress();
    let keep_locks = plan.keep_locks;
    let mut plan = planner.wait(reason, message);
    plan.keep_locks = keep_locks;
    plan
}

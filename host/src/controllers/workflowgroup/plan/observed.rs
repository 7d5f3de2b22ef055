//! A Workflow of the group, as the plan reads it.

use workflow_model::text;

use super::*;

/// The reasons of a waiting Workflow whose message its group repeats in its own status.
pub const TOLD_REASONS: [&str; 2] = [reason::POD_REFUSED, reason::WAITING_FOR_APPROVAL];

/// A Workflow of the group, as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedWorkflow {
    pub name: String,
    /// Its workflow type.
    pub type_: String,
    /// Its phase, once its controller has written one.
    pub phase: Option<Phase>,
    /// Its `Succeeded` condition's reason.
    pub reason: String,
    /// Its `Succeeded` condition's message.
    pub message: String,
    /// The targets its steps reported failed or unreachable, each with why.
    pub failed_targets: BTreeMap<String, String>,
    /// The run of the group its status reflects (1 until a re-run).
    pub run: u32,
    /// The run of the group its spec belongs to (1 until the group asks it to re-run).
    pub asked_run: u32,
    /// It is gone from the API server (deleted by someone): what is known of it is the group's
    /// record ([`ObservedWorkflow::deleted`]).
    pub deleted: bool,
    /// Where it stands with its group's locks.
    pub locks: LockTurn,
}

/// What a Workflow says of its group's locks (nothing once it finished: the cache keeps little
/// of a finished Workflow).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockTurn {
    /// Its group gave the locks away (`spec.awaitingLocks`).
    pub awaiting: bool,
    /// Its status reflects its spec as it is (`observedGeneration`): it has seen the request.
    pub seen: bool,
    /// Since when it has waited with nothing started (`status.idleSince`).
    pub idle_since: Option<Timestamp>,
}

impl ObservedWorkflow {
    /// What the group needs to know of `workflow`.
    pub fn of(workflow: &Workflow) -> Self {
        let status = workflow.status.as_ref();
        let condition = status.and_then(|s| succeeded(&s.conditions));
        let failed_targets = status
            .iter()
            .flat_map(|s| s.step_details.iter())
            .filter_map(|(step, d)| Some((step, d.targets.as_ref()?)))
            .flat_map(|(step, report)| {
                report
                    .problems
                    .iter()
                    // Escaped again: a Workflow's status written before its text was.
                    .map(move |p| {
                        (
                            text::escape_controls(&p.name).into_owned(),
                            format!("{step}: {}", text::escape_controls(&p.reason)),
                        )
                    })
            })
            .collect();
        ObservedWorkflow {
            name: workflow.name_any(),
            type_: workflow.spec.type_.clone(),
            run: status.and_then(|s| s.run).unwrap_or(1),
            asked_run: workflow.spec.rerun.as_ref().map_or(1, |r| r.run),
            phase: status.and_then(|s| s.phase),
            reason: condition.map(|c| c.reason.clone()).unwrap_or_default(),
            message: condition.map(|c| c.message.clone()).unwrap_or_default(),
            failed_targets,
            deleted: false,
            locks: LockTurn::of(workflow),
        }
    }

    /// Whether the group reads this Workflow's message: it failed (the group's failure quotes
    /// it), or it waits for one of the [`TOLD_REASONS`]. Of any other, only the reason counts.
    pub fn message_is_read(&self) -> bool {
        self.phase == Some(Phase::Failed) || TOLD_REASONS.contains(&self.reason.as_str())
    }

    /// A Workflow the group made, listed in its status as `recorded`, that no longer exists:
    /// deleted while it ran, it failed (its wave, or the group, fails naming the deletion);
    /// finished, it counts as it ended. Of no run (0): a re-run that would run it again makes
    /// it anew instead.
    pub fn deleted(recorded: &WorkflowReference) -> Self {
        let (phase, message) = match recorded.status {
            Phase::Completed => (Phase::Completed, "it completed, then was deleted"),
            Phase::Failed => (Phase::Failed, "it failed, then was deleted"),
            Phase::Pending | Phase::Running => (
                Phase::Failed,
                "it was deleted while it ran (a re-run, spec.rerun, makes it again)",
            ),
        };
        ObservedWorkflow {
            name: recorded.name.clone(),
            type_: recorded.type_.clone(),
            phase: Some(phase),
            reason: reason::WORKFLOW_DELETED.into(),
            message: message.into(),
            failed_targets: BTreeMap::new(),
            run: 0,
            asked_run: 0,
            deleted: true,
            locks: LockTurn::default(),
        }
    }
}

impl LockTurn {
    fn of(workflow: &Workflow) -> Self {
        let status = workflow.status.as_ref();
        if status.and_then(|s| s.phase).is_some_and(Phase::is_finished) {
            return LockTurn::default();
        }
        LockTurn {
            awaiting: workflow.spec.awaiting_locks,
            seen: status.and_then(|s| s.observed_generation) == workflow.metadata.generation,
            idle_since: status.and_then(|s| s.idle_since.as_ref()).map(|t| t.0),
        }
    }
}

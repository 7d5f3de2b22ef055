//! Which changes of a Workflow wake its group. A group reads of its Workflows only what
//! [`ObservedWorkflow::of`] takes, whether its group made it ([`write::controlled_by`]) and
//! whether its signature verified ([`group_signed`]). A Workflow's status is written at each
//! step's start and end; most of those writes change nothing of that, and each woke the group
//! for a reconcile that found nothing to do.
//!
//! [`write::controlled_by`]: super::super::write::controlled_by
//! [`group_signed`]: crate::controllers::workflow::group_signed

use std::collections::HashMap;
use std::sync::Arc;

use kube::ResourceExt;

use super::plan::ObservedWorkflow;
use crate::api::{Phase, Workflow};
use crate::controllers::workflow::group_signed;

/// What a group reads of one of its Workflows.
#[derive(Debug, PartialEq, Eq)]
struct GroupView {
    observed: ObservedWorkflow,
    generation: Option<i64>,
    controller: Option<String>,
    signed: bool,
}

impl GroupView {
    fn of(workflow: &Workflow) -> Self {
        let mut observed = ObservedWorkflow::of(workflow);
        // A running Workflow's message changes at each step; the group reads it only in some
        // cases.
        if !observed.message_is_read() {
            observed.message.clear();
        }
        GroupView {
            observed,
            generation: workflow.metadata.generation,
            controller: workflow
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone()),
            signed: group_signed(workflow),
        }
    }
}

/// The last view of each running Workflow passed on, by uid. A finished one is forgotten once
/// passed on (a later change of it, a re-run, passes again). One deleted while it ran is not
/// (the shared stream does not tell of deletions), so all are forgotten when more than [`MAX`]
/// are held: each Workflow's next change then wakes its group once more, which is all a lost
/// view costs.
#[derive(Default)]
pub struct GroupWake {
    last: HashMap<String, GroupView>,
}

/// Most views held.
const MAX: usize = 65_536;

impl GroupWake {
    /// Whether this change of `workflow` wakes its group: the first seen of it, and any that
    /// changes what the group reads of it.
    pub fn wakes(&mut self, workflow: &Arc<Workflow>) -> bool {
        let uid = workflow.uid().unwrap_or_default();
        let view = GroupView::of(workflow);
        let changed = self.last.get(&uid) != Some(&view);
        if view.observed.phase.is_some_and(Phase::is_finished) {
            self.last.remove(&uid);
        } else if changed {
            if self.last.len() >= MAX && !self.last.contains_key(&uid) {
                self.last.clear();
            }
            self.last.insert(uid, view);
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::api::{StepDetail, WorkflowSpec, WorkflowStatus};

    fn running(steps: &[(&str, Phase)]) -> Arc<Workflow> {
        let mut w = Workflow::new("g-pre-check", WorkflowSpec::default());
        w.metadata.uid = Some("w1".into());
        w.metadata.generation = Some(1);
        w.metadata.owner_references = Some(vec![OwnerReference {
            controller: Some(true),
            uid: "g1".into(),
            ..OwnerReference::default()
        }]);
        w.status = Some(WorkflowStatus {
            phase: Some(Phase::Running),
            observed_generation: Some(1),
            step_status: steps.iter().map(|(s, p)| (s.to_string(), *p)).collect(),
            step_details: steps
                .iter()
                .map(|(s, _)| (s.to_string(), StepDetail::default()))
                .collect(),
            ..WorkflowStatus::default()
        });
        Arc::new(w)
    }

    #[test]
    fn a_step_moving_on_does_not_wake_the_group_and_what_it_reads_does() {
        let mut wake = GroupWake::default();
        let first = running(&[("a", Phase::Running)]);
        assert!(wake.wakes(&first), "the first sight of a Workflow");
        assert!(!wake.wakes(&first), "the same again");
        let next = running(&[("a", Phase::Completed), ("b", Phase::Running)]);
        assert!(!wake.wakes(&next), "a step ended and the next started");

        let mut asked = (*next).clone();
        asked.spec.awaiting_locks = true;
        assert!(wake.wakes(&Arc::new(asked.clone())), "its lock request");
        asked.metadata.generation = Some(2);
        assert!(wake.wakes(&Arc::new(asked.clone())), "its spec changed");
        crate::provenance::mark_verified(&mut asked.metadata, true);
        assert!(wake.wakes(&Arc::new(asked.clone())), "it verified");
        crate::provenance::mark_verified(&mut asked.metadata, false);
        assert!(
            wake.wakes(&Arc::new(asked.clone())),
            "it no longer verified"
        );
        asked.metadata.owner_references = None;
        assert!(
            wake.wakes(&Arc::new(asked.clone())),
            "its controller changed"
        );

        let mut done = (*next).clone();
        done.status.as_mut().unwrap().phase = Some(Phase::Completed);
        let done = Arc::new(done);
        assert!(wake.wakes(&done), "it finished");
        assert!(wake.last.is_empty(), "a finished one is forgotten");
        assert!(wake.wakes(&done), "so a later change of it passes again");
    }

    #[test]
    fn a_message_wakes_the_group_only_where_the_group_reads_it() {
        let mut wake = GroupWake::default();
        let with = |reason: &str, message: &str, phase: Phase| {
            let mut w = (*running(&[("a", Phase::Running)])).clone();
            let status = w.status.as_mut().unwrap();
            status.phase = Some(phase);
            status.conditions = vec![crate::controllers::status::succeeded_condition(
                crate::api::ConditionStatus::Unknown,
                reason,
                message,
                Some(1),
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            )];
            Arc::new(w)
        };
        assert!(wake.wakes(&with("Running", "step a runs", Phase::Running)));
        assert!(
            !wake.wakes(&with("Running", "step b runs", Phase::Running)),
            "a running Workflow's message"
        );
        assert!(wake.wakes(&with("PodRefused", "quota", Phase::Running)));
        assert!(
            wake.wakes(&with("PodRefused", "quota again", Phase::Running)),
            "the message of a reason the group repeats"
        );
        assert!(wake.wakes(&with("StepFailed", "a failed", Phase::Failed)));
    }

    #[test]
    fn views_of_workflows_that_never_finish_are_bounded() {
        let mut wake = GroupWake::default();
        let mut w = (*running(&[("a", Phase::Running)])).clone();
        for n in 0..=MAX {
            w.metadata.uid = Some(format!("w{n}"));
            assert!(wake.wakes(&Arc::new(w.clone())));
        }
        assert_eq!(
            wake.last.len(),
            1,
            "all forgotten at the bound, then the newest held"
        );
    }
}

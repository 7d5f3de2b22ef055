//! The signature verdicts of the Workflows the watch delivers. A Workflow's status is written
//! at each step's start and end, and each write comes back through the watch, whose copy is
//! checked for its group's signature ([`mark_group_signed`](super::mark_group_signed)): its
//! spec serialised and hashed each time, though a status write changes nothing the signature
//! covers. The API server counts every change of a spec in `metadata.generation`, so a
//! Workflow delivered again with the same generation, group and signature verifies as it did.

use std::collections::HashMap;

use kube::ResourceExt;

use crate::api::Workflow;
use crate::provenance;

/// The last verdict of each running Workflow, by uid. A finished one's is forgotten (few
/// changes follow, and a re-run changes its generation); all are when more than [`MAX`]
/// are held (Workflows deleted while they ran leave theirs).
#[derive(Default)]
pub struct Verdicts {
    by_uid: HashMap<String, (Checked, bool)>,
}

/// What a verdict was given for: besides these, the signature covers the Workflow's name and
/// namespace, which its uid fixes.
#[derive(PartialEq, Eq)]
struct Checked {
    generation: i64,
    group: String,
    signature: Option<String>,
}

/// Most verdicts held.
const MAX: usize = 65_536;

impl Verdicts {
    /// Whether `workflow`, which names `group` as its controller, is signed by it: as it was
    /// found when last delivered unchanged, else as `verify` finds it.
    pub fn signed(
        &mut self,
        workflow: &Workflow,
        group: &str,
        verify: impl FnOnce() -> bool,
    ) -> bool {
        let (Some(uid), Some(generation)) = (&workflow.metadata.uid, workflow.metadata.generation)
        else {
            return verify();
        };
        let checked = Checked {
            generation,
            group: group.to_string(),
            signature: workflow.annotations().get(provenance::ANNOTATION).cloned(),
        };
        let finished = workflow
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .is_some_and(|p| p.is_finished());
        let signed = match self.by_uid.get(uid) {
            Some((known, signed)) if *known == checked => *signed,
            _ => verify(),
        };
        if finished {
            self.by_uid.remove(uid);
        } else {
            if self.by_uid.len() >= MAX && !self.by_uid.contains_key(uid) {
                self.by_uid.clear();
            }
            self.by_uid.insert(uid.clone(), (checked, signed));
        }
        signed
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::api::{Phase, WorkflowSpec, WorkflowStatus};

    fn workflow(generation: i64, signature: &str) -> Workflow {
        let mut w = Workflow::new("g-pre-check", WorkflowSpec::default());
        w.metadata.uid = Some("w1".into());
        w.metadata.generation = Some(generation);
        w.annotations_mut()
            .insert(provenance::ANNOTATION.into(), signature.into());
        w
    }

    #[test]
    fn a_workflow_delivered_again_unchanged_is_not_verified_again_and_a_changed_one_is() {
        let mut verdicts = Verdicts::default();
        let calls = Cell::new(0);
        let verify = |answer: bool| {
            let calls = &calls;
            move || {
                calls.set(calls.get() + 1);
                answer
            }
        };
        assert!(verdicts.signed(&workflow(1, "s1"), "g1", verify(true)));
        // A status write: the same generation, group and signature.
        assert!(verdicts.signed(&workflow(1, "s1"), "g1", verify(false)));
        assert_eq!(calls.get(), 1, "the second delivery was verified again");
        // Its spec changed (a new generation), its signature, its group: verified again.
        assert!(!verdicts.signed(&workflow(2, "s1"), "g1", verify(false)));
        assert!(
            !verdicts.signed(&workflow(2, "s1"), "g1", verify(true)),
            "a refusal is kept too"
        );
        assert!(verdicts.signed(&workflow(2, "s2"), "g1", verify(true)));
        assert!(!verdicts.signed(&workflow(2, "s2"), "g2", verify(false)));
        assert_eq!(calls.get(), 4);

        // Once finished, the verdict is given once more and forgotten: the next delivery is
        // verified again, and nothing is held for it.
        let mut finished = workflow(2, "s2");
        finished.status = Some(WorkflowStatus {
            phase: Some(Phase::Completed),
            ..WorkflowStatus::default()
        });
        assert!(!verdicts.signed(&finished, "g2", verify(true)));
        assert!(verdicts.by_uid.is_empty());
        assert!(verdicts.signed(&finished, "g2", verify(true)));
        assert!(verdicts.by_uid.is_empty());
        assert_eq!(calls.get(), 5);
    }
}

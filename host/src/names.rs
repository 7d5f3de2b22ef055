//! Every name the operator gives an object it creates: Workflows, step pods, targets
//! ConfigMaps, Leases and Approvals.
//!
//! Deterministic, so that creating one twice (after a crash between the create and the status
//! update) hits the existing object instead of making a second one.

use kube::ResourceExt;
use sha2::{Digest, Sha256};
use workflow_model::text;

use crate::api::{Workflow, WorkflowGroup, run_of};

/// Most characters of a name that must also fit in a label value.
const MAX_NAME: usize = 63;

/// The deterministic name of the Workflow of `workflow_type` in `group`.
///
/// The suffix hashes the group's UID,
/// so a group deleted and re-created under the same name never adopts its predecessor's
/// Workflows while they are being garbage-collected.
pub fn workflow_name(group: &WorkflowGroup, workflow_type: &str) -> String {
    wave_workflow_name(group, workflow_type, None)
}

/// The deterministic name of the Workflow of `workflow_type` in `wave` of `group`'s rollout
/// (`<group>-<type>-w<wave>-<hash>`); [`workflow_name`] without a wave.
pub fn wave_workflow_name(group: &WorkflowGroup, workflow_type: &str, wave: Option<u32>) -> String {
    let identity = group.uid().unwrap_or_else(|| {
        format!(
            "{}/{}",
            group.namespace().unwrap_or_default(),
            group.name_any()
        )
    });
    match wave {
        None => {
            let suffix = short_hash(&[&identity, workflow_type]);
            bounded_name(&[&group.name_any(), workflow_type], &suffix, MAX_NAME)
        }
        Some(w) => {
            let w = format!("w{w}");
            let suffix = short_hash(&[&identity, workflow_type, &w]);
            bounded_name(&[&group.name_any(), workflow_type, &w], &suffix, MAX_NAME)
        }
    }
}

/// The deterministic name of the pod for `attempt` of `step` in `workflow` (at most 63
/// characters, so that it also fits in a label value).
pub fn pod_name(workflow: &Workflow, step: &str, attempt: u32) -> String {
    let uid = workflow.uid().unwrap_or_default();
    // From the group's second run on, the run too: `<attempt>-r<run>-<hash>`.
    let suffix = match run_of(workflow) {
        1 => format!("{attempt}-{}", short_hash(&[&uid, step])),
        run => format!("{attempt}-r{run}-{}", short_hash(&[&uid, step])),
    };
    bounded_name(&[&workflow.name_any(), step], &suffix, 63)
}

/// The names of the pods `workflow`'s steps may have: one per attempt its status records, and
/// the next.
pub fn step_pod_names(workflow: &Workflow) -> impl Iterator<Item = String> + '_ {
    let details = workflow.status.as_ref().map(|s| &s.step_details);
    workflow.spec.steps.iter().flat_map(move |step| {
        let known = details
            .and_then(|d| d.get(&step.name))
            .map_or(0, |d| d.attempts);
        (1..=known.saturating_add(1)).map(move |attempt| pod_name(workflow, &step.name, attempt))
    })
}

/// The name of the ConfigMap holding `workflow`'s targets (its step pods mount it).
pub fn targets_config_map_name(workflow: &Workflow) -> String {
    format!("{}-targets", workflow.name_any())
}

/// The name of the Lease locking `key`: `wfl-` and 24 hex digits of its sha256.
pub fn lease_name(kind: &str, key: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(kind.as_bytes());
    hasher.update([0]);
    hasher.update(key.as_bytes());
    format!("wfl-{}", &hex::encode(hasher.finalize())[..24])
}

/// The name of `user`'s Approval of `step` of `workflow` in `run`: one per user, step and run.
pub fn approval_name(workflow: &str, step: &str, run: u32, user: &str) -> String {
    let hash = hex::encode(Sha256::digest(user.as_bytes()));
    let prefix: String = format!("{workflow}-{step}").chars().take(220).collect();
    format!("{prefix}-r{run}-{}", &hash[..10])
}

/// `parts` joined by `-`, shortened so that with `-suffix` the result has at most `max`
/// characters and still ends in a letter or digit before the suffix.
pub fn bounded_name(parts: &[&str], suffix: &str, max: usize) -> String {
    let base = parts.join("-");
    let room = max.saturating_sub(suffix.len() + 1);
    let base = text::prefix(&base, room).trim_end_matches(['-', '.']);
    format!("{base}-{suffix}")
}

/// First 8 hex digits of the sha256 of `parts` (separated so that ("ab","c") != ("a","bc")).
pub fn short_hash(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hex::encode(&hasher.finalize()[..4])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_to_63_characters_and_keep_their_suffix() {
        let name = bounded_name(&[&"g".repeat(70), "pre-check"], "0123abcd", 63);
        assert_eq!(name.len(), 63);
        assert!(name.ends_with("-0123abcd"));
        assert_eq!(bounded_name(&["a", "b"], "1", 5), "a-b-1");
        assert_eq!(bounded_name(&["abc-", "d"], "1", 6), "abc-1");
    }

    #[test]
    fn workflow_names_differ_per_type_and_per_group_uid() {
        let mut group: WorkflowGroup =
            serde_saphyr::from_str(include_str!("../../examples/workflowgroup-sample.yaml"))
                .unwrap();
        let unsaved = workflow_name(&group, "pre-check");
        assert!(unsaved.starts_with("workflowgroup-sample-pre-check-"));
        assert_ne!(unsaved, workflow_name(&group, "setup"));
        group.metadata.uid = Some("451dd666-07dd-4697-9e43-9eee393e0453".into());
        let saved = workflow_name(&group, "pre-check");
        assert_ne!(unsaved, saved);
        assert_eq!(saved, workflow_name(&group, "pre-check"));
    }
}

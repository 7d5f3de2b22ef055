//! Waves over the targets, the units a group runs (a type in a wave), the failure budget, and
//! what is wrong with a spec itself.

use super::*;
use crate::api::FieldError;

/// One Workflow of a group: a workflow type, in a wave when the group rolls out in waves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit<'a> {
    pub type_: String,
    /// Its wave (from 1), with `spec.rollout`.
    pub wave: Option<u32>,
    /// The targets it acts on: the group's, or its wave's (borrowed from the group).
    pub targets: &'a [Target],
}

impl Unit<'_> {
    /// How the plan's observed Workflows are keyed: the type, and `#wave` in a rollout.
    pub fn key(&self) -> String {
        unit_key(&self.type_, self.wave)
    }
}

/// The key of the Workflow of `type_` in `wave`.
pub fn unit_key(type_: &str, wave: Option<u32>) -> String {
    match wave {
        None => type_.to_string(),
        Some(w) => format!("{type_}#{w}"),
    }
}

/// `value` of `total`: a number, or a percentage of `total` rounded up or down.
pub(super) fn scaled(
    value: &IntOrString,
    total: usize,
    round_up: bool,
    field: &'static str,
) -> Result<usize, FieldError> {
    let refused = |problem: String| FieldError { field, problem };
    match value {
        IntOrString::Int(n) => usize::try_from(*n).map_err(|_| refused(format!("{n} is negative"))),
        IntOrString::String(text) => {
            let percent = text
                .trim()
                .strip_suffix('%')
                .and_then(|p| p.trim().parse::<u32>().ok())
                .filter(|p| *p <= 100)
                .ok_or_else(|| {
                    refused(format!(
                        "{text:?} is neither a number nor a percentage like \"25%\""
                    ))
                })?;
            let scaled = total * percent as usize;
            Ok(if round_up {
                scaled.div_ceil(100)
            } else {
                scaled / 100
            })
        }
    }
}

/// The group's targets in waves: `spec.rollout.waveSize` at a time, or one wave of all.
/// Slices of the group's own list: a reconcile asks for them, and copying thousands of
/// targets each time would cost for nothing.
///
/// # Errors
/// The wave size is not a positive number or a percentage.
pub fn waves(group: &WorkflowGroup) -> Result<Vec<&[Target]>, FieldError> {
    let targets = group.spec.targets.as_slice();
    let Some(rollout) = &group.spec.rollout else {
        return Ok(vec![targets]);
    };
    let size = scaled(
        &rollout.wave_size,
        targets.len(),
        true,
        "spec.rollout.waveSize",
    )?;
    if size == 0 && !matches!(rollout.wave_size, IntOrString::String(_)) {
        return Err(FieldError {
            field: "spec.rollout.waveSize",
            problem: "0 targets per wave; give at least 1".into(),
        });
    }
    if targets.is_empty() {
        return Ok(vec![targets]);
    }
    Ok(targets.chunks(size.max(1)).collect())
}

/// How many failed targets the rollout tolerates.
pub(super) fn failure_budget(group: &WorkflowGroup) -> Result<usize, FieldError> {
    let total = group.spec.targets.len();
    match group
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.max_failed_targets.as_ref())
    {
        None => Ok(0),
        Some(value) => scaled(value, total, false, "spec.rollout.maxFailedTargets"),
    }
}

/// The Workflows of `group`, in the order they run: each type in turn, wave after wave.
pub fn units(group: &WorkflowGroup) -> Vec<Unit<'_>> {
    let rollout = group.spec.rollout.is_some();
    let waves = waves(group).unwrap_or_default();
    waves
        .into_iter()
        .enumerate()
        .flat_map(|(i, targets)| {
            let wave = rollout.then(|| u32::try_from(i + 1).unwrap_or(u32::MAX));
            group.spec.workflow_steps.iter().map(move |t| Unit {
                type_: t.clone(),
                wave,
                targets,
            })
        })
        .collect()
}

/// The targets `group` waits for or acts on now: its current wave's (all of them without
/// `spec.rollout`). Other groups read it to serve waiting groups in order.
pub fn current_targets(group: &WorkflowGroup) -> &[Target] {
    let waves = waves(group).unwrap_or_default();
    let finished = group
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .map_or(0, |r| {
            r.waves.iter().filter(|w| w.phase.is_finished()).count()
        });
    waves.into_iter().nth(finished).unwrap_or_default()
}

/// A rollout's failure budget, counted wave by wave.
pub(super) struct Budget {
    /// Most failed targets allowed (`spec.rollout.maxFailedTargets`).
    pub(super) allowed: usize,
    /// The failed targets so far (name, why).
    pub(super) failed: BTreeMap<String, String>,
    /// How many of them were accepted when the group was resumed after a pause.
    pub(super) accepted: usize,
}

/// The failure budget exceeded after wave `wave`: by how many targets, and the message.
pub(super) struct OverBudget {
    pub(super) wave: u32,
    pub(super) message: String,
}

impl Budget {
    pub(super) fn of(group: &WorkflowGroup) -> Self {
        Self {
            allowed: failure_budget(group).unwrap_or(0),
            failed: BTreeMap::new(),
            accepted: 0,
        }
    }

    /// Counts wave `wave`'s failed targets; `Some` when they exceed the budget.
    pub(super) fn after_wave(
        &mut self,
        group: &WorkflowGroup,
        wave: u32,
        failed: BTreeMap<String, String>,
    ) -> Option<OverBudget> {
        self.failed.extend(failed);
        let old = group.status.as_ref().and_then(|s| s.rollout.as_ref());
        if old.and_then(|r| r.paused_after_wave) == Some(wave) && !group.spec.paused {
            // Resumed after this wave: its failures and those before are accepted.
            self.accepted = self.failed.len();
        }
        let counted = self.failed.len() - self.accepted;
        (counted > self.allowed).then(|| OverBudget {
            wave,
            message: format!(
                "{counted} target{} failed, more than spec.rollout.maxFailedTargets allows ({}): {}",
                if counted == 1 { "" } else { "s" },
                self.allowed,
                failure_list(&self.failed),
            ),
        })
    }

    /// What the group says when every wave finished within the budget.
    pub(super) fn completed_message(&self, group: &WorkflowGroup, waves: usize) -> String {
        if group.spec.rollout.is_none() {
            return format!(
                "all {} workflows completed",
                group.spec.workflow_steps.len()
            );
        }
        if self.failed.is_empty() {
            return format!("all {waves} waves completed");
        }
        format!(
            "all {waves} waves finished; {} of {} targets failed, {}: {}",
            self.failed.len(),
            group.spec.targets.len(),
            if self.accepted > 0 {
                "accepted when spec.paused was cleared"
            } else {
                "within the failure budget"
            },
            failure_list(&self.failed)
        )
    }
}

/// `node-3 (setup: exit code 1), …`, at most five.
pub(super) fn failure_list(failed: &BTreeMap<String, String>) -> String {
    const SHOWN: usize = 5;
    let mut out: Vec<String> = failed
        .iter()
        .take(SHOWN)
        .map(|(name, why)| format!("{name} ({why})"))
        .collect();
    if failed.len() > SHOWN {
        out.push(format!("and {} more", failed.len() - SHOWN));
    }
    out.join(", ")
}

/// Failed targets a wave lists in the status (the count is kept whole).
pub(super) const MAX_LISTED_FAILURES: usize = 20;

/// What is wrong with the group's spec itself, if anything.
pub fn spec_problem(group: &WorkflowGroup) -> Option<String> {
    let types = &group.spec.workflow_steps;
    if types.is_empty() {
        return Some("spec.workflowSteps is empty: list at least one workflow type".into());
    }
    if let Some(refused) = group.spec.words_problem() {
        return Some(refused.to_string());
    }
    let mut seen = BTreeSet::new();
    for t in types {
        if !seen.insert(t) {
            return Some(format!(
                "spec.workflowSteps: workflow type {t:?} is listed twice"
            ));
        }
    }
    if let Some(k) = group.spec.params.keys().find(|k| !seen.contains(k)) {
        return Some(format!(
            "spec.params.{k}: {k:?} is not one of spec.workflowSteps"
        ));
    }
    if let Some(drain) = &group.spec.drain
        && let Some(t) = drain.types.iter().find(|t| !seen.contains(t))
    {
        return Some(format!(
            "spec.drain.types: {t:?} is not one of spec.workflowSteps"
        ));
    }
    if let Some(selector) = &group.spec.target_selector {
        if !group.spec.targets.is_empty()
            && group
                .status
                .as_ref()
                .is_none_or(|s| s.targets != group.spec.targets)
        {
            return Some("spec.targets and spec.targetSelector are both set: give the targets, or the selector of the Nodes to act on".into());
        }
        if let Err(e) = selector.selector() {
            return Some(e.to_string());
        }
    }
    let wrong = waves(group)
        .err()
        .or_else(|| failure_budget(group).err())
        .or_else(|| group.spec.rollout.as_ref()?.timing_problem());
    wrong.map(|e| e.to_string())
}

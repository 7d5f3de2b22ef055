//! What the WorkflowGroup controller decides, as pure functions of the group, its observed
//! Workflows and what its plugins answer: tested without a cluster.
//!
//! [`plan_group`] is a fold: how the group sees each Workflow ([`ObservedWorkflow`]), which
//! plugins must answer first, then the waves in order ([`rollout`]), one decision per unit,
//! until a unit acts or every wave is counted against the failure budget. The shell carries
//! out the plan's create or re-run and hands back what became of it ([`attempt`]); re-runs of
//! a finished group are in [`rerun`]; [`planner`] builds the status and events.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::window::{self, Opening};
use crate::api::{
    ANNOTATION_REQUESTED_BY, ANNOTATION_RERUN, BudgetPolicy, ConditionStatus, IntOrString,
    MAX_LISTED_PAUSES, MAX_LISTED_RUNS, MAX_REMEMBERED_RERUN_IDS, PauseRecord, Phase, RerunFrom,
    RerunRequest, RerunTargets, RolloutStatus, RunStatus, Target, WaveStatus, Workflow,
    WorkflowGroup, WorkflowGroupStatus, WorkflowReference, WorkflowRerun, rerun_id_digest,
};
use crate::controllers::reason;
use crate::controllers::status::{
    Transition, derive_kstatus_conditions, set_succeeded, succeeded, succeeded_condition,
};
use crate::plugin::PluginError;
use crate::render::RenderError;

mod attempt;
mod observed;
mod planner;
mod rerun;
mod rollout;

pub use self::attempt::{Attempt, LockWish, after_attempt, lock_wish, waiting_for};
pub use self::observed::{LockTurn, ObservedWorkflow, TOLD_REASONS};
use self::planner::Planner;
pub use self::rerun::{current_run, rerun_request, workflow_rerun};
use self::rerun::{note_pause, start_rerun};
use self::rollout::{Budget, MAX_LISTED_FAILURES, OverBudget, failure_list};
pub use self::rollout::{Unit, current_targets, spec_problem, unit_key, units, waves};

/// What the registry says about a workflow type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginState {
    /// No plugin of this type is loaded.
    Missing,
    /// Loaded; the group's params for it are valid, or why not.
    Loaded(Result<(), PluginError>),
}

/// How the plan asks about the group's plugins. The reconcile answers from the registry;
/// tests answer with fixed values.
pub trait GroupPlugins {
    /// Whether a plugin of `type_name` is loaded and accepts the group's params for it.
    fn check(&self, type_name: &str) -> PluginState;
    /// Why no plugin of `type_name` is loaded, when a plugin file named for it has a problem
    /// (a pull from a registry under way or failing, a broken file).
    fn why_missing(&self, _type_name: &str) -> Option<String> {
        None
    }
    /// The Workflow of `unit` for the group, templated by its plugin.
    fn render(&self, unit: &Unit<'_>) -> Result<Workflow, RenderError>;
}

/// What the WorkflowGroup controller decided for one reconcile.
#[derive(Debug, Default)]
pub struct GroupPlan {
    /// The status to write.
    pub status: WorkflowGroupStatus,
    /// The Workflow to create now (already listed in `status.workflows`).
    pub create: Option<Workflow>,
    /// Events to publish.
    pub events: Vec<Transition>,
    /// A plugin could not answer now: the reconcile is retried with backoff.
    pub unavailable: Option<PluginError>,
    /// The group acts on its (current wave's) targets, or is about to: it keeps its locks.
    /// False before it starts, between waves and once finished: it gives them back.
    pub keep_locks: bool,
    /// Its rollout exceeded its failure budget and pauses: the operator sets `spec.paused`.
    pub pause: bool,
    /// A Workflow of an earlier run to run again now (its turn came in a re-run).
    pub rerun: Option<RerunPatch>,
    /// When to look again though nothing changes: the next wave's window opens, or its rest
    /// after the last wave ends.
    pub requeue_after: Option<std::time::Duration>,
}

/// A Workflow to run again: its `spec.rerun`, and the targets it acts on (locked first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RerunPatch {
    pub workflow: String,
    pub rerun: WorkflowRerun,
    pub targets: Vec<Target>,
}

/// Decides what to do with `group`, given its Workflows (by [`Unit::key`]) and its plugins.
/// Plugins are asked only about the types due now (a params check is a sandboxed plugin call,
/// so a running group does not pay for it on every reconcile).
pub fn plan_group(
    group: &WorkflowGroup,
    workflows: &BTreeMap<String, ObservedWorkflow>,
    plugins: &dyn GroupPlugins,
    now: Timestamp,
) -> GroupPlan {
    let old = group.status.clone().unwrap_or_default();
    if old.phase.is_some_and(Phase::is_finished) {
        return plan_finished(group, old, now);
    }
    let mut plan = Planner::new(group, &old, now);
    // A group that has begun keeps its locks whatever it waits for now (a plugin that cannot
    // answer, a spec made invalid): another group must not act on its targets half-way
    // through. Only the end and the boundaries between waves give them back.
    plan.keep_locks = !old.workflows.is_empty();
    if let Some(problem) = spec_problem(group) {
        return plan.wait(reason::INVALID_SPEC, problem);
    }
    let units = units(group);
    let seen = seen(&old, workflows);
    plan.status.workflows = units
        .iter()
        .filter_map(|u| {
            seen.get(&u.key()).map(|(w, phase, _)| WorkflowReference {
                name: w.name.clone(),
                type_: u.type_.clone(),
                status: *phase,
                wave: u.wave,
            })
        })
        .collect();
    plan.update_progress();
    match plan.check_plugins(&due(group, &units, &seen), plugins) {
        ControlFlow::Continue(plan) => plan_waves(plan, &seen, plugins),
        ControlFlow::Break(finished) => finished,
    }
}

/// The plan for a finished group: a re-run asked for starts; otherwise nothing moves, but an
/// edit of the spec is acknowledged (GitOps tools read a generation not yet observed as a
/// change in progress), and a group that finished before the conditions GitOps tools read
/// existed gets them.
fn plan_finished(group: &WorkflowGroup, old: WorkflowGroupStatus, now: Timestamp) -> GroupPlan {
    if let Some(request) = rerun_request(group, &old) {
        return start_rerun(group, &old, request, now);
    }
    let mut status = old;
    status.observed_generation = group.metadata.generation;
    for condition in &mut status.conditions {
        condition.observed_generation = group.metadata.generation;
    }
    derive_kstatus_conditions(&mut status.conditions);
    GroupPlan {
        status,
        ..GroupPlan::default()
    }
}

/// A Workflow as the group sees it in this reconcile: the Workflow, its phase in the group's
/// eyes, and what it runs again now that its turn came in a re-run.
type Seen<'a> = (&'a ObservedWorkflow, Phase, Option<WorkflowRerun>);

/// The group's Workflows as it sees them, by unit key.
///
/// A Workflow the group created is Running in the group's eyes until its own controller says
/// otherwise (Pending while it waits for a schedule or a plugin), so that its controller
/// starting it costs the group no status write. In a re-run, a Workflow of an earlier run is
/// run again when its turn comes, or kept as it was; one asked and not yet started again is
/// Running; a deleted one that the re-run would run again is made anew instead.
fn seen<'a>(
    old: &WorkflowGroupStatus,
    workflows: &'a BTreeMap<String, ObservedWorkflow>,
) -> BTreeMap<&'a String, Seen<'a>> {
    let recorded = |name: &str| {
        old.workflows
            .iter()
            .find(|w| w.name == name)
            .map(|w| w.status)
    };
    let run = old.runs.last().filter(|r| r.run > 1);
    workflows
        .iter()
        .filter_map(|(t, w)| {
            let phase = w
                .phase
                .or_else(|| recorded(&w.name))
                .unwrap_or(Phase::Running);
            let seen = match run {
                Some(run) if w.asked_run < run.run => match workflow_rerun(run, &w.type_, phase) {
                    Some(_) if w.deleted => return None,
                    Some(rerun) => (w, Phase::Pending, Some(rerun)),
                    None => (w, phase, None),
                },
                _ if w.run < w.asked_run => (w, Phase::Running, None),
                _ => (w, phase, None),
            };
            Some((t, seen))
        })
        .collect()
}

/// The types whose plugins must answer before the group goes on. Before anything starts,
/// every type: don't begin what cannot finish. Once started, the next type when its turn
/// comes.
fn due<'a>(
    group: &'a WorkflowGroup,
    units: &'a [Unit<'_>],
    seen: &BTreeMap<&String, Seen<'_>>,
) -> Vec<&'a String> {
    if seen.is_empty() {
        return group.spec.workflow_steps.iter().collect();
    }
    if !seen.values().all(|(_, p, _)| p.is_finished()) {
        return Vec::new();
    }
    units
        .iter()
        .find(|u| !seen.contains_key(&u.key()))
        .map(|u| &u.type_)
        .into_iter()
        .collect()
}

/// What one Workflow of a wave says to the group.
enum UnitMove<'a> {
    /// It completed: the wave goes on with the next type.
    Completed(&'a ObservedWorkflow),
    /// It failed: the wave stops (without a rollout, the group fails).
    Failed(&'a ObservedWorkflow),
    /// The group acts on it, or waits for it, and goes no further this time.
    Act(Act<'a>),
}

/// What the group does about the Workflow whose turn it is.
enum Act<'a> {
    /// Its turn came in a re-run: ask it to run again.
    RunAgain(&'a ObservedWorkflow, &'a WorkflowRerun),
    /// It runs, or is pending: wait for it.
    Wait(&'a ObservedWorkflow, Phase),
    /// Not made yet, and the group is paused.
    Paused,
    /// Not made yet: make it.
    Create,
}

/// One decision per unit (a type in a wave), from how the group sees its Workflow.
fn decide_unit<'a>(seen: Option<&'a Seen<'a>>, paused: bool) -> UnitMove<'a> {
    match seen {
        Some((w, _, Some(rerun))) => UnitMove::Act(Act::RunAgain(w, rerun)),
        Some((w, Phase::Completed, _)) => UnitMove::Completed(w),
        Some((w, Phase::Failed, _)) => UnitMove::Failed(w),
        Some((w, phase, _)) => UnitMove::Act(Act::Wait(w, *phase)),
        None if paused => UnitMove::Act(Act::Paused),
        None => UnitMove::Act(Act::Create),
    }
}

/// How far a wave got: its phase so far, its failed targets (name, why), whether any of its
/// Workflows ran.
struct WaveProgress {
    phase: Phase,
    failed: BTreeMap<String, String>,
    started: bool,
}

/// The waves in order (one wave of every target without a rollout), each type in turn: the
/// first unit that acts ends the plan; each finished wave is counted against the budget.
fn plan_waves(
    mut plan: Planner<'_>,
    seen: &BTreeMap<&String, Seen<'_>>,
    plugins: &dyn GroupPlugins,
) -> GroupPlan {
    let group = plan.group;
    let rollout = group.spec.rollout.as_ref();
    let waves = waves(group).unwrap_or_default();
    let mut budget = Budget::of(group);
    for (i, targets) in waves.iter().copied().enumerate() {
        let wave = rollout.map(|_| u32::try_from(i + 1).unwrap_or(u32::MAX));
        let mut progress = WaveProgress {
            phase: Phase::Completed,
            failed: BTreeMap::new(),
            started: false,
        };
        for t in &group.spec.workflow_steps {
            let unit = Unit {
                type_: t.clone(),
                wave,
                targets,
            };
            match decide_unit(seen.get(&unit.key()), group.spec.paused) {
                UnitMove::Completed(w) => {
                    // Kept from an earlier run, it did not start the wave in this one.
                    progress.started |= w.run.max(w.asked_run) >= plan.run;
                    progress.failed.extend(w.failed_targets.clone());
                }
                UnitMove::Failed(w) => {
                    let message = format!("workflow {} ({t}) failed: {}", w.name, w.message);
                    if rollout.is_none() {
                        return plan.finish(Phase::Failed, reason::WORKFLOW_FAILED, message);
                    }
                    progress.phase = Phase::Failed;
                    if w.failed_targets.is_empty() {
                        // No target named: the whole wave failed with it.
                        progress
                            .failed
                            .extend(targets.iter().map(|x| (x.name.clone(), message.clone())));
                    } else {
                        progress.failed.extend(w.failed_targets.clone());
                    }
                    break;
                }
                // The first Workflow of a wave in this run, made or run again: the wave starts
                // only after its rest and inside its window, in a re-run too.
                UnitMove::Act(act @ (Act::Create | Act::RunAgain(..))) if !progress.started => {
                    let finished = plan.status.rollout.as_ref().map(|r| r.waves.as_slice());
                    if let Some(hold) =
                        wave_hold(group, wave, finished.unwrap_or_default(), plan.now)
                    {
                        return plan.hold(hold);
                    }
                    return plan.act(&unit, act, &progress, waves.len(), plugins);
                }
                UnitMove::Act(act) => {
                    return plan.act(&unit, act, &progress, waves.len(), plugins);
                }
            }
        }
        let Some(wave) = wave else {
            continue;
        };
        plan.record_wave(Some(wave), progress.phase, targets, &progress.failed);
        if let Some(over) = budget.after_wave(group, wave, progress.failed) {
            plan.count_failed(budget.failed.len());
            return plan.over_budget(over, i + 1 == waves.len());
        }
        plan.count_failed(budget.failed.len());
    }
    let message = budget.completed_message(group, waves.len());
    plan.finish(Phase::Completed, reason::COMPLETED, message)
}

/// Why the wave that would start now waits, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WaveHold {
    pub(super) reason: &'static str,
    pub(super) message: String,
    pub(super) until: Timestamp,
}

/// The shortest and longest wait before a held wave is looked at again: a window months away
/// is looked at hourly (the zone's rules or the spec may change meanwhile).
const MIN_HOLD_RECHECK: std::time::Duration = std::time::Duration::from_millis(200);
const MAX_HOLD_RECHECK: std::time::Duration = std::time::Duration::from_secs(3600);

/// Whether `wave` (of a rollout) may start at `now`: first its rest after the wave before it
/// (`pauseBetweenWaves`, from when the group saw that wave finish, in `finished`), then its
/// window. A spec that cannot be read holds nothing here: the plan stopped before, naming it.
fn wave_hold(
    group: &WorkflowGroup,
    wave: Option<u32>,
    finished: &[WaveStatus],
    now: Timestamp,
) -> Option<WaveHold> {
    let (rollout, wave) = (group.spec.rollout.as_ref()?, wave?);
    let pause = rollout
        .pause_between_waves
        .as_deref()
        .and_then(|p| window::pause_between_waves(p).ok());
    let before = finished
        .iter()
        .find(|w| w.wave + 1 == wave)
        .and_then(|w| w.finished_at.as_ref());
    if let (Some(pause), Some(before)) = (pause, before) {
        let until = before.0.checked_add(pause).unwrap_or(before.0);
        if now < until {
            let text = rollout.pause_between_waves.as_deref().unwrap_or_default();
            return Some(WaveHold {
                reason: reason::WAITING_BETWEEN_WAVES,
                message: format!(
                    "wave {wave} starts at {until}, {text} after wave {} finished (spec.rollout.pauseBetweenWaves)",
                    wave - 1
                ),
                until,
            });
        }
    }
    let window = rollout.window.as_ref()?;
    let schedule = window.schedule().ok()?;
    match schedule.at(now) {
        Opening::Open { .. } => None,
        Opening::Closed { opens } => Some(WaveHold {
            reason: reason::WAITING_FOR_WINDOW,
            message: format!(
                "wave {wave} waits for its maintenance window: it opens at {opens} ({}; spec.rollout.window)",
                window.shown()
            ),
            until: opens,
        }),
    }
}

#[cfg(test)]
mod tests {
    use crate::api::MaintenanceWindow;
    use std::time::Duration;

    use super::rerun::remember_rerun_ids;
    use super::rollout::failure_budget;
    use super::*;
    use crate::api::WorkflowSpec;
    use crate::controllers::status::kstatus_conditions;

    fn sample() -> WorkflowGroup {
        let mut group: WorkflowGroup = serde_saphyr::from_str(include_str!(
            "../../../../../examples/workflowgroup-sample.yaml"
        ))
        .unwrap();
        group.metadata.uid = Some("uid-g".into());
        group.metadata.generation = Some(1);
        group
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    /// Plugins that answer from a table; `template` renders a Workflow named `wf-<type>` or
    /// fails with `template_error`.
    struct Plugins {
        states: BTreeMap<String, PluginState>,
        template_error: Option<PluginError>,
        /// Why a missing type is missing, by type.
        why: BTreeMap<String, String>,
    }

    impl GroupPlugins for Plugins {
        fn check(&self, type_name: &str) -> PluginState {
            self.states
                .get(type_name)
                .cloned()
                .unwrap_or(PluginState::Missing)
        }
        fn why_missing(&self, type_name: &str) -> Option<String> {
            self.why.get(type_name).cloned()
        }
        fn render(&self, unit: &Unit<'_>) -> Result<Workflow, RenderError> {
            if let Some(e) = &self.template_error {
                return Err(RenderError::Plugin(e.clone()));
            }
            Ok(Workflow::new(
                &format!("wf-{}", unit.key()),
                WorkflowSpec {
                    type_: unit.type_.clone(),
                    targets: unit.targets.to_vec(),
                    ..WorkflowSpec::default()
                },
            ))
        }
    }

    fn all_loaded() -> Plugins {
        Plugins {
            states: ["pre-check", "setup", "post-check"]
                .into_iter()
                .map(|t| (t.to_string(), PluginState::Loaded(Ok(()))))
                .collect(),
            template_error: None,
            why: BTreeMap::new(),
        }
    }

    fn with(t: &str, state: PluginState) -> Plugins {
        let mut plugins = all_loaded();
        plugins.states.insert(t.into(), state);
        plugins
    }

    fn observed(entries: &[(&str, Phase)]) -> BTreeMap<String, ObservedWorkflow> {
        entries
            .iter()
            .map(|(t, p)| {
                (
                    t.to_string(),
                    ObservedWorkflow {
                        name: format!("wf-{t}"),
                        type_: t.split('#').next().unwrap_or_default().to_string(),
                        run: 1,
                        asked_run: 1,
                        phase: Some(*p),
                        reason: String::new(),
                        message: "step x failed: boom".into(),
                        failed_targets: BTreeMap::new(),
                        deleted: false,
                        locks: LockTurn::default(),
                    },
                )
            })
            .collect()
    }

    /// The sample with six targets, rolled out `size` at a time with `budget` failures allowed.
    fn rollout(size: i32, budget: i32, policy: BudgetPolicy) -> WorkflowGroup {
        let mut group = sample();
        group.spec.targets = (1..=6)
            .map(|i| Target {
                name: format!("node-{i}"),
                ip: format!("10.0.0.{i}"),
                role: String::new(),
            })
            .collect();
        group.spec.rollout = Some(crate::api::Rollout {
            wave_size: IntOrString::Int(size),
            max_failed_targets: Some(IntOrString::Int(budget)),
            on_budget_exceeded: policy,
            pause_between_waves: None,
            window: None,
            health_gate: None,
        });
        group
    }

    /// Every unit up to (not including) wave `upto` Completed; keyed as the reconcile keys them.
    fn waves_completed(group: &WorkflowGroup, upto: u32) -> BTreeMap<String, ObservedWorkflow> {
        units(group)
            .into_iter()
            .filter(|u| u.wave.is_some_and(|w| w < upto))
            .map(|u| {
                let key = u.key();
                let w = ObservedWorkflow {
                    name: format!("wf-{key}"),
                    type_: u.type_.clone(),
                    run: 1,
                    asked_run: 1,
                    phase: Some(Phase::Completed),
                    reason: String::new(),
                    message: String::new(),
                    failed_targets: BTreeMap::new(),
                    deleted: false,
                    locks: LockTurn::default(),
                };
                (key, w)
            })
            .collect()
    }

    /// `group` with the status `plan` would write.
    fn after(group: &WorkflowGroup, plan: &GroupPlan) -> WorkflowGroup {
        let mut group = group.clone();
        group.status = Some(plan.status.clone());
        group
    }

    #[test]
    fn waves_split_the_targets_and_each_runs_every_type_in_turn() {
        let group = rollout(2, 0, BudgetPolicy::Fail);
        assert_eq!(waves(&group).unwrap().len(), 3);
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        let created = plan.create.as_ref().expect("the first wave's first type");
        assert_eq!(created.spec.type_, "pre-check");
        let names: Vec<&str> = created
            .spec
            .targets
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names, ["node-1", "node-2"]);
        assert!(plan.keep_locks);
        let rollout = plan.status.rollout.as_ref().unwrap();
        assert_eq!(rollout.progress, "0/3");
        assert_eq!(rollout.waves[0].phase, Phase::Running);
        assert_eq!(plan.status.workflows[0].wave, Some(1));

        // Wave 1 done: wave 2's first type, on the next two targets.
        let group = after(&group, &plan);
        let plan = plan_group(&group, &waves_completed(&group, 2), &all_loaded(), now());
        let created = plan.create.as_ref().unwrap();
        assert_eq!(created.name_any(), "wf-pre-check#2");
        assert_eq!(created.spec.targets[0].name, "node-3");
        let rollout = plan.status.rollout.as_ref().unwrap();
        assert_eq!(rollout.progress, "1/3");
        assert_eq!(rollout.waves[0].phase, Phase::Completed);
        assert!(
            plan.events
                .iter()
                .any(|e| e.reason == reason::WAVE_COMPLETED)
        );

        // Percentages round up: 34% of 6 is 3 targets a wave.
        let mut group = group;
        group.spec.rollout.as_mut().unwrap().wave_size = IntOrString::String("34%".into());
        assert_eq!(waves(&group).unwrap().len(), 2);
    }

    #[test]
    fn a_wave_beyond_the_failure_budget_fails_the_group_and_no_new_wave_starts() {
        let group = rollout(2, 0, BudgetPolicy::Fail);
        let mut workflows = waves_completed(&group, 2);
        let mut setup = workflows["setup#1"].clone();
        setup.phase = Some(Phase::Failed);
        setup.failed_targets =
            BTreeMap::from([("node-2".into(), "install-packages: exit code 100".into())]);
        workflows.insert("setup#1".into(), setup);
        workflows.remove("post-check#1");
        let plan = plan_group(&group, &workflows, &all_loaded(), now());
        assert!(plan.create.is_none());
        assert!(!plan.keep_locks, "locks go back with the end");
        assert_eq!(plan.status.phase, Some(Phase::Failed));
        let (status, why, message) = condition(&plan);
        assert_eq!((status, why), ("False", reason::FAILURE_BUDGET_EXCEEDED));
        assert!(
            message.contains("node-2 (install-packages: exit code 100)"),
            "{message}"
        );
        let rollout = plan.status.rollout.as_ref().unwrap();
        assert_eq!(rollout.failed_targets, 1);
        assert_eq!(rollout.waves[0].phase, Phase::Failed);
        assert_eq!(
            rollout.waves[0].failed,
            ["node-2: install-packages: exit code 100"]
        );

        // Within a budget of 1, the next wave starts instead.
        let mut lenient = group.clone();
        lenient.spec.rollout.as_mut().unwrap().max_failed_targets = Some(IntOrString::Int(1));
        let plan = plan_group(&lenient, &workflows, &all_loaded(), now());
        assert_eq!(plan.create.as_ref().unwrap().name_any(), "wf-pre-check#2");
    }

    #[test]
    fn a_paused_rollout_resumes_when_spec_paused_is_cleared() {
        let group = rollout(2, 0, BudgetPolicy::Pause);
        let mut workflows = waves_completed(&group, 2);
        let mut post = workflows["post-check#1"].clone();
        post.failed_targets =
            BTreeMap::from([("node-1".into(), "verify-installation: files missing".into())]);
        workflows.insert("post-check#1".into(), post);
        let plan = plan_group(&group, &workflows, &all_loaded(), now());
        assert!(plan.pause, "the operator sets spec.paused");
        assert!(plan.create.is_none());
        let (status, why, message) = condition(&plan);
        assert_eq!((status, why), ("Unknown", reason::FAILURE_BUDGET_EXCEEDED));
        assert!(message.contains("clear spec.paused"), "{message}");
        assert_eq!(
            plan.status.rollout.as_ref().unwrap().paused_after_wave,
            Some(1)
        );

        // Paused (as the operator set it): still waiting, nothing to set again; run 1 lists
        // the pause as the budget's.
        let mut paused = after(&group, &plan);
        paused.spec.paused = true;
        let plan = plan_group(&paused, &workflows, &all_loaded(), now());
        assert!(!plan.pause && plan.create.is_none());
        let pauses = &plan.status.runs.last().expect("run 1").pauses;
        assert_eq!(
            pauses[0].paused_by.as_deref(),
            Some("spec.rollout.onBudgetExceeded")
        );
        // Cleared: the failures so far are accepted and wave 2 starts; the run records who.
        let mut resumed = after(&paused, &plan);
        resumed.spec.paused = false;
        resumed
            .annotations_mut()
            .insert(ANNOTATION_REQUESTED_BY.into(), "alice".into());
        let plan = plan_group(&resumed, &workflows, &all_loaded(), now());
        assert_eq!(plan.create.as_ref().unwrap().name_any(), "wf-pre-check#2");
        let pause = &plan.status.runs.last().expect("run 1").pauses[0];
        assert_eq!(pause.resumed_by.as_deref(), Some("alice"));
        assert!(pause.resumed_at.is_some());
    }

    #[test]
    fn the_rollout_example_runs_three_waves_of_two() {
        let group: WorkflowGroup = serde_saphyr::from_str(include_str!(
            "../../../../../examples/workflowgroup-rollout.yaml"
        ))
        .unwrap();
        let waves = waves(&group).unwrap();
        assert_eq!(waves.iter().map(|w| w.len()).collect::<Vec<_>>(), [2, 2, 2]);
        assert_eq!(failure_budget(&group), Ok(1));
        assert_eq!(
            group.spec.rollout.map(|r| r.on_budget_exceeded),
            Some(BudgetPolicy::Pause)
        );
        assert_eq!(
            units(&sample()).len(),
            3,
            "without a rollout, one Workflow per type"
        );
    }

    #[test]
    fn the_maintenance_example_waits_for_a_weekday_night_in_berlin() {
        let mut group: WorkflowGroup = serde_saphyr::from_str(include_str!(
            "../../../../../examples/workflowgroup-maintenance.yaml"
        ))
        .unwrap();
        group.metadata.uid = Some("uid-m".into());
        let loaded = Plugins {
            states: ["pre-check", "post-check"]
                .into_iter()
                .map(|t| (t.to_string(), PluginState::Loaded(Ok(()))))
                .collect(),
            template_error: None,
            why: BTreeMap::new(),
        };
        // now() is Friday 2027-01-15, 09:00 in Berlin: the next window is Monday's, at 22:00
        // there (21:00 UTC in winter).
        let plan = plan_group(&group, &BTreeMap::new(), &loaded, now());
        let (_, why, message) = condition(&plan);
        assert_eq!(why, reason::WAITING_FOR_WINDOW);
        assert!(
            message.contains("opens at 2027-01-18T21:00:00Z")
                && message.contains("Mon,Tue,Wed,Thu 22:00-04:00 Europe/Berlin"),
            "{message}"
        );
        // Thursday night, 01:00 Friday in Berlin: inside Thursday's window.
        let thursday_night = at(now().as_second() - 8 * 3600);
        let plan = plan_group(&group, &BTreeMap::new(), &loaded, thursday_night);
        assert_eq!(plan.create.unwrap().spec.targets[0].name, "node-1");
    }

    #[test]
    fn a_group_that_has_begun_keeps_its_locks_while_a_plugin_cannot_answer() {
        let group = after(
            &sample(),
            &plan_group(&sample(), &BTreeMap::new(), &all_loaded(), now()),
        );
        let workflows = observed(&[("pre-check", Phase::Completed)]);
        let plan = plan_group(
            &group,
            &workflows,
            &with("setup", PluginState::Loaded(Err(timeout()))),
            now(),
        );
        assert!(plan.unavailable.is_some());
        assert!(
            plan.keep_locks,
            "half-way through, its targets stay its own"
        );
        // Not begun: nothing to keep.
        let plan = plan_group(
            &sample(),
            &BTreeMap::new(),
            &with("setup", PluginState::Missing),
            now(),
        );
        assert!(!plan.keep_locks);
    }

    #[test]
    fn a_group_whose_workflow_waits_idle_may_give_way_and_takes_its_locks_back_when_a_step_is_ready()
     {
        let plan = plan_group(&sample(), &BTreeMap::new(), &all_loaded(), now());
        let group = after(&sample(), &plan);
        let with = |reason: &str, turn: LockTurn| {
            let mut w = observed(&[("pre-check", Phase::Pending)]);
            let pre = w.get_mut("pre-check").unwrap();
            pre.reason = reason.into();
            pre.locks = turn;
            w
        };
        let since = now();
        let idle = LockTurn {
            awaiting: false,
            seen: true,
            idle_since: Some(since),
        };
        let waits = with(reason::WAITING_FOR_APPROVAL, idle.clone());
        let plan = plan_group(&group, &waits, &all_loaded(), now());
        assert_eq!(
            lock_wish(&plan, &waits),
            LockWish::Idle {
                workflows: vec!["wf-pre-check"],
                since
            }
        );
        // Running: it keeps them.
        let runs = with(reason::RUNNING, idle.clone());
        let plan = plan_group(&group, &runs, &all_loaded(), now());
        assert_eq!(lock_wish(&plan, &runs), LockWish::Keep);
        // Asked to wait for them, not seen yet: kept; seen while still idle: given back.
        let gave = LockTurn {
            awaiting: true,
            seen: false,
            ..idle.clone()
        };
        let unseen = with(reason::WAITING_FOR_APPROVAL, gave.clone());
        let plan = plan_group(&group, &unseen, &all_loaded(), now());
        assert_eq!(lock_wish(&plan, &unseen), LockWish::Keep);
        let gave = LockTurn { seen: true, ..gave };
        let seen = with(reason::WAITING_FOR_SCHEDULE, gave.clone());
        let plan = plan_group(&group, &seen, &all_loaded(), now());
        assert_eq!(lock_wish(&plan, &seen), LockWish::Release { acting: false });
        // A step is ready: they are taken again, and while they are not, the group is in line.
        let ready = with(reason::WAITING_FOR_TARGETS, gave);
        let plan = plan_group(&group, &ready, &all_loaded(), now());
        assert_eq!(
            lock_wish(&plan, &ready),
            LockWish::TakeBack {
                workflows: vec!["wf-pre-check"]
            }
        );
        let plan = after_attempt(&group, plan, Attempt::Locked("held by ns/b".into()), now());
        let (_, why, _) = condition(&plan);
        assert_eq!(why, reason::WAITING_FOR_TARGETS);
        assert!(waiting_for(&after(&group, &plan)).is_some());
    }

    #[test]
    fn the_plan_says_what_it_wants_of_its_locks() {
        // Creating a Workflow: its targets' locks first.
        let plan = plan_group(&sample(), &BTreeMap::new(), &all_loaded(), now());
        let none = BTreeMap::new();
        assert_eq!(
            lock_wish(&plan, &none),
            LockWish::Take(&sample().spec.targets[..])
        );
        // Running one: keep them.
        let group = after(&sample(), &plan);
        let running = observed(&[("pre-check", Phase::Running)]);
        let plan = plan_group(&group, &running, &all_loaded(), now());
        assert_eq!(lock_wish(&plan, &running), LockWish::Keep);
        // Finished: give them back, once nothing of it acts.
        let failed = observed(&[("pre-check", Phase::Failed)]);
        let plan = plan_group(&group, &failed, &all_loaded(), now());
        assert_eq!(
            lock_wish(&plan, &failed),
            LockWish::Release { acting: false }
        );
        // A group that waits for locks is served first come, first served; one that does not
        // is not listed.
        assert_eq!(waiting_for(&group), None);
        let waits = after_attempt(
            &sample(),
            plan_group(&sample(), &BTreeMap::new(), &all_loaded(), now()),
            Attempt::Locked("waiting: target n1 is held by group ns/other".into()),
            now(),
        );
        let waiting_group = after(&sample(), &waits);
        assert_eq!(
            waiting_for(&waiting_group),
            Some(&sample().spec.targets[..])
        );
    }

    /// `wave` of `group` and every earlier one Completed, keyed as the reconcile keys them.
    fn up_to_wave(group: &WorkflowGroup, wave: u32) -> BTreeMap<String, ObservedWorkflow> {
        waves_completed(group, wave + 1)
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn the_next_wave_rests_for_its_pause_after_the_wave_before_it_finished_holding_no_lock() {
        let mut group = rollout(2, 0, BudgetPolicy::Fail);
        group.spec.rollout.as_mut().unwrap().pause_between_waves = Some("30s".into());
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        assert!(plan.create.is_some(), "the first wave starts at once");
        let group = after(&group, &plan);

        // Wave 1 seen finished now: wave 2 rests until 30 s later.
        let done = up_to_wave(&group, 1);
        let plan = plan_group(&group, &done, &all_loaded(), now());
        assert!(plan.create.is_none());
        assert!(!plan.keep_locks, "a resting group gives its locks back");
        let (_, why, message) = condition(&plan);
        assert_eq!(why, reason::WAITING_BETWEEN_WAVES);
        let until = now().checked_add(Duration::from_secs(30)).unwrap();
        assert!(message.contains(&until.to_string()), "{message}");
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(30)));
        let rollout = plan.status.rollout.as_ref().unwrap();
        assert_eq!(rollout.next_wave_at, Some(Time(until)));
        assert_eq!(rollout.waves[0].finished_at, Some(Time(now())));

        // The rest counts from when the wave was first seen finished, not from each look.
        let group = after(&group, &plan);
        let later = at(now().as_second() + 29);
        let plan = plan_group(&group, &done, &all_loaded(), later);
        assert!(plan.create.is_none());
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(1)));
        let plan = plan_group(&group, &done, &all_loaded(), until);
        assert_eq!(plan.create.unwrap().name_any(), "wf-pre-check#2");
        let rollout = plan.status.rollout.as_ref().unwrap();
        assert_eq!(rollout.next_wave_at, None);
    }

    #[test]
    fn a_wave_starts_only_inside_its_window_and_a_started_wave_runs_to_its_end() {
        // now() is 2027-01-15T08:00:00Z, a Friday.
        let mut group = rollout(2, 0, BudgetPolicy::Fail);
        group.spec.rollout.as_mut().unwrap().window = Some(MaintenanceWindow {
            days: Vec::new(),
            start: "10:00".into(),
            end: "12:00".into(),
            time_zone: None,
        });
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        assert!(plan.create.is_none() && !plan.keep_locks);
        let (_, why, message) = condition(&plan);
        assert_eq!(why, reason::WAITING_FOR_WINDOW);
        assert!(
            message.contains("opens at 2027-01-15T10:00:00Z"),
            "{message}"
        );
        let opens = at(now().as_second() + 2 * 3600);
        let rollout = plan.status.rollout.as_ref().unwrap();
        assert_eq!(rollout.next_window, Some(Time(opens)));
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(3600)));

        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), opens);
        assert_eq!(plan.create.as_ref().unwrap().name_any(), "wf-pre-check#1");
        let group = after(&group, &plan);

        // At 12:30 the window is closed: wave 1 goes on with its next type, wave 2 waits.
        let closed = at(now().as_second() + 4 * 3600 + 1800);
        let mut workflows = up_to_wave(&group, 1);
        workflows.remove("setup#1");
        workflows.remove("post-check#1");
        let plan = plan_group(&group, &workflows, &all_loaded(), closed);
        assert_eq!(plan.create.as_ref().unwrap().name_any(), "wf-setup#1");
        let group = after(&group, &plan);
        let plan = plan_group(&group, &up_to_wave(&group, 1), &all_loaded(), closed);
        assert!(plan.create.is_none());
        let (_, why, message) = condition(&plan);
        assert_eq!(why, reason::WAITING_FOR_WINDOW);
        assert!(message.contains("wave 2"), "{message}");
        assert!(
            message.contains("opens at 2027-01-16T10:00:00Z"),
            "{message}"
        );
    }

    #[test]
    fn a_rerun_starts_a_wave_only_inside_its_window_too() {
        // now() is 2027-01-15T08:00:00Z; the window is 10:00-12:00 UTC.
        let mut group = rollout(2, 0, BudgetPolicy::Fail);
        group.spec.rollout.as_mut().unwrap().window = Some(MaintenanceWindow {
            days: Vec::new(),
            start: "10:00".into(),
            end: "12:00".into(),
            time_zone: None,
        });
        // Run 1 failed at wave 1's setup, inside the window.
        let mut workflows = up_to_wave(&group, 1);
        workflows.get_mut("setup#1").unwrap().phase = Some(Phase::Failed);
        workflows.remove("post-check#1");
        let inside = at(now().as_second() + 2 * 3600 + 60);
        let plan = plan_group(&group, &workflows, &all_loaded(), inside);
        assert_eq!(plan.status.phase, Some(Phase::Failed));
        let mut group = after(&group, &plan);
        group.spec.rerun = Some(RerunRequest {
            id: "again".into(),
            ..RerunRequest::default()
        });
        // Asked for the next morning, with the window closed: the re-run begins, and its
        // first wave waits for the window before its setup runs again.
        let closed = at(now().as_second() + 24 * 3600);
        let plan = plan_group(&group, &workflows, &all_loaded(), closed);
        assert_eq!(plan.status.phase, Some(Phase::Running));
        let group = after(&group, &plan);
        let plan = plan_group(&group, &workflows, &all_loaded(), closed);
        assert!(plan.rerun.is_none(), "run again outside its window");
        let (_, why, message) = condition(&plan);
        assert_eq!(why, reason::WAITING_FOR_WINDOW);
        assert!(message.starts_with("wave 1 waits"), "{message}");
        let opens = at(now().as_second() + 26 * 3600 + 60);
        let plan = plan_group(&group, &workflows, &all_loaded(), opens);
        assert_eq!(
            plan.rerun.as_ref().map(|p| p.workflow.as_str()),
            Some("wf-setup#1")
        );
    }

    #[test]
    fn a_window_that_never_opens_and_a_pause_that_is_no_duration_are_an_invalid_spec() {
        let mut group = rollout(2, 0, BudgetPolicy::Fail);
        group.spec.rollout.as_mut().unwrap().window = Some(MaintenanceWindow {
            days: Vec::new(),
            start: "02:00".into(),
            end: "02:00".into(),
            time_zone: None,
        });
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        let (_, why, message) = condition(&plan);
        assert_eq!(why, reason::INVALID_SPEC);
        assert!(message.starts_with("spec.rollout.window.end:"), "{message}");
        assert!(plan.create.is_none());

        let mut group = rollout(2, 0, BudgetPolicy::Fail);
        group.spec.rollout.as_mut().unwrap().pause_between_waves = Some("soon".into());
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        let (_, why, message) = condition(&plan);
        assert_eq!(why, reason::INVALID_SPEC);
        assert!(
            message.starts_with("spec.rollout.pauseBetweenWaves:"),
            "{message}"
        );
    }

    #[test]
    fn a_wave_size_that_is_no_size_is_an_invalid_spec() {
        for bad in [
            IntOrString::Int(0),
            IntOrString::String("half".into()),
            IntOrString::String("150%".into()),
        ] {
            let mut group = rollout(2, 0, BudgetPolicy::Fail);
            group.spec.rollout.as_mut().unwrap().wave_size = bad.clone();
            let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
            let (_, why, message) = condition(&plan);
            assert_eq!(why, reason::INVALID_SPEC, "{bad:?}");
            assert!(message.contains("spec.rollout.waveSize"), "{message}");
        }
    }

    fn timeout() -> PluginError {
        PluginError::Timeout {
            plugin: "setup".into(),
            call: "validate",
            limit: Duration::from_secs(1),
        }
    }

    fn condition(plan: &GroupPlan) -> (&str, &str, &str) {
        let c = succeeded(&plan.status.conditions).expect("a Succeeded condition");
        (c.status.as_str(), c.reason.as_str(), c.message.as_str())
    }

    const RECONCILING: &[(&str, &str)] = &[("Reconciling", "True")];
    const READY: &[(&str, &str)] = &[("Ready", "True")];
    const STALLED: &[(&str, &str)] = &[("Stalled", "True"), ("Ready", "False")];

    #[test]
    fn a_new_group_creates_only_its_first_workflow() {
        let plan = plan_group(&sample(), &BTreeMap::new(), &all_loaded(), now());
        assert_eq!(
            plan.create.as_ref().map(|w| w.spec.type_.as_str()),
            Some("pre-check")
        );
        assert_eq!(plan.status.phase, Some(Phase::Running));
        assert_eq!(plan.status.progress.as_deref(), Some("0/3"));
        assert_eq!(plan.status.workflows[0].name, "wf-pre-check");
        assert_eq!(plan.status.workflows[0].status, Phase::Running);
        assert!(plan.events.is_empty(), "{:?}", plan.events);
    }

    #[test]
    fn seeing_the_workflow_it_just_created_before_or_after_its_controller_starts_it_changes_nothing()
     {
        let mut group = sample();
        let created = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        group.status = Some(created.status.clone());
        let mut not_started = observed(&[("pre-check", Phase::Running)]);
        not_started.get_mut("pre-check").unwrap().phase = None;
        for workflows in [not_started, observed(&[("pre-check", Phase::Running)])] {
            let seen = plan_group(&group, &workflows, &all_loaded(), now());
            assert!(seen.create.is_none());
            // Equal status: no write for learning what the group already said.
            assert_eq!(seen.status, created.status);
            assert!(seen.events.is_empty(), "{:?}", seen.events);
        }
    }

    #[test]
    fn a_created_workflow_that_says_it_is_pending_is_shown_pending_then_running() {
        let mut group = sample();
        let created = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        group.status = Some(created.status);
        let waiting = plan_group(
            &group,
            &observed(&[("pre-check", Phase::Pending)]),
            &all_loaded(),
            now(),
        );
        assert_eq!(waiting.status.workflows[0].status, Phase::Pending);
        assert_eq!(
            condition(&waiting).2,
            "workflow wf-pre-check (pre-check) is pending"
        );
        group.status = Some(waiting.status);
        let running = plan_group(
            &group,
            &observed(&[("pre-check", Phase::Running)]),
            &all_loaded(),
            now(),
        );
        assert_eq!(running.status.workflows[0].status, Phase::Running);
        assert_eq!(
            condition(&running).2,
            "workflow wf-pre-check (pre-check) is running"
        );
    }

    #[test]
    fn the_next_workflow_waits_for_the_previous_to_complete() {
        let running = observed(&[("pre-check", Phase::Running)]);
        let plan = plan_group(&sample(), &running, &all_loaded(), now());
        assert!(plan.create.is_none());
        let completed = observed(&[("pre-check", Phase::Completed)]);
        let plan = plan_group(&sample(), &completed, &all_loaded(), now());
        assert_eq!(
            plan.create.as_ref().map(|w| w.spec.type_.as_str()),
            Some("setup")
        );
        assert_eq!(plan.status.workflows.len(), 2);
        assert_eq!(plan.status.progress.as_deref(), Some("1/3"));
    }

    #[test]
    fn the_first_failed_workflow_fails_the_group_and_nothing_more_is_created() {
        let workflows = observed(&[("pre-check", Phase::Completed), ("setup", Phase::Failed)]);
        let plan = plan_group(&sample(), &workflows, &all_loaded(), now());
        assert!(plan.create.is_none());
        assert_eq!(plan.status.phase, Some(Phase::Failed));
        let (status, _, message) = condition(&plan);
        assert_eq!(status, "False");
        assert!(
            message.contains("wf-setup") && message.contains("boom"),
            "{message}"
        );
    }

    /// `observed` with the run each Workflow is in and was asked to be in.
    fn in_runs(
        mut workflows: BTreeMap<String, ObservedWorkflow>,
        runs: &[(&str, u32, u32)],
    ) -> BTreeMap<String, ObservedWorkflow> {
        for (t, run, asked) in runs {
            let w = workflows.get_mut(*t).expect("listed");
            (w.run, w.asked_run) = (*run, *asked);
        }
        workflows
    }

    fn failed_at_setup() -> WorkflowGroup {
        let mut group = sample();
        let failed = observed(&[("pre-check", Phase::Completed), ("setup", Phase::Failed)]);
        let plan = plan_group(&group, &failed, &all_loaded(), now());
        assert_eq!(plan.status.phase, Some(Phase::Failed));
        group.status = Some(plan.status);
        group
    }

    #[test]
    fn a_new_rerun_id_reruns_a_failed_group_from_its_failed_workflow_once() {
        let mut group = failed_at_setup();
        group.spec.rerun = Some(RerunRequest {
            id: "fix-1".into(),
            targets: RerunTargets::Failed,
            ..RerunRequest::default()
        });
        group
            .annotations_mut()
            .insert(ANNOTATION_REQUESTED_BY.into(), "carol".into());
        let failed = observed(&[("pre-check", Phase::Completed), ("setup", Phase::Failed)]);
        let plan = plan_group(&group, &failed, &all_loaded(), now());
        assert_eq!(plan.status.phase, Some(Phase::Running));
        assert_eq!(plan.status.completion_time, None);
        let runs = &plan.status.runs;
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert_eq!(
            (runs[0].run, runs[0].phase, runs[0].id.as_deref()),
            (1, Phase::Failed, None)
        );
        assert_eq!(
            (
                runs[1].run,
                runs[1].phase,
                runs[1].id.as_deref(),
                runs[1].from
            ),
            (2, Phase::Running, Some("fix-1"), Some(RerunFrom::Failed))
        );
        assert_eq!(runs[1].targets, Some(RerunTargets::Failed));
        assert_eq!(runs[1].requested_by.as_deref(), Some("carol"));
        assert!(uuid::Uuid::parse_str(&runs[1].run_id).is_ok());
        assert_ne!(runs[0].run_id, runs[1].run_id);
        let (_, why, message) = condition(&plan);
        assert_eq!(why, reason::RERUNNING);
        assert!(message.starts_with("run 2 ("), "{message}");
        assert!(
            message.ends_with("from Failed, on the targets that failed, asked by carol"),
            "{message}"
        );
        assert!(plan.create.is_none() && plan.rerun.is_none());

        // Its turn: the completed pre-check is kept, the failed setup is asked to run again.
        let group = after(&group, &plan);
        let plan = plan_group(&group, &failed, &all_loaded(), now());
        assert!(plan.create.is_none());
        let patch = plan.rerun.clone().expect("setup runs again");
        assert_eq!(patch.workflow, "wf-setup");
        assert_eq!(
            patch.rerun,
            WorkflowRerun {
                run: 2,
                from: RerunFrom::Failed,
                steps: vec![],
                targets: RerunTargets::Failed,
            }
        );
        assert!(plan.keep_locks);
        assert_eq!(patch.targets, group.spec.targets);
        // Asked and not yet started again, it is running, not failed.
        let group = after(&group, &plan);
        let asked = in_runs(failed.clone(), &[("setup", 1, 2)]);
        let plan = plan_group(&group, &asked, &all_loaded(), now());
        assert_eq!(plan.status.phase, Some(Phase::Running));
        assert!(plan.rerun.is_none() && plan.create.is_none());
        // It completed in run 2: the next type is created in run 2.
        let done = in_runs(
            observed(&[("pre-check", Phase::Completed), ("setup", Phase::Completed)]),
            &[("setup", 2, 2)],
        );
        let plan = plan_group(&group, &done, &all_loaded(), now());
        let created = plan.create.as_ref().expect("post-check");
        assert_eq!(created.spec.rerun.as_ref().map(|r| r.run), Some(2));
        // All completed: run 2 ends Completed, and the same id again does nothing.
        let group = after(&group, &plan);
        let all = in_runs(
            observed(&[
                ("pre-check", Phase::Completed),
                ("setup", Phase::Completed),
                ("post-check", Phase::Completed),
            ]),
            &[("setup", 2, 2), ("post-check", 2, 2)],
        );
        let plan = plan_group(&group, &all, &all_loaded(), now());
        assert_eq!(plan.status.phase, Some(Phase::Completed));
        let last = plan.status.runs.last().expect("run 2");
        assert_eq!((last.run, last.phase), (2, Phase::Completed));
        assert!(last.completion_time.is_some());
        let group = after(&group, &plan);
        let again = plan_group(&group, &all, &all_loaded(), now());
        assert_eq!(again.status, group.status.clone().expect("status"));
        assert!(again.rerun.is_none() && again.create.is_none());
    }

    #[test]
    fn a_rerun_id_stays_spent_after_its_run_has_left_the_list() {
        let failed = observed(&[("pre-check", Phase::Completed), ("setup", Phase::Failed)]);
        let mut group = failed_at_setup();
        let ask = |group: &mut WorkflowGroup, id: &str| {
            group.spec.rerun = Some(RerunRequest {
                id: id.into(),
                ..RerunRequest::default()
            });
        };
        // More re-runs than status.runs lists; each ends Failed again.
        for n in 0..MAX_LISTED_RUNS + 5 {
            ask(&mut group, &format!("fix-{n}"));
            let plan = plan_group(&group, &failed, &all_loaded(), now());
            assert_eq!(plan.status.phase, Some(Phase::Running), "fix-{n} starts");
            group = after(&group, &plan);
            let status = group.status.as_mut().expect("status");
            status.phase = Some(Phase::Failed);
            status.runs.last_mut().expect("run").phase = Phase::Failed;
        }
        let status = group.status.clone().expect("status");
        assert_eq!(status.runs.len(), MAX_LISTED_RUNS);
        assert!(status.runs.iter().all(|r| r.id.as_deref() != Some("fix-0")));
        assert_eq!(status.rerun_id_digests.len(), MAX_LISTED_RUNS + 5);
        // The first id, back in spec (say from git): nothing runs again.
        ask(&mut group, "fix-0");
        let plan = plan_group(&group, &failed, &all_loaded(), now());
        assert_eq!(plan.status.phase, Some(Phase::Failed));
        assert_eq!(plan.status.runs, status.runs);
        // The oldest digests go first, beyond the bound.
        let mut full = status.clone();
        full.rerun_id_digests = (0..MAX_REMEMBERED_RERUN_IDS)
            .map(|n| format!("{n:016x}"))
            .collect();
        remember_rerun_ids(&mut full);
        assert_eq!(full.rerun_id_digests.len(), MAX_REMEMBERED_RERUN_IDS);
        assert_eq!(
            full.rerun_id_digests.last(),
            Some(&rerun_id_digest("fix-24"))
        );
        assert!(!full.rerun_id_digests.contains(&format!("{:016x}", 0)));
    }

    #[test]
    fn the_annotation_reruns_too_and_a_rerun_of_all_or_named_steps_asks_completed_workflows() {
        let mut group = failed_at_setup();
        group
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(ANNOTATION_RERUN.into(), "again".into());
        let failed = observed(&[("pre-check", Phase::Completed), ("setup", Phase::Failed)]);
        let plan = plan_group(&group, &failed, &all_loaded(), now());
        assert_eq!(
            plan.status.runs.last().and_then(|r| r.id.as_deref()),
            Some("again")
        );

        let run = |from, steps: &[&str], types: &[&str]| RunStatus {
            run: 3,
            from: Some(from),
            steps: steps.iter().map(|s| s.to_string()).collect(),
            types: types.iter().map(|s| s.to_string()).collect(),
            ..RunStatus::default()
        };
        let asked =
            |r: &RunStatus, t: &str, p: Phase| workflow_rerun(r, t, p).map(|w| (w.from, w.steps));
        // From Failed: a completed Workflow is kept unless a step or its type is named.
        assert_eq!(
            asked(
                &run(RerunFrom::Failed, &[], &[]),
                "pre-check",
                Phase::Completed
            ),
            None
        );
        assert_eq!(
            asked(&run(RerunFrom::Failed, &[], &[]), "setup", Phase::Failed),
            Some((RerunFrom::Failed, vec![]))
        );
        assert_eq!(
            asked(
                &run(
                    RerunFrom::Failed,
                    &["pre-check/validate-nodes", "setup/x"],
                    &[]
                ),
                "pre-check",
                Phase::Completed
            ),
            Some((RerunFrom::Failed, vec!["validate-nodes".to_string()]))
        );
        assert_eq!(
            asked(
                &run(RerunFrom::Failed, &[], &["pre-check"]),
                "pre-check",
                Phase::Completed
            ),
            Some((RerunFrom::All, vec![]))
        );
        assert_eq!(
            asked(
                &run(RerunFrom::All, &[], &[]),
                "post-check",
                Phase::Completed
            ),
            Some((RerunFrom::All, vec![]))
        );
    }

    #[test]
    fn all_completed_completes_the_group() {
        let workflows = observed(&[
            ("pre-check", Phase::Completed),
            ("setup", Phase::Completed),
            ("post-check", Phase::Completed),
        ]);
        let plan = plan_group(&sample(), &workflows, &all_loaded(), now());
        assert_eq!(plan.status.phase, Some(Phase::Completed));
        assert_eq!(plan.status.progress.as_deref(), Some("3/3"));
        assert!(plan.events.iter().any(|e| e.reason == "GroupCompleted"));
    }

    #[test]
    fn a_missing_plugin_keeps_a_new_group_pending_naming_the_type() {
        let plugins = with("post-check", PluginState::Missing);
        let plan = plan_group(&sample(), &BTreeMap::new(), &plugins, now());
        assert!(plan.create.is_none());
        assert_eq!(plan.status.phase, Some(Phase::Pending));
        let (status, reason, message) = condition(&plan);
        assert_eq!((status, reason), ("Unknown", "PluginMissing"));
        assert!(message.contains("\"post-check\""), "{message}");
    }

    #[test]
    fn a_missing_plugin_whose_file_has_a_problem_says_the_problem_on_the_group() {
        let mut plugins = with("post-check", PluginState::Missing);
        plugins.why.insert(
            "post-check".into(),
            "configmap/ops/post-check/post-check.wasm: cannot pull plugin oci://r.example/p:1: connection refused".into(),
        );
        let plan = plan_group(&sample(), &BTreeMap::new(), &plugins, now());
        let (status, reason, message) = condition(&plan);
        assert_eq!((status, reason), ("Unknown", "PluginMissing"));
        assert!(
            message.contains("\"post-check\"")
                && message.ends_with("(or its ConfigMap); configmap/ops/post-check/post-check.wasm: cannot pull plugin oci://r.example/p:1: connection refused"),
            "{message}"
        );
    }

    #[test]
    fn invalid_params_keep_the_group_pending_with_the_plugins_message() {
        let refused = PluginError::InvalidParams {
            type_name: "setup".into(),
            message: "missing field `version`".into(),
        };
        let plugins = with("setup", PluginState::Loaded(Err(refused)));
        let plan = plan_group(&sample(), &BTreeMap::new(), &plugins, now());
        assert!(plan.create.is_none());
        assert!(plan.unavailable.is_none(), "a refusal is final");
        let (_, reason, message) = condition(&plan);
        assert_eq!(reason, "InvalidParams");
        assert!(message.contains("spec.params.setup: invalid parameters for workflow type setup: missing field `version`"), "{message}");
    }

    #[test]
    fn a_params_check_that_times_out_is_retried_not_reported_as_invalid_params() {
        let plugins = with("setup", PluginState::Loaded(Err(timeout())));
        let plan = plan_group(&sample(), &BTreeMap::new(), &plugins, now());
        assert!(plan.create.is_none());
        assert_eq!(plan.unavailable, Some(timeout()));
        let (status, reason, message) = condition(&plan);
        assert_eq!((status, reason), ("Unknown", "PluginUnavailable"));
        assert!(message.contains("time limit"), "{message}");
        assert_eq!(plan.status.phase, Some(Phase::Pending));
    }

    #[test]
    fn a_template_that_times_out_is_retried_and_one_that_fails_is_reported() {
        let plugins = Plugins {
            template_error: Some(timeout()),
            ..all_loaded()
        };
        let plan = plan_group(&sample(), &BTreeMap::new(), &plugins, now());
        assert!(plan.create.is_none());
        assert_eq!(plan.unavailable, Some(timeout()));
        assert_eq!(condition(&plan).1, "PluginUnavailable");

        let refused = PluginError::TemplateFailed {
            plugin: "pre-check".into(),
            message: "no master among the targets".into(),
        };
        let plugins = Plugins {
            template_error: Some(refused),
            ..all_loaded()
        };
        let plan = plan_group(&sample(), &BTreeMap::new(), &plugins, now());
        assert!(plan.create.is_none() && plan.unavailable.is_none());
        let (_, reason, message) = condition(&plan);
        assert_eq!(reason, "TemplateFailed");
        assert!(message.contains("no master among the targets"), "{message}");
        assert!(plan.events.iter().any(|e| e.reason == "TemplateFailed"));
    }

    #[test]
    fn a_taken_workflow_name_is_reported_and_not_listed() {
        let group = sample();
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        let plan = after_attempt(&group, plan, Attempt::NameTaken, now());
        assert!(plan.create.is_none());
        assert!(plan.status.workflows.is_empty());
        let reasons: Vec<&str> = plan.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(reasons, ["TemplateFailed"]);
        let (_, reason, message) = condition(&plan);
        assert_eq!(reason, "TemplateFailed");
        assert!(message.contains("wf-pre-check already exists"), "{message}");
    }

    #[test]
    fn a_workflow_the_api_server_refuses_is_reported_and_not_listed() {
        let group = sample();
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        let why =
            "spec.targets[0].ip: Invalid value: \"string\": \"x\" is not an IPv4 or IPv6 address";
        let plan = after_attempt(&group, plan, Attempt::Refused(why.into()), now());
        assert!(plan.create.is_none());
        assert!(plan.status.workflows.is_empty());
        assert_eq!(plan.status.phase, Some(Phase::Pending));
        let (_, reason, message) = condition(&plan);
        assert_eq!(reason, "TemplateFailed");
        assert!(
            message.contains("refused the Workflow for pre-check") && message.contains(why),
            "{message}"
        );
    }

    #[test]
    fn a_paused_group_creates_nothing_and_resumes_when_unpaused() {
        let mut group = sample();
        group.spec.paused = true;
        group
            .annotations_mut()
            .insert(ANNOTATION_REQUESTED_BY.into(), "bob".into());
        let workflows = observed(&[("pre-check", Phase::Completed)]);
        let plan = plan_group(&group, &workflows, &all_loaded(), now());
        assert!(plan.create.is_none());
        assert_eq!(condition(&plan).1, "Paused");
        // The first run is listed, with its pause and who asked for it; seen again, it is not
        // recorded twice.
        let runs = &plan.status.runs;
        assert_eq!(
            (runs.len(), runs[0].run, runs[0].phase),
            (1, 1, Phase::Running)
        );
        assert_eq!(runs[0].pauses.len(), 1);
        assert_eq!(runs[0].pauses[0].paused_by.as_deref(), Some("bob"));
        let group = after(&group, &plan);
        let again = plan_group(&group, &workflows, &all_loaded(), now());
        assert_eq!(again.status.runs, plan.status.runs);
        let mut group = group;
        group.spec.paused = false;
        group.annotations_mut().remove(ANNOTATION_REQUESTED_BY);
        let plan = plan_group(&group, &workflows, &all_loaded(), now());
        assert_eq!(
            plan.create.as_ref().map(|w| w.spec.type_.as_str()),
            Some("setup")
        );
        let pause = &plan.status.runs[0].pauses[0];
        assert!(
            pause.resumed_at.is_some() && pause.resumed_by.is_none(),
            "{pause:?}"
        );
    }

    #[test]
    fn a_type_listed_twice_or_params_for_an_unknown_type_is_an_invalid_spec() {
        let mut group = sample();
        group.spec.workflow_steps.push("setup".into());
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        assert_eq!(condition(&plan).1, "InvalidSpec");
        assert!(condition(&plan).2.contains("listed twice"));

        let mut group = sample();
        group
            .spec
            .params
            .insert("nope".into(), serde_json::json!({}));
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        assert_eq!(condition(&plan).1, "InvalidSpec");
        assert!(condition(&plan).2.contains("spec.params.nope"));

        let mut group = sample();
        group.spec.drain = Some(
            serde_json::from_value(serde_json::json!({"types": ["setup", "upgrade"]}))
                .expect("a drain"),
        );
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        assert_eq!(condition(&plan).1, "InvalidSpec");
        assert_eq!(
            condition(&plan).2,
            "spec.drain.types: \"upgrade\" is not one of spec.workflowSteps"
        );
    }

    #[test]
    fn a_group_with_a_word_that_is_not_a_word_of_its_kind_waits_as_an_invalid_spec_naming_it() {
        /// What spoils the sample group, and how the condition's message begins.
        type Spoiled = (fn(&mut WorkflowGroup), &'static str);
        let cases: [Spoiled; 4] = [
            (
                |g| g.spec.targets[1].name = "Node_2".into(),
                "spec.targets[1].name: \"Node_2\" is not a valid DNS-1123 subdomain: only lowercase \
                 letters, digits, '-' and '.' are allowed",
            ),
            (
                |g| g.spec.targets[0].role = "Master,Worker".into(),
                "spec.targets[0].role: \"Master,Worker\" is not a valid role",
            ),
            (
                |g| g.spec.cluster_name = "c".repeat(101),
                "spec.clusterName: ",
            ),
            (
                |g| g.spec.workflow_steps[0] = "Pre-Check".into(),
                "spec.workflowSteps[0]: \"Pre-Check\" is not a valid DNS-1123 label",
            ),
        ];
        for (spoil, says) in cases {
            let mut group = sample();
            spoil(&mut group);
            let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
            let (_, why, message) = condition(&plan);
            assert_eq!(why, "InvalidSpec", "{says}");
            assert!(
                message.starts_with(says),
                "{message:?} should start with {says:?}"
            );
            assert!(plan.create.is_none(), "{says}");
        }
    }

    #[test]
    fn a_pending_or_running_group_is_reconciling_whatever_it_waits_for() {
        let refused = PluginError::InvalidParams {
            type_name: "setup".into(),
            message: "missing field `version`".into(),
        };
        let mut paused = sample();
        paused.spec.paused = true;
        let mut invalid = sample();
        invalid.spec.workflow_steps.push("setup".into());
        let none = BTreeMap::new();
        let first_done = observed(&[("pre-check", Phase::Completed)]);
        let cases = [
            (
                "creating its first workflow",
                sample(),
                none.clone(),
                all_loaded(),
            ),
            (
                "plugin missing",
                sample(),
                none.clone(),
                with("setup", PluginState::Missing),
            ),
            (
                "params refused",
                sample(),
                none.clone(),
                with("setup", PluginState::Loaded(Err(refused))),
            ),
            (
                "plugin unavailable",
                sample(),
                none.clone(),
                with("setup", PluginState::Loaded(Err(timeout()))),
            ),
            ("invalid spec", invalid, none, all_loaded()),
            ("paused", paused, first_done, all_loaded()),
            (
                "running",
                sample(),
                observed(&[("pre-check", Phase::Running)]),
                all_loaded(),
            ),
            (
                "its workflow pending",
                sample(),
                observed(&[("pre-check", Phase::Pending)]),
                all_loaded(),
            ),
        ];
        for (case, group, workflows, plugins) in cases {
            let plan = plan_group(&group, &workflows, &plugins, now());
            assert_eq!(condition(&plan).0, "Unknown", "{case}");
            assert_eq!(
                kstatus_conditions(&plan.status.conditions),
                RECONCILING,
                "{case}"
            );
        }
    }

    #[test]
    fn a_completed_group_is_ready_and_a_failed_one_stalled_and_neither_is_reconciling() {
        let mut group = sample();
        let running = plan_group(
            &group,
            &observed(&[("pre-check", Phase::Running)]),
            &all_loaded(),
            now(),
        );
        group.status = Some(running.status);
        let completed = observed(&[
            ("pre-check", Phase::Completed),
            ("setup", Phase::Completed),
            ("post-check", Phase::Completed),
        ]);
        let plan = plan_group(&group, &completed, &all_loaded(), now());
        assert_eq!(plan.status.phase, Some(Phase::Completed));
        assert_eq!(kstatus_conditions(&plan.status.conditions), READY);

        let failed = observed(&[("pre-check", Phase::Failed)]);
        let plan = plan_group(&group, &failed, &all_loaded(), now());
        assert_eq!(plan.status.phase, Some(Phase::Failed));
        assert_eq!(kstatus_conditions(&plan.status.conditions), STALLED);
    }

    #[test]
    fn a_status_of_only_observed_generation_zero_is_no_status_yet() {
        // What the API server shows (the CRD's default) before the operator's first write.
        let mut defaulted = sample();
        defaulted.status = Some(WorkflowGroupStatus {
            observed_generation: Some(0),
            ..WorkflowGroupStatus::default()
        });
        for plugins in [all_loaded(), with("setup", PluginState::Missing)] {
            let fresh = plan_group(&sample(), &BTreeMap::new(), &plugins, now());
            let plan = plan_group(&defaulted, &BTreeMap::new(), &plugins, now());
            assert_eq!(plan.status, fresh.status);
            assert_eq!(plan.status.observed_generation, Some(1));
            let name = |plan: &GroupPlan| plan.create.as_ref().map(ResourceExt::name_any);
            assert_eq!(name(&plan), name(&fresh));
            assert_eq!(plan.events, fresh.events);
        }
    }

    #[test]
    fn a_group_finished_before_the_kstatus_conditions_existed_gets_them_and_nothing_else() {
        let mut group = sample();
        let failed = plan_group(
            &group,
            &observed(&[("pre-check", Phase::Failed)]),
            &all_loaded(),
            now(),
        );
        let mut old = failed.status.clone();
        old.conditions.retain(|c| c.type_ == "Succeeded");
        group.status = Some(old);
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        assert_eq!(plan.status, failed.status);
        assert!(plan.create.is_none() && plan.events.is_empty());
        // Up to date: nothing to write.
        group.status = Some(plan.status.clone());
        let again = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        assert_eq!(Some(again.status), group.status);
    }

    #[test]
    fn a_finished_group_is_left_alone() {
        let mut group = sample();
        group.status = Some(WorkflowGroupStatus {
            phase: Some(Phase::Completed),
            observed_generation: Some(1),
            ..Default::default()
        });
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        assert!(plan.create.is_none());
        assert_eq!(Some(plan.status), group.status);
    }

    /// `observed` with the Workflow of `key` gone, as the reconcile finds it: from the record.
    fn with_deleted(
        mut workflows: BTreeMap<String, ObservedWorkflow>,
        key: &str,
        recorded: Phase,
    ) -> BTreeMap<String, ObservedWorkflow> {
        let gone = workflows.remove(key).expect("a workflow to delete");
        let reference = WorkflowReference {
            name: gone.name,
            type_: gone.type_,
            status: recorded,
            wave: None,
        };
        workflows.insert(key.into(), ObservedWorkflow::deleted(&reference));
        workflows
    }

    #[test]
    fn a_workflow_deleted_while_it_runs_fails_the_group_naming_the_deletion() {
        let running = observed(&[("pre-check", Phase::Completed), ("setup", Phase::Running)]);
        let group = after(
            &sample(),
            &plan_group(&sample(), &running, &all_loaded(), now()),
        );
        let gone = with_deleted(running, "setup", Phase::Running);
        let plan = plan_group(&group, &gone, &all_loaded(), now());
        assert!(
            plan.create.is_none() && plan.rerun.is_none(),
            "not made again"
        );
        assert_eq!(plan.status.phase, Some(Phase::Failed));
        let (status, why, message) = condition(&plan);
        assert_eq!((status, why), ("False", reason::WORKFLOW_FAILED));
        assert!(
            message.contains("wf-setup (setup) failed: it was deleted while it ran"),
            "{message}"
        );
        assert!(!plan.keep_locks);
    }

    #[test]
    fn a_completed_workflow_deleted_later_still_counts_and_a_rerun_makes_a_deleted_one_anew() {
        // Deleted after it completed, while the next runs: not run again.
        let running = observed(&[("pre-check", Phase::Completed), ("setup", Phase::Running)]);
        let group = after(
            &sample(),
            &plan_group(&sample(), &running, &all_loaded(), now()),
        );
        let gone = with_deleted(running, "pre-check", Phase::Completed);
        let plan = plan_group(&group, &gone, &all_loaded(), now());
        assert!(plan.create.is_none() && plan.rerun.is_none());
        assert_eq!(plan.status.phase, Some(Phase::Running));
        assert_eq!(plan.status.progress.as_deref(), Some("1/3"));

        // A failed group whose failed Workflow is then deleted: its re-run makes it anew.
        let mut group = failed_at_setup();
        let failed = observed(&[("pre-check", Phase::Completed), ("setup", Phase::Failed)]);
        let gone = with_deleted(failed, "setup", Phase::Failed);
        group.spec.rerun = Some(RerunRequest {
            id: "again".into(),
            ..RerunRequest::default()
        });
        let started = plan_group(&group, &gone, &all_loaded(), now());
        let group = after(&group, &started);
        let plan = plan_group(&group, &gone, &all_loaded(), now());
        let created = plan.create.as_ref().expect("setup made again");
        assert_eq!(created.spec.type_, "setup");
        assert_eq!(created.spec.rerun.as_ref().map(|r| r.run), Some(2));
    }

    #[test]
    fn an_edit_of_a_finished_group_is_acknowledged_and_runs_nothing() {
        let mut group = sample();
        let all = [
            ("pre-check", Phase::Completed),
            ("setup", Phase::Completed),
            ("post-check", Phase::Completed),
        ];
        let done = plan_group(&group, &observed(&all), &all_loaded(), now());
        assert_eq!(done.status.phase, Some(Phase::Completed));
        group.status = Some(done.status.clone());
        // New params applied from git: the API server counts a new generation.
        group.metadata.generation = Some(2);
        group
            .spec
            .params
            .insert("pre-check".into(), serde_json::json!({"minDiskMiB": 2048}));
        let later = Timestamp::from_second(now().as_second() + 3600).expect("a time");
        let plan = plan_group(&group, &observed(&all), &all_loaded(), later);
        assert!(plan.create.is_none() && plan.rerun.is_none() && plan.events.is_empty());
        assert_eq!(plan.status.phase, Some(Phase::Completed));
        assert_eq!(plan.status.observed_generation, Some(2));
        assert_eq!(kstatus_conditions(&plan.status.conditions), READY);
        for (new, old) in plan.status.conditions.iter().zip(&done.status.conditions) {
            assert_eq!(new.observed_generation, Some(2), "{new:?}");
            // Still the state it reached then.
            assert_eq!(
                (
                    &new.type_,
                    &new.status,
                    &new.reason,
                    &new.last_transition_time
                ),
                (
                    &old.type_,
                    &old.status,
                    &old.reason,
                    &old.last_transition_time
                )
            );
        }
        assert_eq!(plan.status.completion_time, done.status.completion_time);
        // Acknowledged once: the next reconcile has nothing to write.
        group.status = Some(plan.status.clone());
        let again = plan_group(&group, &observed(&all), &all_loaded(), later);
        assert_eq!(Some(again.status), group.status);
    }

    #[test]
    fn a_workflow_whose_step_pod_is_refused_for_now_has_the_group_say_why_it_waits() {
        let mut wfs = observed(&[("pre-check", Phase::Running)]);
        if let Some(w) = wfs.get_mut("pre-check") {
            w.reason = "PodRefused".into();
            w.message = "step validate-nodes waits: its pod was refused: exceeded quota: none; trying again shortly".into();
        }
        let plan = plan_group(&sample(), &wfs, &all_loaded(), now());
        let (status, why, message) = condition(&plan);
        assert_eq!((status, why), ("Unknown", "PodRefused"));
        assert!(
            message.starts_with("workflow wf-pre-check (pre-check): step validate-nodes waits"),
            "{message}"
        );
        assert!(message.contains("exceeded quota: none"), "{message}");
        let reasons: Vec<_> = plan.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(reasons, ["PodRefused"]);
    }
}

//! The builder of one plan: the status being edited, the events, and the answers that end
//! it.

use super::*;

/// Builds one plan: the status being edited, the events, and the answers that end it.
pub(super) struct Planner<'a> {
    pub(super) group: &'a WorkflowGroup,
    pub(super) old: &'a WorkflowGroupStatus,
    pub(super) status: WorkflowGroupStatus,
    pub(super) events: Vec<Transition>,
    pub(super) now: Timestamp,
    pub(super) keep_locks: bool,
    pub(super) pause: bool,
    /// The group's run: 1, or the re-run it is in.
    pub(super) run: u32,
}

impl<'a> Planner<'a> {
    pub(super) fn new(
        group: &'a WorkflowGroup,
        old: &'a WorkflowGroupStatus,
        now: Timestamp,
    ) -> Self {
        let mut status = old.clone();
        status.observed_generation = group.metadata.generation;
        status.start_time.get_or_insert(Time(now));
        // The waves are listed afresh by each plan, from the Workflows observed.
        status.rollout = group.spec.rollout.as_ref().map(|_| {
            let old = old.rollout.clone().unwrap_or_default();
            RolloutStatus {
                progress: format!("0/{}", waves(group).map_or(0, |w| w.len())),
                paused_after_wave: old.paused_after_wave,
                ..RolloutStatus::default()
            }
        });
        note_pause(&mut status, group, now);
        Self {
            group,
            old,
            status,
            events: Vec::new(),
            now,
            keep_locks: false,
            pause: false,
            run: current_run(old),
        }
    }

    pub(super) fn update_progress(&mut self) {
        let completed = self
            .status
            .workflows
            .iter()
            .filter(|w| w.status == Phase::Completed)
            .count();
        let total = units(self.group).len();
        self.status.progress = Some(format!("{completed}/{total}"));
    }

    /// Lists wave `wave` (of a rollout) as `phase`, with its failed targets; a wave that has
    /// just finished is also an Event.
    pub(super) fn record_wave(
        &mut self,
        wave: Option<u32>,
        phase: Phase,
        targets: &[Target],
        failed: &BTreeMap<String, String>,
    ) {
        let (Some(wave), Some(rollout)) = (wave, self.status.rollout.as_mut()) else {
            return;
        };
        let finished_before = self
            .old
            .rollout
            .iter()
            .flat_map(|r| &r.waves)
            .find(|w| w.wave == wave && w.phase.is_finished())
            .and_then(|w| w.finished_at.clone());
        let entry = WaveStatus {
            wave,
            phase,
            finished_at: phase
                .is_finished()
                .then(|| finished_before.unwrap_or(Time(self.now))),
            targets: targets.iter().map(|t| t.name.clone()).collect(),
            failed: failed
                .iter()
                .take(MAX_LISTED_FAILURES)
                .map(|(name, why)| format!("{name}: {why}"))
                .collect(),
        };
        rollout.waves.retain(|w| w.wave != wave);
        rollout.waves.push(entry);
        let finished = rollout
            .waves
            .iter()
            .filter(|w| w.phase.is_finished())
            .count();
        let total = rollout
            .progress
            .split_once('/')
            .map_or("0", |(_, t)| t)
            .to_string();
        rollout.progress = format!("{finished}/{total}");
        let was_finished = self
            .old
            .rollout
            .iter()
            .flat_map(|r| &r.waves)
            .any(|w| w.wave == wave && w.phase.is_finished());
        if phase.is_finished() && !was_finished {
            let event = if phase == Phase::Completed {
                let message = format!(
                    "wave {wave} completed on {} target{}{}",
                    targets.len(),
                    if targets.len() == 1 { "" } else { "s" },
                    if failed.is_empty() {
                        String::new()
                    } else {
                        format!(", {} failed: {}", failed.len(), failure_list(failed))
                    }
                );
                Transition::normal(reason::WAVE_COMPLETED, message)
            } else {
                let message = format!("wave {wave} failed: {}", failure_list(failed));
                Transition::warning(reason::WAVE_FAILED, message)
            };
            self.events.push(event.once());
        }
    }

    /// Records how many targets failed so far.
    /// Acts on the unit whose turn it is (`act`), in a wave that got as far as `progress`.
    pub(super) fn act(
        mut self,
        unit: &Unit<'_>,
        act: Act<'_>,
        progress: &WaveProgress,
        waves: usize,
        plugins: &dyn GroupPlugins,
    ) -> GroupPlan {
        let targets = unit.targets;
        if let Act::Paused = act {
            self.keep_locks = progress.started;
            if progress.started {
                self.record_wave(unit.wave, Phase::Running, targets, &progress.failed);
            }
            return self.wait(
                reason::PAUSED,
                "paused: no new workflow starts until spec.paused is cleared".into(),
            );
        }
        self.keep_locks = true;
        self.record_wave(unit.wave, Phase::Running, targets, &progress.failed);
        let t = &unit.type_;
        match act {
            Act::RunAgain(w, rerun) => self.rerun(unit, w, rerun.clone(), waves),
            // Its step's pod is refused for now (a full quota), or a step waits for approval:
            // the group says why.
            Act::Wait(w, _) if TOLD_REASONS.contains(&w.reason.as_str()) => {
                let message = format!("workflow {} ({t}): {}", w.name, w.message);
                self.wait(&w.reason, message)
            }
            Act::Wait(w, Phase::Pending) => {
                let message = format!("workflow {} ({t}) is pending", w.name);
                self.wait(reason::RUNNING, message)
            }
            Act::Wait(w, _) => {
                let message = running_message(&w.name, t, unit.wave, waves);
                self.wait(reason::RUNNING, message)
            }
            // (Paused was answered above.)
            Act::Create | Act::Paused => self.create(unit, waves, plugins),
        }
    }

    /// The wave that would start now waits: for its window, or for the rest after the last
    /// wave to end. It holds no lock meanwhile, and looks again when the wait is over.
    pub(super) fn hold(mut self, hold: WaveHold) -> GroupPlan {
        self.keep_locks = false;
        let until = hold.until;
        let at = Timestamp::from_second(until.as_second()).unwrap_or(until);
        if let Some(rollout) = self.status.rollout.as_mut() {
            match hold.reason {
                reason::WAITING_FOR_WINDOW => rollout.next_window = Some(Time(at)),
                _ => rollout.next_wave_at = Some(Time(at)),
            }
        }
        let wait = until.duration_since(self.now);
        let mut plan = self.wait(hold.reason, hold.message);
        plan.requeue_after = Some(
            std::time::Duration::try_from(wait)
                .unwrap_or_default()
                .clamp(MIN_HOLD_RECHECK, MAX_HOLD_RECHECK),
        );
        plan
    }

    /// The failure budget is exceeded after a wave: the group fails (after the last wave, or
    /// by `onBudgetExceeded: Fail`), or pauses and says how to go on.
    pub(super) fn over_budget(mut self, over: OverBudget, last: bool) -> GroupPlan {
        let OverBudget { wave, mut message } = over;
        let policy = self
            .group
            .spec
            .rollout
            .as_ref()
            .map(|r| r.on_budget_exceeded)
            .unwrap_or_default();
        if last || policy == BudgetPolicy::Fail {
            return self.finish(Phase::Failed, reason::FAILURE_BUDGET_EXCEEDED, message);
        }
        message.push_str(&format!(
            "; paused after wave {wave}: clear spec.paused to accept these failures and start wave {}",
            wave + 1
        ));
        self.pause = !self.group.spec.paused;
        self.keep_locks = false;
        if let Some(r) = self.status.rollout.as_mut() {
            r.paused_after_wave = Some(wave);
        }
        self.wait(reason::FAILURE_BUDGET_EXCEEDED, message)
    }

    pub(super) fn count_failed(&mut self, failed: usize) {
        if let Some(rollout) = self.status.rollout.as_mut() {
            rollout.failed_targets = u32::try_from(failed).unwrap_or(u32::MAX);
        }
    }

    pub(super) fn condition(&mut self, status: ConditionStatus, reason: &str, message: &str) {
        let generation = self.group.metadata.generation;
        set_succeeded(
            &mut self.status.conditions,
            succeeded_condition(status, reason, message, generation, self.now),
        );
    }

    pub(super) fn done(self) -> GroupPlan {
        GroupPlan {
            status: self.status,
            events: self.events,
            keep_locks: self.keep_locks,
            pause: self.pause,
            ..GroupPlan::default()
        }
    }

    /// Not finished: Running once a Workflow exists, else Pending, with `reason`. A new reason
    /// or message other than plain progress is also a Warning event.
    pub(super) fn wait(mut self, reason: &str, message: String) -> GroupPlan {
        let started = !self.status.workflows.is_empty();
        self.status.phase = Some(if started {
            Phase::Running
        } else {
            Phase::Pending
        });
        let changed = !succeeded(&self.old.conditions)
            .is_some_and(|c| c.reason == reason && c.message == message);
        let normal = [
            reason::WAITING_FOR_TARGETS,
            reason::WAITING_FOR_APPROVAL,
            reason::WAITING_FOR_WINDOW,
            reason::WAITING_BETWEEN_WAVES,
        ];
        if changed && normal.contains(&reason) {
            self.events
                .push(Transition::normal(reason, message.clone()));
        } else if changed && reason != reason::RUNNING {
            self.events
                .push(Transition::warning(reason, message.clone()));
        }
        self.condition(ConditionStatus::Unknown, reason, &message);
        self.done()
    }

    pub(super) fn finish(mut self, phase: Phase, reason: &str, message: String) -> GroupPlan {
        self.keep_locks = false;
        self.status.phase = Some(phase);
        self.status.completion_time.get_or_insert(Time(self.now));
        if let Some(run) = self
            .status
            .runs
            .last_mut()
            .filter(|r| !r.phase.is_finished())
        {
            run.phase = phase;
            run.completion_time = Some(Time(self.now));
            run.message.clone_from(&message);
        }
        let (status, event) = if phase == Phase::Completed {
            (
                ConditionStatus::True,
                Transition::normal(reason::GROUP_COMPLETED, message.clone()).once(),
            )
        } else {
            (
                ConditionStatus::False,
                Transition::warning(reason::GROUP_FAILED, message.clone()).once(),
            )
        };
        self.condition(status, reason, &message);
        self.events.push(event);
        self.done()
    }

    /// A plugin could not answer now: say so and retry later.
    pub(super) fn unavailable(self, error: PluginError) -> GroupPlan {
        let message = format!("{error}; asking again shortly");
        let mut plan = self.wait(reason::PLUGIN_UNAVAILABLE, message);
        plan.unavailable = Some(error);
        plan
    }

    /// Asks about the plugins of `due`; the plan ends here when one is missing, refuses the
    /// params or cannot answer.
    pub(super) fn check_plugins(
        self,
        due: &[&String],
        plugins: &dyn GroupPlugins,
    ) -> ControlFlow<GroupPlan, Self> {
        let mut missing = Vec::new();
        let mut why = Vec::new();
        let mut invalid = Vec::new();
        for t in due {
            match plugins.check(t) {
                PluginState::Missing => {
                    missing.push(format!("{t:?}"));
                    why.extend(plugins.why_missing(t));
                }
                PluginState::Loaded(Ok(())) => {}
                PluginState::Loaded(Err(e)) if e.is_transient() => {
                    return ControlFlow::Break(self.unavailable(e));
                }
                PluginState::Loaded(Err(e)) => invalid.push(format!("spec.params.{t}: {e}")),
            }
        }
        if !missing.is_empty() {
            let (s, verb) = if missing.len() > 1 {
                ("s", "they are")
            } else {
                ("", "it is")
            };
            let mut message = format!(
                "no plugin is loaded for workflow type{s} {}; the group starts when {verb} added to the plugin directory",
                missing.join(", "),
            );
            if !why.is_empty() {
                message = format!("{message} (or its ConfigMap); {}", why.join("; "));
            }
            return ControlFlow::Break(self.wait(reason::PLUGIN_MISSING, message));
        }
        if !invalid.is_empty() {
            return ControlFlow::Break(self.wait(reason::INVALID_PARAMS, invalid.join("; ")));
        }
        ControlFlow::Continue(self)
    }

    /// Asks the Workflow `w` of `unit`, of an earlier run, to run again in this one.
    pub(super) fn rerun(
        mut self,
        unit: &Unit<'_>,
        w: &ObservedWorkflow,
        rerun: WorkflowRerun,
        waves: usize,
    ) -> GroupPlan {
        if let Some(r) = self.status.workflows.iter_mut().find(|r| r.name == w.name) {
            r.status = Phase::Running;
        }
        self.update_progress();
        self.status.phase = Some(Phase::Running);
        self.condition(
            ConditionStatus::Unknown,
            reason::RUNNING,
            &running_message(&w.name, &unit.type_, unit.wave, waves),
        );
        let mut plan = self.done();
        plan.rerun = Some(RerunPatch {
            workflow: w.name.clone(),
            rerun,
            targets: unit.targets.to_vec(),
        });
        plan
    }

    /// Templates the Workflow of `unit` and lists it as created.
    pub(super) fn create(
        mut self,
        unit: &Unit<'_>,
        waves: usize,
        plugins: &dyn GroupPlugins,
    ) -> GroupPlan {
        let type_name = unit.type_.as_str();
        let run = self.run;
        let workflow = match plugins.render(unit) {
            // Created in a re-run: it belongs to that run from the start.
            Ok(mut workflow) => {
                workflow.spec.rerun = (run > 1).then(|| WorkflowRerun {
                    run,
                    ..WorkflowRerun::default()
                });
                workflow
            }
            Err(RenderError::Plugin(e)) if e.is_transient() => return self.unavailable(e),
            Err(e) => {
                let message = format!("plugin {type_name} could not template the workflow: {e}");
                return self.wait(reason::TEMPLATE_FAILED, message);
            }
        };
        let name = workflow.name_any();
        self.status.workflows.push(WorkflowReference {
            name: name.clone(),
            type_: type_name.to_string(),
            status: Phase::Running,
            wave: unit.wave,
        });
        self.update_progress();
        self.status.phase = Some(Phase::Running);
        // The words the group uses once it sees the new Workflow running: seeing it then
        // changes nothing, and costs no status write. No Event either: the status lists the
        // Workflow, and an Event per Workflow would be one more write per Workflow.
        self.condition(
            ConditionStatus::Unknown,
            reason::RUNNING,
            &running_message(&name, type_name, unit.wave, waves),
        );
        let mut plan = self.done();
        plan.create = Some(workflow);
        plan
    }
}

/// The group's condition while its Workflow `name` of type `type_name` runs (in `wave` of
/// `waves`).
pub(super) fn running_message(
    name: &str,
    type_name: &str,
    wave: Option<u32>,
    waves: usize,
) -> String {
    match wave {
        None => format!("workflow {name} ({type_name}) is running"),
        Some(w) => format!("wave {w}/{waves}: workflow {name} ({type_name}) is running"),
    }
}

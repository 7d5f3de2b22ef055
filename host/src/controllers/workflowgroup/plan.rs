//! What the WorkflowGroup controller decides, as pure functions of the group, its observed
//! Workflows and what its plugins answer: tested without a cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::api::{
    ConditionStatus, Phase, Workflow, WorkflowGroup, WorkflowGroupStatus, WorkflowReference,
};
use crate::controllers::reason;
use crate::controllers::status::{
    Transition, derive_kstatus_conditions, set_succeeded, succeeded, succeeded_condition,
};
use crate::graph::check_dns_label;
use crate::plugin::PluginError;
use crate::render::RenderError;

/// A Workflow of the group, as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedWorkflow {
    pub name: String,
    /// Its phase, once its controller has written one.
    pub phase: Option<Phase>,
    /// Its `Succeeded` condition's reason.
    pub reason: String,
    /// Its `Succeeded` condition's message.
    pub message: String,
}

impl ObservedWorkflow {
    /// What the group needs to know of `workflow`.
    pub fn of(workflow: &Workflow) -> Self {
        let status = workflow.status.as_ref();
        let condition = status.and_then(|s| succeeded(&s.conditions));
        ObservedWorkflow {
            name: workflow.name_any(),
            phase: status.and_then(|s| s.phase),
            reason: condition.map(|c| c.reason.clone()).unwrap_or_default(),
            message: condition.map(|c| c.message.clone()).unwrap_or_default(),
        }
    }
}

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
    /// The Workflow of `type_name` for the group, templated by its plugin.
    fn render(&self, type_name: &str) -> Result<Workflow, RenderError>;
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
}

/// Decides what to do with `group`, given its Workflows by type and its plugins. Plugins are
/// asked only about the types due now (a params check is a sandboxed plugin call, so a running
/// group does not pay for it on every reconcile).
pub fn plan_group(
    group: &WorkflowGroup,
    workflows: &BTreeMap<String, ObservedWorkflow>,
    plugins: &dyn GroupPlugins,
    now: Timestamp,
) -> GroupPlan {
    let old = group.status.clone().unwrap_or_default();
    if old.phase.is_some_and(Phase::is_finished) {
        // Nothing moves after the end; a group that finished before the conditions GitOps
        // tools read existed gets them.
        let mut status = old;
        derive_kstatus_conditions(&mut status.conditions);
        return GroupPlan {
            status,
            ..GroupPlan::default()
        };
    }
    let mut plan = Planner::new(group, &old, now);
    let types = &group.spec.workflow_steps;
    // A Workflow the group created is Running in the group's eyes until its own controller
    // says otherwise (Pending while it waits for a schedule or a plugin), so that its
    // controller starting it costs the group no status write.
    let recorded = |name: &str| {
        old.workflows
            .iter()
            .find(|w| w.name == name)
            .map(|w| w.status)
    };
    let workflows: BTreeMap<&String, (&ObservedWorkflow, Phase)> = workflows
        .iter()
        .map(|(t, w)| {
            let phase = w
                .phase
                .or_else(|| recorded(&w.name))
                .unwrap_or(Phase::Running);
            (t, (w, phase))
        })
        .collect();
    plan.status.workflows = types
        .iter()
        .filter_map(|t| {
            workflows.get(t).map(|(w, phase)| WorkflowReference {
                name: w.name.clone(),
                type_: t.clone(),
                status: *phase,
            })
        })
        .collect();
    plan.update_progress();

    if let Some(problem) = spec_problem(group) {
        return plan.wait(reason::INVALID_SPEC, problem);
    }

    // Before anything starts, every type must be runnable: don't begin what cannot finish.
    // Once started, the next type is checked when its turn comes.
    let started = !workflows.is_empty();
    let all_done = workflows.values().all(|(_, p)| *p == Phase::Completed);
    let due: Vec<&String> = if !started {
        types.iter().collect()
    } else if all_done {
        types
            .iter()
            .filter(|t| !workflows.contains_key(*t))
            .take(1)
            .collect()
    } else {
        Vec::new()
    };
    let plan = match plan.check_plugins(&due, plugins) {
        ControlFlow::Continue(plan) => plan,
        ControlFlow::Break(finished) => return finished,
    };

    for t in types {
        match workflows.get(t) {
            Some((_, Phase::Completed)) => continue,
            Some((w, Phase::Failed)) => {
                let message = format!("workflow {} ({t}) failed: {}", w.name, w.message);
                return plan.finish(Phase::Failed, reason::WORKFLOW_FAILED, message);
            }
            // Its step's pod is refused for now (a full quota): the group says why it waits.
            Some((w, Phase::Pending | Phase::Running)) if w.reason == reason::POD_REFUSED => {
                let message = format!("workflow {} ({t}): {}", w.name, w.message);
                return plan.wait(reason::POD_REFUSED, message);
            }
            Some((w, Phase::Pending)) => {
                let message = format!("workflow {} ({t}) is pending", w.name);
                return plan.wait(reason::RUNNING, message);
            }
            Some((w, _)) => return plan.wait(reason::RUNNING, running_message(&w.name, t)),
            None if group.spec.paused => {
                return plan.wait(
                    reason::PAUSED,
                    "paused: no new workflow starts until spec.paused is cleared".into(),
                );
            }
            None => return plan.create(t, plugins),
        }
    }
    let message = format!("all {} workflows completed", types.len());
    plan.finish(Phase::Completed, reason::COMPLETED, message)
}

/// The plan after the Workflow it meant to create turned out to be taken: a Workflow of that
/// name exists and is not this group's. The group waits with a condition saying so.
pub fn name_taken(group: &WorkflowGroup, plan: GroupPlan, now: Timestamp) -> GroupPlan {
    let name = plan.create.as_ref().map(ResourceExt::name_any);
    let Some(name) = name else {
        return plan;
    };
    not_created(
        group,
        plan,
        format!("a Workflow named {name} already exists and does not belong to this group"),
        now,
    )
}

/// The plan after the API server refused the Workflow it meant to create as invalid (a group
/// stored before the CRD's rules existed can carry what the Workflow's rules refuse): the
/// group waits with a condition quoting the API server, instead of retrying for ever.
pub fn workflow_refused(
    group: &WorkflowGroup,
    plan: GroupPlan,
    why: &str,
    now: Timestamp,
) -> GroupPlan {
    let type_name = plan.create.as_ref().map(|w| w.spec.type_.clone());
    let Some(type_name) = type_name else {
        return plan;
    };
    not_created(
        group,
        plan,
        format!("the API server refused the Workflow for {type_name}: {why}"),
        now,
    )
}

/// The plan when the Workflow it meant to create was not created: waiting, saying why.
fn not_created(
    group: &WorkflowGroup,
    mut plan: GroupPlan,
    message: String,
    now: Timestamp,
) -> GroupPlan {
    let Some(workflow) = plan.create.take() else {
        return plan;
    };
    let name = workflow.name_any();
    plan.status.workflows.retain(|w| w.name != name);
    let old = group.status.clone().unwrap_or_default();
    let mut planner = Planner::new(group, &old, now);
    planner.status = plan.status;
    planner.events = plan.events;
    planner.wait(reason::TEMPLATE_FAILED, message)
}

/// Builds one plan: the status being edited, the events, and the answers that end it.
struct Planner<'a> {
    group: &'a WorkflowGroup,
    old: &'a WorkflowGroupStatus,
    status: WorkflowGroupStatus,
    events: Vec<Transition>,
    now: Timestamp,
}

impl<'a> Planner<'a> {
    fn new(group: &'a WorkflowGroup, old: &'a WorkflowGroupStatus, now: Timestamp) -> Self {
        let mut status = old.clone();
        status.observed_generation = group.metadata.generation;
        status.start_time.get_or_insert(Time(now));
        Self {
            group,
            old,
            status,
            events: Vec::new(),
            now,
        }
    }

    fn update_progress(&mut self) {
        let completed = self
            .status
            .workflows
            .iter()
            .filter(|w| w.status == Phase::Completed)
            .count();
        let total = self.group.spec.workflow_steps.len();
        self.status.progress = Some(format!("{completed}/{total}"));
    }

    fn condition(&mut self, status: ConditionStatus, reason: &str, message: &str) {
        let generation = self.group.metadata.generation;
        set_succeeded(
            &mut self.status.conditions,
            succeeded_condition(status, reason, message, generation, self.now),
        );
    }

    fn done(self) -> GroupPlan {
        GroupPlan {
            status: self.status,
            events: self.events,
            ..GroupPlan::default()
        }
    }

    /// Not finished: Running once a Workflow exists, else Pending, with `reason`. A new reason
    /// or message other than plain progress is also a Warning event.
    fn wait(mut self, reason: &str, message: String) -> GroupPlan {
        let started = !self.status.workflows.is_empty();
        self.status.phase = Some(if started {
            Phase::Running
        } else {
            Phase::Pending
        });
        let changed = !succeeded(&self.old.conditions)
            .is_some_and(|c| c.reason == reason && c.message == message);
        if changed && reason != reason::RUNNING {
            self.events
                .push(Transition::warning(reason, message.clone()));
        }
        self.condition(ConditionStatus::Unknown, reason, &message);
        self.done()
    }

    fn finish(mut self, phase: Phase, reason: &str, message: String) -> GroupPlan {
        self.status.phase = Some(phase);
        self.status.completion_time.get_or_insert(Time(self.now));
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
    fn unavailable(self, error: PluginError) -> GroupPlan {
        let message = format!("{error}; asking again shortly");
        let mut plan = self.wait(reason::PLUGIN_UNAVAILABLE, message);
        plan.unavailable = Some(error);
        plan
    }

    /// Asks about the plugins of `due`; the plan ends here when one is missing, refuses the
    /// params or cannot answer.
    fn check_plugins(
        self,
        due: &[&String],
        plugins: &dyn GroupPlugins,
    ) -> ControlFlow<GroupPlan, Self> {
        let mut missing = Vec::new();
        let mut invalid = Vec::new();
        for t in due {
            match plugins.check(t) {
                PluginState::Missing => missing.push(format!("{t:?}")),
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
            let message = format!(
                "no plugin is loaded for workflow type{s} {}; the group starts when {verb} added to the plugin directory",
                missing.join(", "),
            );
            return ControlFlow::Break(self.wait(reason::PLUGIN_MISSING, message));
        }
        if !invalid.is_empty() {
            return ControlFlow::Break(self.wait(reason::INVALID_PARAMS, invalid.join("; ")));
        }
        ControlFlow::Continue(self)
    }

    /// Templates the Workflow of `type_name` and lists it as created.
    fn create(mut self, type_name: &str, plugins: &dyn GroupPlugins) -> GroupPlan {
        let workflow = match plugins.render(type_name) {
            Ok(workflow) => workflow,
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
        });
        self.status.phase = Some(Phase::Running);
        // The words the group uses once it sees the new Workflow running: seeing it then
        // changes nothing, and costs no status write. No Event either: the status lists the
        // Workflow, and an Event per Workflow would be one more write per Workflow.
        self.condition(
            ConditionStatus::Unknown,
            reason::RUNNING,
            &running_message(&name, type_name),
        );
        let mut plan = self.done();
        plan.create = Some(workflow);
        plan
    }
}

/// The group's condition while its Workflow `name` of type `type_name` runs.
fn running_message(name: &str, type_name: &str) -> String {
    format!("workflow {name} ({type_name}) is running")
}

/// What is wrong with the group's spec itself, if anything.
fn spec_problem(group: &WorkflowGroup) -> Option<String> {
    let types = &group.spec.workflow_steps;
    if types.is_empty() {
        return Some("spec.workflowSteps is empty: list at least one workflow type".into());
    }
    let mut seen = BTreeSet::new();
    for t in types {
        if let Err(reason) = check_dns_label(t) {
            return Some(format!(
                "spec.workflowSteps: workflow type {t:?} is not a valid name: {reason}"
            ));
        }
        if !seen.insert(t) {
            return Some(format!(
                "spec.workflowSteps: workflow type {t:?} is listed twice"
            ));
        }
    }
    group
        .spec
        .params
        .keys()
        .find(|k| !seen.contains(k))
        .map(|k| format!("spec.params.{k}: {k:?} is not one of spec.workflowSteps"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::WorkflowSpec;
    use crate::controllers::status::kstatus_conditions;

    fn sample() -> WorkflowGroup {
        let mut group: WorkflowGroup = serde_saphyr::from_str(include_str!(
            "../../../../examples/workflowgroup-sample.yaml"
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
    }

    impl GroupPlugins for Plugins {
        fn check(&self, type_name: &str) -> PluginState {
            self.states
                .get(type_name)
                .cloned()
                .unwrap_or(PluginState::Missing)
        }
        fn render(&self, type_name: &str) -> Result<Workflow, RenderError> {
            if let Some(e) = &self.template_error {
                return Err(RenderError::Plugin(e.clone()));
            }
            Ok(Workflow::new(
                &format!("wf-{type_name}"),
                WorkflowSpec {
                    type_: type_name.into(),
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
                        phase: Some(*p),
                        reason: String::new(),
                        message: "step x failed: boom".into(),
                    },
                )
            })
            .collect()
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
        let plan = name_taken(&group, plan, now());
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
        let plan = workflow_refused(&group, plan, why, now());
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
        let workflows = observed(&[("pre-check", Phase::Completed)]);
        let plan = plan_group(&group, &workflows, &all_loaded(), now());
        assert!(plan.create.is_none());
        assert_eq!(condition(&plan).1, "Paused");
        group.spec.paused = false;
        let plan = plan_group(&group, &workflows, &all_loaded(), now());
        assert_eq!(
            plan.create.as_ref().map(|w| w.spec.type_.as_str()),
            Some("setup")
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
            ..Default::default()
        });
        let plan = plan_group(&group, &BTreeMap::new(), &all_loaded(), now());
        assert!(plan.create.is_none());
        assert_eq!(Some(plan.status), group.status);
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

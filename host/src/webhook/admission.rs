//! What the webhook answers, as pure functions of the admitted group and what its plugins
//! said: tested without a cluster, a TLS socket or a plugin.
//!
//! A group is refused for what its plugins refuse (params, template, the step graph the
//! template returns), and for its own words that are not words of their kind (a target's name
//! or role, `clusterName`, a workflow type: `WorkflowGroupSpec::words_problem`), which the CRD
//! refuses too unless it predates the rule, and for a rollout whose waves could never start
//! (`Rollout::timing_problem`). Anything that keeps a plugin from answering (no plugin loaded, a
//! timeout, a trap) lets the group in with a warning: the controllers check it again when it
//! runs and report it on the group, so a webhook that could not decide never blocks an apply.

use std::collections::BTreeSet;

use workflow_model::text::{self, Marker};

use crate::api::WorkflowGroup;
use crate::plugin::{PluginError, PluginErrorKind};
use crate::render::RenderError;

/// Longest warning we return: the API server passes warnings to clients, which show them
/// whole, and asks for at most 256 characters.
const MAX_WARNING_BYTES: usize = 256;
/// Longest refusal message: kubectl prints it on one line after the webhook's name.
const MAX_MESSAGE_BYTES: usize = 4096;

/// What one workflow type's plugin answered about the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeAnswer {
    /// The params are valid and the template rendered to a valid step graph.
    Accepted,
    /// No plugin of the type is loaded here: nothing can be checked now.
    NoPlugin,
    /// The plugin refused the group: its own words, with the field they concern.
    Refused(String),
    /// The plugin could not answer (timeout, trap, out of memory, over the admission budget):
    /// why, for the warning.
    Unanswered(String),
}

impl TypeAnswer {
    /// The answer for `type_name` from rendering the group with its plugin, as the group
    /// controller does (params against the schema, `validate`, `template`, the step graph).
    pub fn of_render(type_name: &str, rendered: Result<(), RenderError>) -> Self {
        match rendered {
            Ok(()) => TypeAnswer::Accepted,
            Err(RenderError::NoPlugin(_)) => TypeAnswer::NoPlugin,
            Err(RenderError::TypeNotInGroup { .. }) => TypeAnswer::Accepted,
            Err(RenderError::Plugin(error)) => Self::of_plugin_error(type_name, error),
            Err(error @ RenderError::Reserved(_)) => {
                TypeAnswer::Refused(format!("workflow type {type_name}: {error}"))
            }
        }
    }

    /// Whether `error` is the plugin's verdict on the group (refuse) or a failure of the
    /// plugin itself (let in, with a warning).
    fn of_plugin_error(type_name: &str, error: PluginError) -> Self {
        match error.kind() {
            PluginErrorKind::Refused if matches!(error, PluginError::InvalidParams { .. }) => {
                TypeAnswer::Refused(format!("spec.params.{type_name}: {error}"))
            }
            PluginErrorKind::Refused => {
                TypeAnswer::Refused(format!("workflow type {type_name}: {error}"))
            }
            // A template that is not a runnable graph (a cycle, an unknown dependency, a
            // duplicate name): the controllers would fail the group.
            PluginErrorKind::Broken if matches!(error, PluginError::InvalidOutput { .. }) => {
                TypeAnswer::Refused(format!("workflow type {type_name}: {error}"))
            }
            PluginErrorKind::Broken | PluginErrorKind::Transient | PluginErrorKind::CannotLoad => {
                TypeAnswer::Unanswered(error.to_string())
            }
        }
    }
}

/// The webhook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let the group in; `warnings` (maybe none) go back to the user.
    Allowed { warnings: Vec<String> },
    /// Refuse it, with the plugins' words.
    Refused { message: String },
}

impl Verdict {
    /// `allowed`, `warned` or `refused`: the metrics label.
    pub fn result(&self) -> &'static str {
        match self {
            Verdict::Allowed { warnings } if warnings.is_empty() => "allowed",
            Verdict::Allowed { .. } => "warned",
            Verdict::Refused { .. } => "refused",
        }
    }

    fn allowed() -> Self {
        Verdict::Allowed {
            warnings: Vec::new(),
        }
    }
}

/// The verdict from each type's answer, in the group's order: refused when any plugin
/// refused (every refusal named), else allowed with a warning per type nobody could check.
pub fn decide(answers: &[(String, TypeAnswer)]) -> Verdict {
    let refusals: Vec<&str> = answers
        .iter()
        .filter_map(|(_, a)| match a {
            TypeAnswer::Refused(message) => Some(message.as_str()),
            _ => None,
        })
        .collect();
    if !refusals.is_empty() {
        let message = refusals.join("; ");
        return Verdict::Refused {
            message: text::truncate(&message, MAX_MESSAGE_BYTES, Marker::Length).into_owned(),
        };
    }
    let warnings = answers
        .iter()
        .filter_map(|(t, a)| match a {
            TypeAnswer::NoPlugin => Some(format!(
                "no plugin is loaded for workflow type {t:?}: not checked; the group waits for it"
            )),
            TypeAnswer::Unanswered(why) => Some(format!(
                "workflow type {t:?} not checked (the operator reports it on the group): {why}"
            )),
            TypeAnswer::Accepted | TypeAnswer::Refused(_) => None,
        })
        .map(|w| text::truncate(&w, MAX_WARNING_BYTES, Marker::Length).into_owned())
        .collect();
    Verdict::Allowed { warnings }
}

/// What a change must touch for the plugins to be asked again: what they are given (types,
/// params, targets, cluster). Anything else (labels, `paused`, a finalizer removed while the
/// group is deleted, status) is let through without a plugin call, so that a plugin update
/// that refuses old groups never blocks their cleanup.
fn reviewed_fields(group: &WorkflowGroup) -> serde_json::Value {
    serde_json::json!({
        "workflowSteps": group.spec.workflow_steps,
        "params": group.spec.params,
        "targets": group.spec.targets,
        "clusterName": group.spec.cluster_name,
    })
}

/// The workflow types to ask about `group`, or why none need asking (`Some(verdict)`): a
/// group being deleted, or an update that changes nothing the plugins see (let in), or a word
/// of its own that is not a word of its kind (refused, naming it).
pub fn types_to_review(
    group: &WorkflowGroup,
    old: Option<&WorkflowGroup>,
) -> Result<Vec<String>, Verdict> {
    if group.metadata.deletion_timestamp.is_some() {
        return Err(Verdict::allowed());
    }
    // A rollout whose waves could never start, or whose rest is no duration: refused when it
    // is set or changed (an older group keeps whatever it had).
    let rollout = group.spec.rollout.as_ref();
    if rollout != old.and_then(|o| o.spec.rollout.as_ref())
        && let Some(refused) = rollout.and_then(crate::api::Rollout::timing_problem)
    {
        return Err(Verdict::Refused {
            message: refused.to_string(),
        });
    }
    if let Some(old) = old
        && reviewed_fields(old) == reviewed_fields(group)
    {
        return Err(Verdict::allowed());
    }
    if let Some(refused) = group.spec.words_problem() {
        let message = refused.to_string();
        return Err(Verdict::Refused {
            message: text::truncate(&message, MAX_MESSAGE_BYTES, Marker::Length).into_owned(),
        });
    }
    // Listed twice is a spec problem the controllers report; ask once.
    let mut seen = BTreeSet::new();
    Ok(group
        .spec
        .workflow_steps
        .iter()
        .filter(|t| seen.insert(t.as_str()))
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn sample() -> WorkflowGroup {
        serde_saphyr::from_str(include_str!("../../../examples/workflowgroup-sample.yaml"))
            .expect("the sample group")
    }

    fn refused_params() -> RenderError {
        RenderError::Plugin(PluginError::InvalidParams {
            type_name: "pre-check".into(),
            message:
                "invalid params at `requiredCommands[0]`: \"rm -rf\" is not a valid command name"
                    .into(),
        })
    }

    #[test]
    fn params_the_plugin_refuses_are_refused_with_its_words_and_the_field() {
        let answers = vec![
            (
                "pre-check".to_string(),
                TypeAnswer::of_render("pre-check", Err(refused_params())),
            ),
            ("setup".to_string(), TypeAnswer::of_render("setup", Ok(()))),
        ];
        let Verdict::Refused { message } = decide(&answers) else {
            panic!("not refused: {answers:?}");
        };
        assert_eq!(
            message,
            "spec.params.pre-check: invalid parameters for workflow type pre-check: invalid \
             params at `requiredCommands[0]`: \"rm -rf\" is not a valid command name"
        );
    }

    #[test]
    fn a_template_with_a_cycle_is_refused_naming_the_cycle() {
        let cycle = crate::graph::GraphError::Cycle(vec!["a".into(), "b".into(), "a".into()]);
        let error = RenderError::Plugin(PluginError::InvalidOutput {
            plugin: "hostile (hostile.wasm)".into(),
            call: "template",
            reason: cycle.to_string(),
        });
        let answers = vec![(
            "hostile".to_string(),
            TypeAnswer::of_render("hostile", Err(error)),
        )];
        let Verdict::Refused { message } = decide(&answers) else {
            panic!("not refused");
        };
        assert!(message.starts_with("workflow type hostile: "), "{message}");
        assert!(message.contains("a -> b -> a"), "{message}");
    }

    #[test]
    fn every_refusing_type_is_named_in_one_message() {
        let answers = vec![
            ("a".to_string(), TypeAnswer::Refused("first".into())),
            ("b".to_string(), TypeAnswer::NoPlugin),
            ("c".to_string(), TypeAnswer::Refused("second".into())),
        ];
        assert_eq!(
            decide(&answers),
            Verdict::Refused {
                message: "first; second".into()
            }
        );
    }

    #[test]
    fn a_type_without_a_plugin_is_let_in_with_a_warning_naming_it() {
        let answers = vec![
            ("pre-check".to_string(), TypeAnswer::Accepted),
            (
                "later".to_string(),
                TypeAnswer::of_render("later", Err(RenderError::NoPlugin("later".into()))),
            ),
        ];
        let verdict = decide(&answers);
        assert_eq!(verdict.result(), "warned");
        let Verdict::Allowed { warnings } = verdict else {
            panic!("refused");
        };
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("\"later\""), "{warnings:?}");
    }

    #[rstest::rstest]
    #[case::timeout(PluginError::Timeout { plugin: "p".into(), call: "validate", limit: Duration::from_secs(1) })]
    #[case::trap(PluginError::Trap { plugin: "p".into(), call: "template", message: "unreachable".into() })]
    #[case::memory(PluginError::MemoryExhausted { plugin: "p".into(), call: "template", limit_bytes: 1 << 20 })]
    #[case::busy(PluginError::Instantiate { plugin: "p".into(), call: "validate", reason: "busy".into() })]
    fn a_plugin_that_cannot_answer_lets_the_group_in_with_a_short_warning(
        #[case] error: PluginError,
    ) {
        let answers = vec![(
            "p".to_string(),
            TypeAnswer::of_render("p", Err(RenderError::Plugin(error.clone()))),
        )];
        let Verdict::Allowed { warnings } = decide(&answers) else {
            panic!("refused for {error}");
        };
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].len() <= MAX_WARNING_BYTES);
        assert!(warnings[0].contains("not checked"), "{warnings:?}");
    }

    #[test]
    fn accepted_by_every_plugin_is_allowed_without_warnings() {
        let answers = vec![
            ("a".to_string(), TypeAnswer::Accepted),
            ("b".to_string(), TypeAnswer::Accepted),
        ];
        assert_eq!(decide(&answers), Verdict::allowed());
        assert_eq!(decide(&answers).result(), "allowed");
    }

    #[test]
    fn a_new_group_is_reviewed_once_per_type_in_its_order() {
        let mut group = sample();
        group.spec.workflow_steps.push("pre-check".into());
        assert_eq!(
            types_to_review(&group, None),
            Ok(vec![
                "pre-check".into(),
                "setup".into(),
                "post-check".into()
            ])
        );
    }

    #[test]
    fn an_update_that_changes_nothing_the_plugins_see_is_let_through_unasked() {
        let old = sample();
        let mut new = old.clone();
        new.spec.paused = true;
        new.metadata
            .labels
            .get_or_insert_default()
            .insert("x".into(), "y".into());
        assert_eq!(types_to_review(&new, Some(&old)), Err(Verdict::allowed()));
        new.spec
            .params
            .insert("pre-check".into(), serde_json::json!({"osFamilies": ["x"]}));
        assert!(types_to_review(&new, Some(&old)).is_ok());
    }

    #[test]
    fn a_group_whose_target_name_or_role_is_not_a_word_of_its_kind_is_refused_naming_it() {
        let mut group = sample();
        group.spec.targets[2].name = "node-3;reboot".into();
        assert_eq!(
            types_to_review(&group, None),
            Err(Verdict::Refused {
                message: "spec.targets[2].name: \"node-3;reboot\" is not a valid DNS-1123 \
                          subdomain: only lowercase letters, digits, '-' and '.' are allowed"
                    .into()
            })
        );
        let mut group = sample();
        group.spec.targets[0].role = "-Master".into();
        let Err(Verdict::Refused { message }) = types_to_review(&group, None) else {
            panic!("a role starting with '-' is let in");
        };
        assert!(
            message.starts_with("spec.targets[0].role: \"-Master\" is not a valid role"),
            "{message}"
        );
        // An update that adds such a word is refused too; the sample itself passes.
        let old = sample();
        let mut new = sample();
        new.spec.cluster_name = "test\u{1b}[2J".into();
        assert!(matches!(
            types_to_review(&new, Some(&old)),
            Err(Verdict::Refused { .. })
        ));
        assert!(types_to_review(&sample(), None).is_ok());
    }

    #[test]
    fn a_rollout_whose_waves_could_never_start_is_refused_when_it_is_set_or_changed() {
        let never = crate::api::Rollout {
            wave_size: crate::api::IntOrString::Int(1),
            max_failed_targets: None,
            on_budget_exceeded: crate::api::BudgetPolicy::Fail,
            pause_between_waves: None,
            window: Some(crate::api::MaintenanceWindow {
                days: Vec::new(),
                start: "02:00".into(),
                end: "02:00".into(),
                time_zone: None,
            }),
            health_gate: None,
        };
        let mut group = sample();
        group.spec.rollout = Some(never.clone());
        let Err(Verdict::Refused { message }) = types_to_review(&group, None) else {
            panic!("a window that never opens is let in");
        };
        assert!(
            message.starts_with("spec.rollout.window.end: the window opens and closes at 02:00"),
            "{message}"
        );
        let mut paused = group.clone();
        paused.spec.rollout = Some(crate::api::Rollout {
            window: None,
            pause_between_waves: Some("soon".into()),
            ..never
        });
        let Err(Verdict::Refused { message }) = types_to_review(&paused, Some(&sample())) else {
            panic!("a pause that is no duration is let in");
        };
        assert!(
            message.starts_with("spec.rollout.pauseBetweenWaves: "),
            "{message}"
        );
        // A group stored with it before the rule is not blocked by an unrelated change.
        let mut relabelled = group.clone();
        relabelled.metadata.labels = Some([("team".to_string(), "ops".to_string())].into());
        assert_eq!(
            types_to_review(&relabelled, Some(&group)),
            Err(Verdict::allowed())
        );
    }

    #[test]
    fn a_group_being_deleted_is_let_through_unasked() {
        let mut group = sample();
        group.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert_eq!(types_to_review(&group, None), Err(Verdict::allowed()));
    }
}

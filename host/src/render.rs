//! From a WorkflowGroup and a workflow type's plugin to the Workflow the operator creates.
//!
//! One code path for the controller and for `workflow-operator plugin render`, so what an
//! author sees without a cluster is what the operator does.

use std::collections::BTreeMap;

use kube::{Resource, ResourceExt, api::ObjectMeta};
use sha2::{Digest, Sha256};
use workflow_model::text;

use crate::api::{
    ANNOTATION_PLUGIN_DIGEST, LABEL_GROUP_NAME, LABEL_WAVE, LABEL_WORKFLOW_TYPE, Workflow,
    WorkflowGroup, WorkflowSpec,
};
use crate::plugin::{GroupContext, Plugin, PluginError, Target};

/// Why a Workflow could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The plugin's type is not one of the group's `workflowSteps`.
    #[error("workflow type {type_name:?} is not in the group's workflowSteps ({steps})")]
    TypeNotInGroup { type_name: String, steps: String },
    /// No plugin of the type is loaded (it was removed since the group was checked).
    #[error("no plugin is loaded for workflow type {0:?}")]
    NoPlugin(String),
    /// The plugin failed or returned something unusable.
    #[error(transparent)]
    Plugin(#[from] PluginError),
}

/// Longest object name we generate: Workflow names also go into label values.
const MAX_NAME: usize = 63;

/// The plugin context for `workflow_type` in `group` at time `now` (Unix seconds).
pub fn plugin_context(group: &WorkflowGroup, workflow_type: &str, now: i64) -> GroupContext {
    context(
        group.name_any(),
        group.namespace(),
        &group.spec.cluster_name,
        &group.spec.targets,
        type_params(group, workflow_type),
        now,
    )
}

/// The plugin context for `workflow`'s steps at time `now` (Unix seconds): its group's name
/// from its label (none for a Workflow applied by hand), its own targets and params.
pub fn workflow_context(workflow: &Workflow, now: i64) -> GroupContext {
    context(
        workflow
            .labels()
            .get(LABEL_GROUP_NAME)
            .cloned()
            .unwrap_or_default(),
        workflow.namespace(),
        &workflow.spec.cluster_name,
        &workflow.spec.targets,
        workflow
            .spec
            .params
            .clone()
            .unwrap_or_else(|| serde_json::json!({})),
        now,
    )
}

/// The one builder of a plugin context. An object without a namespace (a group file that
/// `plugin render` reads) is in `default`, where kubectl would put it.
fn context(
    group_name: String,
    namespace: Option<String>,
    cluster_name: &str,
    targets: &[Target],
    params: serde_json::Value,
    now: i64,
) -> GroupContext {
    GroupContext {
        group_name,
        namespace: namespace.unwrap_or_else(|| "default".into()),
        cluster_name: cluster_name.to_string(),
        targets: targets.to_vec(),
        params,
        now,
    }
}

/// The group's parameters for `workflow_type`; `{}` when it gives none.
pub fn type_params(group: &WorkflowGroup, workflow_type: &str) -> serde_json::Value {
    group
        .spec
        .params
        .get(workflow_type)
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}))
}

/// The deterministic name of the Workflow of `workflow_type` in `group`.
///
/// Deterministic so that creating it twice (after a crash between create and status update)
/// hits the existing object instead of making a second one. The suffix hashes the group's UID,
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

/// Renders the Workflow that the group controller creates for `plugin`'s type in `group`.
///
/// # Errors
/// The type is not among the group's `workflowSteps`, the group's params for it are invalid
/// (schema or the plugin's `validate`), or the plugin's `template` failed or returned an
/// invalid step graph.
pub fn render_workflow(
    group: &WorkflowGroup,
    plugin: &Plugin,
    now: i64,
) -> Result<Workflow, RenderError> {
    render_wave(group, plugin, now, None)
}

/// Renders the Workflow of `plugin`'s type for `wave` of `group`'s rollout: `(number,
/// targets)`, the plugin templating it for the wave's targets; [`render_workflow`] without.
///
/// # Errors
/// As [`render_workflow`].
pub fn render_wave(
    group: &WorkflowGroup,
    plugin: &Plugin,
    now: i64,
    wave: Option<(u32, &[Target])>,
) -> Result<Workflow, RenderError> {
    let Some((number, targets)) = wave else {
        return render_group(group, plugin, now, None);
    };
    let mut of_wave = group.clone();
    of_wave.spec.targets = targets.to_vec();
    render_group(&of_wave, plugin, now, Some(number))
}

fn render_group(
    group: &WorkflowGroup,
    plugin: &Plugin,
    now: i64,
    wave: Option<u32>,
) -> Result<Workflow, RenderError> {
    let type_name = plugin.info().type_name.clone();
    if !group.spec.workflow_steps.contains(&type_name) {
        return Err(RenderError::TypeNotInGroup {
            type_name,
            steps: group.spec.workflow_steps.join(", "),
        });
    }
    let context = plugin_context(group, &type_name, now);
    let pod_template = group.spec.pod_template_of(&type_name);
    // The same check the group controller makes before it starts a group: the params against
    // the plugin's schema, then its `validate`. `plugin render` and `plugin eval` come here too.
    plugin.validate(&context.params)?;
    let steps = plugin.template(&context)?;

    let mut labels: BTreeMap<String, String> = group.labels().clone();
    labels.insert(LABEL_GROUP_NAME.into(), group.name_any());
    labels.insert(LABEL_WORKFLOW_TYPE.into(), type_name.clone());
    if let Some(w) = wave {
        labels.insert(LABEL_WAVE.into(), w.to_string());
    }
    let annotations = BTreeMap::from([(
        ANNOTATION_PLUGIN_DIGEST.to_string(),
        plugin.digest().to_string(),
    )]);

    Ok(Workflow {
        metadata: ObjectMeta {
            name: Some(wave_workflow_name(group, &type_name, wave)),
            namespace: Some(group.namespace().unwrap_or_else(|| "default".into())),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: group.controller_owner_ref(&()).map(|r| vec![r]),
            ..ObjectMeta::default()
        },
        spec: WorkflowSpec {
            type_: type_name,
            steps,
            targets: group.spec.targets.clone(),
            cluster_name: group.spec.cluster_name.clone(),
            paused: false,
            params: (!context.params.as_object().is_some_and(|m| m.is_empty()))
                .then(|| context.params.clone()),
            pod_template,
            rerun: None,
        },
        status: None,
    })
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

//! From a WorkflowGroup and a workflow type's plugin to the Workflow the operator creates.
//!
//! One code path for the controller and for `workflow-operator plugin render`, so what an
//! author sees without a cluster is what the operator does.

use std::collections::BTreeMap;

use kube::{Resource, ResourceExt, api::ObjectMeta};

use crate::api::{
    ANNOTATION_PLUGIN_DIGEST, LABEL_GROUP_NAME, LABEL_WAVE, LABEL_WORKFLOW_TYPE, Workflow,
    WorkflowGroup, WorkflowSpec,
};
use crate::names::wave_workflow_name;
use crate::operator_steps::{ReservedStep, with_drain, with_gate};
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
    /// The operator adds a step (`spec.drain`, `spec.rollout.healthGate`) with the name of one
    /// of the plugin's.
    #[error(transparent)]
    Reserved(#[from] ReservedStep),
}

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
    let drain = group
        .spec
        .drain
        .as_ref()
        .filter(|d| d.covers(&type_name))
        .cloned();
    let steps = match &drain {
        Some(drain) => with_drain(steps, drain)?,
        None => steps,
    };
    // The health gate opens each wave after the first, in its first Workflow.
    let health_gate = group
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.health_gate.clone())
        .filter(|_| wave.is_some_and(|w| w > 1))
        .filter(|_| group.spec.workflow_steps.first() == Some(&type_name));
    let steps = match &health_gate {
        Some(gate) => with_gate(steps, gate)?,
        None => steps,
    };

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
            pod_template: pod_template.map(Box::new),
            rerun: None,
            awaiting_locks: false,
            drain,
            health_gate,
        },
        status: None,
    })
}

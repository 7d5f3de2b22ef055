//! The checks applied to everything a plugin returns, before it is converted (`wit_edge.rs`).

use workflow_model::text::{self, Marker};
use workflow_model::words;

use crate::graph::StepGraph;

use super::bindings::workflow::plugin::types as wit;
use super::error::PluginError;
use super::types::{Gate, PluginInfo, Step, Verdict};
use super::wit_edge;

/// Bounds on what a plugin may return.
pub(crate) struct Limits {
    pub max_steps: usize,
    pub max_string_bytes: usize,
    pub max_output_bytes: usize,
}

impl Limits {
    /// Checks one returned string; `what` names it in the message.
    fn string(&self, what: &dyn Fn() -> String, s: &str, total: &mut usize) -> Result<(), String> {
        if s.len() > self.max_string_bytes {
            return Err(format!(
                "{} has {} bytes, at most {} are allowed",
                what(),
                s.len(),
                self.max_string_bytes
            ));
        }
        *total += s.len();
        if *total > self.max_output_bytes {
            return Err(format!(
                "its output exceeds {} bytes in total (at {})",
                self.max_output_bytes,
                what()
            ));
        }
        Ok(())
    }
}

/// Checks `info` and compiles the parameter schema it declares.
pub(crate) fn info(
    raw: wit::PluginInfo,
    origin: &str,
    limits: &Limits,
) -> Result<(PluginInfo, jsonschema::Validator), PluginError> {
    let bad = |reason: String| PluginError::InvalidInfo {
        plugin: origin.to_string(),
        reason,
    };
    let mut total = 0;
    limits
        .string(&|| "its type name".into(), &raw.type_name, &mut total)
        .map_err(bad)?;
    words::dns_label("its type name", &raw.type_name)
        .map_err(|refused| bad(format!("its type name {}", refused.reason())))?;
    limits
        .string(&|| "its version".into(), &raw.version, &mut total)
        .map_err(bad)?;
    if raw.version.trim().is_empty() {
        return Err(bad("its version is empty".into()));
    }
    limits
        .string(&|| "its description".into(), &raw.description, &mut total)
        .map_err(bad)?;
    let (params_schema, schema) = super::schema::compile(&raw.params_schema)
        .map_err(|reason| bad(format!("its params schema {reason}")))?;
    Ok((wit_edge::plugin_info(raw, params_schema), schema))
}

/// Checks the steps `template` returned: counts, sizes, names and the dependency graph.
pub(crate) fn steps(raw: Vec<wit::Step>, limits: &Limits) -> Result<Vec<Step>, String> {
    if raw.len() > limits.max_steps {
        return Err(format!(
            "{} steps, at most {} are allowed",
            raw.len(),
            limits.max_steps
        ));
    }
    let mut total = 0;
    for (i, step) in raw.iter().enumerate() {
        let name = text::truncate(&step.name, 64, Marker::Length);
        let field = |f: &str| format!("step {} ({name:?}) {f}", i + 1);
        limits.string(&|| field("name"), &step.name, &mut total)?;
        limits.string(&|| field("description"), &step.description, &mut total)?;
        limits.string(&|| field("command"), &step.command, &mut total)?;
        for dep in &step.depends_on {
            limits.string(&|| field("dependency"), dep, &mut total)?;
        }
        if let Some(image) = &step.image {
            limits.string(&|| field("image"), image, &mut total)?;
            if image.trim().is_empty() {
                return Err(format!("{} is empty", field("image")));
            }
        }
        for env in &step.env {
            limits.string(&|| field("env name"), &env.name, &mut total)?;
            limits.string(&|| field("env value"), &env.value, &mut total)?;
            words::env_name(&field("env name"), &env.name).map_err(|e| e.to_string())?;
        }
    }
    StepGraph::new(
        raw.iter()
            .map(|s| (s.name.as_str(), s.depends_on.iter().map(String::as_str))),
    )
    .map_err(|e| e.to_string())?;
    for step in &raw {
        if let Some(unknown) = step
            .rerun_with
            .iter()
            .find(|n| !raw.iter().any(|s| &s.name == *n))
        {
            return Err(format!(
                "step {:?} reruns with {:?}, which is no step of the workflow",
                step.name,
                text::truncate(unknown, 64, Marker::Length)
            ));
        }
    }
    Ok(raw.into_iter().map(Step::from).collect())
}

/// Most approvers one gate may name.
const MAX_APPROVERS: usize = 64;

/// Checks a gate's answer: an approval request that can be met, within the sizes allowed.
pub(crate) fn gate(raw: wit::GateDecision, limits: &Limits) -> Result<Gate, String> {
    if let wit::GateDecision::NeedsApproval(r) = &raw {
        let mut total = 0;
        limits.string(&|| "the approval's reason".into(), &r.reason, &mut total)?;
        if r.approvers.len() > MAX_APPROVERS {
            return Err(format!(
                "{} approvers, at most {MAX_APPROVERS} are allowed",
                r.approvers.len()
            ));
        }
        for a in &r.approvers {
            limits.string(&|| "an approver".into(), a, &mut total)?;
            if a.trim().is_empty() || a == "group:" {
                return Err("an approver is empty".into());
            }
        }
        if r.count == 0 {
            return Err("an approval request for 0 approvals".into());
        }
    }
    Ok(raw.into())
}

/// Checks the reason of a verdict.
pub(crate) fn verdict(raw: wit::Verdict, limits: &Limits) -> Result<Verdict, String> {
    let reason = match &raw {
        wit::Verdict::Completed => None,
        wit::Verdict::Failed(reason) => Some(("the failure reason", reason)),
        wit::Verdict::Retry(reason) => Some(("the retry reason", reason)),
    };
    if let Some((what, reason)) = reason {
        limits.string(&|| what.into(), reason, &mut 0)?;
    }
    Ok(raw.into())
}

//! The rules the API server checks at `kubectl apply` (CEL `x-kubernetes-validations`), with
//! messages that name the offending value, and the schemas of fields shared by both kinds. The
//! controllers check the same again for objects stored before a rule existed.

use kube::core::{Message, Rule};
use schemars::JsonSchema;

use super::*;

/// A DNS-1123 label, as CEL's `matches` takes it (what `words::dns_label` accepts, and
/// `words::DNS_LABEL_PATTERN`: `concat!` needs a literal).
macro_rules! dns_label {
    () => {
        "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    };
}
/// The pattern of [`dns_label!`], for the test that it is `words::DNS_LABEL_PATTERN`.
#[cfg(test)]
pub(super) fn dns_label_pattern() -> &'static str {
    dns_label!()
}
pub(super) const WORKFLOW_TYPES_ARE_DNS_LABELS: &str =
    concat!("self.all(t, t.matches('", dns_label!(), "'))");
pub(super) const WORKFLOW_TYPES_ARE_DNS_LABELS_MESSAGE: &str = concat!(
    "'workflow type \"' + self.filter(t, !t.matches('",
    dns_label!(),
    "'))[0] + '\" is not a valid name: a DNS label of lowercase letters, digits and \"-\", starting and ending with a letter or digit, at most 63 characters'"
);
pub(super) const SELECTOR_SELECTS: &str = "!has(self.targetSelector) || (has(self.targetSelector.matchLabels) && size(self.targetSelector.matchLabels) > 0) || (has(self.targetSelector.matchExpressions) && size(self.targetSelector.matchExpressions) > 0)";
pub(super) const SELECTOR_SELECTS_MESSAGE: &str =
    "'spec.targetSelector selects every Node: give matchLabels or matchExpressions'";
pub(super) const TARGETS_OR_SELECTOR: &str =
    "!has(self.targetSelector) || !has(self.targets) || size(self.targets) == 0";
pub(super) const TARGETS_OR_SELECTOR_MESSAGE: &str = "'spec.targets and spec.targetSelector are both set: give the targets, or the selector of the Nodes to act on'";
pub(super) const WORKFLOW_TYPES_ARE_UNIQUE: &str = "self.all(t, self.exists_one(u, u == t))";
pub(super) const WORKFLOW_TYPES_ARE_UNIQUE_MESSAGE: &str = "'workflow type \"' + self.filter(t, !self.exists_one(u, u == t))[0] + '\" is listed more than once: each type runs once per group'";
pub(super) const PARAMS_ONLY_FOR_LISTED_TYPES: &str =
    "!has(self.params) || self.params.all(t, t in self.workflowSteps)";
pub(super) const PARAMS_ONLY_FOR_LISTED_TYPES_MESSAGE: &str = "'params are given for workflow type \"' + self.params.filter(t, !(t in self.workflowSteps))[0] + '\", which spec.workflowSteps does not list'";
pub(super) const POD_TEMPLATES_ONLY_FOR_LISTED_TYPES: &str =
    "!has(self.podTemplates) || self.podTemplates.all(t, t in self.workflowSteps)";
pub(super) const POD_TEMPLATES_ONLY_FOR_LISTED_TYPES_MESSAGE: &str = "'a pod template is given for workflow type \"' + self.podTemplates.filter(t, !(t in self.workflowSteps))[0] + '\", which spec.workflowSteps does not list'";
pub(super) const IP_IS_AN_IP: &str = "isIP(self)";
pub(super) const IP_IS_AN_IP_MESSAGE: &str = "'\"' + self + '\" is not an IPv4 or IPv6 address'";
pub(super) const TYPE_IS_A_DNS_LABEL: &str = concat!("self.matches('", dns_label!(), "')");
pub(super) const TYPE_IS_A_DNS_LABEL_MESSAGE: &str = "'workflow type \"' + self + '\" is not a valid name: a DNS label of lowercase letters, digits and \"-\", starting and ending with a letter or digit, at most 63 characters'";

/// `spec.targets` of both kinds: the model's targets, at most [`MAX_TARGETS`], each `ip` an IP
/// address. The rule sits on `ip` itself, so the API server's message names the target by its
/// index (`spec.targets[1].ip`); the model crate knows nothing of Kubernetes, so it is added here.
pub(super) fn targets_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = <Vec<Target> as JsonSchema>::json_schema(generator);
    schema.insert("maxItems".into(), MAX_TARGETS.into());
    let rule = Rule::new(IP_IS_AN_IP).message(Message::Expression(IP_IS_AN_IP_MESSAGE.into()));
    if let (Some(ip), Ok(rule)) = (
        schema.pointer_mut("/items/properties/ip"),
        serde_json::to_value(rule),
    ) && let Some(ip) = ip.as_object_mut()
    {
        ip.insert("x-kubernetes-validations".into(), serde_json::json!([rule]));
    }
    schema
}

pub(super) fn params_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        // One entry per listed type at most (a CEL rule says so); bounded for its cost.
        "maxProperties": MAX_WORKFLOW_STEPS,
        "additionalProperties": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true
        }
    })
}

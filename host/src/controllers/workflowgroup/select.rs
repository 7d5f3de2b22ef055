//! Targets chosen by `spec.targetSelector`: the Nodes it selects when the group starts, kept
//! in `status.targets` and never chosen again (a Node labelled later is not added).

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;

use super::super::context::Context;
use super::super::error::{Error, Result};
use super::super::reason;
use super::super::status::{Transition, set_succeeded, succeeded_condition};
use super::super::write;
use crate::api::{ConditionStatus, NodeAddressType, Phase, Target, WorkflowGroup};

/// How long a group whose selector selects no Node waits before it looks again.
const NO_NODES_RECHECK: Duration = Duration::from_secs(30);

/// What became of a group's targets in this reconcile.
pub(super) enum Choice {
    /// It lists its targets, or chose them before: go on with the group as it is.
    Made,
    /// It chose them now, or the API server shows it chose them before the cache does: go on
    /// with this group.
    Chosen(Box<WorkflowGroup>),
    /// It selects no Node yet (said in its condition): look again then.
    Wait(Action),
}

/// Chooses the targets of a group that selects Nodes and has not chosen yet. The choice is
/// written to the group's status (with an Event naming the Nodes) before anything runs.
pub(super) async fn choose(ctx: &Context, group: &WorkflowGroup) -> Result<Choice> {
    let Some(selector) = &group.spec.target_selector else {
        return Ok(Choice::Made);
    };
    let old = group.status.clone().unwrap_or_default();
    let started = !old.workflows.is_empty() || old.phase.is_some_and(Phase::is_finished);
    // Listed targets beside a selector, or a selector that is none, are spec problems the plan
    // names; a group that started keeps what it has.
    let Ok(labels) = selector.selector() else {
        return Ok(Choice::Made);
    };
    if !old.targets.is_empty() || started || !group.spec.targets.is_empty() {
        return Ok(Choice::Made);
    }
    let ns = group.namespace().ok_or(Error::MissingNamespace)?;
    let groups: Api<WorkflowGroup> = Api::namespaced(ctx.client.clone(), &ns);
    // The cache may not show a choice this operator wrote a moment ago: the API server does.
    if let Some(fresh) = groups
        .get_opt(&group.name_any())
        .await
        .map_err(Error::Kube)?
        && fresh.status.as_ref().is_some_and(|s| !s.targets.is_empty())
    {
        return Ok(Choice::Chosen(Box::new(fresh)));
    }
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let listed = nodes
        .list(&ListParams::default().labels_from(&labels))
        .await
        .map_err(Error::Kube)?;
    let chosen = nodes_as_targets(&listed.items, selector.address_type);
    let now = Timestamp::now();
    let mut status = old.clone();
    status.observed_generation = group.metadata.generation;
    let generation = group.metadata.generation;
    if chosen.targets.is_empty() {
        let message = chosen.none_message(&labels.to_string(), selector.address_type);
        status.phase = Some(Phase::Pending);
        set_succeeded(
            &mut status.conditions,
            succeeded_condition(
                ConditionStatus::Unknown,
                reason::NO_NODES_SELECTED,
                &message,
                generation,
                now,
            ),
        );
        let event = Transition::warning(reason::NO_NODES_SELECTED, message);
        write::record_transition(ctx, &groups, group, &old, &status, &[event]).await?;
        return Ok(Choice::Wait(Action::requeue(NO_NODES_RECHECK)));
    }
    let message = chosen.chosen_message();
    status.targets = chosen.targets;
    let event = Transition::normal(reason::TARGETS_SELECTED, message).once();
    write::record_transition(ctx, &groups, group, &old, &status, &[event]).await?;
    let mut group = group.clone();
    group.status = Some(status);
    Ok(Choice::Chosen(Box::new(group)))
}

/// The Nodes a selector chose, as targets, and those it passed over.
#[derive(Debug, Default, PartialEq)]
pub struct Chosen {
    pub targets: Vec<Target>,
    /// Nodes without an address of the type asked for.
    pub without_address: Vec<String>,
}

impl Chosen {
    fn chosen_message(&self) -> String {
        let names: Vec<&str> = self.targets.iter().map(|t| t.name.as_str()).collect();
        let mut message = format!(
            "spec.targetSelector chose {} Node(s) as targets: {}",
            names.len(),
            shown(&names)
        );
        if !self.without_address.is_empty() {
            message.push_str(&format!(
                "; passed over for lack of the address asked for: {}",
                shown(&self.without_address)
            ));
        }
        message
    }

    fn none_message(&self, labels: &str, address: NodeAddressType) -> String {
        let mut message = format!("spec.targetSelector ({labels}) selects no Node");
        if !self.without_address.is_empty() {
            message.push_str(&format!(
                " with an {} address ({} without one: {})",
                address.as_str(),
                self.without_address.len(),
                shown(&self.without_address)
            ));
        }
        message.push_str("; looking again every 30s");
        message
    }
}

/// At most this many names in a message; the count is whole.
const SHOWN: usize = 20;

fn shown<S: AsRef<str>>(names: &[S]) -> String {
    let mut out: Vec<&str> = names.iter().take(SHOWN).map(AsRef::as_ref).collect();
    let more = names.len().saturating_sub(SHOWN);
    let more = format!("and {more} more");
    if names.len() > SHOWN {
        out.push(&more);
    }
    out.join(", ")
}

/// `nodes` as targets, sorted by name: each named as its Node, at its first address of type
/// `address`, with the role of its `node-role.kubernetes.io/<role>` label (the first, if
/// several) when that is a role.
pub fn nodes_as_targets(nodes: &[Node], address: NodeAddressType) -> Chosen {
    let mut chosen = Chosen::default();
    for node in nodes {
        let name = node.name_any();
        let ip = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .and_then(|a| a.iter().find(|a| a.type_ == address.as_str()))
            .map(|a| a.address.clone());
        let Some(ip) = ip else {
            chosen.without_address.push(name);
            continue;
        };
        let role = node
            .labels()
            .keys()
            .find_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
            .filter(|r| workflow_model::words::role("role", r).is_ok())
            .unwrap_or_default()
            .to_string();
        chosen.targets.push(Target { name, ip, role });
    }
    chosen.targets.sort_by(|a, b| a.name.cmp(&b.name));
    chosen.without_address.sort();
    chosen
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeAddress, NodeStatus};
    use kube::api::ObjectMeta;

    use super::*;

    fn node(name: &str, addresses: &[(&str, &str)], labels: &[&str]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|l| (l.to_string(), String::new()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                addresses: Some(
                    addresses
                        .iter()
                        .map(|(t, a)| NodeAddress {
                            type_: t.to_string(),
                            address: a.to_string(),
                        })
                        .collect(),
                ),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn nodes_become_targets_named_as_their_nodes_at_the_address_asked_for() {
        let nodes = [
            node(
                "worker-2",
                &[("Hostname", "worker-2"), ("InternalIP", "10.0.0.2")],
                &["node-role.kubernetes.io/worker"],
            ),
            node(
                "worker-1",
                &[("InternalIP", "10.0.0.1"), ("ExternalIP", "203.0.113.1")],
                &[],
            ),
            node("bare", &[("Hostname", "bare")], &[]),
        ];
        let chosen = nodes_as_targets(&nodes, NodeAddressType::InternalIP);
        assert_eq!(
            chosen.targets,
            [
                Target {
                    name: "worker-1".into(),
                    ip: "10.0.0.1".into(),
                    role: String::new()
                },
                Target {
                    name: "worker-2".into(),
                    ip: "10.0.0.2".into(),
                    role: "worker".into()
                },
            ]
        );
        assert_eq!(chosen.without_address, ["bare"]);
        assert_eq!(
            chosen.chosen_message(),
            "spec.targetSelector chose 2 Node(s) as targets: worker-1, worker-2; passed over for lack of the address asked for: bare"
        );
        let external = nodes_as_targets(&nodes, NodeAddressType::ExternalIP);
        assert_eq!(external.targets.len(), 1);
        assert_eq!(external.targets[0].ip, "203.0.113.1");
    }

    #[test]
    fn a_selector_that_selects_no_node_says_which_and_why() {
        let chosen = nodes_as_targets(&[node("bare", &[], &[])], NodeAddressType::InternalIP);
        assert_eq!(
            chosen.none_message("pool=db", NodeAddressType::InternalIP),
            "spec.targetSelector (pool=db) selects no Node with an InternalIP address (1 without one: bare); looking again every 30s"
        );
    }
}

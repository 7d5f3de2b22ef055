//! The `decommission` workflow type: takes the targets' Nodes out of the cluster, the reverse of
//! setup's `join`. Its steps act through the API server (`workflow-runner --drain`,
//! `--delete-nodes`) and on the machines over SSH:
//!
//! | step | description | does | depends on |
//! |---|---|---|---|
//! | `drain-nodes` | 排空节点 | cordons each target's Node (annotating `workflow.rxg456.cn/cordoned-by: <namespace>/<group>`; one cordoned already is left as found) and evicts its pods through the Eviction API, PodDisruptionBudgets respected, until none is left | |
//! | `stop-kubelet` | 停止 kubelet | on each target: stops the kubelet, the pods' containers and containerd; with `clean`, removes the kubelet's credentials, configuration and state | `drain-nodes` |
//! | `delete-nodes` | 删除节点 | deletes each target's Node object | `stop-kubelet` |
//!
//! A drain that cannot finish within `drainTimeoutSeconds` fails its target, naming the pods
//! that block it and why (for example the PodDisruptionBudget's words); the Node stays
//! cordoned, and nothing is stopped or deleted on a target whose drain failed (within the
//! step's budget, the others go on). DaemonSet and mirror pods are not evicted; a pod that no
//! controller manages, or that has `emptyDir` data, stops the drain unless `force` or
//! `deleteEmptyDirData` allows it, as in `kubectl drain`. The decommission never uncordons.
//!
//! # Parameters (`spec.params.decommission`), all optional
//!
//! | field | default | meaning |
//! |---|---|---|
//! | `drainTimeoutSeconds` | 300 | how long a Node's drain may take |
//! | `gracePeriodSeconds` | the pods' own | the evicted pods' grace period |
//! | `deleteEmptyDirData` | `false` | evict pods with `emptyDir` volumes (their data is lost) |
//! | `force` | `false` | evict pods no controller manages (nothing makes them again) |
//! | `clean` | `false` | remove what setup's join wrote on the machine |
//! | `maxFailedTargets`, `minHealthyPercent` | none may fail | how many targets may fail a step |
//! | `ssh` | | how to log in (for `stop-kubelet`) |
//!
//! The pods of `drain-nodes` and `delete-nodes` need a service account that may patch, delete
//! and get nodes, list pods and create `pods/eviction` (`deploy/join/`, with
//! `spec.podTemplates.decommission.serviceAccountName`).

use workflow_plugin_sdk::prelude::*;
use workflow_plugin_sdk::remote::{self, SshParams, TargetBudget, shell_assignments};

const STOP_NODE: &str = include_str!("../scripts/stop-node.sh");

/// The parameters of a `decommission` workflow.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(
    crate = "workflow_plugin_sdk::serde",
    rename_all = "camelCase",
    deny_unknown_fields,
    default
)]
#[schemars(crate = "workflow_plugin_sdk::schemars")]
pub struct DecommissionParams {
    /// Seconds a Node's drain may take (default 300).
    #[schemars(range(min = 1, max = 86400))]
    pub drain_timeout_seconds: Option<u32>,
    /// The evicted pods' grace period in seconds (default: each pod's own).
    #[schemars(range(max = 86400))]
    pub grace_period_seconds: Option<u32>,
    /// Evict pods with emptyDir volumes (their data is lost).
    pub delete_empty_dir_data: bool,
    /// Evict pods no controller manages (nothing makes them again).
    pub force: bool,
    /// Remove what setup's join wrote on the machine.
    pub clean: bool,
    /// At most this many targets may fail a step.
    pub max_failed_targets: Option<u32>,
    /// At least this percentage of the targets must pass a step.
    #[schemars(range(max = 100))]
    pub min_healthy_percent: Option<u8>,
    /// How to log in to the targets.
    pub ssh: SshParams,
}

/// The `decommission` workflow type.
pub struct Decommission;

impl WorkflowType for Decommission {
    type Params = DecommissionParams;

    fn info() -> Info {
        Info::new("decommission", env!("CARGO_PKG_VERSION")).description(
            "Drains the targets' Nodes through the Eviction API, stops their kubelets over SSH and deletes the Nodes",
        )
    }

    fn validate(params: &DecommissionParams) -> Result<(), Error> {
        params.ssh.validate()
    }

    fn template(ctx: &Context<DecommissionParams>) -> Result<Vec<Step>, Error> {
        Self::validate(&ctx.params)?;
        ctx.params.ssh.validate_targets(&ctx.targets)?;
        let p = &ctx.params;
        let budget = TargetBudget {
            max_failed_targets: p.max_failed_targets,
            min_healthy_percent: p.min_healthy_percent,
        };
        let timeout = p.drain_timeout_seconds.unwrap_or(300);
        let mut drain = remote::on_nodes("drain-nodes", "WORKFLOW_DRAIN", &p.ssh, budget)
            .description("排空节点")
            .env("WORKFLOW_DRAIN_TIMEOUT", timeout.to_string())
            .timeout_secs(timeout.saturating_add(60));
        if let Some(grace) = p.grace_period_seconds {
            drain = drain.env("WORKFLOW_DRAIN_GRACE_PERIOD", grace.to_string());
        }
        if p.delete_empty_dir_data {
            drain = drain.env("WORKFLOW_DRAIN_DELETE_EMPTYDIR_DATA", "true");
        }
        if p.force {
            drain = drain.env("WORKFLOW_DRAIN_FORCE", "true");
        }
        let clean = if p.clean { "yes" } else { "no" };
        let stop = shell_assignments(&[("CLEAN", clean.to_owned())]) + STOP_NODE;
        Ok(vec![
            drain,
            remote::on_targets("stop-kubelet", stop, &p.ssh, budget)
                .description("停止 kubelet")
                .depends_on(["drain-nodes"]),
            remote::on_nodes("delete-nodes", "WORKFLOW_DELETE_NODES", &p.ssh, budget)
                .description("删除节点")
                .timeout_secs(120)
                .depends_on(["stop-kubelet"]),
        ])
    }

    fn evaluate(step: &Step, outcome: &StepOutcome) -> Verdict {
        remote::verdict(step, outcome)
    }
}

export_workflow_type!(Decommission);

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(step: &'a Step, name: &str) -> &'a str {
        step.env
            .iter()
            .find(|e| e.name == name)
            .map_or("", |e| e.value.as_str())
    }

    fn steps(params: DecommissionParams) -> Vec<Step> {
        Decommission::template(&Context {
            params,
            ..Context::default()
        })
        .unwrap_or_default()
    }

    #[test]
    fn drain_then_stop_then_delete_each_through_the_runner() {
        let steps = steps(DecommissionParams {
            drain_timeout_seconds: Some(30),
            grace_period_seconds: Some(5),
            force: true,
            clean: true,
            ..DecommissionParams::default()
        });
        let order: Vec<_> = steps
            .iter()
            .map(|s| (s.name.as_str(), s.depends_on.clone()))
            .collect();
        assert_eq!(
            order,
            [
                ("drain-nodes", vec![]),
                ("stop-kubelet", vec!["drain-nodes".to_owned()]),
                ("delete-nodes", vec!["stop-kubelet".to_owned()]),
            ]
        );
        assert!(steps.iter().all(|s| s.command == "workflow-runner"));
        let drain = &steps[0];
        assert_eq!(env(drain, "WORKFLOW_DRAIN"), "true");
        assert_eq!(env(drain, "WORKFLOW_DRAIN_TIMEOUT"), "30");
        assert_eq!(env(drain, "WORKFLOW_DRAIN_GRACE_PERIOD"), "5");
        assert_eq!(env(drain, "WORKFLOW_DRAIN_FORCE"), "true");
        assert_eq!(env(drain, "WORKFLOW_DRAIN_DELETE_EMPTYDIR_DATA"), "");
        assert_eq!(env(drain, "WORKFLOW_CHECK_NODE_READY"), "");
        assert_eq!(drain.timeout_seconds, Some(90));
        assert!(env(&steps[1], "WORKFLOW_SSH_COMMAND").starts_with("CLEAN='yes'\n# stop-node"));
        assert_eq!(env(&steps[2], "WORKFLOW_DELETE_NODES"), "true");
        assert_eq!(env(&steps[2], "WORKFLOW_SSH_COMMAND"), "");
    }

    #[test]
    fn an_ssh_role_that_is_not_a_role_is_refused_naming_the_field() {
        let params = DecommissionParams {
            ssh: SshParams {
                roles: vec!["Worker,Master".into()],
                ..SshParams::default()
            },
            ..DecommissionParams::default()
        };
        let refused = Decommission::validate(&params).err().map(|e| e.to_string());
        assert!(
            refused.as_deref().is_some_and(|r| r.starts_with(
                "invalid params at `ssh.roles[0]`: \"Worker,Master\" is not a valid role"
            )),
            "{refused:?}"
        );
        assert!(
            Decommission::template(&Context {
                params,
                ..Context::default()
            })
            .is_err()
        );
    }

    #[test]
    fn a_blocked_drain_fails_naming_the_target_and_the_pod() {
        let steps = steps(DecommissionParams::default());
        let outcome = StepOutcome {
            exit_code: Some(1),
            message: "targets 1: 0 ok, 1 failed, 0 unreachable\n\
                FAIL n1: the drain of Node n1 did not finish in 5 s: blocked: default/web: \
                Cannot evict pod as it would violate the pod's disruption budget.\n"
                .into(),
            ..StepOutcome::default()
        };
        let Verdict::Failed(reason) = Decommission::evaluate(&steps[0], &outcome) else {
            panic!("a blocked drain fails the step");
        };
        assert!(
            reason.contains("n1 failed") && reason.contains("disruption budget"),
            "{reason}"
        );
    }
}

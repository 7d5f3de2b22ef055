//! End to end: the operator installed as users install it (`make deploy`: the kustomize base,
//! the image of `make image`), running as pods on the local cluster's real node and reaching
//! the API server through the `kubernetes` Service and the node's kube-proxy. One replica
//! leads, the other stands by; deleting the leader's pod hands over; a plugin ConfigMap
//! change is live.

#[path = "support/operator.rs"]
mod operator;

use std::process::Command;
use std::time::Duration;

use operator::*;
use serde_json::Value;
use workflow_e2e::{REAL_NODE, poll_until, repo_root};

const INSTALL_NS: &str = "workflow-system";
const DEPLOY_TIMEOUT: Duration = Duration::from_secs(180);

/// The holder of the leader Lease, if any.
fn leader() -> Option<String> {
    let out = cluster().kubectl(&[
        "-n",
        INSTALL_NS,
        "get",
        "lease",
        "workflow-operator",
        "-o",
        "json",
    ]);
    let lease: Value = serde_json::from_slice(&out.stdout).ok()?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_string)
}

/// The operator's pods that run and are ready.
fn ready_operator_pods() -> Vec<Value> {
    list(
        INSTALL_NS,
        "pods",
        Some("app.kubernetes.io/name=workflow-operator"),
    )
    .into_iter()
    .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
    .filter(|p| {
        p["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
    .collect()
}

/// Waits until the group `name` in `ns` reaches `phase` (no local operator to watch).
fn wait_phase(ns: &str, name: &str, phase: &str) {
    poll_until(
        Duration::from_millis(250),
        TIMEOUT,
        &format!("group {ns}/{name} to be {phase}"),
        || {
            let group = get(ns, &format!("workflowgroup/{name}"));
            if group["status"]["phase"] == phase {
                Ok(())
            } else {
                Err(group["status"].clone())
            }
        },
        |status| {
            let logs = cluster().kubectl(&[
                "-n",
                INSTALL_NS,
                "logs",
                "-l",
                "app.kubernetes.io/name=workflow-operator",
                "--tail=30",
                "--prefix",
            ]);
            format!(
                "its status: {status}\noperator logs:\n{}",
                String::from_utf8_lossy(&logs.stdout)
            )
        },
    );
}

/// Undeploys when dropped, whatever the test's outcome.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        undeploy();
    }
}

/// Removes what the deploy added that no other test uses (the shared namespace and RBAC stay:
/// the other tests' operators run as its ServiceAccount).
fn undeploy() {
    cluster().kubectl(&[
        "-n",
        INSTALL_NS,
        "delete",
        "deployment/workflow-operator",
        "service/workflow-operator-metrics",
        "poddisruptionbudget/workflow-operator",
        "lease/workflow-operator",
        "service/workflow-operator-webhook",
        "secret/workflow-operator-webhook-tls",
        "networkpolicy/workflow-operator",
        "--ignore-not-found",
        "--wait=false",
    ]);
    // The webhook's configuration is cluster-wide: it goes too, so that no later apply asks a
    // webhook that is gone.
    cluster().kubectl(&[
        "delete",
        "validatingwebhookconfiguration/workflow-operator",
        "--ignore-not-found",
    ]);
    cluster().kubectl(&[
        "-n",
        INSTALL_NS,
        "delete",
        "configmaps",
        "-l",
        "workflow.rxg456.cn/plugin=true",
        "--ignore-not-found",
    ]);
}

#[test]
fn installed_by_make_deploy_it_runs_on_the_real_node_hands_over_when_the_leader_is_deleted_and_follows_plugin_configmaps()
 {
    let cluster = cluster();
    cluster.require_real_node();
    let endpoints = cluster.kubectl_json(&["-n", "default", "get", "endpoints", "kubernetes"]);
    assert!(
        endpoints["subsets"][0]["addresses"][0]["ip"]
            .as_str()
            .is_some_and(|ip| ip != "127.0.0.1"),
        "the `kubernetes` Service has no endpoint a pod can reach (a cluster started by an older cluster.sh: restart it): {endpoints}"
    );
    let ns = cluster.fresh_namespace("e2e-in-cluster");
    // From nothing: not the replicas of an earlier run.
    undeploy();
    cluster.kubectl(&[
        "-n",
        INSTALL_NS,
        "wait",
        "--for=delete",
        "pod",
        "-l",
        "app.kubernetes.io/name=workflow-operator",
        "--timeout=60s",
    ]);
    // What `make deploy` does: the built-in plugins into deploy/plugins/, then scripts/deploy.sh.
    let root = repo_root();
    let plugins = root.join("deploy/plugins");
    std::fs::create_dir_all(&plugins).expect("deploy/plugins");
    for t in BUILTIN_TYPES {
        std::fs::copy(built_plugin(t), plugins.join(format!("{t}.wasm"))).expect("copy a plugin");
    }
    let kubeconfig = cluster
        .kubectl_ok(&["config", "view", "--raw", "--minify", "-o", "json"])
        .to_string();
    let kubeconfig_path = log_dir().join(format!("in-cluster-{}.kubeconfig", now_millis()));
    std::fs::write(&kubeconfig_path, kubeconfig).expect("write a kubeconfig");
    let deploy = Command::new(root.join("scripts/deploy.sh"))
        .env("KUBECONFIG", &kubeconfig_path)
        .env("KUBECTL", workflow_e2e::kubectl_program())
        .env("WATCH_NAMESPACE", &ns)
        .output()
        .expect("run scripts/deploy.sh");
    let _installed = Installed;
    assert!(
        deploy.status.success(),
        "scripts/deploy.sh failed: {}{}",
        String::from_utf8_lossy(&deploy.stdout),
        String::from_utf8_lossy(&deploy.stderr)
    );
    // The NetworkPolicy admits the API server's addresses to the webhook, not the base's
    // placeholder.
    let admitted = cluster.kubectl_ok(&[
        "-n",
        INSTALL_NS,
        "get",
        "networkpolicy/workflow-operator",
        "-o",
        "jsonpath={.spec.ingress[0].from[*].ipBlock.cidr}",
    ]);
    let apiservers = cluster.kubectl_ok(&[
        "-n",
        "default",
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=kubernetes",
        "-o",
        "jsonpath={.items[*].endpoints[*].addresses[*]}",
    ]);
    assert!(
        !admitted.contains("192.0.2.1")
            && apiservers.split_whitespace().all(|address| admitted
                .split_whitespace()
                .any(|cidr| cidr.starts_with(&format!("{address}/")))),
        "the NetworkPolicy admits {admitted:?}, the API servers are at {apiservers:?}"
    );

    // Two replicas, both on the real node, running the image; one holds the lease.
    let (pods, _) = poll_until(
        Duration::from_millis(500),
        DEPLOY_TIMEOUT,
        "both operator replicas to be ready on the real node",
        || {
            let pods = ready_operator_pods();
            if pods.len() == 2 && pods.iter().all(|p| p["spec"]["nodeName"] == REAL_NODE) {
                Ok(pods)
            } else {
                Err(pods)
            }
        },
        |pods| {
            let all = cluster.kubectl(&["-n", INSTALL_NS, "get", "pods", "-o", "wide"]);
            format!(
                "ready: {}\n{}",
                pods.len(),
                String::from_utf8_lossy(&all.stdout)
            )
        },
    );
    let names: Vec<&str> = pods.iter().map(|p| text(p, "/metadata/name")).collect();
    let (first_leader, _) = poll_until(
        Duration::from_millis(250),
        TIMEOUT,
        "a replica to hold the leader Lease",
        || leader().filter(|h| names.contains(&h.as_str())).ok_or(()),
        |()| "no holder".into(),
    );

    // The seed's sample, with the operator in the cluster.
    let sample = std::fs::read_to_string(root.join("examples/workflowgroup-sample.yaml"))
        .expect("the seed sample")
        .replace("  namespace: default\n", "");
    cluster.apply_yaml_in(&ns, &sample);
    wait_phase(&ns, "workflowgroup-sample", "Completed");

    // The admission webhook as installed: the API server calls the Service, which has the
    // ready replicas as endpoints, and trusts the CA the leader wrote into the configuration.
    // A group pre-check refuses is refused at apply with the plugin's words (while no replica
    // was ready yet, `failurePolicy: Ignore` let applies through: polled until it answers).
    let refused = group_yaml(
        "refused",
        &["pre-check"],
        "  params:\n    pre-check:\n      requiredCommands: [\"rm -rf\"]\n",
        "",
    );
    let (said, waited) = poll_until(
        Duration::from_millis(500),
        TIMEOUT,
        "the installed webhook to refuse a group pre-check refuses",
        || {
            let out = cluster.kubectl_with_stdin(
                &["-n", &ns, "apply", "--dry-run=server", "-f", "-"],
                refused.as_bytes(),
            );
            let said = String::from_utf8_lossy(&out.stderr).to_string();
            if !out.status.success() && said.contains("denied the request") {
                Ok(said)
            } else {
                Err(said)
            }
        },
        |said| {
            let endpoints = cluster.kubectl(&[
                "-n",
                INSTALL_NS,
                "get",
                "endpointslices",
                "-l",
                "kubernetes.io/service-name=workflow-operator-webhook",
                "-o",
                "wide",
            ]);
            format!(
                "kubectl said: {said}\nthe Service's endpoints:\n{}",
                String::from_utf8_lossy(&endpoints.stdout)
            )
        },
    );
    eprintln!("the installed webhook answered {waited:?} after both replicas were ready");
    assert!(
        said.contains("admission webhook \"workflowgroups.workflow.rxg456.cn\" denied the request")
            && said.contains("invalid params at `requiredCommands[0]`: \"rm -rf\" is not a valid command name: it holds a blank, which would make it two words"),
        "{said}"
    );
    // Really applied, it is refused too, and nothing is stored.
    let out = cluster.kubectl_with_stdin(&["-n", &ns, "apply", "-f", "-"], refused.as_bytes());
    assert!(
        !out.status.success(),
        "applied: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stored = cluster.kubectl(&["-n", &ns, "get", "workflowgroup", "refused"]);
    assert!(!stored.status.success(), "a refused group was stored");

    // The leader's pod deleted: another replica takes over, and a new group completes. Which
    // one is a race: the standby wakes at the old term's end, while the Deployment's
    // replacement for the deleted pod may start and take the free Lease first.
    cluster.kubectl_ok(&[
        "-n",
        INSTALL_NS,
        "delete",
        "pod",
        &first_leader,
        "--wait=false",
    ]);
    let (second_leader, waited) = poll_until(
        Duration::from_millis(250),
        TIMEOUT,
        "another replica to take the leader Lease",
        || leader().filter(|h| h != &first_leader).ok_or(()),
        |()| {
            let all = cluster.kubectl(&["-n", INSTALL_NS, "get", "pods", "-o", "wide"]);
            format!(
                "holder: {:?}\n{}",
                leader(),
                String::from_utf8_lossy(&all.stdout)
            )
        },
    );
    let who = if names.contains(&second_leader.as_str()) {
        "the standby"
    } else {
        "the deleted pod's replacement"
    };
    eprintln!("{who} {second_leader} led {waited:?} after the leader's pod was deleted");
    cluster.apply_yaml_in(&ns, &group_yaml("after-handover", &["pre-check"], "", ""));
    wait_phase(&ns, "after-handover", "Completed");

    // A plugin ConfigMap removed: a group of its type waits, saying so; put back: it runs.
    let configmap = cluster.kubectl_json(&["-n", INSTALL_NS, "get", "configmap", "post-check"]);
    cluster.kubectl_ok(&["-n", INSTALL_NS, "delete", "configmap", "post-check"]);
    cluster.apply_yaml_in(&ns, &group_yaml("waits", &["post-check"], "", ""));
    poll_until(
        Duration::from_millis(250),
        TIMEOUT,
        "the group to wait for its plugin",
        || {
            let condition = succeeded_condition(&get(&ns, "workflowgroup/waits"));
            if condition["reason"] == "PluginMissing" {
                Ok(())
            } else {
                Err(condition)
            }
        },
        |condition| format!("its condition: {condition}"),
    );
    let mut restored = configmap.clone();
    for field in [
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "managedFields",
    ] {
        if let Some(meta) = restored["metadata"].as_object_mut() {
            meta.remove(field);
        }
    }
    let out = cluster.kubectl_with_stdin(
        &["-n", INSTALL_NS, "create", "-f", "-"],
        restored.to_string().as_bytes(),
    );
    assert!(
        out.status.success(),
        "could not put the plugin back: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_phase(&ns, "waits", "Completed");
}

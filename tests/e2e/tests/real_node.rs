//! Smoke tests for the local cluster's real node (tests/cluster/node.sh): real containers from
//! the local images, run by a kubelet of the pinned Kubernetes beside kwok's fake node, and the
//! control plane enforcing what a real cluster enforces where pods meet it (a ResourceQuota).
//!
//! The real node starts with `WORKFLOW_REAL_NODE=1` (see tests/cluster/README.md); without it
//! these tests fail saying so.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use workflow_e2e::{
    Cluster, KWOK_NODE, REAL_NODE, REAL_NODE_IMAGES, REAL_NODE_LABEL, REAL_NODE_TAINT, poll_until,
    real_node_placement,
};

const TIMEOUT: Duration = Duration::from_secs(90);

/// The shared cluster, which must have its real node Ready.
fn cluster() -> &'static Cluster {
    let cluster = Cluster::shared();
    cluster.require_real_node();
    cluster
}

/// A pod on the real node that runs `command` in the busybox image once, with `spec` merged into
/// its spec.
fn real_node_pod(name: &str, command: &[&str], spec: Value) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{ "name": "main", "image": REAL_NODE_IMAGES[0], "command": command }],
        },
    });
    for fields in [real_node_placement(), spec]
        .iter()
        .filter_map(Value::as_object)
    {
        for (key, value) in fields {
            pod["spec"][key] = value.clone();
        }
    }
    pod
}

/// `kubectl create` of `pod` in `ns`, whatever the outcome.
fn create(cluster: &Cluster, ns: &str, pod: &Value) -> Output {
    cluster.kubectl_with_stdin(&["-n", ns, "create", "-f", "-"], pod.to_string().as_bytes())
}

fn create_ok(cluster: &Cluster, ns: &str, pod: &Value) -> Instant {
    let created = Instant::now();
    let out = create(cluster, ns, pod);
    assert!(
        out.status.success(),
        "could not create pod {}: {}",
        pod["metadata"]["name"],
        String::from_utf8_lossy(&out.stderr)
    );
    created
}

/// Waits until pod `name` in `ns` has finished (phase Succeeded or Failed) and returns it.
fn finished_pod(cluster: &Cluster, ns: &str, name: &str) -> Value {
    let (pod, _) = poll_until(
        Duration::from_millis(250),
        TIMEOUT,
        &format!("pod {ns}/{name} to finish"),
        || {
            let pod = cluster.kubectl_json(&["-n", ns, "get", "pod", name]);
            match pod["status"]["phase"].as_str() {
                Some("Succeeded" | "Failed") => Ok(pod),
                _ => Err(pod),
            }
        },
        |pod| format!("last seen: {pod:#}"),
    );
    pod
}

fn terminated(pod: &Value) -> &Value {
    &pod["status"]["containerStatuses"][0]["state"]["terminated"]
}

#[test]
fn the_real_node_is_ready_labelled_and_tainted_beside_kwok() {
    let cluster = cluster();
    let node = cluster.kubectl_json(&["get", "node", REAL_NODE]);
    assert_eq!(
        node["metadata"]["labels"][REAL_NODE_LABEL.0], REAL_NODE_LABEL.1,
        "node: {node:#}"
    );
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        taints
            .iter()
            .any(|t| t["key"] == REAL_NODE_TAINT && t["effect"] == "NoSchedule"),
        "node {REAL_NODE} lacks its NoSchedule taint {REAL_NODE_TAINT}: {taints:#?}"
    );
    let kwok = cluster.kubectl_json(&["get", "node", KWOK_NODE]);
    assert!(
        kwok["spec"]["taints"].is_null(),
        "kwok's node must stay the default for every other pod: {kwok:#}"
    );
}

#[test]
fn a_failing_command_reports_its_exit_code_termination_message_and_logs() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("real-exit");
    let script = "echo hello; echo done > /dev/termination-log; exit 3";
    create_ok(
        cluster,
        &ns,
        &real_node_pod("exit3", &["sh", "-c", script], json!({})),
    );

    let pod = finished_pod(cluster, &ns, "exit3");
    assert_eq!(pod["spec"]["nodeName"], REAL_NODE, "pod: {pod:#}");
    assert_eq!(pod["status"]["phase"], "Failed", "pod: {pod:#}");
    assert_eq!(terminated(&pod)["exitCode"], 3, "pod: {pod:#}");
    assert_eq!(terminated(&pod)["reason"], "Error", "pod: {pod:#}");
    // The file's content, echo's newline included.
    assert_eq!(terminated(&pod)["message"], "done\n", "pod: {pod:#}");

    let logs = cluster.kubectl_ok(&["-n", &ns, "logs", "exit3"]);
    assert_eq!(logs, "hello\n");
}

#[test]
fn a_true_pod_succeeds_on_the_real_node() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("real-true");
    let created = create_ok(cluster, &ns, &real_node_pod("true", &["true"], json!({})));
    let pod = finished_pod(cluster, &ns, "true");
    eprintln!(
        "[real node] pod `true`: create -> {} in {} ms",
        pod["status"]["phase"],
        created.elapsed().as_millis()
    );
    assert_eq!(pod["spec"]["nodeName"], REAL_NODE, "pod: {pod:#}");
    assert_eq!(pod["status"]["phase"], "Succeeded", "pod: {pod:#}");
    assert_eq!(terminated(&pod)["exitCode"], 0, "pod: {pod:#}");
}

#[test]
fn a_pod_past_its_active_deadline_is_killed_by_the_kubelet() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("real-deadline");
    // `sleep` as PID 1 ignores SIGTERM: a short grace period keeps the kill quick.
    let spec = json!({ "activeDeadlineSeconds": 2, "terminationGracePeriodSeconds": 1 });
    let created = create_ok(
        cluster,
        &ns,
        &real_node_pod("sleeper", &["sleep", "60"], spec),
    );

    let pod = finished_pod(cluster, &ns, "sleeper");
    let elapsed = created.elapsed();
    assert_eq!(pod["spec"]["nodeName"], REAL_NODE, "pod: {pod:#}");
    assert_eq!(pod["status"]["phase"], "Failed", "pod: {pod:#}");
    assert_eq!(pod["status"]["reason"], "DeadlineExceeded", "pod: {pod:#}");
    // Killed (SIGKILL after the grace period), long before `sleep 60` would have ended.
    assert_eq!(terminated(&pod)["exitCode"], 137, "pod: {pod:#}");
    assert!(
        elapsed < Duration::from_secs(45),
        "the kubelet took {elapsed:?} to end a pod with a 2 s deadline: {pod:#}"
    );
}

#[test]
fn a_quota_of_zero_pods_refuses_a_pod_at_create() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("real-quota");
    cluster.apply_yaml_in(
        &ns,
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: no-pods\nspec:\n  hard:\n    pods: \"0\"\n",
    );
    // Admission judges against the quota's status, which the resource quota controller fills.
    cluster.wait_for(
        "the resource quota controller to fill in quota no-pods' status",
        TIMEOUT,
        || {
            let quota = cluster.kubectl_json(&["-n", &ns, "get", "resourcequota", "no-pods"]);
            quota["status"]["hard"]["pods"] == "0" && quota["status"]["used"]["pods"] == "0"
        },
    );

    let out = create(
        cluster,
        &ns,
        &real_node_pod("refused", &["true"], json!({})),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a quota of zero pods admitted a pod: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains("exceeded quota: no-pods"),
        "the refusal does not name the quota: {stderr}"
    );
    let pods = cluster.kubectl_json(&["-n", &ns, "get", "pods"]);
    assert_eq!(pods["items"], json!([]), "pods: {pods:#}");
}

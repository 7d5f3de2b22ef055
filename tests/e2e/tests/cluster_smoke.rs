//! Smoke tests for the local cluster (tests/cluster/): the real control plane
//! schedules Job pods on the kwok node, kwok completes or fails them as the
//! e2e conventions say (and completes the pods of a TaskRun, as the peer
//! benchmark needs), and the garbage collector removes dependents.

use std::time::Duration;

use serde_json::Value;
use workflow_e2e::{Cluster, EXIT_CODE_ANNOTATION, FAIL_LABEL, KWOK_NODE, MESSAGE_ANNOTATION};

const TIMEOUT: Duration = Duration::from_secs(90);

/// Status (`"True"`, `"False"`, …) of the condition `kind` in `obj.status.conditions`.
fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a str> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str())
}

/// The single pod of Job `job` in `ns`.
fn job_pod(cluster: &Cluster, ns: &str, job: &str) -> Value {
    let pods = cluster.kubectl_json(&["-n", ns, "get", "pods", "-l", &format!("job-name={job}")]);
    let items = pods["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        items.len(),
        1,
        "expected exactly one pod for job {job}: {pods:#}"
    );
    items[0].clone()
}

fn wait_job_condition(cluster: &Cluster, ns: &str, job: &str, kind: &str) -> Value {
    let mut last = Value::Null;
    cluster.wait_for(
        &format!("job {ns}/{job} condition {kind}=True"),
        TIMEOUT,
        || {
            last = cluster.kubectl_json(&["-n", ns, "get", "job", job]);
            condition(&last, kind) == Some("True")
        },
    );
    last
}

fn job_yaml(name: &str, pod_labels: &str, pod_annotations: &str) -> String {
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
  backoffLimit: 0
  template:
    metadata:
      labels: {{{pod_labels}}}
      annotations: {{{pod_annotations}}}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: ["true"]
"#
    )
}

#[test]
fn job_is_scheduled_on_kwok_node_and_completes() {
    let cluster = Cluster::shared();
    let ns = cluster.fresh_namespace("smoke-complete");
    cluster.apply_yaml_in(
        &ns,
        &job_yaml("ok", "", &format!(r#""{MESSAGE_ANNOTATION}": "all good""#)),
    );

    let job = wait_job_condition(cluster, &ns, "ok", "Complete");
    assert_eq!(job["status"]["succeeded"], 1, "job status: {job:#}");
    assert_ne!(
        condition(&job, "Failed"),
        Some("True"),
        "job status: {job:#}"
    );

    let pod = job_pod(cluster, &ns, "ok");
    assert_eq!(pod["spec"]["nodeName"], KWOK_NODE, "pod: {pod:#}");
    assert_eq!(pod["status"]["phase"], "Succeeded", "pod: {pod:#}");
    let terminated = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 0, "pod: {pod:#}");
    assert_eq!(terminated["reason"], "Completed", "pod: {pod:#}");
    assert_eq!(terminated["message"], "all good", "pod: {pod:#}");
}

#[test]
fn job_marked_to_fail_fails_with_message_and_exit_code() {
    let cluster = Cluster::shared();
    let ns = cluster.fresh_namespace("smoke-fail");
    cluster.apply_yaml_in(
        &ns,
        &job_yaml(
            "boom",
            &format!(r#""{FAIL_LABEL}": "true""#),
            &format!(r#""{MESSAGE_ANNOTATION}": boom, "{EXIT_CODE_ANNOTATION}": "3""#),
        ),
    );

    let job = wait_job_condition(cluster, &ns, "boom", "Failed");
    assert_ne!(
        condition(&job, "Complete"),
        Some("True"),
        "job status: {job:#}"
    );
    assert_eq!(job["status"]["failed"], 1, "job status: {job:#}");

    let pod = job_pod(cluster, &ns, "boom");
    assert_eq!(pod["spec"]["nodeName"], KWOK_NODE, "pod: {pod:#}");
    assert_eq!(pod["status"]["phase"], "Failed", "pod: {pod:#}");
    let terminated = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["message"], "boom", "pod: {pod:#}");
    assert_eq!(terminated["exitCode"], 3, "pod: {pod:#}");
}

#[test]
fn failing_pod_uses_default_exit_code_and_message() {
    let cluster = Cluster::shared();
    let ns = cluster.fresh_namespace("smoke-fail-default");
    cluster.apply_yaml_in(
        &ns,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: plain
  labels:
    {FAIL_LABEL}: ""
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["true"]
"#
        ),
    );
    let mut pod = Value::Null;
    cluster.wait_for("pod plain to reach phase Failed", TIMEOUT, || {
        pod = cluster.kubectl_json(&["-n", &ns, "get", "pod", "plain"]);
        pod["status"]["phase"] == "Failed"
    });
    let terminated = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 1, "pod: {pod:#}");
    assert_eq!(terminated["message"], "simulated failure", "pod: {pod:#}");
}

/// A one-container pod named `name`; `owner_kind`, if given, is the kind of its owner reference.
fn pod_yaml(name: &str, owner_kind: Option<&str>) -> String {
    // An owner in a group no cluster serves: the garbage collector cannot resolve its kind, so it
    // never deletes the pod as an orphan, even on a cluster where Tekton's own CRDs are installed.
    let owner = owner_kind.map_or(String::new(), |kind| {
        format!(
            r#"
  ownerReferences:
  - apiVersion: e2e.workflow.rxg456.cn/v1
    kind: {kind}
    name: owner
    uid: 00000000-0000-0000-0000-000000000001"#
        )
    });
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}{owner}
spec:
  restartPolicy: Never
  containers:
  - name: step-main
    image: busybox
    command: ["true"]
"#
    )
}

fn wait_pod_phase(cluster: &Cluster, ns: &str, pod: &str, phase: &str) -> Value {
    let mut last = Value::Null;
    cluster.wait_for(
        &format!("pod {ns}/{pod} to reach phase {phase}"),
        TIMEOUT,
        || {
            last = cluster.kubectl_json(&["-n", ns, "get", "pod", pod]);
            last["status"]["phase"] == phase
        },
    );
    last
}

#[test]
fn a_taskrun_pod_completes_and_a_pod_without_owner_keeps_running() {
    let cluster = Cluster::shared();
    let ns = cluster.fresh_namespace("smoke-taskrun");
    cluster.apply_yaml_in(&ns, &pod_yaml("unowned", None));
    wait_pod_phase(cluster, &ns, "unowned", "Running");
    cluster.apply_yaml_in(&ns, &pod_yaml("taskrun-pod", Some("TaskRun")));

    let pod = wait_pod_phase(cluster, &ns, "taskrun-pod", "Succeeded");
    let terminated = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 0, "pod: {pod:#}");
    assert_eq!(terminated["reason"], "Completed", "pod: {pod:#}");
    // Running for longer than the TaskRun's pod took to complete: no stage completes it.
    let unowned = cluster.kubectl_json(&["-n", &ns, "get", "pod", "unowned"]);
    assert_eq!(unowned["status"]["phase"], "Running", "pod: {unowned:#}");
}

#[test]
fn deleting_owner_garbage_collects_dependent() {
    let cluster = Cluster::shared();
    let ns = cluster.fresh_namespace("smoke-gc");
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "owner",
        "--from-literal=k=v",
    ]);
    let uid = cluster.kubectl_ok(&[
        "-n",
        &ns,
        "get",
        "configmap",
        "owner",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    assert!(!uid.trim().is_empty(), "owner has no uid");
    cluster.apply_yaml_in(
        &ns,
        &format!(
            r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: dependent
  ownerReferences:
  - apiVersion: v1
    kind: ConfigMap
    name: owner
    uid: {uid}
data:
  k: v
"#,
            uid = uid.trim()
        ),
    );
    // A bystander without an owner must survive.
    cluster.kubectl_ok(&["-n", &ns, "create", "configmap", "bystander"]);
    cluster.kubectl_ok(&["-n", &ns, "get", "configmap", "dependent"]);

    cluster.kubectl_ok(&["-n", &ns, "delete", "configmap", "owner", "--wait=true"]);
    cluster.wait_for(
        "the garbage collector to delete configmap dependent",
        TIMEOUT,
        || {
            let out = cluster.kubectl(&["-n", &ns, "get", "configmap", "dependent"]);
            !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound")
        },
    );
    cluster.kubectl_ok(&["-n", &ns, "get", "configmap", "bystander"]);
}

/// A Deployment of one pod on the kwok node behind a Service, a PodDisruptionBudget over it and
/// a DaemonSet on the kwok node.
const CONTROLLED_YAML: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: web, image: busybox, ports: [{containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {type: kwok}
      containers: [{name: agent, image: busybox}]
"#;

/// Deletes a Node when dropped, whatever the test's outcome.
struct DeleteNode<'a>(&'a Cluster, String);

impl Drop for DeleteNode<'_> {
    fn drop(&mut self) {
        self.0.kubectl(&[
            "delete",
            "node",
            &self.1,
            "--wait=false",
            "--ignore-not-found",
        ]);
    }
}

/// What the operator, its install (the admission webhook's Service, the PodDisruptionBudget)
/// and joining Nodes rely on of the controller manager, as a kubeadm cluster runs it: a Service
/// gets endpoints (Endpoints and EndpointSlice), a PodDisruptionBudget its status, a DaemonSet
/// its pod, and a Node whose kubelet stopped posting status goes `Unknown` and is tainted
/// unreachable.
#[test]
fn the_controller_manager_runs_what_a_kubeadm_cluster_runs_for_services_pdbs_daemonsets_and_nodes()
{
    let cluster = Cluster::shared();
    let ns = cluster.fresh_namespace("smoke-controllers");
    // A Node that posted Ready once and then nothing more, as one whose kubelet died. Tainted so
    // that nothing of the other tests is scheduled to it meanwhile.
    let ghost = format!("ghost-{ns}");
    cluster.apply_yaml(&format!(
        r#"apiVersion: v1
kind: Node
metadata:
  name: {ghost}
  labels: {{kubernetes.io/hostname: {ghost}}}
spec:
  taints: [{{key: e2e.workflow.rxg456.cn/ghost, effect: NoSchedule}}]
"#
    ));
    let _gone = DeleteNode(cluster, ghost.clone());
    let now = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .expect("date");
    let ready = serde_json::json!({"status": {"conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "posted once",
        "lastHeartbeatTime": now, "lastTransitionTime": now,
    }]}});
    cluster.kubectl_ok(&[
        "patch",
        "node",
        &ghost,
        "--subresource=status",
        "--type=merge",
        "-p",
        &ready.to_string(),
    ]);
    cluster.apply_yaml_in(&ns, CONTROLLED_YAML);

    let pod_ip = || {
        let pods = cluster.kubectl_json(&["-n", &ns, "get", "pods", "-l", "app=web"]);
        pods["items"][0]["status"]["podIP"]
            .as_str()
            .filter(|ip| !ip.is_empty())
            .map(str::to_string)
    };
    cluster.wait_for("the web pod to have an address", TIMEOUT, || {
        pod_ip().is_some()
    });
    let ip = pod_ip().expect("the web pod's address");
    let mut last = Value::Null;
    cluster.wait_for(
        &format!("an EndpointSlice of Service web listing {ip}"),
        TIMEOUT,
        || {
            last = cluster.kubectl_json(&[
                "-n",
                &ns,
                "get",
                "endpointslices",
                "-l",
                "kubernetes.io/service-name=web",
            ]);
            last["items"][0]["endpoints"][0]["addresses"][0] == ip.as_str()
        },
    );
    cluster.wait_for(
        &format!("the Endpoints of Service web to list {ip}"),
        TIMEOUT,
        || {
            last = cluster.kubectl_json(&["-n", &ns, "get", "endpoints", "web"]);
            last["subsets"][0]["addresses"][0]["ip"] == ip.as_str()
        },
    );
    cluster.wait_for(
        "the PodDisruptionBudget's status to count the healthy pod",
        TIMEOUT,
        || {
            last = cluster.kubectl_json(&["-n", &ns, "get", "pdb", "web"]);
            let status = &last["status"];
            status["expectedPods"] == 1
                && status["currentHealthy"] == 1
                && status["disruptionsAllowed"] == 0
        },
    );
    cluster.wait_for(
        &format!("the DaemonSet's pod on {KWOK_NODE}"),
        TIMEOUT,
        || {
            last = cluster.kubectl_json(&["-n", &ns, "get", "pods", "-l", "app=agent"]);
            last["items"][0]["spec"]["nodeName"] == KWOK_NODE
        },
    );

    // The node lifecycle controller's grace period is 50 s, as kubeadm leaves it.
    cluster.wait_for(
        &format!("node {ghost} to go Unknown and be tainted unreachable"),
        Duration::from_secs(180),
        || {
            last = cluster.kubectl_json(&["get", "node", &ghost]);
            let unknown = condition(&last, "Ready") == Some("Unknown");
            let tainted = last["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["key"] == "node.kubernetes.io/unreachable");
            unknown && tainted
        },
    );
    // The nodes the tests run on are still Ready: nothing flagged them.
    let kwok = cluster.kubectl_json(&["get", "node", KWOK_NODE]);
    assert_eq!(condition(&kwok, "Ready"), Some("True"), "{kwok:#}");
}

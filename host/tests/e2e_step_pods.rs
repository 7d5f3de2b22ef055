//! End to end: step pods the API server refuses. A refusal is the step's outcome, said where
//! users look (the Workflow's and the group's condition, one Event), never a reconcile error
//! loop: a full quota keeps the step waiting until there is room; a policy fails it.

#[path = "support/operator.rs"]
mod operator;

use std::time::Duration;

use operator::*;
use serde_json::Value;
use workflow_e2e::poll_until;

/// Waits until `what` in `ns` has a `Succeeded` condition with `reason`, and returns it.
fn wait_reason(ns: &str, what: &str, reason: &str, operator: &mut Operator) -> Value {
    let log = operator.log();
    let (condition, _) = poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        &format!("{what} to say {reason}"),
        || {
            operator.assert_running();
            let seen = succeeded_condition(&get(ns, what));
            if seen["reason"] == reason {
                Ok(seen)
            } else {
                Err(seen)
            }
        },
        |seen| format!("its Succeeded condition: {seen}\n{log}"),
    );
    condition
}

/// The notes of the Events with `reason` in `ns`.
fn event_notes(ns: &str, reason: &str) -> Vec<String> {
    let selector = format!("reason={reason}");
    cluster().kubectl_json(&["-n", ns, "get", "events", "--field-selector", &selector])["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            e["message"]
                .as_str()
                .or_else(|| e["note"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn a_quota_of_zero_pods_keeps_the_group_waiting_saying_why_until_the_quota_goes() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-quota");
    cluster.apply_yaml_in(
        &ns,
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: no-pods\nspec:\n  hard:\n    pods: \"0\"\n",
    );
    let plugins = plugin_dir(&["pre-check"]);
    let mut operator = Operator::start(&ns, plugins.path());
    cluster.apply_yaml_in(&ns, &group_yaml("quota", &["pre-check"], "", ""));

    let group = wait_reason(&ns, "workflowgroup/quota", "PodRefused", &mut operator);
    let message = group["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("its pod was refused") && message.contains("quota"),
        "the group quotes the refusal: {message}"
    );
    let workflow = list(&ns, "workflows", None)
        .into_iter()
        .next()
        .expect("the group's Workflow");
    let condition = succeeded_condition(&workflow);
    assert_eq!(condition["reason"], "PodRefused", "{condition}");
    assert_eq!(workflow["status"]["phase"], "Pending", "no step started");
    assert!(list(&ns, "pods", None).is_empty(), "no pod exists");
    // Said once on the Workflow however often the create is tried again.
    std::thread::sleep(Duration::from_secs(3));
    let notes = event_notes(&ns, "PodRefused");
    let on_workflow = notes.iter().filter(|n| n.starts_with("step ")).count();
    assert_eq!(on_workflow, 1, "one Event on the Workflow: {notes:?}");
    assert!(
        operator.log_text().contains("step pod refused"),
        "the operator logs the refusal as what it is"
    );

    cluster.kubectl_ok(&["-n", &ns, "delete", "resourcequota", "no-pods"]);
    wait_group_phase(&ns, "quota", "Completed", &mut operator);
}

#[test]
fn a_step_pod_an_admission_policy_refuses_fails_the_workflow_and_the_group_quoting_it() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-policy");
    let policy = format!("no-step-pods-{ns}");
    cluster.apply_yaml(&format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {policy}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [\"\"]
      apiVersions: [\"v1\"]
      operations: [\"CREATE\"]
      resources: [\"pods\"]
  validations:
  - expression: \"!has(object.metadata.labels) || !('workflow.rxg456.cn/step' in object.metadata.labels)\"
    message: step pods are not allowed in this namespace
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {policy}
spec:
  policyName: {policy}
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: {ns}
"
    ));
    // A policy takes effect a moment after it is stored: wait until it refuses a step-like pod.
    let probe = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probe\n  labels:\n    workflow.rxg456.cn/step: probe\nspec:\n  containers:\n  - name: c\n    image: busybox:1.36\n";
    poll_until(
        Duration::from_millis(200),
        TIMEOUT,
        "the admission policy to refuse step pods",
        || {
            let out = cluster.kubectl_with_stdin(
                &["-n", &ns, "create", "--dry-run=server", "-f", "-"],
                probe.as_bytes(),
            );
            let stderr = String::from_utf8_lossy(&out.stderr).to_string();
            if stderr.contains("not allowed in this namespace") {
                Ok(())
            } else {
                Err(stderr)
            }
        },
        |stderr| format!("kubectl create --dry-run=server said: {stderr}"),
    );
    let plugins = plugin_dir(&["pre-check"]);
    let mut operator = Operator::start(&ns, plugins.path());
    cluster.apply_yaml_in(&ns, &group_yaml("refused", &["pre-check"], "", ""));

    wait_group_phase(&ns, "refused", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/refused"));
    assert!(
        message.contains("its pod was refused")
            && message.contains("step pods are not allowed in this namespace"),
        "the group quotes the refusal: {message}"
    );
    let workflow = list(&ns, "workflows", None)
        .into_iter()
        .next()
        .expect("the group's Workflow");
    assert_eq!(workflow["status"]["phase"], "Failed");
    let notes = event_notes(&ns, "StepFailed");
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("not allowed in this namespace"),
        "{notes:?}"
    );
    operator.assert_running();
    cluster.kubectl_ok(&[
        "delete",
        "validatingadmissionpolicybinding,validatingadmissionpolicy",
        &policy,
    ]);
}

/// A group of one `at` Workflow running `command` at once, on the real node, with
/// `pod_template` (a JSON object) merged over the real node's placement, and `targets`.
fn at_group(name: &str, command: &str, pod_template: Value, targets: Value) -> String {
    real_node_at_group(
        name,
        serde_json::json!({"command": command}),
        pod_template,
        targets,
    )
}

/// One target of its own (see [`own_target_ip`]), so that this file's groups, which run at
/// once, do not wait for each other's lock on it.
fn one_target() -> Value {
    serde_json::json!([{"name": "node-1", "ip": own_target_ip(), "role": "Master"}])
}

#[test]
fn in_a_restricted_namespace_a_step_runs_for_real_as_non_root_with_its_secrets_from_the_template() {
    let cluster = cluster();
    cluster.require_real_node();
    let ns = cluster.fresh_namespace("e2e-restricted");
    cluster.kubectl_ok(&[
        "label",
        "namespace",
        &ns,
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "secret",
        "generic",
        "node-access",
        "--from-literal=token=s3cret-token",
        "--from-literal=key=private-key-bytes",
    ]);
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    let targets = one_target();
    let ip = targets[0]["ip"].as_str().unwrap_or_default().to_string();
    // Every check is a real command in a real container: a failing one fails the step.
    let command = [
        "test \"$(id -u)\" = 65534",
        // The values themselves are in no object: the command compares what the Secret gave.
        "test -n \"$TOKEN\"",
        "test \"$TOKEN\" = \"$(cat /var/run/access/token)\"",
        "test -s /var/run/access/key",
        "test \"$WORKFLOW_TARGET_NAMES\" = node-1",
        &format!("grep -q '\"ip\":\"{ip}\"' \"$WORKFLOW_TARGETS_FILE\""),
        "echo all checks passed",
    ]
    .join(" && ");
    let template = serde_json::json!({
        "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "node-access", "key": "token"}}}],
        "volumes": [{"name": "access", "secret": {"secretName": "node-access", "defaultMode": 0o440_u32}}],
        "volumeMounts": [{"name": "access", "mountPath": "/var/run/access", "readOnly": true}],
    });
    cluster.apply_yaml_in(&ns, &at_group("hardened", &command, template, targets));
    wait_group_phase(&ns, "hardened", "Completed", &mut operator);
    let pod = list(&ns, "pods", None)
        .into_iter()
        .next()
        .expect("the step's pod");
    assert_eq!(pod["spec"]["nodeName"], workflow_e2e::REAL_NODE);
    let logs = cluster.kubectl_ok(&["-n", &ns, "logs", text(&pod, "/metadata/name")]);
    assert!(logs.contains("all checks passed"), "kubectl logs: {logs}");
    // The Secret's value is nowhere in the objects the operator wrote.
    for what in ["workflowgroups", "workflows"] {
        let objects = cluster.kubectl_ok(&["-n", &ns, "get", what, "-o", "json"]);
        assert!(
            !objects.contains("s3cret-token") && !objects.contains("private-key-bytes"),
            "{what} hold the secret"
        );
    }

    // A group that asks for more than the namespace allows is refused, quoting Pod Security.
    let privileged = serde_json::json!({"containerSecurityContext": {"privileged": true}});
    cluster.apply_yaml_in(
        &ns,
        &at_group("privileged", "true", privileged, one_target()),
    );
    wait_group_phase(&ns, "privileged", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/privileged"));
    assert!(
        message.contains("its pod was refused") && message.contains("PodSecurity"),
        "the group quotes Pod Security: {message}"
    );
}

#[test]
fn five_thousand_targets_reach_a_real_step_as_a_file() {
    let cluster = cluster();
    cluster.require_real_node();
    let ns = cluster.fresh_namespace("e2e-targets");
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    let targets: Vec<Value> = (0..5000)
        .map(|i| {
            serde_json::json!({
                "name": format!("rack-{:02}-node-{i:05}", i / 100),
                "ip": format!("192.168.{}.{}", i / 250, i % 250 + 1),
                "role": "Worker",
            })
        })
        .collect();
    let command = "test \"$WORKFLOW_TARGET_COUNT\" = 5000 \
        && test \"$(grep -o '\"name\"' \"$WORKFLOW_TARGETS_FILE\" | wc -l)\" = 5000 \
        && grep -q rack-49-node-04999 \"$WORKFLOW_TARGETS_FILE\" \
        && test -z \"${WORKFLOW_TARGETS:-}\"";
    // Server-side, as a user applies an object this big: a client-side apply would also
    // write it whole into an annotation, which holds at most 256 KiB.
    let group = at_group(
        "many",
        command,
        serde_json::json!({}),
        Value::Array(targets),
    );
    let out = cluster.kubectl_with_stdin(
        &["-n", &ns, "apply", "--server-side", "-f", "-"],
        group.as_bytes(),
    );
    assert!(
        out.status.success(),
        "kubectl apply --server-side: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_group_phase(&ns, "many", "Completed", &mut operator);
}

#[test]
fn on_the_real_node_exit_codes_and_output_reach_the_plugin_and_a_timeout_or_a_deleted_pod_fails_the_step()
 {
    let cluster = cluster();
    cluster.require_real_node();
    let ns = cluster.fresh_namespace("e2e-real-steps");
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    let group = |name: &str, command: &str, timeout: Option<u32>| {
        let mut yaml: Value = serde_json::from_str(&at_group(
            name,
            command,
            serde_json::json!({}),
            one_target(),
        ))
        .expect("JSON");
        if let Some(seconds) = timeout {
            yaml["spec"]["params"]["at"]["timeoutSeconds"] = seconds.into();
        }
        yaml.to_string()
    };

    // A real container's exit code and its output (the termination message falls back to the
    // log's tail) reach the plugin's `evaluate`, whose words fail the group.
    cluster.apply_yaml_in(
        &ns,
        &group(
            "exits",
            "echo 'disk /var is 97% full on node-1'; exit 3",
            None,
        ),
    );
    // A step the kubelet stops at its timeout (`activeDeadlineSeconds`).
    cluster.apply_yaml_in(&ns, &group("too-slow", "sleep 120", Some(3)));
    // A step whose pod is deleted while it runs.
    cluster.apply_yaml_in(&ns, &group("deleted", "sleep 120", None));

    wait_group_phase(&ns, "exits", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/exits"));
    assert!(
        message.contains("exit code 3") && message.contains("97% full on node-1"),
        "the group says what the container said: {message}"
    );

    let (pod, _) = poll_until(
        Duration::from_millis(200),
        TIMEOUT,
        "the step of `deleted` to run",
        || {
            list(&ns, "pods", Some("workflow.rxg456.cn/group-name=deleted"))
                .into_iter()
                .find(|p| p["status"]["phase"] == "Running")
                .ok_or(())
        },
        |()| "no running pod".into(),
    );
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "delete",
        "pod",
        text(&pod, "/metadata/name"),
        "--wait=false",
    ]);
    wait_group_phase(&ns, "deleted", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/deleted"));
    assert!(
        message.contains("deleted before it finished"),
        "the group says the pod was deleted: {message}"
    );

    let waited = wait_group_phase(&ns, "too-slow", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/too-slow"));
    assert!(
        message.contains("DeadlineExceeded"),
        "the group says the step ran out of time: {message}"
    );
    assert!(
        waited < Duration::from_secs(60),
        "a 3 s timeout failed the step after {waited:?}"
    );
}

/// `workflow-operator <args>` as the user (the cluster's kubeconfig): its exit status, stdout
/// and stderr.
fn cli(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(args)
        .env("KUBECONFIG", cluster().kubeconfig())
        .output()
        .expect("run workflow-operator");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_step_tree_and_a_failed_steps_output_outlive_its_pods() {
    let cluster = cluster();
    cluster.require_real_node();
    let ns = cluster.fresh_namespace("e2e-tree");
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    let command = "echo first-words; echo last-words; exit 3";
    cluster.apply_yaml_in(
        &ns,
        &at_group("tree", command, serde_json::json!({}), one_target()),
    );
    wait_group_phase(&ns, "tree", "Failed", &mut operator);

    // While the pod exists, its log.
    let (ok, live, err) = cli(&["logs", "tree", "run", "-n", &ns]);
    assert!(ok, "{err}");
    assert!(live.contains("first-words\nlast-words"), "{live:?}");

    cluster.kubectl_ok(&["-n", &ns, "delete", "pods", "--all", "--wait=true"]);
    let (ok, tree, err) = cli(&["get", "wfg", "tree", "-n", &ns]);
    assert!(ok, "{err}");
    assert!(
        tree.starts_with(&format!("WorkflowGroup {ns}/tree  Failed  started ")),
        "{tree}"
    );
    assert!(tree.contains("WorkflowFailed: workflow tree-at-"), "{tree}");
    assert!(
        tree.contains("Workflow tree-at-") && tree.contains("(at)  Failed"),
        "{tree}"
    );
    let step = tree
        .lines()
        .find(|l| l.contains("── run  "))
        .unwrap_or_else(|| panic!("no step line: {tree}"));
    assert!(
        step.contains("run  Failed  started ") && step.contains("attempts 1  exit 3"),
        "{step}"
    );

    // The pod is gone: the end of its output, from the step's status.
    let (ok, kept, note) = cli(&["logs", "tree", "run", "-n", &ns]);
    assert!(ok, "{note}");
    assert!(kept.contains("last-words"), "{kept:?}");
    assert!(note.contains("is gone"), "{note}");

    let (ok, _, err) = cli(&["logs", "tree", "no-such-step", "-n", &ns]);
    assert!(!ok && err.contains("has no step \"no-such-step\""), "{err}");
    let (ok, _, err) = cli(&["get", "wfg", "no-such-group", "-n", &ns]);
    assert!(
        !ok && err.contains("no WorkflowGroup no-such-group"),
        "{err}"
    );
}

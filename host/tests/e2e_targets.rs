//! End to end, on the real node: steps that act on their targets over SSH. The targets are
//! hosts of the test's own (`tests/cluster/target-hosts.sh`: network namespaces each running a
//! real sshd with its own host key); a step pod in the step image (`make image`) runs
//! `workflow-runner`, which logs in with the key and known hosts of a `kubernetes.io/ssh-auth`
//! Secret the group's pod template mounts, and reports per target.

#[path = "support/operator.rs"]
mod operator;
#[path = "support/target_hosts.rs"]
mod target_hosts;

use std::path::Path;
use std::process::Command;

use operator::*;
use serde_json::Value;
use target_hosts::*;
use workflow_e2e::repo_root;

/// A group of one `at` Workflow whose command runs `remote` on `targets` with the runner, on
/// the real node, with the Secret `node-ssh` mounted where the runner looks for it.
fn ssh_group(name: &str, remote: &str, targets: Value) -> String {
    real_node_at_group(
        name,
        serde_json::json!({
            "command": format!("workflow-runner --connect-timeout 5 -- '{remote}'"),
            "image": STEP_IMAGE,
        }),
        serde_json::json!({
            "volumes": [{"name": "ssh", "secret": {"secretName": "node-ssh"}}],
            "volumeMounts": [{"name": "ssh", "mountPath": "/etc/workflow/ssh", "readOnly": true}],
        }),
        targets,
    )
}

#[test]
fn steps_act_on_each_target_over_ssh_with_a_secrets_key_and_a_host_that_is_down_fails_naming_it() {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    let hosts = TargetHosts::start(3);
    let marks = hosts.file("marks");
    std::fs::create_dir_all(&marks).expect("marks directory");
    let ns = cluster.fresh_namespace("e2e-targets-ssh");
    hosts.secret(cluster, &ns, "node-ssh", &hosts.file("ssh-privatekey"));
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());

    // Each target writes its own address (as its network namespace sees it) to a mark.
    let remote = format!(
        "ip -4 -o addr show dev eth0 > {}/$WORKFLOW_TARGET_NAME && echo marked $WORKFLOW_TARGET_NAME",
        path(&marks)
    );
    hosts.stop(2);
    cluster.apply_yaml_in(&ns, &ssh_group("all-up", &remote, hosts.targets(&[1, 3])));
    cluster.apply_yaml_in(&ns, &ssh_group("one-down", "true", hosts.targets(&[1, 2])));

    wait_group_phase(&ns, "all-up", "Completed", &mut operator);
    for n in [1, 3] {
        let (name, ip) = &hosts.hosts[n - 1];
        let mark = std::fs::read_to_string(marks.join(name)).unwrap_or_default();
        assert!(
            mark.contains(&format!("inet {ip}/30")),
            "{name}'s command ran on {ip}: {mark:?}"
        );
    }
    assert!(
        !marks.join(&hosts.hosts[1].0).exists(),
        "nothing ran on the target the group does not name"
    );
    let pod = list(&ns, "pods", Some("workflow.rxg456.cn/group-name=all-up"))
        .into_iter()
        .next()
        .expect("the step's pod");
    let logs = cluster.kubectl_ok(&["-n", &ns, "logs", text(&pod, "/metadata/name")]);
    assert!(
        logs.contains("[host-1] marked host-1") && logs.contains("[host-3] marked host-3"),
        "kubectl logs has each target's output: {logs}"
    );
    let report = pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        report.starts_with("targets 2: 2 ok, 0 failed, 0 unreachable\nOK host-1 ("),
        "the termination message reports per target: {report:?}"
    );
    // The key is in no object the operator wrote, nor in the step's log.
    let key = std::fs::read_to_string(hosts.file("ssh-privatekey")).expect("the key");
    let secret_line = key.lines().nth(1).expect("a key line");
    for what in ["workflowgroups", "workflows", "pods"] {
        let objects = cluster.kubectl_ok(&["-n", &ns, "get", what, "-o", "json"]);
        assert!(!objects.contains(secret_line), "{what} hold the key");
    }
    assert!(!logs.contains(secret_line), "the log holds the key");

    wait_group_phase(&ns, "one-down", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/one-down"));
    let down = &hosts.hosts[1];
    assert!(
        message.contains(&format!("UNREACHABLE {}: connect {}:22", down.0, down.1))
            && message.contains("refused"),
        "the group names the host that is down: {message}"
    );
    assert!(
        message.contains("OK host-1"),
        "and the one that was fine: {message}"
    );

    // Up again, the host that was down is the only target of the step in a re-run of the
    // failed targets.
    hosts.start_again(2);
    // Asked as someone else: the admission policy refuses the name.
    let forged = cluster.kubectl(&[
        "-n",
        &ns,
        "patch",
        "wfg",
        "one-down",
        "--type=merge",
        "-p",
        r#"{"metadata":{"annotations":{"workflow.rxg456.cn/requested-by":"mallory"}},"spec":{"rerun":{"id":"forged"}}}"#,
    ]);
    assert!(
        !forged.status.success()
            && String::from_utf8_lossy(&forged.stderr).contains(
                "metadata.annotations[workflow.rxg456.cn/requested-by] must be the user who makes this request"
            ),
        "{forged:?}"
    );
    // Asked as oneself, with the command line: the run records who.
    let me = cluster.kubectl_ok(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    let asked = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args([
            "rerun",
            "one-down",
            "-n",
            &ns,
            "--id",
            "host-2-up",
            "--failed-targets",
        ])
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .expect("run workflow-operator rerun");
    assert!(
        asked.status.success(),
        "{}",
        String::from_utf8_lossy(&asked.stderr)
    );
    wait_group_phase(&ns, "one-down", "Completed", &mut operator);
    let group = get(&ns, "workflowgroup/one-down");
    let run = &group["status"]["runs"][1];
    assert_eq!(
        (
            run["id"].as_str(),
            run["targets"].as_str(),
            run["requestedBy"].as_str()
        ),
        (Some("host-2-up"), Some("Failed"), Some(me.trim())),
        "{group:#}"
    );
    let pod = list(
        &ns,
        "pods",
        Some("workflow.rxg456.cn/group-name=one-down,workflow.rxg456.cn/run=2"),
    )
    .into_iter()
    .next()
    .expect("run 2's step pod");
    let report = pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        report.starts_with("targets 1: 1 ok, 0 failed, 0 unreachable\nOK host-2 ("),
        "run 2 acted on host-2 alone: {report:?}"
    );
}

/// A group running `types` on `targets` on the real node, with `params` and the pod template
/// `extra` laid over the real node's placement (`podTemplates` per type in `per_type`).
fn typed_group(
    name: &str,
    types: &[&str],
    params: Value,
    targets: Value,
    extra: Value,
    per_type: Value,
) -> String {
    let mut template = workflow_e2e::real_node_placement();
    for (key, value) in extra.as_object().into_iter().flatten() {
        template[key] = value.clone();
    }
    serde_json::json!({
        "apiVersion": "workflow.rxg456.cn/v1alpha1",
        "kind": "WorkflowGroup",
        "metadata": {"name": name},
        "spec": {
            "type": "cluster-expansion",
            "clusterName": "test-cluster",
            "workflowSteps": types,
            "targets": targets,
            "params": params,
            "podTemplate": template,
            "podTemplates": per_type,
        }
    })
    .to_string()
}

/// The Workflow of `group`'s type `workflow_type`, as `kubectl describe` prints it.
fn describe_workflow(
    cluster: &workflow_e2e::Cluster,
    ns: &str,
    group: &str,
    workflow_type: &str,
) -> String {
    let selector = format!(
        "workflow.rxg456.cn/group-name={group},workflow.rxg456.cn/workflow-type={workflow_type}"
    );
    cluster.kubectl_ok(&["-n", ns, "describe", "workflows", "-l", &selector])
}

#[test]
fn the_seed_sample_against_target_hosts_checks_sets_up_and_verifies_them_for_real() {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    let hosts = TargetHosts::start(3);
    let ns = cluster.fresh_namespace("e2e-targets-seed");
    // The Secret the step pods mount by default: no pod template needed for SSH.
    hosts.secret(cluster, &ns, "workflow-ssh", &hosts.file("ssh-privatekey"));
    let node_script = "#!/bin/sh\nset -e\n\
        echo \"$WORKFLOW_TARGET_NAME of $WORKFLOW_CLUSTER_NAME, $WORKFLOW_OS_ID with $WORKFLOW_PACKAGE_MANAGER\" \
        > /etc/workflow-configured\necho configured\n";
    let script_file = hosts.file("configure.sh");
    std::fs::write(&script_file, node_script).expect("node script");
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "node-scripts",
        &format!("--from-file=configure.sh={}", path(&script_file)),
    ]);
    let plugins = plugin_dir(&["pre-check", "setup", "post-check"]);
    let mut operator = Operator::start(&ns, plugins.path());

    // The seed's sample, its targets rewritten to the test's hosts, with what setup installs
    // and post-check verifies.
    let sample: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo_root().join("examples/workflowgroup-sample.yaml"))
            .expect("the sample"),
    )
    .expect("the sample's YAML");
    let types: Vec<&str> = sample["spec"]["workflowSteps"]
        .as_array()
        .expect("workflowSteps")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(types, ["pre-check", "setup", "post-check"]);
    let mut targets = sample["spec"]["targets"].clone();
    for (target, (_, ip)) in targets
        .as_array_mut()
        .expect("targets")
        .iter_mut()
        .zip(&hosts.hosts)
    {
        target["ip"] = Value::from(ip.as_str());
    }
    let params = serde_json::json!({
        "pre-check": {"requiredCommands": ["dpkg", "apt-get"], "minDiskMiB": 64},
        "setup": {"packages": ["workflow-test-marker"], "scriptFile": "/etc/workflow/scripts/configure.sh"},
        "post-check": {
            "packages": ["workflow-test-marker"],
            "files": ["/etc/workflow-configured", "/usr/share/workflow-test-marker/installed"],
            "commands": ["workflow-test-marker"],
        },
    });
    let scripts = serde_json::json!({"setup": {
        "volumes": [{"name": "scripts", "configMap": {"name": "node-scripts"}}],
        "volumeMounts": [{"name": "scripts", "mountPath": "/etc/workflow/scripts", "readOnly": true}],
    }});
    let group = typed_group(
        "workflowgroup-sample",
        &types,
        params,
        targets,
        serde_json::json!({}),
        scripts,
    );
    cluster.apply_yaml_in(&ns, &group);
    wait_group_phase(&ns, "workflowgroup-sample", "Completed", &mut operator);

    // Setup's effects are on each host, and only there.
    for (n, (name, _)) in hosts.hosts.iter().enumerate() {
        let n = n + 1;
        let installed = hosts.exec(n, "dpkg-query -W -f='${Status}' workflow-test-marker");
        assert!(
            String::from_utf8_lossy(&installed.stdout).ends_with(" installed"),
            "{name} has the package: {installed:?}"
        );
        let configured = hosts.exec(n, "cat /etc/workflow-configured");
        let configured = String::from_utf8_lossy(&configured.stdout);
        let seed_name = format!("node-{n}");
        assert!(
            configured.starts_with(&format!("{seed_name} of test-cluster, debian with apt-get")),
            "{name}'s node script ran with its facts: {configured:?}"
        );
    }
    assert!(
        !Path::new("/etc/workflow-configured").exists()
            && !Path::new("/usr/share/workflow-test-marker").exists(),
        "nothing was set up on the machine itself"
    );
    let post = describe_workflow(cluster, &ns, "workflowgroup-sample", "post-check");
    assert!(
        post.contains("targets 3: 3 ok, 0 failed, 0 unreachable"),
        "post-check verified every target: {post}"
    );
}

#[test]
fn a_target_that_is_down_refuses_the_key_or_hangs_is_named_and_a_failure_within_the_budget_completes()
 {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    let hosts = TargetHosts::start(12);
    let ns = cluster.fresh_namespace("e2e-targets-fail");
    hosts.secret(cluster, &ns, "workflow-ssh", &hosts.file("ssh-privatekey"));
    let wrong_key = hosts.file("wrong-key");
    let keygen = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f", path(&wrong_key)])
        .status()
        .expect("ssh-keygen");
    assert!(keygen.success());
    hosts.secret(cluster, &ns, "wrong-ssh", &wrong_key);
    let plugins = plugin_dir(&["pre-check", "post-check"]);
    let mut operator = Operator::start(&ns, plugins.path());

    hosts.stop(2);
    hosts.hang(3);
    // Nine of ten have the file post-check wants; host-12 lacks it.
    for n in [1, 4, 5, 6, 7, 8, 9, 10, 11] {
        let out = hosts.exec(n, "touch /etc/workflow-e2e-ready");
        assert!(out.status.success(), "host {n}: {out:?}");
    }
    let fast = serde_json::json!({"ssh": {"connectTimeoutSeconds": 3}, "checkPeers": false});
    let none = serde_json::json!({});
    cluster.apply_yaml_in(
        &ns,
        &typed_group(
            "down",
            &["pre-check"],
            serde_json::json!({"pre-check": fast}),
            hosts.targets(&[1, 2]),
            none.clone(),
            none.clone(),
        ),
    );
    let wrong = serde_json::json!({
        "volumes": [{"name": "ssh", "secret": {"secretName": "wrong-ssh"}}],
        "volumeMounts": [{"name": "ssh", "mountPath": "/etc/workflow/ssh", "readOnly": true}],
    });
    cluster.apply_yaml_in(
        &ns,
        &typed_group(
            "wrong-key",
            &["pre-check"],
            serde_json::json!({"pre-check": fast}),
            hosts.targets(&[1]),
            wrong,
            none.clone(),
        ),
    );
    cluster.apply_yaml_in(
        &ns,
        &typed_group(
            "hangs",
            &["pre-check"],
            serde_json::json!({"pre-check": fast}),
            hosts.targets(&[1, 3]),
            none.clone(),
            none.clone(),
        ),
    );
    let ten = [1, 4, 5, 6, 7, 8, 9, 10, 11, 12];
    let budget = serde_json::json!({"post-check": {"files": ["/etc/workflow-e2e-ready"], "maxFailedTargets": 1}});
    cluster.apply_yaml_in(
        &ns,
        &typed_group(
            "one-of-ten",
            &["post-check"],
            budget,
            hosts.targets(&ten),
            none.clone(),
            none.clone(),
        ),
    );

    let (down, down_ip) = &hosts.hosts[1];
    wait_group_phase(&ns, "down", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/down"));
    assert!(
        message.contains(&format!("{down} unreachable: connect {down_ip}:22"))
            && message.contains("refused")
            && message.contains("validate-nodes"),
        "pre-check fails naming the host that is down: {message}"
    );

    wait_group_phase(&ns, "wrong-key", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/wrong-key"));
    assert!(
        message.contains("host-1 unreachable: authentication refused"),
        "a wrong key fails naming authentication on that host: {message}"
    );

    let (hung, hung_ip) = &hosts.hosts[2];
    wait_group_phase(&ns, "hangs", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/hangs"));
    assert!(
        message.contains(&format!(
            "{hung} unreachable: no SSH session with {hung_ip}:22 within 3 s"
        )),
        "a host that hangs is named at the timeout: {message}"
    );
    assert!(
        message.contains("1 of 2 targets failed"),
        "and the other target was fine: {message}"
    );

    wait_group_phase(&ns, "one-of-ten", "Completed", &mut operator);
    // The status says which target failed, and why, in structured form too.
    let workflow = list(
        &ns,
        "workflows",
        Some("workflow.rxg456.cn/group-name=one-of-ten"),
    )
    .into_iter()
    .next()
    .expect("the post-check Workflow");
    let targets = &workflow["status"]["stepDetails"]["verify-installation"]["targets"];
    assert_eq!(
        (
            targets["total"].as_u64(),
            targets["ok"].as_u64(),
            targets["failed"].as_u64()
        ),
        (Some(10), Some(9), Some(1)),
        "{targets}"
    );
    assert_eq!(text(targets, "/problems/0/name"), "host-12", "{targets}");
    assert_eq!(text(targets, "/problems/0/outcome"), "Failed", "{targets}");
    assert!(
        text(targets, "/problems/0/reason").contains("files missing: /etc/workflow-e2e-ready"),
        "{targets}"
    );
    let described = describe_workflow(cluster, &ns, "one-of-ten", "post-check");
    assert!(
        described.contains("targets 10: 9 ok, 1 failed, 0 unreachable")
            && described.contains("FAIL host-12: exit code 1")
            && described.contains("files missing: /etc/workflow-e2e-ready"),
        "Completed within maxFailedTargets: 1, with the failed target reported: {described}"
    );
}

#[test]
fn post_check_sees_each_targets_node_ready_through_the_api_server() {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    let hosts = TargetHosts::start(2);
    let ns = cluster.fresh_namespace("e2e-targets-nodes");
    hosts.secret(cluster, &ns, "workflow-ssh", &hosts.file("ssh-privatekey"));
    // A service account that may get nodes, for post-check's pods only.
    let role = format!("{ns}-node-reader");
    cluster.kubectl_ok(&["-n", &ns, "create", "serviceaccount", "node-reader"]);
    cluster.kubectl_ok(&[
        "create",
        "clusterrole",
        &role,
        "--verb=get",
        "--resource=nodes",
    ]);
    cluster.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        &role,
        &format!("--clusterrole={role}"),
        &format!("--serviceaccount={ns}:node-reader"),
    ]);
    let real_node = cluster.kubectl_ok(&[
        "get",
        "nodes",
        "-l",
        "workflow.rxg456.cn/node=real",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    let plugins = plugin_dir(&["post-check"]);
    let mut operator = Operator::start(&ns, plugins.path());

    // Each target is a test host to log in to, named as a Node (or as none).
    let named = |names: &[&str]| -> Value {
        names
            .iter()
            .zip(&hosts.hosts)
            .map(|(name, (_, ip))| serde_json::json!({"name": name, "ip": ip, "role": "Worker"}))
            .collect()
    };
    let params =
        serde_json::json!({"post-check": {"nodeReady": true, "nodeReadyTimeoutSeconds": 4}});
    let reader = serde_json::json!({"post-check": {"serviceAccountName": "node-reader"}});
    let none = serde_json::json!({});
    cluster.apply_yaml_in(
        &ns,
        &typed_group(
            "ready",
            &["post-check"],
            params.clone(),
            named(&[&real_node]),
            none.clone(),
            reader.clone(),
        ),
    );
    cluster.apply_yaml_in(
        &ns,
        &typed_group(
            "one-missing",
            &["post-check"],
            params,
            named(&[&real_node, "not-a-node"]),
            none,
            reader,
        ),
    );

    wait_group_phase(&ns, "ready", "Completed", &mut operator);
    wait_group_phase(&ns, "one-missing", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/one-missing"));
    assert!(
        message.contains("verify-node-ready")
            && message.contains("not-a-node failed: no Node named not-a-node (after"),
        "post-check names the target without a Ready Node: {message}"
    );
    let workflow = list(
        &ns,
        "workflows",
        Some("workflow.rxg456.cn/group-name=one-missing"),
    )
    .into_iter()
    .next()
    .expect("the post-check Workflow");
    let targets = &workflow["status"]["stepDetails"]["verify-node-ready"]["targets"];
    assert_eq!(
        (targets["ok"].as_u64(), targets["failed"].as_u64()),
        (Some(1), Some(1)),
        "the real node was Ready: {targets}"
    );
    cluster.kubectl_ok(&["delete", "clusterrolebinding,clusterrole", &role]);
}

/// A group that runs `true` on hosts 1 to 6 in waves of two, with no failure allowed, doing
/// `policy` when one fails.
fn rolled_out(hosts: &TargetHosts, name: &str, policy: &str) -> String {
    let mut group: Value =
        serde_json::from_str(&ssh_group(name, "true", hosts.targets(&[1, 2, 3, 4, 5, 6])))
            .expect("a group");
    group["spec"]["rollout"] =
        serde_json::json!({"waveSize": 2, "maxFailedTargets": 0, "onBudgetExceeded": policy});
    group.to_string()
}

/// The Workflows of `group` in wave `wave`.
fn wave_workflows(ns: &str, group: &str, wave: u32) -> Vec<Value> {
    let selector = format!("workflow.rxg456.cn/group-name={group},workflow.rxg456.cn/wave={wave}");
    list(ns, "workflows", Some(&selector))
}

#[test]
fn waves_of_two_stop_at_the_failure_budget_and_a_paused_rollout_resumes_when_unpaused() {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    let hosts = TargetHosts::start(6);
    let ns = cluster.fresh_namespace("e2e-waves");
    hosts.secret(cluster, &ns, "node-ssh", &hosts.file("ssh-privatekey"));
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    hosts.stop(3);

    // Fail: wave 2 (hosts 3 and 4) fails on host-3, and wave 3 never starts.
    cluster.apply_yaml_in(&ns, &rolled_out(&hosts, "fails", "Fail"));
    wait_group_phase(&ns, "fails", "Failed", &mut operator);
    let group = get(&ns, "workflowgroup/fails");
    let condition = succeeded_condition(&group);
    assert_eq!(condition["reason"], "FailureBudgetExceeded", "{group}");
    let message = condition_message(&group);
    assert!(
        message.contains("1 target failed")
            && message.contains("host-3 (run: connect ")
            && message.contains("refused"),
        "{message}"
    );
    let rollout = &group["status"]["rollout"];
    assert_eq!(rollout["progress"], "2/3", "{rollout}");
    assert_eq!(rollout["failedTargets"], 1, "{rollout}");
    let waves = rollout["waves"].as_array().expect("the waves");
    assert_eq!(waves.len(), 2, "no third wave: {rollout}");
    assert_eq!(
        (waves[0]["phase"].as_str(), waves[1]["phase"].as_str()),
        (Some("Completed"), Some("Failed"))
    );
    assert_eq!(waves[1]["targets"], serde_json::json!(["host-3", "host-4"]));
    assert!(
        waves[1]["failed"][0]
            .as_str()
            .is_some_and(|f| f.starts_with("host-3: ")),
        "{rollout}"
    );
    assert!(
        wave_workflows(&ns, "fails", 3).is_empty(),
        "no Workflow of wave 3"
    );
    let row = cluster.kubectl_ok(&["-n", &ns, "get", "wfg", "fails"]);
    assert!(row.contains("WAVES") && row.contains("2/3"), "{row}");

    // Pause: the operator pauses the group after wave 2, and clearing spec.paused resumes it.
    cluster.apply_yaml_in(&ns, &rolled_out(&hosts, "pauses", "Pause"));
    let (group, _) = workflow_e2e::poll_until(
        std::time::Duration::from_millis(200),
        TIMEOUT,
        "the rollout to pause itself",
        || {
            let group = get(&ns, "workflowgroup/pauses");
            let paused = group["spec"]["paused"] == true
                && succeeded_condition(&group)["reason"] == "FailureBudgetExceeded";
            if paused {
                Ok(group)
            } else {
                Err(group["status"].to_string())
            }
        },
        |status| format!("{status}\n{}", operator.log()),
    );
    assert_eq!(
        group["status"]["phase"], "Running",
        "paused, not finished: {group}"
    );
    assert_eq!(group["status"]["rollout"]["pausedAfterWave"], 2, "{group}");
    let message = condition_message(&group);
    assert!(
        message.contains("clear spec.paused") && message.contains("host-3"),
        "{message}"
    );
    // Nothing more starts while it is paused.
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(
        wave_workflows(&ns, "pauses", 3).is_empty(),
        "no Workflow of wave 3 while paused"
    );
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "wfg",
        "pauses",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"paused":false}}"#,
    ]);
    wait_group_phase(&ns, "pauses", "Completed", &mut operator);
    let group = get(&ns, "workflowgroup/pauses");
    let rollout = &group["status"]["rollout"];
    assert_eq!(rollout["progress"], "3/3", "{rollout}");
    assert_eq!(rollout["waves"][2]["phase"], "Completed", "{rollout}");
    let message = condition_message(&group);
    assert!(
        message.contains("accepted when spec.paused was cleared"),
        "{message}"
    );
    assert_eq!(wave_workflows(&ns, "pauses", 3).len(), 1, "wave 3 ran once");
}

/// A group that runs `true` on hosts `hosts_of` one target a wave, with `timing` added to its
/// `spec.rollout` (`pauseBetweenWaves`, `window`).
fn one_a_wave(hosts: &TargetHosts, name: &str, of: &[usize], timing: Value) -> String {
    let mut group: Value =
        serde_json::from_str(&ssh_group(name, "true", hosts.targets(of))).expect("a group");
    let mut rollout = serde_json::json!({"waveSize": 1});
    for (k, v) in timing.as_object().expect("fields of spec.rollout") {
        rollout[k] = v.clone();
    }
    group["spec"]["rollout"] = rollout;
    group.to_string()
}

/// Waits until group `name`'s `Succeeded` condition has `reason` (a state that lasts); the
/// group then.
fn wait_reason(ns: &str, name: &str, reason: &str, operator: &mut Operator) -> Value {
    let (group, _) = workflow_e2e::poll_until(
        std::time::Duration::from_millis(200),
        TIMEOUT,
        &format!("group {name} to say {reason}"),
        || {
            let group = get(ns, &format!("workflowgroup/{name}"));
            if succeeded_condition(&group)["reason"] == reason {
                Ok(group)
            } else {
                Err(group["status"].to_string())
            }
        },
        |status| format!("{status}\n{}", operator.log()),
    );
    group
}

/// `workflow-operator plan -f file` against the test cluster, its locks in `lock_namespace`.
fn plan_against(file: &Path, lock_namespace: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["plan", "-f"])
        .arg(file)
        .args(["--lock-namespace", lock_namespace])
        .env("KUBECONFIG", cluster().kubeconfig())
        .output()
        .expect("run workflow-operator plan")
}

/// `HH:MM` of UTC `hours` from now.
fn utc_clock_in(hours: i64) -> String {
    let then = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_hours(hours))
        .expect("a time");
    then.to_zoned(jiff::tz::TimeZone::UTC)
        .strftime("%H:%M")
        .to_string()
}

#[test]
fn a_rollout_rests_between_its_waves_and_starts_a_wave_only_inside_its_window() {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    let hosts = TargetHosts::start(5);
    let ns = cluster.fresh_namespace("e2e-timing");
    hosts.secret(cluster, &ns, "node-ssh", &hosts.file("ssh-privatekey"));
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());

    // Five waves of one target, resting 5 s after each: every wave's Workflow is made at least
    // 5 s after the group saw the wave before it finish.
    let started = std::time::Instant::now();
    let timing = serde_json::json!({"pauseBetweenWaves": "5s"});
    cluster.apply_yaml_in(&ns, &one_a_wave(&hosts, "rests", &[1, 2, 3, 4, 5], timing));
    wait_group_phase(&ns, "rests", "Completed", &mut operator);
    let took = started.elapsed();
    let group = get(&ns, "workflowgroup/rests");
    let waves = group["status"]["rollout"]["waves"]
        .as_array()
        .expect("the waves")
        .clone();
    assert_eq!(waves.len(), 5, "{group}");
    let seconds = |text: &str| {
        text.parse::<jiff::Timestamp>()
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .as_second()
    };
    for wave in 2..=5_u32 {
        let before = &waves[wave as usize - 2];
        let finished = seconds(before["finishedAt"].as_str().expect("finishedAt"));
        let made = wave_workflows(&ns, "rests", wave);
        let created = seconds(text(&made[0], "/metadata/creationTimestamp"));
        assert!(
            created - finished >= 5,
            "wave {wave} was made {}s after wave {} finished: {group}",
            created - finished,
            wave - 1
        );
    }
    eprintln!(
        "figure: waveSize 1 over 5 targets with pauseBetweenWaves 5s: {took:.1?} from apply to Completed"
    );

    // A window that opens in two hours: nothing starts, no lock is held, and the group says
    // when it opens, in its condition and in `kubectl get -o wide`.
    let (start, end) = (utc_clock_in(2), utc_clock_in(3));
    let window = serde_json::json!({"window": {"start": start, "end": end, "timeZone": "UTC"}});
    cluster.apply_yaml_in(&ns, &one_a_wave(&hosts, "windowed", &[1, 2], window));
    let group = wait_reason(&ns, "windowed", "WaitingForWindow", &mut operator);
    let message = condition_message(&group);
    let opens = group["status"]["rollout"]["nextWindow"]
        .as_str()
        .expect("nextWindow")
        .to_string();
    assert!(
        message.contains("wave 1 waits for its maintenance window: it opens at ")
            && message.contains(&format!("daily {start}-{end} UTC")),
        "{message}"
    );
    assert!(opens.contains(&format!("T{start}:00Z")), "{opens}");
    assert!(wave_workflows(&ns, "windowed", 1).is_empty());
    assert!(locks_left(&ns).is_empty(), "{:?}", locks_left(&ns));
    let wide = cluster.kubectl_ok(&["-n", &ns, "get", "wfg", "windowed", "-o", "wide"]);
    assert!(
        wide.contains("NEXT WINDOW") && wide.contains(&opens),
        "{wide}"
    );

    // `plan` shows the same before anything runs, and who holds a target now: a group that
    // keeps host-1 busy.
    let plan_file = log_dir().join("windowed-plan.yaml");
    std::fs::write(
        &plan_file,
        one_a_wave(
            &hosts,
            "windowed",
            &[1, 2],
            serde_json::json!({"window": {"start": start, "end": end, "timeZone": "UTC"}}),
        ),
    )
    .expect("write the group");
    cluster.apply_yaml_in(&ns, &ssh_group("holder", "sleep 600", hosts.targets(&[1])));
    workflow_e2e::poll_until(
        std::time::Duration::from_millis(200),
        TIMEOUT,
        "the holder to lock host-1",
        || {
            let held = locks_left(&ns);
            if held.iter().any(|l| l.contains("/holder/")) {
                Ok(())
            } else {
                Err(held)
            }
        },
        |held| format!("{held:?}\n{}", operator.log()),
    );
    let out = plan_against(&plan_file, &ns);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        shown.contains(&format!(
            "window: daily {start}-{end} UTC: closed now, opens at {opens}"
        )) && shown.contains("wave 1: host-1 (")
            && shown.contains("wave 2: host-2 (")
            && shown.contains("locks: 1 of 2 held now: host-1 (")
            && shown.contains(&format!("held by {ns}/holder")),
        "{shown}"
    );
    cluster.kubectl_ok(&["-n", &ns, "delete", "wfg", "holder", "--wait=false"]);

    // The window moved to now: the rollout starts and completes.
    let open_now = serde_json::json!({"spec": {"rollout": {"window": {
        "start": utc_clock_in(-1), "end": utc_clock_in(1), "timeZone": "UTC"}}}});
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "patch",
        "wfg",
        "windowed",
        "--type",
        "merge",
        "-p",
        &open_now.to_string(),
    ]);
    wait_group_phase(&ns, "windowed", "Completed", &mut operator);

    // A window that never opens is the group's own fault, named; one that is no time is
    // refused at apply.
    let never = serde_json::json!({"window": {"start": "02:00", "end": "02:00"}});
    cluster.apply_yaml_in(&ns, &one_a_wave(&hosts, "never", &[1], never));
    let message = condition_message(&wait_reason(&ns, "never", "InvalidSpec", &mut operator));
    assert!(
        message.starts_with("spec.rollout.window.end: ") && message.contains("never open"),
        "{message}"
    );
    let bad = serde_json::json!({"window": {"start": "25:00", "end": "02:00"}});
    let out = cluster.kubectl_with_stdin(
        &["-n", &ns, "apply", "-f", "-"],
        one_a_wave(&hosts, "no-time", &[1], bad).as_bytes(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("spec.rollout.window.start"),
        "{stderr}"
    );
}

/// The targets a group lists, or chose (`status.targets`).
fn targets_of(group: &Value, at: &str) -> Vec<String> {
    group
        .pointer(at)
        .and_then(Value::as_array)
        .map(|ts| {
            ts.iter()
                .map(|t| format!("{} {}", text(t, "/name"), text(t, "/ip")))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_group_acts_on_the_nodes_its_selector_chose_when_it_started_and_on_no_node_labelled_later() {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    let ns = cluster.fresh_namespace("e2e-select");
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    let label = format!("e2e.workflow.rxg456.cn/{ns}");
    let mark = |node: &str, on: bool| {
        let value = if on {
            format!("{label}=yes")
        } else {
            format!("{label}-")
        };
        cluster.kubectl_ok(&["label", "node", node, &value, "--overwrite"]);
    };
    mark(workflow_e2e::REAL_NODE, true);
    let node = cluster.kubectl_json(&["get", "node", workflow_e2e::REAL_NODE, "-o", "json"]);
    let ip = node["status"]["addresses"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
        .map(|a| text(a, "/address").to_string())
        .expect("the real node's InternalIP");

    let with_label = |value: &str| {
        let mut labels = serde_json::Map::new();
        labels.insert(label.clone(), value.into());
        Value::Object(labels)
    };
    let selected = |name: &str, labels: Value| {
        let mut group: Value = serde_json::from_str(&real_node_at_group(
            name,
            serde_json::json!({"command": "true", "image": STEP_IMAGE}),
            serde_json::json!({}),
            serde_json::json!([]),
        ))
        .expect("a group");
        group["spec"]
            .as_object_mut()
            .expect("a spec")
            .remove("targets");
        group["spec"]["targetSelector"] = serde_json::json!({"matchLabels": labels});
        group.to_string()
    };
    cluster.apply_yaml_in(&ns, &selected("chosen", with_label("yes")));
    wait_group_phase(&ns, "chosen", "Completed", &mut operator);
    let group = get(&ns, "workflowgroup/chosen");
    let expected = vec![format!("{} {ip}", workflow_e2e::REAL_NODE)];
    assert_eq!(targets_of(&group, "/status/targets"), expected, "{group}");
    let workflow = list(
        &ns,
        "workflows",
        Some("workflow.rxg456.cn/group-name=chosen"),
    )
    .into_iter()
    .next()
    .expect("its Workflow");
    assert_eq!(targets_of(&workflow, "/spec/targets"), expected);
    let events = cluster.kubectl_ok(&[
        "-n",
        &ns,
        "get",
        "events",
        "--field-selector",
        "reason=TargetsSelected",
        "-o",
        "jsonpath={.items[*].note}{.items[*].message}",
    ]);
    assert!(
        events.contains(&format!(
            "spec.targetSelector chose 1 Node(s) as targets: {}",
            workflow_e2e::REAL_NODE
        )),
        "{events}"
    );

    // `plan` shows the Nodes the selector selects now.
    let plan_file = log_dir().join(format!("{ns}-preview.yaml"));
    std::fs::write(&plan_file, selected("preview", with_label("yes"))).expect("write the group");
    let out = plan_against(&plan_file, &ns);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && shown.contains(&format!(
                "targets: the Nodes of spec.targetSelector ({label}=yes)"
            ))
            && shown.contains(&format!("\ntargets: {} ({ip})\n", workflow_e2e::REAL_NODE)),
        "{shown}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A Node labelled after the group started is not added, even when the group runs again.
    mark("kwok-node-0", true);
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "annotate",
        "wfg",
        "chosen",
        "workflow.rxg456.cn/rerun=again",
    ]);
    let (group, _) = workflow_e2e::poll_until(
        std::time::Duration::from_millis(200),
        TIMEOUT,
        "the re-run to complete",
        || {
            let group = get(&ns, "workflowgroup/chosen");
            let runs = group["status"]["runs"].as_array().map_or(0, Vec::len);
            if runs == 2 && group["status"]["phase"] == "Completed" {
                Ok(group)
            } else {
                Err(group["status"].to_string())
            }
        },
        |status| format!("{status}\n{}", operator.log()),
    );
    assert_eq!(targets_of(&group, "/status/targets"), expected, "{group}");

    // A selector that selects no Node says so and waits; one beside listed targets is refused.
    cluster.apply_yaml_in(&ns, &selected("nothing", with_label("no")));
    let message = condition_message(&wait_reason(
        &ns,
        "nothing",
        "NoNodesSelected",
        &mut operator,
    ));
    assert!(
        message.starts_with(&format!("spec.targetSelector ({label}=no) selects no Node")),
        "{message}"
    );
    let mut both: Value =
        serde_json::from_str(&selected("both", with_label("yes"))).expect("a group");
    both["spec"]["targets"] = serde_json::json!([{"name": "node-1", "ip": "192.168.1.101"}]);
    let out = cluster.kubectl_with_stdin(
        &["-n", &ns, "apply", "-f", "-"],
        both.to_string().as_bytes(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("spec.targets and spec.targetSelector are both set"),
        "{stderr}"
    );
    let every = selected("every", serde_json::json!({}));
    let out = cluster.kubectl_with_stdin(&["-n", &ns, "apply", "-f", "-"], every.as_bytes());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("spec.targetSelector selects every Node"),
        "{stderr}"
    );
    mark(workflow_e2e::REAL_NODE, false);
    mark("kwok-node-0", false);
}

/// Fake Nodes of kwok for one test, deleted when dropped: cordoned, drained and uncordoned
/// for real through the API server, with nothing running on them but what kwok pretends.
struct KwokNodes {
    names: Vec<String>,
}

impl KwokNodes {
    /// Nodes `<prefix>-<suffix>` for each suffix, labelled `e2e-drain=<prefix>`.
    fn create(prefix: &str, suffixes: &[&str]) -> KwokNodes {
        let names: Vec<String> = suffixes.iter().map(|s| format!("{prefix}-{s}")).collect();
        for name in &names {
            let node = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                    "labels": {"type": "kwok", "e2e-drain": prefix, "kubernetes.io/hostname": name},
                },
            });
            cluster().apply_yaml_in("default", &node.to_string());
        }
        KwokNodes { names }
    }
}

impl Drop for KwokNodes {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = cluster().kubectl(&["delete", "node", name, "--wait=false"]);
        }
    }
}

/// A Deployment of one pod pinned to Node `node` (kwok runs it).
fn pinned_deployment(name: &str, node: &str) -> String {
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [{"name": "app", "image": "busybox:1.36"}],
                },
            },
        },
    })
    .to_string()
}

/// The name of the running pod of `app` in `ns` on `node`.
fn running_pod_of(ns: &str, app: &str, node: &str) -> String {
    let (found, _) = workflow_e2e::poll_until(
        std::time::Duration::from_millis(200),
        std::time::Duration::from_secs(60),
        &format!("a running pod of {app} on {node}"),
        || {
            list(ns, "pods", Some(&format!("app={app}")))
                .into_iter()
                .find(|p| p["spec"]["nodeName"] == node && p["status"]["phase"] == "Running")
                .map(|p| text(&p, "/metadata/name").to_string())
                .ok_or(())
        },
        |()| {
            list(ns, "pods", Some(&format!("app={app}")))
                .len()
                .to_string()
        },
    );
    found
}

/// The output of the pod of `step` of group `group`.
fn step_log(ns: &str, group: &str, step: &str) -> String {
    let pod = list(
        ns,
        "pods",
        Some(&format!(
            "workflow.rxg456.cn/group-name={group},workflow.rxg456.cn/step={step}"
        )),
    )
    .into_iter()
    .next()
    .unwrap_or_else(|| panic!("the pod of {step} of {group}"));
    cluster().kubectl_ok(&["-n", ns, "logs", text(&pod, "/metadata/name")])
}

#[test]
fn a_drained_group_cordons_and_evicts_before_its_steps_and_uncordons_only_the_nodes_it_cordoned() {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    let ns = cluster.fresh_namespace("e2e-drain");
    let nodes = KwokNodes::create(&ns, &["a", "b", "c"]);
    let [a, b, c] = [&nodes.names[0], &nodes.names[1], &nodes.names[2]];
    // The drain's account: it may get and patch Nodes, list pods and evict them.
    let rbac = serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "drainer", "namespace": ns}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": format!("{ns}-drainer")},
             "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
                {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
             ]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": format!("{ns}-drainer")},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{ns}-drainer")},
             "subjects": [{"kind": "ServiceAccount", "name": "drainer", "namespace": ns}]},
        ],
    });
    cluster.apply_yaml_in(&ns, &rbac.to_string());
    cluster.apply_yaml_in(&ns, &pinned_deployment("web", a));
    cluster.apply_yaml_in(&ns, &pinned_deployment("shop", b));
    let pdb = serde_json::json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "shop"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "shop"}}},
    });
    cluster.apply_yaml_in(&ns, &pdb.to_string());
    let web = running_pod_of(&ns, "web", a);
    let shop = running_pod_of(&ns, "shop", b);
    // Someone else's cordon, before the group.
    cluster.kubectl_ok(&["cordon", c]);
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());

    let drained = |name: &str, on: &[&String]| {
        let targets: Vec<Value> = on
            .iter()
            .map(|n| serde_json::json!({"name": n, "ip": "127.0.0.1", "role": "Worker"}))
            .collect();
        let mut group: Value = serde_json::from_str(&real_node_at_group(
            name,
            serde_json::json!({"command": "true", "image": STEP_IMAGE}),
            serde_json::json!({}),
            Value::Array(targets),
        ))
        .expect("a group");
        group["spec"]["drain"] =
            serde_json::json!({"timeoutSeconds": 8, "serviceAccountName": "drainer"});
        group.to_string()
    };
    cluster.apply_yaml_in(&ns, &drained("maintained", &[a, c]));
    wait_group_phase(&ns, "maintained", "Completed", &mut operator);
    let workflow = list(
        &ns,
        "workflows",
        Some("workflow.rxg456.cn/group-name=maintained"),
    )
    .into_iter()
    .next()
    .expect("its Workflow");
    let steps: Vec<&str> = workflow["spec"]["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| text(s, "/name"))
        .collect();
    assert_eq!(
        steps,
        ["cordon-and-drain", "run", "uncordon"],
        "{workflow:#}"
    );
    // a was cordoned and its pod evicted, then a was made schedulable again; c, which someone
    // else cordoned, stays cordoned.
    let drain_log = step_log(&ns, "maintained", "cordon-and-drain");
    assert!(
        drain_log.contains(&format!("[{a}] cordoned"))
            && drain_log.contains(&format!("[{a}] evicting {ns}/{web}"))
            && drain_log.contains(&format!("[{c}] cordoned already (left as it was found)")),
        "{drain_log}"
    );
    let gone = cluster.kubectl(&["-n", &ns, "get", "pod", &web]);
    assert!(!gone.status.success(), "{web} was evicted");
    let uncordon_log = step_log(&ns, "maintained", "uncordon");
    assert!(
        uncordon_log.contains(&format!("[{a}] uncordoned (cordoned by {ns}/maintained)"))
            && uncordon_log.contains(&format!("[{c}] left cordoned: cordoned by someone else")),
        "{uncordon_log}"
    );
    let node = |n: &str| cluster.kubectl_json(&["get", "node", n, "-o", "json"]);
    let (node_a, node_c) = (node(a), node(c));
    assert!(
        node_a["spec"]["unschedulable"] != true
            && node_a["metadata"]["annotations"]["workflow.rxg456.cn/cordoned-by"].is_null(),
        "{node_a:#}"
    );
    assert_eq!(node_c["spec"]["unschedulable"], true, "{node_c:#}");

    // A PodDisruptionBudget that allows no eviction: the drain fails its target naming the pod,
    // the group fails before its steps, and the Node stays cordoned, recorded as the group's.
    cluster.apply_yaml_in(&ns, &drained("blocked", &[b]));
    wait_group_phase(&ns, "blocked", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/blocked"));
    assert!(
        message.contains(&format!(
            "the drain of Node {b} did not finish in 8 s: blocked: {ns}/{shop}"
        )),
        "{message}"
    );
    let workflow = list(
        &ns,
        "workflows",
        Some("workflow.rxg456.cn/group-name=blocked"),
    )
    .into_iter()
    .next()
    .expect("its Workflow");
    assert_eq!(
        workflow["status"]["stepStatus"]["run"], "Pending",
        "{workflow:#}"
    );
    let node_b = node(b);
    assert_eq!(node_b["spec"]["unschedulable"], true, "{node_b:#}");
    assert_eq!(
        node_b["metadata"]["annotations"]["workflow.rxg456.cn/cordoned-by"],
        format!("{ns}/blocked")
    );
    cluster.kubectl_ok(&[
        "delete",
        "clusterrolebinding,clusterrole",
        &format!("{ns}-drainer"),
    ]);
}

#[test]
fn a_health_gate_opens_each_wave_after_the_first_and_a_failing_one_stops_the_rollout() {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    let ns = cluster.fresh_namespace("e2e-gate");
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    let gated = |name: &str, check: &str| {
        let targets = serde_json::json!([
            {"name": "node-1", "ip": "127.0.0.1", "role": "Worker"},
            {"name": "node-2", "ip": "127.0.0.1", "role": "Worker"},
        ]);
        let mut group: Value = serde_json::from_str(&real_node_at_group(
            name,
            serde_json::json!({"command": "true", "image": STEP_IMAGE}),
            serde_json::json!({}),
            targets,
        ))
        .expect("a group");
        group["spec"]["rollout"] =
            serde_json::json!({"waveSize": 1, "healthGate": {"command": check, "retries": 1}});
        group.to_string()
    };
    cluster.apply_yaml_in(&ns, &gated("healthy", "echo fleet ok"));
    cluster.apply_yaml_in(
        &ns,
        &gated("unhealthy", "echo fleet unhealthy: 3 alerts firing; exit 1"),
    );

    wait_group_phase(&ns, "healthy", "Completed", &mut operator);
    let steps_of_wave = |group: &str, wave: u32| -> Vec<String> {
        wave_workflows(&ns, group, wave)
            .first()
            .and_then(|w| w["spec"]["steps"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|s| text(s, "/name").to_string())
            .collect()
    };
    assert_eq!(steps_of_wave("healthy", 1), ["run"]);
    assert_eq!(steps_of_wave("healthy", 2), ["health-gate", "run"]);

    // The gate fails twice (once, then its one retry): wave 2 fails before its step runs, and
    // with no failed target tolerated the group fails, saying what the check said.
    wait_group_phase(&ns, "unhealthy", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/unhealthy"));
    assert!(
        message.contains(
            "step health-gate failed after 2 attempt(s): fleet unhealthy: 3 alerts firing"
        ),
        "{message}"
    );
    let wave_2 = wave_workflows(&ns, "unhealthy", 2);
    let workflow = wave_2.first().expect("wave 2's Workflow");
    assert_eq!(
        workflow["status"]["stepStatus"]["run"], "Pending",
        "{workflow:#}"
    );
    let group = get(&ns, "workflowgroup/unhealthy");
    assert_eq!(group["status"]["rollout"]["failedTargets"], 1, "{group:#}");
}

#[test]
fn targets_only_a_jump_host_reaches_are_checked_through_it_and_unreachable_without_it() {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    let hosts = TargetHosts::start(3);
    // Hosts 2 and 3 take SSH from host 1's address only (a TCP reset for anyone else, the
    // step pods included): host 1 is the only way in.
    for n in ["2", "3"] {
        script(&["only-from", path(hosts.dir.path()), n, "1"]);
    }
    let ns = cluster.fresh_namespace("e2e-targets-jump");
    hosts.secret(cluster, &ns, "workflow-ssh", &hosts.file("ssh-privatekey"));
    let plugins = plugin_dir(&["pre-check"]);
    let mut operator = Operator::start(&ns, plugins.path());

    let (jump, jump_ip) = &hosts.hosts[0];
    let through = serde_json::json!({"pre-check": {
        "ssh": {"connectTimeoutSeconds": 5, "jumpHost": {"address": jump_ip}},
        "checkPeers": false,
    }});
    let direct = serde_json::json!({"pre-check": {
        "ssh": {"connectTimeoutSeconds": 5},
        "checkPeers": false,
    }});
    let none = serde_json::json!({});
    let groups = [
        ("through-jump", through.clone(), [2, 3]),
        ("direct", direct, [2, 3]),
        // The jump host among the targets it would reach: refused naming the field.
        ("jump-is-target", through, [1, 2]),
    ];
    for (name, params, targets) in groups {
        cluster.apply_yaml_in(
            &ns,
            &typed_group(
                name,
                &["pre-check"],
                params,
                hosts.targets(&targets),
                none.clone(),
                none.clone(),
            ),
        );
    }

    wait_group_phase(&ns, "through-jump", "Completed", &mut operator);
    let described = describe_workflow(cluster, &ns, "through-jump", "pre-check");
    assert!(
        described.contains("targets 2: 2 ok, 0 failed, 0 unreachable")
            && described.contains("OK host-2")
            && described.contains("OK host-3"),
        "each target behind the jump host {jump} is checked and reported: {described}"
    );

    wait_group_phase(&ns, "direct", "Failed", &mut operator);
    let message = condition_message(&get(&ns, "workflowgroup/direct"));
    for n in [2, 3] {
        let (name, ip) = &hosts.hosts[n - 1];
        assert!(
            message.contains(&format!("{name} unreachable: connect {ip}:22"))
                && message.contains("refused"),
            "without the jump host, {name} cannot be reached: {message}"
        );
    }

    let group = wait_reason(&ns, "jump-is-target", "TemplateFailed", &mut operator);
    let message = condition_message(&group);
    assert!(
        message.contains(&format!(
            "invalid params at `ssh.jumpHost.address`: \"{jump_ip}\" is the target {jump}"
        )),
        "a jump host that is one of the targets is refused naming the field: {message}"
    );
}

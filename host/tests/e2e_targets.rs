//! End to end, on the real node: steps that act on their targets over SSH. The targets are
//! hosts of the test's own (`tests/cluster/target-hosts.sh`: network namespaces each running a
//! real sshd with its own host key); a step pod in the step image (`make image`) runs
//! `workflow-runner`, which logs in with the key and known hosts of a `kubernetes.io/ssh-auth`
//! Secret the group's pod template mounts, and reports per target.

#[path = "support/operator.rs"]
mod operator;

use std::path::{Path, PathBuf};
use std::process::Command;

use operator::*;
use serde_json::Value;
use workflow_e2e::repo_root;

/// The step image `make image` builds beside the operator's.
const STEP_IMAGE: &str = "workflow-step:dev";

/// Target hosts in network namespaces, stopped and removed when dropped.
struct TargetHosts {
    dir: tempfile::TempDir,
    /// `(name, address)` per host.
    hosts: Vec<(String, String)>,
}

impl TargetHosts {
    fn start(count: usize) -> Self {
        let dir = tempfile::tempdir().expect("a directory for the target hosts");
        let out = script(&["up", path(dir.path()), &count.to_string()]);
        let hosts = out
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(n, a)| (n.to_owned(), a.to_owned()))
            .collect::<Vec<_>>();
        assert_eq!(hosts.len(), count, "target-hosts.sh up printed: {out}");
        TargetHosts { dir, hosts }
    }

    fn stop(&self, n: usize) {
        script(&["stop", path(self.dir.path()), &n.to_string()]);
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The group's `spec.targets` for hosts `numbers` (from 1).
    fn targets(&self, numbers: &[usize]) -> Value {
        numbers
            .iter()
            .map(|n| {
                let (name, ip) = &self.hosts[n - 1];
                serde_json::json!({"name": name, "ip": ip, "role": "Worker"})
            })
            .collect()
    }
}

impl Drop for TargetHosts {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("tests/cluster/target-hosts.sh"))
            .args(["down", path(self.dir.path())])
            .status();
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

fn script(args: &[&str]) -> String {
    let out = Command::new(repo_root().join("tests/cluster/target-hosts.sh"))
        .args(args)
        .output()
        .expect("run tests/cluster/target-hosts.sh");
    assert!(
        out.status.success(),
        "target-hosts.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The step image on the real node (imported again: the node may predate `make image`).
fn import_step_image() {
    let archive = repo_root().join("target/image/workflow-step.tar");
    assert!(
        archive.is_file(),
        "no {} (make image builds it)",
        archive.display()
    );
    let out = Command::new(repo_root().join("tests/cluster/node.sh"))
        .arg("import-image")
        .arg(&archive)
        .output()
        .expect("run tests/cluster/node.sh import-image");
    assert!(
        out.status.success(),
        "node.sh import-image: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

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
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "secret",
        "generic",
        "node-ssh",
        "--type=kubernetes.io/ssh-auth",
        &format!(
            "--from-file=ssh-privatekey={}",
            path(&hosts.file("ssh-privatekey"))
        ),
        &format!(
            "--from-file=known_hosts={}",
            path(&hosts.file("known_hosts"))
        ),
    ]);
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
}

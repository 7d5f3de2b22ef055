//! Target hosts for end-to-end tests (`tests/cluster/target-hosts.sh`: network namespaces each
//! running a real sshd with its own host key and root) and the step image steps run in.
//!
//! A test binary takes it with `#[path = "support/target_hosts.rs"] mod target_hosts;`.
// Each test binary uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use workflow_e2e::repo_root;

/// The step image `make image` builds beside the operator's.
pub const STEP_IMAGE: &str = "workflow-step:dev";

/// Target hosts in network namespaces, stopped and removed when dropped.
pub struct TargetHosts {
    pub dir: tempfile::TempDir,
    /// `(name, address)` per host.
    pub hosts: Vec<(String, String)>,
}

impl TargetHosts {
    pub fn start(count: usize) -> Self {
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

    /// Stops every host and removes what they left (`target-hosts.sh down`).
    pub fn down(&self) {
        script(&["down", path(self.dir.path())]);
    }

    /// The short id naming the hosts' namespaces, links and cgroups (`wft-<id>-N`).
    pub fn id(&self) -> String {
        let out = Command::new("sh")
            .args(["-c", "printf %s \"$1\" | sha256sum | cut -c1-6", "sh"])
            .arg(self.dir.path())
            .output()
            .expect("sha256sum");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    pub fn stop(&self, n: usize) {
        script(&["stop", path(self.dir.path()), &n.to_string()]);
    }

    /// Starts host `n` again (after [`TargetHosts::stop`]), with a fresh root.
    pub fn start_again(&self, n: usize) {
        script(&["start", path(self.dir.path()), &n.to_string()]);
    }

    /// Host `n` accepts connections but never answers (a stalled handshake).
    pub fn hang(&self, n: usize) {
        script(&["hang", path(self.dir.path()), &n.to_string()]);
    }

    /// Runs `command` (`sh -c`) inside host `n` (its network, mount namespace and root).
    pub fn exec(&self, n: usize, command: &str) -> std::process::Output {
        Command::new(repo_root().join("tests/cluster/target-hosts.sh"))
            .args([
                "exec",
                path(self.dir.path()),
                &n.to_string(),
                "sh",
                "-c",
                command,
            ])
            .output()
            .expect("run target-hosts.sh exec")
    }

    /// Creates the Secret `name` in `ns` with `key` and the hosts' known hosts.
    pub fn secret(&self, cluster: &workflow_e2e::Cluster, ns: &str, name: &str, key: &Path) {
        cluster.kubectl_ok(&[
            "-n",
            ns,
            "create",
            "secret",
            "generic",
            name,
            "--type=kubernetes.io/ssh-auth",
            &format!("--from-file=ssh-privatekey={}", path(key)),
            &format!(
                "--from-file=known_hosts={}",
                path(&self.file("known_hosts"))
            ),
        ]);
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The group's `spec.targets` for hosts `numbers` (from 1).
    pub fn targets(&self, numbers: &[usize]) -> Value {
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

pub fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

pub fn script(args: &[&str]) -> String {
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
pub fn import_step_image() {
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

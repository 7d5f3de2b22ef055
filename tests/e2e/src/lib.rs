//! End-to-end test harness for workflow-operator.
//!
//! Tests drive a *real* Kubernetes control plane (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and kwok fake nodes) with the real
//! `kubectl`, exactly as a user would. See `tests/cluster/README.md`.
//!
//! [`Cluster::shared`] either uses the cluster that `WORKFLOW_E2E_KUBECONFIG`
//! points at, or brings the local cluster up once per test process with
//! `tests/cluster/cluster.sh up` (idempotent; it is left running afterwards so
//! later test binaries reuse it; `make cluster-down` stops it).
//!
//! Tests must isolate themselves with [`Cluster::fresh_namespace`] so they can
//! run in parallel.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod poll;

pub use poll::poll_until;

/// Environment variable naming an existing kubeconfig to use instead of
/// starting the local cluster.
pub const KUBECONFIG_ENV: &str = "WORKFLOW_E2E_KUBECONFIG";
/// Environment variable naming the local cluster's state directory, as
/// `tests/cluster/cluster.sh` reads it (default `.local-cluster/` at the
/// repository root): a second local cluster lives in another directory.
pub const CLUSTER_DIR_ENV: &str = "WORKFLOW_CLUSTER_DIR";

/// Pod label that makes a kwok-managed pod reach phase `Failed` (any value).
pub const FAIL_LABEL: &str = "e2e.workflow.rxg456.cn/fail";
/// Pod annotation holding the exit code of a failing pod's containers (default 1).
pub const EXIT_CODE_ANNOTATION: &str = "e2e.workflow.rxg456.cn/exit-code";
/// Pod annotation holding the containers' termination message (failing pods
/// default to "simulated failure"; succeeding pods have none unless set).
pub const MESSAGE_ANNOTATION: &str = "e2e.workflow.rxg456.cn/message";
/// Pod annotation overriding how long a pod runs before it completes or fails,
/// as a Go duration such as `"30s"` (default `1s`).
pub const DURATION_ANNOTATION: &str = "e2e.workflow.rxg456.cn/duration";
/// Name of the kwok node registered by `cluster.sh up`.
pub const KWOK_NODE: &str = "kwok-node-0";

/// Environment variable that makes `tests/cluster/cluster.sh up` start the real node
/// (`tests/cluster/node.sh`) when set to `1`.
pub const REAL_NODE_ENV: &str = "WORKFLOW_REAL_NODE";
/// Name of the real node: a kubelet with containerd and runc, beside kwok's.
pub const REAL_NODE: &str = "real-node-0";
/// Label on the real node, as (key, value): a pod selects it to land there.
pub const REAL_NODE_LABEL: (&str, &str) = ("workflow.rxg456.cn/node", "real");
/// Key of the real node's `NoSchedule` taint (value `"true"`): only pods that tolerate it land
/// there, so nothing does by accident.
pub const REAL_NODE_TAINT: &str = "workflow.rxg456.cn/real-node";
/// The images the real node has (no registry is reachable; an image it lacks cannot be pulled).
pub const REAL_NODE_IMAGES: [&str; 2] = ["busybox:1.36", "localhost/workflow-pause:1.0"];

/// The pod spec fields that put a pod on the real node: its label as node selector and a
/// toleration of its taint. Merge them into a pod's `spec`.
pub fn real_node_placement() -> serde_json::Value {
    serde_json::json!({
        "nodeSelector": { REAL_NODE_LABEL.0: REAL_NODE_LABEL.1 },
        "tolerations": [{ "key": REAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule" }],
    })
}

/// A Kubernetes cluster reachable through a kubeconfig file.
#[derive(Debug, Clone)]
pub struct Cluster {
    kubeconfig: PathBuf,
}

static SHARED: OnceLock<Cluster> = OnceLock::new();
static NAMESPACE_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Root of the repository: the nearest directory holding `tests/cluster/cluster.sh` above the
/// manifest directory of the test being run.
///
/// Read when the test runs (`cargo test` sets `CARGO_MANIFEST_DIR` for it), not when this crate
/// was compiled: builds of two checkouts that share one cargo target directory (CI's fresh clone
/// and a working copy) reuse each other's compiled harness, and a path baked in at compile time
/// would send one checkout's tests to the other's cluster and CRDs.
pub fn repo_root() -> PathBuf {
    let start = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    start
        .ancestors()
        .find(|dir| dir.join("tests/cluster/cluster.sh").is_file())
        .map(Path::to_path_buf)
        .unwrap_or(start)
}

/// The cargo target directory the workspace builds into: `CARGO_TARGET_DIR` when set, else
/// `target/` at the repository root. Cargo reads a relative `CARGO_TARGET_DIR` from the directory
/// it runs in, and `make`, `plugins/build.sh` and CI run it at the repository root, so a relative
/// one is taken from there too (a test runs in its package's directory, not the root).
pub fn target_dir() -> PathBuf {
    let root = repo_root();
    match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    }
}

/// `<target>/<dir>/<name>.wasm`, where `make plugins` (`plugins/build.sh`) puts a plugin: `dir`
/// is `plugins` for the built-in types, `test-plugins` for the test plugins. It may not exist.
pub fn built_wasm(dir: &str, name: &str) -> PathBuf {
    target_dir().join(dir).join(format!("{name}.wasm"))
}

/// The `kubectl` program the harness runs: `$KUBECTL` if set, else a 1.34 or
/// 1.33 client installed side by side in the Google Cloud SDK layout (within
/// the supported version skew of the 1.34 server), else `kubectl` from `PATH`.
/// `tests/cluster/cluster.sh` makes the same choice.
pub fn kubectl_program() -> PathBuf {
    if let Some(k) = std::env::var_os("KUBECTL").filter(|k| !k.is_empty()) {
        return PathBuf::from(k);
    }
    ["1.34", "1.33"]
        .iter()
        .map(|v| PathBuf::from(format!("/usr/lib/google-cloud-sdk/bin/kubectl.{v}")))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("kubectl"))
}

/// The state directory of the local cluster `tests/cluster/cluster.sh` runs:
/// `$WORKFLOW_CLUSTER_DIR` if set, else `.local-cluster/` at the repository root.
pub fn local_cluster_dir() -> PathBuf {
    std::env::var_os(CLUSTER_DIR_ENV)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".local-cluster"))
}

impl Cluster {
    /// The cluster shared by every test in this process.
    ///
    /// If `WORKFLOW_E2E_KUBECONFIG` is set, that kubeconfig is used as is.
    /// Otherwise `tests/cluster/cluster.sh up` is run once (it builds the
    /// binaries on first use, and returns quickly when the cluster is already
    /// healthy) and the kubeconfig in its state directory
    /// ([`local_cluster_dir`]) is used. Panics if the cluster cannot be started.
    pub fn shared() -> &'static Cluster {
        SHARED.get_or_init(|| {
            if let Some(path) = std::env::var_os(KUBECONFIG_ENV).filter(|p| !p.is_empty()) {
                return Cluster::from_kubeconfig(path);
            }
            let root = repo_root();
            let script = root.join("tests/cluster/cluster.sh");
            eprintln!(
                "[workflow-e2e] starting the local cluster: {} up",
                script.display()
            );
            // Inherit stderr so build/start progress is visible with --nocapture;
            // stdout goes to stderr too so it never mixes with test output parsing.
            let status = Command::new("bash")
                .arg(&script)
                .arg("up")
                .current_dir(&root)
                .stdin(Stdio::null())
                .stdout(Stdio::inherit())
                .stderr(Stdio::inherit())
                .status()
                .unwrap_or_else(|e| panic!("could not run {}: {e}", script.display()));
            let dir = local_cluster_dir();
            assert!(
                status.success(),
                "`{} up` failed ({status}); see {}",
                script.display(),
                dir.join("logs").display()
            );
            Cluster::from_kubeconfig(dir.join("kubeconfig"))
        })
    }

    /// A cluster handle for an existing kubeconfig file (no process is started).
    pub fn from_kubeconfig(path: impl Into<PathBuf>) -> Cluster {
        Cluster {
            kubeconfig: path.into(),
        }
    }

    /// Path of the kubeconfig used for every `kubectl` call (and suitable for
    /// the operator's own client via `KUBECONFIG`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The state directory of this cluster when `tests/cluster/cluster.sh`
    /// runs it (the kubeconfig's directory holds its pid files), so that its
    /// processes can be restarted; `None` for any other cluster.
    pub fn local_state_dir(&self) -> Option<PathBuf> {
        let dir = self.kubeconfig.parent()?;
        dir.join("pids/kube-apiserver.pid")
            .is_file()
            .then(|| dir.to_path_buf())
    }

    /// A `kubectl` command with `KUBECONFIG` set to this cluster, ready for
    /// more arguments, environment or stdin.
    pub fn kubectl_command(&self) -> Command {
        let mut cmd = Command::new(kubectl_program());
        cmd.env("KUBECONFIG", &self.kubeconfig).stdin(Stdio::null());
        cmd
    }

    /// Runs `kubectl <args>` against this cluster and returns its raw output,
    /// whatever the exit status.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_command()
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("could not run kubectl {args:?}: {e}"))
    }

    /// Runs `kubectl <args>` and returns its stdout; panics with stderr if it
    /// exits non-zero.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `kubectl <args> -o json` and parses stdout; panics on failure.
    pub fn kubectl_json(&self, args: &[&str]) -> serde_json::Value {
        let mut full: Vec<&str> = args.to_vec();
        full.extend(["-o", "json"]);
        let text = self.kubectl_ok(&full);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("kubectl {full:?} printed invalid JSON ({e}): {text}"))
    }

    /// `kubectl apply -f -` with `yaml` on stdin; returns stdout and panics
    /// with stderr on failure. Put `namespace:` in the manifests (or use
    /// [`Cluster::apply_yaml_in`]).
    pub fn apply_yaml(&self, yaml: &str) -> String {
        self.apply_with_args(&["apply", "-f", "-"], yaml)
    }

    /// `kubectl -n <namespace> apply -f -` with `yaml` on stdin; panics on failure.
    pub fn apply_yaml_in(&self, namespace: &str, yaml: &str) -> String {
        self.apply_with_args(&["-n", namespace, "apply", "-f", "-"], yaml)
    }

    fn apply_with_args(&self, args: &[&str], yaml: &str) -> String {
        let out = self.kubectl_with_stdin(args, yaml.as_bytes());
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}):\nstderr: {}\nmanifest:\n{yaml}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `kubectl <args>` with `input` on its stdin and returns its output, whatever the
    /// exit status. The input is written from another thread: kubectl may fill its stdout
    /// pipe before it has read all of it.
    pub fn kubectl_with_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child = self
            .kubectl_command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("could not run kubectl {args:?}: {e}"));
        let writer = child.stdin.take().map(|mut stdin| {
            let input = input.to_vec();
            std::thread::spawn(move || stdin.write_all(&input))
        });
        let out = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("kubectl {args:?} did not finish: {e}"));
        if let Some(Ok(Err(e))) = writer.map(std::thread::JoinHandle::join) {
            panic!("could not write to kubectl {args:?}: {e}");
        }
        out
    }

    /// Polls `condition` every 250 ms until it returns true; panics with
    /// `description` if `timeout` elapses first. Returns the time waited.
    pub fn wait_for(
        &self,
        description: &str,
        timeout: Duration,
        mut condition: impl FnMut() -> bool,
    ) -> Duration {
        let ((), waited) = poll_until(
            Duration::from_millis(250),
            timeout,
            description,
            || if condition() { Ok(()) } else { Err(()) },
            |()| String::new(),
        );
        waited
    }

    /// Panics unless the real node is registered and Ready, saying how to start it: tests that
    /// need real containers fail rather than pass on kwok's fake node.
    pub fn require_real_node(&self) {
        let out = self.kubectl(&["get", "node", REAL_NODE, "-o", "json"]);
        assert!(
            out.status.success(),
            "the cluster has no real node {REAL_NODE} ({}): start it with {REAL_NODE_ENV}=1 \
             (`{REAL_NODE_ENV}=1 tests/cluster/cluster.sh up`, or {REAL_NODE_ENV}=1 in the \
             environment of `cargo test`, whose harness runs that command); `make test` sets it",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let node: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("kubectl get node {REAL_NODE} printed invalid JSON: {e}"));
        let ready = node["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(
            ready,
            "the real node {REAL_NODE} is not Ready (`tests/cluster/node.sh status`, its logs in \
             the cluster's logs/kubelet.log and logs/containerd.log): {:#}",
            node["status"]["conditions"]
        );
    }

    /// Creates a namespace with a unique name starting with `prefix` (lower
    /// case, digits and `-` only) and waits until its `default` ServiceAccount
    /// exists, so pods can be created in it right away. Returns the name.
    /// Namespaces are left behind (the cluster is disposable); delete them
    /// with `kubectl delete namespace` if a test needs to.
    pub fn fresh_namespace(&self, prefix: &str) -> String {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let n = NAMESPACE_COUNTER.fetch_add(1, Ordering::Relaxed);
        let prefix: String = prefix
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .take(40)
            .collect();
        let prefix = prefix.trim_matches('-');
        let prefix = if prefix.is_empty() { "e2e" } else { prefix };
        let name = format!("{prefix}-{}-{n}-{:x}", std::process::id(), nanos % 0xfffff);
        self.kubectl_ok(&["create", "namespace", &name]);
        self.wait_for(
            &format!("ServiceAccount default in namespace {name}"),
            Duration::from_secs(60),
            || {
                self.kubectl(&["-n", &name, "get", "serviceaccount", "default"])
                    .status
                    .success()
            },
        );
        name
    }
}

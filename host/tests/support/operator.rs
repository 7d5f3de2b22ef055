//! The operator binary against a real cluster, for the end-to-end test binaries: the cluster
//! with the CRDs applied, plugin directories, the install's ServiceAccount identity, the
//! operator process under test, and the seed's sample group.
//!
//! A test binary takes it with `#[path = "support/operator.rs"] mod operator;`.
// Each test binary uses a part of it.
#![allow(dead_code)]

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use workflow_e2e::{Cluster, poll_until, repo_root};

/// How long a test waits for anything before it fails.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The workflow types of the seed's sample group, in order.
pub const SEED_TYPES: [&str; 3] = ["pre-check", "setup", "post-check"];
/// The built-in workflow types the install ships (`plugins/build.sh`, `deploy/`).
pub const BUILTIN_TYPES: [&str; 5] = ["pre-check", "setup", "post-check", "at", "decommission"];

/// The shared cluster (`Cluster::shared`, so `WORKFLOW_E2E_KUBECONFIG` or `WORKFLOW_CLUSTER_DIR`
/// choose it) with the CRDs applied and established.
pub fn cluster() -> &'static Cluster {
    static CRDS: OnceLock<()> = OnceLock::new();
    let cluster = Cluster::shared();
    CRDS.get_or_init(|| {
        let crds = repo_root().join("crds");
        cluster.kubectl_ok(&["apply", "-k", &crds.to_string_lossy()]);
        cluster.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/workflowgroups.workflow.rxg456.cn",
            "crd/workflows.workflow.rxg456.cn",
        ]);
    });
    cluster
}

/// `<target>/plugins/<type>.wasm`, a built-in plugin as `make plugins` builds it.
pub fn built_plugin(type_name: &str) -> PathBuf {
    built("plugins", type_name)
}

/// `<target>/<dir>/<name>.wasm`, as `make plugins` builds it.
pub fn built(dir: &str, name: &str) -> PathBuf {
    let path = workflow_e2e::built_wasm(dir, name);
    assert!(
        path.exists(),
        "{} is missing: run `make plugins` first",
        path.display()
    );
    path
}

/// A plugin directory holding copies of the named built-in plugins.
pub fn plugin_dir(types: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary plugin directory");
    for t in types {
        std::fs::copy(built_plugin(t), dir.path().join(format!("{t}.wasm"))).expect("copy plugin");
    }
    dir
}

/// Writes `bytes` as `<dir>/<type>.wasm` in one step (a temporary file renamed over it), as a
/// ConfigMap volume update does, so that the operator never reads half a file.
pub fn replace_plugin(dir: &Path, type_name: &str, bytes: &[u8]) {
    let tmp = dir.join(format!(".{type_name}.wasm.tmp"));
    std::fs::write(&tmp, bytes).expect("write the plugin");
    std::fs::rename(&tmp, dir.join(format!("{type_name}.wasm"))).expect("move the plugin in");
}

/// The directory of the operators' logs and kubeconfigs: `target/e2e-logs/`.
pub fn log_dir() -> PathBuf {
    let dir = repo_root().join("target/e2e-logs");
    std::fs::create_dir_all(&dir).expect("log directory");
    dir
}

/// The kubeconfig every operator of these tests runs with: a token of the install manifests'
/// ServiceAccount (`deploy/rbac.yaml`), not the cluster-admin one, so a rule missing there
/// fails the tests. Its server and CA are those of [`cluster`]'s kubeconfig, whichever cluster
/// that is.
pub fn operator_kubeconfig() -> &'static Path {
    static KUBECONFIG: OnceLock<PathBuf> = OnceLock::new();
    KUBECONFIG.get_or_init(|| {
        let cluster = cluster();
        let deploy = repo_root().join("deploy");
        cluster.kubectl_ok(&[
            "apply",
            "-f",
            &deploy.join("namespace.yaml").to_string_lossy(),
            "-f",
            &deploy.join("rbac.yaml").to_string_lossy(),
        ]);
        let token = cluster.kubectl_ok(&[
            "-n",
            "workflow-system",
            "create",
            "token",
            "workflow-operator",
            "--duration=12h",
        ]);
        let admin = cluster.kubectl_json(&["config", "view", "--raw", "--minify"]);
        let kubeconfig = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": admin["clusters"][0]["cluster"]}],
            "users": [{"name": "workflow-operator", "user": {"token": token.trim()}}],
            "contexts": [{"name": "operator", "context": {"cluster": "local", "user": "workflow-operator", "namespace": "workflow-system"}}],
            "current-context": "operator",
        });
        let path = log_dir().join(format!("operator-sa-{}.kubeconfig", std::process::id()));
        std::fs::write(&path, kubeconfig.to_string()).expect("write the operator's kubeconfig");
        path
    })
}

/// `kubectl` as the operator's ServiceAccount.
pub fn kubectl_as_operator(args: &[&str]) -> Output {
    Command::new(workflow_e2e::kubectl_program())
        .arg("--kubeconfig")
        .arg(operator_kubeconfig())
        .args(args)
        .output()
        .expect("run kubectl")
}

/// Grants the operator in `ns` what the install grants it in its own namespace (plugin
/// ConfigMaps, the leader Lease), as the RoleBinding of `deploy/rbac.yaml` does.
pub fn grant_own_namespace(ns: &str) {
    cluster().apply_yaml_in(
        ns,
        r#"apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: workflow-operator-own-namespace
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: workflow-operator-own-namespace
subjects:
- kind: ServiceAccount
  name: workflow-operator
  namespace: workflow-system
"#,
    );
}

/// The operator binary running against the cluster, watching one namespace.
pub struct Operator {
    child: Child,
    log: PathBuf,
    /// Its HTTP address, once read from its log.
    addr: Option<String>,
}

impl Operator {
    /// Starts the operator and waits until its controllers run.
    pub fn start(namespace: &str, plugins: &Path) -> Operator {
        Operator::start_with(namespace, plugins, &[])
    }

    /// Starts the operator with `extra` arguments after the usual ones.
    pub fn start_with(namespace: &str, plugins: &Path, extra: &[&str]) -> Operator {
        let mut operator = Operator::spawn(namespace, plugins, extra);
        // Plugins are compiled before the controllers start; wait so that test timings start
        // from a running operator.
        operator.wait_for_log("controllers started");
        operator
    }

    /// Starts the operator, as the ServiceAccount of the install, with its own namespace (plugin
    /// ConfigMaps, leases) being `namespace`; does not wait for anything.
    pub fn spawn(namespace: &str, plugins: &Path, extra: &[&str]) -> Operator {
        let plugin_dir = ["--plugin-dir".as_ref(), plugins.as_os_str()];
        let extra = extra.iter().map(std::ffi::OsStr::new);
        Operator::spawn_program(
            Path::new(env!("CARGO_BIN_EXE_workflow-operator")),
            namespace,
            plugin_dir.into_iter().chain(extra),
        )
    }

    /// Starts `program` (the operator binary, wherever it is) as [`Operator::spawn`] does,
    /// with `args` after the usual ones (no plugin directory of its own).
    pub fn spawn_program<'a>(
        program: &Path,
        namespace: &str,
        args: impl IntoIterator<Item = &'a std::ffi::OsStr>,
    ) -> Operator {
        grant_own_namespace(namespace);
        let log = log_dir().join(format!("operator-{namespace}-{}.log", now_millis()));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(program)
            .args([
                "run",
                "--namespace",
                namespace,
                "--plugin-namespace",
                namespace,
                "--http-addr",
                "127.0.0.1:0",
            ])
            .args(args)
            .env("KUBECONFIG", operator_kubeconfig())
            .env("RUST_LOG", "info,workflow_operator=debug")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .expect("start the operator");
        Operator {
            child,
            log,
            addr: None,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Where its log goes.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Its log, to read apart from the process (while a wait holds the process itself).
    pub fn log(&self) -> OperatorLog {
        OperatorLog(self.log.clone())
    }

    /// Waits until the log has a line containing `text`; returns the time waited.
    pub fn wait_for_log(&mut self, text: &str) -> Duration {
        let log = self.log();
        let ((), waited) = poll_until(
            Duration::from_millis(20),
            TIMEOUT,
            &format!("the operator to log {text:?}"),
            || {
                if log.text().contains(text) {
                    return Ok(());
                }
                self.assert_running();
                Err(())
            },
            |()| log.to_string(),
        );
        waited
    }

    /// The address of its HTTP endpoints, from its log.
    pub fn http_addr(&mut self) -> String {
        if let Some(addr) = &self.addr {
            return addr.clone();
        }
        self.wait_for_log("serving /healthz");
        let log = self.log_text();
        let line = log
            .lines()
            .find(|l| l.contains("serving /healthz"))
            .unwrap_or_default();
        let addr = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("addr="))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        self.addr = Some(addr.clone());
        addr
    }

    /// GET `path` of its HTTP endpoints: the status code and the body.
    pub fn http_get(&mut self, path: &str) -> (u16, String) {
        let addr = self.http_addr();
        let out = Command::new("curl")
            .args([
                "-s",
                "-o",
                "-",
                "-w",
                "\n%{http_code}",
                &format!("http://{addr}{path}"),
            ])
            .output()
            .expect("run curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    /// Whether the process has ended.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Panics, with the log, if the process has exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("the operator exited ({status}); log: {}", self.log_text());
        }
    }

    pub fn log_text(&self) -> String {
        self.log().text()
    }

    /// Kills the process with SIGKILL, without letting it clean up, as a crash would.
    pub fn crash(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An operator's log file; displayed as its path and its whole text, for a failure message.
pub struct OperatorLog(PathBuf);

impl OperatorLog {
    /// What the operator has logged so far.
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.0).unwrap_or_default()
    }
}

impl fmt::Display for OperatorLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "operator log ({}):\n{}", self.0.display(), self.text())
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn now_millis() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

pub fn get(ns: &str, what: &str) -> Value {
    cluster().kubectl_json(&["-n", ns, "get", what])
}

pub fn list(ns: &str, what: &str, selector: Option<&str>) -> Vec<Value> {
    let mut args = vec!["-n", ns, "get", what];
    if let Some(selector) = selector {
        args.extend(["-l", selector]);
    }
    cluster().kubectl_json(&args)["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

pub fn succeeded_condition(obj: &Value) -> Value {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Succeeded").cloned())
        .unwrap_or(Value::Null)
}

pub fn condition_message(obj: &Value) -> String {
    succeeded_condition(obj)["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Waits until group `ns/name` is in phase `want`, failing if the operator exits.
pub fn wait_group_phase(ns: &str, name: &str, want: &str, operator: &mut Operator) -> Duration {
    let log = operator.log();
    let ((), waited) = poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        &format!("group {ns}/{name} to be {want}"),
        || {
            let group = get(ns, &format!("workflowgroup/{name}"));
            let phase = group["status"]["phase"].as_str().unwrap_or("").to_string();
            if phase == want {
                return Ok(());
            }
            operator.assert_running();
            Err(phase)
        },
        |phase| {
            format!(
                "group {ns}/{name} is {phase:?}, not {want:?}\n{}\n{log}",
                cluster().kubectl_ok(&["-n", ns, "get", "wfg,wf,pods", "-o", "wide"]),
            )
        },
    );
    waited
}

/// An address no other group of the test run uses (`10.<pid>.<n>.<m>`, n and m counting the
/// calls in this process): groups of tests that run at the same time do not wait for each
/// other's lock on a shared target. Data only: nothing connects to it.
pub fn own_target_ip() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    format!("10.{}.{}.{}", pid % 250 + 1, (n / 250) % 250, n % 250 + 1)
}

/// A group of the seed sample's kind running `types` on one target of its own
/// ([`own_target_ip`]), with `extra_spec` appended to its spec and `labels` (indented YAML
/// lines) added to its labels.
pub fn group_yaml(name: &str, types: &[&str], extra_spec: &str, labels: &str) -> String {
    group_yaml_on(name, types, &own_target_ip(), extra_spec, labels)
}

/// [`group_yaml`] on the target with address `ip`.
pub fn group_yaml_on(
    name: &str,
    types: &[&str],
    ip: &str,
    extra_spec: &str,
    labels: &str,
) -> String {
    let steps: String = types.iter().map(|t| format!("  - {t}\n")).collect();
    format!(
        "apiVersion: workflow.rxg456.cn/v1alpha1
kind: WorkflowGroup
metadata:
  name: {name}
  labels:
    app: e2e
{labels}spec:
  type: cluster-expansion
  clusterName: test-cluster
  workflowSteps:
{steps}  targets:
  - name: node-1
    ip: {ip}
    role: Master
{extra_spec}"
    )
}

/// A group of one `at` Workflow with `params` (its `spec.params.at`, the schedule defaulting to
/// the past: it runs at once) on the real node, with `pod_template` (a JSON object) merged over
/// the real node's placement, and `targets`.
pub fn real_node_at_group(
    name: &str,
    params: Value,
    pod_template: Value,
    targets: Value,
) -> String {
    let mut template = workflow_e2e::real_node_placement();
    for (key, value) in pod_template.as_object().into_iter().flatten() {
        template[key] = value.clone();
    }
    let mut at = json!({"schedule": "2020-01-01T00:00:00Z"});
    for (key, value) in params.as_object().into_iter().flatten() {
        at[key] = value.clone();
    }
    json!({
        "apiVersion": "workflow.rxg456.cn/v1alpha1",
        "kind": "WorkflowGroup",
        "metadata": {"name": name},
        "spec": {
            "type": "node-maintenance",
            "clusterName": "test-cluster",
            "workflowSteps": ["at"],
            "targets": targets,
            "params": {"at": at},
            "podTemplate": template,
        }
    })
    .to_string()
}

/// The steps seed 000 gives each type: names, descriptions and dependencies, as the API prints
/// them (each step's command is the runner with a script: see [`step_shapes`]).
pub fn seed_steps(workflow_type: &str) -> Value {
    match workflow_type {
        "pre-check" => json!([
            {"name": "validate-nodes", "description": "验证节点配置"},
            {"name": "check-network", "description": "检查网络连接", "dependsOn": ["validate-nodes"]},
        ]),
        "setup" => json!([
            {"name": "install-packages", "description": "安装必要软件包"},
            {"name": "configure-nodes", "description": "配置节点", "dependsOn": ["install-packages"]},
        ]),
        _ => json!([
            {"name": "verify-installation", "description": "验证安装结果"},
        ]),
    }
}

/// `steps` (a Workflow's `spec.steps`) with only what [`seed_steps`] lists of each.
pub fn step_shapes(steps: &Value) -> Value {
    steps
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let mut shape = json!({"name": s["name"], "description": s["description"]});
            if let Some(deps) = s.get("dependsOn") {
                shape["dependsOn"] = deps.clone();
            }
            shape
        })
        .collect()
}

/// The string at `pointer` in `v`, or "".
pub fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The types `/plugins` serves, with their digests and the problems it reports.
pub fn served_plugins(operator: &mut Operator) -> Value {
    let (status, body) = operator.http_get("/plugins");
    assert_eq!(status, 200, "/plugins answered {status}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("/plugins is not JSON ({e}): {body}"))
}

/// The digest `/plugins` serves for `type_name`, if it serves it.
pub fn served_digest(plugins: &Value, type_name: &str) -> Option<String> {
    plugins["types"]
        .as_array()?
        .iter()
        .find(|t| t["typeName"] == type_name)
        .map(|t| t["digest"].as_str().unwrap_or_default().to_string())
}

/// Every change to the pods of a namespace, in the API server's order, from a
/// `kubectl get pods --watch` started before the pods: who ran when, to the event, not to the
/// second that pod timestamps carry.
pub struct PodWatch {
    child: Child,
    events: std::sync::Arc<std::sync::Mutex<Vec<PodEvent>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// One watch event of a pod: its group (label), name and phase.
#[derive(Debug, Clone)]
pub struct PodEvent {
    pub group: String,
    pub pod: String,
    pub phase: String,
}

impl PodWatch {
    /// Starts watching the pods of `ns` (waits until the watch is established).
    pub fn start(ns: &str) -> PodWatch {
        let mut child = Command::new(workflow_e2e::kubectl_program())
            .args([
                "-n",
                ns,
                "get",
                "pods",
                "--watch",
                "--output-watch-events",
                "-o",
                "json",
            ])
            .env("KUBECONFIG", cluster().kubeconfig())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kubectl get pods --watch");
        let stdout = child.stdout.take().expect("the watch's output");
        let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = events.clone();
        let reader = std::thread::spawn(move || {
            for event in serde_json::Deserializer::from_reader(stdout).into_iter::<Value>() {
                let Ok(event) = event else { break };
                let pod = &event["object"];
                let record = PodEvent {
                    group: pod["metadata"]["labels"]["workflow.rxg456.cn/group-name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    pod: pod["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    phase: pod["status"]["phase"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                };
                sink.lock().expect("events").push(record);
            }
        });
        // kubectl lists (nothing yet) before it watches; give it the moment it needs.
        std::thread::sleep(Duration::from_millis(1500));
        PodWatch {
            child,
            events,
            reader: Some(reader),
        }
    }

    /// Stops the watch; the events seen.
    pub fn stop(mut self) -> Vec<PodEvent> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.events.lock().expect("events").clone()
    }
}

/// Per group, the span of its pods in `events`: from the first event of any of its pods to
/// the event in which its last pod finished (Succeeded or Failed). Panics naming a pod that
/// never finished.
pub fn pod_spans(events: &[PodEvent]) -> std::collections::BTreeMap<String, (usize, usize)> {
    let mut first: std::collections::BTreeMap<String, usize> = Default::default();
    let mut pod_start: std::collections::BTreeMap<&str, (usize, &str)> = Default::default();
    let mut pod_end: std::collections::BTreeMap<&str, usize> = Default::default();
    for (i, e) in events.iter().enumerate() {
        first.entry(e.group.clone()).or_insert(i);
        pod_start.entry(&e.pod).or_insert((i, &e.group));
        if matches!(e.phase.as_str(), "Succeeded" | "Failed") {
            pod_end.entry(&e.pod).or_insert(i);
        }
    }
    let mut spans: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    for (pod, (start, group)) in pod_start {
        let end = *pod_end
            .get(pod)
            .unwrap_or_else(|| panic!("pod {pod} of group {group} never finished: {events:#?}"));
        let span = spans.entry(group.to_string()).or_insert((start, end));
        span.0 = span.0.min(start);
        span.1 = span.1.max(end);
    }
    spans
}

/// Asserts that no two of `groups` (which share a target) had pods at the same time.
pub fn assert_no_overlap(events: &[PodEvent], groups: &[&str]) {
    let spans = pod_spans(events);
    for (i, a) in groups.iter().enumerate() {
        for b in &groups[i + 1..] {
            let (Some(sa), Some(sb)) = (spans.get(*a), spans.get(*b)) else {
                panic!("no pods of {a} or {b} were seen: {spans:?}");
            };
            assert!(
                sa.1 < sb.0 || sb.1 < sa.0,
                "groups {a} {sa:?} and {b} {sb:?} share a target and their pods overlapped (event indexes): {events:#?}"
            );
        }
    }
}

/// The label every lock Lease carries.
pub const LOCK_SELECTOR: &str = "workflow.rxg456.cn/lock";

/// The lock Leases left in `ns`.
pub fn locks_left(ns: &str) -> Vec<String> {
    list(ns, "leases", Some(LOCK_SELECTOR))
        .iter()
        .map(|l| {
            format!(
                "{} held by {}",
                l["metadata"]["name"].as_str().unwrap_or_default(),
                l["spec"]["holderIdentity"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// Waits (at most `within`) until no lock Lease is left in `ns`; the time waited.
pub fn wait_no_locks(ns: &str, within: Duration) -> Duration {
    let ((), waited) = poll_until(
        Duration::from_millis(200),
        within,
        "every lock Lease to be gone",
        || {
            let left = locks_left(ns);
            if left.is_empty() { Ok(()) } else { Err(left) }
        },
        |left| format!("locks left: {left:?}"),
    );
    waited
}

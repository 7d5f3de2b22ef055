//! End to end: what GitOps tools read of WorkflowGroups and Workflows, judged by the tools' own
//! code: the kstatus library that Flux and kpt wait with (cli-utils, built by
//! `tests/gitops/build-kstatus.sh`), the Argo CD health checks of `deploy/argocd/` run by Lua 5.1
//! (the Lua Argo CD embeds), and the `kubectl wait` and `argocd-cm` commands of the book's
//! GitOps chapter (docs/src/gitops.md). Every version of each object is judged, from its
//! creation on, as a watch delivers them.

#[path = "support/operator.rs"]
mod operator;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use operator::*;
use serde_json::{Value, json};
use workflow_e2e::{FAIL_LABEL, kubectl_program, poll_until, repo_root};

#[test]
fn gitops_tools_read_each_group_and_workflow_as_it_is_from_the_moment_it_is_applied() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-gitops");
    let plugins = plugin_dir(&["pre-check", "setup"]);
    let mut operator = Operator::start(&ns, plugins.path());
    let recorders = [
        Recorder::start(&ns, "workflowgroups"),
        Recorder::start(&ns, "workflows"),
    ];

    // The local cluster fails pods carrying the fail label; a group's labels reach its pods.
    let fail = format!("    {FAIL_LABEL}: \"true\"\n");
    let paused = "  paused: true\n";
    let manifests = [
        group_yaml("completes", &["pre-check", "setup"], "", ""),
        group_yaml("fails", &["pre-check", "setup"], "", &fail),
        group_yaml("paused", &["pre-check"], paused, ""),
        group_yaml("no-plugin", &["pre-check", "absent"], "", ""),
        workflow_yaml("paused-by-hand", "pre-check", paused),
        workflow_yaml("no-plugin-by-hand", "absent", ""),
    ];
    let applied: Vec<Value> = manifests.iter().map(|m| apply(&ns, m)).collect();
    // What `kubectl apply` answers is the object before the operator wrote any status.
    for (object, (status, message)) in applied.iter().zip(kstatus(&applied)) {
        let who = identity(object);
        assert_eq!(
            status, "InProgress",
            "kstatus on kubectl apply's answer for {who}: {message}"
        );
        assert_eq!(
            object["status"],
            json!({"observedGeneration": 0}),
            "kubectl apply's answer for {who}"
        );
    }

    wait_group_phase(&ns, "completes", "Completed", &mut operator);
    wait_group_phase(&ns, "fails", "Failed", &mut operator);
    for (what, reason) in [
        ("wfg/paused", "Paused"),
        ("wfg/no-plugin", "PluginMissing"),
        ("wf/paused-by-hand", "Paused"),
        ("wf/no-plugin-by-hand", "PluginMissing"),
    ] {
        poll_until(
            Duration::from_millis(100),
            TIMEOUT,
            &format!("{what} to say {reason}"),
            || {
                let seen = succeeded_condition(&get(&ns, what));
                if seen["reason"] == reason {
                    Ok(())
                } else {
                    Err(seen)
                }
            },
            |seen| format!("its Succeeded condition: {seen}"),
        );
    }
    readme_kubectl_waits_tell_completed_from_failed(&ns);
    operator.assert_running();

    let versions: Vec<Value> = recorders
        .into_iter()
        .flat_map(|recorder| recorder.finish())
        .collect();
    let seen = judge_every_version(&versions);
    for (who, history) in &seen {
        eprintln!(
            "{who} ({} versions): kstatus {}; Argo CD {}",
            history.versions,
            history.kstatus.join(" -> "),
            history.argocd.join(" -> ")
        );
        // Seen from its creation on: the API server's answer before any status write.
        assert_eq!(
            history.first["status"],
            json!({"observedGeneration": 0}),
            "the first version of {who} seen is not its creation"
        );
    }
    let expect = |who: &str, kstatus: &[&str], argocd: &[&str]| {
        let history = seen
            .get(who)
            .unwrap_or_else(|| panic!("{who} was never seen; seen: {:?}", seen.keys()));
        assert_eq!(
            (history.kstatus.join(" -> "), history.argocd.join(" -> ")),
            (kstatus.join(" -> "), argocd.join(" -> ")),
            "{who}: kstatus and Argo CD, one change after the other"
        );
    };
    let (done, healthy) = (["InProgress", "Current"], ["Progressing", "Healthy"]);
    let (failed, degraded) = (["InProgress", "Failed"], ["Progressing", "Degraded"]);
    let (waiting, suspended) = (["InProgress"], ["Progressing", "Suspended"]);
    expect("WorkflowGroup/completes", &done, &healthy);
    expect("WorkflowGroup/fails", &failed, &degraded);
    expect("WorkflowGroup/paused", &waiting, &suspended);
    expect("WorkflowGroup/no-plugin", &waiting, &["Progressing"]);
    expect("Workflow/paused-by-hand", &waiting, &suspended);
    expect("Workflow/no-plugin-by-hand", &waiting, &["Progressing"]);
    let of_group = |group: &str| -> Vec<String> {
        seen.iter()
            .filter(|(who, h)| who.starts_with("Workflow/") && h.group == group)
            .map(|(who, _)| who.clone())
            .collect()
    };
    let completed = of_group("completes");
    assert_eq!(completed.len(), 2, "{completed:?}");
    for who in &completed {
        expect(who, &done, &healthy);
    }
    let failed_workflows = of_group("fails");
    assert_eq!(failed_workflows.len(), 1, "{failed_workflows:?}");
    expect(&failed_workflows[0], &failed, &degraded);
}

#[test]
fn the_argocd_checks_agree_with_kstatus_on_deletion_an_unseen_edit_and_a_paused_failure() {
    let object = |metadata: Value, spec: Value, status: Value| {
        json!({
            "apiVersion": "workflow.rxg456.cn/v1alpha1",
            "kind": "WorkflowGroup",
            "metadata": metadata,
            "spec": spec,
            "status": status,
        })
    };
    // The conditions as the operator writes them.
    let conditions = |succeeded: &str| {
        let condition = |type_: &str, status: &str| {
            json!({"type": type_, "status": status, "reason": "R", "message": "m",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"})
        };
        let mut all = vec![condition("Succeeded", succeeded)];
        match succeeded {
            "True" => all.push(condition("Ready", "True")),
            "False" => {
                all.extend([condition("Stalled", "True"), condition("Ready", "False")]);
            }
            _ => all.push(condition("Reconciling", "True")),
        }
        Value::Array(all)
    };
    let cases = [
        (
            "being deleted",
            object(
                json!({"name": "g", "generation": 1, "deletionTimestamp": "2026-01-01T00:00:00Z"}),
                json!({}),
                json!({"observedGeneration": 1, "phase": "Running", "conditions": conditions("Unknown")}),
            ),
            ("Terminating", "Progressing"),
        ),
        (
            "a finished group whose spec was edited since",
            object(
                json!({"name": "g", "generation": 2}),
                json!({}),
                json!({"observedGeneration": 1, "phase": "Completed", "conditions": conditions("True")}),
            ),
            ("InProgress", "Progressing"),
        ),
        (
            "paused after it failed",
            object(
                json!({"name": "g", "generation": 1}),
                json!({"paused": true}),
                json!({"observedGeneration": 1, "phase": "Failed", "conditions": conditions("False")}),
            ),
            ("Failed", "Degraded"),
        ),
        (
            "paused, not seen yet",
            object(
                json!({"name": "g", "generation": 1}),
                json!({"paused": true}),
                json!({"observedGeneration": 0}),
            ),
            ("InProgress", "Progressing"),
        ),
    ];
    let objects: Vec<Value> = cases.iter().map(|(_, o, _)| o.clone()).collect();
    let judged = kstatus(&objects).into_iter().zip(argocd_health(&objects));
    for ((case, _, want), ((status, _), (health, _))) in cases.iter().zip(judged) {
        assert_eq!((status.as_str(), health.as_str()), *want, "{case}");
    }
}

#[test]
fn the_readme_shows_the_argocd_cm_entries_that_deploy_argocd_argocd_cm_sh_prints() {
    let printed = run_with_stdin(
        Command::new(repo_root().join("deploy/argocd/argocd-cm.sh")),
        b"",
    );
    assert!(printed.contains("resource.customizations.health.workflow.rxg456.cn_WorkflowGroup: |"));
    assert!(
        gitops_chapter().contains(&format!("```yaml\n{printed}```")),
        "the GitOps chapter's argocd-cm entries are not what `deploy/argocd/argocd-cm.sh` prints: paste its output:\n{printed}"
    );
}

#[test]
fn the_readmes_argocd_cm_command_installs_the_health_checks_and_keeps_the_rest() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-argocd-cm");
    cluster.apply_yaml_in(
        &ns,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\ndata:\n  url: https://argocd.example.com\n",
    );
    let lines = readme_lines("kubectl -n argocd patch configmap argocd-cm");
    assert_eq!(lines.len(), 1, "{lines:?}");
    let kubectl = kubectl_program();
    let command = lines[0].replacen(
        "kubectl -n argocd",
        &format!("{} -n {ns}", kubectl.display()),
        1,
    );
    let out = Command::new("bash")
        .args(["-c", &command])
        .current_dir(repo_root())
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cm = get(&ns, "configmap/argocd-cm");
    assert_eq!(cm["data"]["url"], "https://argocd.example.com");
    for kind in ["WorkflowGroup", "Workflow"] {
        let check = std::fs::read_to_string(health_check(kind)).expect("read the health check");
        assert_eq!(
            cm["data"][format!("resource.customizations.health.workflow.rxg456.cn_{kind}")],
            check,
            "argocd-cm's entry for {kind}"
        );
    }
}

/// The GitOps chapter's `kubectl wait` commands, run as shown against `ns`'s groups `completes` and
/// `fails`: each returns for the group it names the state of, and times out for the other.
fn readme_kubectl_waits_tell_completed_from_failed(ns: &str) {
    let lines = readme_lines("kubectl wait ");
    assert!(
        lines.len() >= 2,
        "the GitOps chapter shows no kubectl wait: {lines:?}"
    );
    for line in &lines {
        let words = shell_words(line);
        let for_failed = line.contains("=false") || line.contains("=Failed");
        let (group, other) = if for_failed {
            ("fails", "completes")
        } else {
            ("completes", "fails")
        };
        let wait = |name: &str, timeout: &str| {
            let mut args = vec!["-n".to_string(), ns.to_string()];
            args.extend(words.iter().skip(1).map(|w| {
                if w == "wfg/workflowgroup-sample" {
                    format!("wfg/{name}")
                } else if w.starts_with("--timeout=") {
                    format!("--timeout={timeout}")
                } else {
                    w.clone()
                }
            }));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cluster().kubectl(&args)
        };
        let out = wait(group, "60s");
        assert!(
            out.status.success(),
            "`{line}` for {group}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !wait(other, "2s").status.success(),
            "`{line}` returned for {other}"
        );
    }
}

/// Judges every version of `versions` by kstatus and by the Argo CD checks, asserting that
/// kstatus tells the truth (Current only when Completed, Failed only when Failed) and that Argo
/// CD agrees with it; returns what each object went through, by `Kind/name`.
fn judge_every_version(versions: &[Value]) -> BTreeMap<String, History> {
    let judged = kstatus(versions);
    let health = argocd_health(versions);
    let mut seen: BTreeMap<String, History> = BTreeMap::new();
    for ((object, (status, message)), (health, health_message)) in
        versions.iter().zip(judged).zip(health)
    {
        let who = format!(
            "{} at resourceVersion {}",
            identity(object),
            text(object, "/metadata/resourceVersion")
        );
        let phase = text(object, "/status/phase");
        assert_eq!(
            status,
            truth(phase),
            "kstatus on {who} ({phase:?}): {message}\n{object:#}"
        );
        assert_eq!(
            kstatus_of(&health),
            status,
            "Argo CD says {health} ({health_message}) of {who}, kstatus {status}\n{object:#}"
        );
        assert!(
            health != "Suspended" || object["spec"]["paused"] == true,
            "Argo CD says Suspended of {who}, which is not paused"
        );
        let history = seen.entry(identity(object)).or_insert_with(|| History {
            group: text(object, "/metadata/labels/workflow.rxg456.cn~1group-name").into(),
            first: object.clone(),
            ..History::default()
        });
        history.versions += 1;
        push_new(&mut history.kstatus, status);
        push_new(&mut history.argocd, health);
    }
    seen
}

/// What was seen of one object, one entry per change.
#[derive(Default)]
struct History {
    /// The group it belongs to (a Workflow's label), or "".
    group: String,
    /// Its first version seen.
    first: Value,
    /// How many versions were seen.
    versions: usize,
    kstatus: Vec<String>,
    argocd: Vec<String>,
}

fn push_new(list: &mut Vec<String>, item: String) {
    if list.last() != Some(&item) {
        list.push(item);
    }
}

/// `Kind/name` of `object`.
fn identity(object: &Value) -> String {
    format!(
        "{}/{}",
        text(object, "/kind"),
        text(object, "/metadata/name")
    )
}

/// What kstatus must say of an object in `phase`: Current only when it completed, Failed only
/// when it failed, InProgress before (just applied, pending, running, paused, waiting).
fn truth(phase: &str) -> &'static str {
    match phase {
        "Completed" => "Current",
        "Failed" => "Failed",
        _ => "InProgress",
    }
}

/// The kstatus status an Argo CD health status stands for.
fn kstatus_of(health: &str) -> &str {
    match health {
        "Healthy" => "Current",
        "Degraded" => "Failed",
        "Progressing" | "Suspended" => "InProgress",
        other => other,
    }
}

/// Every version of the objects of one resource in a namespace, as a watch delivers them: the
/// watch starts at the resourceVersion of a list made before anything is applied, so it
/// delivers every change after that, however late its request reaches the API server.
struct Recorder {
    ns: String,
    resource: String,
    watch: Child,
    seen: Arc<Mutex<Vec<Value>>>,
    reader: JoinHandle<()>,
}

impl Recorder {
    fn start(ns: &str, resource: &str) -> Recorder {
        // The API server's list (`kubectl get` makes a list of its own, with no version).
        let path = format!("/apis/workflow.rxg456.cn/v1alpha1/namespaces/{ns}/{resource}");
        let list: Value = serde_json::from_str(&cluster().kubectl_ok(&["get", "--raw", &path]))
            .expect("the list is JSON");
        let from = text(&list, "/metadata/resourceVersion");
        assert!(!from.is_empty(), "no resourceVersion in {list}");
        let path = format!("{path}?watch=true&resourceVersion={from}");
        let mut watch = cluster()
            .kubectl_command()
            .args(["get", "--raw", &path])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kubectl get --raw (a watch)");
        let stdout = watch.stdout.take().expect("the watch's stdout");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let reader = std::thread::spawn(move || {
            let events = serde_json::Deserializer::from_reader(std::io::BufReader::new(stdout))
                .into_iter::<Value>()
                .map_while(Result::ok);
            for event in events {
                sink.lock().expect("the recorder's list").push(event);
            }
        });
        Recorder {
            ns: ns.to_string(),
            resource: resource.to_string(),
            watch,
            seen,
            reader,
        }
    }

    /// Waits until the watch has delivered the current version of every object, stops it and
    /// returns every version delivered, in order.
    fn finish(mut self) -> Vec<Value> {
        let now = list(&self.ns, &self.resource, None);
        let delivered = |object: &Value| {
            let version = text(object, "/metadata/resourceVersion");
            self.seen
                .lock()
                .expect("the recorder's list")
                .iter()
                .any(|e| {
                    e["type"] == "ERROR" || text(e, "/object/metadata/resourceVersion") == version
                })
        };
        poll_until(
            Duration::from_millis(100),
            TIMEOUT,
            &format!(
                "the watch of {} to deliver their current versions",
                self.resource
            ),
            || {
                let missing: Vec<String> =
                    now.iter().filter(|o| !delivered(o)).map(identity).collect();
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(missing)
                }
            },
            |missing| format!("not delivered: {missing:?}"),
        );
        let _ = self.watch.kill();
        let _ = self.watch.wait();
        let _ = self.reader.join();
        let events = std::mem::take(&mut *self.seen.lock().expect("the recorder's list"));
        events
            .into_iter()
            .map(|event| {
                assert_ne!(
                    event["type"], "ERROR",
                    "the watch of {}: {event}",
                    self.resource
                );
                event["object"].clone()
            })
            .collect()
    }
}

/// `kubectl apply -o json` of `yaml` in `ns`: the object as the API server answers.
fn apply(ns: &str, yaml: &str) -> Value {
    let out = cluster().kubectl_with_stdin(
        &["-n", ns, "apply", "-o", "json", "-f", "-"],
        yaml.as_bytes(),
    );
    assert!(
        out.status.success(),
        "kubectl apply: {}\n{yaml}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("kubectl apply -o json prints JSON")
}

/// A Workflow applied by hand, with one step, `extra_spec` appended to its spec.
fn workflow_yaml(name: &str, type_name: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: workflow.rxg456.cn/v1alpha1
kind: Workflow
metadata:
  name: {name}
spec:
  type: {type_name}
  clusterName: test-cluster
  targets:
  - name: node-1
    ip: 192.168.1.101
    role: Master
  steps:
  - name: validate-nodes
    command: validate-nodes.sh
{extra_spec}"
    )
}

/// The kstatus helper, built on first use (once per cli-utils version and source).
fn kstatus_helper() -> &'static Path {
    static HELPER: OnceLock<PathBuf> = OnceLock::new();
    HELPER.get_or_init(|| {
        let script = repo_root().join("tests/gitops/build-kstatus.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("could not run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} failed, so the GitOps tests cannot run ({}):\n{}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(stdout.lines().last().unwrap_or_default().trim())
    })
}

/// What kstatus computes for each of `objects`: (status, message).
fn kstatus(objects: &[Value]) -> Vec<(String, String)> {
    let input: String = objects.iter().map(|o| format!("{o}\n")).collect();
    let out = run_with_stdin(Command::new(kstatus_helper()), input.as_bytes());
    let results: Vec<(String, String)> = out
        .lines()
        .map(|line| {
            let result: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("the kstatus helper printed {line:?}: {e}"));
            (
                text(&result, "/status").into(),
                text(&result, "/message").into(),
            )
        })
        .collect();
    assert_eq!(results.len(), objects.len(), "one result per object: {out}");
    results
}

/// `deploy/argocd/workflow.rxg456.cn/<kind>/health.lua`.
fn health_check(kind: &str) -> PathBuf {
    repo_root().join(format!(
        "deploy/argocd/workflow.rxg456.cn/{kind}/health.lua"
    ))
}

/// What the Argo CD health check of its kind says of each of `objects`: (status, message), run
/// by Lua 5.1 as Argo CD runs it.
fn argocd_health(objects: &[Value]) -> Vec<(String, String)> {
    let mut results = vec![(String::new(), String::new()); objects.len()];
    for kind in ["WorkflowGroup", "Workflow"] {
        let of_kind: Vec<usize> = (0..objects.len())
            .filter(|i| objects[*i]["kind"] == kind)
            .collect();
        if of_kind.is_empty() {
            continue;
        }
        let mut chunk = String::from("local objects = {}\n");
        for i in &of_kind {
            chunk.push_str(&format!("objects[#objects + 1] = {}\n", lua(&objects[*i])));
        }
        chunk.push_str("return objects\n");
        let mut run = Command::new("lua5.1");
        run.arg(repo_root().join("tests/gitops/argocd_health.lua"))
            .arg(health_check(kind));
        let out = run_with_stdin(run, chunk.as_bytes());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), of_kind.len(), "one result per object: {out}");
        for (i, line) in of_kind.iter().zip(lines) {
            let (status, message) = line.split_once('\t').unwrap_or((line, ""));
            results[*i] = (status.to_string(), message.to_string());
        }
    }
    results
}

/// `value` as a Lua table constructor, as Argo CD hands an object to a health check: a JSON
/// null is nil (the field is absent), an array a table indexed from 1.
fn lua(value: &Value) -> String {
    match value {
        Value::Null => "nil".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => lua_string(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(lua).collect();
            format!("{{{}}}", items.join(", "))
        }
        Value::Object(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| format!("[{}] = {}", lua_string(k), lua(v)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
    }
}

/// `s` as a Lua string literal: its bytes, any but printable ASCII written as `\ddd`.
fn lua_string(s: &str) -> String {
    let mut out = String::from("\"");
    for byte in s.bytes() {
        match byte {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(char::from(byte));
            }
            0x20..=0x7e => out.push(char::from(byte)),
            _ => out.push_str(&format!("\\{byte:03}")),
        }
    }
    out.push('"');
    out
}

/// Runs `command` with `input` on its stdin; returns its stdout, panicking with its stderr if
/// it fails. The input is written from another thread: the program may fill its stdout pipe
/// before it has read all of it.
fn run_with_stdin(mut command: Command, input: &[u8]) -> String {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("could not run {program} ({e}); the GitOps tests need Lua 5.1 (Debian's lua5.1, which .ci/run installs) and Go")
        });
    let writer = child.stdin.take().map(|mut stdin| {
        let input = input.to_vec();
        std::thread::spawn(move || stdin.write_all(&input))
    });
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{program} did not finish: {e}"));
    if let Some(Ok(Err(e))) = writer.map(JoinHandle::join) {
        panic!("could not write to {program}: {e}");
    }
    assert!(
        out.status.success(),
        "{program} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The book's chapter "Using it with GitOps".
fn gitops_chapter() -> String {
    std::fs::read_to_string(repo_root().join("docs/src/gitops.md"))
        .expect("read docs/src/gitops.md")
}

/// The lines of the GitOps chapter that start with `prefix`.
fn readme_lines(prefix: &str) -> Vec<String> {
    gitops_chapter()
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// `line` split into words as a shell splits it: at spaces outside single quotes, the quotes
/// removed (what the chapter's commands use).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

#[test]
fn an_edit_of_a_finished_group_is_acknowledged_and_gitops_tools_still_read_it_as_done() {
    let cluster = cluster();
    let ns = cluster.fresh_namespace("e2e-gitops-edit");
    let plugins = plugin_dir(&["pre-check"]);
    let mut operator = Operator::start(&ns, plugins.path());
    cluster.apply_yaml_in(&ns, &group_yaml("edited", &["pre-check"], "", ""));
    wait_group_phase(&ns, "edited", "Completed", &mut operator);
    let done = get(&ns, "workflowgroup/edited");
    let pods = list(&ns, "pods", None).len();

    // New params applied from git, no re-run asked: a new generation.
    let edited = group_yaml(
        "edited",
        &["pre-check"],
        "  params:\n    pre-check:\n      minDiskMiB: 2048\n",
        "",
    );
    let applied = apply(&ns, &edited);
    assert_eq!(applied["metadata"]["generation"], 2, "{applied:#}");
    let (group, _) = poll_until(
        Duration::from_millis(100),
        TIMEOUT,
        "the operator to observe generation 2",
        || {
            let group = get(&ns, "workflowgroup/edited");
            if group["status"]["observedGeneration"] == 2 {
                Ok(group)
            } else {
                Err(group["status"].clone())
            }
        },
        |status| format!("its status: {status}\n{}", operator.log()),
    );
    // Still the group that completed, now Current for kstatus and Healthy for Argo CD.
    assert_eq!(group["status"]["phase"], "Completed", "{group:#}");
    assert_eq!(
        group["status"]["completionTime"],
        done["status"]["completionTime"]
    );
    let conditions = group["status"]["conditions"]
        .as_array()
        .expect("conditions");
    assert!(
        conditions.iter().all(|c| c["observedGeneration"] == 2),
        "{conditions:#?}"
    );
    let objects = [group.clone()];
    let (status, message) = kstatus(&objects).remove(0);
    assert_eq!(status, "Current", "kstatus: {message}");
    let (health, message) = argocd_health(&objects).remove(0);
    assert_eq!(health, "Healthy", "Argo CD: {message}");
    // Nothing ran again.
    assert_eq!(list(&ns, "pods", None).len(), pods);
    assert_eq!(list(&ns, "workflows", None).len(), 1);
}

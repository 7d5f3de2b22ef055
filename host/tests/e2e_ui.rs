//! End to end, in a real browser: `workflow-operator ui` serves the web view on loopback as the
//! kubeconfig's user, and headless Chromium (chromedriver) loads it as a person's browser
//! would. A rollout of two waves over target hosts of the test's own (one of them down) shows
//! its failed target and its waiting approval in the grid, and the page follows the approval
//! without a reload.
//!
//! Set `WORKFLOW_UI_SCREENSHOTS` to a directory to keep the screenshots it takes (the README's).

#[path = "support/browser.rs"]
mod browser;
#[path = "support/operator.rs"]
mod operator;
#[path = "support/target_hosts.rs"]
mod target_hosts;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use browser::Browser;
use operator::*;
use serde_json::{Value, json};
use target_hosts::*;

/// `workflow-operator ui` for namespace `ns`, and the URL it printed.
struct Ui {
    child: Child,
    url: String,
}

impl Ui {
    fn start(ns: &str) -> Ui {
        let mut child = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
            .args(["ui", "-n", ns, "--no-open"])
            .env("KUBECONFIG", cluster().kubeconfig())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run workflow-operator ui");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("the URL it prints");
        Ui {
            child,
            url: line.trim().to_string(),
        }
    }

    /// `host:port` it serves on.
    fn authority(&self) -> &str {
        let rest = self.url.trim_start_matches("http://");
        rest.split('/').next().unwrap_or(rest)
    }

    /// The status line of `GET path` with `headers`, sent by hand.
    fn status_of(&self, path: &str, headers: &str) -> String {
        let mut stream = TcpStream::connect(self.authority()).expect("connect to the view");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n"
        )
        .expect("send");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer.lines().next().unwrap_or_default().to_string()
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A rollout of `at` over hosts 1 to 4 in waves of two, one failed target allowed, each wave's
/// step waiting for alice's approval.
fn gated_rollout(hosts: &TargetHosts, name: &str) -> String {
    let mut group: Value = serde_json::from_str(&real_node_at_group(
        name,
        json!({
            "command": "workflow-runner --connect-timeout 5 -- 'uname -n'",
            "image": STEP_IMAGE,
            "approval": {"approvers": ["alice"], "reason": "restarts the fleet"},
        }),
        json!({
            "volumes": [{"name": "ssh", "secret": {"secretName": "node-ssh"}}],
            "volumeMounts": [{"name": "ssh", "mountPath": "/etc/workflow/ssh", "readOnly": true}],
        }),
        hosts.targets(&[1, 2, 3, 4]),
    ))
    .expect("a group");
    group["spec"]["rollout"] = json!({"waveSize": 2, "maxFailedTargets": 1});
    group.to_string()
}

/// Waits until the `at` Workflow of wave `wave` of group `name` waits for approval; returns it.
fn waiting_workflow(ns: &str, name: &str, wave: u32, operator: &mut Operator) -> Value {
    let selector = format!("workflow.rxg456.cn/group-name={name},workflow.rxg456.cn/wave={wave}");
    let (workflow, _) = workflow_e2e::poll_until(
        Duration::from_millis(200),
        TIMEOUT,
        &format!("wave {wave} to wait for approval"),
        || {
            let found = list(ns, "workflows", Some(&selector));
            match found.first() {
                Some(w)
                    if w["status"]["stepDetails"]["run"]["approval"]["digest"].is_string()
                        && w["status"]["stepDetails"]["run"]["pod"].is_null() =>
                {
                    Ok(w.clone())
                }
                other => Err(other.cloned().unwrap_or_default()),
            }
        },
        |w| format!("{w}\n{}", operator.log()),
    );
    workflow
}

/// alice approves step `run` of `workflow`, as the API server records her.
fn approve_as_alice(ns: &str, workflow: &Value) {
    let yaml = format!(
        "apiVersion: workflow.rxg456.cn/v1alpha1\nkind: Approval\nmetadata:\n  generateName: by-alice-\n  namespace: {ns}\nspec:\n  workflow: {}\n  workflowUID: {}\n  digest: \"{}\"\n  step: run\n  approver: alice\n",
        text(workflow, "/metadata/name"),
        text(workflow, "/metadata/uid"),
        text(workflow, "/status/stepDetails/run/approval/digest"),
    );
    let out =
        cluster().kubectl_with_stdin(&["--as", "alice", "create", "-f", "-"], yaml.as_bytes());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The grid's cells: `wave/target/type` -> (state, reason).
const CELLS: &str = "return Object.fromEntries([...document.querySelectorAll('td.cell')].map(c => [`${c.dataset.wave}/${c.dataset.target}/${c.dataset.type}`, [c.dataset.state, c.title]]))";

fn screenshot(browser: &Browser, name: &str) {
    let dir = std::env::var_os("WORKFLOW_UI_SCREENSHOTS").map_or_else(
        || PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui"),
        PathBuf::from,
    );
    browser.screenshot(&dir.join(name));
}

#[test]
fn the_web_view_shows_waves_a_failed_target_and_a_waiting_approval_and_follows_the_approval_live() {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    let hosts = TargetHosts::start(4);
    let ns = cluster.fresh_namespace("e2e-ui");
    hosts.secret(cluster, &ns, "node-ssh", &hosts.file("ssh-privatekey"));
    cluster.kubectl_ok(&[
        "-n",
        &ns,
        "create",
        "rolebinding",
        "approvers",
        "--clusterrole=workflow.rxg456.cn:approver",
        "--user=alice",
    ]);
    let plugins = plugin_dir(&["at"]);
    let mut operator = Operator::start(&ns, plugins.path());
    hosts.stop(2);
    let ui = Ui::start(&ns);

    // Safe by default: only on loopback, only with this start's secret, only by its own name.
    assert!(
        ui.url.starts_with("http://127.0.0.1:") && ui.url.contains("/?token="),
        "{}",
        ui.url
    );
    let host = format!("Host: {}\r\n", ui.authority());
    assert!(
        ui.status_of("/api/groups", &host).contains("401"),
        "no secret"
    );
    let (_, secret) = ui.url.split_once("token=").expect("the secret");
    let bearer = format!("{host}Authorization: Bearer {secret}\r\n");
    assert!(ui.status_of("/api/groups", &bearer).contains("200"));
    let rebound = format!("Host: evil.example:80\r\nAuthorization: Bearer {secret}\r\n");
    assert!(
        ui.status_of("/api/groups", &rebound).contains("403"),
        "another host name"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["ui", "--no-open", "--address", "0.0.0.0:0"])
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .expect("run workflow-operator ui");
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("loopback only"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Wave 1 (hosts 1 and 2) waits for alice, runs once she approves, and fails on host-2
    // within the budget; wave 2 (hosts 3 and 4) then waits for her.
    cluster.apply_yaml_in(&ns, &gated_rollout(&hosts, "fleet"));
    let first = waiting_workflow(&ns, "fleet", 1, &mut operator);
    approve_as_alice(&ns, &first);
    let second = waiting_workflow(&ns, "fleet", 2, &mut operator);

    let browser = Browser::start();
    browser.goto(&ui.url);
    let listed = browser.wait_for(
        "the group listed",
        &format!("const r = document.querySelector('tr.group-row[data-group=\"{ns}/fleet\"]'); return r && r.innerText"),
        TIMEOUT,
    );
    assert!(
        listed.as_str().is_some_and(|r| r.contains("Running")),
        "{listed}"
    );
    assert!(
        !browser
            .js("return location.search")
            .as_str()
            .unwrap_or_default()
            .contains("token"),
        "the secret left the address bar"
    );
    screenshot(&browser, "ui-groups.png");

    browser.click(&format!("tr.group-row[data-group=\"{ns}/fleet\"]"));
    browser.wait_for(
        "wave 2 to wait for approval",
        "const c = document.querySelector('td.cell[data-wave=\"2\"][data-target=\"host-3\"]'); return c && c.dataset.state === 'waiting'",
        TIMEOUT,
    );
    let cells = browser.js(CELLS);
    assert_eq!(cells["1/host-1/at"][0], "ok", "{cells}");
    let failed = &cells["1/host-2/at"];
    assert!(
        matches!(failed[0].as_str(), Some("failed" | "unreachable"))
            && failed[1]
                .as_str()
                .is_some_and(|r| r.contains("host-2") || r.contains("refused")),
        "host-2 is down: {cells}"
    );
    for target in ["host-3", "host-4"] {
        let cell = &cells[format!("2/{target}/at").as_str()];
        assert_eq!(cell[0], "waiting", "{cells}");
        assert!(
            cell[1]
                .as_str()
                .is_some_and(|r| r.contains("waits for approval (0 of 1, by alice)")),
            "{cells}"
        );
    }
    let step = format!("{}/run", text(&second, "/metadata/name"));
    let approval = browser.js(&format!(
        "const a = document.querySelector('tr.step-row[data-step=\"{step}\"] .approval'); return a && [a.dataset.approval, a.innerText]"
    ));
    assert_eq!(approval[0], "waiting", "{approval}");
    screenshot(&browser, "ui-group-waiting.png");

    // The approval reaches the page by itself: no reload (a mark left in the page stays).
    browser.js("window.__sameLoad = true; return null");
    let renders = browser.js("return Number(document.body.dataset.renders)");
    approve_as_alice(&ns, &second);
    browser.wait_for(
        "wave 2 to run and pass on host-3 and host-4",
        "const s = t => { const c = document.querySelector(`td.cell[data-wave=\"2\"][data-target=\"${t}\"]`); return c && c.dataset.state }; return s('host-3') === 'ok' && s('host-4') === 'ok'",
        TIMEOUT,
    );
    assert_eq!(
        browser.js("return window.__sameLoad === true"),
        true,
        "the page was reloaded"
    );
    assert!(
        browser
            .js("return Number(document.body.dataset.renders)")
            .as_u64()
            > renders.as_u64(),
        "rendered again from the stream"
    );
    let approval = browser.wait_for(
        "the approval to show who gave it",
        &format!("const a = document.querySelector('tr.step-row[data-step=\"{step}\"] .approval'); return a && a.dataset.approval === 'approved' && a.innerText"),
        TIMEOUT,
    );
    assert!(
        approval.as_str().is_some_and(|a| a.contains("alice")),
        "{approval}"
    );

    // A step's log, from its pod: the runner's line for each target.
    browser.click(&format!(
        "tr.step-row[data-step=\"{}/run\"] button.log-btn",
        text(&first, "/metadata/name")
    ));
    let log = browser.wait_for(
        "the step's log",
        "const l = document.getElementById('log'); return l && l.textContent.includes('host-1') && l.textContent",
        TIMEOUT,
    );
    assert!(log.as_str().is_some_and(|l| l.contains("host-2")), "{log}");
    screenshot(&browser, "ui-group-log.png");
}

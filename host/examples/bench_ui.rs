//! `make bench-ui`: the web view's figures on the local cluster, in headless Chromium.
//!
//! 1. Latency: a group's status changes `CHANGES` (100) times, one after another; for each, the
//!    time from the API server accepting the change to the page having drawn it (the page
//!    records when it drew what, `window.__wfuiRenders`), p50/p99/max.
//! 2. Scale: `GROUPS` (1000) groups listed: the view's peak and current RSS, the page's
//!    JavaScript heap, how long the list took to show them all, and the latency of one change
//!    seen on the list of all of them.
//!
//! No operator runs: the bench writes the groups' status itself, as the operator would, so what
//! is measured is the view alone. It runs the debug build of `workflow-operator` (what
//! `make build` makes) unless `WORKFLOW_OPERATOR_BIN` names another.

// The bench uses part of what the tests use.
#[allow(dead_code)]
#[path = "../tests/support/browser.rs"]
mod browser;

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use browser::Browser;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use workflow_e2e::{Cluster, repo_root};
use workflow_operator::api::WorkflowGroup;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or_default()
}

fn group(name: &str) -> WorkflowGroup {
    serde_json::from_value(json!({
        "apiVersion": "workflow.rxg456.cn/v1alpha1", "kind": "WorkflowGroup",
        "metadata": {"name": name},
        "spec": {"type": "bench", "clusterName": "bench", "workflowSteps": ["pre-check"],
            "targets": [{"name": "node-1", "ip": "192.168.1.101"}]}
    }))
    .expect("a group")
}

/// The status the bench writes: Running, its message `message`.
fn status(message: &str) -> Value {
    json!({"status": {"phase": "Running", "conditions": [{
        "type": "Succeeded", "status": "Unknown", "reason": "Bench", "message": message,
        "lastTransitionTime": "2026-12-01T10:00:00Z"}]}})
}

/// When the page drew `message`, by its own clock (Unix milliseconds).
fn drawn_at(browser: &Browser, message: &str) -> f64 {
    let script = format!(
        "const r = (window.__wfuiRenders || []).find(r => (r.message || '').split('\\n').includes({message:?})); return r ? r.at : null"
    );
    browser
        .wait_for(message, &script, Duration::from_secs(60))
        .as_f64()
        .expect("a time")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn kib_of(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_default()
}

fn main() -> anyhow::Result<()> {
    // The API calls on a runtime of their own; the browser blocks on its own.
    let rt = tokio::runtime::Runtime::new()?;
    let changes = env_or("CHANGES", 100);
    let groups = env_or("GROUPS", 1000);
    let cluster = Cluster::shared();
    cluster.kubectl_ok(&["apply", "-k", &repo_root().join("crds").to_string_lossy()]);
    let ns = cluster.fresh_namespace("bench-ui");
    let config = rt.block_on(kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(cluster.kubeconfig())?,
        &kube::config::KubeConfigOptions::default(),
    ))?;
    let _guard = rt.enter();
    let api: Api<WorkflowGroup> = Api::namespaced(kube::Client::try_from(config)?, &ns);
    rt.block_on(api.create(&PostParams::default(), &group("watched")))?;

    let bin = std::env::var_os("WORKFLOW_OPERATOR_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workflow_e2e::target_dir().join("debug/workflow-operator"));
    let mut ui = Command::new(&bin)
        .args(["ui", "-n", &ns, "--no-open"])
        .env("KUBECONFIG", cluster.kubeconfig())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut url = String::new();
    BufReader::new(ui.stdout.take().expect("stdout")).read_line(&mut url)?;
    let browser = Browser::start();
    browser.goto(url.trim());
    browser.goto(&format!(
        "{}#/g/{ns}/watched",
        url.trim().split("?").next().unwrap_or_default()
    ));

    let status_params = PatchParams::default();
    let mut latencies = Vec::with_capacity(changes);
    for i in 0..changes {
        let message = format!("change-{i}");
        rt.block_on(api.patch_status("watched", &status_params, &Patch::Merge(status(&message))))?;
        let accepted = now_ms();
        latencies.push(drawn_at(&browser, &message) - accepted);
    }
    latencies.sort_by(f64::total_cmp);
    println!(
        "status change -> page drawn, {changes} changes one after another: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or_default()
    );

    // Many groups listed.
    let started = now_ms();
    let names: Vec<String> = (0..groups).map(|i| format!("g-{i:04}")).collect();
    for chunk in names.chunks(50) {
        rt.block_on(futures::future::try_join_all(chunk.iter().map(|n| {
            let api = api.clone();
            let g = group(n);
            async move { api.create(&PostParams::default(), &g).await }
        })))?;
    }
    let created = now_ms();
    browser.goto(&format!(
        "{}#/",
        url.trim().split("?").next().unwrap_or_default()
    ));
    browser.wait_for(
        "every group listed",
        &format!(
            "return document.querySelectorAll('tr.group-row').length >= {}",
            groups + 1
        ),
        Duration::from_secs(120),
    );
    let listed = now_ms();
    rt.block_on(api.patch_status(
        "g-0000",
        &status_params,
        &Patch::Merge(status("listed-change")),
    ))?;
    let accepted = now_ms();
    let on_list = drawn_at(&browser, "listed-change") - accepted;
    let heap = browser.js("return performance.memory ? performance.memory.usedJSHeapSize : null");
    println!(
        "{groups} groups: created in {:.1} s, all listed {:.1} s after the last create; a change seen on the list of all in {on_list:.0} ms",
        (created - started) / 1000.0,
        (listed - created) / 1000.0,
    );
    println!(
        "the view with {} groups: RSS {:.1} MiB now, {:.1} MiB at peak; the page's JS heap {:.1} MiB",
        groups + 1,
        kib_of(ui.id(), "VmRSS:") as f64 / 1024.0,
        kib_of(ui.id(), "VmHWM:") as f64 / 1024.0,
        heap.as_f64().unwrap_or_default() / 1_048_576.0
    );
    drop(browser);
    let _ = ui.kill();
    cluster.kubectl_ok(&["delete", "namespace", &ns, "--wait=false"]);
    Ok(())
}

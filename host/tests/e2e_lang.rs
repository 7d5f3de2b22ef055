//! End to end, on the real node: a workflow type written in Python and one written in
//! JavaScript, each made as their authors would (`plugin new --lang`, componentize-py and
//! ComponentizeJS installed by `tests/oci/lang-tools.sh`, `plugin push` to a registry on
//! loopback), loaded by the operator from that registry, and judging the per-target evidence
//! of their steps on target hosts of the test's own: a host that is down is within one
//! group's failure budget and fails the other, named.

#[path = "support/operator.rs"]
mod operator;
#[path = "support/registry.rs"]
mod registry;
#[path = "support/target_hosts.rs"]
mod target_hosts;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use operator::*;
use registry::Registry;
use serde_json::{Value, json};
use target_hosts::*;
use workflow_e2e::repo_root;
use workflow_operator::cli::scaffold::{COMPONENTIZE_JS, COMPONENTIZE_PY, ROLLDOWN};

fn operator_cli(args: &[&str], dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run workflow-operator");
    assert!(
        out.status.success(),
        "workflow-operator {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run(what: &str, command: &mut Command) {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The toolchains, as `tests/oci/lang-tools.sh` installs them: (virtualenv bin, node_modules).
fn lang_tools() -> (PathBuf, PathBuf) {
    let out = Command::new("bash")
        .arg(repo_root().join("tests/oci/lang-tools.sh"))
        .args([COMPONENTIZE_PY, COMPONENTIZE_JS, ROLLDOWN])
        .output()
        .expect("run lang-tools.sh");
    assert!(
        out.status.success(),
        "lang-tools.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines().rev();
    let node_modules = PathBuf::from(lines.next().expect("node_modules"));
    let venv_bin = PathBuf::from(lines.next().expect("the virtualenv"));
    (venv_bin, node_modules)
}

/// `plugin new NAME --lang LANG`, built, pushed: the reference pinned to its digest.
fn made_and_pushed(lang: &str, name: &str, work: &Path, registry: &str) -> String {
    let (venv_bin, node_modules) = lang_tools();
    operator_cli(&["plugin", "new", name, "--lang", lang], work);
    let dir = work.join(name);
    let started = Instant::now();
    match lang {
        "python" => {
            let path = format!(
                "{}:{}",
                venv_bin.display(),
                std::env::var("PATH").unwrap_or_default()
            );
            run(
                "build.sh",
                Command::new(dir.join("build.sh")).env("PATH", path),
            );
        }
        "js" => {
            std::os::unix::fs::symlink(&node_modules, dir.join("node_modules"))
                .expect("link node_modules");
            run(
                "node build.mjs",
                Command::new("node").arg("build.mjs").current_dir(&dir),
            );
        }
        _ => unreachable!(),
    }
    let wasm = dir.join(format!("{name}.wasm"));
    let size = std::fs::metadata(&wasm).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "{lang}: built {name}.wasm ({size} bytes) in {} ms",
        started.elapsed().as_millis()
    );
    let pinned = operator_cli(
        &[
            "plugin",
            "push",
            &wasm.display().to_string(),
            &format!("oci://{registry}/plugins/{name}"),
            "--insecure",
        ],
        work,
    );
    pinned.trim().to_string()
}

fn group(name: &str, workflow_type: &str, max_failed: u32, targets: Value) -> String {
    json!({
        "apiVersion": "workflow.rxg456.cn/v1alpha1",
        "kind": "WorkflowGroup",
        "metadata": {"name": name},
        "spec": {
            "type": "languages",
            "clusterName": "test-cluster",
            "workflowSteps": [workflow_type],
            "targets": targets,
            "params": {workflow_type: {
                "command": "test -d /etc && echo checked $WORKFLOW_TARGET_NAME",
                "timeoutSeconds": 120,
                "maxFailedTargets": max_failed,
            }},
            "podTemplate": workflow_e2e::real_node_placement(),
        }
    })
    .to_string()
}

#[test]
fn a_python_type_and_a_javascript_type_from_a_registry_judge_each_targets_evidence_on_the_real_node()
 {
    let cluster = cluster();
    cluster.require_real_node();
    import_step_image();
    let registry = Registry::start();
    let work = tempfile::tempdir().expect("a directory for the projects");
    let python = made_and_pushed("python", "py-run", work.path(), &registry.addr);
    let js = made_and_pushed("js", "js-run", work.path(), &registry.addr);

    let hosts = TargetHosts::start(3);
    let ns = cluster.fresh_namespace("e2e-lang");
    hosts.secret(cluster, &ns, "workflow-ssh", &hosts.file("ssh-privatekey"));
    let no_dir = tempfile::tempdir().expect("empty plugin directory");
    let pull_cache = tempfile::tempdir().expect("pull cache");
    let mut operator = Operator::start_with(
        &ns,
        no_dir.path(),
        &[
            "--plugin-insecure-registries",
            &registry.addr,
            "--plugin-pull-cache",
            &pull_cache.path().display().to_string(),
        ],
    );
    for (name, reference) in [("py-run", &python), ("js-run", &js)] {
        let configmap = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"workflow.rxg456.cn/plugin": "true"}},
            "data": {format!("{name}.wasm"): reference},
        });
        cluster.apply_yaml_in(&ns, &configmap.to_string());
    }
    let named = Instant::now();
    let log = operator.log();
    workflow_e2e::poll_until(
        Duration::from_millis(200),
        Duration::from_secs(300),
        "both types to be pulled, compiled and served",
        || {
            let plugins = served_plugins(&mut operator);
            (served_digest(&plugins, "py-run").is_some()
                && served_digest(&plugins, "js-run").is_some())
            .then_some(())
            .ok_or(plugins.to_string())
        },
        |last| format!("{last}\n{log}"),
    );
    eprintln!(
        "both served {} ms after their ConfigMaps",
        named.elapsed().as_millis()
    );

    // host-3 is down: within a budget of one, and a failure, named, with none.
    hosts.stop(3);
    for (workflow_type, short) in [("py-run", "py"), ("js-run", "js")] {
        cluster.apply_yaml_in(
            &ns,
            &group(
                &format!("{short}-budget"),
                workflow_type,
                1,
                hosts.targets(&[1, 2, 3]),
            ),
        );
        cluster.apply_yaml_in(
            &ns,
            &group(
                &format!("{short}-strict"),
                workflow_type,
                0,
                hosts.targets(&[1, 3]),
            ),
        );
    }
    for short in ["py", "js"] {
        wait_group_phase(&ns, &format!("{short}-budget"), "Completed", &mut operator);
        wait_group_phase(&ns, &format!("{short}-strict"), "Failed", &mut operator);
        let message = condition_message(&get(&ns, &format!("workflowgroup/{short}-strict")));
        assert!(
            message.contains(
                "1 of 2 targets failed (at most 0 may fail): host-3 unreachable: connect"
            ),
            "{short}: the type's verdict names the host that is down: {message}"
        );
        let pods = list(
            &ns,
            "pods",
            Some(&format!("workflow.rxg456.cn/group-name={short}-budget")),
        );
        let report = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            report.starts_with("targets 3: 2 ok, 0 failed, 1 unreachable"),
            "{short}: the step acted on each target: {report}"
        );
    }
    operator.assert_running();
}

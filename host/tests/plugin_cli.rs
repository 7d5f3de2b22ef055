//! `workflow-operator plugin inspect|render|eval`, run as a plugin author runs them.

mod plugin_support;

use std::path::PathBuf;
use std::process::{Command, Output};

use plugin_support::{builtin_path, test_plugin_path};
use workflow_e2e::repo_root;

fn sample_group() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/workflowgroup-sample.yaml")
}

fn plugin_cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .arg("plugin")
        .args(args)
        .output()
        .expect("run workflow-operator")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Paths as arguments, checking first that `make plugins` ran.
fn arg(path: PathBuf) -> String {
    assert!(
        path.exists(),
        "{} is missing; run `make plugins` first",
        path.display()
    );
    path.display().to_string()
}

/// A failure is a non-zero exit with one line on stderr.
fn assert_fails_with_one_line(output: &Output, expected: &str) {
    assert!(
        !output.status.success(),
        "expected a failure, got {output:?}"
    );
    let err = stderr(output);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "stderr must be one line: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(
        lines[0].contains(expected),
        "expected {expected:?} in {err}"
    );
}

#[test]
fn inspect_prints_type_versions_digest_size_and_schema() {
    let output = plugin_cli(&["inspect", &arg(builtin_path("at"))]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains("type:             at"), "{out}");
    assert!(
        out.contains("contract version: workflow:plugin@0.3.0"),
        "{out}"
    );
    assert!(out.contains("digest:           sha256:"), "{out}");
    assert!(out.contains("size:"), "{out}");
    assert!(out.contains("\"schedule\""), "the params schema: {out}");

    // A plugin built for the older contract says so.
    let output = plugin_cli(&["inspect", &arg(test_plugin_path("contract-v0-1"))]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("contract version: workflow:plugin@0.1.0"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn inspect_says_why_a_plugin_cannot_load_in_one_line() {
    let output = plugin_cli(&["inspect", &arg(test_plugin_path("wrong-contract"))]);
    assert_fails_with_one_line(&output, "workflow:plugin@0.3.0");
    let dir = tempfile::tempdir().expect("temp dir");
    let garbage = dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"garbage").expect("write");
    let output = plugin_cli(&["inspect", &garbage.display().to_string()]);
    assert_fails_with_one_line(&output, "not a WebAssembly component");
}

#[test]
fn render_prints_the_workflow_the_operator_would_create() {
    let output = plugin_cli(&[
        "render",
        &arg(builtin_path("pre-check")),
        "--group",
        &arg(sample_group()),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let workflow: serde_json::Value = serde_saphyr::from_str(&stdout(&output)).expect("YAML");
    assert_eq!(workflow["kind"].as_str(), Some("Workflow"));
    assert_eq!(workflow["spec"]["type"].as_str(), Some("pre-check"));
    let steps = workflow["spec"]["steps"].as_array().expect("steps");
    let names: Vec<&str> = steps.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["validate-nodes", "check-network"]);
    assert_eq!(steps[1]["dependsOn"][0].as_str(), Some("validate-nodes"));
    assert_eq!(steps[0]["command"].as_str(), Some("workflow-runner"));
    let script = steps[0]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "WORKFLOW_SSH_COMMAND")
        .and_then(|e| e["value"].as_str())
        .unwrap_or_default();
    assert!(script.contains("# validate-nodes"), "{script}");
}

#[test]
fn render_of_a_type_the_group_does_not_run_fails() {
    let output = plugin_cli(&[
        "render",
        &arg(builtin_path("at")),
        "--group",
        &arg(sample_group()),
    ]);
    assert_fails_with_one_line(&output, "workflowSteps");
}

#[test]
fn eval_prints_the_verdict() {
    let pre_check = arg(builtin_path("pre-check"));
    let group = arg(sample_group());
    let eval = |exit_code: &str, message: &str| {
        plugin_cli(&[
            "eval",
            &pre_check,
            "--group",
            &group,
            "--step",
            "check-network",
            "--exit-code",
            exit_code,
            "--message",
            message,
        ])
    };
    let output = eval("0", "");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "completed");
    let output = eval("0", "UNREACHABLE node-2: no route to host");
    assert_eq!(
        output.status.code(),
        Some(3),
        "a failed verdict exits 3: {output:?}"
    );
    let out = stdout(&output);
    assert!(
        out.starts_with("failed: ") && out.contains("node-2"),
        "{out}"
    );
    let output = eval("3", "boom");
    assert_eq!(output.status.code(), Some(3));
    assert!(
        stdout(&output).starts_with("failed: "),
        "{}",
        stdout(&output)
    );
}

#[test]
fn eval_of_an_unknown_step_lists_the_steps() {
    let output = plugin_cli(&[
        "eval",
        &arg(builtin_path("pre-check")),
        "--group",
        &arg(sample_group()),
        "--step",
        "nope",
        "--exit-code",
        "0",
    ]);
    assert_fails_with_one_line(&output, "validate-nodes, check-network");
}

#[test]
fn eval_escapes_control_characters_in_the_plugins_reason() {
    let output = plugin_cli(&[
        "eval",
        &arg(builtin_path("pre-check")),
        "--group",
        &arg(sample_group()),
        "--step",
        "check-network",
        "--exit-code",
        "1",
        "--message",
        "disk\n\u{1b}[31mfull",
    ]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let out = stdout(&output);
    assert_eq!(out.lines().count(), 1, "one line: {out:?}");
    assert!(!out.trim_end().chars().any(char::is_control), "{out:?}");
    assert!(out.contains("disk\\n\\u{1b}[31mfull"), "{out:?}");
}

/// A group file of `types` with `params` (YAML under `spec.params`, indented by 4).
fn group_file(types: &[&str], params: &str) -> tempfile::NamedTempFile {
    let steps: String = types.iter().map(|t| format!("  - {t}\n")).collect();
    let yaml = format!(
        "apiVersion: workflow.rxg456.cn/v1alpha1\nkind: WorkflowGroup\nmetadata:\n  name: g\nspec:\n  type: t\n  clusterName: c\n  workflowSteps:\n{steps}  targets:\n  - {{name: n1, ip: 192.168.1.101, role: Master}}\n  params:\n{params}"
    );
    let mut file = tempfile::NamedTempFile::new().expect("temporary group file");
    std::io::Write::write_all(&mut file, yaml.as_bytes()).expect("write the group");
    file
}

#[test]
fn render_and_eval_refuse_params_the_operator_would_refuse() {
    let group = group_file(
        &["at"],
        "    at:\n      schedule: not-a-time\n      command: date\n",
    );
    let group = arg(group.path().to_path_buf());
    let at = arg(builtin_path("at"));
    let output = plugin_cli(&["render", &at, "--group", &group]);
    assert_fails_with_one_line(&output, "invalid parameters for workflow type at");
    let output = plugin_cli(&[
        "eval",
        &at,
        "--group",
        &group,
        "--step",
        "run",
        "--exit-code",
        "0",
    ]);
    assert_fails_with_one_line(&output, "invalid parameters for workflow type at");
}

#[test]
fn render_refuses_a_group_whose_target_name_the_api_server_would_refuse() {
    let group = group_file(&["pre-check"], "    pre-check: {}\n");
    let text = std::fs::read_to_string(group.path())
        .expect("the group")
        .replace("name: n1,", "name: \"n1;reboot\",");
    std::fs::write(group.path(), text).expect("write the group");
    let output = plugin_cli(&[
        "render",
        &arg(builtin_path("pre-check")),
        "--group",
        &arg(group.path().to_path_buf()),
    ]);
    assert_fails_with_one_line(
        &output,
        "spec.targets[0].name: \"n1;reboot\" is not a valid DNS-1123 subdomain",
    );
}

#[test]
fn deeply_nested_params_fail_fast_with_one_line() {
    let depth = 100_000;
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let group = group_file(
        &["pre-check"],
        &format!("    pre-check: {{deep: {nested}}}\n"),
    );
    let started = std::time::Instant::now();
    let output = plugin_cli(&[
        "render",
        &arg(builtin_path("pre-check")),
        "--group",
        &arg(group.path().to_path_buf()),
    ]);
    assert!(!output.status.success(), "{output:?}");
    assert_eq!(
        stderr(&output).trim().lines().count(),
        1,
        "{}",
        stderr(&output)
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

/// Runs cargo in `dir` with the workspace's target directory: the scaffolded crate builds there
/// too, so its dependencies (compiled for the built-in plugins already) are not built again.
fn cargo_in(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", workflow_e2e::target_dir())
        .output()
        .expect("run cargo")
}

#[test]
fn plugin_new_scaffolds_a_crate_that_builds_passes_its_tests_and_renders() {
    let dir = tempfile::tempdir().expect("temp dir");
    let krate = dir.path().join("scaffold-check");
    let krate_arg = krate.display().to_string();
    // Run from the checkout: the SDK is found there, as it is for an author in a checkout.
    let output = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["plugin", "new", "scaffold-check", "--path", &krate_arg])
        .current_dir(repo_root())
        .output()
        .expect("run workflow-operator");
    assert!(output.status.success(), "{}", stderr(&output));
    let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).expect("Cargo.toml");
    let sdk = repo_root()
        .join("plugin-sdk")
        .canonicalize()
        .expect("plugin-sdk");
    assert!(
        manifest.contains(&format!(
            "workflow-plugin-sdk = {{ path = \"{}\" }}",
            sdk.display()
        )),
        "{manifest}"
    );
    let config = std::fs::read_to_string(krate.join(".cargo/config.toml")).expect("config");
    assert!(config.contains("link-arg=-zstack-size=65536"), "{config}");

    // The workspace's lock file pins the same dependency versions the workspace built.
    std::fs::copy(repo_root().join("Cargo.lock"), krate.join("Cargo.lock")).expect("lock file");
    let build = cargo_in(
        &krate,
        &[
            "build",
            "--offline",
            "--profile",
            "plugin",
            "--target",
            "wasm32-wasip2",
        ],
    );
    assert!(build.status.success(), "{}", stderr(&build));
    let wasm = workflow_e2e::target_dir().join("wasm32-wasip2/plugin/scaffold_check.wasm");
    let wasm = arg(wasm);

    // The group.yaml it comes with renders: the default command on the targets, and the
    // renamed `timeoutSeconds` param given in the group.
    let group = arg(krate.join("group.yaml"));
    let output = plugin_cli(&["render", &wasm, "--group", &group]);
    assert!(output.status.success(), "{}", stderr(&output));
    let workflow: serde_json::Value = serde_saphyr::from_str(&stdout(&output)).expect("YAML");
    assert_eq!(workflow["spec"]["type"].as_str(), Some("scaffold-check"));
    let step = &workflow["spec"]["steps"][0];
    assert_eq!(step["command"].as_str(), Some("workflow-runner"));
    assert_eq!(step["env"][0]["value"].as_str(), Some("uname -a"));
    assert_eq!(step["timeoutSeconds"].as_u64(), Some(60));

    // Its success logic judges the runner's report per target, with the group's params.
    let eval = |message: &str| {
        plugin_cli(&[
            "eval",
            &wasm,
            "--group",
            &group,
            "--step",
            "run",
            "--exit-code",
            "1",
            "--message",
            message,
        ])
    };
    let output = eval(
        "targets 2: 1 ok, 1 failed, 0 unreachable\nFAIL node-2: exit code 1 after 0.1 s: no\n",
    );
    assert_eq!(
        stdout(&output).trim(),
        "failed: 1 of 2 targets failed: node-2: exit code 1 after 0.1 s: no",
        "{}",
        stderr(&output)
    );

    // Its `validate` runs as the operator runs it.
    let zero = group_file(
        &["scaffold-check"],
        "    scaffold-check:\n      timeoutSeconds: 0\n",
    );
    let output = plugin_cli(&["render", &wasm, "--group", &arg(zero.path().to_path_buf())]);
    assert_fails_with_one_line(&output, "`timeoutSeconds`: must be at least 1");

    let test = cargo_in(&krate, &["test", "--offline"]);
    assert!(test.status.success(), "{}", stderr(&test));
    assert!(
        stdout(&test).contains("test result: ok. 5 passed"),
        "{}",
        stdout(&test)
    );
}

#[test]
fn plugin_new_refuses_a_name_that_is_not_a_dns_label_and_a_directory_that_is_not_empty() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sdk = repo_root().join("plugin-sdk").display().to_string();
    let path = dir.path().join("x").display().to_string();
    let output = plugin_cli(&["new", "Disk_Check", "--path", &path, "--sdk-path", &sdk]);
    assert_fails_with_one_line(&output, "\"Disk_Check\" is not a valid workflow type name");
    assert!(!dir.path().join("x").exists(), "nothing is written");

    std::fs::write(dir.path().join("keep.txt"), "mine").expect("write");
    let path = dir.path().display().to_string();
    let output = plugin_cli(&["new", "disk-check", "--path", &path, "--sdk-path", &sdk]);
    assert_fails_with_one_line(&output, "is not empty");
    assert_eq!(
        std::fs::read_dir(dir.path()).map(Iterator::count).ok(),
        Some(1),
        "nothing is written"
    );

    let output = plugin_cli(&[
        "new",
        "disk-check",
        "--path",
        &format!("{path}/new"),
        "--sdk-path",
        "/nonexistent",
    ]);
    assert_fails_with_one_line(&output, "holds no workflow-plugin-sdk");
}

#[test]
fn plan_prints_the_waves_steps_and_window_of_a_group_and_needs_no_cluster() {
    let plugins = tempfile::tempdir().expect("a plugin directory");
    for t in ["pre-check", "post-check"] {
        std::fs::copy(
            arg(builtin_path(t)),
            plugins.path().join(format!("{t}.wasm")),
        )
        .expect("copy the plugin");
    }
    let group = repo_root().join("examples/workflowgroup-maintenance.yaml");
    let output = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["plan", "-f"])
        .arg(&group)
        .arg("--plugins")
        .arg(plugins.path())
        .env("KUBECONFIG", plugins.path().join("no-such-kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("run workflow-operator plan");
    assert!(output.status.success(), "{}", stderr(&output));
    let shown = stdout(&output);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines[1], "rest between waves: 10m", "{shown}");
    assert!(
        lines[2].starts_with("window: Mon,Tue,Wed,Thu 22:00-04:00 Europe/Berlin: "),
        "{shown}"
    );
    assert_eq!(lines[3], "wave 1: node-1 (192.168.1.121)", "{shown}");
    // Each type's steps as its plugin templates them, dependencies after `<-`.
    assert!(
        lines[4].starts_with("  pre-check: ") && lines[4].contains(" <- "),
        "{shown}"
    );
    assert!(lines[5].starts_with("  post-check: "), "{shown}");
    assert!(
        shown.ends_with("\n") && lines.last().unwrap().starts_with("locks: not checked: "),
        "{shown}"
    );
}

#[test]
fn plan_of_a_group_whose_window_never_opens_fails_naming_the_field() {
    let file = tempfile::NamedTempFile::new().expect("a file");
    let text = std::fs::read_to_string(repo_root().join("examples/workflowgroup-maintenance.yaml"))
        .expect("the example")
        .replace("end: \"04:00\"", "end: \"22:00\"");
    std::fs::write(file.path(), text).expect("write the group");
    let output = Command::new(env!("CARGO_BIN_EXE_workflow-operator"))
        .args(["plan", "-f"])
        .arg(file.path())
        .output()
        .expect("run workflow-operator plan");
    assert_fails_with_one_line(&output, "would not run: spec.rollout.window.end: ");
}

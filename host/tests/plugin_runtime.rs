//! The plugin runtime driven with the built plugins (`make plugins`): the four built-in types,
//! and hostile plugins that must each be contained with a clear error.

mod plugin_support;

use std::time::Instant;

use plugin_support::{builtin, load_builtin, runtime, sample_context, test_plugin};
use prometheus_client::registry::Registry;
use serde_json::json;
use workflow_model::TargetReport;
use workflow_operator::plugin::{
    Gate, PluginError, PluginMetrics, Runtime, RuntimeConfig, Step, StepOutcome, Verdict,
};

fn step(name: &str, description: &str, command: &str, depends_on: &[&str]) -> Step {
    Step {
        name: name.into(),
        description: description.into(),
        command: command.into(),
        depends_on: depends_on.iter().map(|s| s.to_string()).collect(),
        ..Step::default()
    }
}

fn outcome(exit_code: i32, message: &str) -> StepOutcome {
    StepOutcome {
        succeeded: exit_code == 0,
        exit_code: Some(exit_code),
        message: message.into(),
        attempt: 1,
        duration_ms: 1200,
        targets: None,
    }
}

/// A good plugin still answers: run after every hostile call.
fn good_plugin_still_works() {
    let steps = load_builtin("pre-check")
        .template(&sample_context(json!({}), 0))
        .expect("pre-check templates after a hostile call");
    assert_eq!(steps.len(), 2);
}

#[test]
fn pre_check_describes_itself_and_templates_the_seeds_steps() {
    let plugin = load_builtin("pre-check");
    assert_eq!(plugin.info().type_name, "pre-check");
    assert!(!plugin.info().version.is_empty());
    assert_eq!(plugin.digest().len(), 64);
    assert!(
        plugin.size() > 0 && plugin.size() < 1 << 20,
        "size {}",
        plugin.size()
    );
    let steps = plugin
        .template(&sample_context(json!({}), 1_700_000_000))
        .expect("template");
    assert_eq!(
        shape(&steps),
        [
            ("validate-nodes", "验证节点配置", vec![]),
            ("check-network", "检查网络连接", vec!["validate-nodes"]),
        ]
    );
    assert_runs_on_targets(&steps);
}

/// Name, description and dependencies of each step.
fn shape(steps: &[Step]) -> Vec<(&str, &str, Vec<&str>)> {
    steps
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.description.as_str(),
                s.depends_on.iter().map(String::as_str).collect(),
            )
        })
        .collect()
}

/// Each step runs `workflow-runner` with a script for the targets.
fn assert_runs_on_targets(steps: &[Step]) {
    for s in steps {
        assert_eq!(s.command, "workflow-runner", "{}", s.name);
        let script = s
            .env
            .iter()
            .find(|e| e.name == "WORKFLOW_SSH_COMMAND")
            .map(|e| e.value.as_str())
            .unwrap_or_default();
        assert!(
            script.contains(&format!("# {}", s.name)),
            "{}'s script: {script}",
            s.name
        );
    }
}

#[test]
fn setup_and_post_check_template_the_seeds_steps() {
    let ctx = sample_context(json!({}), 1_700_000_000);
    let setup = load_builtin("setup")
        .template(&ctx)
        .expect("setup template");
    assert_eq!(
        shape(&setup),
        [
            ("install-packages", "安装必要软件包", vec![]),
            ("configure-nodes", "配置节点", vec!["install-packages"]),
        ]
    );
    assert_runs_on_targets(&setup);
    let post = load_builtin("post-check")
        .template(&ctx)
        .expect("post-check template");
    assert_eq!(
        shape(&post),
        [("verify-installation", "验证安装结果", vec![])]
    );
    assert_runs_on_targets(&post);
}

#[test]
fn check_step_exiting_zero_with_an_unreachable_target_fails_naming_it() {
    let plugin = load_builtin("pre-check");
    let check = step(
        "check-network",
        "检查网络连接",
        "check-network.sh",
        &["validate-nodes"],
    );
    let verdict = plugin
        .evaluate(
            &check,
            &outcome(0, "OK node-1\nUNREACHABLE node-2: no route to host\n"),
            &sample_context(json!({}), 0),
        )
        .expect("evaluate");
    match verdict {
        Verdict::Failed(reason) => assert!(reason.contains("node-2"), "reason: {reason}"),
        other => panic!("expected Failed naming node-2, got {other:?}"),
    }
    assert_eq!(
        plugin
            .evaluate(
                &check,
                &outcome(0, "OK node-1\nOK node-2\n"),
                &sample_context(json!({}), 0)
            )
            .expect("evaluate"),
        Verdict::Completed
    );
    match plugin
        .evaluate(&check, &outcome(2, "boom"), &sample_context(json!({}), 0))
        .expect("evaluate")
    {
        Verdict::Failed(reason) => assert!(reason.contains("exit code 2"), "reason: {reason}"),
        other => panic!("expected Failed with the exit code, got {other:?}"),
    }
}

#[test]
fn setup_asks_for_a_retry_on_a_temporary_failure() {
    let plugin = load_builtin("setup");
    let install = step(
        "install-packages",
        "安装必要软件包",
        "install-packages.sh",
        &[],
    );
    assert!(matches!(
        plugin
            .evaluate(
                &install,
                &outcome(75, "mirror busy"),
                &sample_context(json!({}), 0)
            )
            .expect("evaluate"),
        Verdict::Retry(_)
    ));
    assert_eq!(
        plugin
            .evaluate(&install, &outcome(0, ""), &sample_context(json!({}), 0))
            .expect("evaluate"),
        Verdict::Completed
    );
}

#[test]
fn at_gates_its_step_until_the_schedule() {
    let plugin = load_builtin("at");
    let params = json!({"schedule": "2026-01-30T21:04:00Z", "command": "echo QAQ"});
    plugin.validate(&params).expect("valid params");
    let schedule = 1_769_807_040; // 2026-01-30T21:04:00Z
    let before = sample_context(params.clone(), schedule - 60);
    let steps = plugin.template(&before).expect("template");
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].command, "echo QAQ");
    assert_eq!(
        plugin.gate(&steps[0], &before).expect("gate"),
        Gate::NotBefore(schedule)
    );
    let after = sample_context(params, schedule + 1);
    assert_eq!(
        plugin.gate(&steps[0], &after).expect("gate"),
        Gate::StartNow
    );
    assert_eq!(
        plugin
            .evaluate(&steps[0], &outcome(0, "QAQ"), &sample_context(json!({}), 0))
            .expect("evaluate"),
        Verdict::Completed
    );
}

#[test]
fn at_rejects_a_schedule_that_does_not_parse_naming_the_field() {
    let plugin = load_builtin("at");
    let err = plugin
        .validate(&json!({"schedule": "tomorrow", "command": "echo QAQ"}))
        .expect_err("invalid schedule");
    assert!(matches!(err, PluginError::InvalidParams { .. }), "{err:?}");
    assert!(err.to_string().contains("schedule"), "{err}");
}

#[test]
fn a_word_of_the_params_that_is_not_a_word_of_its_kind_is_refused_naming_the_field_and_the_rule() {
    let cases = [
        (
            "setup",
            json!({"packages": ["chrony", "curl-"]}),
            "invalid params at `packages[1]`: \"curl-\" is not a valid package name: it ends in \
             '-' or in a single '+', which apt reads as \"remove\" or \"install\"",
        ),
        (
            "post-check",
            json!({"files": ["/etc/*.conf"]}),
            "invalid params at `files[0]`: \"/etc/*.conf\" is not a valid path: it holds '*', \
             '?', '[' or ']', which a shell or a package manager reads as a pattern",
        ),
        (
            "pre-check",
            json!({"requiredCommands": ["-h"]}),
            "invalid params at `requiredCommands[0]`: \"-h\" is not a valid command name: it \
             starts with '-', which a program reads as an option",
        ),
        (
            "decommission",
            json!({"ssh": {"roles": ["Worker,Master"]}}),
            "invalid params at `ssh.roles[0]`: \"Worker,Master\" is not a valid role",
        ),
    ];
    for (type_name, params, says) in cases {
        let err = load_builtin(type_name)
            .validate(&params)
            .expect_err("a malformed word");
        assert!(matches!(err, PluginError::InvalidParams { .. }), "{err:?}");
        assert!(err.to_string().contains(says), "{type_name}: {err}");
    }
}

#[test]
fn params_are_checked_against_the_declared_schema_first_naming_the_path() {
    let plugin = load_builtin("at");
    let err = plugin
        .validate(&json!({"schedule": 5, "command": "echo QAQ"}))
        .expect_err("schedule of the wrong type");
    assert!(matches!(err, PluginError::InvalidParams { .. }), "{err:?}");
    assert!(err.to_string().contains("/schedule"), "{err}");
    let err = plugin
        .validate(&json!({"command": "x"}))
        .expect_err("missing field");
    assert!(err.to_string().contains("schedule"), "{err}");
}

#[test]
fn loading_the_same_bytes_twice_reuses_the_compilation() {
    let bytes = builtin("post-check");
    let first = runtime().load(&bytes, "a.wasm").expect("load");
    let started = Instant::now();
    let second = runtime().load(&bytes, "b.wasm").expect("load again");
    assert!(
        started.elapsed().as_millis() < 50,
        "cached load took {:?}",
        started.elapsed()
    );
    assert_eq!(first.digest(), second.digest());
    assert_eq!(second.origin(), "b.wasm");
}

fn hostile(mode: &str) -> Result<Vec<Step>, PluginError> {
    let plugin = runtime()
        .load(&test_plugin("hostile"), "hostile.wasm")
        .expect("hostile loads");
    plugin.template(&sample_context(json!({ "mode": mode }), 0))
}

#[test]
fn hostile_ok_mode_templates() {
    hostile("ok").expect("ok mode works");
}

#[test]
fn an_infinite_loop_is_stopped_at_the_time_limit() {
    let started = Instant::now();
    let err = hostile("loop").expect_err("loop must time out");
    let elapsed = started.elapsed();
    assert!(matches!(err, PluginError::Timeout { .. }), "{err:?}");
    assert!(
        err.to_string().contains("exceeded its 1s time limit"),
        "{err}"
    );
    assert!(elapsed.as_millis() < 3000, "took {elapsed:?}");
    good_plugin_still_works();
}

#[test]
fn a_memory_bomb_is_stopped_at_the_memory_cap() {
    let err = hostile("oom").expect_err("oom must fail");
    assert!(
        matches!(err, PluginError::MemoryExhausted { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("64 MiB"), "{err}");
    good_plugin_still_works();
}

#[test]
fn deep_recursion_is_a_trap() {
    let err = hostile("recurse").expect_err("recursion must fail");
    assert!(
        matches!(
            err,
            PluginError::Trap { .. } | PluginError::MemoryExhausted { .. }
        ),
        "{err:?}"
    );
    good_plugin_still_works();
}

#[test]
fn a_panic_is_a_trap_with_its_message() {
    let err = hostile("trap").expect_err("trap must fail");
    let PluginError::Trap { call, message, .. } = &err else {
        panic!("expected a trap, got {err:?}");
    };
    assert_eq!(*call, "template");
    assert!(message.contains("unreachable"), "{message}");
    assert!(
        message.contains("traps on purpose in template"),
        "the panic message: {message}"
    );
    assert!(err.to_string().contains("hostile"), "{err}");
    assert!(
        !message.contains("RUST_BACKTRACE"),
        "the backtrace hint a plugin cannot follow is left out: {message}"
    );
    good_plugin_still_works();
}

/// Every import costs each call's instantiation: the SDK takes stdout and stderr (and the
/// panic handler's `getenv`) off WASI, so a plugin built with it imports only the contract.
#[test]
fn plugins_built_with_the_sdk_import_only_the_contract() {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    let engine = wasmtime::Engine::new(&config).expect("engine");
    for name in ["pre-check", "setup", "post-check", "at", "decommission"] {
        let component =
            wasmtime::component::Component::new(&engine, builtin(name)).expect("component");
        let imports: Vec<String> = component
            .component_type()
            .imports(&engine)
            .map(|(name, _)| name.to_string())
            .collect();
        assert_eq!(
            imports,
            [
                "workflow:plugin/host-log@0.3.0",
                "workflow:plugin/types@0.3.0"
            ],
            "{name} imports"
        );
    }
}

#[test]
fn huge_output_is_refused() {
    let err = hostile("huge").expect_err("huge output must fail");
    assert!(
        matches!(
            err,
            PluginError::InvalidOutput { .. } | PluginError::MemoryExhausted { .. }
        ),
        "{err:?}"
    );
    good_plugin_still_works();
}

#[test]
fn duplicate_step_names_are_invalid_output() {
    let err = hostile("duplicate").expect_err("duplicate names");
    assert!(matches!(err, PluginError::InvalidOutput { .. }), "{err:?}");
    assert!(err.to_string().contains("more than once"), "{err}");
}

#[test]
fn a_cyclic_step_graph_is_invalid_output() {
    for mode in ["bad-graph", "cycle"] {
        let err = hostile(mode).expect_err("cycle");
        assert!(matches!(err, PluginError::InvalidOutput { .. }), "{err:?}");
        assert!(err.to_string().contains("cycle"), "{mode}: {err}");
    }
}

#[test]
fn a_string_too_long_is_invalid_output() {
    let err = hostile("huge-command").expect_err("huge command");
    assert!(matches!(err, PluginError::InvalidOutput { .. }), "{err:?}");
    assert!(
        err.to_string().contains("command has 10485760 bytes"),
        "{err}"
    );
    good_plugin_still_works();
}

#[test]
fn a_template_error_is_reported_with_the_plugins_message() {
    let err = hostile("error").expect_err("error");
    assert!(matches!(err, PluginError::TemplateFailed { .. }), "{err:?}");
    assert!(err.to_string().contains("hostile template error"), "{err}");
}

#[test]
fn a_log_flood_is_bounded_and_the_call_still_succeeds() {
    let started = Instant::now();
    let steps = hostile("log-flood").expect("log flood is not an error");
    assert_eq!(steps.len(), 1);
    assert!(
        started.elapsed().as_secs() < 5,
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn gate_and_evaluate_are_contained_too() {
    let plugin = runtime()
        .load(&test_plugin("hostile"), "hostile.wasm")
        .expect("hostile loads");
    let ctx = sample_context(json!({}), 0);
    let named = |name: &str| Step {
        name: name.into(),
        command: "true".into(),
        ..Step::default()
    };
    let err = plugin.gate(&named("loop"), &ctx).expect_err("gate loops");
    assert!(
        matches!(err, PluginError::Timeout { call: "gate", .. }),
        "{err:?}"
    );
    let err = plugin
        .evaluate(
            &named("trap"),
            &outcome(0, ""),
            &sample_context(json!({}), 0),
        )
        .expect_err("evaluate traps");
    assert!(
        matches!(
            err,
            PluginError::Trap {
                call: "evaluate",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("traps on purpose in evaluate"),
        "{err}"
    );
    let err = plugin
        .evaluate(
            &named("huge"),
            &outcome(0, ""),
            &sample_context(json!({}), 0),
        )
        .expect_err("huge reason");
    assert!(
        matches!(
            err,
            PluginError::InvalidOutput {
                call: "evaluate",
                ..
            }
        ),
        "{err:?}"
    );
    let err = plugin.gate(&named("oom"), &ctx).expect_err("gate oom");
    assert!(
        matches!(err, PluginError::MemoryExhausted { call: "gate", .. }),
        "{err:?}"
    );
    assert_eq!(
        plugin.gate(&named("fine"), &ctx).expect("gate"),
        Gate::StartNow
    );
    assert_eq!(
        plugin
            .evaluate(
                &named("fine"),
                &outcome(0, ""),
                &sample_context(json!({}), 0)
            )
            .expect("evaluate"),
        Verdict::Completed
    );
}

#[test]
fn a_dependency_on_a_missing_step_is_invalid_output() {
    let err = hostile("missing-dep").expect_err("missing dep");
    assert!(matches!(err, PluginError::InvalidOutput { .. }), "{err:?}");
    assert!(err.to_string().contains("depends on"), "{err}");
}

#[test]
fn a_step_name_kubernetes_cannot_use_is_invalid_output() {
    let err = hostile("bad-name").expect_err("bad name");
    assert!(matches!(err, PluginError::InvalidOutput { .. }), "{err:?}");
    assert!(err.to_string().contains("invalid"), "{err}");
}

#[test]
fn a_plugin_for_another_contract_version_is_refused_naming_both_versions() {
    let err = runtime()
        .load(&test_plugin("wrong-contract"), "wrong-contract.wasm")
        .expect_err("wrong contract");
    assert!(matches!(err, PluginError::WrongContract { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("workflow:plugin@0.9.0"), "{message}");
    assert!(message.contains("workflow:plugin@0.3.0"), "{message}");
    assert!(message.contains("wrong-contract.wasm"), "{message}");
    good_plugin_still_works();
}

#[test]
fn a_component_without_the_export_is_refused() {
    let err = runtime()
        .load(&test_plugin("no-export"), "no-export.wasm")
        .expect_err("no export");
    assert!(matches!(err, PluginError::MissingExport { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("workflow:plugin/workflow-type@0.3.0"),
        "{err}"
    );
}

#[test]
fn garbage_bytes_are_not_a_component() {
    let err = runtime()
        .load(b"this is not wasm at all", "garbage.wasm")
        .expect_err("garbage");
    assert!(matches!(err, PluginError::NotAComponent { .. }), "{err:?}");
    assert!(err.to_string().contains("garbage.wasm"), "{err}");
}

#[test]
fn a_core_module_is_not_a_component() {
    let err = runtime()
        .load(b"\0asm\x01\0\0\0", "core.wasm")
        .expect_err("core module");
    assert!(matches!(err, PluginError::NotAComponent { .. }), "{err:?}");
    assert!(err.to_string().contains("core WebAssembly module"), "{err}");
    good_plugin_still_works();
}

#[test]
fn the_time_limit_is_configurable() {
    let config = RuntimeConfig {
        call_timeout: std::time::Duration::from_millis(200),
        max_concurrent_calls: 4,
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config).expect("runtime");
    let plugin = runtime
        .load(&test_plugin("hostile"), "hostile.wasm")
        .expect("load");
    let started = Instant::now();
    let err = plugin
        .template(&sample_context(json!({"mode": "loop"}), 0))
        .expect_err("loop");
    assert!(
        err.to_string().contains("exceeded its 200ms time limit"),
        "{err}"
    );
    assert!(
        started.elapsed().as_millis() < 1000,
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn runtime_config_reads_camel_case() {
    let config: RuntimeConfig =
        serde_json::from_value(json!({"callTimeoutMs": 250, "memoryLimitBytes": 1048576}))
            .expect("config");
    assert_eq!(config.call_timeout.as_millis(), 250);
    assert_eq!(config.memory_limit_bytes, 1 << 20);
    assert_eq!(config.max_steps, RuntimeConfig::default().max_steps);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_work_inside_a_multi_threaded_async_runtime() {
    good_plugin_still_works();
    hostile("trap").expect_err("trap");
    // As the controllers call plugins: from a task on a worker thread.
    tokio::spawn(async {
        good_plugin_still_works();
        hostile("trap").expect_err("trap");
    })
    .await
    .expect("task");
}

#[tokio::test]
async fn calls_work_inside_a_current_thread_async_runtime() {
    good_plugin_still_works();
    hostile("trap").expect_err("trap");
}

/// A runtime of its own recording into a fresh registry, so counts start at zero.
fn runtime_with_metrics(config: RuntimeConfig) -> (Runtime, Registry) {
    let mut registry = Registry::default();
    let runtime = Runtime::new(config)
        .expect("runtime")
        .with_metrics(PluginMetrics::register(&mut registry));
    (runtime, registry)
}

fn encoded(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
    text
}

#[test]
fn a_call_is_timed_and_counted_by_type_export_and_outcome() {
    let (runtime, registry) = runtime_with_metrics(RuntimeConfig {
        max_concurrent_calls: 4,
        ..RuntimeConfig::default()
    });
    let plugin = runtime
        .load(&builtin("pre-check"), "pre-check.wasm")
        .expect("load");
    plugin
        .template(&sample_context(json!({}), 1_700_000_000))
        .expect("template");
    let text = encoded(&registry);
    for line in [
        r#"workflow_operator_plugin_calls_total{workflow_type="pre-check",export="template",outcome="ok"} 1"#,
        r#"workflow_operator_plugin_call_duration_seconds_count{workflow_type="pre-check",export="template"} 1"#,
        // Until `info` answers, the plugin is known by its origin.
        r#"workflow_operator_plugin_calls_total{workflow_type="pre-check.wasm",export="info",outcome="ok"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
}

#[test]
fn params_a_version_accepted_are_accepted_again_without_a_call_and_refused_ones_are_asked_again() {
    let (runtime, registry) = runtime_with_metrics(RuntimeConfig {
        max_concurrent_calls: 4,
        ..RuntimeConfig::default()
    });
    let plugin = runtime.load(&builtin("at"), "at.wasm").expect("load");
    let valid = json!({"schedule": "2026-01-30T21:04:00Z", "command": "echo QAQ"});
    let refused = json!({"schedule": "tomorrow", "command": "echo QAQ"});
    for _ in 0..3 {
        plugin.validate(&valid).expect("valid params");
        plugin.validate(&refused).expect_err("refused params");
    }
    // The same version loaded again (from another file) shares what it learnt.
    let again = runtime.load(&builtin("at"), "other/at.wasm").expect("load");
    again.validate(&valid).expect("valid params");
    let text = encoded(&registry);
    let calls = |outcome: &str| {
        let prefix = format!(
            r#"workflow_operator_plugin_calls_total{{workflow_type="at",export="validate",outcome="{outcome}"}} "#
        );
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .map(|n| n.parse::<u64>().expect("a count"))
    };
    assert_eq!(calls("ok"), Some(1), "the valid params asked once:\n{text}");
    assert_eq!(
        calls("error"),
        Some(3),
        "the refused params asked each time:\n{text}"
    );
}

#[test]
fn a_trap_and_a_timeout_are_counted_as_such() {
    let (runtime, registry) = runtime_with_metrics(RuntimeConfig {
        call_timeout: std::time::Duration::from_millis(200),
        max_concurrent_calls: 4,
        ..RuntimeConfig::default()
    });
    let plugin = runtime
        .load(&test_plugin("hostile"), "hostile.wasm")
        .expect("load");
    for mode in ["trap", "loop"] {
        plugin
            .template(&sample_context(json!({ "mode": mode }), 0))
            .expect_err(mode);
    }
    let text = encoded(&registry);
    for outcome in ["trap", "timeout"] {
        let line = format!(
            r#"workflow_operator_plugin_calls_total{{workflow_type="hostile",export="template",outcome="{outcome}"}} 1"#
        );
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
}

/// The most a call may outlive its time limit, waiting in a host call or not.
const OVERRUN: std::time::Duration = std::time::Duration::from_millis(100);

/// A runtime with the time limit `limit`, recording calls so their durations can be read.
fn runtime_with_limit(limit: std::time::Duration) -> (Runtime, Registry) {
    runtime_with_metrics(RuntimeConfig {
        call_timeout: limit,
        max_concurrent_calls: 8,
        ..RuntimeConfig::default()
    })
}

/// Asserts that `result` is a timeout of `call` that came back within the limit plus
/// [`OVERRUN`] after `started`.
fn assert_stopped_in_time<T: std::fmt::Debug>(
    kind: &str,
    call: &str,
    limit: std::time::Duration,
    started: Instant,
    result: Result<T, PluginError>,
) {
    let elapsed = started.elapsed();
    let err = result.expect_err(kind);
    assert!(
        matches!(&err, PluginError::Timeout { call: c, .. } if *c == call),
        "{kind}: expected a timeout in {call}, got {err:?}"
    );
    assert!(
        elapsed < limit + OVERRUN,
        "{kind}: came back after {elapsed:?}, limit {limit:?}"
    );
}

#[test]
fn a_plugin_waiting_in_a_host_call_is_stopped_at_the_time_limit_in_every_export() {
    let limit = std::time::Duration::from_millis(300);
    let (runtime, _registry) = runtime_with_limit(limit);
    let plugin = runtime
        .load(&test_plugin("hostile"), "hostile.wasm")
        .expect("hostile loads");
    let ctx = |mode: &str| sample_context(json!({ "mode": mode }), 0);
    let named = |name: &str| Step {
        name: name.into(),
        command: "true".into(),
        ..Step::default()
    };
    // `sleep` is `std::thread::sleep` (wasi-libc's nanosleep: a clock subscription and
    // `pollable.block`); `poll-clock` is `poll` on a subscription to an instant an hour ahead;
    // `block-on-clock` is `pollable.block` on a subscription of an hour.
    for mode in ["sleep", "poll-clock", "block-on-clock"] {
        let started = Instant::now();
        let result = plugin.template(&ctx(mode));
        assert_stopped_in_time(mode, "template", limit, started, result);
    }
    let started = Instant::now();
    let result = plugin.validate(&json!({"mode": "sleep-in-validate"}));
    assert_stopped_in_time("sleep-in-validate", "validate", limit, started, result);
    for name in ["sleep", "poll-clock"] {
        let started = Instant::now();
        let result = plugin.gate(&named(name), &ctx("ok"));
        assert_stopped_in_time(name, "gate", limit, started, result);
        let started = Instant::now();
        let result = plugin.evaluate(&named(name), &outcome(0, ""), &sample_context(json!({}), 0));
        assert_stopped_in_time(name, "evaluate", limit, started, result);
    }
    // Stopping a waiting call leaves nothing behind: the plugin answers again at once.
    let started = Instant::now();
    plugin.template(&ctx("ok")).expect("ok after the sleeps");
    assert!(started.elapsed() < OVERRUN, "took {:?}", started.elapsed());
}

#[test]
fn a_thirty_second_sleep_is_stopped_at_the_default_limit() {
    let plugin = runtime()
        .load(&test_plugin("hostile"), "hostile.wasm")
        .expect("hostile loads");
    let started = Instant::now();
    let result = plugin.template(&sample_context(json!({"mode": "sleep-30s"}), 0));
    assert_stopped_in_time(
        "sleep-30s",
        "template",
        RuntimeConfig::default().call_timeout,
        started,
        result,
    );
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(900),
        "stopped before its limit: {:?}",
        started.elapsed()
    );
}

/// Seconds the histogram recorded for `export` of `workflow_type` (one call).
fn recorded_seconds(registry: &Registry, workflow_type: &str, export: &str) -> f64 {
    let prefix = format!(
        r#"workflow_operator_plugin_call_duration_seconds_sum{{workflow_type="{workflow_type}",export="{export}"}} "#
    );
    let text = encoded(registry);
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix)?.parse().ok())
        .unwrap_or_else(|| panic!("no `{prefix}` in:\n{text}"))
}

#[test]
fn a_plugin_sleeping_while_it_starts_or_in_info_is_refused_at_the_time_limit() {
    let limit = std::time::Duration::from_millis(300);
    let (runtime, registry) = runtime_with_limit(limit);
    for name in ["sleepy-init", "sleepy-info"] {
        let origin = format!("{name}.wasm");
        let started = Instant::now();
        let err = runtime
            .load(&test_plugin(name), &origin)
            .expect_err("a plugin that sleeps at load");
        assert!(
            matches!(err, PluginError::Timeout { call: "info", .. }),
            "{name}: {err:?}"
        );
        // Loading compiles first; the call itself is what the histogram timed.
        let seconds = recorded_seconds(&registry, &origin, "info");
        assert!(
            seconds < (limit + OVERRUN).as_secs_f64(),
            "{name}: info took {seconds}s"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{name}: load took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn a_blocking_stdin_read_returns_at_once_with_nothing() {
    let plugin = runtime()
        .load(&test_plugin("hostile"), "hostile.wasm")
        .expect("hostile loads");
    let started = Instant::now();
    let err = plugin
        .template(&sample_context(json!({"mode": "read-stdin"}), 0))
        .expect_err("the plugin reports what it read");
    assert!(matches!(err, PluginError::TemplateFailed { .. }), "{err:?}");
    assert!(
        err.to_string().contains("stdin read returned: closed"),
        "{err}"
    );
    assert!(started.elapsed() < OVERRUN, "took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_plugin_is_stopped_in_time_from_a_multi_threaded_async_runtime() {
    let limit = std::time::Duration::from_millis(200);
    let (runtime, _registry) = runtime_with_limit(limit);
    let plugin = runtime
        .load(&test_plugin("hostile"), "hostile.wasm")
        .expect("load");
    let task = tokio::spawn(async move {
        let started = Instant::now();
        let result = plugin.template(&sample_context(json!({"mode": "sleep"}), 0));
        assert_stopped_in_time("sleep", "template", limit, started, result);
    });
    task.await.expect("task");
}

/// A plugin called from a worker of the controllers' runtime must not hold that worker while
/// it computes: with one worker, another task keeps running while a looping plugin runs to
/// its timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_computing_plugin_does_not_hold_the_worker_that_called_it() {
    let limit = std::time::Duration::from_millis(500);
    let (runtime, _registry) = runtime_with_limit(limit);
    let plugin = runtime
        .load(&test_plugin("hostile"), "hostile.wasm")
        .expect("load");
    let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let call_done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ticker = tokio::spawn({
        let (ticks, call_done) = (ticks.clone(), call_done.clone());
        async move {
            while !call_done.load(std::sync::atomic::Ordering::SeqCst) {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    tokio::task::yield_now().await;
    let call = tokio::spawn({
        let call_done = call_done.clone();
        let ticks = ticks.clone();
        async move {
            let before = ticks.load(std::sync::atomic::Ordering::SeqCst);
            let started = Instant::now();
            let result = plugin.template(&sample_context(json!({"mode": "loop"}), 0));
            let during = ticks.load(std::sync::atomic::Ordering::SeqCst) - before;
            call_done.store(true, std::sync::atomic::Ordering::SeqCst);
            assert_stopped_in_time("loop", "template", limit, started, result);
            during
        }
    });
    let during = call.await.expect("call");
    ticker.await.expect("ticker");
    assert!(
        during >= 5,
        "the other task ran {during} times in the {limit:?} the plugin computed"
    );
}

#[tokio::test]
async fn a_sleeping_plugin_is_stopped_in_time_from_a_current_thread_async_runtime() {
    let limit = std::time::Duration::from_millis(200);
    let (runtime, _registry) = runtime_with_limit(limit);
    let plugin = runtime
        .load(&test_plugin("hostile"), "hostile.wasm")
        .expect("load");
    let started = Instant::now();
    let result = plugin.template(&sample_context(json!({"mode": "poll-clock"}), 0));
    assert_stopped_in_time("poll-clock", "template", limit, started, result);
}

#[test]
fn a_params_schema_that_refers_to_itself_is_refused_at_load_naming_the_reference() {
    // Unbounded, validating `{}` against this schema grows memory until the process dies.
    let started = Instant::now();
    let err = runtime()
        .load(&test_plugin("recursive-schema"), "recursive-schema.wasm")
        .expect_err("a recursive params schema");
    assert!(matches!(err, PluginError::InvalidInfo { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("recursive-schema.wasm")
            && message.contains("its params schema is recursive: `$ref` \"#/$defs/"),
        "{message}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn a_plugin_of_contract_0_1_0_still_loads_and_every_call_works() {
    let plugin = runtime()
        .load(&test_plugin("contract-v0-1"), "contract-v0-1.wasm")
        .expect("a plugin built for workflow:plugin@0.1.0 loads");
    assert_eq!(plugin.contract_version(), "0.1.0");
    assert_eq!(plugin.info().type_name, "old-check");
    plugin
        .validate(&json!({"delay": 1}))
        .expect("its schema accepts its params");
    assert!(
        plugin.validate(&json!({"other": 1})).is_err(),
        "and refuses others"
    );
    let ctx = sample_context(json!({}), 1_700_000_000);
    let steps = plugin.template(&ctx).expect("template");
    let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["first", "for-3"], "it saw the three targets");
    assert_eq!(plugin.gate(&steps[0], &ctx).expect("gate"), Gate::StartNow);
    let delayed = sample_context(json!({"delay": 1}), 1_700_000_000);
    assert_eq!(
        plugin.gate(&steps[0], &delayed).expect("gate"),
        Gate::NotBefore(1_700_000_060)
    );
    assert_eq!(
        plugin
            .evaluate(&steps[0], &outcome(0, "fine"), &ctx)
            .expect("evaluate"),
        Verdict::Completed
    );
    // It gets the outcome without the per-target report, which its contract does not have.
    let mut failed = outcome(2, "boom");
    failed.targets = TargetReport::parse("targets 1: 0 ok, 1 failed, 0 unreachable\nFAIL a: b");
    assert_eq!(
        plugin.evaluate(&steps[1], &failed, &ctx).expect("evaluate"),
        Verdict::Failed("old-check saw exit code Some(2) on attempt 1: boom".into())
    );
    assert_eq!(plugin.origin(), "contract-v0-1.wasm");
}

#[test]
fn a_plugin_of_contract_0_2_0_still_loads_and_every_call_works() {
    let plugin = runtime()
        .load(&test_plugin("contract-v0-2"), "contract-v0-2.wasm")
        .expect("a plugin built for workflow:plugin@0.2.0 loads");
    assert_eq!(plugin.contract_version(), "0.2.0");
    assert_eq!(plugin.info().type_name, "mid-check");
    let ctx = sample_context(json!({}), 1_700_000_000);
    let steps = plugin.template(&ctx).expect("template");
    let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["first", "for-3"], "it saw the three targets");
    assert!(
        steps
            .iter()
            .all(|s| s.rerun_with.is_empty() && s.retries == Some(1)),
        "{steps:?}"
    );
    assert_eq!(plugin.gate(&steps[0], &ctx).expect("gate"), Gate::StartNow);
    // The step reaches it whole (its retries), without what 0.2.0 does not know.
    let delayed = sample_context(json!({"delay": 1}), 1_700_000_000);
    let mut with_rerun = steps[0].clone();
    with_rerun.rerun_with = vec!["for-3".into()];
    assert_eq!(
        plugin.gate(&with_rerun, &delayed).expect("gate"),
        Gate::NotBefore(1_700_000_060)
    );
    let mut failed = outcome(2, "boom");
    failed.targets = TargetReport::parse("targets 1: 0 ok, 1 failed, 0 unreachable\nFAIL a: b");
    assert_eq!(
        plugin.evaluate(&steps[1], &failed, &ctx).expect("evaluate"),
        Verdict::Failed(
            "mid-check saw exit code Some(2) in group workflowgroup-sample: 1 of 1 targets failed"
                .into()
        )
    );
}

#[test]
fn a_current_plugins_gate_can_ask_for_approval() {
    let plugin = load_builtin("at");
    assert_eq!(plugin.contract_version(), "0.3.0");
    let params = json!({
        "schedule": "2016-01-30T21:04:00Z",
        "command": "reboot",
        "approval": {"approvers": ["alice", "group:ops"], "count": 2, "timeoutSeconds": 600, "onTimeout": "Start"},
    });
    plugin
        .validate(&params)
        .expect("the approval params are in its schema");
    let ctx = sample_context(params, 1_700_000_000);
    let steps = plugin.template(&ctx).expect("template");
    let Gate::NeedsApproval(request) = plugin.gate(&steps[0], &ctx).expect("gate") else {
        panic!("asks for approval");
    };
    assert_eq!(request.approvers, ["alice", "group:ops"]);
    assert_eq!((request.count, request.timeout_seconds), (2, Some(600)));
    assert_eq!(request.on_timeout, workflow_model::ApprovalTimeout::Start);
    assert_eq!(request.reason, "runs: reboot");
    let refused =
        json!({"schedule": "2016-01-30T21:04:00Z", "command": "x", "approval": {"count": 0}});
    assert!(plugin.validate(&refused).is_err(), "count 0 is refused");
}

#[test]
fn a_current_plugins_evaluate_gets_the_per_target_report_and_the_groups_params() {
    let plugin = load_builtin("post-check");
    assert_eq!(plugin.contract_version(), "0.3.0");
    let ctx = sample_context(json!({"maxFailedTargets": 1}), 1_700_000_000);
    let steps = plugin.template(&ctx).expect("template");
    // The message was cut to its summary: only the report names the failed target.
    let mut cut = outcome(1, "targets 3: 1 ok, 2 failed, 0 unreachable");
    cut.targets = TargetReport::parse(
        "targets 3: 1 ok, 2 failed, 0 unreachable\nFAIL node-2: exit code 1 after 0.1 s: files missing: /etc/x\n\
         FAIL node-3: exit code 1 after 0.1 s: files missing: /etc/x\n",
    );
    match plugin.evaluate(&steps[0], &cut, &ctx).expect("evaluate") {
        Verdict::Failed(reason) => assert!(
            reason.starts_with(
                "2 of 3 targets failed (at most 1 may fail): node-2 failed: exit code 1"
            ) && reason.contains("node-3 failed"),
            "{reason}"
        ),
        other => panic!("expected Failed naming both targets, got {other:?}"),
    }
    cut.targets = TargetReport::parse(
        "targets 3: 2 ok, 1 failed, 0 unreachable\nFAIL node-2: exit code 1 after 0.1 s: x\n",
    );
    assert_eq!(
        plugin.evaluate(&steps[0], &cut, &ctx).expect("evaluate"),
        Verdict::Completed,
        "one failed target is within maxFailedTargets: 1"
    );
}

/// Files under `dir`, at any depth.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)
        .expect("read the cache directory")
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_compile_cache_keeps_a_compiled_plugin_for_the_next_runtime() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let cache = dir.path().join("compiled");
    let config = RuntimeConfig {
        compile_cache: Some(cache.clone()),
        ..RuntimeConfig::default()
    };
    let bytes = builtin("pre-check");
    let first = Runtime::new(config.clone()).expect("runtime with a compile cache");
    first.load(&bytes, "pre-check.wasm").expect("load");
    drop(first);
    let kept = files_under(&cache);
    assert!(
        kept.iter()
            .any(|f| f.metadata().is_ok_and(|m| m.len() > 100_000)),
        "no compiled plugin in the cache: {kept:?}"
    );
    // A new runtime (a restart) loads it from there, and it works.
    let second = Runtime::new(config).expect("runtime with a compile cache");
    let plugin = second.load(&bytes, "pre-check.wasm").expect("load");
    let steps = plugin
        .template(&sample_context(json!({}), 0))
        .expect("template");
    assert_eq!(steps.len(), 2);

    // A cache that cannot be made is refused when the runtime starts, naming it.
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").expect("write");
    let refused = Runtime::new(RuntimeConfig {
        compile_cache: Some(file.join("under")),
        ..RuntimeConfig::default()
    });
    let Err(error) = refused else {
        panic!("a cache under a file is refused");
    };
    let message = error.to_string();
    assert!(message.contains("a-file/under"), "{message}");
}

//! What a workflow type costs by the language it is written in: compile, load, the first call
//! and warm calls (each in a fresh sandboxed store and instance, as the operator calls), and
//! the process's memory once each is loaded. Run by `make bench-languages`
//! (`scripts/bench-languages.sh`), which makes a Python and a JavaScript type with
//! `plugin new --lang` and passes them with the Rust scaffold's built-in peer:
//! `WORKFLOW_BENCH_PLUGINS="rust=at.wasm python=py.wasm js=js.wasm" cargo bench -p
//! workflow-operator --features bench --bench plugin_languages`.

use std::time::{Duration, Instant};

use workflow_operator::plugin::{GroupContext, Runtime, RuntimeConfig, Step, StepOutcome, Target};

const CALLS: usize = 50;

/// Resident memory of this process, in MiB.
fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1024.0 * 1024.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let plugins = std::env::var("WORKFLOW_BENCH_PLUGINS")
        .expect("WORKFLOW_BENCH_PLUGINS=\"lang=file.wasm ...\" (make bench-languages sets it)");
    let ctx = GroupContext {
        group_name: "bench".into(),
        namespace: "default".into(),
        cluster_name: "c".into(),
        targets: (1..=3)
            .map(|n| Target {
                name: format!("node-{n}"),
                ip: format!("192.168.1.{n}"),
                role: "Worker".into(),
            })
            .collect(),
        now: 1_700_000_000,
        ..GroupContext::default()
    };
    let outcome = StepOutcome {
        succeeded: true,
        exit_code: Some(0),
        message: "targets 3: 3 ok, 0 failed, 0 unreachable".into(),
        attempt: 1,
        duration_ms: 100,
        targets: None,
    };
    println!(
        "{:<8} {:>9} {:>10} {:>10} {:>10} {:>12} {:>12} {:>12} {:>10}",
        "language",
        "size MB",
        "compile s",
        "load ms",
        "cached ms",
        "1st call ms",
        "template ms",
        "evaluate ms",
        "RSS +MiB"
    );
    for entry in plugins.split_whitespace() {
        let (lang, file) = entry.split_once('=').expect("lang=file.wasm");
        let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
        let started = Instant::now();
        runtime.compile_uncached(&bytes).expect("compile");
        let compile = started.elapsed();
        let before = rss_mib();
        let started = Instant::now();
        let plugin = runtime.load(&bytes, file).expect("load");
        let load = started.elapsed();
        let started = Instant::now();
        let steps = plugin.template(&ctx).expect("template");
        let first = started.elapsed();
        let step: Step = steps.into_iter().next().expect("a step");
        let mut templates = Vec::with_capacity(CALLS);
        let mut evaluates = Vec::with_capacity(CALLS);
        for _ in 0..CALLS {
            let started = Instant::now();
            plugin.template(&ctx).expect("template");
            templates.push(started.elapsed());
            let started = Instant::now();
            plugin.evaluate(&step, &outcome, &ctx).expect("evaluate");
            evaluates.push(started.elapsed());
        }
        templates.sort();
        evaluates.sort();
        let grown = rss_mib() - before;
        // A restart with --plugin-compile-cache: the second runtime finds what the first kept.
        let cache = tempfile::tempdir().expect("compile cache");
        let cached_config = || RuntimeConfig {
            compile_cache: Some(cache.path().to_path_buf()),
            ..RuntimeConfig::default()
        };
        drop(
            Runtime::new(cached_config())
                .expect("runtime")
                .load(&bytes, file)
                .expect("load"),
        );
        let restarted = Runtime::new(cached_config()).expect("runtime");
        let started = Instant::now();
        drop(restarted.load(&bytes, file).expect("load from the cache"));
        let cached = started.elapsed();
        println!(
            "{lang:<8} {:>9.1} {:>10.2} {:>10.1} {:>10.1} {:>12.2} {:>12.2} {:>12.2} {:>10.1}",
            bytes.len() as f64 / 1e6,
            compile.as_secs_f64(),
            ms(load),
            ms(cached),
            ms(first),
            ms(templates[CALLS / 2]),
            ms(evaluates[CALLS / 2]),
            grown,
        );
    }
    println!(
        "(template and evaluate: medians of {CALLS} calls, each in a fresh store and instance; load: compiled again, as at a restart without --plugin-compile-cache; cached: a restart with it)"
    );
}

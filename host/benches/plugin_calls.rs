//! What a plugin call costs:
//! `cargo bench -p workflow-operator --features bench --bench plugin_calls`
//! (needs `make plugins`).
//!
//! - `template/fresh-store`: the seed's pre-check `template` as the operator runs it, in a
//!   new sandboxed store and instance, output checked.
//! - `template/fresh-store-metrics`: the same, in a runtime that records each call's
//!   duration and outcome (`PluginMetrics`).
//! - `template/warm-instance`: the same call on an instance kept across calls, for
//!   comparison (the target is fresh within 5x of warm).
//! - `evaluate/fresh-store`: pre-check's success logic on a check step's outcome.
//! - `compile/pre-check`: compiling a plugin version the cache has not seen.

#[path = "../tests/plugin_support/mod.rs"]
mod plugin_support;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use plugin_support::{builtin, load_builtin, runtime, sample_context};
use prometheus_client::registry::Registry;
use workflow_operator::plugin::{
    GroupContext, PluginMetrics, Runtime, RuntimeConfig, Step, StepOutcome,
};

fn template(c: &mut Criterion) {
    let plugin = load_builtin("pre-check");
    let ctx = sample_context(serde_json::json!({}), 1_700_000_000);
    let mut group = c.benchmark_group("template");
    group.bench_function("fresh-store", |b| {
        b.iter(|| black_box(plugin.template(black_box(&ctx)).expect("template")))
    });
    let mut registry = Registry::default();
    let measured = Runtime::new(RuntimeConfig {
        max_concurrent_calls: 4,
        ..RuntimeConfig::default()
    })
    .expect("runtime")
    .with_metrics(PluginMetrics::register(&mut registry))
    .load(&builtin("pre-check"), "pre-check.wasm")
    .expect("load");
    group.bench_function("fresh-store-metrics", |b| {
        b.iter(|| black_box(measured.template(black_box(&ctx)).expect("template")))
    });
    let mut warm = plugin.warm_instance().expect("warm instance");
    group.bench_function("warm-instance", |b| {
        b.iter(|| black_box(warm.template(black_box(&ctx)).expect("template")))
    });
    group.finish();
}

fn evaluate(c: &mut Criterion) {
    let plugin = load_builtin("pre-check");
    let step = Step {
        name: "check-network".into(),
        command: "check-network.sh".into(),
        depends_on: vec!["validate-nodes".into()],
        ..Step::default()
    };
    let outcome = StepOutcome {
        succeeded: true,
        exit_code: Some(0),
        message: "OK node-1\nUNREACHABLE node-2: no route to host\n".into(),
        attempt: 1,
        duration_ms: 1200,
        targets: None,
    };
    let ctx = GroupContext::default();
    c.bench_function("evaluate/fresh-store", |b| {
        b.iter(|| {
            black_box(
                plugin
                    .evaluate(black_box(&step), black_box(&outcome), black_box(&ctx))
                    .expect("evaluate"),
            )
        })
    });
}

fn compile(c: &mut Criterion) {
    let bytes = builtin("pre-check");
    let mut group = c.benchmark_group("compile");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("pre-check", |b| {
        b.iter(|| {
            runtime()
                .compile_uncached(black_box(&bytes))
                .expect("compile")
        })
    });
    group.finish();
}

criterion_group!(benches, template, evaluate, compile);
criterion_main!(benches);

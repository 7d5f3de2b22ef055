//! The WebAssembly engine all plugins share: its configuration (component model, epoch
//! interruption, a pooling allocator sized by [`RuntimeConfig`]), the linker of what plugins
//! may import, the epoch ticker that interrupts guest code at its deadline, and the limits
//! derived from the configuration.

use std::thread;
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{
    Cache, CacheConfig, Config, Enabled, Engine, InstanceAllocationStrategy,
    PoolingAllocationConfig,
};

use super::bindings::Plugin as Bindings;
use super::config::RuntimeConfig;
use super::sandbox::CallState;
use super::validate::Limits;

/// How often the engine's epoch advances; the granularity of call time limits.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Bytes of each linear memory kept resident between calls.
const KEEP_RESIDENT: usize = 4 << 20;

/// Most native stack a guest may use.
const MAX_WASM_STACK: usize = 512 << 10;

/// The native stack of one call's fiber: the guest's, and room for the host functions it
/// calls.
const FIBER_STACK: usize = MAX_WASM_STACK + (512 << 10);

/// The engine for `config`.
pub(super) fn new_engine(config: &RuntimeConfig) -> anyhow::Result<Engine> {
    let mut engine_config = engine_config(config);
    if let Some(dir) = &config.compile_cache {
        let mut cache = CacheConfig::new();
        cache.with_directory(dir);
        let cache = Cache::new(cache).map_err(|e| {
            anyhow::anyhow!(
                "cannot use {} as the plugins' compile cache: {e:#}",
                dir.display()
            )
        })?;
        engine_config.cache(Some(cache));
    }
    Engine::new(&engine_config)
        .map_err(|e| anyhow::anyhow!("cannot create the WebAssembly engine: {e:#}"))
}

/// What a plugin may import: WASI with nothing granted (see [`CallState`]) and `host-log`.
///
/// WASI is linked in its asynchronous form: every import that can wait (clock subscriptions,
/// `poll`, `pollable.block`, blocking stream reads and writes) waits in a future, which the
/// call's deadline drops (see `call.rs`). `host-log` and the remaining imports return at once.
pub(super) fn new_linker(engine: &Engine) -> anyhow::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)
        .map_err(|e| anyhow::anyhow!("cannot link WASI: {e:#}"))?;
    Bindings::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)
        .map_err(|e| anyhow::anyhow!("cannot link host-log: {e:#}"))?;
    // Plugins of contracts 0.2.0 and 0.1.0 import their host-log.
    super::bindings::v0_2::Plugin::add_to_linker::<CallState, HasSelf<CallState>>(
        &mut linker,
        |state| state,
    )
    .map_err(|e| anyhow::anyhow!("cannot link host-log@0.2.0: {e:#}"))?;
    super::bindings::v0_1::Plugin::add_to_linker::<CallState, HasSelf<CallState>>(
        &mut linker,
        |state| state,
    )
    .map_err(|e| anyhow::anyhow!("cannot link host-log@0.1.0: {e:#}"))?;
    Ok(linker)
}

fn engine_config(config: &RuntimeConfig) -> Config {
    let memory_limit = memory_limit(config);
    let mut pool = PoolingAllocationConfig::new();
    let instances = config.max_concurrent_calls.max(1);
    pool.total_component_instances(instances)
        // A Rust wasip2 component has a handful of core instances, memories and tables.
        .total_core_instances(instances.saturating_mul(8))
        .total_memories(instances.saturating_mul(2))
        .total_tables(instances.saturating_mul(4))
        // One fiber stack per call in flight.
        .total_stacks(instances)
        .max_memory_size(memory_limit)
        // Keep the low pages of each slot (a Rust guest's stack, data and first heap pages)
        // committed, and on Linux 6.7+ reset only the ones a call dirtied (PAGEMAP_SCAN, off
        // by default in wasmtime): cheaper than resetting every kept page or faulting them in
        // again on the next call.
        .pagemap_scan(Enabled::Auto)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(64 << 10);
    let mut cfg = Config::new();
    cfg.wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        // Reserve exactly the memory cap per instance: many slots fit in the address space,
        // and a memory cannot grow past its reservation anyway.
        .memory_reservation(memory_limit as u64)
        .memory_guard_size(64 << 10)
        .memory_reservation_for_growth(0)
        .memory_init_cow(true)
        .max_wasm_stack(MAX_WASM_STACK)
        .async_stack_size(FIBER_STACK)
        // Compile a plugin's functions one after another on the loading thread: Cranelift
        // keeps the buffers of every thread that compiled for the engine's life, and a
        // parallel compile holds several functions' at once. Loading is a little slower,
        // and only at start-up or when a plugin changes.
        .parallel_compilation(false);
    cfg
}

/// Advances the epoch every [`EPOCH_TICK`] until the engine is dropped.
pub(super) fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    let spawned = thread::Builder::new()
        .name("plugin-epoch".into())
        .spawn(move || {
            loop {
                thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        });
    if let Err(e) = spawned {
        // Without the ticker no call would ever time out; refuse loudly in the logs rather
        // than run plugins unbounded.
        tracing::error!("cannot start the plugin epoch ticker: {e}; plugin calls will fail");
    }
}

/// The epoch ticks a call of at most `timeout` may run, at least one.
pub(super) fn deadline_ticks(timeout: Duration) -> u64 {
    let ticks = timeout.as_millis().div_ceil(EPOCH_TICK.as_millis());
    u64::try_from(ticks).unwrap_or(u64::MAX / 2).max(1)
}

/// The memory cap of one call, in bytes.
pub(super) fn memory_limit(config: &RuntimeConfig) -> usize {
    usize::try_from(config.memory_limit_bytes).unwrap_or(usize::MAX)
}

/// Bounds on what a plugin may return.
pub(super) fn limits(config: &RuntimeConfig) -> Limits {
    Limits {
        max_steps: config.max_steps,
        max_string_bytes: config.max_string_bytes,
        max_output_bytes: config.max_output_bytes,
    }
}

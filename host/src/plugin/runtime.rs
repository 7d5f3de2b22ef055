//! The sandbox that runs workflow-type plugins: one engine, plugins compiled once per content
//! digest, every call in a fresh store with a time limit, a memory cap and bounded output.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use wasmtime::component::{
    Component, ComponentExportIndex, ComponentNamedList, HasSelf, Instance, InstancePre, Lift,
    Linker, Lower,
};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap,
};

use super::bindings::exports::workflow::plugin::workflow_type as wit;
use super::bindings::{Plugin as Bindings, PluginPre};
use super::config::RuntimeConfig;
use super::error::{CONTRACT_VERSION, PluginError};
use super::sandbox::{CallState, LogTag, truncate};
use super::types::{Context, Gate, PluginInfo, Step, StepOutcome, Verdict};
use super::validate::{self, Limits};

/// How often the engine's epoch advances; the granularity of call time limits.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Bytes of each linear memory kept resident between calls.
const KEEP_RESIDENT: usize = 4 << 20;

/// The name under which a plugin exports its functions, without the version.
const EXPORT_NAME: &str = "workflow:plugin/workflow-type";

/// Runs plugins. Cheap to clone; all clones share one engine and one compilation cache.
///
/// # Guarantees
/// A plugin call never panics the host and never outlives its time limit by more than one
/// epoch tick (10 ms): a trap, a timeout or memory exhaustion becomes a [`PluginError`] and the
/// instance is dropped, so the next call of any plugin starts clean.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    engine: Engine,
    linker: Linker<CallState>,
    config: RuntimeConfig,
    /// Compiled plugins (and compile failures) by content digest.
    compiled: Mutex<HashMap<String, Result<Arc<Compiled>, PluginError>>>,
}

/// One compiled, pre-instantiated plugin and what it said about itself.
struct Compiled {
    pre: InstancePre<CallState>,
    exports: Exports,
    info: PluginInfo,
    schema: jsonschema::Validator,
    digest: String,
    size: usize,
}

/// Where the contract's functions are in one compiled plugin, found once per compilation.
/// A call then looks up and typechecks only the function it calls, not all five as the
/// generated bindings do on every instantiation.
struct Exports {
    info: ComponentExportIndex,
    validate: ComponentExportIndex,
    template: ComponentExportIndex,
    gate: ComponentExportIndex,
    evaluate: ComponentExportIndex,
}

impl Exports {
    fn find(component: &Component, origin: &str) -> Result<Self, PluginError> {
        let interface = format!("{EXPORT_NAME}@{CONTRACT_VERSION}");
        let missing = |what: String| PluginError::MissingExport {
            origin: origin.to_string(),
            exports: what,
        };
        let (_, instance) = component
            .get_export(None, interface.as_str())
            .ok_or_else(|| missing(format!("no {interface}")))?;
        let func = |name: &str| {
            component
                .get_export_index(Some(&instance), name)
                .ok_or_else(|| missing(format!("{interface} without `{name}`")))
        };
        Ok(Self {
            info: func("info")?,
            validate: func("validate")?,
            template: func("template")?,
            gate: func("gate")?,
            evaluate: func("evaluate")?,
        })
    }
}

/// Calls the export at `index` of `instance`, whose signature is `P -> R`.
fn call_export<P, R>(
    store: &mut Store<CallState>,
    instance: Instance,
    index: &ComponentExportIndex,
    params: P,
) -> wasmtime::Result<R>
where
    P: ComponentNamedList + Lower,
    (R,): ComponentNamedList + Lift,
{
    let func = instance.get_typed_func::<P, (R,)>(&mut *store, index)?;
    Ok(func.call(store, params)?.0)
}

/// A loaded plugin: a workflow type ready to be called. `Send + Sync`; share it in an `Arc`.
pub struct Plugin {
    compiled: Arc<Compiled>,
    runtime: Arc<RuntimeInner>,
    origin: String,
    /// `<type> (<origin>)`, for messages.
    label: String,
    tag: LogTag,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("type", &self.compiled.info.type_name)
            .field("version", &self.compiled.info.version)
            .field("digest", &self.compiled.digest)
            .field("origin", &self.origin)
            .finish()
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Creates the engine (component model, epoch interruption, pooling allocator sized by
    /// `config`), the linker (WASI with nothing granted, `host-log`) and the epoch ticker.
    ///
    /// # Errors
    /// When the engine cannot be created, for example because the machine cannot reserve the
    /// virtual memory of the instance pool.
    pub fn new(config: RuntimeConfig) -> anyhow::Result<Self> {
        let engine = Engine::new(&engine_config(&config)?)
            .map_err(|e| anyhow::anyhow!("cannot create the WebAssembly engine: {e:#}"))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| anyhow::anyhow!("cannot link WASI: {e:#}"))?;
        Bindings::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)
            .map_err(|e| anyhow::anyhow!("cannot link host-log: {e:#}"))?;
        start_epoch_ticker(&engine);
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                engine,
                linker,
                config,
                compiled: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The configuration this runtime was created with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// Loads a plugin from its bytes: compiles it (once per content digest), checks its
    /// contract version and exports, calls its `info` and validates the answer.
    ///
    /// `origin` says where the bytes come from (usually the file path); it appears in messages.
    /// Loading the same bytes again returns the cached compilation (or the cached failure,
    /// unless it was a timeout or a full instance pool, which may pass next time).
    ///
    /// # Errors
    /// [`PluginError::NotAComponent`], [`PluginError::Compile`], [`PluginError::WrongContract`],
    /// [`PluginError::MissingExport`], [`PluginError::UnsupportedImport`],
    /// [`PluginError::InvalidInfo`], or any call error of `info`.
    pub fn load(&self, bytes: &[u8], origin: &str) -> Result<Arc<Plugin>, PluginError> {
        let digest = hex::encode(Sha256::digest(bytes));
        let cached = self
            .inner
            .compiled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&digest)
            .cloned();
        let compiled = match cached {
            Some(result) => result,
            None => {
                let result = self.compile(bytes, origin, &digest).map(Arc::new);
                // A timeout or a full instance pool may pass on a quieter machine: retry
                // those on the next load; everything else is a property of the bytes.
                let transient = matches!(
                    result,
                    Err(PluginError::Timeout { .. } | PluginError::Instantiate { .. })
                );
                if !transient {
                    self.inner
                        .compiled
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(digest, result.clone());
                }
                result
            }
        }?;
        Ok(Arc::new(Plugin::new(compiled, self.inner.clone(), origin)))
    }

    /// Compiles `bytes` without the cache and throws the result away: the cost of loading a
    /// new plugin version, for benchmarks.
    ///
    /// # Errors
    /// As [`Runtime::load`].
    #[doc(hidden)]
    pub fn compile_uncached(&self, bytes: &[u8]) -> Result<(), PluginError> {
        let digest = hex::encode(Sha256::digest(bytes));
        self.compile(bytes, "benchmark", &digest).map(drop)
    }

    fn compile(&self, bytes: &[u8], origin: &str, digest: &str) -> Result<Compiled, PluginError> {
        check_component_header(bytes, origin)?;
        let engine = &self.inner.engine;
        let component = Component::new(engine, bytes).map_err(|e| PluginError::Compile {
            origin: origin.to_string(),
            reason: one_line(&format!("{e:#}")),
        })?;
        check_exports(engine, &component, origin)?;
        let pre = self.inner.linker.instantiate_pre(&component).map_err(|e| {
            PluginError::UnsupportedImport {
                origin: origin.to_string(),
                reason: one_line(&format!("{e:#}")),
            }
        })?;
        // The generated bindings check every export's signature against the contract.
        PluginPre::new(pre.clone()).map_err(|e| PluginError::MissingExport {
            origin: origin.to_string(),
            exports: one_line(&format!("{e:#}")),
        })?;
        let exports = Exports::find(&component, origin)?;
        let tag = LogTag {
            plugin: origin.into(),
            digest: short_digest(digest).into(),
        };
        let raw = call_in_store(
            &self.inner,
            &pre,
            &tag,
            origin,
            "info",
            |store, instance| {
                call_export::<(), wit::PluginInfo>(store, instance, &exports.info, ())
            },
        )?;
        let (info, schema) = validate::info(raw, origin, &limits(&self.inner.config))?;
        Ok(Compiled {
            pre,
            exports,
            info,
            schema,
            digest: digest.to_string(),
            size: bytes.len(),
        })
    }
}

impl Plugin {
    fn new(compiled: Arc<Compiled>, runtime: Arc<RuntimeInner>, origin: &str) -> Self {
        let label = format!("{} ({origin})", compiled.info.type_name);
        let tag = LogTag {
            plugin: compiled.info.type_name.as_str().into(),
            digest: short_digest(&compiled.digest).into(),
        };
        Self {
            compiled,
            runtime,
            origin: origin.to_string(),
            label,
            tag,
        }
    }

    /// What the plugin said about itself at load.
    pub fn info(&self) -> &PluginInfo {
        &self.compiled.info
    }

    /// The workflow type it implements.
    pub fn type_name(&self) -> &str {
        &self.compiled.info.type_name
    }

    /// The sha256 of its bytes, as lowercase hex.
    pub fn digest(&self) -> &str {
        &self.compiled.digest
    }

    /// Size of its bytes.
    pub fn size(&self) -> usize {
        self.compiled.size
    }

    /// Where it was loaded from, as given to [`Runtime::load`].
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The contract version it implements (the only one this operator accepts).
    pub fn contract_version(&self) -> &'static str {
        CONTRACT_VERSION
    }

    /// Checks a group's parameters for this type: first against the JSON Schema the plugin
    /// declares, then with the plugin's own `validate`.
    ///
    /// # Errors
    /// [`PluginError::InvalidParams`] naming the JSON path (schema) or the plugin's message;
    /// any call error.
    pub fn validate(&self, params: &serde_json::Value) -> Result<(), PluginError> {
        let errors: Vec<String> = self
            .compiled
            .schema
            .iter_errors(params)
            .take(3)
            .map(|e| {
                let path = e.instance_path.to_string();
                let path = if path.is_empty() {
                    "/".to_string()
                } else {
                    path
                };
                format!("{path}: {e}")
            })
            .collect();
        if !errors.is_empty() {
            return Err(self.invalid_params(errors.join("; ")));
        }
        let json = params.to_string();
        let result: Result<(), String> =
            self.call("validate", &self.compiled.exports.validate, (&json,))?;
        result.map_err(|message| {
            self.invalid_params(
                truncate(&message, self.runtime.config.max_string_bytes).into_owned(),
            )
        })
    }

    /// The steps of a workflow of this type for the group described by `context`, checked:
    /// a valid step graph (unique DNS-1123 names, known dependencies, no cycle), within the
    /// configured number of steps and string sizes.
    ///
    /// # Errors
    /// [`PluginError::TemplateFailed`] with the plugin's message, [`PluginError::InvalidOutput`],
    /// or any call error.
    pub fn template(&self, context: &Context) -> Result<Vec<Step>, PluginError> {
        let ctx = wit::Context::from(context);
        let result: Result<Vec<wit::Step>, String> =
            self.call("template", &self.compiled.exports.template, (&ctx,))?;
        let limits = limits(&self.runtime.config);
        match result {
            Ok(steps) => {
                validate::steps(steps, &limits).map_err(|reason| self.invalid("template", reason))
            }
            Err(message) => Err(PluginError::TemplateFailed {
                plugin: self.label.clone(),
                message: truncate(&message, limits.max_string_bytes).into_owned(),
            }),
        }
    }

    /// Whether `step` may start now.
    ///
    /// # Errors
    /// Any call error.
    pub fn gate(&self, step: &Step, context: &Context) -> Result<Gate, PluginError> {
        let step = wit::Step::from(step);
        let ctx = wit::Context::from(context);
        let decision: wit::GateDecision =
            self.call("gate", &self.compiled.exports.gate, (&step, &ctx))?;
        Ok(match decision {
            wit::GateDecision::StartNow => Gate::StartNow,
            wit::GateDecision::NotBefore(t) => Gate::NotBefore(t),
        })
    }

    /// The plugin's judgement of a finished attempt of `step`.
    ///
    /// # Errors
    /// [`PluginError::InvalidOutput`] when a reason is too long, or any call error.
    pub fn evaluate(&self, step: &Step, outcome: &StepOutcome) -> Result<Verdict, PluginError> {
        let step = wit::Step::from(step);
        let outcome = wit::StepOutcome::from(outcome);
        let verdict: wit::Verdict = self.call(
            "evaluate",
            &self.compiled.exports.evaluate,
            (&step, &outcome),
        )?;
        validate::verdict(verdict, &limits(&self.runtime.config))
            .map_err(|reason| self.invalid("evaluate", reason))
    }

    /// A store and instance kept across calls, for comparing fresh-store calls with warm
    /// ones in benchmarks. Not for production: state would leak from call to call.
    ///
    /// # Errors
    /// When the instance cannot be created.
    #[doc(hidden)]
    pub fn warm_instance(&self) -> Result<WarmInstance, PluginError> {
        let mut store = new_store(&self.runtime, &self.tag, u64::MAX / 2);
        let bindings = PluginPre::new(self.compiled.pre.clone())
            .and_then(|pre| pre.instantiate(&mut store))
            .map_err(|e| PluginError::Instantiate {
                plugin: self.label.clone(),
                call: "warm",
                reason: one_line(&format!("{e:#}")),
            })?;
        Ok(WarmInstance { store, bindings })
    }

    /// Calls the export at `index` (named `call` in messages) with `params`, in a fresh store.
    fn call<P, R>(
        &self,
        call: &'static str,
        index: &ComponentExportIndex,
        params: P,
    ) -> Result<R, PluginError>
    where
        P: ComponentNamedList + Lower + Send,
        (R,): ComponentNamedList + Lift,
        R: Send,
    {
        call_in_store(
            &self.runtime,
            &self.compiled.pre,
            &self.tag,
            &self.label,
            call,
            |store, instance| call_export(store, instance, index, params),
        )
    }

    fn invalid(&self, call: &'static str, reason: String) -> PluginError {
        PluginError::InvalidOutput {
            plugin: self.label.clone(),
            call,
            reason,
        }
    }

    fn invalid_params(&self, message: String) -> PluginError {
        PluginError::InvalidParams {
            type_name: self.compiled.info.type_name.clone(),
            message,
        }
    }
}

/// A plugin instance reused across calls (benchmarks only).
#[doc(hidden)]
pub struct WarmInstance {
    store: Store<CallState>,
    bindings: Bindings,
}

impl WarmInstance {
    /// `template` on the kept instance, unchecked.
    ///
    /// # Errors
    /// When the call traps or the plugin refuses.
    pub fn template(&mut self, context: &Context) -> Result<usize, String> {
        let ctx = wit::Context::from(context);
        self.bindings
            .workflow_plugin_workflow_type()
            .call_template(&mut self.store, &ctx)
            .map_err(|e| format!("{e:#}"))?
            .map(|steps| steps.len())
    }
}

/// A fresh store for one call of the plugin tagged `tag`: memory capped, interrupted after
/// `deadline_ticks` epoch ticks.
fn new_store(runtime: &RuntimeInner, tag: &LogTag, deadline_ticks: u64) -> Store<CallState> {
    let cfg = &runtime.config;
    let state = CallState::new(
        tag.clone(),
        memory_limit(cfg),
        cfg.max_string_bytes,
        cfg.max_output_bytes,
    );
    let mut store = Store::new(&runtime.engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(deadline_ticks);
    store
}

/// Runs one call of `pre` in a fresh store, mapping every failure to a [`PluginError`].
fn call_in_store<R: Send>(
    runtime: &RuntimeInner,
    pre: &InstancePre<CallState>,
    tag: &LogTag,
    label: &str,
    call: &'static str,
    f: impl FnOnce(&mut Store<CallState>, Instance) -> wasmtime::Result<R> + Send,
) -> Result<R, PluginError> {
    outside_async_runtime(|| {
        let cfg = &runtime.config;
        let mut store = new_store(runtime, tag, deadline_ticks(cfg.call_timeout));
        let result = pre
            .instantiate(&mut store)
            .map_err(|e| (e, true))
            .and_then(|instance| f(&mut store, instance).map_err(|e| (e, false)));
        store.data().finish_logs();
        let memory_exhausted = store.data().limiter.memory_exhausted;
        result.map_err(|(error, instantiating)| {
            let plugin = label.to_string();
            if memory_exhausted {
                return PluginError::MemoryExhausted {
                    plugin,
                    call,
                    limit_bytes: cfg.memory_limit_bytes,
                };
            }
            match error.downcast_ref::<Trap>() {
                Some(Trap::Interrupt) => PluginError::Timeout {
                    plugin,
                    call,
                    limit: cfg.call_timeout,
                },
                Some(trap) => {
                    let mut message = trap.to_string();
                    if *trap == Trap::StackOverflow {
                        message.push_str(" (too deep recursion?)");
                    }
                    if let Some(line) = store.data().last_output(1024) {
                        message = format!("{message}; its last output: {line}");
                    }
                    PluginError::Trap {
                        plugin,
                        call,
                        message,
                    }
                }
                None if instantiating => PluginError::Instantiate {
                    plugin,
                    call,
                    reason: one_line(&format!("{error:#}")),
                },
                None => PluginError::Trap {
                    plugin,
                    call,
                    message: one_line(&format!("{error:#}")),
                },
            }
        })
    })
}

/// Runs `f` where WASI's synchronous host functions may block: they enter a Tokio runtime
/// of their own, which panics on a thread that already drives an async runtime.
fn outside_async_runtime<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match tokio::runtime::Handle::try_current() {
        Err(_) => f(),
        Ok(handle) => match handle.runtime_flavor() {
            tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
            _ => thread::scope(|scope| match scope.spawn(f).join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            }),
        },
    }
}

fn engine_config(config: &RuntimeConfig) -> anyhow::Result<Config> {
    let memory_limit = memory_limit(config);
    let mut pool = PoolingAllocationConfig::new();
    let instances = config.max_concurrent_calls.max(1);
    pool.total_component_instances(instances)
        // A Rust wasip2 component has a handful of core instances, memories and tables.
        .total_core_instances(instances.saturating_mul(8))
        .total_memories(instances.saturating_mul(2))
        .total_tables(instances.saturating_mul(4))
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
        .max_wasm_stack(512 << 10);
    Ok(cfg)
}

/// Advances the epoch every [`EPOCH_TICK`] until the engine is dropped.
fn start_epoch_ticker(engine: &Engine) {
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

fn deadline_ticks(timeout: Duration) -> u64 {
    let ticks = timeout.as_millis().div_ceil(EPOCH_TICK.as_millis());
    u64::try_from(ticks).unwrap_or(u64::MAX / 2).max(1)
}

fn memory_limit(config: &RuntimeConfig) -> usize {
    usize::try_from(config.memory_limit_bytes).unwrap_or(usize::MAX)
}

fn limits(config: &RuntimeConfig) -> Limits {
    Limits {
        max_steps: config.max_steps,
        max_string_bytes: config.max_string_bytes,
        max_output_bytes: config.max_output_bytes,
    }
}

/// Refuses what is not a component before the compiler does, with a clearer message.
fn check_component_header(bytes: &[u8], origin: &str) -> Result<(), PluginError> {
    let not_a_component = |reason: &str| PluginError::NotAComponent {
        origin: origin.to_string(),
        reason: reason.to_string(),
    };
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(not_a_component(
            "it does not start with the WebAssembly magic bytes (is it a .wasm file?)",
        ));
    }
    match bytes[4..8] {
        [0x0d, 0x00, 0x01, 0x00] => Ok(()),
        [0x01, 0x00, 0x00, 0x00] => Err(not_a_component(
            "it is a core WebAssembly module; build the plugin for wasm32-wasip2 (or run \
             `wasm-tools component new`) to get a component",
        )),
        _ => Err(not_a_component("unknown WebAssembly version or layer")),
    }
}

/// Finds the `workflow-type` export and checks its contract version.
fn check_exports(engine: &Engine, component: &Component, origin: &str) -> Result<(), PluginError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let expected = format!("{EXPORT_NAME}@{CONTRACT_VERSION}");
    if exports.contains(&expected) {
        return Ok(());
    }
    if let Some(found) = exports
        .iter()
        .find_map(|name| name.strip_prefix(EXPORT_NAME)?.strip_prefix('@'))
    {
        return Err(PluginError::WrongContract {
            origin: origin.to_string(),
            found: found.to_string(),
        });
    }
    if exports.iter().any(|name| name == EXPORT_NAME) {
        return Err(PluginError::WrongContract {
            origin: origin.to_string(),
            found: "(unversioned)".to_string(),
        });
    }
    Err(PluginError::MissingExport {
        origin: origin.to_string(),
        exports: if exports.is_empty() {
            "none".to_string()
        } else {
            exports.join(", ")
        },
    })
}

fn short_digest(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// Error chains can span lines (wasm backtraces); messages here are one line.
fn one_line(s: &str) -> String {
    let joined = s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    truncate(&joined, 2048).into_owned()
}

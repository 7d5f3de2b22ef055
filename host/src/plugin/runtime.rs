//! The two public handles of the sandbox: [`Runtime`] (one engine, plugins compiled once per
//! content digest) and [`Plugin`] (one loaded workflow type), with their accessors.
//!
//! How they work lives beside them: [`super::engine`] sets up the engine, [`super::load`]
//! compiles and checks plugins, [`super::call`] runs every call in a fresh store.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use wasmtime::Engine;
use wasmtime::component::{InstancePre, Linker};

use super::config::RuntimeConfig;
use super::contract::{Contract, Exports};
#[cfg(doc)]
use super::error::CONTRACT_VERSION;
use super::error::{PluginError, short_digest};
use super::metrics::PluginMetrics;
use super::sandbox::{CallState, LogTag};
use super::types::PluginInfo;
use super::{driver, engine};

/// Runs plugins. Cheap to clone; all clones share one engine and one compilation cache.
///
/// # Guarantees
/// A plugin call never panics the host and never outlives its time limit by more than 100 ms,
/// whether the plugin computes or waits in a host call (a WASI sleep, poll or blocking read):
/// a trap, a timeout or memory exhaustion becomes a [`PluginError`] and the instance is
/// dropped, so the next call of any plugin starts clean.
#[derive(Clone)]
pub struct Runtime {
    pub(super) inner: Arc<RuntimeInner>,
}

pub(super) struct RuntimeInner {
    pub engine: Engine,
    pub linker: Linker<CallState>,
    /// The runtime that drives the timers of calls (see `driver.rs`).
    pub timers: tokio::runtime::Handle,
    pub config: RuntimeConfig,
    /// Compiled plugins (and compile failures) by content digest.
    pub compiled: Mutex<HashMap<String, Result<Arc<Compiled>, PluginError>>>,
    /// Where calls are counted and timed, when the operator exports metrics.
    pub metrics: Option<PluginMetrics>,
}

/// A copy sharing the engine and the compiled plugins, with a cache of its own from now on:
/// what [`Runtime::with_metrics`] makes when the runtime is already shared.
impl Clone for RuntimeInner {
    fn clone(&self) -> Self {
        let compiled = self
            .compiled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Self {
            engine: self.engine.clone(),
            linker: self.linker.clone(),
            timers: self.timers.clone(),
            config: self.config.clone(),
            compiled: Mutex::new(compiled),
            metrics: self.metrics.clone(),
        }
    }
}

/// One compiled, pre-instantiated plugin and what it said about itself.
pub(super) struct Compiled {
    pub pre: InstancePre<CallState>,
    pub contract: Contract,
    pub exports: Exports,
    pub info: PluginInfo,
    pub schema: jsonschema::Validator,
    pub digest: String,
    pub size: usize,
    /// Params this version found valid, as JSON: a group and each of its Workflows ask about
    /// the same params at every reconcile, and the answer of one version does not change.
    pub valid_params: ValidParams,
}

/// A bounded set of params (as JSON text) a plugin version accepted.
#[derive(Default)]
pub(super) struct ValidParams(Mutex<HashSet<String>>);

impl ValidParams {
    /// Params longer than this are asked about each time instead of kept.
    const MAX_PARAMS_BYTES: usize = 16 * 1024;
    /// Kept at most; the set starts over when full.
    const MAX_ENTRIES: usize = 4096;

    pub fn contains(&self, json: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(json)
    }

    pub fn insert(&self, json: String) {
        if json.len() > Self::MAX_PARAMS_BYTES {
            return;
        }
        let mut set = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if set.len() >= Self::MAX_ENTRIES {
            set.clear();
        }
        set.insert(json);
    }
}

/// A loaded plugin: a workflow type ready to be called. `Send + Sync`; share it in an `Arc`.
pub struct Plugin {
    pub(super) compiled: Arc<Compiled>,
    pub(super) runtime: Arc<RuntimeInner>,
    origin: String,
    /// `<type> (<origin>)`, for messages.
    pub(super) label: String,
    pub(super) tag: LogTag,
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
    /// `config`), the linker (WASI with nothing granted, `host-log`), the epoch ticker and,
    /// once per process, the thread that drives call timers.
    ///
    /// # Errors
    /// When the engine cannot be created, for example because the machine cannot reserve the
    /// virtual memory of the instance pool, or a thread cannot be started.
    pub fn new(config: RuntimeConfig) -> anyhow::Result<Self> {
        let engine = engine::new_engine(&config)?;
        let linker = engine::new_linker(&engine)?;
        let timers = driver::timers()?.clone();
        engine::start_epoch_ticker(&engine);
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                engine,
                linker,
                timers,
                config,
                compiled: Mutex::new(HashMap::new()),
                metrics: None,
            }),
        })
    }

    /// This runtime, recording every plugin call in `metrics`: its duration and its outcome,
    /// by workflow type and export.
    ///
    /// Plugins loaded before keep recording where their runtime did (nowhere, unless it had
    /// metrics): call it right after [`Runtime::new`].
    pub fn with_metrics(self, metrics: PluginMetrics) -> Self {
        let mut inner = Arc::unwrap_or_clone(self.inner);
        inner.metrics = Some(metrics);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The configuration this runtime was created with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }
}

impl Plugin {
    pub(super) fn new(compiled: Arc<Compiled>, runtime: Arc<RuntimeInner>, origin: &str) -> Self {
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

    /// The contract version it implements: [`CONTRACT_VERSION`], or an older one that still
    /// loads.
    pub fn contract_version(&self) -> &'static str {
        self.compiled.contract.version()
    }
}

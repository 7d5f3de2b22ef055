//! Entry points for the call benchmarks only (cargo feature `bench`): the cost of compiling a
//! new plugin version, and a call on an instance kept across calls to compare fresh-store
//! calls with. Never for production: a kept instance carries state from call to call.

use sha2::{Digest as _, Sha256};
use wasmtime::Store;

use super::bindings::exports::workflow::plugin::workflow_type as wit;
use super::bindings::{Plugin as Bindings, PluginPre};
use super::call::new_store;
use super::driver;
use super::error::PluginError;
use super::error::error_line;
use super::runtime::{Plugin, Runtime};
use super::sandbox::CallState;
use super::types::GroupContext;

impl Runtime {
    /// Compiles `bytes` without the cache and throws the result away: the cost of loading a
    /// new plugin version.
    ///
    /// # Errors
    /// As [`Runtime::load`].
    pub fn compile_uncached(&self, bytes: &[u8]) -> Result<(), PluginError> {
        let digest = hex::encode(Sha256::digest(bytes));
        self.compile(bytes, "benchmark", &digest).map(drop)
    }
}

impl Plugin {
    /// A store and instance kept across calls, without a time limit.
    ///
    /// # Errors
    /// When the instance cannot be created.
    pub fn warm_instance(&self) -> Result<WarmInstance, PluginError> {
        let mut store = new_store(&self.runtime, &self.tag, u64::MAX / 2);
        let timers = self.runtime.timers.clone();
        let pre = self.compiled.pre.clone();
        let bindings = driver::block_on(&timers, async {
            PluginPre::new(pre)?.instantiate_async(&mut store).await
        })
        .map_err(|e| PluginError::Instantiate {
            plugin: self.label.clone(),
            call: "warm",
            reason: error_line(&e),
        })?;
        Ok(WarmInstance {
            store,
            bindings,
            timers,
        })
    }
}

/// A plugin instance reused across calls.
pub struct WarmInstance {
    store: Store<CallState>,
    bindings: Bindings,
    timers: tokio::runtime::Handle,
}

impl WarmInstance {
    /// `template` on the kept instance, unchecked.
    ///
    /// # Errors
    /// When the call traps or the plugin refuses.
    pub fn template(&mut self, context: &GroupContext) -> Result<usize, String> {
        let ctx = wit::Context::from(context);
        let (bindings, store) = (&self.bindings, &mut self.store);
        driver::block_on(&self.timers, async {
            bindings
                .workflow_plugin_workflow_type()
                .call_template(store, &ctx)
                .await
        })
        .map_err(|e| format!("{e:#}"))?
        .map(|steps| steps.len())
    }
}

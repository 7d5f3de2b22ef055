//! Loading a plugin: the component header check, compilation, the contract and export checks,
//! and the cache that compiles each content digest once.

use std::sync::{Arc, PoisonError};

use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::bindings::{PluginPre, v0_1, v0_2};
use super::call;
use super::contract::{Contract, EXPORT_NAME, Exports};
use super::error::{PluginError, error_line, short_digest};
use super::runtime::{Compiled, Plugin, Runtime, ValidParams};
use super::sandbox::LogTag;

impl Runtime {
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

    /// Compiles and checks `bytes`, whose sha256 is `digest`, and asks the plugin for its
    /// `info`.
    pub(super) fn compile(
        &self,
        bytes: &[u8],
        origin: &str,
        digest: &str,
    ) -> Result<Compiled, PluginError> {
        check_component_header(bytes, origin)?;
        let engine = &self.inner.engine;
        let component = Component::new(engine, bytes).map_err(|e| PluginError::Compile {
            origin: origin.to_string(),
            reason: error_line(&e),
        })?;
        let contract = check_exports(engine, &component, origin)?;
        let pre = self.inner.linker.instantiate_pre(&component).map_err(|e| {
            PluginError::UnsupportedImport {
                origin: origin.to_string(),
                reason: error_line(&e),
            }
        })?;
        // The generated bindings check every export's signature against the contract.
        let signatures = match contract {
            Contract::Current => PluginPre::new(pre.clone()).map(drop),
            Contract::V0_2 => v0_2::PluginPre::new(pre.clone()).map(drop),
            Contract::V0_1 => v0_1::PluginPre::new(pre.clone()).map(drop),
        };
        signatures.map_err(|e| PluginError::MissingExport {
            origin: origin.to_string(),
            exports: error_line(&e),
        })?;
        let exports = Exports::find(&component, origin, contract)?;
        // Until `info` answers, the plugin is known only by where it comes from.
        let tag = LogTag {
            plugin: origin.into(),
            digest: short_digest(digest).into(),
        };
        let (info, schema) = call::info(&self.inner, &pre, &exports, &tag, origin)?;
        Ok(Compiled {
            pre,
            contract,
            exports,
            info,
            schema,
            digest: digest.to_string(),
            size: bytes.len(),
            valid_params: ValidParams::default(),
        })
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

/// Finds the `workflow-type` export and the contract version it implements (the current one
/// or one that still loads).
fn check_exports(
    engine: &Engine,
    component: &Component,
    origin: &str,
) -> Result<Contract, PluginError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let versions: Vec<&str> = exports
        .iter()
        .filter_map(|name| name.strip_prefix(EXPORT_NAME)?.strip_prefix('@'))
        .collect();
    if let Some(contract) = versions.iter().find_map(|v| Contract::of(v)) {
        return Ok(contract);
    }
    if let Some(found) = versions.first() {
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

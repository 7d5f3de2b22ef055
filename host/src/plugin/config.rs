//! Limits and knobs of the plugin sandbox.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How plugins are run: time, memory and output limits of every call.
///
/// Each field has a default that suits the built-in workflow types; an operator deployment
/// only changes them for unusual plugins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RuntimeConfig {
    /// Wall-clock limit of one plugin call (instantiation included). A plugin that runs
    /// longer is interrupted and the call fails with a timeout. Serialized as
    /// `callTimeoutMs`, in milliseconds. Default: 1 s.
    #[serde(rename = "callTimeoutMs", with = "duration_millis")]
    pub call_timeout: Duration,
    /// Most linear memory one plugin instance may use, in bytes. Default: 64 MiB.
    pub memory_limit_bytes: u64,
    /// Most steps one `template` call may return. Default: 256.
    pub max_steps: usize,
    /// Longest string (name, command, message, ...) a plugin may return, in bytes.
    /// Default: 64 KiB.
    pub max_string_bytes: usize,
    /// Most bytes of strings one call may return in total, and most bytes of plugin stdout
    /// and stderr kept per call (the rest is dropped). Default: 1 MiB.
    pub max_output_bytes: usize,
    /// How many plugin calls may run at the same time (the size of the instance pool).
    /// Default: 256.
    pub max_concurrent_calls: u32,
    /// A directory where compiled plugins are kept (wasmtime's cache, keyed by the plugin's
    /// bytes, the wasmtime version and the engine's settings), so that a restart loads them
    /// without compiling again. None: every start compiles.
    #[serde(skip)]
    pub compile_cache: Option<PathBuf>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(1),
            memory_limit_bytes: 64 << 20,
            max_steps: 256,
            max_string_bytes: 64 << 10,
            max_output_bytes: 1 << 20,
            max_concurrent_calls: 256,
            compile_cache: None,
        }
    }
}

/// Durations as integer milliseconds in configuration files.
mod duration_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

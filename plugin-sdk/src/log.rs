//! Logging into the operator's logs, tagged with the plugin (the contract's `host-log`).
//!
//! ```
//! use workflow_plugin_sdk::log;
//!
//! log::info("rendering 2 steps");
//! log::warn(&format!("no target has role {}", "Worker"));
//! ```
//!
//! Outside a component (native unit tests), messages go to standard error instead.

#[cfg(target_arch = "wasm32")]
use crate::bindings::workflow::plugin::host_log::{Level, log as host_log};

#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone, Copy)]
enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

#[cfg(not(target_arch = "wasm32"))]
fn host_log(level: Level, message: &str) {
    eprintln!("[{level:?}] {message}");
}

/// Logs `message` at level debug.
pub fn debug(message: &str) {
    host_log(Level::Debug, message);
}

/// Logs `message` at level info.
pub fn info(message: &str) {
    host_log(Level::Info, message);
}

/// Logs `message` at level warn.
pub fn warn(message: &str) {
    host_log(Level::Warn, message);
}

/// Logs `message` at level error.
pub fn error(message: &str) {
    host_log(Level::Error, message);
}

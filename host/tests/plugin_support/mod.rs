//! Shared by the plugin tests: where `make plugins` puts the `.wasm` files, one runtime for
//! the whole test binary, and the seed's sample group as a plugin context.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use workflow_operator::plugin::{GroupContext, Plugin, Runtime, RuntimeConfig, Target};

fn read_wasm(path: PathBuf) -> Vec<u8> {
    match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) => panic!(
            "cannot read {}: {e}; run `make plugins` first",
            path.display()
        ),
    }
}

/// Path of a built-in plugin, `target/plugins/<type>.wasm`.
pub fn builtin_path(type_name: &str) -> PathBuf {
    workflow_e2e::built_wasm("plugins", type_name)
}

/// Path of a test plugin, `target/test-plugins/<name>.wasm`.
pub fn test_plugin_path(name: &str) -> PathBuf {
    workflow_e2e::built_wasm("test-plugins", name)
}

/// Bytes of a built-in plugin; fails (never skips) when it was not built.
pub fn builtin(type_name: &str) -> Vec<u8> {
    read_wasm(builtin_path(type_name))
}

/// Bytes of a test plugin; fails (never skips) when it was not built.
pub fn test_plugin(name: &str) -> Vec<u8> {
    read_wasm(test_plugin_path(name))
}

/// One runtime with the default configuration, shared by the tests of one binary.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| Runtime::new(RuntimeConfig::default()).expect("runtime"))
}

/// A built-in plugin loaded in the shared runtime.
pub fn load_builtin(type_name: &str) -> Arc<Plugin> {
    runtime()
        .load(&builtin(type_name), &format!("{type_name}.wasm"))
        .unwrap_or_else(|e| panic!("cannot load {type_name}: {e}"))
}

/// The seed's sample WorkflowGroup as a plugin context, at `now`.
pub fn sample_context(params: serde_json::Value, now: i64) -> GroupContext {
    let target = |name: &str, ip: &str, role: &str| Target {
        name: name.into(),
        ip: ip.into(),
        role: role.into(),
    };
    GroupContext {
        group_name: "workflowgroup-sample".into(),
        namespace: "default".into(),
        cluster_name: "test-cluster".into(),
        targets: vec![
            target("node-1", "192.168.1.101", "Master"),
            target("node-2", "192.168.1.102", "Worker"),
            target("node-3", "192.168.1.103", "Worker"),
        ],
        params,
        now,
    }
}

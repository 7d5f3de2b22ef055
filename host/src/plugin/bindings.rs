//! Host bindings generated from the contract, `plugin-sdk/wit/workflow-plugin.wit`
//! (`workflow:plugin@0.3.0`), and from the versions before it, `host/wit/v0.2.0` and
//! `host/wit/v0.1.0`, whose plugins still load ([`v0_2`], [`v0_1`]). Exports are called asynchronously (see `driver.rs`); `host-log`
//! returns at once and stays synchronous.

wasmtime::component::bindgen!({
    path: "../plugin-sdk/wit",
    world: "plugin",
    exports: { default: async },
});

/// Contract 0.2.0: the same functions, but a step has no `rerun-with` and a gate cannot ask for
/// approval.
pub mod v0_2 {
    wasmtime::component::bindgen!({
        path: "wit/v0.2.0",
        world: "plugin",
        exports: { default: async },
    });
}

/// Contract 0.1.0: the same functions, but `evaluate` gets no context and the step outcome no
/// per-target report.
pub mod v0_1 {
    wasmtime::component::bindgen!({
        path: "wit/v0.1.0",
        world: "plugin",
        exports: { default: async },
    });
}

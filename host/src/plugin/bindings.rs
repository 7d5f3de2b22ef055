//! Host bindings generated from the contract, `plugin-sdk/wit/workflow-plugin.wit`. Exports
//! are called asynchronously (see `driver.rs`); `host-log` returns at once and stays
//! synchronous.

wasmtime::component::bindgen!({
    path: "../plugin-sdk/wit",
    world: "plugin",
    exports: { default: async },
});

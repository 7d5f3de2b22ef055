//! Host bindings generated from the contract, `plugin-sdk/wit/workflow-plugin.wit`.

wasmtime::component::bindgen!({
    path: "../plugin-sdk/wit",
    world: "plugin",
});

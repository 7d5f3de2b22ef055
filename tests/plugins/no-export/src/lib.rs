//! Test plugin: a component whose world exports only `run: func()` and not
//! `workflow:plugin/workflow-type`, so the host reports the missing export.

#![allow(unsafe_code)]

#[allow(missing_docs, clippy::all)]
mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "app" });
}

// Only the component (wasm32) exports it; native builds see it unused.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct App;

impl bindings::Guest for App {
    fn run() {}
}

// Only in the component: keeps native builds free of component exports.
#[cfg(target_arch = "wasm32")]
bindings::export!(App with_types_in bindings);

//! Test plugin: workflow type `sleepy-init`, which sleeps an hour in a static constructor,
//! run by the module's `_initialize` before any export is called. Each call instantiates the
//! plugin afresh, so loading it (its `info`) must fail at the time limit.

#[cfg(target_family = "wasm")]
use std::time::Duration;

use workflow_plugin_sdk::prelude::*;

// Only in the wasm build: a native build (`cargo test --workspace` builds every member) would
// run the constructor in its test harness and sleep there.
#[cfg(target_family = "wasm")]
extern "C" fn sleep_an_hour() {
    std::thread::sleep(Duration::from_secs(3600));
}

/// A constructor: the linker lists `.init_array` entries in `__wasm_call_ctors`, which the
/// module's `_initialize` runs.
#[cfg(target_family = "wasm")]
#[allow(unsafe_code)]
#[used]
#[unsafe(link_section = ".init_array")]
static SLEEP_AT_INIT: extern "C" fn() = sleep_an_hour;

/// The `sleepy-init` workflow type; never reached.
pub struct SleepyInit;

impl WorkflowType for SleepyInit {
    type Params = NoParams;

    fn info() -> Info {
        Info::new("sleepy-init", env!("CARGO_PKG_VERSION"))
    }

    fn template(_ctx: &Context<NoParams>) -> Result<Vec<Step>, Error> {
        Ok(vec![Step::new("ok", "true")])
    }
}

export_workflow_type!(SleepyInit);

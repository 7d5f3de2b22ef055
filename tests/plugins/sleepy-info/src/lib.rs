//! Test plugin: workflow type `sleepy-info`, whose `info` sleeps an hour, so that loading it
//! must fail at the time limit.

use std::time::Duration;

use workflow_plugin_sdk::prelude::*;

/// The `sleepy-info` workflow type.
pub struct SleepyInfo;

impl WorkflowType for SleepyInfo {
    type Params = NoParams;

    fn info() -> Info {
        std::thread::sleep(Duration::from_secs(3600));
        Info::new("sleepy-info", env!("CARGO_PKG_VERSION"))
    }

    fn template(_ctx: &Context<NoParams>) -> Result<Vec<Step>, Error> {
        Ok(vec![Step::new("ok", "true")])
    }
}

export_workflow_type!(SleepyInfo);

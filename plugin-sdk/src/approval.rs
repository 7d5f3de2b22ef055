//! Approval before a step starts: parameters any workflow type can take so that a group's
//! author asks for it (`params.<type>.approval`), and the gate answer they make.
//!
//! ```
//! use workflow_plugin_sdk::approval::ApprovalParams;
//! use workflow_plugin_sdk::{ApprovalTimeout, Gate};
//!
//! let params: ApprovalParams = workflow_plugin_sdk::serde_json::from_str(
//!     r#"{"approvers": ["alice", "group:ops"], "timeoutSeconds": 3600, "onTimeout": "Fail"}"#,
//! )
//! .unwrap();
//! let Gate::NeedsApproval(request) = params.gate("restarts the database") else {
//!     unreachable!()
//! };
//! assert_eq!((request.count, request.timeout_seconds), (1, Some(3600)));
//! assert_eq!(request.on_timeout, ApprovalTimeout::Fail);
//! ```

use schemars::JsonSchema;
use serde::Deserialize;

use crate::types::{ApprovalRequest, ApprovalTimeout, Gate};

/// Who must approve a step before it starts, how many, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalParams {
    /// Who may approve: user names, and groups as `group:<name>`. Empty: anyone the cluster
    /// lets create an Approval in the group's namespace.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub approvers: Vec<String>,
    /// How many different approvers must approve (default 1).
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub count: u32,
    /// How long to wait, in seconds from when the step began to wait; no limit when absent.
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<u32>,
    /// At the timeout: `Fail` (the default) fails the step, `Start` starts it.
    #[serde(default)]
    pub on_timeout: ApprovalTimeout,
    /// Why, for the approvers (by default the plugin's own words).
    #[serde(default)]
    pub reason: Option<String>,
}

fn one() -> u32 {
    1
}

impl ApprovalParams {
    /// The gate answer: approval as these parameters say, for `reason` unless they give one.
    pub fn gate(&self, reason: &str) -> Gate {
        let mut request = ApprovalRequest::new(self.reason.as_deref().unwrap_or(reason))
            .approvers(self.approvers.iter().cloned())
            .count(self.count.max(1));
        request.timeout_seconds = self.timeout_seconds;
        request.on_timeout = self.on_timeout;
        Gate::NeedsApproval(request)
    }
}

//! `Approval`: a person's decision on one step of a Workflow in one run of its group, and
//! where a waiting step stands.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An approval of one step of a Workflow, in one run of its group: the step starts once its
/// plugin's gate has the approvals it asked for. Who may create one is the cluster's RBAC
/// (`create` on `approvals`); that `spec.approver` is the user who created it is checked at
/// admission by the ValidatingAdmissionPolicy in `crds/approval-policy.yaml`; and it cannot be
/// changed afterwards.
#[derive(CustomResource, KubeSchema, Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "workflow.rxg456.cn",
    version = "v1alpha1",
    kind = "Approval",
    namespaced,
    shortname = "wfapproval",
    printcolumn = r#"{"name":"Workflow","type":"string","jsonPath":".spec.workflow"}"#,
    printcolumn = r#"{"name":"Step","type":"string","jsonPath":".spec.step"}"#,
    printcolumn = r#"{"name":"Run","type":"integer","jsonPath":".spec.run"}"#,
    printcolumn = r#"{"name":"Decision","type":"string","jsonPath":".spec.decision"}"#,
    printcolumn = r#"{"name":"Approver","type":"string","jsonPath":".spec.approver"}"#,
    printcolumn = r#"{"name":"Content","type":"string","priority":1,"jsonPath":".spec.digest"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("an Approval cannot be changed: delete it and create another"))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalSpec {
    /// The Workflow whose step it approves.
    #[schemars(length(min = 1, max = 253))]
    pub workflow: String,
    /// The UID of that Workflow: an Approval counts for the Workflow it was given for, not for
    /// another made later under the same name.
    #[serde(
        rename = "workflowUID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    #[schemars(length(max = 64))]
    pub workflow_uid: String,
    /// What it approves: the digest of what the step runs (`sha256:<hex>` of its command,
    /// image, environment, pod template and targets), as the waiting step's status shows it.
    /// An Approval of other content does not count.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 80))]
    pub digest: String,
    /// The step.
    #[schemars(length(min = 1, max = 63))]
    pub step: String,
    /// The run of the group it approves the step in (1 until the group is re-run).
    #[serde(default = "first_run")]
    #[schemars(range(min = 1))]
    pub run: u32,
    /// Who approves: the user who creates it (checked at admission).
    #[schemars(length(min = 1, max = 256))]
    pub approver: String,
    /// Groups of that user that it approves as (each checked at admission), for gates that
    /// name `group:<name>` approvers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub groups: Vec<String>,
    /// `Approve` (the default) or `Reject`: a rejection by an approver fails the step.
    #[serde(default)]
    pub decision: ApprovalDecision,
    /// Why, for the record.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub comment: String,
}

fn first_run() -> u32 {
    1
}

/// What an approver decided.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ApprovalDecision {
    #[default]
    Approve,
    Reject,
}

/// Where a step waiting for approval stands (`stepDetails.<step>.approval`).
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepApproval {
    /// Why its plugin asks for approval.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Who may approve (user names, `group:<name>`); empty: anyone allowed to create one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// How many different approvers must approve.
    pub required: u32,
    /// What an approval approves: the digest of what the step runs (`sha256:<hex>`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
    /// What the step runs, in one line: its command, image and targets.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content: String,
    /// The approvers whose approval counts, so far.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved_by: Vec<String>,
    /// When the step began to wait.
    pub since: Time,
    /// When the wait ends, if it has a limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Time>,
    /// What happens then: `Fail` or `Start`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub on_timeout: String,
}

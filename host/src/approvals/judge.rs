//! Steps whose plugin's gate asks for approval: which Approvals count, and what the step does
//! (start, wait, fail) given them and the time. Pure: the reconcile hands in the Approvals of
//! the step in the workflow's current run.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use workflow_model::{ApprovalRequest, ApprovalTimeout};

use crate::api::{Approval, ApprovalDecision, StepApproval, fmt_time};

/// An Approval of a step, as the plan reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    /// The Approval's name.
    pub name: String,
    pub approver: String,
    pub groups: Vec<String>,
    pub decision: ApprovalDecision,
    pub comment: String,
    /// When it was created (Unix seconds).
    pub created: i64,
}

impl Given {
    pub fn of(approval: &Approval) -> Self {
        let spec = &approval.spec;
        Given {
            name: approval.metadata.name.clone().unwrap_or_default(),
            approver: spec.approver.clone(),
            groups: spec.groups.clone(),
            decision: spec.decision,
            comment: spec.comment.clone(),
            created: approval
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(0, |t| t.0.as_second()),
        }
    }
}

/// The ValidatingAdmissionPolicy (and its binding) that makes `spec.approver` the user who
/// created an Approval (`crds/approval-policy.yaml`).
pub const POLICY: &str = "approvals.workflow.rxg456.cn";

/// The check of the policy that the policy must hold, so that an edited one is not trusted.
const APPROVER_RULE: &str = "object.spec.approver == request.userInfo.username";

/// Since when (Unix seconds) Approvals can be trusted: the policy and its binding, as they
/// are, were in force from then on. Otherwise why not.
pub type Trust = Result<i64, String>;

/// Whether `policy` and `binding` make approvers trustworthy, and since when.
pub fn trust_of(
    policy: Option<&ValidatingAdmissionPolicy>,
    binding: Option<&ValidatingAdmissionPolicyBinding>,
) -> Trust {
    let install = "(kubectl apply -k crds/)";
    let policy = policy.ok_or_else(|| {
        format!("the ValidatingAdmissionPolicy {POLICY}, which records who approves, is not installed {install}")
    })?;
    let spec = policy.spec.clone().unwrap_or_default();
    let checks = spec
        .validations
        .iter()
        .flatten()
        .any(|v| v.expression == APPROVER_RULE);
    if !checks || spec.failure_policy.as_deref().unwrap_or("Fail") != "Fail" {
        return Err(format!(
            "the ValidatingAdmissionPolicy {POLICY} no longer checks that spec.approver is the user who creates an Approval, with failurePolicy Fail {install}"
        ));
    }
    let binding = binding.ok_or_else(|| {
        format!("the ValidatingAdmissionPolicyBinding {POLICY} is not installed {install}")
    })?;
    let bound = binding.spec.as_ref().is_some_and(|b| {
        b.policy_name.as_deref() == Some(POLICY)
            && b.validation_actions.iter().flatten().any(|a| a == "Deny")
            && b.match_resources.is_none()
    });
    if !bound {
        return Err(format!(
            "the ValidatingAdmissionPolicyBinding {POLICY} does not deny what {POLICY} refuses everywhere {install}"
        ));
    }
    let created = |t: Option<&Time>| t.map_or(i64::MAX, |t| t.0.as_second());
    Ok(created(policy.metadata.creation_timestamp.as_ref())
        .max(created(binding.metadata.creation_timestamp.as_ref())))
}

/// The Approvals of a step that count under `trust`, and what to say of the others: one made
/// while the policy was not in force could name anyone as its approver.
pub fn trusted(given: Vec<Given>, trust: &Trust) -> (Vec<Given>, Option<String>) {
    match trust {
        Err(why) if given.is_empty() => {
            (given, Some(format!("approvals cannot be counted: {why}")))
        }
        Err(why) => (
            Vec::new(),
            Some(format!(
                "approvals cannot be counted: {why}; not counted: {}",
                names(given.iter())
            )),
        ),
        Ok(since) => {
            let (counted, before): (Vec<Given>, Vec<Given>) =
                given.into_iter().partition(|g| g.created >= *since);
            let note = (!before.is_empty()).then(|| {
                format!(
                    "not counted, created before the admission policy {POLICY} was in force: {}",
                    names(before.iter())
                )
            });
            (counted, note)
        }
    }
}

fn names<'a>(given: impl Iterator<Item = &'a Given>) -> String {
    given
        .map(|g| format!("{} ({})", g.approver, g.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the approvals decide for a step that asks for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// Approved (or started by its timeout): it starts, with this record.
    Start(StepApproval),
    /// An approver rejected it, or its timeout fails it: why.
    Refused(String),
    /// It waits: its record, what to tell, and when its wait times out (Unix seconds).
    Waiting(StepApproval, String, Option<i64>),
}

/// Whether `given` counts for a gate that names `approvers`: by one of them (a user named, or
/// a member of a group named as `group:<name>`), or by anyone when it names none.
fn counts(approvers: &[String], given: &Given) -> bool {
    approvers.is_empty()
        || approvers.iter().any(|a| match a.strip_prefix("group:") {
            Some(group) => given.groups.iter().any(|g| g == group),
            None => *a == given.approver,
        })
}

/// The approvers whose approval counts for `record`, in the order of `given`: what the status
/// of a step that started records, again at every reconcile (so that a reconcile on a cache
/// older than the start cannot lose it).
pub fn approved_by(record: &StepApproval, given: &[Given]) -> Vec<String> {
    let mut by = Vec::new();
    for g in given {
        if g.decision == ApprovalDecision::Approve
            && counts(&record.approvers, g)
            && !by.contains(&g.approver)
        {
            by.push(g.approver.clone());
        }
    }
    by
}

/// Decides a step `step` that asks for approval per `request`, waiting since `since`, given
/// the Approvals of it in its run, at `now` (Unix seconds).
pub fn judge(
    step: &str,
    request: &ApprovalRequest,
    since: i64,
    given: &[Given],
    now: i64,
) -> Judged {
    let deadline = request
        .timeout_seconds
        .map(|s| since.saturating_add(i64::from(s)));
    let at = |t: i64| Timestamp::from_second(t).map(Time).ok();
    let mut record = StepApproval {
        reason: request.reason.clone(),
        approvers: request.approvers.clone(),
        required: request.count.max(1),
        approved_by: Vec::new(),
        since: at(since).unwrap_or(Time(Timestamp::UNIX_EPOCH)),
        deadline: deadline.and_then(at),
        on_timeout: match request.on_timeout {
            ApprovalTimeout::Fail => "Fail".into(),
            ApprovalTimeout::Start => "Start".into(),
        },
    };
    let (counted, ignored): (Vec<&Given>, Vec<&Given>) =
        given.iter().partition(|g| counts(&request.approvers, g));
    if let Some(no) = counted
        .iter()
        .find(|g| g.decision == ApprovalDecision::Reject)
    {
        let why = if no.comment.is_empty() {
            String::new()
        } else {
            format!(": {}", no.comment)
        };
        return Judged::Refused(format!(
            "step {step} was rejected by {} (Approval {}){why}",
            no.approver, no.name
        ));
    }
    record.approved_by = approved_by(&record, given);
    let have = u32::try_from(record.approved_by.len()).unwrap_or(u32::MAX);
    if have >= record.required {
        return Judged::Start(record);
    }
    if let Some(deadline) = deadline.filter(|d| now >= *d) {
        let timeout = request.timeout_seconds.unwrap_or(0);
        return match request.on_timeout {
            ApprovalTimeout::Fail => Judged::Refused(format!(
                "step {step} was not approved within {timeout}s ({have} of {} approvals by {}); its gate fails it then",
                record.required,
                fmt_time(deadline)
            )),
            ApprovalTimeout::Start => Judged::Start(record),
        };
    }
    let who = if request.approvers.is_empty() {
        "anyone allowed to create Approvals".to_string()
    } else {
        request.approvers.join(", ")
    };
    let mut message = format!(
        "step {step} waits for approval ({have} of {}, by {who})",
        record.required
    );
    if !request.reason.is_empty() {
        message.push_str(&format!(": {}", request.reason));
    }
    if let Some(deadline) = deadline {
        let then = match request.on_timeout {
            ApprovalTimeout::Fail => "fails",
            ApprovalTimeout::Start => "starts",
        };
        message.push_str(&format!("; it {then} at {}", fmt_time(deadline)));
    }
    let ignored: Vec<String> = ignored
        .iter()
        .map(|g| format!("{} ({})", g.approver, g.name))
        .collect();
    if !ignored.is_empty() {
        message.push_str(&format!(
            "; not an approver, ignored: {}",
            ignored.join(", ")
        ));
    }
    Judged::Waiting(record, message, deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(approver: &str, groups: &[&str], decision: ApprovalDecision) -> Given {
        Given {
            name: format!("a-{approver}"),
            approver: approver.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            decision,
            comment: "looked at it".into(),
            created: NOW,
        }
    }

    fn policy_objects() -> (ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding) {
        let docs: Vec<serde_json::Value> = include_str!("../../../crds/approval-policy.yaml")
            .split("\n---\n")
            .map(|d| serde_saphyr::from_str(d).expect("YAML"))
            .collect();
        let mut policy: ValidatingAdmissionPolicy =
            serde_json::from_value(docs[0].clone()).expect("the policy");
        let mut binding: ValidatingAdmissionPolicyBinding =
            serde_json::from_value(docs[1].clone()).expect("its binding");
        policy.metadata.creation_timestamp = Timestamp::from_second(NOW - 100).ok().map(Time);
        binding.metadata.creation_timestamp = Timestamp::from_second(NOW - 50).ok().map(Time);
        (policy, binding)
    }

    #[test]
    fn approvals_count_only_while_the_installed_policy_records_approvers() {
        let (policy, binding) = policy_objects();
        assert_eq!(trust_of(Some(&policy), Some(&binding)), Ok(NOW - 50));
        let Err(why) = trust_of(None, Some(&binding)) else {
            panic!("no policy, no trust");
        };
        assert!(
            why.contains("is not installed (kubectl apply -k crds/)"),
            "{why}"
        );
        assert!(trust_of(Some(&policy), None).is_err());
        let mut edited = policy.clone();
        if let Some(v) = edited.spec.as_mut().and_then(|s| s.validations.as_mut()) {
            v[0].expression = "true".into();
        }
        assert!(trust_of(Some(&edited), Some(&binding)).is_err());
        let mut warn_only = binding.clone();
        if let Some(b) = warn_only.spec.as_mut() {
            b.validation_actions = Some(vec!["Warn".into()]);
        }
        assert!(trust_of(Some(&policy), Some(&warn_only)).is_err());

        // Made before the binding existed: not counted, and said so.
        let mut early = given("alice", &[], ApprovalDecision::Approve);
        early.created = NOW - 60;
        let late = given("bob", &[], ApprovalDecision::Approve);
        let (counted, note) = trusted(vec![early.clone(), late.clone()], &Ok(NOW - 50));
        assert_eq!(counted, std::slice::from_ref(&late));
        assert_eq!(
            note.as_deref(),
            Some(
                "not counted, created before the admission policy approvals.workflow.rxg456.cn was in force: alice (a-alice)"
            )
        );
        let (counted, note) = trusted(vec![late], &Err("gone".into()));
        assert!(counted.is_empty());
        assert_eq!(
            note.as_deref(),
            Some("approvals cannot be counted: gone; not counted: bob (a-bob)")
        );
    }

    const NOW: i64 = 1_700_000_000;

    #[test]
    fn enough_approvers_named_or_in_a_group_named_start_the_step_and_are_recorded() {
        let request = ApprovalRequest::new("restarts the database")
            .approvers(["alice", "group:dba"])
            .count(2);
        let alice = given("alice", &[], ApprovalDecision::Approve);
        let Judged::Waiting(record, message, deadline) =
            judge("restart", &request, NOW, std::slice::from_ref(&alice), NOW)
        else {
            panic!("one of two approvals waits");
        };
        assert_eq!(record.approved_by, ["alice"]);
        assert_eq!(deadline, None);
        assert!(
            message.starts_with(
                "step restart waits for approval (1 of 2, by alice, group:dba): restarts the database"
            ),
            "{message}"
        );
        // Alice twice is still one approver; bob of group dba is the second.
        let bob = given("bob", &["dba"], ApprovalDecision::Approve);
        let Judged::Start(record) = judge(
            "restart",
            &request,
            NOW,
            &[alice.clone(), alice.clone(), bob],
            NOW,
        ) else {
            panic!("two approvers start it");
        };
        assert_eq!(record.approved_by, ["alice", "bob"]);
    }

    #[test]
    fn an_approval_by_someone_not_named_does_not_count_and_is_said_to_be_ignored() {
        let request = ApprovalRequest::new("").approvers(["alice"]);
        let mallory = given("mallory", &["dba"], ApprovalDecision::Approve);
        let Judged::Waiting(record, message, _) = judge("s", &request, NOW, &[mallory], NOW) else {
            panic!("mallory does not count");
        };
        assert!(record.approved_by.is_empty());
        assert!(
            message.ends_with("; not an approver, ignored: mallory (a-mallory)"),
            "{message}"
        );
        // A gate that names nobody takes anyone the cluster lets create an Approval.
        let anyone = ApprovalRequest::new("");
        let carol = given("carol", &[], ApprovalDecision::Approve);
        assert!(matches!(
            judge("s", &anyone, NOW, &[carol], NOW),
            Judged::Start(_)
        ));
    }

    #[test]
    fn a_rejection_by_an_approver_fails_the_step_but_not_one_by_anyone_else() {
        let request = ApprovalRequest::new("").approvers(["alice"]);
        let no = given("alice", &[], ApprovalDecision::Reject);
        assert_eq!(
            judge("s", &request, NOW, &[no], NOW),
            Judged::Refused("step s was rejected by alice (Approval a-alice): looked at it".into())
        );
        let stranger = given("eve", &[], ApprovalDecision::Reject);
        assert!(matches!(
            judge("s", &request, NOW, &[stranger], NOW),
            Judged::Waiting(..)
        ));
    }

    #[test]
    fn at_its_timeout_a_step_fails_or_starts_as_its_gate_said() {
        let fail = ApprovalRequest::new("").timeout_secs(60, ApprovalTimeout::Fail);
        let Judged::Waiting(record, message, deadline) = judge("s", &fail, NOW, &[], NOW + 59)
        else {
            panic!("waits before its timeout");
        };
        assert_eq!(deadline, Some(NOW + 60));
        assert_eq!(record.on_timeout, "Fail");
        assert!(
            message.contains("; it fails at 2023-11-14T22:14:20Z"),
            "{message}"
        );
        let Judged::Refused(why) = judge("s", &fail, NOW, &[], NOW + 60) else {
            panic!("fails at its timeout");
        };
        assert!(
            why.starts_with("step s was not approved within 60s (0 of 1 approvals"),
            "{why}"
        );
        let start = ApprovalRequest::new("").timeout_secs(60, ApprovalTimeout::Start);
        assert!(matches!(
            judge("s", &start, NOW, &[], NOW + 61),
            Judged::Start(r) if r.approved_by.is_empty()
        ));
    }
}

//! Steps whose plugin's gate asks for approval: which Approvals count, and what the step does
//! (start, wait, fail) given them and the time. Pure: the reconcile hands in the Approvals of
//! the step in the workflow's current run.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
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
    /// The UID of the Workflow it was given for.
    pub workflow_uid: String,
    /// The digest of what it approves.
    pub digest: String,
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
            workflow_uid: spec.workflow_uid.clone(),
            digest: spec.digest.clone(),
        }
    }
}

/// What a waiting step asks to be approved: the Workflow (by UID) and what the step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked<'a> {
    /// The UID of the step's Workflow.
    pub workflow_uid: &'a str,
    /// The digest of what the step runs.
    pub digest: &'a str,
    /// The same, in one line for a person.
    pub content: &'a str,
}

impl Asked<'_> {
    /// Whether `given` was given for this: for this Workflow (not one made before it under
    /// the same name), for this content, and once the step asked (at `since`).
    fn answered_by(&self, given: &Given, since: i64) -> bool {
        given.workflow_uid == self.workflow_uid
            && given.digest == self.digest
            && given.created >= since
    }
}

/// The ValidatingAdmissionPolicy (and its binding) that makes `spec.approver` the user who
/// created an Approval (`crds/approval-policy.yaml`).
pub const POLICY: &str = "approvals.workflow.rxg456.cn";

/// The policy and its binding as shipped (`crds/approval-policy.yaml`): the operator trusts
/// Approvals only while the API server holds exactly these.
const SHIPPED: &str = include_str!("../../../crds/approval-policy.yaml");

/// Since when (Unix seconds) Approvals can be trusted: the policy and its binding, as they
/// are, were in force from then on. Otherwise why not.
pub type Trust = Result<i64, String>;

/// The specs of the shipped policy and binding, as JSON without empty values.
fn shipped() -> &'static (serde_json::Value, serde_json::Value) {
    static SPECS: std::sync::LazyLock<(serde_json::Value, serde_json::Value)> =
        std::sync::LazyLock::new(|| {
            let mut docs = SHIPPED
                .split("\n---\n")
                .filter_map(|d| serde_saphyr::from_str::<serde_json::Value>(d).ok())
                .map(|d| without_empty(d["spec"].clone()));
            let policy = docs.next().unwrap_or_default();
            let binding = docs.next().unwrap_or_default();
            (policy, binding)
        });
    &SPECS
}

/// `value` without nulls, empty lists and empty objects (at any depth): what the API server
/// may leave out or write out without changing the meaning.
fn without_empty(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, without_empty(v)))
                .filter(|(_, v)| !is_empty(v))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_empty).collect()),
        other => other,
    }
}

fn is_empty(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Null => true,
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The first place (a JSON path) where `have` differs from `want`, if any.
fn first_difference(
    have: &serde_json::Value,
    want: &serde_json::Value,
    at: &str,
) -> Option<String> {
    use serde_json::Value;
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => {
            w.keys()
                .chain(h.keys())
                .find_map(|k| match (h.get(k), w.get(k)) {
                    (Some(hv), Some(wv)) => first_difference(hv, wv, &format!("{at}.{k}")),
                    _ => Some(format!("{at}.{k}")),
                })
        }
        (Value::Array(h), Value::Array(w)) if h.len() == w.len() => h
            .iter()
            .zip(w)
            .enumerate()
            .find_map(|(i, (hv, wv))| first_difference(hv, wv, &format!("{at}[{i}]"))),
        _ => (have != want).then(|| at.to_string()),
    }
}

/// When `meta`'s object last changed as far as the API server records it: its creation, or
/// the latest write of any field manager to it (its status aside).
fn last_changed(meta: &ObjectMeta) -> i64 {
    let created = meta
        .creation_timestamp
        .as_ref()
        .map_or(i64::MAX, |t| t.0.as_second());
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|f| f.subresource.as_deref().unwrap_or_default().is_empty())
        .filter_map(|f| f.time.as_ref().map(|t| t.0.as_second()))
        .fold(created, i64::max)
}

/// Whether `policy` and `binding` make approvers trustworthy, and since when: only while both
/// are exactly as shipped (every validation, the match constraints and conditions, the failure
/// policy, the binding's actions and scope), and only from their last change on, so that an
/// Approval made while they were weakened never counts, even once they are restored.
pub fn trust_of(
    policy: Option<&ValidatingAdmissionPolicy>,
    binding: Option<&ValidatingAdmissionPolicyBinding>,
) -> Trust {
    let install = "(kubectl apply -k crds/)";
    let policy = policy.ok_or_else(|| {
        format!("the ValidatingAdmissionPolicy {POLICY}, which records who approves, is not installed {install}")
    })?;
    let binding = binding.ok_or_else(|| {
        format!("the ValidatingAdmissionPolicyBinding {POLICY} is not installed {install}")
    })?;
    let (want_policy, want_binding) = shipped();
    let have =
        |spec: serde_json::Result<serde_json::Value>| without_empty(spec.unwrap_or_default());
    if let Some(at) = first_difference(
        &have(serde_json::to_value(&policy.spec)),
        want_policy,
        "spec",
    ) {
        return Err(format!(
            "the ValidatingAdmissionPolicy {POLICY} is not as shipped (it differs at {at}), so it may not check that spec.approver is the user who creates an Approval {install}"
        ));
    }
    if let Some(at) = first_difference(
        &have(serde_json::to_value(&binding.spec)),
        want_binding,
        "spec",
    ) {
        return Err(format!(
            "the ValidatingAdmissionPolicyBinding {POLICY} is not as shipped (it differs at {at}), so it may not deny what {POLICY} refuses everywhere {install}"
        ));
    }
    Ok(last_changed(&policy.metadata).max(last_changed(&binding.metadata)))
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

/// `sha256:` and the first 12 hex digits of `digest`: enough to tell contents apart in a
/// message.
pub fn short(digest: &str) -> &str {
    workflow_model::text::prefix(digest, "sha256:".len() + 12)
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

/// The approvers whose approval counts for `record` of a step of the Workflow `workflow_uid`,
/// in the order of `given`: what the status of a step that started records, again at every
/// reconcile (so that a reconcile on a cache older than the start cannot lose it). A record
/// written before approvals named their content keeps the approvers of any content.
pub fn approved_by(record: &StepApproval, workflow_uid: &str, given: &[Given]) -> Vec<String> {
    let asked = Asked {
        workflow_uid,
        digest: &record.digest,
        content: &record.content,
    };
    let since = record.since.0.as_second();
    let given: Vec<Given> = given
        .iter()
        .filter(|g| record.digest.is_empty() || asked.answered_by(g, since))
        .cloned()
        .collect();
    approvers(record, &given)
}

/// The approvers of `given` whose approval counts for `record`, each once.
fn approvers(record: &StepApproval, given: &[Given]) -> Vec<String> {
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

/// Decides a step `step` that asks for approval per `request` of what `asked` says, waiting
/// since `since`, given the Approvals of it in its run, at `now` (Unix seconds). Only
/// Approvals given for `asked`, after `since`, count.
pub fn judge(
    step: &str,
    request: &ApprovalRequest,
    asked: Asked<'_>,
    since: i64,
    given: &[Given],
    now: i64,
) -> Judged {
    let deadline = request
        .timeout_seconds
        .map(|s| since.saturating_add(i64::from(s)));
    let mut record = record(request, asked, since, deadline);
    let (given, other): (Vec<Given>, Vec<Given>) = given
        .iter()
        .cloned()
        .partition(|g| asked.answered_by(g, since));
    let given = given.as_slice();
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
    record.approved_by = approvers(&record, given);
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
    let mut message = waiting(step, request, asked, (have, record.required), deadline);
    if !ignored.is_empty() {
        message.push_str(&format!(
            "; not an approver, ignored: {}",
            names(ignored.into_iter())
        ));
    }
    if !other.is_empty() {
        message.push_str(&format!(
            "; not counted, given for other content, another Workflow of this name or before the step asked: {}",
            names(other.iter())
        ));
    }
    Judged::Waiting(record, message, deadline)
}

/// The step's approval as its status records it, with no approver counted yet.
fn record(
    request: &ApprovalRequest,
    asked: Asked<'_>,
    since: i64,
    deadline: Option<i64>,
) -> StepApproval {
    let at = |t: i64| Timestamp::from_second(t).map(Time).ok();
    StepApproval {
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
        digest: asked.digest.to_string(),
        content: asked.content.to_string(),
    }
}

/// What a step waiting for approval says: how many of how many, by whom, why, until when,
/// and what it runs.
fn waiting(
    step: &str,
    request: &ApprovalRequest,
    asked: Asked<'_>,
    (have, required): (u32, u32),
    deadline: Option<i64>,
) -> String {
    let who = if request.approvers.is_empty() {
        "anyone allowed to create Approvals".to_string()
    } else {
        request.approvers.join(", ")
    };
    let mut message = format!("step {step} waits for approval ({have} of {required}, by {who})");
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
    if !asked.content.is_empty() {
        message.push_str(&format!(
            "; runs {} (content {})",
            asked.content,
            short(asked.digest)
        ));
    }
    message
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
            workflow_uid: ASKED.workflow_uid.into(),
            digest: ASKED.digest.into(),
        }
    }

    const ASKED: Asked<'static> = Asked {
        workflow_uid: "uid-w",
        digest: "sha256:0123456789abcdef",
        content: "`reboot` in workflow-step:dev with 1 target: node-1 (10.0.0.1)",
    };

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
        // Every part counts, not only the approver's rule: the groups' rule, the match
        // constraints, match conditions, the failure policy, the binding's scope.
        let weakened: [fn(&mut ValidatingAdmissionPolicy); 4] = [
            |p| {
                p.spec.as_mut().unwrap().validations.as_mut().unwrap().pop();
            },
            |p| {
                let rules = &mut p.spec.as_mut().unwrap().match_constraints.as_mut().unwrap();
                rules.resource_rules.as_mut().unwrap()[0].operations = Some(vec!["UPDATE".into()]);
            },
            |p| {
                p.spec.as_mut().unwrap().match_conditions = Some(vec![
                    k8s_openapi::api::admissionregistration::v1::MatchCondition {
                        name: "not-mallory".into(),
                        expression: "request.userInfo.username != 'mallory'".into(),
                    },
                ]);
            },
            |p| p.spec.as_mut().unwrap().failure_policy = Some("Ignore".into()),
        ];
        for weaken in weakened {
            let mut p = policy.clone();
            weaken(&mut p);
            let Err(why) = trust_of(Some(&p), Some(&binding)) else {
                panic!("a weakened policy is trusted: {:?}", p.spec);
            };
            assert!(
                why.contains("is not as shipped (it differs at spec."),
                "{why}"
            );
        }
        let mut narrowed = binding.clone();
        narrowed.spec.as_mut().unwrap().match_resources = Some(Default::default());
        narrowed
            .spec
            .as_mut()
            .unwrap()
            .match_resources
            .as_mut()
            .unwrap()
            .namespace_selector = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some([("audited".to_string(), "yes".to_string())].into()),
                ..Default::default()
            },
        );
        let Err(why) = trust_of(Some(&policy), Some(&narrowed)) else {
            panic!("a narrowed binding is trusted");
        };
        assert!(why.contains("differs at spec.matchResources"), "{why}");
        // Weakened, then restored: trusted again only from the restoring write on (the API
        // server's record of the last write), so what was made in between never counts.
        let mut restored = policy.clone();
        restored.metadata.managed_fields = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
                manager: Some("kubectl".into()),
                operation: Some("Update".into()),
                time: Timestamp::from_second(NOW - 10).ok().map(Time),
                ..Default::default()
            },
            // The API server's own status write does not count as a change.
            k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
                manager: Some("kube-apiserver".into()),
                subresource: Some("status".into()),
                time: Timestamp::from_second(NOW).ok().map(Time),
                ..Default::default()
            },
        ]);
        assert_eq!(trust_of(Some(&restored), Some(&binding)), Ok(NOW - 10));

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
        let Judged::Waiting(record, message, deadline) = judge(
            "restart",
            &request,
            ASKED,
            NOW,
            std::slice::from_ref(&alice),
            NOW,
        ) else {
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
            ASKED,
            NOW,
            &[alice.clone(), alice.clone(), bob],
            NOW,
        ) else {
            panic!("two approvers start it");
        };
        assert_eq!(record.approved_by, ["alice", "bob"]);
    }

    #[test]
    fn only_an_approval_of_this_workflow_and_content_given_after_the_step_asked_counts() {
        let request = ApprovalRequest::new("reboots").approvers(["alice"]);
        let alice = given("alice", &[], ApprovalDecision::Approve);
        let other = |f: fn(&mut Given)| {
            let mut g = alice.clone();
            f(&mut g);
            g
        };
        let not_counted = [
            // Given for the Workflow of this name that was deleted and made again.
            other(|g| g.workflow_uid = "uid-old".into()),
            // Given for other content: another command, image, template or targets.
            other(|g| g.digest = "sha256:fedcba9876543210".into()),
            // Given before the step asked.
            other(|g| g.created = NOW - 1),
            // Given with neither (an Approval made without `approve`).
            other(|g| {
                g.workflow_uid.clear();
                g.digest.clear();
            }),
        ];
        for stale in &not_counted {
            let Judged::Waiting(record, message, _) = judge(
                "run",
                &request,
                ASKED,
                NOW,
                std::slice::from_ref(stale),
                NOW + 5,
            ) else {
                panic!("{stale:?} must not count");
            };
            assert!(record.approved_by.is_empty(), "{stale:?}");
            assert!(
                message.ends_with(
                    "; not counted, given for other content, another Workflow of this name or before the step asked: alice (a-alice)"
                ),
                "{message}"
            );
            // What it asks to approve is in the message and the record.
            assert!(
                message.contains("; runs `reboot` in workflow-step:dev with 1 target: node-1 (10.0.0.1) (content sha256:0123456789ab)"),
                "{message}"
            );
            assert_eq!(record.digest, ASKED.digest);
        }
        // Nor does a rejection given for something else veto it.
        let stale_no = other(|g| {
            g.digest = "sha256:fedcba9876543210".into();
            g.decision = ApprovalDecision::Reject;
        });
        assert!(matches!(
            judge("run", &request, ASKED, NOW, &[stale_no], NOW + 5),
            Judged::Waiting(..)
        ));
        assert!(matches!(
            judge("run", &request, ASKED, NOW, &[alice], NOW + 5),
            Judged::Start(_)
        ));
    }

    #[test]
    fn an_approval_by_someone_not_named_does_not_count_and_is_said_to_be_ignored() {
        let request = ApprovalRequest::new("").approvers(["alice"]);
        let mallory = given("mallory", &["dba"], ApprovalDecision::Approve);
        let Judged::Waiting(record, message, _) = judge("s", &request, ASKED, NOW, &[mallory], NOW)
        else {
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
            judge("s", &anyone, ASKED, NOW, &[carol], NOW),
            Judged::Start(_)
        ));
    }

    #[test]
    fn a_rejection_by_an_approver_fails_the_step_but_not_one_by_anyone_else() {
        let request = ApprovalRequest::new("").approvers(["alice"]);
        let no = given("alice", &[], ApprovalDecision::Reject);
        assert_eq!(
            judge("s", &request, ASKED, NOW, &[no], NOW),
            Judged::Refused("step s was rejected by alice (Approval a-alice): looked at it".into())
        );
        let stranger = given("eve", &[], ApprovalDecision::Reject);
        assert!(matches!(
            judge("s", &request, ASKED, NOW, &[stranger], NOW),
            Judged::Waiting(..)
        ));
    }

    #[test]
    fn at_its_timeout_a_step_fails_or_starts_as_its_gate_said() {
        let fail = ApprovalRequest::new("").timeout_secs(60, ApprovalTimeout::Fail);
        let Judged::Waiting(record, message, deadline) =
            judge("s", &fail, ASKED, NOW, &[], NOW + 59)
        else {
            panic!("waits before its timeout");
        };
        assert_eq!(deadline, Some(NOW + 60));
        assert_eq!(record.on_timeout, "Fail");
        assert!(
            message.contains("; it fails at 2023-11-14T22:14:20Z"),
            "{message}"
        );
        let Judged::Refused(why) = judge("s", &fail, ASKED, NOW, &[], NOW + 60) else {
            panic!("fails at its timeout");
        };
        assert!(
            why.starts_with("step s was not approved within 60s (0 of 1 approvals"),
            "{why}"
        );
        let start = ApprovalRequest::new("").timeout_secs(60, ApprovalTimeout::Start);
        assert!(matches!(
            judge("s", &start, ASKED, NOW, &[], NOW + 61),
            Judged::Start(r) if r.approved_by.is_empty()
        ));
    }
}

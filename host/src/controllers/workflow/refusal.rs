//! A step pod the API server refused to create: admission (Pod Security, ResourceQuota,
//! LimitRange, a ValidatingAdmissionPolicy or webhook) or validation said no. A refusal is the
//! step's outcome, not a failed reconcile: it ends in the Workflow's condition and an Event
//! that quote it. One that clears by itself (a full quota empties as pods finish) keeps the
//! step waiting and is tried again with backoff; any other fails the step.

/// Why the API server would not create a step's pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRefusal {
    /// The API server's message, as it gave it.
    pub message: String,
    /// Whether it clears by itself, so the step waits and the create is tried again.
    pub clears_by_itself: bool,
}

impl PodRefusal {
    /// The refusal in an API error, if it is one: 400 (bad request, a webhook's denial), 403
    /// (forbidden: admission, quota) or 422 (invalid). Any other error (the API server
    /// unreachable, a timeout, a conflict) is no refusal and fails the reconcile, which is
    /// retried.
    pub fn of(error: &kube::Error) -> Option<PodRefusal> {
        match error {
            kube::Error::Api(e) if matches!(e.code, 400 | 403 | 422) => {
                Some(PodRefusal::new(&e.message))
            }
            _ => None,
        }
    }

    /// The refusal of a step whose pod (or its targets' ConfigMap) has a name someone else
    /// took: an object the operator did not make, whatever its ownerReferences claim. It
    /// clears once that object is deleted; until then the step waits, saying so.
    pub fn name_taken(kind: &str, name: &str) -> PodRefusal {
        PodRefusal {
            message: format!(
                "{kind} {name} exists and was not made by the operator for this step (it carries no signature of the operator's): it is not used; delete it to let the step start"
            ),
            clears_by_itself: true,
        }
    }

    /// A refusal with `message`, classified by what it says.
    pub fn new(message: &str) -> PodRefusal {
        PodRefusal {
            message: message.to_string(),
            clears_by_itself: clears_by_itself(message),
        }
    }
}

/// Whether a refusal clears without anyone changing the group: a quota that is full now
/// (`exceeded quota`), one whose usage the quota controller has not counted yet (`status
/// unknown for quota`), or the operator's own permission missing while an admin fixes its
/// RBAC (`cannot create resource`). A quota that requires what the pod does not give (`must
/// specify limits`) and every policy refusal stay until someone changes something.
fn clears_by_itself(message: &str) -> bool {
    [
        "exceeded quota",
        "status unknown for quota",
        "cannot create resource",
    ]
    .iter()
    .any(|clue| message.contains(clue))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, "Forbidden")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn a_full_quota_clears_by_itself_and_a_policy_refusal_does_not() {
        let quota = PodRefusal::of(&api_error(
            403,
            "pods \"p\" is forbidden: exceeded quota: none, requested: pods=1, used: pods=0, limited: pods=0",
        ))
        .expect("a refusal");
        assert!(quota.clears_by_itself);
        assert!(quota.message.contains("exceeded quota: none"));
        let restricted = PodRefusal::of(&api_error(
            403,
            "pods \"p\" is forbidden: violates PodSecurity \"restricted:latest\": runAsNonRoot != true",
        ))
        .expect("a refusal");
        assert!(!restricted.clears_by_itself);
        let denied = PodRefusal::of(&api_error(
            422,
            "pods \"p\" is forbidden: ValidatingAdmissionPolicy 'no-steps' denied request",
        ))
        .expect("a refusal");
        assert!(!denied.clears_by_itself);
        let limits =
            PodRefusal::new("pods \"p\" is forbidden: failed quota: q: must specify limits.cpu");
        assert!(!limits.clears_by_itself);
    }

    #[test]
    fn an_unreachable_api_server_or_a_conflict_is_no_refusal() {
        assert_eq!(PodRefusal::of(&api_error(409, "already exists")), None);
        assert_eq!(
            PodRefusal::of(&api_error(500, "etcdserver: request timed out")),
            None
        );
        assert_eq!(PodRefusal::of(&api_error(429, "too many requests")), None);
    }
}

//! What both controllers write for people and their tools: the `Succeeded` condition, the
//! conditions GitOps tools read derived from it, and the transitions published as Events (their
//! reasons are in [`super::reason`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;

use workflow_model::text::printable;

use crate::api::{
    CONDITION_READY, CONDITION_RECONCILING, CONDITION_STALLED, CONDITION_SUCCEEDED, ConditionStatus,
};

/// A change a user cares about, published as an Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub type_: EventType,
    pub reason: String,
    pub message: String,
    /// What the event is about (a step, a workflow type). Events with the same reason about
    /// different subjects stay separate instead of being counted as one series.
    pub subject: Option<String>,
    /// It happens once in the object's life (it finished): there is no series to fold it
    /// into, so it is created without going through the recorder's cache of recent events.
    pub once: bool,
}

impl Transition {
    /// A Normal event.
    pub fn normal(reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: EventType::Normal,
            reason: reason.into(),
            message: message.into(),
            subject: None,
            once: false,
        }
    }

    /// A Warning event.
    pub fn warning(reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: EventType::Warning,
            reason: reason.into(),
            message: message.into(),
            subject: None,
            once: false,
        }
    }

    /// The same transition, happening once in the object's life.
    pub fn once(mut self) -> Self {
        self.once = true;
        self
    }

    /// The same transition, about `subject`.
    pub fn about(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }
}

/// The `Succeeded` condition.
pub fn succeeded_condition(
    status: ConditionStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: CONDITION_SUCCEEDED.into(),
        status: status.as_str().into(),
        reason: reason.into(),
        message: printable(message, 32 * 1024),
        observed_generation: generation,
        last_transition_time: Time(now),
    }
}

/// Puts `new` into `conditions`, keeping the old transition time when its status is unchanged
/// (API conventions: `lastTransitionTime` moves only when `status` does).
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    if let Some(old) = conditions.iter_mut().find(|c| c.type_ == new.type_) {
        if old.status == new.status {
            new.last_transition_time = old.last_transition_time.clone();
        }
        *old = new;
    } else {
        conditions.push(new);
    }
}

/// Puts the `Succeeded` condition `new` into `conditions` ([`set_condition`]) with the
/// conditions kstatus reads derived from it ([`derive_kstatus_conditions`]). Every change of
/// `Succeeded` goes through here, so the two never disagree.
pub fn set_succeeded(conditions: &mut Vec<Condition>, new: Condition) {
    set_condition(conditions, new);
    derive_kstatus_conditions(conditions);
}

/// Sets the conditions kstatus reads (Flux and kpt wait with it) from the `Succeeded` condition
/// among `conditions`, with its reason, message and generation: `Succeeded=Unknown` (pending or
/// running, whatever it waits for) is `Reconciling=True` (kstatus: InProgress); `True` is
/// `Ready=True` (Current); `False` is `Stalled=True` and `Ready=False` (Failed). Those that do
/// not hold are removed: the status is written whole, so they disappear. A new one starts at
/// `Succeeded`'s transition time, so a status written before these conditions existed gets them
/// with the time its state began.
pub fn derive_kstatus_conditions(conditions: &mut Vec<Condition>) {
    let Some(from) = succeeded(conditions).cloned() else {
        return;
    };
    let derived = |type_: &str, status: ConditionStatus| Condition {
        type_: type_.into(),
        status: status.as_str().into(),
        ..from.clone()
    };
    let wanted = if from.status == ConditionStatus::True.as_str() {
        vec![derived(CONDITION_READY, ConditionStatus::True)]
    } else if from.status == ConditionStatus::False.as_str() {
        vec![
            derived(CONDITION_STALLED, ConditionStatus::True),
            derived(CONDITION_READY, ConditionStatus::False),
        ]
    } else {
        vec![derived(CONDITION_RECONCILING, ConditionStatus::True)]
    };
    let kstatus = [CONDITION_RECONCILING, CONDITION_READY, CONDITION_STALLED];
    conditions.retain(|c| {
        !kstatus.contains(&c.type_.as_str()) || wanted.iter().any(|w| w.type_ == c.type_)
    });
    for condition in wanted {
        set_condition(conditions, condition);
    }
}

/// The `Succeeded` condition among `conditions`.
pub fn succeeded(conditions: &[Condition]) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == CONDITION_SUCCEEDED)
}

/// The conditions beside `Succeeded` among `conditions`, as (type, status), each checked to
/// carry `Succeeded`'s reason and message: what the plans' tests compare.
#[cfg(test)]
pub fn kstatus_conditions(conditions: &[Condition]) -> Vec<(&str, &str)> {
    let from = succeeded(conditions).expect("a Succeeded condition");
    conditions
        .iter()
        .filter(|c| c.type_ != CONDITION_SUCCEEDED)
        .inspect(|c| {
            assert_eq!(
                (&c.reason, &c.message),
                (&from.reason, &from.message),
                "{} does not say what Succeeded says",
                c.type_
            );
        })
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::reason;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("a valid time")
    }

    #[test]
    fn the_transition_time_moves_only_when_the_status_does() {
        let mut conditions = Vec::new();
        let running = |t| {
            succeeded_condition(
                ConditionStatus::Unknown,
                reason::RUNNING,
                "1/2",
                None,
                at(t),
            )
        };
        set_condition(&mut conditions, running(10));
        set_condition(&mut conditions, running(20));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, Time(at(10)));
        set_condition(
            &mut conditions,
            succeeded_condition(
                ConditionStatus::True,
                reason::COMPLETED,
                "done",
                None,
                at(30),
            ),
        );
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].last_transition_time, Time(at(30)));
    }

    /// `conditions` as (type, status, reason, transition second), in order.
    fn summary(conditions: &[Condition]) -> Vec<(&str, &str, &str, i64)> {
        conditions
            .iter()
            .map(|c| {
                (
                    c.type_.as_str(),
                    c.status.as_str(),
                    c.reason.as_str(),
                    c.last_transition_time.0.as_second(),
                )
            })
            .collect()
    }

    #[test]
    fn succeeded_unknown_true_and_false_are_reconciling_ready_and_stalled_for_kstatus() {
        let mut conditions = Vec::new();
        let waiting = |reason: &str, t| {
            succeeded_condition(ConditionStatus::Unknown, reason, "why", Some(2), at(t))
        };
        set_succeeded(&mut conditions, waiting(reason::PAUSED, 10));
        assert_eq!(
            summary(&conditions),
            [
                ("Succeeded", "Unknown", "Paused", 10),
                ("Reconciling", "True", "Paused", 10),
            ]
        );
        assert!(conditions.iter().all(|c| c.message == "why"));
        assert!(conditions.iter().all(|c| c.observed_generation == Some(2)));
        // Another reason while still pending: same transition times, the new reason on both.
        set_succeeded(&mut conditions, waiting(reason::RUNNING, 20));
        assert_eq!(
            summary(&conditions),
            [
                ("Succeeded", "Unknown", "Running", 10),
                ("Reconciling", "True", "Running", 10),
            ]
        );

        let mut completed = conditions.clone();
        set_succeeded(
            &mut completed,
            succeeded_condition(
                ConditionStatus::True,
                reason::COMPLETED,
                "done",
                None,
                at(30),
            ),
        );
        assert_eq!(
            summary(&completed),
            [
                ("Succeeded", "True", "Completed", 30),
                ("Ready", "True", "Completed", 30),
            ]
        );

        let mut failed = conditions;
        set_succeeded(
            &mut failed,
            succeeded_condition(
                ConditionStatus::False,
                reason::STEP_FAILED,
                "boom",
                None,
                at(40),
            ),
        );
        assert_eq!(
            summary(&failed),
            [
                ("Succeeded", "False", "StepFailed", 40),
                ("Stalled", "True", "StepFailed", 40),
                ("Ready", "False", "StepFailed", 40),
            ]
        );
        assert!(failed.iter().all(|c| c.message == "boom"));
    }

    #[test]
    fn a_status_from_before_the_kstatus_conditions_gets_them_from_the_time_its_state_began() {
        let mut conditions = vec![succeeded_condition(
            ConditionStatus::False,
            reason::WORKFLOW_FAILED,
            "failed",
            Some(1),
            at(5),
        )];
        derive_kstatus_conditions(&mut conditions);
        assert_eq!(
            summary(&conditions),
            [
                ("Succeeded", "False", "WorkflowFailed", 5),
                ("Stalled", "True", "WorkflowFailed", 5),
                ("Ready", "False", "WorkflowFailed", 5),
            ]
        );
        // Without `Succeeded` there is nothing to derive from.
        let mut none = Vec::new();
        derive_kstatus_conditions(&mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn plugin_text_shown_to_people_has_its_control_characters_escaped() {
        let hostile = "step failed\n\u{1b}[2J\u{1b}]0;owned\u{7}done\u{0}";
        assert_eq!(
            printable(hostile, 1000),
            "step failed\\n\\u{1b}[2J\\u{1b}]0;owned\\u{7}done\\u{0}"
        );
        assert!(!printable(hostile, 1000).chars().any(char::is_control));
        assert_eq!(printable("检查网络 ok", 100), "检查网络 ok");
        let condition = succeeded_condition(
            ConditionStatus::False,
            reason::STEP_FAILED,
            &format!("{}\n", "x".repeat(40_000)),
            None,
            at(1),
        );
        assert!(condition.message.len() <= 32 * 1024 + "…".len());
        assert!(!condition.message.contains('\n'));
    }
}

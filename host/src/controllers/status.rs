//! What both controllers write for people: the `Succeeded` condition and the transitions
//! published as Events (their reasons are in [`super::reason`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;

use workflow_model::text::printable;

use crate::api::{CONDITION_SUCCEEDED, ConditionStatus};

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

/// The `Succeeded` condition among `conditions`.
pub fn succeeded(conditions: &[Condition]) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == CONDITION_SUCCEEDED)
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

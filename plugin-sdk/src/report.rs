//! The check-output convention: how a step reports a problem with one target.
//!
//! A step's command may succeed (exit code 0) and still report that some targets are not
//! fine. It says so in its termination message (its last output), one line per problem:
//!
//! ```text
//! FAIL <target>: <reason>
//! UNREACHABLE <target>: <reason>
//! ```
//!
//! - The keyword is the first word of the line (leading spaces ignored), in any case (`fail`,
//!   `Fail`, `FAIL:`); only `FAIL` and `UNREACHABLE` count, so ordinary output such as
//!   `Failed to ...` or `failures: 0` does not.
//! - The next word is the target's name; a `:` right after it is optional.
//! - The rest of the line, if any, is the reason.
//! - Any other line (`OK node-1`, logs) is ignored.
//!
//! The reading is the model's ([`workflow_model::report::read_problem`]), the one the
//! operator uses on the runner's report, and a [`Problem`] is a [`TargetResult`] borrowed
//! from the message it was read from.
//!
//! [`verdict`] applies it: a failed attempt fails with its exit code and message, as
//! [`default_verdict`] does; a successful one fails if it reported a
//! problem, naming each target, and is Completed otherwise.
//!
//! ```
//! use workflow_plugin_sdk::{report, StepOutcome, Verdict};
//!
//! let outcome = StepOutcome {
//!     succeeded: true,
//!     exit_code: Some(0),
//!     message: "OK node-1\nUNREACHABLE node-2: no route to host\n".into(),
//!     ..StepOutcome::default()
//! };
//! assert_eq!(
//!     report::verdict(&outcome),
//!     Verdict::Failed("node-2 unreachable: no route to host".into()),
//! );
//! ```

use crate::types::{StepOutcome, TargetResult, Verdict, default_verdict, quote};
use workflow_model::report::read_problem;

/// What kind of problem a line reports: [`ProblemKind::Failed`] (`FAIL <target>: <reason>`, a
/// check failed on the target) or [`ProblemKind::Unreachable`] (`UNREACHABLE <target>:
/// <reason>`, the target could not be reached). The model's
/// [`TargetOutcome`](crate::TargetOutcome): [`problems`] never reads one as `Ok`.
pub use workflow_model::report::TargetOutcome as ProblemKind;

/// One problem reported by a step's output: a [`TargetResult`] borrowed from the message.
///
/// It reads as a person would say it, `node-2 unreachable: no route to host`, and turns into
/// the owned [`TargetResult`] with [`to_result`](Problem::to_result).
///
/// ```
/// use workflow_plugin_sdk::report::{problems, ProblemKind};
///
/// let found = problems("UNREACHABLE node-2: no route to host");
/// assert_eq!(found[0].to_string(), "node-2 unreachable: no route to host");
/// assert_eq!(found[0].to_result().outcome, ProblemKind::Unreachable);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem<'a> {
    /// What kind of problem.
    pub kind: ProblemKind,
    /// The target it concerns; empty when the line named none.
    pub target: &'a str,
    /// Why, as written; possibly empty.
    pub reason: &'a str,
}

impl Problem<'_> {
    /// The problem as the model's owned [`TargetResult`].
    pub fn to_result(&self) -> TargetResult {
        TargetResult {
            name: self.target.to_owned(),
            outcome: self.kind,
            reason: self.reason.to_owned(),
        }
    }
}

impl<'a> From<&'a TargetResult> for Problem<'a> {
    fn from(result: &'a TargetResult) -> Self {
        Problem {
            kind: result.outcome,
            target: &result.name,
            reason: &result.reason,
        }
    }
}

impl std::fmt::Display for Problem<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let target = if self.target.is_empty() {
            "a target"
        } else {
            self.target
        };
        write!(f, "{target} {}", self.kind.word())?;
        if !self.reason.is_empty() {
            write!(f, ": {}", self.reason)?;
        }
        Ok(())
    }
}

/// The problems reported in `message`, in order (see the [module docs](self)).
///
/// ```
/// use workflow_plugin_sdk::report::{problems, ProblemKind};
///
/// let found = problems("checking...\nfail node-3: disk 97% full\nOK node-1");
/// assert_eq!(found.len(), 1);
/// assert_eq!((found[0].kind, found[0].target, found[0].reason), (ProblemKind::Failed, "node-3", "disk 97% full"));
/// ```
pub fn problems(message: &str) -> Vec<Problem<'_>> {
    message
        .lines()
        .filter_map(read_problem)
        .map(|(kind, target, reason)| Problem {
            kind,
            target,
            reason,
        })
        .collect()
}

/// Judges an attempt by the convention: non-success fails with its exit code and message;
/// success with reported problems fails naming each target; otherwise Completed.
pub fn verdict(outcome: &StepOutcome) -> Verdict {
    let verdict = default_verdict(outcome);
    if verdict != Verdict::Completed {
        return verdict;
    }
    let found = problems(&outcome.message);
    if found.is_empty() {
        return Verdict::Completed;
    }
    let reasons: Vec<String> = found.iter().map(ToString::to_string).collect();
    Verdict::Failed(quote(&reasons.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn succeeded(message: &str) -> StepOutcome {
        StepOutcome {
            succeeded: true,
            exit_code: Some(0),
            message: message.to_owned(),
            attempt: 1,
            duration_ms: 10,
            targets: None,
        }
    }

    #[test]
    fn success_without_problem_lines_is_completed() {
        let outcome = succeeded("OK node-1\nFailed to resolve mirror, using cache\nfailures: 0");
        assert_eq!(verdict(&outcome), Verdict::Completed);
    }

    #[test]
    fn problem_lines_fail_the_step_naming_each_target() {
        let outcome = succeeded("  fail node-1: disk full\nOK node-2\nUnreachable: node-3 timeout");
        assert_eq!(
            verdict(&outcome),
            Verdict::Failed("node-1 failed: disk full; node-3 unreachable: timeout".into())
        );
    }

    #[test]
    fn problem_line_forms_all_parse() {
        let cases = [
            ("FAIL node-1: a b", "node-1", "a b"),
            ("FAIL node-1 a b", "node-1", "a b"),
            ("FAIL node-1 : a", "node-1", "a"),
            ("FAIL node-1:a b", "node-1", "a b"),
            ("FAIL node-1", "node-1", ""),
            ("FAIL", "", ""),
        ];
        for (line, target, reason) in cases {
            let found = problems(line);
            assert_eq!(found.len(), 1, "{line}");
            assert_eq!(
                (found[0].target, found[0].reason),
                (target, reason),
                "{line}"
            );
        }
    }

    #[test]
    fn a_problem_without_target_still_fails() {
        assert_eq!(
            verdict(&succeeded("FAIL")),
            Verdict::Failed("a target failed".into())
        );
    }

    #[test]
    fn failed_attempt_reports_exit_code_and_message() {
        let outcome = StepOutcome {
            exit_code: Some(3),
            message: "FAIL node-1: x".into(),
            ..StepOutcome::default()
        };
        assert_eq!(
            verdict(&outcome),
            Verdict::Failed("exit code 3: FAIL node-1: x".into())
        );
    }
}

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

use crate::types::{StepOutcome, Verdict, default_verdict, quote};

/// What kind of problem a line reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// `FAIL <target>: <reason>`: a check failed on the target.
    Failed,
    /// `UNREACHABLE <target>: <reason>`: the target could not be reached.
    Unreachable,
}

/// One problem reported by a step's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem<'a> {
    /// What kind of problem.
    pub kind: ProblemKind,
    /// The target it concerns; empty when the line named none.
    pub target: &'a str,
    /// Why, as written; possibly empty.
    pub reason: &'a str,
}

impl std::fmt::Display for Problem<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let target = if self.target.is_empty() {
            "a target"
        } else {
            self.target
        };
        let what = match self.kind {
            ProblemKind::Failed => "failed",
            ProblemKind::Unreachable => "unreachable",
        };
        write!(f, "{target} {what}")?;
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
    message.lines().filter_map(problem).collect()
}

fn problem(line: &str) -> Option<Problem<'_>> {
    let line = line.trim();
    let (keyword, rest) = split_word(line);
    let keyword = keyword.strip_suffix(':').unwrap_or(keyword);
    let kind = if keyword.eq_ignore_ascii_case("fail") {
        ProblemKind::Failed
    } else if keyword.eq_ignore_ascii_case("unreachable") {
        ProblemKind::Unreachable
    } else {
        return None;
    };
    // The target ends at the first space or `:`; an optional `:` separates it from the reason.
    let end = rest
        .find(|c: char| c.is_whitespace() || c == ':')
        .unwrap_or(rest.len());
    let (target, reason) = rest.split_at(end);
    let reason = reason.trim_start();
    let reason = reason.strip_prefix(':').unwrap_or(reason).trim();
    Some(Problem {
        kind,
        target,
        reason,
    })
}

/// The first whitespace-separated word of `s` and what follows it, trimmed.
fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(char::is_whitespace) {
        Some(end) => (&s[..end], s[end..].trim()),
        None => (s, ""),
    }
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

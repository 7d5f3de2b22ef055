//! What happened on each target, and the termination message that carries it to the plugin.
//!
//! The message is the model's report (`workflow_model::report`, which writes and reads its
//! lines): one `FAIL <target>: <reason>` or `UNREACHABLE <target>: <reason>` line per problem,
//! which the plugin SDK's check-output convention and the operator read, and `OK <target>`
//! lines for the others. The kubelet keeps at most 4096 bytes of it, so the message is composed
//! to fit: a summary line first (counts of every outcome), then every problem, then as many `OK`
//! lines as still fit.

use std::fmt::Write as _;
use std::time::Duration;

use workflow_model::report::{TargetOutcome, ok_line, problem_line, summary_line};
use workflow_model::text::{self, Marker};

/// The kubelet keeps this much of a termination message; a little is left for its own use.
pub const MESSAGE_BUDGET: usize = 4000;
/// A problem line's reason is cut to this many bytes, so that many problems fit.
const REASON_BUDGET: usize = 200;

/// How a target's run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The command exited with 0.
    Succeeded,
    /// The command ran and exited with another code.
    Exited(u32),
    /// The command was killed by a signal (as the remote side reported it).
    Killed(String),
    /// The command was still running at the command timeout; its session was closed.
    TimedOut(Duration),
    /// The command never ran: no connection, no trusted host key, or no login.
    Unreachable(String),
    /// A check the runner made itself failed, for this reason (`--node-ready`).
    CheckFailed(String),
}

/// The result of one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetResult {
    /// The target's name, as in the group's `spec.targets`.
    pub name: String,
    pub outcome: Outcome,
    /// From the start of the connection to the end of the command.
    pub duration: Duration,
    /// The last bytes of the command's output (stdout and stderr as they arrived).
    pub tail: String,
}

impl TargetResult {
    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Succeeded
    }

    /// The report line of this target, its reason cut to [`REASON_BUDGET`].
    pub fn line(&self) -> String {
        let secs = self.duration.as_secs_f64();
        let with_last_line = |what: String| {
            let last = last_line(&self.tail);
            if last.is_empty() {
                what
            } else {
                format!("{what}: {last}")
            }
        };
        let (outcome, reason) = match &self.outcome {
            Outcome::Succeeded => return ok_line(&self.name, self.duration),
            Outcome::Unreachable(why) => (TargetOutcome::Unreachable, text::fold(why)),
            Outcome::CheckFailed(why) => (TargetOutcome::Failed, text::fold(why)),
            Outcome::Exited(code) => (
                TargetOutcome::Failed,
                with_last_line(format!("exit code {code} after {secs:.2} s")),
            ),
            Outcome::Killed(signal) => (
                TargetOutcome::Failed,
                with_last_line(format!("killed by signal {signal} after {secs:.2} s")),
            ),
            Outcome::TimedOut(limit) => (
                TargetOutcome::Failed,
                with_last_line(format!("timed out after {} s", limit.as_secs())),
            ),
        };
        problem_line(&self.name, outcome, &cut(&reason, REASON_BUDGET))
    }
}

/// Counts of each kind of outcome.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub ok: u32,
    pub failed: u32,
    pub unreachable: u32,
}

impl Counts {
    pub fn of(results: &[TargetResult]) -> Self {
        results
            .iter()
            .fold(Counts::default(), |mut counts, result| {
                match result.outcome {
                    Outcome::Succeeded => counts.ok += 1,
                    Outcome::Unreachable(_) => counts.unreachable += 1,
                    _ => counts.failed += 1,
                }
                counts
            })
    }

    pub fn total(&self) -> u32 {
        self.ok + self.failed + self.unreachable
    }
}

/// The termination message for `results`, at most [`MESSAGE_BUDGET`] bytes: the summary line,
/// every problem that fits, then the `OK` lines that fit, each omission counted on a last line.
pub fn message(results: &[TargetResult]) -> String {
    let counts = Counts::of(results);
    let mut out = summary_line(counts.ok, counts.failed, counts.unreachable);
    out.push('\n');
    // Room for the closing line that counts what did not fit.
    let budget = MESSAGE_BUDGET - 64;
    let problems = results.iter().filter(|r| !r.is_ok());
    let oks = results.iter().filter(|r| r.is_ok());
    let mut left_out = (0, 0);
    for result in problems {
        let line = result.line();
        if out.len() + line.len() < budget {
            let _ = writeln!(out, "{line}");
        } else {
            left_out.0 += 1;
        }
    }
    for result in oks {
        let line = result.line();
        if left_out.0 == 0 && out.len() + line.len() < budget {
            let _ = writeln!(out, "{line}");
        } else {
            left_out.1 += 1;
        }
    }
    match left_out {
        (0, 0) => {}
        (0, ok) => {
            let _ = writeln!(out, "({ok} more ok targets not listed)");
        }
        (problems, ok) => {
            let _ = writeln!(
                out,
                "({problems} more problems and {ok} ok targets not listed: see the step's log)"
            );
        }
    }
    out
}

/// The last non-empty line of `text`, trimmed.
fn last_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty())
        .unwrap_or("")
}

/// `text` cut to at most `max` bytes (the marker included) at a character boundary, marked
/// with `...` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    text::truncate(text, max.saturating_sub(3), Marker::Dots).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, outcome: Outcome, tail: &str) -> TargetResult {
        TargetResult {
            name: name.to_owned(),
            outcome,
            duration: Duration::from_millis(1250),
            tail: tail.to_owned(),
        }
    }

    #[test]
    fn a_failed_command_is_reported_with_its_exit_code_and_last_output_line() {
        let line = result("node-2", Outcome::Exited(3), "checking\ndisk 97% full\n\n").line();
        assert_eq!(line, "FAIL node-2: exit code 3 after 1.25 s: disk 97% full");
    }

    #[test]
    fn a_target_never_reached_is_unreachable_with_the_reason_on_one_line() {
        let line = result(
            "node-3",
            Outcome::Unreachable("connect 10.0.0.3:22:\nconnection refused".into()),
            "",
        )
        .line();
        assert_eq!(
            line,
            "UNREACHABLE node-3: connect 10.0.0.3:22: connection refused"
        );
    }

    #[test]
    fn a_timeout_names_the_limit() {
        let line = result("node-1", Outcome::TimedOut(Duration::from_secs(5)), "").line();
        assert_eq!(line, "FAIL node-1: timed out after 5 s");
    }

    #[test]
    fn the_message_counts_every_outcome_and_lists_problems_before_successes() {
        let results = [
            result("node-1", Outcome::Succeeded, "fine"),
            result("node-2", Outcome::Exited(1), "no"),
            result("node-3", Outcome::Unreachable("refused".into()), ""),
        ];
        assert_eq!(
            message(&results),
            "targets 3: 1 ok, 1 failed, 1 unreachable\n\
             FAIL node-2: exit code 1 after 1.25 s: no\n\
             UNREACHABLE node-3: refused\n\
             OK node-1 (1.25 s)\n"
        );
    }

    #[test]
    fn the_message_of_five_thousand_targets_fits_the_kubelets_limit_and_keeps_every_count() {
        let mut results: Vec<TargetResult> = (0..5000)
            .map(|i| result(&format!("node-{i}"), Outcome::Succeeded, ""))
            .collect();
        results[4000].outcome = Outcome::Exited(2);
        let text = message(&results);
        assert!(text.len() <= MESSAGE_BUDGET, "{} bytes", text.len());
        assert!(text.starts_with("targets 5000: 4999 ok, 1 failed, 0 unreachable\n"));
        assert!(text.contains("FAIL node-4000: exit code 2"));
        assert!(text.ends_with(" more ok targets not listed)\n"), "{text}");
    }

    #[test]
    fn problems_that_do_not_fit_are_counted_not_dropped_silently() {
        let results: Vec<TargetResult> = (0..100)
            .map(|i| result(&format!("node-{i}"), Outcome::Exited(1), &"x".repeat(500)))
            .collect();
        let text = message(&results);
        assert!(text.len() <= MESSAGE_BUDGET, "{} bytes", text.len());
        let listed = text.lines().filter(|l| l.starts_with("FAIL ")).count();
        assert!(listed > 10 && listed < 100, "{listed} listed");
        assert!(
            text.ends_with(&format!(
                "({} more problems and 0 ok targets not listed: see the step's log)\n",
                100 - listed
            )),
            "{text}"
        );
    }

    #[test]
    fn cutting_keeps_characters_whole() {
        assert_eq!(cut("验证节点配置", 8), "验...");
        assert_eq!(cut("short", 8), "short");
    }
}

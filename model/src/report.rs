//! What a step that acts on the targets (`workflow-runner`) reports per target, and the one
//! home of the line format that carries it: written here, read here.
//!
//! The runner's termination message starts with a summary line and lists the targets that are
//! not ok first, one line each, then as many `OK` lines as fit in the kubelet's 4 KiB:
//!
//! ```text
//! targets 3: 1 ok, 1 failed, 1 unreachable
//! FAIL node-2: exit code 3 after 1.20 s: disk 97% full
//! UNREACHABLE node-3: connect 192.168.1.103:22: Connection refused (os error 111)
//! OK node-1 (0.21 s)
//! ```
//!
//! The runner writes it with [`summary_line`], [`problem_line`] and [`ok_line`] (choosing
//! what fits is its own business). The operator parses it into [`TargetReport`] for the
//! plugin's `evaluate` (contract 0.2.0) and for the Workflow's status; the plugin SDK reads the
//! problem lines of any step's output with [`read_problem`], the same reader
//! [`TargetReport::parse`] uses, so both read a line alike.
//!
//! A problem line is read leniently, as the SDK documents it for commands written by hand: the
//! keyword is the first word (leading spaces ignored), in any case, with an optional `:`
//! (`fail`, `Fail:`); only `FAIL` and `UNREACHABLE` count, so `Failed to ...` or `failures: 0`
//! do not. The next word is the target, ended by a space or a `:`; the rest, after an optional
//! `:`, is the reason. Target names are DNS subdomains (no space, no `:`), so every line the
//! writers write reads back as written.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The first word of a summary line.
const SUMMARY: &str = "targets";

/// How a step's command ended on one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TargetOutcome {
    /// It succeeded there.
    Ok,
    /// It ran there and failed (or ran out of its time).
    Failed,
    /// It could not run there: no connection, an untrusted host key, a refused login.
    Unreachable,
}

impl TargetOutcome {
    /// The keyword a target's line starts with: `OK`, `FAIL` or `UNREACHABLE`.
    pub const fn keyword(self) -> &'static str {
        match self {
            TargetOutcome::Ok => "OK",
            TargetOutcome::Failed => "FAIL",
            TargetOutcome::Unreachable => "UNREACHABLE",
        }
    }

    /// How the summary line counts it and a person reads it: `ok`, `failed` or `unreachable`.
    pub const fn word(self) -> &'static str {
        match self {
            TargetOutcome::Ok => "ok",
            TargetOutcome::Failed => "failed",
            TargetOutcome::Unreachable => "unreachable",
        }
    }
}

/// What a step reported for one target that is not ok.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TargetResult {
    /// The target's name, as in the group's `targets`.
    pub name: String,
    /// Failed or Unreachable.
    pub outcome: TargetOutcome,
    /// Why, as the step reported it.
    pub reason: String,
}

/// A step's report over its targets: the counts, and the targets that are not ok as far as
/// its message had room for them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct TargetReport {
    /// Targets the step worked on.
    pub total: u32,
    /// Targets where it succeeded.
    pub ok: u32,
    /// Targets where it ran and failed.
    pub failed: u32,
    /// Targets it could not run on.
    pub unreachable: u32,
    /// The targets that are not ok, in the message's order (possibly fewer than
    /// `failed + unreachable` when the message was cut).
    pub problems: Vec<TargetResult>,
}

impl TargetReport {
    /// The report in `message`, when its first line is `targets N: A ok, B failed, C
    /// unreachable`; `None` for any other message.
    ///
    /// ```
    /// use workflow_model::report::{TargetOutcome, TargetReport};
    ///
    /// let report = TargetReport::parse("targets 2: 1 ok, 0 failed, 1 unreachable\nUNREACHABLE n2: refused\nOK n1 (0.1 s)").unwrap();
    /// assert_eq!((report.total, report.unreachable), (2, 1));
    /// assert_eq!((report.problems[0].name.as_str(), report.problems[0].outcome), ("n2", TargetOutcome::Unreachable));
    /// assert!(TargetReport::parse("exit code 2: no key").is_none());
    /// ```
    pub fn parse(message: &str) -> Option<TargetReport> {
        let mut lines = message.lines();
        let first = lines.next()?.trim();
        let (total, counts) = first
            .strip_prefix(SUMMARY)?
            .strip_prefix(' ')?
            .split_once(':')?;
        let mut report = TargetReport {
            total: total.trim().parse().ok()?,
            ..TargetReport::default()
        };
        for part in counts.split(',') {
            let (n, word) = part.trim().split_once(' ')?;
            let n: u32 = n.parse().ok()?;
            match counted(word.trim())? {
                TargetOutcome::Ok => report.ok = n,
                TargetOutcome::Failed => report.failed = n,
                TargetOutcome::Unreachable => report.unreachable = n,
            }
        }
        report.problems = lines
            .filter_map(read_problem)
            .map(|(outcome, name, reason)| TargetResult {
                name: name.to_owned(),
                outcome,
                reason: reason.to_owned(),
            })
            .collect();
        Some(report)
    }

    /// Targets that are not ok.
    pub fn bad(&self) -> u32 {
        self.failed + self.unreachable
    }
}

/// The outcome a summary line counts under `word` (`ok`, `failed`, `unreachable`).
fn counted(word: &str) -> Option<TargetOutcome> {
    [
        TargetOutcome::Ok,
        TargetOutcome::Failed,
        TargetOutcome::Unreachable,
    ]
    .into_iter()
    .find(|outcome| outcome.word() == word)
}

/// `targets N: A ok, B failed, C unreachable`, the first line of a report (`N` the sum).
///
/// ```
/// assert_eq!(
///     workflow_model::report::summary_line(1, 1, 1),
///     "targets 3: 1 ok, 1 failed, 1 unreachable"
/// );
/// ```
pub fn summary_line(ok: u32, failed: u32, unreachable: u32) -> String {
    let total = ok.saturating_add(failed).saturating_add(unreachable);
    format!(
        "{SUMMARY} {total}: {ok} {}, {failed} {}, {unreachable} {}",
        TargetOutcome::Ok.word(),
        TargetOutcome::Failed.word(),
        TargetOutcome::Unreachable.word()
    )
}

/// `FAIL <name>: <reason>` or `UNREACHABLE <name>: <reason>`: the line of a target that is
/// not ok (`outcome` Failed or Unreachable; a target that is ok has an [`ok_line`]).
///
/// ```
/// use workflow_model::report::{problem_line, TargetOutcome};
///
/// assert_eq!(problem_line("node-3", TargetOutcome::Unreachable, "refused"), "UNREACHABLE node-3: refused");
/// ```
pub fn problem_line(name: &str, outcome: TargetOutcome, reason: &str) -> String {
    format!("{} {name}: {reason}", outcome.keyword())
}

/// `OK <name> (<seconds> s)`: the line of a target where the step succeeded, in `took`.
///
/// ```
/// use std::time::Duration;
///
/// assert_eq!(workflow_model::report::ok_line("node-1", Duration::from_millis(210)), "OK node-1 (0.21 s)");
/// ```
pub fn ok_line(name: &str, took: Duration) -> String {
    format!(
        "{} {name} ({:.2} s)",
        TargetOutcome::Ok.keyword(),
        took.as_secs_f64()
    )
}

/// The target that `line` reports not ok, read leniently (see the [module docs](self)): its
/// outcome (Failed or Unreachable), its name and the reason, both possibly empty. `None` for
/// any other line (`OK node-1`, the summary, logs).
///
/// ```
/// use workflow_model::report::{read_problem, TargetOutcome};
///
/// assert_eq!(read_problem("  fail node-3: disk 97% full"), Some((TargetOutcome::Failed, "node-3", "disk 97% full")));
/// assert_eq!(read_problem("Failed to resolve mirror"), None);
/// ```
pub fn read_problem(line: &str) -> Option<(TargetOutcome, &str, &str)> {
    let (keyword, rest) = split_word(line.trim());
    let keyword = keyword.strip_suffix(':').unwrap_or(keyword);
    let outcome = [TargetOutcome::Failed, TargetOutcome::Unreachable]
        .into_iter()
        .find(|outcome| keyword.eq_ignore_ascii_case(outcome.keyword()))?;
    // The target ends at the first space or `:`; an optional `:` separates it from the reason.
    let end = rest
        .find(|c: char| c.is_whitespace() || c == ':')
        .unwrap_or(rest.len());
    let (name, reason) = rest.split_at(end);
    let reason = reason.trim_start();
    let reason = reason.strip_prefix(':').unwrap_or(reason).trim();
    Some((outcome, name, reason))
}

/// The first whitespace-separated word of `s` and what follows it, trimmed.
fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(char::is_whitespace) {
        Some(end) => (&s[..end], s[end..].trim()),
        None => (s, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runners_report_parses_with_its_problems_and_nothing_else_does() {
        let report = TargetReport::parse(
            "targets 10: 8 ok, 1 failed, 1 unreachable\n\
             FAIL n7: exit code 1 after 0.10 s: disk: 10 MiB free on /, need 1024\n\
             UNREACHABLE n9: no SSH session with 10.0.0.9:22 within 3 s (connect, handshake and login)\n\
             OK n1 (0.1 s)\n",
        )
        .expect("a report");
        assert_eq!(
            (
                report.total,
                report.ok,
                report.failed,
                report.unreachable,
                report.bad()
            ),
            (10, 8, 1, 1, 2)
        );
        assert_eq!(
            report.problems,
            [
                TargetResult {
                    name: "n7".into(),
                    outcome: TargetOutcome::Failed,
                    reason: "exit code 1 after 0.10 s: disk: 10 MiB free on /, need 1024".into(),
                },
                TargetResult {
                    name: "n9".into(),
                    outcome: TargetOutcome::Unreachable,
                    reason:
                        "no SSH session with 10.0.0.9:22 within 3 s (connect, handshake and login)"
                            .into(),
                },
            ]
        );
        for other in [
            "",
            "targets",
            "targets x: 1 ok",
            "targets 2: 1 ok, 1 lost",
            "OK",
            "FAIL a: b",
        ] {
            assert!(TargetReport::parse(other).is_none(), "{other:?}");
        }
    }

    #[test]
    fn what_the_writers_write_the_reader_reads_back() {
        let message = [
            summary_line(1, 1, 1),
            problem_line(
                "node-2",
                TargetOutcome::Failed,
                "exit code 3 after 1.20 s: disk: 97% full",
            ),
            problem_line("node-3", TargetOutcome::Unreachable, ""),
            ok_line("node-1", Duration::from_millis(210)),
        ]
        .join("\n");
        assert_eq!(
            TargetReport::parse(&message),
            Some(TargetReport {
                total: 3,
                ok: 1,
                failed: 1,
                unreachable: 1,
                problems: vec![
                    TargetResult {
                        name: "node-2".into(),
                        outcome: TargetOutcome::Failed,
                        reason: "exit code 3 after 1.20 s: disk: 97% full".into(),
                    },
                    TargetResult {
                        name: "node-3".into(),
                        outcome: TargetOutcome::Unreachable,
                        reason: String::new(),
                    },
                ],
            })
        );
        assert_eq!(read_problem(&ok_line("node-1", Duration::ZERO)), None);
        assert_eq!(read_problem(&summary_line(0, 1, 0)), None);
    }
}

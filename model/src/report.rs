//! What a step that acts on the targets (`workflow-runner`) reports per target, read back from
//! its termination message.
//!
//! The message starts with a summary line and lists the targets that are not ok first, one
//! line each, then as many `OK` lines as fit in the kubelet's 4 KiB:
//!
//! ```text
//! targets 3: 1 ok, 1 failed, 1 unreachable
//! FAIL node-2: exit code 3 after 1.20 s: disk 97% full
//! UNREACHABLE node-3: connect 192.168.1.103:22: Connection refused (os error 111)
//! OK node-1 (0.21 s)
//! ```
//!
//! The operator parses it into [`TargetReport`] for the plugin's `evaluate` (contract 0.2.0)
//! and for the Workflow's status; the plugin SDK judges it against a failure budget.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
        let (total, counts) = first.strip_prefix("targets ")?.split_once(':')?;
        let mut report = TargetReport {
            total: total.trim().parse().ok()?,
            ..TargetReport::default()
        };
        for part in counts.split(',') {
            let (n, what) = part.trim().split_once(' ')?;
            let n: u32 = n.parse().ok()?;
            match what.trim() {
                "ok" => report.ok = n,
                "failed" => report.failed = n,
                "unreachable" => report.unreachable = n,
                _ => return None,
            }
        }
        report.problems = lines.filter_map(problem).collect();
        Some(report)
    }

    /// Targets that are not ok.
    pub fn bad(&self) -> u32 {
        self.failed + self.unreachable
    }
}

/// `FAIL <name>: <reason>` or `UNREACHABLE <name>: <reason>`.
fn problem(line: &str) -> Option<TargetResult> {
    let line = line.trim();
    let (outcome, rest) = if let Some(rest) = line.strip_prefix("FAIL ") {
        (TargetOutcome::Failed, rest)
    } else if let Some(rest) = line.strip_prefix("UNREACHABLE ") {
        (TargetOutcome::Unreachable, rest)
    } else {
        return None;
    };
    let (name, reason) = rest.split_once(':').unwrap_or((rest, ""));
    Some(TargetResult {
        name: name.trim().to_owned(),
        outcome,
        reason: reason.trim().to_owned(),
    })
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
}

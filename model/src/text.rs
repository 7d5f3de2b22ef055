//! Text made fit for where people and logs read it: control characters escaped, cut at a byte
//! budget, folded to one line.
//!
//! Most of this text comes from plugins or from error chains (a plugin's failure reason, its
//! panic message, a wasm backtrace), so nothing about its length or content can be assumed.
//! Budgets are in bytes, as the API server and log pipelines count them; a cut never splits a
//! character, and its [`Marker`] follows the kept bytes (it is not counted in the budget).

use std::borrow::Cow;

/// What follows text that was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// `…`: text people read (conditions, Events, the command line).
    Ellipsis,
    /// `...`: plain ASCII, as the plugin SDK quotes a step's output in a verdict's reason.
    Dots,
    /// `… (N bytes in all)`: logs and plugin errors, where how much was dropped tells something.
    Length,
}

/// The longest start of `s` that has at most `max` bytes and ends on a character boundary.
///
/// ```
/// use workflow_model::text::prefix;
///
/// assert_eq!(prefix("héllo", 2), "h"); // `é` is two bytes: it is dropped, not split
/// assert_eq!(prefix("héllo", 3), "hé");
/// assert_eq!(prefix("abc", 10), "abc");
/// ```
pub fn prefix(s: &str, max: usize) -> &str {
    &s[..s.floor_char_boundary(max)]
}

/// `s` cut to at most `max` bytes on a character boundary, followed by `marker` when cut;
/// `s` itself when it fits.
///
/// ```
/// use workflow_model::text::{truncate, Marker};
///
/// assert_eq!(truncate("héllo", 2, Marker::Ellipsis), "h…");
/// assert_eq!(truncate("héllo", 3, Marker::Dots), "hé...");
/// assert_eq!(truncate("héllo", 4, Marker::Length), "hél… (6 bytes in all)");
/// assert_eq!(truncate("abc", 3, Marker::Ellipsis), "abc");
/// ```
pub fn truncate(s: &str, max: usize, marker: Marker) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let kept = prefix(s, max);
    Cow::Owned(match marker {
        Marker::Ellipsis => format!("{kept}…"),
        Marker::Dots => format!("{kept}..."),
        Marker::Length => format!("{kept}… ({} bytes in all)", s.len()),
    })
}

/// `s` with its control characters (newlines, tabs, terminal escape sequences, NUL) written
/// as Rust escapes (`\n`, `\t`, `\u{1b}`), so that it cannot break a line of
/// `kubectl describe` or a log, nor drive a terminal; `s` itself when it has none.
///
/// ```
/// use workflow_model::text::escape_controls;
///
/// assert_eq!(escape_controls("a\nb\u{1b}[2J"), "a\\nb\\u{1b}[2J");
/// assert_eq!(escape_controls("检查网络 ok"), "检查网络 ok");
/// ```
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut escaped = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    Cow::Owned(escaped)
}

/// `s` made safe to show a person: its control characters escaped ([`escape_controls`]),
/// then cut to at most `max` bytes with [`Marker::Ellipsis`].
///
/// ```
/// use workflow_model::text::printable;
///
/// assert_eq!(printable("step failed\n", 100), "step failed\\n");
/// assert_eq!(printable("step failed\n", 4), "step…");
/// ```
pub fn printable(s: &str, max: usize) -> String {
    truncate(&escape_controls(s), max, Marker::Ellipsis).into_owned()
}

/// `s` as one single-quoted POSIX shell word: a script or a remote command line can carry any
/// text in it literally.
///
/// ```
/// assert_eq!(workflow_model::text::shell_quote("it's"), r"'it'\''s'");
/// ```
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `s` on one line: each line trimmed, blank lines dropped, the rest joined with `; `, then
/// cut to at most `max` bytes with [`Marker::Length`]. For error chains, which can span lines
/// (a wasm backtrace).
///
/// ```
/// use workflow_model::text::one_line;
///
/// assert_eq!(one_line("failed to compile\n\n  caused by: bad magic\n", 100), "failed to compile; caused by: bad magic");
/// ```
pub fn one_line(s: &str, max: usize) -> String {
    let joined = s
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    truncate(&joined, max, Marker::Length).into_owned()
}

/// `s` folded onto one line: each run of whitespace and control characters becomes one
/// space, and the ends are trimmed. For a reason or message shown on a line of its own.
///
/// ```
/// use workflow_model::text::fold;
///
/// assert_eq!(fold(" connect:\n  refused\u{1b}[2J "), "connect: refused [2J");
/// ```
pub fn fold(s: &str) -> String {
    s.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One-, two-, three- and four-byte characters, so every budget lands on each kind of
    /// boundary.
    const MIXED: &str = "aé检😀b检é😀";

    #[test]
    fn control_characters_are_written_as_escapes() {
        let hostile = "step failed\n\u{1b}[2J\u{1b}]0;owned\u{7}done\u{0}";
        assert_eq!(
            printable(hostile, 1000),
            "step failed\\n\\u{1b}[2J\\u{1b}]0;owned\\u{7}done\\u{0}"
        );
        assert!(!printable(hostile, 1000).chars().any(char::is_control));
        assert_eq!(escape_controls("a\tb\r\n"), "a\\tb\\r\\n");
        // C1 controls too (U+009B is a one-character CSI on some terminals).
        assert_eq!(escape_controls("\u{9b}31m"), "\\u{9b}31m");
    }

    #[test]
    fn text_without_control_characters_is_not_copied() {
        assert!(matches!(escape_controls("检查网络 ok"), Cow::Borrowed(_)));
        assert_eq!(printable("检查网络 ok", 100), "检查网络 ok");
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        for max in 0..=MIXED.len() + 1 {
            let kept = prefix(MIXED, max);
            assert!(kept.len() <= max, "budget {max}: kept {kept:?}");
            assert!(MIXED.starts_with(kept), "budget {max}");
            // Nothing more would fit: the next character crosses the budget.
            if let Some(next) = MIXED[kept.len()..].chars().next() {
                assert!(
                    kept.len() + next.len_utf8() > max,
                    "budget {max}: kept {kept:?}"
                );
            }
            for marker in [Marker::Ellipsis, Marker::Dots, Marker::Length] {
                let cut = truncate(MIXED, max, marker);
                assert!(cut.starts_with(kept), "budget {max}, {marker:?}: {cut:?}");
            }
        }
    }

    #[test]
    fn the_marker_says_the_text_was_cut_and_follows_the_kept_bytes() {
        assert_eq!(truncate("héllo", 2, Marker::Ellipsis), "h…");
        assert_eq!(truncate("héllo", 2, Marker::Dots), "h...");
        assert_eq!(truncate("héllo", 2, Marker::Length), "h… (6 bytes in all)");
        assert_eq!(truncate("abc", 0, Marker::Ellipsis), "…");
        // Escapes are written first and then cut, so the budget bounds what is shown.
        assert_eq!(printable("a\nb", 2), "a\\…");
    }

    #[test]
    fn text_within_its_budget_is_left_alone() {
        for marker in [Marker::Ellipsis, Marker::Dots, Marker::Length] {
            assert!(matches!(truncate("abc", 3, marker), Cow::Borrowed("abc")));
            assert!(matches!(truncate("", 0, marker), Cow::Borrowed("")));
        }
        assert_eq!(one_line("abc", 3), "abc");
    }

    #[test]
    fn the_budgets_callers_pass_bound_what_is_kept() {
        // (budget, marker): the condition message, an Event note, a command line error, a
        // plugin error line, the quoted output of a step, a step name in a message.
        let cases = [
            (32 * 1024, Marker::Ellipsis),
            (1000, Marker::Ellipsis),
            (8192, Marker::Ellipsis),
            (2048, Marker::Length),
            (1024, Marker::Dots),
            (64, Marker::Length),
        ];
        for (max, marker) in cases {
            let long = "检".repeat(max); // three bytes each: no budget falls on a boundary
            let cut = truncate(&long, max, marker);
            let kept = prefix(&long, max);
            assert!(max - kept.len() < 3, "budget {max}: kept {}", kept.len());
            let tail = &cut[kept.len()..];
            match marker {
                Marker::Ellipsis => assert_eq!(tail, "…"),
                Marker::Dots => assert_eq!(tail, "..."),
                Marker::Length => assert_eq!(tail, format!("… ({} bytes in all)", long.len())),
            }
            let fits = "x".repeat(max);
            assert_eq!(truncate(&fits, max, marker), fits);
        }
        let condition = printable(&format!("{}\n", "x".repeat(40_000)), 32 * 1024);
        assert_eq!(condition.len(), 32 * 1024 + "…".len());
        assert!(!condition.contains('\n'));
    }

    #[test]
    fn one_line_folds_lines_and_cuts_with_the_length() {
        assert_eq!(
            one_line("  error: trap\n\n   wasm backtrace:\r\n    0: f\n", 2048),
            "error: trap; wasm backtrace:; 0: f"
        );
        assert_eq!(one_line("\n \n", 2048), "");
        let long = format!("{}\n{}", "a".repeat(10), "b".repeat(10));
        assert_eq!(one_line(&long, 12), "aaaaaaaaaa; … (22 bytes in all)");
    }
}

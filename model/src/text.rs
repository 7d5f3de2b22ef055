//! Text made fit for where people and logs read it: control characters escaped, cut at a byte
//! budget, folded to one line.
//!
//! Most of this text comes from plugins, targets or error chains (a plugin's failure reason, a
//! target's output, its panic message, a wasm backtrace), so nothing about its length or
//! content can be assumed. Output is inert: [`escape_controls`] is the one way a control
//! character (ESC, NUL, DEL, C0 and C1 controls) is shown, as a Rust escape (`\u{1b}`), in
//! conditions, Events, status and on the command line; [`escape_controls_in_lines`] keeps
//! the newlines and tabs of output shown as lines (`logs`).
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
    escape(s, char::is_control)
}

/// `s` with its control characters escaped as [`escape_controls`] does, but for newlines and
/// tabs: for output shown as lines (a step's log), which cannot drive a terminal (no ESC, no
/// carriage return, no C1 control) and keeps its shape.
///
/// ```
/// use workflow_model::text::escape_controls_in_lines;
///
/// assert_eq!(escape_controls_in_lines("ok\n\tdone\u{1b}[2J\r"), "ok\n\tdone\\u{1b}[2J\\r");
/// ```
pub fn escape_controls_in_lines(s: &str) -> Cow<'_, str> {
    escape(s, |c| c.is_control() && c != '\n' && c != '\t')
}

/// `s` with the characters for which `escaped` holds written as Rust escapes; `s` itself when
/// there are none.
fn escape(s: &str, escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&escaped) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if escaped(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The end of `s` as [`escape_controls_in_lines`] shows it, at most `max` bytes of it: for
/// the end of a step's output kept in its status. The cut falls between characters, never
/// inside an escape.
///
/// ```
/// use workflow_model::text::printable_tail;
///
/// assert_eq!(printable_tail("first\nlast\u{1b}[0m", 12), "ast\\u{1b}[0m");
/// assert_eq!(printable_tail("short", 100), "short");
/// ```
pub fn printable_tail(s: &str, max: usize) -> String {
    let mut start = s.len();
    let mut kept = 0;
    for (i, c) in s.char_indices().rev() {
        let width = if c.is_control() && c != '\n' && c != '\t' {
            c.escape_default().count()
        } else {
            c.len_utf8()
        };
        if kept + width > max {
            break;
        }
        kept += width;
        start = i;
    }
    escape_controls_in_lines(&s[start..]).into_owned()
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

/// `s` folded onto one line: each run of whitespace (newlines and tabs too) becomes one
/// space, the ends are trimmed, and any other control character is escaped as
/// [`escape_controls`] does. For a reason or message shown on a line of its own.
///
/// ```
/// use workflow_model::text::fold;
///
/// assert_eq!(fold(" connect:\n  refused\u{1b}[2J "), "connect: refused\\u{1b}[2J");
/// ```
pub fn fold(s: &str) -> String {
    let joined = s
        .split(char::is_whitespace)
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    escape_controls(&joined).into_owned()
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
    fn output_shown_as_lines_keeps_its_newlines_and_tabs_and_nothing_else() {
        let hostile = "line 1\n\tline 2\u{1b}]0;owned\u{7}\r\u{7f}\u{9b}2J\u{0}";
        let shown = escape_controls_in_lines(hostile);
        assert_eq!(
            shown,
            "line 1\n\tline 2\\u{1b}]0;owned\\u{7}\\r\\u{7f}\\u{9b}2J\\u{0}"
        );
        assert!(
            !shown
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
        );
        assert!(matches!(
            escape_controls_in_lines("a\n\tb"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn the_tail_of_output_is_escaped_within_its_budget_and_never_cut_inside_an_escape() {
        let output = format!("{}\u{1b}[31mred\u{1b}[0m\n", "x".repeat(3000));
        for max in 0..40 {
            let tail = printable_tail(&output, max);
            assert!(tail.len() <= max, "{max}: {tail:?}");
            assert!(!tail.contains('\u{1b}'), "{max}: {tail:?}");
            // What is kept is whole escapes: a cut escape would leave a `{1b}` without its `\u`.
            assert_eq!(
                tail.matches("\\u{1b}").count(),
                tail.matches("{1b}").count(),
                "{max}: {tail:?}"
            );
        }
        assert_eq!(printable_tail(&output, 23), "\\u{1b}[31mred\\u{1b}[0m\n");
        assert_eq!(printable_tail("", 10), "");
    }

    #[test]
    fn folding_keeps_one_line_and_escapes_what_is_not_whitespace() {
        assert_eq!(
            fold("exit 1:\r\n  disk\tfull\u{1b}[2J\u{9b}0m "),
            "exit 1: disk full\\u{1b}[2J\\u{9b}0m"
        );
        assert!(!fold("a\u{1b}\u{7f}\u{85}b").chars().any(char::is_control));
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

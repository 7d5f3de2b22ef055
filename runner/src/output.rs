//! A target's output, bounded: the tail kept for the report, and the lines copied to the step's
//! log (`kubectl logs`), prefixed with the target's name, up to a limit per target.

use std::collections::VecDeque;
use std::io::Write as _;

/// The last bytes of a target's output kept for its report line.
const TAIL_BYTES: usize = 4096;
/// A line longer than this goes to the log in pieces.
const LINE_BYTES: usize = 1024;

/// The last [`TAIL_BYTES`] of what a target wrote, whatever it writes.
#[derive(Debug, Default)]
pub struct Tail {
    bytes: VecDeque<u8>,
}

impl Tail {
    pub fn push(&mut self, data: &[u8]) {
        let data = &data[data.len().saturating_sub(TAIL_BYTES)..];
        let overflow = (self.bytes.len() + data.len()).saturating_sub(TAIL_BYTES);
        self.bytes.drain(..overflow);
        self.bytes.extend(data);
    }

    pub fn text(&self) -> String {
        let (front, back) = self.bytes.as_slices();
        String::from_utf8_lossy(&[front, back].concat()).into_owned()
    }
}

/// Where targets' output lines go: the runner's stdout, which is the step pod's log.
#[derive(Debug, Clone, Copy)]
pub struct Log {
    /// How many bytes of one target's output are copied to the log.
    pub limit: usize,
}

impl Log {
    /// A writer of one target's lines.
    pub fn lines<'a>(&self, target: &'a str) -> Lines<'a> {
        Lines {
            target,
            partial: Vec::new(),
            written: 0,
            dropped: 0,
            limit: self.limit,
        }
    }

    /// One line from the runner itself about `target`.
    pub fn say(&self, target: &str, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "[{target}] {text}");
    }
}

/// One target's output split into lines, each written whole with the target's name.
#[derive(Debug)]
pub struct Lines<'a> {
    target: &'a str,
    partial: Vec<u8>,
    written: usize,
    dropped: usize,
    limit: usize,
}

impl Lines<'_> {
    pub fn push(&mut self, data: &[u8]) {
        for &byte in data {
            if byte == b'\n' || self.partial.len() >= LINE_BYTES {
                self.flush();
            }
            if byte != b'\n' {
                self.partial.push(byte);
            }
        }
    }

    /// Writes what is left and says how much was not copied.
    pub fn finish(&mut self) {
        if !self.partial.is_empty() {
            self.flush();
        }
        if self.dropped > 0 {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "[{}] ... {} more bytes of output not copied to this log",
                self.target, self.dropped
            );
            self.dropped = 0;
        }
    }

    fn flush(&mut self) {
        let line = std::mem::take(&mut self.partial);
        if self.dropped > 0 || self.written + line.len() > self.limit {
            self.dropped += line.len() + 1;
            return;
        }
        self.written += line.len() + 1;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "[{}] {}", self.target, String::from_utf8_lossy(&line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_only_the_last_bytes_of_endless_output() {
        let mut tail = Tail::default();
        for i in 0..10_000 {
            tail.push(format!("line {i}\n").as_bytes());
        }
        let text = tail.text();
        assert!(text.len() <= TAIL_BYTES);
        assert!(text.ends_with("line 9999\n"));
        assert!(!text.contains("line 1000\n"));
    }

    #[test]
    fn one_huge_chunk_keeps_its_end() {
        let mut tail = Tail::default();
        tail.push(b"start");
        let mut chunk = vec![b'x'; 3 * TAIL_BYTES];
        chunk.extend_from_slice(b"end");
        tail.push(&chunk);
        let text = tail.text();
        assert_eq!(text.len(), TAIL_BYTES);
        assert!(text.ends_with("xend"));
    }

    #[test]
    fn lines_past_the_limit_are_counted_not_kept() {
        let mut lines = Log { limit: 10 }.lines("node-1");
        lines.push(b"12345\n67890\nmore\n");
        assert_eq!(lines.written, 6);
        assert_eq!(lines.dropped, 11);
    }
}

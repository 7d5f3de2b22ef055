//! A plugin's standard output and error, into the operator's logs through `host-log`.
//!
//! Rust's standard library writes panic messages (and `print!`, `eprint!`) with the C function
//! `write`, which wasi-libc implements over the WASI stream, stdio and terminal interfaces.
//! Importing those makes every instantiation, that is every plugin call, about twice as
//! expensive. The SDK defines `write` itself: complete lines written to stdout are logged at
//! info, lines written to stderr (a panic message) at error, each line at most
//! [`LINE_BYTES`] long. It also defines `getenv`, which the panic handler consults for
//! `RUST_BACKTRACE`, as "not set": the operator grants plugins no environment anyway. A plugin
//! built with the SDK then imports nothing but `host-log`.
//!
//! Only in a WebAssembly build; native unit tests keep the host's own functions.

#![allow(unsafe_code)]

use std::ffi::c_char;
use std::sync::Mutex;

use crate::bindings::workflow::plugin::host_log::{Level, log as host_log};

/// Longest line logged; a longer line is logged in pieces.
pub const LINE_BYTES: usize = 1024;

const STDOUT: i32 = 1;
const STDERR: i32 = 2;

/// Bytes of a line not yet ended. Fixed-size, so that writing (for example the message of a
/// failed allocation) never allocates.
struct LineBuf {
    bytes: [u8; LINE_BYTES],
    len: usize,
    level: Level,
}

static OUT: Mutex<LineBuf> = Mutex::new(LineBuf::new(Level::Info));
static ERR: Mutex<LineBuf> = Mutex::new(LineBuf::new(Level::Error));

impl LineBuf {
    const fn new(level: Level) -> Self {
        Self {
            bytes: [0; LINE_BYTES],
            len: 0,
            level,
        }
    }

    fn write(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let room = LINE_BYTES - self.len;
            let (line, ended) = match data.iter().position(|&b| b == b'\n') {
                Some(end) if end <= room => (&data[..end], true),
                _ => (&data[..data.len().min(room)], false),
            };
            self.bytes[self.len..self.len + line.len()].copy_from_slice(line);
            self.len += line.len();
            data = &data[line.len() + usize::from(ended)..];
            if ended || self.len == LINE_BYTES {
                self.flush();
            }
        }
    }

    fn flush(&mut self) {
        let line = &self.bytes[..self.len];
        let text = match std::str::from_utf8(line) {
            Ok(text) => text,
            // A multi-byte character cut at the end of a full buffer: log what is whole.
            Err(e) => std::str::from_utf8(&line[..e.valid_up_to()]).unwrap_or_default(),
        };
        let text = text.trim_end();
        // Plugins have no environment, so the hint after a panic message cannot be followed.
        if !text.is_empty() && !text.starts_with("note: run with `RUST_BACKTRACE=1`") {
            host_log(self.level, text);
        }
        self.len = 0;
    }
}

/// `ssize_t write(int fd, const void *buf, size_t count)`: stdout and stderr go to the
/// operator's logs; a plugin has no other descriptor to write to.
///
/// # Safety
/// As in C: `buf` points to `count` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: i32, buf: *const u8, count: usize) -> isize {
    let stream = match fd {
        STDOUT => &OUT,
        STDERR => &ERR,
        _ => return -1,
    };
    if count == 0 {
        return 0;
    }
    // SAFETY: the caller's contract (above).
    let data = unsafe { std::slice::from_raw_parts(buf, count) };
    // `try_lock`: writing from within a write (a panic while logging) drops the nested output
    // instead of deadlocking.
    if let Ok(mut line) = stream.try_lock() {
        line.write(data);
    }
    isize::try_from(count).unwrap_or(isize::MAX)
}

/// `char *getenv(const char *name)`: a plugin has no environment.
#[unsafe(no_mangle)]
pub extern "C" fn getenv(_name: *const c_char) -> *mut c_char {
    std::ptr::null_mut()
}

//! Waiting inside WASI host calls, each way a guest can: wasi-libc's `nanosleep` (what
//! `std::thread::sleep` uses), `poll` on a clock subscription, `pollable.block` and a blocking
//! stream read. The WASI imports are called directly through bindings of `wit/`.

use std::time::Duration;

#[allow(unsafe_code, missing_docs, clippy::all)]
mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "waits",
        generate_all,
    });
}

use bindings::wasi::cli::stdin;
use bindings::wasi::clocks::monotonic_clock;
use bindings::wasi::io::poll;
use bindings::wasi::io::streams::StreamError;

/// An hour: far longer than any call's time limit.
pub const HOUR: Duration = Duration::from_secs(3600);

const HOUR_NANOS: u64 = 3_600_000_000_000;

/// Sleeps for `duration` as any Rust program does.
pub fn sleep(duration: Duration) {
    std::thread::sleep(duration);
}

/// Polls a subscription to the instant an hour after the monotonic clock's now.
pub fn poll_clock() {
    let when = monotonic_clock::now().saturating_add(HOUR_NANOS);
    let pollable = monotonic_clock::subscribe_instant(when);
    poll::poll(&[&pollable]);
}

/// Blocks on a subscription to an hour from now.
pub fn block_on_clock() {
    monotonic_clock::subscribe_duration(HOUR_NANOS).block();
}

/// Reads one byte of stdin, blocking; says what came back.
pub fn read_stdin() -> String {
    match stdin::get_stdin().blocking_read(1) {
        Ok(bytes) => format!("{} bytes", bytes.len()),
        Err(StreamError::Closed) => "closed".into(),
        Err(StreamError::LastOperationFailed(_)) => "an error".into(),
    }
}

//! Runs the future of a plugin call to completion from synchronous code.
//!
//! Calls are asynchronous inside: wasmtime runs the guest on a fiber of its own and every WASI
//! wait (sleep, poll, a blocking read) is a future, so a call that reaches its deadline while
//! the guest waits in a host call is simply dropped. The runtime's API stays synchronous for
//! the controllers, the CLI and the registry's watcher thread; the guest runs on the calling
//! thread, and one process-wide runtime thread only drives the timers.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::OnceLock;
use std::task::Poll;
use std::thread;

use tokio::runtime::{Builder, Handle, RuntimeFlavor};
use tokio::time::{Instant, Sleep};

/// The runtime whose one worker drives the timers of WASI's sleeps and of call deadlines.
static TIMERS: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();

/// The timer runtime, started on first use.
///
/// # Errors
/// When its thread cannot be started.
pub(super) fn timers() -> anyhow::Result<&'static Handle> {
    let runtime = TIMERS.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("plugin-timers")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the plugin timer thread: {e}"))
    });
    match runtime {
        Ok(runtime) => Ok(runtime.handle()),
        Err(message) => Err(anyhow::anyhow!("{message}")),
    }
}

/// Runs `future` on this thread (or, inside a single-threaded async runtime, on a helper
/// thread) in the context of the timer runtime, and returns its output.
pub(super) fn block_on<F>(timers: &Handle, future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    match Handle::try_current() {
        Err(_) => timers.block_on(future),
        // On a worker of the controllers' runtime: let it hand its other tasks to the
        // remaining workers while this one waits.
        Ok(current) if current.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| timers.block_on(future))
        }
        // A single-threaded runtime cannot give its thread away.
        Ok(_) => thread::scope(
            |scope| match scope.spawn(|| timers.block_on(future)).join() {
                Ok(output) => output,
                Err(panic) => std::panic::resume_unwind(panic),
            },
        ),
    }
}

/// `future`'s output, or `None` once `deadline` has passed while it waits.
///
/// The timer is armed only when the future first waits: a call that never waits in a host
/// call (every plugin built with the SDK) costs no timer and no wake-up of the timer thread.
/// A future that computes without waiting is stopped by the epoch deadline instead.
pub(super) async fn until<F: Future>(deadline: Instant, future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut timer: Option<Pin<Box<Sleep>>> = None;
    poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)))
            .as_mut()
            .poll(cx)
            .map(|()| None)
    })
    .await
}

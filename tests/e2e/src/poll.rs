//! Waiting for a cluster, a process or a file to reach a state: the one polling loop of the tests.

use std::time::{Duration, Instant};

/// Calls `observe` every `interval` until it returns `Ok`; returns that value and the time
/// waited.
///
/// `observe` returns `Err` with what it saw while the awaited state is not reached yet; it may
/// panic itself to stop early (an operator process that exited will never get there). When
/// `deadline` passes first, the test fails with `what` and `report` applied to the last
/// observation: `report` is where the costly context goes (a listing of the namespace, a log),
/// gathered once, on failure only.
///
/// # Panics
/// When `deadline` passes before `observe` returns `Ok`.
pub fn poll_until<T, S>(
    interval: Duration,
    deadline: Duration,
    what: &str,
    mut observe: impl FnMut() -> Result<T, S>,
    report: impl FnOnce(S) -> String,
) -> (T, Duration) {
    let start = Instant::now();
    loop {
        let last = match observe() {
            Ok(value) => return (value, start.elapsed()),
            Err(last) => last,
        };
        if start.elapsed() >= deadline {
            let report = report(last);
            let separator = if report.is_empty() { "" } else { "\n" };
            panic!("timed out after {deadline:?} waiting for {what}{separator}{report}");
        }
        std::thread::sleep(interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_what_the_awaited_state_gave_once_it_is_reached() {
        let mut seen = 0;
        let (value, _) = poll_until(
            Duration::from_millis(1),
            Duration::from_secs(10),
            "the third look",
            || {
                seen += 1;
                if seen == 3 { Ok("found") } else { Err(seen) }
            },
            |last| format!("looked {last} times"),
        );
        assert_eq!((value, seen), ("found", 3));
    }

    #[test]
    #[should_panic(
        expected = "timed out after 20ms waiting for a state never reached\nlast seen: 7"
    )]
    fn fails_past_the_deadline_with_the_last_observation() {
        poll_until(
            Duration::from_millis(5),
            Duration::from_millis(20),
            "a state never reached",
            || Err::<(), _>(7),
            |last| format!("last seen: {last}"),
        );
    }
}

//! Tracing: where a read's time goes, printed to stderr on one clock (`GPU_PARQUET_TRACE_FETCH`,
//! the settings' `Tuning::trace`). At the bottom of the crate: it depends on nothing in it, so I/O,
//! decode and the reader all use it. Off until a reader built with it turns it on, then on for the
//! rest of the process (the staged backend's threads are shared between readers).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

static ON: AtomicBool = AtomicBool::new(false);

/// Turns tracing on for the rest of the process.
pub(crate) fn enable() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether tracing is on.
pub(crate) fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// With tracing on, prints `what` and when it happened, in milliseconds since `origin` and since the
/// process's first trace ([`clock`]: lines of different origins line up).
pub(crate) fn at(origin: Instant, what: std::fmt::Arguments<'_>) {
    if enabled() {
        eprintln!(
            "trace {what} at {:.2} ms ({:.2} ms on the trace clock)",
            origin.elapsed().as_secs_f64() * 1e3,
            clock(Instant::now())
        );
    }
}

/// Milliseconds from the process's first call of this function to `at`.
pub(crate) fn clock(at: Instant) -> f64 {
    static FIRST: OnceLock<Instant> = OnceLock::new();
    at.saturating_duration_since(*FIRST.get_or_init(Instant::now))
        .as_secs_f64()
        * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_counts_milliseconds_from_one_start() {
        clock(Instant::now()); // the clock has started by `t`
        let t = Instant::now();
        let a = clock(t);
        assert!(a >= 0.0);
        let b = clock(t + std::time::Duration::from_millis(5));
        assert!((b - a - 5.0).abs() < 1e-6, "{a} {b}");
    }
}

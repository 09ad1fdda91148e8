//! Tracing: where a read's time goes, printed to stderr on one clock (`GPU_PARQUET_TRACE_FETCH`,
//! the settings' `Tuning::trace`). At the bottom of the crate: it depends on nothing in it, so I/O,
//! decode and the reader all use it. Off until a reader built with it turns it on, then on for the
//! rest of the process (the staged backend's threads are shared between readers).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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

/// `d` in milliseconds, as trace lines print durations.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Milliseconds from the process's first call of this function to `at`.
pub(crate) fn clock(at: Instant) -> f64 {
    static FIRST: OnceLock<Instant> = OnceLock::new();
    at.saturating_duration_since(*FIRST.get_or_init(Instant::now))
        .as_secs_f64()
        * 1e3
}

/// CPU time the calling thread has used so far (`CLOCK_THREAD_CPUTIME_ID`), zero where that clock
/// fails: set beside a wall time, it says whether a thread worked or spun (CPU about the wall) or
/// slept on a wait (CPU well under it).
pub(crate) fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into `ts`, a live local, and reads nothing of ours.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_cpu_clock_counts_work_not_sleep() {
        let t0 = thread_cpu();
        std::thread::sleep(Duration::from_millis(30));
        let slept = thread_cpu() - t0;
        assert!(
            slept < Duration::from_millis(15),
            "asleep, the thread used {slept:?} of CPU"
        );
        // Busy until the clock shows 20 ms of work (a loaded machine may give this thread a share of
        // a core only); one thread's CPU time never passes its wall time.
        let (t1, busy) = (thread_cpu(), Instant::now());
        let mut x = 0u64;
        while thread_cpu() - t1 < Duration::from_millis(20) && busy.elapsed() < Duration::from_secs(20) {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        let (worked, wall) = (thread_cpu() - t1, busy.elapsed());
        assert!(
            worked >= Duration::from_millis(20),
            "busy {wall:?}, the thread used {worked:?} of CPU"
        );
        assert!(
            worked <= wall + Duration::from_millis(2),
            "{worked:?} of CPU in {wall:?}"
        );
    }

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

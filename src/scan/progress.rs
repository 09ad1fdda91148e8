//! A read's progress: the [`Progress`] a user's callback sees after each step, and the counter the
//! scan's threads share to make it (steps finish out of order).

use std::sync::Arc;

/// Where a read stands: handed to the [`crate::ReaderBuilder::with_progress`] callback after each step (a
/// GPU read's decode steps, in the order they finish) and once when a raw or host read is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Steps done, of `steps`.
    pub steps_done: usize,
    /// Steps in the read.
    pub steps: usize,
    /// Rows of the steps done, of `rows`.
    pub rows_done: u64,
    /// Rows selected.
    pub rows: u64,
    /// Column-chunk bytes of the steps done, of `bytes`.
    pub bytes_done: u64,
    /// Column-chunk bytes selected.
    pub bytes: u64,
}

/// A progress callback (shared with the threads of a read; called from them).
#[derive(Clone)]
pub(crate) struct ProgressHook(pub Arc<dyn Fn(Progress) + Send + Sync>);

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

/// Counts finished steps for a [`ProgressHook`] (steps finish out of order on several threads).
pub(crate) struct ProgressCounter {
    hook: Option<ProgressHook>,
    done: std::sync::Mutex<Progress>,
}

impl ProgressCounter {
    pub(crate) fn new(hook: Option<ProgressHook>, steps: usize, rows: u64, bytes: u64) -> Self {
        let done = Progress {
            steps_done: 0,
            steps,
            rows_done: 0,
            rows,
            bytes_done: 0,
            bytes,
        };
        Self {
            hook,
            done: std::sync::Mutex::new(done),
        }
    }

    /// One step of `rows` rows and `bytes` bytes is done: tells the callback, if any.
    pub(crate) fn step_done(&self, rows: u64, bytes: u64) {
        let Some(hook) = &self.hook else { return };
        let now = {
            let mut d = self.done.lock().unwrap_or_else(|p| p.into_inner());
            d.steps_done += 1;
            d.rows_done += rows;
            d.bytes_done += bytes;
            *d
        };
        // A panicking callback must not take the read down with it.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (hook.0)(now)));
    }
}

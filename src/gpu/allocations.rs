//! Device memory allocated through [`DeviceBuffer`](super::DeviceBuffer) on one GPU: what is live now,
//! and the most that was live while a watch was open.
//!
//! This is what rmm's statistics count (the measure cuDF's baseline reports as its peak): bytes
//! handed out and not yet given back, counted when the allocation returns and when the free is
//! queued. `cuMemGetInfo` counts more: the stream-ordered pool keeps freed memory reserved (see
//! [`GpuContext::ensure_pool_keeps_memory`](super::GpuContext)), and fragmentation holds some of it.

use std::sync::{Arc, Mutex};

/// The live bytes of one GPU's [`DeviceBuffer`](super::DeviceBuffer)s and the watches open on them.
#[derive(Debug, Default)]
pub struct AllocationCounter {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    live: u64,
    next_id: u64,
    /// Each open watch: its id and the most bytes live since it opened.
    watches: Vec<(u64, u64)>,
}

impl AllocationCounter {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain integers behind; they stay usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `bytes` were allocated.
    pub(crate) fn allocated(&self, bytes: u64) {
        let mut s = self.state();
        s.live += bytes;
        let live = s.live;
        for w in &mut s.watches {
            w.1 = w.1.max(live);
        }
    }

    /// `bytes` allocated earlier were given back.
    pub(crate) fn freed(&self, bytes: u64) {
        let mut s = self.state();
        s.live = s.live.saturating_sub(bytes);
    }

    /// Bytes live now.
    pub fn live_bytes(&self) -> u64 {
        self.state().live
    }

    /// Starts watching the peak from now on. Watches may overlap (two reads on one GPU): each sees
    /// every allocation made while it is open, its own or not, as a per-device rmm resource does.
    pub fn watch(self: &Arc<Self>) -> AllocationWatch {
        let mut s = self.state();
        let id = s.next_id;
        s.next_id += 1;
        let live = s.live;
        s.watches.push((id, live));
        AllocationWatch {
            counter: self.clone(),
            id,
            start: live,
        }
    }
}

/// The peak of live device memory since [`AllocationCounter::watch`]; closed on drop.
#[derive(Debug)]
pub struct AllocationWatch {
    counter: Arc<AllocationCounter>,
    id: u64,
    start: u64,
}

impl AllocationWatch {
    /// The most bytes live at once since the watch opened, less those live when it opened (rmm's
    /// `peak_bytes` of a statistics frame pushed then).
    pub fn peak_bytes(&self) -> u64 {
        let s = self.counter.state();
        let peak = s.watches.iter().find(|w| w.0 == self.id).map_or(self.start, |w| w.1);
        peak.saturating_sub(self.start)
    }
}

impl Drop for AllocationWatch {
    fn drop(&mut self) {
        self.counter.state().watches.retain(|w| w.0 != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_sees_the_most_live_at_once_beyond_its_start() {
        let c = Arc::new(AllocationCounter::default());
        c.allocated(100);
        let w = c.watch();
        assert_eq!(w.peak_bytes(), 0);
        c.allocated(50);
        c.allocated(30);
        c.freed(50);
        c.allocated(10);
        assert_eq!(c.live_bytes(), 140);
        // 100 + 50 + 30 live at once, 80 beyond the start; the later 10 stays under that.
        assert_eq!(w.peak_bytes(), 80);
        c.freed(140);
        assert_eq!(w.peak_bytes(), 80);
        assert_eq!(c.live_bytes(), 0);
    }

    #[test]
    fn overlapping_watches_each_keep_their_own_start_and_a_closed_one_is_forgotten() {
        let c = Arc::new(AllocationCounter::default());
        let first = c.watch();
        c.allocated(40);
        let second = c.watch();
        c.allocated(20);
        c.freed(60);
        c.allocated(5);
        assert_eq!(first.peak_bytes(), 60);
        assert_eq!(second.peak_bytes(), 20);
        drop(first);
        assert_eq!(c.state().watches.len(), 1);
        drop(second);
        assert!(c.state().watches.is_empty());
        // Freeing more than is live (a buffer from before the counter) does not wrap.
        c.freed(1000);
        assert_eq!(c.live_bytes(), 0);
    }
}

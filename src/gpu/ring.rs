//! A ring of page-locked host memory that several threads fill at once and that is copied to the
//! device in the order its places were taken, places that follow each other (in the ring and in the
//! destination) in one copy.
//!
//! Why: the copy engine runs copies one after another, each costing about 2.7 us beside its bytes on
//! the H200 (`tools/experiments/copyrate.cu`). `tools/experiments/ringcopy.cu` read a hot 2.85 GB file
//! with 12 threads in 4 MiB pieces: each thread's own three buffers, a copy per piece on the thread's
//! stream, 58.84 / 60.64 ms best / median; one ring of the same size, copies issued in file order on
//! one stream and merged (680 copies became about 430), 53.59 / 53.87 ms; the same ring without the
//! merging 61.27 / 68.60 ms.
//!
//! A thread takes a [`Place`] ([`PinnedRing::place`]), waits until the copies that read its bytes on
//! the ring's last lap are done ([`PinnedRing::writable`]), writes it, then gives it back with its
//! destination ([`PinnedRing::filled`]). Copies are queued from the oldest place on, as far as the
//! places are filled, and past a place still being written only where the copy engine has nothing
//! left: copied strictly in order, a read slow to finish held back every copy behind it while the
//! ring filled up (on the H200 a GPU decode's reads of a 179 MB step took 4.8-5.2 ms, against
//! 4.0-4.3 with each thread's own buffers, and the whole read was slower: 70.06 ms against 58.97
//! median).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu::memory::{Event, FillingBuffer, PinnedAlloc, PinnedBuffer, Stream};

/// Places keep their start's position within a page of this size (see [`PinnedRing::place`]).
pub(crate) const RING_PAGE: u64 = 4096;

/// A pinned host ring; `T` is what the caller tags each place with, handed back once its copy is queued.
pub(crate) struct PinnedRing<T> {
    mem: PinnedBuffer,
    /// The copies, one after another.
    stream: Stream,
    state: Mutex<RingState<T>>,
    /// Signalled when copies are queued.
    queued: Condvar,
}

impl<T> std::fmt::Debug for PinnedRing<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedRing").field("capacity", &self.mem.len()).finish()
    }
}

impl<T> Drop for PinnedRing<T> {
    fn drop(&mut self) {
        // The memory is freed next (its own event covers none of the ring's copies): the copies still
        // queued, as after a fetch that failed before its last reset, must be done first.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.stream.synchronize()));
    }
}

/// A place in the ring, taken by [`PinnedRing::place`], given back by [`PinnedRing::filled`].
#[derive(Debug)]
pub(crate) struct Place {
    seq: u64,
    span: Span,
}

/// Where a place lies: `len` bytes from `start`, a position that grows through every lap of the ring,
/// at `at` in its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u64,
    at: usize,
    len: usize,
}

impl Span {
    fn end(&self) -> u64 {
        self.start + self.len as u64
    }
}

/// Hands out the places of a ring of `capacity` bytes, one after another (no I/O: tested in CI).
#[derive(Debug, Clone)]
struct Placer {
    capacity: u64,
    /// Where the next place may start.
    next: u64,
}

impl Placer {
    /// The next place of `len` bytes whose start lies at `phase` within a page: the first such
    /// position from the last place's end, or the next lap's where the place would cross the ring's
    /// end. `None` where it cannot fit even at a lap's start.
    fn place(&mut self, len: u64, phase: u64) -> Option<Span> {
        let phase = phase % RING_PAGE;
        if phase + len > self.capacity {
            return None;
        }
        let mut start = self.next + (phase + RING_PAGE - self.next % RING_PAGE) % RING_PAGE;
        if start % self.capacity + len > self.capacity {
            start = self.next.div_ceil(self.capacity) * self.capacity + phase;
        }
        self.next = start + len;
        Some(Span {
            start,
            at: (start % self.capacity) as usize,
            len: len as usize,
        })
    }
}

/// A place taken and not yet known to be copied.
struct Entry<T> {
    span: Span,
    state: EntryState<T>,
}

enum EntryState<T> {
    /// Being written.
    Held,
    /// Written, its copy not queued yet.
    Filled(Filled<T>),
    /// Its copy queued: the ring's copy of this number.
    Queued(u64),
}

struct Filled<T> {
    dest: Arc<FillingBuffer>,
    dst_offset: u64,
    /// Bytes to copy, from the place's start.
    n: usize,
    tag: T,
}

struct RingState<T> {
    placer: Placer,
    next_seq: u64,
    /// Oldest first; the front one is place `front_seq`.
    entries: VecDeque<Entry<T>>,
    front_seq: u64,
    /// The events behind the copies not known to be done, oldest first: the front one is copy
    /// `done_copies`. The copies run one after another on one stream, so they finish in that order.
    in_flight: VecDeque<Arc<Event>>,
    /// Copies known to be done: every copy numbered below this one.
    done_copies: u64,
    /// Copies queued since the last reset (the next copy's number).
    copies: u64,
}

impl<T> RingState<T> {
    fn new(capacity: u64) -> Self {
        Self {
            placer: Placer { capacity, next: 0 },
            next_seq: 0,
            entries: VecDeque::new(),
            front_seq: 0,
            in_flight: VecDeque::new(),
            done_copies: 0,
            copies: 0,
        }
    }

    /// Whether entry state `state` is a place whose copy is done.
    fn copied(&self, state: &EntryState<T>) -> bool {
        matches!(state, EntryState::Queued(c) if *c < self.done_copies)
    }

    /// Counts the copies done so far (asking only until the first that is not: they finish in
    /// order), and drops the oldest places whose copies are done.
    fn retire(&mut self) {
        while self.in_flight.front().is_some_and(|c| c.query().unwrap_or(false)) {
            self.in_flight.pop_front();
            self.done_copies += 1;
        }
        while self.entries.front().is_some_and(|e| self.copied(&e.state)) {
            self.entries.pop_front();
            self.front_seq += 1;
        }
    }

    /// Whether the copy engine has nothing left to do (every copy queued is done).
    fn idle(&self) -> bool {
        self.in_flight.back().is_none_or(|c| c.query().unwrap_or(false))
    }

    /// What the writer of a place ending at `need` + the ring's size waits for: `None` where every
    /// place that shares its bytes (those starting before `need`) is copied; otherwise the copy to
    /// wait for, or `Some(None)` where such a place's copy is not queued yet.
    fn blocking(&self, need: u64) -> Option<Option<Arc<Event>>> {
        for e in self.entries.iter().take_while(|e| e.span.start < need) {
            match &e.state {
                _ if self.copied(&e.state) => {}
                EntryState::Queued(c) => return Some(self.in_flight.get((c - self.done_copies) as usize).cloned()),
                EntryState::Held | EntryState::Filled(_) => return Some(None),
            }
        }
        None
    }

    fn slots(&self) -> Vec<Slot> {
        self.entries
            .iter()
            .map(|e| match &e.state {
                EntryState::Held => Slot::Held,
                EntryState::Filled(f) => Slot::Filled(CopyPart {
                    at: e.span.at,
                    n: f.n,
                    dest: Arc::as_ptr(&f.dest) as usize,
                    dst_offset: f.dst_offset,
                }),
                EntryState::Queued(_) => Slot::Queued,
            })
            .collect()
    }
}

/// Where a filled place's bytes are and go: `n` bytes at `at` in the ring, to `dst_offset` of the
/// destination `dest` (its address, as an identity).
#[derive(Debug, Clone, Copy)]
struct CopyPart {
    at: usize,
    n: usize,
    dest: usize,
    dst_offset: u64,
}

/// A place as [`runs_to_queue`] sees it.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// Being written.
    Held,
    /// Written, its copy not queued.
    Filled(CopyPart),
    /// Its copy queued or done.
    Queued,
}

/// The copies to queue, as `(first place, places)`, over the places oldest first: in order, every run
/// of filled places up to the first place still being written; where the copy engine is `idle`, the
/// filled places after that too (so that it does not wait for a place slow to be written).
fn runs_to_queue(slots: &[Slot], idle: bool) -> Vec<(usize, usize)> {
    let part = |s: &Slot| match s {
        Slot::Filled(p) => Some(*p),
        _ => None,
    };
    let mut runs = Vec::new();
    let mut i = 0;
    while i < slots.len() {
        match slots[i] {
            Slot::Held if !idle => break,
            Slot::Held | Slot::Queued => i += 1,
            Slot::Filled(_) => {
                let k = run_len(slots[i..].iter().map(part)).max(1);
                runs.push((i, k));
                i += k;
            }
        }
    }
    runs
}

/// How many of the places from one on (`None`: not filled, or copied) one copy takes: filled places
/// that follow each other in the ring and in the same destination. Zero where the first is not filled.
fn run_len(places: impl IntoIterator<Item = Option<CopyPart>>) -> usize {
    let mut n = 0usize;
    let mut prev: Option<CopyPart> = None;
    for part in places {
        let Some(p) = part else { break };
        if let Some(q) = prev
            && !(q.at + q.n == p.at && q.dest == p.dest && q.dst_offset + q.n as u64 == p.dst_offset)
        {
            break;
        }
        prev = Some(p);
        n += 1;
    }
    n
}

impl<T> PinnedRing<T> {
    /// A ring of `capacity` bytes (rounded up to a page) on `ctx`, with a stream of its own.
    pub fn new(ctx: &Arc<GpuContext>, capacity: usize, how: PinnedAlloc) -> Result<Self> {
        let capacity = capacity.max(1).div_ceil(RING_PAGE as usize) * RING_PAGE as usize;
        let mem = PinnedBuffer::new(ctx, capacity, how)?;
        if !mem.is_aligned(RING_PAGE as usize) {
            return Err(Error::device(
                "allocating a pinned ring",
                "the memory is not page aligned",
            ));
        }
        Ok(Self {
            mem,
            stream: Stream::new(ctx)?,
            state: Mutex::new(RingState::new(capacity as u64)),
            queued: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, RingState<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for every copy queued so far, then starts over from an empty ring (places still held or
    /// not copied, as after a failed read, are forgotten). Call before and after each use.
    pub(crate) fn reset(&self) -> Result<()> {
        self.stream.synchronize()?;
        *self.lock() = RingState::new(self.mem.len() as u64);
        Ok(())
    }

    /// The places taken and the copies queued since the last reset.
    pub fn counts(&self) -> (u64, u64) {
        let st = self.lock();
        (st.next_seq, st.copies)
    }

    /// Takes the next place, for what `take` returns: `(what, len, file_offset)`, `len` bytes whose
    /// start lies at `file_offset`'s position within a page (so that the copy from the page cache into
    /// it runs equally aligned, and a read of a page-aligned offset can be `O_DIRECT`). `take` runs
    /// under the ring's lock, so places are taken in the order of what it takes. `Ok(None)` where it
    /// returns `None`.
    pub(crate) fn place<P>(&self, take: impl FnOnce() -> Option<(P, usize, u64)>) -> Result<Option<(P, Place)>> {
        let mut st = self.lock();
        let Some((what, len, file_offset)) = take() else {
            return Ok(None);
        };
        let span = st.placer.place(len as u64, file_offset % RING_PAGE).ok_or_else(|| {
            Error::device(
                "taking a place in the pinned ring",
                format!("{len} bytes do not fit in a ring of {} bytes", self.mem.len()),
            )
        })?;
        let seq = st.next_seq;
        st.next_seq += 1;
        st.entries.push_back(Entry {
            span,
            state: EntryState::Held,
        });
        Ok(Some((what, Place { seq, span })))
    }

    /// The place's bytes, once the copies that read them on the ring's last lap are done; `None`
    /// where `abort` was set while waiting.
    pub(crate) fn writable<'a>(&'a self, place: &'a mut Place, abort: &AtomicBool) -> Result<Option<&'a mut [u8]>> {
        let need = place.span.end().saturating_sub(self.mem.len() as u64);
        let mut st = self.lock();
        loop {
            if abort.load(Ordering::Relaxed) {
                return Ok(None);
            }
            match st.blocking(need) {
                None => break,
                Some(Some(done)) => {
                    drop(st);
                    done.synchronize()?;
                    st = self.lock();
                    st.retire();
                }
                // Such a place is still written, or waits for the places before it: its copy is
                // queued once they are filled. (A timeout, so that `abort` is seen.)
                Some(None) => {
                    st = self
                        .queued
                        .wait_timeout(st, Duration::from_millis(5))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        }
        drop(st);
        // SAFETY: the span lies in the ring (Placer keeps `at + len` within the capacity). No other
        // place overlaps it: places are taken one after another, so the only ones sharing its bytes
        // are of earlier laps and start before `need`, and every copy of those is done (above) while
        // their places were given back before being copied. The slice borrows the place's only
        // handle, so no second slice of it lives at the same time, and the place is given back (and
        // copied) only after the borrow ends.
        Ok(Some(unsafe {
            std::slice::from_raw_parts_mut(self.mem.as_ptr().add(place.span.at), place.span.len)
        }))
    }

    /// Gives back a filled place: its first `n` bytes go to `dst_offset` of `dest`. Then queues
    /// copies: of the filled places from the oldest place not yet copied on, and, where the copy
    /// engine has nothing left to do, of every filled place (a place slow to be written then holds
    /// back only its own copy). Places that follow each other go in one copy. `on_queued` is called,
    /// under the ring's lock (so in the order of the copies), with each copied place's tag and the
    /// event recorded behind its copy, which, the copies running one after another on one stream,
    /// also covers every copy queued before.
    pub(crate) fn filled(
        &self,
        place: Place,
        dest: &Arc<FillingBuffer>,
        dst_offset: u64,
        n: usize,
        tag: T,
        on_queued: &mut dyn FnMut(T, &Arc<Event>),
    ) -> Result<()> {
        if n > place.span.len {
            return Err(Error::device(
                "giving back a place of the pinned ring",
                format!("{n} bytes filled in a place of {}", place.span.len),
            ));
        }
        let mut st = self.lock();
        let i = place.seq.checked_sub(st.front_seq).map(|i| i as usize);
        let Some(e) = i.and_then(|i| st.entries.get_mut(i)) else {
            return Err(Error::device(
                "giving back a place of the pinned ring",
                "the place is not the ring's (it was reset)",
            ));
        };
        e.state = EntryState::Filled(Filled {
            dest: dest.clone(),
            dst_offset,
            n,
            tag,
        });
        st.retire();
        let idle = st.idle();
        for (i, k) in runs_to_queue(&st.slots(), idle) {
            self.queue_run(&mut st, i, k, on_queued)?;
        }
        drop(st);
        self.queued.notify_all();
        Ok(())
    }

    /// Queues one copy of the `k` filled places from entry `i` on, which follow each other in the
    /// ring and in one destination ([`runs_to_queue`]).
    fn queue_run(
        &self,
        st: &mut RingState<T>,
        i: usize,
        k: usize,
        on_queued: &mut dyn FnMut(T, &Arc<Event>),
    ) -> Result<()> {
        let mut run = st.entries.range(i..i + k).filter_map(|e| match &e.state {
            EntryState::Filled(f) => Some((e.span.at, f)),
            _ => None,
        });
        let Some((at, first)) = run.next() else {
            return Ok(());
        };
        let (dest, dst_offset) = (first.dest.clone(), first.dst_offset);
        let bytes = first.n + run.map(|(_, f)| f.n).sum::<usize>();
        // SAFETY: the k places lie one after another in the ring from `first.at` (run_len), so the
        // bytes are within it; their writers gave them back (no slice of them lives), and no place of
        // a later lap writes them before this copy's event, recorded below, completes (`writable`
        // waits for it).
        unsafe { dest.copy_from_host(dst_offset, self.mem.as_ptr().add(at), bytes, &self.stream)? };
        let done = Arc::new(Event::new(self.stream.context())?);
        self.stream.record(&done)?;
        for e in st.entries.range_mut(i..i + k) {
            if let EntryState::Filled(f) = std::mem::replace(&mut e.state, EntryState::Queued(st.copies)) {
                on_queued(f.tag, &done);
            }
        }
        st.in_flight.push_back(done);
        st.copies += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn places_follow_each_other_keep_their_phase_and_wrap_at_the_end() {
        let mut p = Placer {
            capacity: 12 * MIB,
            next: 0,
        };
        // Pieces of one task at page phase 100: back to back.
        let a = p.place(4 * MIB, 100).unwrap();
        let b = p.place(4 * MIB, 100).unwrap();
        assert_eq!((a.start, a.at), (100, 100));
        assert_eq!(b.start, a.end());
        // A new task at phase 8: the next position with that phase.
        let c = p.place(MIB, 8).unwrap();
        assert_eq!(c.start, 8 * MIB + RING_PAGE + 8);
        assert_eq!(c.start % RING_PAGE, 8);
        // 3 MiB no longer fits before the end (9 MiB + a page used): the next lap's start.
        let d = p.place(3 * MIB, 8).unwrap();
        assert_eq!((d.start, d.at), (12 * MIB + 8, 8));
        // Every place within the ring, at its phase.
        for s in [a, b, c, d] {
            assert!(s.at as u64 + s.len as u64 <= p.capacity, "{s:?}");
            assert_eq!(s.start % p.capacity, s.at as u64);
        }
        // Too long for the ring at its phase.
        assert!(p.place(12 * MIB, 1).is_none());
        assert!(p.place(12 * MIB, 0).is_some());
    }

    #[test]
    fn one_copy_takes_the_filled_places_that_follow_each_other() {
        let part = |at: usize, n: usize, dest: usize, dst_offset: u64| {
            Some(CopyPart {
                at,
                n,
                dest,
                dst_offset,
            })
        };
        // Three pieces back to back in the ring and the destination, then one not filled.
        let run = [
            part(0, 10, 1, 100),
            part(10, 5, 1, 110),
            part(15, 7, 1, 115),
            None,
            part(29, 1, 1, 129),
        ];
        assert_eq!(run_len(run), 3);
        assert_eq!(run_len([None, part(0, 1, 1, 0)]), 0);
        assert_eq!(run_len([]), 0);
        // A gap in the ring (a new task's page phase, or the wrap), in the destination, or another
        // destination ends the copy.
        assert_eq!(run_len([part(0, 10, 1, 0), part(11, 5, 1, 10)]), 1);
        assert_eq!(run_len([part(0, 10, 1, 0), part(10, 5, 1, 11)]), 1);
        assert_eq!(run_len([part(0, 10, 1, 0), part(10, 5, 2, 10)]), 1);
        assert_eq!(run_len([part(90, 10, 1, 0), part(0, 5, 1, 10)]), 1);
    }

    /// Places `lens` long, back to back from 0, into one destination.
    fn filled_back_to_back(lens: &[usize]) -> Vec<Slot> {
        let mut at = 0;
        lens.iter()
            .map(|&n| {
                at += n;
                Slot::Filled(CopyPart {
                    at: at - n,
                    n,
                    dest: 1,
                    dst_offset: (at - n) as u64,
                })
            })
            .collect()
    }

    #[test]
    fn copies_go_in_order_up_to_a_place_being_written_and_past_it_when_the_engine_is_idle() {
        let mut s = filled_back_to_back(&[4, 4, 4, 4, 4, 4]);
        s[3] = Slot::Held;
        assert_eq!(runs_to_queue(&s, false), [(0, 3)]);
        assert_eq!(runs_to_queue(&s, true), [(0, 3), (4, 2)]);
        // Places queued out of order before are stepped over: the filled ones after them still go
        // (a read once ended with a step never handed on, when this stopped at the first queued place).
        s[0] = Slot::Queued;
        s[3] = Slot::Filled(CopyPart {
            at: 12,
            n: 4,
            dest: 1,
            dst_offset: 12,
        });
        s[4] = Slot::Queued;
        assert_eq!(runs_to_queue(&s, false), [(1, 3), (5, 1)]);
        // Nothing filled, or only places being written: nothing.
        assert!(runs_to_queue(&[Slot::Held, Slot::Queued], true).is_empty());
        assert!(runs_to_queue(&[], true).is_empty());
    }

    #[test]
    fn places_never_overlap_within_a_lap() {
        let mut p = Placer {
            capacity: 40 * RING_PAGE,
            next: 0,
        };
        let mut spans = Vec::new();
        for i in 0..500u64 {
            let len = 1 + (i * 7919) % (9 * RING_PAGE);
            spans.push(p.place(len, i * 31).unwrap());
        }
        for w in spans.windows(2) {
            assert!(w[1].start >= w[0].end(), "{w:?}");
        }
        // Two places less than a lap apart never share a byte of memory.
        for (i, x) in spans.iter().enumerate() {
            for y in &spans[i + 1..] {
                if y.end() > x.start + p.capacity {
                    break;
                }
                let (xs, ys) = (x.at..x.at + x.len, y.at..y.at + y.len);
                assert!(xs.end <= ys.start || ys.end <= xs.start, "{x:?} {y:?}");
            }
        }
    }
}

//! The staged backend: positional reads into pinned host bounce buffers, then asynchronous copies to
//! the GPU, reads overlapping copies.
//!
//! Each of N worker threads owns a CUDA stream and K page-aligned pinned buffers, allocated once when
//! the backend is built (pinning is expensive and must stay out of timed fetches). Tasks are handed out
//! through an atomic counter; a task larger than a buffer is read in buffer-sized pieces. A buffer is
//! reused only after the event recorded behind its copy has completed, so a worker's next `pread` runs
//! while its previous copies are still in flight. Every copy comes from pinned memory (no pageable
//! copies); with an aligned plan the reads can use `O_DIRECT` straight into the pinned buffers.

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::gpu::{DeviceBuffer, DeviceWriter, GpuContext, PinnedAlloc, PinnedBuffer, Stream, guard};
use crate::io::pread::{open_direct, pread_exact};
use crate::io::{IoBackend, IoLog, IoPath, TaskRecord, check_dest_len, task_location};
use crate::metadata::ParquetSource;
use crate::plan::{DIRECT_IO_ALIGN, ReadPlan};

/// How a [`StagedBackend`] is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagedOptions {
    /// Worker threads (0: three per four cores).
    pub threads: usize,
    /// Size of each pinned bounce buffer (rounded up to 4 KiB); larger tasks are read in pieces.
    pub buffer_size: usize,
    /// Pinned buffers per worker (at least 2, so reads overlap copies).
    pub buffers_per_thread: usize,
    /// Use `O_DIRECT` reads when the plan is aligned and the file system accepts it.
    pub direct_io: bool,
    /// How the pinned buffers are obtained.
    pub pinned: PinnedAlloc,
}

impl Default for StagedOptions {
    fn default() -> Self {
        Self {
            threads: 0,
            buffer_size: 4 << 20,
            buffers_per_thread: 3,
            direct_io: false,
            pinned: PinnedAlloc::HugePages,
        }
    }
}

struct Slot {
    /// Its event covers the copy queued from it.
    buf: PinnedBuffer,
    /// Index (into the worker's records) of the task whose copy from this buffer may be in flight.
    pending: Option<usize>,
}

struct Worker {
    stream: Stream,
    slots: Vec<Slot>,
}

/// Reads into pinned host buffers and copies them to device memory asynchronously.
pub struct StagedBackend {
    ctx: Arc<GpuContext>,
    workers: Vec<Mutex<Worker>>,
    opts: StagedOptions,
    reason: Arc<str>,
}

impl std::fmt::Debug for StagedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagedBackend").field("opts", &self.opts).finish()
    }
}

impl StagedBackend {
    /// Builds the backend on `ctx`, allocating every worker's stream, events and pinned buffers now.
    pub fn new(ctx: Arc<GpuContext>, opts: StagedOptions) -> Result<Self> {
        let threads = if opts.threads == 0 {
            // Three workers per four cores: on the 16-core H200 machine 12 workers matched or beat 16 in
            // five of six paired runs (the CUDA driver's threads and the copies need CPU too).
            let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(4);
            (cores * 3 / 4).max(1)
        } else {
            opts.threads
        };
        let buffer_size =
            (opts.buffer_size.max(1) as u64).div_ceil(DIRECT_IO_ALIGN) as usize * DIRECT_IO_ALIGN as usize;
        let per = opts.buffers_per_thread.max(2);
        let mut workers = Vec::with_capacity(threads);
        for _ in 0..threads {
            let stream = Stream::new(&ctx)?;
            let mut slots = Vec::with_capacity(per);
            for _ in 0..per {
                slots.push(Slot {
                    // One page of slack: buffered reads land at the file offset's in-page position (see `read`).
                    buf: PinnedBuffer::new(&ctx, buffer_size + DIRECT_IO_ALIGN as usize, opts.pinned)?,
                    pending: None,
                });
            }
            workers.push(Mutex::new(Worker { stream, slots }));
        }
        Ok(Self {
            ctx,
            workers,
            opts: StagedOptions {
                threads,
                buffer_size,
                buffers_per_thread: per,
                direct_io: opts.direct_io,
                pinned: opts.pinned,
            },
            reason: Arc::from("staged: pread into pinned buffers, async copy to the GPU"),
        })
    }

    /// Sets the reason recorded in every task (for example why cuFile was not used).
    pub fn with_reason(mut self, reason: impl Into<Arc<str>>) -> Self {
        self.reason = reason.into();
        self
    }

    /// The options in effect (threads resolved, buffer size rounded).
    pub fn options(&self) -> StagedOptions {
        self.opts
    }

    /// The GPU context.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    /// Runs the tasks `which` of `plan` into `dest`, times relative to `t0`; returns their records
    /// (sorted by task) and notes. Every worker stream that copied is joined into the buffer's stream.
    pub(crate) fn run_tasks(
        &self,
        source: &ParquetSource,
        plan: &ReadPlan,
        which: &[usize],
        dest: &DeviceWriter<'_>,
        reason: &Arc<str>,
        t0: Instant,
    ) -> Result<(Vec<TaskRecord>, Vec<String>)> {
        let mut notes = Vec::new();
        if which.is_empty() {
            return Ok((Vec::new(), notes));
        }
        let direct = if self.opts.direct_io && plan.options.align {
            match open_direct(source.path()) {
                Ok(f) => Some(f),
                Err(e) => {
                    notes.push(format!(
                        "O_DIRECT refused for {} ({e}): buffered reads",
                        source.path().display()
                    ));
                    None
                }
            }
        } else {
            None
        };
        let ctx = &self.ctx;
        // Work is handed out in bounce-buffer-sized pieces, not whole tasks: the last pieces then finish
        // close together, instead of one thread reading a whole task while the others idle.
        let pieces = split_into_pieces(plan, which, self.opts.buffer_size as u64, self.workers.len());
        let pieces = &pieces;
        let next = AtomicUsize::new(0);
        let abort = AtomicBool::new(false);
        let direct_failed = Mutex::new(None::<String>);
        let nthreads = self.workers.len().min(pieces.len()).max(1);
        let results: Vec<Result<Vec<TaskRecord>>> = std::thread::scope(|s| {
            let handles: Vec<_> = self.workers[..nthreads]
                .iter()
                .map(|w| {
                    let (next, abort, direct, direct_failed) = (&next, &abort, direct.as_ref(), &direct_failed);
                    s.spawn(move || {
                        let mut worker = w.lock().unwrap_or_else(|p| p.into_inner());
                        let r = guard("staged worker", || {
                            ctx.bind()?;
                            let job = Job {
                                source,
                                plan,
                                dest,
                                reason,
                                t0,
                                direct,
                                direct_failed,
                            };
                            job.run(&mut worker, pieces, next, abort)
                        });
                        if r.is_err() {
                            abort.store(true, Ordering::Relaxed);
                        }
                        r
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::device("staged worker", "a worker thread panicked")))
                })
                .collect()
        });
        // Later work on the buffer's stream (a copy back, a decode kernel) comes after every copy.
        let workers_done = t0.elapsed();
        for w in &self.workers[..nthreads] {
            dest.join(&w.lock().unwrap_or_else(|p| p.into_inner()).stream)?;
        }
        let joined = t0.elapsed();
        let mut pieces_done = Vec::with_capacity(pieces.len());
        for r in results {
            pieces_done.extend(r?);
        }
        if crate::config::trace_fetches() {
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let starts = pieces_done.iter().map(|r| r.start);
            eprintln!(
                "trace staged: {} pieces on {nthreads} threads, first read at {:.2} ms, last read at {:.2} ms, workers done at {:.2} ms, streams joined at {:.2} ms",
                pieces.len(),
                ms(starts.clone().min().unwrap_or_default()),
                ms(starts.max().unwrap_or_default()),
                ms(workers_done),
                ms(joined)
            );
        }
        let records = merge_piece_records(pieces_done);
        if let Some(m) = direct_failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
            notes.push(m);
        }
        Ok((records, notes))
    }
}

/// Where `file_offset` falls within a page: where a piece's bytes start in its bounce buffer. Zero
/// for the 4 KiB-aligned offsets of `O_DIRECT` reads.
fn in_page(file_offset: u64) -> usize {
    (file_offset % DIRECT_IO_ALIGN) as usize
}

/// A bounce-buffer-sized part of a task: `len` bytes at `offset` from the task's start.
#[derive(Debug, Clone, Copy)]
struct Piece {
    task: usize,
    offset: u64,
    len: u64,
}

/// Cuts tasks into pieces of at most `piece` bytes. The first and last `threads` pieces are cut four
/// times smaller: at the start the copy engine waits for the first reads to finish, at the end for the
/// slowest thread's last read, and smaller pieces there shorten both waits.
fn split_into_pieces(plan: &ReadPlan, which: &[usize], piece: u64, threads: usize) -> Vec<Piece> {
    let piece = piece.max(1);
    let mut out = Vec::new();
    for &task in which {
        let len = plan.tasks[task].len;
        let mut offset = 0;
        while offset < len {
            let n = piece.min(len - offset);
            out.push(Piece { task, offset, len: n });
            offset += n;
        }
    }
    let small = (piece / 4).div_ceil(DIRECT_IO_ALIGN) * DIRECT_IO_ALIGN;
    if out.len() <= 4 * threads || small >= piece {
        return out;
    }
    let cut = |p: Piece| {
        let mut parts = Vec::with_capacity(4);
        let mut off = 0;
        while off < p.len {
            let n = small.min(p.len - off);
            parts.push(Piece {
                task: p.task,
                offset: p.offset + off,
                len: n,
            });
            off += n;
        }
        parts
    };
    let (head, rest) = out.split_at(threads);
    let (middle, tail) = rest.split_at(rest.len() - threads);
    let mut ramped: Vec<Piece> = head.iter().flat_map(|&p| cut(p)).collect();
    ramped.extend_from_slice(middle);
    ramped.extend(tail.iter().flat_map(|&p| cut(p)));
    ramped
}

/// One record per task from the records of its pieces: reads and bytes summed, the earliest start
/// and the latest end.
fn merge_piece_records(mut pieces: Vec<TaskRecord>) -> Vec<TaskRecord> {
    pieces.sort_by_key(|r| (r.task, r.start));
    let mut out: Vec<TaskRecord> = Vec::new();
    for r in pieces {
        match out.last_mut() {
            Some(last) if last.task == r.task => {
                last.reads += r.reads;
                last.bytes += r.bytes;
                last.start = last.start.min(r.start);
                last.end = last.end.max(r.end);
            }
            _ => out.push(r),
        }
    }
    out
}

struct Job<'a> {
    source: &'a ParquetSource,
    plan: &'a ReadPlan,
    dest: &'a DeviceWriter<'a>,
    reason: &'a Arc<str>,
    t0: Instant,
    direct: Option<&'a File>,
    direct_failed: &'a Mutex<Option<String>>,
}

impl Job<'_> {
    fn run(&self, w: &mut Worker, pieces: &[Piece], next: &AtomicUsize, abort: &AtomicBool) -> Result<Vec<TaskRecord>> {
        let mut records: Vec<TaskRecord> = Vec::new();
        let r = self.run_inner(w, pieces, next, abort, &mut records);
        // Always drain: the buffers and `dest` must not be touched by copies after we return.
        let drained = w.stream.synchronize();
        let now = self.t0.elapsed();
        for slot in &mut w.slots {
            if let Some(p) = slot.pending.take() {
                records[p].end = records[p].end.max(now);
            }
        }
        r?;
        drained?;
        Ok(records)
    }

    /// Takes pieces until none are left; one record per piece (merged per task by the caller).
    fn run_inner(
        &self,
        w: &mut Worker,
        pieces: &[Piece],
        next: &AtomicUsize,
        abort: &AtomicBool,
        records: &mut Vec<TaskRecord>,
    ) -> Result<()> {
        let mut turn = 0usize;
        let nslots = w.slots.len();
        loop {
            if abort.load(Ordering::Relaxed) {
                return Ok(());
            }
            let Some(piece) = pieces.get(next.fetch_add(1, Ordering::Relaxed)) else {
                return Ok(());
            };
            let t = &self.plan.tasks[piece.task];
            // Mark finished copies first, so task end times are not held back until buffer reuse.
            for slot in w.slots.iter_mut() {
                if let Some(p) = slot.pending
                    && slot.buf.is_idle()?
                {
                    records[p].end = records[p].end.max(self.t0.elapsed());
                    slot.pending = None;
                }
            }
            let slot = &mut w.slots[turn % nslots];
            turn += 1;
            if let Some(p) = slot.pending.take() {
                slot.buf.as_mut_slice()?; // waits for the copy still reading this buffer
                records[p].end = records[p].end.max(self.t0.elapsed());
            }
            let start = self.t0.elapsed();
            let n = piece.len as usize;
            let file_offset = t.offset + piece.offset;
            let shift = in_page(file_offset);
            let reads = self.read(piece.task, file_offset, &mut slot.buf, n)?;
            self.dest
                .copy_from_pinned(t.dest_offset + piece.offset, &mut slot.buf, shift..shift + n, &w.stream)?;
            slot.pending = Some(records.len());
            records.push(TaskRecord {
                task: piece.task,
                path: IoPath::Staged,
                reason: self.reason.clone(),
                reads,
                bytes: piece.len,
                start,
                end: self.t0.elapsed(),
            });
        }
    }

    /// Reads `n` bytes at `offset` into the start of `buf`; returns the number of read calls.
    fn read(&self, task: usize, offset: u64, buf: &mut PinnedBuffer, n: usize) -> Result<u64> {
        let location = || task_location(self.source, self.plan, task);
        let align = DIRECT_IO_ALIGN as usize;
        if let Some(f) = self.direct
            && offset.is_multiple_of(DIRECT_IO_ALIGN)
            && buf.is_aligned(align)
            && self.direct_failed_msg().is_none()
        {
            let want = n.div_ceil(align) * align;
            let cap = buf.len();
            let dst = &mut buf.as_mut_slice()?[..want.min(cap)];
            let mut got = 0usize;
            let mut calls = 0u64;
            while got < n {
                calls += 1;
                match crate::io::faults::read_at(f, &mut dst[got..], offset + got as u64) {
                    Ok(0) => {
                        return Err(Error::ShortRead {
                            location: location(),
                            offset,
                            expected: n as u64,
                            got: got as u64,
                        });
                    }
                    Ok(k) => {
                        got += k;
                        if got < n && !got.is_multiple_of(align) {
                            // An unaligned partial read: finish with buffered reads.
                            let file = self.source.file();
                            return Ok(calls + pread_exact(file, &mut dst[got..n], offset + got as u64, &location())?);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                        let mut m = self.direct_failed.lock().unwrap_or_else(|p| p.into_inner());
                        m.get_or_insert_with(|| format!("O_DIRECT read refused ({e}): buffered reads from then on"));
                        drop(m);
                        let file = self.source.file();
                        return Ok(calls + pread_exact(file, &mut dst[got..n], offset + got as u64, &location())?);
                    }
                    Err(e) => {
                        return Err(Error::io(
                            location(),
                            format!("O_DIRECT read of {n} bytes at offset {offset}"),
                            e,
                        ));
                    }
                }
            }
            return Ok(calls);
        }
        // The bytes land at the same offset within a page as they have in the file (and in the page
        // cache), so the kernel's copy runs with source and destination equally aligned.
        let shift = in_page(offset);
        pread_exact(
            self.source.file(),
            &mut buf.as_mut_slice()?[shift..shift + n],
            offset,
            &location(),
        )
    }

    fn direct_failed_msg(&self) -> Option<String> {
        self.direct_failed.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl IoBackend for StagedBackend {
    type Buffer = DeviceBuffer;

    fn name(&self) -> String {
        format!("staged({} threads)", self.opts.threads)
    }

    /// Stream-ordered pool memory: only our own copies write it (cuFile, which needs `cuMemAlloc`
    /// memory, allocates its own), and allocating or freeing it never synchronises the device, so a
    /// streaming read's next group is allocated while the GPU still works on the current one.
    fn alloc(&self, len: u64) -> Result<DeviceBuffer> {
        let len = usize::try_from(len)
            .map_err(|_| Error::device("allocating device memory", format!("{len} bytes do not fit in usize")))?;
        DeviceBuffer::alloc_pooled(&Stream::new(&self.ctx)?, len)
    }

    fn fetch_into(&self, source: &ParquetSource, plan: &ReadPlan, dest: &mut DeviceBuffer) -> Result<IoLog> {
        let started = Instant::now();
        check_dest_len(plan, dest.num_bytes() as u64)?;
        let all: Vec<usize> = (0..plan.tasks.len()).collect();
        let writer = dest.writer()?;
        let (tasks, notes) = self.run_tasks(source, plan, &all, &writer, &self.reason, started)?;
        Ok(IoLog {
            backend: self.name(),
            tasks,
            wall: started.elapsed(),
            notes,
            cufile_stats: None,
        })
    }
}

/// `len` bytes of device memory on `ctx`, ordered on a stream of its own, so that one reader's
/// buffers never wait for another's work.
pub(crate) fn alloc_device(ctx: &Arc<GpuContext>, len: u64) -> Result<DeviceBuffer> {
    let len = usize::try_from(len)
        .map_err(|_| Error::device("allocating device memory", format!("{len} bytes do not fit in usize")))?;
    DeviceBuffer::alloc(&Stream::new(ctx)?, len)
}

/// Wall time of a pinned host-to-device copy of `len` bytes (best of `reps`), the staged path's
/// ceiling: one pinned buffer, one stream.
pub fn pinned_copy_time(ctx: &Arc<GpuContext>, len: u64, reps: usize, pinned: PinnedAlloc) -> Result<Duration> {
    let mut dest = alloc_device(ctx, len)?;
    let mut src = PinnedBuffer::new(ctx, len as usize, pinned)?;
    let stream = Stream::new(ctx)?;
    let writer = dest.writer()?;
    let mut best = Duration::MAX;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        writer.copy_from_pinned(0, &mut src, 0..len as usize, &stream)?;
        stream.synchronize()?;
        best = best.min(t.elapsed());
    }
    writer.join(&stream)?;
    Ok(best)
}

//! The staged backend: positional reads into pinned host bounce buffers, then asynchronous copies to
//! the GPU, reads overlapping copies.
//!
//! Each of N workers owns a CUDA stream and K page-aligned pinned buffers, allocated once when the
//! backend is built (pinning is expensive and must stay out of timed fetches), and runs on a thread of
//! a pool also started then (starting threads per fetch delayed its first read). Tasks are handed out
//! through an atomic counter; a task larger than a buffer is read in buffer-sized pieces. A buffer is
//! reused only after the event recorded behind its copy has completed, so a worker's next `pread` runs
//! while its previous copies are still in flight. Every copy comes from pinned memory (no pageable
//! copies); with an aligned plan the reads can use `O_DIRECT` straight into the pinned buffers.
//!
//! Stepped fetches (the GPU decode's) read through a [`PinnedRing`] instead, as large as the workers'
//! buffers together: each piece takes the ring's next place as it is taken, and the copies are queued
//! in that order on the ring's one stream, a run of pieces that follow each other in one copy (fewer
//! copies, each of which costs the copy engine time beside its bytes).

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::gpu::{
    DeviceBuffer, DeviceWriter, Event, FillingBuffer, GpuContext, PinnedAlloc, PinnedBuffer, PinnedRing, Stream, guard,
};
use crate::io::host::named_pool;
use crate::io::pread::{cache_in_background, open_direct, pread_exact};
use crate::io::{DeliverStep, IoBackend, IoLog, IoPath, StepFetched, TaskRecord, check_dest_len, task_location};
use crate::metadata::ParquetSource;
use crate::plan::{DIRECT_IO_ALIGN, ReadPlan, ReadTask};

/// With `direct_when_cold`, the share of a read's pages missing from the page cache from which it
/// reads with `O_DIRECT`: a read that is mostly cold.
const COLD_SHARE: f64 = 0.5;

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
    /// ... only where most of the read's pages are not in the page cache (see `open_direct`).
    pub direct_when_cold: bool,
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
            direct_when_cold: false,
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
    /// The threads that run the workers (and a fetch's `O_DIRECT` choice), started with the backend:
    /// started per fetch, twelve threads took 0.6-1.4 ms of the H200's time before a read's first
    /// `pread`.
    threads: rayon::ThreadPool,
    /// Held by the fetch that has the threads: each of its jobs keeps a thread until the fetch ends, so
    /// two fetches' jobs interleaved in the pool's queue could each wait for a thread the other holds
    /// (a fetch that finds it held starts threads of its own, as every fetch did before).
    fetching: Mutex<()>,
    /// The bounce buffers of stepped fetches ([`fetch_steps_continuously`](Self::fetch_steps_continuously)), as much memory as
    /// the workers' own: pieces placed in file order, their copies queued in that order on one stream
    /// and merged where they follow each other (see [`PinnedRing`]). Held by one fetch at a time.
    ring: Mutex<PinnedRing<Arc<StepWork>>>,
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
        // Room for every worker's buffers, and for a piece's start moved to its position within a page.
        let ring = PinnedRing::new(
            &ctx,
            threads * per * buffer_size + 2 * DIRECT_IO_ALIGN as usize,
            opts.pinned,
        )?;
        // One more than the workers: a fetch's `O_DIRECT` choice runs beside them.
        let pool = named_pool(threads + 1, "gpu-parquet-staged", "staged")?;
        Ok(Self {
            ctx,
            workers,
            threads: pool,
            fetching: Mutex::new(()),
            ring: Mutex::new(ring),
            opts: StagedOptions {
                threads,
                buffer_size,
                buffers_per_thread: per,
                direct_io: opts.direct_io,
                direct_when_cold: opts.direct_when_cold,
                pinned: opts.pinned,
            },
            reason: Arc::from("staged: pread into pinned buffers, async copy to the GPU"),
        })
    }

    /// Sets the reason recorded in every task (for example why cuFile was not used).
    pub(crate) fn with_reason(mut self, reason: impl Into<Arc<str>>) -> Self {
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
        let mut cold = false;
        let direct = self.open_direct(source, &[plan], &mut notes, &mut cold);
        let ctx = &self.ctx;
        // Work is handed out in bounce-buffer-sized pieces, not whole tasks: the last pieces then finish
        // close together, instead of one thread reading a whole task while the others idle.
        let pieces = split_into_pieces(
            &plan.tasks,
            which,
            self.opts.buffer_size as u64,
            self.workers.len(),
            CutEnds::BOTH,
        );
        let pieces = &pieces;
        let next = AtomicUsize::new(0);
        let abort = AtomicBool::new(false);
        let direct_failed = Mutex::new(None::<String>);
        let nthreads = self.workers.len().min(pieces.len()).max(1);
        let results: Mutex<Vec<Result<Vec<TaskRecord>>>> = Mutex::new(Vec::with_capacity(nthreads));
        let mut jobs: Vec<Box<dyn FnOnce() + Send + '_>> = Vec::with_capacity(nthreads);
        for w in &self.workers[..nthreads] {
            let (next, abort, direct, direct_failed, results) =
                (&next, &abort, direct.as_ref(), &direct_failed, &results);
            jobs.push(Box::new(move || {
                let mut worker = w.lock().unwrap_or_else(|p| p.into_inner());
                let r = guard("staged worker", || {
                    ctx.bind()?;
                    let job = Job {
                        reading: PieceReader {
                            source,
                            plan,
                            direct,
                            direct_failed,
                        },
                        dest,
                        reason,
                        t0,
                    };
                    job.run(&mut worker, pieces, next, abort)
                });
                if r.is_err() {
                    abort.store(true, Ordering::Relaxed);
                }
                results.lock().unwrap_or_else(|p| p.into_inner()).push(r);
            }));
        }
        self.on_threads(jobs, || {});
        let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
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
        if crate::trace::enabled() {
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
        if cold {
            cache_in_background(
                source.path(),
                which.iter().map(|&t| (plan.tasks[t].offset, plan.tasks[t].len)),
            );
        }
        Ok((records, notes))
    }

    /// Runs `jobs`, each on a thread of its own, and `meanwhile` on this one; returns when all are done.
    /// The jobs run on the backend's threads when they are free and this thread is outside every rayon
    /// pool (waiting there, rayon would run that pool's other jobs on this thread, and one of them could
    /// be a fetch waiting for this one); otherwise on threads started for them.
    fn on_threads<'env>(&'env self, jobs: Vec<Box<dyn FnOnce() + Send + 'env>>, meanwhile: impl FnOnce()) {
        let held = match rayon::current_thread_index() {
            Some(_) => None,
            None => match self.fetching.try_lock() {
                Ok(held) => Some(held),
                Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            },
        };
        match held {
            Some(_held) => self.threads.in_place_scope(|s| {
                for job in jobs {
                    s.spawn(move |_| job());
                }
                meanwhile();
            }),
            None => std::thread::scope(|s| {
                for job in jobs {
                    s.spawn(job);
                }
                meanwhile();
            }),
        }
    }

    /// The file opened for `O_DIRECT` reads, where the backend asks for them and `plans` are aligned
    /// for them: always with `direct_io`, and with `direct_when_cold` where most of the pages the
    /// plans read are not in the page cache (`O_DIRECT` then reads the disk in large requests with no
    /// copy through the cache, and buffered reads of cached pages are faster than reading the disk
    /// again). A refusal is noted and reads stay buffered.
    /// `cold` is set where the file was opened so because the read was cold: the caller then asks the
    /// kernel to cache what it read, once read ([`cache_in_background`]), as buffered reads would have
    /// left it, so that the next read is not cold too.
    fn open_direct(
        &self,
        source: &ParquetSource,
        plans: &[&ReadPlan],
        notes: &mut Vec<String>,
        cold: &mut bool,
    ) -> Option<File> {
        if plans.is_empty() || !plans.iter().all(|p| p.options.align) {
            return None;
        }
        if !self.opts.direct_io {
            if !self.opts.direct_when_cold {
                return None;
            }
            let ranges = plans.iter().flat_map(|p| p.tasks.iter().map(|t| (t.offset, t.len)));
            let share = crate::io::pread::uncached_share(source.file(), ranges)?;
            if share < COLD_SHARE {
                return None;
            }
            notes.push(format!(
                "O_DIRECT: about {:.0} % of the read's pages were not in the page cache (then cached in the background)",
                share * 100.0
            ));
            *cold = true;
        }
        match open_direct(source.path()) {
            Ok(f) => Some(f),
            Err(e) => {
                // Buffered reads leave the pages cached themselves.
                *cold = false;
                notes.push(format!(
                    "O_DIRECT refused for {} ({e}): buffered reads",
                    source.path().display()
                ));
                None
            }
        }
    }

    /// Reads the plans one after another, as [`fetch_into`](IoBackend::fetch_into) would one per call,
    /// but with the same workers throughout: a worker that runs out of pieces of one step takes the
    /// next step's at once, and no step waits for its copies to finish before the next one's reads
    /// begin. (One call per step cost about 1.6 ms a step on the H200, when each call started its own
    /// threads, in which the copy engine had nothing to do: the workers drain their streams, the call
    /// returns, the next one starts its workers and reads.)
    ///
    /// Before reading step `k`, `admit(k)` is called, in order, from the calling thread: it may wait
    /// (for memory to hold the step), and `false` ends the fetch there. A step is handed to `deliver`,
    /// from whichever thread queued its last copy, once every copy into it is queued: its buffer's
    /// stream is ordered after them, so work queued there later sees the bytes, and its log's times
    /// end when the copies were queued, not when they finished. A step whose read fails is delivered as
    /// that error and stops the fetch; the steps it stops are not delivered. Returns once every worker
    /// has drained its stream.
    fn fetch_steps_continuously(
        &self,
        source: &ParquetSource,
        plans: &[Arc<ReadPlan>],
        admit: &mut dyn FnMut(usize) -> bool,
        deliver: &DeliverStep<'_, DeviceBuffer>,
    ) {
        let t0 = Instant::now();
        let all: Vec<&ReadPlan> = plans.iter().map(|p| p.as_ref()).collect();
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        let ring = &*ring;
        // Whether to read `O_DIRECT` (a `mincore` sample of the read's pages) is decided on a thread
        // of its own; the workers do not wait for it: a piece read before the choice is read buffered
        // (right either way: the file's bytes are the same), those after it as chosen. (In line, it
        // came 1.1-1.5 ms into a hot read on the H200; on its own thread, waited for, 0.8-1.1 ms, the
        // first read after it.)
        let choice: OnceLock<DirectChoice> = OnceLock::new();
        let feed = Feed::default();
        let abort = AtomicBool::new(false);
        let direct_failed = Mutex::new(None::<String>);
        let nworkers = self.workers.len();
        let fail = |k: usize, e: Error| {
            abort.store(true, Ordering::SeqCst);
            feed.close();
            deliver(k, Err(e));
        };
        // A fetch before this one that failed may have left copies queued and places held.
        if let Err(e) = ring.reset() {
            fail(0, e);
            return;
        }
        let published = AtomicUsize::new(0);
        let times = WorkerTimes::default();
        let mut jobs: Vec<Box<dyn FnOnce() + Send + '_>> = Vec::with_capacity(nworkers + 1);
        let (decided, all_plans) = (&choice, &all);
        jobs.push(Box::new(move || {
            let mut notes = Vec::new();
            let mut cold = false;
            // The choice is always made (a panic is caught), so no worker waits for it in vain.
            let file = match guard("deciding on O_DIRECT reads", || {
                Ok(self.open_direct(source, all_plans, &mut notes, &mut cold))
            }) {
                Ok(file) => file,
                Err(e) => {
                    cold = false;
                    notes.push(format!("{e}: buffered reads"));
                    None
                }
            };
            crate::trace::at(
                t0,
                format_args!("fetch_steps: O_DIRECT decided (from the fetch's start)"),
            );
            let _ = decided.set(DirectChoice { file, notes, cold });
        }));
        for _ in 0..nworkers {
            let (feed, abort, choice, direct_failed, fail, times) =
                (&feed, &abort, &choice, &direct_failed, &fail, &times);
            jobs.push(Box::new(move || {
                // The step this worker is on, to blame for a failure outside its reads.
                let mut on = 0usize;
                let r = guard("staged worker", || {
                    self.ctx.bind()?;
                    let steps = StepWorker {
                        times,
                        backend: self,
                        source,
                        ring,
                        t0,
                        choice,
                        direct_failed,
                    };
                    steps.run(&mut on, feed, abort, deliver)
                });
                if let Err(e) = r {
                    fail(on, e);
                }
            }));
        }
        self.on_threads(jobs, || {
            // Closed however this ends: a panic here (in `admit`, say) would otherwise leave the
            // workers waiting for steps, and the scope waiting for them, before it could unwind.
            let _closing = feed.closing();
            for (k, plan) in plans.iter().enumerate() {
                if abort.load(Ordering::SeqCst) || !admit(k) {
                    break;
                }
                match self.publish(k, k + 1 == plans.len(), plan, nworkers) {
                    Ok(Some(step)) => {
                        published.store(k, Ordering::SeqCst);
                        crate::trace::at(
                            t0,
                            format_args!("fetch_steps: step {k} published (from the fetch's start)"),
                        );
                        feed.push(step)
                    }
                    Ok(None) => {
                        // Nothing to read: no worker will see it, so it is delivered here.
                        let empty = self.alloc(0).map(|buffer| SteppedFetch {
                            buffer,
                            log: IoLog {
                                backend: self.name(),
                                notes: choice.wait().notes.clone(),
                                ..IoLog::default()
                            },
                            queued: Instant::now()..Instant::now(),
                        });
                        deliver(k, empty);
                    }
                    Err(e) => {
                        fail(k, e);
                        break;
                    }
                }
            }
        });
        if crate::trace::enabled() {
            let (places, copies) = ring.counts();
            crate::trace::at(
                t0,
                format_args!("fetch_steps: {places} pieces in {copies} copies, the last queued"),
            );
            crate::trace::at(t0, format_args!("fetch_steps: {}", times.describe()));
        }
        // Always drain: no copy may read the ring or write a step's buffer after this returns (the
        // steps not delivered are dropped then).
        if let Err(e) = ring.reset() {
            fail(published.load(Ordering::SeqCst), e);
        }
        let cold = choice.into_inner().is_some_and(|c| c.cold);
        if cold && !abort.load(Ordering::SeqCst) {
            let ranges = plans.iter().flat_map(|p| p.tasks.iter().map(|t| (t.offset, t.len)));
            cache_in_background(source.path(), ranges);
        }
    }

    /// Step `k`'s buffer and pieces (`last`: the fetch's last step), ready for the workers; `None` when
    /// it reads nothing.
    fn publish(&self, k: usize, last: bool, plan: &Arc<ReadPlan>, nworkers: usize) -> Result<Option<Arc<StepWork>>> {
        let all: Vec<usize> = (0..plan.tasks.len()).collect();
        let ends = CutEnds { first: k == 0, last };
        let pieces = split_into_pieces(&plan.tasks, &all, self.opts.buffer_size as u64, nworkers, ends);
        if pieces.is_empty() {
            return Ok(None);
        }
        let dest = Arc::new(FillingBuffer::new(self.alloc(plan.dest_len)?)?);
        Ok(Some(Arc::new(StepWork {
            k,
            plan: plan.clone(),
            dest,
            pieces,
            next: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            records: Mutex::new(Vec::new()),
        })))
    }
}

/// What [`StagedBackend::open_direct`] decided for a fetch: the file opened `O_DIRECT` (or `None`:
/// buffered reads), the notes for its log, and whether it was so opened because the read was cold.
struct DirectChoice {
    file: Option<File>,
    notes: Vec<String>,
    cold: bool,
}

/// One step of [`StagedBackend::fetch_steps_continuously`], handed on once every copy into it is queued: its log's
/// times run from the step's first read and end when the copies were queued.
type SteppedFetch = StepFetched<DeviceBuffer>;

/// A step being read by the workers of [`StagedBackend::fetch_steps_continuously`].
struct StepWork {
    k: usize,
    plan: Arc<ReadPlan>,
    dest: Arc<FillingBuffer>,
    pieces: Vec<Piece>,
    /// The next piece to take (under the ring's lock, so that pieces take places in order).
    next: AtomicUsize,
    /// Pieces whose copies are queued (counted under the ring's lock, in the copies' order).
    queued: AtomicUsize,
    /// One per piece, times from the start of the whole fetch.
    records: Mutex<Vec<TaskRecord>>,
}

/// The steps published so far, in order, and whether more will come.
#[derive(Default)]
struct Feed {
    steps: Mutex<(Vec<Arc<StepWork>>, bool)>,
    changed: Condvar,
}

impl Feed {
    fn push(&self, step: Arc<StepWork>) {
        self.steps.lock().unwrap_or_else(|p| p.into_inner()).0.push(step);
        self.changed.notify_all();
    }

    /// A guard that closes the feed when dropped, unwinding included.
    fn closing(&self) -> ClosingFeed<'_> {
        ClosingFeed(self)
    }

    /// No more steps: waiting workers return.
    fn close(&self) {
        self.steps.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.changed.notify_all();
    }

    /// Step `i`, once published; `None` once the feed is closed without it or `abort` is set.
    fn get(&self, i: usize, abort: &AtomicBool) -> Option<Arc<StepWork>> {
        let mut g = self.steps.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if abort.load(Ordering::SeqCst) {
                return None;
            }
            if let Some(s) = g.0.get(i) {
                return Some(s.clone());
            }
            if g.1 {
                return None;
            }
            g = self.changed.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Closes its feed when dropped ([`Feed::closing`]).
struct ClosingFeed<'a>(&'a Feed);

impl Drop for ClosingFeed<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Where the workers of one [`StagedBackend::fetch_steps_continuously`] spent their time, summed over them, in
/// nanoseconds (for `GPU_PARQUET_TRACE_FETCH`: beside a decode the same reads were measured slower).
#[derive(Default)]
struct WorkerTimes {
    /// Taking a piece and its place (the ring's lock).
    place: AtomicU64,
    /// Waiting for the place's bytes to be free (the copies of the ring's last lap).
    wait: AtomicU64,
    /// Reading the piece into its place.
    read: AtomicU64,
    /// The CPU time of those reads (with tracing on): about `read` when the page cache's copies keep
    /// the workers busy, well under it when they wait for a core or the disk.
    read_cpu: AtomicU64,
    /// Giving the place back: queueing copies (driver calls under the ring's lock) and handing on steps.
    give_back: AtomicU64,
}

impl WorkerTimes {
    fn add(counter: &AtomicU64, since: Instant) -> Instant {
        let now = Instant::now();
        counter.fetch_add(now.duration_since(since).as_nanos() as u64, Ordering::Relaxed);
        now
    }

    fn describe(&self) -> String {
        let ms = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64 / 1e6;
        format!(
            "workers' time summed: places {:.1} ms, waits for the ring {:.1} ms, reads {:.1} ms (CPU {:.1} ms), give-backs {:.1} ms",
            ms(&self.place),
            ms(&self.wait),
            ms(&self.read),
            ms(&self.read_cpu),
            ms(&self.give_back)
        )
    }
}

/// What one worker of [`StagedBackend::fetch_steps_continuously`] shares with the others.
struct StepWorker<'a> {
    times: &'a WorkerTimes,
    backend: &'a StagedBackend,
    source: &'a ParquetSource,
    ring: &'a PinnedRing<Arc<StepWork>>,
    t0: Instant,
    /// Whether to read `O_DIRECT`, once decided; buffered reads until then.
    choice: &'a OnceLock<DirectChoice>,
    direct_failed: &'a Mutex<Option<String>>,
}

impl StepWorker<'_> {
    /// Takes pieces, step after step, until the feed ends or `abort` is set; `on` is the step it
    /// works on. Each piece takes its place in the ring as it is taken, so places follow the pieces'
    /// order; the worker whose call queues a step's last copy hands the step on.
    fn run(
        &self,
        on: &mut usize,
        feed: &Feed,
        abort: &AtomicBool,
        deliver: &DeliverStep<'_, DeviceBuffer>,
    ) -> Result<()> {
        let mut at = 0usize;
        while let Some(step) = feed.get(at, abort) {
            at += 1;
            *on = step.k;
            loop {
                let reading = PieceReader {
                    source: self.source,
                    plan: &step.plan,
                    direct: self
                        .choice
                        .get()
                        .and_then(|c| c.file.as_ref())
                        .filter(|_| step.plan.options.align),
                    direct_failed: self.direct_failed,
                };
                let took = Instant::now();
                let taken = self.ring.place(|| {
                    let taken = step.next.fetch_add(1, Ordering::Relaxed);
                    let piece = *step.pieces.get(taken)?;
                    let offset = step.plan.tasks[piece.task].offset + piece.offset;
                    Some(((taken, piece), reading.room_for(&piece), offset))
                })?;
                let Some(((taken, piece), mut place)) = taken else {
                    break;
                };
                if abort.load(Ordering::Relaxed) {
                    return Ok(());
                }
                if step.k == 0 && taken == 0 {
                    crate::trace::at(
                        self.t0,
                        format_args!("fetch_steps: first piece taken (from the fetch's start)"),
                    );
                }
                let start = self.t0.elapsed();
                let waited = WorkerTimes::add(&self.times.place, took);
                let Some(room) = self.ring.writable(&mut place, abort)? else {
                    return Ok(());
                };
                let read = WorkerTimes::add(&self.times.wait, waited);
                let cpu = crate::trace::enabled().then(crate::trace::thread_cpu);
                let (reads, dest_offset) = reading.read_piece(&piece, room)?;
                if let Some(cpu) = cpu {
                    let used = crate::trace::thread_cpu().saturating_sub(cpu);
                    self.times.read_cpu.fetch_add(used.as_nanos() as u64, Ordering::Relaxed);
                }
                let given = WorkerTimes::add(&self.times.read, read);
                step.records.lock().unwrap_or_else(|p| p.into_inner()).push(TaskRecord {
                    task: piece.task,
                    path: IoPath::Staged,
                    reason: self.backend.reason.clone(),
                    reads,
                    bytes: piece.len,
                    start,
                    end: self.t0.elapsed(),
                });
                // The steps whose last copy this queued; counted in the copies' order.
                let mut complete = Vec::new();
                self.ring.filled(
                    place,
                    &step.dest,
                    dest_offset,
                    piece.len as usize,
                    step.clone(),
                    &mut |done: Arc<StepWork>, event: &Arc<Event>| {
                        if done.queued.fetch_add(1, Ordering::Relaxed) + 1 == done.pieces.len() {
                            complete.push((done, event.clone()));
                        }
                    },
                )?;
                for (done, event) in complete {
                    deliver(done.k, self.finish(&done, &event));
                }
                WorkerTimes::add(&self.times.give_back, given);
            }
        }
        Ok(())
    }

    /// Hands step's buffer on, ordered after `copied` (recorded behind its last copy queued, on the
    /// ring's one stream: so behind all of them), with its log.
    fn finish(&self, step: &StepWork, copied: &Event) -> Result<SteppedFetch> {
        let buffer = step.dest.finish(&[copied])?;
        let end = self.t0.elapsed();
        let mut records = std::mem::take(&mut *step.records.lock().unwrap_or_else(|p| p.into_inner()));
        let first = records.iter().map(|r| r.start).min().unwrap_or(end);
        for r in &mut records {
            r.start -= first;
            r.end -= first;
        }
        // Made by now, or soon: it is always made (see `fetch_steps`).
        let mut notes = self.choice.wait().notes.clone();
        if let Some(m) = self.direct_failed.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            notes.push(m);
        }
        Ok(SteppedFetch {
            buffer,
            log: IoLog {
                backend: self.backend.name(),
                tasks: merge_piece_records(records),
                wall: end - first,
                notes,
                cufile_stats: None,
            },
            queued: self.t0 + first..self.t0 + end,
        })
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

/// Which ends of a run of pieces [`split_into_pieces`] cuts smaller.
#[derive(Debug, Clone, Copy)]
struct CutEnds {
    /// The run starts the fetch: the copy engine waits for its first reads.
    first: bool,
    /// The run ends the fetch: what follows waits for its slowest thread's last read.
    last: bool,
}

impl CutEnds {
    const BOTH: Self = Self {
        first: true,
        last: true,
    };
}

/// Cuts tasks into pieces of at most `piece` bytes. Where `ends` asks, and there are more than four
/// pieces a thread, the first and last `threads` pieces are cut four times smaller: at the start of a
/// fetch the copy engine waits for the first reads to finish, at its end for the slowest thread's last
/// read, and smaller pieces there shorten both waits. A step in the middle of a stepped fetch has no
/// such waits (its workers come from the step before and go on to the next), and smaller copies
/// there only cost the copy engine time (1 MiB copies ran at 48.0 GB/s on the H200, 4 MiB at 53.2).
fn split_into_pieces(tasks: &[ReadTask], which: &[usize], piece: u64, threads: usize, ends: CutEnds) -> Vec<Piece> {
    let piece = piece.max(1);
    let mut out = Vec::new();
    for &task in which {
        let len = tasks[task].len;
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
    let head = if ends.first { threads } else { 0 };
    let tail = if ends.last { threads } else { 0 };
    let (first, rest) = out.split_at(head);
    let (middle, last) = rest.split_at(rest.len() - tail);
    let mut ramped: Vec<Piece> = first.iter().flat_map(|&p| cut(p)).collect();
    ramped.extend_from_slice(middle);
    ramped.extend(last.iter().flat_map(|&p| cut(p)));
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
    reading: PieceReader<'a>,
    dest: &'a DeviceWriter<'a>,
    reason: &'a Arc<str>,
    t0: Instant,
}

/// Reads pieces of one plan's tasks into bounce buffers.
struct PieceReader<'a> {
    source: &'a ParquetSource,
    plan: &'a ReadPlan,
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
            // The bytes land at the same offset within a page as they have in the file (and in the
            // page cache), so the kernel's copy runs with source and destination equally aligned.
            let shift = in_page(self.reading.plan.tasks[piece.task].offset + piece.offset);
            let (reads, dest_offset) = self.reading.read_piece(piece, &mut slot.buf.as_mut_slice()?[shift..])?;
            let held = shift..shift + piece.len as usize;
            self.dest
                .copy_from_pinned(dest_offset, &mut slot.buf, held, &w.stream)?;
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
}

impl PieceReader<'_> {
    /// Reads `piece` into the start of `dst` (which holds [`room_for`](Self::room_for) bytes or more
    /// for an `O_DIRECT` read); returns the read calls made and where the piece goes in the destination.
    fn read_piece(&self, piece: &Piece, dst: &mut [u8]) -> Result<(u64, u64)> {
        let task = &self.plan.tasks[piece.task];
        let reads = self.read(piece.task, task.offset + piece.offset, dst, piece.len as usize)?;
        Ok((reads, task.dest_offset + piece.offset))
    }

    /// The bytes `read_piece` may write for `piece`: an `O_DIRECT` read runs to the end of a page.
    fn room_for(&self, piece: &Piece) -> usize {
        let offset = self.plan.tasks[piece.task].offset + piece.offset;
        let n = piece.len as usize;
        if self.direct.is_some() && offset.is_multiple_of(DIRECT_IO_ALIGN) {
            n.div_ceil(DIRECT_IO_ALIGN as usize) * DIRECT_IO_ALIGN as usize
        } else {
            n
        }
    }

    /// Reads `n` bytes at `offset` into the start of `dst`; returns the number of read calls.
    /// `O_DIRECT` where the fetch reads so, `offset` and `dst` are page aligned and `dst` holds whole
    /// pages ([`room_for`](Self::room_for)); buffered otherwise.
    fn read(&self, task: usize, offset: u64, dst: &mut [u8], n: usize) -> Result<u64> {
        let location = || task_location(self.source, self.plan, task);
        let align = DIRECT_IO_ALIGN as usize;
        let want = n.div_ceil(align) * align;
        if let Some(f) = self.direct
            && offset.is_multiple_of(DIRECT_IO_ALIGN)
            && (dst.as_ptr() as usize).is_multiple_of(align)
            && dst.len() >= want
            && self.direct_failed_msg().is_none()
        {
            let dst = &mut dst[..want];
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
        let Some(dst) = dst.get_mut(..n) else {
            return Err(Error::device(
                "reading into a bounce buffer",
                format!("{n} bytes do not fit in {}", dst.len()),
            ));
        };
        pread_exact(self.source.file(), dst, offset, &location())
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

    /// The same workers read every step (`fetch_steps_continuously`),
    /// unless `GPU_PARQUET_STEP_FETCH=calls` asks for one call per step.
    fn fetch_steps(
        &self,
        source: &ParquetSource,
        plans: &[Arc<ReadPlan>],
        admit: &mut dyn FnMut(usize) -> bool,
        deliver: &DeliverStep<'_, DeviceBuffer>,
    ) {
        self.fetch_steps_continuously(source, plans, admit, deliver)
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
pub(crate) fn pinned_copy_time(ctx: &Arc<GpuContext>, len: u64, reps: usize, pinned: PinnedAlloc) -> Result<Duration> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_while_steps_are_published_still_ends_the_workers_wait() {
        let feed = Feed::default();
        let abort = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let waiting = s.spawn(|| feed.get(0, &abort).is_none());
            let publishing = s.spawn(|| {
                let _closing = feed.closing();
                panic!("admit failed");
            });
            assert!(publishing.join().is_err());
            assert!(waiting.join().unwrap(), "the waiting worker was handed a step");
        });
    }

    const MIB: u64 = 1 << 20;

    /// Tasks of these lengths, back to back in the file and the destination.
    fn tasks_of_lens(lens: &[u64]) -> Vec<ReadTask> {
        let mut at = 0;
        lens.iter()
            .map(|&len| {
                let t = ReadTask {
                    offset: at,
                    len,
                    dest_offset: at,
                    chunks: 0..1,
                };
                at += len;
                t
            })
            .collect()
    }

    /// Every task's bytes exactly once, in order, no piece empty or over `piece`.
    fn assert_covers(tasks: &[ReadTask], pieces: &[Piece], piece: u64) {
        let mut at = vec![0u64; tasks.len()];
        let mut last_task = 0;
        for p in pieces {
            assert!(p.len > 0 && p.len <= piece, "{p:?}");
            assert!(p.task >= last_task, "tasks in order: {p:?}");
            assert_eq!(p.offset, at[p.task], "pieces of a task in order, no gap: {p:?}");
            at[p.task] += p.len;
            last_task = p.task;
        }
        let want: Vec<u64> = tasks.iter().map(|t| t.len).collect();
        assert_eq!(at, want);
    }

    #[test]
    fn pieces_are_cut_smaller_only_at_the_ends_asked_for() {
        // 3 threads; 40 MiB and 21.5 MiB tasks: 11 + 6 pieces of up to 4 MiB, over 4 a thread.
        let tasks = tasks_of_lens(&[40 * MIB, 21 * MIB + MIB / 2]);
        let (piece, threads, small) = (4 * MIB, 3, MIB);
        let whole = split_into_pieces(
            &tasks,
            &[0, 1],
            piece,
            threads,
            CutEnds {
                first: false,
                last: false,
            },
        );
        assert_covers(&tasks, &whole, piece);
        assert_eq!(whole.len(), 10 + 6);
        for ends in [
            CutEnds::BOTH,
            CutEnds {
                first: true,
                last: false,
            },
            CutEnds {
                first: false,
                last: true,
            },
        ] {
            let got = split_into_pieces(&tasks, &[0, 1], piece, threads, ends);
            assert_covers(&tasks, &got, piece);
            let head = if ends.first { 4 * threads } else { 0 };
            // The last 3 whole pieces: 4 MiB, 4 MiB and the 1.5 MiB remainder, cut into 4 + 4 + 2.
            let tail = if ends.last { 10 } else { 0 };
            let replaced = if ends.first { threads } else { 0 } + if ends.last { threads } else { 0 };
            assert_eq!(got.len(), whole.len() - replaced + head + tail, "{ends:?}");
            assert!(got[..head].iter().all(|p| p.len == small), "{ends:?}");
            assert!(got[got.len() - tail..].iter().all(|p| p.len <= small), "{ends:?}");
            let middle = &got[head..got.len() - tail];
            assert_eq!(
                middle.iter().filter(|p| p.len < small).count(),
                0,
                "{ends:?}: the middle keeps its whole pieces"
            );
            if !ends.first {
                assert_eq!(got[0].len, piece, "{ends:?}");
            }
            if !ends.last {
                assert_eq!(got.last().map(|p| p.len), Some(MIB + MIB / 2), "{ends:?}");
            }
        }
    }

    #[test]
    fn few_pieces_are_never_cut() {
        // 12 pieces for 3 threads: not over 4 a thread.
        let tasks = tasks_of_lens(&[48 * MIB]);
        let got = split_into_pieces(&tasks, &[0], 4 * MIB, 3, CutEnds::BOTH);
        assert_covers(&tasks, &got, 4 * MIB);
        assert_eq!(got.len(), 12);
        assert!(got.iter().all(|p| p.len == 4 * MIB));
        // Only the tasks asked for.
        let tasks = tasks_of_lens(&[MIB, 2 * MIB, 3 * MIB]);
        let got = split_into_pieces(&tasks, &[1], 4 * MIB, 3, CutEnds::BOTH);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].task, got[0].offset, got[0].len), (1, 0, 2 * MIB));
    }
}

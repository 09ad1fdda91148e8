//! The one driver of reads: a reading thread fetches steps ahead through the backend's
//! [`IoBackend::fetch_steps`], each after taking a place among the steps the budget holds; workers
//! turn each fetched step into its result through a [`StepSink`]; the results come out in step
//! order, as an iterator ([`Scan`]) or collected.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::gpu::guard;
use crate::io::select::AnyBackend;
use crate::io::{IoBackend, fetch_steps_per_call};
use crate::metadata::ParquetSource;
use crate::plan::ReadPlan;
use crate::scan::{chunks::ColumnChunks, progress::ProgressCounter};

/// A scan thread's work.
type Job = Box<dyn FnOnce() + Send>;

/// One fetched step, handed to a [`StepSink`].
pub(crate) struct FetchedStep<'a> {
    /// Its index in the scan.
    pub k: usize,
    /// Its column chunks (dropping them frees the step's memory).
    pub chunks: ColumnChunks,
    /// How long the worker waited for it.
    pub io_wait: Duration,
    /// The scan's places, to tell how many steps are held.
    pub places: &'a Places,
}

/// What a step ends in: raw chunks, host batches, device columns. Called from the scan's workers.
pub(crate) trait StepSink: Send + Sync + 'static {
    /// A step's result.
    type Output: Send + 'static;

    /// What a worker is doing, for a panic's error.
    fn what(&self) -> &'static str;

    /// Turns one fetched step into its result.
    fn finish(&self, step: FetchedStep<'_>) -> Result<Self::Output>;

    /// Whether [`run_ahead`](Self::run_ahead) has work (it then runs on a thread of its own).
    fn runs_ahead(&self) -> bool {
        false
    }

    /// Work done for the steps in order ahead of the workers (a GPU decode's page headers parsed on
    /// the host). `turn(k)` waits until step `k` may be prepared, and says false once the scan stops.
    fn run_ahead(&self, _plans: &[Arc<ReadPlan>], _turn: &dyn Fn(usize) -> bool) {}
}

/// When a step's place among those in flight is given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// Once its result is made (the step's fetched chunks are dropped by then): a read that keeps
    /// every result (a whole GPU decode) bounds the chunks in flight, not the results.
    Finished,
    /// Once the caller moves past its result: a stream bounds what it holds, results included.
    HandedOut,
}

/// How to run a scan.
pub(crate) struct ScanSpec {
    /// The backend.
    pub io: Arc<AnyBackend>,
    /// The file.
    pub source: ParquetSource,
    /// The steps' plans, in order.
    pub plans: Vec<Arc<ReadPlan>>,
    /// Fetch each step with a call of its own ([`fetch_steps_per_call`]) rather than the backend's
    /// [`IoBackend::fetch_steps`]: the staged backend's stepped fetch holds its pinned ring until its
    /// last step is read, which a stream's caller, holding a step as long as it likes, must not.
    pub per_call: bool,
    /// Threads a step's fetched chunks decode with on the host.
    pub threads: usize,
    /// Steps held at once (see [`crate::scan::MemoryBudget`]).
    pub in_flight: usize,
    /// Workers turning steps into results (at most `in_flight` less the one being read).
    pub workers: usize,
    /// When a step's place is given back.
    pub release: Release,
    /// Told of each step finished.
    pub progress: ProgressCounter,
    /// The read's start (for traces).
    pub started: Instant,
    /// The reader's developer tuning, written in each step's report.
    pub tuning: crate::config::Tuning,
}

/// Places for steps in memory: the reading thread takes one before it reads a step; it is given
/// back when its [`Place`] drops.
pub(crate) struct Places {
    free: Mutex<usize>,
    changed: Condvar,
    total: usize,
    most_held: AtomicUsize,
}

impl Places {
    fn new(total: usize) -> Arc<Self> {
        Arc::new(Self {
            free: Mutex::new(total),
            changed: Condvar::new(),
            total,
            most_held: AtomicUsize::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, usize> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a place; `None` once `stop` is set.
    fn take(self: &Arc<Self>, stop: &AtomicBool) -> Option<Place> {
        let mut free = self.lock();
        loop {
            if stop.load(Ordering::SeqCst) {
                return None;
            }
            if *free > 0 {
                *free -= 1;
                self.most_held.fetch_max(self.total - *free, Ordering::SeqCst);
                return Some(Place(self.clone()));
            }
            free = self.changed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Wakes the waiting threads (to see `stop`).
    fn wake(&self) {
        let _free = self.lock();
        self.changed.notify_all();
    }

    /// Steps held now.
    pub(crate) fn held(&self) -> usize {
        self.total - *self.lock()
    }
}

/// A step's place among those in flight, given back when dropped.
pub(crate) struct Place(Arc<Places>);

impl Drop for Place {
    fn drop(&mut self) {
        *self.0.lock() += 1;
        self.0.changed.notify_all();
    }
}

/// What the threads of a scan share with its caller.
struct Shared<T> {
    places: Arc<Places>,
    stop: AtomicBool,
    state: Mutex<State<T>>,
    changed: Condvar,
    /// Steps taken by the workers (the work ahead stays within `in_flight` of them).
    handed: AtomicUsize,
    /// Steps fetched.
    fetched: AtomicUsize,
}

struct State<T> {
    ready: BTreeMap<usize, (Result<T>, Option<Place>)>,
    /// The earliest step that failed, and its error.
    failed: Option<(usize, Error)>,
    /// Threads still running.
    running: usize,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Step `k` failed: the scan stops; the earliest failed step's error is kept.
    fn fail(&self, k: usize, e: Error) {
        self.stop.store(true, Ordering::SeqCst);
        self.places.wake();
        let mut state = self.lock();
        if state.failed.as_ref().is_none_or(|(at, _)| k < *at) {
            state.failed = Some((k, e));
        }
        self.changed.notify_all();
    }
}

/// Marks a scan thread done when it ends, however it ends.
struct Running<'a, T>(&'a Shared<T>);

impl<T> Drop for Running<'_, T> {
    fn drop(&mut self) {
        self.0.lock().running -= 1;
        self.0.changed.notify_all();
    }
}

/// The results of a scan, one per step, in step order. The next steps are read (and turned into
/// their results) on the scan's threads while the caller holds the current one; a step's place among
/// those in flight is held until the caller asks for the next. The first error ends it. Dropping it
/// stops the reads and joins the threads.
pub struct Scan<T> {
    shared: Arc<Shared<T>>,
    threads: Vec<JoinHandle<()>>,
    steps: usize,
    next: usize,
    /// The place of the result handed out last.
    handed_out: Option<Place>,
    ended: bool,
}

impl<T> std::fmt::Debug for Scan<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan")
            .field("steps", &self.steps)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Scan<T> {
    /// Starts the threads of a scan of `spec` whose steps end in `sink`'s output.
    pub(crate) fn start<S: StepSink<Output = T>>(spec: ScanSpec, sink: S) -> Self {
        let n = spec.plans.len();
        let in_flight = spec.in_flight.max(1);
        // One step is being read while the others are worked on (the reads of a step are already
        // spread over the backend's threads).
        let workers = spec.workers.clamp(1, (in_flight - 1).max(1));
        let shared = Arc::new(Shared {
            places: Places::new(in_flight),
            stop: AtomicBool::new(false),
            state: Mutex::new(State {
                ready: BTreeMap::new(),
                failed: None,
                running: 0,
            }),
            changed: Condvar::new(),
            handed: AtomicUsize::new(0),
            fetched: AtomicUsize::new(0),
        });
        let mut scan = Scan {
            shared: shared.clone(),
            threads: Vec::new(),
            steps: n,
            next: 0,
            handed_out: None,
            ended: false,
        };
        let sink = Arc::new(sink);
        let spec = Arc::new(spec);
        let (tx, rx) = channel::<(usize, ColumnChunks, Place)>();
        let rx = Arc::new(Mutex::new(rx));
        // The reading thread first: the read's first read waits for it.
        let reading = {
            let (shared, spec) = (shared.clone(), spec.clone());
            move || read_steps(&shared, &spec, tx)
        };
        let mut jobs: Vec<(&str, Job)> = vec![("gpu-parquet-scan-read", Box::new(reading))];
        if sink.runs_ahead() {
            let (shared, spec, sink) = (shared.clone(), spec.clone(), sink.clone());
            jobs.push((
                "gpu-parquet-scan-ahead",
                Box::new(move || {
                    let turn = |k: usize| {
                        while k > shared.handed.load(Ordering::SeqCst) + in_flight {
                            if shared.stop.load(Ordering::SeqCst) {
                                return false;
                            }
                            std::thread::sleep(Duration::from_micros(200));
                        }
                        !shared.stop.load(Ordering::SeqCst)
                    };
                    sink.run_ahead(&spec.plans, &turn);
                }),
            ));
        }
        for _ in 0..workers {
            let (shared, spec, sink, rx) = (shared.clone(), spec.clone(), sink.clone(), rx.clone());
            jobs.push((
                "gpu-parquet-scan-work",
                Box::new(move || work(&shared, &spec, &*sink, &rx)),
            ));
        }
        for (name, job) in jobs {
            shared.lock().running += 1;
            let thread_shared = shared.clone();
            let started = std::thread::Builder::new().name(name.into()).spawn(move || {
                let _running = Running(&thread_shared);
                job();
            });
            match started {
                Ok(t) => scan.threads.push(t),
                Err(e) => {
                    shared.lock().running -= 1;
                    shared.fail(
                        0,
                        Error::Unavailable {
                            backend: name.into(),
                            reason: format!("cannot start the thread {name}: {e}"),
                        },
                    );
                    break;
                }
            }
        }
        scan
    }

    /// Every result, in step order; the first error instead, if any.
    pub(crate) fn collect_all(mut self) -> Result<Vec<T>> {
        let mut out = Vec::with_capacity(self.steps);
        for r in &mut self {
            out.push(r?);
        }
        Ok(out)
    }
}

impl<T> Scan<T> {
    /// Steps in the scan.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Steps fetched so far.
    pub fn steps_fetched(&self) -> usize {
        self.shared.fetched.load(Ordering::SeqCst)
    }

    /// The most steps held at once so far (at most the budget's steps in flight).
    pub fn most_held(&self) -> usize {
        self.shared.places.most_held.load(Ordering::SeqCst)
    }

    /// Whether the scan's threads are all done.
    pub fn threads_done(&self) -> bool {
        self.shared.lock().running == 0
    }
}

/// The reading thread: every step through the backend's stepped fetch, each after taking a place.
fn read_steps<T: Send>(shared: &Shared<T>, spec: &ScanSpec, tx: std::sync::mpsc::Sender<(usize, ColumnChunks, Place)>) {
    let trace = |what: std::fmt::Arguments<'_>| crate::trace::at(spec.started, what);
    trace(format_args!("scan: reading thread began"));
    let taken: Mutex<HashMap<usize, Place>> = Mutex::new(HashMap::new());
    let mut admit = |k: usize| match shared.places.take(&shared.stop) {
        Some(place) => {
            trace(format_args!("step {k}: place taken"));
            taken.lock().unwrap_or_else(|p| p.into_inner()).insert(k, place);
            true
        }
        None => false,
    };
    let deliver = |k: usize, r: Result<crate::io::StepFetched<crate::io::select::AnyBuffer>>| {
        trace(format_args!("step {k}: handed to the workers"));
        let place = taken.lock().unwrap_or_else(|p| p.into_inner()).remove(&k);
        let r = r.and_then(|f| {
            ColumnChunks::read(
                &spec.source,
                spec.plans[k].clone(),
                f.buffer,
                f.log,
                f.queued,
                spec.threads,
            )
            .map(|mut chunks| {
                chunks.report.tuning = spec.tuning;
                chunks
            })
        });
        match (r, place) {
            (Ok(chunks), Some(place)) => {
                shared.fetched.fetch_add(1, Ordering::SeqCst);
                // The workers are gone only once the scan has stopped.
                let _ = tx.send((k, chunks, place));
            }
            (Ok(_), None) => shared.fail(k, Error::device("scan", format!("step {k} was read without a place"))),
            (Err(e), _) => shared.fail(k, e),
        }
    };
    let read = guard("reading the steps", || {
        if spec.per_call {
            fetch_steps_per_call(&*spec.io, &spec.source, &spec.plans, &mut admit, &deliver);
        } else {
            spec.io.fetch_steps(&spec.source, &spec.plans, &mut admit, &deliver);
        }
        Ok(())
    });
    if let Err(e) = read {
        shared.fail(0, e);
    }
}

/// A worker: takes fetched steps as they come, in whatever order, and turns them into results.
fn work<S: StepSink>(
    shared: &Shared<S::Output>,
    spec: &ScanSpec,
    sink: &S,
    rx: &Mutex<Receiver<(usize, ColumnChunks, Place)>>,
) {
    let mut waited = Instant::now();
    loop {
        let item = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok((k, chunks, place)) = item else { return };
        shared.handed.fetch_add(1, Ordering::SeqCst);
        let io_wait = waited.elapsed();
        if shared.stop.load(Ordering::SeqCst) {
            continue;
        }
        let rows = chunks.plan.num_rows(spec.source.metadata());
        let bytes = chunks.plan.useful_bytes();
        let step = FetchedStep {
            k,
            chunks,
            io_wait,
            places: &shared.places,
        };
        let r = guard(sink.what(), || sink.finish(step));
        let place = match spec.release {
            Release::Finished => {
                drop(place);
                None
            }
            Release::HandedOut => Some(place),
        };
        match r {
            Ok(out) => {
                spec.progress.step_done(rows, bytes);
                shared.lock().ready.insert(k, (Ok(out), place));
                shared.changed.notify_all();
            }
            Err(e) => {
                drop(place);
                shared.fail(k, e);
            }
        }
        waited = Instant::now();
    }
}

impl<T> Iterator for Scan<T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        // The result handed out before is given up now.
        self.handed_out.take();
        if self.ended {
            return None;
        }
        if self.next >= self.steps {
            self.ended = true;
            return None;
        }
        let mut state = self.shared.lock();
        loop {
            if let Some((r, place)) = state.ready.remove(&self.next) {
                self.next += 1;
                self.handed_out = place;
                if r.is_err() {
                    self.ended = true;
                }
                return Some(r);
            }
            // Stopped or done without this step: the earliest failure, once the threads are done
            // (a step before it may still come).
            if state.running == 0 {
                self.ended = true;
                let e = match state.failed.take() {
                    Some((_, e)) => e,
                    None => Error::device("scan", format!("the scan stopped before step {}", self.next)),
                };
                return Some(Err(e));
            }
            state = self.shared.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl<T> Drop for Scan<T> {
    fn drop(&mut self) {
        // Stopped before the handed-out step's place is given back, so no step is begun for it.
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.places.wake();
        self.handed_out.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

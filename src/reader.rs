//! The reader: one builder over the whole pipeline (open → plan → backend → report → decode), in the
//! manner of arrow-rs's `ParquetRecordBatchReaderBuilder`. The CLI, the benchmarks and a user's job
//! all call this.
//!
//! ```
//! use gpu_parquet::{BackendKind, Reader};
//!
//! // Two columns of row group 1, through the host backend (on a GPU machine leave the backend at its
//! // default, `Auto`, and the chunks land in device memory).
//! let reader = Reader::builder("testdata/flat_snappy_dict.parquet")
//!     .with_columns(["id", "s"])
//!     .with_row_groups([1])
//!     .with_backend(BackendKind::Host)
//!     .build()?;
//! let chunks = reader.read()?;
//! assert_eq!(chunks.plan().chunks.len(), 2);
//! assert_eq!(chunks.report().useful_bytes, chunks.plan().useful_bytes());
//! let table = chunks.decode()?;
//! assert_eq!(table.num_rows(), 800);
//! # Ok::<(), gpu_parquet::Error>(())
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use crate::config::{BackendKind, IoPolicy, Settings, Tuning};
use crate::decode::gpu::{DecoderOptions, GpuDecoder};
use crate::decode::host::{DecodedTable, decode_fetched};
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::io::select::{AnyBackend, AnyBuffer};
use crate::io::verify::verify_against_file;
use crate::io::{DestBuffer, IoBackend, IoLog};
use crate::metadata::ParquetSource;
use crate::plan::{ChunkRange, Projection, ReadPlan, RowGroupSelection};
use crate::report::ReadReport;
use crate::scan::MemoryBudget;

/// Configures a [`Reader`]: file, columns, row groups, backend, device, I/O policy, memory budget.
#[derive(Debug, Clone)]
pub struct ReaderBuilder {
    path: PathBuf,
    columns: Projection,
    row_groups: RowGroupSelection,
    backend: BackendKind,
    device: usize,
    policy: IoPolicy,
    memory_limit: Option<u64>,
    io: Option<Arc<AnyBackend>>,
    decoder: DecoderOptions,
    decode_steps: Option<usize>,
    decode_threads: Option<usize>,
    progress: Option<ProgressHook>,
    tuning: Tuning,
}

/// Where a read stands: handed to the [`ReaderBuilder::with_progress`] callback after each step (a
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
pub struct ProgressHook(pub Arc<dyn Fn(Progress) + Send + Sync>);

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

impl ReaderBuilder {
    /// A builder for `path`: every column and row group, backend `Auto`, GPU 0, the default policy.
    pub fn new(path: impl AsRef<Path>) -> Self {
        Self {
            path: path.as_ref().to_path_buf(),
            columns: Projection::All,
            row_groups: RowGroupSelection::All,
            backend: BackendKind::Auto,
            device: 0,
            policy: IoPolicy::default(),
            memory_limit: None,
            io: None,
            decoder: DecoderOptions::default(),
            decode_steps: None,
            decode_threads: None,
            progress: None,
            tuning: Tuning::default(),
        }
    }

    /// Calls `f` as the read goes: after each decode step of a GPU read, and once when a raw or host
    /// read is done ([`Progress`]). It runs on the read's threads, so it should be quick. Not called by
    /// [`Reader::stream`], whose caller sees each group as it comes.
    pub fn with_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(ProgressHook(Arc::new(f)));
        self
    }

    /// Columns by name: top-level names, or dotted paths to nested leaves (`point.x`).
    pub fn with_columns<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.columns = Projection::Names(names.into_iter().map(Into::into).collect());
        self
    }

    /// Columns as a [`Projection`].
    pub fn with_projection(mut self, projection: Projection) -> Self {
        self.columns = projection;
        self
    }

    /// Row groups by index, in the order given.
    pub fn with_row_groups(mut self, groups: impl IntoIterator<Item = usize>) -> Self {
        self.row_groups = RowGroupSelection::Indices(groups.into_iter().collect());
        self
    }

    /// The backend (default `Auto`: the best GPU path this machine has, host memory without a GPU).
    pub fn with_backend(mut self, backend: BackendKind) -> Self {
        self.backend = backend;
        self
    }

    /// The CUDA device ordinal (default 0). Readers on the same device share its context.
    pub fn with_device(mut self, ordinal: usize) -> Self {
        self.device = ordinal;
        self
    }

    /// The I/O policy (threads, task size, compat mode, bounce buffers...).
    pub fn with_policy(mut self, policy: IoPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The memory limit, bytes, read as a [`MemoryBudget`](crate::scan::MemoryBudget): a whole
    /// [`Reader::read`] is one step and must fit in it; a [`Reader::stream`] holds two steps (the one
    /// handed out and the one being read), each within half of it.
    pub fn with_memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = Some(bytes);
        self
    }

    /// Policy, device, memory limit, decoder options and tuning from [`Settings`] (for example
    /// [`Settings::from_env`]).
    pub fn with_settings(mut self, settings: &Settings) -> Self {
        self.policy = settings.policy.clone();
        self.device = settings.device;
        self.memory_limit = settings.memory_limit;
        self.decoder = settings.decoder_options();
        self.decode_steps = settings.decode_steps;
        self.decode_threads = settings.decode_threads;
        self.tuning = settings.tuning;
        self
    }

    /// Developer [`Tuning`] (default: none): tracing, the Snappy decoders' choice (which it also sets
    /// in the decoder options). Written in the read report where it differs from the default.
    pub fn with_tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = tuning;
        self.decoder.snappy = tuning.snappy;
        self
    }

    /// Steps [`Reader::read_device`] decodes at once (default 4 where compressed pages give a step a
    /// floor of GPU time, else 2; at most the steps held at once less the one being read, so 1 where
    /// the memory budget holds only two steps).
    pub fn with_decode_threads(mut self, threads: usize) -> Self {
        self.decode_threads = Some(threads.max(1));
        self
    }

    /// The fewest steps [`Reader::read_device`] cuts a whole read into (default 8), each step's
    /// decode overlapping the next step's reads.
    pub fn with_decode_steps(mut self, steps: usize) -> Self {
        self.decode_steps = Some(steps.max(1));
        self
    }

    /// Where the GPU decoder caches its compiled kernels and finds nvCOMP, and which decoders take
    /// Snappy bodies (`options.snappy`, which becomes the tuning's: the last of this and
    /// [`Self::with_tuning`] wins).
    pub fn with_decoder_options(mut self, options: DecoderOptions) -> Self {
        self.tuning.snappy = options.snappy;
        self.decoder = options;
        self
    }

    /// Reads through an existing backend (and its pinned buffers, threads and cuFile driver) instead of
    /// building one: several readers can share one.
    pub fn with_io(mut self, backend: Arc<AnyBackend>) -> Self {
        self.io = Some(backend);
        self
    }

    /// Opens the file, validates its metadata, builds the backend and plans the selection for it.
    pub fn build(self) -> Result<Reader> {
        self.policy.validate()?;
        if self.tuning.trace {
            crate::trace::enable();
        }
        let source = ParquetSource::open(&self.path)?;
        let io = match self.io {
            Some(b) => b,
            None => {
                let ctx = match self.backend {
                    BackendKind::Host => None,
                    _ => Some(GpuContext::new(self.device)),
                };
                Arc::new(
                    AnyBackend::with_context(self.backend, &self.policy, ctx).map_err(|e| name_file(e, &self.path))?,
                )
            }
        };
        // Planned for the backend: the staged path may read a cold file O_DIRECT, aligned for that.
        let options = self.policy.plan_options_for(io.staged().is_some());
        let plan = ReadPlan::build(&source, &self.columns, &self.row_groups, options)?;
        Ok(Reader {
            source,
            plan: Arc::new(plan),
            columns: self.columns,
            io,
            policy: self.policy,
            memory_limit: self.memory_limit,
            decoder: self.decoder,
            decode_steps: self.decode_steps,
            decode_threads: self.decode_threads,
            progress: self.progress,
            tuning: self.tuning,
            gpu_decoder: std::sync::OnceLock::new(),
        })
    }
}

/// Backend errors concern the machine, not the file; say which read asked, so the user knows.
fn name_file(e: Error, path: &Path) -> Error {
    match e {
        Error::Unavailable { backend, reason } => Error::Unavailable {
            backend,
            reason: format!("{reason} (reading {})", path.display()),
        },
        other => other,
    }
}

/// A file opened and planned for reading. Cheap to share across threads (`&Reader` reads are
/// independent; the backend's threads and buffers are shared).
#[derive(Debug)]
pub struct Reader {
    pub(crate) source: ParquetSource,
    pub(crate) plan: Arc<ReadPlan>,
    pub(crate) columns: Projection,
    pub(crate) io: Arc<AnyBackend>,
    pub(crate) policy: IoPolicy,
    pub(crate) memory_limit: Option<u64>,
    pub(crate) decoder: DecoderOptions,
    pub(crate) decode_steps: Option<usize>,
    pub(crate) decode_threads: Option<usize>,
    pub(crate) progress: Option<ProgressHook>,
    pub(crate) tuning: Tuning,
    pub(crate) gpu_decoder: std::sync::OnceLock<std::result::Result<Arc<GpuDecoder>, String>>,
}

impl Reader {
    /// A [`ReaderBuilder`] for `path`.
    pub fn builder(path: impl AsRef<Path>) -> ReaderBuilder {
        ReaderBuilder::new(path)
    }

    /// The file and its validated metadata.
    pub fn source(&self) -> &ParquetSource {
        &self.source
    }

    /// The plan of the whole selection: its column chunks, spans and read tasks.
    pub fn plan(&self) -> &ReadPlan {
        &self.plan
    }

    /// The selected column chunks' uncompressed bytes (their `total_uncompressed_size`): what a
    /// decode produces from, and what throughput is counted in (cuDF's measure).
    pub fn uncompressed_bytes(&self) -> u64 {
        let meta = self.source.metadata();
        self.plan
            .chunks
            .iter()
            .map(|c| meta.row_group(c.row_group).column(c.column).uncompressed_size().max(0) as u64)
            .sum()
    }

    /// The backend (share it with [`ReaderBuilder::with_io`]).
    pub fn io(&self) -> &Arc<AnyBackend> {
        &self.io
    }

    /// Why the backend is what it is (fallbacks and their reasons).
    pub fn notes(&self) -> &[String] {
        self.io.notes()
    }

    /// Reads the selected column chunks into device memory (host memory for the host backend), with
    /// the per-column report of the path every byte took.
    ///
    /// ```
    /// let reader = gpu_parquet::Reader::builder("testdata/nested.parquet")
    ///     .with_columns(["point.x"])
    ///     .with_backend(gpu_parquet::BackendKind::Host)
    ///     .build()?;
    /// let chunks = reader.read()?;
    /// let report = chunks.report();
    /// assert_eq!(report.columns.len(), 1);
    /// assert_eq!(report.columns[0].column_path, "point.x");
    /// chunks.verify()?; // the fetched bytes equal the file's
    /// # Ok::<(), gpu_parquet::Error>(())
    /// ```
    pub fn read(&self) -> Result<ColumnChunks> {
        // A whole read is one step: the budget's one step must hold the plan.
        let budget = MemoryBudget::new(self.memory_limit, 1);
        if let Some(limit) = budget.per_step()
            && self.plan.dest_len > limit
        {
            return Err(Error::InvalidRequest {
                location: self.source.location(),
                message: format!(
                    "the selection needs {} bytes, over the memory limit of {limit}; read it in groups of row groups with stream()",
                    self.plan.dest_len
                ),
            });
        }
        let chunks = fetch(&self.io, &self.source, self.plan.clone(), self.policy.threads)?.with_tuning(self.tuning);
        if self.progress.is_some() {
            let (rows, bytes) = (self.plan.num_rows(self.source.metadata()), self.plan.useful_bytes());
            ProgressCounter::new(self.progress.clone(), 1, rows, bytes).step_done(rows, bytes);
        }
        Ok(chunks)
    }

    /// Reads and decodes the selection on the host into Arrow record batches (row groups in order).
    ///
    /// ```
    /// let table = gpu_parquet::Reader::builder("testdata/flat_zstd.parquet")
    ///     .with_columns(["id"])
    ///     .with_backend(gpu_parquet::BackendKind::Host)
    ///     .build()?
    ///     .read_batches()?;
    /// assert_eq!(table.schema.fields().len(), 1);
    /// assert_eq!(table.num_rows(), table.batches.iter().map(|b| b.num_rows()).sum::<usize>());
    /// # Ok::<(), gpu_parquet::Error>(())
    /// ```
    pub fn read_batches(&self) -> Result<DecodedTable> {
        self.read()?.decode()
    }

    /// One read plan (this reader's projection and policy) per group of row groups.
    pub(crate) fn plans_of(&self, groups: Vec<Vec<usize>>) -> Result<Vec<Arc<ReadPlan>>> {
        groups
            .into_iter()
            .map(|g| {
                ReadPlan::build(
                    &self.source,
                    &self.columns,
                    &RowGroupSelection::Indices(g),
                    self.plan.options,
                )
                .map(Arc::new)
            })
            .collect()
    }

    /// Reads the selection one group of row groups at a time: one row group per item, or as many
    /// consecutive ones as fit in half the memory limit (a [`MemoryBudget`] of two steps in flight).
    /// The next group's I/O runs on a background thread while the caller works on the current one. A
    /// row group that alone exceeds half the limit is an error naming it, before anything is read.
    ///
    /// ```
    /// use gpu_parquet::{BackendKind, Reader};
    /// let reader = Reader::builder("testdata/flat_snappy_dict.parquet")
    ///     .with_backend(BackendKind::Host)
    ///     .build()?;
    /// let mut rows = 0;
    /// for group in reader.stream()? {
    ///     let group = group?;
    ///     assert_eq!(group.row_groups().len(), 1);
    ///     rows += group.decode()?.num_rows();
    /// }
    /// assert_eq!(rows, 2400);
    /// # Ok::<(), gpu_parquet::Error>(())
    /// ```
    pub fn stream(&self) -> Result<ChunkStream> {
        let plans = self.plans_of(self.group_row_groups()?)?;
        Ok(ChunkStream::start(
            self.io.clone(),
            self.source.clone(),
            plans,
            self.policy.threads,
            self.tuning,
        ))
    }

    /// Consecutive selected row groups in steps of a [`MemoryBudget`] of two steps in flight.
    fn group_row_groups(&self) -> Result<Vec<Vec<usize>>> {
        let mut per_group: Vec<(usize, u64)> = Vec::new();
        // An aligned plan (for O_DIRECT) pads each chunk to whole 4 KiB blocks at both ends.
        let padding = if self.plan.options.align {
            2 * crate::plan::DIRECT_IO_ALIGN
        } else {
            0
        };
        for &rg in &self.plan.row_groups {
            let bytes = self
                .plan
                .chunks
                .iter()
                .filter(|c| c.row_group == rg)
                .map(|c| c.len + padding)
                .sum();
            per_group.push((rg, bytes));
        }
        // Streaming holds two steps: the one handed out and the one being read.
        MemoryBudget::new(self.memory_limit, 2).plan_steps(per_group, &self.source.location())
    }
}

/// Consecutive `(row group, bytes)` packed greedily into groups of at most `target` bytes (a group
/// holds at least one row group, whatever its size).
pub(crate) fn pack_consecutive(sizes: Vec<(usize, u64)>, target: u64) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut used = 0u64;
    for (rg, bytes) in sizes {
        match out.last_mut() {
            Some(g) if used + bytes <= target => {
                g.push(rg);
                used += bytes;
            }
            _ => {
                out.push(vec![rg]);
                used = bytes;
            }
        }
    }
    out
}

/// Consecutive `(row group, bytes)` cut into at most `groups` groups of about equal bytes: each row
/// group goes to the group its middle byte falls in. Unlike [`pack_consecutive`] with a target of
/// the total over `groups`, uneven row groups never spill into one more, small, group (a step with a
/// compressed page costs about as much however small it is).
pub(crate) fn split_balanced(sizes: &[(usize, u64)], groups: usize) -> Vec<Vec<usize>> {
    let total: u128 = sizes.iter().map(|s| s.1 as u128).sum();
    let groups = groups.max(1) as u128;
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut before = 0u128;
    let mut current = None;
    for &(rg, bytes) in sizes {
        let k = share_of_middle(before, bytes, total, groups as usize).unwrap_or(0);
        if current != Some(k) {
            out.push(Vec::new());
            current = Some(k);
        }
        out.last_mut().expect("pushed above").push(rg);
        before += bytes as u128;
    }
    out
}

/// Which of `groups` equal shares of `total` bytes holds the middle byte of `bytes` bytes that start
/// `before` bytes in (the last share at most); `None` when `total` is 0.
pub(crate) fn share_of_middle(before: u128, bytes: u64, total: u128, groups: usize) -> Option<usize> {
    let middle = before + bytes as u128 / 2;
    (middle * groups.max(1) as u128)
        .checked_div(total)
        .map(|k| (k as usize).min(groups.max(1) - 1))
}

pub(crate) fn fetch(
    io: &AnyBackend,
    source: &ParquetSource,
    plan: Arc<ReadPlan>,
    threads: usize,
) -> Result<ColumnChunks> {
    let started = std::time::Instant::now();
    let f = io.fetch(source, &plan)?;
    ColumnChunks::read(
        source,
        plan,
        f.buffer,
        f.log,
        started..std::time::Instant::now(),
        threads,
    )
}

/// Column chunks read into memory: the buffer (laid out as the plan says), the plan, the I/O log and
/// the per-column report.
#[derive(Debug)]
pub struct ColumnChunks {
    pub(crate) buffer: AnyBuffer,
    /// When the fetch started and when its bytes were in place.
    pub(crate) fetched: std::ops::Range<std::time::Instant>,
    pub(crate) plan: Arc<ReadPlan>,
    pub(crate) report: ReadReport,
    pub(crate) log: IoLog,
    pub(crate) source: ParquetSource,
    pub(crate) decode_threads: usize,
}

impl ColumnChunks {
    /// The chunks of `plan` fetched into `buffer` over `fetched`, once the file is checked unchanged
    /// since its metadata was read; the report is built from `log`.
    pub(crate) fn read(
        source: &ParquetSource,
        plan: Arc<ReadPlan>,
        buffer: AnyBuffer,
        log: IoLog,
        fetched: std::ops::Range<std::time::Instant>,
        decode_threads: usize,
    ) -> Result<Self> {
        source.check_unchanged()?;
        let report = ReadReport::build(&source.path().display().to_string(), &plan, &log);
        Ok(ColumnChunks {
            buffer,
            fetched,
            plan,
            report,
            log,
            source: source.clone(),
            decode_threads,
        })
    }

    /// The bytes: [`AnyBuffer::Device`] on a GPU path, [`AnyBuffer::Host`] on the host path. Chunk `c`
    /// of the plan lies at `c.dest_offset .. c.dest_offset + c.len`.
    pub fn buffer(&self) -> &AnyBuffer {
        &self.buffer
    }

    /// The buffer, owned.
    pub fn into_buffer(self) -> AnyBuffer {
        self.buffer
    }

    /// The plan these chunks were read by.
    pub fn plan(&self) -> &ReadPlan {
        &self.plan
    }

    /// Row groups held, in order.
    pub fn row_groups(&self) -> &[usize] {
        &self.plan.row_groups
    }

    /// Where the chunk of `column` (dotted path) in `row_group` is in [`Self::buffer`].
    pub fn chunk(&self, column: &str, row_group: usize) -> Option<&ChunkRange> {
        self.plan
            .chunks
            .iter()
            .find(|c| c.row_group == row_group && c.column_path == column)
    }

    /// Per column and per path: bytes, reads, busy time, and why each path was taken.
    pub fn report(&self) -> &ReadReport {
        &self.report
    }

    /// What the backend did, task by task.
    pub fn log(&self) -> &IoLog {
        &self.log
    }

    /// Checks every chunk's bytes against the file (re-read with plain `pread`s).
    pub fn verify(&self) -> Result<()> {
        verify_against_file(&self.source, &self.plan, &self.buffer.to_host()?)
    }

    /// The reader's tuning, for the report.
    pub(crate) fn with_tuning(mut self, tuning: Tuning) -> Self {
        self.report.tuning = tuning;
        self
    }

    /// Decodes the chunks on the host into Arrow record batches (copying device bytes back first).
    pub fn decode(self) -> Result<DecodedTable> {
        let bytes = self.buffer.into_host_bytes()?;
        decode_fetched(&self.source, &self.plan, &bytes, self.decode_threads)
    }
}

/// Groups of row groups read one after another, the next read while the current one is in use.
/// Dropping it stops the reads.
pub type ChunkStream = Background<ColumnChunks>;

impl ChunkStream {
    pub(crate) fn start(
        io: Arc<AnyBackend>,
        source: ParquetSource,
        plans: Vec<Arc<ReadPlan>>,
        threads: usize,
        tuning: Tuning,
    ) -> Self {
        // A rendezvous channel: the worker reads group k+1 while the caller holds group k, then waits
        // until the caller takes it, so at most two groups are in memory.
        Background::spawn("gpu-parquet-prefetch", 0, move |send| {
            for plan in plans {
                let r = fetch(&io, &source, plan, threads).map(|c| c.with_tuning(tuning));
                let failed = r.is_err();
                if !send(r) || failed {
                    return;
                }
            }
        })
    }
}

/// Items made one after another on a named background thread, handed over through a channel of
/// `bound` places (0: the next item is made while the caller holds the current one). Dropping it
/// closes the channel, which stops the producer at its next hand-over, and joins the thread.
#[derive(Debug)]
pub struct Background<T> {
    rx: Option<Receiver<Result<T>>>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl<T: Send + 'static> Background<T> {
    /// Runs `produce` on a thread named `name`; it hands over items with `send`, which says false
    /// once the receiver is gone. If no thread can be started, the only item is that error.
    pub(crate) fn spawn(
        name: &str,
        bound: usize,
        produce: impl FnOnce(&dyn Fn(Result<T>) -> bool) + Send + 'static,
    ) -> Self {
        let (tx, rx): (SyncSender<Result<T>>, _) = sync_channel(bound);
        let worker = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || produce(&|item| tx.send(item).is_ok()));
        match worker {
            Ok(w) => Self {
                rx: Some(rx),
                worker: Some(w),
            },
            Err(e) => {
                let (tx, rx) = sync_channel(1);
                let _ = tx.send(Err(Error::Unavailable {
                    backend: name.into(),
                    reason: format!("cannot start the thread {name}: {e}"),
                }));
                Self {
                    rx: Some(rx),
                    worker: None,
                }
            }
        }
    }
}

impl<T> Iterator for Background<T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rx.as_ref()?.recv().ok()
    }
}

impl<T> Drop for Background<T> {
    fn drop(&mut self) {
        // Closing the channel makes the worker stop at its next hand-over.
        self.rx.take();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(bytes: &[u64]) -> Vec<(usize, u64)> {
        bytes.iter().copied().enumerate().collect()
    }

    #[test]
    fn balanced_splits_give_the_groups_asked_for_in_order() {
        // Fifty slightly uneven row groups in two: two groups, not the three a greedy packing to
        // half the total gives.
        let uneven: Vec<u64> = (0..50).map(|i| 32_000_000 + (i % 3) * 100_000).collect();
        let total: u64 = uneven.iter().sum();
        assert_eq!(pack_consecutive(sizes(&uneven), total / 2).len(), 3);
        let two = split_balanced(&sizes(&uneven), 2);
        assert_eq!(two.len(), 2);
        assert_eq!(two.concat(), (0..50).collect::<Vec<_>>());
        assert!(two[0].len().abs_diff(two[1].len()) <= 1, "{two:?}");
        // Never more groups than asked, nor than row groups; every row group once, in order.
        for groups in 1..12 {
            let cut = split_balanced(&sizes(&[5, 1, 1, 1, 9, 2, 2]), groups);
            assert!(cut.len() <= groups.min(7), "{groups}: {cut:?}");
            assert_eq!(cut.concat(), (0..7).collect::<Vec<_>>());
            assert!(cut.iter().all(|g| !g.is_empty()));
        }
        // Empty row groups and an empty file.
        assert_eq!(split_balanced(&sizes(&[0, 0, 0]), 2), vec![vec![0, 1, 2]]);
        assert!(split_balanced(&[], 3).is_empty());
    }
}

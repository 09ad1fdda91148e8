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

use crate::config::{BackendKind, IoPolicy, Settings, Tuning};
use crate::decode::gpu::{DecoderOptions, GpuDecoder};
use crate::decode::host::DecodedTable;
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::io::select::AnyBackend;
use crate::metadata::ParquetSource;
use crate::plan::{Projection, ReadPlan, RowGroupSelection};
use crate::report::ReadReport;
use crate::scan::driver::{Release, Scan, ScanSpec};
use crate::scan::gpu::GpuSteps;
use crate::scan::sink::{AsOutput, HostSink, RawSink};
use crate::scan::two_pass::{PassBytes, TwoPass};
use crate::scan::{Decode, MemoryBudget, StepOutput};

pub use crate::scan::chunks::ColumnChunks;
pub use crate::scan::progress::Progress;
pub(crate) use crate::scan::progress::{ProgressCounter, ProgressHook};
pub use crate::scan::spec::Reader;

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
    decode: Decode,
    source: Option<ParquetSource>,
    shared_decoder: Option<Arc<GpuDecoder>>,
    /// Issue 43's filter hook: see [`ReaderBuilder::with_filter`].
    filter: Option<crate::filter::Expr>,
    /// What a GPU decode's filter gives: see [`ReaderBuilder::with_filter_mode`].
    filter_mode: crate::filter::FilterMode,
    /// See [`ReaderBuilder::with_filter_passes`].
    filter_passes: crate::filter::FilterPasses,
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
            decode: Decode::Auto,
            source: None,
            shared_decoder: None,
            filter: None,
            filter_mode: crate::filter::FilterMode::Compact,
            filter_passes: crate::filter::FilterPasses::Auto,
        }
    }

    /// A builder for a file already opened (its footer read and validated once, as a dataset does).
    pub(crate) fn from_source(source: ParquetSource) -> Self {
        let mut b = Self::new(source.path());
        b.source = Some(source);
        b
    }

    /// What [`Reader::scan`] yields per step: raw chunks, host batches or device columns (default
    /// [`Decode::Auto`]: on the GPU where the backend reads into device memory, else on the host).
    pub fn with_decode(mut self, decode: Decode) -> Self {
        self.decode = decode;
        self
    }

    /// Decodes on this GPU decoder (of the reader's device) instead of building one: readers of a
    /// dataset share one.
    pub(crate) fn with_gpu_decoder(mut self, decoder: Option<Arc<GpuDecoder>>) -> Self {
        self.shared_decoder = decoder;
        self
    }

    /// Reads only what `filter` may accept. At build the filter is typed against the file (a
    /// missing column or a literal of the wrong type is an error), the row groups that cannot hold a
    /// matching row are dropped (statistics, bloom filters, page index: [`Reader::pruning`]) and the
    /// filter's columns are read too; a host decode ([`Reader::read_batches`],
    /// [`ColumnChunks::decode`] of [`Reader::read`] and [`Reader::stream`]) keeps the accepted rows
    /// exactly and drops the columns read only for the filter. Reads fetch the surviving rows page
    /// by page where the file has an OffsetIndex ([`ReadPlan::build_paged`]): the raw chunks of
    /// `read()` are then pieces (dictionary page, runs of data pages) of the surviving row groups'
    /// chunks. A GPU decode ([`Reader::read_device`], [`Reader::scan`] on the GPU) fetches the same
    /// pieces, cuts each step to their rows, evaluates the filter on the device after each step's
    /// decode and compacts the step to the accepted rows, the filter's own columns dropped
    /// ([`ReaderBuilder::with_filter_mode`]); where the GPU row filter cannot run it, the steps are
    /// left whole and the report says why (`DeviceRead::to_host`, `DecodedStep::to_host` then filter
    /// on the host).
    pub fn with_filter(mut self, filter: crate::filter::Expr) -> Self {
        self.filter = Some(filter);
        self
    }

    /// What a GPU decode's filter gives ([`ReaderBuilder::with_filter`]): each step compacted to the
    /// accepted rows (the default, [`FilterMode::Compact`](crate::filter::FilterMode::Compact)), or
    /// its rows whole with a mask of the accepted ones (`Mask`: `DecodedStep::mask`,
    /// `DeviceRead::masks`).
    pub fn with_filter_mode(mut self, mode: crate::filter::FilterMode) -> Self {
        self.filter_mode = mode;
        self
    }

    /// How a decoding read with a filter reads its columns ([`ReaderBuilder::with_filter`]): the
    /// filter's columns first, then the other columns' pages holding accepted rows only
    /// ([`FilterPasses::Two`](crate::filter::FilterPasses::Two)), every column's pages of the rows
    /// pruning kept at once (`One`), or step by step whichever saves time (the default, `Auto`: one
    /// pass where the other columns' pages are few and in the page cache). Raw reads
    /// ([`Reader::read`], [`Reader::stream`]) always read in one pass: nothing is decoded to tell the
    /// accepted rows.
    pub fn with_filter_passes(mut self, passes: crate::filter::FilterPasses) -> Self {
        self.filter_passes = passes;
        self
    }

    /// Calls `f` as the read goes: after each step of the scan is done (a GPU read's decode steps, in
    /// the order they finish; the one step of a whole [`Reader::read`]) ([`Progress`]). It runs on the
    /// read's threads, so it should be quick.
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
    pub(crate) fn with_projection(mut self, projection: Projection) -> Self {
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

    /// The memory limit, bytes: what the whole scan may hold at once, as [`MemoryBudget`] says (a
    /// whole [`Reader::read`] is one step and must fit in it; a [`Reader::stream`] holds two steps,
    /// each within half of it; a GPU decode two to five steps, in device memory).
    pub fn with_memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = Some(bytes);
        self
    }

    /// Policy, device and memory limit from [`Settings`] (for example [`Settings::from_env`]).
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
    pub(crate) fn with_decode_threads(mut self, threads: usize) -> Self {
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
        let source = match self.source {
            Some(s) => s,
            None => ParquetSource::open(&self.path)?,
        };
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
        // Issue 43's filter hook: pruned row groups, the filter's columns added, and the surviving
        // rows read page by page.
        let mut filter = match &self.filter {
            Some(e) => Some(crate::filter::PlannedFilter::plan(
                &source,
                e,
                &self.columns,
                &self.row_groups,
            )?),
            None => None,
        };
        let (columns, row_groups, rows) = match &filter {
            Some(f) => (f.projection.clone(), f.row_groups.clone(), f.rows()),
            None => (self.columns.clone(), self.row_groups.clone(), Default::default()),
        };
        let plan = Arc::new(ReadPlan::build_paged(&source, &columns, &row_groups, options, &rows)?);
        if let Some(f) = filter.as_mut() {
            f.selection.report.page_io = Some(crate::report::PageIoReport::of(&plan));
        }
        let filter = filter.map(Arc::new);
        Ok(Reader {
            filter,
            filter_mode: self.filter_mode,
            filter_passes: self.filter_passes,
            source,
            plan,
            columns,
            io,
            policy: self.policy,
            memory_limit: self.memory_limit,
            decoder: self.decoder,
            decode_steps: self.decode_steps,
            decode_threads: self.decode_threads,
            progress: self.progress,
            tuning: self.tuning,
            decode: self.decode,
            gpu_decoder: match self.shared_decoder {
                Some(d) => std::sync::OnceLock::from(Ok(d)),
                None => std::sync::OnceLock::new(),
            },
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

impl Reader {
    /// What the filter pruned ([`ReaderBuilder::with_filter`]); `None` without a filter.
    pub fn pruning(&self) -> Option<&crate::report::PruningReport> {
        self.filter.as_deref().map(|f| f.report())
    }

    /// The filter as planned for this file, with its [`crate::filter::ScanSelection`].
    pub fn filter(&self) -> Option<&crate::filter::PlannedFilter> {
        self.filter.as_deref()
    }

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
    /// decode produces from, and what throughput is counted in (cuDF's measure); a chunk read page by
    /// page counts whole.
    pub fn uncompressed_bytes(&self) -> u64 {
        let meta = self.source.metadata();
        let chunks: std::collections::BTreeSet<(usize, usize)> =
            self.plan.chunks.iter().map(|c| (c.row_group, c.column)).collect();
        chunks
            .into_iter()
            .map(|(g, c)| meta.row_group(g).column(c).uncompressed_size().max(0) as u64)
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
        let budget = self.whole_budget()?;
        let spec = self.host_spec(vec![self.plan.clone()], &budget, Release::Finished);
        let mut steps = Scan::start(spec, RawSink(self.filter.clone())).collect_all()?;
        steps
            .pop()
            .ok_or_else(|| Error::device("scan", "a whole read gave no step"))
    }

    /// A whole read is one step: the budget's one step must hold the plan.
    fn whole_budget(&self) -> Result<MemoryBudget> {
        let budget = MemoryBudget::whole(self.memory_limit);
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
        Ok(budget)
    }

    /// The scan of `plans` on the host side (raw chunks or host decoding) under `budget`: one worker
    /// (a step's host decode spreads over the policy's threads itself), each step fetched by a call of
    /// its own.
    fn host_spec(&self, plans: Vec<Arc<ReadPlan>>, budget: &MemoryBudget, release: Release) -> ScanSpec {
        let progress = ProgressCounter::new(
            self.progress.clone(),
            plans.len(),
            plans.iter().map(|p| p.num_rows(self.source.metadata())).sum(),
            plans.iter().map(|p| p.useful_bytes()).sum(),
        );
        ScanSpec {
            io: self.io.clone(),
            source: self.source.clone(),
            plans,
            per_call: true,
            threads: self.policy.threads,
            in_flight: budget.max_steps_in_flight(),
            workers: 1,
            release,
            progress,
            started: std::time::Instant::now(),
            tuning: self.tuning,
        }
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
        self.read_host().map(|r| r.table)
    }

    /// Reads and decodes the selection on the host, as [`Reader::read_batches`], with the report of
    /// its reads (with a filter read in two passes, [`ReaderBuilder::with_filter_passes`], both
    /// passes' reads, and what each read).
    ///
    /// ```
    /// use gpu_parquet::{BackendKind, Reader, filter::{Expr, FilterPasses}};
    /// let read = Reader::builder("testdata/flat_snappy_dict.parquet")
    ///     .with_columns(["s"])
    ///     .with_filter(Expr::parse("id < 100")?)
    ///     .with_filter_passes(FilterPasses::Two)
    ///     .with_backend(BackendKind::Host)
    ///     .build()?
    ///     .read_host()?;
    /// assert_eq!(read.table.schema.fields().len(), 1);
    /// // The filter's column `id` first, then the pages of `s` that hold its accepted rows.
    /// let passes = read.passes.expect("two passes");
    /// assert!(passes.payload <= passes.payload_one_pass);
    /// assert_eq!(read.io.columns.len(), 2);
    /// # Ok::<(), gpu_parquet::Error>(())
    /// ```
    pub fn read_host(&self) -> Result<HostRead> {
        let budget = self.whole_budget()?;
        let two_pass = self.two_pass();
        let plans = match &two_pass {
            // A step of each run of row groups the statistics accept whole, and of the others (the
            // next step's reads overlap this one's decode); `decode_plans` says which read in one
            // pass.
            Some(p) => {
                let mut runs = p.filter.split_accepted_whole(vec![self.plan.row_groups.clone()]);
                if runs.is_empty() {
                    runs.push(Vec::new());
                }
                self.decode_plans(runs, p)?
            }
            None => vec![self.plan.clone()],
        };
        let spec = self.host_spec(plans, &budget, Release::Finished);
        let steps = Scan::start(spec, self.host_sink(two_pass)).collect_all()?;
        let (mut plans, mut logs, mut passes) = (Vec::new(), Vec::new(), None::<PassBytes>);
        let mut table: Option<DecodedTable> = None;
        for step in steps {
            plans.push(step.plan);
            logs.push(step.log);
            if let Some(p) = step.passes {
                passes.get_or_insert_default().add(&p);
            }
            table = Some(match table {
                None => step.table,
                Some(t) => t.append(step.table),
            });
        }
        let table = table.ok_or_else(|| Error::device("scan", "a whole read gave no step"))?;
        let (plan, log) = crate::scan::step::merge_reads(&plans, &logs);
        let mut io = ReadReport::build(&self.source.path().display().to_string(), &plan, &log);
        io.tuning = self.tuning;
        Ok(HostRead { table, io, passes })
    }

    /// The filter's columns first, where this reader's decoding reads take two passes.
    pub(crate) fn two_pass(&self) -> Option<TwoPass> {
        TwoPass::plan(&self.source, &self.filter, &self.plan, self.filter_passes)
    }

    /// The sink of a host decode, reading in `two_pass` where given.
    fn host_sink(&self, two_pass: Option<TwoPass>) -> HostSink {
        HostSink {
            filter: self.filter.clone(),
            two_pass: two_pass.map(|p| (p, self.io.clone())),
        }
    }

    /// One read plan (this reader's projection and policy) per group of row groups, the filter's
    /// surviving rows read page by page.
    pub(crate) fn plans_of(&self, groups: Vec<Vec<usize>>) -> Result<Vec<Arc<ReadPlan>>> {
        groups
            .into_iter()
            .map(|g| {
                ReadPlan::build_paged(
                    &self.source,
                    &self.columns,
                    &RowGroupSelection::Indices(g),
                    self.plan.options,
                    &self.plan.rows,
                )
                .map(Arc::new)
            })
            .collect()
    }

    /// The plans of a decoding read's steps `groups` in `two_pass`: a step that reads in one pass
    /// ([`TwoPass::one_pass_step`]: the statistics accept its rows whole or nearly, or, read `Auto`,
    /// its other columns' pages are few and in the page cache) fetches every column; the others
    /// fetch the filter's columns, their sink the rest.
    pub(crate) fn decode_plans(&self, groups: Vec<Vec<usize>>, two_pass: &TwoPass) -> Result<Vec<Arc<ReadPlan>>> {
        groups
            .into_iter()
            .map(|g| {
                if two_pass.one_pass_step(&self.source, &g, &self.plan.rows)? {
                    Ok(self.plans_of(vec![g])?.remove(0))
                } else {
                    two_pass.filter_plan(&self.source, g, &self.plan.rows).map(Arc::new)
                }
            })
            .collect()
    }

    /// Reads the selection one group of row groups at a time: one row group per item, or as many
    /// consecutive ones as fit in half the memory limit ([`MemoryBudget::streaming`]: two steps in
    /// flight, the one handed out and the one being read).
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
        let budget = MemoryBudget::streaming(self.memory_limit);
        let plans = self.plans_of(self.group_row_groups(&budget)?)?;
        Ok(Scan::start(
            self.host_spec(plans, &budget, Release::HandedOut),
            RawSink(self.filter.clone()),
        ))
    }

    /// Reads the selection step by step, each step ending in what the reader's [`Decode`] asks
    /// ([`ReaderBuilder::with_decode`]): raw chunks or host batches in steps of a
    /// [`MemoryBudget::streaming`] budget, or device columns in the GPU decode's steps (as
    /// [`Reader::read_device`] cuts them). The next steps are read and decoded while the caller holds
    /// the current one; dropping the scan stops it.
    ///
    /// ```
    /// use gpu_parquet::scan::{Decode, StepOutput};
    /// use gpu_parquet::{BackendKind, Reader};
    /// let reader = Reader::builder("testdata/flat_snappy_dict.parquet")
    ///     .with_backend(BackendKind::Host)
    ///     .with_decode(Decode::Host)
    ///     .build()?;
    /// let mut rows = 0;
    /// for step in reader.scan()? {
    ///     let StepOutput::Host { table, .. } = step? else { unreachable!() };
    ///     rows += table.num_rows();
    /// }
    /// assert_eq!(rows, 2400);
    /// # Ok::<(), gpu_parquet::Error>(())
    /// ```
    pub fn scan(&self) -> Result<Scan<StepOutput>> {
        let on_gpu = match self.decode {
            Decode::None => {
                let budget = MemoryBudget::streaming(self.memory_limit);
                let plans = self.plans_of(self.group_row_groups(&budget)?)?;
                return Ok(Scan::start(
                    self.host_spec(plans, &budget, Release::HandedOut),
                    AsOutput(RawSink(self.filter.clone())),
                ));
            }
            Decode::Host => false,
            Decode::Gpu => true,
            Decode::Auto => self.io.is_device(),
        };
        if on_gpu {
            let decoder = self.gpu_decoder()?;
            let started = std::time::Instant::now();
            let steps = GpuSteps::plan(self, decoder)?;
            let (spec, sink) = steps.parts(self, started, Release::HandedOut);
            return Ok(Scan::start(spec, AsOutput(sink)));
        }
        let budget = MemoryBudget::streaming(self.memory_limit);
        let groups = self.group_row_groups(&budget)?;
        let two_pass = self.two_pass();
        let plans = match &two_pass {
            Some(p) => self.decode_plans(groups, p)?,
            None => self.plans_of(groups)?,
        };
        Ok(Scan::start(
            self.host_spec(plans, &budget, Release::HandedOut),
            AsOutput(self.host_sink(two_pass)),
        ))
    }

    /// The GPU decoder of this reader's device (compiled once, then shared).
    pub(crate) fn gpu_decoder(&self) -> Result<Arc<GpuDecoder>> {
        let ctx = self.io.context().ok_or_else(|| Error::Unavailable {
            backend: self.io.kind().to_string(),
            reason: "GPU decode needs a GPU backend (this reader reads into host memory)".into(),
        })?;
        self.gpu_decoder
            .get_or_init(|| {
                GpuDecoder::new(ctx, &self.decoder)
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(|m| Error::device("GPU decoder", m))
    }

    /// Consecutive selected row groups in steps of `budget`.
    fn group_row_groups(&self, budget: &MemoryBudget) -> Result<Vec<Vec<usize>>> {
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
        budget.plan_steps(per_group, &self.source.location())
    }
}

/// A read decoded on the host ([`Reader::read_host`]).
#[derive(Debug)]
pub struct HostRead {
    /// The rows (those the filter accepts), the caller's columns.
    pub table: DecodedTable,
    /// The report of its reads, per column and path.
    pub io: ReadReport,
    /// With a filter read in two passes: what each pass read, beside what one pass reads.
    pub passes: Option<PassBytes>,
}

/// Groups of row groups read one after another by the scan, the next read while the current one is
/// in use. Dropping it stops the reads.
pub type ChunkStream = Scan<ColumnChunks>;

//! A GPU decode's steps: how the selection is cut (a latency model under the memory budget), how
//! many steps are decoded at once, and the sink that decodes a fetched step into device columns
//! (page headers parsed on the host ahead of the decoders where the bytes are in the page cache).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::buffer::BooleanBuffer;
use arrow::datatypes::SchemaRef;
use parquet::file::metadata::ParquetMetaData;

use crate::config::WideSnappy;
use crate::decode::exec_device::StepChunks;
use crate::decode::gpu::GpuDecoder;
use crate::decode::host_headers::{HeaderSlot, parse_step_headers, worth_parsing};
use crate::decode::pipeline::StepStats;
use crate::decode::pipeline::{ColumnRoute, route_columns};
use crate::decode::row_filter::{FilterMode, Filtered, RowPredicate};
// A one-warp decompressor's cost per compressed byte of a step's longest page bounds the step's GPU
// time, whatever its size (measured in `snappy_route`).
use crate::decode::snappy_route::{
    CHAIN_NS_PER_BYTE_NVCOMP, CHAIN_NS_PER_BYTE_PRECHECKED, CHAIN_NS_PER_BYTE_UNSNAP, STEP_NS_PER_VALUE, WIDE_MIN_SRC,
};
use crate::decode::table::{DeviceArray, DeviceBatch};
use crate::error::{Error, Result};
use crate::filter::FilterPasses;
use crate::gpu::DeviceBuffer;
use crate::io::select::{AnyBackend, AnyBuffer};
use crate::io::{IoBackend, IoLog};
use crate::metadata::ParquetSource;
use crate::plan::{ChunkRange, Projection, ReadPlan, RowGroupSelection};
use crate::scan::budget::{MemoryBudget, pack_consecutive, split_balanced};
use crate::scan::driver::{FetchedStep, Release, Scan, ScanSpec, StepSink};
use crate::scan::gpu_filter::{GpuFilter, StepFilter};
use crate::scan::step::{BackendTimes, DecodedStep, StepSummary, Window, merge_reads};
use crate::scan::two_pass::{DeviceTwoPass, SecondPassExec, TwoPass};
use crate::scan::{chunks::ColumnChunks, progress::ProgressCounter, spec::Reader};

/// Steps a read without compressed pages is cut into, when the budget allows: its reads bound it,
/// and the smaller the last step, the less decode follows the last read. Measured on the H200
/// (plain benchmark file, `read --warm-up 2`, 2026-12-02, two machines): 8 / 12 / 16 / 24 steps
/// 60.3-60.5 / 61.1-61.3 / 58.7-59.0 / 58.2-58.4 ms; 8 / 16 steps 62.9-65.9 / 60.7-63.7 ms.
const STEPS_WITHOUT_FLOOR: u64 = 16;
/// Steps a read whose steps have a floor of GPU time is cut into at most: each step adds its floor
/// and its fixed costs (snappy benchmark file, same runs: 8 / 12 / 16 steps 45.0-45.4 / 45.6-47.7 /
/// 54.4-55.3 ms; TPC-H lineitem SF10 on an H100, run AI of 2026-12-06, best of 4: snappy 113.2 /
/// 116.1 / 118.0 ms with the model's 9 / 12 / 16 steps, zstd 131.5 / 146.1 / 169.1 ms with its 8 /
/// 12 / 16).
const MAX_STEPS_WITH_FLOOR: u64 = 8;
/// Steps held in device memory at once, at most: [`FETCHES`] being read, the rest read and waiting
/// (the reads run ahead of the decode), or being decoded. TPC-H lineitem (snappy, 8 steps) waits for
/// places, but 9 were no faster on an H100 (2026-12-05: the GPU bounds that read; docs/settings.md).
pub(crate) const STEPS_IN_FLIGHT: usize = 5;
/// Steps decoded at once by default. Measured on the H200 (`bench --no-cold --staged-threads 12`, one
/// run, file to decoded device columns): plain 78.2 / 77.2 / 86.8 ms and snappy 323.7 / 306.9 /
/// 325.4 ms with 1 / 2 / 4 decoding threads. Again on 2026-12-02 (`read --warm-up 2`, two rounds
/// alternating): plain 70.6 / 87.4 ms with 2, 74.7 / 71.6 ms with 4 (within the noise).
const DECODERS: usize = 2;
/// ... where a step's GPU time has a floor ([`longest_page_ns`]): its work is then a chain of
/// latencies (its longest pages, each walked by one warp in the pre-check and in nvCOMP) that other
/// steps at once fill. Snappy benchmark file, same runs, its long pages on the wide decoder: 64.6 /
/// 73.6 ms with 2 (6 steps), 58.4 / 60.5 ms with 4 (8 steps); earlier that day, 8 steps, 75.4 ms with
/// 2 and 54.4 / 57.8 / 61.2 ms with 4 (asked for 4, 6, 8: [`STEPS_IN_FLIGHT`] allows 4).
const DECODERS_WITH_FLOOR: usize = 4;
/// Steps held, and decoded, at once where a read's decode outlasts its reads ([`decode_bound`]):
/// the GPU then bounds the read, and steps at once hide each other's latencies (a one-warp walk,
/// nvCOMP's zstd kernel). Measured on the H200 (run W, 2026-12-05, `read --warm-up 2`, rounds
/// alternating, medians of 4 to 6): TPC-H lineitem SF10 snappy 145.3 / 136.1 / 133.4 ms with 5 / 7 /
/// 9 held (4 / 6 / 8 decoded at once), then 144.2 / 135.3 and 141.8 / 126.7 ms with 5 / 9; beside
/// cuDF 26.10 (`bench`), 125.0 ms with 5 against 111.0 / 116.4 with 9, its peak 12.73-12.79 GiB
/// allocated either way (cuDF's 14.3). Reads with zstd pages held 7 and decoded 6 until the dictionary
/// views (`view_flags::DICT_VIEWS`) lowered lineitem's peak: in run W, 9 / 8 read lineitem SF10 zstd
/// in 113.7 ms against 130.1-131.4 with 7 / 6, but its peak rose past cuDF's (13.10-13.89 GiB
/// allocated against 12.95). Run AM (H100, 2026-12-06, `read --warm-up 2`, 4 rounds, best / median):
/// 116.5 / 123.3 ms with 9 / 8 against 138.3 / 153.5 with 7 / 6; `bench` 115.9 ms, peak 12.18 GiB
/// allocated (12.35 before the dictionary views).
const STEPS_IN_FLIGHT_DECODE_BOUND: usize = 9;
/// See [`STEPS_IN_FLIGHT_DECODE_BOUND`].
const DECODERS_DECODE_BOUND: usize = 8;
/// A read is decode-bound when its steps' estimated GPU work is at least this many times their reads'
/// time (its chunks under about 3.5 bytes a value): lineitem SF10 snappy 1.7, zstd 2.7; the flat
/// benchmark files 0.96 (snappy) and 0.55 (plain), whose reads bound them (the snappy one read no
/// faster with 8 at once in run W: medians 50.0 / 52.5 ms).
const DECODE_BOUND_RATIO: f64 = 1.3;

/// Whether `reader`'s decode is estimated to take longer than its reads: its values (rows times leaf
/// columns) at [`STEP_NS_PER_VALUE`] against its chunks' bytes at [`PIPELINE_READ_BYTES_PER_NS`].
pub(crate) fn decode_bound(reader: &Reader) -> bool {
    let values = reader.plan.num_values(reader.source.metadata()) as f64;
    let read_ns = reader.plan.dest_len as f64 / PIPELINE_READ_BYTES_PER_NS;
    read_ns > 0.0 && values * STEP_NS_PER_VALUE >= DECODE_BOUND_RATIO * read_ns
}

/// The steps held and decoded at once by default for a read its decode bounds; `None` for another.
fn decode_bound_overlap(reader: &Reader) -> Option<(usize, usize)> {
    decode_bound(reader).then_some((STEPS_IN_FLIGHT_DECODE_BOUND, DECODERS_DECODE_BOUND))
}

/// Steps read at once. One: a step's read is already spread over the backend's threads, and two at
/// once were measured slower on the H200 (plain benchmark file: two 345 MB steps in 32 ms together
/// against 10 ms each one after the other; again on 2026-12-01, `read`, 8 steps: 93.0 / 95.6 ms
/// against 93.2 / 100.6 ms, and 16 steps 99.7 / 104.2 against 115.7 / 115.4). Contexts that block
/// instead of spinning while they wait (`CU_CTX_SCHED_BLOCKING_SYNC`) were no faster (98.9 / 99.9 ms;
/// again on 2026-12-02 with four decoding threads, three rounds, snappy auto / spin / yield / blocking
/// 53.8-58.2 / 55.3-56.2 / 53.8-57.8 / 52.8-60.2 ms, plain 64.6-66.3 / 61.5-63.7 / 62.3-64.8 /
/// 65.0-75.6 ms),
/// nor was a last step cut into parts of 3, 2 and 1 row groups so that less decode follows the last
/// read (`bench`, hot: 76.9 / 78.1 ms against 70.0 / 72.2 ms). What the gaps between steps cost is
/// taken away instead by the staged backend's workers going on from one step to the next
/// ([`IoBackend::fetch_steps`](crate::io::IoBackend::fetch_steps)).
const FETCHES: usize = 1;
/// Which decoders a step's compressed pages go to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageDecoders {
    /// nvCOMP loaded (else the host decompresses, but for Snappy under `own_snappy`).
    pub nvcomp: bool,
    /// Snappy and LZ4 bodies are walked by the pre-check before nvCOMP.
    pub prechecked: bool,
    /// Snappy goes to `gp_unsnap`.
    pub own_snappy: bool,
    /// Which Snappy bodies go to the wide decoder, whose time grows with a step's bytes, not its
    /// longest page.
    pub wide_snappy: WideSnappy,
}
/// Staged reads while decoding runs, as measured in the pipeline on the H200 (345 MB steps in 7.5-8 ms).
const PIPELINE_READ_BYTES_PER_NS: f64 = 45.0;
/// Data pages are assumed this long where no offset index says (writers' usual limit).
const ASSUMED_PAGE_BYTES: u64 = 1 << 20;
/// Smallest step worth its fixed costs (launches, a few synchronisations).
const MIN_STEP_BYTES: u64 = 256 << 20;
/// Bytes of temporaries per row and column (value indices, validity bytes, dense values, string
/// sources and lengths), for the budget.
const TEMP_BYTES_PER_VALUE: u64 = 21;

/// The GPU time a step costs at least, in nanoseconds: its longest compressed page, which each GPU
/// decompressor of `decoders` (nvCOMP, the pre-check before it for Snappy and LZ4 bodies, or
/// `gp_unsnap` for Snappy) follows with one warp or block, Snappy pages no longer than the wide
/// decoder leaves them (none when it takes every one). Zero without pages decompressed on the GPU.
/// A dictionary page's size is its chunk's start to its first data page; data pages' come from the
/// offset index, or are taken as [`ASSUMED_PAGE_BYTES`] (capped at the chunk) without one.
pub(crate) fn longest_page_ns(meta: &ParquetMetaData, chunks: &[ChunkRange], decoders: PageDecoders) -> f64 {
    use parquet::basic::Compression;
    let mut longest = 0f64;
    for c in chunks {
        let chunk = meta.row_group(c.row_group).column(c.column);
        let per_byte = match chunk.compression() {
            Compression::UNCOMPRESSED => continue,
            Compression::SNAPPY if decoders.wide_snappy == WideSnappy::All => continue,
            Compression::SNAPPY if decoders.own_snappy => CHAIN_NS_PER_BYTE_UNSNAP,
            // Decompressed on the host: no GPU floor.
            _ if !decoders.nvcomp => continue,
            Compression::SNAPPY | Compression::LZ4 | Compression::LZ4_RAW if decoders.prechecked => {
                CHAIN_NS_PER_BYTE_PRECHECKED
            }
            _ => CHAIN_NS_PER_BYTE_NVCOMP,
        };
        // A piece of a chunk read page by page: its own pages.
        let dictionary = match &c.pages {
            Some(run) if !run.dictionary => 0,
            _ => (chunk.data_page_offset() - crate::metadata::chunk_start(chunk)).max(0) as u64,
        };
        let data = match meta.page_index().and_then(|p| p.offset_index(c.row_group, c.column)) {
            Some(oi) => {
                let pages = oi.page_locations();
                let mine = c
                    .pages
                    .as_ref()
                    .map_or(&pages[..], |r| pages.get(r.pages.clone()).unwrap_or_default());
                mine.iter()
                    .map(|l| l.compressed_page_size.max(0) as u64)
                    .max()
                    .unwrap_or(0)
            }
            None => ASSUMED_PAGE_BYTES.min(chunk.compressed_size().max(0) as u64),
        };
        let mut page = dictionary.max(data);
        // Snappy pages past the wide decoder's lower bound are the ones it takes when they are
        // longer than the rest of their step (when they are not, throughput bounds the step anyway).
        if chunk.compression() == Compression::SNAPPY && decoders.wide_snappy == WideSnappy::Longest {
            page = page.min(WIDE_MIN_SRC as u64);
        }
        longest = longest.max(page as f64 * per_byte);
    }
    longest
}

/// Steps for a read of `read_bytes` whose steps each cost at least `longest_ns` of GPU time. Without
/// such a floor, [`STEPS_WITHOUT_FLOOR`]: reads bound the read, and more steps overlap more of them. With one,
/// each step costs about that much however small it is, so about as many steps as the reads can hide
/// (the reads' time over one step's floor, times the decoding threads), and two at least so that
/// reading overlaps decoding. Measured on the H200 (snappy benchmark file, `read`, one run, two each):
/// 1 / 2 / 3 / 4 / 6 steps took 124-134 / 117 / 124-131 / 135-145 / 166-186 ms with the pre-check;
/// without it, 4 steps (its default) took 95 ms.
pub(crate) fn steps_for_latency(read_bytes: u64, longest_ns: f64, decoders: usize) -> u64 {
    if longest_ns <= 0.0 {
        return STEPS_WITHOUT_FLOOR;
    }
    let read_ns = read_bytes as f64 / PIPELINE_READ_BYTES_PER_NS;
    ((read_ns * decoders.max(1) as f64 / longest_ns).ceil() as u64).clamp(2, MAX_STEPS_WITH_FLOOR)
}

/// Held steps decoded at once by default ([`crate::bench::fetch_held_steps`]): every one of the `steps`,
/// or as many as `free` device memory (with every step's chunks held; the pool's unused memory counted
/// as free) has room for, one at least,
/// counting for each the estimate of the largest step, `largest` (its chunks and temporaries: more
/// than a held step adds).
pub(crate) fn held_decoders(steps: usize, free: u64, largest: u64) -> usize {
    steps.min((free / largest.max(1)) as usize).max(1)
}

/// A GPU decode's steps, cut for its reader.
pub(crate) struct GpuSteps {
    /// The decoder (compiled once per reader).
    pub decoder: Arc<GpuDecoder>,
    /// The budget the steps were cut to.
    pub budget: MemoryBudget,
    /// Free device memory when the read began.
    pub free_before: u64,
    /// The steps' plans.
    pub plans: Vec<Arc<ReadPlan>>,
    /// Device memory the largest step needs (chunks and temporaries).
    pub largest: u64,
    /// Steps held at once.
    pub in_flight: usize,
    /// Steps decoded at once.
    pub decoders: usize,
    /// The decoded schema and each column's route.
    pub schema: SchemaRef,
    routes: Vec<ColumnRoute>,
    /// The reader's filter, on the GPU after each step's decode or left to the host.
    pub filter: Option<Arc<GpuFilter>>,
    /// The filter's columns first, where the read takes two passes.
    pub two_pass: Option<Arc<GpuTwoPass>>,
    /// Steps the statistics accept whole, read without the filter's own columns.
    whole: Option<Arc<WholeSteps>>,
}

/// How a filtered GPU read decodes a step whose row groups the statistics accept whole: only the
/// caller's columns (those the filter alone needs neither fetched nor decoded), nothing evaluated.
pub(crate) struct WholeSteps {
    filter: Arc<crate::filter::PlannedFilter>,
    leaves: Vec<usize>,
    schema: SchemaRef,
    routes: Vec<ColumnRoute>,
}

impl WholeSteps {
    /// Where `reader`'s filter compacts on the GPU and reads columns the caller did not ask for,
    /// and their decode without them gives the steps' `output` schema.
    fn of(reader: &Reader, filter: Option<&GpuFilter>, output: &SchemaRef) -> Result<Option<Self>> {
        let (
            Some(planned),
            Some(GpuFilter::Device {
                mode: FilterMode::Compact,
                ..
            }),
        ) = (&reader.filter, filter)
        else {
            return Ok(None);
        };
        if planned.added_columns.is_empty() {
            return Ok(None);
        }
        let descr = reader.source.metadata().file_metadata().schema_descr();
        let leaves: Vec<usize> = reader
            .plan
            .columns
            .iter()
            .copied()
            .filter(|&l| {
                let root = descr.column(l).path().parts().first().cloned().unwrap_or_default();
                !planned.added_columns.contains(&root)
            })
            .collect();
        if leaves.is_empty() {
            return Ok(None);
        }
        let (schema, routes) = route_columns(&reader.source, &leaves)?;
        Ok((&schema == output).then(|| Self {
            filter: planned.clone(),
            leaves,
            schema,
            routes,
        }))
    }

    /// The plan of a step of the row groups `group`: the caller's columns alone.
    fn plan(&self, reader: &Reader, group: Vec<usize>) -> Result<Arc<ReadPlan>> {
        ReadPlan::build_paged(
            &reader.source,
            &Projection::Leaves(self.leaves.clone()),
            &RowGroupSelection::Indices(group),
            reader.plan.options,
            &reader.plan.rows,
        )
        .map(Arc::new)
    }
}

/// The schema of a GPU read's batches, decoded as `decoded`: without the columns read only for a
/// filter run on the GPU.
fn output_schema_of(decoded: &SchemaRef, filter: Option<&GpuFilter>, two_pass: Option<&GpuTwoPass>) -> SchemaRef {
    if let Some(t) = two_pass {
        return t.plan.schema.clone();
    }
    filter.map_or_else(|| decoded.clone(), |f| f.output_schema(decoded))
}

/// A GPU scan's two passes ([`DeviceTwoPass`]) and each pass's column routes.
pub(crate) struct GpuTwoPass {
    pub plan: DeviceTwoPass,
    filter_routes: Vec<ColumnRoute>,
    payload_routes: Vec<ColumnRoute>,
}

impl GpuTwoPass {
    /// The two passes of `reader`'s GPU scan, whose row filter is `filter`: where the reader asks
    /// for two, the filter runs on the GPU and compacts, and there are columns beyond the filter's.
    fn of(reader: &Reader, filter: Option<&GpuFilter>, passes: FilterPasses) -> Result<Option<Self>> {
        let on_gpu = matches!(
            filter,
            Some(GpuFilter::Device {
                mode: FilterMode::Compact,
                ..
            })
        );
        if !on_gpu {
            return Ok(None);
        }
        let Some(passes) = TwoPass::plan(&reader.source, &reader.filter, &reader.plan, passes) else {
            return Ok(None);
        };
        let (filter_schema, filter_routes) = route_columns(&reader.source, &passes.filter_leaves)?;
        let (payload_schema, payload_routes) = route_columns(&reader.source, &passes.payload_leaves)?;
        // The row filter runs the whole filter over every column, so over the filter's own too.
        Ok(DeviceTwoPass::plan(passes, filter_schema, payload_schema)
            .ok()
            .map(|plan| Self {
                plan,
                filter_routes,
                payload_routes,
            }))
    }
}

impl GpuSteps {
    /// The steps of `reader`'s selection, for a decode on `decoder` beginning at `started`. Steps a
    /// filter's statistics accept whole read only the caller's columns ([`WholeSteps`]).
    pub(crate) fn plan(reader: &Reader, decoder: Arc<GpuDecoder>) -> Result<Self> {
        Self::plan_steps(reader, decoder, reader.filter_passes, true)
    }

    /// [`Self::plan`] reading a filter in `passes`, every step with the reader's columns
    /// (benchmarks of a read's steps alone, which fetch and decode each step as one, read in one).
    pub(crate) fn plan_with(reader: &Reader, decoder: Arc<GpuDecoder>, passes: FilterPasses) -> Result<Self> {
        Self::plan_steps(reader, decoder, passes, false)
    }

    fn plan_steps(reader: &Reader, decoder: Arc<GpuDecoder>, passes: FilterPasses, whole_steps: bool) -> Result<Self> {
        let (free_before, _) = decoder.context().memory()?;
        let budget = gpu_budget(reader, decoder.context().available_memory()?);
        let (schema, routes) = route_columns(&reader.source, &reader.plan.columns)?;
        let filter = GpuFilter::plan(&reader.filter, &schema, reader.filter_mode)?.map(Arc::new);
        let two_pass = GpuTwoPass::of(reader, filter.as_deref(), passes)?.map(Arc::new);
        let whole = match whole_steps {
            true => {
                let output = output_schema_of(&schema, filter.as_deref(), two_pass.as_deref());
                WholeSteps::of(reader, filter.as_deref(), &output)?.map(Arc::new)
            }
            false => None,
        };
        // The GPU time a step costs at least: how many steps, and how many decoded at once.
        let floor = step_floor_ns(reader, &decoder);
        let (steps, largest) = decode_steps(reader, &budget, floor)?;
        // Row groups a filter's statistics accept whole apart from the others: their steps neither
        // evaluate the filter nor compact (nor, in two passes, wait for a second fetch).
        let steps = match &reader.filter {
            Some(f) => f.split_accepted_whole(steps),
            None => steps,
        };
        // The filter's surviving rows read page by page, as the host reads them; in two passes, the
        // steps fetch the filter's columns (the workers the others').
        let mut plans = Vec::with_capacity(steps.len());
        for g in steps {
            let mut plan = match (&whole, &two_pass) {
                (Some(w), _) if w.filter.accepts_whole(&g) => vec![w.plan(reader, g)?],
                (_, Some(t)) => reader.decode_plans(vec![g], &t.plan.passes)?,
                (_, None) => reader.plans_of(vec![g])?,
            };
            plans.push(
                plan.pop()
                    .ok_or_else(|| Error::device("planning GPU steps", "a step without a plan"))?,
            );
        }
        let in_flight = budget.steps_in_flight_for(largest);
        let most = in_flight - FETCHES.min(in_flight - 1);
        Ok(Self {
            decoder,
            budget,
            free_before,
            plans,
            largest,
            in_flight,
            decoders: decoders(reader, floor).clamp(1, most),
            schema,
            routes,
            filter,
            two_pass,
            whole,
        })
    }

    /// The schema of the steps' batches: without the columns read only for a filter run on the GPU.
    pub(crate) fn output_schema(&self) -> SchemaRef {
        output_schema_of(&self.schema, self.filter.as_deref(), self.two_pass.as_deref())
    }

    /// Starts the scan of these steps: each decoded on the GPU, `release` saying whether a step's
    /// place in memory is given back once decoded (a whole read) or once handed out (a stream).
    pub(crate) fn scan(&self, reader: &Reader, started: Instant, release: Release) -> Scan<DecodedStep> {
        let (spec, sink) = self.parts(reader, started, release);
        Scan::start(spec, sink)
    }

    /// The scan of these steps and its sink, to be started.
    pub(crate) fn parts(&self, reader: &Reader, started: Instant, release: Release) -> (ScanSpec, GpuSink) {
        let progress = ProgressCounter::new(
            reader.progress.clone(),
            self.plans.len(),
            reader.plan.num_rows(reader.source.metadata()),
            reader.plan.useful_bytes(),
        );
        let sink = GpuSink {
            decoder: self.decoder.clone(),
            source: reader.source.clone(),
            schema: self.schema.clone(),
            routes: self.routes.clone(),
            threads: reader.policy.threads,
            started,
            headers: (0..self.plans.len()).map(|_| HeaderSlot::default()).collect(),
            filter: self.filter.clone(),
            two_pass: self.two_pass.clone(),
            whole: self.whole.clone(),
            io: reader.io.clone(),
        };
        let spec = ScanSpec {
            io: reader.io.clone(),
            source: reader.source.clone(),
            plans: self.plans.clone(),
            per_call: false,
            threads: reader.policy.threads,
            in_flight: self.in_flight,
            workers: self.decoders,
            release,
            progress,
            started,
            tuning: reader.tuning,
        };
        (spec, sink)
    }
}

/// The memory budget of a GPU decode: the reader's memory limit, or half of `free` device memory;
/// steps cut to a [`STEPS_IN_FLIGHT`]th of it (for a read its decode bounds, a
/// [`STEPS_IN_FLIGHT_DECODE_BOUND`]th; or as the tuning
/// says), two held at least.
pub(crate) fn gpu_budget(reader: &Reader, free: u64) -> MemoryBudget {
    let most = reader
        .tuning
        .steps_in_flight
        .unwrap_or(decode_bound_overlap(reader).map_or(STEPS_IN_FLIGHT, |(held, _)| held));
    MemoryBudget::new(Some(reader.memory_limit.unwrap_or(free / 2)), 2, most)
}

/// Consecutive selected row groups cut into steps, and the estimated device memory of the largest
/// step (chunks and temporaries; with a filter, its masks and the compacted copies). Steps are cut
/// to the budget's [`per_step`](MemoryBudget::per_step) (as many as [`steps_for_latency`] says when
/// they stay over [`MIN_STEP_BYTES`]); a row group over
/// [`per_row_group`](MemoryBudget::per_row_group) alone is an error naming it. `floor_ns` is a step's
/// least GPU time ([`step_floor_ns`]).
pub(crate) fn decode_steps(reader: &Reader, budget: &MemoryBudget, floor_ns: f64) -> Result<(Vec<Vec<usize>>, u64)> {
    let meta = reader.source.metadata();
    let filter_leaves = reader.filter.as_ref().map_or(0, |f| f.predicate.leaves().len() as u64);
    // Each row group's place in `need`: one pass over the chunks, not one per row group (a file of
    // many small row groups, TPC-H lineitem's 524 of 16 chunks, took milliseconds before its first
    // read).
    let place: HashMap<usize, usize> = reader
        .plan
        .row_groups
        .iter()
        .enumerate()
        .map(|(k, &rg)| (rg, k))
        .collect();
    let mut need: Vec<(usize, u64)> = reader.plan.row_groups.iter().map(|&rg| (rg, 0)).collect();
    for c in &reader.plan.chunks {
        let Some(&k) = place.get(&c.row_group) else {
            continue;
        };
        let rg = c.row_group;
        let rows = meta.row_group(rg).num_rows().max(0) as u64;
        let unc = meta.row_group(rg).column(c.column).uncompressed_size().max(0) as u64;
        // A piece of a chunk read page by page: the bytes fetched, and its share of the chunk's
        // decoded bytes and rows.
        let share = |x: u64| match &c.pages {
            Some(run) => (x as u128 * c.len as u128 / (run.chunk.end - run.chunk.start).max(1) as u128) as u64,
            None => x,
        };
        need[k].1 += c.len + 2 * share(unc) + share(rows) * TEMP_BYTES_PER_VALUE;
        if filter_leaves > 0 {
            // The row filter: a byte per row per leaf and the mask, and the compacted copy of
            // the column beside the decoded one.
            need[k].1 += share(rows) * (filter_leaves + 1) / reader.plan.columns.len().max(1) as u64 + share(unc);
        }
    }
    let total: u64 = need.iter().map(|n| n.1).sum();
    budget.check_row_groups(
        &need,
        &reader.source.location(),
        "decoding this row group needs about",
        " (set a larger --memory-limit)",
    )?;
    let steps = reader
        .decode_steps
        .map_or_else(|| steps_for_latency_of(reader, floor_ns), |s| s as u64);
    let share = budget.per_step().unwrap_or(u64::MAX).max(1);
    // As many steps as asked (fewer when they would fall under MIN_STEP_BYTES), of even size;
    // more when even steps would not fit the budget's share.
    let steps = steps.min((total / MIN_STEP_BYTES).max(1));
    let bytes_of = |g: &Vec<usize>| -> u64 { g.iter().map(|rg| place.get(rg).map_or(0, |&k| need[k].1)).sum() };
    let even = split_balanced(&need, steps as usize);
    let cut = if even.iter().all(|g| bytes_of(g) <= share) {
        even
    } else {
        pack_consecutive(need.clone(), share)
    };
    let largest = cut.iter().map(bytes_of).max().unwrap_or(0).max(1);
    Ok((cut, largest))
}

/// The GPU time a step of `reader`'s selection costs at least ([`longest_page_ns`]).
pub(crate) fn step_floor_ns(reader: &Reader, decoder: &GpuDecoder) -> f64 {
    let decoders = PageDecoders {
        nvcomp: decoder.has_nvcomp(),
        prechecked: decoder.prechecks(),
        own_snappy: decoder.snappy_on_own_kernel(),
        wide_snappy: decoder.snappy().wide(),
    };
    longest_page_ns(reader.source.metadata(), &reader.plan.chunks, decoders)
}

/// Steps decoded at once: as asked, else where steps have a floor [`DECODERS_DECODE_BOUND`] for a read
/// its decode bounds and [`DECODERS_WITH_FLOOR`] for another, and [`DECODERS`] where they have none.
fn decoders(reader: &Reader, floor_ns: f64) -> usize {
    reader.decode_threads.unwrap_or(match floor_ns > 0.0 {
        true => decode_bound_overlap(reader).map_or(DECODERS_WITH_FLOOR, |(_, decoders)| decoders),
        false => DECODERS,
    })
}

/// How many steps to cut a read into by default ([`steps_for_latency`] over this selection, whose
/// steps cost at least `floor_ns` of GPU time).
fn steps_for_latency_of(reader: &Reader, floor_ns: f64) -> u64 {
    steps_for_latency(reader.plan.dest_len, floor_ns, decoders(reader, floor_ns))
}

/// Decodes fetched steps into device columns, each on its chunks' stream; parses page headers on the
/// host ahead of the decoders (when `GPU_PARQUET_HOST_HEADERS` leaves it on).
pub(crate) struct GpuSink {
    decoder: Arc<GpuDecoder>,
    source: ParquetSource,
    schema: SchemaRef,
    routes: Vec<ColumnRoute>,
    threads: usize,
    started: Instant,
    /// Page headers parsed on the host ahead of the decoders, step by step, at most as many steps
    /// ahead of the last one handed to them as may be in flight; a decoder takes its step's (which
    /// frees them), and a step whose headers are not ready when its decode begins parses them on the
    /// GPU (the thread ahead then skips it, or drops what it parsed too late).
    headers: Vec<HeaderSlot>,
    /// The reader's filter: applied to each decoded step on the GPU, or left to the host.
    filter: Option<Arc<GpuFilter>>,
    /// The filter's columns first: each step's fetch holds them, and the sink fetches the others'
    /// pages of the accepted rows through `io`.
    two_pass: Option<Arc<GpuTwoPass>>,
    /// Steps accepted whole, read without the filter's own columns.
    whole: Option<Arc<WholeSteps>>,
    io: Arc<AnyBackend>,
}

impl StepSink for GpuSink {
    type Output = DecodedStep;

    fn what(&self) -> &'static str {
        "decoding a step"
    }

    /// Decodes one fetched step (on its chunks' stream) and drops its chunks.
    fn finish(&self, step: FetchedStep<'_>) -> Result<DecodedStep> {
        let decode_from = Instant::now();
        let cpu_from = crate::trace::thread_cpu();
        // The buffer apart: a step decoded in one pass takes it, to free it once its pages are
        // decompressed.
        let ColumnChunks {
            buffer,
            fetched,
            plan: step_plan,
            log: step_log,
            ..
        } = step.chunks;
        let host_headers = self.headers.get(step.k).and_then(HeaderSlot::take);
        let AnyBuffer::Device(buffer) = buffer else {
            return Err(Error::device("GPU decoder", "the backend returned host memory"));
        };
        let two = self
            .two_pass
            .as_ref()
            .filter(|t| !t.plan.passes.reads_in_one(&step_plan));
        let whole = self
            .whole
            .as_ref()
            .filter(|w| w.filter.accepts_whole(&step_plan.row_groups));
        let (batch, mask, filter, stats, step_peak, second) = match (two, whole) {
            (_, Some(w)) => {
                let (batch, stats, step_peak) = self.decoder.decode_chunks(
                    &self.source,
                    &w.schema,
                    &w.routes,
                    &step_plan,
                    StepChunks::Owned(buffer),
                    self.threads,
                    host_headers.as_ref(),
                )?;
                let rows = batch.num_rows as u64;
                let filter = StepFilter {
                    rows_in: rows,
                    rows_kept: rows,
                    time: Duration::ZERO,
                    passes: None,
                };
                (batch, None, Some(filter), stats, step_peak, None)
            }
            (Some(t), None) => {
                let (first, mut stats, first_peak) = self.decoder.decode(
                    &self.source,
                    &t.plan.filter_schema,
                    &t.filter_routes,
                    &step_plan,
                    &buffer,
                    self.threads,
                    host_headers.as_ref(),
                )?;
                let started = Instant::now();
                let mut exec = GpuPasses {
                    sink: self,
                    passes: t,
                    stats: None,
                    peak: 0,
                };
                let done = t.plan.second_pass(&self.source, &step_plan, first, &mut exec)?;
                // Both passes are queued: the first pass's chunks can go.
                drop(buffer);
                let (payload_stats, payload_peak) = (exec.stats.take(), exec.peak);
                if let Some(p) = payload_stats {
                    stats.add_pass(p);
                }
                let filter = StepFilter {
                    rows_in: done.rows.0,
                    rows_kept: done.rows.1,
                    time: started.elapsed(),
                    passes: Some(done.bytes),
                };
                (
                    done.batch,
                    None,
                    Some(filter),
                    stats,
                    first_peak.max(payload_peak),
                    done.second,
                )
            }
            (None, None) => {
                let (batch, stats, step_peak) = self.decoder.decode_chunks(
                    &self.source,
                    &self.schema,
                    &self.routes,
                    &step_plan,
                    StepChunks::Owned(buffer),
                    self.threads,
                    host_headers.as_ref(),
                )?;
                let (batch, mask, filter) = match &self.filter {
                    Some(f) => f.apply(
                        batch,
                        |b, p, mode| self.decoder.filter(b, p, mode),
                        |b, mask| b.compact(mask, &self.decoder),
                    )?,
                    None => (batch, None, None),
                };
                (batch, mask, filter, stats, step_peak, None)
            }
        };
        let (free_after, _) = self.decoder.context().memory()?;
        let decode_window = Window::between(self.started, decode_from, Instant::now());
        let decode_cpu = crate::trace::thread_cpu().saturating_sub(cpu_from);
        let read_window = Window::between(self.started, fetched.start, fetched.end);
        let (plan, log) = match second {
            Some((p, l)) => {
                let (plan, log) = merge_reads(&[step_plan, p], &[step_log, l]);
                (Arc::new(plan), log)
            }
            None => (step_plan, step_log),
        };
        // The step's chunks are dropped: the steps held now, this one's place included.
        let held_steps = step.places.held();
        let summary = StepSummary {
            row_groups: plan.row_groups.clone(),
            chunk_bytes: plan.dest_len,
            stats,
            io_wait: step.io_wait,
            read_window,
            decode_window,
            decode_cpu,
            backend: BackendTimes::of(&log),
            filter,
        };
        Ok(DecodedStep {
            batch,
            mask,
            host_filter: self.filter.as_ref().and_then(|f| f.on_host()),
            summary,
            plan,
            log,
            step_peak,
            free_after,
            held_steps,
        })
    }

    fn runs_ahead(&self) -> bool {
        // The host parses the headers of steps in the page cache ahead of the decoders.
        true
    }

    fn run_ahead(&self, plans: &[Arc<ReadPlan>], turn: &dyn Fn(usize) -> bool) {
        let Ok(file) = std::fs::File::open(self.source.path()) else {
            return;
        };
        for (k, plan) in plans.iter().enumerate() {
            if !turn(k) {
                return;
            }
            if self.headers[k].is_taken() {
                crate::trace::at(self.started, format_args!("step {k}: headers left to the GPU (late)"));
                continue;
            }
            // A failed read (or a panic) leaves the step's headers to the GPU.
            let parsed = crate::panic_guard::contain_panics(&self.source.location(), || {
                Ok(worth_parsing(&file, plan)
                    .then(|| parse_step_headers(&file, plan).ok())
                    .flatten())
            })
            .ok()
            .flatten();
            let what = match parsed.map(|h| self.headers[k].offer(h)) {
                Some(true) => "parsed on the host",
                Some(false) => "parsed on the host too late, dropped",
                None => "left to the GPU",
            };
            crate::trace::at(self.started, format_args!("step {k}: headers {what}"));
        }
    }
}

/// A GPU step's second pass: the row filter's kernels, and the payload fetched through the
/// reader's backend and decoded on the sink's decoder.
struct GpuPasses<'a> {
    sink: &'a GpuSink,
    passes: &'a GpuTwoPass,
    /// The payload decode's figures, and the most device memory it held.
    stats: Option<StepStats>,
    peak: u64,
}

impl SecondPassExec for GpuPasses<'_> {
    type Buffer = DeviceBuffer<u8>;

    fn mask(&mut self, batch: DeviceBatch, predicate: &RowPredicate) -> Result<Filtered<DeviceBuffer<u8>>> {
        self.sink.decoder.filter(batch, predicate, FilterMode::Mask)
    }

    fn compact(&mut self, batch: DeviceBatch, mask: &DeviceArray) -> Result<DeviceBatch> {
        batch.compact(mask, &self.sink.decoder)
    }

    fn keep(&mut self, batch: DeviceBatch, keep: &BooleanBuffer) -> Result<DeviceBatch> {
        use crate::decode::exec::Executor;
        let mut exec = self.sink.decoder.row_filter_executor(&batch)?;
        let mask = crate::decode::table::mask_array(keep.sliced().as_slice(), keep.len(), &mut |b: &[u8]| {
            let a = exec.upload(b)?;
            exec.take(a)
        })?;
        crate::decode::row_filter::compact_batch(&mut exec, batch, &mask)
    }

    fn payload(&mut self, plan: &ReadPlan) -> Result<(DeviceBatch, IoLog)> {
        let fetched = self.sink.io.fetch(&self.sink.source, plan)?;
        self.sink.source.check_unchanged()?;
        let AnyBuffer::Device(buffer) = &fetched.buffer else {
            return Err(Error::device("GPU decoder", "the backend returned host memory"));
        };
        // The pages were just read: their headers parsed on the host where they are in the page
        // cache (as the thread ahead does for the first pass), else on the GPU.
        let headers = std::fs::File::open(self.sink.source.path())
            .ok()
            .filter(|f| worth_parsing(f, plan))
            .and_then(|f| parse_step_headers(&f, plan).ok());
        let (batch, stats, peak) = self.sink.decoder.decode(
            &self.sink.source,
            &self.passes.plan.payload_schema,
            &self.passes.payload_routes,
            plan,
            buffer,
            self.sink.threads,
            headers.as_ref(),
        )?;
        self.stats = Some(stats);
        self.peak = peak;
        Ok((batch, fetched.log))
    }

    fn empty(&mut self, schema: &SchemaRef) -> Result<DeviceBatch> {
        self.sink.decoder.empty_batch(schema, self.sink.source.location())
    }

    fn join(&mut self, batch: &DeviceBatch) -> Result<()> {
        batch.join_streams()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::snappy_route::{NVCOMP_NS_PER_BYTE, PRECHECK_NS_PER_BYTE, UNSNAP_NS_PER_BYTE};
    use crate::plan::{Projection, RowGroupSelection};
    use parquet::file::properties::WriterProperties;
    use tempfile::TempDir;

    fn chunks_of(path: &str) -> (crate::ParquetSource, ReadPlan) {
        let source = crate::ParquetSource::open(path).unwrap();
        let plan = ReadPlan::build(&source, &Projection::All, &RowGroupSelection::All, Default::default()).unwrap();
        (source, plan)
    }

    #[test]
    fn held_steps_decode_at_once_as_far_as_memory_allows() {
        const GB: u64 = 1 << 30;
        // The snappy benchmark file on an H200: 8 steps of some 1.5 GB, 137 GB free once held.
        assert_eq!(held_decoders(8, 137 * GB, 3 * GB / 2), 8);
        // Many steps: as many as the largest fits in what is free.
        assert_eq!(held_decoders(100, 40 * GB, 4 * GB), 10);
        // Nearly nothing free: one at a time, never none.
        assert_eq!(held_decoders(100, GB / 2, 4 * GB), 1);
        assert_eq!(held_decoders(3, 0, 0), 1);
    }

    #[test]
    fn only_compressed_pages_set_a_floor_and_the_pre_check_raises_it() {
        let with = |nvcomp, prechecked, own_snappy| PageDecoders {
            nvcomp,
            prechecked,
            own_snappy,
            wide_snappy: WideSnappy::Off,
        };
        let (plain, plan) = chunks_of("testdata/flat_plain.parquet");
        assert_eq!(
            longest_page_ns(plain.metadata(), &plan.chunks, with(true, true, false)),
            0.0
        );
        let (snappy, plan) = chunks_of("testdata/flat_snappy_dict.parquet");
        let trusted = longest_page_ns(snappy.metadata(), &plan.chunks, with(true, false, false));
        let checked = longest_page_ns(snappy.metadata(), &plan.chunks, with(true, true, false));
        assert!(trusted > 0.0, "{trusted}");
        let ratio = checked / trusted;
        let want = (NVCOMP_NS_PER_BYTE + PRECHECK_NS_PER_BYTE) / NVCOMP_NS_PER_BYTE;
        assert!((ratio - want).abs() < 1e-9, "{ratio} against {want}");
        // Our own Snappy kernel sets its own floor, with or without nvCOMP; the host sets none.
        let own = longest_page_ns(snappy.metadata(), &plan.chunks, with(false, true, true));
        assert!(
            (own / trusted - UNSNAP_NS_PER_BYTE / NVCOMP_NS_PER_BYTE).abs() < 1e-9,
            "{own}"
        );
        assert_eq!(
            longest_page_ns(snappy.metadata(), &plan.chunks, with(false, true, false)),
            0.0
        );
        // The wide Snappy decoder on every body sets none, nvCOMP or not; on the longest only, it
        // leaves this file's short pages (all under its bound) their floor.
        for nvcomp in [true, false] {
            let on = |wide_snappy| PageDecoders {
                wide_snappy,
                ..with(nvcomp, true, !nvcomp)
            };
            let off = longest_page_ns(snappy.metadata(), &plan.chunks, on(WideSnappy::Off));
            assert!(off > 0.0);
            assert_eq!(
                longest_page_ns(snappy.metadata(), &plan.chunks, on(WideSnappy::Longest)),
                off
            );
            assert_eq!(
                longest_page_ns(snappy.metadata(), &plan.chunks, on(WideSnappy::All)),
                0.0
            );
        }
    }

    #[test]
    fn the_wide_decoder_caps_a_long_snappy_page_floor_at_its_lower_bound() {
        use arrow::array::Int64Array;
        use parquet::file::properties::WriterProperties;
        // One Snappy data page of 300,000 incompressible values (2.4 MB), with an offset index.
        let mut next = crate::decode::host_kernels::xorshift(7);
        let values = Int64Array::from_iter_values((0..300_000).map(|_| next() as i64));
        let batch = arrow::record_batch::RecordBatch::try_from_iter([("v", Arc::new(values) as _)]).unwrap();
        let props = WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .set_dictionary_enabled(false)
            .set_data_page_size_limit(64 << 20)
            .set_write_batch_size(1 << 20)
            .build();
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(file.reopen().unwrap(), batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let (source, plan) = chunks_of(file.path().to_str().unwrap());
        let with = |wide_snappy| PageDecoders {
            nvcomp: true,
            prechecked: true,
            own_snappy: false,
            wide_snappy,
        };
        let per_byte = NVCOMP_NS_PER_BYTE + PRECHECK_NS_PER_BYTE;
        let off = longest_page_ns(source.metadata(), &plan.chunks, with(WideSnappy::Off));
        assert!(off > 2.4e6 * per_byte, "{off}");
        let longest = longest_page_ns(source.metadata(), &plan.chunks, with(WideSnappy::Longest));
        assert_eq!(longest, WIDE_MIN_SRC as f64 * per_byte);
    }

    #[test]
    fn a_filter_counts_its_masks_and_compacted_copies_in_a_step() {
        let reader = |filter: Option<&str>| {
            let mut b =
                crate::Reader::builder("testdata/flat_snappy_dict.parquet").with_backend(crate::BackendKind::Host);
            if let Some(f) = filter {
                b = b.with_filter(crate::filter::Expr::parse(f).expect("parse"));
            }
            b.build().expect("reader")
        };
        // Every row accepted: the same plan, one small step either way.
        let (plain, filtered) = (reader(None), reader(Some("id >= 0")));
        assert_eq!(plain.plan, filtered.plan);
        let budget = MemoryBudget::new(None, 2, STEPS_IN_FLIGHT);
        let (_, without) = decode_steps(&plain, &budget, 0.0).expect("steps");
        let (_, with) = decode_steps(&filtered, &budget, 0.0).expect("steps");
        let meta = plain.source.metadata();
        let unc: u64 = plain
            .plan
            .chunks
            .iter()
            .map(|c| meta.row_group(c.row_group).column(c.column).uncompressed_size() as u64)
            .sum();
        let rows = plain.plan.num_rows(meta);
        // The compacted copies, and a byte per row for the one leaf and the mask.
        assert!(
            with >= without + unc && with <= without + unc + 2 * rows,
            "{without} {with} {unc} {rows}"
        );
    }

    /// A reader of a one-column file of 100,000 Int64 values written with `props`.
    fn one_column_reader(values: impl Iterator<Item = i64>, props: WriterProperties) -> (crate::Reader, TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("one.parquet");
        let column: arrow::array::ArrayRef = Arc::new(arrow::array::Int64Array::from_iter_values(values));
        let batch = arrow::array::RecordBatch::try_from_iter([("v", column)]).expect("batch");
        let file = std::fs::File::create(&path).expect("create");
        let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
        w.write(&batch).expect("write");
        w.close().expect("close");
        let reader = crate::Reader::builder(&path)
            .with_backend(crate::BackendKind::Host)
            .build()
            .expect("reader");
        (reader, dir)
    }

    #[test]
    fn reads_of_few_bytes_a_value_are_decode_bound() {
        use parquet::basic::Compression;
        // Eight bytes a value, as the plain benchmark file stores its doubles: its reads bound it.
        let scattered = (0..100_000i64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64));
        let plain = WriterProperties::builder().set_dictionary_enabled(false).build();
        let (reader, _dir) = one_column_reader(scattered, plain);
        assert!(!decode_bound(&reader));
        assert_eq!(decode_bound_overlap(&reader), None);
        // A few bits a value (16 values, dictionary-encoded): the decode bounds it, as TPC-H
        // lineitem's 1.7-2.7 bytes a value do, whatever the codec.
        let few = |codec| {
            let props = WriterProperties::builder().set_compression(codec).build();
            one_column_reader((0..100_000i64).map(|i| i % 16 * 1_000), props)
        };
        let (reader, _dir) = few(Compression::SNAPPY);
        assert!(decode_bound(&reader));
        let snappy = (STEPS_IN_FLIGHT_DECODE_BOUND, DECODERS_DECODE_BOUND);
        assert_eq!(decode_bound_overlap(&reader), Some(snappy));
        assert_eq!(decoders(&reader, 1.0), DECODERS_DECODE_BOUND);
        assert_eq!(decoders(&reader, 0.0), DECODERS);
        let (reader, _dir) = few(Compression::ZSTD(Default::default()));
        assert_eq!(decode_bound_overlap(&reader), Some(snappy));
    }

    #[test]
    fn fewer_steps_the_longer_a_step_must_take() {
        // Reads alone bound the read: the most steps.
        assert_eq!(steps_for_latency(3 << 30, 0.0, 2), STEPS_WITHOUT_FLOOR);
        // The snappy benchmark file: 1.63 GB of chunks read in 36 ms, 975 kB pages with the pre-check
        // (27 ms a step), two decoders: three steps.
        let floor = 975e3 * (NVCOMP_NS_PER_BYTE + PRECHECK_NS_PER_BYTE);
        assert_eq!(steps_for_latency(1_631_856_109, floor, 2), 3);
        // Without it, the reads hide more steps (16 ms a step).
        assert_eq!(steps_for_latency(1_631_856_109, 975e3 * NVCOMP_NS_PER_BYTE, 2), 5);
        // Its long pages on the wide decoder (a page counted at 256 KiB), four decoders: the most.
        let capped = WIDE_MIN_SRC as f64 * (NVCOMP_NS_PER_BYTE + PRECHECK_NS_PER_BYTE);
        assert_eq!(
            steps_for_latency(1_631_856_109, capped, DECODERS_WITH_FLOOR),
            MAX_STEPS_WITH_FLOOR
        );
        assert_eq!(steps_for_latency(1_631_856_109, capped, 1), 5);
        // Tiny pages: the most a read with a floor gets.
        assert_eq!(steps_for_latency(3 << 30, 1.0, 2), MAX_STEPS_WITH_FLOOR);
        // A huge floor still leaves two steps, so that reading overlaps decoding.
        assert_eq!(steps_for_latency(1 << 20, 1e12, 1), 2);
    }
}

//! [`Reader::read_device`]: file → decoded device columns, pipelined. The selection is cut into steps
//! (consecutive row groups within the memory budget); a reading thread fetches the next steps while
//! decoding threads decode the ones read, so I/O overlaps decode and steps' GPU work overlaps
//! ([`Pipeline`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use parquet::file::metadata::ParquetMetaData;
use serde::Serialize;

use crate::config::WideSnappy;
use crate::decode::gpu::{DecoderSetup, GpuDecoder};
use crate::decode::host_headers::{HeaderSlot, HostHeaders, parse_step_headers, worth_parsing};
use crate::decode::pipeline::ColumnRoute;
use crate::decode::pipeline::{ColumnStepStats, StepStats, route_columns};
// A one-warp decompressor's cost per compressed byte of a step's longest page bounds the step's GPU
// time, whatever its size (measured in `snappy_route`).
use crate::decode::snappy_route::{
    CHAIN_NS_PER_BYTE_NVCOMP, CHAIN_NS_PER_BYTE_PRECHECKED, CHAIN_NS_PER_BYTE_UNSNAP, WIDE_MIN_SRC,
};
use crate::decode::table::{DeviceBatch, DeviceTable};
use crate::error::{Error, Location, Result};
use crate::gpu::guard;
use crate::io::IoLog;
use crate::io::select::AnyBuffer;
use crate::plan::{ChunkRange, ReadPlan};
use crate::reader::{ColumnChunks, ProgressCounter, Reader, pack_consecutive, split_balanced};
use crate::report::ReadReport;
use crate::scan::fetch_steps;

/// Steps a read without compressed pages is cut into, when the budget allows: its reads bound it,
/// and the smaller the last step, the less decode follows the last read. Measured on the H200
/// (plain benchmark file, `read --warm-up 2`, 2026-12-02, two machines): 8 / 12 / 16 / 24 steps
/// 60.3-60.5 / 61.1-61.3 / 58.7-59.0 / 58.2-58.4 ms; 8 / 16 steps 62.9-65.9 / 60.7-63.7 ms.
const STEPS_WITHOUT_FLOOR: u64 = 16;
/// Steps a read whose steps have a floor of GPU time is cut into at most: each step adds its floor
/// and its fixed costs (snappy benchmark file, same runs: 8 / 12 / 16 steps 45.0-45.4 / 45.6-47.7 /
/// 54.4-55.3 ms).
const MAX_STEPS_WITH_FLOOR: u64 = 8;
/// Steps held in device memory at once, at most: [`FETCHES`] being read, the rest read and waiting
/// (the reads run ahead of the decode), or being decoded.
const STEPS_IN_FLIGHT: usize = 5;
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
/// ([`fetch_steps`]).
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

#[doc(hidden)] // a benchmark hook (`bench`), not the reading API
/// A GPU read's steps, fetched into device memory and held ([`Reader::fetch_held_steps`]).
#[derive(Debug)]
pub struct HeldSteps {
    chunks: Vec<ColumnChunks>,
    decoders: usize,
}

impl HeldSteps {
    /// How many steps.
    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    /// Whether there is no step (an empty selection).
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// How many steps are decoded at once.
    pub fn decoders(&self) -> usize {
        self.decoders
    }
}

/// A read decoded on the GPU: the device table and the reports.
#[derive(Debug)]
pub struct DeviceRead {
    /// The decoded columns.
    pub table: DeviceTable,
    /// The I/O report of the whole read (every step's reads).
    pub io: ReadReport,
    /// The decode report.
    pub decode: DecodeReport,
}

/// What the decoder did: per column, per step, where each ran, and the memory it took.
#[derive(Debug, Clone, Serialize)]
pub struct DecodeReport {
    /// Kernel compilation and nvCOMP.
    pub setup: DecoderSetup,
    /// Per top-level column, summed over steps.
    pub columns: Vec<ColumnStepStats>,
    /// Per step.
    pub steps: Vec<StepSummary>,
    /// Wall time from the start of the read (the decoder set up) to the last decoded column.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub wall: Duration,
    /// Uncompressed bytes of the selection (the row groups' column `total_uncompressed_size`, cuDF's
    /// measure of decoded throughput).
    pub uncompressed_bytes: u64,
    /// Device memory of the decoded output.
    pub output_bytes: u64,
    /// The budget the steps were cut to.
    pub budget_bytes: u64,
    /// Most device memory the read held at once by our own count: outputs so far, the step's
    /// temporaries and outputs, the chunks being decoded and the chunks being read.
    pub peak_tracked_bytes: u64,
    /// Most device memory in use on the GPU at a step boundary (`cuMemGetInfo`), less what was in use
    /// before the read.
    pub peak_measured_bytes: u64,
}

/// One step's row groups and figures.
#[derive(Debug, Clone, Serialize)]
pub struct StepSummary {
    /// Row groups.
    pub row_groups: Vec<usize>,
    /// Fetched chunk bytes.
    pub chunk_bytes: u64,
    /// Figures.
    pub stats: StepStats,
    /// Time the decode waited for this step's reads.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub io_wait: Duration,
    /// When this step's reads ran, from the start of the read.
    pub read_window: Window,
    /// When this step was decoded (from taking its chunks to its columns being ready).
    pub decode_window: Window,
    /// Inside the read window: the backend's own wall time, when its first read started and when its
    /// last bytes were in place (from the backend's start), so fixed costs per step show apart from
    /// the transfer (allocation and report before, thread start before the first read, drain after).
    pub backend: BackendTimes,
}

/// A step's backend timings, in seconds from the backend's start.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct BackendTimes {
    /// The backend's wall time (`IoLog::wall`).
    pub wall: f64,
    /// Start of its earliest task.
    pub first_read: f64,
    /// End of its latest task.
    pub last_done: f64,
}

impl BackendTimes {
    fn of(log: &IoLog) -> Self {
        let first = log.tasks.iter().map(|t| t.start).min().unwrap_or_default();
        let last = log.tasks.iter().map(|t| t.end).max().unwrap_or_default();
        Self {
            wall: log.wall.as_secs_f64(),
            first_read: first.as_secs_f64(),
            last_done: last.as_secs_f64(),
        }
    }
}

/// A span of time from the start of a read, in seconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Window {
    /// Start, seconds from the start of the read.
    pub from: f64,
    /// End, seconds from the start of the read.
    pub to: f64,
}

impl Window {
    fn between(origin: Instant, from: Instant, to: Instant) -> Self {
        let secs = |t: Instant| t.saturating_duration_since(origin).as_secs_f64();
        Self {
            from: secs(from),
            to: secs(to),
        }
    }

    fn len(&self) -> f64 {
        (self.to - self.from).max(0.0)
    }

    /// Seconds this window shares with `other`.
    fn overlap(&self, other: &Window) -> f64 {
        (self.to.min(other.to) - self.from.max(other.from)).max(0.0)
    }
}

impl Reader {
    /// The GPU decoder of this reader's device (compiled once, then shared).
    pub fn gpu_decoder(&self) -> Result<Arc<GpuDecoder>> {
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

    /// Reads the selection and decodes it on the GPU into Arrow-layout device columns, steps of row
    /// groups pipelined so the next step's reads overlap this step's decode. The budget is the
    /// reader's memory limit, or half the GPU's free memory.
    pub fn read_device(&self) -> Result<DeviceRead> {
        // The decoder's one-time setup (kernels, nvCOMP) is reported apart (`DecoderSetup`).
        let decoder = self.gpu_decoder()?;
        let started = Instant::now();
        let ctx = decoder.context().clone();
        let (free_before, _) = ctx.memory()?;
        let budget = self.budget(free_before);
        let (schema, routes) = route_columns(&self.source, &self.plan.columns)?;
        // The GPU time a step costs at least: how many steps, and how many decoded at once.
        let floor = self.step_floor_ns(&decoder);
        let (plans, largest) = self.step_plans(budget, floor)?;
        let in_flight = steps_in_flight(budget, largest);
        crate::trace::at(started, format_args!("read: {} steps planned", plans.len()));
        let chunk_bytes: Vec<u64> = plans.iter().map(|p| p.dest_len).collect();
        let progress = ProgressCounter::new(
            self.progress.clone(),
            plans.len(),
            self.plan.num_rows(self.source.metadata()),
            self.plan.useful_bytes(),
        );
        let pipeline = Pipeline::new(in_flight, self.decoders(floor), progress);
        let outcomes = pipeline.run(self, &decoder, &schema, &routes, &plans, started)?;
        let mut batches = Vec::with_capacity(plans.len());
        let mut summaries = Vec::with_capacity(plans.len());
        let mut io_plans = Vec::with_capacity(plans.len());
        let mut io_logs = Vec::with_capacity(plans.len());
        let mut output_bytes = 0u64;
        let mut peak_tracked = 0u64;
        let mut peak_measured = 0u64;
        for (k, o) in outcomes.into_iter().enumerate() {
            // Outputs of the steps before, this step's temporaries and outputs, and the chunks of the
            // steps held at its end (each in-flight step counted at the largest step's chunks).
            let held = chunk_bytes.iter().copied().max().unwrap_or(0) * o.held_steps as u64;
            peak_tracked = peak_tracked.max(output_bytes + o.step_peak * pipeline.decoders as u64 + held);
            output_bytes += o.batch.memory_size() as u64;
            peak_measured = peak_measured.max(free_before.saturating_sub(o.free_after));
            summaries.push(StepSummary {
                row_groups: o.plan.row_groups.clone(),
                chunk_bytes: chunk_bytes[k],
                stats: o.stats,
                io_wait: o.io_wait,
                read_window: o.read_window,
                decode_window: o.decode_window,
                backend: BackendTimes::of(&o.log),
            });
            io_plans.push(o.plan);
            io_logs.push(o.log);
            batches.push(o.batch);
        }
        if batches.len() != plans.len() {
            return Err(Error::device("GPU decoder", "the read stopped before its last step"));
        }
        let (plan, log) = merge_steps(&io_plans, &io_logs);
        let mut io = ReadReport::build(&self.source.path().display().to_string(), &plan, &log);
        io.tuning = self.tuning;
        let uncompressed_bytes = self.uncompressed_bytes();
        let decode = DecodeReport {
            setup: decoder.setup().clone(),
            columns: sum_columns(&summaries),
            steps: summaries,
            wall: started.elapsed(),
            uncompressed_bytes,
            output_bytes,
            budget_bytes: budget,
            peak_tracked_bytes: peak_tracked,
            peak_measured_bytes: peak_measured,
        };
        Ok(DeviceRead {
            table: DeviceTable { schema, batches },
            io,
            decode,
        })
    }

    /// The read plans of [`Self::decode_steps`]'s steps, and the device memory the largest step needs.
    fn step_plans(&self, budget: u64, floor_ns: f64) -> Result<(Vec<Arc<ReadPlan>>, u64)> {
        let (steps, largest) = self.decode_steps(budget, floor_ns)?;
        Ok((self.plans_of(steps)?, largest))
    }

    #[doc(hidden)] // a benchmark hook (`bench`), not the reading API
    /// The reads of [`Self::read_device`] alone: its steps fetched as its reading thread fetches them
    /// ([`fetch_steps`]; one call per step when `per_call`), each step's chunks dropped as they come,
    /// nothing decoded; returns once every copy has finished. For benchmarks: the pipeline's time
    /// against its reads' own tells what decoding beside them costs. Returns the number of steps and
    /// the merged log (the steps' chunks are the selection's).
    pub fn read_steps_alone(&self, per_call: bool) -> Result<(usize, IoLog)> {
        let decoder = self.gpu_decoder()?;
        let (free, _) = decoder.context().memory()?;
        let (plans, _) = self.step_plans(self.budget(free), self.step_floor_ns(&decoder))?;
        // Dropping the chunks frees their buffer after the copies (stream-ordered).
        let logs = self.fetch_every_step(&plans, per_call, |c| c.log)?;
        // Every copy has finished: the stepped fetch returns once its workers drained their streams,
        // and a fetch per call waits for its copies.
        let (_, log) = merge_steps(&plans, &logs);
        Ok((plans.len(), log))
    }

    #[doc(hidden)] // a benchmark hook (`bench`), not the reading API
    /// The steps of [`Self::read_device`], fetched into device memory and held there, to be decoded
    /// (again and again) by [`Self::decode_held_steps`]: the decode of a read without its reads, for
    /// benchmarks. Every step's chunks are held at once, whatever the memory budget, and decoded all
    /// at once (as many decoding threads as steps, as far as the memory left allows:
    /// [`held_decoders`]) unless the reader was given a number of decoding threads: with no reads to
    /// overlap, steps decoded beside each other fill the GPU where one step's phases leave it idle.
    /// Measured on the H200 (`bench --only-decode --no-cold`, one call, alternating): snappy
    /// benchmark file, 8 steps, 4 at once 26.34 / 26.59 ms, all 8 25.14 / 24.38 ms; plain, 16 steps,
    /// 2 at once 22.50 ms, all 16 12.15 ms.
    pub fn fetch_held_steps(&self) -> Result<HeldSteps> {
        let decoder = self.gpu_decoder()?;
        let (free, _) = decoder.context().memory()?;
        let floor = self.step_floor_ns(&decoder);
        let (plans, largest) = self.step_plans(self.budget(free), floor)?;
        // Each step's copies are queued on its buffer's stream, which its decode is ordered after.
        let chunks = self.fetch_every_step(&plans, false, |c| c)?;
        let (free_after, _) = decoder.context().memory()?;
        Ok(HeldSteps {
            decoders: self
                .decode_threads
                .unwrap_or_else(|| held_decoders(chunks.len(), free_after, largest)),
            chunks,
        })
    }

    /// Fetches every step of `plans` ([`fetch_steps`], nothing waiting for memory) and keeps `keep` of
    /// each, in step order. A failed step's error comes first, before the "not read" of the steps it
    /// stopped (on the staged backend steps are delivered in no set order).
    fn fetch_every_step<T: Send>(
        &self,
        plans: &[Arc<ReadPlan>],
        per_call: bool,
        keep: impl Fn(ColumnChunks) -> T + Sync,
    ) -> Result<Vec<T>> {
        let kept: Mutex<Vec<Option<Result<T>>>> = Mutex::new((0..plans.len()).map(|_| None).collect());
        let deliver = |k: usize, r: Result<ColumnChunks>| {
            let r = r.map(&keep);
            kept.lock().unwrap_or_else(|p| p.into_inner())[k] = Some(r);
        };
        fetch_steps(
            &self.io,
            &self.source,
            plans,
            self.policy.threads,
            per_call,
            &mut |_| true,
            &deliver,
        );
        let mut kept = kept.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = kept.iter().position(|l| matches!(l, Some(Err(_))))
            && let Some(Err(e)) = kept.swap_remove(i)
        {
            return Err(e);
        }
        kept.into_iter()
            .map(|l| l.unwrap_or_else(|| Err(Error::device("reading steps", "a step was not read"))))
            .collect()
    }

    #[doc(hidden)] // a benchmark hook (`bench`), not the reading API
    /// Decodes held steps as [`Self::read_device`] decodes the steps it reads: each on its chunks'
    /// stream, [`HeldSteps::decoders`] of them at once. Returns the batches in order and the most
    /// device memory one step held beyond its chunks. Ends once every step's counts are read back.
    pub fn decode_held_steps(&self, held: &HeldSteps) -> Result<(Vec<DeviceBatch>, u64)> {
        let decoder = self.gpu_decoder()?;
        let (schema, routes) = route_columns(&self.source, &self.plan.columns)?;
        let next = std::sync::atomic::AtomicUsize::new(0);
        let origin = Instant::now();
        let decode_step = |k: usize, chunks: &ColumnChunks| {
            guard("decoding a held step", || {
                let AnyBuffer::Device(buffer) = &chunks.buffer else {
                    return Err(Error::device("GPU decoder", "the backend returned host memory"));
                };
                let began = origin.elapsed();
                let (batch, stats, peak) = decoder.decode(
                    &self.source,
                    &schema,
                    &routes,
                    &chunks.plan,
                    buffer,
                    self.policy.threads,
                    None,
                )?;
                // Where each held step's time goes, beside the others (`GPU_PARQUET_TRACE_FETCH`).
                let ms = |d: Duration| d.as_secs_f64() * 1e3;
                crate::trace::at(
                    origin,
                    format_args!(
                        "held step {k} (began at {:.2} ms: headers {:.2}, decompression {:.2}, kernels {:.2} ms) decoded",
                        ms(began),
                        ms(stats.headers_time),
                        ms(stats.decompress_time),
                        ms(stats.decode_time)
                    ),
                );
                Ok((batch, peak))
            })
        };
        // Each thread takes the next step until none is left, and hands back what it decoded.
        let mut decoded: Vec<(usize, Result<(DeviceBatch, u64)>)> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..held.decoders.max(1))
                .map(|_| {
                    s.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let k = next.fetch_add(1, Ordering::SeqCst);
                            let Some(chunks) = held.chunks.get(k) else { return mine };
                            mine.push((k, decode_step(k, chunks)));
                        }
                    })
                })
                .collect();
            workers.into_iter().flat_map(|w| w.join().unwrap_or_default()).collect()
        });
        decoded.sort_by_key(|d| d.0);
        if decoded.len() != held.chunks.len() {
            return Err(Error::device("GPU decoder", "a step was not decoded"));
        }
        let mut batches = Vec::with_capacity(decoded.len());
        let mut peak = 0;
        for (_, r) in decoded {
            let (batch, step_peak) = r?;
            peak = peak.max(step_peak);
            batches.push(batch);
        }
        Ok((batches, peak))
    }

    /// The device-memory budget of a GPU decode: the reader's memory limit, or half of `free`.
    fn budget(&self, free: u64) -> u64 {
        self.memory_limit.unwrap_or(free / 2)
    }

    /// Consecutive selected row groups cut into steps, and the estimated device memory of the largest
    /// step (chunks and temporaries). Steps are cut to a [`STEPS_IN_FLIGHT`]th of the budget (as many
    /// as [`steps_for_latency`] says when they stay over [`MIN_STEP_BYTES`]); a row group over half the
    /// budget alone is an error naming it. `floor_ns` is a step's least GPU time
    /// ([`Self::step_floor_ns`]).
    fn decode_steps(&self, budget: u64, floor_ns: f64) -> Result<(Vec<Vec<usize>>, u64)> {
        let meta = self.source.metadata();
        let mut need: Vec<(usize, u64)> = Vec::new();
        for &rg in &self.plan.row_groups {
            let rows = meta.row_group(rg).num_rows().max(0) as u64;
            let mut bytes = 0u64;
            for c in self.plan.chunks.iter().filter(|c| c.row_group == rg) {
                let unc = meta.row_group(rg).column(c.column).uncompressed_size().max(0) as u64;
                bytes += c.len + 2 * unc + rows * TEMP_BYTES_PER_VALUE;
            }
            need.push((rg, bytes));
        }
        let total: u64 = need.iter().map(|n| n.1).sum();
        let half = budget / 2;
        if let Some(&(rg, bytes)) = need.iter().find(|(_, bytes)| *bytes > half) {
            return Err(Error::InvalidRequest {
                location: Location {
                    row_group: Some(rg),
                    ..self.source.location()
                },
                message: format!(
                    "decoding this row group needs about {bytes} bytes of device memory, over half the budget of {budget} bytes (set a larger --memory-limit)"
                ),
            });
        }
        let steps = self
            .decode_steps
            .map_or_else(|| self.steps_for_latency(floor_ns), |s| s as u64);
        let share = (budget / STEPS_IN_FLIGHT as u64).max(1);
        // As many steps as asked (fewer when they would fall under MIN_STEP_BYTES), of even size;
        // more when even steps would not fit the budget's share.
        let steps = steps.min((total / MIN_STEP_BYTES).max(1));
        let bytes_of = |g: &Vec<usize>| -> u64 {
            g.iter()
                .map(|rg| need.iter().find(|n| n.0 == *rg).map_or(0, |n| n.1))
                .sum()
        };
        let even = split_balanced(&need, steps as usize);
        let cut = if even.iter().all(|g| bytes_of(g) <= share) {
            even
        } else {
            pack_consecutive(need.clone(), share)
        };
        let largest = cut.iter().map(bytes_of).max().unwrap_or(0).max(1);
        Ok((cut, largest))
    }
}

impl Reader {
    /// The GPU time a step of this selection costs at least ([`longest_page_ns`]).
    fn step_floor_ns(&self, decoder: &GpuDecoder) -> f64 {
        let decoders = PageDecoders {
            nvcomp: decoder.has_nvcomp(),
            prechecked: decoder.prechecks(),
            own_snappy: decoder.snappy_on_own_kernel(),
            wide_snappy: decoder.snappy().wide(),
        };
        longest_page_ns(self.source.metadata(), &self.plan.chunks, decoders)
    }

    /// Steps decoded at once: as asked, else [`DECODERS_WITH_FLOOR`] where steps have a floor and
    /// [`DECODERS`] where they do not.
    fn decoders(&self, floor_ns: f64) -> usize {
        self.decode_threads
            .unwrap_or(if floor_ns > 0.0 { DECODERS_WITH_FLOOR } else { DECODERS })
    }

    /// How many steps to cut a read into by default ([`steps_for_latency`] over this selection, whose
    /// steps cost at least `floor_ns` of GPU time).
    fn steps_for_latency(&self, floor_ns: f64) -> u64 {
        steps_for_latency(self.plan.dest_len, floor_ns, self.decoders(floor_ns))
    }
}

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
        let dictionary = (chunk.data_page_offset() - crate::metadata::chunk_start(chunk)).max(0) as u64;
        let data = match meta.page_index().and_then(|p| p.offset_index(c.row_group, c.column)) {
            Some(oi) => oi
                .page_locations()
                .iter()
                .map(|l| l.compressed_page_size.max(0) as u64)
                .max()
                .unwrap_or(0),
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

/// Steps a read holds in device memory at once, for a `budget` and steps of at most `largest` bytes:
/// larger steps mean fewer (two at least: one read while one is decoded; [`STEPS_IN_FLIGHT`] at most).
fn steps_in_flight(budget: u64, largest: u64) -> usize {
    ((budget / largest.max(1)) as usize).clamp(2, STEPS_IN_FLIGHT)
}

/// Held steps decoded at once by default ([`Reader::fetch_held_steps`]): every one of the `steps`,
/// or as many as `free` device memory (with every step's chunks held) has room for, one at least,
/// counting for each the estimate of the largest step, `largest` (its chunks and temporaries: more
/// than a held step adds).
pub(crate) fn held_decoders(steps: usize, free: u64, largest: u64) -> usize {
    steps.min((free / largest.max(1)) as usize).max(1)
}

/// One decoded step, from a decoding thread.
struct StepOutcome {
    plan: Arc<ReadPlan>,
    log: IoLog,
    batch: DeviceBatch,
    stats: StepStats,
    /// Most device memory the step's decode held beyond its chunks.
    step_peak: u64,
    io_wait: Duration,
    read_window: Window,
    decode_window: Window,
    /// Free device memory when the step was decoded.
    free_after: u64,
    /// Steps held in memory then (this one included).
    held_steps: usize,
}

/// Places for steps in device memory: a reading thread takes one before it reads a step, a decoding
/// thread gives it back once the step's chunks are dropped.
struct Places {
    free: Mutex<usize>,
    changed: Condvar,
    total: usize,
}

impl Places {
    fn new(total: usize) -> Self {
        Self {
            free: Mutex::new(total),
            changed: Condvar::new(),
            total,
        }
    }

    /// Waits for a place; false once `stop` is set.
    fn take(&self, stop: &AtomicBool) -> bool {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if stop.load(Ordering::SeqCst) {
                return false;
            }
            if *free > 0 {
                *free -= 1;
                return true;
            }
            free = self.changed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn give(&self) {
        *self.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.changed.notify_all();
    }

    /// Wakes the waiting threads (to see `stop`).
    fn wake(&self) {
        let _free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        self.changed.notify_all();
    }

    fn held(&self) -> usize {
        self.total - *self.free.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The threads of one read: a reading thread fetches steps in order, each after taking a place among
/// the `in_flight` steps memory holds; `decoders` decode steps as they arrive, in whatever order, and
/// give their places back. The first failure stops both sides; it is the error of the earliest failed
/// step.
struct Pipeline {
    decoders: usize,
    in_flight: usize,
    /// Told of each step decoded.
    progress: ProgressCounter,
}

impl Pipeline {
    fn new(in_flight: usize, decoders: usize, progress: ProgressCounter) -> Self {
        let in_flight = in_flight.max(2);
        let most = in_flight - FETCHES.min(in_flight - 1);
        Self {
            decoders: decoders.clamp(1, most),
            in_flight,
            progress,
        }
    }

    fn run(
        &self,
        reader: &Reader,
        decoder: &GpuDecoder,
        schema: &arrow::datatypes::SchemaRef,
        routes: &[ColumnRoute],
        plans: &[Arc<ReadPlan>],
        started: Instant,
    ) -> Result<Vec<StepOutcome>> {
        let progress = &self.progress;
        let n = plans.len();
        let stop = AtomicBool::new(false);
        let places = Places::new(self.in_flight);
        let (tx, rx) = channel::<(usize, Result<ColumnChunks>)>();
        let rx = Mutex::new(rx);
        let results: Mutex<Vec<Option<Result<StepOutcome>>>> = Mutex::new((0..n).map(|_| None).collect());
        let fail = |k: usize, e: Error| {
            stop.store(true, Ordering::SeqCst);
            places.wake();
            results.lock().unwrap_or_else(|p| p.into_inner())[k] = Some(Err(e));
        };
        // Page headers parsed on the host ahead of the decoders, step by step, at most as many steps
        // ahead of the last one handed to them as may be in flight; a decoder takes its step's (which
        // frees them), and a step whose headers are not ready when its decode begins parses them on
        // the GPU (the thread then skips it, or drops what it parsed too late).
        let headers: Vec<HeaderSlot> = (0..n).map(|_| HeaderSlot::default()).collect();
        let handed = AtomicUsize::new(0);
        std::thread::scope(|s| {
            // One reading thread (see FETCHES), started first: the read's first `pread` waits for it.
            // Its fetches hand each step to the decoders, and it owns the channel's sender, so the
            // decoders end once it has delivered every step.
            let (stop_r, places_r, fail_r) = (&stop, &places, &fail);
            s.spawn(move || {
                let (stop, places, fail) = (stop_r, places_r, fail_r);
                let trace = |what: std::fmt::Arguments<'_>| crate::trace::at(started, what);
                trace(format_args!("read: reading thread began"));
                let mut admit = |k: usize| {
                    let taken = places.take(stop);
                    if taken {
                        trace(format_args!("step {k}: place taken"));
                    }
                    taken
                };
                let deliver = |k: usize, r: Result<ColumnChunks>| {
                    trace(format_args!("step {k}: handed to the decoders"));
                    match r {
                        Ok(chunks) => {
                            // The decoders are gone only once the read has stopped.
                            let _ = tx.send((k, Ok(chunks)));
                        }
                        Err(e) => {
                            places.give();
                            fail(k, e);
                        }
                    }
                };
                let read = guard("reading the steps", || {
                    fetch_steps(
                        &reader.io,
                        &reader.source,
                        plans,
                        reader.policy.threads,
                        false,
                        &mut admit,
                        &deliver,
                    );
                    Ok(())
                });
                if let Err(e) = read {
                    fail(0, e);
                }
            });
            // The host parses the headers of steps in the page cache ahead of the decoders.
            {
                let (stop, headers, handed) = (&stop, &headers, &handed);
                s.spawn(move || {
                    let Ok(file) = std::fs::File::open(reader.source.path()) else {
                        return;
                    };
                    for (k, plan) in plans.iter().enumerate() {
                        while k > handed.load(Ordering::SeqCst) + self.in_flight {
                            if stop.load(Ordering::SeqCst) {
                                return;
                            }
                            std::thread::sleep(Duration::from_micros(200));
                        }
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        if headers[k].is_taken() {
                            crate::trace::at(started, format_args!("step {k}: headers left to the GPU (late)"));
                            continue;
                        }
                        // A failed read (or a panic) leaves the step's headers to the GPU.
                        let parsed = crate::panic_guard::contain_panics(&reader.source.location(), || {
                            Ok(worth_parsing(&file, plan)
                                .then(|| parse_step_headers(&file, plan).ok())
                                .flatten())
                        })
                        .ok()
                        .flatten();
                        let what = match parsed.map(|h| headers[k].offer(h)) {
                            Some(true) => "parsed on the host",
                            Some(false) => "parsed on the host too late, dropped",
                            None => "left to the GPU",
                        };
                        crate::trace::at(started, format_args!("step {k}: headers {what}"));
                    }
                });
            }
            for _ in 0..self.decoders {
                let (rx, stop, places, fail, results) = (&rx, &stop, &places, &fail, &results);
                let (headers, handed) = (&headers, &handed);
                s.spawn(move || {
                    let mut waited = Instant::now();
                    loop {
                        let item = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok((k, fetched)) = item else { return };
                        handed.fetch_add(1, Ordering::SeqCst);
                        let io_wait = waited.elapsed();
                        if stop.load(Ordering::SeqCst) {
                            drop(fetched);
                            places.give();
                            continue;
                        }
                        let r = guard("decoding a step", || {
                            let chunks = fetched?;
                            let host_headers = headers.get(k).and_then(HeaderSlot::take);
                            decode_one(
                                reader,
                                decoder,
                                schema,
                                routes,
                                chunks,
                                host_headers.as_ref(),
                                started,
                                io_wait,
                            )
                        });
                        // The step's chunks are dropped (decode_one owns them): its place is free.
                        let held = places.held();
                        places.give();
                        match r {
                            Ok(mut o) => {
                                o.held_steps = held;
                                progress.step_done(o.batch.num_rows as u64, o.plan.useful_bytes());
                                results.lock().unwrap_or_else(|p| p.into_inner())[k] = Some(Ok(o));
                            }
                            Err(e) => fail(k, e),
                        }
                        waited = Instant::now();
                    }
                });
            }
        });
        let mut out = Vec::with_capacity(n);
        let mut missing = false;
        for r in results.into_inner().unwrap_or_else(|p| p.into_inner()) {
            match r {
                Some(Ok(o)) => out.push(o),
                Some(Err(e)) => return Err(e),
                None => missing = true,
            }
        }
        if missing {
            return Err(Error::device("GPU decoder", "the read stopped before its last step"));
        }
        Ok(out)
    }
}

/// Decodes one fetched step (on its chunks' stream) and drops its chunks.
#[allow(clippy::too_many_arguments)]
fn decode_one(
    reader: &Reader,
    decoder: &GpuDecoder,
    schema: &arrow::datatypes::SchemaRef,
    routes: &[ColumnRoute],
    chunks: ColumnChunks,
    host_headers: Option<&HostHeaders>,
    started: Instant,
    io_wait: Duration,
) -> Result<StepOutcome> {
    let decode_from = Instant::now();
    let AnyBuffer::Device(buffer) = &chunks.buffer else {
        return Err(Error::device("GPU decoder", "the backend returned host memory"));
    };
    let (batch, stats, step_peak) = decoder.decode(
        &reader.source,
        schema,
        routes,
        &chunks.plan,
        buffer,
        reader.policy.threads,
        host_headers,
    )?;
    let (free_after, _) = decoder.context().memory()?;
    let decode_window = Window::between(started, decode_from, Instant::now());
    let read_window = Window::between(started, chunks.fetched.start, chunks.fetched.end);
    let (plan, log) = (chunks.plan.clone(), chunks.log.clone());
    drop(chunks);
    Ok(StepOutcome {
        plan,
        log,
        batch,
        stats,
        step_peak,
        io_wait,
        read_window,
        decode_window,
        free_after,
        held_steps: 0,
    })
}

/// Per-column figures summed over steps.
fn sum_columns(steps: &[StepSummary]) -> Vec<ColumnStepStats> {
    let mut out: Vec<ColumnStepStats> = Vec::new();
    for s in steps {
        for (i, c) in s.stats.columns.iter().enumerate() {
            if out.len() <= i {
                out.push(ColumnStepStats {
                    name: c.name.clone(),
                    ..Default::default()
                });
            }
            let o = &mut out[i];
            o.pages += c.pages;
            o.compressed_bytes += c.compressed_bytes;
            o.uncompressed_bytes += c.uncompressed_bytes;
            for (mine, theirs) in [
                (&mut o.codec, &c.codec),
                (&mut o.decompressed_on, &c.decompressed_on),
                (&mut o.decoded_on, &c.decoded_on),
            ] {
                if !mine.split(", ").any(|x| x == theirs) {
                    if !mine.is_empty() {
                        mine.push_str(", ");
                    }
                    mine.push_str(theirs);
                }
            }
        }
    }
    out
}

/// The steps' plans and logs as one plan and one log (tasks renumbered), for one I/O report.
fn merge_steps(plans: &[Arc<ReadPlan>], logs: &[IoLog]) -> (ReadPlan, IoLog) {
    let mut plan = ReadPlan {
        chunks: Vec::new(),
        spans: Vec::new(),
        tasks: Vec::new(),
        dest_len: 0,
        columns: plans.first().map(|p| p.columns.clone()).unwrap_or_default(),
        row_groups: Vec::new(),
        options: plans.first().map(|p| p.options).unwrap_or_default(),
    };
    let mut log = IoLog::default();
    for (p, l) in plans.iter().zip(logs) {
        let chunk_base = plan.chunks.len();
        let task_base = plan.tasks.len();
        plan.chunks.extend(p.chunks.iter().cloned());
        for t in &p.tasks {
            let mut t = t.clone();
            t.chunks = t.chunks.start + chunk_base..t.chunks.end + chunk_base;
            plan.tasks.push(t);
        }
        plan.dest_len += p.dest_len;
        plan.row_groups.extend(&p.row_groups);
        log.backend.clone_from(&l.backend);
        for r in &l.tasks {
            let mut r = r.clone();
            r.task += task_base;
            log.tasks.push(r);
        }
        log.wall += l.wall;
        for n in &l.notes {
            if !log.notes.contains(n) {
                log.notes.push(n.clone());
            }
        }
        log.cufile_stats = match (log.cufile_stats.take(), &l.cufile_stats) {
            (None, s) => *s,
            (s, None) => s,
            (Some(a), Some(b)) => Some(a.plus(*b)),
        };
    }
    (plan, log)
}

impl DecodeReport {
    /// Decoded uncompressed bytes per second over the whole read (cuDF's measure).
    pub fn gbps(&self) -> f64 {
        self.uncompressed_bytes as f64 / self.wall.as_secs_f64().max(1e-9) / 1e9
    }

    /// The report as an aligned text table: one row per column, then the totals and the setup.
    pub fn to_table(&self) -> String {
        let mut rows = vec![
            [
                "column",
                "pages",
                "codec",
                "stored bytes",
                "uncompressed",
                "decompressed on",
                "decoded on",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for c in &self.columns {
            rows.push(vec![
                c.name.clone(),
                c.pages.to_string(),
                c.codec.clone(),
                c.compressed_bytes.to_string(),
                c.uncompressed_bytes.to_string(),
                c.decompressed_on.clone(),
                c.decoded_on.clone(),
            ]);
        }
        let sum = |f: fn(&StepStats) -> Duration| self.steps.iter().map(|s| f(&s.stats)).sum::<Duration>();
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        rows.push(vec![
            format!("TOTAL ({} steps)", self.steps.len()),
            self.columns.iter().map(|c| c.pages).sum::<usize>().to_string(),
            String::new(),
            self.columns.iter().map(|c| c.compressed_bytes).sum::<u64>().to_string(),
            self.uncompressed_bytes.to_string(),
            ms(sum(|s| s.decompress_time)),
            ms(sum(|s| s.decode_time)),
        ]);
        let mut out = crate::report::aligned_table(&rows);
        out.push_str(&format!(
            "decoded {} uncompressed bytes in {} ({:.2} GB/s, file to device columns); I/O waits {}\n",
            self.uncompressed_bytes,
            ms(self.wall),
            self.gbps(),
            ms(self.steps.iter().map(|s| s.io_wait).sum()),
        ));
        let reading: f64 = self.steps.iter().map(|s| s.read_window.len()).sum();
        let decoding: f64 = self.steps.iter().map(|s| s.decode_window.len()).sum();
        let overlapped: f64 = self
            .steps
            .iter()
            .flat_map(|d| self.steps.iter().map(move |r| d.decode_window.overlap(&r.read_window)))
            .sum();
        out.push_str(&format!(
            "steps: reads {:.1} ms, decodes {:.1} ms, of which {:.1} ms while reads ran\n",
            reading * 1e3,
            decoding * 1e3,
            overlapped * 1e3
        ));
        let on_host = self.steps.iter().filter(|s| s.stats.headers_on_host).count();
        out.push_str(&format!(
            "page headers: parsed on the host in {on_host} of {} steps (their bytes in the page cache, read \
             ahead of the decode), on the GPU in the others\n",
            self.steps.len()
        ));
        out.push_str(&format!(
            "device memory: output {} bytes, peak {} bytes tracked / {} measured, budget {} bytes\n",
            self.output_bytes, self.peak_tracked_bytes, self.peak_measured_bytes, self.budget_bytes
        ));
        out.push_str(&format!(
            "decoder setup {} (once per reader, not in the wall time above): kernels {} (compile {}, load {}); nvCOMP: {}\n",
            ms(self.setup.total_time),
            self.setup.kernels_from,
            ms(self.setup.compile_time),
            ms(self.setup.load_time),
            self.setup.nvcomp
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::snappy_route::{NVCOMP_NS_PER_BYTE, PRECHECK_NS_PER_BYTE, UNSNAP_NS_PER_BYTE};
    use crate::plan::{Projection, RowGroupSelection};

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

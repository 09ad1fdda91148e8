//! [`Reader::read_device`]: file → decoded device columns, pipelined, and its reports. The
//! selection is cut into steps (consecutive row groups within the memory budget, by the latency model
//! of [`crate::scan`]'s GPU steps); the one scan driver's reading thread fetches the next steps while
//! its workers decode the ones read, so I/O overlaps decode and steps' GPU work overlaps.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::decode::gpu::DecoderSetup;
use crate::decode::pipeline::{ColumnStepStats, StepStats};
use crate::decode::table::{DeviceArray, DeviceTable};
use crate::error::{Error, Result};
use crate::reader::Reader;
use crate::report::ReadReport;
use crate::scan::Release;
use crate::scan::gpu::GpuSteps;
use crate::scan::gpu_filter::RowFilterReport;

/// A read decoded on the GPU: the device table and the reports.
#[derive(Debug)]
pub struct DeviceRead {
    /// The decoded columns: with a filter run on the GPU, the rows it accepts (all rows with
    /// [`FilterMode::Mask`](crate::filter::FilterMode::Mask), then see `masks`), without the columns
    /// read only for the filter; with a filter the GPU could not run (`decode.filter` says why),
    /// every row of the surviving row groups and the filter's columns ([`DeviceRead::to_host`]
    /// filters them).
    pub table: DeviceTable,
    /// With [`FilterMode::Mask`](crate::filter::FilterMode::Mask): per batch, a `Boolean` array of
    /// its rows, true where the filter accepts the row; empty otherwise.
    pub masks: Vec<DeviceArray>,
    /// The filter left to the host.
    pub(crate) host_filter: crate::filter::SharedFilter,
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
    /// before the read: what our buffers held and what the stream-ordered pool kept reserved.
    pub peak_measured_bytes: u64,
    /// Most device memory our buffers held at once during the read, less what they held before it
    /// (rmm's statistics count the same; cuDF's baseline reports that figure as its peak). Other
    /// work on the same GPU meanwhile counts too.
    pub peak_allocated_bytes: u64,
    /// What the row filter did, with a filter ([`crate::ReaderBuilder::with_filter`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<RowFilterReport>,
}

pub use crate::scan::step::{BackendTimes, DecodedStep, StepSummary, Window};

impl Reader {
    /// Reads the selection and decodes it on the GPU into Arrow-layout device columns, steps of row
    /// groups pipelined so the next step's reads overlap this step's decode. The budget is the
    /// reader's memory limit, or half the GPU's free memory ([`crate::scan::MemoryBudget`]).
    pub fn read_device(&self) -> Result<DeviceRead> {
        // The decoder's one-time setup (kernels, nvCOMP) is reported apart (`DecoderSetup`).
        let decoder = self.gpu_decoder()?;
        let allocations = decoder.context().allocations().watch();
        let started = Instant::now();
        let steps = GpuSteps::plan(self, decoder.clone())?;
        crate::trace::at(started, format_args!("read: {} steps planned", steps.plans.len()));
        let n = steps.plans.len();
        // Every step's columns are kept: a step's place is free once its chunks are dropped.
        let outcomes = steps.scan(self, started, Release::Finished).collect_all()?;
        let chunk_bytes = steps.plans.iter().map(|p| p.dest_len).max().unwrap_or(0);
        let mut batches = Vec::with_capacity(n);
        let mut masks = Vec::new();
        let mut summaries = Vec::with_capacity(n);
        let mut io_plans = Vec::with_capacity(n);
        let mut io_logs = Vec::with_capacity(n);
        let mut output_bytes = 0u64;
        let mut peak_tracked = 0u64;
        let mut peak_measured = 0u64;
        for o in outcomes {
            // Outputs of the steps before, this step's temporaries and outputs, and the chunks of the
            // steps held at its end (each in-flight step counted at the largest step's chunks).
            let held = chunk_bytes * o.held_steps as u64;
            peak_tracked = peak_tracked.max(output_bytes + o.step_peak * steps.decoders as u64 + held);
            output_bytes += o.batch.memory_size() as u64;
            peak_measured = peak_measured.max(steps.free_before.saturating_sub(o.free_after));
            summaries.push(o.summary);
            io_plans.push(o.plan);
            io_logs.push(o.log);
            batches.push(o.batch);
            masks.extend(o.mask);
        }
        if batches.len() != n {
            return Err(Error::device("GPU decoder", "the read stopped before its last step"));
        }
        let (plan, log) = crate::scan::step::merge_reads(&io_plans, &io_logs);
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
            budget_bytes: steps.budget.limit().unwrap_or(0),
            peak_tracked_bytes: peak_tracked,
            peak_measured_bytes: peak_measured,
            peak_allocated_bytes: allocations.peak_bytes(),
            filter: None,
        };
        let filter = steps
            .filter
            .as_ref()
            .map(|f| RowFilterReport::of(f, decode.steps.iter().map(|s| s.filter)));
        let decode = DecodeReport { filter, ..decode };
        Ok(DeviceRead {
            table: DeviceTable {
                schema: steps.output_schema(),
                batches,
            },
            masks,
            host_filter: steps.filter.as_ref().and_then(|f| f.on_host()),
            io,
            decode,
        })
    }
}

impl DeviceRead {
    /// A host copy of the rows the filter accepts, as one record batch: the table, less the rows the
    /// masks leave out, with a filter left to the host applied (exactly, as
    /// [`crate::filter::Predicate::filter`]); the whole table without a filter.
    pub fn to_host(&self) -> Result<arrow::record_batch::RecordBatch> {
        use crate::scan::step::accepted_rows;
        let parts = (self.table.batches.iter().enumerate())
            .map(|(k, b)| accepted_rows(b.to_host()?, self.masks.get(k), &self.host_filter))
            .collect::<Result<Vec<_>>>()?;
        let schema = match parts.first() {
            Some(p) => p.schema(),
            None => {
                let empty = arrow::record_batch::RecordBatch::new_empty(self.table.schema.clone());
                accepted_rows(empty, None, &self.host_filter)?.schema()
            }
        };
        arrow::compute::concat_batches(&schema, &parts).map_err(|e| Error::device("joining decoded batches", e))
    }

    /// Whether the table's rows still need the filter applied on the host (the GPU could not run
    /// it; `decode.filter.reason` says why).
    pub fn filtered_on_host(&self) -> bool {
        self.host_filter.is_some()
    }
}

/// Per-column figures summed over steps, columns by name in the order first seen.
fn sum_columns(steps: &[StepSummary]) -> Vec<ColumnStepStats> {
    let mut out: Vec<ColumnStepStats> = Vec::new();
    for s in steps {
        // By name: a step read in two passes lists the filter's columns first.
        for c in &s.stats.columns {
            let i = match out.iter().position(|o| o.name == c.name) {
                Some(i) => i,
                None => {
                    out.push(ColumnStepStats {
                        name: c.name.clone(),
                        ..Default::default()
                    });
                    out.len() - 1
                }
            };
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

impl DecodeReport {
    /// Decoded uncompressed bytes per second over the whole read (cuDF's measure).
    pub(crate) fn gbps(&self) -> f64 {
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
        if let Some(f) = &self.filter {
            out.push_str(&f.line());
        }
        out.push_str(&format!(
            "device memory: output {} bytes, peak {} bytes allocated (as rmm counts) / {} measured (with \
             what the pool keeps) / {} tracked, budget {} bytes\n",
            self.output_bytes,
            self.peak_allocated_bytes,
            self.peak_measured_bytes,
            self.peak_tracked_bytes,
            self.budget_bytes
        ));
        let scratch = self
            .steps
            .iter()
            .map(|s| s.stats.decompress_scratch_bytes)
            .max()
            .unwrap_or(0);
        if scratch > 0 {
            out.push_str(&format!(
                "nvCOMP scratch: up to {scratch} bytes a step (aligned input copies and temporary memory, \
                 held during its decompression)\n"
            ));
        }
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

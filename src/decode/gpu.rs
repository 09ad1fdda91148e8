//! The GPU decoder: kernels compiled for one device (once per process, cached on disk), nvCOMP where it
//! loads, and [`GpuDecoder::decode`] running the [`pipeline`](super::pipeline) on fetched chunks. Also
//! [`decode_reference`]: the same pipeline on the host through the kernels' references, which CI
//! checks against arrow-rs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use serde::Serialize;

use crate::config::{SnappyDecoders, ZstdDecoders};
use crate::decode::exec::HostExecutor;
use crate::decode::exec_device::{DeviceExecutor, StagingPool, StepChunks};
use crate::decode::host_headers::HostHeaders;
use crate::decode::kernels;
use crate::decode::pipeline::{ColumnRoute, PageHints, StepStats, decode_step, route_columns};
use crate::decode::table::{DeviceArray, DeviceBatch};
use crate::error::{Error, Result};
use crate::gpu::nvcomp::Nvcomp;
use crate::gpu::nvrtc::{KernelModule, ModuleOrigin};
use crate::gpu::{DeviceBuffer, GpuContext};
use crate::metadata::ParquetSource;
use crate::plan::ReadPlan;

// The decoder's options are settings: they live with the others (and config imports nothing of decode).
pub use crate::config::DecoderOptions;

/// How the decoder's pieces were obtained, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct DecoderSetup {
    /// Time NVRTC spent compiling the kernels (zero when cached).
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub compile_time: Duration,
    /// Time loading the kernels into the context.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub load_time: Duration,
    /// "compiled", "disk cache" or "memory".
    pub kernels_from: String,
    /// nvCOMP's version and file, or why it is not used.
    pub nvcomp: String,
    /// Whether compressed bodies are checked on the GPU before nvCOMP (off: `trust_compressed`).
    pub precheck: bool,
    /// Time to set the decoder up, all in: the kernels (compiled, or found and loaded) and nvCOMP
    /// (found and loaded). Paid once per reader, and not part of any read's wall time.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub total_time: Duration,
}

/// Decodes fetched column chunks on one GPU.
#[derive(Debug)]
pub struct GpuDecoder {
    ctx: Arc<GpuContext>,
    kernels: Arc<KernelModule>,
    nvcomp: std::result::Result<Arc<Nvcomp>, String>,
    setup: DecoderSetup,
    trust_compressed: bool,
    /// Which GPU decoders take Snappy bodies.
    snappy: SnappyDecoders,
    zstd: ZstdDecoders,
    /// Mapped host memory the steps' executors move their small transfers through, reused.
    staging: StagingPool,
    /// Pages per chunk byte seen so far, per leaf column (one header pass where they hold).
    page_hints: PageHints,
    /// Steps being decoded now, by any thread: the Snappy route weighs a long walk against their work.
    decoding: AtomicUsize,
}

/// Counts a step among those [`GpuDecoder::decoding`] while it lives.
struct Decoding<'a>(&'a AtomicUsize);

impl<'a> Decoding<'a> {
    fn start(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Decoding(count)
    }
}

impl Drop for Decoding<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl GpuDecoder {
    /// Compiles (or finds) the kernels for `ctx`'s device and loads nvCOMP. Fails only when the
    /// kernels cannot be had (no NVRTC, a compile error); a missing nvCOMP means host decompression.
    pub fn new(ctx: &Arc<GpuContext>, options: &DecoderOptions) -> Result<Self> {
        let started = std::time::Instant::now();
        let kernels = KernelModule::load(
            ctx,
            &kernels::source(),
            kernels::PROGRAM_NAME,
            options.kernel_cache.as_deref(),
        )?;
        let nvcomp = Nvcomp::load(&options.nvcomp).map(Arc::new).map_err(|e| e.to_string());
        let setup = DecoderSetup {
            compile_time: kernels.compile_time,
            load_time: kernels.load_time,
            kernels_from: match kernels.origin {
                ModuleOrigin::Compiled => "compiled".into(),
                ModuleOrigin::DiskCache => "disk cache".into(),
                ModuleOrigin::Memory => "memory".into(),
            },
            precheck: !options.trust_compressed,
            total_time: started.elapsed(),
            nvcomp: match &nvcomp {
                Ok(n) => format!("{} ({})", n.library().version(), n.library().file().display()),
                Err(why) => format!("not used: {why}"),
            },
        };
        Ok(GpuDecoder {
            ctx: ctx.clone(),
            kernels,
            nvcomp,
            setup,
            trust_compressed: options.trust_compressed,
            snappy: options.snappy,
            zstd: options.zstd,
            staging: StagingPool::default(),
            page_hints: PageHints::default(),
            decoding: AtomicUsize::new(0),
        })
    }

    /// Whether nvCOMP decompresses on the GPU (else compressed pages are inflated on the host).
    pub(crate) fn has_nvcomp(&self) -> bool {
        self.nvcomp.is_ok()
    }

    /// Whether Snappy pages go to the decoder's own kernel (`gp_unsnap`) rather than nvCOMP.
    pub(crate) fn snappy_on_own_kernel(&self) -> bool {
        self.snappy.own_kernel(self.has_nvcomp())
    }

    /// Which GPU decoders take Snappy bodies ([`DecoderOptions::snappy`]).
    pub(crate) fn snappy(&self) -> SnappyDecoders {
        self.snappy
    }

    /// Whether compressed bodies are checked on the GPU before nvCOMP sees them.
    pub(crate) fn prechecks(&self) -> bool {
        self.setup.precheck
    }

    /// How the kernels and nvCOMP were obtained.
    pub(crate) fn setup(&self) -> &DecoderSetup {
        &self.setup
    }

    /// The context the kernels are loaded in.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    /// Decodes the chunks `plan` laid out in `chunks` (row groups `plan.row_groups`, in order), on
    /// `chunks`' stream. Returns the batch, the step's figures and the most device memory the step
    /// held beyond `chunks` (outputs included).
    #[allow(clippy::too_many_arguments)]
    pub fn decode(
        &self,
        source: &ParquetSource,
        schema: &SchemaRef,
        routes: &[ColumnRoute],
        plan: &ReadPlan,
        chunks: &DeviceBuffer<u8>,
        host_threads: usize,
        host_headers: Option<&HostHeaders>,
    ) -> Result<(DeviceBatch, StepStats, u64)> {
        let chunks = StepChunks::Borrowed(chunks);
        self.decode_chunks(source, schema, routes, plan, chunks, host_threads, host_headers)
    }

    /// [`Self::decode`] of chunks lent (`StepChunks::Borrowed`) or handed over (`StepChunks::Owned`:
    /// freed on their stream as soon as the step reads them no more, once its pages are
    /// decompressed, rather than after the whole step).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn decode_chunks(
        &self,
        source: &ParquetSource,
        schema: &SchemaRef,
        routes: &[ColumnRoute],
        plan: &ReadPlan,
        chunks: StepChunks<'_>,
        host_threads: usize,
        host_headers: Option<&HostHeaders>,
    ) -> Result<(DeviceBatch, StepStats, u64)> {
        let Some(buffer) = chunks.buffer() else {
            return Err(Error::device("GPU decoder", "a step without its chunks"));
        };
        if !Arc::ptr_eq(buffer.context(), &self.ctx) {
            return Err(Error::device(
                "GPU decoder",
                "the chunks are on another GPU than the decoder's kernels",
            ));
        }
        let (stream, chunk_base) = (buffer.stream().clone(), buffer.device_address());
        let _decoding = Decoding::start(&self.decoding);
        let values = plan.num_values(source.metadata());
        let mut exec = DeviceExecutor::new(stream, self.kernels.clone(), self.nvcomp.clone(), chunks)
            .with_precheck(!self.trust_compressed)
            .with_snappy(self.snappy)
            .with_zstd(self.zstd)
            .with_side_by_side(&self.decoding, values)
            .with_staging(&self.staging);
        let (batch, stats) = decode_step(
            &mut exec,
            source,
            schema,
            routes,
            plan,
            &plan.row_groups,
            chunk_base,
            host_threads,
            &self.page_hints,
            host_headers,
        )?;
        Ok((batch, stats, exec.peak_bytes()))
    }
}

impl GpuDecoder {
    /// `batch` filtered by `predicate` with this decoder's kernels, on the stream of the batch's
    /// buffers: compacted, or unchanged with a mask (`mode`). See [`crate::decode::row_filter`].
    pub fn filter(
        &self,
        batch: DeviceBatch,
        predicate: &crate::decode::row_filter::RowPredicate,
        mode: crate::decode::row_filter::FilterMode,
    ) -> Result<crate::decode::row_filter::Filtered<DeviceBuffer<u8>>> {
        let mut exec = self.row_filter_executor(&batch)?;
        crate::decode::row_filter::filter_batch(&mut exec, batch, predicate, mode)
    }

    /// A batch of no row of `schema` on this decoder's GPU.
    pub(crate) fn empty_batch(&self, schema: &SchemaRef, location: crate::error::Location) -> Result<DeviceBatch> {
        use crate::decode::exec::Executor;
        let none = DeviceBatch {
            schema: schema.clone(),
            num_rows: 0,
            columns: Vec::new(),
            row_groups: Vec::new(),
            location: location.clone(),
        };
        let mut exec = self.row_filter_executor(&none)?;
        crate::decode::table::empty_batch(schema, location, &mut |b: &[u8]| {
            // An empty buffer zeroed (its one byte is copied back by `to_host`), the others written.
            let a = if b.is_empty() { exec.alloc(0)? } else { exec.upload(b)? };
            exec.take(a)
        })
    }

    /// An executor for the row filter's kernels over `batch`: on the stream of its buffers (a new one
    /// for a batch without any), which must be on this decoder's GPU.
    pub(crate) fn row_filter_executor(&self, batch: &DeviceBatch) -> Result<DeviceExecutor<'static>> {
        let stream = match crate::decode::row_filter::first_buffer(batch) {
            Some(b) if !Arc::ptr_eq(b.context(), &self.ctx) => {
                return Err(Error::device(
                    "GPU row filter",
                    "the batch is on another GPU than the decoder's kernels",
                ));
            }
            Some(b) => b.stream().clone(),
            None => crate::gpu::Stream::new(&self.ctx)?,
        };
        Ok(
            DeviceExecutor::new(stream, self.kernels.clone(), self.nvcomp.clone(), StepChunks::None)
                .with_staging(&self.staging),
        )
    }
}

/// Runs the GPU decode pipeline on the host, with the kernels' references in place of the kernels:
/// `fetched` is laid out as `plan` says. Its output must equal arrow-rs's (CI checks it) and the GPU's.
pub fn decode_reference(
    source: &ParquetSource,
    plan: &ReadPlan,
    fetched: &Bytes,
) -> Result<(DeviceBatch<Vec<u8>>, StepStats)> {
    // Fresh hints: headers are parsed in one pass only where a page per 32 KiB is room enough.
    decode_reference_with(source, plan, fetched, &PageHints::default(), None).map(|(b, s, _)| (b, s))
}

/// Test support: [`decode_reference`] as if 2 GiB (the most characters a string column of 32-bit
/// offsets holds in one step) were `limit` bytes, so that small files take the paths of steps with more
/// strings than that ([`HostExecutor::with_string_offset_limit`]).
pub fn decode_reference_with_string_offset_limit(
    source: &ParquetSource,
    plan: &ReadPlan,
    fetched: &Bytes,
    limit: u64,
) -> Result<(DeviceBatch<Vec<u8>>, StepStats)> {
    let mut exec = HostExecutor::new().with_string_offset_limit(limit);
    reference_step(&mut exec, source, plan, fetched, &PageHints::default(), None)
}

/// What a reference step asked of its executor, for tests of what the device would be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReferenceCounts {
    /// Page-header passes (0 with host headers, 1 when the hints held, else 3: the pass that ran out
    /// of room, count, fill).
    pub header_passes: usize,
    /// Allocations, the chunks' upload included (each a driver call on the device).
    pub allocations: usize,
}

/// [`decode_reference`] with `hints` carried over from earlier steps, and the page headers parsed on
/// the host where `host_headers` holds them (as a GPU read gives them, [`crate::decode::host_headers`]);
/// also returns what the step asked of its executor.
pub fn decode_reference_with(
    source: &ParquetSource,
    plan: &ReadPlan,
    fetched: &Bytes,
    hints: &PageHints,
    host_headers: Option<&HostHeaders>,
) -> Result<(DeviceBatch<Vec<u8>>, StepStats, ReferenceCounts)> {
    let mut exec = HostExecutor::new();
    let (batch, stats) = reference_step(&mut exec, source, plan, fetched, hints, host_headers)?;
    let counts = ReferenceCounts {
        header_passes: exec.header_passes(),
        allocations: exec.allocations(),
    };
    Ok((batch, stats, counts))
}

/// One step of `plan`'s row groups on `exec`, its chunks `fetched` uploaded first.
fn reference_step(
    exec: &mut HostExecutor,
    source: &ParquetSource,
    plan: &ReadPlan,
    fetched: &Bytes,
    hints: &PageHints,
    host_headers: Option<&HostHeaders>,
) -> Result<(DeviceBatch<Vec<u8>>, StepStats)> {
    let (schema, routes) = route_columns(source, &plan.columns)?;
    let base = crate::decode::exec::Executor::upload(exec, fetched.as_ref())?;
    decode_step(
        exec,
        source,
        &schema,
        &routes,
        plan,
        &plan.row_groups,
        base,
        1,
        hints,
        host_headers,
    )
}

impl DeviceBatch<crate::gpu::DeviceBuffer<u8>> {
    /// The batch filtered by `predicate` on the GPU of `decoder` (its kernels, on the stream of the
    /// batch's buffers): compacted to the selected rows, or unchanged with a mask (`mode`).
    pub fn filter(
        self,
        predicate: &crate::decode::row_filter::RowPredicate,
        decoder: &GpuDecoder,
        mode: crate::decode::row_filter::FilterMode,
    ) -> Result<crate::decode::row_filter::Filtered<crate::gpu::DeviceBuffer<u8>>> {
        decoder.filter(self, predicate, mode)
    }

    /// Orders the stream of the batch's first buffer (the one an export records its event on, and
    /// later work on the batch goes to) after the work queued so far on its other buffers' streams:
    /// a batch zipped from two decodes (a two-pass read's) holds buffers of both.
    pub(crate) fn join_streams(&self) -> Result<()> {
        fn streams<'a>(a: &'a DeviceArray, out: &mut Vec<&'a crate::gpu::Stream>) {
            for b in a.validity.iter().chain(&a.buffers) {
                let s = b.stream();
                if !out.iter().any(|o| o.cuda().cu_stream() == s.cuda().cu_stream()) {
                    out.push(s);
                }
            }
            for c in &a.children {
                streams(c, out);
            }
        }
        let mut all = Vec::new();
        if let Some(first) = crate::decode::row_filter::first_buffer(self) {
            all.push(first.stream());
        }
        for c in &self.columns {
            streams(&c.array, &mut all);
        }
        let Some((first, others)) = all.split_first() else {
            return Ok(());
        };
        for s in others {
            let done = crate::gpu::Event::new(s.context())?;
            s.record(&done)?;
            first.wait(&done)?;
        }
        Ok(())
    }

    /// The batch compacted on the GPU of `decoder` to the rows `mask` selects (see [`crate::decode::row_filter::compact_batch`]).
    pub fn compact(self, mask: &crate::decode::table::DeviceArray, decoder: &GpuDecoder) -> Result<Self> {
        let mut exec = decoder.row_filter_executor(&self)?;
        crate::decode::row_filter::compact_batch(&mut exec, self, mask)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringViewArray};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    use super::*;
    use crate::io::IoBackend;
    use crate::plan::{PlanOptions, Projection, RowGroupSelection};

    /// `batch` written with `props` to a file in a new folder (kept while the first value lives), that
    /// file, the plan of all of it, and its chunks fetched as the plan lays them out.
    fn written_and_fetched(
        batch: &RecordBatch,
        props: WriterProperties,
    ) -> (tempfile::TempDir, ParquetSource, ReadPlan, Bytes) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("step.parquet");
        let mut w = ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), batch.schema(), Some(props)).unwrap();
        w.write(batch).unwrap();
        w.close().unwrap();
        let source = ParquetSource::open(&path).unwrap();
        let plan = ReadPlan::build(
            &source,
            &Projection::All,
            &RowGroupSelection::All,
            PlanOptions::default(),
        )
        .unwrap();
        let fetched = crate::io::host::HostBackend::new(1)
            .unwrap()
            .fetch(&source, &plan)
            .unwrap()
            .buffer
            .into_bytes();
        (dir, source, plan, fetched)
    }

    /// Beyond its fetched chunks, the most bytes a row one step held on the host executor, over one
    /// row group of 200,000 rows: `ints` dictionary-encoded Int64 columns and a dictionary-encoded
    /// Utf8View column of short strings (inline in their views: no characters, no own pages).
    fn step_peak_per_row(ints: usize) -> f64 {
        let n = 200_000usize;
        let mut columns: Vec<(String, ArrayRef)> = (0..ints)
            .map(|c| {
                let values = (0..n as i64).map(move |i| (i + c as i64) % 1000 * 7_919);
                (
                    format!("k{c}"),
                    Arc::new(Int64Array::from_iter_values(values)) as ArrayRef,
                )
            })
            .collect();
        let strs = StringViewArray::from_iter_values((0..n).map(|i| format!("s{}", i % 500)));
        columns.push(("s".into(), Arc::new(strs)));
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let props = WriterProperties::builder().set_max_row_group_row_count(Some(n)).build();
        let (_dir, source, plan, fetched) = written_and_fetched(&batch, props);
        let mut exec = HostExecutor::new();
        let (out, _) = reference_step(&mut exec, &source, &plan, &fetched, &PageHints::default(), None).unwrap();
        assert_eq!(out.num_rows, n);
        (exec.peak_bytes() - fetched.len() as u64) as f64 / n as f64
    }

    /// Whether a step of a 20,000-row file of `compression` (an Int64 column and a Utf8 column, one row
    /// group) still holds its fetched chunks once decoded on the host executor.
    fn chunks_held_after_the_step(compression: parquet::basic::Compression) -> bool {
        use crate::decode::exec::Executor;
        let n = 20_000i64;
        let ints = Int64Array::from_iter_values((0..n).map(|i| i * 31 % 977));
        let strs = arrow::array::StringArray::from_iter_values((0..n).map(|i| format!("row {}", i % 300)));
        let batch =
            RecordBatch::try_from_iter([("k", Arc::new(ints) as ArrayRef), ("s", Arc::new(strs) as ArrayRef)]).unwrap();
        let props = WriterProperties::builder().set_compression(compression).build();
        let (_dir, source, plan, fetched) = written_and_fetched(&batch, props);
        let (schema, routes) = route_columns(&source, &plan.columns).unwrap();
        let mut exec = HostExecutor::new();
        let base = exec.upload(fetched.as_ref()).unwrap();
        let (out, _) = decode_step(
            &mut exec,
            &source,
            &schema,
            &routes,
            &plan,
            &plan.row_groups,
            base,
            1,
            &PageHints::default(),
            None,
        )
        .unwrap();
        assert_eq!(out.num_rows, n as usize);
        exec.read::<u8>(base, 1).is_ok()
    }

    /// Once a step's pages are decompressed into its own buffers, nothing reads its fetched chunks: they
    /// are freed then (a read's step holds less at its peak). Uncompressed pages are decoded where they
    /// were fetched, so those chunks stay to the end.
    #[test]
    fn a_step_frees_its_chunks_once_its_pages_are_decompressed() {
        use parquet::basic::Compression;
        assert!(
            !chunks_held_after_the_step(Compression::SNAPPY),
            "snappy: chunks still held"
        );
        assert!(
            chunks_held_after_the_step(Compression::UNCOMPRESSED),
            "uncompressed: chunks freed"
        );
    }

    /// The dictionary indices (`dense`) of a step's columns are freed before its strings' characters
    /// and views are allocated, so a step's peak holds one or the other. With one Int64 column, the
    /// step holds at its peak the Int64 values (8 bytes a row), the strings' offsets, sources and
    /// lengths (4 + 8 + 4) and views (16): 40 bytes a row, and little else. The dense indices (8 + 4
    /// bytes a row) alongside would make it 52.
    #[test]
    fn dense_values_are_freed_before_the_strings_are_allocated() {
        let per_row = step_peak_per_row(1);
        assert!(
            per_row >= 40.0,
            "{per_row} bytes a row: the step must hold its values and views"
        );
        assert!(
            per_row < 46.0,
            "{per_row} bytes a row at the step's peak: dense indices still held"
        );
    }

    /// A BYTE_ARRAY column's offsets, sources and lengths are allocated once the fixed-width columns'
    /// dense values are freed. With four Int64 columns the step's peak comes first, before any kernel:
    /// their values (32 bytes a row) and dense values (32), and the strings' indices (4), 68 bytes a
    /// row. The strings' offsets, sources and lengths (16) allocated alongside would make it 84.
    #[test]
    fn string_buffers_wait_for_the_fixed_width_columns() {
        let per_row = step_peak_per_row(4);
        assert!(
            per_row >= 64.0,
            "{per_row} bytes a row: the step must hold its values and views"
        );
        assert!(
            per_row < 76.0,
            "{per_row} bytes a row at the step's peak: fixed dense values still held"
        );
    }
}

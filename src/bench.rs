//! Benchmarks every available I/O path on one file, in one run, side by side.
//!
//! Reads all column chunks (the same ranges as `shared/bench/kvikio_baseline.py`: dictionary or first
//! data page offset, `total_compressed_size` bytes) through the very backends `read` uses, built by
//! [`AnyBackend`]: host, staged at a few thread counts, staged with `O_DIRECT`, and cuFile where it
//! registers the file. Best of `reps` hot runs into one reused destination (allocation stays out of the
//! timed path) and one cold run per path after dropping the page cache (root only). A "pinned H2D
//! copy" row gives the staged path's ceiling on this machine.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::{BackendKind, CompatMode, IoPolicy, Tuning};
use crate::decode::table::DeviceBatch;
use crate::error::Result;
use crate::filter::FilterPasses;
use crate::gpu::{GpuContext, guard};
use crate::io::pread::pread_exact;
use crate::io::select::{AnyBackend, AnyBuffer};
use crate::io::staged::pinned_copy_time;
use crate::io::{DestBuffer, IoBackend, IoLog, IoPath, StepFetched, fetch_steps_per_call};
use crate::metadata::ParquetSource;
use crate::plan::{PlanOptions, Projection, ReadPlan, RowGroupSelection};
use crate::reader::{ColumnChunks, Reader};
use crate::scan::gpu::{GpuSteps, held_decoders};

mod selective;
pub use selective::NamedFilter;

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Hot repetitions per path (best is reported).
    pub reps: usize,
    /// Also one cold run per path, each after dropping the whole machine's page cache (needs root;
    /// off by default: it slows everything else running there).
    pub cold: bool,
    /// Columns to read.
    pub columns: Projection,
    /// Thread counts for the staged path (the policy's own count when empty).
    pub staged_threads: Vec<usize>,
    /// The policy every path starts from (threads, task size, bounce buffers...).
    pub policy: IoPolicy,
    /// GPU ordinal.
    pub device: usize,
    /// Also the decode rows: file → decoded device columns, and decode alone.
    pub decode: bool,
    /// Also the host, staged `O_DIRECT` and cuFile rows (the pinned copy and the staged rows always).
    pub other_paths: bool,
    /// Device-memory budget of the decode rows (default: the reader's, half the free memory).
    pub memory_limit: Option<u64>,
    /// Where the GPU decoder caches kernels and finds nvCOMP.
    pub decoder: crate::decode::gpu::DecoderOptions,
    /// Steps the decode rows cut a read into (default: the reader's model, `--decode-steps`).
    pub decode_steps: Option<usize>,
    /// Steps the decode rows decode at once (default: the reader's, `--decode-threads`).
    pub decode_threads: Option<usize>,
    /// Developer tuning (tracing, the Snappy decoders' choice) of every reader it builds.
    pub tuning: Tuning,
    /// Selective reads to measure ([`selective`]): per filter, the filtered read into device columns,
    /// the same columns unfiltered, and the filtered read on the host.
    pub filters: Vec<NamedFilter>,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            reps: 5,
            cold: false,
            columns: Projection::All,
            staged_threads: vec![8, 12, 16],
            policy: IoPolicy::default(),
            device: 0,
            decode: true,
            other_paths: true,
            memory_limit: None,
            decoder: Default::default(),
            decode_steps: None,
            decode_threads: None,
            tuning: Tuning::default(),
            filters: Vec::new(),
        }
    }
}

/// One measured path.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    /// Path label, e.g. "staged(16 threads)".
    pub name: String,
    /// The path the bytes took, as the backend reported (`None` for the copy ceiling row).
    pub path: Option<IoPath>,
    /// Bytes per run.
    pub bytes: u64,
    /// Best hot time, seconds.
    pub hot_s: Option<f64>,
    /// Hot throughput, GB/s (1e9 bytes).
    pub hot_gbps: Option<f64>,
    /// Cold time, seconds.
    pub cold_s: Option<f64>,
    /// Cold throughput, GB/s.
    pub cold_gbps: Option<f64>,
    /// Why a figure is missing, or what to know about it.
    pub note: Option<String>,
}

/// All rows of one run.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// The file.
    pub file: PathBuf,
    /// Bytes of column chunks read per run.
    pub bytes: u64,
    /// Tasks per run.
    pub tasks: usize,
    /// Hot repetitions.
    pub reps: usize,
    /// Whether cold runs were made.
    pub cold: bool,
    /// Why not, when they were not.
    pub cold_skipped: Option<String>,
    /// One row per path.
    pub rows: Vec<BenchRow>,
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64().max(1e-12) / 1e9
}

/// Reads `file` through the page cache, so that it is cached again after a cold run.
fn warm_page_cache(file: &Path) -> Result<()> {
    use std::io::Read;
    let mut f = std::fs::File::open(file)
        .map_err(|e| crate::Error::io(crate::Location::file(file), "opening it to cache it again", e))?;
    let mut buf = vec![0u8; 8 << 20];
    while f
        .read(&mut buf)
        .map_err(|e| crate::Error::io(crate::Location::file(file), "reading it to cache it again", e))?
        > 0
    {}
    Ok(())
}

/// Why cold rows are left out by default: dropping the page cache is the whole machine's, not ours.
const NOT_ASKED: &str = "not asked for (cold runs drop the whole machine's page cache: --drop-caches)";

/// Drops the page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`); `Err` says why it cannot.
pub fn drop_page_cache() -> std::result::Result<(), String> {
    // SAFETY: sync(2) takes no arguments and touches no memory of ours.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| format!("cannot drop the page cache ({e}); cold runs need root"))
}

/// Checks a few windows of the destination against the file (a benchmark of wrong bytes is worthless).
fn spot_check(source: &ParquetSource, plan: &ReadPlan, dest: &AnyBuffer) -> std::result::Result<(), String> {
    let n = plan.tasks.len();
    let all = dest.to_host().map_err(|e| e.to_string())?;
    for k in 0..n.min(8) {
        let t = &plan.tasks[k * n / n.min(8)];
        let len = t.len.min(4096) as usize;
        let got = &all[t.dest_offset as usize..t.dest_offset as usize + len];
        let mut want = vec![0u8; len];
        pread_exact(source.file(), &mut want, t.offset, &source.location()).map_err(|e| e.to_string())?;
        if got != want {
            return Err(format!("bytes at file offset {} differ from the file", t.offset));
        }
    }
    Ok(())
}

fn main_path(log: &IoLog) -> Option<IoPath> {
    let mut by = [0u64; 4];
    for t in &log.tasks {
        by[t.path.index()] += t.bytes;
    }
    IoPath::ALL
        .into_iter()
        .max_by_key(|p| by[p.index()])
        .filter(|p| by[p.index()] > 0)
}

/// Runs `f` once to warm up, `reps` times hot, and once cold (when `cold`).
/// `file` is read through the page cache after the cold run, so the next path starts hot: a cold read
/// that went `O_DIRECT` left it uncached.
fn measure(
    name: String,
    file: &Path,
    bytes: u64,
    reps: usize,
    cold: bool,
    mut f: impl FnMut() -> Result<IoLog>,
) -> BenchRow {
    let mut row = BenchRow::blank(name, bytes);
    let res = (|| -> Result<()> {
        let log = f()?;
        row.path = main_path(&log);
        if !log.notes.is_empty() {
            row.note = Some(log.notes.join("; "));
        }
        let mut best = Duration::MAX;
        for _ in 0..reps.max(1) {
            let t = Instant::now();
            f()?;
            best = best.min(t.elapsed());
        }
        row.hot_s = Some(best.as_secs_f64());
        row.hot_gbps = Some(gbps(bytes, best));
        if cold && drop_page_cache().is_ok() {
            let t = Instant::now();
            f()?;
            let d = t.elapsed();
            row.cold_s = Some(d.as_secs_f64());
            row.cold_gbps = Some(gbps(bytes, d));
            warm_page_cache(file)?;
        }
        Ok(())
    })();
    if let Err(e) = res {
        row.note = Some(e.to_string());
    }
    row
}

/// Measures one backend: `fetch_into` a destination allocated once, then a spot check of the bytes.
fn measure_backend(
    name: String,
    backend: Result<AnyBackend>,
    source: &ParquetSource,
    plan: &ReadPlan,
    reps: usize,
    cold: bool,
) -> BenchRow {
    let bytes = plan.useful_bytes();
    let (backend, mut dest) = match backend.and_then(|b| b.alloc(plan.dest_len).map(|d| (b, d))) {
        Ok(x) => x,
        Err(e) => return BenchRow::failed(name, bytes, e.to_string()),
    };
    let mut row = measure(name, source.path(), bytes, reps, cold, || {
        backend.fetch_into(source, plan, &mut dest)
    });
    if row.hot_s.is_some()
        && let Err(m) = spot_check(source, plan, &dest)
    {
        row.note = Some(format!("WRONG BYTES: {m}"));
    }
    row
}

/// Benchmarks every path available here on `file`.
pub fn bench_paths(file: &Path, opts: &BenchOptions) -> Result<BenchReport> {
    if opts.tuning.trace {
        // The I/O rows read through backends of their own, without a reader.
        crate::trace::enable();
    }
    let source = ParquetSource::open(file)?;
    let plan_with = |align: bool| {
        ReadPlan::build(
            &source,
            &opts.columns,
            &RowGroupSelection::All,
            PlanOptions {
                max_gap: 0,
                task_size: opts.policy.task_size,
                align,
            },
        )
    };
    let plan = plan_with(false)?;
    let bytes = plan.dest_len;
    let cold_skipped = if opts.cold {
        drop_page_cache().err()
    } else {
        Some(NOT_ASKED.to_string())
    };
    let cold = cold_skipped.is_none();
    let reps = opts.reps.max(1);
    let policy = |threads: usize, direct: bool, compat: CompatMode| IoPolicy {
        threads,
        direct_io: direct,
        compat_mode: compat,
        ..opts.policy.clone()
    };
    let mut rows = Vec::new();
    if opts.other_paths {
        let host = AnyBackend::new(BackendKind::Host, &opts.policy, opts.device);
        rows.push(measure_backend("host".into(), host, &source, &plan, reps, cold));
    }

    let ctx = match GpuContext::new(opts.device) {
        Err(e) => {
            rows.push(BenchRow::failed(
                "staged / cufile / pinned H2D",
                bytes,
                format!("no GPU: {e}"),
            ));
            rows.extend(selective::selective_rows(file, opts, reps, cold, false));
            return Ok(report(file, &plan, reps, cold_skipped, rows));
        }
        Ok(c) => c,
    };
    rows.push(ceiling_row(&ctx, bytes, reps, &opts.policy));
    let gpu = |kind, p: &IoPolicy| AnyBackend::with_context(kind, p, Some(Ok(ctx.clone())));
    let mut threads = opts.staged_threads.clone();
    if threads.is_empty() {
        threads.push(opts.policy.threads);
    }
    for &th in &threads {
        let b = gpu(BackendKind::Staged, &policy(th, false, CompatMode::On));
        let name = b
            .as_ref()
            .map(|b| b.name())
            .unwrap_or_else(|_| format!("staged({th} threads)"));
        rows.push(measure_backend(name, b, &source, &plan, reps, cold));
    }
    if opts.other_paths {
        // O_DIRECT reads of a 4 KiB-aligned plan, with the most threads: what matters for cold reads.
        let th = threads.iter().copied().max().unwrap_or(0);
        let name = format!("staged O_DIRECT({th} threads)");
        match plan_with(true) {
            Ok(aligned) => {
                let b = gpu(BackendKind::Staged, &policy(th, true, CompatMode::On));
                rows.push(measure_backend(name, b, &source, &aligned, reps, cold));
            }
            Err(e) => rows.push(BenchRow::failed(name, bytes, e.to_string())),
        }
        let b = gpu(
            BackendKind::Cufile,
            &policy(opts.policy.threads, false, CompatMode::Off),
        );
        let name = b.as_ref().map(|b| b.name()).unwrap_or_else(|_| "cufile".into());
        rows.push(measure_backend(name, b, &source, &plan, reps, cold));
    }
    if opts.decode {
        rows.extend(decode_rows(file, opts, reps, cold));
    }
    rows.extend(selective::selective_rows(file, opts, reps, cold, true));
    Ok(report(file, &plan, reps, cold_skipped, rows))
}

/// The decode rows, in uncompressed bytes per second (the row groups' column `total_uncompressed_size`,
/// cuDF's measure): file → decoded device columns through the default GPU backend (hot and cold), and
/// decode alone with the chunks already in device memory. The first decode is checked against
/// arrow-rs on its first step's row groups (a benchmark of wrong values is worthless).
fn decode_rows(file: &Path, opts: &BenchOptions, reps: usize, cold: bool) -> Vec<BenchRow> {
    let mut rows = decode_rows_with(file, opts, reps, cold, opts.decoder.trust_compressed);
    // A compressed file also gets the rows without the pre-check of compressed pages (trusted files).
    let compressed = crate::ParquetSource::open(file).is_ok_and(|s| {
        s.metadata().row_groups().iter().any(|g| {
            g.columns()
                .iter()
                .any(|c| c.compression() != parquet::basic::Compression::UNCOMPRESSED)
        })
    });
    if compressed && !opts.decoder.trust_compressed {
        rows.extend(decode_rows_with(file, opts, reps, false, true));
    }
    rows
}

/// A reader of `file` as the decode rows measure it: `opts`' columns, device, policy, tuning, decoder,
/// memory limit and steps.
fn reader_builder(file: &Path, opts: &BenchOptions) -> crate::ReaderBuilder {
    let mut b = crate::Reader::builder(file)
        .with_projection(opts.columns.clone())
        .with_device(opts.device)
        .with_policy(opts.policy.clone())
        .with_tuning(opts.tuning)
        .with_decoder_options(opts.decoder.clone());
    if let Some(m) = opts.memory_limit {
        b = b.with_memory_limit(m);
    }
    if let Some(n) = opts.decode_steps {
        b = b.with_decode_steps(n);
    }
    if let Some(n) = opts.decode_threads {
        b = b.with_decode_threads(n);
    }
    b
}

/// The decode rows with the pre-check of compressed pages on (`trust` false) or off.
fn decode_rows_with(file: &Path, opts: &BenchOptions, reps: usize, cold: bool, trust: bool) -> Vec<BenchRow> {
    let build = || {
        reader_builder(file, opts)
            .with_decoder_options(crate::decode::gpu::DecoderOptions {
                trust_compressed: trust,
                ..opts.decoder.clone()
            })
            .build()
    };
    let reader = match build() {
        Ok(r) => r,
        Err(e) => return vec![BenchRow::failed("decode: file -> device columns", 0, e.to_string())],
    };
    let bytes = reader.uncompressed_bytes();
    let backend = reader.io().name();
    let trusted = if trust { ", trusted: no pre-check" } else { "" };
    let mut rows = Vec::new();
    let mut first = true;
    let mut check_note = None;
    let mut row = measure(
        format!("decode: file -> device columns ({backend}{trusted})"),
        file,
        bytes,
        reps,
        cold,
        || {
            let read = reader.read_device()?;
            if first {
                first = false;
                let check = spot_check_decode(&reader, &read).unwrap_or_else(|e| format!("WRONG VALUES: {e}"));
                // As cuDF's baseline reports its peak (rmm's statistics), beside the output's size.
                let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
                check_note = Some(format!(
                    "{check}; peak {:.2} GiB allocated, output {:.2} GiB",
                    gib(read.decode.peak_allocated_bytes),
                    gib(read.decode.output_bytes)
                ));
            }
            Ok(IoLog::default())
        },
    );
    row.path = None;
    row.note = [row.note.take(), check_note]
        .into_iter()
        .flatten()
        .reduce(|a, b| format!("{a}; {b}"));
    rows.push(row);

    // The pipeline's reads alone (its steps fetched as it fetches them, nothing decoded): what the
    // decode beside them costs the reads, in the same run. On the staged backend also with one call per
    // step, what the workers going on from step to step save.
    let per_call_too = reader.io().staged().is_some();
    for per_call in [false, true].into_iter().take(1 + per_call_too as usize) {
        let how = match (per_call_too, per_call) {
            (false, _) => "",
            (true, false) => ", same workers throughout",
            (true, true) => ", one call per step",
        };
        let mut steps_note = None;
        let mut reads = measure(
            format!("reads alone, in the decode's steps ({backend}{how})"),
            file,
            reader.plan().useful_bytes(),
            reps,
            false,
            || {
                let (steps, log) = read_steps_alone(&reader, per_call)?;
                steps_note = Some(format!("{steps} steps, as the decode reads them; nothing decoded"));
                Ok(log)
            },
        );
        reads.note = [reads.note.take(), steps_note]
            .into_iter()
            .flatten()
            .reduce(|a, b| format!("{a}; {b}"));
        rows.push(reads);
    }

    // Decode alone: the chunks read once, then decoded `reps` times.
    let mut alone = BenchRow::blank(format!("decode only (chunks already in device memory{trusted})"), bytes);
    let res = (|| -> Result<()> {
        let chunks = reader.read()?;
        let decoder = reader.gpu_decoder()?;
        let (schema, routes) = crate::decode::pipeline::route_columns(reader.source(), &reader.plan().columns)?;
        let AnyBuffer::Device(buf) = chunks.buffer() else {
            return Err(crate::Error::device("bench", "the backend read into host memory"));
        };
        let run = || {
            decoder.decode(
                reader.source(),
                &schema,
                &routes,
                chunks.plan(),
                buf,
                opts.policy.threads,
                None,
            )
        };
        let (_, _, peak) = run()?;
        // The decode ends with its counts read back, so the columns are complete when it returns.
        let best = best_of(reps, run)?;
        alone.hot_s = Some(best.as_secs_f64());
        alone.hot_gbps = Some(gbps(bytes, best));
        alone.note = Some(format!(
            "one step of {} row groups; peak {peak} bytes beyond the chunks",
            chunks.row_groups().len()
        ));
        Ok(())
    })();
    if let Err(e) = res {
        alone.note = Some(e.to_string());
    }
    rows.push(alone);

    // Decode alone in the read's steps: held in device memory, all decoded at once
    // ([`fetch_held_steps`]), or as many at once as `--decode-threads` says.
    let mut stepped = BenchRow::blank(
        format!("decode only, in the read's steps (chunks already in device memory{trusted})"),
        bytes,
    );
    let res = (|| -> Result<()> {
        let held = fetch_held_steps(&reader)?;
        let (_, peak) = decode_held_steps(&reader, &held)?;
        let best = best_of(reps, || decode_held_steps(&reader, &held))?;
        stepped.hot_s = Some(best.as_secs_f64());
        stepped.hot_gbps = Some(gbps(bytes, best));
        stepped.note = Some(format!(
            "{} steps, {} at once; a step's peak {peak} bytes beyond its chunks",
            held.len(),
            held.decoders()
        ));
        Ok(())
    })();
    if let Err(e) = res {
        stepped.note = Some(e.to_string());
    }
    rows.push(stepped);
    rows
}

/// The shortest of `reps` runs of `run`, each timed until it returns (its output dropped after).
fn best_of<T>(reps: usize, mut run: impl FnMut() -> Result<T>) -> Result<Duration> {
    let mut best = Duration::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        let out = run()?;
        best = best.min(t.elapsed());
        drop(out);
    }
    Ok(best)
}

/// Compares the first step of a GPU read with arrow-rs decoding the same row groups on the host.
fn spot_check_decode(reader: &crate::Reader, read: &crate::device_read::DeviceRead) -> Result<String> {
    let Some(batch) = read.table.batches.first() else {
        return Ok("nothing decoded".into());
    };
    let got = batch.to_host()?;
    let plan = ReadPlan::build(
        reader.source(),
        &Projection::Leaves(reader.plan().columns.clone()),
        &RowGroupSelection::Indices(batch.row_groups.clone()),
        PlanOptions::default(),
    )?;
    let host = AnyBackend::new(BackendKind::Host, &IoPolicy::default(), 0)?;
    let fetched = host.fetch(reader.source(), &plan)?;
    let bytes = fetched.buffer.into_host_bytes()?;
    let want = crate::decode::host::decode_fetched(reader.source(), &plan, &bytes, 0)?.concat()?;
    let same = want.num_rows() == got.num_rows()
        && (0..want.num_columns()).all(|i| want.column(i).to_data() == got.column(i).to_data());
    if same {
        Ok(format!("{} rows checked against arrow-rs", got.num_rows()))
    } else {
        Err(crate::Error::device("bench", "GPU-decoded values differ from arrow-rs"))
    }
}

fn ceiling_row(ctx: &Arc<GpuContext>, bytes: u64, reps: usize, policy: &IoPolicy) -> BenchRow {
    let mut row = BenchRow::blank("pinned H2D copy (ceiling)", bytes);
    match pinned_copy_time(ctx, bytes, reps, policy.pinned) {
        Ok(d) => {
            row.hot_s = Some(d.as_secs_f64());
            row.hot_gbps = Some(gbps(bytes, d));
        }
        Err(e) => row.note = Some(e.to_string()),
    }
    row
}

fn report(file: &Path, plan: &ReadPlan, reps: usize, cold_skipped: Option<String>, rows: Vec<BenchRow>) -> BenchReport {
    BenchReport {
        file: file.to_path_buf(),
        bytes: plan.useful_bytes(),
        tasks: plan.tasks.len(),
        reps,
        cold: cold_skipped.is_none(),
        cold_skipped,
        rows,
    }
}

impl BenchRow {
    /// A row with nothing measured yet.
    fn blank(name: impl Into<String>, bytes: u64) -> Self {
        Self {
            name: name.into(),
            path: None,
            bytes,
            hot_s: None,
            hot_gbps: None,
            cold_s: None,
            cold_gbps: None,
            note: None,
        }
    }

    fn failed(name: impl Into<String>, bytes: u64, note: String) -> Self {
        Self {
            note: Some(note),
            ..Self::blank(name, bytes)
        }
    }
}

/// Seconds with three significant digits, in ms or µs where that reads better ("-" when absent).
fn secs(x: Option<f64>) -> String {
    match x {
        None => "-".into(),
        Some(v) if v >= 1.0 => format!("{v:.3} s"),
        Some(v) if v >= 1e-3 => format!("{:.3} ms", v * 1e3),
        Some(v) => format!("{:.1} µs", v * 1e6),
    }
}

impl BenchReport {
    /// A human-readable table.
    pub fn to_table(&self) -> String {
        let rate = |x: Option<f64>| x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
        let mut s = format!(
            "{}: {} bytes of column chunks in {} tasks, best of {} hot runs{}\n",
            self.file.display(),
            self.bytes,
            self.tasks,
            self.reps,
            self.cold_skipped
                .as_ref()
                .map(|e| format!("; no cold runs: {e}"))
                .unwrap_or_default()
        );
        s.push_str(&format!(
            "{:<30} {:<14} {:>11} {:>9} {:>11} {:>9}  note\n",
            "path", "took", "hot", "hot GB/s", "cold", "cold GB/s"
        ));
        for r in &self.rows {
            s.push_str(&format!(
                "{:<30} {:<14} {:>11} {:>9} {:>11} {:>9}  {}\n",
                r.name,
                r.path.map(|p| p.name()).unwrap_or("-"),
                secs(r.hot_s),
                rate(r.hot_gbps),
                secs(r.cold_s),
                rate(r.cold_gbps),
                r.note.as_deref().unwrap_or("")
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_times_keep_their_digits() {
        assert_eq!(secs(Some(2.5)), "2.500 s");
        assert_eq!(secs(Some(0.000_123_4)), "123.4 µs");
        assert_eq!(secs(Some(0.0123)), "12.300 ms");
        assert_eq!(secs(None), "-");
    }

    #[test]
    fn host_bench_on_a_small_file_has_real_figures_and_plain_json() {
        let dir = tempfile::tempdir().unwrap();
        let files = crate::conformance::write_test_files(dir.path()).unwrap();
        let opts = BenchOptions {
            reps: 2,
            cold: false,
            ..BenchOptions::default()
        };
        let r = bench_paths(&files.mixed, &opts).unwrap();
        let host = &r.rows[0];
        assert_eq!(host.path, Some(IoPath::Host));
        assert!(host.hot_s.unwrap() > 0.0 && host.hot_gbps.unwrap() > 0.0, "{host:?}");
        assert!(!r.to_table().contains(" 0.00 "), "{}", r.to_table());
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains("\"Err\"") && !json.contains("\"Ok\""), "{json}");
        assert!(json.contains(&format!("\"cold_skipped\":\"{NOT_ASKED}\"")), "{json}");
    }
}

// Benchmark hooks: a GPU read's steps read alone, or held in device memory and decoded alone, built
// of the scan's pieces (its GPU step plan, the backend's stepped fetch, the GPU decoder).

/// A GPU read's steps, fetched into device memory and held ([`fetch_held_steps`]).
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
    pub(crate) fn decoders(&self) -> usize {
        self.decoders
    }
}

/// The reads of [`crate::Reader::read_device`] alone: its steps fetched as its scan fetches them
/// ([`IoBackend::fetch_steps`]; one call per step when `per_call`), each step's chunks dropped as
/// they come, nothing decoded; returns once every copy has finished. The pipeline's time against its
/// reads' own tells what decoding beside them costs. Returns the number of steps and the merged log
/// (the steps' chunks are the selection's).
pub fn read_steps_alone(reader: &Reader, per_call: bool) -> Result<(usize, IoLog)> {
    let steps = GpuSteps::plan_with(reader, reader.gpu_decoder()?, FilterPasses::One)?;
    // Dropping the chunks frees their buffer after the copies (stream-ordered).
    let logs = fetch_every_step(reader, &steps.plans, per_call, |c| c.log)?;
    // Every copy has finished: the stepped fetch returns once its workers drained their streams,
    // and a fetch per call waits for its copies.
    let (_, log) = crate::scan::step::merge_reads(&steps.plans, &logs);
    Ok((steps.plans.len(), log))
}

/// The steps of [`crate::Reader::read_device`], fetched into device memory and held there, to be
/// decoded (again and again) by [`decode_held_steps`]: the decode of a read without its reads. Every
/// step's chunks are held at once, whatever the memory budget, and decoded all at once (as many
/// decoding threads as steps, as far as the memory left allows: `held_decoders`) unless the reader
/// was given a number of decoding threads: with no reads to overlap, steps decoded beside each other
/// fill the GPU where one step's phases leave it idle. Measured on the H200 (`bench --only-decode
/// --no-cold`, one call, alternating): snappy benchmark file, 8 steps, 4 at once 26.34 / 26.59 ms,
/// all 8 25.14 / 24.38 ms; plain, 16 steps, 2 at once 22.50 ms, all 16 12.15 ms.
pub fn fetch_held_steps(reader: &Reader) -> Result<HeldSteps> {
    let decoder = reader.gpu_decoder()?;
    let steps = GpuSteps::plan_with(reader, decoder.clone(), FilterPasses::One)?;
    // Each step's copies are queued on its buffer's stream, which its decode is ordered after.
    let chunks = fetch_every_step(reader, &steps.plans, false, |c| c)?;
    let free_after = decoder.context().available_memory()?;
    Ok(HeldSteps {
        decoders: reader
            .decode_threads
            .unwrap_or_else(|| held_decoders(chunks.len(), free_after, steps.largest)),
        chunks,
    })
}

/// Fetches every step of `plans` (the backend's stepped fetch, or one call per step when `per_call`;
/// nothing waiting for memory) and keeps `keep` of each, in step order. A failed step's error comes
/// first, before the "not read" of the steps it stopped (on the staged backend steps are delivered in
/// no set order).
fn fetch_every_step<T: Send>(
    reader: &Reader,
    plans: &[Arc<ReadPlan>],
    per_call: bool,
    keep: impl Fn(ColumnChunks) -> T + Sync,
) -> Result<Vec<T>> {
    let kept: Mutex<Vec<Option<Result<T>>>> = Mutex::new((0..plans.len()).map(|_| None).collect());
    let deliver = |k: usize, r: Result<StepFetched<AnyBuffer>>| {
        let r = r
            .and_then(|f| {
                ColumnChunks::read(
                    reader.source(),
                    plans[k].clone(),
                    f.buffer,
                    f.log,
                    f.queued,
                    reader.policy.threads,
                )
            })
            .map(&keep);
        kept.lock().unwrap_or_else(|p| p.into_inner())[k] = Some(r);
    };
    let io = reader.io();
    if per_call {
        fetch_steps_per_call(&**io, reader.source(), plans, &mut |_| true, &deliver);
    } else {
        io.fetch_steps(reader.source(), plans, &mut |_| true, &deliver);
    }
    let mut kept = kept.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = kept.iter().position(|l| matches!(l, Some(Err(_))))
        && let Some(Err(e)) = kept.swap_remove(i)
    {
        return Err(e);
    }
    kept.into_iter()
        .map(|l| l.unwrap_or_else(|| Err(crate::Error::device("reading steps", "a step was not read"))))
        .collect()
}

/// Decodes held steps as [`crate::Reader::read_device`] decodes the steps it reads: each on its
/// chunks' stream, [`HeldSteps::decoders`] of them at once. Returns the batches in order and the most
/// device memory one step held beyond its chunks. Ends once every step's counts are read back.
pub fn decode_held_steps(reader: &Reader, held: &HeldSteps) -> Result<(Vec<DeviceBatch>, u64)> {
    let decoder = reader.gpu_decoder()?;
    let (schema, routes) = crate::decode::pipeline::route_columns(reader.source(), &reader.plan().columns)?;
    let next = AtomicUsize::new(0);
    let origin = Instant::now();
    let decode_step = |k: usize, chunks: &ColumnChunks| {
        guard("decoding a held step", || {
            let AnyBuffer::Device(buffer) = chunks.buffer() else {
                return Err(crate::Error::device("GPU decoder", "the backend returned host memory"));
            };
            let began = origin.elapsed();
            let (batch, stats, peak) = decoder.decode(
                reader.source(),
                &schema,
                &routes,
                &chunks.plan,
                buffer,
                reader.policy.threads,
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
    // Each thread takes the next step until none is left, and hands back what it decoded (the
    // chunks are already held: no reads to drive, so not the scan's threads).
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
        return Err(crate::Error::device("GPU decoder", "a step was not decoded"));
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

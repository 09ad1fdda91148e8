//! Benchmarks every available I/O path on one file, in one run, side by side.
//!
//! Reads all column chunks (the same ranges as `shared/bench/kvikio_baseline.py`: dictionary or first
//! data page offset, `total_compressed_size` bytes) through the host path, the staged path at a few
//! thread counts and cuFile where registration works; best of `reps` hot runs into a reused destination
//! (allocation stays out of the timed path) and one cold run per path after dropping the page cache
//! (root only). A "pinned H2D copy" row gives the staged path's ceiling on this machine.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::Result;
use crate::gpu::{DeviceBuffer, GpuContext};
use crate::io::cufile::{CufileBackend, CufileOptions};
use crate::io::host::HostBackend;
use crate::io::pread::pread_exact;
use crate::io::staged::{StagedBackend, StagedOptions, pinned_copy_time};
use crate::io::{IoBackend, IoLog, IoPath};
use crate::metadata::ParquetSource;
use crate::plan::{PlanOptions, Projection, ReadPlan, RowGroupSelection};

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Hot repetitions per path (best is reported).
    pub reps: usize,
    /// Also one cold run per path (needs root to drop the page cache).
    pub cold: bool,
    /// Columns to read.
    pub columns: Projection,
    /// Thread counts for the staged path.
    pub staged_threads: Vec<usize>,
    /// Threads for the host path and cuFile (0: one per core).
    pub threads: usize,
    /// Task size in bytes.
    pub task_size: u64,
    /// Staged path: bytes per pinned bounce buffer.
    pub bounce_buffer_size: u64,
    /// Staged path: pinned bounce buffers per thread.
    pub bounce_buffers: usize,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            reps: 5,
            cold: true,
            columns: Projection::All,
            staged_threads: vec![8, 12, 16],
            threads: 0,
            task_size: 8 << 20,
            bounce_buffer_size: crate::io::policy::IoPolicy::default().bounce_buffer_size,
            bounce_buffers: crate::io::policy::IoPolicy::default().bounce_buffers,
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
    /// Whether cold runs were possible, else why not.
    pub cold: std::result::Result<(), String>,
    /// One row per path.
    pub rows: Vec<BenchRow>,
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64().max(1e-12) / 1e9
}

/// Drops the page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`); `Err` says why it cannot.
pub fn drop_page_cache() -> std::result::Result<(), String> {
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| format!("cannot drop the page cache ({e}); cold runs need root"))
}

/// Checks a few windows of a device buffer against the file (a benchmark of wrong bytes is worthless).
fn spot_check(source: &ParquetSource, plan: &ReadPlan, dest: &DeviceBuffer) -> std::result::Result<(), String> {
    let n = plan.tasks.len();
    for k in 0..n.min(8) {
        let t = &plan.tasks[k * n / n.min(8)];
        let len = t.len.min(4096);
        let got = dest.copy_range_to_host(t.dest_offset, len).map_err(|e| e.to_string())?;
        let mut want = vec![0u8; len as usize];
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

/// Runs `f` once to warm up, `reps` times hot, and once cold (when `cold` is Ok).
fn measure(
    name: String,
    bytes: u64,
    reps: usize,
    cold: &std::result::Result<(), String>,
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
        if cold.is_ok() && drop_page_cache().is_ok() {
            let t = Instant::now();
            f()?;
            let d = t.elapsed();
            row.cold_s = Some(d.as_secs_f64());
            row.cold_gbps = Some(gbps(bytes, d));
            f()?; // warm the cache again for the next path
        }
        Ok(())
    })();
    if let Err(e) = res {
        row.note = Some(e.to_string());
    }
    row
}

/// Benchmarks every path available here on `file`.
pub fn bench_paths(file: &Path, opts: &BenchOptions) -> Result<BenchReport> {
    let source = ParquetSource::open(file)?;
    let plan = ReadPlan::build(
        &source,
        &opts.columns,
        &RowGroupSelection::All,
        PlanOptions {
            max_gap: 0,
            task_size: opts.task_size,
            align: false,
        },
    )?;
    let bytes = plan.dest_len;
    let cold = if opts.cold {
        drop_page_cache()
    } else {
        Err("not asked for".to_string())
    };
    let reps = opts.reps.max(1);
    let mut rows = Vec::new();

    let host = HostBackend::new(opts.threads)?;
    rows.push(measure(
        format!("host({} threads)", host.threads()),
        bytes,
        reps,
        &cold,
        || host.fetch(&source, &plan).map(|f| f.log),
    ));

    match GpuContext::shared() {
        Err(e) => rows.push(BenchRow {
            note: Some(format!("no CUDA driver: {e}")),
            ..BenchRow::blank("staged / cufile / pinned H2D", bytes)
        }),
        Ok(ctx) => gpu_rows(&ctx, &source, &plan, opts, reps, &cold, &mut rows),
    }
    Ok(BenchReport {
        file: file.to_path_buf(),
        bytes,
        tasks: plan.tasks.len(),
        reps,
        cold,
        rows,
    })
}

fn gpu_rows(
    ctx: &Arc<GpuContext>,
    source: &ParquetSource,
    plan: &ReadPlan,
    opts: &BenchOptions,
    reps: usize,
    cold: &std::result::Result<(), String>,
    rows: &mut Vec<BenchRow>,
) {
    let bytes = plan.dest_len;
    let mut dest = match ctx.alloc(bytes) {
        Ok(d) => d,
        Err(e) => {
            rows.push(BenchRow {
                note: Some(e.to_string()),
                ..BenchRow::blank("staged / cufile", bytes)
            });
            return;
        }
    };
    let mut ceiling = BenchRow::blank("pinned H2D copy (ceiling)", bytes);
    match pinned_copy_time(ctx, bytes, reps) {
        Ok(d) => {
            ceiling.hot_s = Some(d.as_secs_f64());
            ceiling.hot_gbps = Some(gbps(bytes, d));
        }
        Err(e) => ceiling.note = Some(e.to_string()),
    }
    rows.push(ceiling);

    // The same threads with O_DIRECT reads of a 4 KiB-aligned plan: what matters for cold reads.
    let aligned = ReadPlan::build(
        source,
        &opts.columns,
        &RowGroupSelection::All,
        PlanOptions {
            max_gap: 0,
            task_size: opts.task_size,
            align: true,
        },
    );
    let best_threads = opts.staged_threads.iter().copied().max();
    let variants = opts
        .staged_threads
        .iter()
        .map(|&th| (th, false))
        .chain(best_threads.map(|th| (th, true)));
    for (th, direct) in variants {
        let so = StagedOptions {
            threads: th,
            buffer_size: opts.bounce_buffer_size as usize,
            buffers_per_thread: opts.bounce_buffers,
            direct_io: direct,
        };
        let plan = match (&aligned, direct) {
            (Ok(p), true) => p,
            (Err(e), true) => {
                rows.push(err_row(format!("staged O_DIRECT({th} threads)"), bytes, e.to_string()));
                continue;
            }
            _ => plan,
        };
        // An aligned plan can need a few more bytes than the exact one.
        let mut own_dest = None;
        if plan.dest_len > bytes {
            match ctx.alloc(plan.dest_len) {
                Ok(d) => own_dest = Some(d),
                Err(e) => {
                    rows.push(err_row(format!("staged O_DIRECT({th} threads)"), bytes, e.to_string()));
                    continue;
                }
            }
        }
        let dest = own_dest.as_mut().unwrap_or(&mut dest);
        match StagedBackend::new(ctx.clone(), so) {
            Err(e) => rows.push(err_row(format!("staged({th} threads)"), bytes, e.to_string())),
            Ok(s) => {
                let name = if direct {
                    format!("staged O_DIRECT({th} threads)")
                } else {
                    s.name()
                };
                let mut row = measure(name, bytes, reps, cold, || s.fetch_into(source, plan, dest));
                if let Err(m) = spot_check(source, plan, dest) {
                    row.note = Some(format!("WRONG BYTES: {m}"));
                }
                rows.push(row);
            }
        }
    }

    let co = CufileOptions {
        threads: opts.threads,
        ..CufileOptions::default()
    };
    match CufileBackend::new(ctx.clone(), co) {
        Err(e) => rows.push(err_row("cufile".into(), bytes, e.to_string())),
        Ok(c) => match c.register(source, plan) {
            Err(refusal) => rows.push(err_row(c.name(), bytes, format!("registration refused: {refusal}"))),
            Ok(handle) => {
                drop(handle);
                let mut row = measure(c.name(), bytes, reps, cold, || c.fetch_into(source, plan, &mut dest));
                if let Err(m) = spot_check(source, plan, &dest) {
                    row.note = Some(format!("WRONG BYTES: {m}"));
                }
                rows.push(row);
            }
        },
    }
}

fn err_row(name: String, bytes: u64, note: String) -> BenchRow {
    BenchRow {
        note: Some(note),
        ..BenchRow::blank(name, bytes)
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
}

impl BenchReport {
    /// A human-readable table.
    pub fn to_table(&self) -> String {
        let f = |x: Option<f64>| x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
        let mut s = format!(
            "{}: {} bytes of column chunks in {} tasks, best of {} hot runs{}\n",
            self.file.display(),
            self.bytes,
            self.tasks,
            self.reps,
            match &self.cold {
                Ok(()) => String::new(),
                Err(e) => format!(" (cold: {e})"),
            }
        );
        s.push_str(&format!(
            "{:<28} {:<14} {:>9} {:>9} {:>9} {:>9}  note\n",
            "path", "took", "hot s", "hot GB/s", "cold s", "cold GB/s"
        ));
        for r in &self.rows {
            s.push_str(&format!(
                "{:<28} {:<14} {:>9} {:>9} {:>9} {:>9}  {}\n",
                r.name,
                r.path.map(|p| p.name()).unwrap_or("-"),
                f(r.hot_s),
                f(r.hot_gbps),
                f(r.cold_s),
                f(r.cold_gbps),
                r.note.as_deref().unwrap_or("")
            ));
        }
        s
    }
}

//! Prints arrow-rs's reader against our host pipeline on the same files, best of N runs each, and the
//! ratio, so the figure can be quoted.
//!
//! ```text
//! cargo run --release --example host_throughput [-- [--runs N] [--rows N] [--reuse-memory] [FILE ...]]
//! ```
//!
//! Without files, the cached benchmark files of `benches/host_vs_arrow.rs` are used (written on first
//! use under `target/bench-data/`). Threads for our pipeline: `GPU_PARQUET_THREADS` (default one per
//! core); arrow-rs's synchronous reader uses one. Hot page cache: every file is read once before timing.

#[path = "../benches/bench_data/mod.rs"]
mod bench_data;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gpu_parquet::decode::decode_fetched;
use gpu_parquet::io::IoBackend;
use gpu_parquet::io::host::HostBackend;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// arrow-rs's reader, keeping every batch (`keep`: the whole table in memory, as our pipeline
/// returns it) or dropping each batch once counted (streaming, the cheapest use of the reader).
fn arrow_read(path: &Path, keep: bool) -> Res<usize> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?
        .with_batch_size(bench_data::ROW_GROUP_ROWS)
        .build()?;
    let mut kept = Vec::new();
    let mut rows = 0;
    for b in reader {
        let b = b?;
        rows += b.num_rows();
        if keep {
            kept.push(b);
        }
    }
    Ok(rows)
}

/// Returns (rows, time of the fetch alone).
fn ours_read(path: &Path, backend: &HostBackend) -> Res<(usize, Duration)> {
    let (source, plan) = bench_data::open_and_plan(path)?;
    let t = Instant::now();
    let fetched = backend.fetch(&source, &plan)?;
    let fetch = t.elapsed();
    Ok((
        decode_fetched(&source, &plan, &fetched.buffer.into_bytes(), backend.threads())?.num_rows(),
        fetch,
    ))
}

fn best<T>(runs: usize, mut f: impl FnMut() -> Res<T>) -> Res<(Duration, T)> {
    let mut best: Option<(Duration, T)> = None;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let v = f()?;
        let d = t.elapsed();
        if best.as_ref().is_none_or(|(b, _)| d < *b) {
            best = Some((d, v));
        }
    }
    best.ok_or_else(|| "no run".into())
}

fn main() -> Res<()> {
    let mut runs = 5;
    let mut rows = bench_data::DEFAULT_ROWS;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" => runs = args.next().ok_or("--runs needs a value")?.parse()?,
            "--rows" => rows = args.next().ok_or("--rows needs a value")?.parse()?,
            // glibc hands large freed buffers back to the kernel and page-faults fresh ones in on the
            // next allocation, which costs both readers as much as decoding; this keeps freed memory in
            // the heap for reuse (process-wide, so for both readers alike).
            "--reuse-memory" => unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
                libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
            },
            _ => files.push(a.into()),
        }
    }
    if files.is_empty() {
        files = bench_data::bench_files(rows)?.to_vec();
    }
    let backend = HostBackend::new(bench_data::threads_from_env())?;
    println!(
        "best of {runs}, hot page cache; GB/s = uncompressed column bytes / s; ours uses {} threads, arrow-rs 1",
        backend.threads()
    );
    for path in &files {
        let bytes = bench_data::uncompressed_bytes(path) as f64;
        let on_disk = std::fs::metadata(path)?.len();
        // Warm the page cache and check both readers agree on the row count.
        let want = arrow_read(path, true)?;
        let (got, _) = ours_read(path, &backend)?;
        if got != want {
            return Err(format!("{}: arrow-rs read {want} rows, we read {got}", path.display()).into());
        }
        let (ta, _) = best(runs, || arrow_read(path, true))?;
        let (ts, _) = best(runs, || arrow_read(path, false))?;
        let (to, (_, fetch)) = best(runs, || ours_read(path, &backend))?;
        let gbps = |d: Duration| bytes / d.as_secs_f64() / 1e9;
        println!(
            "{}: {on_disk} bytes on disk, {bytes} uncompressed, {want} rows\n  arrow-rs (table kept)     {:>8.1} ms  {:>6.2} GB/s\n  arrow-rs (batches dropped){:>8.1} ms  {:>6.2} GB/s\n  ours (table kept)         {:>8.1} ms  {:>6.2} GB/s  (fetch {:.1} ms)\n  ratio ours/arrow-rs: {:.2}x (table kept), {:.2}x (against batches dropped)",
            path.display(),
            ta.as_secs_f64() * 1e3,
            gbps(ta),
            ts.as_secs_f64() * 1e3,
            gbps(ts),
            to.as_secs_f64() * 1e3,
            gbps(to),
            fetch.as_secs_f64() * 1e3,
            ta.as_secs_f64() / to.as_secs_f64(),
            ts.as_secs_f64() / to.as_secs_f64()
        );
    }
    Ok(())
}

//! arrow-rs's own reader against our host pipeline, on the same cached file, hot page cache.
//!
//! (a) `ParquetRecordBatchReaderBuilder::try_new(File)`, all columns, one thread (arrow-rs's sync
//!     reader is single-threaded), batches of one row group;
//! (b) `ParquetSource::open` + `ReadPlan::build` + `HostBackend::fetch` + `decode_fetched`, with
//!     `GPU_PARQUET_THREADS` threads (default: one per core);
//! (c) the fetch alone (plan + positional reads into one host buffer).
//!
//! Throughput is in uncompressed column bytes per second. `BENCH_ROWS` changes the file size
//! (default 5 row groups of 1,048,576 rows, about 300 MB plain).
//!
//! ```text
//! cargo bench --bench host_vs_arrow
//! ```

mod bench_data;

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gpu_parquet::decode::decode_fetched;
use gpu_parquet::io::IoBackend;
use gpu_parquet::io::host::HostBackend;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn rows() -> usize {
    std::env::var("BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(bench_data::DEFAULT_ROWS)
}

/// arrow-rs: decode every column; returns rows, so the work cannot be optimised away.
pub fn arrow_read(path: &Path) -> usize {
    let file = File::open(path).expect("open");
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("arrow-rs reads the footer")
        .with_batch_size(bench_data::ROW_GROUP_ROWS)
        .build()
        .expect("arrow-rs reader");
    reader.map(|b| b.expect("arrow-rs decodes").num_rows()).sum()
}

/// Ours: open, plan, fetch into host memory, decode.
pub fn ours_read(path: &Path, backend: &HostBackend, threads: usize) -> usize {
    let (source, plan) = bench_data::open_and_plan(path).expect("open and plan");
    let fetched = backend.fetch(&source, &plan).expect("fetch");
    decode_fetched(&source, &plan, &fetched.buffer.into_bytes(), threads)
        .expect("decode")
        .num_rows()
}

/// Ours, I/O only: open, plan, fetch.
pub fn ours_fetch(path: &Path, backend: &HostBackend) -> usize {
    let (source, plan) = bench_data::open_and_plan(path).expect("open and plan");
    backend.fetch(&source, &plan).expect("fetch").buffer.as_slice().len()
}

fn bench(c: &mut Criterion) {
    let files = bench_data::bench_files(rows()).expect("bench files");
    let backend = HostBackend::new(bench_data::threads_from_env()).expect("host backend");
    let n_threads = backend.threads();
    for path in &files {
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("file").to_string();
        let bytes = bench_data::uncompressed_bytes(path);
        let expected = arrow_read(path);
        assert_eq!(
            ours_read(path, &backend, n_threads),
            expected,
            "both readers see every row"
        );
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Bytes(bytes));
        g.sample_size(10);
        g.warm_up_time(Duration::from_secs(1));
        g.measurement_time(Duration::from_secs(6));
        g.bench_function("arrow-rs ParquetRecordBatchReader (1 thread)", |b| {
            b.iter(|| arrow_read(path))
        });
        g.bench_function(format!("gpu-parquet host fetch + decode ({n_threads} threads)"), |b| {
            b.iter(|| ours_read(path, &backend, n_threads))
        });
        g.bench_function(format!("gpu-parquet host fetch only ({n_threads} threads)"), |b| {
            b.iter(|| ours_fetch(path, &backend))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! Benchmark files shaped like `../shared/bench/make_bench_files.py`, written with arrow-rs and cached.
//!
//! Seven flat columns (id i64 sequential, a i64 < 2^40, b i32 < 1000, c f64, d f32, s utf8 from 1000
//! categories, ts timestamp[us]) in row groups of 1,048,576 rows, as `plain.parquet` (no dictionary,
//! uncompressed) and `snappy.parquet` (dictionary + snappy). Shared by `benches/host_vs_arrow.rs` and
//! `examples/host_throughput.rs`.

#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float32Array, Float64Array, Int32Array, Int64Array, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;
use gpu_parquet::conformance::SeededRng;
use gpu_parquet::{ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

/// Rows per row group, as in make_bench_files.py.
pub const ROW_GROUP_ROWS: usize = 1 << 20;
/// Default rows: five row groups, about 300 MB plain and 170 MB snappy.
pub const DEFAULT_ROWS: usize = 5 * ROW_GROUP_ROWS;

/// Where cached files live: `$CARGO_TARGET_DIR/bench-data` or `target/bench-data` under the current
/// directory (cargo runs benches and examples from the package root).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"))
        .join("bench-data")
}

fn batch(schema: &Arc<Schema>, cats: &[String], start: usize, n: usize, rng: &mut SeededRng) -> RecordBatch {
    let ids: Vec<i64> = (start..start + n).map(|i| i as i64).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(Int64Array::from_iter_values(
            (0..n).map(|_| (rng.next_u64() % (1 << 40)) as i64),
        )),
        Arc::new(Int32Array::from_iter_values(
            (0..n).map(|_| (rng.next_u64() % 1000) as i32),
        )),
        Arc::new(Float64Array::from_iter_values((0..n).map(|_| rng.unit()))),
        Arc::new(Float32Array::from_iter_values((0..n).map(|_| rng.unit() as f32))),
        Arc::new(StringArray::from_iter_values(
            (0..n).map(|_| &cats[(rng.next_u64() % 1000) as usize]),
        )),
        Arc::new(TimestampMicrosecondArray::from_iter_values(
            ids.iter().map(|i| i * 1000),
        )),
    ];
    RecordBatch::try_new(schema.clone(), columns).expect("bench batch matches its schema")
}

fn write(path: &Path, rows: usize, props: WriterProperties) -> std::io::Result<()> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("a", DataType::Int64, false),
        Field::new("b", DataType::Int32, false),
        Field::new("c", DataType::Float64, false),
        Field::new("d", DataType::Float32, false),
        Field::new("s", DataType::Utf8, false),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), false),
    ]));
    let cats: Vec<String> = (0..1000).map(|i| format!("category-{i:04}")).collect();
    let tmp = path.with_extension("tmp");
    let mut w =
        ArrowWriter::try_new(File::create(&tmp)?, schema.clone(), Some(props)).map_err(std::io::Error::other)?;
    let mut rng = SeededRng::new(42);
    let mut start = 0;
    while start < rows {
        let n = ROW_GROUP_ROWS.min(rows - start);
        w.write(&batch(&schema, &cats, start, n, &mut rng))
            .map_err(std::io::Error::other)?;
        w.flush().map_err(std::io::Error::other)?;
        start += n;
    }
    w.close().map_err(std::io::Error::other)?;
    std::fs::rename(&tmp, path)
}

/// The two benchmark files with `rows` rows, generated on first use: `[plain, snappy]`.
pub fn bench_files(rows: usize) -> std::io::Result<[PathBuf; 2]> {
    let dir = cache_dir();
    std::fs::create_dir_all(&dir)?;
    let plain = dir.join(format!("plain-{rows}.parquet"));
    let snappy = dir.join(format!("snappy-{rows}.parquet"));
    let base = || WriterProperties::builder().set_max_row_group_row_count(Some(ROW_GROUP_ROWS));
    if !plain.exists() {
        eprintln!("writing {} ...", plain.display());
        write(
            &plain,
            rows,
            base()
                .set_compression(Compression::UNCOMPRESSED)
                .set_dictionary_enabled(false)
                .build(),
        )?;
    }
    if !snappy.exists() {
        eprintln!("writing {} ...", snappy.display());
        write(
            &snappy,
            rows,
            base()
                .set_compression(Compression::SNAPPY)
                .set_dictionary_enabled(true)
                .build(),
        )?;
    }
    Ok([plain, snappy])
}

/// Threads for our pipeline: `GPU_PARQUET_THREADS`, else 0 (one per core).
pub fn threads_from_env() -> usize {
    // The library's one reading of the environment, with its bounds and messages.
    match gpu_parquet::Settings::from_env(&[]) {
        Ok(s) => s.policy.threads,
        Err(e) => panic!("{e}"),
    }
}

/// Opens `path` and plans every column of every row group with the default options.
pub fn open_and_plan(path: &Path) -> gpu_parquet::Result<(ParquetSource, ReadPlan)> {
    let source = ParquetSource::open(path)?;
    let plan = ReadPlan::build(
        &source,
        &Projection::All,
        &RowGroupSelection::All,
        PlanOptions::default(),
    )?;
    Ok((source, plan))
}

/// Uncompressed column bytes of a file (the sum of its row groups' `total_byte_size`): the byte count
/// throughput is quoted in, as cuDF and pyarrow figures are.
pub fn uncompressed_bytes(path: &Path) -> u64 {
    let source = ParquetSource::open(path).expect("bench file opens");
    source
        .metadata()
        .row_groups()
        .iter()
        .map(|g| g.total_byte_size().max(0) as u64)
        .sum()
}

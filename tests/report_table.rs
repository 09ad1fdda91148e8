//! The `read` report table: the footnote explaining why the columns' reads do not add up to TOTAL's, and
//! busy time apportioned by bytes when one read serves several columns; the JSON form carries the same
//! numbers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Int32Array, StringArray};
use arrow::record_batch::RecordBatch;
use gpu_parquet::io::host::HostBackend;
use gpu_parquet::io::{IoBackend, IoLog, IoPath, TaskRecord};
use gpu_parquet::report::ReadReport;
use gpu_parquet::{ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};

/// Two row groups of three columns: `small` and `tail` (constant ints, a few bytes each) around `big`
/// (distinct 60-byte strings, about 120 KB per row group).
fn write_file(dir: &Path) -> PathBuf {
    let path = dir.join("layout.parquet");
    let n = 4000;
    let batch = RecordBatch::try_from_iter([
        ("small", Arc::new(Int32Array::from(vec![7; n])) as _),
        (
            "big",
            Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("{i:060}")))) as _,
        ),
        ("tail", Arc::new(Int32Array::from(vec![3; n])) as _),
    ])
    .expect("batch");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(n / 2))
        .build();
    let file = std::fs::File::create(&path).expect("create");
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    path
}

fn plan(source: &ParquetSource, projection: Projection, row_groups: RowGroupSelection, o: PlanOptions) -> ReadPlan {
    ReadPlan::build(source, &projection, &row_groups, o).expect("plan")
}

fn names(v: &[&str]) -> Projection {
    Projection::Names(v.iter().map(|s| s.to_string()).collect())
}

/// Everything coalesces into one span.
const WIDE: PlanOptions = PlanOptions {
    max_gap: 1 << 30,
    task_size: 16 << 20,
    align: false,
};

/// The cell under the header `column` in the row starting with `name`.
fn table_cell<T: std::str::FromStr>(table: &str, name: &str, column: &str) -> T {
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split("  ")
        .filter(|c| !c.is_empty())
        .collect();
    let col = header
        .iter()
        .position(|h| h.trim() == column)
        .unwrap_or_else(|| panic!("a '{column}' column"));
    let line = table.lines().find(|l| l.starts_with(name)).expect("the row");
    let cells: Vec<&str> = line.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
    cells[col]
        .parse()
        .unwrap_or_else(|_| panic!("a number under '{column}'"))
}

/// The `reads` cell of the host path in the row starting with `name`.
fn table_reads(table: &str, name: &str) -> u64 {
    table_cell(table, name, "host reads")
}

/// The `busy ms` cell in the row starting with `name`.
fn table_busy_ms(table: &str, name: &str) -> f64 {
    table_cell(table, name, "busy ms")
}

#[test]
fn a_task_spanning_chunks_gets_a_footnote_and_total_counts_each_read_once() {
    let dir = tempfile::tempdir().expect("scratch");
    let source = ParquetSource::open(write_file(dir.path())).expect("open");
    let plan = plan(&source, Projection::All, RowGroupSelection::All, WIDE);
    assert_eq!(plan.chunks.len(), 6);
    assert_eq!(
        plan.tasks.len(),
        1,
        "one task must span all six chunks: {:?}",
        plan.tasks
    );
    let fetched = HostBackend::new(2)
        .expect("backend")
        .fetch(&source, &plan)
        .expect("fetch");
    let log_reads: u64 = fetched.log.tasks.iter().map(|r| r.reads).sum();
    assert!(log_reads >= 1);
    let report = ReadReport::build("layout.parquet", &plan, &fetched.log);
    let table = report.to_table();

    assert_eq!(report.total.total_reads(), log_reads);
    assert_eq!(table_reads(&table, "TOTAL"), log_reads, "{table}");
    // Each column has two chunks in the one task: each counts the task's reads twice.
    let mut column_sum = 0;
    for c in ["small", "big", "tail"] {
        let r = table_reads(&table, c);
        assert_eq!(r, 2 * log_reads, "{table}");
        column_sum += r;
    }
    assert_eq!(report.read_sharing.shared_tasks, 1);
    assert_eq!(report.read_sharing.shared_reads, log_reads);
    assert_eq!(report.read_sharing.column_reads_sum, column_sum);
    let footnote = format!(
        "reads: 1 read task ({log_reads} read{}) served more than one column chunk; each column counts them once per \
chunk it carries, TOTAL counts each read once; so the columns' reads add up to {column_sum}, TOTAL's to {log_reads}",
        if log_reads == 1 { "" } else { "s" }
    );
    assert!(table.contains(&footnote), "no footnote {footnote:?} in\n{table}");
    // The footnote comes right under the table.
    let after_total = table
        .lines()
        .skip_while(|l| !l.starts_with("TOTAL"))
        .nth(1)
        .unwrap_or_default();
    assert!(after_total.starts_with("reads: "), "{table}");

    // JSON: the same numbers.
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
    assert_eq!(json["total"]["reads"]["host"], log_reads);
    assert_eq!(json["read_sharing"]["shared_tasks"], 1);
    assert_eq!(json["read_sharing"]["column_reads_sum"], column_sum);
    let json_sum: u64 = json["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| c["counts"]["reads"]["host"].as_u64().expect("reads"))
        .sum();
    assert_eq!(json_sum, column_sum);
    assert!(
        json["rules"]
            .as_str()
            .unwrap_or_default()
            .contains("the totals count it once"),
        "{}",
        json["rules"]
    );
}

#[test]
fn reads_of_gap_bytes_only_are_explained_too() {
    // `small` and `tail` of row group 0 with `big` between them read as a gap, cut into 4 KiB tasks:
    // most tasks carry gap bytes only.
    let dir = tempfile::tempdir().expect("scratch");
    let source = ParquetSource::open(write_file(dir.path())).expect("open");
    let o = PlanOptions {
        task_size: 4096,
        ..WIDE
    };
    let plan = plan(
        &source,
        names(&["small", "tail"]),
        RowGroupSelection::Indices(vec![0]),
        o,
    );
    let fetched = HostBackend::new(2)
        .expect("backend")
        .fetch(&source, &plan)
        .expect("fetch");
    let report = ReadReport::build("layout.parquet", &plan, &fetched.log);
    let table = report.to_table();
    let s = report.read_sharing;
    assert!(s.overhead_only_tasks > 10, "{s:?}");
    // The columns' sum as the rules say: TOTAL, plus shared reads once more per extra chunk, minus
    // overhead-only reads.
    let mut extra = 0;
    for rec in &fetched.log.tasks {
        let task = &plan.tasks[rec.task];
        let served = task
            .chunks
            .clone()
            .filter(|&c| !ReadPlan::overlap(task, &plan.chunks[c]).is_empty())
            .count() as u64;
        extra += rec.reads * served.saturating_sub(1);
    }
    assert_eq!(
        s.column_reads_sum,
        report.total.total_reads() + extra - s.overhead_only_reads
    );
    assert_eq!(
        s.column_reads_sum,
        table_reads(&table, "small") + table_reads(&table, "tail")
    );
    assert!(
        table.contains("carried only gap or alignment bytes; only TOTAL counts them"),
        "{table}"
    );
    assert!(table.contains(&format!(
        "add up to {}, TOTAL's to {}",
        s.column_reads_sum,
        report.total.total_reads()
    )));
}

#[test]
fn no_footnote_when_every_task_serves_one_chunk() {
    let dir = tempfile::tempdir().expect("scratch");
    let source = ParquetSource::open(write_file(dir.path())).expect("open");
    let plan = plan(&source, names(&["big"]), RowGroupSelection::All, PlanOptions::default());
    let fetched = HostBackend::new(2)
        .expect("backend")
        .fetch(&source, &plan)
        .expect("fetch");
    let report = ReadReport::build("layout.parquet", &plan, &fetched.log);
    let table = report.to_table();
    assert_eq!(report.read_sharing.shared_tasks, 0);
    assert_eq!(report.read_sharing.overhead_only_tasks, 0);
    assert_eq!(table_reads(&table, "big"), table_reads(&table, "TOTAL"));
    assert!(!table.contains("reads: "), "{table}");
    assert!(!table.contains("busy: "), "{table}");
}

#[test]
fn one_task_serving_two_columns_splits_its_time_by_bytes() {
    let dir = tempfile::tempdir().expect("scratch");
    let source = ParquetSource::open(write_file(dir.path())).expect("open");
    let plan = plan(
        &source,
        names(&["small", "big"]),
        RowGroupSelection::Indices(vec![0]),
        WIDE,
    );
    assert_eq!(plan.tasks.len(), 1, "{:?}", plan.tasks);
    let task = &plan.tasks[0];
    // A synthetic log with a known interval: the one task took 100 ms.
    let took = Duration::from_millis(100);
    let log = IoLog {
        backend: "synthetic".into(),
        tasks: vec![TaskRecord {
            task: 0,
            path: IoPath::Host,
            reason: Arc::from("test"),
            reads: 1,
            bytes: task.len,
            start: Duration::ZERO,
            end: took,
        }],
        wall: took,
        notes: Vec::new(),
        cufile_stats: None,
    };
    let report = ReadReport::build("layout.parquet", &plan, &log);
    let col = |name: &str| report.columns.iter().find(|c| c.column_path == name).expect("column");
    let (small, big) = (col("small"), col("big"));
    assert!(big.counts.total_bytes() > 50 * small.counts.total_bytes());
    // Each column's busy time is its share of the task's bytes of the task's 100 ms.
    for c in [small, big] {
        let want = took.as_secs_f64() * c.counts.total_bytes() as f64 / task.len as f64;
        assert!(
            (c.busy.as_secs_f64() - want).abs() < 1e-6,
            "{}: busy {:?}, want {want} s",
            c.column_path,
            c.busy
        );
    }
    assert!(big.busy > small.busy * 50);
    assert!(small.busy + big.busy <= took);
    // Both read at the task's rate.
    assert!(
        (big.gbps - small.gbps).abs() < 1e-3 * big.gbps,
        "{} vs {}",
        big.gbps,
        small.gbps
    );

    let table = report.to_table();
    let (ts, tb) = (table_busy_ms(&table, "small"), table_busy_ms(&table, "big"));
    assert!((tb - big.busy.as_secs_f64() * 1e3).abs() < 1e-3, "{table}");
    assert!((ts - small.busy.as_secs_f64() * 1e3).abs() < 1e-3, "{table}");
    assert!(tb > ts, "{table}");
    assert!(
        table.contains("busy: a read task's time is split between the column chunks it served"),
        "{table}"
    );

    let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
    for c in json["columns"].as_array().expect("columns") {
        let mine = col(c["column_path"].as_str().expect("path"));
        assert_eq!(c["busy"].as_f64(), Some(mine.busy.as_secs_f64()));
    }
    assert!(json["rules"].as_str().unwrap_or_default().contains("apportioned"));
}

/// The reader's tuning is in the JSON report always, and in the table as one line only where it
/// differs from the default; `Settings` reads it from its variables, naming a bad value.
#[test]
fn tuning_is_reported_where_it_differs_from_the_default() {
    use gpu_parquet::{BackendKind, Reader, Settings, SnappyDecoders, Tuning};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_file(dir.path());
    let read = |tuning: Option<Tuning>| {
        let mut b = Reader::builder(&path).with_backend(BackendKind::Host);
        if let Some(t) = tuning {
            b = b.with_tuning(t);
        }
        b.build().expect("build").read().expect("read").report().clone()
    };
    let plain = read(None);
    assert!(!plain.to_table().contains("tuning:"), "{}", plain.to_table());
    let json: serde_json::Value = serde_json::from_str(&plain.to_json()).expect("json");
    assert_eq!(json["tuning"]["snappy"], "auto");
    assert_eq!(json["tuning"]["trace"], false);

    let tuned = Tuning {
        snappy: SnappyDecoders::Unsnap,
        ..Tuning::default()
    };
    let report = read(Some(tuned));
    let table = report.to_table();
    let lines: Vec<&str> = table.lines().filter(|l| l.starts_with("tuning:")).collect();
    assert_eq!(lines, ["tuning: GPU_PARQUET_SNAPPY=gp_unsnap"]);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
    assert_eq!(json["tuning"]["snappy"], "gp_unsnap");

    // Through Settings, as the CLI and Python build readers.
    let env = |k: &str| (k == "GPU_PARQUET_SNAPPY").then(|| "gp_wsnap".to_string());
    let settings = Settings::from_lookup(env, &[]).expect("settings");
    assert_eq!(settings.tuning.snappy, SnappyDecoders::Wide);
    assert_eq!(settings.decoder_options().snappy, SnappyDecoders::Wide);
    let report = Reader::builder(&path)
        .with_settings(&settings)
        .with_backend(BackendKind::Host)
        .build()
        .expect("build")
        .read()
        .expect("read")
        .report()
        .clone();
    assert!(report.to_table().contains("tuning: GPU_PARQUET_SNAPPY=gp_wsnap\n"));
    let bad = |k: &str| (k == "GPU_PARQUET_SNAPPY").then(|| "fastest".to_string());
    let err = Settings::from_lookup(bad, &[]).expect_err("a bad decoder name");
    assert!(err.to_string().contains("GPU_PARQUET_SNAPPY=fastest"), "{err}");
}

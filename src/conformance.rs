//! The backend conformance suite: checks every [`IoBackend`] must pass, whatever its path.
//!
//! Like object_store's `integration.rs`, the checks are plain functions generic over the backend, so
//! the host backend runs them in `tests/host_backend.rs` and the GPU backends run them on the GPU
//! machine. They need no test data and no dev-dependencies: [`write_test_files`] writes the Parquet
//! files they read into a scratch directory the caller provides.
//!
//! What is checked:
//! - bytes: for many plans (full file, column subset, row-group subset, one span over big gaps, tiny
//!   tasks, 4 KiB-aligned tasks, 1-byte tasks) every task's destination bytes equal the file's bytes;
//! - the log: one record per task, `bytes == task.len`, `reads >= 1`, `start <= end`, and a
//!   [`ReadReport`] that attributes exactly each column's chunk bytes to it;
//! - short reads: a file truncated after planning gives [`Error::ShortRead`] naming the file;
//! - I/O errors: reading through a handle on a directory gives [`Error::Io`];
//! - empty plans (no columns, no row groups, a file with zero row groups) fetch an empty buffer;
//! - stepped fetches ([`IoBackend::fetch_steps`]): each step once, with the file's bytes and a
//!   consistent log, `admit` asked in order and obeyed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, ListArray, StringArray, StructArray};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, Fields, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::error::Error;
use crate::io::{DestBuffer, IoBackend};
use crate::metadata::ParquetSource;
use crate::plan::{ChunkRange, PlanOptions, Projection, ReadPlan, RowGroupSelection};
use crate::report::ReadReport;

/// Outcome of one check: `Err` carries a message naming the check, backend and plan.
pub(crate) type CheckResult = Result<(), String>;

/// The files the suite reads, written by [`write_test_files`].
#[derive(Debug, Clone)]
pub struct TestFiles {
    /// Flat and nested columns, several row groups, uncompressed: chunk bytes are easy to compare.
    pub mixed: PathBuf,
    /// The same schema, snappy-compressed with dictionaries, fewer rows per row group, pages of 100
    /// rows (with the page index, as every file here).
    pub snappy: PathBuf,
    /// A valid file with zero row groups.
    pub empty: PathBuf,
}

/// Rows per row group of [`TestFiles::mixed`].
pub(crate) const MIXED_ROWS_PER_GROUP: usize = 3000;
/// Row groups of [`TestFiles::mixed`].
pub const MIXED_ROW_GROUPS: usize = 4;

/// A small deterministic generator (xorshift64*), so the suite needs no `rand`.
///
/// The same seed gives the same sequence on every platform and in every version: the suite's files,
/// the committed `testdata/` files (`examples/make_testdata.rs`), the benchmark files and the damage
/// tests' corruptions all depend on it, and a failure reproduces from its printed seed. A seed of 0
/// gives only zeros; callers that take arbitrary seeds pass `seed | 1`.
#[derive(Debug, Clone)]
pub struct SeededRng(u64);

impl SeededRng {
    /// A generator whose state starts at `seed` (used as is).
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `0..n` (`0` when `n` is 0), from one [`next_u64`](Self::next_u64).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A float in `[0, 1)` from the top 53 bits of one [`next_u64`](Self::next_u64).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn schema() -> Arc<Schema> {
    let point = Fields::from(vec![
        Field::new("x", DataType::Float64, false),
        Field::new("y", DataType::Float64, true),
    ]);
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("small", DataType::Int32, true),
        Field::new("value", DataType::Float64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("flag", DataType::Boolean, true),
        Field::new("point", DataType::Struct(point), true),
        Field::new(
            "tags",
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            true,
        ),
    ]))
}

fn batch(schema: &Arc<Schema>, start: usize, rows: usize, rng: &mut SeededRng) -> Result<RecordBatch, String> {
    let r = |rng: &mut SeededRng| rng.next_u64();
    let id: Vec<i64> = (start..start + rows).map(|i| i as i64).collect();
    let small: Vec<Option<i32>> = (0..rows)
        .map(|_| {
            let v = r(rng);
            (v % 7 != 0).then_some((v % 1000) as i32)
        })
        .collect();
    let value: Vec<Option<f64>> = (0..rows)
        .map(|_| {
            let v = r(rng);
            (v % 11 != 0).then_some((v >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect();
    let name: Vec<Option<String>> = (0..rows)
        .map(|_| {
            let v = r(rng);
            (v % 13 != 0).then(|| format!("name-{:03}", v % 300))
        })
        .collect();
    let flag: Vec<Option<bool>> = (0..rows)
        .map(|_| {
            let v = r(rng);
            (v % 5 != 0).then_some(v & 1 == 1)
        })
        .collect();
    let xs: Vec<f64> = (0..rows).map(|i| (start + i) as f64 * 0.5).collect();
    let ys: Vec<Option<f64>> = (0..rows)
        .map(|_| {
            let v = r(rng);
            (v % 3 != 0).then_some((v % 10_000) as f64)
        })
        .collect();
    let DataType::Struct(point_fields) = schema.field(5).data_type().clone() else {
        return Err("conformance schema: field 5 is not a struct".into());
    };
    let point = StructArray::try_new(
        point_fields,
        vec![
            Arc::new(Float64Array::from(xs)) as ArrayRef,
            Arc::new(Float64Array::from(ys)) as ArrayRef,
        ],
        None,
    )
    .map_err(|e| e.to_string())?;
    let mut lens = Vec::with_capacity(rows);
    let mut items = Vec::new();
    for _ in 0..rows {
        let n = (r(rng) % 4) as usize;
        lens.push(n);
        for _ in 0..n {
            let v = r(rng);
            items.push((v % 9 != 0).then_some((v % 100) as i32));
        }
    }
    let tags = ListArray::try_new(
        Arc::new(Field::new("item", DataType::Int32, true)),
        OffsetBuffer::from_lengths(lens),
        Arc::new(Int32Array::from(items)),
        None,
    )
    .map_err(|e| e.to_string())?;
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(id)),
            Arc::new(Int32Array::from(small)),
            Arc::new(Float64Array::from(value)),
            Arc::new(StringArray::from(name)),
            Arc::new(BooleanArray::from(flag)),
            Arc::new(point),
            Arc::new(tags),
        ],
    )
    .map_err(|e| e.to_string())
}

fn write_file(
    path: &Path,
    row_groups: usize,
    rows_per_group: usize,
    props: WriterProperties,
    seed: u64,
) -> Result<(), String> {
    let schema = schema();
    let file = File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(|e| e.to_string())?;
    let mut rng = SeededRng::new(seed | 1);
    for g in 0..row_groups {
        let b = batch(&schema, g * rows_per_group, rows_per_group, &mut rng)?;
        w.write(&b).map_err(|e| e.to_string())?;
        // One row group per batch, whatever the writer's own limits.
        w.flush().map_err(|e| e.to_string())?;
    }
    w.close()
        .map_err(|e| format!("cannot finish {}: {e}", path.display()))?;
    Ok(())
}

/// Writes the suite's Parquet files into `dir` (which must exist).
pub fn write_test_files(dir: &Path) -> Result<TestFiles, String> {
    let mixed = dir.join("conformance-mixed.parquet");
    let snappy = dir.join("conformance-snappy.parquet");
    let empty = dir.join("conformance-empty.parquet");
    let plain = WriterProperties::builder()
        .set_compression(Compression::UNCOMPRESSED)
        .set_dictionary_enabled(false)
        .build();
    write_file(&mixed, MIXED_ROW_GROUPS, MIXED_ROWS_PER_GROUP, plain.clone(), 7)?;
    // Pages of 100 rows, so that page-level plans read parts of chunks.
    let snappy_props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(true)
        .set_data_page_row_count_limit(100)
        .set_write_batch_size(100)
        .build();
    write_file(&snappy, 3, 1000, snappy_props, 11)?;
    write_file(&empty, 0, 0, plain, 13)?;
    Ok(TestFiles { mixed, snappy, empty })
}

fn open(path: &Path) -> Result<ParquetSource, String> {
    ParquetSource::open(path).map_err(|e| format!("cannot open test file: {e}"))
}

/// Fetches `plan` with `backend` and checks the destination bytes against the file and the log
/// against the plan. `what` names the plan in failure messages.
pub(crate) fn check_plan<B: IoBackend>(
    backend: &B,
    source: &ParquetSource,
    plan: &ReadPlan,
    what: &str,
) -> CheckResult {
    let ctx = |m: String| format!("[{} / {what}] {m}", backend.name());
    let file = std::fs::read(source.path()).map_err(|e| ctx(format!("cannot read the file back: {e}")))?;
    let fetched = backend
        .fetch(source, plan)
        .map_err(|e| ctx(format!("fetch failed: {e}")))?;
    if fetched.buffer.len() != plan.dest_len {
        return Err(ctx(format!(
            "buffer is {} bytes, the plan says {}",
            fetched.buffer.len(),
            plan.dest_len
        )));
    }
    let buf = fetched
        .buffer
        .to_host()
        .map_err(|e| ctx(format!("cannot copy the buffer to the host: {e}")))?;
    if buf.len() as u64 != plan.dest_len {
        return Err(ctx(format!(
            "to_host gave {} bytes, expected {}",
            buf.len(),
            plan.dest_len
        )));
    }
    for (i, t) in plan.tasks.iter().enumerate() {
        let (d, o, n) = (t.dest_offset as usize, t.offset as usize, t.len as usize);
        let (Some(got), Some(want)) = (buf.get(d..d + n), file.get(o..o + n)) else {
            return Err(ctx(format!("task {i} {t:?} lies outside the buffer or the file")));
        };
        if got != want {
            let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
            return Err(ctx(format!(
                "task {i} (file [{}, {})): byte {} differs from the file",
                t.offset,
                t.offset + t.len,
                t.offset as usize + at
            )));
        }
    }
    for c in &plan.chunks {
        let (d, o, n) = (c.dest_offset as usize, c.offset as usize, c.len as usize);
        if buf.get(d..d + n) != file.get(o..o + n) {
            return Err(ctx(format!(
                "column '{}' row group {}: chunk bytes differ from the file",
                c.column_path, c.row_group
            )));
        }
    }
    check_log(plan, &fetched.log, source).map_err(ctx)
}

/// Checks that `log` is consistent with `plan`: one record per task, bytes equal to the task's
/// length, at least one read, `start <= end`, and a report that gives each column exactly its chunks'
/// bytes.
pub(crate) fn check_log(plan: &ReadPlan, log: &crate::io::IoLog, source: &ParquetSource) -> CheckResult {
    if log.tasks.len() != plan.tasks.len() {
        return Err(format!(
            "log has {} task records, the plan {} tasks",
            log.tasks.len(),
            plan.tasks.len()
        ));
    }
    let mut seen = vec![false; plan.tasks.len()];
    for rec in &log.tasks {
        let Some(task) = plan.tasks.get(rec.task) else {
            return Err(format!("record names task {}, which the plan does not have", rec.task));
        };
        if std::mem::replace(&mut seen[rec.task], true) {
            return Err(format!("task {} has more than one record", rec.task));
        }
        if rec.bytes != task.len {
            return Err(format!(
                "task {}: record says {} bytes, task is {}",
                rec.task, rec.bytes, task.len
            ));
        }
        if rec.reads == 0 {
            return Err(format!("task {}: record counts no read", rec.task));
        }
        if rec.start > rec.end {
            return Err(format!(
                "task {}: starts at {:?} after it ends at {:?}",
                rec.task, rec.start, rec.end
            ));
        }
        if rec.reason.is_empty() {
            return Err(format!("task {}: no reason given for path {}", rec.task, rec.path));
        }
    }
    let report = ReadReport::build(&source.path().display().to_string(), plan, log);
    for col in &report.columns {
        let want: u64 = plan
            .chunks
            .iter()
            .filter(|c| c.column == col.column)
            .map(|c| c.len)
            .sum();
        if col.counts.total_bytes() != want {
            return Err(format!(
                "report gives column '{}' {} bytes, its chunks hold {want}",
                col.column_path,
                col.counts.total_bytes()
            ));
        }
    }
    for (c, r) in plan.chunks.iter().zip(&report.chunks) {
        if r.counts.total_bytes() != c.len {
            return Err(format!(
                "report gives column '{}' row group {} {} bytes, the chunk is {}",
                c.column_path,
                c.row_group,
                r.counts.total_bytes(),
                c.len
            ));
        }
    }
    let read: u64 = plan.tasks.iter().map(|t| t.len).sum();
    if report.total.total_bytes() != read {
        return Err(format!(
            "report total {} bytes, the tasks read {read}",
            report.total.total_bytes()
        ));
    }
    if report.useful_bytes + report.overhead_bytes != read {
        return Err(format!(
            "useful {} + overhead {} != bytes read {read}",
            report.useful_bytes, report.overhead_bytes
        ));
    }
    Ok(())
}

fn plan(
    source: &ParquetSource,
    projection: Projection,
    row_groups: RowGroupSelection,
    options: PlanOptions,
) -> Result<ReadPlan, String> {
    ReadPlan::build(source, &projection, &row_groups, options).map_err(|e| format!("cannot plan: {e}"))
}

/// (a) + (b): bytes and log for a family of plans over `path`.
pub fn check_plans<B: IoBackend>(backend: &B, path: &Path) -> CheckResult {
    let source = open(path)?;
    let n_cols = source.metadata().file_metadata().schema_descr().num_columns();
    let n_groups = source.metadata().num_row_groups();
    let d = PlanOptions::default();
    let full = plan(&source, Projection::All, RowGroupSelection::All, d)?;
    if full.tasks.is_empty() {
        return Err(format!("{}: the full plan has no task", path.display()));
    }
    check_plan(backend, &source, &full, "full file")?;

    // Every other leaf: the gaps between the chosen chunks are other columns' bytes.
    let subset: Vec<usize> = (0..n_cols).step_by(2).collect();
    let no_gap = PlanOptions { max_gap: 0, ..d };
    let p = plan(
        &source,
        Projection::Leaves(subset.clone()),
        RowGroupSelection::All,
        no_gap,
    )?;
    check_plan(backend, &source, &p, "column subset, no coalescing")?;

    let p = plan(
        &source,
        Projection::Names(vec!["point".into(), "name".into()]),
        RowGroupSelection::All,
        d,
    )?;
    check_plan(backend, &source, &p, "columns by name (nested struct)")?;

    let groups: Vec<usize> = (0..n_groups).rev().step_by(2).collect();
    let p = plan(&source, Projection::All, RowGroupSelection::Indices(groups), d)?;
    check_plan(backend, &source, &p, "row-group subset, reversed")?;

    let big_gap = PlanOptions {
        max_gap: source.len(),
        ..d
    };
    let p = plan(
        &source,
        Projection::Leaves(subset.clone()),
        RowGroupSelection::All,
        big_gap,
    )?;
    if p.spans.len() != 1 {
        return Err(format!("big-gap plan should be one span, has {}", p.spans.len()));
    }
    if p.dest_len <= p.useful_bytes() {
        return Err("big-gap plan reads no gap bytes; the check would prove nothing".into());
    }
    check_plan(backend, &source, &p, "column subset, one span over big gaps")?;

    let tiny = PlanOptions { task_size: 997, ..d };
    let p = plan(&source, Projection::All, RowGroupSelection::All, tiny)?;
    if p.tasks.len() < 20 {
        return Err(format!("tiny-task plan has only {} tasks", p.tasks.len()));
    }
    check_plan(backend, &source, &p, "tiny tasks (997 bytes)")?;

    for (task_size, max_gap) in [(8192, 0), (4096, 1 << 20), (d.task_size, d.max_gap)] {
        let aligned = PlanOptions {
            task_size,
            max_gap,
            align: true,
        };
        let p = plan(
            &source,
            Projection::Leaves(subset.clone()),
            RowGroupSelection::All,
            aligned,
        )?;
        check_plan(
            backend,
            &source,
            &p,
            &format!("aligned, task_size {task_size}, max_gap {max_gap}"),
        )?;
        let p = plan(&source, Projection::All, RowGroupSelection::All, aligned)?;
        check_plan(
            backend,
            &source,
            &p,
            &format!("aligned full file, task_size {task_size}"),
        )?;
    }

    // Page-level plans (a filter's surviving rows): chunks read as their dictionary pages and runs
    // of data pages, alone, coalesced over the pages left out, aligned, in tiny tasks.
    let rows: std::collections::BTreeMap<usize, Vec<std::ops::Range<u64>>> = (0..n_groups)
        .filter_map(|g| {
            let n = source.metadata().row_group(g).num_rows().max(0) as u64;
            (n >= 8).then(|| (g, vec![n / 5..n / 4, n / 2..n / 2 + 1]))
        })
        .collect();
    let mut pieces_smaller = false;
    for (options, what) in [
        (no_gap, "page pieces"),
        (
            PlanOptions { max_gap: 1 << 20, ..d },
            "page pieces, coalesced over gaps",
        ),
        (
            PlanOptions {
                task_size: 4096,
                max_gap: 0,
                align: true,
            },
            "page pieces, aligned",
        ),
        (tiny, "page pieces, tiny tasks"),
    ] {
        let p = ReadPlan::build_paged(&source, &Projection::All, &RowGroupSelection::All, options, &rows)
            .map_err(|e| format!("cannot plan pages: {e}"))?;
        pieces_smaller |= p
            .chunks
            .iter()
            .any(|c| c.pages.as_ref().is_some_and(|r| r.chunk.end - r.chunk.start > c.len));
        check_plan(backend, &source, &p, what)?;
    }
    let pages_per_chunk = source
        .metadata()
        .page_index()
        .and_then(|i| i.offset_index(0, 0))
        .map_or(0, |o| o.page_locations().len());
    if pages_per_chunk > 2 && !pieces_smaller {
        return Err(format!("{}: no page-level plan read part of a chunk", path.display()));
    }

    // Tiny hand-made plans: one byte of the first chunk, and three 1-byte tasks from its middle.
    let first = full
        .chunks
        .iter()
        .find(|c| c.len >= 8)
        .ok_or("no chunk of 8 bytes or more")?;
    let one = |offset: u64, len: u64| ChunkRange {
        row_group: first.row_group,
        column: first.column,
        column_path: first.column_path.clone(),
        offset,
        len,
        dest_offset: 0,
        pages: None,
    };
    let p = ReadPlan::from_chunks(
        vec![one(first.offset, 1)],
        vec![first.column],
        vec![first.row_group],
        source.len(),
        d,
    );
    check_plan(backend, &source, &p, "a single 1-byte task")?;
    let p = ReadPlan::from_chunks(
        vec![one(first.offset + 3, 3)],
        vec![first.column],
        vec![first.row_group],
        source.len(),
        PlanOptions { task_size: 1, ..d },
    );
    if p.tasks.len() != 3 {
        return Err(format!("3-byte plan with task_size 1 has {} tasks", p.tasks.len()));
    }
    check_plan(backend, &source, &p, "three 1-byte tasks")?;
    Ok(())
}

/// (c): a file truncated after planning must give [`Error::ShortRead`] naming it, never data.
///
/// Copies `path` into `scratch` (the copy is truncated, the original is left alone).
pub fn check_short_read<B: IoBackend>(backend: &B, path: &Path, scratch: &Path) -> CheckResult {
    let name = backend.name();
    // Cut one byte short of the column data's end, then inside the first chunk: both must fail.
    for i in 0..2 {
        let copy = scratch.join(format!("conformance-truncated-{}-{i}.parquet", name.replace('/', "_")));
        std::fs::copy(path, &copy).map_err(|e| format!("cannot copy {}: {e}", path.display()))?;
        let source = open(&copy)?;
        let plan = plan(&source, Projection::All, RowGroupSelection::All, PlanOptions::default())?;
        let last_end = plan.chunks.iter().map(|c| c.offset + c.len).max().unwrap_or(0);
        let first = plan.chunks.first().map(|c| c.offset + c.len / 2).unwrap_or(0);
        let keep = if i == 0 { last_end.saturating_sub(1) } else { first };
        if keep == 0 || keep >= last_end {
            return Err(format!("cannot truncate at {keep}: column data ends at {last_end}"));
        }
        std::fs::OpenOptions::new()
            .write(true)
            .open(&copy)
            .and_then(|f| f.set_len(keep))
            .map_err(|e| format!("cannot truncate {}: {e}", copy.display()))?;
        let result = backend.fetch(&source, &plan);
        let _ = std::fs::remove_file(&copy);
        match result {
            Err(Error::ShortRead { location, .. }) if location.file == copy => {}
            Err(Error::ShortRead { location, .. }) => {
                return Err(format!(
                    "[{name}] short read names {}, not {}",
                    location.file.display(),
                    copy.display()
                ));
            }
            Err(e) => {
                return Err(format!(
                    "[{name}] truncated to {keep} bytes: expected a short read, got: {e}"
                ));
            }
            Ok(_) => {
                return Err(format!(
                    "[{name}] truncated to {keep} bytes, yet the fetch returned data"
                ));
            }
        }
    }
    Ok(())
}

/// (d): an OS error on read must give [`Error::Io`]: the source's handle is opened on a directory, so
/// every `pread` fails with `EISDIR`.
pub(crate) fn check_io_error<B: IoBackend>(backend: &B, path: &Path, scratch: &Path) -> CheckResult {
    let name = backend.name();
    let good = open(path)?;
    let dir = File::open(scratch).map_err(|e| format!("cannot open {}: {e}", scratch.display()))?;
    let source = ParquetSource::from_parts(scratch.to_path_buf(), dir, good.len(), good.metadata().clone())
        .map_err(|e| format!("from_parts refused the metadata: {e}"))?;
    let plan = plan(&source, Projection::All, RowGroupSelection::All, PlanOptions::default())?;
    match backend.fetch(&source, &plan) {
        Err(Error::Io { location, .. }) if location.file == scratch => Ok(()),
        Err(Error::Io { location, .. }) => Err(format!(
            "[{name}] I/O error names {}, not {}",
            location.file.display(),
            scratch.display()
        )),
        Err(e) => Err(format!(
            "[{name}] reading through a directory handle: expected Error::Io, got: {e}"
        )),
        Ok(_) => Err(format!("[{name}] reading through a directory handle returned data")),
    }
}

/// (e): plans with nothing to read fetch an empty buffer and log no task.
pub(crate) fn check_empty_plans<B: IoBackend>(backend: &B, files: &TestFiles) -> CheckResult {
    let name = backend.name();
    let source = open(&files.mixed)?;
    let empty_file = open(&files.empty)?;
    if empty_file.metadata().num_row_groups() != 0 {
        return Err("the empty test file has row groups".into());
    }
    let d = PlanOptions::default();
    let plans = [
        (
            "no columns",
            &source,
            plan(&source, Projection::Leaves(vec![]), RowGroupSelection::All, d)?,
        ),
        (
            "no row groups",
            &source,
            plan(&source, Projection::All, RowGroupSelection::Indices(vec![]), d)?,
        ),
        (
            "file with zero row groups",
            &empty_file,
            plan(&empty_file, Projection::All, RowGroupSelection::All, d)?,
        ),
    ];
    for (what, src, p) in plans {
        if !p.tasks.is_empty() || p.dest_len != 0 {
            return Err(format!("{what}: plan is not empty: {} tasks", p.tasks.len()));
        }
        let f = backend
            .fetch(src, &p)
            .map_err(|e| format!("[{name} / {what}] fetch failed: {e}"))?;
        if f.buffer.len() != 0 || !f.log.tasks.is_empty() {
            return Err(format!(
                "[{name} / {what}] expected nothing, got {} bytes and {} records",
                f.buffer.len(),
                f.log.tasks.len()
            ));
        }
        check_log(&p, &f.log, src).map_err(|m| format!("[{name} / {what}] {m}"))?;
    }
    Ok(())
}

/// (f): `fetch_into` fills a reused destination (larger than needed) with the same bytes as `fetch`,
/// twice in a row, and refuses one that is too small without writing past it.
pub fn check_fetch_into<B: IoBackend>(backend: &B, path: &Path) -> CheckResult {
    let name = backend.name();
    let source = open(path)?;
    let p = plan(&source, Projection::All, RowGroupSelection::All, PlanOptions::default())?;
    let want = backend
        .fetch(&source, &p)
        .and_then(|f| f.buffer.to_host())
        .map_err(|e| format!("[{name}] fetch failed: {e}"))?;
    let mut dest = backend
        .alloc(p.dest_len + 4096)
        .map_err(|e| format!("[{name}] alloc failed: {e}"))?;
    for round in 0..2 {
        let log = backend
            .fetch_into(&source, &p, &mut dest)
            .map_err(|e| format!("[{name}] fetch_into (round {round}) failed: {e}"))?;
        check_log(&p, &log, &source).map_err(|m| format!("[{name}] fetch_into: {m}"))?;
        let got = dest.to_host().map_err(|e| format!("[{name}] copy back failed: {e}"))?;
        if got.get(..want.len()) != Some(&want[..]) {
            return Err(format!(
                "[{name}] fetch_into (round {round}) gave other bytes than fetch"
            ));
        }
    }
    if p.dest_len > 0 {
        let mut small = backend
            .alloc(p.dest_len - 1)
            .map_err(|e| format!("[{name}] alloc failed: {e}"))?;
        if backend.fetch_into(&source, &p, &mut small).is_ok() {
            return Err(format!("[{name}] fetch_into accepted a destination one byte too small"));
        }
    }
    Ok(())
}

/// [`IoBackend::fetch_steps`]: one plan per row group (every column) fetched as steps; `admit` is
/// asked in order, each step is delivered once with the file's bytes and a log consistent with its
/// plan; `admit` saying false ends the fetch, delivering no step after it.
pub(crate) fn check_fetch_steps<B: IoBackend>(backend: &B, path: &Path) -> CheckResult {
    let name = backend.name();
    let source = open(path)?;
    let file = std::fs::read(path).map_err(|e| format!("[{name}] cannot read the file back: {e}"))?;
    let plans: Vec<Arc<ReadPlan>> = (0..source.metadata().num_row_groups())
        .map(|rg| {
            plan(
                &source,
                Projection::All,
                RowGroupSelection::Indices(vec![rg]),
                PlanOptions::default(),
            )
            .map(Arc::new)
        })
        .collect::<Result<_, _>>()?;
    for stop_at in [plans.len(), 1] {
        let admitted = std::sync::Mutex::new(Vec::new());
        let delivered = std::sync::Mutex::new(Vec::<(usize, Result<Vec<u8>, String>)>::new());
        let mut admit = |k: usize| {
            admitted.lock().unwrap_or_else(|p| p.into_inner()).push(k);
            k < stop_at
        };
        let deliver = |k: usize, r: crate::Result<crate::io::StepFetched<B::Buffer>>| {
            let r = r.map_err(|e| e.to_string()).and_then(|f| {
                check_log(&plans[k], &f.log, &source)?;
                f.buffer.to_host().map_err(|e| e.to_string())
            });
            delivered.lock().unwrap_or_else(|p| p.into_inner()).push((k, r));
        };
        backend.fetch_steps(&source, &plans, &mut admit, &deliver);
        let admitted = admitted.into_inner().unwrap_or_else(|p| p.into_inner());
        let want: Vec<usize> = (0..plans.len().min(stop_at + 1)).collect();
        if admitted != want {
            return Err(format!(
                "[{name}] fetch_steps asked admit for {admitted:?}, expected {want:?}"
            ));
        }
        let mut delivered = delivered.into_inner().unwrap_or_else(|p| p.into_inner());
        delivered.sort_by_key(|d| d.0);
        let keys: Vec<usize> = delivered.iter().map(|d| d.0).collect();
        let want: Vec<usize> = (0..plans.len().min(stop_at)).collect();
        if keys != want {
            return Err(format!(
                "[{name}] fetch_steps delivered steps {keys:?}, expected {want:?}"
            ));
        }
        for (k, r) in delivered {
            let buf = r.map_err(|e| format!("[{name}] step {k}: {e}"))?;
            for c in &plans[k].chunks {
                let (d, o, n) = (c.dest_offset as usize, c.offset as usize, c.len as usize);
                if buf.get(d..d + n) != file.get(o..o + n) {
                    return Err(format!(
                        "[{name}] step {k}: column '{}' row group {}: chunk bytes differ from the file",
                        c.column_path, c.row_group
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Writes the test files into `scratch` (which must exist) and runs every check against `backend`.
pub fn run_all<B: IoBackend>(backend: &B, scratch: &Path) -> Result<(), String> {
    let files = write_test_files(scratch)?;
    check_fetch_into(backend, &files.mixed)?;
    check_plans(backend, &files.mixed)?;
    check_plans(backend, &files.snappy)?;
    check_fetch_steps(backend, &files.mixed)?;
    check_short_read(backend, &files.mixed, scratch)?;
    check_io_error(backend, &files.mixed, scratch)?;
    check_empty_plans(backend, &files)?;
    Ok(())
}

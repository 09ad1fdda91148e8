//! Conformance over the parquet-testing corpus: our pipeline (open, plan, host fetch, decode from the
//! fetched bytes only) against arrow-rs's own full read of the same file, value for value.
//!
//! Also: every `bad_data` file, truncated and randomly corrupted copies must give an error (or, where
//! arrow-rs reads the damaged file, the same values), never a panic or a hang; projections fetch
//! exactly the chunks they need.
//!
//! The corpus is found through `GPU_PARQUET_TESTING`, else `../shared/parquet-testing` from the current
//! directory, else from `CARGO_MANIFEST_DIR/..`; when it is absent the tests say so and pass.

use std::fs::File;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use gpu_parquet::conformance::SeededRng;
use gpu_parquet::decode::host::decode_fetched;
use gpu_parquet::io::host::HostBackend;
use gpu_parquet::io::{IoBackend, IoLog};
use gpu_parquet::{Error, Location, ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::metadata::ParquetMetaDataReader;

mod common;
use common::{collect, corpus, files_under, host_fetch, reference, regions};

/// Longest one case may take before the test calls it a hang.
const CASE_TIMEOUT: Duration = Duration::from_secs(10);

fn is_parquet(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "parquet")
}

/// Runs `f` on its own thread; fails the test if it panics or takes longer than `timeout`.
fn bounded<T: Send + 'static>(what: &str, timeout: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    spawn_bounded(what, timeout, f).wait()
}

/// A case running on its own thread.
struct Pending<T> {
    what: String,
    timeout: Duration,
    rx: mpsc::Receiver<T>,
    handle: std::thread::JoinHandle<()>,
}

fn spawn_bounded<T: Send + 'static>(
    what: &str,
    timeout: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Pending<T> {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(format!("case {what}"))
        .spawn(move || {
            let _ = tx.send(f());
        })
        .expect("spawn a case thread");
    Pending {
        what: what.to_string(),
        timeout,
        rx,
        handle,
    }
}

impl<T> Pending<T> {
    /// The case's result; fails the test if it panicked or hung.
    fn wait(self) -> T {
        let what = &self.what;
        match self.rx.recv_timeout(self.timeout) {
            Ok(v) => v,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung (no result within {:?})", self.timeout),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let payload = self
                    .handle
                    .join()
                    .expect_err("a case thread that sent nothing panicked");
                panic!(
                    "{what}: panicked: {}",
                    gpu_parquet::panic_guard::panic_message(&payload)
                )
            }
        }
    }
}

/// How long a read of `path` may take before it counts as a hang: [`CASE_TIMEOUT`], plus one second
/// per 16 MiB of uncompressed data the footer claims (large_string_map.brotli.parquet inflates 4 KiB
/// into 2 GiB, which took 40 to over 42 s in a debug build on a 2-core machine, while our read of it
/// runs alongside), at most two minutes.
fn timeout_for(path: &Path) -> Duration {
    let claimed = File::open(path)
        .ok()
        .and_then(|f| ParquetMetaDataReader::new().parse_and_finish(&f).ok())
        .map(|m| {
            m.row_groups()
                .iter()
                .map(|rg| rg.total_byte_size().max(0) as u64)
                .sum::<u64>()
        })
        .unwrap_or(0);
    (CASE_TIMEOUT + Duration::from_secs(claimed >> 24)).min(Duration::from_secs(120))
}

/// Everything our pipeline produced for one read.
struct Ours {
    plan: ReadPlan,
    log: IoLog,
    batch: RecordBatch,
}

fn pipeline(
    path: &Path,
    projection: &Projection,
    row_groups: &RowGroupSelection,
    options: PlanOptions,
) -> Result<Ours, Error> {
    let source = ParquetSource::open(path)?;
    let plan = ReadPlan::build(&source, projection, row_groups, options)?;
    let fetched = HostBackend::new(2)?.fetch(&source, &plan)?;
    let table = decode_fetched(&source, &plan, &fetched.buffer.into_bytes(), 2)?;
    let batch = table.concat()?;
    assert_eq!(table.row_group_batches.len(), plan.row_groups.len());
    Ok(Ours {
        plan,
        log: fetched.log,
        batch,
    })
}

fn pipeline_all(path: &Path) -> Result<RecordBatch, Error> {
    pipeline(path, &Projection::All, &RowGroupSelection::All, PlanOptions::default()).map(|o| o.batch)
}

/// What one comparison found.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Both read it, with equal results.
    Same(usize),
    /// Both refused it.
    BothFail(String),
    /// We refused a file arrow-rs reads.
    WeFail(String, String),
    /// We read a file arrow-rs refuses.
    OnlyWeRead(String),
    /// Both read it, differently.
    Differ(String),
}

fn compare(path: &Path) -> Verdict {
    let timeout = timeout_for(path);
    // Both reads at once: the corpus has one file that takes seconds either way in a debug build.
    let p = path.to_path_buf();
    let ours = spawn_bounded(&format!("pipeline {}", path.display()), timeout, move || {
        pipeline_all(&p).map_err(|e| e.to_string())
    });
    let p = path.to_path_buf();
    let theirs = spawn_bounded(&format!("arrow-rs {}", path.display()), timeout, move || reference(&p));
    let (ours, theirs) = (ours.wait(), theirs.wait());
    match (ours, theirs) {
        (Ok(a), Ok(b)) if a == b => Verdict::Same(a.num_rows()),
        (Ok(a), Ok(b)) => Verdict::Differ(format!(
            "ours: {} rows {:?}; arrow-rs: {} rows {:?}",
            a.num_rows(),
            a.schema(),
            b.num_rows(),
            b.schema()
        )),
        (Err(e), Err(_)) => Verdict::BothFail(e),
        (Err(e), Ok(b)) => Verdict::WeFail(e, format!("arrow-rs read {} rows", b.num_rows())),
        (Ok(a), Err(e)) => Verdict::OnlyWeRead(format!("we read {} rows; arrow-rs: {e}", a.num_rows())),
    }
}

#[test]
fn every_corpus_file_matches_arrow_rs() {
    let Some(root) = corpus() else { return };
    let files = files_under(&root.join("data"), is_parquet);
    assert!(
        files.len() > 50,
        "expected the whole corpus, found {} files",
        files.len()
    );
    let mut failures = Vec::new();
    let (mut same, mut both_fail) = (0, 0);
    for f in &files {
        let name = f.strip_prefix(&root).unwrap_or(f).display().to_string();
        let v = compare(f);
        match &v {
            Verdict::Same(rows) => {
                same += 1;
                println!("same       {name}: {rows} rows");
            }
            Verdict::BothFail(e) => {
                both_fail += 1;
                println!("both fail  {name}: {e}");
            }
            other => {
                println!("MISMATCH   {name}: {other:?}");
                failures.push(format!("{name}: {other:?}"));
            }
        }
    }
    println!(
        "{same} files equal to arrow-rs, {both_fail} refused by both, {} mismatches",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Files arrow-rs reads are the overwhelming majority; a regression that makes everything fail
    // "consistently" must not pass.
    assert!(same >= files.len() - 5, "only {same} of {} files decoded", files.len());
}

#[test]
fn dict_page_offset_zero_decodes_like_pyarrow_and_arrow_rs_given_the_footer() {
    let Some(root) = corpus() else { return };
    let path = root.join("data/dict-page-offset-zero.parquet");
    // arrow-rs 60 cannot decode this footer (a Dremio field of the wrong Thrift type derails it);
    // where a later arrow-rs can, the read must equal ours.
    let footer = File::open(&path).map_err(|e| e.to_string()).and_then(|f| {
        ParquetMetaDataReader::new()
            .parse_and_finish(&f)
            .map_err(|e| e.to_string())
    });
    let ours = pipeline_all(&path).expect("our pipeline reads it");
    let source = ParquetSource::open(&path).expect("opens");
    // The file really has the quirk this test is named after: a dictionary_page_offset of 0, ignored
    // (the chunk starts at its only page, at byte 4).
    let chunk = source.metadata().row_group(0).column(0);
    assert_eq!(chunk.dictionary_page_offset(), Some(0));
    assert_eq!(source.checked_chunks()[0][0].offset, 4);
    // pyarrow reads 39 rows.
    assert_eq!(ours.num_rows(), 39);
    let theirs = match footer {
        Ok(_) => reference(&path).expect("arrow-rs reads it (with the offset dropped, if it must)"),
        Err(why) => {
            println!("arrow-rs cannot decode the footer: {why}");
            assert!(
                source.repairs().iter().any(|r| r.contains("ColumnMetaData.15")),
                "{:?}",
                source.repairs()
            );
            common::arrow_rs_read_with_metadata(&path, source.metadata().as_ref().clone())
                .expect("arrow-rs decodes it given the footer as Thrift readers see it")
        }
    };
    assert_eq!(ours, theirs);
}

#[test]
fn encrypted_files_give_one_clear_error() {
    let Some(root) = corpus() else { return };
    let files = files_under(&root.join("data"), |p| p.extension().is_some_and(|e| e == "encrypted"));
    assert!(!files.is_empty(), "the corpus has encrypted files");
    for f in &files {
        let p = f.clone();
        let r = bounded(&format!("pipeline {}", f.display()), CASE_TIMEOUT, move || {
            pipeline_all(&p)
        });
        let err = match r {
            Ok(b) => panic!("{}: read {} rows of an encrypted file", f.display(), b.num_rows()),
            Err(e) => e,
        };
        let msg = err.to_string();
        println!("{}: {msg}", f.display());
        assert!(
            !matches!(err, Error::DecoderPanic { .. }),
            "{}: a panic, not an error: {msg}",
            f.display()
        );
        let file_name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        assert!(msg.contains(file_name), "error does not name the file: {msg}");
        // The file names say "encrypt" too: look at the message without them.
        let reason = msg.replace(&f.display().to_string(), "").to_lowercase();
        assert!(
            reason.contains("encrypt"),
            "error does not say the file is encrypted: {msg}"
        );
    }
}

/// Requires `path` to be refused (returning why), or read exactly as arrow-rs reads it (returning
/// `None`); never a panic or a hang.
fn refused_or_same(path: &Path, what: &str) -> Option<String> {
    let timeout = timeout_for(path);
    let p = path.to_path_buf();
    let ours = bounded(&format!("pipeline {what}"), timeout, move || pipeline_all(&p));
    match ours {
        Err(e) => Some(e.to_string()),
        Ok(batch) => {
            let p = path.to_path_buf();
            let theirs = bounded(&format!("arrow-rs {what}"), timeout, move || reference(&p));
            match theirs {
                Ok(t) => assert!(batch == t, "{what}: we read values that differ from arrow-rs's"),
                Err(e) => panic!(
                    "{what}: we read {} rows of a file arrow-rs refuses: {e}",
                    batch.num_rows()
                ),
            }
            None
        }
    }
}

#[test]
fn bad_data_is_refused_or_read_like_arrow_rs() {
    let Some(root) = corpus() else { return };
    let files = files_under(&root.join("bad_data"), is_parquet);
    assert!(!files.is_empty(), "the corpus has bad_data files");
    for f in &files {
        let outcome = refused_or_same(f, &f.display().to_string());
        let name = f.file_name().unwrap_or_default().to_string_lossy();
        match outcome {
            None => println!("{name}: read like arrow-rs"),
            Some(e) => println!("{name}: refused: {e}"),
        }
    }
}

/// Files the damage tests start from: flat, nested, dictionary, v2 pages, several codecs.
const DAMAGE_SOURCES: [&str; 5] = [
    "alltypes_plain.parquet",
    "nested_structs.rust.parquet",
    "datapage_v2.snappy.parquet",
    "alltypes_dictionary.parquet",
    "nested_lists.snappy.parquet",
];

#[test]
fn truncated_copies_are_refused_or_read_like_arrow_rs() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cases = 0;
    for name in DAMAGE_SOURCES {
        let bytes = std::fs::read(root.join("data").join(name)).expect("read corpus file");
        let (data, footer) = regions(&bytes);
        let n = bytes.len();
        // Cut points: in the magic, inside column data (start, middle, end), inside the footer's
        // metadata, in its length field and in the trailing magic.
        let cuts = [
            0,
            3,
            data.start + 1,
            (data.start + data.end) / 2,
            data.end - 1,
            footer.start + 1,
            (footer.start + footer.end) / 2,
            footer.end - 1,
            n - 6,
            n - 1,
        ];
        for cut in cuts {
            let path = dir.path().join(format!("cut-{cut}-{name}"));
            std::fs::write(&path, &bytes[..cut]).expect("write copy");
            let refused = refused_or_same(&path, &format!("{name} cut at {cut}"));
            assert!(
                refused.is_some(),
                "{name} cut at {cut} of {n}: a truncated file cannot have a footer"
            );
            cases += 1;
        }
        // Column data cut out of the middle with the footer kept: the footer now lies about offsets.
        for (from, len) in [(data.start, 1), ((data.start + data.end) / 2, 16), (data.end - 8, 8)] {
            let mut copy = bytes[..from].to_vec();
            copy.extend_from_slice(&bytes[(from + len).min(n)..]);
            let path = dir.path().join(format!("hole-{from}-{name}"));
            std::fs::write(&path, &copy).expect("write copy");
            refused_or_same(&path, &format!("{name} with {len} bytes removed at {from}"));
            cases += 1;
        }
    }
    println!("{cases} truncated copies: none panicked or hung");
}

#[test]
fn corrupted_copies_are_refused_or_read_like_arrow_rs() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut refused, mut read) = (0, 0);
    for (i, name) in DAMAGE_SOURCES.iter().enumerate() {
        let bytes = std::fs::read(root.join("data").join(name)).expect("read corpus file");
        let (data, footer) = regions(&bytes);
        for variant in 0..40u64 {
            let seed = 0x9e37_79b9_7f4a_7c15 ^ ((i as u64) << 32 | variant);
            let mut rng = SeededRng::new(seed);
            // Even variants damage column data, odd ones the footer's metadata.
            let region = if variant % 2 == 0 { &data } else { &footer };
            let mut copy = bytes.clone();
            for _ in 0..1 + rng.below(4) {
                let at = region.start + rng.below((region.end - region.start) as u64) as usize;
                copy[at] ^= 1 + rng.below(255) as u8;
            }
            let path = dir.path().join(format!("flip-{variant}-{name}"));
            std::fs::write(&path, &copy).expect("write copy");
            let what = format!("{name} variant {variant} (seed {seed:#x})");
            match refused_or_same(&path, &what) {
                None => read += 1,
                Some(_) => refused += 1,
            }
        }
    }
    println!(
        "{} corrupted copies: {refused} refused, {read} read exactly like arrow-rs",
        refused + read
    );
    assert_eq!(refused + read, 200);
    // Flipping bytes must usually be noticed; if nothing is ever refused the damage is not reaching
    // the decoder.
    assert!(refused > 20, "only {refused} of 200 corrupted copies were refused");
}

/// The chunk ranges `[row_group][column]` read straight from the footer, independently of the library.
fn footer_chunk_ranges(path: &Path) -> Vec<Vec<(u64, u64)>> {
    let meta = ParquetMetaDataReader::new()
        .parse_and_finish(&File::open(path).expect("open"))
        .expect("footer");
    meta.row_groups()
        .iter()
        .map(|rg| {
            rg.columns()
                .iter()
                .map(|c| {
                    let dpo = c.data_page_offset();
                    let start = match c.dictionary_page_offset() {
                        Some(d) if d > 0 && (d < dpo || dpo <= 0) => d,
                        _ => dpo,
                    };
                    (start as u64, c.compressed_size() as u64)
                })
                .collect()
        })
        .collect()
}

/// Checks that `ours` fetched exactly the chunks of `row_groups` x `leaves` and nothing else.
fn assert_fetched_exactly(path: &Path, ours: &Ours, row_groups: &[usize], leaves: &[usize]) {
    let ranges = footer_chunk_ranges(path);
    let mut want: Vec<(usize, usize, u64, u64)> = row_groups
        .iter()
        .flat_map(|&g| leaves.iter().map(move |&c| (g, c)))
        .map(|(g, c)| (g, c, ranges[g][c].0, ranges[g][c].1))
        .collect();
    want.sort_by_key(|w| (w.2, w.3));
    let got: Vec<(usize, usize, u64, u64)> = ours
        .plan
        .chunks
        .iter()
        .map(|c| (c.row_group, c.column, c.offset, c.len))
        .collect();
    assert_eq!(
        got, want,
        "plan chunks differ from the footer's chunks for the selection"
    );
    assert_eq!(ours.plan.columns, leaves);
    assert_eq!(ours.plan.row_groups, row_groups);

    // With no gap allowed, the file bytes read are exactly the union of those chunks.
    let mut read: Vec<(u64, u64)> = ours
        .log
        .tasks
        .iter()
        .map(|r| {
            let t = &ours.plan.tasks[r.task];
            assert_eq!(r.bytes, t.len, "task {} moved {} of {} bytes", r.task, r.bytes, t.len);
            (t.offset, t.offset + t.len)
        })
        .collect();
    assert_eq!(read.len(), ours.plan.tasks.len(), "one record per task");
    read.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in read {
        match merged.last_mut() {
            Some(m) if s <= m.1 => {
                assert_eq!(s, m.1, "two tasks read the same bytes");
                m.1 = e;
            }
            _ => merged.push((s, e)),
        }
    }
    let mut chunks: Vec<(u64, u64)> = want.iter().filter(|w| w.3 > 0).map(|w| (w.2, w.2 + w.3)).collect();
    chunks.sort_unstable();
    let mut union: Vec<(u64, u64)> = Vec::new();
    for (s, e) in chunks {
        match union.last_mut() {
            Some(m) if s <= m.1 => m.1 = m.1.max(e),
            _ => union.push((s, e)),
        }
    }
    assert_eq!(merged, union, "bytes read differ from the selected chunks");
    let logged: u64 = ours.log.tasks.iter().map(|r| r.bytes).sum();
    assert_eq!(logged, union.iter().map(|(s, e)| e - s).sum::<u64>());
}

fn no_gap() -> PlanOptions {
    PlanOptions {
        max_gap: 0,
        ..PlanOptions::default()
    }
}

/// arrow-rs's own read of `leaves` of `row_groups`.
fn arrow_rs_projected(path: &Path, leaves: &[usize], row_groups: &[usize]) -> Result<RecordBatch, String> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let mask = ProjectionMask::leaves(builder.parquet_schema(), leaves.iter().copied());
    let reader = builder
        .with_projection(mask)
        .with_row_groups(row_groups.to_vec())
        .build()
        .map_err(|e| e.to_string())?;
    collect(reader, &Location::file(path)).map_err(|e| e.to_string())
}

#[test]
fn projections_fetch_exactly_their_chunks_and_decode_like_arrow_rs() {
    let Some(root) = corpus() else { return };
    // Several row groups and many columns.
    let path = root.join("data/alltypes_tiny_pages_plain.parquet");
    let source = ParquetSource::open(&path).expect("opens");
    let schema = source.metadata().file_metadata().schema_descr_ptr();
    let n_rg = source.metadata().num_row_groups();
    let n_leaves = schema.num_columns();
    let name = |i: usize| schema.column(i).path().string();
    println!("{}: {n_rg} row groups, {n_leaves} leaves", path.display());

    let mut cases: Vec<(Projection, RowGroupSelection, Vec<usize>, Vec<usize>)> = vec![
        // A subset of columns by name, all row groups.
        (
            Projection::Names(vec![name(n_leaves - 1), name(1)]),
            RowGroupSelection::All,
            vec![1, n_leaves - 1],
            (0..n_rg).collect(),
        ),
        // All columns, one row group.
        (
            Projection::All,
            RowGroupSelection::Indices(vec![0]),
            (0..n_leaves).collect(),
            vec![0],
        ),
        // Leaves by index, no row groups.
        (
            Projection::Leaves(vec![2]),
            RowGroupSelection::Indices(vec![]),
            vec![2],
            vec![],
        ),
        // No columns at all: rows still count.
        (
            Projection::Leaves(vec![]),
            RowGroupSelection::All,
            vec![],
            (0..n_rg).collect(),
        ),
    ];
    if n_rg >= 3 {
        // Row groups out of order: decoded in the order asked for.
        cases.push((
            Projection::Leaves(vec![0, 3]),
            RowGroupSelection::Indices(vec![n_rg - 1, 0]),
            vec![0, 3],
            vec![n_rg - 1, 0],
        ));
    }
    for (projection, rgs, leaves, row_groups) in cases {
        let ours = pipeline(&path, &projection, &rgs, no_gap()).expect("our pipeline reads the projection");
        assert_fetched_exactly(&path, &ours, &row_groups, &leaves);
        let theirs = arrow_rs_projected(&path, &leaves, &row_groups).expect("arrow-rs reads the projection");
        assert_eq!(ours.batch, theirs, "{projection:?} of row groups {row_groups:?}");
        let expected_rows: i64 = row_groups
            .iter()
            .map(|&g| source.metadata().row_group(g).num_rows())
            .sum();
        assert_eq!(ours.batch.num_rows() as i64, expected_rows);
        println!(
            "{projection:?} x {rgs:?}: {} chunks, {} rows",
            ours.plan.chunks.len(),
            ours.batch.num_rows()
        );
    }
}

#[test]
fn dotted_path_leaf_projection_matches_arrow_rs_leaves() {
    let Some(root) = corpus() else { return };
    // (file, whether arrow-rs supports projecting one leaf of it: it refuses partial maps).
    for (file, supported) in [
        ("nested_structs.rust.parquet", true),
        ("nested_lists.snappy.parquet", true),
        ("nested_maps.snappy.parquet", false),
    ] {
        let path = root.join("data").join(file);
        let source = ParquetSource::open(&path).expect("opens");
        let schema = source.metadata().file_metadata().schema_descr_ptr();
        // A nested leaf, named by its dotted path; preferably one of a top-level column with other leaves
        // too, so the projection really prunes.
        let root_of = |i: usize| schema.get_column_root_idx(i);
        let nested = |i: &usize| schema.column(*i).path().parts().len() >= 2;
        let has_siblings = |i: &usize| (0..schema.num_columns()).any(|j| j != *i && root_of(j) == root_of(*i));
        let leaf = (0..schema.num_columns())
            .filter(nested)
            .find(has_siblings)
            .or_else(|| (0..schema.num_columns()).find(nested))
            .unwrap_or_else(|| panic!("{file}: expected a nested leaf"));
        let dotted = schema.column(leaf).path().string();
        let parts = schema.column(leaf).path().parts().to_vec();
        let leaves: Vec<usize> = (0..schema.num_columns())
            .filter(|&i| schema.column(i).path().parts().starts_with(&parts))
            .collect();
        assert_eq!(leaves, vec![leaf], "{file}: a leaf's path selects only that leaf");
        let rgs: Vec<usize> = (0..source.metadata().num_row_groups()).collect();

        let plan = ReadPlan::build(
            &source,
            &Projection::Names(vec![dotted.clone()]),
            &RowGroupSelection::All,
            no_gap(),
        )
        .expect("plans a nested leaf");
        let fetched = host_fetch(&source, &plan, 2);
        let decoded = decode_fetched(&source, &plan, &fetched.buffer, 2).and_then(|t| t.concat());
        let theirs = arrow_rs_projected(&path, &leaves, &rgs);
        match (decoded, theirs) {
            (Ok(batch), Ok(theirs)) => {
                let ours = Ours {
                    plan,
                    log: fetched.log,
                    batch,
                };
                assert_fetched_exactly(&path, &ours, &rgs, &leaves);
                assert_eq!(ours.batch, theirs, "{file}: projection '{dotted}'");
                assert_eq!(ours.batch.num_columns(), 1, "one top-level column, pruned to the leaf");
                println!(
                    "{file}: '{dotted}' -> {} rows of {}",
                    ours.batch.num_rows(),
                    ours.batch.schema().field(0)
                );
                assert!(
                    supported,
                    "{file}: arrow-rs now supports this projection; update the test"
                );
            }
            (Err(ours), Err(theirs)) => {
                println!("{file}: '{dotted}' refused by both: {ours} / arrow-rs: {theirs}");
                assert!(!supported, "{file}: '{dotted}' should decode: {ours}");
                assert!(ours.to_string().contains(file), "{ours}");
            }
            (ours, theirs) => panic!(
                "{file}: '{dotted}': ours {:?} vs arrow-rs {:?}",
                ours.map(|b| b.num_rows()),
                theirs.map(|b| b.num_rows())
            ),
        }
    }
}

#[test]
fn decoding_needs_only_the_fetched_chunks() {
    let Some(root) = corpus() else { return };
    let path = root.join("data/alltypes_plain.parquet");
    let source = ParquetSource::open(&path).expect("opens");
    let plan = ReadPlan::build(
        &source,
        &Projection::Leaves(vec![0, 1]),
        &RowGroupSelection::All,
        no_gap(),
    )
    .expect("plans");
    let fetched = host_fetch(&source, &plan, 1);
    // Claim one more column than was fetched: the decoder must refuse, not read the file.
    let mut wider = plan.clone();
    wider.columns.push(2);
    let err = decode_fetched(&source, &wider, &fetched.buffer, 1).expect_err("column 2 was not fetched");
    assert!(matches!(err, Error::InvalidRequest { .. }), "{err}");
    assert!(err.to_string().contains(&source.column_path(2)), "{err}");
    // Fetched bytes replaced by zeros: an error naming the column and row group, not a panic.
    let zeros = Bytes::from(vec![0u8; fetched.buffer.len()]);
    let err = decode_fetched(&source, &plan, &zeros, 1).expect_err("zeros are not pages");
    let loc_ok = match &err {
        Error::Parquet { location, .. } | Error::DecoderPanic { location, .. } => {
            location.column.is_some() && location.row_group == Some(0)
        }
        _ => false,
    };
    assert!(loc_ok, "error should name column and row group: {err:?}");
    // A buffer shorter than the plan says: refused up front.
    let short = fetched.buffer.slice(..fetched.buffer.len() - 1);
    assert!(decode_fetched(&source, &plan, &short, 1).is_err());
}

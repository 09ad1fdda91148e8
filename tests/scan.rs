//! The one scan on the host path: its memory budget (what it means for `read`, `read_batches`,
//! `stream` and `scan`), its driver (results in order, steps in flight bounded, an error in one step
//! ending the scan without a hang, a dropped stream stopping its threads), and that every read gives
//! arrow-rs's rows.

mod common;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use gpu_parquet::io::DestBuffer;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gpu_parquet::scan::{Decode, MemoryBudget, StepOutput};
use gpu_parquet::{BackendKind, Reader};

fn testdata_files() -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(common::testdata_dir())
        .expect("testdata")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    files
}

fn concat(batches: &[RecordBatch], schema: arrow::datatypes::SchemaRef) -> RecordBatch {
    concat_batches(&schema, batches).expect("concat")
}

/// Bytes of fetched column chunks per row group of `path` (the whole selection).
fn row_group_bytes(path: &std::path::Path) -> Vec<u64> {
    let reader = Reader::builder(path)
        .with_backend(BackendKind::Host)
        .build()
        .expect("build");
    let plan = reader.plan();
    plan.row_groups
        .iter()
        .map(|rg| plan.chunks.iter().filter(|c| c.row_group == *rg).map(|c| c.len).sum())
        .collect()
}

#[test]
fn read_read_batches_and_stream_equal_arrow_rs() {
    for path in testdata_files() {
        let expected = common::arrow_rs_read(&path).expect("arrow-rs reads it");
        let reader = Reader::builder(&path)
            .with_backend(BackendKind::Host)
            .build()
            .expect("build");
        let from_read = reader.read().expect("read").decode().expect("decode");
        let from_batches = reader.read_batches().expect("read_batches");
        let mut streamed = Vec::new();
        for group in reader.stream().expect("stream") {
            streamed.extend(group.expect("group").decode().expect("decode").batches);
        }
        let schema = expected.schema();
        assert_eq!(
            concat(&from_read.batches, schema.clone()),
            expected,
            "{}",
            path.display()
        );
        assert_eq!(
            concat(&from_batches.batches, schema.clone()),
            expected,
            "{}",
            path.display()
        );
        assert_eq!(concat(&streamed, schema), expected, "{}", path.display());
    }
}

#[test]
fn a_stream_under_a_budget_holds_at_most_its_share_and_yields_read_batches_rows() {
    let path = common::testdata_dir().join("flat_snappy_dict.parquet");
    let sizes = row_group_bytes(&path);
    assert!(sizes.len() > 1, "the file needs several row groups");
    let largest = *sizes.iter().max().unwrap();
    // Room for two of the largest row groups per step, two steps in flight.
    let limit = 4 * largest;
    let budget = MemoryBudget::streaming(Some(limit));
    let reader = Reader::builder(&path)
        .with_backend(BackendKind::Host)
        .with_memory_limit(limit)
        .build()
        .expect("build");
    let whole = reader.read_batches();
    let planned = reader.plan().dest_len;
    let mut streamed = Vec::new();
    let mut steps = 0;
    for group in reader.stream().expect("stream") {
        let group = group.expect("group");
        steps += 1;
        // What the step holds: its buffer, as the backend allocated it.
        let held = group.buffer().len();
        assert!(held <= budget.per_step().unwrap(), "a step holds {held} of {limit}");
        streamed.extend(group.decode().expect("decode").batches);
    }
    assert!(
        steps > 1 && steps < sizes.len(),
        "{steps} steps for {} row groups",
        sizes.len()
    );
    let unbounded = Reader::builder(&path)
        .with_backend(BackendKind::Host)
        .build()
        .expect("build")
        .read_batches()
        .expect("read_batches");
    let schema = unbounded.schema.clone();
    assert_eq!(concat(&streamed, schema.clone()), concat(&unbounded.batches, schema));
    // A whole read is one step: refused exactly when its plan exceeds the whole limit.
    assert_eq!(whole.is_ok(), planned <= limit, "plan {planned}, limit {limit}");
}

#[test]
fn a_row_group_over_its_share_of_the_budget_is_a_clear_error() {
    let path = common::testdata_dir().join("flat_snappy_dict.parquet");
    let sizes = row_group_bytes(&path);
    let largest = *sizes.iter().max().unwrap();
    let at = sizes.iter().position(|s| *s == largest).unwrap();
    // Half the limit is one byte short of the largest row group.
    let reader = Reader::builder(&path)
        .with_backend(BackendKind::Host)
        .with_memory_limit(2 * (largest - 1))
        .build()
        .expect("build");
    let e = reader.stream().expect_err("refused before reading").to_string();
    assert!(
        e.contains(&format!("row group {at}")) && e.contains(&format!("{largest} bytes")),
        "{e}"
    );
    // A whole read under a limit below the plan is refused too, naming stream().
    let e = Reader::builder(&path)
        .with_backend(BackendKind::Host)
        .with_memory_limit(largest)
        .build()
        .expect("build")
        .read()
        .expect_err("over the limit")
        .to_string();
    assert!(e.contains("over the memory limit") && e.contains("stream()"), "{e}");
}

/// A host-decoded scan under `limit` (three row groups of `flat_snappy_dict`: one per step when the
/// limit has room for one row group per step only).
fn host_scan_reader(path: &std::path::Path, limit: Option<u64>) -> Reader {
    let mut b = Reader::builder(path)
        .with_backend(BackendKind::Host)
        .with_decode(Decode::Host);
    if let Some(l) = limit {
        b = b.with_memory_limit(l);
    }
    b.build().expect("build")
}

#[test]
fn a_host_scan_yields_its_steps_in_order_with_arrow_rs_rows() {
    for path in testdata_files() {
        let expected = common::arrow_rs_read(&path).expect("arrow-rs reads it");
        let sizes = row_group_bytes(&path);
        // Room for one (the largest) row group per step: as many steps as row groups.
        let largest = sizes.iter().copied().max().unwrap_or(0).max(1);
        for limit in [None, Some(2 * largest)] {
            let reader = host_scan_reader(&path, limit);
            let mut next_group = 0;
            let mut batches = Vec::new();
            for step in reader.scan().expect("scan") {
                let StepOutput::Host { row_groups, table } = step.expect("step") else {
                    panic!("a host decode gives host batches")
                };
                // Consecutive row groups, each step starting where the one before ended.
                let want: Vec<usize> = (next_group..next_group + row_groups.len()).collect();
                assert_eq!(row_groups, want, "{}", path.display());
                next_group += row_groups.len();
                batches.extend(table.batches);
            }
            assert_eq!(next_group, sizes.len(), "{}", path.display());
            assert_eq!(concat(&batches, expected.schema()), expected, "{}", path.display());
        }
    }
}

#[test]
fn a_stream_holds_at_most_its_budgets_steps_while_the_caller_waits() {
    let path = common::testdata_dir().join("flat_snappy_dict.parquet");
    let sizes = row_group_bytes(&path);
    assert!(sizes.len() >= 3, "the file needs three row groups or more");
    let reader = Reader::builder(&path)
        .with_backend(BackendKind::Host)
        .build()
        .expect("build");
    let budget = MemoryBudget::streaming(None);
    let mut stream = reader.stream().expect("stream");
    assert_eq!(stream.steps(), sizes.len());
    let first = stream.next().expect("a first step").expect("read");
    // While the caller holds the first step, the scan reads one more and then waits for a place.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        stream.steps_fetched() <= budget.max_steps_in_flight(),
        "{} steps fetched while the caller held the first",
        stream.steps_fetched()
    );
    assert!(stream.most_held() <= budget.max_steps_in_flight());
    drop(first);
    let mut rest = 0;
    for step in stream.by_ref() {
        step.expect("read");
        rest += 1;
    }
    assert_eq!(1 + rest, sizes.len());
    assert!(
        stream.most_held() <= budget.max_steps_in_flight(),
        "{}",
        stream.most_held()
    );
    assert_eq!(stream.steps_fetched(), sizes.len());
}

/// `flat_snappy_dict` copied with the first page header of row group `rg`'s first chunk overwritten.
fn with_broken_row_group(rg: usize) -> tempfile::NamedTempFile {
    let path = common::testdata_dir().join("flat_snappy_dict.parquet");
    let reader = Reader::builder(&path)
        .with_backend(BackendKind::Host)
        .build()
        .expect("build");
    let chunk = reader
        .plan()
        .chunks
        .iter()
        .find(|c| c.row_group == rg)
        .expect("a chunk of that row group")
        .clone();
    let mut bytes = std::fs::read(&path).expect("read the file");
    let at = chunk.offset as usize;
    bytes[at..at + 32].fill(0xff);
    let out = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(out.path(), &bytes).expect("write");
    out
}

#[test]
fn an_error_in_one_step_surfaces_in_order_and_ends_the_scan() {
    let broken = with_broken_row_group(1);
    let reader = host_scan_reader(broken.path(), None);
    let started = Instant::now();
    let mut scan = reader.scan().expect("scan");
    assert!(scan.steps() >= 3);
    // The step before the broken one comes first, whole.
    let first = scan.next().expect("step 0").expect("step 0 decodes");
    assert_eq!(first.row_groups(), &[0]);
    let e = scan
        .next()
        .expect("step 1")
        .expect_err("row group 1 is broken")
        .to_string();
    assert!(e.contains(&broken.path().display().to_string()), "{e}");
    // Then nothing: the scan stopped, and its threads end.
    assert!(scan.next().is_none());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !scan.threads_done() {
        assert!(Instant::now() < deadline, "the scan's threads did not end");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(scan);
    assert!(started.elapsed() < Duration::from_secs(10));
    // A whole read of the same file fails with the same error.
    let e = reader.read_batches().expect_err("broken").to_string();
    assert!(e.contains(&broken.path().display().to_string()), "{e}");
}

#[test]
fn dropping_a_stream_early_stops_its_reading_thread() {
    let path = common::testdata_dir().join("flat_snappy_dict.parquet");
    let steps_done = Arc::new(AtomicUsize::new(0));
    let counted = steps_done.clone();
    let reader = Reader::builder(&path)
        .with_backend(BackendKind::Host)
        .with_progress(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .expect("build");
    let steps = row_group_bytes(&path).len();
    assert!(steps >= 3);
    let mut stream = reader.stream().expect("stream");
    let first = stream.next().expect("a step").expect("read");
    assert_eq!(first.row_groups(), &[0]);
    let started = Instant::now();
    // Dropping it stops the reading thread (waiting for a place) and joins it.
    drop(stream);
    assert!(started.elapsed() < Duration::from_secs(5));
    let after_drop = steps_done.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        steps_done.load(Ordering::SeqCst),
        after_drop,
        "a step was read after the drop"
    );
    assert!(after_drop < steps, "{after_drop} of {steps} steps were read");
    drop(first);
}

#[test]
fn a_host_reader_scans_what_its_decode_asks() {
    let path = common::testdata_dir().join("flat_zstd.parquet");
    let expected = common::arrow_rs_read(&path).expect("arrow-rs");
    for decode in [Decode::None, Decode::Host, Decode::Auto] {
        let reader = Reader::builder(&path)
            .with_backend(BackendKind::Host)
            .with_decode(decode)
            .build()
            .expect("build");
        let mut batches = Vec::new();
        for step in reader.scan().expect("scan") {
            let step = step.expect("step");
            match (decode, &step) {
                (Decode::None, StepOutput::Chunks(_)) | (Decode::Host | Decode::Auto, StepOutput::Host { .. }) => {}
                other => panic!("{other:?}"),
            }
            batches.extend(step.into_record_batches().expect("batches"));
        }
        assert_eq!(concat(&batches, expected.schema()), expected, "{decode:?}");
    }
    // A GPU decode on the host backend is refused, saying why.
    let e = Reader::builder(&path)
        .with_backend(BackendKind::Host)
        .with_decode(Decode::Gpu)
        .build()
        .expect("build")
        .scan()
        .expect_err("no GPU decode on the host backend")
        .to_string();
    assert!(e.contains("GPU backend"), "{e}");
}

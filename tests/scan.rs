//! The scan's memory budget on the host path: what it means for `read`, `read_batches` and `stream`,
//! and that all three give arrow-rs's rows.

mod common;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use gpu_parquet::io::DestBuffer;
use gpu_parquet::scan::MemoryBudget;
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
    let budget = MemoryBudget::new(Some(limit), 2);
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
    let e = reader.stream().err().expect("refused before reading").to_string();
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
        .err()
        .expect("over the limit")
        .to_string();
    assert!(e.contains("over the memory limit") && e.contains("stream()"), "{e}");
}

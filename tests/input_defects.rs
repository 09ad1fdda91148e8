//! Defects found by feeding the reader unusual inputs: footers whose aggregates disagree with their row
//! groups, writer quirks in the corpus, special files given as input, and how `inspect` names types.
//!
//! Corpus cases are found through `common::corpus()` and say so when it is absent.

use std::path::Path;

use arrow::array::{Array, AsArray};
use arrow::datatypes::Int32Type;
use arrow::record_batch::RecordBatch;
use gpu_parquet::decode::host::decode_fetched;
use gpu_parquet::{Error, ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder};

mod common;
use common::{arrow_rs_read, collect, corpus, host_fetch, with_row_groups_row_count};

/// Our whole pipeline on `path`: open, plan every column and row group, host fetch, decode.
fn read_all(path: &Path) -> Result<RecordBatch, Error> {
    let source = ParquetSource::open(path)?;
    let plan = ReadPlan::build(
        &source,
        &Projection::All,
        &RowGroupSelection::All,
        PlanOptions::default(),
    )?;
    let fetched = host_fetch(&source, &plan, 2);
    decode_fetched(&source, &plan, &fetched.buffer, 2)?.concat()
}

// ---- 1. A footer row count of 0 over a row group of 6 rows -------------------------------------------

/// repeated_no_annotation.parquet (parquet-rs 0.3.0) says 0 rows in its footer and 6 in its one row
/// group; the pages hold 6. arrow-rs caps batch sizes at the footer's count and so reads nothing; we
/// read what the row group holds, equal to arrow-rs's own decode once given the row groups' count.
#[test]
fn footer_row_count_of_zero_still_reads_the_row_groups_rows() {
    let Some(root) = corpus() else { return };
    let path = root.join("data/repeated_no_annotation.parquet");
    let source = ParquetSource::open(&path).expect("opens");
    let meta = source.metadata().clone();
    // The file really has the quirk.
    assert_eq!(meta.file_metadata().num_rows(), 0);
    assert_eq!(meta.num_row_groups(), 1);
    assert_eq!(meta.row_group(0).num_rows(), 6);

    let ours = read_all(&path).expect("our pipeline reads it");
    assert_eq!(ours.num_rows(), 6, "the row group's num_rows");

    // Why arrow-rs's own reader is not the reference as it stands: it yields the footer's 0 rows.
    let plain = arrow_rs_read(&path).expect("arrow-rs reads it");
    println!("arrow-rs as is: {} rows", plain.num_rows());
    // arrow-rs's decode with only the file's row count corrected: value for value what we read.
    let file = std::fs::File::open(&path).expect("open");
    let fixed = with_row_groups_row_count(parquet::file::metadata::ParquetMetaData::clone(&meta));
    let arrow_meta = ArrowReaderMetadata::try_new(fixed.into(), ArrowReaderOptions::new()).expect("arrow metadata");
    let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file, arrow_meta)
        .build()
        .expect("reader");
    let theirs = collect(reader, &source.location()).expect("arrow-rs decodes it");
    assert_eq!(ours, theirs);

    // What pyarrow 26 reads: ids 1..=6; phoneNumbers null in the first two rows, an empty list in the
    // third, then 1, 1 and 3 phones.
    let ids = ours.column(0).as_primitive::<Int32Type>();
    assert_eq!(ids.values().to_vec(), vec![1, 2, 3, 4, 5, 6]);
    let phones = ours.column(1).as_struct();
    let valid: Vec<bool> = (0..6).map(|i| phones.is_valid(i)).collect();
    assert_eq!(valid, vec![false, false, true, true, true, true]);
    let list = phones.column(0).as_list::<i32>();
    let lens: Vec<usize> = (2..6).map(|i| list.value(i).len()).collect();
    assert_eq!(lens, vec![0, 1, 1, 3]);

    // No columns at all: the row group's rows still count.
    let plan = ReadPlan::build(
        &source,
        &Projection::Leaves(vec![]),
        &RowGroupSelection::All,
        PlanOptions::default(),
    )
    .expect("plans");
    let fetched = host_fetch(&source, &plan, 1);
    let t = decode_fetched(&source, &plan, &fetched.buffer, 1).expect("decodes");
    assert_eq!(t.num_rows(), 6);
}

// ---- 3. Special files as input ----------------------------------------------------------------------

/// Opens `path` on another thread; fails the test if that takes longer than a second (a blocking open
/// of a FIFO waits for a writer forever).
fn open_within_a_second(path: &Path) -> Result<ParquetSource, Error> {
    let (tx, rx) = std::sync::mpsc::channel();
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(ParquetSource::open(&p));
    });
    match rx.recv_timeout(std::time::Duration::from_secs(1)) {
        Ok(r) => r,
        Err(e) => {
            // Release a reader blocked on a FIFO (a writer opening without blocking lets it through).
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path);
            panic!("{}: open did not return within a second ({e})", path.display())
        }
    }
}

/// The error `path` gives, which must be an `InvalidRequest` naming the file and containing `what`.
fn assert_refused_as(path: &Path, what: &str) {
    let err = match open_within_a_second(path) {
        Ok(_) => panic!("{} opened as a Parquet file", path.display()),
        Err(e) => e,
    };
    match &err {
        Error::InvalidRequest { location, message } => {
            assert_eq!(location.file, path, "{err}");
            assert!(
                message.contains(what),
                "{}: {message:?} should say {what:?}",
                path.display()
            );
        }
        other => panic!("{}: expected InvalidRequest, got {other:?}", path.display()),
    }
    println!("{err}");
}

#[test]
fn a_fifo_is_refused_at_once_not_waited_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("pipe.parquet");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("no NUL in a temp path");
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo: {}", std::io::Error::last_os_error());
    assert_refused_as(&fifo, "is a FIFO (named pipe), not a Parquet file");
}

#[test]
fn devices_directories_and_sockets_say_what_they_are() {
    for dev in ["/dev/zero", "/dev/null"] {
        if Path::new(dev).exists() {
            assert_refused_as(Path::new(dev), "is a character device");
        } else {
            common::skip(&format!("{dev} does not exist here"));
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    assert_refused_as(dir.path(), "is a directory");
    let socket = dir.path().join("sock.parquet");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind a unix socket");
    assert_refused_as(&socket, "is a socket");
    // A block device, where this machine shows one.
    use std::os::unix::fs::FileTypeExt;
    let block = std::fs::read_dir("/dev").ok().and_then(|d| {
        d.flatten()
            .map(|e| e.path())
            .find(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device()))
    });
    match block {
        Some(b) => assert_refused_as(&b, "is a block device"),
        None => common::skip("no block device under /dev"),
    }
    // A path that does not exist is an I/O error naming it, as before.
    let missing = dir.path().join("missing.parquet");
    let err = open_within_a_second(&missing).expect_err("a missing file");
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(err.to_string().contains("missing.parquet"), "{err}");
}

// ---- 4. inspect --json names types readably ---------------------------------------------------------

/// Fields of `inspect --json` output that name types; none may hold Rust `Debug` syntax.
fn assert_no_debug_syntax(json: &serde_json::Value) {
    let mut names: Vec<String> = Vec::new();
    for c in json["columns"].as_array().expect("columns") {
        for key in ["logical_type", "converted_type", "physical_type"] {
            if let Some(s) = c[key].as_str() {
                names.push(s.to_string());
            }
        }
    }
    for rg in json["row_groups"].as_array().expect("row groups") {
        for chunk in rg["chunks"].as_array().expect("chunks") {
            names.push(chunk["codec"].as_str().expect("codec").to_string());
        }
    }
    for n in &names {
        for artefact in ["{", "}", "Some(", "None", "Type {", "is_adjusted_to_u_t_c", "Level("] {
            assert!(!n.contains(artefact), "{n:?} contains Rust debug syntax {artefact:?}");
        }
    }
}

/// (path, logical_type, converted_type) of each leaf in `inspect --json` output.
fn leaf_types(json: &serde_json::Value) -> Vec<(String, Option<String>, Option<String>)> {
    json["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().map(str::to_string);
            (s("path").expect("path"), s("logical_type"), s("converted_type"))
        })
        .collect()
}

#[test]
fn inspect_json_names_logical_types_readably() {
    use std::sync::Arc;

    use arrow::array::{
        ArrayRef, Date32Array, Decimal128Array, Int64Array, StringArray, TimestampMicrosecondArray,
        TimestampMillisecondArray, UInt8Array,
    };
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::WriterProperties;

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("types.parquet");
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("s", Arc::new(StringArray::from(vec!["a", "b"]))),
        (
            "ts_ms_utc",
            Arc::new(TimestampMillisecondArray::from(vec![1, 2]).with_timezone("UTC")),
        ),
        ("ts_us_local", Arc::new(TimestampMicrosecondArray::from(vec![1, 2]))),
        (
            "price",
            Arc::new(
                Decimal128Array::from(vec![1234, 5678])
                    .with_precision_and_scale(10, 2)
                    .expect("decimal"),
            ),
        ),
        ("small", Arc::new(UInt8Array::from(vec![1, 2]))),
        ("day", Arc::new(Date32Array::from(vec![1, 2]))),
        ("plain", Arc::new(Int64Array::from(vec![1, 2]))),
    ];
    let batch = RecordBatch::try_from_iter(columns).expect("batch");
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("level")))
        .build();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(&path).expect("create"),
        batch.schema(),
        Some(props),
    )
    .expect("writer");
    w.write(&batch).expect("write");
    w.close().expect("close");

    let source = ParquetSource::open(&path).expect("opens");
    let json: serde_json::Value =
        serde_json::from_str(&gpu_parquet::inspect::inspect(&source).to_json()).expect("valid JSON");
    assert_no_debug_syntax(&json);
    let some = |s: &str| Some(s.to_string());
    assert_eq!(
        leaf_types(&json),
        vec![
            ("s".into(), some("String"), some("UTF8")),
            (
                "ts_ms_utc".into(),
                some("Timestamp(MILLIS, utc)"),
                some("TIMESTAMP_MILLIS")
            ),
            (
                "ts_us_local".into(),
                some("Timestamp(MICROS, local)"),
                some("TIMESTAMP_MICROS")
            ),
            (
                "price".into(),
                some("Decimal(precision 10, scale 2)"),
                some("DECIMAL(precision 10, scale 2)")
            ),
            ("small".into(), some("Integer(8 bits, unsigned)"), some("UINT_8")),
            ("day".into(), some("Date"), some("DATE")),
            ("plain".into(), None, None),
        ]
    );
    assert_eq!(json["row_groups"][0]["chunks"][0]["codec"], "ZSTD");

    // An older writer's file with only converted types, where the corpus is present.
    if let Some(root) = corpus() {
        let source = ParquetSource::open(root.join("data/repeated_no_annotation.parquet")).expect("opens");
        let json: serde_json::Value =
            serde_json::from_str(&gpu_parquet::inspect::inspect(&source).to_json()).expect("valid JSON");
        assert_no_debug_syntax(&json);
        let kind = leaf_types(&json)
            .into_iter()
            .find(|(p, ..)| p == "phoneNumbers.phone.kind");
        assert_eq!(kind.map(|(_, _, c)| c), Some(some("UTF8")));
    }
}

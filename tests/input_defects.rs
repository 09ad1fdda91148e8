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

/// Our whole pipeline on `path`, through the reader: open, plan every column and row group, host
/// fetch, decode.
fn read_all(path: &Path) -> Result<RecordBatch, Error> {
    gpu_parquet::Reader::builder(path)
        .with_backend(gpu_parquet::BackendKind::Host)
        .build()?
        .read_batches()?
        .concat()
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

// ---- 2. Writer quirks: a footer field of the wrong Thrift type; chunks without their dictionary header -

/// dict-page-offset-zero.parquet (Dremio 3.2) puts a list of structs under ColumnMetaData field 15,
/// which parquet.thrift now gives to `bloom_filter_length` (an i32). arrow-rs 60 decodes it as an i32,
/// loses its place and fails ("Expected list element type of I64 but got I16"); Thrift's own readers
/// skip a field of an unexpected type, and so do we now. Its dictionary_page_offset of 0 is ignored
/// as before: the chunk has no dictionary page.
#[test]
fn a_footer_field_of_the_wrong_thrift_type_is_skipped_as_thrift_readers_do() {
    let Some(root) = corpus() else { return };
    let path = root.join("data/dict-page-offset-zero.parquet");
    match arrow_rs_read(&path) {
        Ok(b) => println!("arrow-rs reads it now ({} rows)", b.num_rows()),
        Err(e) => println!("arrow-rs: {e}"),
    }
    let source = ParquetSource::open(&path).expect("opens");
    let repairs = source.repairs();
    assert_eq!(repairs.len(), 1, "{repairs:?}");
    for part in [
        "row group 0",
        "column 'l_partkey'",
        "ColumnMetaData.15 (bloom_filter_length)",
        "is a list in the file",
        "an i32",
    ] {
        assert!(repairs[0].contains(part), "{:?} should say {part:?}", repairs[0]);
    }
    let chunk = source.metadata().row_group(0).column(0);
    assert_eq!(chunk.dictionary_page_offset(), Some(0));
    assert_eq!(chunk.data_page_offset(), 4);
    assert_eq!(source.checked_chunks()[0][0].offset, 4);

    let ours = read_all(&path).expect("our pipeline reads it");
    // pyarrow 26 reads 39 rows, every one 1552.
    assert_eq!(ours.num_rows(), 39);
    let col = ours.column(0).as_primitive::<Int32Type>();
    assert_eq!(col.null_count(), 0);
    assert!(col.values().iter().all(|&v| v == 1552), "{col:?}");
    // arrow-rs's own decode of the pages, given the footer as Thrift readers see it.
    let theirs = common::arrow_rs_read_with_metadata(
        &path,
        parquet::file::metadata::ParquetMetaData::clone(source.metadata()),
    )
    .expect("arrow-rs decodes it with the repaired footer");
    assert_eq!(ours, theirs);
}

/// `bytes` with the one occurrence of `from` replaced by `to` (panics unless there is exactly one).
fn patched(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let hits: Vec<usize> = bytes
        .windows(from.len())
        .enumerate()
        .filter(|(_, w)| *w == from)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(hits.len(), 1, "expected one occurrence of {from:02x?}");
    let mut out = bytes.to_vec();
    out[hits[0]..hits[0] + to.len()].copy_from_slice(to);
    out
}

/// A *required* footer field of the wrong type cannot be skipped: the error says which field of which
/// column chunk, not what the Thrift decoder tripped over.
#[test]
fn a_required_footer_field_of_the_wrong_type_is_named_precisely() {
    let Some(root) = corpus() else { return };
    let bytes = std::fs::read(root.join("data/dict-page-offset-zero.parquet")).expect("read");
    // ColumnMetaData field 7 (total_compressed_size, i64 40) then field 9 (data_page_offset, i64 4):
    // retype field 9 as an i32 (same varint on the wire).
    let copy = patched(&bytes, &[0x16, 0x50, 0x26, 0x08], &[0x16, 0x50, 0x25, 0x08]);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("required-mistyped.parquet");
    std::fs::write(&path, copy).expect("write");
    let err = ParquetSource::open(&path).expect_err("a required field of the wrong type");
    let text = err.to_string();
    println!("{text}");
    assert!(matches!(err, Error::InvalidMetadata { .. }), "{err:?}");
    for part in [
        "required-mistyped.parquet",
        "column 'l_partkey', row group 0",
        "ColumnMetaData.9 (data_page_offset) is an i32 in the file, but parquet.thrift makes it an i64",
        "cannot be read",
    ] {
        assert!(text.contains(part), "{text:?} should say {part:?}");
    }
    assert!(!text.contains("Expected list element type"), "{text}");
}

/// nation.dict-malformed.parquet (parquet-mr, no version): the two string chunks start with a
/// dictionary page whose 15-byte header their total_compressed_size leaves out (PARQUET-816), so
/// their last data page seems to run past the chunk ("Invalid page header"). The page headers,
/// walked, end exactly 15 bytes later with all 25 values: we read the chunks that long.
#[test]
fn chunks_whose_size_leaves_out_the_dictionary_header_are_read_whole() {
    let Some(root) = corpus() else { return };
    let path = root.join("data/nation.dict-malformed.parquet");
    let source = ParquetSource::open(&path).expect("opens");
    let md = source.metadata();
    assert_eq!(md.file_metadata().created_by(), Some("parquet-mr"));
    let lens: Vec<(i64, u64)> = (0..4)
        .map(|c| {
            (
                md.row_group(0).column(c).compressed_size(),
                source.checked_chunks()[0][c].len,
            )
        })
        .collect();
    assert_eq!(lens, vec![(125, 125), (322, 337), (125, 125), (2002, 2017)]);
    let repairs = source.repairs();
    assert_eq!(repairs.len(), 2, "{repairs:?}");
    assert!(repairs[0].contains("row group 0, column 'name'") && repairs[0].contains("15-byte dictionary page header"));
    assert!(repairs[1].contains("column 'comment_col'") && repairs[1].contains("read as 2017 bytes"));

    let ours = read_all(&path).expect("our pipeline reads it");
    // What pyarrow 26 reads.
    assert_eq!(ours.num_rows(), 25);
    let keys = ours.column(0).as_primitive::<Int32Type>();
    assert_eq!(keys.values().to_vec(), (0..25).collect::<Vec<i32>>());
    let regions = ours.column(2).as_primitive::<Int32Type>();
    assert_eq!(
        regions.values().to_vec(),
        vec![
            0, 1, 1, 1, 4, 0, 3, 3, 2, 2, 4, 4, 2, 4, 0, 0, 0, 1, 2, 3, 4, 2, 3, 3, 1
        ]
    );
    let names = ours.column(1).as_binary::<i32>();
    let names: Vec<&[u8]> = names.iter().map(|n| n.expect("no nulls")).collect();
    assert_eq!(names[0], b"ALGERIA");
    assert_eq!(names[18], b"CHINA");
    assert_eq!(names[24], b"UNITED STATES");
    let comments = ours.column(3).as_binary::<i32>();
    assert_eq!(
        comments.value(0),
        b" haggle. carefully final deposits detect slyly agai"
    );
    assert_eq!(
        comments.value(24),
        b"y final packages. slow foxes cajole quickly. quickly silent platelets breach ironic accounts. unusual pinto be"
    );
    // arrow-rs's decode of the same pages, given chunks that reach the next chunk (independent of
    // our page walk).
    let footer = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&std::fs::File::open(&path).expect("open"))
        .expect("arrow-rs decodes this footer");
    let stretched = common::stretched_to_next_chunk(&path, footer).expect("stretched");
    let theirs = common::arrow_rs_read_with_metadata(&path, stretched).expect("arrow-rs decodes the stretched chunks");
    assert_eq!(ours, theirs);
}

/// The correction is verified, not assumed: a chunk whose size is short by anything but its
/// dictionary page header keeps the footer's size, and the read fails naming the chunk.
#[test]
fn a_chunk_short_by_another_amount_is_not_stretched() {
    let Some(root) = corpus() else { return };
    let bytes = std::fs::read(root.join("data/nation.dict-malformed.parquet")).expect("read");
    // Column 'name': total_uncompressed_size and total_compressed_size, both 322 (zigzag varint
    // 0x84 0x05), become 321.
    let copy = patched(
        &bytes,
        &[0x16, 0x84, 0x05, 0x16, 0x84, 0x05],
        &[0x16, 0x82, 0x05, 0x16, 0x82, 0x05],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("short-by-16.parquet");
    std::fs::write(&path, copy).expect("write");
    let source = ParquetSource::open(&path).expect("opens");
    assert_eq!(source.checked_chunks()[0][1].len, 321);
    assert!(
        source.repairs().iter().all(|r| !r.contains("'name'")),
        "{:?}",
        source.repairs()
    );
    let err = read_all(&path).expect_err("a chunk 16 bytes short cannot be decoded");
    assert!(err.to_string().contains("column 'name', row group 0"), "{err}");
}

/// The descriptor a source keeps is a plain blocking one: cuFile refuses to register a descriptor
/// opened with O_NONBLOCK (CU_FILE_INVALID_FILE_OPEN_FLAG), which the open uses to not hang on FIFOs.
#[test]
fn an_opened_source_keeps_no_nonblocking_flag() {
    use std::os::fd::AsRawFd;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/flat_plain.parquet");
    let source = gpu_parquet::ParquetSource::open(&path).expect("open");
    // SAFETY: the descriptor stays open while `source` lives; F_GETFL only reads its flags.
    let flags = unsafe { libc::fcntl(source.file().as_raw_fd(), libc::F_GETFL) };
    assert!(flags >= 0);
    assert_eq!(flags & libc::O_NONBLOCK, 0, "O_NONBLOCK left set");
}

// ---- A DELTA_LENGTH_BYTE_ARRAY page that claims 2^48 lengths -----------------------------------------

/// parquet 60.1.0 allocates a vector of as many lengths as a DELTA_LENGTH_BYTE_ARRAY page's header
/// claims before reading any: a 171-byte file claiming 2^48 of them aborted the process ("memory
/// allocation of 281474976710652 bytes failed"). The host path now refuses the page, naming it, before
/// arrow-rs sees it; the same file with an honest count reads as written.
#[test]
fn a_delta_length_page_claiming_more_lengths_than_values_is_refused_not_an_abort() {
    use arrow::array::StringArray;
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Encoding;
    use parquet::file::properties::{EnabledStatistics, WriterProperties};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let batch = RecordBatch::try_new(
        Arc::new(arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
            "s",
            arrow::datatypes::DataType::Utf8,
            false,
        )])),
        vec![Arc::new(StringArray::from(vec!["abcdefg"]))],
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_column_encoding("s".into(), Encoding::DELTA_LENGTH_BYTE_ARRAY)
        .set_statistics_enabled(EnabledStatistics::None)
        .build();
    let honest = dir.path().join("honest.parquet");
    let mut w = ArrowWriter::try_new(std::fs::File::create(&honest).unwrap(), batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    assert_eq!(read_all(&honest).expect("the honest file reads"), batch);

    // The lengths' header (block 128, 4 miniblocks, 1 value, first length 7) and the value, rewritten
    // in the same bytes: 2^48 - 1 values claimed, first length 1, value "a".
    let bytes = std::fs::read(&honest).unwrap();
    let lying = patched(
        &bytes,
        &[&[0x80, 0x01, 0x04, 0x01, 0x0e][..], b"abcdefg"].concat(),
        &[
            &[0x80, 0x01, 0x04, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0x02][..],
            b"a",
        ]
        .concat(),
    );
    let path = dir.path().join("lying.parquet");
    std::fs::write(&path, lying).unwrap();
    let e = read_all(&path).expect_err("refused");
    let msg = e.to_string();
    assert!(matches!(e, Error::CorruptPage { .. }), "{msg}");
    assert!(msg.contains("column 's'") && msg.contains("page 0"), "{msg}");
    assert!(
        msg.contains("DELTA_LENGTH_BYTE_ARRAY lengths claim 281474976710655 values"),
        "{msg}"
    );
}

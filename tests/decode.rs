//! Host decode of files written by other writers: arrow-rs's `ArrowWriter` (nested lists, structs and
//! maps, dictionaries, every codec, data page v1 and v2, several row groups, nulls), and pyarrow when it
//! is importable. Each file is opened, planned, fetched with the host backend and decoded from the
//! fetched bytes only, and must equal the batch that was written.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, DictionaryArray, FixedSizeBinaryArray,
    Float64Array, Int32Array, Int32Builder, Int64Array, Int64Builder, LargeStringArray, ListBuilder, MapBuilder,
    StringArray, StringBuilder, StructArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use gpu_parquet::decode::host::{DecodedTable, FetchedChunks, decode_fetched};
use gpu_parquet::io::IoBackend;
use gpu_parquet::io::host::HostBackend;
use gpu_parquet::{Error, Location, ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::properties::{WriterProperties, WriterVersion};
use parquet::file::reader::ChunkReader;

mod common;
use common::host_fetch;

const ROWS: usize = 1000;

/// A batch exercising flat types, nulls, a dictionary and nested lists, structs and maps.
fn sample_batch(rows: usize) -> RecordBatch {
    let null_every = |k: usize| move |i: usize| i.is_multiple_of(k);
    let ints: Int32Array = (0..rows)
        .map(|i| (!null_every(7)(i)).then_some(i as i32 * 3 - 500))
        .collect();
    let longs: Int64Array = (0..rows).map(|i| i as i64 * 1_000_003).collect();
    let floats: Float64Array = (0..rows)
        .map(|i| (!null_every(11)(i)).then_some(i as f64 / 7.0))
        .collect();
    let bools: BooleanArray = (0..rows).map(|i| (i % 5 != 0).then_some(i % 3 == 0)).collect();
    let strings: StringArray = (0..rows)
        .map(|i| (!null_every(13)(i)).then(|| format!("value-{}", i * 31 % 97)))
        .collect();
    let large: LargeStringArray = (0..rows).map(|i| Some("x".repeat(i % 40))).collect();
    let binary: BinaryArray = (0..rows).map(|i| Some(vec![i as u8; i % 9])).collect();
    let fixed = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
        (0..rows).map(|i| (i % 4 != 1).then(|| (i as u32).to_le_bytes())),
        4,
    )
    .expect("fixed size binary");
    let dates: Date32Array = (0..rows).map(|i| Some(18_000 + i as i32)).collect();
    let ts: TimestampMicrosecondArray = (0..rows)
        .map(|i| (!null_every(17)(i)).then_some(1_700_000_000_000_000 + i as i64))
        .collect();
    let decimals = (0..rows)
        .map(|i| (!null_every(19)(i)).then_some(i as i128 * 12_345 - 99_999))
        .collect::<Decimal128Array>()
        .with_precision_and_scale(18, 3)
        .expect("decimal");
    let dict: DictionaryArray<Int32Type> = (0..rows)
        .map(|i| (!null_every(23)(i)).then(|| ["red", "green", "blue"][i % 3]))
        .collect();

    let mut lists = ListBuilder::new(Int32Builder::new());
    let mut nested_lists = ListBuilder::new(ListBuilder::new(Int32Builder::new()));
    let mut maps = MapBuilder::new(None, StringBuilder::new(), Int64Builder::new());
    let mut struct_list = ListBuilder::new(StringBuilder::new());
    for i in 0..rows {
        if i % 6 == 0 {
            lists.append_null();
        } else {
            for k in 0..i % 4 {
                lists.values().append_option((k != 2).then_some((i + k) as i32));
            }
            lists.append(true);
        }
        for j in 0..i % 3 {
            for k in 0..j {
                nested_lists.values().values().append_value((i * k) as i32);
            }
            nested_lists.values().append(j != 1 || i % 2 == 0);
        }
        nested_lists.append(i % 10 != 0);
        for k in 0..i % 3 {
            maps.keys().append_value(format!("k{k}"));
            maps.values().append_option((k != 1).then_some((i * k) as i64));
        }
        maps.append(i % 8 != 0).expect("map entry");
        for k in 0..i % 2 + 1 {
            struct_list.values().append_value(format!("s{}", i + k));
        }
        struct_list.append(i % 9 != 0);
    }
    let struct_ints: Int32Array = (0..rows).map(|i| (i % 4 != 0).then_some(i as i32)).collect();
    let strukt = StructArray::from(vec![
        (
            Arc::new(Field::new("a", DataType::Int32, true)),
            Arc::new(struct_ints) as ArrayRef,
        ),
        (
            Arc::new(Field::new(
                "b",
                DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true))),
                true,
            )),
            Arc::new(struct_list.finish()) as ArrayRef,
        ),
    ]);

    let columns: Vec<(&str, ArrayRef)> = vec![
        ("ints", Arc::new(ints)),
        ("longs", Arc::new(longs)),
        ("floats", Arc::new(floats)),
        ("bools", Arc::new(bools)),
        ("strings", Arc::new(strings)),
        ("large", Arc::new(large)),
        ("binary", Arc::new(binary)),
        ("fixed", Arc::new(fixed)),
        ("dates", Arc::new(dates)),
        ("ts", Arc::new(ts)),
        ("decimals", Arc::new(decimals)),
        ("dict", Arc::new(dict)),
        ("list", Arc::new(lists.finish())),
        ("nested_list", Arc::new(nested_lists.finish())),
        ("map", Arc::new(maps.finish())),
        ("struct", Arc::new(strukt)),
    ];
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), *n != "longs" && *n != "large"))
        .collect();
    let arrays = columns.into_iter().map(|(_, a)| a).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("sample batch")
}

fn write(path: &Path, batch: &RecordBatch, props: WriterProperties) {
    let file = File::create(path).expect("create");
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
    // Written in slices so row groups and pages split at different places.
    let mut off = 0;
    while off < batch.num_rows() {
        let n = 137.min(batch.num_rows() - off);
        w.write(&batch.slice(off, n)).expect("write");
        off += n;
    }
    w.close().expect("close");
}

fn decode_file(
    path: &Path,
    projection: &Projection,
    rgs: &RowGroupSelection,
    threads: usize,
) -> Result<(ReadPlan, DecodedTable), Error> {
    let source = ParquetSource::open(path)?;
    let plan = ReadPlan::build(&source, projection, rgs, PlanOptions::default())?;
    let fetched = HostBackend::new(2)?.fetch(&source, &plan)?;
    let table = decode_fetched(&source, &plan, &fetched.buffer.into_bytes(), threads)?;
    Ok((plan, table))
}

/// Every column of every row group of `source`, planned with the default options.
fn plan_all(source: &ParquetSource) -> ReadPlan {
    ReadPlan::build(
        source,
        &Projection::All,
        &RowGroupSelection::All,
        PlanOptions::default(),
    )
    .expect("plans")
}

fn decode_all(path: &Path) -> RecordBatch {
    let (_, table) = decode_file(path, &Projection::All, &RowGroupSelection::All, 2)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    table.concat().expect("concat")
}

#[test]
fn arrow_writer_files_round_trip_for_every_codec_and_page_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let batch = sample_batch(ROWS);
    let codecs = [
        Compression::UNCOMPRESSED,
        Compression::SNAPPY,
        Compression::ZSTD(ZstdLevel::default()),
        Compression::LZ4,
        Compression::LZ4_RAW,
        Compression::GZIP(GzipLevel::default()),
        Compression::BROTLI(BrotliLevel::default()),
    ];
    let mut n = 0;
    for codec in codecs {
        for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
            for dictionary in [true, false] {
                let props = WriterProperties::builder()
                    .set_compression(codec)
                    .set_writer_version(version)
                    .set_dictionary_enabled(dictionary)
                    .set_max_row_group_row_count(Some(300))
                    .set_data_page_row_count_limit(64)
                    .set_write_batch_size(32)
                    .build();
                let path = dir.path().join(format!("{codec:?}-{version:?}-{dictionary}.parquet"));
                write(&path, &batch, props);
                let source = ParquetSource::open(&path).expect("opens");
                assert_eq!(
                    source.metadata().num_row_groups(),
                    ROWS.div_ceil(300),
                    "several row groups"
                );
                let decoded = decode_all(&path);
                assert_eq!(decoded, batch, "{}", path.display());
                n += 1;
            }
        }
    }
    println!("{n} files round-tripped");
}

#[test]
fn one_batch_per_row_group_in_plan_order_whatever_the_thread_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let batch = sample_batch(ROWS);
    let path = dir.path().join("rg.parquet");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(250))
        .build();
    write(&path, &batch, props);
    let order = vec![3, 0, 2];
    for threads in [0, 1, 3] {
        let (plan, table) = decode_file(
            &path,
            &Projection::All,
            &RowGroupSelection::Indices(order.clone()),
            threads,
        )
        .expect("decodes");
        assert_eq!(plan.row_groups, order);
        assert_eq!(table.batches.len(), order.len());
        assert_eq!(table.row_group_batches, vec![0..1, 1..2, 2..3]);
        for (b, &g) in table.batches.iter().zip(&order) {
            assert_eq!(*b, batch.slice(g * 250, 250), "row group {g} with {threads} threads");
        }
        assert_eq!(table.num_rows(), 750);
    }
}

#[test]
fn projections_of_written_files_prune_like_the_schema_says() {
    let dir = tempfile::tempdir().expect("tempdir");
    let batch = sample_batch(ROWS);
    let path = dir.path().join("p.parquet");
    write(&path, &batch, WriterProperties::builder().build());
    // Whole top-level columns by name, in any order: schema order out.
    let (_, t) = decode_file(
        &path,
        &Projection::Names(vec!["map".into(), "ints".into()]),
        &RowGroupSelection::All,
        2,
    )
    .expect("decodes");
    let got = t.concat().expect("concat");
    assert_eq!(got.schema().fields().len(), 2);
    assert_eq!(
        got.column(0).as_ref(),
        batch.column_by_name("ints").expect("ints").as_ref()
    );
    assert_eq!(
        got.column(1).as_ref(),
        batch.column_by_name("map").expect("map").as_ref()
    );
    // One leaf of a struct: the struct keeps only that child.
    let (_, t) = decode_file(
        &path,
        &Projection::Names(vec!["struct.a".into()]),
        &RowGroupSelection::All,
        2,
    )
    .expect("decodes");
    let got = t.concat().expect("concat");
    let DataType::Struct(children) = got.schema().field(0).data_type().clone() else {
        panic!("expected a struct, got {}", got.schema().field(0))
    };
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].name(), "a");
    let want = batch.column_by_name("struct").expect("struct");
    let want = want.as_any().downcast_ref::<StructArray>().expect("struct array");
    let got_struct = got
        .column(0)
        .as_any()
        .downcast_ref::<StructArray>()
        .expect("struct array");
    assert_eq!(got_struct.column(0).as_ref(), want.column(0).as_ref());
    let validity = |a: &StructArray| (0..a.len()).map(|i| a.is_valid(i)).collect::<Vec<_>>();
    assert_eq!(validity(got_struct), validity(want));
}

#[test]
fn empty_files_selections_and_projections() {
    let dir = tempfile::tempdir().expect("tempdir");
    let batch = sample_batch(10);
    // A file with a schema and no rows (no row groups at all).
    let empty = dir.path().join("empty.parquet");
    ArrowWriter::try_new(File::create(&empty).expect("create"), batch.schema(), None)
        .expect("writer")
        .close()
        .expect("close");
    let source = ParquetSource::open(&empty).expect("opens");
    assert_eq!(source.metadata().num_row_groups(), 0);
    let got = decode_all(&empty);
    assert_eq!(got.num_rows(), 0);
    assert_eq!(got.schema(), batch.schema());

    let path = dir.path().join("ten.parquet");
    write(&path, &batch, WriterProperties::builder().build());
    // No columns: rows still count.
    let (plan, t) = decode_file(&path, &Projection::Leaves(vec![]), &RowGroupSelection::All, 2).expect("decodes");
    assert!(plan.chunks.is_empty());
    assert_eq!(t.num_rows(), 10);
    assert_eq!(t.schema.fields().len(), 0);
    // No row groups: the projected schema, no rows.
    let (plan, t) = decode_file(
        &path,
        &Projection::Names(vec!["ints".into()]),
        &RowGroupSelection::Indices(vec![]),
        2,
    )
    .expect("decodes");
    assert!(plan.chunks.is_empty());
    assert_eq!(t.num_rows(), 0);
    assert_eq!(t.schema.field(0).name(), "ints");
    assert_eq!(t.concat().expect("concat").num_rows(), 0);
}

/// Rewrites chunk metadata the way quirky writers do, and checks we still decode what was written.
#[test]
fn bogus_dictionary_offsets_are_ignored_like_pyarrow_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let batch = sample_batch(ROWS);
    let path = dir.path().join("quirk.parquet");
    // No dictionaries anywhere, so every dictionary offset we add is bogus.
    let props = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_max_row_group_row_count(Some(400))
        .build();
    write(&path, &batch, props);
    let file = File::open(&path).expect("open");
    let len = file.metadata().expect("stat").len();
    let meta = ParquetMetaDataReader::new().parse_and_finish(&file).expect("footer");
    assert!(
        meta.row_groups()
            .iter()
            .flat_map(|rg| rg.columns())
            .all(|c| c.dictionary_page_offset().is_none()),
        "the writer was asked for no dictionaries"
    );
    // Column i of each row group: offset 0 (even i), or one past the first data page (odd i).
    let mut builder = meta.into_builder();
    let mut groups = Vec::new();
    for rg in builder.take_row_groups() {
        let cols = rg
            .columns()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let bogus = if i % 2 == 0 { 0 } else { c.data_page_offset() + 1 };
                c.clone()
                    .into_builder()
                    .set_dictionary_page_offset(Some(bogus))
                    .build()
                    .expect("chunk")
            })
            .collect();
        groups.push(rg.into_builder().set_column_metadata(cols).build().expect("row group"));
    }
    let quirky: Arc<ParquetMetaData> = Arc::new(builder.set_row_groups(groups).build());

    // arrow-rs trusts the offsets and fails on this metadata: the quirk is real.
    let arrow_meta = ArrowReaderMetadata::try_new(quirky.clone(), ArrowReaderOptions::new()).expect("arrow metadata");
    let theirs = ParquetRecordBatchReaderBuilder::new_with_metadata(File::open(&path).expect("open"), arrow_meta)
        .build()
        .and_then(|r| r.collect::<Result<Vec<_>, _>>().map_err(Into::into));
    assert!(
        theirs.is_err(),
        "arrow-rs was expected to trip over a dictionary offset of 0"
    );

    let source = ParquetSource::from_parts(path.clone(), file, len, quirky).expect("validates");
    let plan = plan_all(&source);
    for c in &plan.chunks {
        let chunk = source.metadata().row_group(c.row_group).column(c.column);
        assert_eq!(
            c.offset as i64,
            chunk.data_page_offset(),
            "{}: starts at its data page",
            c.column_path
        );
    }
    let fetched = host_fetch(&source, &plan, 2);
    let table = decode_fetched(&source, &plan, &fetched.buffer, 2).expect("decodes");
    assert_eq!(table.concat().expect("concat"), batch);
}

#[test]
fn the_decoder_is_served_only_the_fetched_chunks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let batch = sample_batch(100);
    let path = dir.path().join("sparse.parquet");
    write(&path, &batch, WriterProperties::builder().build());
    let source = ParquetSource::open(&path).expect("opens");
    let plan = ReadPlan::build(
        &source,
        &Projection::Names(vec!["strings".into()]),
        &RowGroupSelection::All,
        PlanOptions::default(),
    )
    .expect("plans");
    let fetched = host_fetch(&source, &plan, 1);
    let reader = FetchedChunks::new(&plan, &fetched.buffer, source.len(), &source.location()).expect("reader");
    let chunk = &plan.chunks[0];
    let file_bytes = std::fs::read(&path).expect("read");
    let (s, e) = (chunk.offset as usize, (chunk.offset + chunk.len) as usize);
    // Inside the chunk: the file's bytes, without a copy of the whole buffer.
    let got = reader
        .get_bytes(chunk.offset + 1, chunk.len as usize - 1)
        .expect("inside the chunk");
    assert_eq!(&got[..], &file_bytes[s + 1..e]);
    // A reader from inside the chunk ends where the chunk ends.
    let mut tail = Vec::new();
    std::io::Read::read_to_end(&mut reader.get_read(chunk.offset + 2).expect("reader"), &mut tail).expect("read");
    assert_eq!(&tail[..], &file_bytes[s + 2..e]);
    // Anything else is refused: before, across the end, after, the footer.
    assert!(reader.get_bytes(chunk.offset - 1, 2).is_err());
    assert!(reader.get_bytes(chunk.offset, chunk.len as usize + 1).is_err());
    assert!(reader.get_read(chunk.offset + chunk.len).is_err());
    assert!(reader.get_bytes(source.len() - 8, 4).is_err());
    assert!(reader.get_read(0).is_err());

    // A buffer that does not hold the plan's chunks is refused up front.
    let short = Bytes::from(vec![0u8; plan.dest_len as usize - 1]);
    assert!(FetchedChunks::new(&plan, &short, source.len(), &Location::file(&path)).is_err());
}

#[test]
fn corrupted_chunk_bytes_give_located_errors_not_panics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let batch = sample_batch(300);
    let path = dir.path().join("c.parquet");
    write(
        &path,
        &batch,
        WriterProperties::builder().set_compression(Compression::SNAPPY).build(),
    );
    let source = ParquetSource::open(&path).expect("opens");
    let plan = plan_all(&source);
    let fetched = host_fetch(&source, &plan, 1);
    let clean = decode_fetched(&source, &plan, &fetched.buffer, 2).expect("clean bytes decode");
    assert_eq!(clean.concat().expect("concat"), batch);
    let (mut refused, mut state) = (0, 0x1234_5678_9abc_def1u64);
    for round in 0..60 {
        let mut bytes = fetched.buffer.to_vec();
        // Damage one chunk: a run of bytes overwritten with pseudo-random values.
        let c = &plan.chunks[round % plan.chunks.len()];
        for k in 0..4 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let at = c.dest_offset + state % c.len.max(1);
            bytes[at as usize] = (state >> (8 * k)) as u8;
        }
        match decode_fetched(&source, &plan, &Bytes::from(bytes), 2) {
            Err(e) => {
                let named = match &e {
                    Error::Parquet { location, .. }
                    | Error::DecoderPanic { location, .. }
                    | Error::CorruptPage { location, .. } => {
                        location.file == path && location.row_group.is_some() && location.column.is_some()
                    }
                    _ => false,
                };
                assert!(
                    named,
                    "round {round}: error should name file, column and row group: {e}"
                );
                refused += 1;
            }
            // Damage can land where it changes nothing decodable (statistics in a page header) or
            // changes values silently (uncompressed PLAIN data); it must not break the table's shape.
            Ok(t) => assert_eq!(t.num_rows(), batch.num_rows(), "round {round}"),
        }
    }
    println!("{refused} of 60 damaged fetches refused");
    assert!(
        refused > 10,
        "damage to compressed chunks should usually be detected ({refused}/60)"
    );
}

fn pyarrow_available() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import pyarrow"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn pyarrow_files_match_arrow_rs() {
    if !pyarrow_available() {
        common::skip("python3 cannot import pyarrow here");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let script = r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
out = sys.argv[1]
n = 2000
t = pa.table({
    "i": pa.array([None if i % 7 == 0 else i for i in range(n)], pa.int64()),
    "s": pa.array([None if i % 5 == 0 else f"v{i % 37}" for i in range(n)]),
    "l": pa.array([None if i % 9 == 0 else list(range(i % 4)) for i in range(n)], pa.list_(pa.int32())),
    "st": pa.array([{"a": i, "b": [str(i)] * (i % 3)} for i in range(n)]),
    "m": pa.array([[("k%d" % k, k * i) for k in range(i % 3)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
})
for codec in ["NONE", "SNAPPY", "ZSTD", "LZ4", "GZIP", "BROTLI"]:
    for v2 in [False, True]:
        pq.write_table(t, f"{out}/{codec}-{v2}.parquet", compression=codec, row_group_size=700,
                       data_page_version="2.0" if v2 else "1.0", data_page_size=4096)
"#;
    let status = std::process::Command::new("python3")
        .args(["-c", script, &dir.path().display().to_string()])
        .status()
        .expect("run python3");
    assert!(status.success(), "pyarrow failed to write the files");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 12);
    for f in files {
        let ours = decode_all(&f);
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&f).expect("open"))
            .and_then(|b| b.build())
            .expect("arrow-rs reads pyarrow's file");
        let schema = arrow::record_batch::RecordBatchReader::schema(&reader);
        let batches = reader.collect::<Result<Vec<_>, _>>().expect("arrow-rs decodes");
        let theirs = arrow::compute::concat_batches(&schema, &batches).expect("concat");
        assert_eq!(ours, theirs, "{}", f.display());
        assert_eq!(ours.num_rows(), 2000);
    }
}

//! The GPU decode pipeline run on the host, with the kernels' references in place of the kernels
//! (`decode_reference`), against arrow-rs decoding the same fetched bytes (`decode_fetched`): every
//! file of the parquet-testing corpus and of `testdata/`, value for value (types, nulls, values). A
//! file arrow-rs refuses must be refused (an error, never a panic); the GPU's own output is compared
//! with the same references on the GPU machine (tests/device_decode.rs).

use std::path::{Path, PathBuf};
use std::time::Duration;

use gpu_parquet::decode::gpu::{decode_reference, decode_reference_with};
use gpu_parquet::decode::host::decode_fetched;
use gpu_parquet::decode::host_headers::parse_step_headers;
use gpu_parquet::decode::pipeline::PageHints;
use gpu_parquet::decode::table::DecodedWhere;
use gpu_parquet::panic_guard::contain_panics;
use gpu_parquet::{Location, ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};

mod common;
use common::{corpus, files_under, host_fetch};

/// Files arrow-rs needs longer than this for are left out (a 2 GiB Brotli bomb).
const SLOW: Duration = Duration::from_secs(5);

#[derive(Debug, Default)]
struct Tally {
    equal: usize,
    both_refused: usize,
    gpu_columns: usize,
    host_columns: usize,
    /// Why columns went to the host: the reason, and the files' columns that gave it.
    host_reasons: std::collections::BTreeMap<String, Vec<String>>,
    skipped: Vec<String>,
}

/// The file at `path` opened and planned whole (every column and row group).
fn plan_whole(path: &Path) -> (ParquetSource, ReadPlan) {
    let source = ParquetSource::open(path).unwrap();
    let plan = ReadPlan::build(
        &source,
        &Projection::All,
        &RowGroupSelection::All,
        PlanOptions::default(),
    )
    .unwrap();
    (source, plan)
}

/// [`plan_whole`], the plan's bytes fetched on the host.
fn open_whole(path: &Path) -> (ParquetSource, ReadPlan, bytes::Bytes) {
    let (source, plan) = plan_whole(path);
    let fetched = host_fetch(&source, &plan, 2).buffer;
    (source, plan, fetched)
}

fn check_file(path: &Path, tally: &mut Tally) {
    let name = path.display().to_string();
    let Ok(source) = ParquetSource::open(path) else {
        tally.skipped.push(format!("{name}: footer refused"));
        return;
    };
    let Ok(plan) = ReadPlan::build(
        &source,
        &Projection::All,
        &RowGroupSelection::All,
        PlanOptions::default(),
    ) else {
        tally.skipped.push(format!("{name}: plan refused"));
        return;
    };
    let fetched = host_fetch(&source, &plan, 2).buffer;
    let started = std::time::Instant::now();
    let oracle = decode_fetched(&source, &plan, &fetched, 2).and_then(|t| t.concat());
    if started.elapsed() > SLOW {
        tally
            .skipped
            .push(format!("{name}: arrow-rs took {:?}", started.elapsed()));
        return;
    }
    let ours = contain_panics(&Location::file(path), || {
        let (batch, _stats) = decode_reference(&source, &plan, &fetched)?;
        let host: Vec<(String, String)> = batch
            .columns
            .iter()
            .filter_map(|c| match &c.decoded {
                DecodedWhere::Host(why) => Some((why.clone(), c.name.clone())),
                DecodedWhere::Gpu => None,
            })
            .collect();
        let gpu = batch.columns.len() - host.len();
        Ok((batch.to_host()?, gpu, host))
    });
    // The same with the page headers parsed on the host from the file, as a GPU read of a file in the
    // page cache does: the same table, or the same refusal.
    let with_host_headers = contain_panics(&Location::file(path), || {
        let file = std::fs::File::open(path).map_err(|e| gpu_parquet::Error::io(Location::file(path), "open", e))?;
        let headers =
            parse_step_headers(&file, &plan).map_err(|e| gpu_parquet::Error::io(Location::file(path), "headers", e))?;
        let (batch, stats, counts) =
            decode_reference_with(&source, &plan, &fetched, &PageHints::default(), Some(&headers))?;
        assert_eq!(counts.header_passes, 0, "{name}: no header pass with host headers");
        assert!(
            stats.headers_on_host || batch.columns.iter().all(|c| c.decoded != DecodedWhere::Gpu),
            "{name}"
        );
        batch.to_host()
    });
    match (&ours, &with_host_headers) {
        (Ok((want, _, _)), Ok(got)) => assert_eq!(want, got, "{name}: with host headers"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{name}: refusals"),
        (a, b) => panic!(
            "{name}: GPU-pass headers {:?}, host headers {:?}",
            a.as_ref().err(),
            b.as_ref().err()
        ),
    }
    match (oracle, ours) {
        (Ok(want), Ok((got, gpu, host))) => {
            assert_eq!(want.schema(), got.schema(), "{name}: schema");
            assert_eq!(want.num_rows(), got.num_rows(), "{name}: rows");
            for (i, f) in want.schema().fields().iter().enumerate() {
                assert_eq!(
                    want.column(i).to_data(),
                    got.column(i).to_data(),
                    "{name}: column {}",
                    f.name()
                );
            }
            tally.equal += 1;
            tally.gpu_columns += gpu;
            tally.host_columns += host.len();
            let file = path
                .file_name()
                .map_or(name.clone(), |f| f.to_string_lossy().into_owned());
            for (why, column) in host {
                tally
                    .host_reasons
                    .entry(why)
                    .or_default()
                    .push(format!("{file}:{column}"));
            }
        }
        (Err(_), Err(e)) => {
            assert!(!e.to_string().contains("panicked"), "{name}: {e}");
            tally.both_refused += 1;
        }
        (Ok(_), Err(e)) => panic!("{name}: arrow-rs decodes it, the reference pipeline says: {e}"),
        (Err(e), Ok(_)) => panic!("{name}: arrow-rs refuses it ({e}), the reference pipeline decoded it"),
    }
}

#[test]
fn reference_pipeline_equals_arrow_rs_on_every_file() {
    let mut files: Vec<PathBuf> = files_under(&common::testdata_dir(), |p| {
        p.extension().is_some_and(|e| e == "parquet")
    });
    if let Some(c) = corpus() {
        files.extend(files_under(&c.join("data"), |p| {
            p.extension().is_some_and(|e| e == "parquet")
        }));
    }
    let mut tally = Tally::default();
    for f in &files {
        check_file(f, &mut tally);
    }
    println!("{tally:#?}");
    assert!(tally.equal >= 4, "{tally:?}");
    // Every column of these files decodes on the GPU route (issue 41's figure: 0 on the host).
    assert_eq!(
        tally.host_columns, 0,
        "columns decoded on the host: {:#?}",
        tally.host_reasons
    );
}

/// The same over the files of other writers (pyarrow, polars, duckdb, fastparquet:
/// `tests/writers/make_files.py`, as tests/other_writers.rs writes them): equal to arrow-rs, and the
/// columns decoded on the host counted with their reasons. Skips, saying why, without python3 or a
/// writer (CI installs them).
#[test]
fn reference_pipeline_equals_arrow_rs_on_other_writers_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/writers/make_files.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            println!("skipped: make_files.py failed: {}", String::from_utf8_lossy(&o.stderr));
            return;
        }
        Err(e) => {
            println!("skipped: python3: {e}");
            return;
        }
    }
    let files: Vec<PathBuf> = files_under(dir.path(), |p| p.extension().is_some_and(|e| e == "parquet"));
    if files.is_empty() {
        println!("skipped: no Parquet writer is importable by python3");
        return;
    }
    let mut tally = Tally::default();
    for f in &files {
        check_file(f, &mut tally);
    }
    println!("{tally:#?}");
    assert!(tally.equal > 0, "{tally:?}");
    assert_eq!(
        tally.host_columns, 0,
        "columns decoded on the host: {:#?}",
        tally.host_reasons
    );
}

/// A fetch laid out by an `O_DIRECT` plan (chunks padded to 4 KiB in the buffer) decodes as the
/// unaligned one does, host-routed columns (a fixed-size list, arrow-rs over the chunks copied back)
/// included: found on the H200 through the corruption suite's staged-`O_DIRECT` decoder, where arrow-rs
/// was handed the chunks packed end to end under the aligned plan's offsets.
#[test]
fn an_aligned_fetch_decodes_as_an_unaligned_one() {
    // Fixed-size lists (of integers, and of strings: host-routed, the kernels pad fixed-width items
    // only) beside a list and a flat column.
    let fixed = {
        use arrow::array::{ArrayRef, FixedSizeListArray, Int32Array, ListArray, StringArray};
        use arrow::datatypes::Int32Type;
        use arrow::datatypes::{DataType, Field};
        use std::sync::Arc;
        let n = 2000;
        let values = (0..n).map(|i| (i % 5 != 0).then(|| (0..3).map(move |j| Some(i * 3 + j))));
        let lists = (0..n).map(|i| (i % 4 != 0).then(|| (0..i % 5).map(move |j| Some(i + j))));
        let batch = arrow::record_batch::RecordBatch::try_from_iter([
            (
                "fixed",
                Arc::new(FixedSizeListArray::from_iter_primitive::<Int32Type, _, _>(values, 3)) as ArrayRef,
            ),
            (
                "list",
                Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(lists)) as ArrayRef,
            ),
            ("id", Arc::new(Int32Array::from_iter_values(0..n)) as ArrayRef),
            (
                "words",
                Arc::new(FixedSizeListArray::new(
                    Arc::new(Field::new("item", DataType::Utf8, true)),
                    2,
                    Arc::new(StringArray::from_iter_values((0..n * 2).map(|i| format!("w{}", i % 7)))),
                    None,
                )) as ArrayRef,
            ),
        ])
        .unwrap();
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(file.reopen().unwrap(), batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        file
    };
    let mut files = vec![
        common::testdata_dir().join("nested.parquet"),
        fixed.path().to_path_buf(),
    ];
    if let Some(c) = corpus() {
        for name in [
            "nested_lists.snappy.parquet",
            "nullable.impala.parquet",
            "alltypes_plain.parquet",
        ] {
            files.push(c.join("data").join(name));
        }
    }
    let mut host_routed = 0;
    for path in files.iter().filter(|p| p.exists()) {
        let source = ParquetSource::open(path).expect("open");
        let plans = [false, true].map(|align| {
            ReadPlan::build(
                &source,
                &Projection::All,
                &RowGroupSelection::All,
                PlanOptions {
                    align,
                    ..PlanOptions::default()
                },
            )
            .expect("plan")
        });
        let [plain, aligned] = plans.map(|plan| {
            let fetched = host_fetch(&source, &plan, 2).buffer;
            let (batch, _) =
                decode_reference(&source, &plan, &fetched).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            host_routed += batch.columns.iter().filter(|c| c.decoded != DecodedWhere::Gpu).count();
            batch.to_host().expect("host")
        });
        assert_eq!(plain, aligned, "{}", path.display());
    }
    assert!(host_routed > 0, "some columns went through arrow-rs");
}

/// A file written by arrow-rs, its whole read fetched, and arrow-rs's table of it.
type WrittenFile = (
    tempfile::NamedTempFile,
    ParquetSource,
    ReadPlan,
    bytes::Bytes,
    arrow::record_batch::RecordBatch,
);

/// `batch` written by arrow-rs with `props`: the file, its whole read fetched, and arrow-rs's table of
/// it.
fn written_file(
    batch: &arrow::record_batch::RecordBatch,
    props: parquet::file::properties::WriterProperties,
) -> WrittenFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file.reopen().unwrap(), batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    let (source, plan, fetched) = open_whole(file.path());
    let want = decode_fetched(&source, &plan, &fetched, 2)
        .and_then(|t| t.concat())
        .unwrap();
    (file, source, plan, fetched, want)
}

/// `batch` written by arrow-rs in plain pages of `rows_per_page` rows, with chunk statistics and,
/// where `offset_index`, an offset index (checked): as [`written_file`].
fn paged_file(batch: &arrow::record_batch::RecordBatch, rows_per_page: usize, offset_index: bool) -> WrittenFile {
    use parquet::file::properties::{EnabledStatistics, WriterProperties};
    let props = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_data_page_row_count_limit(rows_per_page)
        .set_write_batch_size(rows_per_page)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_offset_index_disabled(!offset_index)
        .build();
    let written = written_file(batch, props);
    assert_eq!(written.1.metadata().page_index().is_some(), offset_index, "page index");
    written
}

/// Page headers are parsed in one pass where the file's OffsetIndex counts each chunk's pages, from the
/// first step; without one, once a step has shown how many pages its columns' chunks hold per byte
/// (the first step, with small pages, runs out of room and counts first). Both decode equal to
/// arrow-rs.
#[test]
fn page_headers_take_one_pass_with_an_offset_index_or_once_the_hints_have_seen_a_step() {
    use arrow::array::{Int64Array, StringArray};
    use arrow::record_batch::RecordBatch;
    use std::sync::Arc;

    let n = 3000i64;
    let ids = Int64Array::from_iter_values(0..n);
    let names = StringArray::from_iter_values((0..n).map(|i| format!("name-{}", i % 97)));
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(ids) as arrow::array::ArrayRef),
        ("name", Arc::new(names) as arrow::array::ArrayRef),
    ])
    .unwrap();
    for indexed in [true, false] {
        let (_file, source, plan, fetched, want) = paged_file(&batch, 100, indexed);
        let hints = PageHints::default();
        let expected = if indexed { [1, 1] } else { [3, 1] };
        for (run, passes_expected) in expected.into_iter().enumerate() {
            let (batch, stats, counts) = decode_reference_with(&source, &plan, &fetched, &hints, None).unwrap();
            assert!(stats.columns.iter().all(|c| c.pages >= 30), "{:?}", stats.columns);
            assert_eq!(
                counts.header_passes, passes_expected,
                "indexed {indexed}, run {run}: page-header passes"
            );
            let got = batch.to_host().unwrap();
            assert_eq!(want, got, "indexed {indexed}, run {run}");
        }
    }
}

/// The room an OffsetIndex gives a chunk's headers is bounded by its bytes (a page per 64 bytes): a
/// chunk of pages smaller than that, as a crafted index could claim, takes the count and fill passes,
/// and decodes equal to arrow-rs.
#[test]
fn an_offset_index_gives_headers_no_more_room_than_a_page_per_64_bytes() {
    use arrow::array::Int32Array;
    use arrow::record_batch::RecordBatch;
    use std::sync::Arc;

    let batch = RecordBatch::try_from_iter([(
        "v",
        Arc::new(Int32Array::from_iter_values(0..400)) as arrow::array::ArrayRef,
    )])
    .unwrap();
    // Pages of 2 values: 8 bytes of data and a header of about 20.
    let (_file, source, plan, fetched, want) = paged_file(&batch, 2, true);
    let (batch, stats, counts) = decode_reference_with(&source, &plan, &fetched, &PageHints::default(), None).unwrap();
    assert_eq!(stats.columns[0].pages, 200, "{:?}", stats.columns);
    assert_eq!(counts.header_passes, 3, "page-header passes");
    assert_eq!(want, batch.to_host().unwrap());
}

/// A step's allocations do not grow with its row groups' dictionaries: every BYTE_ARRAY dictionary's
/// entry table has its place in one allocation (on the device each allocation is a driver call, and
/// each of a TPC-H lineitem step's 310 or so dictionaries made one, taken while the other held
/// steps made theirs). The same file of 2 and of 40 row groups, one step each, equal to arrow-rs.
#[test]
fn a_steps_allocations_do_not_grow_with_its_dictionaries() {
    use arrow::array::{Int64Array, StringArray};
    use arrow::record_batch::RecordBatch;
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;

    let allocations = |row_groups: usize| {
        let n = 400 * row_groups;
        let batch = RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..n as i64)) as arrow::array::ArrayRef,
            ),
            (
                "mode",
                Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("mode-{}", i % 7)))),
            ),
            (
                "flag",
                Arc::new(StringArray::from_iter_values((0..n).map(|i| ["A", "N", "R"][i % 3]))),
            ),
        ])
        .unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(400))
            .build();
        let (_file, source, plan, fetched, want) = written_file(&batch, props);
        assert_eq!(source.metadata().num_row_groups(), row_groups);
        let (batch, stats, counts) =
            decode_reference_with(&source, &plan, &fetched, &PageHints::default(), None).unwrap();
        assert_eq!(want, batch.to_host().unwrap(), "{row_groups} row groups");
        // Both string columns decoded on the GPU route, each chunk with its dictionary page.
        assert!(
            stats.columns.iter().all(|c| c.pages >= 2 * row_groups),
            "{:?}",
            stats.columns
        );
        counts.allocations
    };
    let (few, many) = (allocations(2), allocations(40));
    assert_eq!(few, many, "allocations of a step of 2 row groups, and of 40");
}

/// A step of no rows (a file whose row groups are all empty) decodes to empty columns equal to
/// arrow-rs's: its string columns' offsets are `[0]`, with no page to write them.
#[test]
fn a_step_of_empty_row_groups_decodes_like_arrow_rs() {
    use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    use std::sync::Arc;

    let schema =
        parse_message_type("message m { optional binary s (UTF8); required binary r (UTF8); optional int64 v; }")
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for groups in [vec![0usize], vec![0, 0]] {
        let path = dir.path().join(format!("empty-{}.parquet", groups.len()));
        let file = std::fs::File::create(&path).unwrap();
        let props = Arc::new(WriterProperties::builder().build());
        let mut w = SerializedFileWriter::new(file, Arc::new(schema.clone()), props).unwrap();
        for _ in &groups {
            let mut rg = w.next_row_group().unwrap();
            let mut k = 0;
            while let Some(mut col) = rg.next_column().unwrap() {
                match k {
                    0 | 1 => {
                        let none: [ByteArray; 0] = [];
                        col.typed::<ByteArrayType>()
                            .write_batch(&none, Some(&[]), None)
                            .unwrap();
                    }
                    _ => {
                        col.typed::<Int64Type>().write_batch(&[], Some(&[]), None).unwrap();
                    }
                }
                col.close().unwrap();
                k += 1;
            }
            rg.close().unwrap();
        }
        w.close().unwrap();
        let mut tally = Tally::default();
        check_file(&path, &mut tally);
        assert_eq!(tally.equal, 1, "{}: {tally:?}", path.display());
        assert!(
            tally.gpu_columns >= 2,
            "the string columns take the GPU route: {tally:?}"
        );
    }
}

/// Every column of `testdata/types.parquet` (views, 64-bit offsets, binary, decimals of 4 to 32 bytes
/// from INT32, INT64 and FIXED_LEN_BYTE_ARRAY, dictionary-typed columns with 8, 16 and 32-bit keys, as
/// the file's Arrow schema asks) takes the GPU route and
/// equals arrow-rs with arrow-rs's types; so does the same table rewritten without dictionaries (v1
/// pages: arrow-rs's v2 writer encodes FIXED_LEN_BYTE_ARRAY as DELTA_BYTE_ARRAY, which still goes to
/// the host) and with dictionaries in v2 pages, and each column read alone.
#[test]
fn view_large_and_decimal_columns_take_the_gpu_route() {
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::{WriterProperties, WriterVersion};

    let path = common::testdata_dir().join("types.parquet");
    let want = common::arrow_rs_read(&path).expect("arrow-rs reads types.parquet");
    // A dictionary limit of a few bytes: writers fall back to plain pages once their dictionary passes it.
    let rewrite_with = |dictionary: bool, version: WriterVersion, dictionary_limit: usize| {
        let file = tempfile::NamedTempFile::new().unwrap();
        let props = WriterProperties::builder()
            .set_dictionary_enabled(dictionary)
            .set_dictionary_page_size_limit(dictionary_limit)
            .set_writer_version(version)
            .set_data_page_row_count_limit(128)
            .set_write_batch_size(64)
            .build();
        let mut w = ArrowWriter::try_new(file.reopen().unwrap(), want.schema(), Some(props)).unwrap();
        w.write(&want).unwrap();
        w.close().unwrap();
        file
    };
    let rewrite = |dictionary: bool, version: WriterVersion| rewrite_with(dictionary, version, usize::MAX);
    let plain = rewrite(false, WriterVersion::PARQUET_1_0);
    let v2 = rewrite(true, WriterVersion::PARQUET_2_0);
    let fallback_v1 = rewrite_with(true, WriterVersion::PARQUET_1_0, 64);
    let fallback_v2 = rewrite_with(true, WriterVersion::PARQUET_2_0, 64);
    // Dictionary-typed columns decoded on the GPU from chunks of dictionary and plain pages.
    let mut mixed_on_gpu = std::collections::BTreeSet::new();

    for file in [
        path.as_path(),
        plain.path(),
        v2.path(),
        fallback_v1.path(),
        fallback_v2.path(),
    ] {
        let source = ParquetSource::open(file).unwrap();
        let mixed = mixed_dictionary_chunks(file);
        let leaves = source.metadata().file_metadata().schema_descr().num_columns();
        let mut projections = vec![Projection::All];
        projections.extend((0..leaves).map(|l| Projection::Leaves(vec![l])));
        for projection in projections {
            let plan = ReadPlan::build(&source, &projection, &RowGroupSelection::All, PlanOptions::default()).unwrap();
            let fetched = host_fetch(&source, &plan, 2).buffer;
            let oracle = decode_fetched(&source, &plan, &fetched, 2)
                .and_then(|t| t.concat())
                .unwrap();
            let (batch, stats) = decode_reference(&source, &plan, &fetched).unwrap();
            for c in &batch.columns {
                // Dictionary-typed columns with plain pages (all of them, or after the dictionary
                // grew past its limit) decode those into the dictionary's values, a key a row: more
                // rows than narrow keys hold go to the host (arrow-rs re-encodes them).
                if file != path.as_path()
                    && matches!(&c.decoded, DecodedWhere::Host(why) if why.contains("keys hold"))
                    && matches!(
                        c.array.data_type,
                        arrow::datatypes::DataType::Dictionary(ref k, _) if k.primitive_width() == Some(1)
                    )
                {
                    continue;
                }
                if mixed.contains(&c.name) && matches!(c.array.data_type, arrow::datatypes::DataType::Dictionary(..)) {
                    mixed_on_gpu.insert(c.name.clone());
                }
                assert_eq!(
                    c.decoded,
                    DecodedWhere::Gpu,
                    "{}: {} ({:?})",
                    file.display(),
                    c.name,
                    stats.columns
                );
            }
            let got = batch.to_host().unwrap();
            assert_eq!(oracle.schema(), got.schema(), "{}", file.display());
            for (i, f) in oracle.schema().fields().iter().enumerate() {
                assert_eq!(
                    oracle.column(i).to_data(),
                    got.column(i).to_data(),
                    "{}: {}",
                    file.display(),
                    f.name()
                );
            }
        }
    }
    assert_eq!(
        mixed_on_gpu.into_iter().collect::<Vec<_>>(),
        ["code", "label"],
        "dictionary-typed columns of dictionary and plain pages on the GPU"
    );
    // The file's own types, not the Parquet defaults: views, 64-bit offsets, narrow and wide decimals.
    let types: Vec<String> = want
        .schema()
        .fields()
        .iter()
        .map(|f| f.data_type().to_string())
        .collect();
    for t in [
        "Utf8View",
        "BinaryView",
        "LargeUtf8",
        "LargeBinary",
        "Decimal32(9, 2)",
        "Decimal256(60, 5)",
        "Dictionary(Int8, Utf8)",
        "Dictionary(Int32, Int64)",
        "Dictionary(UInt16, LargeUtf8)",
    ] {
        assert!(types.iter().any(|x| x == t), "{t} in {types:?}");
    }
}

/// Chunks whose data pages are some dictionary-encoded and some not (a writer's fallback), by their
/// page headers: the top-level field names of their leaves.
fn mixed_dictionary_chunks(path: &Path) -> std::collections::BTreeSet<String> {
    let (source, plan) = plan_whole(path);
    let headers = parse_step_headers(&std::fs::File::open(path).unwrap(), &plan).unwrap();
    headers
        .iter()
        .filter(|(_, h)| {
            let data = || h.pages.iter().filter(|p| p.page_type == 0 || p.page_type == 3);
            // Encodings 2 and 8: PLAIN_DICTIONARY and RLE_DICTIONARY.
            data().any(|p| matches!(p.encoding, 2 | 8)) && data().any(|p| !matches!(p.encoding, 2 | 8))
        })
        .map(|((_, leaf, _), _)| {
            let descr = source.metadata().file_metadata().schema_descr();
            descr.column(*leaf).path().parts()[0].clone()
        })
        .collect()
}

/// Nested columns take the GPU route and decode value for value as arrow-rs decodes them, with its
/// types: lists (nullable and empty lists, null items), a large list of strings, a list of structs, a
/// map, a list of lists and a nullable struct of a list and a struct; written as v1 and v2 pages, with
/// and without dictionaries, in small pages and several row groups, read whole and leaf by leaf.
#[test]
fn nested_columns_take_the_gpu_route() {
    use arrow::array::{
        Array, ArrayRef, BooleanBuilder, Float64Array, Int32Builder, Int64Builder, LargeListBuilder, ListBuilder,
        MapBuilder, StringBuilder, StructArray, StructBuilder,
    };
    use arrow::buffer::NullBuffer;
    use arrow::datatypes::{DataType, Field, Fields};
    use arrow::record_batch::RecordBatch;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::{WriterProperties, WriterVersion};
    use std::sync::Arc;

    let n = 900usize;
    let mut ints = ListBuilder::new(Int32Builder::new());
    let mut strings = LargeListBuilder::new(StringBuilder::new());
    let pair_fields = vec![
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Utf8, true),
    ];
    let mut pairs = ListBuilder::new(StructBuilder::from_fields(pair_fields, 0));
    let mut map = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
    let mut lists = ListBuilder::new(ListBuilder::new(Int32Builder::new()));
    let mut flags = ListBuilder::new(BooleanBuilder::new());
    for i in 0..n {
        let len = i % 4;
        match i % 7 {
            0 => {
                ints.append_null();
                strings.append_null();
                pairs.append_null();
                map.append(false).unwrap();
                lists.append_null();
                flags.append_null();
                continue;
            }
            1 => {
                ints.append(true);
                strings.append(true);
                pairs.append(true);
                map.append(true).unwrap();
                lists.append(true);
                flags.append(true);
                continue;
            }
            _ => {}
        }
        for j in 0..len {
            let v = (i * 10 + j) as i32;
            if (i + j) % 3 == 0 {
                ints.values().append_null();
                strings.values().append_null();
            } else {
                ints.values().append_value(v);
                strings.values().append_value(format!("s{}", v % 50));
            }
            let s = pairs.values();
            s.field_builder::<Int64Builder>(0).unwrap().append_value(v as i64 * 3);
            let b = s.field_builder::<StringBuilder>(1).unwrap();
            if j == 1 {
                b.append_null()
            } else {
                b.append_value(format!("b{}", v % 7))
            }
            s.append((i + j) % 5 != 0);
            map.keys().append_value(format!("k{j}"));
            if j == 2 {
                map.values().append_null()
            } else {
                map.values().append_value(v)
            }
            let inner = lists.values();
            for k in 0..(v as usize % 3) {
                inner.values().append_value(v + k as i32);
            }
            inner.append(v % 11 != 0);
            flags.values().append_value(v % 2 == 0);
        }
        ints.append(true);
        strings.append(true);
        pairs.append(true);
        map.append(true).unwrap();
        lists.append(true);
        flags.append(true);
    }
    let flags: ArrayRef = Arc::new(flags.finish());
    let z: ArrayRef = Arc::new(Float64Array::from_iter(
        (0..n).map(|i| (i % 6 != 0).then_some(i as f64 / 4.0)),
    ));
    let inner_fields = Fields::from(vec![Field::new("z", DataType::Float64, true)]);
    let inner: ArrayRef = Arc::new(StructArray::new(inner_fields.clone(), vec![z], None));
    let outer_fields = Fields::from(vec![
        Field::new("x", flags.data_type().clone(), true),
        Field::new("y", DataType::Struct(inner_fields), true),
    ]);
    let valid = NullBuffer::from_iter((0..n).map(|i| i % 9 != 4));
    let record: ArrayRef = Arc::new(StructArray::new(outer_fields, vec![flags, inner], Some(valid)));
    let batch = RecordBatch::try_from_iter([
        ("ints", Arc::new(ints.finish()) as ArrayRef),
        ("strings", Arc::new(strings.finish()) as ArrayRef),
        ("pairs", Arc::new(pairs.finish()) as ArrayRef),
        ("map", Arc::new(map.finish()) as ArrayRef),
        ("lists", Arc::new(lists.finish()) as ArrayRef),
        ("record", record),
    ])
    .unwrap();
    assert!(matches!(batch.column(1).data_type(), DataType::LargeList(_)));

    let write = |dictionary: bool, version: WriterVersion| {
        let file = tempfile::NamedTempFile::new().unwrap();
        let props = WriterProperties::builder()
            .set_dictionary_enabled(dictionary)
            .set_writer_version(version)
            .set_data_page_row_count_limit(50)
            .set_write_batch_size(32)
            .set_max_row_group_row_count(Some(400))
            .build();
        let mut w = ArrowWriter::try_new(file.reopen().unwrap(), batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        file
    };
    let files = [
        write(false, WriterVersion::PARQUET_1_0),
        write(true, WriterVersion::PARQUET_1_0),
        write(true, WriterVersion::PARQUET_2_0),
    ];
    for file in &files {
        let source = ParquetSource::open(file.path()).unwrap();
        let leaves = source.metadata().file_metadata().schema_descr().num_columns();
        let mut projections = vec![Projection::All];
        projections.extend((0..leaves).map(|l| Projection::Leaves(vec![l])));
        for projection in projections {
            let plan = ReadPlan::build(&source, &projection, &RowGroupSelection::All, PlanOptions::default()).unwrap();
            let fetched = host_fetch(&source, &plan, 2).buffer;
            let oracle = decode_fetched(&source, &plan, &fetched, 2).and_then(|t| t.concat());
            let ours = decode_reference(&source, &plan, &fetched);
            let (oracle, (got, _)) = match (oracle, ours) {
                (Ok(o), Ok(g)) => (o, g),
                // arrow-rs refuses a map's keys or values alone; so must we.
                (Err(_), Err(_)) => continue,
                (o, g) => panic!("{projection:?}: arrow-rs {:?}, ours {:?}", o.err(), g.err()),
            };
            for c in &got.columns {
                assert_eq!(c.decoded, DecodedWhere::Gpu, "{projection:?}: {}", c.name);
            }
            let got = got.to_host().unwrap();
            assert_eq!(oracle.schema(), got.schema(), "{projection:?}");
            for (i, f) in oracle.schema().fields().iter().enumerate() {
                assert_eq!(
                    oracle.column(i).to_data(),
                    got.column(i).to_data(),
                    "{projection:?}: {}",
                    f.name()
                );
            }
            if projection == Projection::All {
                assert_eq!(got.num_rows(), n);
                assert!(got.column(0).null_count() > 0 && got.column(5).null_count() > 0);
            }
        }
    }
}

/// Steps with more strings than 32-bit offsets hold, as if 2 GiB were 600 bytes: views cut their
/// characters into data buffers (several hundred bytes each) and 64-bit offsets run on, both equal to
/// arrow-rs value for value; Utf8 and Binary are refused, naming the column and the way out.
#[test]
fn strings_past_the_offsets_limit_of_a_step() {
    use gpu_parquet::decode::gpu::decode_reference_with_string_offset_limit;
    let path = common::testdata_dir().join("types.parquet");
    let source = ParquetSource::open(&path).unwrap();
    let descr = source.metadata().file_metadata().schema_descr_ptr();
    let leaf = |name: &str| {
        (0..descr.num_columns())
            .find(|&l| descr.column(l).path().parts()[0] == name)
            .unwrap_or_else(|| panic!("{name} in types.parquet"))
    };
    let limit = 600;
    for (name, buffers_at_least) in [
        ("view", 10),
        ("binary_view", 10),
        ("short_view", 1),
        ("large", 2),
        ("large_binary", 2),
    ] {
        let projection = Projection::Leaves(vec![leaf(name)]);
        let plan = ReadPlan::build(&source, &projection, &RowGroupSelection::All, PlanOptions::default()).unwrap();
        let fetched = host_fetch(&source, &plan, 2).buffer;
        let oracle = decode_fetched(&source, &plan, &fetched, 2)
            .and_then(|t| t.concat())
            .unwrap();
        let (batch, _) = decode_reference_with_string_offset_limit(&source, &plan, &fetched, limit).unwrap();
        let column = &batch.columns[0];
        assert_eq!(column.decoded, DecodedWhere::Gpu, "{name}");
        assert!(
            column.array.buffers.len() >= buffers_at_least,
            "{name}: {} buffers",
            column.array.buffers.len()
        );
        let got = batch.to_host().unwrap();
        assert_eq!(oracle.column(0).to_data(), got.column(0).to_data(), "{name}");
    }
    // The same with the limit of the kernels: no segments. The column (Snappy, dictionary-encoded
    // with a plain fallback) has two data buffers: its own decompressed data pages, which its plain
    // rows' views point into, and the copied strings of its dictionary rows.
    let plan = ReadPlan::build(
        &source,
        &Projection::Leaves(vec![leaf("view")]),
        &RowGroupSelection::All,
        PlanOptions::default(),
    )
    .unwrap();
    let fetched = host_fetch(&source, &plan, 2).buffer;
    let (batch, _) = decode_reference(&source, &plan, &fetched).unwrap();
    assert_eq!(batch.columns[0].array.buffers.len(), 3);

    for name in ["binary", "category"] {
        let projection = Projection::Leaves(vec![leaf(name)]);
        let plan = ReadPlan::build(&source, &projection, &RowGroupSelection::All, PlanOptions::default()).unwrap();
        let fetched = host_fetch(&source, &plan, 2).buffer;
        let limit = if name == "binary" { 600 } else { 20 };
        match decode_reference_with_string_offset_limit(&source, &plan, &fetched, limit) {
            Err(e @ gpu_parquet::Error::InvalidRequest { .. }) => {
                let message = e.to_string();
                assert!(
                    message.contains("32-bit offsets hold") && message.contains(name),
                    "{message}"
                );
            }
            other => panic!("{name}: {:?}", other.map(|(b, _)| b.columns[0].array.data_type.clone())),
        }
    }
}

/// Decodes every column of `file` through the reference pipeline and arrow-rs: every column on the GPU
/// route, equal value for value; the Arrow types, to check the file asked for what the test meant.
fn gpu_route_types(file: &Path) -> Vec<String> {
    let (source, plan, fetched) = open_whole(file);
    let oracle = decode_fetched(&source, &plan, &fetched, 2)
        .and_then(|t| t.concat())
        .unwrap();
    let (batch, stats) = decode_reference(&source, &plan, &fetched).unwrap();
    for c in &batch.columns {
        assert_eq!(c.decoded, DecodedWhere::Gpu, "{}: {:?}", c.name, stats.columns);
    }
    let got = batch.to_host().unwrap();
    assert_eq!(oracle.schema(), got.schema());
    for (i, f) in oracle.schema().fields().iter().enumerate() {
        assert_eq!(oracle.column(i).to_data(), got.column(i).to_data(), "{}", f.name());
    }
    oracle
        .schema()
        .fields()
        .iter()
        .map(|f| f.data_type().to_string())
        .collect()
}

/// Arrow types the file's Arrow schema asks for over integers and intervals (arrow-rs's hints): Date64
/// from INT32 dates and from INT64, INT32 timestamps, Time32, Duration, both interval units; and INT96
/// read as timestamps of seconds, milliseconds and microseconds.
#[test]
fn dates_timestamps_intervals_and_int96_units_take_the_gpu_route() {
    use arrow::array::{
        ArrayRef, Date64Array, DurationMillisecondArray, IntervalDayTimeArray, IntervalYearMonthArray,
        Time32SecondArray,
    };
    use arrow::datatypes::{DataType, Field, IntervalDayTime, Schema, TimeUnit};
    use arrow::record_batch::RecordBatch;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;

    let rows = 500i64;
    let some = |i: i64| i % 7 != 3;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Date64Array::from_iter(
            (0..rows).map(|i| some(i).then_some((i - 250) * 86_400_000 * 37)),
        )),
        Arc::new(Time32SecondArray::from_iter(
            (0..rows).map(|i| some(i).then_some((i * 97 % 86_400) as i32)),
        )),
        Arc::new(DurationMillisecondArray::from_iter(
            (0..rows).map(|i| some(i).then_some(i * 1_000_003 - 7)),
        )),
        Arc::new(IntervalYearMonthArray::from_iter(
            (0..rows).map(|i| some(i).then_some(i as i32 - 100)),
        )),
        Arc::new(IntervalDayTimeArray::from_iter((0..rows).map(|i| {
            some(i).then(|| IntervalDayTime::new(i as i32, (i * 86_399) as i32))
        }))),
    ];
    let schema = Arc::new(Schema::new(vec![
        Field::new("date64", DataType::Date64, true),
        Field::new("time32", DataType::Time32(TimeUnit::Second), true),
        Field::new("duration", DataType::Duration(TimeUnit::Millisecond), true),
        Field::new("months", columns[3].data_type().clone(), true),
        Field::new("day_time", columns[4].data_type().clone(), true),
    ]));
    let batch = RecordBatch::try_new(schema, columns).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for coerce in [false, true] {
        let path = dir.path().join(format!("hints-{coerce}.parquet"));
        let props = WriterProperties::builder()
            .set_coerce_types(coerce)
            .set_data_page_row_count_limit(64)
            .set_write_batch_size(32)
            .build();
        let mut w = ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let types = gpu_route_types(&path);
        assert!(types.iter().any(|t| t == "Date64"), "{types:?}");
        assert!(types.iter().any(|t| t.starts_with("Interval(DayTime")), "{types:?}");
    }

    // INT96 written by the column writer, with an Arrow schema asking for each unit.
    for unit in [
        TimeUnit::Second,
        TimeUnit::Millisecond,
        TimeUnit::Microsecond,
        TimeUnit::Nanosecond,
    ] {
        let path = dir.path().join(format!("int96-{unit:?}.parquet"));
        write_int96(&path, DataType::Timestamp(unit, None));
        let types = gpu_route_types(&path);
        assert_eq!(types, [DataType::Timestamp(unit, None).to_string()]);
    }
}

/// A file of one nullable INT96 column (days around the epoch and far from it, nanoseconds of the day
/// up to a whole day and beyond) whose Arrow schema says `arrow_type`.
fn write_int96(path: &Path, arrow_type: arrow::datatypes::DataType) {
    use parquet::data_type::{Int96, Int96Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    use std::sync::Arc;

    let schema = Arc::new(parse_message_type("message m { optional int96 t; }").unwrap());
    let arrow_schema = arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new("t", arrow_type, true)]);
    let mut props = WriterProperties::builder().set_data_page_row_count_limit(50).build();
    parquet::arrow::add_encoded_arrow_schema_to_metadata(&arrow_schema, &mut props);
    let mut w = SerializedFileWriter::new(std::fs::File::create(path).unwrap(), schema, Arc::new(props)).unwrap();
    let mut values = Vec::new();
    let mut defs = Vec::new();
    for i in 0..300u64 {
        if i % 9 == 4 {
            defs.push(0);
            continue;
        }
        defs.push(1);
        let nanos = (i * 987_654_321_123) % 90_000_000_000_000;
        let day = 2_440_588 + (i as i64 * 733 - 100_000);
        values.push(Int96::from(vec![nanos as u32, (nanos >> 32) as u32, day as u32]));
    }
    let mut rg = w.next_row_group().unwrap();
    let mut col = rg.next_column().unwrap().unwrap();
    col.typed::<Int96Type>()
        .write_batch(&values, Some(&defs), None)
        .unwrap();
    col.close().unwrap();
    rg.close().unwrap();
    w.close().unwrap();
}

/// Fixed-size lists of fixed-width items take the GPU route and decode as arrow-rs decodes them: null
/// lists padded with null items, null items kept, not-null lists; v1 and v2 pages, with and without
/// dictionaries, small pages, several row groups, read whole and leaf by leaf. Fixed-size lists of
/// strings go to the host, saying why.
#[test]
fn fixed_size_lists_take_the_gpu_route() {
    use arrow::array::{Array, ArrayRef, FixedSizeListArray, Float32Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::{WriterProperties, WriterVersion};
    use std::sync::Arc;

    let rows = 700usize;
    let item = |t: DataType, nullable| Arc::new(Field::new("item", t, nullable));
    let embedding = FixedSizeListArray::new(
        item(DataType::Float32, true),
        4,
        Arc::new(Float32Array::from_iter(
            (0..rows * 4).map(|i| (i % 13 != 5).then_some(i as f32 * 0.25)),
        )),
        Some((0..rows).map(|r| r % 9 != 2).collect()),
    );
    let triple = FixedSizeListArray::new(
        item(DataType::Int64, false),
        3,
        Arc::new(Int64Array::from_iter_values((0..rows as i64 * 3).map(|i| i * 7 - 100))),
        None,
    );
    let words = FixedSizeListArray::new(
        item(DataType::Utf8, true),
        2,
        Arc::new(StringArray::from_iter(
            (0..rows * 2).map(|i| Some(format!("w{}", i % 17))),
        )),
        None,
    );
    let schema = Arc::new(Schema::new(vec![
        Field::new("embedding", embedding.data_type().clone(), true),
        Field::new("triple", triple.data_type().clone(), false),
        Field::new("words", words.data_type().clone(), false),
    ]));
    let columns: Vec<ArrayRef> = vec![Arc::new(embedding), Arc::new(triple), Arc::new(words)];
    let batch = RecordBatch::try_new(schema, columns).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (version, dictionary) in [(WriterVersion::PARQUET_1_0, false), (WriterVersion::PARQUET_2_0, true)] {
        let path = dir.path().join(format!("fixed-{version:?}.parquet"));
        let props = WriterProperties::builder()
            .set_writer_version(version)
            .set_dictionary_enabled(dictionary)
            .set_max_row_group_row_count(Some(300))
            .set_data_page_row_count_limit(50)
            .set_write_batch_size(25)
            .build();
        let mut w = ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let source = ParquetSource::open(&path).unwrap();
        let leaves = source.metadata().file_metadata().schema_descr().num_columns();
        let mut projections = vec![Projection::All];
        projections.extend((0..leaves).map(|l| Projection::Leaves(vec![l])));
        for projection in projections {
            let plan = ReadPlan::build(&source, &projection, &RowGroupSelection::All, PlanOptions::default()).unwrap();
            let fetched = host_fetch(&source, &plan, 2).buffer;
            let oracle = decode_fetched(&source, &plan, &fetched, 2)
                .and_then(|t| t.concat())
                .unwrap();
            let (got, stats) = decode_reference(&source, &plan, &fetched).unwrap();
            for c in &got.columns {
                if c.name == "words" {
                    assert!(
                        matches!(&c.decoded, DecodedWhere::Host(why) if why.contains("fixed-width items only")),
                        "{:?}",
                        c.decoded
                    );
                } else {
                    assert_eq!(c.decoded, DecodedWhere::Gpu, "{}: {:?}", c.name, stats.columns);
                    assert!(matches!(c.array.data_type, DataType::FixedSizeList(..)), "{}", c.name);
                }
            }
            let got = got.to_host().unwrap();
            assert_eq!(oracle.schema(), got.schema());
            for (i, f) in oracle.schema().fields().iter().enumerate() {
                assert_eq!(
                    oracle.column(i).to_data(),
                    got.column(i).to_data(),
                    "{version:?}: {}",
                    f.name()
                );
            }
        }
    }
}

/// A `Utf8View` column whose Snappy page holds a string that is not UTF-8 (one byte of a literal
/// changed in the file): arrow-rs refuses it, and so does the reference pipeline, whose views point
/// into the page and are checked there, naming the file, column, row group and page.
#[test]
fn a_view_string_that_is_not_utf8_is_a_clear_error() {
    use arrow::array::{ArrayRef, RecordBatch, StringViewArray};
    use parquet::basic::Compression;
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;
    // Strings that share nothing, so that Snappy keeps them in literals and the marker's bytes stay
    // as written.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut word = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        format!("{x:016x}-{:08x}", x >> 40)
    };
    let strings: Vec<String> = (0..3000)
        .map(|i| {
            if i == 1777 {
                "QJXKWV marker string".to_string()
            } else {
                word()
            }
        })
        .collect();
    let batch = RecordBatch::try_from_iter([(
        "s",
        Arc::new(StringViewArray::from_iter_values(strings.iter())) as ArrayRef,
    )])
    .unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(false)
        .build();
    let mut bytes = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let at = bytes
        .windows(6)
        .position(|w| w == b"QJXKWV")
        .expect("the marker as written (a Snappy literal)");
    bytes[at] = 0xff;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &bytes).unwrap();

    let (source, plan, fetched) = open_whole(file.path());
    assert!(
        decode_fetched(&source, &plan, &fetched, 2).is_err(),
        "arrow-rs reads the damaged string"
    );
    match decode_reference(&source, &plan, &fetched) {
        Err(e @ gpu_parquet::Error::CorruptPage { .. }) => {
            let message = e.to_string();
            for part in ["not valid UTF-8", "column 's'", "row group 0", "page 0", "detail 1777"] {
                assert!(message.contains(part), "{part:?} in {message}");
            }
        }
        other => panic!("{:?}", other.map(|(b, _)| b.num_rows)),
    }
}

/// A view column's dictionary of a few long strings, each used by many rows, stays whole in the
/// column's own buffer, and its rows' views point into it: no string is copied (two buffers: views
/// and own pages). A dictionary of as many entries as rows is not kept whole; its rows' strings are
/// copied (a third buffer). Both equal arrow-rs.
#[test]
fn a_view_column_points_into_a_dictionary_its_rows_reuse() {
    use arrow::array::{ArrayRef, RecordBatch, StringViewArray};
    use parquet::basic::Compression;
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;
    let words = ["DELIVER IN PERSON", "TAKE BACK RETURN", "NONE", "COLLECT COD"];
    let few = (0..20_000).map(|i| words[(i * 7 + i / 3) % 4]);
    // Distinct strings over 12 bytes, the first third of the rows dictionary-encoded before the
    // writer's 4 KiB dictionary limit sends the rest to plain pages.
    let many = (0..20_000).map(|i| format!("comment number {i:08}"));
    let batch = RecordBatch::try_from_iter([
        ("few", Arc::new(StringViewArray::from_iter_values(few)) as ArrayRef),
        ("many", Arc::new(StringViewArray::from_iter_values(many)) as ArrayRef),
    ])
    .unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_page_size_limit(4096)
        .set_data_page_size_limit(16 << 10)
        .build();
    let mut bytes = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &bytes).unwrap();

    let (source, plan, fetched) = open_whole(file.path());
    let oracle = decode_fetched(&source, &plan, &fetched, 2)
        .and_then(|t| t.concat())
        .unwrap();
    let (batch, _) = decode_reference(&source, &plan, &fetched).unwrap();
    let buffers = |k: usize| batch.columns[k].array.buffers.len();
    assert_eq!(buffers(0), 2, "few: views and its own pages, dictionary included");
    assert_eq!(buffers(1), 3, "many: views, own pages, copied dictionary rows");
    let own_pages = batch.columns[0].array.buffers[1].len();
    assert!(
        own_pages < 20_000,
        "few: {own_pages} bytes of own pages, no string copied per row"
    );
    let got = batch.to_host().unwrap();
    for k in 0..2 {
        assert_eq!(oracle.column(k).to_data(), got.column(k).to_data(), "column {k}");
    }
}

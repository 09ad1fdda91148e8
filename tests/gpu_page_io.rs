//! Page-level I/O on the GPU decode path (issue 43), in CI through the kernels' host references
//! (`decode_reference`): a plan reading row groups page by page, decoded by the GPU pipeline (page
//! headers from its header pass and parsed on the host), equals arrow-rs's decode of the same
//! fetched pieces (`decode_fetched`) and arrow-rs's read of the whole file restricted to the plan's
//! rows, value for value; a damaged OffsetIndex is a `CorruptPage`, never other rows or a panic.

mod common;

use common::assert_same;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, DictionaryArray, Float64Array, Int32Array, Int64Array, ListArray, RecordBatch, StringArray,
    StructArray,
};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Fields, Int32Type, Schema};
use gpu_parquet::decode::gpu::{decode_reference, decode_reference_with};
use gpu_parquet::decode::host::decode_fetched;
use gpu_parquet::decode::host_headers::parse_step_headers;
use gpu_parquet::decode::pipeline::PageHints;
use gpu_parquet::decode::table::DecodedWhere;
use gpu_parquet::panic_guard::contain_panics;
use gpu_parquet::{Error, Location, ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

const GROUP_ROWS: usize = 1000;
const PAGE_ROWS: usize = 64;

/// 3 row groups of 1,000 rows in pages of 64 rows, with page indexes: `id` (required int64,
/// plain), `name` (nullable dictionary-encoded strings), `text` (nullable plain strings, no dictionary),
/// `score` (nullable floats), `flag` (booleans), `cat` (an Arrow dictionary column), `pair` (a
/// struct, whose leaves are paged) and `tags` (a list: repeated, read whole).
fn write_file(path: &Path) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("score", DataType::Float64, true),
        Field::new("flag", DataType::Boolean, false),
        Field::new(
            "cat",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
        Field::new(
            "pair",
            DataType::Struct(Fields::from(vec![
                Field::new("a", DataType::Int32, true),
                Field::new("b", DataType::Utf8, false),
            ])),
            true,
        ),
        Field::new(
            "tags",
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            true,
        ),
        Field::new("text", DataType::Utf8, true),
    ]));
    let n = 3 * GROUP_ROWS;
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n as i64));
    let name: ArrayRef = Arc::new(StringArray::from_iter(
        (0..n).map(|i| (i % 11 != 3).then(|| format!("n{:03}", i % 37))),
    ));
    let score: ArrayRef = Arc::new(Float64Array::from_iter(
        (0..n).map(|i| (i % 7 != 0).then_some(i as f64 / 4.0)),
    ));
    let flag: ArrayRef = Arc::new(BooleanArray::from_iter((0..n).map(|i| Some(i % 3 == 0))));
    let cat: ArrayRef = Arc::new(DictionaryArray::<Int32Type>::from_iter(
        (0..n).map(|i| (i % 13 != 5).then(|| ["red", "green", "blue", "amber"][i % 4])),
    ));
    let pair: ArrayRef = Arc::new(StructArray::new(
        Fields::from(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Utf8, false),
        ]),
        vec![
            Arc::new(Int32Array::from_iter(
                (0..n).map(|i| (i % 4 != 1).then_some(i as i32 * 3)),
            )),
            Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("b{}", i % 100)))),
        ],
        Some((0..n).map(|i| i % 9 != 2).collect()),
    ));
    let tags: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>((0..n).map(|i| {
        (i % 5 != 0).then(|| (0..(i % 4) as i32).map(|k| Some(k + i as i32)).collect::<Vec<_>>())
    })));
    let text: ArrayRef = Arc::new(StringArray::from_iter(
        (0..n).map(|i| (i % 6 != 4).then(|| format!("row {i} {}", "x".repeat(i % 17)))),
    ));
    let batch = RecordBatch::try_new(schema.clone(), vec![id, name, score, flag, cat, pair, tags, text]).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(GROUP_ROWS))
        .set_data_page_row_count_limit(PAGE_ROWS)
        .set_write_batch_size(PAGE_ROWS)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_column_dictionary_enabled("text".into(), false)
        .set_column_dictionary_enabled("id".into(), false)
        .set_column_dictionary_enabled("score".into(), false)
        .build();
    let mut w = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// arrow-rs's read of `path` (its columns `names`, all when empty), each row group cut to the rows
/// `rows` gives of it (all of a row group not there).
fn arrow_rs_rows(path: &Path, projection: &Projection, rows: &BTreeMap<usize, Vec<Range<u64>>>) -> RecordBatch {
    let file = std::fs::File::open(path).unwrap();
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let meta = builder.metadata().clone();
    let mask = match projection {
        Projection::All => parquet::arrow::ProjectionMask::all(),
        Projection::Names(names) => {
            parquet::arrow::ProjectionMask::columns(builder.parquet_schema(), names.iter().map(String::as_str))
        }
        Projection::Leaves(l) => parquet::arrow::ProjectionMask::leaves(builder.parquet_schema(), l.iter().copied()),
    };
    let r = builder.with_projection(mask).build().unwrap();
    let schema = arrow::record_batch::RecordBatchReader::schema(&r);
    let batches: Vec<RecordBatch> = r.map(|b| b.unwrap()).collect();
    let whole = concat_batches(&schema, &batches).unwrap();
    let mut slices = Vec::new();
    let mut at = 0usize;
    for g in 0..meta.num_row_groups() {
        let n = meta.row_group(g).num_rows() as usize;
        match rows.get(&g) {
            Some(kept) => slices.extend(
                kept.iter()
                    .map(|r| whole.slice(at + r.start as usize, (r.end - r.start) as usize)),
            ),
            None => slices.push(whole.slice(at, n)),
        }
        at += n;
    }
    concat_batches(&schema, &slices).unwrap()
}

/// What one paged plan gives: arrow-rs's host decode, and the GPU pipeline's through the references
/// with GPU-pass headers and with host-parsed headers (each `Err` as it failed), and the columns the
/// pipeline decoded on the GPU.
struct Decoded {
    host: Result<RecordBatch, Error>,
    gpu_pass: Result<RecordBatch, Error>,
    host_headers: Result<RecordBatch, Error>,
    on_gpu: Vec<String>,
}

fn decode_all(path: &Path, source: &ParquetSource, plan: &ReadPlan) -> Decoded {
    let fetched = common::host_fetch(source, plan, 2).buffer;
    let host = decode_fetched(source, plan, &fetched, 2).and_then(|t| t.concat());
    let mut on_gpu = Vec::new();
    let gpu_pass = contain_panics(&Location::file(path), || {
        let (batch, _) = decode_reference(source, plan, &fetched)?;
        on_gpu = batch
            .columns
            .iter()
            .filter(|c| c.decoded == DecodedWhere::Gpu)
            .map(|c| c.name.clone())
            .collect();
        batch.to_host()
    });
    let host_headers = contain_panics(&Location::file(path), || {
        let file = std::fs::File::open(path).unwrap();
        let headers = parse_step_headers(&file, plan).unwrap();
        let (batch, stats, counts) =
            decode_reference_with(source, plan, &fetched, &PageHints::default(), Some(&headers))?;
        assert_eq!(counts.header_passes, 0, "no header pass with host headers");
        assert!(stats.headers_on_host || batch.columns.iter().all(|c| c.decoded != DecodedWhere::Gpu));
        batch.to_host()
    });
    Decoded {
        host,
        gpu_pass,
        host_headers,
        on_gpu,
    }
}

fn paged_plan(source: &ParquetSource, projection: &Projection, rows: &BTreeMap<usize, Vec<Range<u64>>>) -> ReadPlan {
    ReadPlan::build_paged(
        source,
        projection,
        &RowGroupSelection::All,
        PlanOptions::default(),
        rows,
    )
    .unwrap()
}

/// Checks a paged plan's three decodes equal each other and arrow-rs's rows; returns the columns
/// decoded on the GPU.
fn check_equal(
    path: &Path,
    projection: &Projection,
    rows: &BTreeMap<usize, Vec<Range<u64>>>,
    what: &str,
) -> Vec<String> {
    let source = ParquetSource::open(path).unwrap();
    let plan = paged_plan(&source, projection, rows);
    let d = decode_all(path, &source, &plan);
    let want = arrow_rs_rows(path, projection, &plan.rows);
    assert_same(&d.host.unwrap(), &want, &format!("{what}: host decode"));
    assert_same(
        &d.gpu_pass.unwrap_or_else(|e| panic!("{what}: {e}")),
        &want,
        &format!("{what}: GPU pipeline, GPU-pass headers"),
    );
    assert_same(
        &d.host_headers.unwrap_or_else(|e| panic!("{what}: {e}")),
        &want,
        &format!("{what}: GPU pipeline, host headers"),
    );
    d.on_gpu
}

#[test]
fn the_gpu_pipeline_decodes_a_paged_plan_as_arrow_rs_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.parquet");
    write_file(&path);
    // Each case: its name and the row ranges kept, by row group.
    type RowsByGroup = BTreeMap<usize, Vec<Range<u64>>>;
    let cases: Vec<(&str, RowsByGroup)> = vec![
        ("one page's rows", BTreeMap::from([(1, vec![130..140])])),
        ("rows over a page boundary", BTreeMap::from([(0, vec![60..70])])),
        (
            "several ranges, several row groups",
            BTreeMap::from([(0, vec![0..3, 200..260, 998..1000]), (2, vec![5..6, 500..700])]),
        ),
        (
            "one row group whole, one paged",
            BTreeMap::from([(0, vec![0..1000]), (1, vec![999..1000])]),
        ),
        (
            "the first row and the last",
            BTreeMap::from([(2, vec![0..1, 999..1000])]),
        ),
    ];
    let mut on_gpu = std::collections::BTreeSet::new();
    for (what, rows) in &cases {
        for projection in [
            Projection::All,
            Projection::Names(vec!["text".into(), "cat".into(), "score".into()]),
        ] {
            on_gpu.extend(check_equal(
                &path,
                &projection,
                rows,
                &format!("{what}, {projection:?}"),
            ));
        }
    }
    // The flat columns ran on the GPU path (the struct, read in pieces, goes to the host).
    for c in ["id", "name", "score", "flag", "cat", "tags", "text"] {
        assert!(on_gpu.contains(c), "{c} never decoded on the GPU: {on_gpu:?}");
    }
    // The plan does read pieces of those row groups.
    let source = ParquetSource::open(&path).unwrap();
    let plan = paged_plan(&source, &Projection::All, &cases[0].1);
    assert!(plan.chunks.iter().filter(|c| c.pages.is_some()).count() >= 6);
    let fetched: u64 = plan.chunks.iter().filter(|c| c.row_group == 1).map(|c| c.len).sum();
    let whole: u64 = source.checked_chunks()[1].iter().map(|c| c.len).sum();
    assert!(fetched < whole / 2, "{fetched} of {whole}");
}

#[test]
fn a_paged_step_says_where_each_column_was_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.parquet");
    write_file(&path);
    let source = ParquetSource::open(&path).unwrap();
    let plan = paged_plan(&source, &Projection::All, &BTreeMap::from([(1, vec![300..330])]));
    let fetched = common::host_fetch(&source, &plan, 2).buffer;
    let (batch, _) = decode_reference(&source, &plan, &fetched).unwrap();
    assert_eq!(batch.num_rows, 30 + 2 * GROUP_ROWS);
    let pair = batch.columns.iter().find(|c| c.name == "pair").unwrap();
    match &pair.decoded {
        DecodedWhere::Host(why) => assert!(why.contains("nested column read page by page"), "{why}"),
        DecodedWhere::Gpu => panic!("a struct read in pieces decoded on the GPU"),
    }
}

#[test]
fn corpus_tiny_pages_files_decode_page_by_page_on_the_gpu_path() {
    let Some(corpus) = common::corpus() else { return };
    for name in ["alltypes_tiny_pages.parquet", "alltypes_tiny_pages_plain.parquet"] {
        let path = corpus.join("data").join(name);
        let source = ParquetSource::open(&path).unwrap();
        let n = source.metadata().row_group(0).num_rows() as u64;
        for rows in [
            vec![3000..3050],
            vec![0..1, n / 3..n / 3 + 700, n - 5..n],
            vec![17..18, 1000..1001, 5555..5600],
        ] {
            let rows = BTreeMap::from([(0usize, rows)]);
            let what = format!("{name}: {rows:?}");
            let on_gpu = check_equal(&path, &Projection::All, &rows, &what);
            assert!(on_gpu.len() >= 8, "{what}: {on_gpu:?}");
            let plan = paged_plan(&source, &Projection::All, &rows);
            assert!(plan.whole_chunks.is_empty(), "{what}: {:?}", plan.whole_chunks);
        }
    }
}

// ---- A damaged OffsetIndex -------------------------------------------------------------------

/// The file of [`write_file`] with page `page` of leaf `leaf` in row group 1 changed by `change`.
fn damaged(
    dir: &Path,
    name: &str,
    leaf: usize,
    page: usize,
    change: impl Fn(i64, i32, i64) -> (i64, i32, i64),
) -> std::path::PathBuf {
    let path = dir.join(name);
    write_file(&path);
    common::change_page_location(&path, 1, leaf, page, change);
    path
}

#[test]
fn a_damaged_offset_index_is_a_corrupt_page_on_the_gpu_path() {
    let dir = tempfile::tempdir().unwrap();
    // Leaf 0 is `id`, leaf 1 `name` (dictionary-encoded), leaf 2 `score` (nullable).
    // A page location's (offset, compressed size, first row) as the damage leaves it.
    type Damage = fn(i64, i32, i64) -> (i64, i32, i64);
    let cases: Vec<(&str, usize, Damage)> = vec![
        ("id: a page starting a row later", 0, |o, s, f| (o, s, f + 1)),
        ("score: a page starting a row earlier", 2, |o, s, f| (o, s, f - 1)),
        ("name: a page a byte shorter", 1, |o, s, f| (o, s - 1, f)),
        ("id: a page a byte later", 0, |o, s, f| (o + 1, s - 1, f)),
    ];
    for (k, (what, leaf, change)) in cases.into_iter().enumerate() {
        let path = damaged(dir.path(), &format!("damaged{k}.parquet"), leaf, 4, change);
        let source = ParquetSource::open(&path).unwrap();
        // Rows of page 4 (256..320) of row group 1, as the damaged index places them.
        let rows = BTreeMap::from([(1usize, vec![260u64..300])]);
        let plan = paged_plan(&source, &Projection::All, &rows);
        let column = source.column_path(leaf);
        assert!(
            plan.chunks
                .iter()
                .any(|c| c.column == leaf && c.row_group == 1 && c.pages.is_some()),
            "{what}: the damaged chunk is read page by page ({:?})",
            plan.whole_chunks
        );
        let d = decode_all(&path, &source, &plan);
        for (how, got) in [("GPU-pass headers", &d.gpu_pass), ("host headers", &d.host_headers)] {
            let err = got.as_ref().expect_err(&format!("{what}, {how}: refused"));
            assert!(matches!(err, Error::CorruptPage { .. }), "{what}, {how}: {err}");
            let msg = err.to_string();
            assert!(
                msg.contains(&column) && msg.contains("row group 1"),
                "{what}, {how}: {msg}"
            );
        }
        assert!(d.host.is_err(), "{what}: the host decode refuses it too");
    }
}

/// What a filtered GPU read does to each step, through the references: the reader's paged plan
/// decoded by the pipeline, then the filter lowered and run by the row filter (compacted), equals
/// arrow-rs's read with the exact filter.
#[test]
fn a_filtered_read_through_the_references_equals_arrow_rs_filtered() {
    use gpu_parquet::decode::row_filter::{FilterMode, Filtered};
    use gpu_parquet::filter::{Expr, lower};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.parquet");
    write_file(&path);
    let file = std::fs::File::open(&path).unwrap();
    let r = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let schema = arrow::record_batch::RecordBatchReader::schema(&r);
    let batches: Vec<RecordBatch> = r.map(|b| b.unwrap()).collect();
    let all = concat_batches(&schema, &batches).unwrap();
    for text in [
        "id >= 1210 and id < 1260",
        "id < 10 or id >= 2990 or (id between 1500 and 1530 and score > 0)",
        "name = 'n005' and id < 700",
        "cat = 'blue' and id >= 2000 and id < 2400",
    ] {
        let reader = gpu_parquet::Reader::builder(&path)
            .with_backend(gpu_parquet::BackendKind::Host)
            .with_filter(Expr::parse(text).unwrap())
            .build()
            .unwrap();
        let filter = reader.filter().unwrap();
        let want = filter.apply_batch(&all).unwrap();
        let plan = reader.plan();
        assert!(!plan.rows.is_empty(), "{text}: read page by page");
        let fetched = common::host_fetch(reader.source(), plan, 2).buffer;
        let (batch, _) = decode_reference(reader.source(), plan, &fetched).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            batch.num_rows as u64,
            plan.rows.values().flatten().map(|r| r.end - r.start).sum::<u64>()
                + plan
                    .row_groups
                    .iter()
                    .filter(|g| !plan.rows.contains_key(g))
                    .map(|&g| reader.source().metadata().row_group(g).num_rows() as u64)
                    .sum::<u64>(),
            "{text}: the step yields the plan's rows"
        );
        let predicate = lower(&filter.predicate, &batch.schema).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        let Filtered::Rows(rows) = batch.filter_host(&predicate, FilterMode::Compact).unwrap() else {
            panic!("rows asked for")
        };
        assert_same(&rows.to_host().unwrap(), &want, text);
    }
}

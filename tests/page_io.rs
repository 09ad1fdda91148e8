//! Page-level I/O of filtered reads (issue 43): a host read of a filter fetches only the dictionary
//! pages and the data pages holding the surviving rows, and still gives exactly arrow-rs's rows
//! with the exact filter applied; a damaged OffsetIndex is read around (whole chunk) or refused,
//! never trusted into a wrong answer.

mod common;

use common::assert_same;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, ListArray, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Int32Type, Schema};
use gpu_parquet::decode::host::decode_fetched;
use gpu_parquet::filter::Expr;
use gpu_parquet::report::PageIoReport;
use gpu_parquet::scan::{Decode, StepOutput};
use gpu_parquet::{
    BackendKind, Error, IoPolicy, ParquetSource, PlanOptions, Projection, ReadPlan, Reader, RowGroupSelection,
};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

const GROUPS: usize = 4;
const GROUP_ROWS: usize = 1000;
const PAGE_ROWS: usize = 50;

/// A file of 4 row groups of 1,000 rows in pages of 50 rows, with page indexes: `id` (0.., sorted),
/// `name` (dictionary-encoded strings), `score` (nullable floats) and `tags` (a list: repeated).
fn write_file(path: &Path) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("score", DataType::Float64, true),
        Field::new(
            "tags",
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            true,
        ),
    ]));
    let n = GROUPS * GROUP_ROWS;
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n as i64));
    let name: ArrayRef = Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("n{:03}", i % 37))));
    let score: ArrayRef = Arc::new(Float64Array::from_iter(
        (0..n).map(|i| (i % 7 != 0).then_some(i as f64 / 4.0)),
    ));
    let tags: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>((0..n).map(|i| {
        (i % 5 != 0).then(|| (0..(i % 4) as i32).map(|k| Some(k + i as i32)).collect::<Vec<_>>())
    })));
    let batch = RecordBatch::try_new(schema.clone(), vec![id, name, score, tags]).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(GROUP_ROWS))
        .set_data_page_row_count_limit(PAGE_ROWS)
        .set_write_batch_size(PAGE_ROWS)
        .set_statistics_enabled(EnabledStatistics::Page)
        .build();
    let mut w = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// arrow-rs's read of the whole file, then the reader's exact filter.
fn oracle(path: &Path, reader: &Reader) -> RecordBatch {
    let file = std::fs::File::open(path).unwrap();
    let r = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let schema = arrow::record_batch::RecordBatchReader::schema(&r);
    let batches: Vec<RecordBatch> = r.map(|b| b.unwrap()).collect();
    let all = concat_batches(&schema, &batches).unwrap();
    reader.filter().unwrap().apply_batch(&all).unwrap()
}

fn host_reader(path: &Path, filter: &str) -> Reader {
    Reader::builder(path)
        .with_backend(BackendKind::Host)
        .with_filter(Expr::parse(filter).unwrap())
        .build()
        .unwrap()
}

/// Every way a host read decodes (whole, streamed, scanned), each equal to `want`.
fn assert_every_host_read(reader: &Reader, want: &RecordBatch, what: &str) {
    let table = reader.read_batches().unwrap();
    assert_same(&table.concat().unwrap(), want, &format!("{what}: read_batches"));
    let decoded = reader.read().unwrap().decode().unwrap();
    assert_same(&decoded.concat().unwrap(), want, &format!("{what}: read + decode"));
    let mut streamed = Vec::new();
    for group in reader.stream().unwrap() {
        streamed.extend(group.unwrap().decode().unwrap().batches);
    }
    assert_same(
        &concat_batches(&want.schema(), &streamed).unwrap(),
        want,
        &format!("{what}: stream"),
    );
}

#[test]
fn a_selective_filter_fetches_only_the_surviving_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.parquet");
    write_file(&path);
    // Rows 1210..1260 of row group 1: pages 4 and 5 of 20 in each of its flat columns.
    let filter = "id >= 1210 and id < 1260";
    let reader = host_reader(&path, filter);
    let plan = reader.plan();
    assert_eq!(plan.row_groups, vec![1]);
    assert_eq!(plan.rows.get(&1), Some(&vec![200..300]));
    // The repeated column is read whole, and says why.
    assert_eq!(plan.whole_chunks.len(), 1, "{:?}", plan.whole_chunks);
    assert_eq!(plan.whole_chunks[0].column_path, "tags.list.item");
    assert!(plan.whole_chunks[0].reason.contains("repeated"));

    let chunks = reader.read().unwrap();
    chunks.verify().unwrap();
    // The bytes read are the pieces: dictionary pages and surviving data pages, nothing else.
    let read: u64 = chunks.log().tasks.iter().map(|t| t.bytes).sum();
    assert_eq!(read, plan.useful_bytes());
    let report = chunks.report();
    assert_eq!(report.total.total_bytes(), read);
    assert_eq!(report.overhead_bytes, 0);
    let page_io = reader.pruning().unwrap().page_io.as_ref().unwrap();
    for c in &page_io.columns {
        let io = report.columns.iter().find(|r| r.column_path == c.column).unwrap();
        assert_eq!(io.counts.total_bytes(), c.bytes_fetched, "{}: bytes read", c.column);
        assert_eq!(io.chunks, 1, "{}: one chunk, however many pieces", c.column);
        if c.column == "tags.list.item" {
            assert_eq!((c.chunks_paged, c.bytes_avoided), (0, 0));
            continue;
        }
        assert_eq!(c.chunks_paged, 1, "{}", c.column);
        assert_eq!(c.pages, (GROUP_ROWS / PAGE_ROWS) as u64, "{}", c.column);
        assert!(c.pages_fetched <= 3, "{}: {} pages fetched", c.column, c.pages_fetched);
        assert!(c.bytes_fetched < c.chunk_bytes, "{}: {c:?}", c.column);
    }
    // Each piece is a dictionary page or a run of data pages inside its chunk.
    for k in &plan.chunks {
        if let Some(run) = &k.pages {
            assert!(run.chunk.start <= k.offset && k.offset + k.len <= run.chunk.end);
            assert!(run.dictionary || !run.pages.is_empty());
        }
    }

    let want = oracle(&path, &reader);
    assert_eq!(want.num_rows(), 50);
    assert_every_host_read(&reader, &want, filter);
    let StepOutput::Host { .. } = Reader::builder(&path)
        .with_backend(BackendKind::Host)
        .with_filter(Expr::parse(filter).unwrap())
        .with_decode(Decode::Host)
        .build()
        .unwrap()
        .scan()
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
    else {
        panic!("a host scan yields host batches")
    };
}

#[test]
fn page_level_reads_equal_arrow_rs_over_many_filters_and_plans() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.parquet");
    write_file(&path);
    let filters = [
        "id >= 1210 and id < 1260",
        "id < 10 or id >= 3990",
        "id between 999 and 1001",
        "(id >= 100 and id < 120) or (id >= 2400 and id < 2600) or id = 3333",
        "id >= 0",
        "score > 900 and id < 3700",
        "name = 'n005' and id < 300",
    ];
    for filter in filters {
        let reader = host_reader(&path, filter);
        let want = oracle(&path, &reader);
        assert_every_host_read(&reader, &want, filter);
        // The same with a projection, coalescing over gaps and O_DIRECT alignment.
        let reader = Reader::builder(&path)
            .with_backend(BackendKind::Host)
            .with_columns(["score", "tags"])
            .with_policy(IoPolicy {
                direct_io: true,
                task_size: 4096,
                ..IoPolicy::default()
            })
            .with_filter(Expr::parse(filter).unwrap())
            .build()
            .unwrap();
        assert!(reader.plan().options.align);
        let full = oracle(&path, &reader);
        let want = full
            .project(&[
                full.schema().index_of("score").unwrap(),
                full.schema().index_of("tags").unwrap(),
            ])
            .unwrap();
        assert_every_host_read(&reader, &want, &format!("{filter}, aligned"));
    }
}

#[test]
fn corpus_files_with_page_indexes_read_page_by_page() {
    let Some(corpus) = common::corpus() else { return };
    let data = corpus.join("data");
    let cases = [
        ("alltypes_tiny_pages.parquet", "id >= 3000 and id < 3050", true),
        ("alltypes_tiny_pages.parquet", "int_col = 3 and bigint_col < 100", false),
        ("alltypes_tiny_pages_plain.parquet", "id >= 3000 and id < 3050", true),
        (
            "alltypes_tiny_pages_plain.parquet",
            "id < 20 or string_col = '9'",
            false,
        ),
        ("data_index_bloom_encoding_stats.parquet", "String = 'Hello'", false),
        ("data_index_bloom_encoding_stats.parquet", "String >= 'over'", false),
    ];
    for (name, filter, selective) in cases {
        let path = data.join(name);
        let what = format!("{name}: {filter}");
        let reader = host_reader(&path, filter);
        let want = oracle(&path, &reader);
        assert_every_host_read(&reader, &want, &what);
        let chunks = reader.read().unwrap();
        let read: u64 = chunks.log().tasks.iter().map(|t| t.bytes).sum();
        assert_eq!(read, reader.plan().useful_bytes(), "{what}");
        let page_io = reader.pruning().unwrap().page_io.as_ref().unwrap();
        assert_eq!(
            page_io.columns.iter().map(|c| c.bytes_fetched).sum::<u64>(),
            read,
            "{what}"
        );
        if selective {
            assert!(page_io.bytes_avoided() > 0, "{what}: {page_io:?}");
            assert!(page_io.whole_chunks.is_empty(), "{what}: {:?}", page_io.whole_chunks);
        }
    }
}

/// The file of [`write_file`] with page 4 of `id` in row group 1 changed by `change` (offset, size,
/// first row → new values, encoded in as many bytes).
fn damaged(dir: &Path, name: &str, change: impl Fn(i64, i32, i64) -> (i64, i32, i64)) -> std::path::PathBuf {
    let path = dir.join(name);
    write_file(&path);
    common::change_page_location(&path, 1, 0, 4, change);
    path
}

/// The file's rows 1210..1260 (row group 1's 210..260) planned page by page and decoded on the host.
fn paged_read(path: &Path) -> (ReadPlan, Result<RecordBatch, Error>) {
    let source = ParquetSource::open(path).unwrap();
    let rows = BTreeMap::from([(1usize, vec![210u64..260])]);
    let plan = ReadPlan::build_paged(
        &source,
        &Projection::All,
        &RowGroupSelection::Indices(vec![1]),
        PlanOptions::default(),
        &rows,
    )
    .unwrap();
    let fetched = common::host_fetch(&source, &plan, 2);
    let decoded = decode_fetched(&source, &plan, &fetched.buffer, 2).and_then(|t| t.concat());
    (plan, decoded)
}

/// arrow-rs's rows 1210..1260 of the file.
fn rows_1210_to_1260(path: &Path) -> RecordBatch {
    let reader = host_reader(path, "id >= 1210 and id < 1260");
    oracle(path, &reader)
}

#[test]
fn a_damaged_offset_index_is_read_around_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Pages out of row order, or outside the chunk: the plan reads that chunk whole, saying why,
    // and the answer is arrow-rs's.
    for (name, change) in [
        (
            "rows.parquet",
            (|o, s, f| (o, s, f - 100)) as fn(i64, i32, i64) -> (i64, i32, i64),
        ),
        ("outside.parquet", |o, s, f| (o + 1_000_000, s, f)),
    ] {
        let path = damaged(dir.path(), name, change);
        let (plan, got) = paged_read(&path);
        let whole = &plan.whole_chunks;
        assert!(
            whole
                .iter()
                .any(|w| w.row_group == 1 && w.column_path == "id" && w.reason.contains("OffsetIndex does not fit")),
            "{name}: {whole:?}"
        );
        assert!(plan.chunks.iter().any(|c| c.column_path == "id" && c.pages.is_none()));
        assert!(
            plan.chunks
                .iter()
                .any(|c| c.column_path == "score" && c.pages.is_some())
        );
        let report = PageIoReport::of(&plan);
        let pruning = gpu_parquet::report::PruningReport {
            page_io: Some(report),
            ..Default::default()
        };
        assert!(
            pruning
                .to_table()
                .contains("read whole: row group 1, column id: its OffsetIndex"),
            "{name}"
        );
        assert_same(&got.unwrap(), &rows_1210_to_1260(&path), name);
        // Through the reader (whatever its pruning makes of the damaged index): arrow-rs's rows.
        let reader = host_reader(&path, "id >= 1210 and id < 1260");
        assert_every_host_read(&reader, &oracle(&path, &reader), name);
    }
    // Page 4 starting a row later (rows still increasing): only the pages' own headers can tell,
    // and the decode refuses the chunk rather than give shifted rows.
    let path = damaged(dir.path(), "shifted.parquet", |o, s, f| (o, s, f + 1));
    let (plan, got) = paged_read(&path);
    assert!(
        plan.whole_chunks.iter().all(|w| w.column_path != "id"),
        "{:?}",
        plan.whole_chunks
    );
    let err = got.unwrap_err();
    assert!(matches!(err, Error::CorruptPage { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("OffsetIndex does not match") && msg.contains("id") && msg.contains("row group 1"),
        "{msg}"
    );
    let reader = host_reader(&path, "id >= 1210 and id < 1260");
    match reader.read_batches() {
        Ok(t) => assert_same(
            &t.concat().unwrap(),
            &oracle(&path, &reader),
            "shifted, through the reader",
        ),
        Err(e) => assert!(matches!(e, Error::CorruptPage { .. }), "{e}"),
    }
}

/// Every parquet-testing file arrow-rs reads, read page by page over a few rows of each row group
/// (two ranges, placed by the row group's size): where the whole file decodes, the page-level decode
/// gives exactly those rows of it.
#[test]
fn corpus_files_read_page_by_page_equal_their_whole_read() {
    let Some(corpus) = common::corpus() else { return };
    let files = common::files_under(&corpus.join("data"), |p| common::name_ends_with(p, ".parquet"));
    let mut paged_files = 0;
    for path in files {
        let Ok(source) = ParquetSource::open(&path) else {
            continue;
        };
        let meta = source.metadata();
        let whole_plan = ReadPlan::build(
            &source,
            &Projection::All,
            &RowGroupSelection::All,
            PlanOptions::default(),
        );
        let Ok(whole_plan) = whole_plan else { continue };
        let fetched = common::host_fetch(&source, &whole_plan, 2);
        let Ok(whole) = decode_fetched(&source, &whole_plan, &fetched.buffer, 2).and_then(|t| t.concat()) else {
            continue;
        };
        let rows: BTreeMap<usize, Vec<std::ops::Range<u64>>> = (0..meta.num_row_groups())
            .filter_map(|g| {
                let n = meta.row_group(g).num_rows().max(0) as u64;
                (n >= 4).then(|| (g, vec![n / 7..n / 7 + 1 + n / 9, n / 2..(n / 2 + 3).min(n)]))
            })
            .collect();
        let plan = ReadPlan::build_paged(
            &source,
            &Projection::All,
            &RowGroupSelection::All,
            PlanOptions::default(),
            &rows,
        )
        .unwrap();
        if plan.chunks.iter().any(|c| c.pages.is_some()) {
            paged_files += 1;
        }
        let fetched = common::host_fetch(&source, &plan, 2);
        let got = decode_fetched(&source, &plan, &fetched.buffer, 2)
            .and_then(|t| t.concat())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut slices = Vec::new();
        let mut at = 0usize;
        for g in 0..meta.num_row_groups() {
            let n = meta.row_group(g).num_rows().max(0) as usize;
            match plan.rows.get(&g) {
                Some(kept) => slices.extend(
                    kept.iter()
                        .map(|r| whole.slice(at + r.start as usize, (r.end - r.start) as usize)),
                ),
                None => slices.push(whole.slice(at, n)),
            }
            at += n;
        }
        let want = concat_batches(&whole.schema(), &slices).unwrap();
        assert_same(&got, &want, &path.display().to_string());
    }
    assert!(
        paged_files >= 3,
        "only {paged_files} corpus files were read page by page"
    );
}

/// The pieces of a chunk: the dictionary page merged with data page 0 when both are read, adjacent
/// data pages merged, a page left out splitting them; each piece's rows those of its pages.
#[test]
fn pieces_merge_adjacent_pages_and_split_at_pages_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.parquet");
    write_file(&path);
    let source = ParquetSource::open(&path).unwrap();
    let plan = |rows: Vec<std::ops::Range<u64>>| {
        ReadPlan::build_paged(
            &source,
            &Projection::Names(vec!["name".into()]),
            &RowGroupSelection::Indices(vec![2]),
            PlanOptions::default(),
            &BTreeMap::from([(2usize, rows)]),
        )
        .unwrap()
    };
    let locations = source
        .metadata()
        .page_index()
        .unwrap()
        .offset_index(2, 1)
        .unwrap()
        .page_locations()
        .clone();
    let chunk = source.checked_chunks()[2][1];
    let page =
        |p: usize| locations[p].offset as u64..(locations[p].offset + locations[p].compressed_page_size as i64) as u64;
    // Each piece: its byte range, whether it holds the dictionary, its pages and its rows.
    type Piece = (std::ops::Range<u64>, bool, std::ops::Range<usize>, std::ops::Range<u64>);
    let pieces = |p: &ReadPlan| -> Vec<Piece> {
        p.chunks
            .iter()
            .map(|c| {
                let r = c.pages.as_ref().unwrap();
                assert_eq!(r.chunk, chunk.offset..chunk.offset + chunk.len);
                assert_eq!(r.chunk_pages, 20);
                (
                    c.offset..c.offset + c.len,
                    r.dictionary,
                    r.pages.clone(),
                    r.rows.clone(),
                )
            })
            .collect()
    };
    // Rows in pages 0, 2 and 3: the dictionary with page 0, then pages 2 and 3 as one piece.
    let p = plan(vec![5..10, 120..130, 160..170]);
    assert_eq!(
        pieces(&p),
        vec![
            (chunk.offset..page(0).end, true, 0..1, 0..50),
            (page(2).start..page(3).end, false, 2..4, 100..200),
        ]
    );
    assert!(p.whole_chunks.is_empty());
    // Rows of the last page alone: the dictionary apart.
    let p = plan(vec![990..1000]);
    assert_eq!(
        pieces(&p),
        vec![
            (chunk.offset..page(0).start, true, 0..0, 0..0),
            (page(19).clone(), false, 19..20, 950..1000),
        ]
    );
    // Rows covering the row group: read whole, not page by page.
    let p = plan(vec![0..1000]);
    assert!(p.rows.is_empty() && p.chunks.iter().all(|c| c.pages.is_none()));
    // Rows out of order or past the row group: an error naming the row group.
    for bad in [vec![10..20, 5..8], vec![990..1001], vec![3..3]] {
        let err = ReadPlan::build_paged(
            &source,
            &Projection::All,
            &RowGroupSelection::Indices(vec![2]),
            PlanOptions::default(),
            &BTreeMap::from([(2usize, bad.clone())]),
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidRequest { .. }), "{bad:?}: {err}");
        assert!(err.to_string().contains("row group 2"), "{err}");
    }
}

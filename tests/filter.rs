//! Filters (issue 43): pruning never drops a row the filter accepts, and a filtered read equals a
//! brute-force arrow filter of the whole file, over random files written by arrow-rs with small row
//! groups and pages, statistics, page indexes and bloom filters, and over parquet-testing files with
//! page indexes and bloom filters, where the pruning counters are checked too.

mod common;

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Date32Array, Float64Array, Int32Array, RecordBatch, StringArray, UInt32Array};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use gpu_parquet::filter::{Expr, FilterPasses, MOSTLY_ACCEPTED, ScanSelection, prune};
use gpu_parquet::{BackendKind, Error, ParquetSource, Reader};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use proptest::prelude::*;

/// Every row group of `path` read by arrow-rs, one batch each.
fn row_groups_of(path: &Path) -> (SchemaRef, Vec<RecordBatch>) {
    let file = std::fs::File::open(path).unwrap();
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let schema = builder.schema().clone();
    let n = builder.metadata().num_row_groups();
    let mut out = Vec::new();
    for g in 0..n {
        let file = std::fs::File::open(path).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .with_row_groups(vec![g])
            .with_batch_size(1 << 20)
            .build()
            .unwrap();
        let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        out.push(concat_batches(&schema, &batches).unwrap());
    }
    (schema, out)
}

/// Prunes `path` by `filter` (every row group, every leaf column laid out) and checks that every row
/// the filter accepts (by brute force over arrow-rs's read) is inside a surviving row group, one of
/// its row ranges, and a kept page of every column; then that the filtered read through the reader
/// equals the brute-force filter. Returns the selection and the number of matching rows.
fn check(path: &Path, filter: &Expr) -> (ScanSelection, usize) {
    let source = ParquetSource::open(path).unwrap();
    let meta = source.metadata();
    let (schema, groups) = row_groups_of(path);
    let predicate = filter.bind(&schema, &source.location()).unwrap();
    let all_groups: Vec<usize> = (0..meta.num_row_groups()).collect();
    let leaves: Vec<usize> = (0..meta.file_metadata().schema_descr().num_columns()).collect();
    let selection = prune(
        meta,
        &schema,
        &predicate,
        &all_groups,
        &leaves,
        Some(source.file().as_ref()),
        &source.location(),
    )
    .unwrap();
    let mut expected = Vec::new();
    let mut matching = 0;
    let mut accepted: Vec<Vec<u64>> = Vec::new();
    for (g, batch) in groups.iter().enumerate() {
        let mask = predicate.evaluate(batch).unwrap();
        let rows: Vec<u64> = (0..mask.len() as u64)
            .filter(|&r| mask.is_valid(r as usize) && mask.value(r as usize))
            .collect();
        matching += rows.len();
        accepted.push(rows.clone());
        expected.push(predicate.filter(batch).unwrap());
        // A row group the statistics say is accepted whole: every row of it is.
        if let Some(s) = selection.row_groups.iter().find(|s| s.row_group == g && s.all_accepted) {
            assert_eq!(
                rows.len(),
                batch.num_rows(),
                "{filter}: row group {g} is said accepted whole, but only {} of its {} rows are (ranges {:?})",
                rows.len(),
                batch.num_rows(),
                s.rows
            );
        }
        // Rows the statistics prove accepted are.
        if let Some(s) = selection.row_groups.iter().find(|s| s.row_group == g) {
            for r in s.surely_accepted.iter().flat_map(Clone::clone) {
                assert!(
                    rows.binary_search(&r).is_ok(),
                    "{filter}: row {r} of row group {g} is said proven accepted, but is not"
                );
            }
            if s.all_accepted {
                assert_eq!(s.surely_accepted, s.rows, "{filter}: row group {g}");
            }
        }
        if rows.is_empty() {
            continue;
        }
        let kept = selection
            .row_groups
            .iter()
            .find(|s| s.row_group == g)
            .unwrap_or_else(|| panic!("{filter}: row group {g} pruned but rows {rows:?} match"));
        for &r in &rows {
            assert!(
                kept.rows.iter().any(|x| x.contains(&r)),
                "{filter}: row {r} of row group {g} matches but the ranges are {:?}",
                kept.rows
            );
            for chunk in &kept.chunks {
                let (Some(pages), Some(index)) = (&chunk.pages, meta.page_index()) else {
                    continue;
                };
                let locations = index.offset_index(g, chunk.column).unwrap().page_locations();
                let page = locations.iter().rposition(|l| l.first_row_index as u64 <= r).unwrap();
                let l = &locations[page];
                let bytes = l.offset as u64..l.offset as u64 + l.compressed_page_size as u64;
                assert!(
                    pages.contains(&bytes),
                    "{filter}: row {r} of row group {g} is in page {page} of column {} which was pruned",
                    chunk.column
                );
            }
        }
    }
    let report = &selection.report;
    assert_eq!(report.row_groups, meta.num_row_groups() as u64);
    assert_eq!(
        report.row_groups,
        report.row_groups_selected
            + report.row_groups_pruned_by_statistics
            + report.row_groups_pruned_by_bloom_filter
            + report.row_groups_pruned_by_dictionary
            + report.row_groups_pruned_by_page_index
    );
    assert!(report.rows_selected >= matching as u64);
    assert_eq!(
        report.row_groups_all_accepted,
        selection.row_groups.iter().filter(|s| s.all_accepted).count() as u64
    );

    // Through the reader: the exact rows, in order.
    let reader = Reader::builder(path)
        .with_backend(BackendKind::Host)
        .with_filter(filter.clone())
        .with_filter_passes(FilterPasses::Two)
        .build()
        .unwrap();
    // The pruning as `prune` gives it, and the page-level I/O of the plan beside it.
    let mut pruned = reader.pruning().cloned().unwrap();
    let page_io = pruned.page_io.take().expect("a host read reports its page-level I/O");
    assert_eq!(&pruned, report);
    assert_eq!(
        page_io.columns.iter().map(|c| c.bytes_fetched).sum::<u64>(),
        reader.plan().useful_bytes()
    );
    let want = concat_batches(&schema, &expected).unwrap();
    // Two passes, then one, then the default: this file's other columns are a few pages, just
    // written, in the page cache, so each step reads in one pass.
    let read = reader.read_host().unwrap();
    let passes_of = |passes: FilterPasses| {
        Reader::builder(path)
            .with_backend(BackendKind::Host)
            .with_filter(filter.clone())
            .with_filter_passes(passes)
            .build()
            .unwrap()
    };
    let one = passes_of(FilterPasses::One).read_batches().unwrap();
    let auto = passes_of(FilterPasses::Auto).read_host().unwrap();
    assert!(
        auto.passes.is_none(),
        "{filter}: the default read a hot, small file in two passes"
    );
    assert_eq!(
        auto.io.useful_bytes,
        reader.plan().useful_bytes(),
        "{filter}: the default's bytes"
    );
    for (got, passes) in [
        (read.table.concat().unwrap(), "two"),
        (one.concat().unwrap(), "one"),
        (auto.table.concat().unwrap(), "auto"),
    ] {
        // Schema metadata aside (the decoder does not carry it; arrow-rs does).
        assert_eq!(
            got.schema().fields(),
            want.schema().fields(),
            "{filter}, {passes} passes"
        );
        assert_eq!(got.columns(), want.columns(), "{filter}, {passes} passes");
    }
    // The second pass read the other columns' pages holding an accepted row, and no other page.
    let descr = meta.file_metadata().schema_descr();
    let filter_columns = filter.columns();
    let payload: Vec<usize> = (0..descr.num_columns())
        .filter(|&c| !filter_columns.contains(&descr.column(c).name().to_string()))
        .collect();
    // Read in one pass: runs of row groups the statistics accept whole (nothing to evaluate), and
    // runs of the others whose kept rows they mostly prove accepted.
    let selected = |g: usize| selection.row_groups.iter().find(|s| s.row_group == g);
    let is_whole = |g: usize| selected(g).is_some_and(|s| s.all_accepted);
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for &g in &reader.plan().row_groups {
        match runs.last_mut() {
            Some(run) if is_whole(run[0]) == is_whole(g) => run.push(g),
            _ => runs.push(vec![g]),
        }
    }
    let len = |rs: &[std::ops::Range<u64>]| rs.iter().map(|r| r.end - r.start).sum::<u64>();
    let whole: Vec<usize> = runs
        .into_iter()
        .filter(|run| {
            let (sure, kept) = run
                .iter()
                .filter_map(|&g| selected(g))
                .fold((0, 0), |(a, b), s| (a + len(&s.surely_accepted), b + len(&s.rows)));
            is_whole(run[0]) || (kept > 0 && sure as f64 >= MOSTLY_ACCEPTED * kept as f64)
        })
        .flatten()
        .collect();
    let in_two: Vec<usize> = reader
        .plan()
        .row_groups
        .iter()
        .copied()
        .filter(|g| !whole.contains(g))
        .collect();
    let one_pass_bytes: u64 = reader
        .plan()
        .chunks
        .iter()
        .filter(|c| whole.contains(&c.row_group))
        .map(|c| c.len)
        .sum();
    let Some(passes) = read.passes else {
        assert!(payload.is_empty() || in_two.is_empty(), "{filter}: read in one pass");
        assert_eq!(read.io.useful_bytes, reader.plan().useful_bytes(), "{filter}");
        return (selection, matching);
    };
    let checked = source.checked_chunks();
    let mut want_payload = 0u64;
    for &g in &in_two {
        let rows = &accepted[g];
        if rows.is_empty() {
            continue;
        }
        for &c in &payload {
            let chunk = checked[g][c];
            let index = meta.page_index().and_then(|i| i.offset_index(g, c));
            let (Some(index), false) = (index, rows.len() == groups[g].num_rows()) else {
                want_payload += chunk.len;
                continue;
            };
            let pages = index.page_locations();
            want_payload += pages[0].offset as u64 - chunk.offset;
            for (p, l) in pages.iter().enumerate() {
                let end = pages
                    .get(p + 1)
                    .map_or(groups[g].num_rows() as u64, |n| n.first_row_index as u64);
                if rows.iter().any(|&r| (l.first_row_index as u64..end).contains(&r)) {
                    want_payload += l.compressed_page_size as u64;
                }
            }
        }
    }
    assert_eq!(passes.payload, want_payload, "{filter}: the second pass's bytes");
    assert!(passes.payload <= passes.payload_one_pass, "{filter}");
    assert_eq!(
        passes.row_groups_without_payload as usize,
        in_two.iter().filter(|&&g| accepted[g].is_empty()).count(),
        "{filter}"
    );
    // The report counts both passes' reads, and the one-pass reads of the row groups accepted whole.
    assert_eq!(
        read.io.useful_bytes,
        passes.filter + passes.payload + one_pass_bytes,
        "{filter}"
    );
    (selection, matching)
}

#[derive(Debug, Clone)]
struct Data {
    i: Vec<Option<i32>>,
    s: Vec<Option<String>>,
    f: Vec<Option<f64>>,
    u: Vec<u32>,
    d: Vec<i32>,
}

fn data(max_rows: usize) -> impl Strategy<Value = Data> {
    (0..max_rows, any::<bool>()).prop_flat_map(|(n, sorted)| {
        let i = proptest::collection::vec(proptest::option::weighted(0.9, -50i32..50), n);
        let s = proptest::collection::vec(proptest::option::weighted(0.9, "[a-d]{0,3}"), n);
        let floats = prop_oneof![
            Just(f64::NAN),
            Just(-0.0),
            Just(0.0),
            Just(1.5),
            (-20i32..20).prop_map(f64::from)
        ];
        let f = proptest::collection::vec(proptest::option::weighted(0.9, floats), n);
        let u = proptest::collection::vec(prop_oneof![0u32..10, (u32::MAX - 10)..=u32::MAX], n);
        let d = proptest::collection::vec(0i32..100, n);
        (i, s, f, u, d).prop_map(move |(mut i, s, f, u, mut d)| {
            // Sorted columns make pruning bite; unsorted ones check it stays correct.
            if sorted {
                i.sort();
                d.sort();
            }
            Data { i, s, f, u, d }
        })
    })
}

fn batch(data: &Data) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int32, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("f", DataType::Float64, true),
        Field::new("u", DataType::UInt32, false),
        Field::new("d", DataType::Date32, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(data.i.clone())),
        Arc::new(StringArray::from(data.s.clone())),
        Arc::new(Float64Array::from(data.f.clone())),
        Arc::new(UInt32Array::from(data.u.clone())),
        Arc::new(Date32Array::from(data.d.clone())),
    ];
    RecordBatch::try_new(schema, columns).unwrap()
}

/// Writes `batch` with `rows_per_group` rows per row group and about `rows_per_page` rows per page,
/// page statistics and index, bloom filters on `i` and `s` if `blooms`.
fn write(
    batch: &RecordBatch,
    rows_per_group: usize,
    rows_per_page: usize,
    dictionary: bool,
    blooms: bool,
) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rows_per_group.max(1)))
        .set_data_page_row_count_limit(rows_per_page.max(1))
        .set_write_batch_size(rows_per_page.max(1))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_dictionary_enabled(dictionary)
        .set_column_bloom_filter_enabled(ColumnPath::from("i"), blooms)
        .set_column_bloom_filter_enabled(ColumnPath::from("s"), blooms)
        .build();
    let mut w = ArrowWriter::try_new(file.reopen().unwrap(), batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    file
}

fn leaf() -> impl Strategy<Value = String> {
    let op = prop_oneof![Just("="), Just("!="), Just("<"), Just("<="), Just(">"), Just(">=")];
    prop_oneof![
        (op.clone(), -55i32..55).prop_map(|(op, v)| format!("i {op} {v}")),
        (op.clone(), "[a-e]{0,3}").prop_map(|(op, v)| format!("s {op} '{v}'")),
        (
            op.clone(),
            prop_oneof![
                Just("0".to_string()),
                Just("-0.0".into()),
                Just("1.5".into()),
                (-22i32..22).prop_map(|v| v.to_string())
            ]
        )
            .prop_map(|(op, v)| format!("f {op} {v}")),
        (op.clone(), prop_oneof![0u32..12, (u32::MAX - 12)..=u32::MAX]).prop_map(|(op, v)| format!("u {op} {v}")),
        (op, 0i32..105).prop_map(|(op, v)| format!("d {op} '{}'", date(v))),
        proptest::collection::vec(-55i32..55, 1..4).prop_map(|v| format!(
            "i in ({})",
            v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
        )),
        proptest::collection::vec("[a-e]{0,3}", 1..4).prop_map(|v| format!(
            "s not in ({})",
            v.iter().map(|x| format!("'{x}'")).collect::<Vec<_>>().join(", ")
        )),
        (-55i32..55, 0i32..30).prop_map(|(a, w)| format!("i between {a} and {}", a + w)),
        prop_oneof![Just("i"), Just("s"), Just("f")].prop_map(|c| format!("{c} is null")),
        prop_oneof![Just("i"), Just("s"), Just("f")].prop_map(|c| format!("{c} is not null")),
    ]
}

/// Days since the epoch as 'YYYY-MM-DD' (days < 365 of 1970 and 1971).
fn date(days: i32) -> String {
    let d = chrono_like(days);
    format!("{:04}-{:02}-{:02}", d.0, d.1, d.2)
}

fn chrono_like(mut days: i32) -> (i32, i32, i32) {
    let months = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut year = 1970;
    while days >= 365 {
        days -= 365;
        year += 1;
    }
    let mut month = 0;
    while days >= months[month] {
        days -= months[month];
        month += 1;
    }
    (year, month as i32 + 1, days + 1)
}

fn filter_text() -> impl Strategy<Value = String> {
    leaf().prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) and ({b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}) or ({b})")),
            inner.prop_map(|a| format!("not ({a})")),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn pruning_never_drops_a_matching_row(
        data in data(300),
        rows_per_group in 1usize..80,
        rows_per_page in 1usize..12,
        dictionary in any::<bool>(),
        blooms in any::<bool>(),
        filters in proptest::collection::vec(filter_text(), 1..4),
    ) {
        let file = write(&batch(&data), rows_per_group, rows_per_page, dictionary, blooms);
        for text in filters {
            let expr = Expr::parse(&text).unwrap();
            check(file.path(), &expr);
        }
    }
}

/// A file sorted on `i` (0..2000, 100 rows per row group, 10 per page).
fn sorted_file() -> tempfile::NamedTempFile {
    let n = 2000;
    let data = Data {
        i: (0..n).map(Some).collect(),
        s: (0..n).map(|k| Some(format!("v{:05}", k * 7919 % n))).collect(),
        f: (0..n).map(|k| Some(k as f64 / 2.0)).collect(),
        u: (0..n).map(|k| k as u32).collect(),
        d: (0..n).map(|k| k / 20).collect(),
    };
    write(&batch(&data), 100, 10, true, true)
}

#[test]
fn each_reason_prunes_where_it_should() {
    let file = sorted_file();
    // Statistics: 19 of 20 row groups; the page index: 9 of the last's 10 pages per column.
    let (sel, matching) = check(file.path(), &Expr::parse("i >= 1990").unwrap());
    assert_eq!(matching, 10);
    let r = &sel.report;
    assert_eq!(r.row_groups_pruned_by_statistics, 19, "{r:?}");
    assert_eq!(sel.row_groups.len(), 1);
    assert_eq!(sel.row_groups[0].rows, vec![90..100]);
    assert_eq!(r.pages, 50);
    assert_eq!(r.pages_pruned, 45);
    assert!(r.bytes_avoided > r.bytes / 2, "{r:?}");
    let i = r.columns.iter().find(|c| c.column == "i").unwrap();
    assert_eq!(i.row_groups_pruned_by_statistics, 19);
    assert_eq!(i.pages_pruned_by_page_index, 9);

    // Bloom filters: `s` is unsorted, so its statistics span every row group, but a value absent
    // from all is ruled out by the bloom filters.
    let (sel, matching) = check(file.path(), &Expr::parse("s = 'v00999x'").unwrap());
    assert_eq!(matching, 0);
    let r = &sel.report;
    assert_eq!(r.row_groups_pruned_by_statistics, 0, "{r:?}");
    assert_eq!(r.row_groups_pruned_by_bloom_filter, 20, "{r:?}");
    assert_eq!(r.columns[0].bloom_filters_read, 20);

    // Dictionaries: `f` (k / 2) has no bloom filter and every page of it is dictionary-encoded; a
    // value inside row group 10's bounds but not in it is ruled out by its dictionary.
    let (sel, matching) = check(file.path(), &Expr::parse("f = 520.25").unwrap());
    assert_eq!(matching, 0);
    let r = &sel.report;
    assert_eq!(r.row_groups_pruned_by_statistics, 19, "{r:?}");
    assert_eq!(r.row_groups_pruned_by_dictionary, 1, "{r:?}");
    assert_eq!(r.columns[0].dictionary_pages_read, 1);
    // A value the dictionary has survives it.
    let (sel, matching) = check(file.path(), &Expr::parse("f in (520.5, 7)").unwrap());
    assert_eq!(matching, 2);
    assert_eq!(sel.report.row_groups_selected, 2);

    // The page index alone: every row group's statistics span `i % 100 == 50`-ish values... an `or`
    // of two narrow ranges in one row group keeps two pages.
    let (sel, matching) = check(
        file.path(),
        &Expr::parse("i between 1203 and 1204 or i = 1288").unwrap(),
    );
    assert_eq!(matching, 3);
    assert_eq!(sel.row_groups.len(), 1);
    assert_eq!(sel.row_groups[0].rows, vec![0..10, 80..90]);

    // And across columns: rows of `i` in row group 3, `d` (= row / 20) in pages 2..4 of it.
    let (sel, _) = check(
        file.path(),
        &Expr::parse("i < 400 and i >= 300 and d = '1970-01-17'").unwrap(),
    );
    assert_eq!(sel.row_groups.len(), 1);
    assert_eq!(sel.row_groups[0].rows, vec![20..40]);

    // Nothing to prune: every row group kept, whole.
    let (sel, matching) = check(file.path(), &Expr::parse("i is not null").unwrap());
    assert_eq!(matching, 2000);
    assert_eq!(sel.report.row_groups_selected, 20);
    assert_eq!(sel.report.pages_pruned, 0);
    assert_eq!(sel.report.bytes_avoided, 0);
}

/// Offsets-only page indexes (an OffsetIndex without a ColumnIndex, as written for columns with
/// chunk statistics only): that column prunes no page, but its page byte ranges still follow the
/// rows the other columns' ColumnIndexes select.
#[test]
fn offsets_only_page_indexes_prune_nothing_but_give_page_ranges() {
    let n = 2000;
    let data = Data {
        i: (0..n).map(Some).collect(),
        s: (0..n).map(|k| Some(format!("v{k:05}"))).collect(),
        f: (0..n).map(|k| Some(k as f64)).collect(),
        u: (0..n).map(|k| k as u32).collect(),
        d: (0..n).map(|k| k / 20).collect(),
    };
    let file = tempfile::NamedTempFile::new().unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(100))
        .set_data_page_row_count_limit(10)
        .set_write_batch_size(10)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_column_statistics_enabled(ColumnPath::from("i"), EnabledStatistics::Chunk)
        .build();
    let b = batch(&data);
    let mut w = ArrowWriter::try_new(file.reopen().unwrap(), b.schema(), Some(props)).unwrap();
    w.write(&b).unwrap();
    w.close().unwrap();
    let meta = ParquetSource::open(file.path()).unwrap().metadata().clone();
    let index = meta.page_index().expect("a page index");
    assert!(index.column_index(19, 0).is_none() && index.offset_index(19, 0).is_some());

    // `i` alone: its row-group statistics prune, its pages are all kept.
    let (sel, matching) = check(file.path(), &Expr::parse("i >= 1995").unwrap());
    assert_eq!(matching, 5);
    assert_eq!(sel.report.row_groups_pruned_by_statistics, 19);
    assert_eq!(sel.row_groups[0].rows, vec![0..100]);
    assert_eq!(sel.report.columns[0].chunks_without_column_index, 1);
    assert_eq!(sel.report.pages_pruned, 0);

    // With `d` (day = row / 20), whose ColumnIndex selects rows 80..100 of the last row group: `i`'s
    // chunk keeps only the two pages holding them, from its OffsetIndex.
    let (sel, matching) = check(file.path(), &Expr::parse("i >= 1900 and d >= '1970-04-10'").unwrap());
    assert_eq!(matching, 20);
    let last = &sel.row_groups[0];
    assert_eq!(last.rows, vec![80..100]);
    let i_pages = last
        .chunks
        .iter()
        .find(|c| c.column == 0)
        .unwrap()
        .pages
        .as_ref()
        .unwrap();
    let locations = index.offset_index(19, 0).unwrap().page_locations();
    let want: Vec<_> = locations[8..]
        .iter()
        .map(|l| l.offset as u64..(l.offset + l.compressed_page_size as i64) as u64)
        .collect();
    assert_eq!(i_pages, &want);
}

#[test]
fn the_reader_reads_filter_columns_and_drops_them() {
    let file = sorted_file();
    let filter = Expr::parse("i >= 1990 and s != 'v00000'").unwrap();
    let reader = Reader::builder(file.path())
        .with_columns(["f"])
        .with_backend(BackendKind::Host)
        .with_filter(filter)
        .build()
        .unwrap();
    // Only the last row group is read, with the filter's columns.
    assert_eq!(reader.plan().row_groups, vec![19]);
    // Its three chunks (f and the filter's i and s), read page by page: each its dictionary page
    // (where it has one) and its last data page, the one holding rows 1990..2000.
    let chunks: std::collections::BTreeSet<usize> = reader.plan().chunks.iter().map(|c| c.column).collect();
    assert_eq!(chunks.len(), 3);
    assert!(reader.plan().chunks.iter().all(|c| c.pages.is_some()));
    let table = reader.read_batches().unwrap();
    assert_eq!(table.schema.fields().len(), 1);
    let got = table.concat().unwrap();
    let want: Vec<f64> = (1990..2000).map(|k| k as f64 / 2.0).collect();
    assert_eq!(
        got.column(0).as_ref(),
        &Float64Array::from(want) as &dyn arrow::array::Array
    );
    // Streamed, the same rows.
    let mut rows = 0;
    for group in reader.stream().unwrap() {
        let t = group.unwrap().decode().unwrap();
        assert_eq!(t.schema.fields().len(), 1);
        rows += t.num_rows();
    }
    assert_eq!(rows, 10);
    // A filter nothing passes reads nothing.
    let reader = Reader::builder(file.path())
        .with_backend(BackendKind::Host)
        .with_filter(Expr::parse("i > 5000").unwrap())
        .build()
        .unwrap();
    assert!(reader.plan().chunks.is_empty());
    assert_eq!(reader.read_batches().unwrap().num_rows(), 0);
}

#[test]
fn bad_filters_are_clear_errors() {
    let file = sorted_file();
    let build = |text: &str| {
        Reader::builder(file.path())
            .with_backend(BackendKind::Host)
            .with_filter(Expr::parse(text).unwrap())
            .build()
    };
    let name = file.path().display().to_string();
    for (text, column, what) in [
        ("nope = 1", "nope", "does not have"),
        ("i = 'x'", "i", "quoted literal"),
        ("d = 3", "d", "a number compares only"),
        ("s > 1", "s", "a number compares only"),
    ] {
        let e = build(text).unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, Error::InvalidRequest { .. }), "{m}");
        assert!(
            m.contains(&name) && m.contains(&format!("column '{column}'")) && m.contains(what),
            "{m}"
        );
    }
}

/// parquet-testing files with page indexes and bloom filters: the filtered read equals a brute-force
/// filter, and pruning happens where the metadata allows it.
#[test]
fn corpus_files_with_page_indexes_and_blooms() {
    let Some(corpus) = common::corpus() else { return };
    let data = corpus.join("data");
    type Expect<'a> = &'a dyn Fn(&ScanSelection);
    let cases: &[(&str, &str, Expect)] = &[
        ("alltypes_tiny_pages.parquet", "id = 5000", &|s| {
            assert!(s.report.pages_pruned > 0, "{:?}", s.report)
        }),
        (
            "alltypes_tiny_pages.parquet",
            "id between 100 and 200 and bool_col",
            &|s| assert!(s.report.pages_pruned > 0, "{:?}", s.report),
        ),
        (
            "alltypes_tiny_pages.parquet",
            // INT96 timestamps have no usable statistics: nothing pruned by them, rows still exact.
            "timestamp_col >= '2010-06-01' and string_col in ('3', '4') or tinyint_col < 0",
            &|_| {},
        ),
        (
            "alltypes_tiny_pages.parquet",
            "timestamp_col >= '2009-01-13' and id in (7, 4000) or bigint_col < 0",
            &|s| assert!(s.report.pages_pruned > 0, "{:?}", s.report),
        ),
        (
            "alltypes_tiny_pages.parquet",
            "float_col > 5.5 and double_col <= 60.6",
            &|_| {},
        ),
        ("alltypes_tiny_pages_plain.parquet", "id < 50 or id > 7250", &|s| {
            assert!(s.report.pages_pruned > 0, "{:?}", s.report)
        }),
        (
            "alltypes_tiny_pages_plain.parquet",
            "date_string_col = '01/13/09'",
            &|_| {},
        ),
        ("data_index_bloom_encoding_stats.parquet", "String = 'jumpsx'", &|s| {
            assert_eq!(s.report.row_groups_pruned_by_bloom_filter, 1, "{:?}", s.report)
        }),
        (
            "data_index_bloom_encoding_stats.parquet",
            "String in ('jumps', 'nope')",
            &|s| assert_eq!(s.report.row_groups_selected, 1),
        ),
        ("data_index_bloom_encoding_stats.parquet", "String > 'zzz'", &|s| {
            assert_eq!(s.report.row_groups_pruned_by_statistics, 1, "{:?}", s.report)
        }),
        (
            "data_index_bloom_encoding_with_length.parquet",
            "String = 'a b'",
            &|s| assert_eq!(s.report.row_groups_pruned_by_bloom_filter, 1, "{:?}", s.report),
        ),
        ("page_v2_empty_compressed.parquet", "integer_column is null", &|_| {}),
        ("page_v2_empty_compressed.parquet", "integer_column = 1", &|_| {}),
        (
            "datapage_v1-snappy-compressed-checksum.parquet",
            "a > 0 and b < 0",
            &|_| {},
        ),
        ("nan_in_stats.parquet", "x > 0.5", &|s| {
            assert_eq!(s.report.row_groups_selected, 1)
        }),
        ("nan_in_stats.parquet", "x < 2", &|s| {
            assert_eq!(s.report.row_groups_selected, 1)
        }),
    ];
    for (name, text, expect) in cases {
        let path = data.join(name);
        if !path.exists() {
            common::skip(&format!("{name} is not in the corpus"));
            continue;
        }
        let (sel, _) = check(&path, &Expr::parse(text).unwrap());
        expect(&sel);
    }
}

/// Row groups whose statistics prove every row accepted are read without evaluating the filter,
/// and the result is still exact: on the sorted file, `i < 1050` accepts row groups 0..10 whole,
/// cuts row group 10 at its sixth page, and prunes the rest; `or` and `is not null` combine.
#[test]
fn row_groups_accepted_whole_by_statistics() {
    let file = sorted_file();
    let (sel, matching) = check(file.path(), &Expr::parse("i < 1050").unwrap());
    assert_eq!(matching, 1050);
    let whole: Vec<usize> = sel
        .row_groups
        .iter()
        .filter(|s| s.all_accepted)
        .map(|s| s.row_group)
        .collect();
    assert_eq!(whole, (0..10).collect::<Vec<_>>());
    assert_eq!(sel.report.row_groups_all_accepted, 10);
    assert!(!sel.row_groups.iter().find(|s| s.row_group == 10).unwrap().all_accepted);
    let (sel, _) = check(file.path(), &Expr::parse("i < 100 or i >= 1900").unwrap());
    assert_eq!(sel.report.row_groups_all_accepted, 2);
    let (sel, _) = check(file.path(), &Expr::parse("i is not null and i >= 1000").unwrap());
    assert_eq!(sel.report.row_groups_all_accepted, 10);
    // Floats never: NaN rows, outside the bounds, would fail the test.
    let (sel, _) = check(file.path(), &Expr::parse("f < 5000").unwrap());
    assert_eq!(sel.report.row_groups_all_accepted, 0);
    // The text report says so.
    let reader = Reader::builder(file.path())
        .with_backend(BackendKind::Host)
        .with_filter(Expr::parse("i < 1050").unwrap())
        .build()
        .unwrap();
    let table = reader.pruning().unwrap().to_table();
    assert!(table.contains("10 of the kept row groups accepted whole"), "{table}");
}

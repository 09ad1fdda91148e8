//! Read-plan invariants over random chunk layouts, metadata validation on corrupted metadata, and
//! projection / row-group resolution.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gpu_parquet::conformance;
use gpu_parquet::metadata::validate_column_chunks;
use gpu_parquet::plan::{ChunkRange, DIRECT_IO_ALIGN, resolve_projection};
use gpu_parquet::{Error, ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader, RowGroupMetaData};
use proptest::prelude::*;

mod common;
use common::testing_dir;

// ---------------------------------------------------------------------------------------------
// Plan invariants

/// A random layout: chunks separated by random gaps, a footer after them, random options.
fn layout() -> impl Strategy<Value = (Vec<ChunkRange>, u64, PlanOptions)> {
    let chunk = (0u64..6000, 0u64..4000, 0usize..3, 0usize..4);
    (
        prop::collection::vec(chunk, 0..24),
        0u64..9000,
        0u64..10_000,
        1u64..20_000,
        any::<bool>(),
    )
        .prop_flat_map(|(raw, footer, max_gap, task_size, align)| {
            let mut off = 4u64;
            let mut chunks = Vec::new();
            for (i, (gap, len, g, c)) in raw.into_iter().enumerate() {
                off += gap;
                chunks.push(ChunkRange {
                    row_group: g,
                    column: c,
                    column_path: format!("col{c}.chunk{i}"),
                    offset: off,
                    len: len + 1,
                    dest_offset: u64::MAX,
                    pages: None,
                });
                off += len + 1;
            }
            let file_len = off + footer + 8;
            let options = PlanOptions {
                max_gap,
                task_size,
                align,
            };
            (Just(chunks).prop_shuffle(), Just(file_len), Just(options))
        })
}

fn align_down(x: u64, o: &PlanOptions) -> u64 {
    if o.align {
        x / DIRECT_IO_ALIGN * DIRECT_IO_ALIGN
    } else {
        x
    }
}

fn align_up(x: u64, o: &PlanOptions, file_len: u64) -> u64 {
    if o.align {
        (x.div_ceil(DIRECT_IO_ALIGN) * DIRECT_IO_ALIGN).min(file_len)
    } else {
        x
    }
}

fn check_invariants(input: &[ChunkRange], file_len: u64, o: PlanOptions) -> Result<(), TestCaseError> {
    let plan = ReadPlan::from_chunks(input.to_vec(), vec![], vec![], file_len, o);

    // The plan's chunks are the input, sorted by offset.
    let mut want: Vec<(u64, u64, String)> = input.iter().map(|c| (c.offset, c.len, c.column_path.clone())).collect();
    want.sort();
    let got: Vec<(u64, u64, String)> = plan
        .chunks
        .iter()
        .map(|c| (c.offset, c.len, c.column_path.clone()))
        .collect();
    prop_assert_eq!(got, want);

    // Spans: in order, disjoint, contiguous in the destination, each holding its chunks.
    let mut dest = 0;
    let mut next_chunk = 0;
    for (si, s) in plan.spans.iter().enumerate() {
        prop_assert_eq!(s.dest_offset, dest, "span {} dest offset", si);
        dest += s.len;
        prop_assert!(s.offset + s.len <= file_len);
        prop_assert_eq!(s.chunks.start, next_chunk, "span {} chunks are not contiguous", si);
        prop_assert!(s.chunks.end > s.chunks.start, "span {} has no chunk", si);
        next_chunk = s.chunks.end;
        for c in &plan.chunks[s.chunks.clone()] {
            prop_assert!(c.offset >= s.offset && c.offset + c.len <= s.offset + s.len);
            prop_assert_eq!(c.dest_offset, s.dest_offset + (c.offset - s.offset));
        }
        // Within a span, consecutive chunks are at most max_gap apart (after alignment).
        let mut end = 0;
        for (k, c) in plan.chunks[s.chunks.clone()].iter().enumerate() {
            if k > 0 {
                prop_assert!(
                    align_down(c.offset, &o) <= end + o.max_gap,
                    "chunk at {} merged over a gap larger than {}",
                    c.offset,
                    o.max_gap
                );
            }
            end = end.max(align_up(c.offset + c.len, &o, file_len));
        }
        if let Some(next) = plan.spans.get(si + 1) {
            // Spans left apart are more than max_gap apart.
            prop_assert!(
                next.offset > s.offset + s.len + o.max_gap,
                "spans {} and {} should merge",
                si,
                si + 1
            );
        }
        if o.align {
            prop_assert_eq!(s.offset % DIRECT_IO_ALIGN, 0);
        }
    }
    prop_assert_eq!(next_chunk, plan.chunks.len());
    prop_assert_eq!(plan.dest_len, dest);

    // Tasks: in order, disjoint, within the span they cut, contiguous in the destination, bounded.
    let step = if o.align {
        o.task_size.div_ceil(DIRECT_IO_ALIGN) * DIRECT_IO_ALIGN
    } else {
        o.task_size
    };
    let mut ti = 0;
    for s in &plan.spans {
        let mut off = s.offset;
        while off < s.offset + s.len {
            let t = plan
                .tasks
                .get(ti)
                .ok_or_else(|| TestCaseError::fail("span not fully covered by tasks"))?;
            prop_assert_eq!(t.offset, off, "task {} does not continue its span", ti);
            prop_assert_eq!(t.dest_offset, s.dest_offset + (off - s.offset));
            prop_assert!(t.len >= 1 && t.len <= step, "task {} len {} > {}", ti, t.len, step);
            prop_assert!(t.offset + t.len <= s.offset + s.len);
            if o.align {
                prop_assert_eq!(t.offset % DIRECT_IO_ALIGN, 0);
                prop_assert!(t.len % DIRECT_IO_ALIGN == 0 || t.offset + t.len == file_len);
            }
            // The task's chunk range is exactly the chunks it overlaps.
            let overlapping: Vec<usize> = (0..plan.chunks.len())
                .filter(|&i| !ReadPlan::overlap(t, &plan.chunks[i]).is_empty())
                .collect();
            let listed: Vec<usize> = t.chunks.clone().collect();
            prop_assert_eq!(listed, overlapping, "task {}", ti);
            off += t.len;
            ti += 1;
        }
    }
    prop_assert_eq!(ti, plan.tasks.len(), "tasks outside every span");

    // Every useful byte is read by exactly one task.
    let mut cover = vec![0u8; file_len as usize];
    for t in &plan.tasks {
        for b in &mut cover[t.offset as usize..(t.offset + t.len) as usize] {
            *b += 1;
        }
    }
    for c in &plan.chunks {
        prop_assert!(
            cover[c.offset as usize..(c.offset + c.len) as usize]
                .iter()
                .all(|&n| n == 1)
        );
    }
    prop_assert_eq!(plan.useful_bytes(), input.iter().map(|c| c.len).sum::<u64>());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn plan_invariants((chunks, file_len, options) in layout()) {
        check_invariants(&chunks, file_len, options)?;
    }
}

#[test]
fn zero_gap_merges_only_touching_chunks() {
    let c = |offset, len| ChunkRange {
        row_group: 0,
        column: 0,
        column_path: "c".into(),
        offset,
        len,
        dest_offset: 0,
        pages: None,
    };
    let o = PlanOptions {
        max_gap: 0,
        task_size: 1 << 20,
        align: false,
    };
    let plan = ReadPlan::from_chunks(vec![c(110, 10), c(4, 100), c(104, 6)], vec![], vec![], 1000, o);
    // [4,104) and [104,110) touch; [110,120) touches too: one span; dest = file order.
    assert_eq!(plan.spans.len(), 1);
    assert_eq!(plan.dest_len, 116);
    assert_eq!(
        plan.chunks.iter().map(|c| c.dest_offset).collect::<Vec<_>>(),
        vec![0, 100, 106]
    );
    let plan = ReadPlan::from_chunks(vec![c(4, 100), c(105, 6)], vec![], vec![], 1000, o);
    assert_eq!(plan.spans.len(), 2, "a 1-byte gap is larger than max_gap 0");
    assert_eq!(plan.chunks[1].dest_offset, 100);
    check_invariants(&[c(4, 100), c(105, 6)], 1000, o).unwrap();
}

#[test]
fn aligned_plan_ends_at_end_of_file() {
    let chunk = ChunkRange {
        row_group: 0,
        column: 0,
        column_path: "c".into(),
        offset: 5000,
        len: 3500,
        dest_offset: 0,
        pages: None,
    };
    let o = PlanOptions {
        max_gap: 0,
        task_size: 4096,
        align: true,
    };
    let plan = ReadPlan::from_chunks(vec![chunk.clone()], vec![], vec![], 9000, o);
    assert_eq!(plan.spans[0].offset, 4096);
    assert_eq!(plan.spans[0].len, 9000 - 4096, "clamped at end of file");
    assert_eq!(plan.chunks[0].dest_offset, 5000 - 4096);
    assert_eq!(plan.tasks.len(), 2);
    assert_eq!(plan.tasks[1].len, 9000 - 8192);
}

// ---------------------------------------------------------------------------------------------
// Metadata validation

/// A valid file from the conformance suite, its bytes and metadata.
struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    len: u64,
    metadata: ParquetMetaData,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let files = conformance::write_test_files(dir.path()).unwrap();
    let bytes = bytes::Bytes::from(std::fs::read(&files.mixed).unwrap());
    let metadata = ParquetMetaDataReader::new().parse_and_finish(&bytes).unwrap();
    Fixture {
        path: files.mixed.clone(),
        len: bytes.len() as u64,
        metadata,
        _dir: dir,
    }
}

/// `metadata` with column `c` of row group `g` rewritten by `edit`.
fn edit_chunk(
    metadata: &ParquetMetaData,
    g: usize,
    c: usize,
    edit: impl FnOnce(
        parquet::file::metadata::ColumnChunkMetaDataBuilder,
    ) -> parquet::file::metadata::ColumnChunkMetaDataBuilder,
) -> ParquetMetaData {
    let mut builder = metadata.clone().into_builder();
    let mut groups: Vec<RowGroupMetaData> = builder.take_row_groups();
    let mut columns = groups[g].columns().to_vec();
    columns[c] = edit(columns[c].clone().into_builder()).build().unwrap();
    groups[g] = groups[g]
        .clone()
        .into_builder()
        .set_column_metadata(columns)
        .build()
        .unwrap();
    builder.set_row_groups(groups).build()
}

/// Asserts `r` is an invalid-metadata error naming `path`, column `column` and row group `g`, and
/// whose message contains `needle`.
fn assert_invalid<T: std::fmt::Debug>(r: gpu_parquet::Result<T>, path: &Path, column: &str, g: usize, needle: &str) {
    let err = r.expect_err("corrupt metadata was accepted");
    let text = err.to_string();
    match err {
        Error::InvalidMetadata { location, message } => {
            assert_eq!(location.file, path, "{text}");
            assert_eq!(location.column.as_deref(), Some(column), "{text}");
            assert_eq!(location.row_group, Some(g), "{text}");
            assert!(message.contains(needle), "expected '{needle}' in: {text}");
            assert!(
                text.contains(column) && text.contains(&format!("row group {g}")),
                "{text}"
            );
        }
        other => panic!("expected InvalidMetadata, got {other:?}"),
    }
}

#[test]
fn the_fixture_is_valid() {
    let f = fixture();
    let checked = validate_column_chunks(&f.path, f.len, &f.metadata).unwrap();
    assert_eq!(checked.len(), conformance::MIXED_ROW_GROUPS);
    assert!(checked.iter().flatten().all(|c| c.len > 0));
}

#[test]
fn negative_offset() {
    let f = fixture();
    let md = edit_chunk(&f.metadata, 1, 2, |b| {
        b.set_data_page_offset(-5).set_dictionary_page_offset(None)
    });
    assert_invalid(
        validate_column_chunks(&f.path, f.len, &md),
        &f.path,
        "value",
        1,
        "negative column chunk offset",
    );
}

#[test]
fn negative_length() {
    let f = fixture();
    let md = edit_chunk(&f.metadata, 0, 0, |b| b.set_total_compressed_size(-1));
    assert_invalid(
        validate_column_chunks(&f.path, f.len, &md),
        &f.path,
        "id",
        0,
        "negative column chunk length",
    );
}

#[test]
fn range_past_end_of_file() {
    let f = fixture();
    let md = edit_chunk(&f.metadata, 3, 1, |b| b.set_total_compressed_size(f.len as i64));
    assert_invalid(
        validate_column_chunks(&f.path, f.len, &md),
        &f.path,
        "small",
        3,
        "extends past",
    );
}

#[test]
fn range_into_the_footer() {
    let f = fixture();
    let last = f.metadata.row_group(3).column(7);
    let end_of_data = f.len - 8;
    let start = last.data_page_offset();
    let md = edit_chunk(&f.metadata, 3, 7, |b| {
        b.set_total_compressed_size(end_of_data as i64 - start + 1)
    });
    assert_invalid(
        validate_column_chunks(&f.path, f.len, &md),
        &f.path,
        "tags.list.item",
        3,
        "extends past",
    );
}

#[test]
fn huge_values_do_not_overflow() {
    let f = fixture();
    let md = edit_chunk(&f.metadata, 2, 5, |b| {
        b.set_data_page_offset(i64::MAX - 3)
            .set_dictionary_page_offset(None)
            .set_total_compressed_size(i64::MAX)
    });
    assert_invalid(
        validate_column_chunks(&f.path, f.len, &md),
        &f.path,
        "point.x",
        2,
        "extends past",
    );
}

#[test]
fn range_in_the_leading_magic() {
    let f = fixture();
    let md = edit_chunk(&f.metadata, 0, 3, |b| {
        b.set_data_page_offset(1).set_dictionary_page_offset(None)
    });
    assert_invalid(
        validate_column_chunks(&f.path, f.len, &md),
        &f.path,
        "name",
        0,
        "leading magic",
    );
}

#[test]
fn overlapping_chunks() {
    let f = fixture();
    let other = f.metadata.row_group(1).column(4);
    let (off, len) = (other.data_page_offset(), other.compressed_size());
    // Column 'flag' of row group 2 is made to start in the middle of 'flag' of row group 1.
    let md = edit_chunk(&f.metadata, 2, 4, |b| {
        b.set_data_page_offset(off + len / 2).set_dictionary_page_offset(None)
    });
    let err = validate_column_chunks(&f.path, f.len, &md).expect_err("overlap accepted");
    let text = err.to_string();
    assert!(matches!(err, Error::InvalidMetadata { .. }), "{text}");
    assert!(text.contains("overlaps") && text.contains("'flag'"), "{text}");
    assert!(text.contains("row group 1") && text.contains("row group 2"), "{text}");
}

#[test]
fn from_parts_validates_too() {
    let f = fixture();
    let md = edit_chunk(&f.metadata, 1, 0, |b| b.set_total_compressed_size(-7));
    let file = std::fs::File::open(&f.path).unwrap();
    assert_invalid(
        ParquetSource::from_parts(f.path.clone(), file, f.len, Arc::new(md)),
        &f.path,
        "id",
        1,
        "negative",
    );
    // The same metadata against a file it does not fit: too short for any chunk.
    let file = std::fs::File::open(&f.path).unwrap();
    let err = ParquetSource::from_parts(f.path.clone(), file, 100, Arc::new(f.metadata.clone())).unwrap_err();
    assert!(matches!(err, Error::InvalidMetadata { .. }), "{err}");
}

/// Every file of the corpus's `bad_data/` opens or fails with an error, never a panic.
#[test]
fn bad_data_never_panics() {
    let Some(dir) = testing_dir("bad_data") else {
        eprintln!("parquet-testing not found (set GPU_PARQUET_TESTING); skipping");
        return;
    };
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "parquet") {
            n += 1;
            if let Ok(source) = ParquetSource::open(&path) {
                // A file that opens must also plan without panicking.
                let _ = ReadPlan::build(
                    &source,
                    &Projection::All,
                    &RowGroupSelection::All,
                    PlanOptions::default(),
                );
            }
        }
    }
    assert!(n > 0, "no .parquet files in {}", dir.display());
}

// ---------------------------------------------------------------------------------------------
// Projection and row-group resolution

fn mixed() -> (tempfile::TempDir, ParquetSource) {
    let dir = tempfile::tempdir().unwrap();
    let files = conformance::write_test_files(dir.path()).unwrap();
    let source = ParquetSource::open(&files.mixed).unwrap();
    (dir, source)
}

fn names(v: &[&str]) -> Projection {
    Projection::Names(v.iter().map(|s| s.to_string()).collect())
}

#[test]
fn projection_by_name() {
    let (_d, s) = mixed();
    let leaves = |p: &Projection| resolve_projection(&s, p).unwrap();
    let paths = |p: &Projection| leaves(p).into_iter().map(|l| s.column_path(l)).collect::<Vec<_>>();
    assert_eq!(paths(&names(&["point"])), ["point.x", "point.y"]);
    assert_eq!(paths(&names(&["point.y"])), ["point.y"]);
    assert_eq!(paths(&names(&["tags"])), ["tags.list.item"]);
    assert_eq!(paths(&names(&["tags.list"])), ["tags.list.item"]);
    // Schema order, duplicates dropped.
    assert_eq!(paths(&names(&["name", "id", "name"])), ["id", "name"]);
    assert_eq!(leaves(&Projection::All).len(), 8);
    assert_eq!(leaves(&Projection::Leaves(vec![7, 0, 7])), [0, 7]);
}

#[test]
fn unknown_names_list_the_columns() {
    let (_d, s) = mixed();
    for bad in ["nope", "poi", "point.z", "point.x.deeper", ""] {
        let err = resolve_projection(&s, &names(&[bad])).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::InvalidRequest { .. }), "{text}");
        assert!(text.contains(&format!("'{bad}'")), "{text}");
        assert!(text.contains("id, small, value, name, flag, point, tags"), "{text}");
        assert!(text.contains(&s.path().display().to_string()), "{text}");
    }
    let err = resolve_projection(&s, &Projection::Leaves(vec![8])).unwrap_err();
    assert!(err.to_string().contains("leaf column 8 does not exist"), "{err}");
}

#[test]
fn row_group_selection() {
    let (_d, s) = mixed();
    let n = conformance::MIXED_ROW_GROUPS;
    let build = |g: Vec<usize>| {
        ReadPlan::build(
            &s,
            &Projection::All,
            &RowGroupSelection::Indices(g),
            PlanOptions::default(),
        )
    };
    let plan = build(vec![3, 0]).unwrap();
    assert_eq!(plan.row_groups, [3, 0]);
    let mut groups: Vec<usize> = plan.chunks.iter().map(|c| c.row_group).collect();
    groups.dedup();
    assert_eq!(groups, [0, 3], "chunks in file order");
    assert_eq!(plan.chunks.len(), 2 * 8);

    let err = build(vec![0, n]).unwrap_err();
    assert!(matches!(err, Error::InvalidRequest { .. }));
    assert!(
        err.to_string()
            .contains(&format!("row group {n} does not exist (the file has {n})")),
        "{err}"
    );
    let err = build(vec![1, 2, 1]).unwrap_err();
    assert!(err.to_string().contains("row group 1 is selected twice"), "{err}");
}

//! Host decode: the bytes a backend fetched, decoded into Arrow record batches by `parquet`'s own reader.
//!
//! The decoder never touches the file. It hands arrow-rs a [`ChunkReader`] ([`FetchedChunks`]) that
//! serves only the column-chunk ranges of the plan, slicing the fetched buffer without copying, and
//! refuses any other offset with an error; so a successful decode proves the plan fetched everything
//! the decoder needed. Metadata comes from the already opened [`ParquetSource`].
//!
//! Work is split into one job per (row group, top-level column) and run on a rayon pool; each job
//! decodes that root's selected leaves of one row group, and the roots' arrays are then zipped into
//! record batches, row groups in plan order and columns in schema order.
//!
//! Two adjustments to the metadata, both so that the decoder reads exactly what the plan fetched:
//! - a chunk whose `dictionary_page_offset` [`chunk_start`] ignores (0, or not before the first data
//!   page) gets that offset removed, since arrow-rs starts a chunk at the dictionary offset whenever one
//!   is present;
//! - a chunk that [`ParquetSource::checked_chunks`] makes longer than its footer says (an old
//!   parquet-mr left the dictionary page header out of `total_compressed_size`, PARQUET-816; see
//!   [`ParquetSource::repairs`]) gets the checked length, which the plan fetched;
//! - the page index is dropped: whole chunks are read sequentially, which needs no page locations, and
//!   a damaged offset index must not steer reads (arrow-rs's default file reader ignores it too).
//!   Only the chunks a plan reads page by page keep their OffsetIndex (checked by the plan, and here
//!   against the fetched page headers): arrow-rs then reads their pages by location, skipping the
//!   pages outside the plan's rows (a [`RowSelection`] of selectors), which were never fetched.
//! - the file's row count becomes the sum of its row groups' counts where it says otherwise. arrow-rs
//!   caps every batch at the file's row count, so a footer claiming 0 rows over row groups that hold
//!   some (repeated_no_annotation.parquet, written by parquet-rs 0.3.0: 0 in the file, 6 in its one
//!   row group) would decode to no rows at all; the row groups' counts describe what their pages hold,
//!   and batch sizes are bounded by [`MAX_BATCH_ROWS`] anyway.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use bytes::{Buf, Bytes};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection, RowSelectionPolicy,
};
use parquet::basic::Compression;
use parquet::errors::ParquetError;
use parquet::file::metadata::page_index::PageIndexProvider;
use parquet::file::metadata::{FileMetaData, ParquetMetaData, ParquetMetaDataBuilder};
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::page_index::offset_index::OffsetIndexMetaData;
use parquet::file::reader::{ChunkReader, Length};
use rayon::prelude::*;

use crate::error::{Error, Location, Result};
use crate::metadata::{ParquetSource, chunk_start};
use crate::panic_guard::contain_panics;
use crate::plan::{PageSpan, ReadPlan};

/// Most rows decoded into one batch.
///
/// arrow-rs reserves buffers for a whole batch up front, so a row count taken from (possibly
/// corrupt) metadata must not size a batch unchecked; larger row groups come out as several batches.
pub(crate) const MAX_BATCH_ROWS: usize = 1 << 22;

/// Decoded columns of a plan: record batches in the plan's row-group order.
#[derive(Debug, Clone)]
pub struct DecodedTable {
    /// The schema of the selected columns (top-level fields in file order; nested fields pruned to the
    /// selected leaves, as arrow-rs's projection does).
    pub schema: SchemaRef,
    /// Record batches: the row groups of [`ReadPlan::row_groups`] in that order, each one batch (or
    /// several when it has more than [`MAX_BATCH_ROWS`] rows, none when it has no rows).
    pub batches: Vec<RecordBatch>,
    /// For each entry of [`ReadPlan::row_groups`], the indices of its batches in [`Self::batches`].
    pub row_group_batches: Vec<Range<usize>>,
    /// The file, for errors.
    location: Location,
}

impl DecodedTable {
    /// A table of `batches` (of `schema`), `row_group_batches` giving each row group's.
    pub(crate) fn from_parts(
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
        row_group_batches: Vec<Range<usize>>,
        location: Location,
    ) -> Self {
        Self {
            schema,
            batches,
            row_group_batches,
            location,
        }
    }

    /// This table's row groups, then `other`'s (of the same schema, the first's kept).
    pub(crate) fn append(mut self, other: DecodedTable) -> Self {
        let base = self.batches.len();
        self.row_group_batches.extend(
            other
                .row_group_batches
                .into_iter()
                .map(|r| r.start + base..r.end + base),
        );
        self.batches.extend(other.batches.into_iter().map(|b| {
            // The same columns; the schema's metadata aside, one schema for every batch.
            RecordBatch::try_new(self.schema.clone(), b.columns().to_vec()).unwrap_or(b)
        }));
        self
    }

    /// The file, for errors.
    pub(crate) fn location(&self) -> Location {
        self.location.clone()
    }

    /// Total rows over all batches.
    pub fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// All batches as one record batch (a copy; an empty batch when there are none).
    pub fn concat(&self) -> Result<RecordBatch> {
        // Fails only when a column outgrows its offsets (more than 2 GiB of strings in one array).
        arrow::compute::concat_batches(&self.schema, &self.batches)
            .map_err(|e| Error::parquet(self.location.clone(), e))
    }
}

/// One fetched column chunk: file range and where its bytes are in the fetched buffer.
#[derive(Debug, Clone, Copy)]
struct Served {
    offset: u64,
    len: u64,
    dest_offset: u64,
}

/// A [`ChunkReader`] over fetched column chunks only: every request must lie inside one of them.
///
/// Clones share the buffer and the chunk table.
#[derive(Debug, Clone)]
pub struct FetchedChunks {
    /// Non-empty chunks, sorted by file offset, disjoint.
    chunks: Arc<[Served]>,
    data: Bytes,
    file_len: u64,
}

impl FetchedChunks {
    /// Serves the chunks of `plan` from `fetched` (laid out as the plan says) for a file of `file_len`
    /// bytes. Errors if `fetched` is too short for a chunk or the plan's chunks overlap.
    pub fn new(plan: &ReadPlan, fetched: &Bytes, file_len: u64, location: &Location) -> Result<Self> {
        let mut chunks: Vec<Served> = Vec::with_capacity(plan.chunks.len());
        for c in &plan.chunks {
            let end = c.dest_offset.checked_add(c.len);
            if end.is_none_or(|e| e > fetched.len() as u64) {
                return Err(Error::InvalidRequest {
                    location: Location::chunk(&location.file, c.column_path.clone(), c.row_group),
                    message: format!(
                        "the fetched buffer ({} bytes) does not hold this chunk's bytes at [{}, +{})",
                        fetched.len(),
                        c.dest_offset,
                        c.len
                    ),
                });
            }
            if c.len > 0 {
                chunks.push(Served {
                    offset: c.offset,
                    len: c.len,
                    dest_offset: c.dest_offset,
                });
            }
        }
        chunks.sort_by_key(|s| s.offset);
        if let Some(w) = chunks.windows(2).find(|w| w[0].offset + w[0].len > w[1].offset) {
            return Err(Error::InvalidRequest {
                location: location.clone(),
                message: format!(
                    "plan chunks overlap: [{}, +{}) and [{}, +{})",
                    w[0].offset, w[0].len, w[1].offset, w[1].len
                ),
            });
        }
        Ok(Self {
            chunks: chunks.into(),
            data: fetched.clone(),
            file_len,
        })
    }

    /// The fetched bytes from file offset `start` to the end of the chunk holding it.
    fn tail_from(&self, start: u64) -> Option<Bytes> {
        let i = self.chunks.partition_point(|s| s.offset <= start).checked_sub(1)?;
        let s = self.chunks[i];
        if start >= s.offset + s.len {
            return None;
        }
        let from = (s.dest_offset + (start - s.offset)) as usize;
        let to = (s.dest_offset + s.len) as usize;
        Some(self.data.slice(from..to))
    }

    fn not_fetched(start: u64, len: Option<usize>) -> ParquetError {
        let what = match len {
            Some(n) => format!("bytes [{start}, +{n})"),
            None => format!("a read at offset {start}"),
        };
        ParquetError::General(format!(
            "the decoder asked for {what}, which lie outside the fetched column chunks"
        ))
    }
}

impl Length for FetchedChunks {
    fn len(&self) -> u64 {
        self.file_len
    }
}

impl ChunkReader for FetchedChunks {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        // The reader ends where the chunk ends: reading past it fails instead of reaching other bytes.
        self.tail_from(start)
            .map(Buf::reader)
            .ok_or_else(|| Self::not_fetched(start, None))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match self.tail_from(start) {
            Some(tail) if tail.len() >= length => Ok(tail.slice(..length)),
            _ => Err(Self::not_fetched(start, Some(length))),
        }
    }
}

/// The metadata the decoder uses: `source`'s, without the page index, with every column chunk where
/// [`ParquetSource::checked_chunks`] says (start as [`chunk_start`] gives it, checked length) and the
/// row groups' row count (see the module docs). Shares `source`'s metadata when it needs no change.
pub(crate) fn decode_metadata(source: &ParquetSource) -> Result<Arc<ParquetMetaData>> {
    decode_metadata_paged(source, &[])
}

/// [`decode_metadata`], keeping the OffsetIndex of the chunks `(row group, leaf)` in `paged` (and
/// of no other), so that arrow-rs reads those page by page.
fn decode_metadata_paged(source: &ParquetSource, paged: &[(usize, usize)]) -> Result<Arc<ParquetMetaData>> {
    let meta = decode_metadata_whole(source)?;
    let Some(index) = source.metadata().page_index().filter(|_| !paged.is_empty()) else {
        return Ok(meta);
    };
    let only = OffsetsOf {
        index: index.clone(),
        chunks: paged.iter().copied().collect(),
    };
    Ok(Arc::new(
        ParquetMetaData::clone(&meta)
            .into_builder()
            .set_page_index(Some(Arc::new(only)))
            .build(),
    ))
}

/// A page index serving the OffsetIndex of some chunks only, and no ColumnIndex.
#[derive(Debug)]
struct OffsetsOf {
    index: Arc<dyn PageIndexProvider>,
    chunks: std::collections::BTreeSet<(usize, usize)>,
}

impl PageIndexProvider for OffsetsOf {
    fn has_offset_indexes(&self) -> bool {
        !self.chunks.is_empty()
    }

    fn has_column_indexes(&self) -> bool {
        false
    }

    fn column_index(&self, _row_group: usize, _column: usize) -> Option<&ColumnIndexMetaData> {
        None
    }

    fn offset_index(&self, row_group: usize, column: usize) -> Option<&OffsetIndexMetaData> {
        if self.chunks.contains(&(row_group, column)) {
            self.index.offset_index(row_group, column)
        } else {
            None
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// [`decode_metadata`] (no page index at all).
fn decode_metadata_whole(source: &ParquetSource) -> Result<Arc<ParquetMetaData>> {
    let meta = source.metadata();
    let checked = source.checked_chunks();
    // The checked length where it is not the footer's (a chunk an old parquet-mr wrote too short).
    let longer = |g: usize, c: usize, chunk: &parquet::file::metadata::ColumnChunkMetaData| {
        checked
            .get(g)
            .and_then(|row| row.get(c))
            .map(|k| k.len as i64)
            .filter(|&len| len != chunk.compressed_size())
    };
    let bogus_dictionary = |c: &parquet::file::metadata::ColumnChunkMetaData| {
        c.dictionary_page_offset().is_some_and(|d| d != chunk_start(c))
    };
    let needs_fix = |g: usize, c: usize, chunk: &parquet::file::metadata::ColumnChunkMetaData| {
        bogus_dictionary(chunk) || longer(g, c, chunk).is_some()
    };
    let any_fix = meta
        .row_groups()
        .iter()
        .enumerate()
        .any(|(g, rg)| rg.columns().iter().enumerate().any(|(c, chunk)| needs_fix(g, c, chunk)));
    let rows = row_group_rows(meta);
    let fix_rows = meta.file_metadata().num_rows() != rows;
    if !any_fix && !fix_rows && meta.page_index().is_none() {
        return Ok(meta.clone());
    }
    let location = source.location();
    let mut builder = if fix_rows {
        let fm = meta.file_metadata();
        let file_meta = FileMetaData::new(
            fm.version(),
            rows,
            fm.created_by().map(str::to_string),
            fm.key_value_metadata().cloned(),
            fm.schema_descr_ptr(),
            fm.column_orders().cloned(),
        );
        ParquetMetaDataBuilder::new(file_meta).set_row_groups(meta.row_groups().to_vec())
    } else {
        ParquetMetaData::clone(meta).into_builder().set_page_index(None)
    };
    if any_fix {
        let mut fixed = Vec::with_capacity(meta.num_row_groups());
        for (g, rg) in builder.take_row_groups().into_iter().enumerate() {
            let columns = rg
                .columns()
                .iter()
                .enumerate()
                .map(|(c, chunk)| {
                    if !needs_fix(g, c, chunk) {
                        return Ok(chunk.clone());
                    }
                    let mut b = chunk.clone().into_builder();
                    if bogus_dictionary(chunk) {
                        b = b.set_dictionary_page_offset(None);
                    }
                    if let Some(len) = longer(g, c, chunk) {
                        b = b.set_total_compressed_size(len);
                    }
                    b.build()
                })
                .collect::<parquet::errors::Result<Vec<_>>>()
                .and_then(|cols| rg.into_builder().set_column_metadata(cols).build())
                .map_err(|e| Error::parquet(in_row_group(&location, g), e))?;
            fixed.push(columns);
        }
        builder = builder.set_row_groups(fixed);
    }
    Ok(Arc::new(builder.build()))
}

/// The rows of all row groups together (negative counts, refused when decoding, count as 0).
fn row_group_rows(meta: &ParquetMetaData) -> i64 {
    meta.row_groups()
        .iter()
        .fold(0i64, |sum, rg| sum.saturating_add(rg.num_rows().max(0)))
}

/// One decode job: the selected leaves of one top-level column in one row group.
struct Job {
    /// Index into `plan.row_groups`.
    slot: usize,
    row_group: usize,
    leaves: Vec<usize>,
    /// For errors: the leaf's dotted path when there is one leaf, else the root's name.
    column: String,
}

/// Decodes the columns of `plan` from `fetched`, the buffer a backend filled for it (chunk `c`'s bytes
/// at `fetched[c.dest_offset..c.dest_offset + c.len]`), using `threads` threads (0: one per core).
///
/// Reads nothing from the file: a decoder request outside the fetched chunks is an error. Malformed
/// data gives an error naming the file, column and row group, never a panic.
pub fn decode_fetched(
    source: &ParquetSource,
    plan: &ReadPlan,
    fetched: &Bytes,
    threads: usize,
) -> Result<DecodedTable> {
    let location = source.location();
    let meta = source.metadata();
    let schema_descr = meta.file_metadata().schema_descr_ptr();
    let n_leaves = schema_descr.num_columns();
    if let Some(&c) = plan.columns.iter().find(|&&c| c >= n_leaves) {
        return Err(Error::InvalidRequest {
            location,
            message: format!("the plan selects leaf column {c}, but the file has {n_leaves}"),
        });
    }
    if let Some(&g) = plan.row_groups.iter().find(|&&g| g >= meta.num_row_groups()) {
        return Err(Error::InvalidRequest {
            location,
            message: format!(
                "the plan selects row group {g}, but the file has {}",
                meta.num_row_groups()
            ),
        });
    }
    // Every selected chunk must have been fetched (checked here so the error can say which one).
    let fetched_chunks: std::collections::HashSet<(usize, usize)> =
        plan.chunks.iter().map(|k| (k.row_group, k.column)).collect();
    for &g in &plan.row_groups {
        for &c in &plan.columns {
            if !fetched_chunks.contains(&(g, c)) {
                return Err(Error::InvalidRequest {
                    location: Location::chunk(&location.file, source.column_path(c), g),
                    message: "the plan selects this column chunk but does not fetch it".into(),
                });
            }
        }
    }

    let reader = FetchedChunks::new(plan, fetched, source.len(), &location)?;
    // The page headers once through a linear walk, before arrow-rs's page reader (see
    // `check_page_headers`); `new` checked every chunk lies in `fetched`.
    let mut pages = Vec::with_capacity(plan.chunks.len());
    for c in &plan.chunks {
        let bytes = &fetched[c.dest_offset as usize..(c.dest_offset + c.len) as usize];
        match crate::metadata::check_page_headers(bytes) {
            Ok(p) => pages.push(p),
            Err((at, why)) => {
                return Err(Error::CorruptPage {
                    location: Location::chunk(&location.file, c.column_path.clone(), c.row_group),
                    page: None,
                    message: format!("the page header at byte {at} of the chunk is not valid Thrift: {why}"),
                });
            }
        }
    }
    for (c, pages) in plan.chunks.iter().zip(&pages) {
        let heads: Vec<PageSpan> = pages
            .iter()
            .map(|h| PageSpan {
                start: h.header_start as u64,
                end: (h.body_start + h.body_len) as u64,
                num_values: h.num_values,
            })
            .collect();
        if let Err(why) = c.check_pages(meta, &heads) {
            return Err(Error::CorruptPage {
                location: Location::chunk(&location.file, c.column_path.clone(), c.row_group),
                page: None,
                message: format!("the OffsetIndex does not match the chunk's pages: {why}"),
            });
        }
    }
    for (c, pages) in plan.chunks.iter().zip(&pages) {
        let bytes = &fetched[c.dest_offset as usize..(c.dest_offset + c.len) as usize];
        let column = meta.row_group(c.row_group).column(c.column);
        let leaf = schema_descr.column(c.column);
        let levels = (leaf.max_rep_level() > 0, leaf.max_def_level() > 0);
        let limit = column.num_values().max(0);
        if let Err((page, why)) = check_delta_lengths(bytes, pages, column.compression(), levels, limit) {
            return Err(Error::CorruptPage {
                location: Location::chunk(&location.file, c.column_path.clone(), c.row_group),
                page: Some(page),
                message: why,
            });
        }
    }
    let mut paged: Vec<(usize, usize)> = plan
        .chunks
        .iter()
        .filter(|c| c.pages.is_some())
        .map(|c| (c.row_group, c.column))
        .collect();
    paged.dedup();
    let decode_meta = decode_metadata_paged(source, &paged)?;
    let arrow_meta = contain_panics(&location, || {
        ArrowReaderMetadata::try_new(decode_meta.clone(), ArrowReaderOptions::new())
            .map_err(|e| Error::parquet(location.clone(), e))
    })?;

    // The output schema: what arrow-rs's own reader yields for this projection.
    let schema = contain_panics(&location, || {
        let r = ParquetRecordBatchReaderBuilder::new_with_metadata(reader.clone(), arrow_meta.clone())
            .with_projection(ProjectionMask::leaves(&schema_descr, plan.columns.iter().copied()))
            .with_row_groups(Vec::new())
            .build()
            .map_err(|e| Error::parquet(location.clone(), e))?;
        Ok(arrow::record_batch::RecordBatchReader::schema(&r))
    })?;

    // Group the selected leaves by root, roots in schema order.
    let mut by_root: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for &c in &plan.columns {
        by_root.entry(schema_descr.get_column_root_idx(c)).or_default().push(c);
    }
    let roots: Vec<(usize, Vec<usize>)> = by_root.into_iter().collect();
    if roots.len() != schema.fields().len() {
        return Err(Error::parquet(
            location,
            format!(
                "{} top-level columns are selected but arrow-rs's projected schema has {} fields",
                roots.len(),
                schema.fields().len()
            ),
        ));
    }

    let mut row_counts = Vec::with_capacity(plan.row_groups.len());
    for &g in &plan.row_groups {
        let n = meta.row_group(g).num_rows();
        let n = usize::try_from(n)
            .map_err(|_| Error::invalid_metadata(in_row_group(&location, g), format!("negative row count {n}")))?;
        // A row group read page by page yields its plan's rows only.
        let n = match plan.rows.get(&g) {
            Some(rows) => rows.iter().map(|r| (r.end - r.start) as usize).sum(),
            None => n,
        };
        row_counts.push(n);
    }

    let root_names: Vec<String> = roots
        .iter()
        .map(|(root, leaves)| match leaves.as_slice() {
            [one] => source.column_path(*one),
            _ => schema_descr.root_schema().get_fields()[*root].name().to_string(),
        })
        .collect();
    let mut jobs: Vec<Job> = Vec::with_capacity(plan.row_groups.len() * roots.len());
    for (slot, &g) in plan.row_groups.iter().enumerate() {
        for ((_, leaves), name) in roots.iter().zip(&root_names) {
            jobs.push(Job {
                slot,
                row_group: g,
                leaves: leaves.clone(),
                column: name.clone(),
            });
        }
    }

    let run = |job: &Job| -> Result<Vec<ArrayRef>> {
        let loc = Location::chunk(&location.file, job.column.clone(), job.row_group);
        contain_panics(&loc, || {
            let rows = row_counts[job.slot];
            let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(reader.clone(), arrow_meta.clone())
                .with_projection(ProjectionMask::leaves(&schema_descr, job.leaves.iter().copied()))
                .with_row_groups(vec![job.row_group])
                .with_batch_size(rows.clamp(1, MAX_BATCH_ROWS));
            if let Some(kept) = plan.rows.get(&job.row_group) {
                // Selectors, not a mask: a mask decodes every page and filters after, and the pages
                // outside `kept` were not fetched.
                let total = meta.row_group(job.row_group).num_rows().max(0) as usize;
                let selection =
                    RowSelection::from_consecutive_ranges(kept.iter().map(|r| r.start as usize..r.end as usize), total);
                builder = builder
                    .with_row_selection(selection)
                    .with_row_selection_policy(RowSelectionPolicy::Selectors);
            }
            let batches = builder
                .build()
                .and_then(|r| r.map(|b| b.map_err(ParquetError::from)).collect::<Result<Vec<_>, _>>())
                .map_err(|e| Error::parquet(loc.clone(), e))?;
            let mut arrays = Vec::with_capacity(batches.len());
            for b in batches {
                if b.num_columns() != 1 {
                    return Err(Error::parquet(
                        loc.clone(),
                        format!("decoding one top-level column gave {} columns", b.num_columns()),
                    ));
                }
                arrays.push(b.column(0).clone());
            }
            Ok(arrays)
        })
    };

    let pool = crate::io::host::named_pool(threads, "gpu-parquet-decode", "host decode")?;
    let results: Vec<Result<Vec<ArrayRef>>> = pool.install(|| jobs.par_iter().map(run).collect());

    // Zip each row group's roots into batches; the first error in plan order wins.
    let mut results = results.into_iter();
    let mut batches = Vec::new();
    let mut row_group_batches = Vec::with_capacity(plan.row_groups.len());
    for (slot, &g) in plan.row_groups.iter().enumerate() {
        let first = batches.len();
        let rows = row_counts[slot];
        if roots.is_empty() {
            // No columns: batches that carry only a row count, as arrow-rs gives for an empty projection
            // (counted from the row group, as the decoded columns are; see `decode_metadata`).
            let mut left = rows;
            while left > 0 {
                let n = left.min(MAX_BATCH_ROWS);
                let options = RecordBatchOptions::new().with_row_count(Some(n));
                let b = RecordBatch::try_new_with_options(schema.clone(), Vec::new(), &options)
                    .map_err(|e| Error::parquet(in_row_group(&location, g), e))?;
                batches.push(b);
                left -= n;
            }
        } else {
            let per_root: Vec<Vec<ArrayRef>> = results.by_ref().take(roots.len()).collect::<Result<_>>()?;
            let n_batches = per_root[0].len();
            for (r, arrays) in per_root.iter().enumerate() {
                let same_split =
                    arrays.len() == n_batches && arrays.iter().zip(&per_root[0]).all(|(a, b)| a.len() == b.len());
                if !same_split {
                    return Err(Error::parquet(
                        in_row_group(&location, g),
                        format!(
                            "column '{}' decoded into batches of other sizes than column '{}'",
                            schema.field(r).name(),
                            schema.field(0).name()
                        ),
                    ));
                }
            }
            for i in 0..n_batches {
                let columns: Vec<ArrayRef> = per_root.iter().map(|a| a[i].clone()).collect();
                let b = RecordBatch::try_new(schema.clone(), columns)
                    .map_err(|e| Error::parquet(in_row_group(&location, g), e))?;
                batches.push(b);
            }
        }
        row_group_batches.push(first..batches.len());
    }
    Ok(DecodedTable {
        schema,
        batches,
        row_group_batches,
        location,
    })
}

/// `location` narrowed to row group `g`.
fn in_row_group(location: &Location, g: usize) -> Location {
    Location {
        row_group: Some(g),
        ..location.clone()
    }
}

/// DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY pages checked before arrow-rs decodes them: parquet
/// 60.1.0 allocates a vector of as many lengths as the page's DELTA_BINARY_PACKED header claims (up to
/// 2^63) before reading any, so a 171-byte file claiming 2^48 lengths aborted the process ("memory
/// allocation of 281474976710652 bytes failed"; found by the `delta` fuzz target). Each claimed count
/// must be at most the page's `num_values` and the chunk's (`limit`). `levels`: whether the column has
/// repetition and definition levels (a v1 page's values follow them). `Err((page, why))`, pages counted
/// from 0 among the chunk's data pages; a page whose body cannot be decompressed is left to arrow-rs,
/// which reports it before it reads any lengths.
fn check_delta_lengths(
    chunk: &[u8],
    pages: &[crate::metadata::DataPageHead],
    codec: Compression,
    levels: (bool, bool),
    limit: i64,
) -> std::result::Result<(), (usize, String)> {
    const DELTA_LENGTH_BYTE_ARRAY: i64 = 6;
    const DELTA_BYTE_ARRAY: i64 = 7;
    for (k, page) in pages.iter().enumerate() {
        if page.encoding != DELTA_LENGTH_BYTE_ARRAY && page.encoding != DELTA_BYTE_ARRAY {
            continue;
        }
        let Some(body) = page
            .body_start
            .checked_add(page.body_len)
            .and_then(|end| chunk.get(page.body_start..end))
        else {
            continue;
        };
        // The page's bytes as decompressed, and where its values start in them.
        let (bytes, start) = match page.v2 {
            Some((def, rep, compressed)) => {
                let Some(levels_len) = def.checked_add(rep).filter(|&n| n <= body.len()) else {
                    continue;
                };
                if !compressed {
                    (Cow::Borrowed(body), levels_len)
                } else {
                    let unc = page.uncompressed_len.saturating_sub(levels_len);
                    let Some(values) = inflate(codec, &body[levels_len..], unc) else {
                        continue;
                    };
                    (values, 0)
                }
            }
            None if !page.v1_levels_rle => continue,
            None => {
                let Some(bytes) = inflate(codec, body, page.uncompressed_len) else {
                    continue;
                };
                let Some(start) = v1_values_start(&bytes, levels) else {
                    continue;
                };
                (bytes, start)
            }
        };
        let most = page.num_values.min(limit).max(0) as u64;
        crate::decode::host_kernels::delta::delta_lengths_claimed_within(
            &bytes[start..],
            most,
            page.encoding == DELTA_BYTE_ARRAY,
        )
        .map_err(|why| {
            (
                k,
                format!("{why}: its num_values is {}, its chunk's {limit}", page.num_values),
            )
        })?;
    }
    Ok(())
}

/// A page body as its codec decompresses it (borrowed when uncompressed); `None` where it cannot be.
fn inflate(codec: Compression, body: &[u8], uncompressed_len: usize) -> Option<Cow<'_, [u8]>> {
    if codec == Compression::UNCOMPRESSED {
        return Some(Cow::Borrowed(body));
    }
    crate::decode::decompress::decompress_host(codec, body, uncompressed_len)
        .ok()
        .map(Cow::Owned)
}

/// Where a v1 page's values start: past an RLE level section (a 4-byte length, then that many bytes)
/// for each of repetition and definition levels the column has; `None` past the end.
fn v1_values_start(body: &[u8], (repeated, defined): (bool, bool)) -> Option<usize> {
    let mut at = 0usize;
    for present in [repeated, defined] {
        if present {
            let n = body.get(at..at.checked_add(4)?)?;
            at = at.checked_add(4 + u32::from_le_bytes([n[0], n[1], n[2], n[3]]) as usize)?;
        }
    }
    (at <= body.len()).then_some(at)
}

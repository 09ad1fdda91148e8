//! The read plan: which bytes of a Parquet file to read, and how to split them into I/O tasks.
//!
//! Planning is pure: metadata in, byte ranges out, no I/O. [`ReadPlan::build`] takes a validated
//! [`ParquetSource`] (its metadata was checked against the file size), a [`Projection`] and a
//! [`RowGroupSelection`], and produces
//! - the column chunks needed, each with its file byte range and its place in the destination buffer;
//! - coalesced spans (adjacent chunks, or chunks at most `max_gap` apart, read as one);
//! - tasks of at most `task_size` bytes (optionally 4 KiB-aligned, for `O_DIRECT`), each knowing which
//!   column chunks it serves.
//!
//! Every backend writes the bytes of task `t` (file range `[t.offset, t.offset + t.len)`) into the
//! destination buffer at `[t.dest_offset, t.dest_offset + t.len)`; a chunk's bytes then lie at
//! `[chunk.dest_offset, chunk.dest_offset + chunk.len)`.
//!
//! Page-level I/O ([`ReadPlan::build_paged`], for a filtered read): a row group given with the rows
//! to keep has each of its column chunks read as *pieces*, the dictionary page and the runs of
//! adjacent data pages holding those rows (from the OffsetIndex). Each piece is a [`ChunkRange`] of
//! its own, carrying a [`PageRun`] that says which pages it holds, so spans, tasks, alignment and the
//! per-column counters work on pieces as they do on whole chunks. A chunk whose OffsetIndex is
//! missing or does not fit the chunk is read whole ([`ReadPlan::whole_chunks`] says why).

use std::collections::BTreeMap;
use std::ops::Range;

use parquet::file::metadata::ParquetMetaData;
use serde::Serialize;

use crate::error::{Error, Location, Result};
use crate::metadata::ParquetSource;

/// The default largest read task, bytes: one value for plans, policies, the CLI and benchmarks.
pub(crate) const DEFAULT_TASK_SIZE: u64 = 8 << 20;

/// Direct I/O alignment (bytes).
pub const DIRECT_IO_ALIGN: u64 = 4096;

/// Which columns to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Projection {
    /// Every column.
    #[default]
    All,
    /// Columns by name: a top-level name selects all its leaves; a dotted path (`a.b.c`) selects
    /// one leaf, or every leaf below an inner node.
    Names(Vec<String>),
    /// Leaf column indices.
    Leaves(Vec<usize>),
}

/// Which row groups to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RowGroupSelection {
    /// Every row group.
    #[default]
    All,
    /// These row groups, in this order.
    Indices(Vec<usize>),
}

/// How to cut the needed ranges into I/O tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanOptions {
    /// Chunks separated by at most this many bytes are read as one span (the gap is read and dropped).
    /// Default 0: only touching chunks merge, so a projection reads exactly its column chunks.
    pub max_gap: u64,
    /// Largest task, in bytes (spans are split into tasks no larger than this).
    pub task_size: u64,
    /// Align task starts and lengths to [`DIRECT_IO_ALIGN`] for direct I/O (a span's last task may end
    /// at end of file instead).
    pub align: bool,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            max_gap: 0,
            task_size: DEFAULT_TASK_SIZE,
            align: false,
        }
    }
}

/// One needed column chunk, or one piece of a chunk read page by page ([`ChunkRange::pages`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChunkRange {
    /// Row group index.
    pub row_group: usize,
    /// Leaf column index.
    pub column: usize,
    /// Dotted column path.
    pub column_path: String,
    /// File offset of the chunk's first byte.
    pub offset: u64,
    /// Chunk length in bytes.
    pub len: u64,
    /// Where the chunk's bytes land in the destination buffer.
    pub dest_offset: u64,
    /// For a chunk read page by page: the part of it this range holds (`offset`, `len` are then the
    /// piece's). `None`: the whole chunk.
    pub pages: Option<PageRun>,
}

/// The part of a column chunk one piece of a page-level read holds: optionally the dictionary page,
/// then data pages adjacent in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageRun {
    /// The whole chunk's file byte range.
    pub chunk: Range<u64>,
    /// Whether the piece starts with the chunk's dictionary page (the bytes before its first data page).
    pub dictionary: bool,
    /// Its data pages, as indices into the chunk's OffsetIndex (empty for the dictionary alone).
    pub pages: Range<usize>,
    /// The rows of those pages in the row group (0 = its first), from the OffsetIndex.
    pub rows: Range<u64>,
    /// Data pages in the whole chunk, per its OffsetIndex.
    pub chunk_pages: usize,
}

/// A column chunk of a page-level read that is read whole, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WholeChunk {
    /// Row group index.
    pub row_group: usize,
    /// Dotted column path.
    pub column_path: String,
    /// Why its pages are not read alone.
    pub reason: String,
}

impl ChunkRange {
    /// The chunk's file byte range.
    pub fn file_range(&self) -> Range<u64> {
        self.offset..self.offset + self.len
    }

    /// A piece of a chunk read page by page against the OffsetIndex that planned it, once its bytes
    /// are here: `heads` are the data pages its headers hold, in order. Each page the index places in
    /// the piece must be there (as many, each where the index says and of its size) and, the column
    /// being flat (the plan reads repeated columns whole), hold as many values as the index gives it
    /// rows: a decoder trusting the index to skip pages would otherwise give other rows than the file
    /// holds. `Ok` for a whole chunk; `Err(why)` for the caller to report as a corrupt page.
    pub fn check_pages(&self, meta: &ParquetMetaData, heads: &[PageSpan]) -> std::result::Result<(), String> {
        let Some(run) = &self.pages else {
            return Ok(());
        };
        let locations = meta
            .page_index()
            .and_then(|p| p.offset_index(self.row_group, self.column))
            .map(|o| o.page_locations().as_slice())
            .ok_or("the chunk has no OffsetIndex")?;
        if heads.len() != run.pages.len() {
            return Err(format!(
                "it places {} data pages at [{}, +{}), whose headers hold {}",
                run.pages.len(),
                self.offset,
                self.len,
                heads.len()
            ));
        }
        let num_rows = meta.row_groups().get(self.row_group).map_or(0, |g| g.num_rows().max(0));
        for (p, head) in run.pages.clone().zip(heads) {
            let l = locations.get(p).ok_or_else(|| format!("it has no page {p}"))?;
            let at = u64::try_from(l.offset)
                .ok()
                .and_then(|o| o.checked_sub(self.offset))
                .ok_or_else(|| format!("it places data page {p} before the bytes read"))?;
            let end = at.saturating_add(l.compressed_page_size.max(0) as u64);
            if head.start != at || head.end != end {
                return Err(format!(
                    "it places data page {p} at [{at}, {end}) of the bytes read, its header at [{}, {})",
                    head.start, head.end
                ));
            }
            let rows = locations
                .get(p + 1)
                .map_or(num_rows, |n| n.first_row_index)
                .saturating_sub(l.first_row_index);
            if head.num_values != rows {
                return Err(format!(
                    "it gives data page {p} {rows} rows, its header {} values",
                    head.num_values
                ));
            }
        }
        Ok(())
    }
}

/// A data page of a fetched piece as its header gives it, for [`ChunkRange::check_pages`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSpan {
    /// Where its header starts, from the piece's first byte.
    pub start: u64,
    /// Where its body ends, from the piece's first byte.
    pub end: u64,
    /// The header's `num_values`.
    pub num_values: i64,
}

/// A coalesced run of file bytes, read as one (then split into tasks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Span {
    /// File offset.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Offset in the destination buffer.
    pub dest_offset: u64,
    /// Indices into [`ReadPlan::chunks`] of the chunks within this span.
    pub chunks: Range<usize>,
}

/// One I/O operation: read file `[offset, offset + len)` into destination `[dest_offset, dest_offset + len)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadTask {
    /// File offset.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Offset in the destination buffer.
    pub dest_offset: u64,
    /// Indices into [`ReadPlan::chunks`] of the chunks this task carries bytes of.
    pub chunks: Range<usize>,
}

impl ReadTask {
    /// The task's file byte range.
    pub fn file_range(&self) -> Range<u64> {
        self.offset..self.offset + self.len
    }
}

/// Everything a backend needs to fetch the bytes of a projection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadPlan {
    /// Needed column chunks (or pieces of them, for chunks read page by page), in file order.
    pub chunks: Vec<ChunkRange>,
    /// Coalesced spans, in file order.
    pub spans: Vec<Span>,
    /// I/O tasks, in file order.
    pub tasks: Vec<ReadTask>,
    /// Size of the destination buffer (sum of span lengths).
    pub dest_len: u64,
    /// Selected leaf columns, in schema order.
    pub columns: Vec<usize>,
    /// Selected row groups, in the order asked for.
    pub row_groups: Vec<usize>,
    /// Row groups read page by page, each with the rows a decoder yields of it (0 = its first;
    /// sorted, disjoint, non-empty): those of its pages that were fetched, no others. A row group
    /// not here is read and decoded whole.
    pub rows: BTreeMap<usize, Vec<Range<u64>>>,
    /// Chunks of the row groups in [`Self::rows`] read whole, and why.
    pub whole_chunks: Vec<WholeChunk>,
    /// Options the plan was built with.
    #[serde(skip)]
    pub options: PlanOptions,
}

impl ReadPlan {
    /// Plans the reads for `projection` and `row_groups` of `source`.
    pub fn build(
        source: &ParquetSource,
        projection: &Projection,
        row_groups: &RowGroupSelection,
        options: PlanOptions,
    ) -> Result<Self> {
        Self::build_paged(source, projection, row_groups, options, &BTreeMap::new())
    }

    /// Plans as [`Self::build`] does, except that the row groups in `rows` (with the rows to keep of
    /// each, 0 = the row group's first; sorted, disjoint) are read page by page: of each chunk, its
    /// dictionary page and the data pages holding those rows, as the OffsetIndex places them. A
    /// chunk without a usable OffsetIndex is read whole, named in [`Self::whole_chunks`]; rows
    /// covering a whole row group read it whole. Rows out of order or past the row group are an error.
    pub fn build_paged(
        source: &ParquetSource,
        projection: &Projection,
        row_groups: &RowGroupSelection,
        options: PlanOptions,
        rows: &BTreeMap<usize, Vec<Range<u64>>>,
    ) -> Result<Self> {
        let columns = resolve_projection(source, projection)?;
        let row_groups = resolve_row_groups(source, row_groups)?;
        let meta = source.metadata();
        let checked = source.checked_chunks();
        let mut chunks = Vec::with_capacity(columns.len() * row_groups.len());
        let mut paged = BTreeMap::new();
        let mut whole_chunks = Vec::new();
        for &g in &row_groups {
            let num_rows = meta.row_group(g).num_rows().max(0) as u64;
            let keep = match rows.get(&g) {
                Some(r) => {
                    check_rows(r, num_rows).map_err(|message| Error::InvalidRequest {
                        location: Location {
                            row_group: Some(g),
                            ..source.location()
                        },
                        message,
                    })?;
                    (r.as_slice() != [0..num_rows]).then_some(r)
                }
                None => None,
            };
            if let Some(r) = keep {
                paged.insert(g, r.clone());
            }
            for &c in &columns {
                let cc = checked[g][c];
                let whole = ChunkRange {
                    row_group: g,
                    column: c,
                    column_path: source.column_path(c),
                    offset: cc.offset,
                    len: cc.len,
                    dest_offset: 0,
                    pages: None,
                };
                let Some(r) = keep else {
                    chunks.push(whole);
                    continue;
                };
                match page_pieces(meta, g, c, cc.offset..cc.offset + cc.len, num_rows, r) {
                    Ok(pieces) => chunks.extend(pieces.into_iter().map(|(range, run)| ChunkRange {
                        offset: range.start,
                        len: range.end - range.start,
                        pages: Some(run),
                        ..whole.clone()
                    })),
                    Err(reason) => {
                        whole_chunks.push(WholeChunk {
                            row_group: g,
                            column_path: whole.column_path.clone(),
                            reason,
                        });
                        chunks.push(whole);
                    }
                }
            }
        }
        let mut plan = Self::from_chunks(chunks, columns, row_groups, source.len(), options);
        plan.rows = paged;
        plan.whole_chunks = whole_chunks;
        Ok(plan)
    }

    /// Builds the spans and tasks for `chunks` (any order; validated, non-overlapping ranges).
    pub fn from_chunks(
        mut chunks: Vec<ChunkRange>,
        columns: Vec<usize>,
        row_groups: Vec<usize>,
        file_len: u64,
        options: PlanOptions,
    ) -> Self {
        chunks.sort_by_key(|c| (c.offset, c.len));
        let spans = coalesce(&mut chunks, options, file_len);
        let tasks = split_into_tasks(&spans, &chunks, options);
        let dest_len = spans.iter().map(|s| s.len).sum();
        Self {
            chunks,
            spans,
            tasks,
            dest_len,
            columns,
            row_groups,
            rows: BTreeMap::new(),
            whole_chunks: Vec::new(),
            options,
        }
    }

    /// Rows of the selected row groups (as the footer gives them; negative counts as 0).
    pub fn num_rows(&self, meta: &ParquetMetaData) -> u64 {
        self.row_groups
            .iter()
            .filter_map(|&g| meta.row_groups().get(g))
            .map(|g| g.num_rows().max(0) as u64)
            .sum()
    }

    /// Values the plan decodes: [`Self::num_rows`] times the selected leaf columns.
    pub(crate) fn num_values(&self, meta: &ParquetMetaData) -> u64 {
        self.num_rows(meta).saturating_mul(self.columns.len() as u64)
    }

    /// Total bytes of the needed chunks (excluding gaps and alignment padding).
    pub fn useful_bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.len).sum()
    }

    /// The part of `task` that belongs to `chunk`, as a file byte range (empty if they do not overlap).
    pub fn overlap(task: &ReadTask, chunk: &ChunkRange) -> Range<u64> {
        let start = task.offset.max(chunk.offset);
        let end = (task.offset + task.len).min(chunk.offset + chunk.len);
        start..end.max(start)
    }
}

/// Rows to keep of a row group of `num_rows`: sorted, disjoint, non-empty ranges inside it.
fn check_rows(rows: &[Range<u64>], num_rows: u64) -> std::result::Result<(), String> {
    let mut end = 0;
    for (i, r) in rows.iter().enumerate() {
        if r.start >= r.end || (i > 0 && r.start <= end) || r.end > num_rows {
            return Err(format!(
                "the rows to read ({rows:?}) are not sorted, disjoint, non-empty ranges within the row group's {num_rows}"
            ));
        }
        end = r.end;
    }
    Ok(())
}

/// The pieces of the chunk `(g, c)` (file bytes `chunk`) that hold `rows` of its row group of
/// `num_rows`: its dictionary page (the bytes before the first data page) and its data pages
/// overlapping `rows`, adjacent ones merged, in file order. `Err(why)` where the chunk must be read
/// whole: no OffsetIndex, a repeated column (a page's rows cannot be checked against its header), or
/// an OffsetIndex that does not fit the chunk (pages outside it, overlapping or out of order, rows
/// not starting at 0 or not increasing within the row group).
fn page_pieces(
    meta: &ParquetMetaData,
    g: usize,
    c: usize,
    chunk: Range<u64>,
    num_rows: u64,
    rows: &[Range<u64>],
) -> std::result::Result<Vec<(Range<u64>, PageRun)>, String> {
    if meta.file_metadata().schema_descr().column(c).max_rep_level() > 0 {
        return Err("a repeated column (the rows of its pages cannot be checked against their headers)".into());
    }
    let Some(index) = meta.page_index().and_then(|p| p.offset_index(g, c)) else {
        return Err("no OffsetIndex".into());
    };
    let locations = index.page_locations();
    if locations.is_empty() {
        return Err("its OffsetIndex lists no pages".into());
    }
    let bad = |why: String| Err(format!("its OffsetIndex does not fit the chunk: {why}"));
    // Each page's file bytes and rows, checked.
    let mut pages: Vec<(Range<u64>, Range<u64>)> = Vec::with_capacity(locations.len());
    for (p, l) in locations.iter().enumerate() {
        let (Ok(offset), Ok(size), Ok(first)) = (
            u64::try_from(l.offset),
            u64::try_from(l.compressed_page_size),
            u64::try_from(l.first_row_index),
        ) else {
            return bad(format!("page {p} has a negative offset, size or first row"));
        };
        let bytes = offset..offset.saturating_add(size);
        if size == 0 || bytes.start < chunk.start || bytes.end > chunk.end {
            return bad(format!(
                "page {p} at [{offset}, +{size}) is empty or outside the chunk [{}, {})",
                chunk.start, chunk.end
            ));
        }
        let end = match locations.get(p + 1) {
            Some(n) => u64::try_from(n.first_row_index).unwrap_or(0),
            None => num_rows,
        };
        if (p == 0 && first != 0) || first >= end || end > num_rows {
            return bad(format!(
                "page {p} holds rows {first}..{end}, not increasing from 0 within the row group's {num_rows}"
            ));
        }
        if let Some((prev, _)) = pages.last()
            && prev.end > bytes.start
        {
            return bad(format!("page {p} at {offset} overlaps or precedes page {}", p - 1));
        }
        pages.push((bytes, first..end));
    }
    let mut out: Vec<(Range<u64>, PageRun)> = Vec::new();
    if chunk.start < pages[0].0.start {
        out.push((
            chunk.start..pages[0].0.start,
            PageRun {
                chunk: chunk.clone(),
                dictionary: true,
                pages: 0..0,
                rows: 0..0,
                chunk_pages: pages.len(),
            },
        ));
    }
    for (p, (bytes, held)) in pages.iter().enumerate() {
        if !rows.iter().any(|r| r.start < held.end && held.start < r.end) {
            continue;
        }
        match out.last_mut() {
            // Adjacent in the file and next in the index (or the dictionary before page 0): one piece.
            Some((range, run)) if range.end == bytes.start && run.pages.end == p => {
                range.end = bytes.end;
                run.pages.end = p + 1;
                if run.pages.len() == 1 {
                    run.rows = held.clone();
                } else {
                    run.rows.end = held.end;
                }
            }
            _ => out.push((
                bytes.clone(),
                PageRun {
                    chunk: chunk.clone(),
                    dictionary: false,
                    pages: p..p + 1,
                    rows: held.clone(),
                    chunk_pages: pages.len(),
                },
            )),
        }
    }
    Ok(out)
}

/// Leaf columns selected by `projection`, in schema order, deduplicated.
pub fn resolve_projection(source: &ParquetSource, projection: &Projection) -> Result<Vec<usize>> {
    let schema = source.metadata().file_metadata().schema_descr();
    let n = schema.num_columns();
    let mut selected = vec![false; n];
    match projection {
        Projection::All => selected.iter_mut().for_each(|s| *s = true),
        Projection::Leaves(leaves) => {
            for &l in leaves {
                if l >= n {
                    return Err(Error::InvalidRequest {
                        location: source.location(),
                        message: format!("leaf column {l} does not exist (the file has {n})"),
                    });
                }
                selected[l] = true;
            }
        }
        Projection::Names(names) => {
            for name in names {
                let want: Vec<&str> = name.split('.').collect();
                let mut found = false;
                for (i, s) in selected.iter_mut().enumerate() {
                    let parts = schema.column(i).path().parts().to_vec();
                    if parts.len() >= want.len() && parts.iter().zip(&want).all(|(p, w)| p == w) {
                        *s = true;
                        found = true;
                    }
                }
                if !found {
                    let available: Vec<String> = schema
                        .root_schema()
                        .get_fields()
                        .iter()
                        .map(|f| f.name().to_string())
                        .collect();
                    return Err(Error::InvalidRequest {
                        location: source.location(),
                        message: format!("no column named '{name}' (top-level columns: {})", available.join(", ")),
                    });
                }
            }
        }
    }
    Ok((0..n).filter(|&i| selected[i]).collect())
}

fn resolve_row_groups(source: &ParquetSource, selection: &RowGroupSelection) -> Result<Vec<usize>> {
    let n = source.metadata().num_row_groups();
    match selection {
        RowGroupSelection::All => Ok((0..n).collect()),
        RowGroupSelection::Indices(ix) => {
            let mut seen = vec![false; n];
            for &g in ix {
                if g >= n {
                    return Err(Error::InvalidRequest {
                        location: source.location(),
                        message: format!("row group {g} does not exist (the file has {n})"),
                    });
                }
                if std::mem::replace(&mut seen[g], true) {
                    return Err(Error::InvalidRequest {
                        location: source.location(),
                        message: format!("row group {g} is selected twice"),
                    });
                }
            }
            Ok(ix.clone())
        }
    }
}

/// Merges sorted chunks into spans and sets each chunk's `dest_offset`.
fn coalesce(chunks: &mut [ChunkRange], options: PlanOptions, file_len: u64) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let mut dest = 0u64;
    let align_down = |x: u64| {
        if options.align {
            x / DIRECT_IO_ALIGN * DIRECT_IO_ALIGN
        } else {
            x
        }
    };
    let align_up = |x: u64| {
        if options.align {
            x.div_ceil(DIRECT_IO_ALIGN)
                .saturating_mul(DIRECT_IO_ALIGN)
                .min(file_len)
        } else {
            x
        }
    };
    for (i, chunk) in chunks.iter_mut().enumerate() {
        let (start, end) = (align_down(chunk.offset), align_up(chunk.offset + chunk.len));
        let span = match spans.last_mut() {
            Some(s) if start <= (s.offset + s.len).saturating_add(options.max_gap) => {
                let new_end = end.max(s.offset + s.len);
                dest += new_end - (s.offset + s.len);
                s.len = new_end - s.offset;
                s.chunks.end = i + 1;
                &*s
            }
            _ => {
                spans.push(Span {
                    offset: start,
                    len: end - start,
                    dest_offset: dest,
                    chunks: i..i + 1,
                });
                dest += end - start;
                &spans[spans.len() - 1]
            }
        };
        chunk.dest_offset = span.dest_offset + (chunk.offset - span.offset);
    }
    spans
}

/// Cuts spans into tasks of at most `task_size` bytes (a multiple of the alignment when aligning).
fn split_into_tasks(spans: &[Span], chunks: &[ChunkRange], options: PlanOptions) -> Vec<ReadTask> {
    let mut step = options.task_size.max(1);
    if options.align {
        step = step.div_ceil(DIRECT_IO_ALIGN) * DIRECT_IO_ALIGN;
    }
    let mut tasks = Vec::new();
    for span in spans {
        let mut off = 0;
        // Chunks are sorted and disjoint, so the chunks overlapping consecutive tasks form a sliding window.
        let mut first = span.chunks.start;
        while off < span.len {
            let len = step.min(span.len - off);
            let (t0, t1) = (span.offset + off, span.offset + off + len);
            while first < span.chunks.end && chunks[first].offset + chunks[first].len <= t0 {
                first += 1;
            }
            let mut last = first;
            while last < span.chunks.end && chunks[last].offset < t1 {
                last += 1;
            }
            tasks.push(ReadTask {
                offset: t0,
                len,
                dest_offset: span.dest_offset + off,
                chunks: first..last,
            });
            off += len;
        }
    }
    tasks
}

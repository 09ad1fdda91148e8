//! Filter columns first: a filtered scan's step in two passes, as arrow-rs's `RowFilter` and cuDF's
//! hybrid scan read. A step's fetch holds only the filter's columns (their pages of the rows pruning
//! kept); its sink decodes them and evaluates the filter into the accepted rows of each row group,
//! plans the other columns (the *payload*) for those rows alone ([`ReadPlan::build_paged`]: only the
//! pages holding an accepted row, none of a row group without one), fetches and decodes them (the
//! decoders yield exactly the plan's rows), and zips both, the filter's columns compacted and those
//! read only for the filter dropped. The payload's fetch of one step runs on a worker while the
//! reading thread fetches the next step's filter columns. Its reads join the step's I/O log, so the
//! per-column report stays whole.
//!
//! Where it does not apply, the scan reads in one pass (every column's surviving pages, the filter
//! after the decode): no filter, [`FilterPasses::One`], nothing to read beyond the filter's columns,
//! or (on the GPU) a filter the row filter cannot run or a mask asked for.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, BooleanBufferBuilder, RecordBatch};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{Schema, SchemaRef};
use parquet::file::metadata::ParquetMetaData;
use serde::Serialize;

use crate::decode::exec::OwnedBuffer;
use crate::decode::host::{DecodedTable, decode_fetched};
use crate::decode::row_filter::{Filtered, RowPredicate};
use crate::decode::table::{DeviceArray, DeviceBatch, DeviceColumn};
use crate::error::{Error, Location, Result};
use crate::filter::{FilterPasses, PlannedFilter, SharedFilter};
use crate::io::select::AnyBackend;
use crate::io::{IoBackend, IoLog};
use crate::metadata::ParquetSource;
use crate::plan::{PlanOptions, Projection, ReadPlan, RowGroupSelection};

/// Rows of row groups: row group → sorted, disjoint, non-empty ranges (0 = its first row).
pub(crate) type RowRanges = BTreeMap<usize, Vec<Range<u64>>>;

/// Which pass a top-level output column comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// The filter's columns (first pass).
    Filter,
    /// The others (second pass).
    Payload,
}

/// A reader's two passes: which leaves each reads, and how their top-level columns zip.
#[derive(Debug, Clone)]
pub(crate) struct TwoPass {
    pub filter: Arc<PlannedFilter>,
    /// Leaves of the filter's columns, in schema order: the first pass.
    pub filter_leaves: Vec<usize>,
    /// The projection's other leaves, in schema order: the second pass.
    pub payload_leaves: Vec<usize>,
    /// The output's top-level columns in order: the pass and the column's index in that pass's
    /// batch (the filter's columns the caller did not select are left out).
    pub output: Vec<(Pass, usize)>,
    options: PlanOptions,
    /// Read [`FilterPasses::Auto`]: a step whose payload is small and in the page cache reads in one
    /// pass ([`Self::one_pass_step`]).
    auto: bool,
}

/// The largest share of a step's payload pages that may be missing from the page cache for
/// [`FilterPasses::Auto`] to read it in one pass (a `mincore` sample): each missing page is a disk
/// read that a second pass might have saved.
const HOT_UNCACHED: f64 = 0.1;

/// What the two passes of a step (or a read) fetched, beside what one pass would have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PassBytes {
    /// Bytes of the filter's columns (the first pass).
    pub filter: u64,
    /// Bytes of the payload's pages holding an accepted row (the second pass).
    pub payload: u64,
    /// Bytes of the payload's pages one pass reads: every page of the rows pruning kept.
    pub payload_one_pass: u64,
    /// Row groups whose payload was not read at all (no accepted row).
    pub row_groups_without_payload: u64,
}

impl PassBytes {
    pub(crate) fn add(&mut self, other: &PassBytes) {
        self.filter += other.filter;
        self.payload += other.payload;
        self.payload_one_pass += other.payload_one_pass;
        self.row_groups_without_payload += other.row_groups_without_payload;
    }

    /// One line for reports.
    pub fn line(&self) -> String {
        format!(
            "two passes: the filter's columns first ({} bytes), then the other columns' pages holding accepted rows: {} of the {} bytes one pass reads; {} row groups had no accepted row, their other columns not read\n",
            self.filter, self.payload, self.payload_one_pass, self.row_groups_without_payload
        )
    }
}

impl TwoPass {
    /// The two passes of a read of `plan` (the projection, the filter's columns included) with
    /// `filter`; `None` where it reads in one pass: no filter, `passes` says one, a filter column
    /// that is not one top-level leaf, or no column beyond the filter's.
    pub(crate) fn plan(
        source: &ParquetSource,
        filter: &SharedFilter,
        plan: &ReadPlan,
        passes: FilterPasses,
    ) -> Option<Self> {
        let filter = filter.as_ref()?;
        if passes == FilterPasses::One {
            return None;
        }
        let descr = source.metadata().file_metadata().schema_descr();
        let mut filter_leaves = Vec::new();
        for name in filter.predicate.columns() {
            let leaf = plan
                .columns
                .iter()
                .copied()
                .find(|&l| descr.column(l).path().parts() == std::slice::from_ref(&name))?;
            filter_leaves.push(leaf);
        }
        filter_leaves.sort_unstable();
        filter_leaves.dedup();
        let payload_leaves: Vec<usize> = plan
            .columns
            .iter()
            .copied()
            .filter(|l| !filter_leaves.contains(l))
            .collect();
        if payload_leaves.is_empty() || filter_leaves.is_empty() {
            return None;
        }
        let roots = |leaves: &[usize]| -> Vec<usize> {
            let mut r: Vec<usize> = leaves.iter().map(|&l| descr.get_column_root_idx(l)).collect();
            r.dedup();
            r
        };
        let (filter_roots, payload_roots) = (roots(&filter_leaves), roots(&payload_leaves));
        if filter_roots.iter().any(|r| payload_roots.contains(r)) {
            return None;
        }
        let mut all: Vec<usize> = filter_roots.iter().chain(&payload_roots).copied().collect();
        all.sort_unstable();
        let fields = descr.root_schema().get_fields();
        let output = all
            .into_iter()
            .filter_map(|root| match filter_roots.iter().position(|&r| r == root) {
                Some(_) if filter.added_columns.iter().any(|c| c == fields[root].name()) => None,
                Some(i) => Some((Pass::Filter, i)),
                None => payload_roots
                    .iter()
                    .position(|&r| r == root)
                    .map(|j| (Pass::Payload, j)),
            })
            .collect();
        Some(Self {
            filter: filter.clone(),
            filter_leaves,
            payload_leaves,
            output,
            options: plan.options,
            auto: passes == FilterPasses::Auto,
        })
    }

    /// Whether a step of the row groups `group` reads in one pass: the statistics accept every row
    /// of them (nothing to evaluate, every page of the rows pruning kept is needed), or nearly every
    /// one ([`crate::filter::PlannedFilter::accepts_most`]).
    pub(crate) fn in_one(&self, group: &[usize]) -> bool {
        self.filter.accepts_whole(group) || self.filter.accepts_most(group)
    }

    /// Whether a step of the row groups `group`, of whose rows pruning kept `rows`, reads in one
    /// pass: where [`Self::in_one`] says so, or, read [`FilterPasses::Auto`], where the payload's
    /// pages of those rows are at most [`crate::filter::ONE_PASS_HOT_PAYLOAD`] bytes and nearly all in
    /// the page cache: then a second pass saves less time than its round trip costs. Decided once,
    /// when the step is planned (the page cache changes); its sink reads the choice from the plan
    /// ([`Self::reads_in_one`]).
    pub(crate) fn one_pass_step(&self, source: &ParquetSource, group: &[usize], rows: &RowRanges) -> Result<bool> {
        if self.in_one(group) {
            return Ok(true);
        }
        if !self.auto {
            return Ok(false);
        }
        let payload = self.one_pass_payload(source, group.to_vec(), rows)?;
        match payload.useful_bytes() {
            0 => return Ok(true),
            b if b > crate::filter::ONE_PASS_HOT_PAYLOAD => return Ok(false),
            _ => {}
        }
        let ranges = payload.spans.iter().map(|s| (s.offset, s.len));
        Ok(crate::io::pread::uncached_share(source.file(), ranges).is_some_and(|share| share <= HOT_UNCACHED))
    }

    /// The plan of `leaves` over the row groups `group`, read page by page where `rows` names them.
    fn paged(&self, source: &ParquetSource, leaves: &[usize], group: Vec<usize>, rows: &RowRanges) -> Result<ReadPlan> {
        ReadPlan::build_paged(
            source,
            &Projection::Leaves(leaves.to_vec()),
            &RowGroupSelection::Indices(group),
            self.options,
            rows,
        )
    }

    /// The payload's pages a one-pass read of the row groups `group` fetches: those of the rows
    /// pruning kept (`rows`).
    fn one_pass_payload(&self, source: &ParquetSource, group: Vec<usize>, rows: &RowRanges) -> Result<ReadPlan> {
        self.paged(source, &self.payload_leaves, group, rows)
    }

    /// Whether a step planned as `plan` reads in one pass: its plan holds payload columns (a
    /// two-pass step's plan holds the filter's columns alone).
    pub(crate) fn reads_in_one(&self, plan: &ReadPlan) -> bool {
        plan.columns.iter().any(|l| self.payload_leaves.contains(l))
    }

    /// The first pass's plan of the row groups `group` (the filter's columns, read page by page
    /// where pruning kept `rows`).
    pub(crate) fn filter_plan(&self, source: &ParquetSource, group: Vec<usize>, rows: &RowRanges) -> Result<ReadPlan> {
        self.paged(source, &self.filter_leaves, group, rows)
    }

    /// The second pass's plan of a step whose first pass read `first`: the payload's pages of the
    /// row groups with runs (the rows of [`Self::payload_rows`]), which its decoders yield; `None`
    /// where no row is accepted.
    pub(crate) fn payload_plan(
        &self,
        source: &ParquetSource,
        first: &ReadPlan,
        runs: &RowRanges,
    ) -> Result<Option<ReadPlan>> {
        let groups: Vec<usize> = first
            .row_groups
            .iter()
            .copied()
            .filter(|g| runs.contains_key(g))
            .collect();
        if groups.is_empty() {
            return Ok(None);
        }
        self.paged(source, &self.payload_leaves, groups, runs).map(Some)
    }

    /// The rows a step's second pass reads, from the first pass's `mask` (over the rows a decode of
    /// `first` yields, row groups in plan order; `None`: all accepted). In each row group, runs from
    /// an accepted row to an accepted row, cut wherever a page of some payload column holds none: so
    /// the runs touch exactly the pages that hold an accepted row, in few ranges where the accepted
    /// rows themselves can be one range per row. With them, which rows of the runs are accepted.
    /// Word by word over the mask and page by page, never row range by row range.
    pub(crate) fn payload_rows(
        &self,
        meta: &ParquetMetaData,
        first: &ReadPlan,
        mask: Option<&BooleanArray>,
        location: &Location,
    ) -> Result<PayloadRows> {
        let accepted: Option<BooleanBuffer> = mask.map(|m| match m.nulls() {
            Some(nulls) => m.values() & nulls.inner(),
            None => m.values().clone(),
        });
        let num_rows_of = |g: usize| meta.row_groups().get(g).map_or(0, |r| r.num_rows().max(0) as u64);
        // Each row group's held rows: those the first pass read.
        let held: Vec<Vec<Range<u64>>> = first
            .row_groups
            .iter()
            .map(|&g| first.rows.get(&g).cloned().unwrap_or_else(|| vec![0..num_rows_of(g)]))
            .collect();
        let total: u64 = held.iter().flatten().map(|h| h.end - h.start).sum();
        if let Some(a) = &accepted
            && a.len() as u64 != total
        {
            return Err(Error::device(
                format!("filtering {}", location.file.display()),
                format!("the filter's mask has {} rows, the step {total}", a.len()),
            ));
        }
        let descr = meta.file_metadata().schema_descr();
        let mut out = PayloadRows::default();
        let mut base = 0u64; // the step's row of the row group's first held row
        for (&g, held) in first.row_groups.iter().zip(held) {
            let num_rows = num_rows_of(g);
            let rows = HeldRows::new(held, base, accepted.as_ref());
            base += rows.len();
            // Rows of pages (of any payload column) holding no accepted row, merged.
            let mut cuts: Vec<Range<u64>> = Vec::new();
            for c in self
                .payload_leaves
                .iter()
                .filter(|&&c| descr.column(c).max_rep_level() == 0)
            {
                let Some(index) = meta.page_index().and_then(|i| i.offset_index(g, *c)) else {
                    continue;
                };
                let mut starts: Vec<u64> = index
                    .page_locations()
                    .iter()
                    .map(|l| (l.first_row_index.max(0) as u64).min(num_rows))
                    .collect();
                starts.push(num_rows);
                for w in starts.windows(2) {
                    if w[0] < w[1] && rows.count(w[0]..w[1]) == 0 {
                        cuts.push(w[0]..w[1]);
                    }
                }
            }
            cuts.sort_unstable_by_key(|r| r.start);
            let mut runs: Vec<Range<u64>> = Vec::new();
            let mut from = 0u64;
            for (cut_start, cut_end) in cuts.iter().map(|c| (c.start, c.end)).chain([(num_rows, num_rows)]) {
                if from < cut_start
                    && let (Some(a), Some(b)) = (rows.first(from..cut_start), rows.last(from..cut_start))
                {
                    runs.push(a..b + 1);
                }
                from = from.max(cut_end);
            }
            if runs.is_empty() {
                continue;
            }
            let mut keep = BooleanBufferBuilder::new(runs.iter().map(|r| (r.end - r.start) as usize).sum());
            for r in &runs {
                rows.append(&mut keep, r.clone());
            }
            let keep = keep.finish();
            let all = keep.count_set_bits() == keep.len();
            out.runs.insert(g, runs);
            out.keep.insert(g, (!all).then_some(keep));
        }
        Ok(out)
    }

    /// `accepted` with the gaps between its ranges closed where no payload column has a whole page
    /// inside the gap: every page such a gap touches also holds an accepted row on either side, so
    /// the runs touch the same pages (the same bytes) in fewer ranges. The definition
    /// [`Self::payload_rows`] is tested against, range by range.
    #[cfg(test)]
    pub(crate) fn page_runs(&self, meta: &ParquetMetaData, accepted: &RowRanges) -> RowRanges {
        let descr = meta.file_metadata().schema_descr();
        accepted
            .iter()
            .map(|(&g, ranges)| {
                let num_rows = meta.row_groups().get(g).map_or(0, |r| r.num_rows().max(0) as u64);
                // Each payload column's page starts, then the row group's end.
                let bounds: Vec<Vec<u64>> = self
                    .payload_leaves
                    .iter()
                    .filter(|&&c| descr.column(c).max_rep_level() == 0)
                    .filter_map(|&c| meta.page_index().and_then(|i| i.offset_index(g, c)))
                    .map(|o| {
                        let mut b: Vec<u64> = o
                            .page_locations()
                            .iter()
                            .map(|l| l.first_row_index.max(0) as u64)
                            .collect();
                        b.push(num_rows);
                        b
                    })
                    .collect();
                // Whether a page of some column lies wholly in the rows [a, b).
                let page_inside = |a: u64, b: u64| {
                    bounds.iter().any(|s| {
                        let k = s.partition_point(|&x| x < a);
                        k + 1 < s.len() && s[k + 1] <= b && s[k] < s[k + 1]
                    })
                };
                let mut runs: Vec<Range<u64>> = Vec::new();
                for r in ranges {
                    match runs.last_mut() {
                        Some(last) if !page_inside(last.end, r.start) => last.end = r.end,
                        _ => runs.push(r.clone()),
                    }
                }
                (g, runs)
            })
            .collect()
    }

    /// The figures of a step whose first pass read `first` and whose second read `second`.
    pub(crate) fn bytes(
        &self,
        source: &ParquetSource,
        first: &ReadPlan,
        second: Option<&ReadPlan>,
    ) -> Result<PassBytes> {
        let one_pass = self.one_pass_payload(source, first.row_groups.clone(), &first.rows)?;
        let read = second.map_or(0, |p| p.row_groups.len());
        Ok(PassBytes {
            filter: first.useful_bytes(),
            payload: second.map_or(0, ReadPlan::useful_bytes),
            payload_one_pass: one_pass.useful_bytes(),
            row_groups_without_payload: (first.row_groups.len() - read) as u64,
        })
    }

    /// A mask over the rows of a decoded first pass of `first` (its batches in row-group order),
    /// `None` where the statistics accept every row of its row groups (nothing evaluated).
    fn host_mask(&self, first: &ReadPlan, table: &DecodedTable) -> Result<Option<BooleanArray>> {
        if self.filter.accepts_whole(&first.row_groups) {
            return Ok(None);
        }
        let mut masks: Vec<BooleanArray> = Vec::with_capacity(table.batches.len());
        for (slot, &g) in first.row_groups.iter().enumerate() {
            let batches = table.row_group_batches.get(slot).cloned().unwrap_or(0..0);
            for b in &table.batches[batches] {
                masks.push(if self.filter.accepts_whole(&[g]) {
                    BooleanArray::from(vec![true; b.num_rows()])
                } else {
                    self.filter.predicate.evaluate(b)?
                });
            }
        }
        let refs: Vec<&dyn Array> = masks.iter().map(|m| m as &dyn Array).collect();
        let mask = match refs.as_slice() {
            [] => BooleanArray::from(Vec::<bool>::new()),
            _ => arrow::compute::concat(&refs)
                .map_err(|e| Error::parquet(Location::default(), e))?
                .as_any()
                .downcast_ref::<BooleanArray>()
                .cloned()
                .ok_or_else(|| Error::parquet(Location::default(), "the filter's mask is not boolean"))?,
        };
        Ok(Some(mask))
    }

    /// Decodes a step fetched by its first pass (`first`, the filter's columns, into `fetched`) on
    /// the host, fetches its second through `io` and decodes it: the step's accepted rows, the
    /// columns in the caller's order; with the second pass's plan and log, and the figures.
    pub(crate) fn host_step(
        &self,
        io: &AnyBackend,
        source: &ParquetSource,
        first: &ReadPlan,
        fetched: &bytes::Bytes,
        threads: usize,
    ) -> Result<HostSecondPass> {
        let filtered = decode_fetched(source, first, fetched, threads)?;
        let mask = self.host_mask(first, &filtered)?;
        // The runs plan the second pass, and the accepted rows are picked out of its decode.
        let rows = self.payload_rows(source.metadata(), first, mask.as_ref(), &source.location())?;
        let second = self.payload_plan(source, first, &rows.runs)?;
        let bytes = self.bytes(source, first, second.as_ref())?;
        let (payload, second) = match second {
            Some(plan) => {
                let got = io.fetch(source, &plan)?;
                source.check_unchanged()?;
                let data = got.buffer.into_host_bytes()?;
                let table = decode_fetched(source, &plan, &data, threads)?;
                (table, Some((Arc::new(plan), got.log)))
            }
            None => {
                // No row accepted: the payload's schema, from a plan of no row group.
                let none = ReadPlan::build(
                    source,
                    &Projection::Leaves(self.payload_leaves.clone()),
                    &RowGroupSelection::Indices(Vec::new()),
                    self.options,
                )?;
                (decode_fetched(source, &none, &bytes::Bytes::new(), 1)?, None)
            }
        };
        let table = self.zip_host(first, filtered, mask.as_ref(), payload, &rows)?;
        Ok(HostSecondPass { table, second, bytes })
    }

    /// The output schema of two passes whose batches have `filter` and `payload` schemas.
    fn output_schema(&self, filter: &Schema, payload: &Schema) -> SchemaRef {
        let fields: Vec<_> = self
            .output
            .iter()
            .map(|&(pass, i)| match pass {
                Pass::Filter => filter.field(i).clone(),
                Pass::Payload => payload.field(i).clone(),
            })
            .collect();
        Arc::new(Schema::new_with_metadata(fields, payload.metadata().clone()))
    }

    /// The first pass's table (all rows it read) filtered by `mask`, the filter's columns the
    /// caller did not select dropped first, zipped row group by row group with the second pass's
    /// table (the runs of `rows`), filtered to the accepted rows, in the second pass's batches.
    fn zip_host(
        &self,
        first: &ReadPlan,
        filtered: DecodedTable,
        mask: Option<&BooleanArray>,
        payload: DecodedTable,
        rows: &PayloadRows,
    ) -> Result<DecodedTable> {
        let location = filtered.location();
        let fail = |e: arrow::error::ArrowError| Error::parquet(location.clone(), e);
        let keep: Vec<usize> = self
            .output
            .iter()
            .filter(|(p, _)| *p == Pass::Filter)
            .map(|&(_, i)| i)
            .collect();
        let kept_schema = Arc::new(filtered.schema.project(&keep).map_err(fail)?);
        // The output's columns: the k-th filter column kept, or the payload's i-th.
        let mut k = 0usize;
        let order: Vec<(Pass, usize)> = self
            .output
            .iter()
            .map(|&(pass, i)| match pass {
                Pass::Filter => {
                    k += 1;
                    (Pass::Filter, k - 1)
                }
                Pass::Payload => (Pass::Payload, i),
            })
            .collect();
        let schema = self.output_schema(&filtered.schema, &payload.schema);
        let mut batches = Vec::new();
        let mut row_group_batches = Vec::with_capacity(first.row_groups.len());
        let mut at = 0usize; // the mask's row of the first pass's current batch
        let mut payload_slot = 0usize;
        for (slot, &g) in first.row_groups.iter().enumerate() {
            let start = batches.len();
            let mut kept: Vec<RecordBatch> = Vec::new();
            for b in &filtered.batches[filtered.row_group_batches.get(slot).cloned().unwrap_or(0..0)] {
                let n = b.num_rows();
                if rows.runs.contains_key(&g) {
                    let b = b.project(&keep).map_err(fail)?;
                    kept.push(match mask {
                        Some(m) => arrow::compute::filter_record_batch(&b, &m.slice(at, n)).map_err(fail)?,
                        None => b,
                    });
                }
                at += n;
            }
            let Some(within) = rows.keep.get(&g) else {
                row_group_batches.push(start..start);
                continue;
            };
            let kept = arrow::compute::concat_batches(&kept_schema, &kept).map_err(fail)?;
            // The accepted rows among the runs' (none to drop where they are the same).
            let within = within.clone().map(|k| BooleanArray::new(k, None));
            let slices = payload.row_group_batches.get(payload_slot).cloned().unwrap_or(0..0);
            payload_slot += 1;
            let (mut offset, mut held_at) = (0usize, 0usize);
            for p in &payload.batches[slices] {
                let p = match &within {
                    Some(m) => {
                        let part =
                            arrow::compute::filter_record_batch(p, &m.slice(held_at, p.num_rows())).map_err(fail)?;
                        held_at += p.num_rows();
                        part
                    }
                    None => p.clone(),
                };
                let n = p.num_rows();
                if offset + n > kept.num_rows() {
                    offset += n;
                    break;
                }
                let f = kept.slice(offset, n);
                let columns: Vec<ArrayRef> = order
                    .iter()
                    .map(|&(pass, i)| match pass {
                        Pass::Filter => f.column(i).clone(),
                        Pass::Payload => p.column(i).clone(),
                    })
                    .collect();
                let options = arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(n));
                batches.push(RecordBatch::try_new_with_options(schema.clone(), columns, &options).map_err(fail)?);
                offset += n;
            }
            if offset != kept.num_rows() {
                return Err(Error::parquet(
                    Location {
                        row_group: Some(g),
                        ..location.clone()
                    },
                    format!(
                        "the filter accepted {} rows of the row group, but its other columns decoded {offset}",
                        kept.num_rows()
                    ),
                ));
            }
            row_group_batches.push(start..batches.len());
        }
        Ok(DecodedTable::from_parts(schema, batches, row_group_batches, location))
    }
}

/// Over the rows `held` (sorted ranges, in order), true where a row is in `rows` (sorted ranges
/// within them). The definition of [`PayloadRows::keep`], range by range.
#[cfg(test)]
fn rows_within(held: &[Range<u64>], rows: &[Range<u64>]) -> BooleanArray {
    let total: u64 = held.iter().map(|h| h.end - h.start).sum();
    let mut mask = arrow::array::BooleanBufferBuilder::new(total as usize);
    let (mut base, mut h, mut written) = (0u64, 0usize, 0u64);
    for r in rows {
        // The held range holding `r` (each accepted range lies within one, in order).
        while h < held.len() && held[h].end <= r.start {
            base += held[h].end - held[h].start;
            h += 1;
        }
        let Some(range) = held.get(h) else { break };
        let from = base + r.start.saturating_sub(range.start);
        let to = (from + (r.end.min(range.end) - r.start.max(range.start))).min(total);
        mask.append_n(from.saturating_sub(written) as usize, false);
        mask.append_n(to.saturating_sub(from.max(written)) as usize, true);
        written = written.max(to);
    }
    mask.append_n(total.saturating_sub(written) as usize, false);
    BooleanArray::new(mask.finish(), None)
}

/// A step's two passes on the host: its table, the second pass's plan and log (none where no row
/// was accepted), and the figures.
pub(crate) struct HostSecondPass {
    pub table: DecodedTable,
    pub second: Option<(Arc<ReadPlan>, IoLog)>,
    pub bytes: PassBytes,
}

/// The rows a step's second pass reads ([`TwoPass::payload_rows`]).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct PayloadRows {
    /// Per row group with an accepted row, the runs its payload's decode yields.
    pub runs: RowRanges,
    /// Per row group of `runs`, over the rows of its runs in order, which are accepted (`None`
    /// where all are).
    pub keep: BTreeMap<usize, Option<BooleanBuffer>>,
}

impl PayloadRows {
    /// Over the payload's rows (the runs of the row groups in `order`, the plan's order), which
    /// are accepted: `None` where all are.
    fn keep_in(&self, order: &[usize]) -> Option<BooleanBuffer> {
        if self.keep.values().all(Option::is_none) {
            return None;
        }
        let len = |runs: &[Range<u64>]| runs.iter().map(|r| (r.end - r.start) as usize).sum::<usize>();
        let mut out = BooleanBufferBuilder::new(self.runs.values().map(|r| len(r)).sum());
        for g in order {
            match (self.runs.get(g), self.keep.get(g)) {
                (Some(_), Some(Some(keep))) => out.append_buffer(keep),
                (Some(runs), _) => out.append_n(len(runs), true),
                _ => {}
            }
        }
        Some(out.finish())
    }
}

/// A row group's rows a first pass held (sorted ranges of its rows), at the step's row `base`, and
/// the accepted bits of the step's mask (`None`: all accepted).
struct HeldRows<'a> {
    held: Vec<Range<u64>>,
    /// The step's row of each held range's first row.
    at: Vec<u64>,
    accepted: Option<&'a BooleanBuffer>,
}

impl<'a> HeldRows<'a> {
    fn new(held: Vec<Range<u64>>, base: u64, accepted: Option<&'a BooleanBuffer>) -> Self {
        let mut at = Vec::with_capacity(held.len());
        let mut next = base;
        for h in &held {
            at.push(next);
            next += h.end - h.start;
        }
        Self { held, at, accepted }
    }

    /// The rows held.
    fn len(&self) -> u64 {
        self.held.iter().map(|h| h.end - h.start).sum()
    }

    /// The held pieces of the rows `rows`: each its rows and the step's row of its first.
    fn pieces(&self, rows: Range<u64>) -> impl DoubleEndedIterator<Item = (Range<u64>, u64)> + '_ {
        let from = self.held.partition_point(|h| h.end <= rows.start);
        let to = self.held.partition_point(|h| h.start < rows.end).max(from);
        self.held[from..to].iter().zip(&self.at[from..to]).map(move |(h, &at)| {
            let (s, e) = (h.start.max(rows.start), h.end.min(rows.end));
            (s..e, at + (s - h.start))
        })
    }

    /// The accepted bits of a held piece.
    fn bits(&self, piece: &(Range<u64>, u64)) -> Option<BooleanBuffer> {
        let (rows, at) = piece;
        self.accepted
            .map(|a| a.slice(*at as usize, (rows.end - rows.start) as usize))
    }

    /// How many of `rows` are accepted.
    fn count(&self, rows: Range<u64>) -> u64 {
        self.pieces(rows)
            .map(|p| match self.bits(&p) {
                Some(b) => b.count_set_bits() as u64,
                None => p.0.end - p.0.start,
            })
            .sum()
    }

    /// The first accepted row of `rows`.
    fn first(&self, rows: Range<u64>) -> Option<u64> {
        self.pieces(rows).find_map(|p| match self.bits(&p) {
            Some(b) => b.set_indices().next().map(|i| p.0.start + i as u64),
            None => Some(p.0.start),
        })
    }

    /// The last accepted row of `rows`.
    fn last(&self, rows: Range<u64>) -> Option<u64> {
        self.pieces(rows).rev().find_map(|p| match self.bits(&p) {
            Some(b) => last_set(&b).map(|i| p.0.start + i as u64),
            None => Some(p.0.end - 1),
        })
    }

    /// Appends, for each of `rows`, whether it is accepted (rows not held are not).
    fn append(&self, out: &mut BooleanBufferBuilder, rows: Range<u64>) {
        let mut next = rows.start;
        for p in self.pieces(rows.clone()) {
            out.append_n((p.0.start - next) as usize, false);
            match self.bits(&p) {
                Some(b) => out.append_buffer(&b),
                None => out.append_n((p.0.end - p.0.start) as usize, true),
            }
            next = p.0.end;
        }
        out.append_n((rows.end - next) as usize, false);
    }
}

/// The index of the last set bit of `bits`: zero bytes skipped whole.
fn last_set(bits: &BooleanBuffer) -> Option<usize> {
    let (bytes, offset) = (bits.values(), bits.offset());
    let mut i = bits.len();
    while i > 0 {
        let end = offset + i; // one past the bit to look at, in `bytes`
        if end.is_multiple_of(8) && i >= 8 && bytes[end / 8 - 1] == 0 {
            i -= 8;
            continue;
        }
        i -= 1;
        if bits.value(i) {
            return Some(i);
        }
    }
    None
}

/// The rows of each row group of `first` that `mask` (over the rows a decode of `first` yields,
/// row groups in plan order; `None`: all) accepts, true and not null; row groups with none left out.
/// The definition [`TwoPass::payload_rows`] is tested against, range by range.
#[cfg(test)]
pub(crate) fn accepted_rows(
    meta: &ParquetMetaData,
    first: &ReadPlan,
    mask: Option<&BooleanArray>,
    location: &Location,
) -> Result<RowRanges> {
    // The mask's runs of accepted rows, in the step's row numbers.
    let runs: Vec<Range<u64>> = match mask {
        Some(m) => {
            let accepted = match m.nulls() {
                Some(nulls) => m.values() & nulls.inner(),
                None => m.values().clone(),
            };
            accepted.set_slices().map(|(s, e)| s as u64..e as u64).collect()
        }
        None => vec![0..u64::MAX],
    };
    let mut out = RowRanges::new();
    let mut base = 0u64; // the step's row number of the current row group's first held row
    let mut run = 0usize;
    for &g in &first.row_groups {
        let num_rows = meta.row_groups().get(g).map_or(0, |r| r.num_rows().max(0) as u64);
        let held = first.rows.get(&g).cloned().unwrap_or_else(|| vec![0..num_rows]);
        let mut ranges: Vec<Range<u64>> = Vec::new();
        for h in &held {
            let len = h.end - h.start;
            // The runs overlapping the step's rows [base, base + len), mapped into `h`.
            while run < runs.len() && runs[run].start < base + len {
                let r = &runs[run];
                let (s, e) = (r.start.max(base), r.end.min(base + len));
                if s < e {
                    let piece = h.start + (s - base)..h.start + (e - base);
                    match ranges.last_mut() {
                        Some(last) if last.end == piece.start => last.end = piece.end,
                        _ => ranges.push(piece),
                    }
                }
                if r.end > base + len {
                    break;
                }
                run += 1;
            }
            base += len;
        }
        if !ranges.is_empty() {
            out.insert(g, ranges);
        }
    }
    if let Some(m) = mask
        && m.len() as u64 != base
    {
        return Err(Error::device(
            format!("filtering {}", location.file.display()),
            format!("the filter's mask has {} rows, the step {base}", m.len()),
        ));
    }
    Ok(out)
}

/// What a GPU step's second pass needs of its executor (the GPU's, or the kernels' host references
/// in tests).
pub(crate) trait SecondPassExec {
    /// The buffers of its batches.
    type Buffer: OwnedBuffer;

    /// The mask of `predicate` over `batch` ([`crate::decode::row_filter::FilterMode::Mask`]).
    fn mask(&mut self, batch: DeviceBatch<Self::Buffer>, predicate: &RowPredicate) -> Result<Filtered<Self::Buffer>>;

    /// `batch` compacted to the rows `mask` selects.
    fn compact(
        &mut self,
        batch: DeviceBatch<Self::Buffer>,
        mask: &DeviceArray<Self::Buffer>,
    ) -> Result<DeviceBatch<Self::Buffer>>;

    /// `batch` compacted to the rows `keep` (a host bitmap) selects.
    fn keep(&mut self, batch: DeviceBatch<Self::Buffer>, keep: &BooleanBuffer) -> Result<DeviceBatch<Self::Buffer>>;

    /// Fetches and decodes `plan` (the payload's pages of the accepted rows): its batch and log.
    fn payload(&mut self, plan: &ReadPlan) -> Result<(DeviceBatch<Self::Buffer>, IoLog)>;

    /// A batch of no row of `schema`.
    fn empty(&mut self, schema: &SchemaRef) -> Result<DeviceBatch<Self::Buffer>>;

    /// Orders the work of `batch`'s buffers (zipped from both passes) as one (on the GPU: the
    /// stream of its first buffer after the others').
    fn join(&mut self, batch: &DeviceBatch<Self::Buffer>) -> Result<()>;
}

/// A GPU step's two passes: the [`TwoPass`], and the filter lowered over the first pass's columns.
#[derive(Debug, Clone)]
pub(crate) struct DeviceTwoPass {
    pub passes: TwoPass,
    /// The filter over the first pass's decoded columns.
    pub predicate: RowPredicate,
    /// The first pass's decoded schema.
    pub filter_schema: SchemaRef,
    /// The second pass's decoded schema.
    pub payload_schema: SchemaRef,
    /// The output's.
    pub schema: SchemaRef,
}

/// A GPU step after both passes.
pub(crate) struct DeviceSecondPass<B: OwnedBuffer> {
    /// The accepted rows, the caller's columns.
    pub batch: DeviceBatch<B>,
    /// The second pass's plan and log (none where no row was accepted).
    pub second: Option<(Arc<ReadPlan>, IoLog)>,
    /// Rows the first pass read, and those accepted.
    pub rows: (u64, u64),
    pub bytes: PassBytes,
}

impl DeviceTwoPass {
    /// The GPU's two passes of `passes`, with the first pass's and second pass's decoded schemas;
    /// `Err(why)` where the row filter cannot run the filter over the first pass's columns.
    pub(crate) fn plan(
        passes: TwoPass,
        filter_schema: SchemaRef,
        payload_schema: SchemaRef,
    ) -> std::result::Result<Self, String> {
        let predicate = crate::filter::lower(&passes.filter.predicate, &filter_schema).map_err(|e| e.to_string())?;
        for &(pass, i) in &passes.output {
            let f = match pass {
                Pass::Filter => filter_schema.fields().get(i),
                Pass::Payload => payload_schema.fields().get(i),
            }
            .ok_or("the passes' decoded schemas lack a column")?;
            if pass == Pass::Filter {
                crate::decode::row_filter::compaction_support(f.data_type())
                    .map_err(|why| format!("column {}: {why}", f.name()))?;
            }
        }
        let schema = passes.output_schema(&filter_schema, &payload_schema);
        Ok(Self {
            passes,
            predicate,
            filter_schema,
            payload_schema,
            schema,
        })
    }

    /// The second pass of a step whose first pass (`first`) decoded into `batch`: the filter
    /// evaluated into a mask (none where the statistics accept every row), the payload's pages of
    /// the accepted rows fetched and decoded, the filter's columns compacted, both zipped.
    pub(crate) fn second_pass<X: SecondPassExec>(
        &self,
        source: &ParquetSource,
        first: &ReadPlan,
        batch: DeviceBatch<X::Buffer>,
        exec: &mut X,
    ) -> Result<DeviceSecondPass<X::Buffer>> {
        let rows_in = batch.num_rows as u64;
        let (batch, mask) = if self.passes.filter.accepts_whole(&first.row_groups) {
            (batch, None)
        } else {
            match exec.mask(batch, &self.predicate)? {
                Filtered::Mask { batch, mask, .. } => (batch, Some(mask)),
                Filtered::Rows(_) => return Err(Error::device("the GPU row filter", "rows where a mask was asked")),
            }
        };
        let host_mask = match &mask {
            Some(m) => Some(
                m.to_host()?
                    .as_any()
                    .downcast_ref::<BooleanArray>()
                    .cloned()
                    .ok_or_else(|| Error::device("the GPU row filter", "a mask that is not boolean"))?,
            ),
            None => None,
        };
        let location = source.location();
        let rows = self
            .passes
            .payload_rows(source.metadata(), first, host_mask.as_ref(), &location)?;
        let second = self.passes.payload_plan(source, first, &rows.runs)?;
        let bytes = self.passes.bytes(source, first, second.as_ref())?;
        let (payload, second) = match second {
            Some(plan) => {
                // The runs decoded, then cut to the accepted rows among them.
                let (mut b, log) = exec.payload(&plan)?;
                if let Some(keep) = rows.keep_in(&plan.row_groups) {
                    b = exec.keep(b, &keep)?;
                }
                (b, Some((Arc::new(plan), log)))
            }
            None => (exec.empty(&self.payload_schema)?, None),
        };
        // The filter's columns the caller selected, compacted to the accepted rows.
        let keep: Vec<usize> = self
            .passes
            .output
            .iter()
            .filter(|(p, _)| *p == Pass::Filter)
            .map(|&(_, i)| i)
            .collect();
        let mut kept = take_columns(batch, &keep);
        if let (Some(m), Some(h)) = (&mask, &host_mask)
            && h.true_count() < h.len()
        {
            kept = exec.compact(kept, m)?;
        }
        if kept.num_rows != payload.num_rows {
            return Err(Error::device(
                format!("filtering {}", location.file.display()),
                format!(
                    "the filter accepted {} rows, the other columns decoded {}",
                    kept.num_rows, payload.num_rows
                ),
            ));
        }
        let num_rows = kept.num_rows;
        let mut from_filter: Vec<Option<DeviceColumn<X::Buffer>>> = kept.columns.into_iter().map(Some).collect();
        let mut from_payload: Vec<Option<DeviceColumn<X::Buffer>>> = payload.columns.into_iter().map(Some).collect();
        let mut k = 0usize;
        let mut columns = Vec::with_capacity(self.passes.output.len());
        for &(pass, i) in &self.passes.output {
            let c = match pass {
                Pass::Filter => {
                    k += 1;
                    from_filter.get_mut(k - 1).and_then(Option::take)
                }
                Pass::Payload => from_payload.get_mut(i).and_then(Option::take),
            };
            columns.push(c.ok_or_else(|| Error::device("zipping the two passes", "a column is missing"))?);
        }
        let batch = DeviceBatch {
            schema: self.schema.clone(),
            num_rows,
            columns,
            row_groups: first.row_groups.clone(),
            location: kept.location,
        };
        exec.join(&batch)?;
        Ok(DeviceSecondPass {
            batch,
            second,
            rows: (rows_in, num_rows as u64),
            bytes,
        })
    }
}

/// `batch`'s columns at `keep`, in that order (its schema projected alike).
fn take_columns<B: OwnedBuffer>(mut batch: DeviceBatch<B>, keep: &[usize]) -> DeviceBatch<B> {
    let mut columns: Vec<Option<DeviceColumn<B>>> = std::mem::take(&mut batch.columns).into_iter().map(Some).collect();
    batch.columns = keep
        .iter()
        .filter_map(|&i| columns.get_mut(i).and_then(Option::take))
        .collect();
    let fields: Vec<_> = keep.iter().map(|&i| batch.schema.field(i).clone()).collect();
    batch.schema = Arc::new(Schema::new(fields));
    batch
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A file of `groups` row groups of 10 rows, for the row counts `accepted_rows` reads.
    fn source(groups: usize) -> (tempfile::TempDir, ParquetSource) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t.parquet");
        let batch = RecordBatch::try_from_iter([(
            "x",
            Arc::new(arrow::array::Int32Array::from(
                (0..10 * groups as i32).collect::<Vec<_>>(),
            )) as ArrayRef,
        )])
        .expect("batch");
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(10))
            .build();
        crate::write_test_file(&path, &batch, Some(props));
        let source = ParquetSource::open(&path).expect("open");
        (dir, source)
    }

    proptest! {
        /// The accepted rows are the held rows (of the row groups, in plan order) the mask sets,
        /// as row ranges of each row group, merged where they touch.
        #[test]
        fn accepted_rows_map_the_mask_onto_the_held_rows(
            order in Just(vec![2usize, 0, 1]).prop_shuffle(),
            held in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 10), 3),
            seed in any::<u64>(),
            nulls in any::<bool>(),
        ) {
            let (_dir, source) = source(3);
            let meta = source.metadata();
            let mut plan = ReadPlan::build(&source, &Projection::All, &RowGroupSelection::Indices(order.clone()), PlanOptions::default()).expect("plan");
            // Held rows: every row of a row group without any, else the rows set in `held`.
            let mut step_rows: Vec<(usize, u64)> = Vec::new();
            for &g in &order {
                let rows: Vec<u64> = (0..10).filter(|&r| held[g][r as usize]).collect();
                let rows = if rows.is_empty() { (0..10).collect() } else { rows };
                if rows.len() < 10 {
                    let mut ranges: Vec<Range<u64>> = Vec::new();
                    for &r in &rows {
                        match ranges.last_mut() {
                            Some(l) if l.end == r => l.end = r + 1,
                            _ => ranges.push(r..r + 1),
                        }
                    }
                    plan.rows.insert(g, ranges);
                }
                step_rows.extend(rows.into_iter().map(|r| (g, r)));
            }
            let mut next = crate::decode::host_kernels::xorshift(seed);
            let mask: BooleanArray = (0..step_rows.len())
                .map(|_| {
                    let v = next() % 3;
                    if nulls && v == 2 { None } else { Some(v == 1) }
                })
                .collect();
            let got = accepted_rows(meta, &plan, Some(&mask), &source.location()).expect("accepted");
            let mut want: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
            for (i, &(g, r)) in step_rows.iter().enumerate() {
                if mask.is_valid(i) && mask.value(i) {
                    want.entry(g).or_default().push(r);
                }
            }
            let flat: BTreeMap<usize, Vec<u64>> = got.iter().map(|(g, rs)| (*g, rs.iter().flat_map(|r| r.clone()).collect())).collect();
            prop_assert_eq!(&flat, &want);
            for rs in got.values() {
                // Sorted, disjoint, non-empty and not touching: merged.
                prop_assert!(rs.iter().all(|r| r.start < r.end));
                prop_assert!(rs.windows(2).all(|w| w[0].end < w[1].start));
            }
            // No mask: every held row.
            let all = accepted_rows(meta, &plan, None, &source.location()).expect("all");
            prop_assert_eq!(all.values().map(|r| r.iter().map(|x| x.end - x.start).sum::<u64>()).sum::<u64>(), step_rows.len() as u64);
            // A mask of another length is an error.
            let short: BooleanArray = vec![true; step_rows.len() - 1].into();
            prop_assert!(accepted_rows(meta, &plan, Some(&short), &source.location()).is_err());
        }
    }

    /// 4 row groups of 800 rows in pages of 50, with page indexes: `id` (sorted), `k` (nullable
    /// small ints), `s` (nullable strings), `f` (nullable floats), `pair` (a struct) and `tags` (a
    /// list, read whole: repeated).
    fn paged_file(dir: &std::path::Path) -> std::path::PathBuf {
        use arrow::array::*;
        use arrow::datatypes::{DataType, Field};
        let n = 3200usize;
        let mut next = crate::decode::host_kernels::xorshift(7);
        let mut pick = |m: u64| next() % m;
        let id: Int64Array = (0..n as i64).map(Some).collect();
        let k: Int32Array = (0..n).map(|_| (pick(8) > 0).then(|| pick(40) as i32)).collect();
        let words = ["", "a", "b", "cc", "a longer string than twelve"];
        let s: StringArray = (0..n).map(|_| (pick(6) > 0).then(|| words[pick(5) as usize])).collect();
        let f: Float64Array = (0..n)
            .map(|_| (pick(5) > 0).then(|| pick(1000) as f64 / 999.0))
            .collect();
        let a: Int32Array = (0..n).map(|i| (i % 7 > 0).then_some(i as i32)).collect();
        let pair = StructArray::from(vec![(
            Arc::new(Field::new("a", DataType::Int32, true)),
            Arc::new(a) as ArrayRef,
        )]);
        let mut tags = ListBuilder::new(Int32Builder::new());
        for i in 0..n {
            for j in 0..(i % 3) {
                tags.values().append_value((i + j) as i32);
            }
            tags.append(i % 11 != 0);
        }
        let tags = tags.finish();
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(id) as ArrayRef),
            ("k", Arc::new(k)),
            ("s", Arc::new(s)),
            ("f", Arc::new(f)),
            ("pair", Arc::new(pair)),
            ("tags", Arc::new(tags)),
        ])
        .expect("batch");
        let path = dir.join("two_pass.parquet");
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(800))
            .set_data_page_row_count_limit(50)
            .set_write_batch_size(50)
            .set_statistics_enabled(parquet::file::properties::EnabledStatistics::Page)
            .build();
        crate::write_test_file(&path, &batch, Some(props));
        path
    }

    /// The kernels' host references as a second pass's executor (or, `emulated`, the row filter's
    /// CUDA source in the emulation): the payload fetched by the host backend and decoded by the GPU
    /// pipeline on the references.
    struct ReferencePasses<'a> {
        source: &'a ParquetSource,
        emulated: Option<crate::decode::row_filter::tests::EmuExecutor>,
    }

    impl SecondPassExec for ReferencePasses<'_> {
        type Buffer = Vec<u8>;

        fn mask(&mut self, batch: DeviceBatch<Vec<u8>>, predicate: &RowPredicate) -> Result<Filtered<Vec<u8>>> {
            use crate::decode::row_filter::FilterMode;
            match &mut self.emulated {
                Some(emu) => crate::decode::row_filter::filter_batch(emu, batch, predicate, FilterMode::Mask),
                None => batch.filter_host(predicate, FilterMode::Mask),
            }
        }

        fn compact(
            &mut self,
            batch: DeviceBatch<Vec<u8>>,
            mask: &DeviceArray<Vec<u8>>,
        ) -> Result<DeviceBatch<Vec<u8>>> {
            match &mut self.emulated {
                Some(emu) => crate::decode::row_filter::compact_batch(emu, batch, mask),
                None => batch.compact_host(mask),
            }
        }

        fn keep(&mut self, batch: DeviceBatch<Vec<u8>>, keep: &BooleanBuffer) -> Result<DeviceBatch<Vec<u8>>> {
            let mask =
                crate::decode::table::mask_array(keep.sliced().as_slice(), keep.len(), &mut |b: &[u8]| Ok(b.to_vec()))?;
            self.compact(batch, &mask)
        }

        fn payload(&mut self, plan: &ReadPlan) -> Result<(DeviceBatch<Vec<u8>>, IoLog)> {
            let got = crate::io::host::HostBackend::new(1)?.fetch(self.source, plan)?;
            let (batch, _) = crate::decode::gpu::decode_reference(self.source, plan, &got.buffer.into_bytes())?;
            Ok((batch, got.log))
        }

        fn empty(&mut self, schema: &SchemaRef) -> Result<DeviceBatch<Vec<u8>>> {
            crate::decode::table::empty_batch(schema, self.source.location(), &mut |b: &[u8]| Ok(b.to_vec()))
        }

        fn join(&mut self, _: &DeviceBatch<Vec<u8>>) -> Result<()> {
            // Host memory: nothing queued.
            Ok(())
        }
    }

    /// A GPU scan's two passes, on the kernels' references, step by step (one row group a step,
    /// then one step of all): equal to arrow-rs's read filtered exactly (one pass), with the
    /// figures of what each pass read.
    fn check_device_passes(filters: &[&str], emulated: bool) {
        let dir = tempfile::tempdir().expect("dir");
        let path = paged_file(dir.path());
        let projections: [Option<Vec<&str>>; 3] = [None, Some(vec!["s", "pair"]), Some(vec!["tags", "k", "f"])];
        for text in filters {
            for columns in &projections {
                let build = |passes: FilterPasses| {
                    let mut b = crate::Reader::builder(&path)
                        .with_backend(crate::BackendKind::Host)
                        .with_filter(crate::filter::Expr::parse(text).expect("parse"))
                        .with_filter_passes(passes);
                    if let Some(c) = columns {
                        b = b.with_columns(c.clone());
                    }
                    b.build().expect("reader")
                };
                let reader = build(FilterPasses::Two);
                let want = build(FilterPasses::One)
                    .read_batches()
                    .expect("one pass")
                    .concat()
                    .expect("concat");
                let passes =
                    TwoPass::plan(&reader.source, &reader.filter, &reader.plan, FilterPasses::Two).expect("two passes");
                let (filter_schema, _) =
                    crate::decode::pipeline::route_columns(&reader.source, &passes.filter_leaves).expect("routes");
                let (payload_schema, _) =
                    crate::decode::pipeline::route_columns(&reader.source, &passes.payload_leaves).expect("routes");
                let device = DeviceTwoPass::plan(passes, filter_schema, payload_schema).expect("on the GPU");
                // Steps read in one pass (row groups accepted whole) give the same schema.
                let (decoded, _) =
                    crate::decode::pipeline::route_columns(&reader.source, &reader.plan.columns).expect("routes");
                let one = crate::scan::gpu_filter::GpuFilter::plan(
                    &reader.filter,
                    &decoded,
                    crate::filter::FilterMode::Compact,
                )
                .expect("plan")
                .expect("a filter");
                assert_eq!(device.schema, one.output_schema(&decoded), "{text}");
                let groups = reader.plan.row_groups.clone();
                let steps: Vec<Vec<usize>> = if groups.is_empty() {
                    Vec::new()
                } else {
                    let whole = (groups.len() > 1).then(|| groups.clone());
                    groups.iter().map(|&g| vec![g]).chain(whole).collect()
                };
                let mut exec = ReferencePasses {
                    source: &reader.source,
                    emulated: emulated.then(crate::decode::row_filter::tests::EmuExecutor::default),
                };
                let mut by_row_group = Vec::new();
                for step in steps {
                    let whole = groups.len() > 1 && step.len() == groups.len();
                    let first = device
                        .passes
                        .filter_plan(&reader.source, step.clone(), &reader.plan.rows)
                        .expect("plan");
                    let fetched = crate::io::host::HostBackend::new(1)
                        .expect("backend")
                        .fetch(&reader.source, &first)
                        .expect("fetch")
                        .buffer
                        .into_bytes();
                    let (batch, _) =
                        crate::decode::gpu::decode_reference(&reader.source, &first, &fetched).expect("first pass");
                    let done = device
                        .second_pass(&reader.source, &first, batch, &mut exec)
                        .unwrap_or_else(|e| panic!("{text}: {e}"));
                    let got = done.batch.to_host().expect("host copy");
                    assert_eq!(done.rows.1, got.num_rows() as u64, "{text}");
                    assert!(done.bytes.payload <= done.bytes.payload_one_pass, "{text}");
                    assert_eq!(done.second.is_none(), got.num_rows() == 0, "{text}");
                    if whole {
                        assert_eq!(got.schema().fields(), want.schema().fields(), "{text}, {columns:?}");
                        assert_eq!(got.columns(), want.columns(), "{text}, {columns:?}");
                    } else {
                        by_row_group.push(got);
                    }
                }
                if !by_row_group.is_empty() {
                    let got = arrow::compute::concat_batches(&by_row_group[0].schema(), &by_row_group).expect("concat");
                    assert_eq!(got.columns(), want.columns(), "{text}, {columns:?}, step by step");
                }
            }
        }
    }

    proptest! {
        /// The last set bit, zero bytes skipped, at any bit offset.
        #[test]
        fn last_set_finds_the_last_set_bit(
            bits in proptest::collection::vec(proptest::bool::weighted(0.02), 0..300),
            offset in 0usize..20,
        ) {
            let whole = BooleanBuffer::from_iter((0..offset).map(|_| true).chain(bits.iter().copied()));
            let b = whole.slice(offset, bits.len());
            prop_assert_eq!(last_set(&b), bits.iter().rposition(|&x| x));
        }
    }

    #[test]
    fn rows_within_marks_the_accepted_rows_among_the_held() {
        let held = [2..6u64, 10..13, 20..21];
        let rows = [3..5u64, 10..11, 12..13, 20..21];
        let got: Vec<bool> = rows_within(&held, &rows).iter().map(|v| v == Some(true)).collect();
        // Held rows 2 3 4 5 | 10 11 12 | 20.
        assert_eq!(got, [false, true, true, false, true, false, true, true]);
        assert_eq!(rows_within(&held, &[]).true_count(), 0);
        assert_eq!(rows_within(&held, &held).true_count(), 8);
    }

    #[test]
    fn page_runs_close_gaps_that_hold_no_whole_page() {
        let dir = tempfile::tempdir().expect("dir");
        let path = paged_file(dir.path());
        let reader = crate::Reader::builder(&path)
            .with_backend(crate::BackendKind::Host)
            .with_columns(["s", "f"])
            .with_filter(crate::filter::Expr::parse("k < 3").expect("parse"))
            .build()
            .expect("reader");
        let passes = TwoPass::plan(&reader.source, &reader.filter, &reader.plan, FilterPasses::Two).expect("two");
        let meta = reader.source.metadata();
        // Pages of 50 rows: rows 10, 30 and 49 share page 0; 120 is in page 2, past page 1 (50..100).
        let accepted: RowRanges = [(0usize, vec![10..11u64, 30..31, 49..50, 120..121])].into();
        let runs = passes.page_runs(meta, &accepted);
        assert_eq!(runs[&0], vec![10..50, 120..121]);
        // The same pages, so the same bytes, as the accepted rows themselves.
        let first = passes
            .filter_plan(&reader.source, vec![0], &reader.plan.rows)
            .expect("first");
        let plan = passes
            .payload_plan(&reader.source, &first, &runs)
            .expect("plan")
            .expect("rows");
        let direct = ReadPlan::build_paged(
            &reader.source,
            &Projection::Leaves(passes.payload_leaves.clone()),
            &RowGroupSelection::Indices(vec![0]),
            PlanOptions::default(),
            &accepted,
        )
        .expect("direct");
        assert_eq!(plan.chunks, direct.chunks);
        assert_eq!(plan.rows, runs);
        // From a mask of the same rows, word by word.
        let mask: BooleanArray = (0..800u64)
            .map(|r| Some(accepted[&0].iter().any(|a| a.contains(&r))))
            .collect();
        let whole = ReadPlan {
            rows: RowRanges::new(),
            ..first
        };
        let rows = passes
            .payload_rows(meta, &whole, Some(&mask), &reader.source.location())
            .expect("rows");
        assert_eq!(rows.runs, runs);
        assert_eq!(rows.keep[&0].as_ref().map(BooleanBuffer::count_set_bits), Some(4));
        assert!(!rows.keep.contains_key(&1));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The runs and kept rows computed from a mask, word by word, equal those computed range by
        /// range from the accepted rows: over random held rows (first passes read page by page), of
        /// row groups in any order, with nulls in the mask, and payloads of columns paged alike or
        /// not (`id` and `pair`'s leaf have pages of their own sizes).
        #[test]
        fn payload_rows_equal_the_page_runs_of_the_accepted_rows(
            order in Just(vec![3usize, 1, 2]).prop_shuffle(),
            held in proptest::collection::vec(proptest::collection::vec(0u64..800, 0..6), 3),
            density in 0u64..4,
            seed in any::<u64>(),
            payload in 0usize..3,
        ) {
            let dir = tempfile::tempdir().expect("dir");
            let path = paged_file(dir.path());
            let columns = [vec!["s", "f"], vec!["s", "pair", "id"], vec!["tags", "f"]][payload].clone();
            let reader = crate::Reader::builder(&path)
                .with_backend(crate::BackendKind::Host)
                .with_columns(columns)
                .with_filter(crate::filter::Expr::parse("k < 3").expect("parse"))
                .build()
                .expect("reader");
            let passes = TwoPass::plan(&reader.source, &reader.filter, &reader.plan, FilterPasses::Two).expect("two");
            let meta = reader.source.metadata();
            let mut first = ReadPlan::build(&reader.source, &Projection::Leaves(passes.filter_leaves.clone()), &RowGroupSelection::Indices(order.clone()), PlanOptions::default()).expect("plan");
            // Held rows: cut points in each row group give ranges, every other one held.
            let mut total = 0u64;
            for (k, &g) in order.iter().enumerate() {
                let mut cuts = held[k].clone();
                cuts.extend([0, 800]);
                cuts.sort_unstable();
                cuts.dedup();
                let ranges: Vec<Range<u64>> = cuts.windows(2).step_by(2).map(|w| w[0]..w[1]).collect();
                total += ranges.iter().map(|r| r.end - r.start).sum::<u64>();
                if ranges != [0..800] {
                    first.rows.insert(g, ranges);
                }
            }
            let mut next = crate::decode::host_kernels::xorshift(seed);
            // Runs of equal values, so that whole pages are accepted or not.
            let mut value = None;
            let mask: BooleanArray = (0..total)
                .map(|_| {
                    if next().is_multiple_of(40) || value.is_none() {
                        value = Some(match next() % 5 { 0 => None, v => Some(v <= density) });
                    }
                    value.flatten().or_else(|| next().is_multiple_of(3).then_some(false))
                })
                .collect();
            let location = reader.source.location();
            // With the mask, and without (every held row accepted; runs may close gaps between them).
            for mask in [Some(&mask), None] {
                let got = passes.payload_rows(meta, &first, mask, &location).expect("rows");
                let accepted = accepted_rows(meta, &first, mask, &location).expect("accepted");
                let runs = passes.page_runs(meta, &accepted);
                prop_assert_eq!(&got.runs, &runs);
                for (g, r) in &runs {
                    let want = rows_within(r, &accepted[g]);
                    let keep = got.keep[g].clone().unwrap_or_else(|| BooleanBuffer::new_set(want.len()));
                    prop_assert_eq!(BooleanArray::new(keep, None), want);
                }
                prop_assert_eq!(got.keep.len(), runs.len());
            }
            // A mask of another length is an error.
            let short: BooleanArray = vec![true; total as usize + 1].into();
            prop_assert!(passes.payload_rows(meta, &first, Some(&short), &location).is_err());
        }
    }

    #[test]
    fn steps_split_where_the_statistics_stop_accepting_whole_row_groups() {
        let dir = tempfile::tempdir().expect("dir");
        let path = paged_file(dir.path());
        let filter = |text: &str| {
            crate::Reader::builder(&path)
                .with_backend(crate::BackendKind::Host)
                .with_filter(crate::filter::Expr::parse(text).expect("parse"))
                .build()
                .expect("reader")
                .filter
                .expect("a filter")
        };
        // Ids 0..3200 in row groups of 800: the first pruned, the second partly accepted, the last
        // two whole.
        let f = filter("id >= 1000");
        assert_eq!(f.split_accepted_whole(vec![vec![1, 2, 3]]), [vec![1], vec![2, 3]]);
        assert_eq!(
            f.split_accepted_whole(vec![vec![1, 2], vec![3]]),
            [vec![1], vec![2], vec![3]]
        );
        assert_eq!(f.split_accepted_whole(vec![vec![2, 1, 3]]), [vec![2], vec![1], vec![3]]);
        assert!(f.split_accepted_whole(Vec::new()).is_empty());
        // None accepted whole: the steps as they were.
        let f = filter("k < 3");
        assert_eq!(
            f.split_accepted_whole(vec![vec![0, 1], vec![2, 3]]),
            [vec![0, 1], vec![2, 3]]
        );
    }

    /// Selective, whole row groups accepted by statistics (`id >= 0`), none accepted in some row
    /// groups, and none at all.
    const FILTERS: [&str; 6] = [
        "k < 3",
        "id between 1000 and 1100",
        "k = 5 and f > 0.5",
        "s in ('a', 'b') or k is null",
        "id >= 0",
        "id < 0 or k > 100",
    ];

    #[test]
    fn gpu_passes_equal_one_pass_filtered_exactly() {
        check_device_passes(&FILTERS, false);
    }

    #[test]
    fn gpu_passes_in_the_kernel_emulation() {
        if let Err(why) = crate::decode::kernels::emu::available() {
            crate::test_skip(&why);
            return;
        }
        check_device_passes(&FILTERS[..3], true);
    }

    #[test]
    fn host_passes_read_only_pages_of_accepted_rows() {
        let dir = tempfile::tempdir().expect("dir");
        let path = paged_file(dir.path());
        for text in FILTERS {
            let read = |passes: FilterPasses| {
                crate::Reader::builder(&path)
                    .with_backend(crate::BackendKind::Host)
                    .with_columns(["s", "f", "pair"])
                    .with_filter(crate::filter::Expr::parse(text).expect("parse"))
                    .with_filter_passes(passes)
                    .build()
                    .expect("reader")
                    .read_host()
                    .expect("read")
            };
            let (two, one) = (read(FilterPasses::Two), read(FilterPasses::One));
            assert_eq!(
                two.table.concat().expect("two"),
                one.table.concat().expect("one"),
                "{text}"
            );
            assert!(one.passes.is_none());
            // Row groups accepted whole by the statistics (all of them for `id >= 0`) read in one.
            if text == "id >= 0" {
                assert!(two.passes.is_none(), "{text}");
            }
            let p = two.passes.unwrap_or_default();
            assert_eq!(
                one.io.useful_bytes + p.payload,
                two.io.useful_bytes + p.payload_one_pass,
                "{text}"
            );
        }
        // A selective filter on an unsorted column reads fewer of the other columns' bytes (their
        // dictionary pages still whole; tests/filter.rs counts the pages exactly).
        let selective = crate::Reader::builder(&path)
            .with_backend(crate::BackendKind::Host)
            .with_columns(["s", "f", "pair"])
            .with_filter(crate::filter::Expr::parse("k = 39 and f < 0.1").expect("parse"))
            .with_filter_passes(FilterPasses::Two)
            .build()
            .expect("reader")
            .read_host()
            .expect("read");
        let p = selective.passes.expect("two passes");
        assert!(p.payload < p.payload_one_pass, "{p:?}");
    }

    #[test]
    fn auto_reads_in_one_pass_where_the_payload_is_small_and_cached() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().expect("dir");
        let path = paged_file(dir.path());
        let reader = |passes: FilterPasses| {
            crate::Reader::builder(&path)
                .with_backend(crate::BackendKind::Host)
                .with_columns(["s", "f", "pair"])
                .with_filter(crate::filter::Expr::parse("k = 39 and f < 0.1").expect("parse"))
                .with_filter_passes(passes)
                .build()
                .expect("reader")
        };
        let (auto, two) = (reader(FilterPasses::Auto), reader(FilterPasses::Two));
        let source = auto.source().clone();
        let rows = auto.plan().rows.clone();
        let groups: Vec<usize> = auto.plan().row_groups.clone();
        let (pass_auto, pass_two) = (auto.two_pass().expect("auto"), two.two_pass().expect("two"));
        assert!(!pass_two.in_one(&groups), "the statistics leave rows to evaluate");
        // Just written and read: cached, and a few KiB of other columns. Two passes stay two.
        std::fs::read(&path).expect("read");
        assert!(pass_auto.one_pass_step(&source, &groups, &rows).expect("auto"));
        assert!(!pass_two.one_pass_step(&source, &groups, &rows).expect("two"));
        let read = auto.read_host().expect("read");
        assert!(read.passes.is_none(), "read in one pass");
        // Out of the page cache: a second pass may save disk reads.
        let file = std::fs::File::open(&path).expect("open");
        file.sync_all().expect("sync"); // dirty pages stay cached
        // SAFETY: posix_fadvise on an open descriptor; it only advises the kernel.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        match crate::io::pread::uncached_share(&file, [(0, file.metadata().expect("len").len())]) {
            Some(s) if s > HOT_UNCACHED => {
                assert!(!pass_auto.one_pass_step(&source, &groups, &rows).expect("auto"));
            }
            other => println!("skipped the cold half: the file system kept the pages cached ({other:?})"),
        }
    }
}

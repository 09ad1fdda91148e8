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

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
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
}

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
        })
    }

    /// The first pass's plan of the row groups `group` (the filter's columns, read page by page
    /// where pruning kept `rows`).
    pub(crate) fn filter_plan(&self, source: &ParquetSource, group: Vec<usize>, rows: &RowRanges) -> Result<ReadPlan> {
        ReadPlan::build_paged(
            source,
            &Projection::Leaves(self.filter_leaves.clone()),
            &RowGroupSelection::Indices(group),
            self.options,
            rows,
        )
    }

    /// The second pass's plan after the first pass of `first` accepted `accepted`: the payload's
    /// pages holding those rows, of the row groups with any; `None` where no row is accepted.
    pub(crate) fn payload_plan(
        &self,
        source: &ParquetSource,
        first: &ReadPlan,
        accepted: &RowRanges,
    ) -> Result<Option<ReadPlan>> {
        let groups: Vec<usize> = first
            .row_groups
            .iter()
            .copied()
            .filter(|g| accepted.contains_key(g))
            .collect();
        if groups.is_empty() {
            return Ok(None);
        }
        ReadPlan::build_paged(
            source,
            &Projection::Leaves(self.payload_leaves.clone()),
            &RowGroupSelection::Indices(groups),
            self.options,
            accepted,
        )
        .map(Some)
    }

    /// The figures of a step whose first pass read `first` and whose second read `second`.
    pub(crate) fn bytes(
        &self,
        source: &ParquetSource,
        first: &ReadPlan,
        second: Option<&ReadPlan>,
    ) -> Result<PassBytes> {
        let one_pass = ReadPlan::build_paged(
            source,
            &Projection::Leaves(self.payload_leaves.clone()),
            &RowGroupSelection::Indices(first.row_groups.clone()),
            self.options,
            &first.rows,
        )?;
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
        let accepted = accepted_rows(source.metadata(), first, mask.as_ref(), &source.location())?;
        let second = self.payload_plan(source, first, &accepted)?;
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
        let table = self.zip_host(first, filtered, mask.as_ref(), payload, &accepted)?;
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

    /// The first pass's table (all rows it read) filtered by `mask`, zipped row group by row group
    /// with the second pass's table (the accepted rows of the row groups in `accepted`), in the
    /// second pass's batches.
    fn zip_host(
        &self,
        first: &ReadPlan,
        filtered: DecodedTable,
        mask: Option<&BooleanArray>,
        payload: DecodedTable,
        accepted: &RowRanges,
    ) -> Result<DecodedTable> {
        let location = Location::default();
        let fail = |e: arrow::error::ArrowError| Error::parquet(location.clone(), e);
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
                kept.push(match mask {
                    Some(m) => arrow::compute::filter_record_batch(b, &m.slice(at, n)).map_err(fail)?,
                    None => b.clone(),
                });
                at += n;
            }
            if !accepted.contains_key(&g) {
                row_group_batches.push(start..start);
                continue;
            }
            let kept = arrow::compute::concat_batches(&filtered.schema, &kept).map_err(fail)?;
            let slices = payload.row_group_batches.get(payload_slot).cloned().unwrap_or(0..0);
            payload_slot += 1;
            let mut offset = 0usize;
            for p in &payload.batches[slices] {
                let n = p.num_rows();
                if offset + n > kept.num_rows() {
                    break;
                }
                let f = kept.slice(offset, n);
                let columns: Vec<ArrayRef> = self
                    .output
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
        Ok(DecodedTable::from_parts(
            schema,
            batches,
            row_group_batches,
            filtered.location(),
        ))
    }
}

/// A step's two passes on the host: its table, the second pass's plan and log (none where no row
/// was accepted), and the figures.
pub(crate) struct HostSecondPass {
    pub table: DecodedTable,
    pub second: Option<(Arc<ReadPlan>, IoLog)>,
    pub bytes: PassBytes,
}

/// The rows of each row group of `first` that `mask` (over the rows a decode of `first` yields,
/// row groups in plan order; `None`: all) accepts, true and not null; row groups with none left out.
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

    /// Fetches and decodes `plan` (the payload's pages of the accepted rows): its batch and log.
    fn payload(&mut self, plan: &ReadPlan) -> Result<(DeviceBatch<Self::Buffer>, IoLog)>;

    /// A batch of no row of `schema`.
    fn empty(&mut self, schema: &SchemaRef) -> Result<DeviceBatch<Self::Buffer>>;
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
        let accepted = accepted_rows(source.metadata(), first, host_mask.as_ref(), &location)?;
        let second = self.passes.payload_plan(source, first, &accepted)?;
        let bytes = self.passes.bytes(source, first, second.as_ref())?;
        let (payload, second) = match second {
            Some(plan) => {
                let (b, log) = exec.payload(&plan)?;
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
        Ok(DeviceSecondPass {
            batch: DeviceBatch {
                schema: self.schema.clone(),
                num_rows,
                columns,
                row_groups: first.row_groups.clone(),
                location: kept.location,
            },
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
        let mut w = parquet::arrow::ArrowWriter::try_new(
            std::fs::File::create(&path).expect("create"),
            batch.schema(),
            Some(props),
        )
        .expect("writer");
        w.write(&batch).expect("write");
        w.close().expect("close");
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
}

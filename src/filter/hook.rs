//! The filter's part in a [`crate::Reader`]: at build, type the filter against the file, prune the
//! row groups, and widen the projection by the filter's columns; after a host decode, keep the rows
//! the filter accepts and drop the columns only the filter needed.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;

use super::{Expr, Predicate, ScanSelection, prune};
use crate::decode::host::DecodedTable;
use crate::error::{Error, Result};
use crate::metadata::ParquetSource;
use crate::plan::{Projection, RowGroupSelection, resolve_projection};
use crate::report::PruningReport;

/// The share of kept rows the statistics must prove accepted for a step to read in one pass
/// ([`PlannedFilter::accepts_most`]). TPC-H Q1 on lineitem sorted by date leaves one row group not
/// accepted whole, 98.8 % of whose kept rows its page statistics prove (SF1); at SF10 on the H200
/// it read in 30.6 ms in one pass and 33.3 ms in two. Q6 has none proven (its discount bounds span
/// every page), and reads far fewer bytes in two.
pub const MOSTLY_ACCEPTED: f64 = 0.9;

/// A filter planned for one file.
#[derive(Debug, Clone)]
pub struct PlannedFilter {
    /// The filter as given.
    pub expr: Expr,
    /// Typed against the file.
    pub predicate: Predicate,
    /// What pruning kept.
    pub selection: ScanSelection,
    /// The projection to read: the caller's, plus the filter's columns it lacks.
    pub projection: Projection,
    /// The row groups to read: the caller's, less the pruned ones.
    pub row_groups: RowGroupSelection,
    /// Top-level columns read only for the filter, dropped after it.
    pub added_columns: Vec<String>,
}

impl PlannedFilter {
    /// Types `expr` against `source`, prunes the row groups of `row_groups` (their chunks in
    /// `projection` laid out page by page), and widens `projection` by the filter's columns.
    pub fn plan(
        source: &ParquetSource,
        expr: &Expr,
        projection: &Projection,
        row_groups: &RowGroupSelection,
    ) -> Result<Self> {
        let meta = source.metadata();
        let location = source.location();
        let schema = parquet::arrow::parquet_to_arrow_schema(
            meta.file_metadata().schema_descr(),
            meta.file_metadata().key_value_metadata(),
        )
        .map_err(|e| Error::parquet(location.clone(), e))?;
        let predicate = expr.bind(&schema, &location)?;
        let descr = meta.file_metadata().schema_descr();
        let leaf_of =
            |name: &str| (0..descr.num_columns()).find(|&i| descr.column(i).path().parts() == [name.to_string()]);
        let mut added_columns = Vec::new();
        let projection = match projection {
            Projection::All => Projection::All,
            Projection::Names(names) => {
                let mut names = names.clone();
                for c in predicate.columns() {
                    if !names.contains(&c) {
                        names.push(c.clone());
                        added_columns.push(c);
                    }
                }
                Projection::Names(names)
            }
            Projection::Leaves(leaves) => {
                let mut leaves = leaves.clone();
                for c in predicate.columns() {
                    match leaf_of(&c) {
                        Some(l) if leaves.contains(&l) => {}
                        Some(l) => {
                            leaves.push(l);
                            added_columns.push(c);
                        }
                        None => {
                            return Err(Error::InvalidRequest {
                                location: crate::error::Location {
                                    column: Some(c),
                                    ..location
                                },
                                message: "the filter's column is not a leaf column of the file".into(),
                            });
                        }
                    }
                }
                Projection::Leaves(leaves)
            }
        };
        let n = meta.num_row_groups();
        let asked: Vec<usize> = match row_groups {
            RowGroupSelection::All => (0..n).collect(),
            RowGroupSelection::Indices(ix) => ix.clone(),
        };
        // A bad selection is the plan's to report; prune nothing then.
        let valid = asked.iter().all(|&g| g < n);
        let leaves = resolve_projection(source, &projection)?;
        let to_prune = if valid { asked.clone() } else { Vec::new() };
        let selection = prune(
            meta,
            &schema,
            &predicate,
            &to_prune,
            &leaves,
            Some(source.file().as_ref()),
            &location,
        )?;
        let row_groups = if valid {
            RowGroupSelection::Indices(selection.row_group_indices())
        } else {
            row_groups.clone()
        };
        Ok(Self {
            expr: expr.clone(),
            predicate,
            selection,
            projection,
            row_groups,
            added_columns,
        })
    }

    /// What pruning did.
    pub fn report(&self) -> &PruningReport {
        &self.selection.report
    }

    /// The rows that may match, per surviving row group: what a page-level read fetches and
    /// decodes ([`crate::plan::ReadPlan::build_paged`]).
    pub fn rows(&self) -> std::collections::BTreeMap<usize, Vec<std::ops::Range<u64>>> {
        self.selection
            .row_groups
            .iter()
            .map(|g| (g.row_group, g.rows.clone()))
            .collect()
    }

    /// Keeps the rows of `batch` the filter accepts, then drops the columns read only for it.
    pub fn apply_batch(&self, batch: &arrow::record_batch::RecordBatch) -> Result<arrow::record_batch::RecordBatch> {
        let keep: Vec<usize> = (0..batch.num_columns())
            .filter(|&i| !self.added_columns.contains(batch.schema().field(i).name()))
            .collect();
        self.predicate
            .filter(batch)?
            .project(&keep)
            .map_err(|e| Error::parquet(crate::error::Location::default(), e))
    }

    /// Whether the statistics prove every row of `row_groups` accepted (none evaluated then).
    pub(crate) fn accepts_whole(&self, row_groups: &[usize]) -> bool {
        !row_groups.is_empty()
            && row_groups.iter().all(|g| {
                self.selection
                    .row_groups
                    .iter()
                    .any(|s| s.row_group == *g && s.all_accepted)
            })
    }

    /// Whether the statistics (of the row groups, or of their pages) prove at least
    /// [`MOSTLY_ACCEPTED`] of the rows pruning kept in `row_groups` accepted: their other columns'
    /// pages are nearly all needed anyway, so reading the filter's columns first cannot save what
    /// waiting for a second fetch costs.
    pub(crate) fn accepts_most(&self, row_groups: &[usize]) -> bool {
        let len = |rs: &[std::ops::Range<u64>]| rs.iter().map(|r| r.end - r.start).sum::<u64>();
        let (mut sure, mut kept) = (0u64, 0u64);
        for s in self
            .selection
            .row_groups
            .iter()
            .filter(|s| row_groups.contains(&s.row_group))
        {
            sure += len(&s.surely_accepted);
            kept += len(&s.rows);
        }
        kept > 0 && sure as f64 >= MOSTLY_ACCEPTED * kept as f64
    }

    /// Each group of consecutive row groups cut into runs of those the statistics accept whole and
    /// of the others: a step of the first kind reads and decodes nothing for the filter, so a step
    /// is better not a mix of both.
    pub(crate) fn split_accepted_whole(&self, groups: Vec<Vec<usize>>) -> Vec<Vec<usize>> {
        let mut out: Vec<Vec<usize>> = Vec::with_capacity(groups.len());
        for group in groups {
            let start = out.len();
            for g in group {
                match out.get_mut(start..).and_then(|runs| runs.last_mut()) {
                    Some(run) if self.accepts_whole(run) == self.accepts_whole(&[g]) => run.push(g),
                    _ => out.push(vec![g]),
                }
            }
        }
        out
    }

    /// Keeps the rows of `table` (the rows of `row_groups`) the filter accepts, then drops the
    /// columns read only for it.
    pub(crate) fn apply(&self, mut table: DecodedTable, row_groups: &[usize]) -> Result<DecodedTable> {
        let whole = self.accepts_whole(row_groups);
        let keep: Vec<usize> = (0..table.schema.fields().len())
            .filter(|&i| !self.added_columns.contains(table.schema.field(i).name()))
            .collect();
        let schema: SchemaRef = Arc::new(
            table
                .schema
                .project(&keep)
                .map_err(|e| Error::parquet(crate::error::Location::default(), e))?,
        );
        let mut batches = Vec::with_capacity(table.batches.len());
        for b in &table.batches {
            let kept = if whole { b.clone() } else { self.predicate.filter(b)? };
            batches.push(
                kept.project(&keep)
                    .map_err(|e| Error::parquet(crate::error::Location::default(), e))?,
            );
        }
        table.schema = schema;
        table.batches = batches;
        Ok(table)
    }
}

/// The filter of a read, shared by the reader and the chunks it reads.
pub(crate) type SharedFilter = Option<Arc<PlannedFilter>>;

//! The row filter of a GPU scan: after a step's columns are decoded, the reader's filter
//! ([`crate::ReaderBuilder::with_filter`]), lowered to the GPU row filter ([`crate::filter::lower`]),
//! is evaluated on the device into a mask; the columns read only for the filter are dropped, and the
//! others compacted to the selected rows (or left whole with the mask, [`FilterMode::Mask`]). Where the
//! filter cannot run on the GPU (a leaf on a type the row filter has no comparison for, a column it
//! cannot compact) the steps are left unfiltered, with the filter's columns, and the reason is
//! reported: the caller filters on the host ([`crate::device_read::DeviceRead::to_host`] does).

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;
use serde::Serialize;

use crate::decode::gpu::GpuDecoder;
use crate::decode::row_filter::{FilterMode, Filtered, RowPredicate, compaction_support};
use crate::decode::table::{DeviceArray, DeviceBatch};
use crate::error::{Error, Result};
use crate::filter::{PlannedFilter, SharedFilter, lower};

/// Where a GPU scan's row filter runs.
#[derive(Debug, Clone)]
pub(crate) enum GpuFilter {
    /// On the device, after each step's decode.
    Device {
        /// The filter lowered over the decoded columns.
        predicate: RowPredicate,
        /// Compacted rows, or a mask.
        mode: FilterMode,
        /// Indices of the decoded columns kept (those read only for the filter left out).
        keep: Vec<usize>,
        /// The schema of the kept columns.
        schema: SchemaRef,
    },
    /// On the host, by the caller, for this reason.
    Host {
        /// The filter to apply.
        filter: Arc<PlannedFilter>,
        /// Why not on the GPU.
        reason: String,
    },
}

impl GpuFilter {
    /// The reader's `filter` for steps decoded into columns of `decoded`, in `mode`; `None` without a
    /// filter.
    pub(crate) fn plan(filter: &SharedFilter, decoded: &SchemaRef, mode: FilterMode) -> Result<Option<Self>> {
        let Some(filter) = filter else { return Ok(None) };
        let host = |reason: String| {
            Ok(Some(GpuFilter::Host {
                filter: filter.clone(),
                reason,
            }))
        };
        let predicate = match lower(&filter.predicate, decoded) {
            Ok(p) => p,
            Err(why) => return host(format!("the GPU row filter cannot run it ({why})")),
        };
        let keep: Vec<usize> = (0..decoded.fields().len())
            .filter(|&i| !filter.added_columns.contains(decoded.field(i).name()))
            .collect();
        if mode == FilterMode::Compact {
            for &i in &keep {
                let f = decoded.field(i);
                if let Err(why) = compaction_support(f.data_type()) {
                    return host(format!("column {}: {why}", f.name()));
                }
            }
        }
        let schema = Arc::new(
            decoded
                .project(&keep)
                .map_err(|e| Error::device("planning the GPU row filter", e))?,
        );
        Ok(Some(GpuFilter::Device {
            predicate,
            mode,
            keep,
            schema,
        }))
    }

    /// The schema of the steps' batches: the kept columns' where the filter runs on the GPU.
    pub(crate) fn output_schema(&self, decoded: &SchemaRef) -> SchemaRef {
        match self {
            GpuFilter::Device { schema, .. } => schema.clone(),
            GpuFilter::Host { .. } => decoded.clone(),
        }
    }

    /// The filter left to the host, if any.
    pub(crate) fn on_host(&self) -> SharedFilter {
        match self {
            GpuFilter::Host { filter, .. } => Some(filter.clone()),
            GpuFilter::Device { .. } => None,
        }
    }

    /// `batch` filtered on `decoder`'s GPU: the kept columns, compacted (or whole, with the mask of
    /// the selected rows), and what it did. A filter left to the host leaves the batch as it is.
    pub(crate) fn apply(
        &self,
        decoder: &GpuDecoder,
        batch: DeviceBatch,
    ) -> Result<(DeviceBatch, Option<DeviceArray>, Option<StepFilter>)> {
        let GpuFilter::Device {
            predicate,
            mode,
            keep,
            schema,
        } = self
        else {
            return Ok((batch, None, None));
        };
        let started = Instant::now();
        let rows_in = batch.num_rows as u64;
        let all_kept = keep.len() == batch.columns.len();
        let (batch, mask, kept) = if *mode == FilterMode::Compact && all_kept {
            // Nothing to drop: one pass evaluates and compacts.
            match decoder.filter(batch, predicate, FilterMode::Compact)? {
                Filtered::Rows(b) => {
                    let n = b.num_rows;
                    (b, None, n)
                }
                Filtered::Mask { .. } => return Err(Error::device("the GPU row filter", "a mask where rows were asked")),
            }
        } else {
            // The mask over every column, then the filter's own columns dropped before the others
            // are compacted (none is, where every row is selected).
            let Filtered::Mask {
                batch,
                mask,
                selected,
            } = decoder.filter(batch, predicate, FilterMode::Mask)?
            else {
                return Err(Error::device("the GPU row filter", "rows where a mask was asked"));
            };
            let batch = project(batch, keep, schema);
            match mode {
                FilterMode::Mask => (batch, Some(mask), selected),
                FilterMode::Compact if selected == batch.num_rows => (batch, None, selected),
                FilterMode::Compact => {
                    let b = batch.compact(&mask, decoder)?;
                    (b, None, selected)
                }
            }
        };
        let stats = StepFilter {
            rows_in,
            rows_kept: kept as u64,
            time: started.elapsed(),
        };
        Ok((batch, mask, Some(stats)))
    }
}

/// `batch`'s columns at `keep`, with `schema`.
fn project(mut batch: DeviceBatch, keep: &[usize], schema: &SchemaRef) -> DeviceBatch {
    let mut columns: Vec<Option<_>> = std::mem::take(&mut batch.columns).into_iter().map(Some).collect();
    batch.columns = keep.iter().filter_map(|&i| columns.get_mut(i).and_then(Option::take)).collect();
    batch.schema = schema.clone();
    batch
}

/// What a step's GPU row filter did.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct StepFilter {
    /// Rows decoded.
    pub rows_in: u64,
    /// Rows the filter accepted (kept, or set in the mask).
    pub rows_kept: u64,
    /// Time the filter took (evaluation, compaction).
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub time: Duration,
}

/// What a GPU read's row filter did, in all.
#[derive(Debug, Clone, Serialize)]
pub struct RowFilterReport {
    /// `"gpu"` or `"host"`.
    pub on: &'static str,
    /// Why not on the GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `"compact"` or `"mask"` (on the GPU).
    pub mode: &'static str,
    /// Rows decoded (on the GPU; the host's are counted by whoever filters them).
    pub rows_in: u64,
    /// Rows accepted.
    pub rows_kept: u64,
    /// Rows removed.
    pub rows_removed: u64,
    /// Time the filter took on the GPU, over all steps.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub time: Duration,
}

impl RowFilterReport {
    /// The report of `filter` over steps that did `steps`.
    pub(crate) fn of(filter: &GpuFilter, steps: impl Iterator<Item = Option<StepFilter>>) -> Self {
        let (mut rows_in, mut rows_kept, mut time) = (0, 0, Duration::ZERO);
        for s in steps.flatten() {
            rows_in += s.rows_in;
            rows_kept += s.rows_kept;
            time += s.time;
        }
        let (on, reason, mode) = match filter {
            GpuFilter::Device { mode, .. } => (
                "gpu",
                None,
                match mode {
                    FilterMode::Compact => "compact",
                    FilterMode::Mask => "mask",
                },
            ),
            GpuFilter::Host { reason, .. } => ("host", Some(reason.clone()), "compact"),
        };
        Self {
            on,
            reason,
            mode,
            rows_in,
            rows_kept,
            rows_removed: rows_in - rows_kept.min(rows_in),
            time,
        }
    }

    /// One line for the text report.
    pub fn line(&self) -> String {
        match &self.reason {
            Some(why) => format!("row filter: on the host after the GPU decode, as {why}\n"),
            None => format!(
                "row filter: on the GPU ({}), kept {} of {} decoded rows ({} removed) in {:.1} ms\n",
                self.mode,
                self.rows_kept,
                self.rows_in,
                self.rows_removed,
                self.time.as_secs_f64() * 1e3
            ),
        }
    }
}

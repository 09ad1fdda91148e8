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

use crate::decode::exec::OwnedBuffer;
use crate::decode::row_filter::{FilterMode, Filtered, RowPredicate, compaction_support};
use crate::decode::table::{DeviceArray, DeviceBatch};
use crate::error::{Error, Result};
use crate::filter::{PlannedFilter, SharedFilter, lower};
use crate::scan::two_pass::PassBytes;

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
        /// The planned filter: a step of row groups whose statistics prove every row accepted
        /// ([`PlannedFilter::accepts_whole`]) is not evaluated (compacting mode).
        filter: Arc<PlannedFilter>,
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
            filter: filter.clone(),
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

    /// `batch` filtered by `filter` (the GPU's [`DeviceBatch::filter`], or the references'
    /// `filter_host`) and `compact` (`compact`, `compact_host`): the kept columns, compacted (or
    /// whole, with the mask of the selected rows), and what it did. A filter left to the host leaves
    /// the batch as it is.
    #[allow(clippy::type_complexity)]
    pub(crate) fn apply<B: OwnedBuffer>(
        &self,
        batch: DeviceBatch<B>,
        filter: impl FnOnce(DeviceBatch<B>, &RowPredicate, FilterMode) -> Result<Filtered<B>>,
        compact: impl FnOnce(DeviceBatch<B>, &DeviceArray<B>) -> Result<DeviceBatch<B>>,
    ) -> Result<(DeviceBatch<B>, Option<DeviceArray<B>>, Option<StepFilter>)> {
        let GpuFilter::Device {
            predicate,
            mode,
            keep,
            schema,
            filter: planned,
        } = self
        else {
            return Ok((batch, None, None));
        };
        let started = Instant::now();
        let rows_in = batch.num_rows as u64;
        if *mode == FilterMode::Compact && planned.accepts_whole(&batch.row_groups) {
            // Every row accepted, as the statistics prove: only the filter's own columns dropped.
            let stats = StepFilter {
                rows_in,
                rows_kept: rows_in,
                time: started.elapsed(),
                passes: None,
            };
            return Ok((project(batch, keep, schema), None, Some(stats)));
        }
        let all_kept = keep.len() == batch.columns.len();
        let (batch, mask, kept) = if *mode == FilterMode::Compact && all_kept {
            // Nothing to drop: one pass evaluates and compacts.
            match filter(batch, predicate, FilterMode::Compact)? {
                Filtered::Rows(b) => {
                    let n = b.num_rows;
                    (b, None, n)
                }
                Filtered::Mask { .. } => {
                    return Err(Error::device("the GPU row filter", "a mask where rows were asked"));
                }
            }
        } else {
            // The mask over every column, then the filter's own columns dropped before the others
            // are compacted (none is, where every row is selected).
            let Filtered::Mask { batch, mask, selected } = filter(batch, predicate, FilterMode::Mask)? else {
                return Err(Error::device("the GPU row filter", "rows where a mask was asked"));
            };
            let batch = project(batch, keep, schema);
            match mode {
                FilterMode::Mask => (batch, Some(mask), selected),
                FilterMode::Compact if selected == batch.num_rows => (batch, None, selected),
                FilterMode::Compact => {
                    let b = compact(batch, &mask)?;
                    (b, None, selected)
                }
            }
        };
        let stats = StepFilter {
            rows_in,
            rows_kept: kept as u64,
            time: started.elapsed(),
            passes: None,
        };
        Ok((batch, mask, Some(stats)))
    }
}

/// `batch`'s columns at `keep`, with `schema`.
fn project<B: OwnedBuffer>(mut batch: DeviceBatch<B>, keep: &[usize], schema: &SchemaRef) -> DeviceBatch<B> {
    let mut columns: Vec<Option<_>> = std::mem::take(&mut batch.columns).into_iter().map(Some).collect();
    batch.columns = keep
        .iter()
        .filter_map(|&i| columns.get_mut(i).and_then(Option::take))
        .collect();
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
    /// Read in two passes (the filter's columns first): what each read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passes: Option<PassBytes>,
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
    /// Read in two passes (the filter's columns first): what each read, over all steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passes: Option<PassBytes>,
    /// Steps that ran the filter.
    pub steps: u64,
    /// Of them, steps read in two passes (the others read every column in one: statistics
    /// accepting their rows, `FilterPasses::One`, or `Auto` with their other columns' pages few and
    /// in the page cache).
    pub steps_in_two_passes: u64,
}

impl RowFilterReport {
    /// The report of `filter` over steps that did `steps`.
    pub(crate) fn of(filter: &GpuFilter, steps: impl Iterator<Item = Option<StepFilter>>) -> Self {
        let (mut rows_in, mut rows_kept, mut time) = (0, 0, Duration::ZERO);
        let mut passes: Option<PassBytes> = None;
        let (mut steps_run, mut steps_in_two_passes) = (0, 0);
        for s in steps.flatten() {
            rows_in += s.rows_in;
            rows_kept += s.rows_kept;
            time += s.time;
            steps_run += 1;
            if let Some(p) = &s.passes {
                passes.get_or_insert_default().add(p);
                steps_in_two_passes += 1;
            }
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
            passes,
            steps: steps_run,
            steps_in_two_passes,
        }
    }

    /// One line for the text report.
    pub fn line(&self) -> String {
        let line = match &self.reason {
            Some(why) => format!("row filter: on the host after the GPU decode, as {why}\n"),
            None => format!(
                "row filter: on the GPU ({}), kept {} of {} decoded rows ({} removed) in {:.1} ms\n",
                self.mode,
                self.rows_kept,
                self.rows_in,
                self.rows_removed,
                self.time.as_secs_f64() * 1e3
            ),
        };
        let line = match &self.passes {
            Some(p) => line + &p.line(),
            None => line,
        };
        match self.reason {
            None if self.steps > 0 => format!(
                "{line}passes: {} of {} steps in two passes, the others in one\n",
                self.steps_in_two_passes, self.steps
            ),
            _ => line,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::*;
    use arrow::record_batch::RecordBatch;

    use super::*;
    use crate::io::IoBackend;

    /// A file of floats (NaN, -0.0), strings (dictionary-encoded by the writer and one dictionary-typed
    /// column), decimals, dates and nulls, in row groups of 500 rows.
    fn write_file(dir: &std::path::Path) -> std::path::PathBuf {
        let n = 3000;
        let mut next = crate::decode::host_kernels::xorshift(43);
        let mut pick = |k: u64| next() % k;
        let floats = [f64::NAN, -0.0, 0.0, 1.5, -2.0, f64::INFINITY, 3.25];
        let strings = ["", "a", "ab", "b", "zz"];
        let f: Float64Array = (0..n)
            .map(|_| (pick(10) > 0).then(|| floats[pick(7) as usize]))
            .collect();
        let s: StringArray = (0..n)
            .map(|_| (pick(10) > 0).then(|| strings[pick(5) as usize]))
            .collect();
        let ds: DictionaryArray<arrow::datatypes::Int32Type> = (0..n)
            .map(|_| (pick(10) > 0).then(|| strings[pick(5) as usize]))
            .collect();
        let d = Decimal128Array::from(
            (0..n)
                .map(|_| (pick(10) > 0).then(|| pick(1000) as i128 - 500))
                .collect::<Vec<_>>(),
        )
        .with_precision_and_scale(10, 2)
        .expect("decimal");
        let date: Date32Array = (0..n).map(|i| Some(8766 + i / 10)).collect();
        let id: Int64Array = (0..n as i64).map(Some).collect();
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(id) as ArrayRef),
            ("f", Arc::new(f)),
            ("s", Arc::new(s)),
            ("ds", Arc::new(ds)),
            ("d", Arc::new(d)),
            ("date", Arc::new(date)),
        ])
        .expect("batch");
        let path = dir.join("gpu_filter.parquet");
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(500))
            .build();
        crate::write_test_file(&path, &batch, Some(props));
        path
    }

    /// The GPU scan's post-decode filter stage over the reference decode of each filtered reader's
    /// plan, its kernels run by the host references (or, `emulated`, their CUDA source in the
    /// emulation): equal to arrow-rs's decode filtered exactly, in both modes, the filter's own
    /// columns dropped.
    fn check_stage(path: &std::path::Path, filters: &[&str], emulated: bool) {
        use crate::decode::row_filter::{compact_batch, filter_batch};
        for text in filters {
            for columns in [vec!["id", "s"], vec!["f", "s", "ds", "d", "date", "id"]] {
                let reader = crate::Reader::builder(path)
                    .with_backend(crate::BackendKind::Host)
                    .with_columns(columns.clone())
                    .with_filter(crate::filter::Expr::parse(text).expect("parse"))
                    .build()
                    .expect("reader");
                let want = reader.read_batches().expect("arrow-rs").concat().expect("concat");
                if reader.plan.row_groups.is_empty() {
                    assert_eq!(want.num_rows(), 0, "{text}");
                    continue;
                }
                let fetched = crate::io::host::HostBackend::new(1)
                    .expect("backend")
                    .fetch(&reader.source, &reader.plan)
                    .expect("fetch")
                    .buffer
                    .into_bytes();
                for mode in [FilterMode::Compact, FilterMode::Mask] {
                    let (decoded, _) =
                        crate::decode::gpu::decode_reference(&reader.source, &reader.plan, &fetched).expect("decode");
                    let plan = GpuFilter::plan(&reader.filter, &decoded.schema, mode)
                        .expect("plan")
                        .expect("a filter");
                    assert!(plan.on_host().is_none(), "{text}: runs on the GPU");
                    let rows_in = decoded.num_rows as u64;
                    let emu = std::cell::RefCell::new(crate::decode::row_filter::tests::EmuExecutor::default());
                    let (batch, mask, stats) = if emulated {
                        plan.apply(
                            decoded,
                            |b, p, m| filter_batch(&mut *emu.borrow_mut(), b, p, m),
                            |b, mask| compact_batch(&mut *emu.borrow_mut(), b, mask),
                        )
                    } else {
                        plan.apply(decoded, |b, p, m| b.filter_host(p, m), |b, mask| b.compact_host(mask))
                    }
                    .unwrap_or_else(|e| panic!("{text}: {e}"));
                    let stats = stats.expect("stats");
                    assert_eq!(
                        (stats.rows_in, stats.rows_kept),
                        (rows_in, want.num_rows() as u64),
                        "{text}"
                    );
                    let mut got = batch.to_host().expect("host copy");
                    assert_eq!(mask.is_some(), mode == FilterMode::Mask);
                    if let Some(m) = mask {
                        let m = m.to_host().expect("mask");
                        got = arrow::compute::filter_record_batch(&got, m.as_boolean()).expect("mask filter");
                    }
                    assert_eq!(got.schema(), want.schema(), "{text}, {columns:?}");
                    assert_eq!(got, want, "{text}, {columns:?}, {mode:?}");
                }
            }
        }
    }

    /// The last three: row groups the statistics accept whole (`id >= 0`, `id < 1000`: no filter
    /// evaluated), and a step with one that is not (`id < 1200`).
    const FILTERS: [&str; 9] = [
        "f >= 0 and s != 'zz'",
        "f != 0 or d between -1.5 and 0.5",
        "not (f < 1.5) and ds in ('a', '', 'b')",
        "s not in ('a', 'b') or f is null",
        "date >= '1994-01-20' and date < '1994-02-10' and d > 0",
        "id < 0",
        "id >= 0",
        "id < 1000",
        "id < 1200",
    ];

    #[test]
    fn the_post_decode_filter_equals_arrow_rs_filtered_exactly() {
        let dir = tempfile::tempdir().expect("dir");
        check_stage(&write_file(dir.path()), &FILTERS, false);
    }

    #[test]
    fn the_post_decode_filter_in_the_kernel_emulation() {
        if let Err(why) = crate::decode::kernels::emu::available() {
            crate::test_skip(&why);
            return;
        }
        let dir = tempfile::tempdir().expect("dir");
        check_stage(&write_file(dir.path()), &[FILTERS[0], FILTERS[3], FILTERS[6]], true);
    }

    #[test]
    fn a_filter_the_gpu_cannot_compact_around_is_left_to_the_host_with_its_reason() {
        use arrow::datatypes::{DataType, Field, Schema};
        let dir = tempfile::tempdir().expect("dir");
        let path = write_file(dir.path());
        let reader = crate::Reader::builder(&path)
            .with_backend(crate::BackendKind::Host)
            .with_filter(crate::filter::Expr::parse("s = 'a'").expect("parse"))
            .build()
            .expect("reader");
        // A decoded schema whose `s` is not what the literal was typed to, and one with a column of
        // a type the row filter does not compact.
        let odd = Arc::new(Schema::new(vec![Field::new("s", DataType::Int32, true)]));
        let plan = GpuFilter::plan(&reader.filter, &odd, FilterMode::Compact)
            .unwrap()
            .unwrap();
        let GpuFilter::Host { reason, .. } = &plan else {
            panic!("on the host")
        };
        assert!(reason.contains("column s: decoded as Int32"), "{reason}");
        let report = RowFilterReport::of(&plan, std::iter::empty());
        assert_eq!(report.on, "host");
        assert!(report.line().contains("on the host"), "{}", report.line());
        let uncompacted = Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("i", DataType::Null, true),
        ]));
        let plan = GpuFilter::plan(&reader.filter, &uncompacted, FilterMode::Compact)
            .unwrap()
            .unwrap();
        assert!(plan.on_host().is_some());
        // A mask compacts nothing: it runs on the GPU.
        let plan = GpuFilter::plan(&reader.filter, &uncompacted, FilterMode::Mask)
            .unwrap()
            .unwrap();
        assert!(plan.on_host().is_none());
    }
}

//! What a GPU scan's step yields: its device columns and its figures (row groups, reads, decode,
//! windows), which [`crate::device_read::DecodeReport`] sums.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::decode::pipeline::StepStats;
use crate::decode::table::{DeviceArray, DeviceBatch};
use crate::error::{Error, Result};
use crate::io::IoLog;
use crate::plan::ReadPlan;

/// One step's row groups and figures.
#[derive(Debug, Clone, Serialize)]
pub struct StepSummary {
    /// Row groups.
    pub row_groups: Vec<usize>,
    /// Fetched chunk bytes.
    pub chunk_bytes: u64,
    /// Figures.
    pub stats: StepStats,
    /// Time the decode waited for this step's reads.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub io_wait: Duration,
    /// When this step's reads ran, from the start of the read.
    pub read_window: Window,
    /// When this step was decoded (from taking its chunks to its columns being ready).
    pub decode_window: Window,
    /// CPU time the thread decoding this step used in its decode window (launching, waiting on the
    /// GPU, host work; not the work it handed to other threads): about the window when it worked or
    /// spun throughout, well under it when it slept.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub decode_cpu: Duration,
    /// Inside the read window: the backend's own wall time, when its first read started and when its
    /// last bytes were in place (from the backend's start), so fixed costs per step show apart from
    /// the transfer (allocation and report before, thread start before the first read, drain after).
    pub backend: BackendTimes,
    /// What the row filter did on the GPU (`None`: no filter, or one left to the host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<crate::scan::StepFilter>,
}

/// A step's backend timings, in seconds from the backend's start.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct BackendTimes {
    /// The backend's wall time (`IoLog::wall`).
    pub wall: f64,
    /// Start of its earliest task.
    pub first_read: f64,
    /// End of its latest task.
    pub last_done: f64,
}

impl BackendTimes {
    pub(crate) fn of(log: &IoLog) -> Self {
        let first = log.tasks.iter().map(|t| t.start).min().unwrap_or_default();
        let last = log.tasks.iter().map(|t| t.end).max().unwrap_or_default();
        Self {
            wall: log.wall.as_secs_f64(),
            first_read: first.as_secs_f64(),
            last_done: last.as_secs_f64(),
        }
    }
}

/// A span of time from the start of a read, in seconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Window {
    /// Start, seconds from the start of the read.
    pub from: f64,
    /// End, seconds from the start of the read.
    pub to: f64,
}

impl Window {
    pub(crate) fn between(origin: Instant, from: Instant, to: Instant) -> Self {
        let secs = |t: Instant| t.saturating_duration_since(origin).as_secs_f64();
        Self {
            from: secs(from),
            to: secs(to),
        }
    }

    pub(crate) fn len(&self) -> f64 {
        (self.to - self.from).max(0.0)
    }

    /// Seconds this window shares with `other`.
    pub(crate) fn overlap(&self, other: &Window) -> f64 {
        (self.to.min(other.to) - self.from.max(other.from)).max(0.0)
    }
}

/// One step decoded on the GPU: its device columns and its figures (what a GPU [`Reader::scan`](crate::Reader::scan)
/// yields per step).
#[derive(Debug)]
pub struct DecodedStep {
    /// The step's decoded columns: with a filter on the GPU, its rows the filter accepts (all of
    /// them with [`FilterMode::Mask`](crate::decode::row_filter::FilterMode::Mask)) and without the
    /// columns read only for the filter.
    pub batch: DeviceBatch,
    /// With [`FilterMode::Mask`](crate::decode::row_filter::FilterMode::Mask): a `Boolean` array of
    /// the batch's rows, true where the filter accepts the row.
    pub mask: Option<DeviceArray>,
    /// The filter left to the host (the GPU could not run it; the batch has all rows and the
    /// filter's columns).
    pub(crate) host_filter: crate::filter::SharedFilter,
    /// Its row groups and figures.
    pub summary: StepSummary,
    pub(crate) plan: Arc<ReadPlan>,
    pub(crate) log: IoLog,
    /// Most device memory the step's decode held beyond its chunks.
    pub(crate) step_peak: u64,
    /// Free device memory when the step was decoded.
    pub(crate) free_after: u64,
    /// Steps held in memory then (this one included).
    pub(crate) held_steps: usize,
}

impl DecodedStep {
    /// A host copy of the step's rows the filter accepts: the batch, less the rows its mask leaves
    /// out, with a filter left to the host applied.
    pub fn to_host(&self) -> Result<arrow::record_batch::RecordBatch> {
        accepted_rows(self.batch.to_host()?, self.mask.as_ref(), &self.host_filter)
    }
}

/// `batch` (a host copy of a decoded step) less the rows `mask` (the GPU row filter's, if any) leaves
/// out, with `host_filter` (a filter the GPU could not run) applied.
pub(crate) fn accepted_rows(
    batch: arrow::record_batch::RecordBatch,
    mask: Option<&DeviceArray>,
    host_filter: &crate::filter::SharedFilter,
) -> Result<arrow::record_batch::RecordBatch> {
    let mut batch = batch;
    if let Some(mask) = mask {
        let mask = mask.to_host()?;
        let mask = mask
            .as_any()
            .downcast_ref::<arrow::array::BooleanArray>()
            .ok_or_else(|| Error::device("the GPU row filter", "a mask that is not boolean"))?;
        batch = arrow::compute::filter_record_batch(&batch, mask)
            .map_err(|e| Error::device("applying the GPU row filter's mask", e))?;
    }
    match host_filter {
        Some(f) => f.apply_batch(&batch),
        None => Ok(batch),
    }
}

/// Plans and the logs of their fetches (steps, or a step's two passes) as one plan and one log
/// (chunks and tasks renumbered, columns and row groups joined), for one I/O report.
pub(crate) fn merge_reads(plans: &[Arc<ReadPlan>], logs: &[IoLog]) -> (ReadPlan, IoLog) {
    let mut plan = ReadPlan {
        chunks: Vec::new(),
        spans: Vec::new(),
        tasks: Vec::new(),
        dest_len: 0,
        columns: Vec::new(),
        row_groups: Vec::new(),
        rows: Default::default(),
        whole_chunks: Vec::new(),
        options: plans.first().map(|p| p.options).unwrap_or_default(),
    };
    let mut log = IoLog::default();
    for (p, l) in plans.iter().zip(logs) {
        let chunk_base = plan.chunks.len();
        let task_base = plan.tasks.len();
        plan.chunks.extend(p.chunks.iter().cloned());
        for t in &p.tasks {
            let mut t = t.clone();
            t.chunks = t.chunks.start + chunk_base..t.chunks.end + chunk_base;
            plan.tasks.push(t);
        }
        plan.dest_len += p.dest_len;
        for c in &p.columns {
            if !plan.columns.contains(c) {
                plan.columns.push(*c);
            }
        }
        for g in &p.row_groups {
            if !plan.row_groups.contains(g) {
                plan.row_groups.push(*g);
            }
        }
        plan.rows.extend(p.rows.iter().map(|(g, r)| (*g, r.clone())));
        plan.whole_chunks.extend(p.whole_chunks.iter().cloned());
        log.backend.clone_from(&l.backend);
        for r in &l.tasks {
            let mut r = r.clone();
            r.task += task_base;
            log.tasks.push(r);
        }
        log.wall += l.wall;
        for n in &l.notes {
            if !log.notes.contains(n) {
                log.notes.push(n.clone());
            }
        }
        log.cufile_stats = match (log.cufile_stats.take(), &l.cufile_stats) {
            (None, s) => *s,
            (s, None) => s,
            (Some(a), Some(b)) => Some(a.plus(*b)),
        };
    }
    plan.columns.sort_unstable();
    (plan, log)
}

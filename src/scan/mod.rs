//! The one scan: every read of a file goes through it.
//!
//! A scan cuts the selected row groups into *steps* (runs of consecutive row groups) under a
//! [`MemoryBudget`], and its driver ([`Scan`], `driver.rs`) runs them: one reading thread fetches the
//! steps in order through the backend's [`IoBackend::fetch_steps`](crate::io::IoBackend::fetch_steps),
//! each after taking a place among the steps the budget holds, while workers turn each fetched step
//! into what it ends in, a *sink*: its raw column chunks, host Arrow batches (arrow-rs), or device
//! columns decoded on the GPU (`gpu.rs`: the latency model that cuts a GPU read's steps, host page
//! headers parsed ahead of the decoders). Results come out in step order, streamed or collected.
//!
//! [`crate::Reader::read`] is a scan of one step of raw chunks, [`crate::Reader::read_batches`] one
//! step decoded on the host, [`crate::Reader::stream`] steps of raw chunks streamed,
//! [`crate::Reader::read_device`] GPU steps collected, and [`crate::Reader::scan`] what the reader's
//! [`Decode`] asks, streamed. Datasets and multi-GPU reads build readers of (file, row groups,
//! device) parts and scan them.

pub(crate) mod budget;
pub(crate) mod chunks;
pub(crate) mod driver;
pub(crate) mod gpu;
pub(crate) mod gpu_filter;
pub(crate) mod progress;
pub(crate) mod sink;
pub(crate) mod spec;
pub(crate) mod step;
pub(crate) mod two_pass;

use arrow::record_batch::RecordBatch;

pub use budget::MemoryBudget;
pub(crate) use driver::Release;
pub use driver::Scan;
pub use gpu_filter::{RowFilterReport, StepFilter};
pub use two_pass::PassBytes;

use crate::decode::host::DecodedTable;
use crate::error::Result;
use crate::scan::chunks::ColumnChunks;
use crate::scan::step::DecodedStep;

/// What a scan's steps end in ([`crate::ReaderBuilder::with_decode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Decode {
    /// Raw column chunks, in device memory on a GPU backend, host memory on the host backend.
    None,
    /// Arrow record batches decoded on the host by arrow-rs.
    Host,
    /// Arrow-layout device columns decoded on the GPU (needs a GPU backend).
    Gpu,
    /// On the GPU where the backend reads into device memory, else on the host.
    #[default]
    Auto,
}

/// One step of a [`crate::Reader::scan`], as its [`Decode`] asked.
#[derive(Debug)]
pub enum StepOutput {
    /// The step's raw column chunks ([`Decode::None`]).
    Chunks(ColumnChunks),
    /// Its rows decoded on the host ([`Decode::Host`]).
    Host {
        /// The step's row groups.
        row_groups: Vec<usize>,
        /// Its rows.
        table: DecodedTable,
    },
    /// Its columns decoded on the GPU ([`Decode::Gpu`]).
    Device(DecodedStep),
}

impl StepOutput {
    /// The step's row groups, in order.
    pub fn row_groups(&self) -> &[usize] {
        match self {
            StepOutput::Chunks(c) => c.row_groups(),
            StepOutput::Host { row_groups, .. } => row_groups,
            StepOutput::Device(d) => &d.summary.row_groups,
        }
    }

    /// The step's rows as host record batches: raw chunks decoded by arrow-rs, device columns copied
    /// back (their rows the filter accepts: masked ones filtered, a filter left to the host applied).
    pub fn into_record_batches(self) -> Result<Vec<RecordBatch>> {
        match self {
            StepOutput::Chunks(c) => Ok(c.decode()?.batches),
            StepOutput::Host { table, .. } => Ok(table.batches),
            StepOutput::Device(d) => Ok(vec![d.to_host()?]),
        }
    }
}

impl From<ColumnChunks> for StepOutput {
    fn from(c: ColumnChunks) -> Self {
        StepOutput::Chunks(c)
    }
}

impl From<(Vec<usize>, DecodedTable)> for StepOutput {
    fn from((row_groups, table): (Vec<usize>, DecodedTable)) -> Self {
        StepOutput::Host { row_groups, table }
    }
}

impl From<DecodedStep> for StepOutput {
    fn from(d: DecodedStep) -> Self {
        StepOutput::Device(d)
    }
}

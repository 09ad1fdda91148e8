//! What a scan's steps end in: raw chunks, host batches (arrow-rs), or either wrapped as a
//! [`StepOutput`]. The GPU decode's sink is in [`super::gpu`].

use crate::decode::host::DecodedTable;
use crate::error::Result;
use crate::scan::StepOutput;
use crate::scan::chunks::ColumnChunks;
use crate::scan::driver::{FetchedStep, StepSink};

/// A step ends in its fetched column chunks.
pub(crate) struct RawSink(pub crate::filter::SharedFilter);

impl StepSink for RawSink {
    type Output = ColumnChunks;

    fn what(&self) -> &'static str {
        "handing over a step's chunks"
    }

    fn finish(&self, step: FetchedStep<'_>) -> Result<ColumnChunks> {
        let mut chunks = step.chunks;
        chunks.filter = self.0.clone();
        Ok(chunks)
    }
}

/// A step ends in Arrow record batches decoded on the host by arrow-rs (with its row groups).
pub(crate) struct HostSink(pub crate::filter::SharedFilter);

impl StepSink for HostSink {
    type Output = (Vec<usize>, DecodedTable);

    fn what(&self) -> &'static str {
        "decoding a step on the host"
    }

    fn finish(&self, step: FetchedStep<'_>) -> Result<(Vec<usize>, DecodedTable)> {
        let mut chunks = step.chunks;
        chunks.filter = self.0.clone();
        let row_groups = chunks.row_groups().to_vec();
        Ok((row_groups, chunks.decode()?))
    }
}

/// Another sink's output as a [`StepOutput`].
pub(crate) struct AsOutput<S>(pub S);

impl<S> StepSink for AsOutput<S>
where
    S: StepSink,
    S::Output: Into<StepOutput>,
{
    type Output = StepOutput;

    fn what(&self) -> &'static str {
        self.0.what()
    }

    fn finish(&self, step: FetchedStep<'_>) -> Result<StepOutput> {
        self.0.finish(step).map(Into::into)
    }

    fn runs_ahead(&self) -> bool {
        self.0.runs_ahead()
    }

    fn run_ahead(&self, plans: &[std::sync::Arc<crate::plan::ReadPlan>], turn: &dyn Fn(usize) -> bool) {
        self.0.run_ahead(plans, turn)
    }
}

//! What a scan's steps end in: raw chunks, host batches (arrow-rs), or either wrapped as a
//! [`StepOutput`]. The GPU decode's sink is in [`super::gpu`].

use std::sync::Arc;

use crate::decode::host::DecodedTable;
use crate::error::Result;
use crate::io::IoLog;
use crate::io::select::AnyBackend;
use crate::plan::ReadPlan;
use crate::scan::StepOutput;
use crate::scan::chunks::ColumnChunks;
use crate::scan::driver::{FetchedStep, StepSink};
use crate::scan::step::merge_reads;
use crate::scan::two_pass::{PassBytes, TwoPass};

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

/// A step ends in Arrow record batches decoded on the host by arrow-rs (with its row groups and
/// its reads); with the filter's columns first ([`TwoPass`]), the step's fetch held the filter's
/// columns and the sink reads the others' pages of the accepted rows itself.
pub(crate) struct HostSink {
    pub filter: crate::filter::SharedFilter,
    /// The two passes and the backend of the second, where the reader reads in two.
    pub two_pass: Option<(TwoPass, Arc<AnyBackend>)>,
}

/// A step decoded on the host.
#[derive(Debug)]
pub(crate) struct HostStep {
    /// Its row groups.
    pub row_groups: Vec<usize>,
    /// Its rows (those the filter accepts, the caller's columns).
    pub table: DecodedTable,
    /// Its reads, both passes' as one plan and one log.
    pub plan: Arc<ReadPlan>,
    pub log: IoLog,
    /// What the two passes read, where it read in two.
    pub passes: Option<PassBytes>,
}

impl StepSink for HostSink {
    type Output = HostStep;

    fn what(&self) -> &'static str {
        "decoding a step on the host"
    }

    fn finish(&self, step: FetchedStep<'_>) -> Result<HostStep> {
        let mut chunks = step.chunks;
        let row_groups = chunks.row_groups().to_vec();
        let two = self.two_pass.as_ref().filter(|(p, _)| !p.reads_in_one(chunks.plan()));
        let Some((passes, io)) = two else {
            chunks.filter = self.filter.clone();
            let (plan, log) = (chunks.plan.clone(), chunks.log.clone());
            return Ok(HostStep {
                row_groups,
                table: chunks.decode()?,
                plan,
                log,
                passes: None,
            });
        };
        let (first, first_log) = (chunks.plan.clone(), chunks.log.clone());
        let (source, threads) = (chunks.source.clone(), chunks.decode_threads);
        let fetched = chunks.buffer.into_host_bytes()?;
        let done = passes.host_step(io, &source, &first, &fetched, threads)?;
        let (plan, log) = match &done.second {
            Some((plan, log)) => {
                let (p, l) = merge_reads(&[first, plan.clone()], &[first_log, log.clone()]);
                (Arc::new(p), l)
            }
            None => (first, first_log),
        };
        Ok(HostStep {
            row_groups,
            table: done.table,
            plan,
            log,
            passes: Some(done.bytes),
        })
    }
}

impl From<HostStep> for StepOutput {
    fn from(s: HostStep) -> Self {
        StepOutput::Host {
            row_groups: s.row_groups,
            table: s.table,
        }
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

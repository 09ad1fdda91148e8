//! Column chunks a scan fetched into memory ([`ColumnChunks`]): what a raw step ends in, and what a
//! host decode starts from.

use std::sync::Arc;

use crate::decode::host::{DecodedTable, decode_fetched};
use crate::error::Result;
use crate::io::select::AnyBuffer;
use crate::io::verify::verify_against_file;
use crate::io::{DestBuffer, IoLog};
use crate::metadata::ParquetSource;
use crate::plan::{ChunkRange, ReadPlan};
use crate::report::ReadReport;

/// Column chunks read into memory: the buffer (laid out as the plan says), the plan, the I/O log and
/// the per-column report.
#[derive(Debug)]
pub struct ColumnChunks {
    pub(crate) buffer: AnyBuffer,
    /// When the fetch started and when its bytes were in place.
    pub(crate) fetched: std::ops::Range<std::time::Instant>,
    pub(crate) plan: Arc<ReadPlan>,
    pub(crate) report: ReadReport,
    pub(crate) log: IoLog,
    pub(crate) source: ParquetSource,
    pub(crate) decode_threads: usize,
    /// Issue 43's filter hook: applied by [`Self::decode`].
    pub(crate) filter: crate::filter::SharedFilter,
}

impl ColumnChunks {
    /// The chunks of `plan` fetched into `buffer` over `fetched`, once the file is checked unchanged
    /// since its metadata was read; the report is built from `log`.
    pub(crate) fn read(
        source: &ParquetSource,
        plan: Arc<ReadPlan>,
        buffer: AnyBuffer,
        log: IoLog,
        fetched: std::ops::Range<std::time::Instant>,
        decode_threads: usize,
    ) -> Result<Self> {
        source.check_unchanged()?;
        let report = ReadReport::build(&source.path().display().to_string(), &plan, &log);
        Ok(ColumnChunks {
            buffer,
            fetched,
            plan,
            report,
            log,
            source: source.clone(),
            decode_threads,
            filter: None,
        })
    }

    /// The bytes: [`AnyBuffer::Device`] on a GPU path, [`AnyBuffer::Host`] on the host path. Chunk `c`
    /// of the plan lies at `c.dest_offset .. c.dest_offset + c.len`.
    pub fn buffer(&self) -> &AnyBuffer {
        &self.buffer
    }

    /// The buffer, owned.
    pub fn into_buffer(self) -> AnyBuffer {
        self.buffer
    }

    /// The plan these chunks were read by.
    pub fn plan(&self) -> &ReadPlan {
        &self.plan
    }

    /// Row groups held, in order.
    pub fn row_groups(&self) -> &[usize] {
        &self.plan.row_groups
    }

    /// Where the chunk of `column` (dotted path) in `row_group` is in [`Self::buffer`] (its first
    /// piece, for a chunk read page by page: see [`ChunkRange::pages`]).
    pub fn chunk(&self, column: &str, row_group: usize) -> Option<&ChunkRange> {
        self.plan
            .chunks
            .iter()
            .find(|c| c.row_group == row_group && c.column_path == column)
    }

    /// Per column and per path: bytes, reads, busy time, and why each path was taken.
    pub fn report(&self) -> &ReadReport {
        &self.report
    }

    /// What the backend did, task by task.
    pub fn log(&self) -> &IoLog {
        &self.log
    }

    /// Checks every chunk's bytes against the file (re-read with plain `pread`s).
    pub fn verify(&self) -> Result<()> {
        verify_against_file(&self.source, &self.plan, &self.buffer.to_host()?)
    }

    /// Decodes the chunks on the host into Arrow record batches (copying device bytes back first).
    pub fn decode(self) -> Result<DecodedTable> {
        let bytes = self.buffer.into_host_bytes()?;
        let table = decode_fetched(&self.source, &self.plan, &bytes, self.decode_threads)?;
        match &self.filter {
            Some(f) => f.apply(table, &self.plan.row_groups),
            None => Ok(table),
        }
    }
}

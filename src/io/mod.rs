//! I/O backends: each executes a [`ReadPlan`]'s tasks, writing task `t`'s file bytes into its
//! destination buffer at `t.dest_offset`, and logs what it did per task (path taken, why, when) so that
//! [`crate::report`] can attribute bytes, reads and time to columns.
//!
//! Every backend passes the same conformance suite ([`conformance`]): bytes identical to the file,
//! counters consistent with the plan, short reads and I/O errors reported as errors, never as data.

pub mod conformance;
pub mod cufile;
pub mod host;
pub mod policy;
pub mod pread;
pub mod staged;
pub mod verify;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::error::Result;
use crate::metadata::ParquetSource;
use crate::plan::ReadPlan;

/// The way a task's bytes travelled from storage to their destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoPath {
    /// cuFile through the nvidia-fs kernel module: true GPUDirect Storage (DMA from storage to GPU).
    Nvfs,
    /// cuFile's own POSIX compat mode: cuFile read through the page cache and a bounce buffer.
    CufileCompat,
    /// Our staged path: positional reads into pinned host buffers, then asynchronous copies to the GPU.
    Staged,
    /// Host memory only: positional reads into host buffers, no GPU involved.
    Host,
}

impl IoPath {
    /// Every path, in report order.
    pub const ALL: [IoPath; 4] = [IoPath::Nvfs, IoPath::CufileCompat, IoPath::Staged, IoPath::Host];

    /// The report's name for this path.
    pub fn name(self) -> &'static str {
        match self {
            IoPath::Nvfs => "nvfs",
            IoPath::CufileCompat => "cufile-compat",
            IoPath::Staged => "staged",
            IoPath::Host => "host",
        }
    }

    /// Index into per-path arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for IoPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What happened to one task of the plan.
#[derive(Debug, Clone, Serialize)]
pub struct TaskRecord {
    /// Index into [`ReadPlan::tasks`].
    pub task: usize,
    /// The path its bytes took.
    pub path: IoPath,
    /// Why that path was taken (for example "cuFile refused the file: ...").
    pub reason: Arc<str>,
    /// Read operations issued for it (system calls or cuFile calls).
    pub reads: u64,
    /// Bytes moved (the task's length, on success).
    pub bytes: u64,
    /// When the task started, from the start of the fetch.
    #[serde(serialize_with = "crate::report::ser_secs")]
    pub start: Duration,
    /// When its bytes were in their destination, from the start of the fetch.
    #[serde(serialize_with = "crate::report::ser_secs")]
    pub end: Duration,
}

/// What a backend did to fetch a plan.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IoLog {
    /// Backend name.
    pub backend: String,
    /// One record per task.
    pub tasks: Vec<TaskRecord>,
    /// Wall time of the whole fetch, until the bytes were in place.
    #[serde(serialize_with = "crate::report::ser_secs")]
    pub wall: Duration,
    /// Notes worth showing a user (a fallback, a setting that was ignored...).
    pub notes: Vec<String>,
    /// cuFile's own statistics around the fetch, where cuFile was used and they were available.
    pub cufile_stats: Option<CufileStatsDelta>,
}

/// Differences in cuFile's level-3 statistics (summed over GPUs) across a fetch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CufileStatsDelta {
    /// Reads cuFile counted in total.
    pub total_reads: u64,
    /// Reads that went through nvidia-fs.
    pub nvfs_reads: u64,
    /// Reads that went through cuFile's POSIX compat mode.
    pub posix_reads: u64,
    /// Bytes cuFile says it read.
    pub read_bytes: u64,
}

/// A destination buffer, in host or device memory.
pub trait DestBuffer: Send + Sync {
    /// Length in bytes.
    fn len(&self) -> u64;
    /// Whether it is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies the whole buffer to host memory (for checks and tests).
    fn to_host(&self) -> Result<Vec<u8>>;
}

/// Bytes fetched by a backend, with the log of how.
#[derive(Debug)]
pub struct Fetched<B> {
    /// The destination buffer, laid out as the plan says.
    pub buffer: B,
    /// What the backend did.
    pub log: IoLog,
}

/// A way of executing a [`ReadPlan`].
pub trait IoBackend: Send + Sync {
    /// Where the bytes end up.
    type Buffer: DestBuffer;

    /// A short name, for reports.
    fn name(&self) -> String;

    /// Reads every task of `plan` from `source` into a new destination buffer of `plan.dest_len` bytes.
    ///
    /// A read that returns fewer bytes than planned is [`crate::Error::ShortRead`]; an OS error is
    /// [`crate::Error::Io`]. Neither ever yields a buffer.
    fn fetch(&self, source: &ParquetSource, plan: &ReadPlan) -> Result<Fetched<Self::Buffer>>;
}

//! I/O backends: each executes a [`ReadPlan`]'s tasks, writing task `t`'s file bytes into its
//! destination buffer at `t.dest_offset`, and logs what it did per task (path taken, why, when) so that
//! [`crate::report`] can attribute bytes, reads and time to columns.
//!
//! Backends: [`host`] (no GPU), [`staged`] and [`cufile`] (into device memory), [`auto`] (a decorator
//! over cuFile and staged: cuFile for large reads, staged for small ones and refused files), and
//! [`select`], which builds the one a [`BackendKind`](crate::config::BackendKind) and
//! [`IoPolicy`](crate::config::IoPolicy) call for.
//!
//! Every backend passes the same conformance suite (`gpu_parquet::conformance`, behind the `conformance`
//! cargo feature that the tests enable): bytes identical to the file, counters consistent with the plan,
//! short reads and I/O errors reported as errors, never as data.

pub mod auto;
pub mod cufile;
pub mod faults;
pub mod host;
pub(crate) mod pread;
pub mod select;
pub mod staged;
pub mod verify;

use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::error::{Error, Location, Result};
pub use crate::gpu::cufile::StatsDelta as CufileStatsDelta;
use crate::metadata::ParquetSource;
use crate::plan::ReadPlan;

/// Serialises a duration as seconds (f64).
pub fn ser_secs<S: Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

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
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub start: Duration,
    /// When its bytes were in their destination, from the start of the fetch.
    #[serde(serialize_with = "crate::io::ser_secs")]
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
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub wall: Duration,
    /// Notes worth showing a user (a fallback, a setting that was ignored...).
    pub notes: Vec<String>,
    /// cuFile's own statistics around the fetch, where cuFile was used and they were available.
    pub cufile_stats: Option<CufileStatsDelta>,
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

/// One step of [`IoBackend::fetch_steps`]: its bytes, its log, and when its reads ran.
#[derive(Debug)]
pub struct StepFetched<B> {
    /// The step's bytes, laid out as its plan says. On a device backend work queued later on the
    /// buffer's stream comes after the copies into it.
    pub buffer: B,
    /// Its reads.
    pub log: IoLog,
    /// From the step's first read until its bytes were in place (for the staged backend's stepped
    /// fetch: until its last copy was queued; the copies may still be running).
    pub queued: std::ops::Range<std::time::Instant>,
}

/// Receives each step of [`IoBackend::fetch_steps`] (step index, its bytes or its error).
pub(crate) type DeliverStep<'a, B> = dyn Fn(usize, Result<StepFetched<B>>) + Sync + 'a;

/// A way of executing a [`ReadPlan`].
pub trait IoBackend: Send + Sync {
    /// Where the bytes end up.
    type Buffer: DestBuffer;

    /// A short name, for reports.
    fn name(&self) -> String;

    /// A destination of `len` bytes for [`IoBackend::fetch_into`] (contents unspecified).
    fn alloc(&self, len: u64) -> Result<Self::Buffer>;

    /// Reads every task of `plan` from `source` into `dest`, task `t` at `t.dest_offset`. `dest` must
    /// hold at least `plan.dest_len` bytes; reusing one across fetches keeps allocation out of them.
    ///
    /// A read that returns fewer bytes than planned is [`crate::Error::ShortRead`]; an OS error is
    /// [`crate::Error::Io`]; after an error the contents of `dest` are unspecified.
    fn fetch_into(&self, source: &ParquetSource, plan: &ReadPlan, dest: &mut Self::Buffer) -> Result<IoLog>;

    /// Reads every task of `plan` into a new destination of `plan.dest_len` bytes.
    fn fetch(&self, source: &ParquetSource, plan: &ReadPlan) -> Result<Fetched<Self::Buffer>> {
        let mut buffer = self.alloc(plan.dest_len)?;
        let log = self.fetch_into(source, plan, &mut buffer)?;
        Ok(Fetched { buffer, log })
    }

    /// Reads the steps `plans` (each a run of consecutive row groups) in order, the way a scan's
    /// reading thread does: `admit(k)` is called, in order and on the calling thread, before step
    /// `k` is read (it may wait for memory to hold the step; `false` ends the fetch there), and
    /// each step goes to `deliver` once read. A step whose read fails is delivered as that error and
    /// ends the fetch; the steps after it are not delivered. Returns once nothing more will be
    /// delivered.
    ///
    /// The default is one [`fetch`](Self::fetch) per step, delivered as it returns, in order
    /// ([`fetch_steps_per_call`]). A backend may do better: the staged backend keeps the same workers
    /// reading from one step into the next, and delivers a step, from one of them and in no set
    /// order, as soon as its copies are queued.
    fn fetch_steps(
        &self,
        source: &ParquetSource,
        plans: &[Arc<ReadPlan>],
        admit: &mut dyn FnMut(usize) -> bool,
        deliver: &DeliverStep<'_, Self::Buffer>,
    ) {
        fetch_steps_per_call(self, source, plans, admit, deliver)
    }
}

/// [`IoBackend::fetch_steps`]'s default: one [`IoBackend::fetch`] per step, in order (also what a
/// benchmark measures against a backend's own stepped fetch).
pub(crate) fn fetch_steps_per_call<B: IoBackend + ?Sized>(
    backend: &B,
    source: &ParquetSource,
    plans: &[Arc<ReadPlan>],
    admit: &mut dyn FnMut(usize) -> bool,
    deliver: &DeliverStep<'_, B::Buffer>,
) {
    for (k, plan) in plans.iter().enumerate() {
        if !admit(k) {
            return;
        }
        let started = std::time::Instant::now();
        let r = backend.fetch(source, plan).map(|f| StepFetched {
            buffer: f.buffer,
            log: f.log,
            queued: started..std::time::Instant::now(),
        });
        let failed = r.is_err();
        deliver(k, r);
        if failed {
            return;
        }
    }
}

/// Refuses a destination smaller than the plan needs.
pub(crate) fn check_dest_len(plan: &ReadPlan, dest_len: u64) -> Result<()> {
    if dest_len < plan.dest_len {
        return Err(Error::InvalidRequest {
            location: Location::default(),
            message: format!(
                "the destination buffer has {dest_len} bytes, the plan needs {}",
                plan.dest_len
            ),
        });
    }
    Ok(())
}

/// The location of a task's first column chunk (for errors).
pub(crate) fn task_location(source: &ParquetSource, plan: &ReadPlan, task: usize) -> Location {
    plan.tasks
        .get(task)
        .and_then(|t| plan.chunks.get(t.chunks.start))
        .map(|c| Location::chunk(source.path(), c.column_path.clone(), c.row_group))
        .unwrap_or_else(|| source.location())
}

impl DestBuffer for crate::gpu::DeviceBuffer<u8> {
    fn len(&self) -> u64 {
        self.num_bytes() as u64
    }
    fn to_host(&self) -> Result<Vec<u8>> {
        self.copy_to_host()
    }
}

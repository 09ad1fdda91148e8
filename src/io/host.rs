//! The host backend: the plan's tasks as positional reads on a thread pool, into one host buffer.
//!
//! This is the path for machines without a GPU, the CPU fallback of `--backend auto`, and the input of
//! the host decoder (the oracle the GPU decoder is checked against).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use rayon::prelude::*;

use crate::error::{Error, Location, Result};
use crate::io::pread::pread_exact;
use crate::io::{DestBuffer, IoBackend, IoLog, IoPath, TaskRecord, check_dest_len, task_location};
use crate::metadata::ParquetSource;
use crate::plan::ReadPlan;

/// Reads into host memory with `threads` concurrent positional reads.
#[derive(Debug)]
pub struct HostBackend {
    pool: rayon::ThreadPool,
    threads: usize,
    buffers: BufferPool,
}

/// Destination buffers handed back when the last `Bytes` referring to them is dropped, so repeated
/// fetches reuse memory that is already faulted in instead of page-faulting a fresh allocation
/// (measured: a fresh 120 MB buffer costs about as much as the reads into it).
#[derive(Debug, Clone, Default)]
struct BufferPool(Arc<Mutex<Vec<Vec<u8>>>>);

/// Buffers kept for reuse at most.
const POOLED_BUFFERS: usize = 2;

impl BufferPool {
    /// A buffer of exactly `len` bytes (contents unspecified: every byte will be overwritten).
    fn take(&self, len: usize) -> Vec<u8> {
        let reused = {
            let mut free = self.0.lock().unwrap_or_else(|p| p.into_inner());
            free.iter().position(|b| b.len() >= len).map(|i| free.swap_remove(i))
        };
        match reused {
            Some(mut b) => {
                b.truncate(len);
                b
            }
            None => fresh_buffer(len),
        }
    }
}

/// A zeroed buffer; large ones are advised to use transparent huge pages (512 times fewer page faults
/// when the reads first touch it).
fn fresh_buffer(len: usize) -> Vec<u8> {
    let buf = vec![0u8; len];
    const HUGE: usize = 2 << 20;
    if len >= 4 * HUGE {
        let start = (buf.as_ptr() as usize).next_multiple_of(4096);
        let end = (buf.as_ptr() as usize + len) / 4096 * 4096;
        if end > start {
            // SAFETY: start..end is the page-aligned interior of `buf`, which we own; MADV_HUGEPAGE is
            // advice only (it never changes contents), so whatever the allocator did it is at worst
            // ignored.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    buf
}

/// Host memory a [`HostBackend`] fetches into: a pooled vector, handed back to its backend's pool
/// when dropped (or when the last `Bytes` made from it by [`HostBuffer::into_bytes`] drops).
#[derive(Debug)]
pub struct HostBuffer {
    buf: Vec<u8>,
    pool: BufferPool,
}

impl HostBuffer {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    /// The bytes as a shared `Bytes` without copying; the memory returns to the pool when the last
    /// clone drops.
    pub fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for HostBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        let mut free = self.pool.0.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < POOLED_BUFFERS {
            free.push(std::mem::take(&mut self.buf));
        }
    }
}

impl DestBuffer for HostBuffer {
    fn len(&self) -> u64 {
        self.buf.len() as u64
    }
    fn to_host(&self) -> Result<Vec<u8>> {
        Ok(self.buf.clone())
    }
}

impl HostBackend {
    /// A backend with `threads` I/O threads (0: one per core).
    pub fn new(threads: usize) -> Result<Self> {
        let pool = named_pool(threads, "gpu-parquet-io", "host")?;
        let threads = pool.current_num_threads();
        Ok(Self {
            pool,
            threads,
            buffers: BufferPool::default(),
        })
    }

    /// Number of I/O threads.
    pub fn threads(&self) -> usize {
        self.threads
    }
}

/// A rayon pool of `threads` threads (0: one per core) named `{prefix}-{i}`; failing to start one is
/// [`Error::Unavailable`] for `what`.
pub(crate) fn named_pool(threads: usize, prefix: &'static str, what: &str) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("{prefix}-{i}"))
        .build()
        .map_err(|e| Error::Unavailable {
            backend: what.into(),
            reason: e.to_string(),
        })
}

/// Splits `buf` into the disjoint destination slices of `plan`'s tasks (tasks are laid out in order).
pub(crate) fn task_slices<'a>(plan: &ReadPlan, mut buf: &'a mut [u8]) -> Vec<&'a mut [u8]> {
    let mut out = Vec::with_capacity(plan.tasks.len());
    let mut consumed = 0u64;
    for t in &plan.tasks {
        let skip = (t.dest_offset - consumed) as usize;
        let rest = std::mem::take(&mut buf);
        let (_, rest) = rest.split_at_mut(skip);
        let (mine, rest) = rest.split_at_mut(t.len as usize);
        out.push(mine);
        buf = rest;
        consumed = t.dest_offset + t.len;
    }
    out
}

impl IoBackend for HostBackend {
    type Buffer = HostBuffer;

    fn name(&self) -> String {
        format!("host({} threads)", self.threads)
    }

    fn alloc(&self, len: u64) -> Result<HostBuffer> {
        let len = usize::try_from(len).map_err(|_| Error::InvalidRequest {
            location: Location::default(),
            message: format!("{len} bytes do not fit in host memory"),
        })?;
        Ok(HostBuffer {
            buf: self.buffers.take(len),
            pool: self.buffers.clone(),
        })
    }

    fn fetch_into(&self, source: &ParquetSource, plan: &ReadPlan, dest: &mut HostBuffer) -> Result<IoLog> {
        let started = Instant::now();
        check_dest_len(plan, dest.buf.len() as u64)?;
        let reason: Arc<str> = Arc::from("host backend: positional reads into host memory");
        let file = source.file();
        let slices = task_slices(plan, &mut dest.buf);
        let tasks: Vec<TaskRecord> = self.pool.install(|| {
            slices
                .into_par_iter()
                .enumerate()
                .map(|(i, dst)| {
                    let t = &plan.tasks[i];
                    let start = started.elapsed();
                    let reads = pread_exact(file, dst, t.offset, &task_location(source, plan, i))?;
                    Ok(TaskRecord {
                        task: i,
                        path: IoPath::Host,
                        reason: reason.clone(),
                        reads,
                        bytes: t.len,
                        start,
                        end: started.elapsed(),
                    })
                })
                .collect::<Result<Vec<_>>>()
        })?;
        Ok(IoLog {
            backend: self.name(),
            tasks,
            wall: started.elapsed(),
            notes: Vec::new(),
            cufile_stats: None,
        })
    }
}

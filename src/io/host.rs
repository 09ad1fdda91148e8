//! The host backend: the plan's tasks as positional reads on a thread pool, into one host buffer.
//!
//! This is the path for machines without a GPU, the CPU fallback of `--backend auto`, and the input of
//! the host decoder (the oracle the GPU decoder is checked against).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::io::pread::pread_exact;
use crate::io::{DestBuffer, Fetched, IoBackend, IoLog, IoPath, TaskRecord};
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
        // The zeroed allocation is untouched mmap'd memory here; advice on its page-aligned interior
        // is safe whatever the allocator did (at worst ignored).
        let start = (buf.as_ptr() as usize).next_multiple_of(4096);
        let end = (buf.as_ptr() as usize + len) / 4096 * 4096;
        if end > start {
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    buf
}

/// Owns a pooled buffer inside a `Bytes`; returns it to the pool on drop.
struct Pooled {
    buf: Vec<u8>,
    pool: BufferPool,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let mut free = self.pool.0.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < POOLED_BUFFERS {
            free.push(std::mem::take(&mut self.buf));
        }
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

impl DestBuffer for Bytes {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn to_host(&self) -> Result<Vec<u8>> {
        Ok(self.to_vec())
    }
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
    type Buffer = Bytes;

    fn name(&self) -> String {
        "host".to_string()
    }

    fn fetch(&self, source: &ParquetSource, plan: &ReadPlan) -> Result<Fetched<Bytes>> {
        let started = Instant::now();
        let mut buf = self.buffers.take(plan.dest_len as usize);
        let reason: Arc<str> = Arc::from("host backend: positional reads into host memory");
        let file = source.file();
        let location = source.location();
        let slices = task_slices(plan, &mut buf);
        let records: Vec<TaskRecord> = self.pool.install(|| {
            slices
                .into_par_iter()
                .enumerate()
                .map(|(i, dst)| {
                    let t = &plan.tasks[i];
                    let start = started.elapsed();
                    let reads = pread_exact(file, dst, t.offset, &location)?;
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
        let log = IoLog {
            backend: self.name(),
            tasks: records,
            wall: started.elapsed(),
            notes: Vec::new(),
            cufile_stats: None,
        };
        let buffer = Bytes::from_owner(Pooled {
            buf,
            pool: self.buffers.clone(),
        });
        Ok(Fetched { buffer, log })
    }
}

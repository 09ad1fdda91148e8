//! The host backend: the plan's tasks as positional reads on a thread pool, into one host buffer.
//!
//! This is the path for machines without a GPU, the CPU fallback of `--backend auto`, and the input of
//! the host decoder (the oracle the GPU decoder is checked against).

use std::sync::Arc;
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
}

impl HostBackend {
    /// A backend with `threads` I/O threads (0: one per core).
    pub fn new(threads: usize) -> Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("gpu-parquet-io-{i}"))
            .build()
            .map_err(|e| Error::Unavailable {
                backend: "host".into(),
                reason: e.to_string(),
            })?;
        let threads = pool.current_num_threads();
        Ok(Self { pool, threads })
    }

    /// Number of I/O threads.
    pub fn threads(&self) -> usize {
        self.threads
    }
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
        let mut buf = vec![0u8; plan.dest_len as usize];
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
        Ok(Fetched {
            buffer: Bytes::from(buf),
            log,
        })
    }
}

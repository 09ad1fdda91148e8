//! The `auto` decorator: cuFile for large reads, the staged path for small reads and for files cuFile
//! refuses to register, each task's path and reason logged.
//!
//! It wraps two backends through their task-level entry points, as object_store's decorators wrap a
//! store. Which backend *kind* `auto` means on a given machine (this decorator, staged alone, or host
//! memory) is decided in [`crate::io::select`].

use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;
use crate::gpu::DeviceBuffer;
use crate::io::cufile::CufileBackend;
use crate::io::staged::StagedBackend;
use crate::io::{IoBackend, IoLog, check_dest_len};
use crate::metadata::ParquetSource;
use crate::plan::ReadPlan;

/// cuFile for tasks of at least `small_read_threshold` bytes, staged for the rest and for refused
/// files.
#[derive(Debug)]
pub struct AutoBackend {
    cufile: CufileBackend,
    staged: StagedBackend,
    small_read_threshold: u64,
}

impl AutoBackend {
    /// Combines `cufile` and `staged` (both on the same device).
    pub fn new(cufile: CufileBackend, staged: StagedBackend, small_read_threshold: u64) -> Self {
        Self {
            cufile,
            staged,
            small_read_threshold,
        }
    }

    /// The cuFile backend inside.
    pub fn cufile(&self) -> &CufileBackend {
        &self.cufile
    }

    /// The staged backend inside.
    pub fn staged(&self) -> &StagedBackend {
        &self.staged
    }
}

impl IoBackend for AutoBackend {
    type Buffer = DeviceBuffer;

    fn name(&self) -> String {
        format!(
            "auto: {} + {} for reads under {} bytes",
            self.cufile.name(),
            self.staged.name(),
            self.small_read_threshold
        )
    }

    fn alloc(&self, len: u64) -> Result<DeviceBuffer> {
        self.staged.alloc(len)
    }

    fn fetch_into(&self, source: &ParquetSource, plan: &ReadPlan, dest: &mut DeviceBuffer) -> Result<IoLog> {
        let started = Instant::now();
        check_dest_len(plan, dest.num_bytes() as u64)?;
        let writer = dest.writer()?;
        let mut notes = Vec::new();
        let (mut tasks, stats) = match self.cufile.register(source, plan) {
            Err(refusal) => {
                let reason: Arc<str> = Arc::from(format!("cuFile refused the file: {refusal}"));
                notes.push(format!("{reason}; staged path"));
                let all: Vec<usize> = (0..plan.tasks.len()).collect();
                let (t, mut n) = self.staged.run_tasks(source, plan, &all, &writer, &reason, started)?;
                notes.append(&mut n);
                (t, None)
            }
            Ok(handle) => {
                let (big, small): (Vec<usize>, Vec<usize>) =
                    (0..plan.tasks.len()).partition(|&i| plan.tasks[i].len >= self.small_read_threshold);
                let (mut t, stats, mut n) = self.cufile.run_tasks(&handle, source, plan, &big, &writer, started)?;
                notes.append(&mut n);
                let reason: Arc<str> = Arc::from(format!(
                    "task below the small-read threshold ({} bytes)",
                    self.small_read_threshold
                ));
                let (mut t2, mut n2) = self.staged.run_tasks(source, plan, &small, &writer, &reason, started)?;
                notes.append(&mut n2);
                t.append(&mut t2);
                (t, stats)
            }
        };
        tasks.sort_by_key(|r| r.task);
        Ok(IoLog {
            backend: self.name(),
            tasks,
            wall: started.elapsed(),
            notes,
            cufile_stats: stats,
        })
    }
}

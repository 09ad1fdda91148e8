//! The cuFile backend: `cuFileRead` of every task straight into device memory, from a thread pool.
//!
//! Which path cuFile really took is read from its level-3 statistics around the fetch
//! ([`attribute`]): cuFile silently falls back to its POSIX compat mode when nvidia-fs is absent, and we
//! never claim nvfs unless nvidia-fs is loaded *and* the counters show nvfs reads. Statistics are
//! process-wide, so other cuFile users in the same process during a fetch would blur them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::gpu::cufile::{self as cf, BufRegistration, CufileDriver, CufileParams, FileHandle};
use crate::gpu::{DeviceBuffer, DeviceWriter, GpuContext, guard};
use crate::io::staged::alloc_device;
use crate::io::{CufileStatsDelta, IoBackend, IoLog, IoPath, TaskRecord, check_dest_len, task_location};
use crate::metadata::ParquetSource;
use crate::plan::ReadPlan;

/// How a [`CufileBackend`] is built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CufileOptions {
    /// Threads issuing `cuFileRead`s (0: one per core).
    pub threads: usize,
    /// Open the file with `O_DIRECT` when the plan is aligned.
    pub direct_io: bool,
    /// Register the destination buffer with cuFile (`cuFileBufRegister`) for the fetch.
    pub register_buffer: bool,
    /// Run tasks one at a time with statistics read around each, for exact per-task paths.
    pub serialize_stats: bool,
    /// cuFile parameters applied before its driver opens (while the driver stays open, the first
    /// opener's parameters hold).
    pub params: CufileParams,
}

/// Reads with cuFile into device memory.
#[derive(Debug)]
pub struct CufileBackend {
    ctx: Arc<GpuContext>,
    driver: Arc<CufileDriver>,
    opts: CufileOptions,
    threads: usize,
}

/// The path and reason to record for cuFile reads, from the statistics delta and the nvfs version.
///
/// Rule: nvidia-fs not loaded, or no statistics, or any POSIX reads in the delta: `CufileCompat` (a
/// mixed delta is counted as compat, the conservative claim; `serialize_stats` gives exact paths).
/// `Nvfs` only when nvidia-fs is loaded and the delta shows nvfs reads and no POSIX reads.
pub(crate) fn attribute(delta: Option<&CufileStatsDelta>, nvfs_loaded: bool) -> (IoPath, String) {
    let counts = |d: &CufileStatsDelta| {
        format!(
            "cuFile stats: {} reads, {} nvfs, {} posix, {} bytes",
            d.total_reads, d.nvfs_reads, d.posix_reads, d.read_bytes
        )
    };
    match (delta, nvfs_loaded) {
        (d, false) => (
            IoPath::CufileCompat,
            format!(
                "nvidia-fs not loaded (nvfs version 0.0): cuFile used its POSIX compat mode{}",
                d.map(|d| format!("; {}", counts(d))).unwrap_or_default()
            ),
        ),
        (None, true) => (
            IoPath::CufileCompat,
            "cuFile statistics unavailable: nvfs use unverified, counted as compat".to_string(),
        ),
        (Some(d), true) if d.nvfs_reads > 0 && d.posix_reads == 0 => (
            IoPath::Nvfs,
            format!("GPUDirect Storage through nvidia-fs; {}", counts(d)),
        ),
        (Some(d), true) if d.nvfs_reads > 0 => (
            IoPath::CufileCompat,
            format!(
                "mixed nvfs and POSIX reads, counted as compat (set serialize_stats for exact per-task paths); {}",
                counts(d)
            ),
        ),
        (Some(d), true) if d.posix_reads > 0 => (
            IoPath::CufileCompat,
            format!("cuFile fell back to its POSIX compat mode; {}", counts(d)),
        ),
        (Some(d), true) => (
            IoPath::CufileCompat,
            format!("cuFile counted no nvfs reads, counted as compat; {}", counts(d)),
        ),
    }
}

impl CufileBackend {
    /// Opens the cuFile driver on `ctx`'s GPU, or shares the one already open.
    ///
    /// `Err(Unavailable)` when libcufile is missing or its driver does not open.
    pub fn new(ctx: Arc<GpuContext>, opts: CufileOptions) -> Result<Self> {
        let driver = CufileDriver::open(&ctx, &opts.params)?;
        let threads = if opts.threads == 0 {
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(4)
        } else {
            opts.threads
        };
        Ok(Self {
            ctx,
            driver,
            opts,
            threads,
        })
    }

    /// The GPU context.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    /// The opened cuFile driver (properties, statistics).
    pub fn driver(&self) -> &Arc<CufileDriver> {
        &self.driver
    }

    /// Opens and registers `source`'s file (with `O_DIRECT` when asked and the plan is aligned).
    ///
    /// `Err` is the refusal text, naming the file and cuFile's error (for example
    /// `CU_FILE_HANDLE_NOT_REGISTERED`) with the hint to read cufile.log.
    pub fn register(&self, source: &ParquetSource, plan: &ReadPlan) -> std::result::Result<FileHandle, String> {
        let path = source.path();
        // Register the source's own open file (a dup), so a fetch reads the file the plan was made for;
        // only O_DIRECT needs a fresh open.
        let dup = || {
            source
                .file()
                .try_clone()
                .map_err(|e| format!("{}: cannot duplicate the handle: {e}", path.display()))
        };
        let (file, direct) = if self.opts.direct_io && plan.options.align {
            match crate::io::pread::open_direct(path) {
                Ok(f) => (f, true),
                Err(_) => (dup()?, false),
            }
        } else {
            (dup()?, false)
        };
        self.ctx.bind().map_err(|e| e.to_string())?;
        FileHandle::register(&self.driver, file, direct).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Reads tasks `which` through `handle` into `dest`; returns records (by task), the statistics
    /// delta and notes.
    pub(crate) fn run_tasks(
        &self,
        handle: &FileHandle,
        source: &ParquetSource,
        plan: &ReadPlan,
        which: &[usize],
        dest: &DeviceWriter<'_>,
        t0: Instant,
    ) -> Result<(Vec<TaskRecord>, Option<CufileStatsDelta>, Vec<String>)> {
        let mut notes = self.driver.notes.clone();
        if self.driver.params != self.opts.params {
            notes.push(format!(
                "cuFile was already open with parameters {:?}; {:?} not applied",
                self.driver.params, self.opts.params
            ));
        }
        if self.opts.direct_io && plan.options.align && !handle.is_direct() {
            notes.push(format!(
                "O_DIRECT refused for {}: cuFile got a buffered file",
                source.path().display()
            ));
        }
        if which.is_empty() {
            return Ok((Vec::new(), None, notes));
        }
        let _reg = if self.opts.register_buffer && !dest.is_empty() {
            match BufRegistration::new(&self.driver, dest) {
                Ok(r) => Some(r),
                Err(m) => {
                    notes.push(format!("{m}: reading into an unregistered buffer"));
                    None
                }
            }
        } else {
            None
        };
        let nvfs = self.driver.props.nvfs_loaded();
        if self.opts.serialize_stats {
            let mut records = Vec::with_capacity(which.len());
            guard("cuFile reads", || {
                self.ctx.bind()?;
                let mut total = CufileStatsDelta::default();
                let mut have_stats = true;
                for &ti in which {
                    let before = self.driver.stats().ok();
                    let start = t0.elapsed();
                    let reads = self.read_task(handle, source, plan, ti, dest)?;
                    let end = t0.elapsed();
                    let d = match (before, self.driver.stats().ok()) {
                        (Some(b), Some(a)) => Some(a.since(&b)),
                        _ => None,
                    };
                    match &d {
                        Some(d) => {
                            total = total.plus(*d);
                        }
                        None => have_stats = false,
                    }
                    let (path, reason) = attribute(d.as_ref(), nvfs);
                    records.push(TaskRecord {
                        task: ti,
                        path,
                        reason: Arc::from(reason),
                        reads,
                        bytes: plan.tasks[ti].len,
                        start,
                        end,
                    });
                }
                Ok((records, have_stats.then_some(total), notes))
            })
        } else {
            let before = self.driver.stats().ok();
            let next = AtomicUsize::new(0);
            let abort = AtomicBool::new(false);
            let out = Mutex::new(Vec::with_capacity(which.len()));
            let nthreads = self.threads.min(which.len()).max(1);
            let results: Vec<Result<()>> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..nthreads)
                    .map(|_| {
                        let (next, abort, out) = (&next, &abort, &out);
                        s.spawn(move || {
                            let r = guard("cuFile reads", || {
                                self.ctx.bind()?;
                                let mut mine = Vec::new();
                                while !abort.load(Ordering::Relaxed) {
                                    let Some(&ti) = which.get(next.fetch_add(1, Ordering::Relaxed)) else {
                                        break;
                                    };
                                    let start = t0.elapsed();
                                    let reads = self.read_task(handle, source, plan, ti, dest)?;
                                    mine.push((ti, reads, start, t0.elapsed()));
                                }
                                out.lock().unwrap_or_else(|p| p.into_inner()).extend(mine);
                                Ok(())
                            });
                            if r.is_err() {
                                abort.store(true, Ordering::Relaxed);
                            }
                            r
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err(Error::device("cuFile reads", "a thread panicked")))
                    })
                    .collect()
            });
            for r in results {
                r?;
            }
            let delta = match (before, self.driver.stats().ok()) {
                (Some(b), Some(a)) => Some(a.since(&b)),
                _ => None,
            };
            let (path, reason) = attribute(delta.as_ref(), nvfs);
            let reason: Arc<str> = Arc::from(reason);
            let mut records: Vec<TaskRecord> = out
                .into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .into_iter()
                .map(|(ti, reads, start, end)| TaskRecord {
                    task: ti,
                    path,
                    reason: reason.clone(),
                    reads,
                    bytes: plan.tasks[ti].len,
                    start,
                    end,
                })
                .collect();
            records.sort_by_key(|r| r.task);
            Ok((records, delta, notes))
        }
    }

    /// Reads one task, looping on partial reads; returns the number of `cuFileRead` calls.
    fn read_task(
        &self,
        handle: &FileHandle,
        source: &ParquetSource,
        plan: &ReadPlan,
        ti: usize,
        dest: &DeviceWriter<'_>,
    ) -> Result<u64> {
        let t = &plan.tasks[ti];
        let mut got = 0u64;
        let mut calls = 0u64;
        while got < t.len {
            calls += 1;
            // Tasks are disjoint, so no other read writes these bytes; read_into checks the range.
            let r = handle.read_into(dest, t.dest_offset + got, t.len - got, t.offset + got);
            match r {
                Ok(0) => {
                    return Err(Error::ShortRead {
                        location: task_location(source, plan, ti),
                        offset: t.offset,
                        expected: t.len,
                        got,
                    });
                }
                Ok(n) => got += n as u64,
                Err(cf::ReadError::Os(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(cf::ReadError::Os(e)) => {
                    return Err(Error::io(
                        task_location(source, plan, ti),
                        format!("cuFileRead of {} bytes at offset {}", t.len - got, t.offset + got),
                        e,
                    ));
                }
                Err(cf::ReadError::Cufile(e)) => {
                    return Err(Error::Cufile {
                        context: format!(
                            "{}: cuFileRead at offset {} ({})",
                            task_location(source, plan, ti),
                            t.offset + got,
                            cf::LOG_HINT
                        ),
                        source: e,
                    });
                }
                Err(cf::ReadError::Dest(e)) => return Err(e),
            }
        }
        Ok(calls)
    }
}

/// cuFile reads regular files only; anything else is the OS error a `pread` would give.
fn ensure_regular(source: &ParquetSource) -> Result<()> {
    let md = source
        .file()
        .metadata()
        .map_err(|e| Error::io(source.location(), "cannot stat", e))?;
    if md.is_dir() {
        return Err(Error::io(
            source.location(),
            "cuFile cannot read",
            std::io::Error::from_raw_os_error(libc::EISDIR),
        ));
    }
    Ok(())
}

impl IoBackend for CufileBackend {
    type Buffer = DeviceBuffer;

    fn name(&self) -> String {
        format!("cufile({} threads)", self.threads)
    }

    fn alloc(&self, len: u64) -> Result<DeviceBuffer> {
        alloc_device(&self.ctx, len)
    }

    fn fetch_into(&self, source: &ParquetSource, plan: &ReadPlan, dest: &mut DeviceBuffer) -> Result<IoLog> {
        let started = Instant::now();
        check_dest_len(plan, dest.num_bytes() as u64)?;
        ensure_regular(source)?;
        if plan.tasks.is_empty() {
            return Ok(IoLog {
                backend: self.name(),
                wall: started.elapsed(),
                ..IoLog::default()
            });
        }
        let handle = self.register(source, plan).map_err(|reason| Error::Unavailable {
            backend: "cufile".into(),
            reason,
        })?;
        let all: Vec<usize> = (0..plan.tasks.len()).collect();
        let writer = dest.writer()?;
        let (tasks, stats, notes) = self.run_tasks(&handle, source, plan, &all, &writer, started)?;
        Ok(IoLog {
            backend: self.name(),
            tasks,
            wall: started.elapsed(),
            notes,
            cufile_stats: stats,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(total: u64, nvfs: u64, posix: u64) -> CufileStatsDelta {
        CufileStatsDelta {
            total_reads: total,
            nvfs_reads: nvfs,
            posix_reads: posix,
            read_bytes: total * 4096,
        }
    }

    #[test]
    fn never_nvfs_without_nvidia_fs() {
        for delta in [None, Some(d(3, 3, 0)), Some(d(3, 0, 3)), Some(d(4, 2, 2))] {
            let (path, reason) = attribute(delta.as_ref(), false);
            assert_eq!(path, IoPath::CufileCompat);
            assert!(reason.contains("nvfs version 0.0"), "{reason}");
        }
    }

    #[test]
    fn nvfs_only_when_counters_show_it() {
        assert_eq!(attribute(Some(&d(3, 3, 0)), true).0, IoPath::Nvfs);
        assert_eq!(attribute(Some(&d(3, 0, 3)), true).0, IoPath::CufileCompat);
        let (p, r) = attribute(Some(&d(4, 1, 3)), true);
        assert_eq!(p, IoPath::CufileCompat);
        assert!(r.contains("mixed"), "{r}");
        assert_eq!(attribute(None, true).0, IoPath::CufileCompat);
        assert_eq!(attribute(Some(&d(0, 0, 0)), true).0, IoPath::CufileCompat);
    }

    #[test]
    fn stats_delta_subtracts_and_saturates() {
        let before = cf::StatsSnapshot {
            total_reads: 10,
            nvfs_reads: 4,
            posix_reads: 6,
            read_bytes: 1000,
        };
        let after = cf::StatsSnapshot {
            total_reads: 330,
            nvfs_reads: 4,
            posix_reads: 326,
            read_bytes: 1000 + (1 << 30),
        };
        assert_eq!(
            after.since(&before),
            CufileStatsDelta {
                total_reads: 320,
                nvfs_reads: 0,
                posix_reads: 320,
                read_bytes: 1 << 30,
            }
        );
        // A reset between readings must not wrap around.
        assert_eq!(before.since(&after), CufileStatsDelta::default());
    }
}

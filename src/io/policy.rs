//! Backend selection: which path each task takes, and why.
//!
//! [`CompatMode`] governs our fallback from cuFile to the staged path: `on` always uses the staged path
//! (our own "compat mode"), `off` uses cuFile for every task or fails with the reason, `auto` uses cuFile
//! where it works (tasks of at least [`IoPolicy::small_read_threshold`]) and the staged path otherwise.
//! Without a CUDA driver, `auto` reads into host memory and says so.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::gpu::{DeviceBuffer, GpuContext, cufile as cf};
use crate::io::cufile::{CufileBackend, CufileOptions};
use crate::io::host::HostBackend;
use crate::io::staged::{StagedBackend, StagedOptions};
use crate::io::{DestBuffer, Fetched, IoBackend, IoLog};
use crate::metadata::ParquetSource;
use crate::plan::{PlanOptions, ReadPlan};

/// Whether to fall back from cuFile to the staged path (env `GPU_PARQUET_COMPAT_MODE`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CompatMode {
    /// Always the staged path, never cuFile.
    On,
    /// cuFile for every task, or an error saying why not.
    Off,
    /// cuFile where it works, staged otherwise.
    #[default]
    Auto,
}

impl FromStr for CompatMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "on" | "true" | "1" => Ok(Self::On),
            "off" | "false" | "0" => Ok(Self::Off),
            "auto" | "" => Ok(Self::Auto),
            other => Err(format!("compat mode '{other}': expected on, off or auto")),
        }
    }
}

/// Which backend to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BackendKind {
    /// Host memory only.
    Host,
    /// Staged pinned-buffer path to the GPU.
    Staged,
    /// cuFile to the GPU.
    Cufile,
    /// Decided by [`CompatMode`] and what the machine has.
    #[default]
    Auto,
}

impl FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "host" | "cpu" => Ok(Self::Host),
            "staged" => Ok(Self::Staged),
            "cufile" | "gds" => Ok(Self::Cufile),
            "auto" => Ok(Self::Auto),
            other => Err(format!("backend '{other}': expected host, staged, cufile or auto")),
        }
    }
}

/// I/O settings, from the environment or set directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoPolicy {
    /// Fallback from cuFile to staged (`GPU_PARQUET_COMPAT_MODE`, default auto).
    pub compat_mode: CompatMode,
    /// Tasks smaller than this go staged under auto (`GPU_PARQUET_SMALL_READ_KB`, default 16 KiB).
    pub small_read_threshold: u64,
    /// Task size for plans (`GPU_PARQUET_TASK_SIZE_MB`, default 8 MiB).
    pub task_size: u64,
    /// I/O threads (`GPU_PARQUET_THREADS`, 0 = one per core, the default).
    pub threads: usize,
    /// Run cuFile tasks one at a time with statistics around each (`GPU_PARQUET_SERIALIZE_STATS=1`).
    pub serialize_stats: bool,
    /// Use `O_DIRECT` where the plan is aligned (`GPU_PARQUET_DIRECT=1`).
    pub direct_io: bool,
    /// Size of each pinned bounce buffer of the staged path (`GPU_PARQUET_BOUNCE_KB`, default 4 MiB).
    /// Small buffers stay in the CPU's last-level cache between the `pread` that fills them and the
    /// DMA that drains them, which measured faster than task-sized buffers (see README).
    pub bounce_buffer_size: u64,
    /// Pinned bounce buffers per staged worker thread (`GPU_PARQUET_BOUNCE_BUFFERS`, default 3).
    pub bounce_buffers: usize,
}

impl Default for IoPolicy {
    fn default() -> Self {
        Self {
            compat_mode: CompatMode::Auto,
            small_read_threshold: 16 << 10,
            task_size: 8 << 20,
            threads: 0,
            serialize_stats: false,
            direct_io: false,
            bounce_buffer_size: 4 << 20,
            bounce_buffers: 3,
        }
    }
}

impl IoPolicy {
    /// Reads the `GPU_PARQUET_*` variables; a malformed value is an error naming the variable.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// Like [`IoPolicy::from_env`], with variables looked up through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let bad = |k: &str, v: &str, why: String| Error::InvalidRequest {
            location: crate::error::Location::default(),
            message: format!("{k}={v}: {why}"),
        };
        let num = |k: &str| -> Result<Option<u64>> {
            match var(k) {
                None => Ok(None),
                Some(v) if v.trim().is_empty() => Ok(None),
                Some(v) => v.trim().parse::<u64>().map(Some).map_err(|e| bad(k, &v, e.to_string())),
            }
        };
        let flag = |k: &str| -> Result<bool> {
            match var(k).map(|v| v.trim().to_ascii_lowercase()) {
                None => Ok(false),
                Some(v) => match v.as_str() {
                    "" | "0" | "false" | "off" | "no" => Ok(false),
                    "1" | "true" | "on" | "yes" => Ok(true),
                    _ => Err(bad(k, &v, "expected 0 or 1".into())),
                },
            }
        };
        let mut p = Self::default();
        if let Some(v) = var("GPU_PARQUET_COMPAT_MODE") {
            p.compat_mode = v.parse().map_err(|e| bad("GPU_PARQUET_COMPAT_MODE", &v, e))?;
        }
        if let Some(kb) = num("GPU_PARQUET_SMALL_READ_KB")? {
            p.small_read_threshold = kb.saturating_mul(1024);
        }
        if let Some(mb) = num("GPU_PARQUET_TASK_SIZE_MB")? {
            if mb == 0 {
                return Err(bad("GPU_PARQUET_TASK_SIZE_MB", "0", "must be at least 1".into()));
            }
            p.task_size = mb.saturating_mul(1 << 20);
        }
        if let Some(t) = num("GPU_PARQUET_THREADS")? {
            p.threads = t as usize;
        }
        p.serialize_stats = flag("GPU_PARQUET_SERIALIZE_STATS")?;
        p.direct_io = flag("GPU_PARQUET_DIRECT")?;
        if let Some(kb) = num("GPU_PARQUET_BOUNCE_KB")? {
            if kb < 4 {
                return Err(bad(
                    "GPU_PARQUET_BOUNCE_KB",
                    &kb.to_string(),
                    "must be at least 4".into(),
                ));
            }
            p.bounce_buffer_size = kb.saturating_mul(1024);
        }
        if let Some(n) = num("GPU_PARQUET_BOUNCE_BUFFERS")? {
            p.bounce_buffers = (n as usize).max(2);
        }
        Ok(p)
    }

    /// Plan options matching this policy (task size; aligned when direct I/O is on).
    pub fn plan_options(&self) -> PlanOptions {
        PlanOptions {
            task_size: self.task_size,
            align: self.direct_io,
            ..PlanOptions::default()
        }
    }

    fn staged_options(&self) -> StagedOptions {
        StagedOptions {
            threads: self.threads,
            buffer_size: self.bounce_buffer_size as usize,
            buffers_per_thread: self.bounce_buffers,
            direct_io: self.direct_io,
        }
    }

    fn cufile_options(&self) -> CufileOptions {
        CufileOptions {
            threads: self.threads,
            direct_io: self.direct_io,
            serialize_stats: self.serialize_stats,
            ..CufileOptions::default()
        }
    }
}

/// Bytes fetched into host or device memory.
#[derive(Debug)]
pub enum AnyBuffer {
    /// Host memory.
    Host(Bytes),
    /// Device memory.
    Device(DeviceBuffer),
}

impl AnyBuffer {
    /// The bytes in host memory (a copy for device buffers).
    pub fn to_host_bytes(&self) -> Result<Bytes> {
        match self {
            AnyBuffer::Host(b) => Ok(b.clone()),
            AnyBuffer::Device(d) => d.to_host().map(Bytes::from),
        }
    }
}

impl DestBuffer for AnyBuffer {
    fn len(&self) -> u64 {
        match self {
            AnyBuffer::Host(b) => DestBuffer::len(b),
            AnyBuffer::Device(d) => d.len(),
        }
    }
    fn to_host(&self) -> Result<Vec<u8>> {
        match self {
            AnyBuffer::Host(b) => Ok(b.to_vec()),
            AnyBuffer::Device(d) => d.to_host(),
        }
    }
}

enum Inner {
    Host(HostBackend),
    Staged(StagedBackend),
    /// cuFile, with a staged backend for small tasks and refused files (`None` when compat mode is off).
    Cufile(CufileBackend, Option<StagedBackend>),
}

/// A backend chosen once by [`BackendKind`] and [`IoPolicy`], reusable across fetches.
pub struct AnyBackend {
    inner: Inner,
    policy: IoPolicy,
    kind: BackendKind,
    notes: Vec<String>,
}

impl std::fmt::Debug for AnyBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnyBackend")
            .field("kind", &self.kind)
            .field("name", &self.name())
            .field("notes", &self.notes)
            .finish()
    }
}

impl AnyBackend {
    /// Builds the backend for `kind` (auto: decides here what the machine can do).
    pub fn new(kind: BackendKind, policy: &IoPolicy) -> Result<Self> {
        let mut notes = Vec::new();
        let host = || HostBackend::new(policy.threads);
        let inner = match kind {
            BackendKind::Host => Inner::Host(host()?),
            BackendKind::Staged => Inner::Staged(StagedBackend::new(GpuContext::shared()?, policy.staged_options())?),
            BackendKind::Cufile => Inner::Cufile(
                CufileBackend::new(GpuContext::shared()?, policy.cufile_options())?,
                None,
            ),
            BackendKind::Auto => match GpuContext::shared() {
                Err(e) => {
                    notes.push(format!("no GPU path: {e}; reading into host memory"));
                    Inner::Host(host()?)
                }
                Ok(ctx) => {
                    let staged = |reason: &str| -> Result<StagedBackend> {
                        Ok(StagedBackend::new(ctx.clone(), policy.staged_options())?.with_reason(reason))
                    };
                    match policy.compat_mode {
                        CompatMode::On => {
                            notes.push("compat mode on: staged path, cuFile not used".into());
                            Inner::Staged(staged("compat mode on")?)
                        }
                        CompatMode::Off => {
                            Inner::Cufile(CufileBackend::new(ctx.clone(), policy.cufile_options())?, None)
                        }
                        CompatMode::Auto => match CufileBackend::new(ctx.clone(), policy.cufile_options()) {
                            Ok(c) => {
                                if !c.driver().props.nvfs_loaded() {
                                    // Auto still prefers cuFile where it registers the file (the policy users
                                    // set), but without nvidia-fs that only buys cuFile's POSIX compat mode.
                                    notes.push(
                                        "nvidia-fs is not loaded: cuFile can only run its POSIX compat mode \
                                         (no GPUDirect Storage); --compat-mode on uses our staged path instead"
                                            .into(),
                                    );
                                }
                                Inner::Cufile(c, Some(staged("task below the small-read threshold")?))
                            }
                            Err(e) => {
                                let reason = format!("cuFile unavailable: {e}");
                                notes.push(format!("{reason}; staged path"));
                                Inner::Staged(staged(&reason)?)
                            }
                        },
                    }
                }
            },
        };
        Ok(Self {
            inner,
            policy: policy.clone(),
            kind,
            notes,
        })
    }

    /// The kind asked for.
    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    /// Notes from choosing the backend (fallbacks and why).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The staged backend inside, if any (for benchmarks reusing buffers).
    pub fn staged(&self) -> Option<&StagedBackend> {
        match &self.inner {
            Inner::Staged(s) | Inner::Cufile(_, Some(s)) => Some(s),
            _ => None,
        }
    }

    /// Fetches into an existing device buffer (not for the host backend).
    pub fn fetch_into(&self, source: &ParquetSource, plan: &ReadPlan, dest: &mut DeviceBuffer) -> Result<IoLog> {
        let started = Instant::now();
        let mut log = match &self.inner {
            Inner::Host(_) => {
                return Err(Error::Unavailable {
                    backend: "host".into(),
                    reason: "the host backend cannot fill a device buffer".into(),
                });
            }
            Inner::Staged(s) => s.fetch_into(source, plan, dest)?,
            Inner::Cufile(c, None) => c.fetch_into(source, plan, dest)?,
            Inner::Cufile(c, Some(s)) => self.fetch_mixed(c, s, source, plan, dest, started)?,
        };
        let mut notes = self.notes.clone();
        notes.append(&mut log.notes);
        log.notes = notes;
        log.backend = self.name();
        Ok(log)
    }

    fn fetch_mixed(
        &self,
        c: &CufileBackend,
        s: &StagedBackend,
        source: &ParquetSource,
        plan: &ReadPlan,
        dest: &DeviceBuffer,
        started: Instant,
    ) -> Result<IoLog> {
        if dest.len() < plan.dest_len {
            return Err(Error::device(
                "fetching into a device buffer",
                format!("the buffer has {} bytes, the plan needs {}", dest.len(), plan.dest_len),
            ));
        }
        let (big, small): (Vec<usize>, Vec<usize>) =
            (0..plan.tasks.len()).partition(|&i| plan.tasks[i].len >= self.policy.small_read_threshold);
        let mut notes = Vec::new();
        let (mut tasks, stats) = match c.register(source, plan) {
            Err(refusal) => {
                let reason: Arc<str> = Arc::from(format!("cuFile refused the file: {refusal}"));
                notes.push(format!("{reason}; staged path"));
                let all: Vec<usize> = (0..plan.tasks.len()).collect();
                let (t, mut n) = s.run_tasks(source, plan, &all, dest, &reason, started)?;
                notes.append(&mut n);
                (t, None)
            }
            Ok(handle) => {
                let (mut t, stats, mut n) = c.run_tasks(&handle, source, plan, &big, dest, started)?;
                notes.append(&mut n);
                let reason: Arc<str> = Arc::from(format!(
                    "task below the small-read threshold ({} bytes)",
                    self.policy.small_read_threshold
                ));
                let (mut t2, mut n2) = s.run_tasks(source, plan, &small, dest, &reason, started)?;
                notes.append(&mut n2);
                t.append(&mut t2);
                (t, stats)
            }
        };
        tasks.sort_by_key(|r| r.task);
        Ok(IoLog {
            backend: String::new(),
            tasks,
            wall: started.elapsed(),
            notes,
            cufile_stats: stats,
        })
    }

    fn device_ctx(&self) -> Option<&Arc<GpuContext>> {
        match &self.inner {
            Inner::Host(_) => None,
            Inner::Staged(s) => Some(s.context()),
            Inner::Cufile(_, Some(s)) => Some(s.context()),
            Inner::Cufile(_, None) => None,
        }
    }
}

impl IoBackend for AnyBackend {
    type Buffer = AnyBuffer;

    fn name(&self) -> String {
        match &self.inner {
            Inner::Host(h) => h.name(),
            Inner::Staged(s) => s.name(),
            Inner::Cufile(c, None) => c.name(),
            Inner::Cufile(c, Some(s)) => format!("auto: {} + {} for small reads", c.name(), s.name()),
        }
    }

    fn fetch(&self, source: &ParquetSource, plan: &ReadPlan) -> Result<Fetched<AnyBuffer>> {
        if let Inner::Host(h) = &self.inner {
            let mut f = h.fetch(source, plan)?;
            let mut notes = self.notes.clone();
            notes.append(&mut f.log.notes);
            f.log.notes = notes;
            return Ok(Fetched {
                buffer: AnyBuffer::Host(f.buffer),
                log: f.log,
            });
        }
        let ctx = match self.device_ctx() {
            Some(c) => c.clone(),
            None => GpuContext::shared()?,
        };
        let mut dest = ctx.alloc(plan.dest_len)?;
        let log = self.fetch_into(source, plan, &mut dest)?;
        Ok(Fetched {
            buffer: AnyBuffer::Device(dest),
            log,
        })
    }
}

/// Builds the backend for `kind` and fetches `plan` once (build an [`AnyBackend`] to fetch repeatedly).
pub fn fetch(
    kind: BackendKind,
    policy: &IoPolicy,
    source: &ParquetSource,
    plan: &ReadPlan,
) -> Result<Fetched<AnyBuffer>> {
    AnyBackend::new(kind, policy)?.fetch(source, plan)
}

/// Whether cuFile is usable at all here, with the reason when not (no driver open attempted).
pub fn cufile_presence() -> std::result::Result<(), String> {
    cf::present()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn policy_defaults_and_overrides() {
        let p = IoPolicy::from_vars(vars(&[])).unwrap();
        assert_eq!(p, IoPolicy::default());
        assert_eq!(p.small_read_threshold, 16 * 1024);
        let p = IoPolicy::from_vars(vars(&[
            ("GPU_PARQUET_COMPAT_MODE", "OFF"),
            ("GPU_PARQUET_SMALL_READ_KB", "64"),
            ("GPU_PARQUET_TASK_SIZE_MB", "4"),
            ("GPU_PARQUET_THREADS", "16"),
            ("GPU_PARQUET_SERIALIZE_STATS", "1"),
        ]))
        .unwrap();
        assert_eq!(p.compat_mode, CompatMode::Off);
        assert_eq!(p.small_read_threshold, 64 * 1024);
        assert_eq!(p.task_size, 4 << 20);
        assert_eq!(p.threads, 16);
        assert!(p.serialize_stats);
        assert!(!p.direct_io);
        assert_eq!(p.plan_options().task_size, 4 << 20);
    }

    #[test]
    fn policy_rejects_malformed_values_naming_the_variable() {
        for (k, v) in [
            ("GPU_PARQUET_COMPAT_MODE", "maybe"),
            ("GPU_PARQUET_SMALL_READ_KB", "-3"),
            ("GPU_PARQUET_TASK_SIZE_MB", "0"),
            ("GPU_PARQUET_THREADS", "many"),
            ("GPU_PARQUET_SERIALIZE_STATS", "2"),
        ] {
            let e = IoPolicy::from_vars(vars(&[(k, v)])).unwrap_err().to_string();
            assert!(e.contains(k), "{e}");
        }
    }

    #[test]
    fn kinds_parse() {
        assert_eq!("HOST".parse::<BackendKind>().unwrap(), BackendKind::Host);
        assert_eq!("staged".parse::<BackendKind>().unwrap(), BackendKind::Staged);
        assert_eq!("gds".parse::<BackendKind>().unwrap(), BackendKind::Cufile);
        assert_eq!("auto".parse::<BackendKind>().unwrap(), BackendKind::Auto);
        assert!("nvme".parse::<BackendKind>().is_err());
        assert_eq!("on".parse::<CompatMode>().unwrap(), CompatMode::On);
        assert_eq!(" auto ".parse::<CompatMode>().unwrap(), CompatMode::Auto);
    }

    /// Without a CUDA driver, auto reads into host memory and says why; with one, it picks a GPU path.
    #[test]
    fn auto_falls_back_to_host_without_cuda() {
        let b = AnyBackend::new(BackendKind::Auto, &IoPolicy::default()).unwrap();
        match crate::gpu::cuda_present() {
            Err(reason) => {
                assert_eq!(b.name(), "host");
                assert!(
                    b.notes()
                        .iter()
                        .any(|n| n.contains("no GPU path") && n.contains(&reason)),
                    "{:?}",
                    b.notes()
                );
                let e = AnyBackend::new(BackendKind::Staged, &IoPolicy::default()).unwrap_err();
                assert!(e.to_string().contains("libcuda"), "{e}");
            }
            Ok(()) => assert_ne!(b.name(), "host"),
        }
    }
}

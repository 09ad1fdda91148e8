//! Building the backend a [`BackendKind`] and an [`IoPolicy`] call for, and saying why.
//!
//! `auto` means, in order: no usable GPU → host memory; compat mode `on` → staged; compat mode `off` →
//! cuFile; otherwise cuFile with nvidia-fs loaded (the [`AutoBackend`] decorator: staged for small
//! reads and refused files), and the staged path when nvidia-fs is not loaded, since cuFile can then
//! only run its POSIX compat mode, measured slower on a first read (15-17 GB/s against 38-41 GB/s for
//! staged on the H200 machine). An explicit `cufile` backend always uses cuFile.

use std::sync::Arc;

use crate::config::{BackendKind, CompatMode, IoPolicy};
use crate::error::{Error, Result};
use crate::gpu::cufile::CufileDriver;
use crate::gpu::{DeviceBuffer, GpuContext};
use crate::io::auto::AutoBackend;
use crate::io::cufile::{CufileBackend, CufileOptions};
use crate::io::host::{HostBackend, HostBuffer};
use crate::io::staged::{StagedBackend, StagedOptions};
use crate::io::{DeliverStep, DestBuffer, IoBackend, IoLog, StepFetched};
use crate::metadata::ParquetSource;
use crate::plan::ReadPlan;

/// Why `auto` takes the staged path when nvidia-fs is absent.
pub const NO_NVFS_REASON: &str = "nvidia-fs is not loaded, so cuFile could only run its POSIX compat mode \
     (measured slower on a first read: 15-17 GB/s against 38-41 GB/s for staged); staged path \
     (--backend cufile or --compat-mode off forces cuFile)";

/// Bytes fetched into host or device memory.
#[derive(Debug)]
pub enum AnyBuffer {
    /// Host memory (host backend).
    Host(HostBuffer),
    /// Device memory (staged, cuFile, auto).
    Device(DeviceBuffer),
}

impl AnyBuffer {
    /// The device buffer, when the bytes are on a GPU.
    pub fn device(&self) -> Option<&DeviceBuffer> {
        match self {
            AnyBuffer::Device(d) => Some(d),
            AnyBuffer::Host(_) => None,
        }
    }

    /// The bytes in host memory: shared without a copy for host buffers, copied back for device ones.
    pub(crate) fn into_host_bytes(self) -> Result<bytes::Bytes> {
        match self {
            AnyBuffer::Host(b) => Ok(b.into_bytes()),
            AnyBuffer::Device(d) => d.copy_to_host().map(bytes::Bytes::from),
        }
    }
}

impl DestBuffer for AnyBuffer {
    fn len(&self) -> u64 {
        match self {
            AnyBuffer::Host(b) => b.len(),
            AnyBuffer::Device(d) => DestBuffer::len(d),
        }
    }
    fn to_host(&self) -> Result<Vec<u8>> {
        match self {
            AnyBuffer::Host(b) => b.to_host(),
            AnyBuffer::Device(d) => d.to_host(),
        }
    }
}

#[derive(Debug)]
enum Inner {
    Host(HostBackend),
    Staged(StagedBackend),
    Cufile(CufileBackend),
    Auto(AutoBackend),
}

/// The backend chosen once for a [`BackendKind`] and [`IoPolicy`], reusable across fetches.
#[derive(Debug)]
pub struct AnyBackend {
    inner: Inner,
    kind: BackendKind,
    notes: Vec<String>,
}

fn staged_options(policy: &IoPolicy) -> StagedOptions {
    StagedOptions {
        threads: policy.threads,
        buffer_size: policy.bounce_buffer_size as usize,
        buffers_per_thread: policy.bounce_buffers,
        direct_io: policy.direct_io,
        direct_when_cold: policy.direct_when_cold,
        pinned: policy.pinned,
    }
}

fn cufile_options(policy: &IoPolicy) -> CufileOptions {
    CufileOptions {
        threads: policy.threads,
        direct_io: policy.direct_io,
        serialize_stats: policy.serialize_stats,
        ..CufileOptions::default()
    }
}

impl AnyBackend {
    /// Builds the backend for `kind` on GPU `device` (whose context is shared with every other user of
    /// that device in the process). `auto` decides here what the machine can do.
    pub fn new(kind: BackendKind, policy: &IoPolicy, device: usize) -> Result<Self> {
        let ctx = match kind {
            BackendKind::Host => None,
            _ => Some(GpuContext::new(device)),
        };
        Self::with_context(kind, policy, ctx)
    }

    /// Like [`AnyBackend::new`] with the device's context already obtained (`None` for the host
    /// backend; an `Err` is why there is no GPU, which `auto` turns into a host read with that reason).
    pub fn with_context(kind: BackendKind, policy: &IoPolicy, ctx: Option<Result<Arc<GpuContext>>>) -> Result<Self> {
        policy.validate()?;
        let mut notes = Vec::new();
        let host = || HostBackend::new(policy.threads).map(Inner::Host);
        let gpu = |what: &str| -> Result<Arc<GpuContext>> {
            match &ctx {
                Some(Ok(c)) => Ok(c.clone()),
                Some(Err(e)) => Err(Error::Unavailable {
                    backend: what.into(),
                    reason: format!("{e}; --backend host reads into host memory without a GPU"),
                }),
                None => Err(Error::Unavailable {
                    backend: what.into(),
                    reason: "no GPU context".into(),
                }),
            }
        };
        let staged = |ctx: &Arc<GpuContext>, reason: &str| -> Result<StagedBackend> {
            Ok(StagedBackend::new(ctx.clone(), staged_options(policy))?.with_reason(reason))
        };
        let inner = match kind {
            BackendKind::Host => host()?,
            BackendKind::Staged => Inner::Staged(StagedBackend::new(gpu("staged")?, staged_options(policy))?),
            BackendKind::Cufile => {
                if policy.compat_mode == CompatMode::On {
                    notes.push("compat mode on ignored: --backend cufile asks for cuFile".into());
                }
                Inner::Cufile(CufileBackend::new(gpu("cufile")?, cufile_options(policy))?)
            }
            BackendKind::Auto => match &ctx {
                Some(Ok(ctx)) => match policy.compat_mode {
                    CompatMode::On => {
                        notes.push("compat mode on: staged path, cuFile not used".into());
                        Inner::Staged(staged(ctx, "compat mode on")?)
                    }
                    CompatMode::Off => Inner::Cufile(CufileBackend::new(ctx.clone(), cufile_options(policy))?),
                    // Whether nvidia-fs is loaded is known once cuFile has been opened in this process;
                    // until then, opening it tells (and the backend is kept when it is).
                    CompatMode::Auto => {
                        let cufile = if CufileDriver::nvfs_known() == Some(false) {
                            Ok(None)
                        } else {
                            CufileBackend::new(ctx.clone(), cufile_options(policy))
                                .map(|c| c.driver().props.nvfs_loaded().then_some(c))
                        };
                        match cufile {
                            Ok(Some(c)) => Inner::Auto(AutoBackend::new(
                                c,
                                staged(ctx, "task below the small-read threshold")?,
                                policy.small_read_threshold,
                            )),
                            Ok(None) => {
                                notes.push(NO_NVFS_REASON.into());
                                Inner::Staged(staged(ctx, NO_NVFS_REASON)?)
                            }
                            Err(e) => {
                                let reason = format!("cuFile unavailable: {e}");
                                notes.push(format!("{reason}; staged path"));
                                Inner::Staged(staged(ctx, &reason)?)
                            }
                        }
                    }
                },
                // A GPU asked for that does not exist is the user's mistake, not a reason to fall back.
                Some(Err(e @ Error::NoSuchDevice { .. })) => {
                    return Err(Error::Unavailable {
                        backend: "auto".into(),
                        reason: e.to_string(),
                    });
                }
                other => {
                    let why = match other {
                        Some(Err(e)) => e.to_string(),
                        _ => "no GPU context".into(),
                    };
                    notes.push(format!("no GPU path: {why}; reading into host memory"));
                    host()?
                }
            },
        };
        Ok(Self { inner, kind, notes })
    }

    /// The kind asked for.
    pub(crate) fn kind(&self) -> BackendKind {
        self.kind
    }

    /// Notes from choosing the backend (fallbacks and why).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Whether fetched bytes land in device memory.
    pub fn is_device(&self) -> bool {
        !matches!(self.inner, Inner::Host(_))
    }

    /// Puts the notes from choosing the backend before `log`'s own (every fetch's log carries them).
    pub(crate) fn note_choice(&self, log: &mut IoLog) {
        log.notes.splice(0..0, self.notes.iter().cloned());
    }

    /// The staged backend, when that is what was chosen (for its stepped fetches).
    pub(crate) fn staged(&self) -> Option<&StagedBackend> {
        match &self.inner {
            Inner::Staged(s) => Some(s),
            _ => None,
        }
    }

    /// The GPU context, for device backends.
    pub fn context(&self) -> Option<&Arc<GpuContext>> {
        match &self.inner {
            Inner::Host(_) => None,
            Inner::Staged(s) => Some(s.context()),
            Inner::Cufile(c) => Some(c.context()),
            Inner::Auto(a) => Some(a.staged().context()),
        }
    }
}

impl IoBackend for AnyBackend {
    type Buffer = AnyBuffer;

    fn name(&self) -> String {
        match &self.inner {
            Inner::Host(b) => b.name(),
            Inner::Staged(b) => b.name(),
            Inner::Cufile(b) => b.name(),
            Inner::Auto(b) => b.name(),
        }
    }

    fn alloc(&self, len: u64) -> Result<AnyBuffer> {
        Ok(match &self.inner {
            Inner::Host(b) => AnyBuffer::Host(b.alloc(len)?),
            Inner::Staged(b) => AnyBuffer::Device(b.alloc(len)?),
            Inner::Cufile(b) => AnyBuffer::Device(b.alloc(len)?),
            Inner::Auto(b) => AnyBuffer::Device(b.alloc(len)?),
        })
    }

    fn fetch_into(&self, source: &ParquetSource, plan: &ReadPlan, dest: &mut AnyBuffer) -> Result<IoLog> {
        let mut log = match (&self.inner, dest) {
            (Inner::Host(b), AnyBuffer::Host(d)) => b.fetch_into(source, plan, d)?,
            (Inner::Staged(b), AnyBuffer::Device(d)) => b.fetch_into(source, plan, d)?,
            (Inner::Cufile(b), AnyBuffer::Device(d)) => b.fetch_into(source, plan, d)?,
            (Inner::Auto(b), AnyBuffer::Device(d)) => b.fetch_into(source, plan, d)?,
            _ => {
                return Err(Error::InvalidRequest {
                    location: source.location(),
                    message: format!("the {} backend cannot fill this kind of buffer", self.name()),
                });
            }
        };
        self.note_choice(&mut log);
        Ok(log)
    }

    /// The chosen backend's own stepped fetch (the staged backend's keeps its workers reading from
    /// one step into the next), each step's log carrying the notes from choosing the backend.
    fn fetch_steps(
        &self,
        source: &ParquetSource,
        plans: &[Arc<ReadPlan>],
        admit: &mut dyn FnMut(usize) -> bool,
        deliver: &DeliverStep<'_, AnyBuffer>,
    ) {
        let noted = |k: usize, r: Result<StepFetched<AnyBuffer>>| {
            deliver(
                k,
                r.map(|mut f| {
                    self.note_choice(&mut f.log);
                    f
                }),
            )
        };
        let device = |k: usize, r: Result<StepFetched<DeviceBuffer>>| {
            noted(
                k,
                r.map(|f| StepFetched {
                    buffer: AnyBuffer::Device(f.buffer),
                    log: f.log,
                    queued: f.queued,
                }),
            )
        };
        match &self.inner {
            Inner::Host(b) => b.fetch_steps(source, plans, admit, &|k, r| {
                noted(
                    k,
                    r.map(|f| StepFetched {
                        buffer: AnyBuffer::Host(f.buffer),
                        log: f.log,
                        queued: f.queued,
                    }),
                )
            }),
            Inner::Staged(b) => b.fetch_steps(source, plans, admit, &device),
            Inner::Cufile(b) => b.fetch_steps(source, plans, admit, &device),
            Inner::Auto(b) => b.fetch_steps(source, plans, admit, &device),
        }
    }
}

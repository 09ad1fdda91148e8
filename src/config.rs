//! Configuration: the I/O policy as a value built in code, and the one place that reads the
//! environment ([`Settings::from_env`]).
//!
//! Every setting has one name as a command-line flag and one as an environment variable ([`Key`]);
//! both go through the same parser and bounds, and a flag replaces its variable without the variable
//! being looked at. Nothing else in the library reads the environment.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::gpu::PinnedAlloc;
use crate::gpu::nvcomp::NvcompSearch;
use crate::plan::{DEFAULT_TASK_SIZE, PlanOptions};

/// Whether cuFile is used at all, in KvikIO's sense of "compat mode".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CompatMode {
    /// Compat mode on: never cuFile; GPU reads take our staged path.
    On,
    /// Compat mode off: cuFile for every read, or an error saying why not.
    Off,
    /// cuFile where it pays: with nvidia-fs loaded, cuFile (staged for small reads and refused files);
    /// without it, the staged path (cuFile could only run its slower POSIX compat mode).
    #[default]
    Auto,
}

impl FromStr for CompatMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            "auto" => Ok(Self::Auto),
            _ => Err("expected on (never cuFile), off (cuFile or fail) or auto".into()),
        }
    }
}

impl std::fmt::Display for CompatMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::On => "on",
            Self::Off => "off",
            Self::Auto => "auto",
        })
    }
}

/// Which backend reads the column chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BackendKind {
    /// `pread` into host memory; no GPU.
    Host,
    /// Our staged path: `pread` into pinned host buffers, asynchronous copies to the GPU.
    Staged,
    /// cuFile into GPU memory (nvfs where nvidia-fs is loaded, else cuFile's POSIX compat mode).
    Cufile,
    /// Decided by [`CompatMode`] and what the machine has; host memory on a machine without a GPU.
    #[default]
    Auto,
}

impl FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "host" => Ok(Self::Host),
            "staged" => Ok(Self::Staged),
            "cufile" => Ok(Self::Cufile),
            "auto" => Ok(Self::Auto),
            _ => Err("expected host, staged, cufile or auto".into()),
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Host => "host",
            Self::Staged => "staged",
            Self::Cufile => "cufile",
            Self::Auto => "auto",
        })
    }
}

/// How reads are carried out. Build it in code (`IoPolicy { threads: 8, ..Default::default() }`) or
/// from flags and the environment with [`Settings::from_env`]; [`IoPolicy::validate`] holds both to
/// the same bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoPolicy {
    /// Whether cuFile is used (KvikIO's meaning: `on` = never cuFile).
    pub compat_mode: CompatMode,
    /// With cuFile in use, tasks smaller than this many bytes go through the staged path.
    pub small_read_threshold: u64,
    /// Largest single read task, bytes.
    pub task_size: u64,
    /// I/O threads; 0 = one per core (for the staged path, three per four cores).
    pub threads: usize,
    /// cuFile tasks one at a time, with statistics read around each (exact per-task paths, slower).
    pub serialize_stats: bool,
    /// `O_DIRECT` reads where the file system allows them (plans are then 4 KiB aligned).
    pub direct_io: bool,
    /// `O_DIRECT` reads on the staged path for a read whose pages are mostly not in the page cache
    /// (a cold read), buffered reads otherwise; plans are then 4 KiB aligned too.
    pub direct_when_cold: bool,
    /// Bytes of each pinned bounce buffer of the staged path (also its unit of work per thread).
    /// Buffers that fit the CPU caches between the `pread` that fills them and the DMA that drains them
    /// measured fastest (docs/architecture.md, "Measuring").
    pub bounce_buffer_size: u64,
    /// Pinned bounce buffers per staged worker thread.
    pub bounce_buffers: usize,
    /// How pinned memory is obtained.
    pub pinned: PinnedAlloc,
}

impl Default for IoPolicy {
    fn default() -> Self {
        Self {
            compat_mode: CompatMode::Auto,
            small_read_threshold: 16 << 10,
            task_size: DEFAULT_TASK_SIZE,
            threads: 0,
            serialize_stats: false,
            direct_io: false,
            direct_when_cold: true,
            bounce_buffer_size: 4 << 20,
            bounce_buffers: 3,
            pinned: PinnedAlloc::HugePages,
        }
    }
}

/// Most I/O threads accepted: more only adds scheduling cost (16 saturate the H200 machine).
pub(crate) const MAX_THREADS: usize = 1024;

impl IoPolicy {
    /// Checks every field against the same bounds the flags and variables have.
    pub fn validate(&self) -> Result<()> {
        let check = |key: Key, v: u64| {
            key.check(v).map_err(|m| Error::Config {
                setting: format!("{} {v}", key.describe()),
                message: m,
            })
        };
        check(Key::Threads, self.threads as u64)?;
        check(Key::TaskSize, self.task_size)?;
        check(Key::SmallRead, self.small_read_threshold)?;
        check(Key::BounceBuffer, self.bounce_buffer_size)?;
        check(Key::BounceBuffers, self.bounce_buffers as u64)?;
        Ok(())
    }

    /// Plan options matching this policy (task size; aligned when direct I/O is on).
    pub(crate) fn plan_options(&self) -> PlanOptions {
        PlanOptions {
            task_size: self.task_size,
            align: self.direct_io,
            ..PlanOptions::default()
        }
    }

    /// Plan options for a backend that is (`staged`) or is not the staged one: aligned also where
    /// the staged path may read a cold file `O_DIRECT` (`direct_when_cold`). Other backends read
    /// exactly the chunks' bytes.
    pub(crate) fn plan_options_for(&self, staged: bool) -> PlanOptions {
        PlanOptions {
            align: self.direct_io || (self.direct_when_cold && staged),
            ..self.plan_options()
        }
    }
}

/// A setting that has a flag and an environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// `--compat-mode`, `GPU_PARQUET_COMPAT_MODE`: on, off, auto.
    CompatMode,
    /// `--threads`, `GPU_PARQUET_THREADS`.
    Threads,
    /// `--task-size-mb`, `GPU_PARQUET_TASK_SIZE_MB`.
    TaskSize,
    /// `--small-read-kb`, `GPU_PARQUET_SMALL_READ_KB`.
    SmallRead,
    /// `--bounce-kb`, `GPU_PARQUET_BOUNCE_KB`.
    BounceBuffer,
    /// `--bounce-buffers`, `GPU_PARQUET_BOUNCE_BUFFERS`.
    BounceBuffers,
    /// `--pinned`, `GPU_PARQUET_PINNED`: hugepages or hostalloc.
    Pinned,
    /// `--direct`, `GPU_PARQUET_DIRECT`: 1 (always), 0 (never) or cold (where a read's pages are mostly
    /// not in the page cache, the default).
    Direct,
    /// `--serialize-stats`, `GPU_PARQUET_SERIALIZE_STATS`: 0 or 1.
    SerializeStats,
    /// `--device`, `GPU_PARQUET_DEVICE`: CUDA device ordinal.
    Device,
    /// `--memory-limit-mb`, `GPU_PARQUET_MEMORY_LIMIT_MB`: the memory budget in MiB (kept for old
    /// scripts; [`Key::MemoryLimitSize`] replaces it where both are given).
    MemoryLimit,
    /// `--memory-limit`, `GPU_PARQUET_MEMORY_LIMIT`: the memory budget as a size (`8GiB`, `512MiB`,
    /// `1.5GB` or bytes), as the CLI and Python write it.
    MemoryLimitSize,
    /// `--nvcomp`, `GPU_PARQUET_NVCOMP`: nvCOMP 5's library (or nvCOMP 6's file), or a directory
    /// holding nvCOMP 5.
    Nvcomp,
    /// `--decode-steps`, `GPU_PARQUET_DECODE_STEPS`: the fewest steps a GPU decode cuts a read into.
    DecodeSteps,
    /// `--trust-compressed`, `GPU_PARQUET_TRUST_COMPRESSED`: 0 or 1 (skip the pre-check before nvCOMP).
    TrustCompressed,
    /// `--decode-threads`, `GPU_PARQUET_DECODE_THREADS`: steps a GPU decode decodes at once.
    DecodeThreads,
}

impl Key {
    /// Every key, in docs/settings.md's order.
    pub const ALL: [Key; 16] = [
        Key::CompatMode,
        Key::Threads,
        Key::TaskSize,
        Key::SmallRead,
        Key::BounceBuffer,
        Key::BounceBuffers,
        Key::Pinned,
        Key::Direct,
        Key::SerializeStats,
        Key::Device,
        Key::MemoryLimit,
        Key::MemoryLimitSize,
        Key::Nvcomp,
        Key::DecodeSteps,
        Key::DecodeThreads,
        Key::TrustCompressed,
    ];

    /// The environment variable.
    pub(crate) fn env(self) -> &'static str {
        match self {
            Key::CompatMode => "GPU_PARQUET_COMPAT_MODE",
            Key::Threads => "GPU_PARQUET_THREADS",
            Key::TaskSize => "GPU_PARQUET_TASK_SIZE_MB",
            Key::SmallRead => "GPU_PARQUET_SMALL_READ_KB",
            Key::BounceBuffer => "GPU_PARQUET_BOUNCE_KB",
            Key::BounceBuffers => "GPU_PARQUET_BOUNCE_BUFFERS",
            Key::Pinned => "GPU_PARQUET_PINNED",
            Key::Direct => "GPU_PARQUET_DIRECT",
            Key::SerializeStats => "GPU_PARQUET_SERIALIZE_STATS",
            Key::Device => "GPU_PARQUET_DEVICE",
            Key::MemoryLimit => "GPU_PARQUET_MEMORY_LIMIT_MB",
            Key::MemoryLimitSize => "GPU_PARQUET_MEMORY_LIMIT",
            Key::Nvcomp => "GPU_PARQUET_NVCOMP",
            Key::DecodeSteps => "GPU_PARQUET_DECODE_STEPS",
            Key::DecodeThreads => "GPU_PARQUET_DECODE_THREADS",
            Key::TrustCompressed => "GPU_PARQUET_TRUST_COMPRESSED",
        }
    }

    /// The command-line flag.
    pub fn flag(self) -> &'static str {
        match self {
            Key::CompatMode => "--compat-mode",
            Key::Threads => "--threads",
            Key::TaskSize => "--task-size-mb",
            Key::SmallRead => "--small-read-kb",
            Key::BounceBuffer => "--bounce-kb",
            Key::BounceBuffers => "--bounce-buffers",
            Key::Pinned => "--pinned",
            Key::Direct => "--direct",
            Key::SerializeStats => "--serialize-stats",
            Key::Device => "--device",
            Key::MemoryLimit => "--memory-limit-mb",
            Key::MemoryLimitSize => "--memory-limit",
            Key::Nvcomp => "--nvcomp",
            Key::DecodeSteps => "--decode-steps",
            Key::DecodeThreads => "--decode-threads",
            Key::TrustCompressed => "--trust-compressed",
        }
    }

    fn describe(self) -> String {
        format!("{} ({})", self.flag(), self.env())
    }

    /// Bytes (or count) per unit the user writes: MiB for `_MB`, KiB for `_KB`.
    fn unit(self) -> u64 {
        match self {
            Key::TaskSize | Key::MemoryLimit => 1 << 20,
            Key::SmallRead | Key::BounceBuffer => 1 << 10,
            _ => 1,
        }
    }

    /// Inclusive bounds of the value in the user's unit, for numeric keys.
    fn bounds(self) -> Option<(u64, u64)> {
        match self {
            Key::Threads => Some((0, MAX_THREADS as u64)),
            Key::TaskSize => Some((1, 1024)),
            Key::SmallRead => Some((0, 1 << 20)),
            Key::BounceBuffer => Some((4, 256 << 10)),
            Key::BounceBuffers => Some((2, 64)),
            Key::Device => Some((0, 1023)),
            Key::MemoryLimit => Some((1, 1 << 30)),
            Key::DecodeSteps => Some((1, 4096)),
            _ => None,
        }
    }

    /// Checks a value in bytes (or count) against the bounds. Code may set a task size below 1 MiB
    /// (down to one 4 KiB page), which the flag's unit cannot express.
    fn check(self, value: u64) -> std::result::Result<(), String> {
        let Some((lo, hi)) = self.bounds() else { return Ok(()) };
        let unit = self.unit();
        let min = if self == Key::TaskSize { 4096 } else { lo * unit };
        if value < min || value > hi * unit {
            return Err(self.range_text(lo, hi));
        }
        Ok(())
    }

    fn range_text(self, lo: u64, hi: u64) -> String {
        let unit = match self.unit() {
            1 => "",
            1024 => " KiB",
            _ => " MiB",
        };
        let zero = if self == Key::Threads { " (0: one per core)" } else { "" };
        format!("expected a whole number from {lo} to {hi}{unit}{zero}")
    }

    /// Parses a numeric value in the user's unit, checked against the bounds; returns bytes (or count).
    fn parse_number(self, raw: &str) -> std::result::Result<u64, String> {
        let (lo, hi) = self.bounds().unwrap_or((0, u64::MAX));
        let n: u64 = raw.trim().parse().map_err(|_| self.range_text(lo, hi))?;
        if n < lo || n > hi {
            return Err(self.range_text(lo, hi));
        }
        Ok(n * self.unit())
    }
}

/// A memory budget written as a size: at least 1 MiB, at most 1 PiB.
fn parse_memory_size(raw: &str) -> std::result::Result<u64, String> {
    let bytes = raw.trim().parse::<crate::ByteSize>()?.0;
    if !(1 << 20..=1 << 50).contains(&bytes) {
        return Err("expected at least 1MiB and at most 1PiB".into());
    }
    Ok(bytes)
}

fn parse_bool(raw: &str) -> std::result::Result<bool, String> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        _ => Err("expected 0 or 1".into()),
    }
}

/// `GPU_PARQUET_DIRECT`: `1` always, `0` never, `cold` where a read's pages are mostly uncached.
fn parse_direct(raw: &str) -> std::result::Result<(bool, bool), String> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "cold" | "auto" => Ok((false, true)),
        _ => parse_bool(raw)
            .map(|on| (on, false))
            .map_err(|_| "expected 0, 1 or cold".into()),
    }
}

fn parse_pinned(raw: &str) -> std::result::Result<PinnedAlloc, String> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "hugepages" | "huge-pages" => Ok(PinnedAlloc::HugePages),
        "hostalloc" => Ok(PinnedAlloc::HostAlloc),
        _ => Err("expected hugepages or hostalloc".into()),
    }
}

/// Everything configurable from outside: the I/O policy and the reader's device and memory budget.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Settings {
    /// How reads are carried out.
    pub policy: IoPolicy,
    /// CUDA device ordinal.
    pub device: usize,
    /// Device-memory budget for a streaming read, bytes (`None`: from free memory).
    pub memory_limit: Option<u64>,
    /// The cuFile configuration file cuFile itself will read (`CUFILE_ENV_PATH_JSON`, else
    /// `/etc/cufile.json`), for `check`.
    pub cufile_config: PathBuf,
    /// nvCOMP's library or its directory, as given (`--nvcomp`, `GPU_PARQUET_NVCOMP`); when set, the
    /// only place nvCOMP is looked for.
    pub nvcomp: Option<PathBuf>,
    /// Python package directories that may hold the nvCOMP wheel, in Python's own order:
    /// `PYTHONPATH`, the virtual environment (`VIRTUAL_ENV`), the user's (`HOME`), the system's.
    pub python_dirs: Vec<PathBuf>,
    /// Folder of the GPU decoder's compiled-kernel cache: `GPU_PARQUET_KERNEL_CACHE` (`off`: none),
    /// else `$XDG_CACHE_HOME/gpu-parquet`, else `$HOME/.cache/gpu-parquet`.
    pub kernel_cache: Option<PathBuf>,
    /// The fewest steps a GPU decode cuts a whole read into (while each stays over 256 MiB), so the
    /// next step's reads overlap this step's decode (`None`: 8).
    pub decode_steps: Option<usize>,
    /// Steps a GPU decode decodes at once (`None`: 2, fewer where memory allows only one).
    pub decode_threads: Option<usize>,
    /// Hand compressed bodies to nvCOMP without the GPU pre-check (trusted files only).
    pub trust_compressed: bool,
    /// Developer tuning (tracing, the Snappy decoders' choice).
    pub tuning: Tuning,
}

/// Developer tuning: choices kept to compare alternatives in one run, not settings a user needs.
/// Read from the environment with the other settings ([`Settings::from_env`]), set per reader
/// ([`crate::ReaderBuilder::with_tuning`]), and written in the read report where they differ from the
/// default ([`Tuning::differences`]).
///
/// Switches whose alternative lost when measured were deleted with their code paths (see
/// `docs/settings.md`); what stays is diagnostics and the Snappy decoders' choice, which is also how
/// each decoder is tested alone on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Tuning {
    /// `GPU_PARQUET_TRACE_FETCH=1`: print to stderr each staged fetch's phases and each pipeline
    /// step's fetch (where the time between the last copy and the fetch's return goes, and what comes
    /// before a read's first `pread`: its planning, the `O_DIRECT` choice, each step's buffer), each
    /// held step's phases in `bench`'s decode alone in the read's steps, and when each decoder of a
    /// step's decompression came back. Once a reader with it is built, tracing stays on for the
    /// process (the staged backend's threads are shared between readers).
    pub trace: bool,
    /// `GPU_PARQUET_SNAPPY`: which GPU decoders take Snappy bodies.
    pub snappy: SnappyDecoders,
    /// `GPU_PARQUET_ZSTD`: which GPU decoder takes Zstd bodies.
    pub zstd: ZstdDecoders,
    /// `GPU_PARQUET_STEPS_IN_FLIGHT`: the most steps a GPU decode holds in device memory at once
    /// (`None`: 5), which bounds the steps decoded at once (one fewer): a read's peak against its
    /// decoders' overlap.
    pub steps_in_flight: Option<usize>,
}

impl Tuning {
    /// Reads `GPU_PARQUET_TRACE_FETCH`, `GPU_PARQUET_SNAPPY`, `GPU_PARQUET_ZSTD` and
    /// `GPU_PARQUET_STEPS_IN_FLIGHT` through `var`.
    fn from_lookup(var: &impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut t = Tuning::default();
        let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        if let Some(v) = set(TRACE_VAR) {
            t.trace = parse_bool(&v).map_err(|message| Error::Config {
                setting: format!("{TRACE_VAR}={v}"),
                message,
            })?;
        }
        if let Some(v) = set(SNAPPY_VAR) {
            t.snappy = v.parse().map_err(|message| Error::Config {
                setting: format!("{SNAPPY_VAR}={v}"),
                message,
            })?;
        }
        if let Some(v) = set(ZSTD_VAR) {
            t.zstd = v.parse().map_err(|message| Error::Config {
                setting: format!("{ZSTD_VAR}={v}"),
                message,
            })?;
        }
        if let Some(v) = set(STEPS_IN_FLIGHT_VAR) {
            let n = v.trim().parse::<usize>().ok().filter(|n| (2..=64).contains(n));
            t.steps_in_flight = Some(n.ok_or_else(|| Error::Config {
                setting: format!("{STEPS_IN_FLIGHT_VAR}={v}"),
                message: "expected a whole number from 2 to 64".into(),
            })?);
        }
        Ok(t)
    }

    /// The fields that differ from the default, as the variables that would set them
    /// (`GPU_PARQUET_SNAPPY=gp_unsnap`); empty for the default.
    pub(crate) fn differences(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.trace {
            out.push(format!("{TRACE_VAR}=1"));
        }
        if self.snappy != SnappyDecoders::default() {
            out.push(format!("{SNAPPY_VAR}={}", self.snappy));
        }
        if self.zstd != ZstdDecoders::default() {
            out.push(format!("{ZSTD_VAR}={}", self.zstd));
        }
        if let Some(n) = self.steps_in_flight {
            out.push(format!("{STEPS_IN_FLIGHT_VAR}={n}"));
        }
        out
    }
}

const TRACE_VAR: &str = "GPU_PARQUET_TRACE_FETCH";
const SNAPPY_VAR: &str = "GPU_PARQUET_SNAPPY";
const ZSTD_VAR: &str = "GPU_PARQUET_ZSTD";
const STEPS_IN_FLIGHT_VAR: &str = "GPU_PARQUET_STEPS_IN_FLIGHT";

/// Which GPU decoders take Snappy bodies (`GPU_PARQUET_SNAPPY`). nvCOMP against our own kernels is a
/// real comparison (the default was measured: pre-check and nvCOMP beat `gp_unsnap`, 34.8 against
/// 42.2 ms of kernels for the snappy benchmark file in one step; the wide decoder beats both on the
/// longest bodies), and our kernels are the path where nvCOMP is absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SnappyDecoders {
    /// `auto`: the longest bodies of a step to the wide decoder where that shortens the step
    /// ([`crate::decode::snappy_route`]), the rest to nvCOMP after the pre-check (`gp_unsnap` where
    /// nvCOMP did not load).
    #[default]
    Auto,
    /// `gp_unsnap`: every body to `gp_unsnap`.
    Unsnap,
    /// `nvcomp`: every body to nvCOMP, after the pre-check.
    Nvcomp,
    /// `gp_wsnap`: every body the wide decoder can take to it.
    Wide,
}

impl SnappyDecoders {
    /// Whether the Snappy bodies the wide decoder does not take go to the decoder's own `gp_unsnap`
    /// rather than nvCOMP: under `auto` and `gp_wsnap` only where nvCOMP did not load.
    pub(crate) fn own_kernel(self, nvcomp_loaded: bool) -> bool {
        match self {
            SnappyDecoders::Unsnap => true,
            SnappyDecoders::Nvcomp => false,
            SnappyDecoders::Auto | SnappyDecoders::Wide => !nvcomp_loaded,
        }
    }

    /// Which Snappy bodies the wide decoder takes.
    pub(crate) fn wide(self) -> WideSnappy {
        match self {
            SnappyDecoders::Auto => WideSnappy::Longest,
            SnappyDecoders::Wide => WideSnappy::All,
            SnappyDecoders::Unsnap | SnappyDecoders::Nvcomp => WideSnappy::Off,
        }
    }
}

impl FromStr for SnappyDecoders {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim() {
            "auto" => Ok(SnappyDecoders::Auto),
            "gp_unsnap" => Ok(SnappyDecoders::Unsnap),
            "nvcomp" => Ok(SnappyDecoders::Nvcomp),
            "gp_wsnap" => Ok(SnappyDecoders::Wide),
            _ => Err("expected auto, gp_unsnap, nvcomp or gp_wsnap".into()),
        }
    }
}

impl std::fmt::Display for SnappyDecoders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SnappyDecoders::Auto => "auto",
            SnappyDecoders::Unsnap => "gp_unsnap",
            SnappyDecoders::Nvcomp => "nvcomp",
            SnappyDecoders::Wide => "gp_wsnap",
        })
    }
}

impl serde::Serialize for SnappyDecoders {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Which GPU decoder takes Zstd bodies (`GPU_PARQUET_ZSTD`): nvCOMP after the pre-check (the
/// default where nvCOMP loads), the decoder's own kernel (`kernels/zstd.cu`, safe on any input: where
/// nvCOMP is absent, or chosen), or a share of each step's bodies to each. `gp_unzstd` leaves a frame
/// with a dictionary or a checksum to nvCOMP. Measured on an H100 (run AQ, 2026-12-06, lineitem SF10
/// zstd, `bench --only-decode`, one binary): decode alone 99.0 ms with nvCOMP, 185.3 with `gp_unzstd`,
/// 103.3 with `split:20` (`docs/runs/2026-12-06-run-AP.txt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZstdDecoders {
    /// `nvcomp` (where nvCOMP did not load, `gp_unzstd_blocks` for the longest bodies and `gp_unzstd`
    /// for the rest).
    #[default]
    Nvcomp,
    /// `gp_unzstd`.
    Own,
    /// `split:N`: the smallest bodies of each step, N % of its output bytes, to `gp_unzstd`, the rest
    /// to nvCOMP (every body to `gp_unzstd` where nvCOMP did not load).
    Split(u8),
    /// `blocks:N`: bodies of N KiB of output or more to `gp_unzstd_blocks` (a body's blocks decoded
    /// in parallel), on a side stream beside nvCOMP, which takes the rest (`gp_unzstd` where nvCOMP
    /// did not load).
    Blocks(u32),
}

impl ZstdDecoders {
    /// The share of a step's Zstd output bytes `gp_unzstd` takes.
    pub(crate) fn own_share(self, nvcomp_loaded: bool) -> f64 {
        match self {
            _ if !nvcomp_loaded => 1.0,
            ZstdDecoders::Own => 1.0,
            ZstdDecoders::Nvcomp | ZstdDecoders::Blocks(_) => 0.0,
            ZstdDecoders::Split(p) => f64::from(p) / 100.0,
        }
    }

    /// The least output of a body `gp_unzstd_blocks` takes, if it takes any: by default, where
    /// nvCOMP did not load, bodies of [`BLOCKS_WITHOUT_NVCOMP_KIB`] or more (beside nvCOMP it is
    /// slower, run BB; without it, faster than `gp_unzstd` alone, run BC).
    pub(crate) fn blocks_from(self, nvcomp_loaded: bool) -> Option<usize> {
        match self {
            ZstdDecoders::Blocks(kib) => Some(kib as usize * 1024),
            ZstdDecoders::Nvcomp if !nvcomp_loaded => Some(BLOCKS_WITHOUT_NVCOMP_KIB as usize * 1024),
            _ => None,
        }
    }
}

/// Where nvCOMP did not load, `gp_unzstd_blocks` takes the Zstd bodies of this many KiB of output or
/// more by default (run BC, H100, `docs/runs/2026-12-07-run-BC.txt`: lineitem SF10 zstd decode alone
/// in the read's steps 165.4 ms against 230.3 with `gp_unzstd` alone; run BE, after the batch lookup
/// by ballot: 147.0-147.7 ms against 178.6-192.3 with every body to `gp_unzstd_blocks`).
pub(crate) const BLOCKS_WITHOUT_NVCOMP_KIB: u32 = 256;

impl FromStr for ZstdDecoders {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let why = || "expected nvcomp, gp_unzstd, split:N (N from 0 to 100) or blocks:N (KiB)".to_string();
        match s.trim() {
            "gp_unzstd" => Ok(ZstdDecoders::Own),
            "nvcomp" => Ok(ZstdDecoders::Nvcomp),
            other => {
                if let Some(kib) = other.strip_prefix("blocks:") {
                    let kib = kib.parse::<u32>().ok().filter(|k| *k <= 1 << 21);
                    return Ok(ZstdDecoders::Blocks(kib.ok_or_else(why)?));
                }
                let n = other.strip_prefix("split:").ok_or_else(why)?;
                let p = n.parse::<u8>().ok().filter(|p| *p <= 100).ok_or_else(why)?;
                Ok(ZstdDecoders::Split(p))
            }
        }
    }
}

impl std::fmt::Display for ZstdDecoders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ZstdDecoders::Own => f.write_str("gp_unzstd"),
            ZstdDecoders::Nvcomp => f.write_str("nvcomp"),
            ZstdDecoders::Split(p) => write!(f, "split:{p}"),
            ZstdDecoders::Blocks(kib) => write!(f, "blocks:{kib}"),
        }
    }
}

impl serde::Serialize for ZstdDecoders {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Which Snappy bodies the wide decoder (`kernels/snappy_wide.cu`) takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WideSnappy {
    /// None (`GPU_PARQUET_SNAPPY=gp_unsnap` or `=nvcomp`).
    Off,
    /// A step's longest bodies, where that shortens the step ([`crate::decode::snappy_route`]): by
    /// default.
    Longest,
    /// Every body it can take (`GPU_PARQUET_SNAPPY=gp_wsnap`).
    All,
}

impl Settings {
    /// Reads the `GPU_PARQUET_*` variables (and `CUFILE_ENV_PATH_JSON`; `PYTHONPATH`, `VIRTUAL_ENV`
    /// and `HOME` for [`Settings::python_dirs`]; `XDG_CACHE_HOME` for the kernel cache), with `flags`
    /// given on the command line taking the place of their variables; the developer's [`Tuning`]
    /// from its variables. The only environment read of the library.
    pub fn from_env(flags: &[(Key, String)]) -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok(), flags)
    }

    /// Like [`Settings::from_env`], with variables looked up through `var`.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>, flags: &[(Key, String)]) -> Result<Self> {
        let mut s = Settings {
            cufile_config: var("CUFILE_ENV_PATH_JSON")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| "/etc/cufile.json".into()),
            python_dirs: python_dirs(&var, Path::new("/")),
            kernel_cache: match var("GPU_PARQUET_KERNEL_CACHE").filter(|p| !p.trim().is_empty()) {
                Some(p) if p.trim().eq_ignore_ascii_case("off") => None,
                Some(p) => Some(PathBuf::from(p)),
                None => var("XDG_CACHE_HOME")
                    .filter(|p| !p.is_empty())
                    .map(PathBuf::from)
                    .or_else(|| {
                        var("HOME")
                            .filter(|p| !p.is_empty())
                            .map(|h| PathBuf::from(h).join(".cache"))
                    })
                    .map(|d| d.join("gpu-parquet")),
            },
            tuning: Tuning::from_lookup(&var)?,
            ..Settings::default()
        };
        for key in Key::ALL {
            // A flag replaces its variable: the variable is not even parsed.
            let (raw, setting) = match flags.iter().rev().find(|(k, _)| *k == key) {
                Some((_, v)) => (v.clone(), format!("{} {v}", key.flag())),
                None => match var(key.env()) {
                    Some(v) if !v.trim().is_empty() => (v.clone(), format!("{}={v}", key.env())),
                    _ => continue,
                },
            };
            s.apply(key, &raw)
                .map_err(|message| Error::Config { setting, message })?;
        }
        Ok(s)
    }

    /// Where the GPU decoder caches kernels and finds nvCOMP.
    pub fn decoder_options(&self) -> DecoderOptions {
        DecoderOptions {
            kernel_cache: self.kernel_cache.clone(),
            nvcomp: self.nvcomp_search(),
            trust_compressed: self.trust_compressed,
            snappy: self.tuning.snappy,
            zstd: self.tuning.zstd,
        }
    }

    fn apply(&mut self, key: Key, raw: &str) -> std::result::Result<(), String> {
        let p = &mut self.policy;
        match key {
            Key::CompatMode => p.compat_mode = raw.parse()?,
            Key::Threads => p.threads = key.parse_number(raw)? as usize,
            Key::TaskSize => p.task_size = key.parse_number(raw)?,
            Key::SmallRead => p.small_read_threshold = key.parse_number(raw)?,
            Key::BounceBuffer => p.bounce_buffer_size = key.parse_number(raw)?,
            Key::BounceBuffers => p.bounce_buffers = key.parse_number(raw)? as usize,
            Key::Pinned => p.pinned = parse_pinned(raw)?,
            Key::Direct => (p.direct_io, p.direct_when_cold) = parse_direct(raw)?,
            Key::SerializeStats => p.serialize_stats = parse_bool(raw)?,
            Key::Device => self.device = key.parse_number(raw)? as usize,
            Key::MemoryLimit => self.memory_limit = Some(key.parse_number(raw)?),
            Key::MemoryLimitSize => self.memory_limit = Some(parse_memory_size(raw)?),
            Key::DecodeSteps => self.decode_steps = Some(key.parse_number(raw)? as usize),
            Key::DecodeThreads => self.decode_threads = Some(key.parse_number(raw)? as usize),
            Key::TrustCompressed => self.trust_compressed = parse_bool(raw)?,
            Key::Nvcomp => self.nvcomp = Some(PathBuf::from(raw.trim())),
        }
        Ok(())
    }

    /// Where to look for nvCOMP: the explicit location if one was given (and then only there), else
    /// the Python directories, then the system loader.
    pub fn nvcomp_search(&self) -> NvcompSearch {
        NvcompSearch {
            explicit: self.nvcomp.clone(),
            python_dirs: self.python_dirs.clone(),
            system: true,
        }
    }
}

/// Python package directories, in the order Python itself searches them: each `PYTHONPATH` entry;
/// `$VIRTUAL_ENV/lib/python3*/site-packages`; `$HOME/.local/lib/python3*/site-packages`;
/// `/usr/local/lib/python3*/dist-packages` and `site-packages`; `/usr/lib/python3/dist-packages`.
/// Several `python3.N` directories go newest first. Only directories that exist are kept (the
/// `PYTHONPATH` entries as given), each once. `root` prefixes the system directories (`/`; a scratch
/// directory in tests).
fn python_dirs(var: &impl Fn(&str) -> Option<String>, root: &Path) -> Vec<PathBuf> {
    let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(pp) = set("PYTHONPATH") {
        dirs.extend(std::env::split_paths(&pp).filter(|p| !p.as_os_str().is_empty()));
    }
    if let Some(venv) = set("VIRTUAL_ENV") {
        dirs.extend(versioned(&Path::new(&venv).join("lib"), "site-packages"));
    }
    if let Some(home) = set("HOME") {
        dirs.extend(versioned(&Path::new(&home).join(".local/lib"), "site-packages"));
    }
    let local = root.join("usr/local/lib");
    dirs.extend(versioned(&local, "dist-packages"));
    dirs.extend(versioned(&local, "site-packages"));
    let debian = root.join("usr/lib/python3/dist-packages");
    if debian.is_dir() {
        dirs.push(debian);
    }
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// `lib/python3*/leaf` directories that exist, newest Python first.
fn versioned(lib: &Path, leaf: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(lib) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let rest = name.strip_prefix("python3")?;
            let minor = match rest.strip_prefix('.') {
                Some(m) => m.parse().ok()?,
                None if rest.is_empty() => 0,
                None => return None,
            };
            let dir = e.path().join(leaf);
            dir.is_dir().then_some((minor, dir))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.into_iter().map(|(_, d)| d).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn defaults_and_variables() {
        let s = Settings::from_lookup(vars(&[]), &[]).unwrap();
        assert_eq!(s.policy, IoPolicy::default());
        assert_eq!(s.policy.task_size, DEFAULT_TASK_SIZE);
        assert_eq!(s.policy.plan_options().task_size, PlanOptions::default().task_size);
        assert_eq!(s.cufile_config, PathBuf::from("/etc/cufile.json"));
        let s = Settings::from_lookup(
            vars(&[
                ("GPU_PARQUET_COMPAT_MODE", "OFF"),
                ("GPU_PARQUET_SMALL_READ_KB", "64"),
                ("GPU_PARQUET_TASK_SIZE_MB", "4"),
                ("GPU_PARQUET_THREADS", "16"),
                ("GPU_PARQUET_SERIALIZE_STATS", "1"),
                ("GPU_PARQUET_PINNED", "hostalloc"),
                ("GPU_PARQUET_DEVICE", "1"),
                ("CUFILE_ENV_PATH_JSON", "/tmp/c.json"),
            ]),
            &[],
        )
        .unwrap();
        assert_eq!(s.policy.compat_mode, CompatMode::Off);
        assert_eq!(s.policy.small_read_threshold, 64 * 1024);
        assert_eq!(s.policy.task_size, 4 << 20);
        assert_eq!(s.policy.threads, 16);
        assert!(s.policy.serialize_stats);
        assert_eq!(s.policy.pinned, PinnedAlloc::HostAlloc);
        assert_eq!(s.device, 1);
        assert_eq!(s.cufile_config, PathBuf::from("/tmp/c.json"));
        s.policy.validate().unwrap();
    }

    #[test]
    fn malformed_or_out_of_bounds_values_name_the_variable_or_flag() {
        for (k, v) in [
            ("GPU_PARQUET_COMPAT_MODE", "maybe"),
            ("GPU_PARQUET_SMALL_READ_KB", "-3"),
            ("GPU_PARQUET_TASK_SIZE_MB", "0"),
            ("GPU_PARQUET_TASK_SIZE_MB", "17592186044416"),
            ("GPU_PARQUET_THREADS", "many"),
            ("GPU_PARQUET_THREADS", "1000000"),
            ("GPU_PARQUET_THREADS", "18446744073709551615"),
            ("GPU_PARQUET_SERIALIZE_STATS", "2"),
            ("GPU_PARQUET_BOUNCE_KB", "3"),
            ("GPU_PARQUET_BOUNCE_BUFFERS", "1"),
        ] {
            let e = Settings::from_lookup(vars(&[(k, v)]), &[]).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{k}={v}: expected")), "{e}");
        }
        for (key, v) in [
            (Key::Threads, "5000"),
            (Key::TaskSize, "0"),
            (Key::TaskSize, "17592186044416"),
        ] {
            let e = Settings::from_lookup(vars(&[]), &[(key, v.into())])
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(&format!("{} {v}: expected", key.flag())), "{e}");
        }
    }

    #[test]
    fn a_flag_replaces_its_variable_even_a_bad_one() {
        let s = Settings::from_lookup(vars(&[("GPU_PARQUET_THREADS", "bad")]), &[(Key::Threads, "4".into())]).unwrap();
        assert_eq!(s.policy.threads, 4);
        let s = Settings::from_lookup(
            vars(&[("GPU_PARQUET_TASK_SIZE_MB", "2")]),
            &[(Key::TaskSize, "1".into())],
        )
        .unwrap();
        assert_eq!(s.policy.task_size, 1 << 20);
    }

    #[test]
    fn a_policy_built_in_code_meets_the_same_bounds() {
        IoPolicy::default().validate().unwrap();
        for bad in [
            IoPolicy {
                threads: 5000,
                ..IoPolicy::default()
            },
            IoPolicy {
                task_size: 0,
                ..IoPolicy::default()
            },
            IoPolicy {
                task_size: 1 << 50,
                ..IoPolicy::default()
            },
            IoPolicy {
                bounce_buffers: 1,
                ..IoPolicy::default()
            },
        ] {
            assert!(matches!(bad.validate(), Err(Error::Config { .. })), "{bad:?}");
        }
    }

    #[test]
    fn nvcomp_location_and_python_directories() {
        let s = Settings::from_lookup(vars(&[]), &[]).unwrap();
        assert_eq!(s.nvcomp, None);
        let search = s.nvcomp_search();
        assert_eq!(search.explicit, None);
        assert!(search.system);
        assert_eq!(search.python_dirs, s.python_dirs);

        let s = Settings::from_lookup(vars(&[("GPU_PARQUET_NVCOMP", " /opt/nv/lib64 ")]), &[]).unwrap();
        assert_eq!(s.nvcomp_search().explicit, Some(PathBuf::from("/opt/nv/lib64")));
        let s = Settings::from_lookup(
            vars(&[("GPU_PARQUET_NVCOMP", "/env")]),
            &[(Key::Nvcomp, "/flag/libnvcomp.so.5".into())],
        )
        .unwrap();
        assert_eq!(s.nvcomp, Some(PathBuf::from("/flag/libnvcomp.so.5")));

        // A scratch tree: a virtual environment, a home, and system directories under `root`.
        let t = tempfile::tempdir().unwrap();
        let mk = |p: &str| {
            let d = t.path().join(p);
            std::fs::create_dir_all(&d).unwrap();
            d
        };
        let venv_old = mk("venv/lib/python3.9/site-packages");
        let venv_new = mk("venv/lib/python3.12/site-packages");
        mk("venv/lib/python2.7/site-packages");
        mk("venv/lib/python3.11"); // no site-packages: skipped
        let user = mk("home/.local/lib/python3.10/site-packages");
        let local_dist = mk("root/usr/local/lib/python3.12/dist-packages");
        let local_site = mk("root/usr/local/lib/python3.12/site-packages");
        let debian = mk("root/usr/lib/python3/dist-packages");
        let p = |d: &str| t.path().join(d).display().to_string();
        let (pythonpath, venv, home) = (format!("/pp/a::/pp/b:{}", venv_new.display()), p("venv"), p("home"));
        let env = vars(&[("PYTHONPATH", &pythonpath), ("VIRTUAL_ENV", &venv), ("HOME", &home)]);
        assert_eq!(
            python_dirs(&env, &t.path().join("root")),
            vec![
                PathBuf::from("/pp/a"),
                PathBuf::from("/pp/b"),
                venv_new,
                venv_old,
                user,
                local_dist,
                local_site,
                debian,
            ]
        );
        assert!(python_dirs(&vars(&[]), &t.path().join("nothing")).is_empty());
    }

    #[test]
    fn tuning_from_its_variables() {
        let s = Settings::from_lookup(vars(&[]), &[]).unwrap();
        assert_eq!(s.tuning, Tuning::default());
        assert!(s.tuning.differences().is_empty());
        let s = Settings::from_lookup(
            vars(&[
                ("GPU_PARQUET_TRACE_FETCH", "1"),
                ("GPU_PARQUET_SNAPPY", "nvcomp"),
                ("GPU_PARQUET_ZSTD", "split:30"),
                ("GPU_PARQUET_STEPS_IN_FLIGHT", "7"),
            ]),
            &[],
        )
        .unwrap();
        assert!(s.tuning.trace);
        assert_eq!(s.tuning.snappy, SnappyDecoders::Nvcomp);
        assert_eq!(s.tuning.steps_in_flight, Some(7));
        assert_eq!(s.decoder_options().snappy, SnappyDecoders::Nvcomp);
        assert_eq!(
            s.tuning.differences(),
            [
                "GPU_PARQUET_TRACE_FETCH=1",
                "GPU_PARQUET_SNAPPY=nvcomp",
                "GPU_PARQUET_ZSTD=split:30",
                "GPU_PARQUET_STEPS_IN_FLIGHT=7",
            ]
        );
        assert_eq!(s.decoder_options().zstd, ZstdDecoders::Split(30));
        assert_eq!(ZstdDecoders::Split(30).own_share(true), 0.3);
        assert_eq!(ZstdDecoders::Nvcomp.own_share(false), 1.0);
        assert_eq!(ZstdDecoders::Blocks(256).own_share(true), 0.0);
        assert_eq!(ZstdDecoders::Blocks(256).blocks_from(true), Some(262_144));
        assert_eq!(ZstdDecoders::Blocks(64).blocks_from(false), Some(65_536));
        assert_eq!(ZstdDecoders::Nvcomp.blocks_from(true), None);
        assert_eq!(ZstdDecoders::Nvcomp.blocks_from(false), Some(262_144));
        assert_eq!(ZstdDecoders::Own.blocks_from(false), None);
        for name in ["gp_unzstd", "nvcomp", "split:0", "split:100", "blocks:0", "blocks:256"] {
            assert_eq!(name.parse::<ZstdDecoders>().unwrap().to_string(), name);
        }
        for name in ["auto", "gp_unsnap", "nvcomp", "gp_wsnap"] {
            assert_eq!(name.parse::<SnappyDecoders>().unwrap().to_string(), name);
        }
        for (k, v) in [
            ("GPU_PARQUET_TRACE_FETCH", "yes please"),
            ("GPU_PARQUET_SNAPPY", "gp_fast"),
            ("GPU_PARQUET_ZSTD", "gp_fastest"),
            ("GPU_PARQUET_ZSTD", "split:101"),
            ("GPU_PARQUET_ZSTD", "blocks:"),
            ("GPU_PARQUET_ZSTD", "blocks:-1"),
            ("GPU_PARQUET_STEPS_IN_FLIGHT", "1"),
            ("GPU_PARQUET_STEPS_IN_FLIGHT", "many"),
        ] {
            let e = Settings::from_lookup(vars(&[(k, v)]), &[]).unwrap_err();
            assert!(e.to_string().contains(&format!("{k}={v}")), "{e}");
        }
        // Which decoders each choice sends Snappy bodies to.
        assert!(!SnappyDecoders::Auto.own_kernel(true) && SnappyDecoders::Auto.own_kernel(false));
        assert!(SnappyDecoders::Unsnap.own_kernel(true) && !SnappyDecoders::Nvcomp.own_kernel(false));
        assert_eq!(SnappyDecoders::Auto.wide(), WideSnappy::Longest);
        assert_eq!(SnappyDecoders::Wide.wide(), WideSnappy::All);
        assert_eq!(SnappyDecoders::Nvcomp.wide(), WideSnappy::Off);
    }

    #[test]
    fn names_parse() {
        assert_eq!("HOST".parse::<BackendKind>().unwrap(), BackendKind::Host);
        assert_eq!("cufile".parse::<BackendKind>().unwrap(), BackendKind::Cufile);
        assert!("nvme".parse::<BackendKind>().is_err());
        assert_eq!(" auto ".parse::<CompatMode>().unwrap(), CompatMode::Auto);
        for k in [CompatMode::On, CompatMode::Off, CompatMode::Auto] {
            assert_eq!(k.to_string().parse::<CompatMode>().unwrap(), k);
        }
        for k in [
            BackendKind::Host,
            BackendKind::Staged,
            BackendKind::Cufile,
            BackendKind::Auto,
        ] {
            assert_eq!(k.to_string().parse::<BackendKind>().unwrap(), k);
        }
    }
}

/// Where the decoder finds its run-time pieces.
#[derive(Debug, Clone, Default)]
pub struct DecoderOptions {
    /// Folder of the compiled-kernel cache (`None`: compile in every process).
    pub kernel_cache: Option<PathBuf>,
    /// Where to look for nvCOMP.
    pub nvcomp: NvcompSearch,
    /// Skip the GPU pre-check of compressed bodies (`gp_validate_compressed`) and hand them to nvCOMP
    /// directly. Only for files from a trusted writer: nvCOMP's behaviour on corrupt input is undefined
    /// (it was seen reading far out of bounds, which ends the process's use of the GPU). nvCOMP's
    /// statuses and output sizes are still checked.
    pub trust_compressed: bool,
    /// Which GPU decoders take Snappy bodies ([`Tuning::snappy`]).
    pub snappy: SnappyDecoders,
    /// Which GPU decoder takes Zstd bodies ([`Tuning::zstd`]).
    pub zstd: ZstdDecoders,
}

//! cuFile (GPUDirect Storage): presence, version, parameters, the driver, level-3 statistics, file
//! handles and buffer registration.
//!
//! Built on cudarc's `cufile::result` rung (driver open and properties, handle registration, reads,
//! buffer registration); raw `sys` only for what cudarc lacks: parameters, statistics, and
//! `cuFileDriverClose_v2` (the symbol cufile.h maps `cuFileDriverClose` to).
//!
//! The driver is reference counted ([`CufileDriver::open`] returns an `Arc`): opened on first use,
//! closed when the last backend, handle or check holding it drops, so no caller has to remember a
//! shutdown call. Left open, libcufile's own teardown at process exit was seen to crash on the H200
//! machine, so a driver still held when the process exits (a backend kept in a static) is closed by
//! an `atexit` handler first. Parameters only take effect before the driver opens, so the first opener's
//! [`CufileParams`] hold for as long as the driver stays open.
//!
//! libcufile 1.15 itself, on every `cuFileDriverOpen`, allocates 64 KiB of device memory that no
//! `cuFileDriverClose` frees and makes one `cuMemFree` call that fails with `CUDA_ERROR_INVALID_VALUE`
//! (compute-sanitizer on the H200 machine, with a C program doing nothing but open and close). So the
//! driver is opened as seldom as possible: once per process for the CLI, once per run of readers.

use std::fs::File;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use cudarc::cufile::result::{self as cf, CufileError};
use cudarc::cufile::sys;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::gpu::{DeviceWriter, GpuContext, guard};

/// The hint appended to registration and read errors.
pub(crate) const LOG_HINT: &str =
    "see cufile.log in the current directory (or logging.dir in cufile.json) for cuFile's reason";

/// Whether libcufile can be loaded; `Err` says why not.
pub fn present() -> std::result::Result<(), String> {
    static PRESENT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    PRESENT
        .get_or_init(|| {
            // SAFETY: is_culib_present only tries to dlopen the candidate names; a panic is caught.
            let ok = std::panic::catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false);
            if ok {
                Ok(())
            } else {
                Err("libcufile.so (cuFile, part of GPUDirect Storage) cannot be loaded".to_string())
            }
        })
        .clone()
}

fn cufile_err(context: impl Into<String>) -> impl FnOnce(CufileError) -> Error {
    let context = context.into();
    move |source| Error::Cufile { context, source }
}

fn unavailable(reason: impl Into<String>) -> Error {
    Error::Unavailable {
        backend: "cufile".into(),
        reason: reason.into(),
    }
}

/// cuFile's library version (`cuFileGetVersion`), as `major.minor` (for example "1.15").
pub fn version() -> Result<String> {
    present().map_err(unavailable)?;
    guard("cuFileGetVersion", || {
        let mut v = 0i32;
        // SAFETY: cuFileGetVersion writes one int through a valid pointer to a local.
        unsafe { sys::cuFileGetVersion(&mut v) }
            .result()
            .map_err(cufile_err("cuFileGetVersion"))?;
        Ok(format!("{}.{}", v / 1000, (v % 1000) / 10))
    })
}

/// cuFile settings we may change before the driver opens (`None`: leave cufile.json's value).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CufileParams {
    /// `execution.parallel_io`.
    pub parallel_io: Option<bool>,
    /// `execution.max_io_threads`.
    pub max_io_threads: Option<usize>,
    /// `execution.min_io_threshold_size_kb`.
    pub min_io_threshold_size_kb: Option<usize>,
    /// `execution.max_request_parallelism`.
    pub max_request_parallelism: Option<usize>,
    /// `execution.max_io_queue_depth`.
    pub max_io_queue_depth: Option<usize>,
    /// `properties.allow_compat_mode`.
    pub allow_compat_mode: Option<bool>,
}

use sys::CUFileBoolConfigParameter_t as BoolParam;
use sys::CUFileSizeTConfigParameter_t as SizeParam;

const BOOL_PARAMS: [(&str, BoolParam); 2] = [
    ("execution.parallel_io", BoolParam::CUFILE_PARAM_EXECUTION_PARALLEL_IO),
    (
        "properties.allow_compat_mode",
        BoolParam::CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE,
    ),
];
const SIZE_PARAMS: [(&str, SizeParam); 4] = [
    (
        "execution.max_io_threads",
        SizeParam::CUFILE_PARAM_EXECUTION_MAX_IO_THREADS,
    ),
    (
        "execution.min_io_threshold_size_kb",
        SizeParam::CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB,
    ),
    (
        "execution.max_request_parallelism",
        SizeParam::CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM,
    ),
    (
        "execution.max_io_queue_depth",
        SizeParam::CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH,
    ),
];

impl CufileParams {
    fn bools(&self) -> [Option<bool>; 2] {
        [self.parallel_io, self.allow_compat_mode]
    }
    fn sizes(&self) -> [Option<usize>; 4] {
        [
            self.max_io_threads,
            self.min_io_threshold_size_kb,
            self.max_request_parallelism,
            self.max_io_queue_depth,
        ]
    }

    /// Reads the current values from cuFile (`cuFileGetParameter*`).
    pub(crate) fn current() -> Result<Self> {
        present().map_err(unavailable)?;
        guard("cuFileGetParameter", || {
            let b = |p: BoolParam| {
                let mut v = false;
                // SAFETY: writes one bool through a valid pointer to a local.
                unsafe { sys::cuFileGetParameterBool(p, &mut v) }
                    .result()
                    .ok()
                    .map(|_| v)
            };
            let s = |p: SizeParam| {
                let mut v = 0usize;
                // SAFETY: writes one size_t through a valid pointer to a local.
                unsafe { sys::cuFileGetParameterSizeT(p, &mut v) }
                    .result()
                    .ok()
                    .map(|_| v)
            };
            Ok(Self {
                parallel_io: b(BOOL_PARAMS[0].1),
                allow_compat_mode: b(BOOL_PARAMS[1].1),
                max_io_threads: s(SIZE_PARAMS[0].1),
                min_io_threshold_size_kb: s(SIZE_PARAMS[1].1),
                max_request_parallelism: s(SIZE_PARAMS[2].1),
                max_io_queue_depth: s(SIZE_PARAMS[3].1),
            })
        })
    }

    /// Applies the set values; returns one message per parameter cuFile refused.
    fn apply(&self) -> Vec<String> {
        let mut refused = Vec::new();
        for ((name, p), v) in BOOL_PARAMS.iter().zip(self.bools()) {
            if let Some(v) = v
                // SAFETY: passes two plain values; no memory is shared.
                && let Err(e) = unsafe { sys::cuFileSetParameterBool(*p, v) }.result()
            {
                refused.push(format!("cuFile refused {name}={v}: {e}"));
            }
        }
        for ((name, p), v) in SIZE_PARAMS.iter().zip(self.sizes()) {
            if let Some(v) = v
                // SAFETY: passes two plain values; no memory is shared.
                && let Err(e) = unsafe { sys::cuFileSetParameterSizeT(*p, v) }.result()
            {
                refused.push(format!("cuFile refused {name}={v}: {e}"));
            }
        }
        refused
    }
}

/// What `cuFileDriverGetProperties` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DriverProps {
    /// nvidia-fs major version (0 with minor 0: the kernel module is not loaded).
    pub nvfs_major: u32,
    /// nvidia-fs minor version.
    pub nvfs_minor: u32,
    /// Largest direct I/O cuFile issues, bytes.
    pub max_direct_io_size: u64,
}

impl DriverProps {
    /// Whether nvidia-fs is loaded (a version other than 0.0), i.e. whether nvfs reads are possible.
    pub fn nvfs_loaded(&self) -> bool {
        (self.nvfs_major, self.nvfs_minor) != (0, 0)
    }
}

/// Differences in cuFile's level-3 statistics (summed over GPUs) across a fetch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StatsDelta {
    /// Reads cuFile counted in total.
    pub total_reads: u64,
    /// Reads that went through nvidia-fs.
    pub nvfs_reads: u64,
    /// Reads that went through cuFile's POSIX compat mode.
    pub posix_reads: u64,
    /// Bytes cuFile says it read.
    pub read_bytes: u64,
}

impl StatsDelta {
    /// The sum of two deltas.
    pub(crate) fn plus(self, o: StatsDelta) -> StatsDelta {
        StatsDelta {
            total_reads: self.total_reads + o.total_reads,
            nvfs_reads: self.nvfs_reads + o.nvfs_reads,
            posix_reads: self.posix_reads + o.posix_reads,
            read_bytes: self.read_bytes + o.read_bytes,
        }
    }
}

/// Level-3 read counters summed over GPUs at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StatsSnapshot {
    /// `n_total_reads`.
    pub total_reads: u64,
    /// `n_nvfs_reads`.
    pub nvfs_reads: u64,
    /// `n_posix_reads`.
    pub posix_reads: u64,
    /// `read_bytes`.
    pub read_bytes: u64,
}

impl StatsSnapshot {
    /// The change from `before` to `self` (saturating: counters that went down, e.g. after a reset,
    /// count as 0 rather than wrapping).
    pub(crate) fn since(&self, before: &StatsSnapshot) -> StatsDelta {
        StatsDelta {
            total_reads: self.total_reads.saturating_sub(before.total_reads),
            nvfs_reads: self.nvfs_reads.saturating_sub(before.nvfs_reads),
            posix_reads: self.posix_reads.saturating_sub(before.posix_reads),
            read_bytes: self.read_bytes.saturating_sub(before.read_bytes),
        }
    }
}

/// The open cuFile driver. Closed (statistics stopped, `cuFileDriverClose_v2`) when the last `Arc`
/// drops; every [`FileHandle`] holds one, so the driver outlives its handles.
#[derive(Debug)]
pub struct CufileDriver {
    /// Driver properties read after opening.
    pub props: DriverProps,
    /// Whether level-3 statistics were enabled (`cuFileSetStatsLevel(3)` and `cuFileStatsStart`).
    pub stats_enabled: bool,
    /// Parameters applied before opening.
    pub params: CufileParams,
    /// Messages from opening (refused parameters, statistics unavailable...).
    pub notes: Vec<String>,
    /// The context it was opened in: cuFile's own device memory lives there, so the context must
    /// outlive the close (closing after the context went away was seen to leak cuFile's 64 KiB).
    ctx: Arc<GpuContext>,
}

/// The driver while someone holds it. The lock also serialises opening against closing.
static DRIVER: Mutex<Weak<CufileDriver>> = Mutex::new(Weak::new());

/// Set once [`close_at_exit`] has closed a driver that was still held when the process exited.
static CLOSED_AT_EXIT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Closes the driver at process exit when something still holds it (a backend kept in a static, as the
/// Python package and long-running services keep theirs). libcufile's own teardown of a driver left
/// open, with statistics on, makes CUDA calls after CUDA's teardown and crashes the process (SIGSEGV
/// after the last line of output, on the H200 machine; cuDF and KvikIO report the same: NVIDIA/cudf#17121,
/// rapidsai/kvikio#497). `atexit` handlers and the libraries' own teardown (registered when they were
/// loaded, before the driver first opened) run last-registered first, so this runs before both.
extern "C" fn close_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        // Never wait at exit: a thread that died holding the lock, or one opening now, wins.
        let slot = match DRIVER.try_lock() {
            Ok(slot) => slot,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        let Some(driver) = slot.upgrade() else { return };
        if CLOSED_AT_EXIT.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let _ = driver.ctx.bind();
        // SAFETY: the driver is open (an `Arc` is held) and this thread is in `exit`, so it runs no read;
        // a read still running on another thread at exit races the process's teardown whatever we do,
        // as it would libcufile's own close. Handles still registered are left to the process's end,
        // as libcufile's own teardown leaves them. The call takes no arguments.
        let _ = unsafe { sys::cuFileDriverClose_v2() };
        // The Arcs still held are never dropped (statics are not), so `Drop` does not close again.
        std::mem::forget(driver);
    });
}

/// Registers [`close_at_exit`] once per process.
fn close_driver_at_exit() {
    static REGISTERED: OnceLock<()> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        // SAFETY: `close_at_exit` is an `extern "C" fn()` that never unwinds (it catches panics).
        unsafe { libc::atexit(close_at_exit) };
    });
}

/// Whether nvidia-fs is loaded, once a driver has been opened in this process.
static NVFS_LOADED: OnceLock<bool> = OnceLock::new();

impl CufileDriver {
    /// The open driver, opening it on `ctx`'s device (after applying `params`) if no one holds it.
    ///
    /// When it is already open, `params` are not applied: compare [`CufileDriver::params`].
    pub fn open(ctx: &Arc<GpuContext>, params: &CufileParams) -> Result<Arc<Self>> {
        present().map_err(unavailable)?;
        let mut slot = DRIVER.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = slot.upgrade() {
            return Ok(d);
        }
        let d = Arc::new(Self::open_now(ctx, params)?);
        close_driver_at_exit();
        *slot = Arc::downgrade(&d);
        Ok(d)
    }

    fn open_now(ctx: &Arc<GpuContext>, params: &CufileParams) -> Result<Self> {
        guard("opening the cuFile driver", || {
            ctx.bind()?;
            let mut notes = params.apply();
            cf::driver_open().map_err(|e| unavailable(format!("cuFileDriverOpen failed: {e}; {LOG_HINT}")))?;
            let props = match cf::driver_get_properties() {
                Ok(p) => DriverProps {
                    nvfs_major: p.nvfs.major_version,
                    nvfs_minor: p.nvfs.minor_version,
                    max_direct_io_size: p.nvfs.max_direct_io_size as u64,
                },
                Err(e) => {
                    notes.push(format!(
                        "cuFileDriverGetProperties failed ({e}): treating nvidia-fs as not loaded"
                    ));
                    DriverProps {
                        nvfs_major: 0,
                        nvfs_minor: 0,
                        max_direct_io_size: 0,
                    }
                }
            };
            // SAFETY: both calls take plain values and are valid once the driver is open.
            let stats = unsafe { sys::cuFileSetStatsLevel(3) }
                .result()
                // SAFETY: as above.
                .and_then(|_| unsafe { sys::cuFileStatsStart() }.result());
            let stats_enabled = match stats {
                Ok(()) => true,
                Err(e) => {
                    notes.push(format!(
                        "cuFile statistics unavailable ({e}): paths inferred from the nvfs version only"
                    ));
                    false
                }
            };
            NVFS_LOADED.get_or_init(|| props.nvfs_loaded());
            Ok(Self {
                props,
                stats_enabled,
                params: params.clone(),
                notes,
                ctx: ctx.clone(),
            })
        })
    }

    /// Whether nvidia-fs is loaded, as the properties of the first driver opened in this process said
    /// (`None` before any was opened). A kernel module does not come or go under a running reader, and
    /// every `cuFileDriverOpen` costs: libcufile 1.15 leaks 64 KiB of device memory per open (below).
    pub(crate) fn nvfs_known() -> Option<bool> {
        NVFS_LOADED.get().copied()
    }

    /// The driver some part of this process holds open now, if any (to read the process's
    /// statistics around work that several readers share).
    pub(crate) fn current() -> Option<Arc<Self>> {
        DRIVER.lock().unwrap_or_else(|p| p.into_inner()).upgrade()
    }

    /// Whether some part of this process holds the driver open now.
    pub fn is_open() -> bool {
        DRIVER.lock().unwrap_or_else(|p| p.into_inner()).strong_count() > 0
    }

    /// Reads level-3 statistics (`cuFileGetStatsL3`), summed over GPUs.
    pub fn stats(&self) -> Result<StatsSnapshot> {
        if !self.stats_enabled {
            return Err(Error::device("cuFile statistics", "not enabled"));
        }
        guard("cuFileGetStatsL3", || {
            let mut s: Box<MaybeUninit<sys::CUfileStatsLevel3_t>> = Box::new(MaybeUninit::zeroed());
            // SAFETY: s points to a zeroed CUfileStatsLevel3_t that cuFile fills in.
            unsafe { sys::cuFileGetStatsL3(s.as_mut_ptr()) }
                .result()
                .map_err(cufile_err("cuFileGetStatsL3"))?;
            // SAFETY: zeroed, then filled by cuFile: every field is a plain integer, valid at any value.
            let s = unsafe { s.assume_init_ref() };
            let n = (s.num_gpus as usize).min(s.per_gpu_stats.len());
            let mut out = StatsSnapshot::default();
            for g in &s.per_gpu_stats[..n] {
                out.total_reads += g.n_total_reads;
                out.nvfs_reads += g.n_nvfs_reads;
                out.posix_reads += g.n_posix_reads;
                out.read_bytes += g.read_bytes;
            }
            Ok(out)
        })
    }
}

impl Drop for CufileDriver {
    fn drop(&mut self) {
        // Hold the lock: an `open` racing with this close must wait for it to finish, then open anew.
        let _slot = DRIVER.lock().unwrap_or_else(|p| p.into_inner());
        if CLOSED_AT_EXIT.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let _ = std::panic::catch_unwind(|| {
            let _ = self.ctx.bind();
            // No cuFileStatsStop first: with libcufile 1.15, processes that stopped statistics and then
            // closed the driver crashed (SIGSEGV) in 3 of 44 runs, others in none of 52
            // (tools/cufile_open_close_probe.c on the H200 machine).
            // SAFETY: the last Arc is gone, so no handle (each holds one) and no read is live; the call
            // takes no arguments.
            let _ = unsafe { sys::cuFileDriverClose_v2() };
        });
    }
}

/// A file registered with cuFile (deregistered on drop; the file stays open while registered).
#[derive(Debug)]
pub struct FileHandle {
    raw: sys::CUfileHandle_t,
    _file: File,
    direct: bool,
    driver: Arc<CufileDriver>,
}

// SAFETY: a cuFile handle is an opaque token that cuFile allows to be used from several threads at
// once (cuFileRead is thread safe); the File is Send + Sync.
unsafe impl Send for FileHandle {}
// SAFETY: as for Send.
unsafe impl Sync for FileHandle {}

/// A failed `cuFileRead`.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// An OS error (cuFileRead returned -1).
    Os(std::io::Error),
    /// A cuFile error.
    Cufile(CufileError),
    /// The destination range was outside the buffer, or the buffer could not be waited for.
    Dest(Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Os(e) => write!(f, "{e}"),
            ReadError::Cufile(e) => write!(f, "{e}; {LOG_HINT}"),
            ReadError::Dest(e) => write!(f, "{e}"),
        }
    }
}

impl FileHandle {
    /// Registers `file` (`direct`: it was opened with `O_DIRECT`) with the open driver.
    ///
    /// A refusal is [`Error::Cufile`] carrying cuFile's code (for example
    /// `CU_FILE_HANDLE_NOT_REGISTERED`), its context ending with the hint to read cufile.log.
    pub fn register(driver: &Arc<CufileDriver>, file: File, direct: bool) -> Result<Self> {
        let descr = sys::CUfileDescr_t {
            type_: sys::CUfileFileHandleType::CU_FILE_HANDLE_TYPE_OPAQUE_FD,
            handle: sys::CUfileDescr_t__bindgen_ty_1 { fd: file.as_raw_fd() },
            fs_ops: std::ptr::null(),
        };
        let raw = guard("cuFileHandleRegister", || {
            cf::handle_register(&descr).map_err(cufile_err(format!("cuFileHandleRegister ({LOG_HINT})")))
        })?;
        Ok(Self {
            raw,
            _file: file,
            direct,
            driver: driver.clone(),
        })
    }

    /// Whether the registered file was opened with `O_DIRECT`.
    pub(crate) fn is_direct(&self) -> bool {
        self.direct
    }

    /// The driver it is registered with.
    pub fn driver(&self) -> &Arc<CufileDriver> {
        &self.driver
    }

    /// One `cuFileRead` of `len` bytes at `file_offset` into byte `dest_offset` of the buffer `dest`
    /// writes; returns the bytes read (fewer at end of file). The range is checked against the buffer.
    pub(crate) fn read_into(
        &self,
        dest: &DeviceWriter<'_>,
        dest_offset: u64,
        len: u64,
        file_offset: u64,
    ) -> std::result::Result<usize, ReadError> {
        dest.raw_range_for_sync_write(dest_offset, len)
            .map_err(ReadError::Dest)?;
        let (Ok(file_offset), Ok(dest_offset), Ok(size)) = (
            i64::try_from(file_offset),
            i64::try_from(dest_offset),
            usize::try_from(len),
        ) else {
            return Err(ReadError::Dest(Error::device("cuFileRead", "offset out of range")));
        };
        // SAFETY: base + dest_offset .. + size lies inside the device buffer (checked just above), which
        // the writer keeps mutably borrowed, so it is neither freed nor used by anyone else; the work
        // queued on it before the writer has finished (waited on above). The handle is registered.
        let r = unsafe { cf::read(self.raw, dest.base() as *mut _, size, file_offset, dest_offset) };
        match r {
            Ok(n) => Ok(n.max(0) as usize),
            Err(CufileError::IO(e)) => Err(ReadError::Os(e)),
            Err(e) => Err(ReadError::Cufile(e)),
        }
    }
}

impl Drop for FileHandle {
    fn drop(&mut self) {
        let raw = self.raw;
        // SAFETY: raw was registered in `register` and is deregistered only here; the driver is still
        // open (self holds it).
        let _ = std::panic::catch_unwind(move || unsafe { cf::handle_deregister(raw) });
    }
}

/// A device buffer registered with cuFile (`cuFileBufRegister`) while a writer to it lives.
#[derive(Debug)]
pub(crate) struct BufRegistration<'w> {
    base: u64,
    _writer: std::marker::PhantomData<&'w ()>,
    _driver: Arc<CufileDriver>,
}

impl<'w> BufRegistration<'w> {
    /// Registers the whole buffer behind `dest`.
    pub fn new(driver: &Arc<CufileDriver>, dest: &'w DeviceWriter<'_>) -> Result<Self> {
        let base = dest.base();
        let len = usize::try_from(dest.len()).map_err(|_| Error::device("cuFileBufRegister", "buffer too large"))?;
        guard("cuFileBufRegister", || {
            // SAFETY: base..base+len is a live device allocation (the writer borrows it mutably, and this
            // registration cannot outlive the writer); it is deregistered in Drop.
            unsafe { cf::buf_register(base as *const _, len, 0) }.map_err(cufile_err("cuFileBufRegister"))
        })?;
        Ok(Self {
            base,
            _writer: std::marker::PhantomData,
            _driver: driver.clone(),
        })
    }
}

impl Drop for BufRegistration<'_> {
    fn drop(&mut self) {
        let base = self.base;
        // SAFETY: base was registered in `new`, and the allocation is still live (the writer borrow
        // outlives self).
        let _ = std::panic::catch_unwind(move || unsafe { cf::buf_deregister(base as *const _) });
    }
}

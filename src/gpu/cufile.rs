//! cuFile (GPUDirect Storage) wrappers: presence, version, parameters, driver, properties, level-3
//! statistics, file handles and buffer registration.
//!
//! Our own small RAII types instead of `cudarc::cufile::safe`, whose drops unwrap. The cuFile driver is
//! opened once per process ([`driver`]); parameters only take effect when set before that, so the first
//! call's [`CufileParams`] win and later differing ones are reported as ignored.

use std::fs::File;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use cudarc::cufile::sys;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::gpu::{GpuContext, guard};
use crate::io::CufileStatsDelta;

/// Where cuFile reads its configuration from: `CUFILE_ENV_PATH_JSON`, else `/etc/cufile.json`.
pub fn config_path() -> std::path::PathBuf {
    std::env::var_os("CUFILE_ENV_PATH_JSON")
        .map(Into::into)
        .unwrap_or_else(|| "/etc/cufile.json".into())
}

/// The hint appended to registration and read errors.
pub const LOG_HINT: &str =
    "see cufile.log in the current directory (or logging.dir in cufile.json) for cuFile's reason";

/// Whether libcufile can be loaded; `Err` says why not.
pub fn present() -> std::result::Result<(), String> {
    static PRESENT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    PRESENT
        .get_or_init(|| {
            let ok = std::panic::catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false);
            if ok {
                Ok(())
            } else {
                Err("libcufile.so (cuFile, part of GPUDirect Storage) cannot be loaded".to_string())
            }
        })
        .clone()
}

/// The name of a cuFile error code (`CU_FILE_*`), or the number when unknown.
pub fn error_name(code: i64) -> String {
    let name = match code {
        5001 => "CU_FILE_DRIVER_NOT_INITIALIZED",
        5002 => "CU_FILE_DRIVER_INVALID_PROPS",
        5003 => "CU_FILE_DRIVER_UNSUPPORTED_LIMIT",
        5004 => "CU_FILE_DRIVER_VERSION_MISMATCH",
        5005 => "CU_FILE_DRIVER_VERSION_READ_ERROR",
        5006 => "CU_FILE_DRIVER_CLOSING",
        5007 => "CU_FILE_PLATFORM_NOT_SUPPORTED",
        5008 => "CU_FILE_IO_NOT_SUPPORTED",
        5009 => "CU_FILE_DEVICE_NOT_SUPPORTED",
        5010 => "CU_FILE_NVFS_DRIVER_ERROR",
        5011 => "CU_FILE_CUDA_DRIVER_ERROR",
        5012 => "CU_FILE_CUDA_POINTER_INVALID",
        5013 => "CU_FILE_CUDA_MEMORY_TYPE_INVALID",
        5014 => "CU_FILE_CUDA_POINTER_RANGE_ERROR",
        5015 => "CU_FILE_CUDA_CONTEXT_MISMATCH",
        5016 => "CU_FILE_INVALID_MAPPING_SIZE",
        5017 => "CU_FILE_INVALID_MAPPING_RANGE",
        5018 => "CU_FILE_INVALID_FILE_TYPE",
        5019 => "CU_FILE_INVALID_FILE_OPEN_FLAG",
        5020 => "CU_FILE_DIO_NOT_SET",
        5022 => "CU_FILE_INVALID_VALUE",
        5023 => "CU_FILE_MEMORY_ALREADY_REGISTERED",
        5024 => "CU_FILE_MEMORY_NOT_REGISTERED",
        5025 => "CU_FILE_PERMISSION_DENIED",
        5026 => "CU_FILE_DRIVER_ALREADY_OPEN",
        5027 => "CU_FILE_HANDLE_NOT_REGISTERED",
        5028 => "CU_FILE_HANDLE_ALREADY_REGISTERED",
        5029 => "CU_FILE_DEVICE_NOT_FOUND",
        5030 => "CU_FILE_INTERNAL_ERROR",
        5031 => "CU_FILE_GETNEWFD_FAILED",
        5033 => "CU_FILE_NVFS_SETUP_ERROR",
        5034 => "CU_FILE_IO_DISABLED",
        5035 => "CU_FILE_IO_MAX_ERROR",
        _ => return format!("cuFile error {code}"),
    };
    name.to_string()
}

fn status(e: sys::CUfileError_t) -> std::result::Result<(), String> {
    if e.err == sys::CUfileOpError::CU_FILE_SUCCESS {
        Ok(())
    } else if e.err == sys::CUfileOpError::CU_FILE_CUDA_DRIVER_ERROR {
        Err(format!("{:?} ({:?})", e.err, e.cu_err))
    } else {
        Err(format!("{:?}", e.err))
    }
}

/// cuFile's library version (`cuFileGetVersion`), as `major.minor` (for example "1.15").
pub fn version() -> Result<String> {
    present().map_err(|r| Error::device("cuFile", r))?;
    guard("cuFileGetVersion", || {
        let mut v = 0i32;
        status(unsafe { sys::cuFileGetVersion(&mut v) }).map_err(|m| Error::device("cuFileGetVersion", m))?;
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

impl CufileParams {
    /// Reads the current values from cuFile (`cuFileGetParameter*`).
    pub fn current() -> Result<Self> {
        present().map_err(|r| Error::device("cuFile", r))?;
        guard("cuFileGetParameter", || {
            use sys::CUFileBoolConfigParameter_t as B;
            use sys::CUFileSizeTConfigParameter_t as S;
            let get_b = |p: B| {
                let mut v = false;
                status(unsafe { sys::cuFileGetParameterBool(p, &mut v) })
                    .ok()
                    .map(|_| v)
            };
            let get_s = |p: S| {
                let mut v = 0usize;
                status(unsafe { sys::cuFileGetParameterSizeT(p, &mut v) })
                    .ok()
                    .map(|_| v)
            };
            Ok(Self {
                parallel_io: get_b(B::CUFILE_PARAM_EXECUTION_PARALLEL_IO),
                max_io_threads: get_s(S::CUFILE_PARAM_EXECUTION_MAX_IO_THREADS),
                min_io_threshold_size_kb: get_s(S::CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB),
                max_request_parallelism: get_s(S::CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM),
                max_io_queue_depth: get_s(S::CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH),
                allow_compat_mode: get_b(B::CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE),
            })
        })
    }

    /// Applies the set values; returns one message per parameter cuFile refused.
    fn apply(&self) -> Vec<String> {
        use sys::CUFileBoolConfigParameter_t as B;
        use sys::CUFileSizeTConfigParameter_t as S;
        let mut refused = Vec::new();
        let mut set_b = |name: &str, p: B, v: Option<bool>| {
            if let Some(v) = v
                && let Err(m) = status(unsafe { sys::cuFileSetParameterBool(p, v) })
            {
                refused.push(format!("cuFile refused {name}={v}: {m}"));
            }
        };
        set_b(
            "execution.parallel_io",
            B::CUFILE_PARAM_EXECUTION_PARALLEL_IO,
            self.parallel_io,
        );
        set_b(
            "properties.allow_compat_mode",
            B::CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE,
            self.allow_compat_mode,
        );
        let mut set_s = |name: &str, p: S, v: Option<usize>| {
            if let Some(v) = v
                && let Err(m) = status(unsafe { sys::cuFileSetParameterSizeT(p, v) })
            {
                refused.push(format!("cuFile refused {name}={v}: {m}"));
            }
        };
        set_s(
            "execution.max_io_threads",
            S::CUFILE_PARAM_EXECUTION_MAX_IO_THREADS,
            self.max_io_threads,
        );
        set_s(
            "execution.min_io_threshold_size_kb",
            S::CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB,
            self.min_io_threshold_size_kb,
        );
        set_s(
            "execution.max_request_parallelism",
            S::CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM,
            self.max_request_parallelism,
        );
        set_s(
            "execution.max_io_queue_depth",
            S::CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH,
            self.max_io_queue_depth,
        );
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

/// The opened cuFile driver (process-wide).
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
    /// The configuration file cuFile reads.
    pub config_path: std::path::PathBuf,
}

static DRIVER: OnceLock<std::result::Result<CufileDriver, String>> = OnceLock::new();
static DRIVER_INIT: Mutex<()> = Mutex::new(());

/// Opens the cuFile driver once per process, applying `params` first, and enables level-3 statistics.
///
/// Later calls return the same driver; `params` differing from the first call's are noted in
/// [`CufileDriver::notes`]-style messages by the caller through [`CufileDriver::params`].
pub fn driver(params: &CufileParams) -> Result<&'static CufileDriver> {
    present().map_err(|r| Error::device("cuFile", r))?;
    let _lock = DRIVER_INIT.lock().unwrap_or_else(|p| p.into_inner());
    let r = DRIVER.get_or_init(|| open_driver(params).map_err(|e| e.to_string()));
    r.as_ref().map_err(|m| Error::Unavailable {
        backend: "cufile".into(),
        reason: m.clone(),
    })
}

/// Whether this process opened the cuFile driver.
pub fn driver_opened() -> bool {
    DRIVER.get().is_some_and(|d| d.is_ok())
}

/// Stops statistics and closes the cuFile driver if this process opened it. Call once, at the very
/// end, after every file handle is gone: left open, libcufile's own teardown at process exit was
/// seen to crash (SIGSEGV after the output was printed) on the H200 machine.
pub fn shutdown() {
    if !driver_opened() {
        return;
    }
    let _ = guard("closing the cuFile driver", || {
        // SAFETY: no handle or read is live any more (the caller's contract); both calls take no arguments.
        unsafe {
            let _ = sys::cuFileStatsStop();
            let _ = sys::cuFileDriverClose_v2();
        }
        Ok(())
    });
}

fn open_driver(params: &CufileParams) -> Result<CufileDriver> {
    let ctx = GpuContext::shared()?;
    guard("opening the cuFile driver", || {
        ctx.bind()?;
        let mut notes = params.apply();
        status(unsafe { sys::cuFileDriverOpen() })
            .map_err(|m| Error::device("cuFileDriverOpen", format!("{m}; {LOG_HINT}")))?;
        let mut p = MaybeUninit::<sys::CUfileDrvProps_t>::zeroed();
        let props = match status(unsafe { sys::cuFileDriverGetProperties(p.as_mut_ptr()) }) {
            Ok(()) => {
                let p = unsafe { p.assume_init() };
                DriverProps {
                    nvfs_major: p.nvfs.major_version,
                    nvfs_minor: p.nvfs.minor_version,
                    max_direct_io_size: p.nvfs.max_direct_io_size as u64,
                }
            }
            Err(m) => {
                notes.push(format!(
                    "cuFileDriverGetProperties failed ({m}): treating nvidia-fs as not loaded"
                ));
                DriverProps {
                    nvfs_major: 0,
                    nvfs_minor: 0,
                    max_direct_io_size: 0,
                }
            }
        };
        let stats_enabled = match status(unsafe { sys::cuFileSetStatsLevel(3) })
            .and_then(|_| status(unsafe { sys::cuFileStatsStart() }))
        {
            Ok(()) => true,
            Err(m) => {
                notes.push(format!(
                    "cuFile statistics unavailable ({m}): paths inferred from nvfs version only"
                ));
                false
            }
        };
        Ok(CufileDriver {
            props,
            stats_enabled,
            params: params.clone(),
            notes,
            config_path: config_path(),
        })
    })
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
    pub fn since(&self, before: &StatsSnapshot) -> CufileStatsDelta {
        CufileStatsDelta {
            total_reads: self.total_reads.saturating_sub(before.total_reads),
            nvfs_reads: self.nvfs_reads.saturating_sub(before.nvfs_reads),
            posix_reads: self.posix_reads.saturating_sub(before.posix_reads),
            read_bytes: self.read_bytes.saturating_sub(before.read_bytes),
        }
    }
}

impl CufileDriver {
    /// Reads level-3 statistics (`cuFileGetStatsL3`), summed over GPUs.
    pub fn stats(&self) -> Result<StatsSnapshot> {
        if !self.stats_enabled {
            return Err(Error::device("cuFile statistics", "not enabled"));
        }
        guard("cuFileGetStatsL3", || {
            let mut s: Box<MaybeUninit<sys::CUfileStatsLevel3_t>> = Box::new(MaybeUninit::zeroed());
            status(unsafe { sys::cuFileGetStatsL3(s.as_mut_ptr()) })
                .map_err(|m| Error::device("cuFileGetStatsL3", m))?;
            // Zeroed then filled by cuFile: every field is a plain integer.
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

/// Opens `path` for cuFile: with `O_DIRECT` when `direct`, falling back to buffered when the file
/// system refuses it. Returns the file and whether it is direct.
pub fn open_for_cufile(path: &Path, direct: bool) -> std::io::Result<(File, bool)> {
    if direct && let Ok(f) = crate::io::pread::open_direct(path) {
        return Ok((f, true));
    }
    Ok((File::open(path)?, false))
}

/// A file registered with cuFile (deregistered on drop; the file stays open while registered).
#[derive(Debug)]
pub struct CufileHandle {
    raw: sys::CUfileHandle_t,
    _file: File,
    direct: bool,
}

// cuFile handles may be used from several threads at once (cuFileRead is thread safe).
unsafe impl Send for CufileHandle {}
unsafe impl Sync for CufileHandle {}

/// A failed `cuFileRead`.
#[derive(Debug)]
pub enum ReadError {
    /// An OS error (cuFileRead returned -1).
    Os(std::io::Error),
    /// A cuFile error code.
    Cufile(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Os(e) => write!(f, "{e}"),
            ReadError::Cufile(m) => write!(f, "{m}; {LOG_HINT}"),
        }
    }
}

impl CufileHandle {
    /// Registers `file` (`direct`: it was opened with `O_DIRECT`). The driver must be open.
    ///
    /// A refusal carries cuFile's error name (for example `CU_FILE_HANDLE_NOT_REGISTERED`) and the hint
    /// to read cufile.log.
    pub fn register(_driver: &CufileDriver, file: File, direct: bool) -> std::result::Result<Self, String> {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut descr = sys::CUfileDescr_t {
                type_: sys::CUfileFileHandleType::CU_FILE_HANDLE_TYPE_OPAQUE_FD,
                handle: sys::CUfileDescr_t__bindgen_ty_1 { fd: file.as_raw_fd() },
                fs_ops: std::ptr::null(),
            };
            let mut fh: sys::CUfileHandle_t = std::ptr::null_mut();
            status(unsafe { sys::cuFileHandleRegister(&mut fh, &mut descr) }).map(|_| fh)
        }));
        match r {
            Ok(Ok(raw)) => Ok(Self {
                raw,
                _file: file,
                direct,
            }),
            Ok(Err(m)) => Err(format!("cuFileHandleRegister failed: {m}; {LOG_HINT}")),
            Err(p) => Err(format!(
                "cuFileHandleRegister panicked: {}",
                crate::panic_guard::panic_message(&p)
            )),
        }
    }

    /// Whether the registered file was opened with `O_DIRECT`.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// One `cuFileRead` of `size` bytes at `file_offset` into `dev_base + dev_offset`; returns bytes read.
    ///
    /// # Safety
    /// `dev_base + dev_offset .. + size` must be valid device memory of the current context, not used by
    /// anything else during the read.
    pub unsafe fn read(
        &self,
        dev_base: u64,
        size: usize,
        file_offset: u64,
        dev_offset: u64,
    ) -> std::result::Result<usize, ReadError> {
        let n = unsafe {
            sys::cuFileRead(
                self.raw,
                dev_base as *mut std::ffi::c_void,
                size,
                file_offset as sys::off_t,
                dev_offset as sys::off_t,
            )
        };
        if n == -1 {
            Err(ReadError::Os(std::io::Error::last_os_error()))
        } else if n < -1 {
            Err(ReadError::Cufile(error_name(-(n as i64))))
        } else {
            Ok(n as usize)
        }
    }
}

impl Drop for CufileHandle {
    fn drop(&mut self) {
        let raw = self.raw;
        let _ = std::panic::catch_unwind(move || unsafe { sys::cuFileHandleDeregister(raw) });
    }
}

/// A device buffer registered with cuFile (`cuFileBufRegister`), deregistered on drop.
#[derive(Debug)]
pub struct BufRegistration {
    base: u64,
}

impl BufRegistration {
    /// Registers `len` bytes at device address `base`.
    pub fn new(base: u64, len: usize) -> std::result::Result<Self, String> {
        let r = std::panic::catch_unwind(|| status(unsafe { sys::cuFileBufRegister(base as *const _, len, 0) }));
        match r {
            Ok(Ok(())) => Ok(Self { base }),
            Ok(Err(m)) => Err(format!("cuFileBufRegister failed: {m}")),
            Err(p) => Err(format!(
                "cuFileBufRegister panicked: {}",
                crate::panic_guard::panic_message(&p)
            )),
        }
    }
}

impl Drop for BufRegistration {
    fn drop(&mut self) {
        let base = self.base;
        let _ = std::panic::catch_unwind(move || unsafe { sys::cuFileBufDeregister(base as *const _) });
    }
}

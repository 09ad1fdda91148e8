//! Run-time compilation of CUDA C++ with NVRTC (through cudarc, loaded dynamically), cached on disk.
//!
//! Kernels ship as source in the crate, so building needs no CUDA toolkit. [`compile`] turns a source
//! into a CUBIN for one architecture; [`KernelModule::load`] compiles (or finds in the cache) and loads
//! it into a [`GpuContext`]. The cache key covers the source, the architecture, the NVRTC version and
//! the driver version, so a change of any of them compiles afresh. Compile time is measured apart
//! from everything else and reported by the caller.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int};
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::{Ptx, result as nv, sys as nvsys};

use crate::error::{Error, Result};
use crate::gpu::{GpuContext, cuda_err, guard};

/// Whether NVRTC (`libnvrtc.so`) can be loaded; `Err` says why not.
pub fn nvrtc_present() -> std::result::Result<(), String> {
    static PRESENT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    PRESENT
        .get_or_init(|| {
            // SAFETY: is_culib_present only tries to dlopen the candidate names; a panic is caught.
            let ok = std::panic::catch_unwind(|| unsafe { nvsys::is_culib_present() }).unwrap_or(false);
            if ok {
                Ok(())
            } else {
                Err(
                    "libnvrtc.so (CUDA's run-time compiler) cannot be loaded; it ships with the CUDA \
                     toolkit, or `pip install nvidia-cuda-nvrtc` and add its lib folder to LD_LIBRARY_PATH"
                        .to_string(),
                )
            }
        })
        .clone()
}

/// NVRTC's version, `(major, minor)`.
pub(crate) fn nvrtc_version() -> Result<(i32, i32)> {
    nvrtc_present().map_err(|r| Error::device("NVRTC", r))?;
    guard("NVRTC", || {
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: both pointers are to live locals NVRTC writes one int each into.
        let r = unsafe { nvsys::nvrtcVersion(&mut major, &mut minor) };
        nv_check(r, "nvrtcVersion")?;
        Ok((major, minor))
    })
}

fn nv_check(r: nvsys::nvrtcResult, what: &str) -> Result<()> {
    if r == nvsys::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(Error::device("NVRTC", format!("{what} failed: {r:?}")))
    }
}

/// A program compiled for one architecture.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The CUBIN image.
    pub cubin: Vec<u8>,
    /// NVRTC's log (warnings), possibly empty.
    pub log: String,
    /// Time NVRTC took.
    pub compile_time: Duration,
}

/// Compiles `source` (named `name` in messages) into a CUBIN for `sm_<arch>` (for example 90). A
/// compile error carries NVRTC's log.
pub(crate) fn compile(source: &str, name: &str, arch: u32) -> Result<Compiled> {
    nvrtc_present().map_err(|r| Error::device("NVRTC", r))?;
    let src = CString::new(source).map_err(|_| Error::device("NVRTC", "kernel source holds a NUL byte"))?;
    let cname = CString::new(name).map_err(|_| Error::device("NVRTC", "program name holds a NUL byte"))?;
    let options = [
        format!("--gpu-architecture=sm_{arch}"),
        "--std=c++17".to_string(),
        "--device-as-default-execution-space".to_string(),
        "-lineinfo".to_string(),
    ];
    guard("NVRTC", || {
        let started = Instant::now();
        let prog = nv::create_program(&src, Some(&cname))
            .map_err(|e| Error::device("NVRTC", format!("creating program {name}: {e:?}")))?;
        let program = Program(prog);
        // SAFETY: `program.0` is the live program just created; the options are valid C strings kept
        // alive by `options` for the call.
        let compiled = unsafe { nv::compile_program(program.0, &options) };
        // SAFETY: the program is live; the log is copied out before the program is destroyed.
        let log = unsafe { nv::get_program_log(program.0) }
            .map(|raw| {
                // SAFETY: NVRTC returns a NUL-terminated buffer.
                unsafe { CStr::from_ptr(raw.as_ptr()) }.to_string_lossy().into_owned()
            })
            .unwrap_or_default();
        if let Err(e) = compiled {
            return Err(Error::device(
                "NVRTC",
                format!("compiling {name} for sm_{arch} failed ({e:?}):\n{log}"),
            ));
        }
        let mut size = 0usize;
        // SAFETY: the program is live and compiled; `size` is a live local.
        let r = unsafe { nvsys::nvrtcGetCUBINSize(program.0, &mut size) };
        nv_check(r, "nvrtcGetCUBINSize")?;
        let mut cubin = vec![0u8; size];
        // SAFETY: `cubin` holds exactly the `size` bytes NVRTC said it will write.
        let r = unsafe { nvsys::nvrtcGetCUBIN(program.0, cubin.as_mut_ptr() as *mut c_char) };
        nv_check(r, "nvrtcGetCUBIN")?;
        Ok(Compiled {
            cubin,
            log,
            compile_time: started.elapsed(),
        })
    })
}

/// Destroys an NVRTC program when dropped.
struct Program(nvsys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by create_program and is destroyed once, here.
        let _ = unsafe { nv::destroy_program(self.0) };
    }
}

/// How a [`KernelModule`] got its CUBIN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ModuleOrigin {
    /// Compiled in this process (and stored in the cache when one was given).
    Compiled,
    /// Read from the disk cache.
    DiskCache,
    /// Already loaded in this process for this context.
    Memory,
}

/// A compiled source loaded into one context, with its functions looked up by name.
#[derive(Debug)]
pub struct KernelModule {
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<String, CudaFunction>>,
    /// Time spent compiling (zero when it came from a cache).
    pub compile_time: Duration,
    /// Time spent loading the CUBIN into the context.
    pub load_time: Duration,
    /// Where the CUBIN came from.
    pub origin: ModuleOrigin,
    /// The cache file used, if any.
    pub cache_file: Option<PathBuf>,
}

/// Loaded modules, by (context ordinal, cache key); one compile and load per process and device.
static LOADED: Mutex<Vec<(usize, u64, Arc<KernelModule>)>> = Mutex::new(Vec::new());

impl KernelModule {
    /// `source` compiled for `ctx`'s device and loaded into it, through the process's modules and the
    /// disk cache in `cache_dir` (none: compile every process).
    pub fn load(ctx: &Arc<GpuContext>, source: &str, name: &str, cache_dir: Option<&Path>) -> Result<Arc<Self>> {
        let arch = arch_of(ctx)?;
        let nvrtc = nvrtc_version()?;
        let driver = ctx.info()?.driver_version;
        let key = cache_key(source, arch, nvrtc, &driver);
        let mut loaded = LOADED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, _, m)) = loaded.iter().find(|(o, k, _)| *o == ctx.ordinal() && *k == key) {
            return Ok(Arc::new(KernelModule {
                module: m.module.clone(),
                functions: Mutex::new(HashMap::new()),
                compile_time: Duration::ZERO,
                load_time: Duration::ZERO,
                origin: ModuleOrigin::Memory,
                cache_file: m.cache_file.clone(),
            }));
        }
        let cache_file = cache_dir.map(|d| d.join(format!("{name}-sm{arch}-{key:016x}.cubin")));
        let cached = cache_file
            .as_ref()
            .and_then(|f| std::fs::read(f).ok())
            .filter(|c| !c.is_empty());
        let (cubin, origin, compile_time) = match cached {
            Some(c) => (c, ModuleOrigin::DiskCache, Duration::ZERO),
            None => {
                let c = compile(source, name, arch)?;
                if let Some(f) = &cache_file {
                    // A cache that cannot be written only costs a compile next time.
                    let _ = store_atomically(f, &c.cubin);
                }
                (c.cubin, ModuleOrigin::Compiled, c.compile_time)
            }
        };
        let started = Instant::now();
        let module = guard("loading kernels", || {
            ctx.bind()?;
            ctx.cuda()
                .load_module(Ptx::from_binary(cubin))
                .map_err(cuda_err(format!("loading the {name} kernels")))
        })?;
        let m = Arc::new(KernelModule {
            module,
            functions: Mutex::new(HashMap::new()),
            compile_time,
            load_time: started.elapsed(),
            origin,
            cache_file,
        });
        loaded.push((ctx.ordinal(), key, m.clone()));
        Ok(m)
    }

    /// The kernel `name` (an `extern "C" __global__` function of the source).
    pub fn function(&self, name: &str) -> Result<CudaFunction> {
        let mut f = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(func) = f.get(name) {
            return Ok(func.clone());
        }
        let func = guard("loading a kernel", || {
            self.module
                .load_function(name)
                .map_err(cuda_err(format!("finding kernel {name}")))
        })?;
        f.insert(name.to_string(), func.clone());
        Ok(func)
    }
}

/// The device's compute capability as NVRTC's `sm_` number (9.0 → 90).
fn arch_of(ctx: &Arc<GpuContext>) -> Result<u32> {
    let cc = ctx.info()?.compute_capability;
    let (major, minor) = cc.split_once('.').unwrap_or((&cc, "0"));
    let major: u32 = major
        .parse()
        .map_err(|_| Error::device("NVRTC", format!("compute capability {cc}")))?;
    let minor: u32 = minor
        .parse()
        .map_err(|_| Error::device("NVRTC", format!("compute capability {cc}")))?;
    Ok(major * 10 + minor)
}

fn cache_key(source: &str, arch: u32, nvrtc: (i32, i32), driver: &str) -> u64 {
    let mut h = twox_hash::XxHash64::with_seed(0x6770_7571);
    h.write(source.as_bytes());
    h.write(&arch.to_le_bytes());
    h.write(&nvrtc.0.to_le_bytes());
    h.write(&nvrtc.1.to_le_bytes());
    h.write(driver.as_bytes());
    h.finish()
}

fn store_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_key_covers_every_input() {
        let base = cache_key("a", 90, (13, 0), "13.0");
        assert_ne!(base, cache_key("b", 90, (13, 0), "13.0"));
        assert_ne!(base, cache_key("a", 80, (13, 0), "13.0"));
        assert_ne!(base, cache_key("a", 90, (13, 1), "13.0"));
        assert_ne!(base, cache_key("a", 90, (13, 0), "12.8"));
        assert_eq!(base, cache_key("a", 90, (13, 0), "13.0"));
    }

    /// Compiles a small kernel where NVRTC is present (no GPU needed); says why it skips otherwise.
    #[test]
    fn compiles_without_a_gpu_where_nvrtc_is_present() {
        if let Err(why) = nvrtc_present() {
            crate::test_skip(&why);
            return;
        }
        let ok = compile(
            "extern \"C\" __global__ void k(int* x) { x[threadIdx.x] = 1; }",
            "k.cu",
            90,
        )
        .unwrap();
        assert!(ok.cubin.len() > 100);
        let bad = compile("extern \"C\" __global__ void k( { }", "bad.cu", 90).unwrap_err();
        assert!(bad.to_string().contains("bad.cu"), "{bad}");
    }
}

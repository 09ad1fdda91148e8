//! One CUDA context per device, shared by everyone who asks for that device.
//!
//! [`GpuContext::new`] retains the device's primary context through cudarc. A registry of weak
//! references hands every caller asking for the same ordinal the same [`GpuContext`], so readers on
//! one device share it, readers on two devices each have their own, and the context goes away with its
//! last user. Nothing here is process-wide configuration: the ordinal is always an argument.

use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::result as cu;
use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaStream};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::gpu::{AllocationCounter, cuda_err, cuda_present, guard};

/// Facts about one GPU and its driver.
#[derive(Debug, Clone, Serialize)]
pub struct GpuInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// CUDA devices visible.
    pub device_count: usize,
    /// Device name.
    pub name: String,
    /// CUDA driver API version, as `major.minor` (for example "13.0").
    pub driver_version: String,
    /// Compute capability, `major.minor`.
    pub compute_capability: String,
    /// Total device memory, bytes.
    pub total_memory: u64,
    /// Free device memory when probed, bytes.
    pub free_memory: u64,
}

/// The primary CUDA context of one GPU, with a stream of its own.
#[derive(Debug)]
pub struct GpuContext {
    ctx: Arc<CudaContext>,
    ordinal: usize,
    stream: Arc<CudaStream>,
    /// Whether the device's memory pool keeps freed memory (set once, on first pooled allocation).
    pool_ready: std::sync::OnceLock<std::result::Result<(), String>>,
    /// Bytes of this GPU's [`DeviceBuffer`](crate::gpu::DeviceBuffer)s live now, and the peaks watched.
    allocations: Arc<AllocationCounter>,
}

/// Live contexts by ordinal; weak, so a context is released when its last user drops it.
static CONTEXTS: Mutex<Vec<(usize, Weak<GpuContext>)>> = Mutex::new(Vec::new());

impl GpuContext {
    /// The context of GPU `ordinal`: the one already in use in this process, or a new one.
    ///
    /// Fails with a plain reason when libcuda is absent, the driver does not initialise, or there is no
    /// such device; never panics.
    pub fn new(ordinal: usize) -> Result<Arc<Self>> {
        cuda_present().map_err(|r| Error::device("CUDA driver", r))?;
        let mut live = CONTEXTS.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|(_, w)| w.strong_count() > 0);
        if let Some(ctx) = live.iter().find(|(o, _)| *o == ordinal).and_then(|(_, w)| w.upgrade()) {
            return Ok(ctx);
        }
        let ctx = guard("CUDA driver", || {
            cu::init().map_err(cuda_err("initialising the CUDA driver (cuInit)"))?;
            let count = cu::device::get_count().map_err(cuda_err("counting CUDA devices"))?;
            if count <= 0 {
                return Err(Error::device("CUDA driver", "no CUDA device is visible"));
            }
            if ordinal >= count as usize {
                return Err(Error::NoSuchDevice {
                    ordinal,
                    visible: count as usize,
                });
            }
            let ctx = CudaContext::new(ordinal).map_err(cuda_err(format!("creating a context on GPU {ordinal}")))?;
            let stream = ctx
                .new_stream()
                .map_err(cuda_err(format!("creating a stream on GPU {ordinal}")))?;
            Ok(Arc::new(Self {
                ctx,
                ordinal,
                stream,
                pool_ready: std::sync::OnceLock::new(),
                allocations: Arc::default(),
            }))
        })?;
        live.push((ordinal, Arc::downgrade(&ctx)));
        Ok(ctx)
    }

    /// Makes the device's default memory pool (what stream-ordered allocations draw from) keep the
    /// memory freed into it instead of returning it to the driver at every synchronisation, so the
    /// decoder's per-step buffers are recycled without `cuMemAlloc`/`cuMemFree` (which synchronise).
    pub(crate) fn ensure_pool_keeps_memory(&self) -> Result<()> {
        self.pool_ready
            .get_or_init(|| {
                guard("configuring the device memory pool", || {
                    let pool = self.default_pool()?;
                    let mut threshold: u64 = u64::MAX;
                    // SAFETY: the attribute takes a pointer to a u64 threshold, a live local here; the
                    // pool handle came from the call above.
                    unsafe {
                        sys::cuMemPoolSetAttribute(
                            pool,
                            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                            &mut threshold as *mut u64 as *mut std::ffi::c_void,
                        )
                    }
                    .result()
                    .map_err(cuda_err("cuMemPoolSetAttribute"))
                })
                .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(|m| Error::device("configuring the device memory pool", m))
    }

    /// The device memory our buffers hold on this GPU, as rmm's statistics count it (not what the
    /// stream-ordered pool keeps reserved beyond it, which [`Self::memory`] sees).
    pub fn allocations(&self) -> &Arc<AllocationCounter> {
        &self.allocations
    }

    /// Device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// cudarc's context, for launching kernels and anything else cudarc offers.
    pub fn cuda(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The context's own stream. It lives as long as the context, which also keeps cudarc from
    /// synchronising the whole device when a later stream is the context's first.
    pub(crate) fn default_stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Makes this context current on the calling thread (CUDA contexts are per thread).
    pub fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(cuda_err(format!("binding the context of GPU {}", self.ordinal)))
    }

    /// Free and total device memory, bytes.
    pub fn memory(&self) -> Result<(u64, u64)> {
        guard("querying device memory", || {
            self.bind()?;
            let (free, total) = cu::mem_get_info().map_err(cuda_err("cuMemGetInfo"))?;
            Ok((free as u64, total as u64))
        })
    }

    /// Device memory a read may plan with: the driver's free memory and what the device's default
    /// pool holds unused. The pool keeps what our buffers free ([`Self::ensure_pool_keeps_memory`]),
    /// which `cuMemGetInfo` counts as taken although the next stream-ordered allocations reuse it; a
    /// budget of free memory alone would shrink after each earlier read of the process, and cut the
    /// same file into more steps (docs/history/gpu-decode-log.md, twenty-ninth session). Without the
    /// pool's figures, the free memory alone.
    pub fn available_memory(&self) -> Result<u64> {
        let (free, _) = self.memory()?;
        // Reserved less handed out, never negative whatever the driver says.
        let idle = self
            .pool_usage()
            .map_or(0, |(reserved, used)| reserved.saturating_sub(used));
        Ok(free.saturating_add(idle))
    }

    /// Waits for all work queued in this context, frees of stream-ordered buffers included.
    pub fn synchronize(&self) -> Result<()> {
        guard("synchronising the GPU", || {
            self.bind()?;
            self.ctx.synchronize().map_err(cuda_err("cuCtxSynchronize"))
        })
    }

    /// The device's default memory pool (what stream-ordered allocations draw from), this context
    /// made current. Inside a [`guard`].
    fn default_pool(&self) -> Result<sys::CUmemoryPool> {
        self.bind()?;
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: `pool` is a live local the driver writes one handle into; the device is this
        // context's.
        unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, self.ctx.cu_device()) }
            .result()
            .map_err(cuda_err("cuDeviceGetDefaultMemPool"))?;
        Ok(pool)
    }

    /// The device's default pool: bytes reserved from the driver, and bytes of those handed out.
    fn pool_usage(&self) -> Result<(u64, u64)> {
        guard("querying the device memory pool", || {
            let pool = self.default_pool()?;
            let get = |attr: sys::CUmemPool_attribute| -> Result<u64> {
                let mut value: u64 = 0;
                // SAFETY: both attributes read here are a cuuint64_t the driver writes through the
                // pointer, a live local u64; the pool handle came from the call above.
                unsafe { sys::cuMemPoolGetAttribute(pool, attr, &mut value as *mut u64 as *mut std::ffi::c_void) }
                    .result()
                    .map_err(cuda_err("cuMemPoolGetAttribute"))?;
                Ok(value)
            };
            Ok((
                get(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
                get(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
            ))
        })
    }

    /// Name, driver version and memory of this GPU.
    pub fn info(&self) -> Result<GpuInfo> {
        guard("querying the GPU", || {
            self.bind()?;
            let mut v = 0i32;
            // SAFETY: cuDriverGetVersion writes one int through a valid pointer to a local.
            unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) }
                .result()
                .map_err(cuda_err("cuDriverGetVersion"))?;
            let (free, total) = self.memory()?;
            let (ma, mi) = self.ctx.compute_capability().map_err(cuda_err("compute capability"))?;
            Ok(GpuInfo {
                ordinal: self.ordinal,
                device_count: cu::device::get_count().map_err(cuda_err("cuDeviceGetCount"))?.max(0) as usize,
                name: self.ctx.name().map_err(cuda_err("cuDeviceGetName"))?,
                driver_version: format!("{}.{}", v / 1000, (v % 1000) / 10),
                compute_capability: format!("{ma}.{mi}"),
                total_memory: total,
                free_memory: free,
            })
        })
    }

    /// Number of CUDA devices visible (0 without a driver).
    pub fn device_count() -> usize {
        if cuda_present().is_err() {
            return 0;
        }
        guard("counting CUDA devices", || {
            cu::init().map_err(cuda_err("cuInit"))?;
            Ok(cu::device::get_count().map_err(cuda_err("cuDeviceGetCount"))?.max(0) as usize)
        })
        .unwrap_or(0)
    }
}

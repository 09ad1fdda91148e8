//! GPU context and CUDA/cuFile wrappers: presence-checked and panic-free.
//!
//! Layered like cudarc itself: [`driver`] and [`cufile`] hold the few `unsafe` calls into cudarc's
//! `sys`/`result` rungs and expose small RAII types ([`GpuContext`], [`DeviceBuffer`], [`PinnedBuffer`],
//! [`Stream`], [`Event`], [`cufile::CufileHandle`]). cudarc panics when a library or symbol is missing,
//! so every entry point first checks that the library loads ([`cuda_present`], [`cufile::present`]) and
//! runs cudarc inside [`guard`], which turns any remaining panic into [`Error::Device`].

pub mod cufile;
pub mod driver;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

pub use driver::{DeviceBuffer, Event, GpuContext, GpuInfo, PinnedBuffer, Stream};

use crate::error::{Error, Result};
use crate::panic_guard::panic_message;

/// Runs `f`, turning a panic inside cudarc into [`Error::Device`] with `context`.
pub fn guard<T>(context: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(Error::device(
            context,
            format!("CUDA library call panicked: {}", panic_message(&payload)),
        )),
    }
}

/// Whether the CUDA driver library (`libcuda`) can be loaded; `Err` says why not.
pub fn cuda_present() -> std::result::Result<(), String> {
    static PRESENT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    PRESENT
        .get_or_init(|| {
            // is_culib_present only tries to dlopen the candidates; it does not panic.
            let ok = catch_unwind(|| unsafe { cudarc::driver::sys::is_culib_present() }).unwrap_or(false);
            if ok {
                Ok(())
            } else {
                Err("libcuda.so (the NVIDIA driver library) cannot be loaded".to_string())
            }
        })
        .clone()
}

/// A summary of what this machine has, for `check` and for `auto` decisions.
pub struct Gpu;

impl Gpu {
    /// Probes GPU 0: driver present, device count, name, driver version, memory.
    ///
    /// `Err` carries a plain reason (for example "libcuda.so ... cannot be loaded" or "no CUDA device").
    pub fn probe() -> Result<GpuInfo> {
        let ctx = GpuContext::shared()?;
        ctx.info()
    }
}

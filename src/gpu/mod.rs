//! The device layer: CUDA contexts, streams, events, owned device and pinned host memory, cuFile, and
//! nvCOMP decompression.
//!
//! It knows nothing of Parquet. It stands on cudarc's ladder: cudarc's safe types where they exist
//! ([`cudarc::driver::CudaContext`], `CudaStream`, `CudaEvent`), its `result` rung for single calls, and
//! raw `sys` only for what cudarc lacks (huge-page pinned memory, cuFile parameters and statistics).
//! nvCOMP, which cudarc does not wrap, has a ladder of its own in [`nvcomp`], loaded with libloading.
//!
//! cudarc panics when a library or a symbol is missing, so every entry point first checks that the
//! library loads ([`cuda_present`], [`cufile::present`]) and runs cudarc inside [`guard`], which turns
//! any panic left into an [`Error::Device`]. Nothing here reads the environment: every choice arrives as
//! an argument.
//!
//! Ordering: every [`DeviceBuffer`] belongs to one stream; writes go through a [`DeviceWriter`] taken
//! from `&mut DeviceBuffer`, copies on other streams wait on an event recorded on the buffer's stream,
//! and [`DeviceWriter::join`] makes the buffer's stream wait on theirs. Nothing synchronises the
//! whole device.

pub mod allocations;
pub mod context;
pub mod cufile;
#[cfg(feature = "fault-injection")]
#[doc(hidden)] // public for the integration tests only (docs/architecture.md)
pub mod faults;
pub mod memory;
pub mod nvcomp;
pub mod nvrtc;
pub(crate) mod ring;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

pub use allocations::{AllocationCounter, AllocationWatch};
pub use context::{GpuContext, GpuInfo};
pub use memory::{DeviceBuffer, DeviceWriter, Event, FillingBuffer, MappedStaging, PinnedAlloc, PinnedBuffer, Stream};
pub(crate) use ring::PinnedRing;

use crate::error::{Error, Result};
use crate::panic_guard::panic_message;

/// Runs `f`, turning a panic inside cudarc into [`Error::Device`] with `context`.
pub(crate) fn guard<T>(context: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
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
            // SAFETY: is_culib_present only tries to dlopen the candidate file names and drops the
            // handles; it reads no memory of ours. A panic inside is caught.
            let ok = catch_unwind(|| unsafe { cudarc::driver::sys::is_culib_present() }).unwrap_or(false);
            if ok {
                Ok(())
            } else {
                Err("libcuda.so (the NVIDIA driver library) cannot be loaded".to_string())
            }
        })
        .clone()
}

/// A CUDA driver error with what we were doing; the driver's code stays the source.
pub(crate) fn cuda_err(context: impl Into<String>) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
    let context = context.into();
    move |source| Error::Cuda { context, source }
}

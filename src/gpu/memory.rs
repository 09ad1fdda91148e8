//! Owned device memory, page-locked host memory, streams and events.
//!
//! - [`DeviceBuffer<T>`]: `len` elements of `T` in device memory, allocated with `cuMemAlloc` (memory
//!   that cuFile and GPUDirect Storage can target, unlike stream-ordered pool memory), ordered on one
//!   stream, freed on drop after that stream's work. It is written only through a [`DeviceWriter`]
//!   borrowed from `&mut self`, which checks every range against the buffer.
//! - [`PinnedBuffer`]: page-locked host memory with an event covering the copies that read it; it
//!   cannot be written or freed while a copy from it may still be running.
//! - [`Stream`] and [`Event`]: cudarc's, with errors mapped and no panics.
//!
//! Drops never panic: a failure while freeing is ignored, there being nothing a caller could do.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::result as cu;
use cudarc::driver::sys;
use cudarc::driver::{CudaEvent, CudaStream, DeviceRepr};

use crate::error::{Error, Result};
use crate::gpu::{GpuContext, cuda_err, guard};

/// A CUDA stream of one context.
#[derive(Debug, Clone)]
pub struct Stream {
    ctx: Arc<GpuContext>,
    raw: Arc<CudaStream>,
}

impl Stream {
    /// A new non-blocking stream on `ctx`'s device.
    pub fn new(ctx: &Arc<GpuContext>) -> Result<Self> {
        guard("creating a CUDA stream", || {
            let raw = ctx.cuda().new_stream().map_err(cuda_err("cuStreamCreate"))?;
            Ok(Self { ctx: ctx.clone(), raw })
        })
    }

    /// The context's own stream ([`GpuContext::default_stream`]).
    pub fn of_context(ctx: &Arc<GpuContext>) -> Self {
        Self {
            ctx: ctx.clone(),
            raw: ctx.default_stream().clone(),
        }
    }

    /// cudarc's stream, for kernel launches.
    pub fn cuda(&self) -> &Arc<CudaStream> {
        &self.raw
    }

    /// The context it belongs to.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    /// Waits until the work queued on this stream so far has finished (this stream only).
    pub fn synchronize(&self) -> Result<()> {
        guard("cuStreamSynchronize", || {
            self.raw.synchronize().map_err(cuda_err("cuStreamSynchronize"))
        })
    }

    /// Makes later work on this stream wait for `event` (on the device; the host does not wait).
    pub(crate) fn wait(&self, event: &Event) -> Result<()> {
        guard("cuStreamWaitEvent", || {
            self.raw.wait(&event.raw).map_err(cuda_err("cuStreamWaitEvent"))
        })
    }

    /// Records `event` at the current end of this stream.
    pub(crate) fn record(&self, event: &Event) -> Result<()> {
        guard("cuEventRecord", || {
            event.raw.record(&self.raw).map_err(cuda_err("cuEventRecord"))
        })
    }
}

/// A CUDA event (timing disabled: it only orders work).
#[derive(Debug)]
pub struct Event {
    raw: CudaEvent,
}

impl Event {
    /// A new event on `ctx`'s device, with no work recorded.
    pub fn new(ctx: &Arc<GpuContext>) -> Result<Self> {
        guard("cuEventCreate", || {
            let raw = ctx.cuda().new_event(None).map_err(cuda_err("cuEventCreate"))?;
            Ok(Self { raw })
        })
    }

    /// Waits until the work recorded before this event finished.
    pub fn synchronize(&self) -> Result<()> {
        guard("cuEventSynchronize", || {
            self.raw.synchronize().map_err(cuda_err("cuEventSynchronize"))
        })
    }

    /// Whether the work recorded before this event finished (does not wait).
    pub(crate) fn query(&self) -> Result<bool> {
        guard("cuEventQuery", || {
            self.raw.try_is_complete().map_err(cuda_err("cuEventQuery"))
        })
    }

    /// cudarc's event.
    pub fn cuda(&self) -> &CudaEvent {
        &self.raw
    }
}

/// `len` elements of `T` in device memory, owned, ordered on one stream.
#[derive(Debug)]
pub struct DeviceBuffer<T: DeviceRepr = u8> {
    stream: Stream,
    /// Device address of element 0; 0 for an empty buffer (nothing allocated).
    ptr: sys::CUdeviceptr,
    len: usize,
    /// Allocated from the device's stream-ordered pool (freed with `cuMemFreeAsync` on `stream`).
    pooled: bool,
    _elem: PhantomData<T>,
}

/// The error an injected allocation failure gives (as a real one reads).
#[cfg(feature = "fault-injection")]
fn injected_oom(bytes: usize, ctx: &GpuContext) -> Error {
    Error::Device {
        context: format!("allocating {bytes} bytes on GPU {}", ctx.ordinal()),
        message: "out of device memory (injected by a test)".into(),
    }
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// Allocates `len` elements (uninitialised: read only what was written) ordered on `stream`.
    /// Out of memory is an error naming the size and the free memory.
    pub fn alloc(stream: &Stream, len: usize) -> Result<Self> {
        let ctx = stream.context();
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::device("allocating device memory", format!("{len} elements overflow usize")))?;
        #[cfg(feature = "fault-injection")]
        if bytes > 0 && crate::gpu::faults::allocation_fails() {
            return Err(injected_oom(bytes, ctx));
        }
        let ptr = if bytes == 0 {
            0
        } else {
            guard("allocating device memory", || {
                ctx.bind()?;
                // SAFETY: cuMemAlloc returns fresh memory of `bytes` bytes (or an error); it is owned by
                // the returned buffer and freed exactly once, in Drop.
                match unsafe { cu::malloc_sync(bytes) } {
                    Ok(ptr) => Ok(ptr),
                    Err(e) => {
                        let (free, total) = ctx.memory().unwrap_or((0, 0));
                        let what = if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                            "out of device memory"
                        } else {
                            "device allocation failed"
                        };
                        Err(Error::Device {
                            context: format!("allocating {bytes} bytes on GPU {}", ctx.ordinal()),
                            message: format!("{what} ({e}; {free} of {total} bytes free)"),
                        })
                    }
                }
            })?
        };
        ctx.allocations().allocated(bytes as u64);
        Ok(Self {
            stream: stream.clone(),
            ptr,
            len,
            pooled: false,
            _elem: PhantomData,
        })
    }

    /// Allocates `len` elements (uninitialised) from the device's stream-ordered memory pool, on
    /// `stream`: no device-wide synchronisation to allocate or free, and freed memory is reused. Not
    /// for cuFile (which needs `cuMemAlloc` memory). Work on another stream that uses the buffer must be
    /// joined to `stream` before the buffer is dropped (the free is ordered on `stream` only).
    pub(crate) fn alloc_pooled(stream: &Stream, len: usize) -> Result<Self> {
        let ctx = stream.context();
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::device("allocating device memory", format!("{len} elements overflow usize")))?;
        if bytes == 0 {
            return Self::alloc(stream, 0);
        }
        ctx.ensure_pool_keeps_memory()?;
        #[cfg(feature = "fault-injection")]
        if crate::gpu::faults::allocation_fails() {
            return Err(injected_oom(bytes, ctx));
        }
        let ptr = guard("allocating device memory", || {
            ctx.bind()?;
            // SAFETY: cuMemAllocAsync returns `bytes` bytes usable in stream order on `stream`; the
            // returned buffer owns them and frees them exactly once, in Drop, on the same stream.
            unsafe { cu::malloc_async(stream.raw.cu_stream(), bytes) }.map_err(|e| {
                let (free, total) = ctx.memory().unwrap_or((0, 0));
                Error::Device {
                    context: format!("allocating {bytes} bytes on GPU {}", ctx.ordinal()),
                    message: format!("stream-ordered allocation failed ({e}; {free} of {total} bytes free)"),
                }
            })
        })?;
        ctx.allocations().allocated(bytes as u64);
        Ok(Self {
            stream: stream.clone(),
            ptr,
            len,
            pooled: true,
            _elem: PhantomData,
        })
    }

    /// [`Self::alloc_pooled`], set to zero bytes (the memset is queued on `stream`).
    pub fn zeroed_pooled(stream: &Stream, len: usize) -> Result<Self> {
        let buf = Self::alloc_pooled(stream, len)?;
        buf.clear()?;
        Ok(buf)
    }

    /// Queues a memset of every byte to zero on the buffer's stream.
    pub(crate) fn clear(&self) -> Result<()> {
        if self.ptr == 0 {
            return Ok(());
        }
        guard("clearing device memory", || {
            self.context().bind()?;
            // SAFETY: the allocation holds exactly num_bytes() bytes and is owned by `self`, which
            // outlives the queued memset (its free is ordered after it on the same stream).
            unsafe { cu::memset_d8_async(self.ptr, 0, self.num_bytes(), self.stream.raw.cu_stream()) }
                .map_err(cuda_err("cuMemsetD8Async"))
        })
    }

    /// Allocates `len` elements set to zero bytes, ordered on `stream` (the memset is queued there).
    pub fn zeroed(stream: &Stream, len: usize) -> Result<Self> {
        let buf = Self::alloc(stream, len)?;
        buf.clear()?;
        Ok(buf)
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it came from the stream-ordered pool: dropping it queues its free on its stream rather
    /// than waiting for the stream.
    pub(crate) fn is_pooled(&self) -> bool {
        self.pooled
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes.
    pub fn num_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// The stream its work is ordered on: work on another stream that reads it must wait on an event
    /// recorded here.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The context (and so the device) it lives on.
    pub fn context(&self) -> &Arc<GpuContext> {
        self.stream.context()
    }

    /// The device address of element 0, for kernel arguments and foreign consumers; 0 when empty.
    /// Reading through it is ordered by [`Self::stream`]; writing through it is for kernels launched
    /// while the caller holds `&mut self`.
    pub fn device_address(&self) -> u64 {
        self.ptr
    }

    /// Copies elements `range` to host memory (waits for this buffer's stream only).
    pub fn copy_range_to_host(&self, range: Range<usize>) -> Result<Vec<T>>
    where
        T: Default + Clone,
    {
        if range.start > range.end || range.end > self.len {
            return Err(Error::device(
                "copying device memory to the host",
                format!("range {range:?} is outside the buffer of {} elements", self.len),
            ));
        }
        let mut out = vec![T::default(); range.len()];
        if out.is_empty() {
            return Ok(out);
        }
        guard("copying device memory to the host", || {
            self.context().bind()?;
            let src = self.ptr + (range.start * std::mem::size_of::<T>()) as u64;
            // SAFETY: src..src + out.len() elements lies inside this allocation (checked above); `out` is
            // a host vector of exactly that many elements that lives until the synchronize below.
            unsafe { cu::memcpy_dtoh_async(&mut out, src, self.stream.raw.cu_stream()) }
                .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
            self.stream.synchronize()
        })?;
        Ok(out)
    }

    /// Copies the whole buffer to host memory.
    pub fn copy_to_host(&self) -> Result<Vec<T>>
    where
        T: Default + Clone,
    {
        self.copy_range_to_host(0..self.len)
    }

    /// Uploads `data` into a new buffer ordered on `stream`.
    pub fn from_host(stream: &Stream, data: &[T]) -> Result<Self> {
        Self::alloc(stream, data.len())?.filled_from(stream, data)
    }

    /// Uploads `data` into a new buffer from the device's stream-ordered pool ([`Self::alloc_pooled`]).
    pub(crate) fn from_host_pooled(stream: &Stream, data: &[T]) -> Result<Self> {
        Self::alloc_pooled(stream, data.len())?.filled_from(stream, data)
    }

    /// Copies `data` (exactly this buffer's length) in, on `stream`, and returns the buffer.
    fn filled_from(self, stream: &Stream, data: &[T]) -> Result<Self> {
        let buf = self;
        if !data.is_empty() {
            guard("copying host memory to the device", || {
                stream.context().bind()?;
                // SAFETY: the buffer has exactly data.len() elements; the synchronize below keeps `data`
                // borrowed until the copy has finished.
                unsafe { cu::memcpy_htod_async(buf.ptr, data, stream.raw.cu_stream()) }
                    .map_err(cuda_err("cuMemcpyHtoDAsync"))?;
                stream.synchronize()
            })?;
        }
        Ok(buf)
    }
}

impl DeviceBuffer<u8> {
    /// Copies `data` into bytes `offset..offset + data.len()` (ordered on the buffer's stream; returns
    /// once the copy is done, so `data` may go).
    pub(crate) fn write_at(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        let end = offset.checked_add(data.len());
        if end.is_none_or(|e| e > self.len) {
            return Err(Error::device(
                "copying host memory to the device",
                format!(
                    "{} bytes at {offset} do not fit in a buffer of {}",
                    data.len(),
                    self.len
                ),
            ));
        }
        if data.is_empty() {
            return Ok(());
        }
        guard("copying host memory to the device", || {
            self.context().bind()?;
            // SAFETY: offset..offset + data.len() lies inside the allocation (checked above), `&mut self`
            // excludes other writers, and the synchronize below keeps `data` borrowed until the copy ends.
            unsafe { cu::memcpy_htod_async(self.ptr + offset as u64, data, self.stream.raw.cu_stream()) }
                .map_err(cuda_err("cuMemcpyHtoDAsync"))?;
            self.stream.synchronize()
        })
    }

    /// Copies `src[src_range]` into bytes `dst_offset..` of this buffer, device to device, ordered after
    /// the work queued on both buffers' streams (this buffer's stream waits for `src`'s).
    pub(crate) fn copy_from_device(
        &mut self,
        dst_offset: usize,
        src: &DeviceBuffer<u8>,
        src_range: Range<usize>,
    ) -> Result<()> {
        let len = src_range.end.saturating_sub(src_range.start);
        let dst_end = dst_offset.checked_add(len);
        if src_range.start > src_range.end || src_range.end > src.len || dst_end.is_none_or(|e| e > self.len) {
            return Err(Error::device(
                "copying device memory",
                format!(
                    "{src_range:?} of a buffer of {} bytes to {dst_offset} of one of {} bytes is out of range",
                    src.len, self.len
                ),
            ));
        }
        if len == 0 {
            return Ok(());
        }
        if !Arc::ptr_eq(src.stream.cuda(), self.stream.cuda()) {
            let ready = Event::new(self.context())?;
            src.stream.record(&ready)?;
            self.stream.wait(&ready)?;
        }
        guard("copying device memory", || {
            self.context().bind()?;
            // SAFETY: both ranges lie inside their allocations (checked above); `&mut self` excludes
            // other writers of the destination; the copy is queued on this buffer's stream, after
            // the source's queued work (the event above), and both buffers synchronise their
            // streams before being freed.
            unsafe {
                cu::memcpy_dtod_async(
                    self.ptr + dst_offset as u64,
                    src.ptr + src_range.start as u64,
                    len,
                    self.stream.raw.cu_stream(),
                )
            }
            .map_err(cuda_err("cuMemcpyDtoDAsync"))
        })
    }

    /// A writer for this buffer's bytes, for as long as `self` is borrowed mutably.
    ///
    /// Work already queued on the buffer's stream happens before any write: copies on other streams
    /// wait on an event recorded now, and synchronous writers (cuFile) start after the stream has
    /// drained. [`DeviceWriter::join`] orders later work on the buffer's stream after the copies of
    /// another stream.
    pub fn writer(&mut self) -> Result<DeviceWriter<'_>> {
        let ready = Event::new(self.context())?;
        self.stream.record(&ready)?;
        Ok(DeviceWriter {
            base: self.ptr,
            len: self.len as u64,
            stream: &self.stream,
            ready,
            drained: std::sync::OnceLock::new(),
        })
    }
}

impl<T: DeviceRepr> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        // Counted as freed when the free is queued, as rmm counts a stream-ordered deallocation.
        self.context()
            .allocations()
            .freed((self.len * std::mem::size_of::<T>()) as u64);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = self.context().bind();
            if self.pooled {
                // SAFETY: ptr came from cuMemAllocAsync on this stream and is freed only here; the free
                // is ordered after all work queued on the stream (and what joined it), so no queued
                // work can use the memory after it is returned to the pool.
                let _ = unsafe { cu::free_async(self.ptr, self.stream.raw.cu_stream()) };
                return;
            }
            // Work on this buffer's stream (and what joined it) must finish before the memory goes.
            let _ = self.stream.raw.synchronize();
            // SAFETY: ptr came from cuMemAlloc in `alloc`, is freed only here, and no queued work uses it.
            let _ = unsafe { cu::free_sync(self.ptr) };
        }));
    }
}

/// Bounds-checked writes into one [`DeviceBuffer<u8>`], shareable between threads; it exists only while
/// the buffer is borrowed mutably, so nothing else reads, writes or frees the buffer meanwhile.
#[derive(Debug)]
pub struct DeviceWriter<'a> {
    base: sys::CUdeviceptr,
    len: u64,
    stream: &'a Stream,
    ready: Event,
    drained: std::sync::OnceLock<std::result::Result<(), String>>,
}

impl DeviceWriter<'_> {
    /// Bytes in the buffer.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of `offset .. offset + len`, checked to lie in the buffer.
    fn range(&self, offset: u64, len: u64) -> Result<sys::CUdeviceptr> {
        checked_range(self.base, self.len, offset, len)
    }

    /// Queues a copy of `src[range]` to byte `dst_offset` of the buffer on `stream`, after the work
    /// that preceded the writer on the buffer's stream. `src` cannot be written or freed until the copy
    /// has finished (its event is recorded behind the copy).
    pub fn copy_from_pinned(
        &self,
        dst_offset: u64,
        src: &mut PinnedBuffer,
        range: Range<usize>,
        stream: &Stream,
    ) -> Result<()> {
        // SAFETY: the buffer at base..base+len is borrowed mutably for the writer's lifetime, so it is
        // neither freed nor touched by anyone else while the copy is queued.
        unsafe { queue_pinned_copy(self.base, self.len, &self.ready, dst_offset, src, range, stream) }
    }

    /// Makes the buffer's stream wait for the copies queued on `stream` so far, so that work ordered
    /// on the buffer later sees them. Every stream that copied into the buffer must be joined.
    pub fn join(&self, stream: &Stream) -> Result<()> {
        let done = Event::new(stream.context())?;
        stream.record(&done)?;
        self.stream.wait(&done)
    }

    /// For writers that are not stream-ordered (cuFile): waits, once, until the work queued on the
    /// buffer before the writer existed has finished, then returns the checked device address of
    /// `offset .. offset + len`.
    pub(crate) fn raw_range_for_sync_write(&self, offset: u64, len: u64) -> Result<sys::CUdeviceptr> {
        let addr = self.range(offset, len)?;
        self.drained
            .get_or_init(|| self.ready.synchronize().map_err(|e| e.to_string()))
            .clone()
            .map_err(|m| Error::device("waiting for the destination buffer", m))?;
        Ok(addr)
    }

    /// The device address of byte 0 (for registering the whole buffer with cuFile).
    pub(crate) fn base(&self) -> sys::CUdeviceptr {
        self.base
    }
}

/// The device address of `offset .. offset + n` in the buffer of `len` bytes at `base`, checked.
fn checked_range(base: sys::CUdeviceptr, len: u64, offset: u64, n: u64) -> Result<sys::CUdeviceptr> {
    match offset.checked_add(n) {
        Some(end) if end <= len => Ok(base + offset),
        _ => Err(Error::device(
            "writing device memory",
            format!("range {offset} + {n} is outside the buffer of {len} bytes"),
        )),
    }
}

/// Queues a copy of `src[range]` to `base + dst_offset` on `stream`, after `ready` (the work that
/// preceded the writes on the destination's stream), and records `src`'s event behind it.
///
/// # Safety
/// `base .. base + len` must be device memory of `stream`'s context that stays allocated, and is
/// written by no one else, until the copy has finished (callers order the destination's later work
/// and its free after the copy).
unsafe fn queue_pinned_copy(
    base: sys::CUdeviceptr,
    len: u64,
    ready: &Event,
    dst_offset: u64,
    src: &mut PinnedBuffer,
    range: Range<usize>,
    stream: &Stream,
) -> Result<()> {
    if range.start > range.end || range.end > src.len {
        return Err(Error::device(
            "copying pinned memory to the device",
            format!("range {range:?} is outside the pinned buffer of {} bytes", src.len),
        ));
    }
    // A copy queued earlier on another stream may still read `src`: order this one after it, so the
    // event recorded below covers both.
    stream.wait(&src.event)?;
    // SAFETY: the source is page-locked memory of `src`, in bounds (checked); `src.event` is recorded
    // right after the copy, and PinnedBuffer waits for that event before any write to or free of it.
    // The destination is the caller's (see this function's contract).
    unsafe {
        queue_host_copy(
            base,
            len,
            ready,
            dst_offset,
            src.ptr.add(range.start),
            range.len(),
            stream,
        )?
    };
    stream.record(&src.event)
}

/// Queues a copy of the `n` host bytes at `src` to `dst_offset` of the `len` device bytes at `base`
/// (checked), on `stream`, after `ready`.
///
/// # Safety
/// `base..base + len` must stay allocated and unshared until the copy finishes; `src..src + n` must be
/// page-locked memory that stays allocated and unwritten until then.
pub(super) unsafe fn queue_host_copy(
    base: sys::CUdeviceptr,
    len: u64,
    ready: &Event,
    dst_offset: u64,
    src: *const u8,
    n: usize,
    stream: &Stream,
) -> Result<()> {
    let dst = checked_range(base, len, dst_offset, n as u64)?;
    stream.wait(ready)?;
    guard("cuMemcpyHtoDAsync", || {
        // SAFETY: the caller keeps src..src+n allocated, page-locked and unwritten until the copy ends.
        let src_slice = unsafe { std::slice::from_raw_parts(src, n) };
        // SAFETY: dst..dst+n lies in the destination (checked), which the caller keeps allocated and
        // unshared until the copy finishes; the stream belongs to the buffer's context (cuda checks it).
        unsafe { cu::memcpy_htod_async(dst, src_slice, stream.raw.cu_stream()) }.map_err(cuda_err("cuMemcpyHtoDAsync"))
    })
}

/// A device buffer filled by copies queued from several threads, for longer than one borrow lasts:
/// the staged backend's stepped reads (through a [`PinnedRing`](super::ring::PinnedRing)) hand a
/// step's buffer to its consumer while the same workers go on filling the next step's. It owns the buffer until
/// [`FillingBuffer::finish`] hands it back; copies hold a shared lock while they are queued, so the
/// buffer cannot be taken back during one, and a copy after that fails instead of writing memory
/// that may have been freed.
#[derive(Debug)]
pub struct FillingBuffer {
    buffer: std::sync::RwLock<Option<DeviceBuffer>>,
    /// Recorded on the buffer's stream when filling began: copies come after the work before it.
    ready: Event,
}

impl FillingBuffer {
    /// Starts filling `buffer`: copies will come after the work queued on its stream so far.
    pub fn new(buffer: DeviceBuffer) -> Result<Self> {
        let ready = Event::new(buffer.context())?;
        buffer.stream.record(&ready)?;
        Ok(Self {
            buffer: std::sync::RwLock::new(Some(buffer)),
            ready,
        })
    }

    /// Queues a copy of the `n` host bytes at `src` to byte `dst_offset` of the buffer on `stream`.
    /// Fails once the buffer has been handed back.
    ///
    /// # Safety
    /// `src..src + n` must be page-locked memory that stays allocated and unwritten until the copy
    /// has finished.
    pub(super) unsafe fn copy_from_host(
        &self,
        dst_offset: u64,
        src: *const u8,
        n: usize,
        stream: &Stream,
    ) -> Result<()> {
        let held = self.buffer.read().unwrap_or_else(|p| p.into_inner());
        let Some(buffer) = held.as_ref() else {
            return Err(Error::device(
                "copying pinned memory to the device",
                "the destination buffer was already handed on",
            ));
        };
        // SAFETY: the read lock keeps `finish` from taking the buffer (and so from handing it on to be
        // freed) while the copy is queued; the caller of `finish` passes the events recorded behind
        // every copy, so the buffer's later work and its stream-ordered free come after them. The
        // source is the caller's.
        unsafe { queue_host_copy(buffer.ptr, buffer.len as u64, &self.ready, dst_offset, src, n, stream) }
    }

    /// Hands the buffer back, its stream ordered after each event of `copied`, which must be recorded
    /// behind every copy queued into it (one per stream that copied, after its last copy). Fails when
    /// it was already handed back.
    pub(crate) fn finish(&self, copied: &[&Event]) -> Result<DeviceBuffer> {
        let buffer = self
            .buffer
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| Error::device("handing on a filled buffer", "the buffer was already handed on"))?;
        for e in copied {
            buffer.stream.wait(e)?;
        }
        Ok(buffer)
    }
}

/// How pinned host memory is obtained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PinnedAlloc {
    /// Anonymous memory advised to use transparent huge pages, then page-locked with
    /// `cuMemHostRegister` (falls back to `cuMemHostAlloc` where that fails). Measured on the H200
    /// machine (staged path, 12 threads, 4 MiB buffers): 51.5 GB/s against 50.2 with `cuMemHostAlloc`.
    #[default]
    HugePages,
    /// `cuMemHostAlloc`.
    HostAlloc,
}

/// Page-locked host memory (freed on drop), page aligned, usable for `O_DIRECT` reads.
#[derive(Debug)]
pub struct PinnedBuffer {
    ctx: Arc<GpuContext>,
    ptr: *mut u8,
    len: usize,
    /// `Some(mapping length)` for an mmap'd, cuMemHostRegister'ed buffer; `None` for cuMemHostAlloc.
    mapped: Option<usize>,
    /// Recorded behind every copy that reads this memory.
    event: Event,
}

// SAFETY: the buffer is plain host memory owned by this value; shared access only reads it, mutable
// access goes through &mut self (after waiting for in-flight copies), like a Vec<u8>.
unsafe impl Send for PinnedBuffer {}
// SAFETY: as for Send: &PinnedBuffer only reads the memory.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// Allocates `len` bytes (at least 1) of page-locked host memory, page aligned, zeroed.
    pub fn new(ctx: &Arc<GpuContext>, len: usize, how: PinnedAlloc) -> Result<Self> {
        let len = len.max(1);
        let event = Event::new(ctx)?;
        if how == PinnedAlloc::HugePages
            && let Some((ptr, map_len)) = huge_page_pinned(ctx, len)
        {
            return Ok(Self {
                ctx: ctx.clone(),
                ptr,
                len,
                mapped: Some(map_len),
                event,
            });
        }
        let ptr = guard("allocating pinned host memory", || {
            ctx.bind()?;
            // SAFETY: cuMemHostAlloc returns fresh memory of len bytes, owned by the returned buffer and
            // freed once in Drop. PORTABLE: usable from every context.
            unsafe { cu::malloc_host(len, sys::CU_MEMHOSTALLOC_PORTABLE) }
                .map_err(cuda_err(format!("cuMemHostAlloc of {len} bytes")))
        })? as *mut u8;
        // SAFETY: ptr points to len writable bytes just allocated; zeroing makes every byte initialised.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(Self {
            ctx: ctx.clone(),
            ptr,
            len,
            mapped: None,
            event,
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (never: at least one byte is allocated).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory, for reading (copies may read it at the same time).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr points to len initialised bytes owned by self; shared reads alias only reads.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The memory, writable, once every copy that reads it has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8]> {
        self.event.synchronize()?;
        // SAFETY: ptr points to len initialised bytes owned by self; &mut self and the event wait above
        // mean no one else (host or device) touches them while the slice lives.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// Whether the copies reading it have all finished (does not wait).
    pub(crate) fn is_idle(&self) -> Result<bool> {
        self.event.query()
    }

    /// The memory's start, for owners that share it out in disjoint parts ([`super::ring`]).
    pub(super) fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Whether the start is aligned to `align` bytes.
    pub(crate) fn is_aligned(&self, align: usize) -> bool {
        (self.ptr as usize).is_multiple_of(align.max(1))
    }
}

/// Anonymous memory advised to use huge pages, page-locked with cuMemHostRegister; `None` where any
/// step fails. Huge pages make a bounce buffer physically contiguous in 2 MiB pieces: fewer TLB misses
/// for the pread that fills it, fewer scatter-gather entries for the DMA that drains it.
fn huge_page_pinned(ctx: &Arc<GpuContext>, len: usize) -> Option<(*mut u8, usize)> {
    const HUGE: usize = 2 << 20;
    let map_len = len.div_ceil(HUGE) * HUGE;
    // SAFETY: asks for a fresh private anonymous mapping; no existing memory is affected.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: ptr..ptr+map_len is the mapping just made, owned here; advice and zeroing touch only it.
    unsafe {
        libc::madvise(ptr, map_len, libc::MADV_HUGEPAGE);
        std::ptr::write_bytes(ptr as *mut u8, 0, map_len);
    }
    let registered = guard("registering pinned host memory", || {
        ctx.bind()?;
        // SAFETY: ptr..ptr+map_len is our mapping, alive until it is unregistered in Drop.
        unsafe { sys::cuMemHostRegister_v2(ptr, map_len, sys::CU_MEMHOSTREGISTER_PORTABLE) }
            .result()
            .map_err(cuda_err("cuMemHostRegister"))
    });
    if registered.is_err() {
        // SAFETY: unmapping the mapping made above, which was never registered or shared.
        unsafe { libc::munmap(ptr, map_len) };
        return None;
    }
    Some((ptr as *mut u8, map_len))
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // A copy may still read this memory: wait for it before freeing.
            let _ = self.event.synchronize();
            let _ = self.ctx.bind();
            match self.mapped {
                None => {
                    // SAFETY: ptr came from cuMemHostAlloc in `new`, is freed only here, and no copy
                    // reads it any more (event waited on above).
                    let _ = unsafe { cu::free_host(self.ptr as *mut c_void) };
                }
                Some(map_len) => {
                    // SAFETY: ptr..ptr+map_len is the mapping registered in `huge_page_pinned`, owned
                    // by self, no longer read by any copy; unregistered, then unmapped, once.
                    unsafe {
                        let _ = sys::cuMemHostUnregister(self.ptr as *mut c_void);
                        libc::munmap(self.ptr as *mut c_void, map_len);
                    }
                }
            }
        }));
    }
}

/// Page-locked host memory mapped into the device's address space, handed out in regions: the GPU
/// decoder moves its small descriptors and results through it with its own copy kernel, so that they
/// never queue on a copy engine behind the staged reads' megabytes (which kept a 345 MB step's decode
/// at 7-8 ms beside the reads against 2.6 ms alone).
///
/// Regions are handed out once each, in order; one that no longer fits first waits for the stream
/// that every use of them was queued on, then all are free again. So the host never writes a region
/// a queued kernel may still read, and never reads one a queued kernel may still write.
#[derive(Debug)]
pub struct MappedStaging {
    ctx: Arc<GpuContext>,
    ptr: *mut u8,
    len: usize,
    device: u64,
    /// Bytes handed out since the last recycle.
    used: usize,
    /// Recorded behind the last work that may touch the memory, before it is put aside.
    event: Event,
}

// SAFETY: the memory is owned by this value and reached only through &mut self (host writes, region
// hand-out) or after the owner's stream was synchronised (reads); like a Vec<u8>.
unsafe impl Send for MappedStaging {}
// SAFETY: &MappedStaging exposes no access to the memory.
unsafe impl Sync for MappedStaging {}

/// Alignment of every region: the copy kernel moves 16-byte words between aligned sides.
const STAGING_ALIGN: usize = 16;

impl MappedStaging {
    /// `len` bytes (at least 1) of page-locked host memory, mapped for `ctx`'s device.
    pub fn new(ctx: &Arc<GpuContext>, len: usize) -> Result<Self> {
        let len = len.max(1);
        let event = Event::new(ctx)?;
        let (ptr, device) = guard("allocating mapped host memory", || {
            ctx.bind()?;
            // SAFETY: cuMemHostAlloc returns fresh memory of len bytes, owned by the returned value and
            // freed once in Drop. DEVICEMAP: the device may read and write it; PORTABLE: from any context.
            let ptr = unsafe { cu::malloc_host(len, sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP) }
                .map_err(cuda_err(format!("cuMemHostAlloc of {len} mapped bytes")))?;
            let mut device: sys::CUdeviceptr = 0;
            // SAFETY: ptr is the mapped allocation just made; the driver writes one address into `device`.
            let got = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, ptr, 0) }
                .result()
                .map_err(cuda_err("cuMemHostGetDevicePointer"));
            if let Err(e) = got {
                // SAFETY: ptr came from cuMemHostAlloc above and was never handed out.
                let _ = unsafe { cu::free_host(ptr) };
                return Err(e);
            }
            Ok((ptr as *mut u8, device))
        })?;
        Ok(Self {
            ctx: ctx.clone(),
            ptr,
            len,
            device,
            used: 0,
            event,
        })
    }

    /// The next free region of `len` bytes: its offset, or `None` when it does not fit.
    fn take_region(&mut self, len: usize) -> Option<usize> {
        let at = self.used.next_multiple_of(STAGING_ALIGN);
        let end = at.checked_add(len)?;
        (end <= self.len).then(|| {
            self.used = end;
            at
        })
    }

    /// A fresh region of `len` bytes: when the rest does not hold it, first waits for `stream` (on
    /// which every use of the regions handed out was queued) and makes every region free. Its offset,
    /// or `None` when `len` exceeds the capacity.
    fn region(&mut self, stream: &Stream, len: usize) -> Result<Option<usize>> {
        if len > self.len {
            return Ok(None);
        }
        if let Some(at) = self.take_region(len) {
            return Ok(Some(at));
        }
        stream.synchronize()?;
        self.used = 0;
        Ok(self.take_region(len))
    }

    /// Copies `bytes` into a fresh region (see [`Self::reserve`] for when it waits for `stream`): the
    /// device address of its copy, or `None` when they exceed the capacity.
    pub(crate) fn stage(&mut self, stream: &Stream, bytes: &[u8]) -> Result<Option<u64>> {
        let Some(at) = self.region(stream, bytes.len())? else {
            return Ok(None);
        };
        // SAFETY: at..at + bytes.len() lies inside the allocation (take_region checked it) and was never
        // handed out since the regions were last made free, which waited for every kernel that used
        // the memory; so no queued work reads or writes it, and &mut self excludes other host access.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(at), bytes.len()) };
        Ok(Some(self.device + at as u64))
    }

    /// A fresh region of `len` bytes for the device to write: its offset and device address, or
    /// `None` when `len` exceeds the capacity. When the rest of the memory does not hold it, this first
    /// waits for `stream`, on which every use of the regions handed out was queued, and frees them all.
    pub(crate) fn reserve(&mut self, stream: &Stream, len: usize) -> Result<Option<(usize, u64)>> {
        Ok(self.region(stream, len)?.map(|at| (at, self.device + at as u64)))
    }

    /// Waits for `stream`, on which every use of the regions handed out was queued, then returns the
    /// bytes of region `offset..offset + len` (from [`Self::reserve`]) and makes every region free.
    pub(crate) fn read_and_recycle(&mut self, stream: &Stream, offset: usize, len: usize) -> Result<Vec<u8>> {
        let end = offset.checked_add(len);
        if end.is_none_or(|e| e > self.used) {
            return Err(Error::device(
                "reading mapped host memory",
                format!("{len} bytes at {offset} were not handed out (of {})", self.used),
            ));
        }
        stream.synchronize()?;
        // SAFETY: the region lies inside the allocation (checked against `used` <= len); the stream
        // every use was queued on has finished, so no device write is in flight; &mut self excludes
        // host writers.
        let out = unsafe { std::slice::from_raw_parts(self.ptr.add(offset), len) }.to_vec();
        self.used = 0;
        Ok(out)
    }

    /// Puts the memory aside behind `stream`'s queued work: [`Self::reuse`] waits for it.
    pub(crate) fn set_aside(&mut self, stream: &Stream) -> Result<()> {
        stream.record(&self.event)
    }

    /// Takes the memory back into use once the work it was set aside behind has finished.
    pub(crate) fn reuse(&mut self) -> Result<()> {
        self.event.synchronize()?;
        self.used = 0;
        Ok(())
    }
}

impl Drop for MappedStaging {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // Work set aside behind may still use this memory: wait for it before freeing.
            let _ = self.event.synchronize();
            let _ = self.ctx.bind();
            // SAFETY: ptr came from cuMemHostAlloc in `new`, is freed only here, and no queued work uses
            // it any more (the event waited on above follows the last use).
            let _ = unsafe { cu::free_host(self.ptr as *mut c_void) };
        }));
    }
}

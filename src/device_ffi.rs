//! Export of decoded columns through the Arrow C Device Data Interface
//! (<https://arrow.apache.org/docs/format/CDeviceDataInterface.html>): a decoded batch as an
//! `ArrowDeviceArray` (a struct array whose children are the columns, as a record batch travels) with
//! its `ArrowSchema`, and a decoded table as an `ArrowDeviceArrayStream` of its batches. The buffers
//! stay where the decoder left them (device memory for the GPU decoder: nothing is copied); they live
//! until the consumer calls the array's `release`. For the GPU, `sync_event` points to a CUDA event
//! recorded on the decode's stream after the batch was decoded: a consumer makes its stream wait on it
//! before reading.
//!
//! arrow-rs 60 has no device structs (apache/arrow-rs#10754 proposes them); the names here follow that
//! proposal (`FFI_ArrowDeviceArray`, `FFI_ArrowDeviceArrayStream`, `ArrowDeviceType`) so that a later
//! switch is small. The schema is arrow-rs's own `FFI_ArrowSchema`; host batches go through arrow-rs's
//! FFI (`arrow::ffi`).

use std::any::Any;
use std::collections::VecDeque;
use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, SchemaRef};
use arrow::ffi::FFI_ArrowSchema;

use crate::decode::exec::OwnedBuffer;
use crate::decode::table::{DeviceArray, DeviceBatch, DeviceTable};
use crate::error::{Error, Result};
use crate::gpu::{DeviceBuffer, Event};

/// `ArrowDeviceType` (an `int32_t` in the specification).
pub(crate) type ArrowDeviceType = i32;
/// Host memory.
pub const ARROW_DEVICE_CPU: ArrowDeviceType = 1;
/// CUDA device memory.
pub const ARROW_DEVICE_CUDA: ArrowDeviceType = 2;

/// `struct ArrowArray` of the C Data Interface, for arrays whose buffers may lie in device memory
/// (arrow-rs's `FFI_ArrowArray` can only be built from host `ArrayData`). The same layout: a consumer
/// may cast it to arrow-rs's `FFI_ArrowArray` when the buffers are in host memory. Dropping it calls
/// its `release` (if still set).
#[repr(C)]
#[derive(Debug)]
pub struct FFI_ArrowArray {
    /// Elements.
    pub length: i64,
    /// Nulls.
    pub null_count: i64,
    /// Offset into the buffers (always 0 here).
    pub offset: i64,
    /// Buffers, validity first (none for the null type).
    pub n_buffers: i64,
    /// Children.
    pub n_children: i64,
    /// `n_buffers` buffer addresses.
    pub buffers: *mut *const c_void,
    /// `n_children` children.
    pub children: *mut *mut FFI_ArrowArray,
    /// A dictionary-encoded array's values, else null.
    pub dictionary: *mut FFI_ArrowArray,
    /// Frees the array (and its children not moved out); null once released.
    pub release: Option<unsafe extern "C" fn(*mut FFI_ArrowArray)>,
    /// The producer's.
    pub private_data: *mut c_void,
}

// SAFETY: an exported array is plain data plus a release callback that frees memory the export
// owns (kept alive by reference counts that are thread-safe); the specification lets it move between
// threads, and nothing here ties it to the creating one.
unsafe impl Send for FFI_ArrowArray {}
// SAFETY: as for FFI_ArrowArray; `sync_event` points into memory the export owns.
unsafe impl Send for FFI_ArrowDeviceArray {}
// SAFETY: the stream's private data is Send (its batch source is `Send`); callbacks take it by pointer.
unsafe impl Send for FFI_ArrowDeviceArrayStream {}

impl FFI_ArrowArray {
    /// A released (empty) array, as a stream's end is written.
    pub(crate) fn empty() -> Self {
        Self {
            length: 0,
            null_count: 0,
            offset: 0,
            n_buffers: 0,
            n_children: 0,
            buffers: std::ptr::null_mut(),
            children: std::ptr::null_mut(),
            dictionary: std::ptr::null_mut(),
            release: None,
            private_data: std::ptr::null_mut(),
        }
    }

    /// Whether it was released (or never held anything).
    pub fn is_released(&self) -> bool {
        self.release.is_none()
    }
}

impl Drop for FFI_ArrowArray {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: `release` is this array's own callback (set by `export_array`), called once: it
            // clears `release` itself.
            unsafe { release(self) }
        }
    }
}

/// `struct ArrowDeviceArray`: an array, the device its buffers are on, and the event to wait for.
#[repr(C)]
#[derive(Debug)]
pub struct FFI_ArrowDeviceArray {
    /// The array (its buffers on `device_type` / `device_id`).
    pub array: FFI_ArrowArray,
    /// Device ordinal (-1 for the host).
    pub device_id: i64,
    /// [`ARROW_DEVICE_CUDA`] or [`ARROW_DEVICE_CPU`].
    pub device_type: ArrowDeviceType,
    /// For CUDA, a pointer to a `CUevent` recorded after the data was written; null when none is needed.
    pub sync_event: *mut c_void,
    /// Zero.
    pub reserved: [i64; 3],
}

/// `struct ArrowDeviceArrayStream`: batches one after another, all on one device type.
#[repr(C)]
#[derive(Debug)]
pub struct FFI_ArrowDeviceArrayStream {
    /// Where every batch's buffers are.
    pub device_type: ArrowDeviceType,
    /// Writes the stream's schema; 0 or an errno value.
    pub get_schema: Option<unsafe extern "C" fn(*mut FFI_ArrowDeviceArrayStream, *mut FFI_ArrowSchema) -> c_int>,
    /// Writes the next batch (a released array at the end); 0 or an errno value.
    pub get_next: Option<unsafe extern "C" fn(*mut FFI_ArrowDeviceArrayStream, *mut FFI_ArrowDeviceArray) -> c_int>,
    /// The last error's message, or null.
    pub get_last_error: Option<unsafe extern "C" fn(*mut FFI_ArrowDeviceArrayStream) -> *const c_char>,
    /// Frees the stream (batches already handed out live on); null once released.
    pub release: Option<unsafe extern "C" fn(*mut FFI_ArrowDeviceArrayStream)>,
    /// The producer's.
    pub private_data: *mut c_void,
}

impl Drop for FFI_ArrowDeviceArrayStream {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: this stream's own callback, called once (it clears `release`).
            unsafe { release(self) }
        }
    }
}

/// What an exported array keeps alive, and the arrays its pointers point into.
struct ArrayPrivate {
    /// The exported batch (and its event): the memory every buffer address points into.
    _owner: Arc<dyn Any + Send + Sync>,
    buffers: Vec<*const c_void>,
    children: Vec<*mut FFI_ArrowArray>,
    /// A dictionary array's values (boxed like the children), or null.
    dictionary: *mut FFI_ArrowArray,
    /// A view array's last buffer: its data buffers' sizes (`int64`), in host memory, where consumers
    /// read them (arrow-rs's import, nanoarrow) to size the data buffers before touching the device.
    _variadic_sizes: Option<Vec<i64>>,
}

unsafe extern "C" fn release_array(array: *mut FFI_ArrowArray) {
    if array.is_null() {
        return;
    }
    // SAFETY: the consumer passes an array this module exported (the specification's contract); its
    // private data is the `ArrayPrivate` boxed by `export_array`, taken back exactly once because
    // `release` is cleared below.
    unsafe {
        let a = &mut *array;
        if a.release.is_none() {
            return;
        }
        let private = Box::from_raw(a.private_data as *mut ArrayPrivate);
        for &child in &private.children {
            // Children are boxed by `export_array`; one the consumer moved out has `release` null, and
            // dropping the box then releases nothing.
            drop(Box::from_raw(child));
        }
        if !private.dictionary.is_null() {
            drop(Box::from_raw(private.dictionary));
        }
        drop(private);
        a.release = None;
        a.private_data = std::ptr::null_mut();
    }
}

/// `a` as a C array whose buffer addresses point into `a`'s buffers, kept alive by `owner`.
fn export_array<B: OwnedBuffer>(a: &DeviceArray<B>, owner: &Arc<dyn Any + Send + Sync>) -> Result<FFI_ArrowArray> {
    if matches!(
        a.data_type,
        DataType::RunEndEncoded(..) | DataType::Union(..) | DataType::ListView(..) | DataType::LargeListView(..)
    ) {
        return Err(Error::device(
            "exporting decoded columns",
            format!(
                "{} arrays are not exported (the decoder does not produce them)",
                a.data_type
            ),
        ));
    }
    let mut buffers: Vec<*const c_void> = Vec::new();
    // The null type has no buffers at all; every other type starts with its validity bitmap.
    if a.data_type != DataType::Null {
        buffers.push(
            a.validity
                .as_ref()
                .map_or(std::ptr::null(), |v| v.address() as *const c_void),
        );
        buffers.extend(a.buffers.iter().map(|b| b.address() as *const c_void));
    }
    // Views: the data buffers' sizes follow the buffers (the specification's variadic sizes).
    let variadic_sizes = matches!(a.data_type, DataType::Utf8View | DataType::BinaryView)
        .then(|| a.buffers.iter().skip(1).map(|b| b.len() as i64).collect::<Vec<i64>>());
    // A dictionary array's values travel as its `dictionary`, not as a child (the specification's).
    let is_dictionary = matches!(a.data_type, DataType::Dictionary(..));
    let exported = a
        .children
        .iter()
        .map(|c| export_array(c, owner))
        .collect::<Result<Vec<_>>>()?;
    let mut dictionary = std::ptr::null_mut();
    let mut children = Vec::new();
    for c in exported {
        let boxed = Box::into_raw(Box::new(c));
        if is_dictionary {
            dictionary = boxed;
        } else {
            children.push(boxed);
        }
    }
    Ok(finish_array(
        a.len,
        a.null_count,
        buffers,
        children,
        dictionary,
        variadic_sizes,
        owner,
    ))
}

fn finish_array(
    len: usize,
    null_count: usize,
    mut buffers: Vec<*const c_void>,
    children: Vec<*mut FFI_ArrowArray>,
    dictionary: *mut FFI_ArrowArray,
    variadic_sizes: Option<Vec<i64>>,
    owner: &Arc<dyn Any + Send + Sync>,
) -> FFI_ArrowArray {
    if let Some(sizes) = &variadic_sizes {
        // Present even when there is no data buffer (every string inline). The vector's heap storage
        // does not move with the box below.
        buffers.push(sizes.as_ptr() as *const c_void);
    }
    let mut private = Box::new(ArrayPrivate {
        _owner: owner.clone(),
        buffers,
        children,
        dictionary,
        _variadic_sizes: variadic_sizes,
    });
    // The vectors' heap storage does not move with the box, so these pointers stay valid until release.
    let buffers_ptr = if private.buffers.is_empty() {
        std::ptr::null_mut()
    } else {
        private.buffers.as_mut_ptr()
    };
    let children_ptr = if private.children.is_empty() {
        std::ptr::null_mut()
    } else {
        private.children.as_mut_ptr()
    };
    FFI_ArrowArray {
        length: len as i64,
        null_count: null_count as i64,
        offset: 0,
        n_buffers: private.buffers.len() as i64,
        n_children: private.children.len() as i64,
        buffers: buffers_ptr,
        children: children_ptr,
        dictionary,
        release: Some(release_array),
        private_data: Box::into_raw(private) as *mut c_void,
    }
}

/// A `CUevent` handle at a fixed address (what `sync_event` points to).
struct SyncEvent {
    _event: Event,
    handle: Box<cudarc::driver::sys::CUevent>,
}

// SAFETY: a CUDA event handle may be used from any thread (the driver API is thread-safe); the box
// is only read.
unsafe impl Send for SyncEvent {}
// SAFETY: as above; nothing here is mutated after construction.
unsafe impl Sync for SyncEvent {}

/// The batch and its event, owned by the export.
struct Exported<B: OwnedBuffer> {
    batch: Arc<DeviceBatch<B>>,
    /// Kept alive for `sync_event`, never read here.
    _sync: Option<SyncEvent>,
}

/// The C schema of a batch exported as a struct array (its fields the columns).
pub fn struct_schema(schema: &SchemaRef) -> Result<FFI_ArrowSchema> {
    let dt = DataType::Struct(schema.fields().clone());
    let field = Field::new("", dt, false).with_metadata(schema.metadata().clone());
    FFI_ArrowSchema::try_from(&field).map_err(|e| Error::device("exporting the schema", e))
}

fn export_owned<B: OwnedBuffer + 'static>(
    batch: Arc<DeviceBatch<B>>,
    device_type: ArrowDeviceType,
    device_id: i64,
    sync: Option<SyncEvent>,
) -> Result<FFI_ArrowDeviceArray> {
    let sync_event = sync
        .as_ref()
        .map_or(std::ptr::null_mut(), |s| &*s.handle as *const _ as *mut c_void);
    let num_rows = batch.num_rows;
    let owner: Arc<Exported<B>> = Arc::new(Exported { batch, _sync: sync });
    let any: Arc<dyn Any + Send + Sync> = owner.clone();
    let children = owner
        .batch
        .columns
        .iter()
        .map(|c| export_array(&c.array, &any))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .map(|c| Box::into_raw(Box::new(c)))
        .collect();
    Ok(FFI_ArrowDeviceArray {
        array: finish_array(
            num_rows,
            0,
            vec![std::ptr::null()],
            children,
            std::ptr::null_mut(),
            None,
            &any,
        ),
        device_id,
        device_type,
        sync_event,
        reserved: [0; 3],
    })
}

impl DeviceBatch<DeviceBuffer<u8>> {
    /// Exports the batch as a CUDA device array (a struct array of the columns) and its schema,
    /// without copying: an event is recorded on the decode's stream for the consumer to wait on.
    pub fn into_device_array(self) -> Result<(FFI_ArrowSchema, FFI_ArrowDeviceArray)> {
        export_device_batch(Arc::new(self))
    }
}

/// [`DeviceBatch::into_device_array`] of a shared batch (exported as often as wanted; each export
/// keeps the batch alive until its release).
pub fn export_device_batch(
    batch: Arc<DeviceBatch<DeviceBuffer<u8>>>,
) -> Result<(FFI_ArrowSchema, FFI_ArrowDeviceArray)> {
    let schema = struct_schema(&batch.schema)?;
    let first = batch
        .columns
        .iter()
        .find_map(|c| first_buffer(&c.array))
        .map(|b| (b.stream().clone(), b.context().clone()));
    let (sync, device_id) = match first {
        Some((stream, ctx)) => {
            let event = Event::new(&ctx)?;
            stream.record(&event)?;
            let handle = Box::new(event.cuda().cu_event());
            (Some(SyncEvent { _event: event, handle }), ctx.ordinal() as i64)
        }
        // No buffer at all (no column, or only empty null columns): nothing to wait for.
        None => (None, 0),
    };
    Ok((schema, export_owned(batch, ARROW_DEVICE_CUDA, device_id, sync)?))
}

fn first_buffer<B: OwnedBuffer>(a: &DeviceArray<B>) -> Option<&B> {
    a.validity
        .as_ref()
        .or(a.buffers.first())
        .or_else(|| a.children.iter().find_map(first_buffer))
}

impl DeviceBatch<Vec<u8>> {
    /// Exports a batch decoded into host memory (the reference decoder's) as a CPU device array and
    /// its schema: the same export as the GPU's, for tests and host consumers.
    pub fn into_device_array(self) -> Result<(FFI_ArrowSchema, FFI_ArrowDeviceArray)> {
        let schema = struct_schema(&self.schema)?;
        Ok((schema, export_owned(Arc::new(self), ARROW_DEVICE_CPU, -1, None)?))
    }
}

/// A table's batches handed out one by one.
struct StreamPrivate {
    schema: SchemaRef,
    next: Box<dyn FnMut() -> Option<Result<FFI_ArrowDeviceArray>> + Send>,
    last_error: Option<CString>,
}

unsafe extern "C" fn stream_get_schema(stream: *mut FFI_ArrowDeviceArrayStream, out: *mut FFI_ArrowSchema) -> c_int {
    // SAFETY: the consumer passes a stream this module exported (private data a `StreamPrivate`) that
    // it has not released, and `out` pointing to writable memory for one schema (the contract).
    unsafe {
        let p = &mut *((*stream).private_data as *mut StreamPrivate);
        match struct_schema(&p.schema) {
            Ok(s) => {
                std::ptr::write(out, s);
                0
            }
            Err(e) => {
                p.last_error = CString::new(e.to_string().replace('\0', " ")).ok();
                libc::EINVAL
            }
        }
    }
}

unsafe extern "C" fn stream_get_next(stream: *mut FFI_ArrowDeviceArrayStream, out: *mut FFI_ArrowDeviceArray) -> c_int {
    // SAFETY: as in `stream_get_schema`; `out` is writable memory for one device array, written
    // whole (never read or dropped: it may be uninitialised).
    unsafe {
        let p = &mut *((*stream).private_data as *mut StreamPrivate);
        match (p.next)() {
            Some(Ok(a)) => {
                std::ptr::write(out, a);
                0
            }
            None => {
                std::ptr::write(
                    out,
                    FFI_ArrowDeviceArray {
                        array: FFI_ArrowArray::empty(),
                        device_id: -1,
                        device_type: (*stream).device_type,
                        sync_event: std::ptr::null_mut(),
                        reserved: [0; 3],
                    },
                );
                0
            }
            Some(Err(e)) => {
                p.last_error = CString::new(e.to_string().replace('\0', " ")).ok();
                libc::EIO
            }
        }
    }
}

unsafe extern "C" fn stream_get_last_error(stream: *mut FFI_ArrowDeviceArrayStream) -> *const c_char {
    // SAFETY: as in `stream_get_schema`; the message lives in the private data until the next call or
    // the release.
    unsafe {
        let p = &*((*stream).private_data as *const StreamPrivate);
        p.last_error.as_ref().map_or(std::ptr::null(), |m| m.as_ptr())
    }
}

unsafe extern "C" fn stream_release(stream: *mut FFI_ArrowDeviceArrayStream) {
    if stream.is_null() {
        return;
    }
    // SAFETY: a stream this module exported; its private data is taken back once (`release` is
    // cleared). Batches already handed out hold their own memory and stay valid.
    unsafe {
        let s = &mut *stream;
        if s.release.is_none() {
            return;
        }
        drop(Box::from_raw(s.private_data as *mut StreamPrivate));
        s.release = None;
        s.private_data = std::ptr::null_mut();
    }
}

fn export_stream(
    schema: SchemaRef,
    device_type: ArrowDeviceType,
    next: Box<dyn FnMut() -> Option<Result<FFI_ArrowDeviceArray>> + Send>,
) -> FFI_ArrowDeviceArrayStream {
    let private = Box::new(StreamPrivate {
        schema,
        next,
        last_error: None,
    });
    FFI_ArrowDeviceArrayStream {
        device_type,
        get_schema: Some(stream_get_schema),
        get_next: Some(stream_get_next),
        get_last_error: Some(stream_get_last_error),
        release: Some(stream_release),
        private_data: Box::into_raw(private) as *mut c_void,
    }
}

impl DeviceTable<DeviceBuffer<u8>> {
    /// Exports the table as a CUDA device array stream, one array per decoded batch (step).
    pub fn into_device_stream(self) -> FFI_ArrowDeviceArrayStream {
        export_device_batches(self.schema, self.batches.into_iter().map(Arc::new).collect())
    }
}

impl DeviceTable<Vec<u8>> {
    /// Exports a table decoded into host memory as a CPU device array stream.
    pub fn into_device_stream(self) -> FFI_ArrowDeviceArrayStream {
        let mut batches: VecDeque<_> = self.batches.into();
        export_stream(
            self.schema,
            ARROW_DEVICE_CPU,
            Box::new(move || batches.pop_front().map(|b| b.into_device_array().map(|(_, a)| a))),
        )
    }
}

/// A CUDA device array stream over shared batches, each exported when the consumer asks for it.
pub fn export_device_batches(
    schema: SchemaRef,
    batches: Vec<Arc<DeviceBatch<DeviceBuffer<u8>>>>,
) -> FFI_ArrowDeviceArrayStream {
    let mut batches: VecDeque<_> = batches.into();
    export_stream(
        schema,
        ARROW_DEVICE_CUDA,
        Box::new(move || batches.pop_front().map(|b| export_device_batch(b).map(|(_, a)| a))),
    )
}

/// A device array stream over arrays already exported (all on `device_type`), described by `schema`.
pub fn export_arrays(
    schema: SchemaRef,
    device_type: ArrowDeviceType,
    arrays: Vec<FFI_ArrowDeviceArray>,
) -> FFI_ArrowDeviceArrayStream {
    let mut arrays: VecDeque<_> = arrays.into();
    export_stream(schema, device_type, Box::new(move || arrays.pop_front().map(Ok)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_the_specifications() {
        // arrow/c/abi.h on x86-64: ArrowArray 80 bytes, ArrowDeviceArray 128 (device_id at 80,
        // device_type at 88, sync_event at 96), ArrowDeviceArrayStream 48.
        assert_eq!(std::mem::size_of::<FFI_ArrowArray>(), 80);
        assert_eq!(
            std::mem::size_of::<FFI_ArrowArray>(),
            std::mem::size_of::<arrow::ffi::FFI_ArrowArray>()
        );
        assert_eq!(std::mem::size_of::<FFI_ArrowDeviceArray>(), 128);
        assert_eq!(std::mem::offset_of!(FFI_ArrowDeviceArray, device_id), 80);
        assert_eq!(std::mem::offset_of!(FFI_ArrowDeviceArray, device_type), 88);
        assert_eq!(std::mem::offset_of!(FFI_ArrowDeviceArray, sync_event), 96);
        assert_eq!(std::mem::size_of::<FFI_ArrowDeviceArrayStream>(), 48);
    }
}

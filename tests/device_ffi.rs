//! The Arrow C Device Data Interface export (`gpu_parquet::device_ffi`), on host memory: batches the
//! reference decoder produced (the GPU pipeline with its kernels' host references; the same export
//! code as the GPU's, with CPU in place of CUDA) are exported and imported back through arrow-rs's
//! C Data Interface, and must equal arrow-rs reading the file. Children moved out by the consumer
//! outlive their parent's release; a stream hands out every batch, then the end.

mod common;

use std::path::Path;

use arrow::array::{Array, StructArray};
use arrow::ffi::{FFI_ArrowSchema, from_ffi};
use arrow::record_batch::RecordBatch;
use common::host_fetch;
use gpu_parquet::decode::gpu::decode_reference;
use gpu_parquet::decode::host::decode_fetched;
use gpu_parquet::decode::table::{DeviceBatch, DeviceTable};
use gpu_parquet::device_ffi::{ARROW_DEVICE_CPU, FFI_ArrowArray, FFI_ArrowDeviceArray};
use gpu_parquet::{ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};

/// The reference decoder's batch of `row_groups` and arrow-rs's decode of the same chunks.
fn decoded(path: &Path, row_groups: RowGroupSelection) -> (DeviceBatch<Vec<u8>>, RecordBatch) {
    let source = ParquetSource::open(path).expect("open");
    let plan = ReadPlan::build(&source, &Projection::All, &row_groups, PlanOptions::default()).expect("plan");
    let fetched = host_fetch(&source, &plan, 2).buffer;
    let want = decode_fetched(&source, &plan, &fetched, 2)
        .and_then(|t| t.concat())
        .expect("arrow-rs");
    let (batch, _) = decode_reference(&source, &plan, &fetched).expect("reference decoder");
    (batch, want)
}

/// Moves a CPU export into arrow-rs (which then owns and releases it).
fn import_array(array: FFI_ArrowArray, schema: &FFI_ArrowSchema) -> arrow::array::ArrayData {
    let array = std::mem::ManuallyDrop::new(array);
    // SAFETY: our FFI_ArrowArray has arrow-rs's layout (size checked in the crate's tests, both follow
    // the specification); the bytes move to arrow-rs's struct and ours is never dropped, so the array
    // is released once, by arrow-rs; its buffers are host memory (a CPU export).
    let theirs: arrow::ffi::FFI_ArrowArray = unsafe { std::ptr::read(&*array as *const FFI_ArrowArray as *const _) };
    // SAFETY: `theirs` is a valid exported array described by `schema`.
    unsafe { from_ffi(theirs, schema) }.expect("arrow-rs imports the export")
}

fn import_batch(schema: &FFI_ArrowSchema, device: FFI_ArrowDeviceArray) -> RecordBatch {
    assert_eq!(device.device_type, ARROW_DEVICE_CPU);
    assert!(device.sync_event.is_null());
    assert_eq!(device.reserved, [0; 3]);
    let device = std::mem::ManuallyDrop::new(device);
    // SAFETY: the array is moved out of a struct that is never dropped.
    let array = unsafe { std::ptr::read(&device.array) };
    let data = import_array(array, schema);
    data.validate_full().expect("valid arrays");
    RecordBatch::from(StructArray::from(data))
}

fn files() -> Vec<std::path::PathBuf> {
    let d = common::testdata_dir();
    let mut out = vec![
        d.join("flat_plain.parquet"),
        d.join("flat_snappy_dict.parquet"),
        d.join("flat_zstd.parquet"),
        d.join("nested.parquet"),
        d.join("types.parquet"),
    ];
    if let Some(c) = common::corpus() {
        for name in [
            "alltypes_plain.parquet",
            "alltypes_plain.snappy.parquet",
            "nested_lists.snappy.parquet",
            "nullable.impala.parquet",
            "datapage_v2.snappy.parquet",
            "byte_array_decimal.parquet",
            "int96_from_spark.parquet",
        ] {
            out.push(c.join("data").join(name));
        }
    }
    out.into_iter().filter(|p| p.exists()).collect()
}

#[test]
fn an_exported_batch_imports_equal_to_arrow_rs() {
    let files = files();
    assert!(!files.is_empty());
    for path in files {
        let (batch, want) = decoded(&path, RowGroupSelection::All);
        let (schema, device) = batch.into_device_array().expect("export");
        assert_eq!(
            device.array.n_children as usize,
            want.num_columns(),
            "{}",
            path.display()
        );
        let got = import_batch(&schema, device);
        assert_eq!(got.num_rows(), want.num_rows(), "{}", path.display());
        for (i, f) in want.schema().fields().iter().enumerate() {
            assert_eq!(
                got.schema().field(i).data_type(),
                f.data_type(),
                "{}: {}",
                path.display(),
                f.name()
            );
            assert_eq!(
                got.column(i).to_data(),
                want.column(i).to_data(),
                "{}: {}",
                path.display(),
                f.name()
            );
        }
    }
}

#[test]
fn a_child_moved_out_outlives_its_released_parent() {
    let path = common::testdata_dir().join("nested.parquet");
    let (batch, want) = decoded(&path, RowGroupSelection::All);
    let (schema, mut device) = batch.into_device_array().expect("export");
    assert!(device.array.n_children >= 2);
    // Move the last column out, as the specification lets a consumer: copy it, mark the original
    // released.
    let last = device.array.n_children as usize - 1;
    // SAFETY: `children` holds n_children valid pointers to exported arrays; the copy takes
    // ownership and the original is marked released, so it is released once.
    let moved = unsafe {
        let slot = *device.array.children.add(last);
        let copy = std::ptr::read(slot);
        (*slot).release = None;
        copy
    };
    // Release the parent (and the children still in it).
    // SAFETY: `release` is the export's own callback.
    unsafe { (device.array.release.expect("not released"))(&mut device.array) };
    assert!(device.array.is_released());
    let field_schema = FFI_ArrowSchema::try_from(want.schema().field(last)).expect("schema");
    let data = import_array(moved, &field_schema);
    data.validate_full().expect("valid");
    assert_eq!(data, want.column(last).to_data());
    drop(schema);
}

#[test]
fn a_stream_hands_out_every_batch_then_its_end() {
    let path = common::testdata_dir().join("flat_snappy_dict.parquet");
    let source = ParquetSource::open(&path).expect("open");
    let groups = source.metadata().num_row_groups();
    assert!(groups >= 2, "the file has several row groups");
    let mut batches = Vec::new();
    let mut want = Vec::new();
    for g in 0..groups {
        let (b, w) = decoded(&path, RowGroupSelection::Indices(vec![g]));
        batches.push(b);
        want.push(w);
    }
    let table = DeviceTable {
        schema: batches[0].schema.clone(),
        batches,
    };
    let mut stream = table.into_device_stream();
    assert_eq!(stream.device_type, ARROW_DEVICE_CPU);
    let mut schema = FFI_ArrowSchema::empty();
    // SAFETY: the stream's own callbacks, with pointers to live values of the right types; each
    // `out` is written whole by the producer before it is read.
    unsafe {
        assert_eq!((stream.get_schema.expect("get_schema"))(&mut stream, &mut schema), 0);
        for (k, w) in want.iter().enumerate() {
            let mut out = std::mem::MaybeUninit::<FFI_ArrowDeviceArray>::uninit();
            assert_eq!((stream.get_next.expect("get_next"))(&mut stream, out.as_mut_ptr()), 0);
            let got = import_batch(&schema, out.assume_init());
            assert_eq!(got.num_rows(), w.num_rows(), "batch {k}");
            for i in 0..w.num_columns() {
                assert_eq!(got.column(i).to_data(), w.column(i).to_data(), "batch {k} column {i}");
            }
        }
        let mut end = std::mem::MaybeUninit::<FFI_ArrowDeviceArray>::uninit();
        assert_eq!((stream.get_next.expect("get_next"))(&mut stream, end.as_mut_ptr()), 0);
        assert!(end.assume_init().array.is_released(), "the end of the stream");
        assert!((stream.get_last_error.expect("get_last_error"))(&mut stream).is_null());
    }
    drop(stream);
}

/// Every bitmap a batch holds (validity, boolean values, children's too) is a multiple of 64 bytes,
/// zero past its last byte in use: cuDF's import copies validity bitmaps rounded up to 64 bytes (a copy
/// past a device allocation's end fails), and consumers read bitmaps in whole words.
#[test]
fn bitmaps_are_padded_to_64_bytes() {
    use gpu_parquet::decode::table::DeviceArray;
    fn check(a: &DeviceArray<Vec<u8>>, what: &str, seen: &mut usize) {
        let used = a.len.div_ceil(8);
        let mut bitmaps: Vec<(&str, &Vec<u8>)> = a.validity.iter().map(|v| ("validity", v)).collect();
        if a.data_type == arrow::datatypes::DataType::Boolean {
            bitmaps.push(("boolean values", &a.buffers[0]));
        }
        for (name, b) in bitmaps {
            assert_eq!(b.len() % 64, 0, "{what}: {name} of {} bytes", b.len());
            assert!(b.len() >= used, "{what}: {name} shorter than its bits");
            assert!(b[used..].iter().all(|&x| x == 0), "{what}: {name} padding not zeroed");
            *seen += 1;
        }
        for c in &a.children {
            check(c, what, seen);
        }
    }
    let mut seen = 0;
    for path in files() {
        let (batch, _) = decoded(&path, RowGroupSelection::All);
        for c in &batch.columns {
            check(&c.array, &format!("{}: {}", path.display(), c.name), &mut seen);
        }
    }
    // Nullable and boolean columns, decoded by the kernels' references and uploaded from arrow-rs.
    assert!(seen > 10, "{seen} bitmaps checked");
}

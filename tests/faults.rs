//! Faults injected into the disk reads (`gpu_parquet::io::faults`, the `fault-injection` feature):
//! an I/O error at some read, interrupted reads, short reads, an early end of file. A sound retry
//! (EINTR, a short read) gives the same table with the extra reads counted; an error fails the read
//! cleanly, naming the file and the offset, and leaves the reader and the process usable: the next
//! read of the same reader is whole, and no memory is left behind (a counting allocator measures the
//! live heap before and after). On a GPU machine the same faults go through the staged backend.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use arrow::record_batch::RecordBatch;
use gpu_parquet::io::faults::{Fault, FaultPlan, inject};
use gpu_parquet::{BackendKind, Error, Reader};

/// Live heap bytes of this test binary.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded to the system allocator with the caller's layout; the counter is
// only arithmetic on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The tests of this binary run one at a time: the heap measurement needs the process to itself.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// A file of 4 row groups of 3 columns, about 2 MB (about 30 reads in 64 KiB tasks), its inode this
/// test's alone.
fn sample(dir: &Path) -> std::path::PathBuf {
    use arrow::array::{Float64Array, Int64Array, StringArray};
    let n = 100_000i64;
    let batch = RecordBatch::try_from_iter([
        (
            "id",
            std::sync::Arc::new(Int64Array::from_iter_values(0..n)) as arrow::array::ArrayRef,
        ),
        (
            "x",
            std::sync::Arc::new(Float64Array::from_iter_values((0..n).map(|i| i as f64 / 3.0))),
        ),
        (
            "s",
            std::sync::Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("s{}", i % 977)))),
        ),
    ])
    .expect("batch");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(25_000))
        .set_dictionary_enabled(false)
        .build();
    write_parquet(&dir.join("sample.parquet"), &batch, props)
}

fn write_parquet(
    path: &Path,
    batch: &RecordBatch,
    props: parquet::file::properties::WriterProperties,
) -> std::path::PathBuf {
    let file = std::fs::File::create(path).expect("create");
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
    w.write(batch).expect("write");
    w.close().expect("close");
    path.to_path_buf()
}

fn reader(path: &Path, backend: BackendKind) -> Reader {
    let mut settings = gpu_parquet::Settings::from_env(&[]).expect("settings");
    settings.policy.task_size = 64 << 10;
    settings.policy.threads = 2;
    Reader::builder(path)
        .with_backend(backend)
        .with_settings(&settings)
        .build()
        .expect("reader")
}

/// Reads through `reader` under `plan`: the table (or error), the reads made, the faults injected.
fn read_under(reader: &Reader, path: &Path, plan: FaultPlan) -> (Result<RecordBatch, Error>, u64, u64) {
    let guard = inject(path, plan).expect("arm");
    let result = reader.read().and_then(|chunks| {
        let reads = chunks.log().tasks.iter().map(|t| t.reads).sum::<u64>();
        chunks.decode()?.concat().map(|t| (t, reads))
    });
    let injected = guard.injected();
    match result {
        Ok((t, reads)) => (Ok(t), reads, injected),
        Err(e) => (Err(e), 0, injected),
    }
}

fn every(fault: Fault) -> FaultPlan {
    FaultPlan {
        fault,
        after: 0,
        times: u64::MAX,
    }
}

fn sound_retries_give_the_same_table(backend: BackendKind) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = sample(dir.path());
    let want = common::arrow_rs_read(&path).expect("arrow-rs");
    let reader = reader(&path, backend);
    let clean_reads: u64 = reader.read().expect("clean").log().tasks.iter().map(|t| t.reads).sum();
    for (what, plan) in [
        ("every read short (4097 bytes)", every(Fault::Short(4097))),
        (
            "every other read interrupted",
            FaultPlan {
                fault: Fault::Interrupted,
                after: 1,
                times: 1000,
            },
        ),
    ] {
        let (got, reads, injected) = read_under(&reader, &path, plan);
        let got = got.unwrap_or_else(|e| panic!("{backend:?}, {what}: {e}"));
        assert_eq!(got, want, "{backend:?}, {what}");
        assert!(injected > 0, "{backend:?}, {what}: no fault struck");
        assert!(
            reads >= clean_reads + injected.min(1),
            "{backend:?}, {what}: {reads} reads counted, {clean_reads} without faults, {injected} faults"
        );
    }
}

fn errors_fail_cleanly_and_the_reader_recovers(backend: BackendKind) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = sample(dir.path());
    let want = common::arrow_rs_read(&path).expect("arrow-rs");
    let reader = reader(&path, backend);
    for (what, fault) in [("EIO", Fault::Eio), ("early end of file", Fault::Eof)] {
        for after in [0, 3, 7] {
            let plan = FaultPlan { fault, after, times: 1 };
            let (got, _, injected) = read_under(&reader, &path, plan);
            assert_eq!(injected, 1, "{backend:?}, {what} after {after}");
            let e = got.expect_err("a failed read must fail");
            let msg = e.to_string();
            assert!(msg.contains(&path.display().to_string()), "{backend:?}, {what}: {msg}");
            assert!(
                msg.contains("offset"),
                "{backend:?}, {what}: the error names no offset: {msg}"
            );
            match (fault, &e) {
                (Fault::Eio, Error::Io { source, .. }) => assert_eq!(source.raw_os_error(), Some(libc::EIO)),
                (Fault::Eof, Error::ShortRead { .. }) => {}
                _ => panic!("{backend:?}, {what}: unexpected error {e:?}"),
            }
            // The same reader, no fault armed: the whole table.
            let again = reader.read_batches().and_then(|t| t.concat());
            assert_eq!(again.expect("the next read"), want, "{backend:?}, after {what}");
        }
    }
}

/// After a warm-up, 20 failing reads and 20 retried ones leave the live heap where it was, within
/// 512 KiB: rayon's work-stealing deques free their memory lazily (crossbeam's epoch collector), which
/// was measured to level off at about 250 KiB over hundreds of decodes; a leaked read buffer (2 MB
/// here) or decoded table would exceed it.
fn no_memory_left_behind(backend: BackendKind) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = sample(dir.path());
    let reader = reader(&path, backend);
    let eio = FaultPlan {
        fault: Fault::Eio,
        after: 5,
        times: 1,
    };
    // Warm-up: pools, thread-locals and lazily built state reach their size.
    for _ in 0..3 {
        let _ = read_under(&reader, &path, eio);
        let _ = read_under(&reader, &path, every(Fault::Short(10_000)));
    }
    let before = LIVE.load(Ordering::SeqCst);
    for _ in 0..20 {
        assert!(read_under(&reader, &path, eio).0.is_err());
        assert!(read_under(&reader, &path, every(Fault::Short(10_000))).0.is_ok());
    }
    let after = LIVE.load(Ordering::SeqCst);
    println!("{backend:?}: live heap {before} bytes before, {after} after 40 faulted reads");
    assert!(
        after - before < 512 << 10,
        "{backend:?}: the live heap grew by {} bytes over 40 faulted reads",
        after - before
    );
}

#[test]
fn host_backend_retries_what_is_sound() {
    let _one = serial();
    sound_retries_give_the_same_table(BackendKind::Host);
}

#[test]
fn host_backend_fails_cleanly_and_recovers() {
    let _one = serial();
    errors_fail_cleanly_and_the_reader_recovers(BackendKind::Host);
}

#[test]
fn host_backend_leaves_no_memory_behind() {
    let _one = serial();
    no_memory_left_behind(BackendKind::Host);
}

/// The staged backend (pinned bounce buffers, device memory) under the same faults, where there is
/// a GPU.
#[test]
fn staged_backend_under_faults() {
    let _one = serial();
    if let Err(why) = gpu_parquet::gpu::cuda_present() {
        common::skip(&format!("no CUDA driver ({why})"));
        return;
    }
    sound_retries_give_the_same_table(BackendKind::Staged);
    errors_fail_cleanly_and_the_reader_recovers(BackendKind::Staged);
    no_memory_left_behind(BackendKind::Staged);
}

/// Snappy-compressed, so the GPU decode goes through nvCOMP (where it is installed).
fn snappy_sample(dir: &Path) -> std::path::PathBuf {
    use arrow::array::{Int64Array, StringArray};
    let n = 60_000i64;
    let batch = RecordBatch::try_from_iter([
        (
            "id",
            std::sync::Arc::new(Int64Array::from_iter_values(0..n)) as arrow::array::ArrayRef,
        ),
        (
            "s",
            std::sync::Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("v{}", i % 311)))),
        ),
    ])
    .expect("batch");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(20_000))
        .set_compression(parquet::basic::Compression::SNAPPY)
        .build();
    write_parquet(&dir.join("snappy.parquet"), &batch, props)
}

/// A file made by `make` in a temporary folder, arrow-rs's table of it and a GPU reader; `None` (the
/// reason printed) without a GPU decoder.
fn gpu_case(make: fn(&Path) -> std::path::PathBuf) -> Option<(tempfile::TempDir, RecordBatch, Reader)> {
    if !common::gpu_decoder_available() {
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = make(dir.path());
    let want = common::arrow_rs_read(&path).expect("arrow-rs");
    // The decoder finds nvCOMP and the kernel cache where the environment says (GPU_PARQUET_NVCOMP,
    // PYTHONPATH), as the CLI's does; without it nvCOMP is looked for only in the default places.
    let options = gpu_parquet::Settings::from_env(&[])
        .expect("settings")
        .decoder_options();
    let reader = Reader::builder(&path)
        .with_backend(BackendKind::Auto)
        .with_decoder_options(options)
        .build()
        .expect("reader");
    Some((dir, want, reader))
}

/// Device memory running out at the first, sixth and thirteenth allocation of a GPU read: a clear
/// error, then the same reader decodes the whole table, and device memory in use is where it was.
#[test]
fn device_out_of_memory_mid_read_fails_cleanly() {
    let _one = serial();
    let Some((_dir, want, reader)) = gpu_case(sample) else {
        return;
    };
    let ctx = gpu_parquet::gpu::GpuContext::new(0).expect("GPU 0");
    // Warm-up: kernels loaded, pools grown.
    assert_eq!(reader.read_device().expect("read").table.to_host().expect("host"), want);
    let (free_before, _) = ctx.memory().expect("memory");
    for after in [0, 5, 12] {
        let guard = gpu_parquet::gpu::faults::fail_allocations(after, 1);
        let e = reader.read_device().expect_err("an allocation failed");
        drop(guard);
        assert!(e.to_string().contains("out of device memory"), "after {after}: {e}");
        assert_eq!(decode_on_the_gpu(&reader), want, "after {after}");
    }
    let (free_after, _) = ctx.memory().expect("memory");
    println!("device memory free: {free_before} before, {free_after} after three failed reads");
    assert_memory_back(free_before, free_after);
}

/// A GPU decode's table, copied to the host.
fn decode_on_the_gpu(reader: &Reader) -> RecordBatch {
    reader
        .read_device()
        .expect("the next read")
        .table
        .to_host()
        .expect("host")
}

/// Free device memory within 64 MiB of where it was (the pools keep what they grew).
fn assert_memory_back(free_before: u64, free_after: u64) {
    assert!(
        free_before.abs_diff(free_after) < 64 << 20,
        "device memory {free_before} -> {free_after}"
    );
}

/// nvCOMP reporting an error for some pages: those pages are decompressed on the host instead, the
/// table is whole and the report says so.
#[test]
fn nvcomp_error_statuses_fall_back_to_the_host() {
    let _one = serial();
    let Some((_dir, want, reader)) = gpu_case(snappy_sample) else {
        return;
    };
    let clean = reader.read_device().expect("read");
    if !clean
        .decode
        .columns
        .iter()
        .any(|c| c.decompressed_on.starts_with("gpu (") && c.decompressed_on.contains("nvCOMP"))
    {
        common::skip("nvCOMP is not installed: nothing to fail (set GPU_PARQUET_NVCOMP)");
        return;
    }
    let guard = gpu_parquet::gpu::faults::fail_nvcomp_items(3);
    let read = reader.read_device().expect("a read with three failed pages");
    drop(guard);
    assert_eq!(read.table.to_host().expect("host"), want);
    let said: Vec<&str> = read.decode.columns.iter().map(|c| c.decompressed_on.as_str()).collect();
    assert!(
        said.iter().any(|s| s.contains("retried")),
        "the report names the retry: {said:?}"
    );
}

/// A GPU decode read in steps by the staged backend's workers going on from one step to the next
/// (64 KiB bounce buffers, 3 workers, so neighbouring steps' pieces are in flight together): a read
/// failing (EIO, early end of file) at the first, fifth or twentieth read ends in a clear error that
/// names the file, then the same reader decodes the whole table, and device memory in use is where
/// it was. Its reads alone, stepped either way, move the same bytes in the same steps.
#[test]
fn read_errors_in_a_stepped_gpu_read_fail_cleanly() {
    let _one = serial();
    if !common::gpu_decoder_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = sample(dir.path());
    let want = common::arrow_rs_read(&path).expect("arrow-rs");
    let mut settings = gpu_parquet::Settings::from_env(&[]).expect("settings");
    settings.policy.bounce_buffer_size = 64 << 10;
    settings.policy.threads = 3;
    let reader = Reader::builder(&path)
        .with_backend(BackendKind::Staged)
        .with_settings(&settings)
        .with_memory_limit(24 << 20)
        .build()
        .expect("reader");
    let ctx = gpu_parquet::gpu::GpuContext::new(0).expect("GPU 0");
    let first = reader.read_device().expect("read");
    let steps = first.decode.steps.len();
    assert!(
        steps >= 2,
        "{steps} step(s): the budget should cut the read into several"
    );
    assert_eq!(first.table.to_host().expect("host"), want);
    drop(first);
    let (stepped, per_call) = (
        gpu_parquet::bench::read_steps_alone(&reader, false).expect("stepped reads"),
        gpu_parquet::bench::read_steps_alone(&reader, true).expect("a fetch per step"),
    );
    let bytes = |log: &gpu_parquet::io::IoLog| log.tasks.iter().map(|t| t.bytes).sum::<u64>();
    assert_eq!(stepped.0, steps);
    assert_eq!(per_call.0, steps);
    assert_eq!(bytes(&stepped.1), bytes(&per_call.1));
    assert!(bytes(&stepped.1) >= reader.plan().useful_bytes());
    let (free_before, _) = ctx.memory().expect("memory");
    for (what, fault) in [("EIO", Fault::Eio), ("early end of file", Fault::Eof)] {
        for after in [0, 4, 19] {
            let guard = inject(&path, FaultPlan { fault, after, times: 1 }).expect("arm");
            let got = reader.read_device();
            assert_eq!(guard.injected(), 1, "{what} after {after}");
            drop(guard);
            let e = got.expect_err("a failed read must fail the decode");
            let msg = e.to_string();
            assert!(msg.contains(&path.display().to_string()), "{what} after {after}: {msg}");
            assert!(
                msg.contains("offset"),
                "{what} after {after}: the error names no offset: {msg}"
            );
            assert_eq!(decode_on_the_gpu(&reader), want, "after {what} at read {after}");
        }
    }
    let (free_after, _) = ctx.memory().expect("memory");
    println!("{steps} steps; device memory free: {free_before} before, {free_after} after six failed reads");
    assert_memory_back(free_before, free_after);
}

//! The GPU decoder on a GPU: every file of the corpus and of `testdata/` (and files written here with
//! every codec and encoding arrow-rs writes) decoded on the GPU must equal arrow-rs's decode of the
//! same bytes and the host references' (`decode_reference`), value for value; bad and corrupted files
//! must give an error, never a crash or a hang.
//!
//! On a machine without a CUDA driver (or without NVRTC) every test prints "skipped: <reason>" and
//! returns. Run from the crate root, `--test-threads=1`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, BooleanArray, Float32Array, Int32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use common::{corpus, files_under, host_fetch};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use gpu_parquet::decode::gpu::{DecoderOptions, decode_reference};
use gpu_parquet::decode::host::decode_fetched;
use gpu_parquet::decode::layout::LAYOUT_SIZES;
use gpu_parquet::decode::table::DecodedWhere;
use gpu_parquet::gpu::nvrtc::{KernelModule, nvrtc_present};
use gpu_parquet::gpu::{DeviceBuffer, GpuContext, Stream};
use gpu_parquet::{BackendKind, ParquetSource, PlanOptions, Projection, ReadPlan, Reader, RowGroupSelection, Settings};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, GzipLevel, ZstdLevel};
use parquet::file::properties::{WriterProperties, WriterVersion};

fn gpu() -> Option<Arc<GpuContext>> {
    if let Err(why) = nvrtc_present() {
        common::skip(&why);
        return None;
    }
    if let Err(why) = gpu_parquet::gpu::cuda_present() {
        common::skip(&format!("no CUDA driver ({why})"));
        return None;
    }
    // With a driver present, a context that cannot be had (a poisoned one, say) is a failure, not a skip.
    Some(GpuContext::new(0).unwrap_or_else(|e| panic!("GPU 0: {e}")))
}

fn options() -> DecoderOptions {
    Settings::from_env(&[]).expect("settings").decoder_options()
}

/// GPU decode of the whole file, its host copy.
fn gpu_read(path: &Path, limit: Option<u64>) -> gpu_parquet::Result<(RecordBatch, usize, usize)> {
    let mut b = Reader::builder(path)
        .with_backend(BackendKind::Auto)
        .with_decoder_options(options());
    if let Some(l) = limit {
        b = b.with_memory_limit(l);
    }
    let read = b.build()?.read_device()?;
    let gpu_cols = read
        .table
        .batches
        .iter()
        .flat_map(|b| &b.columns)
        .filter(|c| c.decoded == DecodedWhere::Gpu)
        .count();
    let all = read.table.batches.iter().map(|b| b.columns.len()).sum::<usize>();
    Ok((read.table.to_host()?, gpu_cols, all - gpu_cols))
}

/// arrow-rs's decode of the same chunks (and the host references'), or the error.
fn host_reads(path: &Path) -> Result<(RecordBatch, Option<RecordBatch>), String> {
    let source = ParquetSource::open(path).map_err(|e| e.to_string())?;
    let plan = ReadPlan::build(
        &source,
        &Projection::All,
        &RowGroupSelection::All,
        PlanOptions::default(),
    )
    .map_err(|e| e.to_string())?;
    let fetched = host_fetch(&source, &plan, 2).buffer;
    let want = decode_fetched(&source, &plan, &fetched, 2)
        .and_then(|t| t.concat())
        .map_err(|e| e.to_string())?;
    let reference = decode_reference(&source, &plan, &fetched)
        .and_then(|(b, _)| b.to_host())
        .ok();
    Ok((want, reference))
}

fn assert_same(name: &str, want: &RecordBatch, got: &RecordBatch, who: &str) {
    assert_eq!(want.schema(), got.schema(), "{name}: {who} schema");
    assert_eq!(want.num_rows(), got.num_rows(), "{name}: {who} rows");
    for (i, f) in want.schema().fields().iter().enumerate() {
        assert_eq!(
            want.column(i).to_data(),
            got.column(i).to_data(),
            "{name}: {who} column {}",
            f.name()
        );
    }
}

#[test]
fn layout_sizes_agree_on_the_device() {
    let Some(ctx) = gpu() else { return };
    let m = KernelModule::load(&ctx, &gpu_parquet::decode::kernels::source(), "layout_check", None).expect("kernels");
    let f = m.function("gp_layout_sizes").expect("kernel");
    let stream = Stream::new(&ctx).expect("stream");
    let out = DeviceBuffer::<u32>::zeroed(&stream, LAYOUT_SIZES.len()).expect("alloc");
    let addr = out.device_address();
    let mut b = stream.cuda().launch_builder(&f);
    b.arg(&addr);
    // SAFETY: the kernel writes LAYOUT_SIZES.len() u32s into `out`, which holds exactly that many and
    // outlives the launch (copy_to_host below waits for it).
    unsafe { b.launch(one_dimension(1, 32)) }.expect("launch");
    let sizes = out.copy_to_host().expect("copy");
    for ((name, want), got) in LAYOUT_SIZES.iter().zip(sizes) {
        assert_eq!(*want as u32, got, "{name}: host and device disagree on the struct size");
    }
}

/// Uploads `items`, launches `f(items, n)` on a grid of `grid` blocks of `block` threads, and returns
/// the items as the kernel left them.
///
/// # Safety
/// Every address in `items` must be memory the kernel may read (and, for outputs, write) for the sizes
/// the item gives, alive until this returns; `block` must be a size the kernel runs with.
unsafe fn run_on_grid<T: bytemuck::Pod>(
    stream: &Stream,
    f: &cudarc::driver::CudaFunction,
    items: &[T],
    grid: u32,
    block: u32,
) -> Vec<T> {
    let dev = DeviceBuffer::from_host(stream, bytemuck::cast_slice::<_, u8>(items)).expect("items");
    let (addr, n) = (dev.device_address(), items.len() as u32);
    let mut b = stream.cuda().launch_builder(f);
    b.arg(&addr).arg(&n);
    // SAFETY: `n` items were uploaded at `addr`, alive until the copy below has waited for the launch;
    // what they point at is the caller's promise.
    unsafe { b.launch(one_dimension(grid, block)) }.expect("launch");
    bytemuck::pod_collect_to_vec(&dev.copy_to_host().expect("copy"))
}

/// Launches `gp_validate_compressed` over `items` as the host does, with `geometry`'s segments: the
/// items as the kernel left them, the segments, their join words, and the launch's wall time (upload
/// to finish).
fn run_validate(
    stream: &Stream,
    f: &cudarc::driver::CudaFunction,
    mut items: Vec<gpu_parquet::decode::layout::ValidateItem>,
    geometry: gpu_parquet::decode::layout::validate_segments::Geometry,
) -> (
    Vec<gpu_parquet::decode::layout::ValidateItem>,
    Vec<gpu_parquet::decode::layout::validate_segments::ValidateSegment>,
    Vec<u32>,
    Duration,
) {
    use gpu_parquet::decode::layout::VALIDATE_WARPS;
    use gpu_parquet::decode::layout::validate_segments::{self, SegmentOut};
    let segs = validate_segments::plan(&mut items, geometry);
    let dev_items = DeviceBuffer::from_host(stream, bytemuck::cast_slice::<_, u8>(&items)).expect("items");
    let dev_segs = DeviceBuffer::from_host(stream, bytemuck::cast_slice::<_, u8>(&segs)).expect("segments");
    let dev_outs = DeviceBuffer::<u8>::zeroed(stream, (segs.len() * size_of::<SegmentOut>()).max(1)).expect("outs");
    let dev_joins = DeviceBuffer::<u32>::zeroed(stream, segs.len().max(1)).expect("joins");
    stream.synchronize().expect("sync");
    let (n, nsegs) = (items.len() as u32, segs.len() as u32);
    let addrs = [
        dev_items.device_address(),
        dev_segs.device_address(),
        dev_outs.device_address(),
        dev_joins.device_address(),
    ];
    let started = Instant::now();
    let mut b = stream.cuda().launch_builder(f);
    b.arg(&addrs[0])
        .arg(&n)
        .arg(&addrs[1])
        .arg(&nsegs)
        .arg(&addrs[2])
        .arg(&addrs[3]);
    b.arg(&geometry.seg_bytes).arg(&geometry.overlap);
    let grid = validate_segments::launch_warps(items.len(), segs.len()).div_ceil(VALIDATE_WARPS);
    // SAFETY: the kernel reads each item's `src_len` bytes at its `src` (the caller's allocations,
    // alive while this runs) and the `nsegs` segments; it writes the items' statuses, `nsegs` outs and
    // `nsegs` join words, all alive until the synchronisation below.
    unsafe { b.launch(one_dimension(grid, 32 * VALIDATE_WARPS)) }.expect("launch");
    stream.synchronize().expect("sync");
    let took = started.elapsed();
    let back = bytemuck::pod_collect_to_vec(&dev_items.copy_to_host().expect("copy"));
    let joins = dev_joins.copy_to_host().expect("copy");
    (back, segs, joins, took)
}

/// Not a test: the pre-check over a file's Snappy bodies (`GP_PROBE_FILE`, `GP_PROBE_GROUPS` row
/// groups from the first, default 60: about a lineitem SF10 step) in one launch, whole walks against
/// segments a lane each: each launch's best wall of 5, and how the segmented bodies were joined.
#[test]
#[ignore]
fn precheck_segments_on_a_file() {
    use gpu_parquet::decode::host_kernels::validate::cases::{file_bodies, probe_file};
    use gpu_parquet::decode::layout::ValidateItem;
    use gpu_parquet::decode::layout::validate_segments::{Geometry, JOINED, PRODUCTION, REPAIRS, WALKED_WHOLE};
    let Some(ctx) = gpu() else { return };
    let Some(path) = probe_file() else { return };
    let groups: usize = std::env::var("GP_PROBE_GROUPS").map_or(60, |g| g.parse().expect("a count"));
    let m = KernelModule::load(&ctx, &gpu_parquet::decode::kernels::source(), "validate_probe", None).expect("kernels");
    let f = m.function("gp_validate_compressed").expect("kernel");
    let stream = Stream::new(&ctx).expect("stream");
    let bodies = file_bodies(&path, |g| g < groups);
    let bufs: Vec<DeviceBuffer<u8>> = bodies
        .iter()
        .map(|(_, b)| DeviceBuffer::from_host(&stream, if b.is_empty() { &[0u8][..] } else { b }).expect("upload"))
        .collect();
    let items: Vec<ValidateItem> = bodies
        .iter()
        .zip(&bufs)
        .map(|((want, body), buf)| ValidateItem {
            src: buf.device_address(),
            src_len: body.len() as u64,
            dst_len: *want,
            codec: 1, // validate_codec::SNAPPY
            status: u32::MAX,
        })
        .collect();
    let bytes: usize = bodies.iter().map(|(_, b)| b.len()).sum();
    println!("{} bodies, {bytes} bytes, {groups} row groups of {path}", bodies.len());
    let whole = Geometry {
        min_src: u64::MAX,
        ..PRODUCTION
    };
    let lanes2k = Geometry {
        seg_bytes: 2 << 10,
        ..PRODUCTION
    };
    let lanes8k = Geometry {
        seg_bytes: 8 << 10,
        ..PRODUCTION
    };
    for (name, g) in [
        ("whole", whole),
        ("lanes 4k (production)", PRODUCTION),
        ("lanes 2k", lanes2k),
        ("lanes 8k", lanes8k),
        (
            "lanes 4k from 16k",
            Geometry {
                min_src: 16 << 10,
                ..PRODUCTION
            },
        ),
    ] {
        let mut best = Duration::MAX;
        let mut last = None;
        for _ in 0..5 {
            let (back, segs, joins, took) = run_validate(&stream, &f, items.clone(), g);
            best = best.min(took);
            last = Some((back, segs, joins));
        }
        let (back, segs, joins) = last.expect("a launch");
        let failed = back.iter().filter(|i| i.status != 0).count();
        let heads: Vec<u32> = segs
            .iter()
            .filter(|s| s.index == 0)
            .map(|s| joins[s.first as usize])
            .collect();
        println!(
            "{name}: best {:.3} ms; {failed} failed; {} segments in {} bodies: {} joined, {} walked whole, {} repairs",
            best.as_secs_f64() * 1e3,
            segs.len(),
            heads.len(),
            heads.iter().filter(|&&j| j & JOINED != 0).count(),
            heads.iter().filter(|&&j| j & WALKED_WHOLE != 0).count(),
            heads.iter().map(|&j| j & REPAIRS).sum::<u32>()
        );
    }
    drop(bufs);
}

/// `gp_validate_compressed` (Snappy walked by the whole warp, long bodies in segments) gives the host
/// reference's status on valid, cut, flipped, padded and random bodies and on long ones like
/// lineitem's, each in an allocation of its own (so a read past a body is an error under
/// compute-sanitizer), with the GPU's segments and with small ones (many segments, repairs and whole
/// walks); a valid long body passes by its segments alone.
#[test]
fn compressed_page_check_equals_the_reference_on_the_device() {
    use gpu_parquet::decode::host_kernels::validate::cases::{SMALL_SEGMENTS, expected, kernel_cases, long_cases};
    use gpu_parquet::decode::layout::ValidateItem;
    use gpu_parquet::decode::layout::validate_segments::{Geometry, JOINED, PRODUCTION, REPAIRS, WALKED_WHOLE};
    let Some(ctx) = gpu() else { return };
    let m = KernelModule::load(&ctx, &gpu_parquet::decode::kernels::source(), "validate_check", None).expect("kernels");
    let f = m.function("gp_validate_compressed").expect("kernel");
    let stream = Stream::new(&ctx).expect("stream");
    let mut cases = kernel_cases();
    let long_from = cases.len();
    cases.extend(long_cases());
    let bodies: Vec<DeviceBuffer<u8>> = cases
        .iter()
        .map(|(_, _, b)| {
            if b.is_empty() {
                DeviceBuffer::<u8>::zeroed(&stream, 1).expect("alloc")
            } else {
                DeviceBuffer::from_host(&stream, b).expect("upload")
            }
        })
        .collect();
    let want = expected(&cases);
    // The GPU's segments, cut from 16 kB up: the long cases are shorter than its lower bound.
    let gpu_segments = Geometry {
        min_src: 16 << 10,
        ..PRODUCTION
    };
    for geometry in [gpu_segments, SMALL_SEGMENTS] {
        let items: Vec<ValidateItem> = cases
            .iter()
            .zip(&bodies)
            .map(|((codec, want, body), buf)| ValidateItem {
                src: buf.device_address(),
                src_len: body.len() as u64,
                dst_len: *want,
                codec: *codec,
                status: u32::MAX,
            })
            .collect();
        let (back, segs, joins, _) = run_validate(&stream, &f, items, geometry);
        let nsegs = segs.len();
        for (i, (got, want)) in back.iter().zip(&want).enumerate() {
            let (codec, declared, body) = &cases[i];
            assert_eq!(
                got.status,
                *want,
                "case {i}: codec {codec}, {} bytes declaring {declared}, {geometry:?}",
                body.len()
            );
        }
        let mut repairs = 0;
        for s in segs.iter().filter(|s| s.index == 0) {
            let join = joins[s.first as usize];
            assert_ne!(join & JOINED, 0, "case {}: not joined, {geometry:?}", s.item);
            repairs += join & REPAIRS;
            if s.item as usize >= long_from && want[s.item as usize] == 0 {
                assert_eq!(
                    join & WALKED_WHOLE,
                    0,
                    "case {}: a valid long body walked whole",
                    s.item
                );
            }
        }
        assert!(
            segs.iter().any(|s| s.item as usize >= long_from),
            "long bodies in segments"
        );
        println!(
            "{} bodies, {nsegs} segments, {repairs} repaired ({geometry:?})",
            cases.len()
        );
    }
    drop(bodies);
}

/// `gp_unsnap` gives the host reference's status on valid, cut and flipped bodies (Parquet-like pages of
/// 1 MiB among them), and where it passes exactly the `snap` crate's bytes; each body and each output
/// in an allocation of its own, the output exactly the declared size (so a read or write past either
/// is an error under compute-sanitizer).
#[test]
fn snappy_decoder_equals_the_reference_on_the_device() {
    use gpu_parquet::decode::host_kernels::unsnap::{kernel_cases, unsnap_one};
    use gpu_parquet::decode::layout::UnsnapItem;
    // A block of 128 threads per body.
    let plan = |items: &mut [UnsnapItem]| (items.len() as u32, 128);
    let passed = body_decoder_equals_the_reference("gp_unsnap", plan, &kernel_cases(1 << 20), unsnap_one, false);
    assert!(passed > 50, "{passed} passed");
}

/// `gp_unzstd` takes every body libzstd wrote without a checksum (pages of several blocks among them),
/// and where it takes any body (cut, flipped, declaring another size) its output is exactly libzstd's;
/// each body and output in an allocation of its own, as for `gp_unsnap`.
#[test]
fn zstd_decoder_equals_libzstd_on_the_device() {
    use gpu_parquet::decode::host_kernels::unzstd::{assert_takes_as_libzstd, kernel_cases, must_take};
    use gpu_parquet::decode::layout::UnsnapItem;
    let cases = kernel_cases(1 << 20);
    // A warp per body.
    let plan = |items: &mut [UnsnapItem]| (items.len() as u32, 32);
    let Some(results) = run_body_decoder("gp_unzstd", plan, &cases) else {
        return;
    };
    let taken = assert_takes_as_libzstd(&cases, results, must_take());
    assert!(
        taken >= must_take() && taken < cases.len(),
        "{taken} of {} taken",
        cases.len()
    );
}

/// `gp_unzstd_blocks` on the device: over `gp_unzstd`'s cases (bodies up to 1 MiB, several blocks
/// each) and faulted bodies of 1 MiB, the same status as `gp_unzstd` for every body, and where it
/// takes one, libzstd's bytes; told not to decode whole what its blocks' decode does not take, that
/// decode takes every one-frame body of 256 KiB or more that `gp_unzstd` takes. Each body, output and scratch in an allocation of its own, of exactly its size.
#[test]
fn zstd_blocks_decoder_equals_gp_unzstd_on_the_device() {
    use gpu_parquet::decode::host_kernels::unzstd::{assert_takes_as_libzstd, kernel_cases, must_take, shaped_data};
    use gpu_parquet::decode::layout::{UnsnapItem, zstd_blocks};
    let mut cases = kernel_cases(1 << 20);
    let mut seed = 0x5bd1_e995u64;
    for shape in 0..6u32 {
        let data = shaped_data(shape, 1 << 20, 17 + u64::from(shape));
        let body = zstd::bulk::compress(&data, 1 + shape as i32 % 3).expect("compress");
        cases.push((data.len() as u64, body.clone()));
        for _ in 0..40 {
            let mut bad = body.clone();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed % bad.len() as u64) as usize;
            bad[at] ^= 1 << ((seed >> 40) % 8);
            cases.push((data.len() as u64, bad));
        }
    }
    let plan = |items: &mut [UnsnapItem]| (items.len() as u32, 32);
    let Some(whole) = run_body_decoder("gp_unzstd", plan, &cases) else {
        return;
    };
    let ctx = gpu().expect("a GPU, as above");
    let m = KernelModule::load(&ctx, &gpu_parquet::decode::kernels::source(), "zstd_blocks", None).expect("kernels");
    let f = m.function("gp_unzstd_blocks").expect("kernel");
    let stream = Stream::new(&ctx).expect("stream");
    let alloc = |len: usize| DeviceBuffer::<u8>::zeroed(&stream, len.max(1)).expect("alloc");
    let bodies = upload_bodies(&stream, &cases);
    let mut runs = Vec::new();
    for decode_whole in [1u32, 0] {
        let outs: Vec<DeviceBuffer<u8>> = cases.iter().map(|(want, _)| alloc(*want as usize)).collect();
        let scratch: Vec<DeviceBuffer<u8>> = cases
            .iter()
            .map(|(want, _)| alloc(zstd_blocks::scratch_bytes(*want) as usize))
            .collect();
        let items: Vec<UnsnapItem> = body_places(&cases, &bodies, &outs).map(unsnap_item).collect();
        let places: Vec<u64> = scratch.iter().map(|b| b.device_address()).collect();
        let dev = DeviceBuffer::from_host(&stream, bytemuck::cast_slice::<_, u8>(&items)).expect("items");
        let places_dev = DeviceBuffer::from_host(&stream, bytemuck::cast_slice::<_, u8>(&places)).expect("places");
        let (addr, n, places_addr) = (dev.device_address(), items.len() as u32, places_dev.device_address());
        let mut b = stream.cuda().launch_builder(&f);
        b.arg(&addr).arg(&n).arg(&places_addr).arg(&decode_whole);
        // SAFETY: `n` items at `addr`, each naming its body and output (allocations of their sizes),
        // and `n` scratch addresses at `places_addr`, each of `zstd_blocks::scratch_bytes` of its
        // body's output; all alive until the copies below have waited for the launch. A warp a body.
        unsafe { b.launch(one_dimension(n, 32)) }.expect("launch");
        let back: Vec<UnsnapItem> = bytemuck::pod_collect_to_vec(&dev.copy_to_host().expect("copy"));
        let results: Vec<(u32, Vec<u8>)> = back
            .iter()
            .zip(&outs)
            .map(|(got, out)| (got.status, out.copy_to_host().expect("copy")))
            .collect();
        runs.push(results);
    }
    let planned = runs.pop().expect("two runs");
    let blocks = runs.pop().expect("two runs");
    for (i, (a, b)) in whole.iter().zip(&blocks).enumerate() {
        assert_eq!(a.0, b.0, "case {i}: gp_unzstd's status, then gp_unzstd_blocks'");
    }
    let taken = assert_takes_as_libzstd(&cases, blocks, must_take());
    let mut by_blocks = 0;
    for (i, (((want, body), (status, _)), w)) in cases.iter().zip(&planned).zip(&whole).enumerate() {
        let several =
            zstd::zstd_safe::get_frame_content_size(body).is_ok_and(|s| s.is_some()) && *want >= 1 << 18 && w.0 == 0;
        by_blocks += usize::from(*status == 0);
        assert!(
            !several || *status == 0,
            "case {i}: {} bytes left by the blocks' decode: {status}",
            body.len()
        );
    }
    let planned_taken = assert_takes_as_libzstd(&cases, planned, 0);
    eprintln!(
        "gp_unzstd_blocks took {taken} of {} bodies; its blocks' decode alone {planned_taken} ({by_blocks})",
        cases.len()
    );
}

/// `gp_snappy_literals` gives the host reference's status on stored streams (a 1 MiB one among them,
/// and literals of every length encoding), streams with matches or too many literals, and cut and
/// flipped ones; where it takes a body, exactly its literals' bytes, and where it refuses one, no byte
/// written. Each body and output in an allocation of its own, as for `gp_unsnap`.
#[test]
fn literal_copier_equals_the_reference_on_the_device() {
    use gpu_parquet::decode::host_kernels::unsnap::{kernel_cases, literal_cases, literals_one};
    use gpu_parquet::decode::layout::{UnsnapItem, snappy_literals};
    let mut cases = literal_cases(1 << 20);
    cases.extend(kernel_cases(1 << 18));
    let plan = |items: &mut [UnsnapItem]| (snappy_literals::plan(items).expect("a grid"), snappy_literals::THREADS);
    let taken = body_decoder_equals_the_reference("gp_snappy_literals", plan, &cases, literals_one, true);
    assert!(taken >= 14, "{taken} taken");
}

/// A launch of `grid` blocks of `block` threads, no dynamic shared memory.
fn one_dimension(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A body decoder's item over a place of [`body_places`], its status not yet written.
fn unsnap_item((src, src_len, dst, dst_len): (u64, u64, u64, u64)) -> gpu_parquet::decode::layout::UnsnapItem {
    gpu_parquet::decode::layout::UnsnapItem {
        src,
        src_len,
        dst,
        dst_len,
        status: u32::MAX,
        block0: 0,
    }
}

/// Each case's body in an allocation of its own (of one zeroed byte for an empty body).
fn upload_bodies(stream: &Stream, cases: &[(u64, Vec<u8>)]) -> Vec<DeviceBuffer<u8>> {
    cases
        .iter()
        .map(|(_, b)| {
            if b.is_empty() {
                DeviceBuffer::<u8>::zeroed(stream, 1).expect("alloc")
            } else {
                DeviceBuffer::from_host(stream, b).expect("upload")
            }
        })
        .collect()
}

/// Each case's body and output as a kernel item sees them: `(src, src_len, dst, dst_len)`, the body's
/// length being that of the case (its buffer holds at least one byte).
fn body_places<'a>(
    cases: &'a [(u64, Vec<u8>)],
    bodies: &'a [DeviceBuffer<u8>],
    outs: &'a [DeviceBuffer<u8>],
) -> impl Iterator<Item = (u64, u64, u64, u64)> + 'a {
    cases
        .iter()
        .zip(bodies.iter().zip(outs))
        .map(|((want, body), (src, dst))| (src.device_address(), body.len() as u64, dst.device_address(), *want))
}

/// Runs `kernel` (over `UnsnapItem`s, on the grid and block `plan` gives, having laid out the items) on
/// `cases`, and asserts each status equals `reference`'s, each output its bytes where it gives them,
/// and (with `refused_untouched`) untouched (zero) where it does not. Returns how many bodies passed.
fn body_decoder_equals_the_reference(
    kernel: &str,
    plan: impl Fn(&mut [gpu_parquet::decode::layout::UnsnapItem]) -> (u32, u32),
    cases: &[(u64, Vec<u8>)],
    reference: gpu_parquet::decode::host_kernels::unsnap::BodyReference,
    refused_untouched: bool,
) -> usize {
    use gpu_parquet::decode::host_kernels::unsnap::assert_output_equals;
    let Some(results) = run_body_decoder(kernel, plan, cases) else {
        return usize::MAX;
    };
    let mut passed = 0;
    for (i, ((status, out), (want, body))) in results.into_iter().zip(cases).enumerate() {
        let (expected, bytes) = reference(body, *want);
        assert_eq!(
            status,
            expected,
            "{kernel}, case {i}: {} bytes declaring {want}",
            body.len()
        );
        match bytes {
            Some(bytes) => {
                passed += 1;
                assert_output_equals(i, *want, &bytes, &out);
            }
            None if refused_untouched => {
                assert!(
                    out.iter().all(|&b| b == 0),
                    "{kernel}, case {i}: bytes written to a refused body"
                );
            }
            None => {}
        }
    }
    passed
}

/// Runs `kernel` (over `UnsnapItem`s, on the grid and block `plan` gives, having laid out the items) on
/// `cases`: each body's status and output (zeros where nothing was written); `None` without a GPU.
fn run_body_decoder(
    kernel: &str,
    plan: impl Fn(&mut [gpu_parquet::decode::layout::UnsnapItem]) -> (u32, u32),
    cases: &[(u64, Vec<u8>)],
) -> Option<Vec<(u32, Vec<u8>)>> {
    use gpu_parquet::decode::layout::UnsnapItem;
    let ctx = gpu()?;
    let m = KernelModule::load(&ctx, &gpu_parquet::decode::kernels::source(), "body_check", None).expect("kernels");
    let f = m.function(kernel).expect("kernel");
    let stream = Stream::new(&ctx).expect("stream");
    let alloc = |bytes: &[u8], len: usize| {
        if bytes.is_empty() {
            DeviceBuffer::<u8>::zeroed(&stream, len.max(1)).expect("alloc")
        } else {
            DeviceBuffer::from_host(&stream, bytes).expect("upload")
        }
    };
    let bodies: Vec<DeviceBuffer<u8>> = cases.iter().map(|(_, b)| alloc(b, 0)).collect();
    let outs: Vec<DeviceBuffer<u8>> = cases.iter().map(|(want, _)| alloc(&[], *want as usize)).collect();
    let mut items: Vec<UnsnapItem> = body_places(cases, &bodies, &outs).map(unsnap_item).collect();
    let (grid, threads) = plan(&mut items);
    // SAFETY: the kernel reads each item's `src_len` bytes at its `src` and writes at most `dst_len`
    // bytes at its `dst`: allocations of that many bytes (at least 1) in `bodies` and `outs`, alive until
    // the end of this function; it writes the items' statuses. `plan`: the kernel's geometry.
    let back: Vec<UnsnapItem> = unsafe { run_on_grid(&stream, &f, &items, grid, threads) };
    let results = back
        .iter()
        .zip(&outs)
        .map(|(got, out)| (got.status, out.copy_to_host().expect("copy")))
        .collect();
    drop((bodies, outs));
    Some(results)
}

/// The wide Snappy decoder (`kernels/snappy_wide.cu`, launched as `layout::wsnap` says) gives the host
/// reference's status on valid, cut and flipped bodies (Parquet-like pages of 1 MiB, streams whose
/// elements cross its segments in every way, and a body of more segments than `gp_wsnap_resolve`
/// stages at once), and where it passes exactly the `snap` crate's bytes, ending with
/// `gp_wsnap_resolve` and with the jump rounds and the gather; each body, output and scratch region in
/// an allocation of its own (so a read or write past any is an error under compute-sanitizer).
#[test]
fn wide_snappy_decoder_equals_the_reference_on_the_device() {
    use gpu_parquet::decode::host_kernels::unsnap::{assert_wide_matches_reference, kernel_cases, wide_cases};
    use gpu_parquet::decode::layout::{WsnapItem, wsnap};
    let Some(ctx) = gpu() else { return };
    let m = KernelModule::load(&ctx, &gpu_parquet::decode::kernels::source(), "wsnap_check", None).expect("kernels");
    let stream = Stream::new(&ctx).expect("stream");
    let mut cases = kernel_cases(1 << 20);
    cases.extend(wide_cases(1 << 20));
    // Past 512 segments (the bases `gp_wsnap_resolve` stages at a time): the first, valid body of
    // 2.5 MB of such data.
    let long = wide_cases(2_500_000).swap_remove(0);
    assert!(long.1.len() as u64 > 600 * wsnap::SEG, "{} bytes", long.1.len());
    cases.push(long);
    let alloc = |len: usize| DeviceBuffer::<u8>::zeroed(&stream, len.max(1)).expect("alloc");
    let bodies = upload_bodies(&stream, &cases);
    for resolve in [true, false] {
        let outs: Vec<DeviceBuffer<u8>> = cases.iter().map(|(want, _)| alloc(*want as usize)).collect();
        let mut items: Vec<WsnapItem> = body_places(&cases, &bodies, &outs)
            .map(|(src, src_len, dst, dst_len)| WsnapItem {
                src,
                src_len,
                dst,
                dst_len,
                ..Default::default()
            })
            .collect();
        let plan = wsnap::plan(&mut items, 0);
        assert!(
            plan.resolve,
            "no body here has more than {} segments",
            wsnap::RESOLVE_MAX_SEGS
        );
        // Each scratch region on its own, of exactly its size.
        let mut scratch = Vec::new();
        for it in &mut items {
            let s = wsnap::Scratch::of(it.src_len, it.dst_len);
            for (field, bytes) in [
                (&mut it.table, s.table),
                (&mut it.segs, s.segs),
                (&mut it.ptr, s.ptr),
                (&mut it.kind, s.kind),
            ] {
                let b = alloc(bytes as usize);
                *field = b.device_address();
                scratch.push(b);
            }
        }
        let dev = DeviceBuffer::from_host(&stream, bytemuck::cast_slice::<_, u8>(&items)).expect("items");
        let flags = alloc(4 * plan.flag_words as usize);
        let (addr, n, flags_addr) = (dev.device_address(), items.len() as u32, flags.device_address());
        let launch = |name: &str, grid: u32, block: u32, round: Option<u32>| {
            let f = m.function(name).expect("kernel");
            let mut b = stream.cuda().launch_builder(&f);
            b.arg(&addr).arg(&n);
            if let Some(r) = &round {
                b.arg(&flags_addr).arg(r);
            }
            // SAFETY: `n` items at `addr`, each naming its body, output and scratch regions of the
            // sizes `wsnap::Scratch::of` gives (allocations alive until the copies below have waited
            // for the launches), and `flags` holds `plan.flag_words` zeroed u32s; the grids and blocks
            // are the plan's.
            unsafe { b.launch(one_dimension(grid, block)) }.expect("launch");
        };
        launch("gp_wsnap_tabulate", plan.seg_blocks, 128, None);
        launch("gp_wsnap_join", n, 32, None);
        launch("gp_wsnap_emit", plan.seg_blocks, 128, None);
        launch("gp_wsnap_finish", n, 32, None);
        if resolve {
            launch("gp_wsnap_resolve", n, wsnap::RESOLVE_THREADS, None);
        } else {
            for r in 0..plan.rounds {
                launch("gp_wsnap_jump", plan.byte_blocks, 256, Some(r));
            }
            launch("gp_wsnap_gather", plan.byte_blocks, 256, None);
        }
        let back: Vec<WsnapItem> = bytemuck::pod_collect_to_vec(&dev.copy_to_host().expect("copy"));
        assert_wide_matches_reference(
            &cases,
            |i| (back[i].status, back[i].unresolved),
            |i| outs[i].copy_to_host().expect("copy"),
        );
        drop((outs, scratch, flags));
    }
    drop(bodies);
}

#[test]
fn gpu_decode_equals_arrow_rs_and_the_references_on_every_file() {
    let Some(_ctx) = gpu() else { return };
    let mut files: Vec<PathBuf> = files_under(&common::testdata_dir(), |p| {
        p.extension().is_some_and(|e| e == "parquet")
    });
    let with_corpus = corpus().is_some();
    if let Some(c) = corpus() {
        files.extend(files_under(&c.join("data"), |p| {
            p.extension().is_some_and(|e| e == "parquet")
        }));
    }
    let (mut equal, mut refused, mut gpu_cols, mut host_cols) = (0, 0, 0, 0);
    let mut slow = Vec::new();
    for f in &files {
        let name = f.display().to_string();
        let started = Instant::now();
        let host = host_reads(f);
        if started.elapsed() > Duration::from_secs(5) {
            slow.push(name);
            continue;
        }
        let ours = gpu_read(f, None);
        match (host, ours) {
            (Ok((want, reference)), Ok((got, g, h))) => {
                assert_same(&name, &want, &got, "GPU vs arrow-rs");
                if let Some(r) = reference {
                    assert_same(&name, &r, &got, "GPU vs host reference");
                }
                equal += 1;
                gpu_cols += g;
                host_cols += h;
            }
            (Err(_), Err(_)) => refused += 1,
            (Ok(_), Err(e)) => panic!("{name}: arrow-rs decodes it; the GPU decoder says {e}"),
            (Err(e), Ok(_)) => panic!("{name}: arrow-rs refuses it ({e}); the GPU decoder decoded it"),
        }
    }
    println!(
        "{equal} files equal, {refused} refused by both, {gpu_cols} column-steps decoded on the GPU, {host_cols} on the host; left out (slow on the host): {slow:?}"
    );
    // Every file is equal or refused by both (each other outcome panics above); the corpus holds well
    // over ten that arrow-rs reads, testdata a few (a run without the corpus has said it skipped it).
    assert!(equal > if with_corpus { 10 } else { 0 }, "{equal} files equal");
}

/// A table with every flat type the benchmark and users have, nulls in every other column.
fn table(rows: usize) -> RecordBatch {
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows as i64));
    let b: ArrayRef = Arc::new(Int32Array::from_iter(
        (0..rows).map(|i| (i % 7 != 0).then_some((i % 1000) as i32)),
    ));
    let f: ArrayRef = Arc::new(Float32Array::from_iter_values((0..rows).map(|i| i as f32 * 0.5)));
    let s: ArrayRef = Arc::new(StringArray::from_iter(
        (0..rows).map(|i| (i % 5 != 0).then(|| format!("category-{:04}", i % 997))),
    ));
    let t: ArrayRef = Arc::new(BooleanArray::from_iter(
        (0..rows).map(|i| (i % 3 != 0).then_some(i % 2 == 0)),
    ));
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("b", DataType::Int32, true),
        Field::new("f", DataType::Float32, false),
        Field::new("s", DataType::Utf8, true),
        Field::new("t", DataType::Boolean, true),
    ]);
    RecordBatch::try_new(Arc::new(schema), vec![id, b, f, s, t]).expect("batch")
}

fn write(path: &Path, batch: &RecordBatch, props: WriterProperties) {
    let file = std::fs::File::create(path).expect("create");
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).expect("writer");
    w.write(batch).expect("write");
    w.close().expect("close");
}

#[test]
fn every_codec_encoding_and_page_version_in_several_steps() {
    let Some(_ctx) = gpu() else { return };
    let dir = tempfile::tempdir().expect("scratch");
    let batch = table(300_000);
    let codecs = [
        Compression::UNCOMPRESSED,
        Compression::SNAPPY,
        Compression::ZSTD(ZstdLevel::default()),
        Compression::LZ4_RAW,
        Compression::GZIP(GzipLevel::default()),
        Compression::BROTLI(Default::default()),
    ];
    // GPU_PARQUET_TEST_CODECS=SNAPPY,ZSTD (names as the codec's Debug form begins) runs those only:
    // under racecheck the whole test takes longer than one call on the GPU machine allows.
    let only = std::env::var("GPU_PARQUET_TEST_CODECS").ok();
    let chosen = |c: &Compression| {
        let name = format!("{c:?}");
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|w| !w.is_empty() && name.starts_with(w)))
    };
    let mut cases = 0;
    for codec in codecs.into_iter().filter(chosen) {
        for v2 in [false, true] {
            for (enc, dict) in [
                (None, true),
                (None, false),
                (Some(Encoding::DELTA_BINARY_PACKED), false),
                (Some(Encoding::BYTE_STREAM_SPLIT), false),
            ] {
                let mut p = WriterProperties::builder()
                    .set_compression(codec)
                    .set_writer_version(if v2 {
                        WriterVersion::PARQUET_2_0
                    } else {
                        WriterVersion::PARQUET_1_0
                    })
                    .set_dictionary_enabled(dict)
                    .set_max_row_group_row_count(Some(64 * 1024))
                    .set_data_page_row_count_limit(10_000);
                if let Some(e) = enc {
                    for c in ["id", "b"] {
                        if e == Encoding::DELTA_BINARY_PACKED || c == "id" {
                            p = p.set_column_encoding(c.into(), e);
                        }
                    }
                    if e == Encoding::BYTE_STREAM_SPLIT {
                        p = p.set_column_encoding("f".into(), e);
                    }
                    if e == Encoding::DELTA_BINARY_PACKED {
                        p = p.set_column_encoding("s".into(), Encoding::DELTA_BYTE_ARRAY);
                    }
                }
                let path = dir.path().join(format!("t-{cases}.parquet"));
                write(&path, &batch, p.build());
                let name = format!("{codec:?} v2={v2} {enc:?} dict={dict}");
                // A small budget: several steps, reads overlapping decode.
                let (got, g, _) = gpu_read(&path, Some(64 << 20)).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_same(&name, &batch, &got, "GPU vs the written table");
                assert_eq!(g % 5, 0, "{name}: every column decoded on the GPU");
                cases += 1;
            }
        }
    }
    assert!(
        cases > 0,
        "GPU_PARQUET_TEST_CODECS={only:?} names no codec of {codecs:?}"
    );
    println!("{cases} files, each decoded on the GPU in several steps, equal to the table written");
}

#[test]
fn held_steps_decode_as_the_read_does_again_and_again() {
    let Some(_ctx) = gpu() else { return };
    let dir = tempfile::tempdir().expect("scratch");
    let batch = table(300_000);
    for codec in [Compression::UNCOMPRESSED, Compression::SNAPPY] {
        let props = WriterProperties::builder()
            .set_compression(codec)
            .set_max_row_group_row_count(Some(32 * 1024))
            .set_data_page_row_count_limit(10_000)
            .build();
        let path = dir.path().join(format!("{codec:?}.parquet"));
        write(&path, &batch, props);
        let reader = Reader::builder(&path)
            .with_backend(BackendKind::Auto)
            .with_decoder_options(options())
            .with_memory_limit(64 << 20)
            .build()
            .expect("reader");
        let held = gpu_parquet::bench::fetch_held_steps(&reader).expect("held steps");
        assert!(held.len() >= 2, "{codec:?}: a small budget cuts the read into steps");
        // Twice over the same chunks: a decode must leave them as they were.
        for round in 0..2 {
            let (batches, peak) = gpu_parquet::bench::decode_held_steps(&reader, &held).expect("decode");
            assert_eq!(batches.len(), held.len(), "{codec:?}: a batch per step");
            assert!(peak > 0, "{codec:?}: a step holds outputs");
            let table = gpu_parquet::decode::table::DeviceTable {
                schema: batch.schema(),
                batches,
            };
            let got = table.to_host().expect("to host");
            assert_same(
                &format!("{codec:?} round {round}"),
                &batch,
                &got,
                "held steps vs the table written",
            );
        }
    }
}

#[test]
fn bad_and_corrupted_files_give_errors_not_crashes() {
    let Some(_ctx) = gpu() else { return };
    let dir = tempfile::tempdir().expect("scratch");
    let mut inputs: Vec<PathBuf> = Vec::new();
    if let Some(bad) = common::testing_dir("bad_data") {
        inputs.extend(files_under(&bad, |p| p.extension().is_some_and(|e| e == "parquet")));
    }
    // Corrupted copies of a file written here: byte flips in the column data, and truncations.
    let good = dir.path().join("good.parquet");
    write(
        &good,
        &table(50_000),
        WriterProperties::builder().set_compression(Compression::SNAPPY).build(),
    );
    let bytes = std::fs::read(&good).expect("read");
    let (data, _footer) = common::regions(&bytes);
    let mut rng = gpu_parquet::conformance::SeededRng::new(7);
    for k in 0..60 {
        let mut b = bytes.clone();
        for _ in 0..(1 + k % 4) {
            let at = data.start + (rng.next_u64() as usize % data.len());
            b[at] ^= 1 << (rng.next_u64() % 8);
        }
        let p = dir.path().join(format!("flip-{k}.parquet"));
        std::fs::write(&p, &b).expect("write");
        inputs.push(p);
    }
    let (mut errors, mut equal) = (0, 0);
    for p in &inputs {
        let name = p.display().to_string();
        let started = Instant::now();
        let ours = gpu_read(p, None);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{name}: took {:?}",
            started.elapsed()
        );
        match (ours, host_reads(p)) {
            (Ok((got, _, _)), Ok((want, _))) => {
                assert_same(&name, &want, &got, "GPU vs arrow-rs on a damaged file");
                equal += 1;
            }
            (Ok(_), Err(e)) => panic!("{name}: arrow-rs refuses it ({e}) but the GPU decoder returned values"),
            (Err(e), _) => {
                let m = e.to_string();
                assert!(!m.contains("panicked"), "{name}: {m}");
                assert!(
                    !m.contains("ILLEGAL_ADDRESS") && !m.contains("illegal"),
                    "{name}: a device fault: {m}"
                );
                if errors < 8 {
                    println!(
                        "  {}: {}",
                        p.file_name().map(|f| f.to_string_lossy()).unwrap_or_default(),
                        m.chars().take(220).collect::<String>()
                    );
                }
                errors += 1;
            }
        }
    }
    println!(
        "{} damaged inputs: {errors} clear errors, {equal} decoded equal to arrow-rs",
        inputs.len()
    );
}

/// The Arrow C Device Data Interface export of a GPU-decoded batch: a CUDA device array on this GPU
/// whose buffer addresses are the decoder's own device buffers (no copy), whose `sync_event` is a
/// recorded event, and whose bytes, copied back from those addresses, are arrow-rs's values.
#[test]
fn the_device_export_hands_out_the_decoded_buffers() {
    use gpu_parquet::device_ffi::ARROW_DEVICE_CUDA;
    let Some(ctx) = gpu() else { return };
    let path = common::testdata_dir().join("flat_snappy_dict.parquet");
    let read = Reader::builder(&path)
        .with_backend(BackendKind::Auto)
        .with_decoder_options(options())
        .build()
        .expect("reader")
        .read_device()
        .expect("GPU read");
    let want = read.table.to_host_batches().expect("host copy").remove(0);
    let batch = read.table.batches.into_iter().next().expect("a batch");
    let addresses: Vec<u64> = batch
        .columns
        .iter()
        .map(|c| c.array.buffers[0].device_address())
        .collect();
    let lens: Vec<usize> = batch.columns.iter().map(|c| c.array.buffers[0].len()).collect();
    let (_schema, device) = batch.into_device_array().expect("export");
    assert_eq!(device.device_type, ARROW_DEVICE_CUDA);
    assert_eq!(device.device_id, ctx.ordinal() as i64);
    assert!(!device.sync_event.is_null());
    assert_eq!(device.array.n_children as usize, want.num_columns());
    // SAFETY: sync_event points to a live CUevent (kept by the export until release); the children
    // are n_children valid arrays whose buffers hold n_buffers addresses.
    unsafe {
        let event = *(device.sync_event as *const cudarc::driver::sys::CUevent);
        assert_eq!(
            cudarc::driver::sys::cuEventSynchronize(event),
            cudarc::driver::sys::CUresult::CUDA_SUCCESS
        );
        for (i, (&addr, &len)) in addresses.iter().zip(&lens).enumerate() {
            let child = &**device.array.children.add(i);
            assert!(child.n_buffers >= 2, "column {i}");
            assert_eq!(
                *child.buffers.add(1) as u64,
                addr,
                "column {i}: the decoder's buffer, not a copy"
            );
            assert_eq!(child.length as usize, want.num_rows());
            let mut host = vec![0u8; len];
            ctx.bind().expect("bind");
            assert_eq!(
                cudarc::driver::sys::cuMemcpyDtoH_v2(host.as_mut_ptr() as *mut _, addr, len),
                cudarc::driver::sys::CUresult::CUDA_SUCCESS
            );
            let expect = want.column(i).to_data();
            let values = &expect.buffers()[0];
            assert_eq!(&host[..values.len()], values.as_slice(), "column {i} values");
        }
    }
    drop(device);
}

/// A GPU read in several steps tells its progress callback once per step: steps, rows and bytes add up
/// to the read's.
#[test]
fn a_gpu_read_reports_progress_per_step() {
    let Some(_ctx) = gpu() else { return };
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let path = "testdata/flat_snappy_dict.parquet";
    // A budget a fifth of which holds one row group's decode but not two (the reader's estimate:
    // chunk, twice the uncompressed bytes, 21 bytes of temporaries per value): one step per row group.
    let source = ParquetSource::open(path).expect("open");
    let need = source
        .metadata()
        .row_groups()
        .iter()
        .map(|g| {
            g.columns()
                .iter()
                .map(|c| c.compressed_size() as u64 + 2 * c.uncompressed_size() as u64 + g.num_rows() as u64 * 21)
                .sum::<u64>()
        })
        .max()
        .unwrap();
    let reader = Reader::builder(path)
        .with_decoder_options(options())
        .with_memory_limit(5 * need + 4096)
        .with_progress(move |p| s.lock().unwrap().push(p))
        .build()
        .expect("reader");
    let read = reader.read_device().expect("read");
    let seen = seen.lock().unwrap();
    let steps = read.table.batches.len();
    assert!(steps > 1, "the file has several row groups: {steps} steps");
    assert_eq!(seen.len(), steps, "{seen:?}");
    for (k, p) in seen.iter().enumerate() {
        assert_eq!((p.steps_done, p.steps), (k + 1, steps));
    }
    let last = seen.last().unwrap();
    assert_eq!(last.rows_done, read.table.num_rows() as u64);
    assert_eq!(last.rows, last.rows_done);
    assert_eq!(last.bytes_done, reader.plan().useful_bytes());
}

/// The read's peak as rmm counts it: at least its output (held at the end), and every byte counted is
/// counted back once the read and its reader are gone.
#[test]
fn a_gpu_read_reports_the_memory_its_buffers_held() {
    let Some(ctx) = gpu() else { return };
    let before = ctx.allocations().live_bytes();
    let reader = Reader::builder("testdata/flat_snappy_dict.parquet")
        .with_decoder_options(options())
        .build()
        .expect("reader");
    let read = reader.read_device().expect("read");
    let d = &read.decode;
    assert!(d.output_bytes > 0);
    assert!(
        d.peak_allocated_bytes >= d.output_bytes,
        "peak {} under the output {}",
        d.peak_allocated_bytes,
        d.output_bytes
    );
    assert!(ctx.allocations().live_bytes() >= before + d.output_bytes);
    drop(read);
    drop(reader);
    assert_eq!(ctx.allocations().live_bytes(), before);
}

/// Memory a read freed stays in the device's pool (`cuMemGetInfo` counts it as taken), and the memory
/// the next read plans with counts it as available, so a process's later reads are planned as its
/// first (`GpuContext::available_memory`).
#[test]
fn memory_a_read_freed_stays_available_to_the_next() {
    let Some(ctx) = gpu() else { return };
    let dir = tempfile::tempdir().expect("scratch");
    let path = dir.path().join("two-million.parquet");
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    write(&path, &table(2_000_000), props);
    ctx.synchronize().expect("sync");
    let before = ctx.available_memory().expect("available");
    let read = || {
        let reader = Reader::builder(&path)
            .with_decoder_options(options())
            .build()
            .expect("reader");
        let read = reader.read_device().expect("read");
        read.decode.peak_allocated_bytes
    };
    let peak = read();
    ctx.synchronize().expect("sync");
    let (free, _) = ctx.memory().expect("memory");
    let available = ctx.available_memory().expect("available");
    // The pool kept what the read freed (its release threshold is the maximum).
    assert!(
        available >= free + peak / 2,
        "available {available} against free {free}: the pool holds under half of the read's peak {peak}"
    );
    // What stayed taken: the read's kernels and libraries, not its buffers.
    assert!(
        available + (256 << 20) >= before,
        "available {before} before the read, {available} after (peak {peak})"
    );
    // A second read finds the same.
    let _ = read();
    ctx.synchronize().expect("sync");
    let again = ctx.available_memory().expect("available");
    assert!(again + (64 << 20) >= available, "available {available}, then {again}");
}

/// The layouts built after decoding (views, 64-bit offsets, decimals of every width, dictionary-typed
/// columns) on the GPU: `testdata/types.parquet` and its rewrites (plain v1 pages, dictionary v2 pages),
/// in one step and in one step per row group, equal to arrow-rs and to the host references, every
/// column decoded on the GPU. Also with dictionaries that fall back to plain pages past a 64-byte
/// limit (v1 and v2): the dictionary-typed columns decode their plain pages into their dictionary
/// values, but where a step holds more rows than Int8 keys (those go to the host, saying so).
#[test]
fn views_decimals_and_dictionaries_decode_on_the_gpu() {
    let Some(_ctx) = gpu() else { return };
    let path = common::testdata_dir().join("types.parquet");
    let (want, _) = host_reads(&path).expect("arrow-rs reads types.parquet");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = vec![path.clone()];
    for (name, dictionary, version, limit) in [
        ("plain-v1.parquet", false, WriterVersion::PARQUET_1_0, usize::MAX),
        ("dict-v2.parquet", true, WriterVersion::PARQUET_2_0, usize::MAX),
        ("fallback-v1.parquet", true, WriterVersion::PARQUET_1_0, 64),
        ("fallback-v2.parquet", true, WriterVersion::PARQUET_2_0, 64),
    ] {
        let props = WriterProperties::builder()
            .set_dictionary_enabled(dictionary)
            .set_dictionary_page_size_limit(limit)
            .set_writer_version(version)
            .set_max_row_group_row_count(Some(500))
            .set_data_page_row_count_limit(128)
            .set_write_batch_size(64)
            .build();
        let p = dir.path().join(name);
        write(&p, &want, props);
        files.push(p);
    }
    for file in &files {
        let name = file.display().to_string();
        let (want, reference) = host_reads(file).expect("arrow-rs");
        for steps in [1, 3] {
            let read = Reader::builder(file)
                .with_backend(BackendKind::Auto)
                .with_decoder_options(options())
                .with_decode_steps(steps)
                .build()
                .expect("reader")
                .read_device()
                .expect("GPU read");
            for c in read.table.batches.iter().flat_map(|b| &b.columns) {
                let int8_keys = matches!(&c.array.data_type, DataType::Dictionary(k, _) if **k == DataType::Int8);
                if int8_keys && matches!(&c.decoded, DecodedWhere::Host(why) if why.contains("keys hold")) {
                    continue;
                }
                assert_eq!(c.decoded, DecodedWhere::Gpu, "{name}: {}", c.name);
            }
            let got = read.table.to_host().expect("host copy");
            assert_same(&name, &want, &got, "GPU vs arrow-rs");
            if let Some(r) = &reference {
                assert_same(&name, r, &got, "GPU vs host reference");
            }
        }
    }
}

/// `gp_strings_to_views` over 64-bit offsets whose characters are cut into segments (as a step with
/// more strings than 32-bit offsets hold gives them, here with 64-byte segments): the host reference's
/// views (lengths, inline bytes, buffer indices, offsets) and longest length; and with 32-bit offsets
/// (segment 0) as before.
#[test]
fn segmented_views_equal_the_reference_on_the_device() {
    use gpu_parquet::decode::host_kernels::Arena;
    use gpu_parquet::decode::host_kernels::convert::strings_to_views;
    let Some(ctx) = gpu() else { return };
    let m = KernelModule::load(&ctx, &gpu_parquet::decode::kernels::source(), "views_check", None).expect("kernels");
    let f = m.function("gp_strings_to_views").expect("kernel");
    let stream = Stream::new(&ctx).expect("stream");
    let n = 3000u64;
    let mut chars = Vec::new();
    let mut offsets = vec![0i64];
    for i in 0..n {
        let len = (i * 7919 % 41) as usize;
        chars.extend((0..len).map(|k| b'a' + ((i as usize + k) % 26) as u8));
        offsets.push(chars.len() as i64);
    }
    let narrow: Vec<i32> = offsets.iter().map(|&o| o as i32).collect();
    for segment in [64u64, 0] {
        let offset_bytes: Vec<u8> = if segment == 0 {
            bytemuck::cast_slice(&narrow).to_vec()
        } else {
            bytemuck::cast_slice(&offsets).to_vec()
        };
        let mut arena = Arena::new();
        let (o, c) = (arena.upload(&offset_bytes), arena.upload(&chars));
        let (v, longest) = (arena.alloc(n as usize * 16), arena.alloc(4));
        strings_to_views(&mut arena, (o, segment), c, chars.len() as u64, n, v, longest);
        let want_views = arena.get(v, n * 16).expect("views").to_vec();
        let want_longest: Vec<u32> = arena.read(longest, 1).expect("longest");

        let d_offsets = DeviceBuffer::from_host(&stream, &offset_bytes).expect("offsets");
        let d_chars = DeviceBuffer::from_host(&stream, &chars).expect("chars");
        let d_views = DeviceBuffer::<u8>::zeroed(&stream, n as usize * 16).expect("views");
        let d_longest = DeviceBuffer::<u32>::zeroed(&stream, 1).expect("longest");
        let (oa, ca, va, la) = (
            d_offsets.device_address(),
            d_chars.device_address(),
            d_views.device_address(),
            d_longest.device_address(),
        );
        let chars_len = chars.len() as u64;
        let mut b = stream.cuda().launch_builder(&f);
        b.arg(&oa)
            .arg(&segment)
            .arg(&ca)
            .arg(&chars_len)
            .arg(&n)
            .arg(&va)
            .arg(&la);
        // SAFETY: the kernel reads n + 1 offsets at `oa` and chars_len characters at `ca`, writes 16 n
        // bytes at `va` and one u32 at `la`: allocations of exactly those sizes, alive until the copies
        // below have waited for the launch.
        unsafe { b.launch(one_dimension(4, 256)) }.expect("launch");
        assert_eq!(
            d_views.copy_to_host().expect("copy"),
            want_views,
            "segment {segment}: views"
        );
        assert_eq!(
            d_longest.copy_to_host().expect("copy"),
            want_longest,
            "segment {segment}: longest"
        );
    }
}

/// Fixed-size lists of fixed-width items on the GPU (null lists padded with null items, null items,
/// not-null lists), in one step and in one step per row group, equal to arrow-rs and to the host
/// references; v1 and v2 pages.
#[test]
fn fixed_size_lists_decode_on_the_gpu() {
    use arrow::array::{Array, FixedSizeListArray};
    let Some(_ctx) = gpu() else { return };
    let rows = 2000usize;
    let item = |t: DataType, nullable| Arc::new(Field::new("item", t, nullable));
    let embedding = FixedSizeListArray::new(
        item(DataType::Float32, true),
        8,
        Arc::new(Float32Array::from_iter(
            (0..rows * 8).map(|i| (i % 13 != 5).then_some(i as f32 * 0.25)),
        )),
        Some((0..rows).map(|r| r % 9 != 2).collect()),
    );
    let triple = FixedSizeListArray::new(
        item(DataType::Int64, false),
        3,
        Arc::new(Int64Array::from_iter_values((0..rows as i64 * 3).map(|i| i * 7 - 100))),
        None,
    );
    let schema = Arc::new(Schema::new(vec![
        Field::new("embedding", embedding.data_type().clone(), true),
        Field::new("triple", triple.data_type().clone(), false),
    ]));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(embedding) as ArrayRef, Arc::new(triple)]).expect("batch");
    let dir = tempfile::tempdir().expect("tempdir");
    for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
        let path = dir.path().join(format!("fixed-{version:?}.parquet"));
        let props = WriterProperties::builder()
            .set_writer_version(version)
            .set_max_row_group_row_count(Some(700))
            .set_data_page_row_count_limit(100)
            .set_write_batch_size(50)
            .build();
        write(&path, &batch, props);
        let name = path.display().to_string();
        let (want, reference) = host_reads(&path).expect("arrow-rs");
        for steps in [1, 3] {
            let read = Reader::builder(&path)
                .with_backend(BackendKind::Auto)
                .with_decoder_options(options())
                .with_decode_steps(steps)
                .build()
                .expect("reader")
                .read_device()
                .expect("GPU read");
            for c in read.table.batches.iter().flat_map(|b| &b.columns) {
                assert_eq!(c.decoded, DecodedWhere::Gpu, "{name}: {}", c.name);
            }
            let got = read.table.to_host().expect("host copy");
            assert_same(&name, &want, &got, "GPU vs arrow-rs");
            if let Some(r) = &reference {
                assert_same(&name, r, &got, "GPU vs host reference");
            }
        }
    }
}

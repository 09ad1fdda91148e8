//! GPU backends (staged, cuFile, auto) against the conformance suite, the device layer's guarantees,
//! and readers sharing a device across threads.
//!
//! Runs on the GPU machine from the crate root (`--test-threads=1`: cuFile's statistics are per
//! process, and tests reading through cuFile at the same time would blur each other's). On a machine
//! without a CUDA driver every test prints "skipped: no CUDA driver (<reason>)" and returns. Test
//! files are written into scratch directories by the suite, so no test data path is needed.

mod common;

use std::path::Path;
use std::sync::Arc;

use gpu_parquet::conformance;
use gpu_parquet::gpu::cufile::{self as cf, CufileDriver};
use gpu_parquet::gpu::{DeviceBuffer, GpuContext, PinnedAlloc, PinnedBuffer, Stream};
use gpu_parquet::io::cufile::{CufileBackend, CufileOptions};
use gpu_parquet::io::select::{AnyBackend, NO_NVFS_REASON};
use gpu_parquet::io::staged::{StagedBackend, StagedOptions};
use gpu_parquet::io::{DestBuffer, IoBackend, IoPath};
use gpu_parquet::{
    BackendKind, CompatMode, Error, IoPolicy, ParquetSource, PlanOptions, Projection, ReadPlan, Reader,
    RowGroupSelection,
};

/// Writes the conformance files into `dir`, opens `mixed` and plans all of it with `opts`.
fn plan_mixed(dir: &Path, opts: PlanOptions) -> (conformance::TestFiles, ParquetSource, ReadPlan) {
    let files = conformance::write_test_files(dir).expect("test files");
    let source = ParquetSource::open(&files.mixed).expect("open");
    let plan = ReadPlan::build(&source, &Projection::All, &RowGroupSelection::All, opts).expect("plan");
    (files, source, plan)
}

fn gpu() -> Option<Arc<GpuContext>> {
    match GpuContext::new(0) {
        Ok(c) => Some(c),
        Err(e) => {
            common::skip(&format!("no CUDA driver ({e})"));
            None
        }
    }
}

/// The cuFile backend, and whether registration works in a scratch directory (`Err`: the refusal).
fn cufile(ctx: &Arc<GpuContext>, opts: CufileOptions) -> Option<(CufileBackend, Result<(), String>)> {
    let b = match CufileBackend::new(ctx.clone(), opts) {
        Ok(b) => b,
        Err(e) => {
            common::skip(&format!("cuFile unavailable ({e})"));
            return None;
        }
    };
    let dir = tempfile::tempdir().expect("scratch");
    let (_, source, plan) = plan_mixed(dir.path(), PlanOptions::default());
    let reg = b.register(&source, &plan).map(drop);
    Some((b, reg))
}

fn staged(ctx: &Arc<GpuContext>, threads: usize, buffer_size: usize, direct_io: bool) -> StagedBackend {
    StagedBackend::new(
        ctx.clone(),
        StagedOptions {
            threads,
            buffer_size,
            buffers_per_thread: 2,
            direct_io,
            pinned: PinnedAlloc::HugePages,
            ..StagedOptions::default()
        },
    )
    .expect("staged backend")
}

fn run_suite<B: IoBackend>(backend: &B) {
    let scratch = tempfile::tempdir().expect("scratch dir");
    if let Err(e) = conformance::run_all(backend, scratch.path()) {
        panic!("{}: {e}", backend.name());
    }
}

#[test]
fn staged_conformance() {
    let Some(ctx) = gpu() else { return };
    run_suite(&staged(&ctx, 4, 8 << 20, false));
    // Buffers smaller than tasks: every task is read in pieces through reused buffers.
    run_suite(&staged(&ctx, 3, 4096, false));
    run_suite(&staged(&ctx, 1, 8192, false));
    // cuMemHostAlloc'ed bounce buffers instead of registered huge pages.
    let b = StagedBackend::new(
        ctx.clone(),
        StagedOptions {
            threads: 2,
            buffer_size: 64 << 10,
            pinned: PinnedAlloc::HostAlloc,
            ..StagedOptions::default()
        },
    )
    .expect("staged backend");
    run_suite(&b);
}

#[test]
fn staged_conformance_direct_io() {
    let Some(ctx) = gpu() else { return };
    run_suite(&staged(&ctx, 4, 64 << 10, true));
}

#[test]
fn staged_records_staged_path_and_reads() {
    let Some(ctx) = gpu() else { return };
    let dir = tempfile::tempdir().expect("scratch");
    let opts = PlanOptions {
        task_size: 10_000,
        ..PlanOptions::default()
    };
    let (_, source, plan) = plan_mixed(dir.path(), opts);
    let b = staged(&ctx, 2, 4096, false);
    let mut dest = b.alloc(plan.dest_len).expect("alloc");
    let log = b.fetch_into(&source, &plan, &mut dest).expect("fetch");
    assert_eq!(log.tasks.len(), plan.tasks.len());
    for (r, t) in log.tasks.iter().zip(&plan.tasks) {
        assert_eq!(r.path, IoPath::Staged);
        // 4 KiB buffers: a task needs at least ceil(len / 4096) preads.
        assert!(
            r.reads >= t.len.div_ceil(4096),
            "task {}: {} reads for {} bytes",
            r.task,
            r.reads,
            t.len
        );
    }
    // The copy back is ordered on the buffer's stream after the workers' copies (no device-wide sync).
    let first = dest.to_host().expect("copy back");
    b.fetch_into(&source, &plan, &mut dest).expect("second fetch");
    assert_eq!(dest.to_host().expect("copy back"), first);
    // A buffer too small is refused, not overrun.
    let mut small = b.alloc(plan.dest_len / 2).expect("alloc");
    assert!(b.fetch_into(&source, &plan, &mut small).is_err());
}

#[test]
fn device_writer_checks_every_range_and_pinned_memory_waits_for_its_copies() {
    let Some(ctx) = gpu() else { return };
    let stream = Stream::new(&ctx).expect("stream");
    let mut buf = DeviceBuffer::<u8>::alloc(&stream, 1000).expect("alloc");
    let mut src = PinnedBuffer::new(&ctx, 4096, PinnedAlloc::HugePages).expect("pinned");
    src.as_mut_slice()
        .expect("idle")
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = i as u8);
    let copier = Stream::new(&ctx).expect("stream");
    {
        let w = buf.writer().expect("writer");
        assert!(
            w.copy_from_pinned(900, &mut src, 0..101, &copier).is_err(),
            "past the end"
        );
        assert!(
            w.copy_from_pinned(u64::MAX, &mut src, 0..1, &copier).is_err(),
            "overflow"
        );
        assert!(
            w.copy_from_pinned(0, &mut src, 4000..4097, &copier).is_err(),
            "past the source"
        );
        w.copy_from_pinned(0, &mut src, 0..1000, &copier).expect("in bounds");
        // Writing the source waits for the copy reading it.
        src.as_mut_slice().expect("waits").fill(0xEE);
        w.join(&copier).expect("join");
    }
    let got = buf.copy_to_host().expect("copy back");
    assert_eq!(got, (0..1000).map(|i| i as u8).collect::<Vec<_>>());
    assert!(buf.copy_range_to_host(990..1001).is_err());
    // Typed buffers round-trip.
    let v: Vec<i64> = (0..1234).map(|i| i * 3 - 7).collect();
    let t = DeviceBuffer::from_host(&stream, &v).expect("upload");
    assert_eq!(t.num_bytes(), 1234 * 8);
    assert_eq!(t.copy_to_host().expect("download"), v);
}

#[test]
fn cufile_conformance_or_refusal_explained() {
    let Some(ctx) = gpu() else { return };
    let Some((b, reg)) = cufile(&ctx, CufileOptions::default()) else {
        return;
    };
    match reg {
        Ok(()) => {
            run_suite(&b);
            let nvfs = b.driver().props.nvfs_loaded();
            let dir = tempfile::tempdir().expect("scratch");
            let (_, source, plan) = plan_mixed(dir.path(), PlanOptions::default());
            let f = b.fetch(&source, &plan).expect("fetch");
            for r in &f.log.tasks {
                assert!(matches!(r.path, IoPath::Nvfs | IoPath::CufileCompat));
                if !nvfs {
                    assert_eq!(r.path, IoPath::CufileCompat, "nvfs claimed with nvidia-fs absent");
                }
            }
            // Statistics level 3 is switched on by the driver wrapper: they must be there, and agree.
            let d = f.log.cufile_stats.expect("cuFile statistics around the fetch");
            assert!(d.total_reads >= plan.tasks.len() as u64, "{d:?}");
            assert_eq!(d.nvfs_reads + d.posix_reads, d.total_reads, "{d:?}");
            if !nvfs {
                assert_eq!(d.nvfs_reads, 0, "nvfs reads counted with nvidia-fs absent: {d:?}");
            }
            let report = gpu_parquet::report::ReadReport::build("mixed", &plan, &f.log);
            let check = report.cufile_stats_check.clone().expect("a stats check");
            assert!(check.agree, "our counters disagree with cuFile: {:?}", check.details);
            // Buffer registration (cuFileBufRegister) around the reads gives the same bytes.
            let reg = CufileBackend::new(
                ctx.clone(),
                CufileOptions {
                    register_buffer: true,
                    ..CufileOptions::default()
                },
            )
            .expect("backend");
            let g = reg.fetch(&source, &plan).expect("fetch with a registered buffer");
            assert_eq!(g.buffer.to_host().unwrap(), f.buffer.to_host().unwrap());
            println!("cuFile stats delta: {d:?}; check: {:?}", check.details);
        }
        Err(refusal) => {
            // Registration refused: the error must say so, with cuFile's error name and the log hint.
            assert!(refusal.contains("CU_FILE_"), "{refusal}");
            assert!(refusal.contains("cufile.log"), "{refusal}");
            let dir = tempfile::tempdir().expect("scratch");
            let (_, source, plan) = plan_mixed(dir.path(), PlanOptions::default());
            match b.fetch(&source, &plan) {
                Err(Error::Unavailable { reason, .. }) => assert!(reason.contains("CU_FILE_"), "{reason}"),
                other => panic!("expected Unavailable, got {other:?}"),
            }
            println!("cuFile registration refused here: {refusal}");
        }
    }
}

#[test]
fn cufile_serialized_stats_attribute_each_task() {
    let Some(ctx) = gpu() else { return };
    let opts = CufileOptions {
        serialize_stats: true,
        ..CufileOptions::default()
    };
    let Some((b, Ok(()))) = cufile(&ctx, opts) else {
        common::skip("cuFile registration refused");
        return;
    };
    run_suite(&b);
}

#[test]
fn cufile_driver_opens_on_first_use_and_closes_with_its_last_user() {
    let Some(ctx) = gpu() else { return };
    if cf::present().is_err() {
        common::skip("libcufile absent");
        return;
    }
    assert!(!CufileDriver::is_open(), "a driver left open by an earlier test");
    let a = CufileBackend::new(ctx.clone(), CufileOptions::default()).expect("open");
    let b = CufileBackend::new(ctx.clone(), CufileOptions::default()).expect("share");
    assert!(Arc::ptr_eq(a.driver(), b.driver()));
    drop(a);
    assert!(CufileDriver::is_open(), "closed while a user remains");
    drop(b);
    assert!(!CufileDriver::is_open(), "still open after its last user");
    // And it opens again.
    let c = CufileBackend::new(ctx.clone(), CufileOptions::default()).expect("reopen");
    assert!(c.driver().stats_enabled || !c.driver().notes.is_empty());
}

/// The child half of [`a_process_still_holding_the_cufile_driver_exits_cleanly`]: reads through a
/// cuFile backend where cuFile registers files here, then keeps the backend to the end, as a static
/// (the Python package's backend cache, a service's) would, and returns.
#[test]
#[ignore = "run as a child process by a_process_still_holding_the_cufile_driver_exits_cleanly"]
fn child_keeps_a_cufile_backend_to_the_end() {
    let Some(ctx) = gpu() else { return };
    let Some((b, reg)) = cufile(&ctx, CufileOptions::default()) else {
        return;
    };
    match reg {
        Ok(()) => {
            let dir = tempfile::tempdir().expect("scratch");
            let (_, source, plan) = plan_mixed(dir.path(), PlanOptions::default());
            b.fetch(&source, &plan).expect("fetch");
            println!("child: read through cuFile");
        }
        Err(refusal) => println!("child: cuFile refused the file ({refusal}); the driver is open"),
    }
    std::mem::forget(b);
}

/// libcufile's own teardown of a driver still open at exit crashed the process after its last line
/// (SIGSEGV); the driver is closed by our `atexit` handler first.
#[test]
fn a_process_still_holding_the_cufile_driver_exits_cleanly() {
    if let Err(why) = gpu_parquet::gpu::cuda_present() {
        common::skip(&format!("no CUDA driver ({why})"));
        return;
    }
    if let Err(why) = cf::present() {
        common::skip(&format!("libcufile absent ({why})"));
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--ignored",
            "--exact",
            "child_keeps_a_cufile_backend_to_the_end",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .expect("run the child");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the child exited with {}:\n{text}", out.status);
    assert!(text.contains("1 passed"), "{text}");
    // libtest prints the child's lines after its own "test ... " on the same line.
    for line in text.lines().filter_map(|l| l.find("child: ").map(|at| &l[at..])) {
        println!("{line}");
    }
}

#[test]
fn auto_prefers_staged_without_nvidia_fs_and_says_why() {
    let Some(ctx) = gpu() else { return };
    for mode in [CompatMode::Auto, CompatMode::On] {
        let policy = IoPolicy {
            compat_mode: mode,
            threads: 4,
            ..IoPolicy::default()
        };
        let b = AnyBackend::with_context(BackendKind::Auto, &policy, Some(Ok(ctx.clone()))).expect("auto backend");
        run_suite(&b);
        let nvfs = cf::present().is_ok()
            && CufileBackend::new(ctx.clone(), CufileOptions::default())
                .map(|c| c.driver().props.nvfs_loaded())
                .unwrap_or(false);
        let dir = tempfile::tempdir().expect("scratch");
        let (_, source, plan) = plan_mixed(dir.path(), PlanOptions::default());
        let f = b.fetch(&source, &plan).expect("fetch");
        for r in &f.log.tasks {
            assert_ne!(r.path, IoPath::Host, "auto with a GPU must not stay on the host");
            match mode {
                CompatMode::On => {
                    assert_eq!(r.path, IoPath::Staged);
                    assert!(r.reason.contains("compat mode on"), "{}", r.reason);
                }
                _ if !nvfs => {
                    assert_eq!(r.path, IoPath::Staged, "cuFile chosen without nvidia-fs");
                    assert!(!r.reason.is_empty());
                }
                _ => {}
            }
        }
        if mode == CompatMode::Auto && !nvfs {
            assert!(
                f.log
                    .notes
                    .iter()
                    .any(|n| n == NO_NVFS_REASON || n.contains("cuFile unavailable")),
                "{:?}",
                f.log.notes
            );
        }
    }
}

#[test]
fn explicit_cufile_or_compat_off_still_forces_cufile() {
    let Some(ctx) = gpu() else { return };
    let Some((_, reg)) = cufile(&ctx, CufileOptions::default()) else {
        return;
    };
    let dir = tempfile::tempdir().expect("scratch");
    let (_, source, plan) = plan_mixed(dir.path(), PlanOptions::default());
    for (kind, mode) in [
        (BackendKind::Cufile, CompatMode::Auto),
        (BackendKind::Auto, CompatMode::Off),
    ] {
        let policy = IoPolicy {
            compat_mode: mode,
            ..IoPolicy::default()
        };
        let b = AnyBackend::with_context(kind, &policy, Some(Ok(ctx.clone()))).expect("backend");
        match (&reg, b.fetch(&source, &plan)) {
            (Ok(()), Ok(f)) => assert!(
                f.log
                    .tasks
                    .iter()
                    .all(|r| matches!(r.path, IoPath::Nvfs | IoPath::CufileCompat)),
                "{kind} / {mode}: {:?}",
                f.log.tasks.iter().map(|r| r.path).collect::<Vec<_>>()
            ),
            (Err(_), Err(Error::Unavailable { reason, .. })) => assert!(reason.contains("CU_FILE_"), "{reason}"),
            (r, f) => panic!("{kind} / {mode}: registration {r:?}, fetch {:?}", f.map(|f| f.log)),
        }
    }
}

#[test]
fn two_readers_on_two_threads_give_identical_bytes_and_their_own_counters() {
    let Some(_ctx) = gpu() else { return };
    let dir = tempfile::tempdir().expect("scratch");
    let files = conformance::write_test_files(dir.path()).expect("files");
    let want = std::fs::read(&files.mixed).expect("read");
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let path = files.mixed.clone();
                s.spawn(move || {
                    let reader = Reader::builder(&path)
                        .with_policy(IoPolicy {
                            threads: 2 + i,
                            ..IoPolicy::default()
                        })
                        .build()
                        .expect("reader");
                    (0..5)
                        .map(|_| {
                            let chunks = reader.read().expect("read");
                            let bytes = chunks.buffer().to_host().expect("copy back");
                            (
                                chunks.plan().clone(),
                                chunks.report().clone(),
                                chunks.log().clone(),
                                bytes,
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("thread")).collect()
    });
    let first = &results[0].3;
    for (plan, report, log, bytes) in &results {
        assert_eq!(bytes, first, "readers disagree");
        for c in &plan.chunks {
            let (d, o, n) = (c.dest_offset as usize, c.offset as usize, c.len as usize);
            assert_eq!(
                &bytes[d..d + n],
                &want[o..o + n],
                "{} rg {}",
                c.column_path,
                c.row_group
            );
        }
        // Each report adds up to its own read: its bytes are its plan's, its reads its log's.
        assert_eq!(report.total.total_bytes(), plan.dest_len);
        assert_eq!(
            report.total.total_reads(),
            log.tasks.iter().map(|t| t.reads).sum::<u64>()
        );
        assert!(
            report.total.bytes[IoPath::Host.index()] == 0,
            "a GPU reader read into host memory"
        );
    }
}

#[test]
fn two_devices_in_one_process() {
    let Some(_ctx) = gpu() else { return };
    if GpuContext::device_count() < 2 {
        common::skip(&format!(
            "one GPU here ({} visible); needs two",
            GpuContext::device_count()
        ));
        return;
    }
    let dir = tempfile::tempdir().expect("scratch");
    let files = conformance::write_test_files(dir.path()).expect("files");
    let bytes: Vec<Vec<u8>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|dev| {
                let path = files.mixed.clone();
                s.spawn(move || {
                    let reader = Reader::builder(&path).with_device(dev).build().expect("reader");
                    let chunks = reader.read().expect("read");
                    let ctx = chunks.buffer().device().expect("device buffer").context().clone();
                    assert_eq!(ctx.ordinal(), dev);
                    chunks.buffer().to_host().expect("copy back")
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    assert_eq!(bytes[0], bytes[1]);
    assert!(!Arc::ptr_eq(&GpuContext::new(0).unwrap(), &GpuContext::new(1).unwrap()));
}

#[test]
fn streaming_reader_on_the_gpu_stays_within_its_budget() {
    let Some(_ctx) = gpu() else { return };
    let dir = tempfile::tempdir().expect("scratch");
    let files = conformance::write_test_files(dir.path()).expect("files");
    let whole = Reader::builder(&files.mixed).build().expect("reader");
    let all = whole.read().expect("read").buffer().to_host().expect("copy back");
    let largest = whole
        .plan()
        .row_groups
        .iter()
        .map(|&g| {
            whole
                .plan()
                .chunks
                .iter()
                .filter(|c| c.row_group == g)
                .map(|c| c.len)
                .sum::<u64>()
        })
        .max()
        .expect("row groups");
    let limit = 4 * largest;
    let reader = Reader::builder(&files.mixed)
        .with_memory_limit(limit)
        .build()
        .expect("reader");
    let mut seen = Vec::new();
    for group in reader.stream().expect("stream") {
        let group = group.expect("group");
        assert!(group.plan().dest_len <= limit / 2);
        assert!(group.buffer().device().is_some());
        let bytes = group.buffer().to_host().expect("copy back");
        for c in &group.plan().chunks {
            let whole_c = whole
                .plan()
                .chunks
                .iter()
                .find(|w| w.row_group == c.row_group && w.column == c.column)
                .unwrap();
            assert_eq!(
                &bytes[c.dest_offset as usize..(c.dest_offset + c.len) as usize],
                &all[whole_c.dest_offset as usize..(whole_c.dest_offset + whole_c.len) as usize]
            );
        }
        seen.extend_from_slice(group.row_groups());
    }
    assert_eq!(seen, whole.plan().row_groups);
}

#[test]
fn a_cold_read_goes_direct_and_a_hot_one_stays_buffered() {
    use std::os::fd::AsRawFd;
    let Some(ctx) = gpu() else { return };
    let dir = tempfile::tempdir().expect("scratch");
    if !gpu_parquet::check::try_o_direct(dir.path()).ok {
        common::skip("the scratch directory's file system refuses O_DIRECT");
        return;
    }
    let opts = PlanOptions {
        align: true,
        ..PlanOptions::default()
    };
    let (files, source, plan) = plan_mixed(dir.path(), opts);
    let b = StagedBackend::new(
        ctx.clone(),
        StagedOptions {
            threads: 2,
            buffer_size: 64 << 10,
            direct_when_cold: true,
            ..StagedOptions::default()
        },
    )
    .expect("staged backend");
    let want = std::fs::read(&files.mixed).expect("read");
    let check = |f: &gpu_parquet::io::Fetched<gpu_parquet::gpu::DeviceBuffer<u8>>| {
        let got = f.buffer.to_host().expect("copy back");
        for t in &plan.tasks {
            let (d, o, n) = (t.dest_offset as usize, t.offset as usize, t.len as usize);
            assert_eq!(&got[d..d + n], &want[o..o + n]);
        }
    };
    // Just read: its pages are cached, so buffered reads.
    let hot = b.fetch(&source, &plan).expect("hot fetch");
    assert!(
        !hot.log.notes.iter().any(|n| n.contains("O_DIRECT")),
        "{:?}",
        hot.log.notes
    );
    check(&hot);
    // Its pages dropped from the cache (clean, so the kernel may drop them): O_DIRECT.
    let file = std::fs::File::open(&files.mixed).expect("open");
    file.sync_all().expect("written back, so its pages can be dropped");
    // SAFETY: posix_fadvise on an open descriptor only advises the kernel.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let cold = b.fetch(&source, &plan).expect("cold fetch");
    assert!(
        cold.log.notes.iter().any(|n| n.contains("were not in the page cache")),
        "{:?}",
        cold.log.notes
    );
    check(&cold);
}

#[test]
fn o_direct_on_dev_shm() {
    let Some(ctx) = gpu() else { return };
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        common::skip("no /dev/shm");
        return;
    }
    let dir = tempfile::tempdir_in(shm).expect("scratch in /dev/shm");
    let opts = PlanOptions {
        align: true,
        ..PlanOptions::default()
    };
    let (files, source, plan) = plan_mixed(dir.path(), opts);
    let f = staged(&ctx, 2, 64 << 10, true)
        .fetch(&source, &plan)
        .expect("fetch falls back, never fails");
    let accepted = gpu_parquet::check::try_o_direct(dir.path()).ok;
    let noted = f.log.notes.iter().any(|n| n.contains("O_DIRECT"));
    assert_eq!(
        noted, !accepted,
        "O_DIRECT accepted={accepted}, notes {:?}",
        f.log.notes
    );
    let want = std::fs::read(&files.mixed).expect("read");
    let got = f.buffer.to_host().expect("copy back");
    for t in &plan.tasks {
        let (d, o, n) = (t.dest_offset as usize, t.offset as usize, t.len as usize);
        assert_eq!(&got[d..d + n], &want[o..o + n]);
    }
}

#[test]
fn device_oom_is_a_clear_error() {
    let Some(ctx) = gpu() else { return };
    let info = ctx.info().expect("info");
    let stream = Stream::of_context(&ctx);
    let e = DeviceBuffer::<u8>::alloc(&stream, (info.total_memory + (1 << 30)) as usize)
        .expect_err("more than the card has");
    let m = e.to_string();
    assert!(m.contains("allocating") && m.contains("bytes free"), "{m}");
    // The staged backend's fetch into a plan larger than memory is the same clear error, not a panic.
    let b = staged(&ctx, 1, 1 << 20, false);
    let dir = tempfile::tempdir().expect("scratch");
    let (_, source, mut plan) = plan_mixed(dir.path(), PlanOptions::default());
    plan.dest_len = info.total_memory + (1 << 30);
    assert!(b.fetch(&source, &plan).unwrap_err().to_string().contains("allocating"));
    // The context still works afterwards.
    run_suite(&b);
}

#[test]
fn short_file_is_a_short_read_on_every_gpu_backend() {
    let Some(ctx) = gpu() else { return };
    let scratch = tempfile::tempdir().expect("scratch");
    let files = conformance::write_test_files(scratch.path()).expect("files");
    conformance::check_short_read(&staged(&ctx, 4, 1 << 20, false), &files.mixed, scratch.path()).unwrap();
    if let Some((b, Ok(()))) = cufile(&ctx, CufileOptions::default()) {
        conformance::check_short_read(&b, &files.mixed, scratch.path()).unwrap();
    }
}

/// Runs everywhere: without CUDA, building a GPU backend fails with the reason, never a panic, and
/// `auto` reads into host memory saying why.
#[test]
fn no_cuda_means_clear_errors() {
    if gpu_parquet::gpu::cuda_present().is_ok() {
        println!("CUDA driver present: nothing to check here");
        return;
    }
    let e = GpuContext::new(0).unwrap_err().to_string();
    assert!(e.contains("libcuda"), "{e}");
    for kind in [BackendKind::Staged, BackendKind::Cufile] {
        let e = AnyBackend::new(kind, &IoPolicy::default(), 0).unwrap_err().to_string();
        assert!(e.contains("libcuda") && e.contains("--backend host"), "{e}");
    }
    let b = AnyBackend::new(BackendKind::Auto, &IoPolicy::default(), 0).expect("auto");
    assert!(!b.is_device());
    assert!(
        b.notes()
            .iter()
            .any(|n| n.contains("no GPU path") && n.contains("libcuda")),
        "{:?}",
        b.notes()
    );
    assert!(cf::version().is_err() || cf::present().is_ok());
}

/// A GPU that does not exist is an error, also for `auto` (which falls back to host memory only when
/// there is no usable GPU at all).
#[test]
fn a_gpu_that_does_not_exist_is_an_error() {
    let Some(_ctx) = gpu() else { return };
    let n = GpuContext::device_count();
    for kind in [BackendKind::Auto, BackendKind::Staged] {
        let e = AnyBackend::new(kind, &IoPolicy::default(), n).unwrap_err().to_string();
        assert!(
            e.contains(&format!("GPU {n} does not exist ({n} visible)")),
            "{kind}: {e}"
        );
    }
}

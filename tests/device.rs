//! GPU backends (staged, cuFile, auto) against the conformance suite, plus their error cases.
//!
//! Runs on the GPU machine from the crate root; on a machine without a CUDA driver every test prints
//! "skipped: no CUDA driver (<reason>)" and returns. Test files are written into scratch directories
//! by the suite, so no test data path is needed.

mod common;

use std::path::Path;
use std::sync::Arc;

use gpu_parquet::gpu::{GpuContext, cufile as cf};
use gpu_parquet::io::conformance;
use gpu_parquet::io::cufile::{CufileBackend, CufileOptions};
use gpu_parquet::io::policy::{AnyBackend, BackendKind, CompatMode, IoPolicy};
use gpu_parquet::io::staged::{StagedBackend, StagedOptions};
use gpu_parquet::io::{DestBuffer, IoBackend, IoPath};
use gpu_parquet::{Error, ParquetSource, PlanOptions, Projection, ReadPlan, RowGroupSelection};

/// Writes the conformance files into `dir`, opens `mixed` and plans all of it with `opts`.
fn plan_mixed(dir: &Path, opts: PlanOptions) -> (conformance::TestFiles, ParquetSource, ReadPlan) {
    let files = conformance::write_test_files(dir).expect("test files");
    let source = ParquetSource::open(&files.mixed).expect("open");
    let plan = ReadPlan::build(&source, &Projection::All, &RowGroupSelection::All, opts).expect("plan");
    (files, source, plan)
}

fn gpu() -> Option<Arc<GpuContext>> {
    match GpuContext::shared() {
        Ok(c) => Some(c),
        Err(e) => {
            common::skip(&format!("no CUDA driver ({e})"));
            None
        }
    }
}

/// The cuFile backend, and whether registration works in `dir` (`Err`: the refusal).
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
    let mut dest = ctx.alloc(plan.dest_len).expect("alloc");
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
    // fetch_into reuses the buffer: a second fetch gives the same bytes.
    let first = dest.to_host().expect("copy back");
    b.fetch_into(&source, &plan, &mut dest).expect("second fetch");
    assert_eq!(dest.to_host().expect("copy back"), first);
    // A buffer too small is refused, not overrun.
    let mut small = ctx.alloc(plan.dest_len / 2).expect("alloc");
    assert!(b.fetch_into(&source, &plan, &mut small).is_err());
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
fn auto_conformance_and_reasons() {
    let Some(_ctx) = gpu() else { return };
    for mode in [CompatMode::Auto, CompatMode::On] {
        let policy = IoPolicy {
            compat_mode: mode,
            threads: 4,
            ..IoPolicy::default()
        };
        let b = AnyBackend::new(BackendKind::Auto, &policy).expect("auto backend");
        run_suite(&b);
        let dir = tempfile::tempdir().expect("scratch");
        let (_, source, plan) = plan_mixed(dir.path(), PlanOptions::default());
        let f = b.fetch(&source, &plan).expect("fetch");
        for r in &f.log.tasks {
            assert_ne!(r.path, IoPath::Host, "auto with a GPU must not stay on the host");
            if mode == CompatMode::On {
                assert_eq!(r.path, IoPath::Staged);
                assert!(r.reason.contains("compat mode on"), "{}", r.reason);
            }
            if r.path == IoPath::Staged && mode == CompatMode::Auto {
                assert!(!r.reason.is_empty());
            }
        }
    }
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
    let e = ctx
        .alloc(info.total_memory + (1 << 30))
        .expect_err("more than the card has");
    let m = e.to_string();
    assert!(m.contains("allocating") && m.contains("bytes free"), "{m}");
    // The staged backend's fetch into a plan larger than memory is the same clear error, not a panic.
    let b = staged(&ctx, 1, 1 << 20, false);
    let dir = tempfile::tempdir().expect("scratch");
    let (_, source, mut plan) = plan_mixed(dir.path(), PlanOptions::default());
    plan.dest_len = info.total_memory + (1 << 30);
    assert!(b.fetch(&source, &plan).unwrap_err().to_string().contains("allocating"));
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

/// Runs everywhere: without CUDA, building a GPU backend fails with the reason, never a panic.
#[test]
fn no_cuda_means_clear_errors() {
    if gpu_parquet::gpu::cuda_present().is_ok() {
        println!("CUDA driver present: nothing to check here");
        return;
    }
    let e = GpuContext::new(0).unwrap_err().to_string();
    assert!(e.contains("libcuda"), "{e}");
    let e = AnyBackend::new(BackendKind::Staged, &IoPolicy::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("libcuda"), "{e}");
    let e = AnyBackend::new(BackendKind::Cufile, &IoPolicy::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("libcufile") || e.contains("libcuda"), "{e}");
    assert!(cf::version().is_err() || cf::present().is_ok());
}

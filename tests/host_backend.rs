//! The backend conformance suite ([`gpu_parquet::conformance`]) run against the host backend.

use gpu_parquet::conformance;
use gpu_parquet::io::host::HostBackend;

fn run(threads: usize) {
    let backend = HostBackend::new(threads).expect("thread pool");
    assert_eq!(backend.threads(), threads);
    let scratch = tempfile::tempdir().expect("scratch dir");
    if let Err(e) = conformance::run_all(&backend, scratch.path()) {
        panic!("host backend, {threads} threads: {e}");
    }
}

#[test]
fn conformance_1_thread() {
    run(1);
}

#[test]
fn conformance_2_threads() {
    run(2);
}

#[test]
fn conformance_8_threads() {
    run(8);
}

use gpu_parquet::io::host::HostBuffer;
use gpu_parquet::io::{IoBackend, IoLog};
use gpu_parquet::{ParquetSource, ReadPlan};

/// A host backend whose `fetch_into` is replaced by `f` (given the real backend), to show that the
/// suite catches what `f` gets wrong.
struct Faulty<F> {
    name: &'static str,
    inner: HostBackend,
    fetch_into: F,
}

impl<F> IoBackend for Faulty<F>
where
    F: Fn(&HostBackend, &ParquetSource, &ReadPlan, &mut HostBuffer) -> gpu_parquet::Result<IoLog> + Send + Sync,
{
    type Buffer = HostBuffer;
    fn name(&self) -> String {
        self.name.into()
    }
    fn alloc(&self, len: u64) -> gpu_parquet::Result<HostBuffer> {
        self.inner.alloc(len)
    }
    fn fetch_into(&self, source: &ParquetSource, plan: &ReadPlan, dest: &mut HostBuffer) -> gpu_parquet::Result<IoLog> {
        (self.fetch_into)(&self.inner, source, plan, dest)
    }
}

fn faulty<F>(name: &'static str, fetch_into: F) -> Faulty<F> {
    Faulty {
        name,
        inner: HostBackend::new(2).expect("pool"),
        fetch_into,
    }
}

fn mixed_file() -> (tempfile::TempDir, std::path::PathBuf) {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let files = conformance::write_test_files(scratch.path()).expect("test files");
    (scratch, files.mixed)
}

/// The suite must be able to fail: a backend that corrupts one byte is caught.
#[test]
fn conformance_catches_a_corrupting_backend() {
    let backend = faulty(
        "corrupt",
        |b: &HostBackend, source: &ParquetSource, plan: &ReadPlan, dest: &mut HostBuffer| {
            let log = b.fetch_into(source, plan, dest)?;
            if let Some(x) = dest.as_mut_slice()[..plan.dest_len as usize].last_mut() {
                *x ^= 0x5a;
            }
            Ok(log)
        },
    );
    let (_dir, mixed) = mixed_file();
    let err = conformance::check_plans(&backend, &mixed).expect_err("corruption must be detected");
    assert!(err.contains("differs from the file"), "{err}");
}

/// A backend whose log drops a record fails the log check.
#[test]
fn conformance_catches_an_inconsistent_log() {
    let backend = faulty(
        "forgetful",
        |b: &HostBackend, source: &ParquetSource, plan: &ReadPlan, dest: &mut HostBuffer| {
            let mut log = b.fetch_into(source, plan, dest)?;
            log.tasks.pop();
            Ok(log)
        },
    );
    let (_dir, mixed) = mixed_file();
    let err = conformance::check_plans(&backend, &mixed).expect_err("missing record must be detected");
    assert!(err.contains("task records"), "{err}");
}

/// A backend that accepts a destination too small (filling what fits) is caught.
#[test]
fn conformance_catches_a_backend_accepting_a_short_destination() {
    let backend = faulty(
        "careless",
        |b: &HostBackend, source: &ParquetSource, plan: &ReadPlan, dest: &mut HostBuffer| {
            let f = b.fetch(source, plan)?;
            let n = dest.as_slice().len().min(f.buffer.as_slice().len());
            dest.as_mut_slice()[..n].copy_from_slice(&f.buffer.as_slice()[..n]);
            Ok(f.log)
        },
    );
    let (_dir, mixed) = mixed_file();
    let err = conformance::check_fetch_into(&backend, &mixed).expect_err("must be detected");
    assert!(err.contains("one byte too small"), "{err}");
}

/// A host read tells its progress callback once, when it is done, with the selection's rows and bytes.
#[test]
fn a_host_read_reports_its_progress_once_done() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let reader = gpu_parquet::Reader::builder("testdata/flat_snappy_dict.parquet")
        .with_backend(gpu_parquet::BackendKind::Host)
        .with_row_groups([1])
        .with_progress(move |p| s.lock().unwrap().push(p))
        .build()
        .unwrap();
    let table = reader.read_batches().unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let p = seen[0];
    assert_eq!((p.steps_done, p.steps), (1, 1));
    assert_eq!(p.rows_done, table.num_rows() as u64);
    assert_eq!(p.rows, p.rows_done);
    assert!(p.rows < 2400, "one row group of the file's: {p:?}");
    assert_eq!(p.bytes_done, reader.plan().useful_bytes());
    assert_eq!(p.bytes, p.bytes_done);
}

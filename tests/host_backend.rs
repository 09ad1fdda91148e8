//! The backend conformance suite ([`gpu_parquet::io::conformance`]) run against the host backend.

use gpu_parquet::io::conformance;
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

/// The suite must be able to fail: a backend that corrupts one byte is caught.
#[test]
fn conformance_catches_a_corrupting_backend() {
    use bytes::Bytes;
    use gpu_parquet::io::{Fetched, IoBackend};
    use gpu_parquet::{ParquetSource, ReadPlan};

    struct Corrupt(HostBackend);
    impl IoBackend for Corrupt {
        type Buffer = Bytes;
        fn name(&self) -> String {
            "corrupt".into()
        }
        fn fetch(&self, source: &ParquetSource, plan: &ReadPlan) -> gpu_parquet::Result<Fetched<Bytes>> {
            let f = self.0.fetch(source, plan)?;
            let mut v = f.buffer.to_vec();
            if let Some(b) = v.last_mut() {
                *b ^= 0x5a;
            }
            Ok(Fetched {
                buffer: Bytes::from(v),
                log: f.log,
            })
        }
    }
    let scratch = tempfile::tempdir().expect("scratch dir");
    let files = conformance::write_test_files(scratch.path()).expect("test files");
    let backend = Corrupt(HostBackend::new(2).expect("pool"));
    let err = conformance::check_plans(&backend, &files.mixed).expect_err("corruption must be detected");
    assert!(err.contains("differs from the file"), "{err}");
}

/// A backend whose log drops a record fails the log check.
#[test]
fn conformance_catches_an_inconsistent_log() {
    use bytes::Bytes;
    use gpu_parquet::io::{Fetched, IoBackend};
    use gpu_parquet::{ParquetSource, ReadPlan};

    struct Forgetful(HostBackend);
    impl IoBackend for Forgetful {
        type Buffer = Bytes;
        fn name(&self) -> String {
            "forgetful".into()
        }
        fn fetch(&self, source: &ParquetSource, plan: &ReadPlan) -> gpu_parquet::Result<Fetched<Bytes>> {
            let mut f = self.0.fetch(source, plan)?;
            f.log.tasks.pop();
            Ok(f)
        }
    }
    let scratch = tempfile::tempdir().expect("scratch dir");
    let files = conformance::write_test_files(scratch.path()).expect("test files");
    let backend = Forgetful(HostBackend::new(1).expect("pool"));
    let err = conformance::check_plans(&backend, &files.mixed).expect_err("missing record must be detected");
    assert!(err.contains("task records"), "{err}");
}

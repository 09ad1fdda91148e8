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
    use gpu_parquet::io::host::HostBuffer;
    use gpu_parquet::io::{IoBackend, IoLog};
    use gpu_parquet::{ParquetSource, ReadPlan};

    struct Corrupt(HostBackend);
    impl IoBackend for Corrupt {
        type Buffer = HostBuffer;
        fn name(&self) -> String {
            "corrupt".into()
        }
        fn alloc(&self, len: u64) -> gpu_parquet::Result<HostBuffer> {
            self.0.alloc(len)
        }
        fn fetch_into(
            &self,
            source: &ParquetSource,
            plan: &ReadPlan,
            dest: &mut HostBuffer,
        ) -> gpu_parquet::Result<IoLog> {
            let log = self.0.fetch_into(source, plan, dest)?;
            if let Some(b) = dest.as_mut_slice()[..plan.dest_len as usize].last_mut() {
                *b ^= 0x5a;
            }
            Ok(log)
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
    use gpu_parquet::io::host::HostBuffer;
    use gpu_parquet::io::{IoBackend, IoLog};
    use gpu_parquet::{ParquetSource, ReadPlan};

    struct Forgetful(HostBackend);
    impl IoBackend for Forgetful {
        type Buffer = HostBuffer;
        fn name(&self) -> String {
            "forgetful".into()
        }
        fn alloc(&self, len: u64) -> gpu_parquet::Result<HostBuffer> {
            self.0.alloc(len)
        }
        fn fetch_into(
            &self,
            source: &ParquetSource,
            plan: &ReadPlan,
            dest: &mut HostBuffer,
        ) -> gpu_parquet::Result<IoLog> {
            let mut log = self.0.fetch_into(source, plan, dest)?;
            log.tasks.pop();
            Ok(log)
        }
    }
    let scratch = tempfile::tempdir().expect("scratch dir");
    let files = conformance::write_test_files(scratch.path()).expect("test files");
    let backend = Forgetful(HostBackend::new(1).expect("pool"));
    let err = conformance::check_plans(&backend, &files.mixed).expect_err("missing record must be detected");
    assert!(err.contains("task records"), "{err}");
}

/// A backend that writes past a destination too small is caught (`fetch_into` must refuse it).
#[test]
fn conformance_catches_a_backend_accepting_a_short_destination() {
    use gpu_parquet::io::host::HostBuffer;
    use gpu_parquet::io::{IoBackend, IoLog};
    use gpu_parquet::{ParquetSource, ReadPlan};

    struct Careless(HostBackend);
    impl IoBackend for Careless {
        type Buffer = HostBuffer;
        fn name(&self) -> String {
            "careless".into()
        }
        fn alloc(&self, len: u64) -> gpu_parquet::Result<HostBuffer> {
            self.0.alloc(len)
        }
        fn fetch_into(
            &self,
            source: &ParquetSource,
            plan: &ReadPlan,
            dest: &mut HostBuffer,
        ) -> gpu_parquet::Result<IoLog> {
            // Reads into a fresh buffer and reports success whatever `dest` holds.
            let f = self.0.fetch(source, plan)?;
            let n = dest.as_slice().len().min(f.buffer.as_slice().len());
            dest.as_mut_slice()[..n].copy_from_slice(&f.buffer.as_slice()[..n]);
            Ok(f.log)
        }
    }
    let scratch = tempfile::tempdir().expect("scratch dir");
    let files = conformance::write_test_files(scratch.path()).expect("test files");
    let backend = Careless(HostBackend::new(1).expect("pool"));
    let err = conformance::check_fetch_into(&backend, &files.mixed).expect_err("must be detected");
    assert!(err.contains("one byte too small"), "{err}");
}

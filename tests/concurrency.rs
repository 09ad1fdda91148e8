//! Many readers on many threads in one process: some sharing one backend (its thread pool and
//! buffer pool), some with their own, reading whole tables, streams of row groups and projections at
//! once. Every result must equal arrow-rs's, every report must account for exactly its own plan (its
//! bytes, its reads), and the whole must finish (a deadlock shows as the timeout). On a GPU machine
//! the same with the device decoder on one shared GPU; elsewhere that test says why it skips.

mod common;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use arrow::record_batch::RecordBatch;
use gpu_parquet::io::select::AnyBackend;
use gpu_parquet::{BackendKind, Reader};

const THREADS: usize = 8;
const ROUNDS: usize = 4;
const TIMEOUT: Duration = Duration::from_secs(120);

fn files() -> Vec<PathBuf> {
    [
        "flat_plain.parquet",
        "flat_snappy_dict.parquet",
        "flat_zstd.parquet",
        "nested.parquet",
    ]
    .iter()
    .map(|f| common::testdata_dir().join(f))
    .collect()
}

/// What one read checks: the table equals `want`, and the report's bytes and reads are the plan's
/// and the log's.
fn check(what: &str, reader: &Reader, want: &RecordBatch) {
    let chunks = reader.read().unwrap_or_else(|e| panic!("{what}: {e}"));
    let report = chunks.report();
    let plan_bytes: u64 = reader.plan().chunks.iter().map(|c| c.len).sum();
    assert_eq!(report.useful_bytes, plan_bytes, "{what}: useful bytes");
    let logged_reads: u64 = chunks.log().tasks.iter().map(|t| t.reads).sum();
    assert_eq!(report.total.total_reads(), logged_reads, "{what}: reads");
    let logged_bytes: u64 = chunks.log().tasks.iter().map(|t| t.bytes).sum();
    assert_eq!(report.total.total_bytes(), logged_bytes, "{what}: bytes");
    let got = chunks
        .decode()
        .and_then(|t| t.concat())
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(&got, want, "{what}: table");
}

/// [`check`], then the same read decoded on the GPU, equal to `want`.
fn check_gpu(what: &str, reader: &Reader, want: &RecordBatch) {
    check(what, reader, want);
    let read = reader.read_device().unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = read.table.to_host().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(&got, want, "{what}: GPU-decoded table");
}

/// The backend a reader of `file` builds for `kind`, to share with other readers.
fn backend_of(file: &Path, kind: BackendKind) -> Arc<AnyBackend> {
    Reader::builder(file)
        .with_backend(kind)
        .build()
        .expect("reader")
        .io()
        .clone()
}

/// arrow-rs's table of each file.
fn arrow_rs_tables(files: &[PathBuf]) -> Arc<Vec<RecordBatch>> {
    Arc::new(
        files
            .iter()
            .map(|f| common::arrow_rs_read(f).expect("arrow-rs"))
            .collect(),
    )
}

/// Runs `body(thread, round)` on [`THREADS`] threads started together, failing on a panic or when
/// they have not all finished within [`TIMEOUT`].
fn on_threads(body: impl Fn(usize, usize) + Send + Sync + 'static) {
    let body = Arc::new(body);
    let start = Arc::new(Barrier::new(THREADS));
    let (tx, rx) = mpsc::channel();
    for t in 0..THREADS {
        let (body, start, tx) = (body.clone(), start.clone(), tx.clone());
        std::thread::spawn(move || {
            start.wait();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                for round in 0..ROUNDS {
                    body(t, round);
                }
            }));
            let _ = tx.send((t, r.is_ok()));
        });
    }
    drop(tx);
    for _ in 0..THREADS {
        match rx.recv_timeout(TIMEOUT) {
            Ok((t, ok)) => assert!(ok, "thread {t} failed (its panic is printed above)"),
            Err(_) => panic!("not every thread finished within {TIMEOUT:?}: a deadlock?"),
        }
    }
}

#[test]
fn many_host_readers_on_many_threads_agree_and_account_for_their_own_reads() {
    let files = files();
    let wants = arrow_rs_tables(&files);
    // One backend shared by half the readers.
    let shared = backend_of(&files[0], BackendKind::Host);
    let files = Arc::new(files);
    on_threads(move |t, round| {
        let k = (t + round) % files.len();
        let path: &Path = &files[k];
        let mut b = Reader::builder(path).with_backend(BackendKind::Host);
        if t % 2 == 0 {
            b = b.with_io(shared.clone());
        }
        let reader = b.build().expect("reader");
        let what = format!("thread {t} round {round} {}", path.display());
        check(&what, &reader, &wants[k]);
        // A stream of row groups on the same reader: the same rows, in order.
        let mut rows = 0;
        for group in reader.stream().expect("stream") {
            rows += group.and_then(|g| g.decode()).expect("group").num_rows();
        }
        assert_eq!(rows, wants[k].num_rows(), "{what}: streamed rows");
    });
}

#[test]
fn many_gpu_readers_on_one_device_agree() {
    if !common::gpu_decoder_available() {
        return;
    }
    let files = Arc::new(files());
    let wants = arrow_rs_tables(&files);
    on_threads(move |t, round| {
        let k = (t + round) % files.len();
        let reader = Reader::builder(&files[k])
            .with_backend(BackendKind::Auto)
            .build()
            .expect("reader");
        let what = format!("thread {t} round {round} {}", files[k].display());
        check_gpu(&what, &reader, &wants[k]);
    });
}

#[test]
fn gpu_readers_sharing_one_staged_backend_agree_from_plain_and_rayon_threads() {
    if !common::gpu_decoder_available() {
        return;
    }
    let files = Arc::new(files());
    let wants = arrow_rs_tables(&files);
    // Every reader on one staged backend: its fetches meet, one has the backend's threads and the
    // others start their own. Half of them fetch from a rayon pool's threads, where the backend never
    // waits on its own pool (rayon would run other jobs of the caller's pool meanwhile).
    let shared = backend_of(&files[0], BackendKind::Staged);
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("a rayon pool"),
    );
    on_threads(move |t, round| {
        let k = (t + round) % files.len();
        let reader = Reader::builder(&files[k])
            .with_backend(BackendKind::Staged)
            .with_io(shared.clone())
            .build()
            .expect("reader");
        let what = format!("thread {t} round {round} {}", files[k].display());
        let read = || check_gpu(&what, &reader, &wants[k]);
        if t % 2 == 1 { pool.install(read) } else { read() }
    });
}

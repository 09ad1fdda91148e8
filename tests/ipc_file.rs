//! The Arrow IPC file writer per kind of output path: new paths, regular files, symlinks, the input file
//! itself, character devices and directories.

use std::fs::File;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, DictionaryArray, Int32Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};
use arrow::ipc::reader::FileReader;
use arrow::record_batch::RecordBatch;
use gpu_parquet::Error;
use gpu_parquet::ipc_file::{SpecialFile, WriteOutcome, write_ipc_file};

mod common;

fn batch(ids: std::ops::Range<i64>) -> RecordBatch {
    let names: Vec<String> = ids.clone().map(|i| format!("n{i}")).collect();
    RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from_iter_values(ids)) as _),
        ("name", Arc::new(StringArray::from(names)) as _),
    ])
    .expect("batch")
}

/// The ids of every batch in the IPC file at `path`.
fn read_ids(path: &Path) -> Vec<i64> {
    let reader = FileReader::try_new(File::open(path).expect("open"), None).expect("an Arrow IPC file");
    let mut ids = Vec::new();
    for b in reader {
        let b = b.expect("batch");
        let col = b.column(0).as_any().downcast_ref::<Int64Array>().expect("int64 ids");
        ids.extend(col.values().iter().copied());
    }
    ids
}

/// Names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn write(out: &Path, batches: &[RecordBatch], inputs: &[&Path]) -> Result<WriteOutcome, Error> {
    let schema: SchemaRef = batches[0].schema();
    write_ipc_file(out, &schema, batches, inputs)
}

#[test]
fn new_path_is_created() {
    let dir = tempfile::tempdir().expect("scratch");
    let out = dir.path().join("new.arrow");
    let outcome = write(&out, &[batch(0..10), batch(10..20)], &[]).expect("write");
    assert_eq!(outcome, WriteOutcome::Created { target: out.clone() });
    assert_eq!(read_ids(&out), (0..20).collect::<Vec<_>>());
    assert_eq!(entries(dir.path()), ["new.arrow"]);
}

#[test]
fn a_bare_file_name_is_created_in_the_current_directory() {
    // A bare file name has an empty parent: the temporary file must go to ".". Every other test here
    // uses absolute paths, so changing the current directory does not disturb them.
    let dir = tempfile::tempdir().expect("scratch");
    let before = std::env::current_dir().expect("cwd");
    std::env::set_current_dir(dir.path()).expect("cd");
    let result = write(Path::new("bare.arrow"), &[batch(0..3)], &[]);
    std::env::set_current_dir(before).expect("cd back");
    let outcome = result.expect("write");
    assert_eq!(
        outcome,
        WriteOutcome::Created {
            target: PathBuf::from("bare.arrow")
        }
    );
    assert_eq!(read_ids(&dir.path().join("bare.arrow")), [0, 1, 2]);
    assert_eq!(entries(dir.path()), ["bare.arrow"]);
}

#[test]
fn replacing_a_regular_file_leaves_no_temporaries_and_keeps_its_mode() {
    let dir = tempfile::tempdir().expect("scratch");
    let out = dir.path().join("old.arrow");
    std::fs::write(&out, b"old content").expect("old file");
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let outcome = write(&out, &[batch(5..8)], &[]).expect("write");
    assert_eq!(outcome, WriteOutcome::Replaced { target: out.clone() });
    assert_eq!(read_ids(&out), [5, 6, 7]);
    assert_eq!(entries(dir.path()), ["old.arrow"]);
    let mode = std::fs::metadata(&out).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}

#[test]
fn a_batch_not_matching_the_schema_is_refused_and_the_old_file_kept() {
    let dir = tempfile::tempdir().expect("scratch");
    let out = dir.path().join("keep.arrow");
    std::fs::write(&out, b"old content").expect("old file");
    let other = RecordBatch::try_from_iter([("id", Arc::new(Int32Array::from(vec![1, 2])) as _)]).expect("batch");
    let err = write(&out, &[batch(0..4), other], &[]).expect_err("a mismatched batch must fail");
    let msg = err.to_string();
    assert!(msg.contains(&out.display().to_string()), "{msg}");
    assert!(msg.contains("record batch 1 does not match"), "{msg}");
    assert!(!msg.contains(".gpu-parquet-"), "error names the temporary file: {msg}");
    assert_eq!(std::fs::read(&out).expect("read"), b"old content");
    assert_eq!(entries(dir.path()), ["keep.arrow"]);
}

/// Set in the child process of [`a_write_failing_midway_leaves_the_old_file_untouched`]: the output path.
const FSIZE_CHILD: &str = "GPU_PARQUET_TEST_FSIZE_CHILD";

#[test]
fn a_write_failing_midway_leaves_the_old_file_untouched() {
    // The write must fail after the temporary file has grown (read-only directories do not stop root):
    // a child process of this test binary runs under RLIMIT_FSIZE = 64 KiB, which applies to root too,
    // with SIGXFSZ ignored so the write fails with EFBIG instead of killing it.
    if let Some(out) = std::env::var_os(FSIZE_CHILD) {
        let err = write(Path::new(&out), &[batch(0..200_000)], &[]).expect_err("a 1.6 MB write over a 64 KiB limit");
        println!("CHILD-ERROR: {err}");
        return;
    }
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().expect("scratch");
    let out = dir.path().join("keep.arrow");
    std::fs::write(&out, b"old content").expect("old file");
    let mut cmd = std::process::Command::new(std::env::current_exe().expect("test binary"));
    cmd.args([
        "--exact",
        "a_write_failing_midway_leaves_the_old_file_untouched",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(FSIZE_CHILD, &out);
    // SAFETY: signal and setrlimit are async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 64 << 10,
                rlim_max: 64 << 10,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.output().expect("run the child");
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    let msg = stdout
        .lines()
        .find_map(|l| l.split_once("CHILD-ERROR: ").map(|(_, m)| m.to_string()))
        .expect("the child's error");
    assert!(msg.contains(&out.display().to_string()), "{msg}");
    assert!(msg.contains("File too large"), "{msg}");
    assert!(!msg.contains(".gpu-parquet-"), "error names the temporary file: {msg}");
    assert_eq!(std::fs::read(&out).expect("read"), b"old content");
    assert_eq!(entries(dir.path()), ["keep.arrow"], "a temporary file was left behind");
}

#[test]
fn a_symlink_is_followed_and_kept() {
    let dir = tempfile::tempdir().expect("scratch");
    let real = dir.path().join("real.arrow");
    let link = dir.path().join("link.arrow");
    std::fs::write(&real, b"old content").expect("old file");
    std::os::unix::fs::symlink("real.arrow", &link).expect("symlink");
    let outcome = write(&link, &[batch(0..5)], &[]).expect("write");
    let canonical = std::fs::canonicalize(&real).expect("canonical");
    assert_eq!(outcome, WriteOutcome::Replaced { target: canonical });
    let lm = std::fs::symlink_metadata(&link).expect("lstat");
    assert!(lm.file_type().is_symlink(), "the link was replaced by a regular file");
    assert_eq!(
        std::fs::read_link(&link).expect("readlink"),
        PathBuf::from("real.arrow")
    );
    assert_eq!(read_ids(&real), [0, 1, 2, 3, 4]);
    assert_eq!(entries(dir.path()), ["link.arrow", "real.arrow"]);
}

#[test]
fn a_dangling_symlink_creates_the_file_it_names() {
    let dir = tempfile::tempdir().expect("scratch");
    std::fs::create_dir(dir.path().join("sub")).expect("subdir");
    let link = dir.path().join("link.arrow");
    std::os::unix::fs::symlink("sub/target.arrow", &link).expect("symlink");
    let outcome = write(&link, &[batch(0..2)], &[]).expect("write");
    let target = dir.path().join("sub/target.arrow");
    assert_eq!(outcome, WriteOutcome::Created { target: target.clone() });
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("lstat")
            .file_type()
            .is_symlink()
    );
    assert_eq!(read_ids(&target), [0, 1]);
}

#[test]
fn the_input_file_is_never_overwritten() {
    let dir = tempfile::tempdir().expect("scratch");
    let input = dir.path().join("input.parquet");
    std::fs::write(&input, b"PAR1 pretend parquet PAR1").expect("input");
    let link = dir.path().join("link.arrow");
    std::os::unix::fs::symlink(&input, &link).expect("symlink");
    let hard = dir.path().join("hard.arrow");
    std::fs::hard_link(&input, &hard).expect("hard link");
    for out in [&input, &link, &hard] {
        let err = write(out, &[batch(0..3)], &[&input]).expect_err("writing over the input must be refused");
        let msg = err.to_string();
        assert!(matches!(err, Error::InvalidRequest { .. }), "{msg}");
        assert!(msg.contains("overwrite the input file being read"), "{msg}");
        assert!(msg.contains(&out.display().to_string()), "{msg}");
        assert_eq!(std::fs::read(&input).expect("read"), b"PAR1 pretend parquet PAR1");
    }
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("lstat")
            .file_type()
            .is_symlink()
    );
    assert_eq!(entries(dir.path()), ["hard.arrow", "input.parquet", "link.arrow"]);
}

#[test]
fn dev_null_is_written_through_and_stays_a_device() {
    let null = Path::new("/dev/null");
    let outcome = write(null, &[batch(0..100)], &[]).expect("writing to /dev/null");
    assert_eq!(
        outcome,
        WriteOutcome::WroteThrough {
            target: null.to_path_buf(),
            kind: SpecialFile::CharDevice
        }
    );
    assert!(
        std::fs::symlink_metadata(null)
            .expect("lstat")
            .file_type()
            .is_char_device()
    );
}

#[test]
fn a_pipe_behind_a_proc_fd_link_is_written_through() {
    // /dev/stdout is /proc/self/fd/1; when that is a pipe the link leads to "pipe:[N]", which has no
    // canonical path: the writer must open the link in place rather than fail to resolve it.
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: both descriptors were just created and are owned here alone.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        File::from(read_end).read_to_end(&mut bytes).map(|_| bytes)
    });
    let link = PathBuf::from(format!("/proc/self/fd/{}", fds[1]));
    let result = write(&link, &[batch(0..50)], &[]);
    drop(write_end);
    let bytes = reader.join().expect("reader thread").expect("read the pipe");
    let outcome = result.expect("writing into a pipe");
    assert!(
        matches!(
            outcome,
            WriteOutcome::WroteThrough {
                kind: SpecialFile::Fifo,
                ..
            }
        ),
        "{outcome:?}"
    );
    let ipc = FileReader::try_new(std::io::Cursor::new(bytes), None).expect("an Arrow IPC file");
    let rows: usize = ipc.map(|b| b.expect("batch").num_rows()).sum();
    assert_eq!(rows, 50);
}

#[test]
fn dev_full_fails_naming_it_and_stays_a_device() {
    let full = Path::new("/dev/full");
    match std::fs::symlink_metadata(full) {
        Ok(m) if m.file_type().is_char_device() => {}
        _ => {
            common::skip("/dev/full does not exist or is not a character device here");
            return;
        }
    }
    let err = write(full, &[batch(0..100)], &[]).expect_err("/dev/full must fail");
    let msg = err.to_string();
    assert!(msg.contains("/dev/full"), "{msg}");
    assert!(msg.contains("No space left on device"), "{msg}");
    assert!(!msg.contains(".tmp"), "{msg}");
    assert!(
        std::fs::symlink_metadata(full)
            .expect("lstat")
            .file_type()
            .is_char_device()
    );
}

#[test]
fn a_directory_is_refused() {
    let dir = tempfile::tempdir().expect("scratch");
    let sub = dir.path().join("out");
    std::fs::create_dir(&sub).expect("subdir");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&sub, &link).expect("symlink");
    for out in [&sub, &link] {
        let err = write(out, &[batch(0..3)], &[]).expect_err("a directory must be refused");
        let msg = err.to_string();
        assert!(matches!(err, Error::InvalidRequest { .. }), "{msg}");
        assert!(msg.contains("a directory"), "{msg}");
        assert!(msg.contains(&out.display().to_string()), "{msg}");
    }
    assert!(sub.is_dir());
    assert!(entries(&sub).is_empty());
    assert_eq!(entries(dir.path()), ["link", "out"]);
}

#[test]
fn batches_with_their_own_dictionaries_are_merged_into_one() {
    let dict = |values: &[&str]| {
        let keys = Int32Array::from_iter_values(0..values.len() as i32);
        let array = DictionaryArray::<Int32Type>::try_new(keys, Arc::new(StringArray::from(values.to_vec())))
            .expect("dictionary");
        let schema = Arc::new(Schema::new(vec![Field::new(
            "d",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            false,
        )]));
        RecordBatch::try_new(schema, vec![Arc::new(array)]).expect("batch")
    };
    let dir = tempfile::tempdir().expect("scratch");
    let out = dir.path().join("dict.arrow");
    write(&out, &[dict(&["a", "b"]), dict(&["c", "d", "e"])], &[]).expect("write");
    let reader = FileReader::try_new(File::open(&out).expect("open"), None).expect("an Arrow IPC file");
    let batches: Vec<RecordBatch> = reader.map(|b| b.expect("batch")).collect();
    assert_eq!(batches.len(), 1, "two dictionaries must be merged into one batch");
    let d = batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<DictionaryArray<Int32Type>>()
        .expect("dictionary column");
    let values = d.downcast_dict::<StringArray>().expect("string values");
    let got: Vec<&str> = values.into_iter().map(|v| v.unwrap_or("<null>")).collect();
    assert_eq!(got, ["a", "b", "c", "d", "e"]);
    assert_eq!(d.len(), 5);
}

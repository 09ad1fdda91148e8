//! Files written by other Parquet writers (pyarrow, polars, duckdb, fastparquet) through our pipeline:
//! open, plan every column of every row group, fetch with the host backend, decode from the fetched
//! bytes only; the result must equal arrow-rs's own full read of the file, value for value and schema
//! too. Where arrow-rs refuses a file, ours must refuse it as well, with an error.
//!
//! `tests/writers/make_files.py` writes the files (flat types, nulls, nested types, dictionary and
//! plain, every codec each writer has, data page v2, several and small row groups, page indexes).
//! The binary gets the same files: `read FILE --verify --output OUT.arrow` must write what arrow-rs reads.
//!
//! Without python3 or without any writer the test says so and passes, except under CI (`CI=true`),
//! where the writers are installed by `.ci/run` and a missing one fails the test.

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use gpu_parquet::panic_guard::contain_panics;
use gpu_parquet::{Error, Location, ParquetSource};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// The writers the script knows; under CI every one must be importable.
const WRITERS: [&str; 4] = ["pyarrow", "polars", "duckdb", "fastparquet"];

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Skips (prints why and returns) outside CI; fails under CI, where the writers must be present.
fn skip_or_fail(why: &str) {
    assert!(!in_ci(), "CI=true but {why} (.ci/run installs the writers)");
    common::skip(why);
}

fn script() -> PathBuf {
    // The current directory is the crate root under `cargo test`; the manifest dir is the fallback.
    let local = PathBuf::from("tests/writers/make_files.py");
    if local.is_file() {
        return local;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/writers/make_files.py")
}

/// Our reader over the whole file, on the host path.
fn ours(path: &Path) -> Result<RecordBatch, Error> {
    gpu_parquet::Reader::builder(path)
        .with_backend(gpu_parquet::BackendKind::Host)
        .with_policy(gpu_parquet::IoPolicy {
            threads: 2,
            ..Default::default()
        })
        .build()?
        .read_batches()?
        .concat()
}

/// arrow-rs reading the file its own way, batches concatenated (panics contained).
fn arrow_rs(path: &Path) -> Result<RecordBatch, String> {
    let loc = Location::file(path);
    contain_panics(&loc, || {
        let perr = |e| Error::parquet(loc.clone(), e);
        let file = File::open(path).map_err(|e| Error::io(loc.clone(), "open", e))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.build())
            .map_err(perr)?;
        let schema = arrow::record_batch::RecordBatchReader::schema(&reader);
        let batches = reader.collect::<Result<Vec<_>, _>>().map_err(|e| perr(e.into()))?;
        arrow::compute::concat_batches(&schema, &batches).map_err(|e| perr(e.into()))
    })
    .map_err(|e| e.to_string())
}

/// Rows the footer claims.
fn footer_rows(path: &Path) -> i64 {
    let source = ParquetSource::open(path).expect("the footer opens");
    source.metadata().file_metadata().num_rows()
}

/// The files make_files.py wrote: (writer, writer version, file name), in a folder that lives as long
/// as this value.
struct Written {
    dir: tempfile::TempDir,
    files: Vec<(String, String, String)>,
    writers: usize,
}

/// Runs make_files.py into a fresh folder; `None` (after printing why) where that cannot run here.
fn write_files() -> Option<Written> {
    let python = Command::new("python3").arg("--version").output();
    if !python.as_ref().is_ok_and(|o| o.status.success()) {
        skip_or_fail("python3 is not available");
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let out = Command::new("python3")
        .arg(script())
        .arg(dir.path())
        .output()
        .expect("run python3");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "make_files.py failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    println!("writing took {:.1} s", started.elapsed().as_secs_f64());

    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("manifest.json")).expect("the script writes manifest.json"),
    )
    .expect("manifest.json is JSON");
    let missing: Vec<String> = manifest["missing"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k} ({})", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    let writers = manifest["writers"].as_object().cloned().unwrap_or_default();
    if !missing.is_empty() {
        println!("missing writers: {}", missing.join(", "));
        if in_ci() {
            panic!("CI=true but writers are missing: {}", missing.join(", "));
        }
    }
    if writers.is_empty() {
        skip_or_fail("no Parquet writer is importable by python3");
        return None;
    }

    // Every file the manifest lists, and nothing else, is in the folder.
    let mut files = Vec::new();
    for (w, entry) in &writers {
        assert!(WRITERS.contains(&w.as_str()), "unexpected writer {w}");
        let version = entry["version"].as_str().unwrap_or("?").to_string();
        let listed = entry["files"].as_array().expect("files list");
        assert!(!listed.is_empty(), "{w} wrote no files");
        for f in listed {
            files.push((w.clone(), version.clone(), f.as_str().expect("file name").to_string()));
        }
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".parquet"))
        .collect();
    on_disk.sort();
    let mut names: Vec<String> = files.iter().map(|f| f.2.clone()).collect();
    names.sort();
    assert_eq!(on_disk, names, "files on disk differ from the manifest");
    Some(Written {
        dir,
        files,
        writers: writers.len(),
    })
}

#[test]
fn files_from_other_writers_decode_like_arrow_rs() {
    let Some(written) = write_files() else { return };
    let (dir, listed) = (&written.dir, &written.files);
    let (mut same, mut both_fail) = (0usize, Vec::new());
    let mut failures = Vec::new();
    let compare_started = Instant::now();
    for (writer, version, name) in listed {
        let path = dir.path().join(name);
        match (ours(&path), arrow_rs(&path)) {
            (Ok(a), Ok(b)) => {
                if a != b {
                    failures.push(format!(
                        "{name} ({writer} {version}): values differ from arrow-rs's\n  ours:  {:?}\n  arrow: {:?}",
                        a.schema(),
                        b.schema()
                    ));
                } else if a.num_rows() as i64 != footer_rows(&path) {
                    failures.push(format!(
                        "{name}: {} rows decoded, the footer says {}",
                        a.num_rows(),
                        footer_rows(&path)
                    ));
                } else {
                    same += 1;
                    println!("same       {name}: {} rows x {} columns", a.num_rows(), a.num_columns());
                }
            }
            (Err(e), Err(theirs)) => {
                let msg = e.to_string();
                if matches!(e, Error::DecoderPanic { .. }) {
                    failures.push(format!("{name}: a contained panic, not an error: {msg}"));
                } else if !msg.contains(name.as_str()) {
                    failures.push(format!("{name}: the error does not name the file: {msg}"));
                } else {
                    println!("both fail  {name}: ours: {msg}; arrow-rs: {theirs}");
                    both_fail.push(name.clone());
                }
            }
            (Err(e), Ok(b)) => failures.push(format!(
                "{name} ({writer} {version}): we fail ({e}) where arrow-rs reads {} rows",
                b.num_rows()
            )),
            (Ok(a), Err(e)) => failures.push(format!(
                "{name} ({writer} {version}): we read {} rows where arrow-rs fails: {e}",
                a.num_rows()
            )),
        }
    }
    println!(
        "{} files from {} writers: {same} equal to arrow-rs, {} refused by both, {} failures; compared in {:.1} s",
        listed.len(),
        written.writers,
        both_fail.len(),
        failures.len(),
        compare_started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // These writers' files are mainstream: arrow-rs is expected to read nearly all of them, so a
    // regression that makes both sides fail cannot pass unnoticed.
    assert!(
        both_fail.len() * 10 <= listed.len(),
        "too many files refused by both readers: {both_fail:?}"
    );
}

/// The Arrow IPC file the binary wrote, batches concatenated.
fn read_ipc(path: &Path) -> Result<RecordBatch, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let reader = arrow::ipc::reader::FileReader::try_new(file, None).map_err(|e| e.to_string())?;
    let schema = reader.schema();
    let batches = reader.collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
    arrow::compute::concat_batches(&schema, &batches).map_err(|e| e.to_string())
}

#[test]
fn files_from_other_writers_through_the_binary_equal_arrow_rs() {
    let Some(written) = write_files() else { return };
    let out = written.dir.path().join("out.arrow");
    let mut failures = Vec::new();
    let started = Instant::now();
    for (writer, version, name) in &written.files {
        let path = written.dir.path().join(name);
        let _ = std::fs::remove_file(&out);
        let run = Command::new(env!("CARGO_BIN_EXE_gpu-parquet"))
            .arg("read")
            .arg(&path)
            .arg("--verify")
            .arg("--output")
            .arg(&out)
            .env_remove("RUST_BACKTRACE")
            .output()
            .expect("run gpu-parquet");
        let stderr = String::from_utf8_lossy(&run.stderr);
        let theirs = arrow_rs(&path);
        match (run.status.success(), theirs) {
            (true, Ok(theirs)) => match read_ipc(&out) {
                Ok(ours) if ours == theirs => println!("same       {name}: {} rows", ours.num_rows()),
                Ok(_) => failures.push(format!(
                    "{name} ({writer} {version}): the IPC output differs from arrow-rs"
                )),
                Err(e) => failures.push(format!("{name}: the output is not a readable IPC file: {e}")),
            },
            (false, Err(e)) => println!("both fail  {name}: {} / arrow-rs: {e}", stderr.trim_end()),
            (true, Err(e)) => failures.push(format!("{name}: exit 0 where arrow-rs fails: {e}")),
            (false, Ok(_)) => failures.push(format!(
                "{name} ({writer} {version}): {} where arrow-rs reads it: {}",
                run.status,
                stderr.trim_end()
            )),
        }
        if !run.status.success() {
            assert!(
                stderr.lines().count() == 1 && stderr.starts_with("error: ") && !stderr.contains("panicked"),
                "{name}: expected one error line, got:\n{stderr}"
            );
        }
    }
    println!(
        "{} files through the binary in {:.1} s, {} failures",
        written.files.len(),
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

//! The `gpu-parquet` binary, run as a user runs it.
//!
//! - `read FILE --verify --output OUT.arrow`: exit 0, and the Arrow IPC file equals arrow-rs's own read
//!   of the Parquet file (schema and values), for the bundled files and the whole parquet-testing corpus;
//! - `--columns` / `--row-groups`: the output equals arrow-rs's projected read, and the `--json` report
//!   lists exactly the selected column chunks, with the footer's byte ranges, and nothing else fetched;
//! - `inspect` (table and JSON);
//! - damaged input (`bad_data`, truncated and corrupted copies, encrypted files) and user mistakes:
//!   exit status 1 and exactly one line on stderr, `error: ...` naming the file, never a panic; a damaged
//!   file may be read only where arrow-rs reads it too, to the same values;
//! - `--backend auto` on a machine without CUDA reads into host memory and says why; `check` gives a
//!   verdict for every I/O path.
//!
//! Every run is bounded: a child still running after [`RUN_TIMEOUT`] is killed and the test fails.
//! The corpus is found through `GPU_PARQUET_TESTING`, else `../shared/parquet-testing` (from the current
//! directory, then from the crate root); without it those tests print why and pass.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use gpu_parquet::conformance::SeededRng;
use gpu_parquet::panic_guard::contain_panics;
use gpu_parquet::{Error, Location};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use serde_json::Value;

mod common;
use common::{collect, corpus, files_under, name_ends_with, reference, regions};

const BIN: &str = env!("CARGO_BIN_EXE_gpu-parquet");

/// Longest a single run of the binary may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(20);

/// What one run of the binary did.
#[derive(Debug)]
struct Run {
    what: String,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// Requires exit status 0 and a quiet stderr.
    fn assert_ok(&self) {
        assert!(
            self.ok() && self.stderr.is_empty(),
            "{}: exit {:?}\nstderr: {}",
            self.what,
            self.code,
            self.stderr
        );
    }

    /// Requires exit status 1 and exactly one stderr line, `error: ...`, that mentions `names`.
    fn assert_one_error_line(&self, names: &str) {
        let what = &self.what;
        assert_eq!(self.code, Some(1), "{what}: exit status\nstderr: {}", self.stderr);
        assert!(
            !self.stderr.contains("panicked") && !self.stderr.contains("RUST_BACKTRACE"),
            "{what}: a panic reached the user:\n{}",
            self.stderr
        );
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert!(
            lines.len() == 1 && self.stderr.ends_with('\n'),
            "{what}: expected one stderr line, got {}:\n{}",
            lines.len(),
            self.stderr
        );
        assert!(lines[0].starts_with("error: "), "{what}: {}", lines[0]);
        assert!(
            lines[0].contains(names),
            "{what}: the error does not name '{names}': {}",
            lines[0]
        );
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{}: stdout is not JSON ({e}):\n{}", self.what, self.stdout))
    }
}

/// Runs the binary with `args`; fails the test if it runs longer than [`RUN_TIMEOUT`].
fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    run_env(args, &[])
}

/// [`run`] with environment variables `env` set.
fn run_env<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, &str)]) -> Run {
    let args: Vec<OsString> = args.iter().map(|a| a.as_ref().to_os_string()).collect();
    let what = format!(
        "gpu-parquet {}",
        args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
    );
    let mut cmd = Command::new(BIN);
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A panic must show as the default hook would print it to a user who set nothing.
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE");
    // Settings from the environment would change what is run.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GPU_PARQUET_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    // Drain both pipes on their own threads so a chatty child never blocks on a full pipe.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let err = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > RUN_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what}: still running after {RUN_TIMEOUT:?}; killed");
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("{what}: wait failed: {e}"),
        }
    };
    Run {
        what,
        code: status.code(),
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)
}

const TESTDATA: [&str; 4] = [
    "flat_plain.parquet",
    "flat_snappy_dict.parquet",
    "flat_zstd.parquet",
    "nested.parquet",
];

fn metadata(path: &Path) -> ParquetMetaData {
    ParquetMetaDataReader::new()
        .parse_and_finish(&File::open(path).expect("open"))
        .unwrap_or_else(|e| panic!("{}: footer: {e}", path.display()))
}

/// arrow-rs's read of `columns` (dotted names, `None`: all) of `row_groups` (`None`: all), with panics
/// contained (damaged files make it panic at times).
fn arrow_rs(path: &Path, columns: Option<&[&str]>, row_groups: Option<&[usize]>) -> Result<RecordBatch, String> {
    let loc = Location::file(path);
    contain_panics(&loc, || {
        let perr = |e| Error::parquet(loc.clone(), e);
        let file = File::open(path).map_err(|e| Error::io(loc.clone(), "open", e))?;
        let mut builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(perr)?;
        if let Some(cols) = columns {
            let mask = ProjectionMask::columns(builder.parquet_schema(), cols.iter().copied());
            builder = builder.with_projection(mask);
        }
        if let Some(rgs) = row_groups {
            builder = builder.with_row_groups(rgs.to_vec());
        }
        collect(builder.build().map_err(perr)?, &loc)
    })
    .map_err(|e| e.to_string())
}

/// The Arrow IPC file the binary wrote, batches concatenated.
fn read_ipc(path: &Path) -> RecordBatch {
    let file = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = arrow::ipc::reader::FileReader::try_new(file, None)
        .unwrap_or_else(|e| panic!("{}: not an Arrow IPC file: {e}", path.display()));
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    arrow::compute::concat_batches(&schema, &batches).expect("concat IPC batches")
}

/// Requires the IPC output to equal `theirs`, schema first (for a readable message).
fn assert_same_table(what: &str, ours: &RecordBatch, theirs: &RecordBatch) {
    assert_eq!(ours.schema(), theirs.schema(), "{what}: schema differs from arrow-rs's");
    assert_eq!(ours.num_rows(), theirs.num_rows(), "{what}: row count");
    for (i, (a, b)) in ours.columns().iter().zip(theirs.columns()).enumerate() {
        assert!(
            a == b,
            "{what}: column {} differs from arrow-rs's",
            theirs.schema().field(i).name()
        );
    }
}

fn read_args(file: &Path, out: &Path, extra: &[&str]) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec!["read".into(), file.into(), "--output".into(), out.into()];
    a.extend(extra.iter().map(OsString::from));
    a
}

#[test]
fn bundled_files_read_verify_and_write_what_arrow_rs_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in TESTDATA {
        let file = testdata(name);
        let out = dir.path().join(format!("{name}.arrow"));
        let r = run(&read_args(&file, &out, &["--verify"]));
        r.assert_ok();
        assert!(r.stdout.contains("verified: "), "{}: {}", r.what, r.stdout);
        assert!(r.stdout.contains(&format!("wrote {}", out.display())), "{}", r.stdout);
        let theirs = arrow_rs(&file, None, None).expect("arrow-rs reads the bundled file");
        assert!(theirs.num_rows() > 0);
        assert_same_table(name, &read_ipc(&out), &theirs);
    }
}

/// Dotted paths of the leaves `name` selects (a top-level name, or a dotted path to a leaf or group).
fn leaves_of(meta: &ParquetMetaData, names: &[&str]) -> Vec<usize> {
    let schema = meta.file_metadata().schema_descr();
    (0..schema.num_columns())
        .filter(|&i| {
            let path = schema.column(i).path().parts().to_vec();
            names.iter().any(|n| {
                let parts: Vec<&str> = n.split('.').collect();
                parts.len() <= path.len() && parts.iter().zip(&path).all(|(a, b)| a == b)
            })
        })
        .collect()
}

/// A chunk's byte range from the footer, worked out here independently of the library: it starts at
/// its dictionary page where there is a plausible one.
fn chunk_range(meta: &ParquetMetaData, rg: usize, col: usize) -> (u64, u64) {
    let c = meta.row_group(rg).column(col);
    let dpo = c.data_page_offset();
    let start = match c.dictionary_page_offset() {
        Some(d) if d > 0 && d < dpo => d,
        _ => dpo,
    };
    (start as u64, c.compressed_size() as u64)
}

fn as_u64(v: &Value, what: &str) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("{what} is not an unsigned number: {v}"))
}

/// Checks a `read --json` report: exactly the selected columns and chunks, the footer's ranges, every
/// byte read was one of them, and the host path carried them all.
fn assert_report_lists_exactly(
    what: &str,
    report: &Value,
    meta: &ParquetMetaData,
    leaves: &[usize],
    row_groups: &[usize],
) {
    let schema = meta.file_metadata().schema_descr();
    let got_cols: Vec<(u64, String)> = report["columns"]
        .as_array()
        .expect("columns array")
        .iter()
        .map(|c| {
            (
                as_u64(&c["column"], "column"),
                c["column_path"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want_cols: Vec<(u64, String)> = leaves
        .iter()
        .map(|&i| (i as u64, schema.column(i).path().string()))
        .collect();
    assert_eq!(got_cols, want_cols, "{what}: columns in the report");

    let mut got_chunks: Vec<(u64, u64, u64, u64)> = report["chunks"]
        .as_array()
        .expect("chunks array")
        .iter()
        .map(|c| {
            (
                as_u64(&c["row_group"], "row_group"),
                as_u64(&c["column"], "column"),
                as_u64(&c["offset"], "offset"),
                as_u64(&c["len"], "len"),
            )
        })
        .collect();
    got_chunks.sort_unstable();
    let mut want_chunks: Vec<(u64, u64, u64, u64)> = row_groups
        .iter()
        .flat_map(|&g| leaves.iter().map(move |&c| (g, c)))
        .map(|(g, c)| {
            let (off, len) = chunk_range(meta, g, c);
            (g as u64, c as u64, off, len)
        })
        .collect();
    want_chunks.sort_unstable();
    assert_eq!(got_chunks, want_chunks, "{what}: chunks in the report");

    let sum_len: u64 = want_chunks.iter().map(|c| c.3).sum();
    let total_bytes: u64 = report["total"]["bytes"]
        .as_object()
        .expect("total.bytes by path")
        .values()
        .map(|v| as_u64(v, "bytes"))
        .sum();
    assert_eq!(
        total_bytes, sum_len,
        "{what}: bytes read differ from the selected chunks' bytes"
    );
    assert_eq!(
        as_u64(&report["total"]["bytes"]["host"], "host bytes"),
        sum_len,
        "{what}: host path"
    );
    assert_eq!(as_u64(&report["useful_bytes"], "useful_bytes"), sum_len, "{what}");
    assert_eq!(as_u64(&report["overhead_bytes"], "overhead_bytes"), 0, "{what}");
    // Per chunk, each got exactly its own bytes.
    for c in report["chunks"].as_array().expect("chunks") {
        let bytes: u64 = c["counts"]["bytes"]
            .as_object()
            .expect("chunk bytes")
            .values()
            .map(|v| as_u64(v, "bytes"))
            .sum();
        assert_eq!(bytes, as_u64(&c["len"], "len"), "{what}: chunk {c}");
    }
}

/// One `--columns` / `--row-groups` case: the CLI arguments and what they select.
struct Subset<'a> {
    columns: Option<&'a [&'a str]>,
    row_groups: Option<&'a [usize]>,
}

fn check_subset(file: &Path, subset: &Subset, dir: &Path, n: usize) {
    let meta = metadata(file);
    let out = dir.join(format!("subset-{n}.arrow"));
    let mut extra: Vec<String> = vec!["--json".into(), "--verify".into()];
    if let Some(c) = subset.columns {
        extra.push(format!("--columns={}", c.join(",")));
    }
    if let Some(g) = subset.row_groups {
        let g: Vec<String> = g.iter().map(usize::to_string).collect();
        extra.push(format!("--row-groups={}", g.join(",")));
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let r = run(&read_args(file, &out, &extra));
    r.assert_ok();
    let leaves = match subset.columns {
        Some(c) => leaves_of(&meta, c),
        None => (0..meta.file_metadata().schema_descr().num_columns()).collect(),
    };
    let rgs: Vec<usize> = subset
        .row_groups
        .map(<[usize]>::to_vec)
        .unwrap_or_else(|| (0..meta.num_row_groups()).collect());
    assert!(!leaves.is_empty(), "{}: the case selects no leaf", r.what);
    assert_report_lists_exactly(&r.what, &r.json(), &meta, &leaves, &rgs);
    let theirs = arrow_rs(file, subset.columns, subset.row_groups).expect("arrow-rs reads the subset");
    assert_same_table(&r.what, &read_ipc(&out), &theirs);
    let rows: i64 = rgs.iter().map(|&g| meta.row_group(g).num_rows()).sum();
    assert_eq!(theirs.num_rows() as i64, rows, "{}", r.what);
    println!(
        "{}: {} leaves x {} row groups, {rows} rows",
        r.what,
        leaves.len(),
        rgs.len()
    );
}

#[test]
fn column_and_row_group_subsets_read_exactly_their_chunks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut n = 0;
    let mut case = |file: &Path, columns: Option<&[&str]>, row_groups: Option<&[usize]>| {
        n += 1;
        check_subset(file, &Subset { columns, row_groups }, dir.path(), n);
    };
    let flat = testdata("flat_plain.parquet");
    assert_eq!(
        metadata(&flat).num_row_groups(),
        3,
        "flat_plain.parquet has 3 row groups"
    );
    case(&flat, Some(&["s", "id"]), None);
    case(&flat, None, Some(&[1]));
    case(&flat, Some(&["price"]), Some(&[2, 0]));
    let dict = testdata("flat_snappy_dict.parquet");
    case(&dict, Some(&["s", "day"]), Some(&[0]));
    let nested = testdata("nested.parquet");
    case(&nested, Some(&["point.x", "tags"]), None);
    case(&nested, Some(&["pairs"]), Some(&[1]));
    case(&nested, Some(&["point"]), Some(&[1, 0]));
    if let Some(root) = corpus() {
        let tiny = root.join("data/alltypes_tiny_pages_plain.parquet");
        let rgs = metadata(&tiny).num_row_groups();
        case(&tiny, Some(&["string_col", "id"]), None);
        case(&tiny, Some(&["bool_col"]), Some(&[rgs - 1]));
    }
}

#[test]
fn inspect_prints_a_table_and_json_with_every_row_group_and_chunk() {
    let mut files: Vec<PathBuf> = TESTDATA.iter().map(|n| testdata(n)).collect();
    if let Some(root) = corpus() {
        for n in [
            "alltypes_tiny_pages_plain.parquet",
            "nested_maps.snappy.parquet",
            "datapage_v2.snappy.parquet",
        ] {
            files.push(root.join("data").join(n));
        }
    }
    for file in &files {
        let meta = metadata(file);
        let table = run(&[OsString::from("inspect"), file.into()]);
        table.assert_ok();
        assert!(!table.stdout.trim().is_empty(), "{}: empty output", table.what);
        let schema = meta.file_metadata().schema_descr();
        for i in 0..schema.num_columns() {
            let path = schema.column(i).path().string();
            assert!(
                table.stdout.contains(&path),
                "{}: no mention of column {path}",
                table.what
            );
        }

        let r = run(&[OsString::from("inspect"), file.into(), "--json".into()]);
        r.assert_ok();
        let j = r.json();
        let groups = j["row_groups"].as_array().expect("row_groups array");
        assert_eq!(groups.len(), meta.num_row_groups(), "{}: row groups", r.what);
        assert_eq!(
            j["num_rows"].as_i64(),
            Some(meta.file_metadata().num_rows()),
            "{}",
            r.what
        );
        assert_eq!(
            j["columns"].as_array().map(Vec::len),
            Some(schema.num_columns()),
            "{}",
            r.what
        );
        for (g, rg) in groups.iter().enumerate() {
            let chunks = rg["chunks"].as_array().expect("chunks array");
            assert_eq!(chunks.len(), schema.num_columns(), "{}: row group {g} chunks", r.what);
            for (c, chunk) in chunks.iter().enumerate() {
                let (start, len) = chunk_range(&meta, g, c);
                assert_eq!(as_u64(&chunk["start"], "start"), start, "{}: rg {g} col {c}", r.what);
                assert_eq!(as_u64(&chunk["end"], "end"), start + len, "{}: rg {g} col {c}", r.what);
            }
        }
    }
}

/// Runs `read FILE --output` on a file that may be damaged: it must be refused with one error line, or
/// read to exactly what arrow-rs reads. Returns whether it was refused.
fn refused_or_same(file: &Path, out: &Path) -> bool {
    let _ = std::fs::remove_file(out);
    let r = run(&read_args(file, out, &[]));
    if r.ok() {
        assert!(r.stderr.is_empty(), "{}: exit 0 with stderr: {}", r.what, r.stderr);
        match reference(file) {
            Ok(theirs) => assert_same_table(&r.what, &read_ipc(out), &theirs),
            Err(e) => panic!("{}: exit 0 on a file arrow-rs refuses: {e}", r.what),
        }
        false
    } else {
        r.assert_one_error_line(&file.display().to_string());
        true
    }
}

#[test]
fn damaged_files_give_one_error_line_or_arrow_rs_values() {
    let Some(root) = corpus() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.arrow");
    let (mut refused, mut read) = (0, 0);

    let bad = files_under(&root.join("bad_data"), |p| name_ends_with(p, ".parquet"));
    assert!(!bad.is_empty(), "the corpus has bad_data files");
    for f in &bad {
        if refused_or_same(f, &out) {
            refused += 1;
        } else {
            read += 1;
        }
    }
    // Encrypted files: we cannot read them; one line saying so.
    let encrypted = files_under(&root.join("data"), |p| name_ends_with(p, ".parquet.encrypted"));
    for f in &encrypted {
        assert!(refused_or_same(f, &out), "{}: read an encrypted file", f.display());
        refused += 1;
    }

    let sources = [
        "alltypes_plain.parquet",
        "nested_lists.snappy.parquet",
        "datapage_v2.snappy.parquet",
    ];
    let mut damaged = 0;
    for name in sources {
        let bytes = std::fs::read(root.join("data").join(name)).expect("read corpus file");
        let n = bytes.len();
        let (data, footer) = regions(&bytes);
        // Cuts: in the magic, in column data, in the footer's metadata, its length and trailing magic.
        for cut in [
            0,
            3,
            (data.start + data.end) / 2,
            footer.start + 1,
            (footer.start + footer.end) / 2,
            n - 6,
            n - 1,
        ] {
            let path = dir.path().join(format!("cut-{cut}-{name}"));
            std::fs::write(&path, &bytes[..cut]).expect("write copy");
            assert!(
                refused_or_same(&path, &out),
                "{name} cut at {cut}: read a file without a footer"
            );
            refused += 1;
            damaged += 1;
        }
        // Flipped bytes: even seeds in column data, odd ones in the footer's metadata.
        for variant in 0..12u64 {
            let seed = 0x5851_f42d_4c95_7f2d ^ (variant << 8) ^ n as u64;
            let mut rng = SeededRng::new(seed);
            let region = if variant % 2 == 0 { &data } else { &footer };
            let mut copy = bytes.clone();
            for _ in 0..1 + rng.below(3) {
                let at = region.start + rng.below(region.len() as u64) as usize;
                copy[at] ^= 1 + rng.below(255) as u8;
            }
            let path = dir.path().join(format!("flip-{variant}-{name}"));
            std::fs::write(&path, &copy).expect("write copy");
            if refused_or_same(&path, &out) {
                refused += 1;
            } else {
                read += 1;
            }
            damaged += 1;
        }
    }
    println!(
        "{} bad_data, {} encrypted, {damaged} damaged copies: {refused} refused with one error line, {read} read like arrow-rs",
        bad.len(),
        encrypted.len()
    );
    assert!(
        refused > damaged / 2,
        "damage should usually be refused ({refused} refused)"
    );
}

/// Corpus files a debug build cannot read quickly through the binary, with the reason.
const SLOW: [(&str, &str); 1] = [(
    "large_string_map.brotli.parquet",
    "inflates a few KiB into 2 GiB of strings: ~20 s of CPU in a debug build and a 2 GiB IPC file",
)];

#[test]
fn every_corpus_file_reads_through_the_binary_like_arrow_rs() {
    let Some(root) = corpus() else { return };
    let started = Instant::now();
    let files = files_under(&root.join("data"), |p| name_ends_with(p, ".parquet"));
    assert!(files.len() > 50, "expected the whole corpus, found {}", files.len());
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.arrow");
    let (mut same, mut both_refuse, mut skipped) = (0, 0, 0);
    let mut failures = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap_or_default().to_string_lossy().into_owned();
        if let Some((_, why)) = SLOW.iter().find(|(n, _)| *n == name) {
            println!("skipped    {name}: {why}");
            skipped += 1;
            continue;
        }
        let _ = std::fs::remove_file(&out);
        let r = run(&read_args(f, &out, &["--verify"]));
        match (r.ok(), reference(f)) {
            (true, Ok(theirs)) => {
                r.assert_ok();
                assert_same_table(&r.what, &read_ipc(&out), &theirs);
                println!("same       {name}: {} rows", theirs.num_rows());
                same += 1;
            }
            (false, Err(e)) => {
                r.assert_one_error_line(&f.display().to_string());
                println!("both fail  {name}: {} / arrow-rs: {e}", r.stderr.trim_end());
                both_refuse += 1;
            }
            (true, Err(e)) => failures.push(format!("{name}: we read it, arrow-rs fails: {e}")),
            (false, Ok(t)) => failures.push(format!(
                "{name}: exit {:?} ({}) where arrow-rs reads {} rows",
                r.code,
                r.stderr.trim_end(),
                t.num_rows()
            )),
        }
    }
    println!(
        "{} corpus files: {same} equal to arrow-rs, {both_refuse} refused by both, {skipped} skipped, in {:.1} s",
        files.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(same + 5 >= files.len(), "only {same} of {} files read", files.len());
}

#[test]
fn user_mistakes_give_exit_1_and_one_clear_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("never.arrow");
    let nested = testdata("nested.parquet");
    let n = nested.display().to_string();
    let groups = metadata(&nested).num_row_groups();

    let r = run(&read_args(&nested, &out, &["--columns", "point.x,no_such_column"]));
    r.assert_one_error_line(&n);
    assert!(r.stderr.contains("no_such_column"), "{}", r.stderr);

    let r = run(&read_args(&nested, &out, &["--row-groups", &groups.to_string()]));
    r.assert_one_error_line(&n);
    assert!(
        r.stderr.contains("row group") && r.stderr.contains(&groups.to_string()),
        "{}",
        r.stderr
    );

    let missing = dir.path().join("no-such-file.parquet");
    let r = run(&read_args(&missing, &out, &[]));
    r.assert_one_error_line(&missing.display().to_string());

    let r = run(&read_args(dir.path(), &out, &[]));
    r.assert_one_error_line(&dir.path().display().to_string());

    let r = run(&read_args(&nested, &out, &["--backend", "nonsense"]));
    r.assert_one_error_line("--backend nonsense");
    assert!(
        r.stderr.contains("expected host, staged, cufile or auto"),
        "{}",
        r.stderr
    );

    let r = run(&[OsString::from("inspect"), missing.clone().into()]);
    r.assert_one_error_line(&missing.display().to_string());

    assert!(!out.exists(), "a failed read left an output file");
}

#[test]
fn backend_auto_without_cuda_reads_into_host_memory_and_says_why() {
    if let Ok(()) = gpu_parquet::gpu::cuda_present() {
        common::skip("this machine has a CUDA driver, so auto picks a GPU path");
        return;
    }
    let nested = testdata("nested.parquet");
    let r = run(&[
        OsString::from("read"),
        nested.clone().into(),
        "--backend".into(),
        "auto".into(),
    ]);
    r.assert_ok();
    assert!(r.stdout.contains("backend host("), "{}", r.stdout);
    assert!(
        r.stdout.lines().any(|l| l.starts_with("note: no GPU path: ")),
        "{}: no reason given:\n{}",
        r.what,
        r.stdout
    );

    let r = run(&[
        OsString::from("read"),
        nested.clone().into(),
        "--backend=auto".into(),
        "--json".into(),
    ]);
    r.assert_ok();
    let j = r.json();
    assert!(
        j["backend"].as_str().unwrap_or("").starts_with("host("),
        "{}: {}",
        r.what,
        j["backend"]
    );
    let notes: Vec<&str> = j["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(notes.iter().any(|n| n.starts_with("no GPU path: ")), "{notes:?}");
    let bytes = &j["total"]["bytes"];
    assert_eq!(bytes["host"], j["useful_bytes"], "{}", r.what);
    for p in ["nvfs", "cufile-compat", "staged"] {
        assert_eq!(bytes[p], 0, "{}: bytes on {p}", r.what);
    }
}

#[test]
fn check_gives_a_verdict_for_every_path() {
    let r = run(&["check", "."]);
    r.assert_ok();
    let verdicts: Vec<(&str, &str)> = r
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("path "))
        .skip(1)
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?, w.next()?))
        })
        .collect();
    let paths: Vec<&str> = verdicts.iter().map(|v| v.0).collect();
    assert_eq!(paths, ["nvfs", "cufile-compat", "staged", "host"], "{}", r.stdout);
    for (p, usable) in &verdicts {
        assert!(*usable == "yes" || *usable == "no", "{p}: '{usable}'");
    }
    assert_eq!(verdicts[3].1, "yes", "host reads always work");
    if gpu_parquet::gpu::cuda_present().is_err() {
        assert!(verdicts[..3].iter().all(|v| v.1 == "no"), "{}", r.stdout);
    }

    let r = run(&["check", ".", "--json"]);
    r.assert_ok();
    let j = r.json();
    let paths: Vec<&str> = j["verdicts"]
        .as_array()
        .expect("verdicts")
        .iter()
        .filter_map(|v| v["path"].as_str())
        .collect();
    assert_eq!(paths, ["nvfs", "cufile-compat", "staged", "host"]);
}

/// `gpu-parquet read ... | head -1`: a reader that goes away must not make the binary print a panic.
#[test]
fn closed_stdout_is_not_a_panic() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The reader is gone before the child writes anything: every write gets EPIPE.
    drop(read_end);
    let nested = testdata("nested.parquet");
    let mut child = Command::new(BIN)
        .args([OsString::from("read"), nested.into(), "--json".into()])
        .stdin(Stdio::null())
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .env_remove("RUST_BACKTRACE")
        .spawn()
        .expect("start");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    let status = child.wait().expect("wait");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "exit {status}; stderr:\n{stderr}"
    );
    assert!(stderr.lines().count() <= 1, "{stderr}");
}

/// Flags and variables go through one validation with bounds; a flag replaces its variable (a bad
/// variable does not matter when the flag is given), and errors name the flag or the variable.
#[test]
fn flags_and_variables_share_one_validation() {
    let nested = testdata("nested.parquet");
    let read = |extra: &[&str], env: &[(&str, &str)]| {
        let mut a: Vec<OsString> = vec!["read".into(), nested.clone().into(), "--backend".into(), "host".into()];
        a.extend(extra.iter().map(OsString::from));
        run_env(&a, env)
    };
    for (flag, value) in [
        ("--threads", "1000000"),
        ("--threads", "18446744073709551615"),
        ("--threads", "5000"),
        ("--task-size-mb", "17592186044416"),
        ("--task-size-mb", "0"),
        ("--compat-mode", "maybe"),
        ("--small-read-kb", "-1"),
    ] {
        let r = read(&[flag, value], &[]);
        r.assert_one_error_line(&format!("{flag} {value}: expected"));
    }
    for (var, value) in [("GPU_PARQUET_THREADS", "5000"), ("GPU_PARQUET_TASK_SIZE_MB", "0")] {
        let r = read(&[], &[(var, value)]);
        r.assert_one_error_line(&format!("{var}={value}: expected"));
    }
    // The flag wins, and the bad variable is not even looked at.
    read(&["--threads", "2"], &[("GPU_PARQUET_THREADS", "many")]).assert_ok();
    read(&["--task-size-mb", "1"], &[("GPU_PARQUET_TASK_SIZE_MB", "0")]).assert_ok();
}

/// Argument errors are clap's own: the error, a usage line, suggestions for typos, exit status 2.
#[test]
fn argument_errors_are_clap_s_own_with_usage_and_suggestions() {
    let clap_error = |args: &[&str], wants: &[&str]| {
        let r = run(args);
        assert_eq!(r.code, Some(2), "{}: exit status\nstderr: {}", r.what, r.stderr);
        assert!(r.stdout.is_empty(), "{}: stdout: {}", r.what, r.stdout);
        for want in wants {
            assert!(r.stderr.contains(want), "{}: no '{want}' in:\n{}", r.what, r.stderr);
        }
    };
    // No arguments: usage, not the description dressed as an error.
    clap_error(&[], &["Usage:", "read"]);
    // A missing FILE is named.
    clap_error(&["read"], &["<FILE>", "Usage:"]);
    // Typos get clap's suggestions.
    clap_error(&["read", "x.parquet", "--colums", "a"], &["--colums", "--columns"]);
    clap_error(&["raed", "x.parquet"], &["raed", "'read'"]);
    clap_error(&["read", "x.parquet", "--bogus"], &["--bogus", "Usage:"]);
}

#[test]
fn check_of_a_missing_directory_is_one_line_and_exit_1() {
    let r = run(&["check", "/nonexistent-gpu-parquet-dir"]);
    r.assert_one_error_line("/nonexistent-gpu-parquet-dir");
    let help = run(&["--help"]);
    help.assert_ok();
    assert!(help.stdout.contains("read"), "{}", help.stdout);
}

/// Without CUDA, asking for a GPU backend names the file and suggests the host backend.
#[test]
fn gpu_backend_without_cuda_names_the_file_and_suggests_host() {
    if gpu_parquet::gpu::cuda_present().is_ok() {
        common::skip("this machine has a CUDA driver");
        return;
    }
    let nested = testdata("nested.parquet");
    for backend in ["staged", "cufile"] {
        let r = run(&[
            OsString::from("read"),
            nested.clone().into(),
            "--backend".into(),
            backend.into(),
        ]);
        r.assert_one_error_line(&nested.display().to_string());
        assert!(r.stderr.contains("--backend host"), "{}", r.stderr);
    }
}

/// `--json` confirms `--verify` and `--output` as the table does.
#[test]
fn json_confirms_verify_and_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("t.arrow");
    let file = testdata("flat_zstd.parquet");
    let r = run(&read_args(&file, &out, &["--verify", "--json"]));
    r.assert_ok();
    let j = r.json();
    assert_eq!(j["verified"]["equal_to_file"], true, "{}", r.stdout);
    assert_eq!(j["verified"]["bytes"], j["useful_bytes"], "{}", r.stdout);
    assert_eq!(j["output"]["path"], out.display().to_string(), "{}", r.stdout);
    let rows = metadata(&file).file_metadata().num_rows();
    assert_eq!(j["output"]["rows"], rows, "{}", r.stdout);
    assert_eq!(read_ipc(&out).num_rows() as i64, rows);
}

/// `--output` writes through devices, never replaces them, and never overwrites the input.
#[test]
fn output_to_a_device_writes_through_and_the_input_is_never_overwritten() {
    use std::os::unix::fs::FileTypeExt;
    let file = testdata("flat_plain.parquet");
    let r = run(&[
        OsString::from("read"),
        file.clone().into(),
        "--output".into(),
        "/dev/null".into(),
    ]);
    r.assert_ok();
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("in.parquet");
    std::fs::copy(&file, &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    let r = run(&[
        OsString::from("read"),
        copy.clone().into(),
        "--output".into(),
        copy.clone().into(),
    ]);
    r.assert_one_error_line(&copy.display().to_string());
    assert!(r.stderr.contains("input"), "{}", r.stderr);
    assert_eq!(std::fs::read(&copy).unwrap(), before, "the input was changed");
    if Path::new("/dev/full").exists() {
        let r = run(&[
            OsString::from("read"),
            file.into(),
            "--output".into(),
            "/dev/full".into(),
        ]);
        r.assert_one_error_line("/dev/full");
        assert!(std::fs::metadata("/dev/full").unwrap().file_type().is_char_device());
    }
}

/// `bench` on a small file: legible times (not "0.00"), and JSON without Rust's `Ok`/`Err` wrappers.
#[test]
fn bench_on_a_small_file_is_legible_and_its_json_plain() {
    let file = testdata("flat_plain.parquet");
    let r = run(&[
        OsString::from("bench"),
        file.clone().into(),
        "--no-cold".into(),
        "--reps".into(),
        "2".into(),
    ]);
    r.assert_ok();
    let host = r.stdout.lines().find(|l| l.starts_with("host")).expect("a host row");
    assert!(host.contains(" µs") || host.contains(" ms"), "{host}");
    assert!(!host.contains(" 0.00 "), "{host}");
    let r = run(&[
        OsString::from("bench"),
        file.into(),
        "--no-cold".into(),
        "--reps".into(),
        "1".into(),
        "--json".into(),
    ]);
    r.assert_ok();
    assert!(
        !r.stdout.contains("\"Err\"") && !r.stdout.contains("\"Ok\""),
        "{}",
        r.stdout
    );
    assert_eq!(r.json()["cold"], false);
}

/// `dataset`: several files, a glob and a hive directory read as one dataset (on the host here: the
/// JSON says where and why), every row once, partition folders counted in; a schema mismatch and a
/// GPU asked for where there is none are one error line each.
#[test]
fn dataset_reads_files_globs_and_hive_directories() {
    let plain = testdata("flat_plain.parquet");
    let rows_of = |p: &Path| metadata(p).file_metadata().num_rows() as u64;
    let r = run(&[
        OsString::from("dataset"),
        plain.clone().into(),
        testdata("flat_snappy_dict.parquet").into(),
        "--backend".into(),
        "host".into(),
        "--json".into(),
    ]);
    r.assert_ok();
    let j = r.json();
    assert_eq!(
        j["rows"].as_u64(),
        Some(rows_of(&plain) + rows_of(&testdata("flat_snappy_dict.parquet"))),
        "{}",
        r.what
    );
    assert_eq!(j["on"], "host", "{}", r.what);
    assert_eq!(j["files"].as_array().map(Vec::len), Some(2), "{}", r.what);

    // With --columns, the bytes (and so the rate) are the selected chunks' uncompressed bytes.
    let files = [plain.clone(), testdata("flat_snappy_dict.parquet")];
    let chunk_bytes = |names: &[&str]| -> u64 {
        files
            .iter()
            .flat_map(|f| metadata(f).row_groups().to_vec())
            .flat_map(|g| g.columns().to_vec())
            .filter(|c| names.is_empty() || names.contains(&c.column_path().string().as_str()))
            .map(|c| c.uncompressed_size() as u64)
            .sum()
    };
    let mut args: Vec<OsString> = vec!["dataset".into()];
    args.extend(files.iter().map(|f| f.clone().into_os_string()));
    args.extend(["--backend", "host", "--columns", "id,s"].map(OsString::from));
    let r = run(&args);
    r.assert_ok();
    assert!(r.stdout.contains("in the 2 selected columns"), "{}", r.what);
    args.push("--json".into());
    let selected = run(&args).json()["uncompressed_bytes"].as_u64();
    assert_eq!(selected, Some(chunk_bytes(&["id", "s"])), "{}", r.what);
    assert_eq!(j["uncompressed_bytes"].as_u64(), Some(chunk_bytes(&[])), "{}", r.what);

    let dir = tempfile::tempdir().expect("tempdir");
    for (i, year) in ["2024", "2025", "2026"].iter().enumerate() {
        let d = dir.path().join(format!("year={year}"));
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::copy(&plain, d.join(format!("part-{i}.parquet"))).expect("copy");
    }
    std::fs::write(dir.path().join("_SUCCESS"), b"").expect("marker");
    let r = run(&[
        OsString::from("dataset"),
        dir.path().into(),
        "--backend=host".into(),
        "--json".into(),
    ]);
    r.assert_ok();
    let j = r.json();
    assert_eq!(j["rows"].as_u64(), Some(3 * rows_of(&plain)), "{}", r.what);
    assert_eq!(
        j["files"].as_array().map(Vec::len),
        Some(3),
        "{}: _SUCCESS skipped",
        r.what
    );

    let glob = format!("{}/year=202[45]/*.parquet", dir.path().display());
    let r = run(&["dataset", glob.as_str(), "--backend", "host", "--json"]);
    r.assert_ok();
    assert_eq!(r.json()["rows"].as_u64(), Some(2 * rows_of(&plain)), "{}", r.what);

    let nested = testdata("nested.parquet");
    let r = run(&[
        OsString::from("dataset"),
        plain.clone().into(),
        nested.clone().into(),
        "--backend=host".into(),
    ]);
    r.assert_one_error_line(&nested.display().to_string());
    assert!(
        r.stderr.contains(&plain.display().to_string()),
        "{}: {}",
        r.what,
        r.stderr
    );

    if gpu_parquet::gpu::GpuContext::device_count() > 0 {
        common::skip("this machine has a GPU: `dataset --devices 0` reads on it");
        return;
    }
    let r = run(&[
        OsString::from("dataset"),
        plain.clone().into(),
        "--devices".into(),
        "0".into(),
    ]);
    r.assert_one_error_line("no GPU here");
    assert!(r.stderr.contains("--backend host"), "{}: {}", r.what, r.stderr);
    // Without --devices, `auto` reads on the host and says why.
    let r = run(&[OsString::from("dataset"), plain.into()]);
    r.assert_ok();
    assert!(
        r.stdout.contains("on the host") && r.stdout.contains("no GPU here"),
        "{}",
        r.stdout
    );
}

/// `read --warm-up N` reads N times first and reports one read: the same bytes and reads as a read
/// without it. `bench --only-decode` leaves out the host row.
#[test]
fn warm_up_reports_one_read_and_only_decode_leaves_out_the_other_paths() {
    let file = testdata("nested.parquet");
    let args = |extra: &[&str]| {
        let mut a = vec![
            OsString::from("read"),
            file.clone().into(),
            "--backend".into(),
            "host".into(),
            "--json".into(),
        ];
        a.extend(extra.iter().map(OsString::from));
        a
    };
    let plain = run(&args(&[]));
    plain.assert_ok();
    let warmed = run(&args(&["--warm-up", "3"]));
    warmed.assert_ok();
    let (p, w) = (plain.json(), warmed.json());
    assert_eq!(w["total"], p["total"], "{}", warmed.what);
    assert_eq!(w["useful_bytes"], p["useful_bytes"], "{}", warmed.what);
    assert!(
        as_u64(&w["total"]["reads"]["host"], "host reads") > 0,
        "{}",
        warmed.what
    );

    let all = run(&[
        OsString::from("bench"),
        file.clone().into(),
        "--no-cold".into(),
        "--reps".into(),
        "1".into(),
    ]);
    all.assert_ok();
    assert!(all.stdout.lines().any(|l| l.starts_with("host ")), "{}", all.stdout);
    let only = run(&[
        OsString::from("bench"),
        file.clone().into(),
        "--no-cold".into(),
        "--reps".into(),
        "1".into(),
        "--only-decode".into(),
    ]);
    only.assert_ok();
    assert!(!only.stdout.lines().any(|l| l.starts_with("host ")), "{}", only.stdout);
}

/// `--output -` and `--output /dev/stdout`: standard output holds the Arrow IPC file alone (arrow's
/// reader takes it, with the input's rows), the report goes to stderr, and no file named `-` appears.
#[test]
fn output_to_stdout_is_only_the_arrow_file_and_the_report_goes_to_stderr() {
    let file = testdata("flat_zstd.parquet");
    let rows = metadata(&file).file_metadata().num_rows();
    for out in ["-", "/dev/stdout"] {
        let cwd = tempfile::tempdir().expect("tempdir");
        let mut cmd = Command::new(BIN);
        cmd.current_dir(cwd.path())
            .args([
                OsString::from("read"),
                file.clone().into(),
                "--output".into(),
                out.into(),
            ])
            .stdin(Stdio::null());
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("GPU_PARQUET_") {
                cmd.env_remove(k);
            }
        }
        let done = cmd.output().expect("run gpu-parquet");
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(done.status.success(), "--output {out}: {:?}\n{stderr}", done.status);
        let reader = arrow::ipc::reader::FileReader::try_new(std::io::Cursor::new(done.stdout), None)
            .unwrap_or_else(|e| panic!("--output {out}: stdout is not an Arrow IPC file: {e}\nstderr: {stderr}"));
        let got: usize = reader.map(|b| b.expect("batch").num_rows()).sum();
        assert_eq!(got as i64, rows, "--output {out}");
        assert!(
            stderr.contains("standard output"),
            "--output {out}: report not on stderr: {stderr}"
        );
        assert!(!cwd.path().join("-").exists(), "--output {out} wrote a file named '-'");
    }
}

/// Files that cannot hold a Parquet footer are refused in plain words, naming the file, by the
/// library and by the binary.
#[test]
fn files_without_a_parquet_frame_are_refused_in_plain_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut footer_past_start = vec![b'x'; 20];
    footer_past_start.extend_from_slice(&1000u32.to_le_bytes());
    footer_past_start.extend_from_slice(b"PAR1");
    let cases: [(&str, Vec<u8>, String); 4] = [
        (
            "text.parquet",
            b"a,b\n1,2\n3,4\n5,6\n".to_vec(),
            "not a Parquet file (no PAR1 magic at its end)".into(),
        ),
        (
            "magic.parquet",
            b"PAR1PAR1".to_vec(),
            "too short to be a Parquet file (8 bytes)".into(),
        ),
        (
            "empty.parquet",
            Vec::new(),
            "too short to be a Parquet file (0 bytes)".into(),
        ),
        (
            "long.parquet",
            footer_past_start,
            "footer length 1000 exceeds the file (28 bytes)".into(),
        ),
    ];
    for (name, bytes, want) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).expect("write");
        let err = gpu_parquet::ParquetSource::open(&path).expect_err(name).to_string();
        assert!(err.contains(&want) && err.contains(name), "{name}: {err}");
        let r = run(&[OsString::from("inspect"), path.clone().into()]);
        r.assert_one_error_line(&path.display().to_string());
        assert!(r.stderr.contains(&want), "{name}: {}", r.stderr);
    }
}

/// Flags that cannot be honoured are refused, not ignored: `--compat-mode off` without a GPU,
/// `--device` naming no GPU, an `--nvcomp` path that does not exist, `--decode none` with `--output`.
#[test]
fn flags_that_cannot_be_honoured_are_refused() {
    let nested = testdata("nested.parquet");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("never.arrow");
    let read = |extra: &[&str]| {
        let mut a: Vec<OsString> = vec!["read".into(), nested.clone().into()];
        a.extend(extra.iter().map(OsString::from));
        run(&a)
    };
    let no_gpu = gpu_parquet::gpu::GpuContext::device_count() == 0;
    if no_gpu {
        let r = read(&["--compat-mode", "off"]);
        r.assert_one_error_line("--compat-mode off");
        assert!(r.stderr.contains("no GPU"), "{}", r.stderr);
        let r = read(&["--device", "99", "--backend", "host"]);
        r.assert_one_error_line("--device 99");
        assert!(r.stderr.contains("no GPU"), "{}", r.stderr);
    } else {
        read(&["--device", "99"]).assert_one_error_line("GPU 99 does not exist");
    }
    read(&["--nvcomp", "/nonexistent-gpu-parquet-nvcomp"]).assert_one_error_line("/nonexistent-gpu-parquet-nvcomp");
    let o = out.display().to_string();
    read(&["--decode", "none", "--output", &o]).assert_one_error_line("--decode none");
    assert!(!out.exists(), "--decode none --output wrote {o}");
}

/// `bench` leaves the machine's page cache alone unless `--drop-caches` asks, and says why the cold
/// rows are missing.
#[test]
fn bench_drops_the_page_cache_only_when_asked() {
    let file = testdata("flat_plain.parquet");
    let r = run(&[
        OsString::from("bench"),
        file.into(),
        "--reps".into(),
        "1".into(),
        "--no-decode".into(),
        "--json".into(),
    ]);
    r.assert_ok();
    let j = r.json();
    assert_eq!(j["cold"], false, "{}", r.stdout);
    let why = j["cold_skipped"].as_str().unwrap_or_default();
    assert!(why.contains("--drop-caches"), "{}", r.stdout);
}

/// `--memory-limit` takes sizes with units (one parser, `gpu_parquet::ByteSize`), and says what is wrong.
#[test]
fn memory_limit_takes_sizes_with_units() {
    let nested = testdata("nested.parquet");
    let read = |limit: &str| {
        run(&[
            OsString::from("read"),
            nested.clone().into(),
            "--backend".into(),
            "host".into(),
            "--memory-limit".into(),
            limit.into(),
        ])
    };
    for ok in ["8GiB", "512MiB", "1.5GB", "1048576"] {
        read(ok).assert_ok();
    }
    let r = read("12apples");
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("is not a size"), "{}", r.stderr);
    read("1KiB").assert_one_error_line("--memory-limit 1KiB: expected at least 1MiB");
    // The variable takes the same sizes, and says what is wrong; the flag replaces it unparsed.
    let plain: [OsString; 4] = ["read".into(), nested.clone().into(), "--backend".into(), "host".into()];
    run_env(&plain, &[("GPU_PARQUET_MEMORY_LIMIT", "64MiB")]).assert_ok();
    run_env(&plain, &[("GPU_PARQUET_MEMORY_LIMIT", "1KiB")])
        .assert_one_error_line("GPU_PARQUET_MEMORY_LIMIT=1KiB: expected at least 1MiB");
    let mut flagged = plain.to_vec();
    flagged.extend(["--memory-limit".into(), "8GiB".into()]);
    run_env(&flagged, &[("GPU_PARQUET_MEMORY_LIMIT", "junk")]).assert_ok();
}

/// `dataset` shows the schema, and `--output` writes its rows (partition columns included) as Arrow
/// IPC, to a file or alone to stdout.
#[test]
fn dataset_shows_its_schema_and_writes_arrow_ipc() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("ds");
    for year in ["2023", "2024"] {
        let d = root.join(format!("year={year}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(testdata("flat_plain.parquet"), d.join("part-0.parquet")).unwrap();
    }
    let rows = 2 * metadata(&testdata("flat_plain.parquet")).file_metadata().num_rows();
    let out = dir.path().join("ds.arrow");
    let r = run(&[
        OsString::from("dataset"),
        root.clone().into(),
        "--backend".into(),
        "host".into(),
        "--output".into(),
        out.clone().into(),
    ]);
    r.assert_ok();
    assert!(
        r.stdout.contains("schema: ") && r.stdout.contains("year: Int32"),
        "{}",
        r.stdout
    );
    let table = read_ipc(&out);
    assert_eq!(table.num_rows() as i64, rows);
    assert!(table.schema().field_with_name("year").is_ok(), "{:?}", table.schema());

    let done = Command::new(BIN)
        .args([
            OsString::from("dataset"),
            root.into(),
            "--backend".into(),
            "host".into(),
            "--output".into(),
            "-".into(),
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run gpu-parquet");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    let reader = arrow::ipc::reader::FileReader::try_new(std::io::Cursor::new(done.stdout), None)
        .unwrap_or_else(|e| panic!("stdout is not an Arrow IPC file: {e}\n{stderr}"));
    let got: usize = reader.map(|b| b.expect("batch").num_rows()).sum();
    assert_eq!(got as i64, rows);
    assert!(stderr.contains("schema: "), "{stderr}");
}

/// `dataset --columns` may name a partition column, and `--verify` checks a host read against
/// arrow-rs's own reader of the files; an unknown column is one error line naming it.
#[test]
fn dataset_selects_partition_columns_and_verifies_on_the_host() {
    let plain = testdata("flat_plain.parquet");
    let rows = metadata(&plain).file_metadata().num_rows() as u64;
    let dir = tempfile::tempdir().expect("tempdir");
    for year in ["2024", "2025"] {
        let d = dir.path().join(format!("year={year}"));
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::copy(&plain, d.join("part-0.parquet")).expect("copy");
    }
    let first = metadata(&plain)
        .file_metadata()
        .schema_descr()
        .column(0)
        .path()
        .string();
    let columns = format!("{first},year");
    let r = run(&[
        OsString::from("dataset"),
        dir.path().into(),
        "--backend=host".into(),
        "--columns".into(),
        columns.clone().into(),
        "--verify".into(),
        "--json".into(),
    ]);
    r.assert_ok();
    let j = r.json();
    assert_eq!(j["rows"].as_u64(), Some(2 * rows), "{}", r.what);
    assert_eq!(j["verified"]["rows"].as_u64(), Some(2 * rows), "{}", r.what);
    assert_eq!(j["verified"]["equal_to_arrow_rs"], true, "{}", r.what);
    let r = run(&[
        OsString::from("dataset"),
        dir.path().into(),
        "--backend=host".into(),
        "--columns".into(),
        columns.into(),
        "--verify".into(),
    ]);
    r.assert_ok();
    assert!(r.stdout.contains(&format!("schema: {first}: ")), "{}", r.stdout);
    assert!(r.stdout.contains("year: Int32"), "{}", r.stdout);
    assert!(r.stdout.contains("verified: "), "{}", r.stdout);
    let r = run(&[
        OsString::from("dataset"),
        dir.path().into(),
        "--backend=host".into(),
        "--columns".into(),
        "nope".into(),
    ]);
    r.assert_one_error_line("'nope'");
}

/// `dataset --filter`: a term on the partition column skips files, the others filter rows; the rows
/// verify against arrow-rs's read of the files with the filter applied, and are the rows wanted;
/// a term mixing both kinds is one error line.
#[test]
fn dataset_filters_files_by_partition_and_rows_by_value() {
    let plain = testdata("flat_plain.parquet");
    let dir = tempfile::tempdir().expect("tempdir");
    for year in ["2024", "2025", "2026"] {
        let d = dir.path().join(format!("year={year}"));
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::copy(&plain, d.join("part-0.parquet")).expect("copy");
    }
    let outs = tempfile::tempdir().expect("tempdir");
    let out = outs.path().join("out.arrow");
    // The filtered, verified dataset read into `out`, with `extra` arguments.
    let filtered = |out: &std::path::Path, extra: &[&str]| {
        let mut args: Vec<OsString> = vec![
            "dataset".into(),
            dir.path().into(),
            "--backend=host".into(),
            "--columns".into(),
            "s,year".into(),
            "--filter".into(),
            "year >= 2025 and id < 100".into(),
            "--verify".into(),
            "--output".into(),
            out.into(),
        ];
        args.extend(extra.iter().map(OsString::from));
        run(&args)
    };
    let r = filtered(&out, &["--json"]);
    r.assert_ok();
    let j = r.json();
    assert_eq!(j["files"].as_array().map(Vec::len), Some(2), "{}", r.what);
    assert_eq!(j["rows"].as_u64(), Some(200), "{}", r.what);
    assert_eq!(j["verified"]["rows"].as_u64(), Some(200), "{}", r.what);
    let table = read_ipc(&out);
    let names: Vec<String> = table.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["s", "year"]);
    let years = table
        .column(1)
        .as_any()
        .downcast_ref::<arrow::array::Int32Array>()
        .expect("Int32");
    assert_eq!(years.values()[..100], [2025; 100]);
    assert_eq!(years.values()[100..], [2026; 100]);
    // In one pass: the same rows, verified; a pass count other than auto, 1 or 2 is clap's usage
    // error.
    let one = outs.path().join("one.arrow");
    for (passes, ok) in [("1", true), ("3", false)] {
        let r = filtered(&one, &["--filter-passes", passes]);
        if ok {
            r.assert_ok();
            assert_eq!(read_ipc(&one), table, "{}", r.what);
        } else {
            assert_eq!(r.code, Some(2), "{}: {}", r.what, r.stderr);
            assert!(
                r.stderr
                    .contains("'--filter-passes <FILTER_PASSES>': expected auto, 1 or 2 passes"),
                "{}",
                r.stderr
            );
        }
    }
    let r = run(&[
        OsString::from("dataset"),
        dir.path().into(),
        "--backend=host".into(),
        "--filter".into(),
        "year = 2025 or id < 3".into(),
    ]);
    r.assert_one_error_line("mixes partition columns (year)");
}

/// `read --filter`: the rows written are arrow-rs's rows that pass the filter, the pruning summary is
/// printed (table and JSON), and a bad filter is one clear line.
#[test]
fn read_with_a_filter_writes_the_matching_rows_and_the_pruning() {
    use arrow::array::{Array, Int64Array};
    let dir = tempfile::tempdir().expect("tempdir");
    let file = testdata("flat_snappy_dict.parquet");
    let out = dir.path().join("filtered.arrow");
    let r = run(&read_args(
        &file,
        &out,
        &[
            "--backend",
            "host",
            "--decode",
            "host",
            "--columns",
            "s,f64",
            "--filter",
            "id < 100 or id = 2399",
        ],
    ));
    assert!(r.ok(), "{}: {}", r.what, r.stderr);
    assert!(
        r.stdout
            .contains("pruning: 2 of 3 row groups kept (pruned: 1 by statistics"),
        "{}",
        r.stdout
    );
    let ours = read_ipc(&out);
    // arrow-rs's whole file, filtered by hand.
    let all = arrow_rs(&file, None, None).expect("arrow-rs reads it");
    let ids = all
        .column_by_name("id")
        .unwrap()
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    let keep: arrow::array::BooleanArray = ids.iter().map(|v| v.map(|v| v < 100 || v == 2399)).collect();
    let theirs = arrow::compute::filter_record_batch(&all, &keep).unwrap();
    let theirs = theirs
        .project(&[
            theirs.schema().index_of("f64").unwrap(),
            theirs.schema().index_of("s").unwrap(),
        ])
        .unwrap();
    let theirs = RecordBatch::try_new(ours.schema(), theirs.columns().to_vec()).unwrap_or(theirs);
    assert_eq!(ours.num_rows(), 101);
    assert_eq!(ours.schema().fields().len(), 2, "the filter's column is dropped");
    for name in ["s", "f64"] {
        assert_eq!(
            ours.column_by_name(name).unwrap().to_data(),
            theirs.column_by_name(name).unwrap().to_data(),
            "{name}"
        );
    }

    let r = run(&[
        "read".into(),
        file.clone().into_os_string(),
        "--backend".into(),
        "host".into(),
        "--filter".into(),
        "id >= 2000".into(),
        "--json".into(),
    ]);
    assert!(r.ok(), "{}: {}", r.what, r.stderr);
    let p = &r.json()["pruning"];
    assert_eq!(p["row_groups"], 3);
    assert_eq!(p["row_groups_selected"], 1);
    assert_eq!(p["row_groups_pruned_by_statistics"], 2);
    assert_eq!(p["columns"][0]["column"], "id");

    let f = file.display().to_string();
    let r = run(&read_args(&file, &out, &["--backend", "host", "--filter", "id < 'x'"]));
    r.assert_one_error_line(&f);
    assert!(r.stderr.contains("column 'id'"), "{}", r.stderr);
    let r = run(&read_args(&file, &out, &["--backend", "host", "--filter", "nope = 1"]));
    r.assert_one_error_line(&f);
    let r = run(&read_args(&file, &out, &["--backend", "host", "--filter", "id <"]));
    r.assert_one_error_line("filter \"id <\"");
    assert!(r.stderr.contains("at position 4"), "{}", r.stderr);
}

/// `bench --filter`: per filter a row that reads through arrow-rs only the row groups pruning keeps,
/// with the rows the filter accepts (counted here by hand from arrow-rs's whole file); without a GPU
/// the device rows are left out with the reason; a bad filter is one clear line.
#[test]
fn bench_measures_selective_reads_with_their_bytes_and_rows() {
    use arrow::array::{Array, Int64Array};
    let file = testdata("flat_snappy_dict.parquet");
    let all = arrow_rs(&file, None, None).expect("arrow-rs reads it");
    let ids = all
        .column_by_name("id")
        .unwrap()
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    let s = all.column_by_name("s").unwrap();
    let want = (0..all.num_rows())
        .filter(|&i| ids.is_valid(i) && ids.value(i) < 100 && s.is_valid(i))
        .count();
    let r = run(&[
        OsString::from("bench"),
        file.clone().into(),
        "--reps".into(),
        "1".into(),
        "--columns".into(),
        "f64".into(),
        "--filter".into(),
        "sel:id < 100 and s is not null".into(),
        "--filter".into(),
        "id >= 0".into(),
        "--json".into(),
    ]);
    r.assert_ok();
    let j = r.json();
    let rows = j["rows"].as_array().expect("rows");
    let row = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no row {name}: {}", r.stdout))
    };
    let sel = row("filter sel: host batches (arrow-rs), two passes");
    let note = sel["note"].as_str().unwrap();
    assert!(note.starts_with(&format!("{want} rows kept, ")), "{note}");
    assert!(!note.contains("WRONG"), "{note}");
    assert!(sel["hot_s"].as_f64().is_some_and(|t| t > 0.0), "{sel}");
    // One pass keeps the same rows and reads at least the bytes of two.
    let one = row("filter sel: host batches (arrow-rs), one pass");
    assert!(
        one["note"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{want} rows kept, ")),
        "{one}"
    );
    assert!(
        one["bytes"].as_u64().unwrap() >= sel["bytes"].as_u64().unwrap(),
        "{}",
        r.stdout
    );
    let all_rows = row("filter f2: host batches (arrow-rs), two passes");
    assert!(
        all_rows["note"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{} rows kept", ids.null_count().abs_diff(ids.len()))),
        "{all_rows}"
    );
    // The selective read fetched fewer bytes than the read every row group survives.
    assert!(
        sel["bytes"].as_u64().unwrap() < all_rows["bytes"].as_u64().unwrap(),
        "{}",
        r.stdout
    );
    // The least a page-level read could fetch: pages holding an accepted row, fewer than the read's.
    let least = row("filter sel: pages holding matching rows");
    assert!(
        least["note"]
            .as_str()
            .unwrap()
            .contains(&format!("the {want} accepted rows")),
        "{least}"
    );
    assert!(least["bytes"].as_u64().unwrap() > 0, "{least}");
    assert!(
        least["bytes"].as_u64().unwrap() <= sel["bytes"].as_u64().unwrap(),
        "{least}"
    );
    if rows
        .iter()
        .all(|r| r["name"] != "filter sel: device columns, two passes")
    {
        let gpu = rows
            .iter()
            .find(|r| r["name"] == "staged / cufile / pinned H2D")
            .expect("the no-GPU row");
        assert!(gpu["note"].as_str().unwrap().contains("no GPU"), "{gpu}");
    }

    let r = run(&[
        OsString::from("bench"),
        file.clone().into(),
        "--filter".into(),
        "q:id <".into(),
    ]);
    r.assert_one_error_line("filter \"id <\"");
}

/// `inspect` says where each top-level column decodes on the GPU path, and why a column goes to the
/// host: all on the GPU for the nested test file; a fixed-size list of strings (items the kernels do
/// not pad) on the host, with the reason, in the table and the JSON.
#[test]
fn inspect_names_the_columns_decoded_on_the_host() {
    use std::sync::Arc;

    use arrow::array::{Array, FixedSizeListArray, Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    let r = run(&["inspect".into(), testdata("nested.parquet").into_os_string()]);
    r.assert_ok();
    assert!(r.stdout.contains("GPU decode: all 4 top-level columns"), "{}", r.stdout);

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fsl_strings.parquet");
    let item = Arc::new(Field::new("item", DataType::Utf8, true));
    let strings = StringArray::from(vec!["a", "bb", "ccc", "dddd"]);
    let fsl = FixedSizeListArray::try_new(item, 2, Arc::new(strings), None).unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int32, false),
        Field::new("pairs", fsl.data_type().clone(), true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int32Array::from(vec![1, 2])), Arc::new(fsl)],
    )
    .unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(File::create(&path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let r = run(&["inspect".into(), path.clone().into_os_string()]);
    r.assert_ok();
    assert!(
        r.stdout
            .contains("GPU decode: 1 of 2 top-level columns; on the host:\n  pairs: "),
        "{}",
        r.stdout
    );
    let r = run(&["inspect".into(), path.into_os_string(), "--json".into()]);
    r.assert_ok();
    let routes = &r.json()["decode"];
    assert_eq!(routes[0]["on"], "gpu", "{routes}");
    assert_eq!(routes[1]["column"], "pairs", "{routes}");
    assert_eq!(routes[1]["on"], "host", "{routes}");
    assert!(routes[1]["reason"].as_str().is_some_and(|w| !w.is_empty()), "{routes}");
}

/// `read --filter --verify` on a file with small pages and page indexes: only the surviving pages
/// are fetched (and verified against the file), and the report says how many pages and bytes that
/// avoided, per column.
#[test]
fn read_with_a_selective_filter_reports_the_pages_avoided() {
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("pages.parquet");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("s", DataType::Utf8, false),
    ]));
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(0..4000));
    let s: ArrayRef = Arc::new(StringArray::from_iter_values((0..4000).map(|i| format!("v{}", i % 50))));
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(1000))
        .set_data_page_row_count_limit(50)
        .set_write_batch_size(50)
        .set_statistics_enabled(parquet::file::properties::EnabledStatistics::Page)
        .build();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(File::create(&file).unwrap(), schema.clone(), Some(props)).unwrap();
    w.write(&RecordBatch::try_new(schema, vec![id, s]).unwrap()).unwrap();
    w.close().unwrap();
    let args = |json: bool| {
        let mut a: Vec<OsString> = vec!["read".into(), file.clone().into_os_string()];
        for x in [
            "--backend",
            "host",
            "--decode",
            "host",
            "--filter",
            "id >= 1210 and id < 1260",
            "--verify",
        ] {
            a.push(x.into());
        }
        if json {
            a.push("--json".into());
        }
        a
    };
    let r = run(&args(false));
    r.assert_ok();
    assert!(r.stdout.contains("verified: "), "{}", r.stdout);
    assert!(r.stdout.contains("decoded 50 rows"), "{}", r.stdout);
    assert!(r.stdout.contains("page-level I/O: "), "{}", r.stdout);
    let r = run(&args(true));
    r.assert_ok();
    let v = r.json();
    let io = &v["pruning"]["page_io"];
    let columns = io["columns"].as_array().expect("page_io.columns");
    assert_eq!(columns.len(), 2);
    let mut fetched = 0;
    for c in columns {
        assert_eq!(c["chunks_paged"], 1, "{c}");
        assert_eq!(c["pages"], 20, "{c}");
        assert!(c["pages_fetched"].as_u64().unwrap() < 20, "{c}");
        assert!(c["bytes_avoided"].as_u64().unwrap() > 0, "{c}");
        fetched += c["bytes_fetched"].as_u64().unwrap();
    }
    // What the page-level report says was fetched is what the I/O report read.
    assert_eq!(v["useful_bytes"].as_u64(), Some(fetched));
    assert_eq!(v["overhead_bytes"].as_u64(), Some(0));
}

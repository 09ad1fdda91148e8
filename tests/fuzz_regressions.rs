//! Replays inputs through the fuzz targets' bodies (`gpu_parquet::fuzzing`, the code `fuzz/run.sh`
//! runs): every input the fuzzer found a defect with (`tests/fuzz-regressions/<target>/`), and the
//! seeds it starts from (the corpus's files for the whole-file targets, their first chunk's bytes for
//! the page-header parser). A body panics on a defect: our panic, a plan outside the file, or a host
//! reference that disagrees with arrow-rs.

use std::path::{Path, PathBuf};

use gpu_parquet::fuzzing;

mod common;

type Body = fn(&[u8]);

const TARGETS: [(&str, Body); 5] = [
    ("footer_plan", fuzzing::footer_plan),
    ("page_headers", fuzzing::page_headers),
    ("hybrid", fuzzing::hybrid),
    ("delta", fuzzing::delta),
    ("whole_file", fuzzing::whole_file),
];

fn regressions_dir() -> PathBuf {
    let here = PathBuf::from("tests/fuzz-regressions");
    if here.is_dir() {
        here
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions")
    }
}

/// A saved input must pass within this (each takes milliseconds once fixed; the slow footer took
/// 2.5 s in a debug build before).
const SLOW: std::time::Duration = std::time::Duration::from_secs(1);

fn replay(target: &str, body: Body, input: &Path) {
    let data = std::fs::read(input).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
    let started = std::time::Instant::now();
    let result = std::panic::catch_unwind(|| body(&data));
    assert!(result.is_ok(), "{target} fails again on {}", input.display());
    let took = started.elapsed();
    assert!(took < SLOW, "{target} took {took:?} on {}", input.display());
}

#[test]
fn every_saved_finding_passes_its_target() {
    let root = regressions_dir();
    let mut replayed = 0;
    for (target, body) in TARGETS {
        let dir = root.join(target);
        if !dir.is_dir() {
            continue;
        }
        for input in common::files_under(&dir, |_| true) {
            replay(target, body, &input);
            replayed += 1;
        }
    }
    println!("replayed {replayed} saved findings");
    // Every folder holds the finding it was made for; an unknown folder is a target renamed.
    for entry in std::fs::read_dir(&root).expect("tests/fuzz-regressions") {
        let name = entry.expect("entry").file_name();
        assert!(
            TARGETS.iter().any(|(t, _)| *t == name),
            "tests/fuzz-regressions/{name:?} names no fuzz target"
        );
    }
}

#[test]
fn the_seeds_pass_every_target() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let mut files = common::files_under(&corpus.join("data"), |p| p.extension().is_some_and(|e| e == "parquet"));
    files.extend(common::files_under(&corpus.join("bad_data"), |_| true));
    files.extend(common::files_under(&common::testdata_dir(), |p| {
        p.extension().is_some_and(|e| e == "parquet")
    }));
    let mut bodies = 0;
    for f in &files {
        let data = std::fs::read(f).expect("corpus file");
        if data.len() > 1 << 20 {
            continue;
        }
        fuzzing::footer_plan(&data);
        // The whole-file target on the small files, as fuzz/run.sh seeds it (the reference decoder
        // test reads them all).
        if data.len() < 64 << 10 {
            fuzzing::whole_file(&data);
        }
        if data.len() > 4 {
            fuzzing::page_headers(&data[4..data.len().min(65540)]);
        }
        // The same bytes as encoded streams: no panic, and agreement with arrow-rs where both decode.
        fuzzing::hybrid(&data[..data.len().min(4096)]);
        fuzzing::delta(&data[..data.len().min(4096)]);
        bodies += 5;
    }
    assert!(bodies >= 5 * 50, "only {bodies} runs: is the corpus there?");
}

//! The Python package (`python/`): built into a wheel with maturin (debug profile, sharing this
//! workspace's build folder), installed into a scratch folder, and its tests run with pytest
//! (`python/tests/`: the host path, equal to pyarrow; the Arrow PyCapsule interfaces; errors; threads).
//!
//! Without python3, maturin, pytest or pyarrow the test says so and passes, except under CI
//! (`CI=true`), where `.ci/run` installs them and a missing one fails the test.

mod common;

use std::path::Path;
use std::process::Command;

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

fn skip_or_fail(why: &str) {
    assert!(
        !in_ci(),
        "CI=true but {why} (.ci/run installs maturin, pytest and pyarrow)"
    );
    common::skip(why);
}

fn python_has(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_python_package_builds_and_its_tests_pass() {
    for module in ["maturin", "pytest", "pyarrow"] {
        if !python_has(module) {
            return skip_or_fail(&format!("python3 cannot import {module}"));
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = tempfile::tempdir().expect("scratch folder");
    let wheels = scratch.path().join("wheels");
    let site = scratch.path().join("site");
    let build = Command::new("python3")
        .args(["-m", "maturin", "build", "--quiet", "-m"])
        .arg(root.join("python/Cargo.toml"))
        .arg("-o")
        .arg(&wheels)
        .output()
        .expect("run maturin");
    assert!(
        build.status.success(),
        "maturin build failed:\n{}\n{}",
        String::from_utf8_lossy(&build.stdout),
        String::from_utf8_lossy(&build.stderr)
    );
    let wheel = std::fs::read_dir(&wheels)
        .expect("wheel folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .expect("a wheel");
    let install = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
        ])
        .arg(&site)
        .arg(&wheel)
        .output()
        .expect("run pip");
    assert!(
        install.status.success(),
        "pip install of {} failed:\n{}",
        wheel.display(),
        String::from_utf8_lossy(&install.stderr)
    );
    let tests = Command::new("python3")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(root.join("python/tests"))
        .env("PYTHONPATH", &site)
        .output()
        .expect("run pytest");
    let out = String::from_utf8_lossy(&tests.stdout);
    println!("{out}");
    assert!(
        tests.status.success(),
        "pytest failed:\n{out}\n{}",
        String::from_utf8_lossy(&tests.stderr)
    );
}

#!/usr/bin/env bash
# Prepares what a GPU-machine run carries (all under git-ignored .device/ and .wheels/): release builds
# of the CLI and of the GPU test binaries (stripped), a copy of parquet-testing, the shared benchmark
# scripts, tools/gpu_machine.sh, and the nvCOMP wheel. .device/ (about 215 MB, most of it the test
# binaries) is packed with gzip and split into parts under one call's 64 MiB carry
# (.devpack/parts/device.tar.gz.0, .1; 74 MB in all on 2026-12-05). One call per part, carrying only
# it ([".devpack/parts/device.tar.gz.0"], then .1), running `mkdir -p /tmp/dev && cp .devpack/parts/*
# /tmp/dev/`; then a call carrying [".wheels"] runs
#   cat /tmp/dev/device.tar.gz.* | tar xzf - && bash .device/gpu_machine.sh setup && bash .device/gpu_machine.sh tests
# (then sanitize, reads, bench in later calls while the machine stays warm: what lies in the project
# copy and /tmp stays there). The Python wheel and dask (.devpack/*.whl, .devpack/dask) travel apart.
# Usage (project root): tools/prepare_device.sh   (OLD=REV tools/prepare_device.sh: with REV's CLI)
set -euo pipefail
cd "$(dirname "$0")/.."
shared=../shared
mkdir -p .device/bin .device/bench
cargo build --release
# The CLI as users build it, copied before the test build relinks it with the tests' features
# (fault injection among them).
cp target/release/gpu-parquet .device/bin/
cargo test --release --no-run 2>&1 | tee /tmp/gpu-parquet-test-build.log | grep -E "^error" && exit 1
# OLD=REV: that revision's CLI too, as .device/bin/gpu-parquet-old (built in a scratch worktree, its
# target folder a copy of this one's release builds, so that only the crate recompiles), for
# `gpu_machine.sh walls` / `abbench` A/B runs (RUNS="gpu-parquet-old gpu-parquet").
if [ -n "${OLD:-}" ]; then
  rm -rf /tmp/gpu-parquet-old /tmp/gpu-parquet-old-target && git worktree prune
  git worktree add -f --detach /tmp/gpu-parquet-old "$OLD"
  mkdir -p /tmp/gpu-parquet-old-target && cp -a target/release /tmp/gpu-parquet-old-target/
  (cd /tmp/gpu-parquet-old && CARGO_TARGET_DIR=/tmp/gpu-parquet-old-target cargo build --release --bin gpu-parquet)
  cp /tmp/gpu-parquet-old-target/release/gpu-parquet .device/bin/gpu-parquet-old
  git worktree remove --force /tmp/gpu-parquet-old
fi
cargo build --release --examples
for e in analytics_job compare_paths multi_gpu sort_parquet; do [ -f target/release/examples/$e ] && cp target/release/examples/$e .device/bin/; done
for t in device device_decode device_nvcomp device_filter corruption faults concurrency dataset; do
  bin=$(grep -o "tests/$t.rs (target/release/deps/[^)]*)" /tmp/gpu-parquet-test-build.log | sed 's/.*(\(.*\))/\1/')
  cp "$bin" ".device/bin/$t"
done
strip .device/bin/*
rm -rf .device/parquet-testing && cp -r "$shared/parquet-testing" .device/parquet-testing
cp "$shared"/bench/*.py .device/bench/
cp tools/gpu_machine.sh tools/make_lineitem.sh tools/make_type_bench.py .device/
if ! ls .wheels/nvidia_libnvcomp_cu13-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    -d .wheels nvidia-libnvcomp-cu13==5.3.0.16
fi
mkdir -p .devpack/parts && rm -f .devpack/device.tar.gz .devpack/parts/device.tar.gz.*
tar czf - .device | split -b 56M -d -a 1 - .devpack/parts/device.tar.gz.
# The Python package's wheel (release), for `gpu_machine.sh python`.
rm -f .devpack/gpu_parquet-*.whl
python3 -m maturin build --release --quiet -m python/Cargo.toml -o .devpack
# dask.distributed and its dependencies (pure Python but for a few, about 5 MB) for examples/dask_read.py.
if ! ls .devpack/dask/distributed-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d .devpack/dask dask==2026.8.0 distributed==2026.8.0
fi
du -sh .devpack .wheels

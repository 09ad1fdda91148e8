#!/usr/bin/env bash
# Prepares what a GPU-machine run carries (all under git-ignored .device/ and .wheels/): release builds
# of the CLI and of the GPU test binaries (stripped), a copy of parquet-testing, the shared benchmark
# scripts, tools/gpu_machine.sh, and the nvCOMP wheel. .device/ (about 75 MB) is packed with gzip into
# .devpack/device.tar.gz (about 27 MB) so that it and .wheels/ (28 MB) fit one call's 64 MiB carry:
# carry [".devpack", ".wheels"] and run
#   tar xzf .devpack/device.tar.gz && bash .device/gpu_machine.sh setup && bash .device/gpu_machine.sh tests
# (then sanitize, reads, bench in later calls while the machine stays warm: carried paths stay there).
# Usage (project root): tools/prepare_device.sh
set -euo pipefail
cd "$(dirname "$0")/.."
shared=../shared
mkdir -p .device/bin .device/bench
cargo build --release
cargo test --release --no-run 2>&1 | tee /tmp/gpu-parquet-test-build.log | grep -E "^error" && exit 1
cp target/release/gpu-parquet .device/bin/
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
mkdir -p .devpack && tar czf .devpack/device.tar.gz .device
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

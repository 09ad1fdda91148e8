#!/usr/bin/env bash
# Prepares what a GPU-machine run carries (all under git-ignored .device/ and .wheels/): release builds
# of the CLI and of the GPU test binaries (stripped), a copy of parquet-testing, the shared benchmark
# scripts, tools/gpu_machine.sh, and the nvCOMP wheel. Together they pass one call's 64 MiB carry
# (about 75 + 28 MB), so they travel in two calls while the machine stays warm (carried paths stay
# there between calls): first carry [".wheels"] with `bash tools/gpu_machine.sh setup`, then carry
# [".device"] with `bash .device/gpu_machine.sh tests` (and sanitize, reads, bench).
# Usage (project root): tools/prepare_device.sh
set -euo pipefail
cd "$(dirname "$0")/.."
shared=../shared
mkdir -p .device/bin .device/bench
cargo build --release
cargo test --release --no-run 2>&1 | tee /tmp/gpu-parquet-test-build.log | grep -E "^error" && exit 1
cp target/release/gpu-parquet .device/bin/
for t in device device_decode device_nvcomp corruption faults concurrency; do
  bin=$(grep -o "tests/$t.rs (target/release/deps/[^)]*)" /tmp/gpu-parquet-test-build.log | sed 's/.*(\(.*\))/\1/')
  cp "$bin" ".device/bin/$t"
done
strip .device/bin/*
rm -rf .device/parquet-testing && cp -r "$shared/parquet-testing" .device/parquet-testing
cp "$shared"/bench/*.py .device/bench/
cp tools/gpu_machine.sh .device/
if ! ls .wheels/nvidia_libnvcomp_cu13-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    -d .wheels nvidia-libnvcomp-cu13==5.3.0.16
fi
du -sh .device .wheels

#!/usr/bin/env bash
# A lighter pack than tools/prepare_device.sh, for a run of the read and its A/B beside cuDF: each part
# fits one call's 64 MiB carry beside the tree (about 4.4 MB). Writes, all git-ignored:
#   .devpack/slim.tar.gz      .device/bin/{gpu-parquet, gpu-parquet-old (OLD=REV), device_decode}
#                             stripped, .device/bench/*.py, .device/parquet-testing, .device/gpu_machine.sh,
#                             make_lineitem.sh, make_type_bench.py (about 21 MB, 27 with OLD)
#   .devpack/tests.tar.gz     .device/bin/{device_filter, corruption} (about 14 MB)
#   .wheels/                  nvCOMP 5.3.0.16 and tpchgen-cli (about 32 MB)
#   .cudf-parts/p00..p05      cuDF 26.10 and its libraries without nvCOMP (in .wheels already), six
#                             parts of about 61 MB
# Calls on the GPU machine, back to back while it stays warm (state lives in /tmp; a call's
# GPU_PARQUET_NVCOMP and the rest come from gpu_machine.sh, so run the binaries through its verbs):
#   1. carry [".wheels", ".devpack/slim.tar.gz"]: tar xzf .devpack/slim.tar.gz && bash
#      tools/gpu_machine.sh setup && bash tools/gpu_machine.sh lineitem (about 50 s), then `walls`...
#   2-7. carry [".cudf-parts/p0K"], K = 0..5: bash tools/gpu_machine.sh part (and a slice of the A/B)
#   8. carry [".devpack/tests.tar.gz"]: tar xzf it; FILES="lineitem_snappy lineitem_zstd" bash
#      tools/gpu_machine.sh cudf (about 165 s in run AZ's form, the flat files about 80 s more; the
#      refilled page cache adds a bench and a cuDF start a file), then `tests`, `corrupt`.
# Usage (project root): tools/device_pack.sh   (OLD=REV tools/device_pack.sh: with REV's CLI)
set -euo pipefail
cd "$(dirname "$0")/.."
shared=../shared
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/.device/bin" "$stage/.device/bench" .devpack
cargo build --release --bin gpu-parquet
cp target/release/gpu-parquet "$stage/.device/bin/"
if [ -n "${OLD:-}" ]; then
  rm -rf /tmp/gpu-parquet-old /tmp/gpu-parquet-old-target && git worktree prune
  git worktree add -f --detach /tmp/gpu-parquet-old "$OLD"
  mkdir -p /tmp/gpu-parquet-old-target && cp -a target/release /tmp/gpu-parquet-old-target/
  (cd /tmp/gpu-parquet-old && CARGO_TARGET_DIR=/tmp/gpu-parquet-old-target cargo build --release --bin gpu-parquet)
  cp /tmp/gpu-parquet-old-target/release/gpu-parquet "$stage/.device/bin/gpu-parquet-old"
  git worktree remove --force /tmp/gpu-parquet-old
fi
# The test binaries after the CLI: their build relinks it with the tests' features.
log=$(mktemp)
cargo test --release --no-run --test device_decode --test device_filter --test corruption 2>&1 | tee "$log" | grep -E "^error" && exit 1
mkdir -p "$stage/tests/.device/bin"
for t in device_decode device_filter corruption; do
  bin=$(grep -o "tests/$t.rs (target/release/deps/[^)]*)" "$log" | sed 's/.*(\(.*\))/\1/')
  dest="$stage/tests/.device/bin"
  [ "$t" = device_decode ] && dest="$stage/.device/bin"
  cp "$bin" "$dest/$t"
done
strip "$stage"/.device/bin/* "$stage"/tests/.device/bin/*
cp "$shared"/bench/*.py "$stage/.device/bench/"
cp -r "$shared/parquet-testing" "$stage/.device/parquet-testing"
cp tools/gpu_machine.sh tools/make_lineitem.sh tools/make_type_bench.py "$stage/.device/"
tar czf .devpack/slim.tar.gz -C "$stage" .device
tar czf .devpack/tests.tar.gz -C "$stage/tests" .device
pip_get() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$@"
}
ls .wheels/nvidia_libnvcomp_cu13-*.whl >/dev/null 2>&1 || pip_get .wheels nvidia-libnvcomp-cu13==5.3.0.16
ls .wheels/tpchgen_cli-*.whl >/dev/null 2>&1 || pip_get .wheels tpchgen-cli
if ! [ -f .cudf-parts/p05 ]; then
  whl=$(mktemp -d)
  pip_get "$whl" 'libcudf-cu13==26.10.*' 'pylibcudf-cu13==26.10.*' 'librmm-cu13==26.10.*' 'rmm-cu13==26.10.*' \
    rapids-logger==0.3.0 nvtx 'nvidia-nvjitlink>=13.0,<14' libkvikio-cu13==26.10.0
  tar cf "$whl.tar" -C "$whl" . && mkdir -p .cudf-parts && split -n 6 -d -a 2 "$whl.tar" .cudf-parts/p
  rm -rf "$whl" "$whl.tar"
fi
du -sh .devpack/slim.tar.gz .devpack/tests.tar.gz .wheels .cudf-parts

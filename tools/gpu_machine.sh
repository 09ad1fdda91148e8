#!/usr/bin/env bash
# Runs on the GPU machine, from the project copy's root, over what tools/prepare_device.sh carried
# (`setup` does what its carried inputs allow, so it runs from tools/ in the first call, then again).
#   setup     nvCOMP into /tmp/site, the two benchmark files into /tmp/bench (about 30 s)
#   tests     the GPU test binaries (one test thread: they share the device and cuFile's statistics)
#   sanitize  the same under compute-sanitizer memcheck (leak check) and racecheck: summaries only
#   reads     `read` of both benchmark files, 3 times each: the decode report's totals and step windows
#   bench     `bench` of both files (hot and cold)
#   python    the Python package's wheel (.devpack/) into /tmp/site, its pytest suite, and the pylibcudf
#             import check (python/gpu_checks/pylibcudf_import.py; needs cuDF installed in /tmp/site)
# State lives in /tmp, which goes when the machine is released (about 30 s idle).
set -uo pipefail
here=$PWD
export GPU_PARQUET_TESTING=$here/.device/parquet-testing
export GPU_PARQUET_NVCOMP=/tmp/site/nvidia/libnvcomp/lib64
export GPU_PARQUET_KERNEL_CACHE=/tmp/kcache
export PYTHONPATH=/tmp/site
B=$here/.device/bin
F=/tmp/bench
tests="device device_nvcomp device_decode corruption faults concurrency"
case "${1:-}" in
  setup)
    # Each part where its input was carried: nvCOMP from .wheels/, the bench files from .device/.
    if [ ! -d /tmp/site/nvidia/libnvcomp ] && ls .wheels/*.whl >/dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --target /tmp/site .wheels/*.whl && echo "nvCOMP installed"
    fi
    if [ -f .device/bench/make_bench_files.py ]; then
      mkdir -p $F && python3 .device/bench/make_bench_files.py $F >/dev/null && ls -l $F
    fi ;;
  tests)
    for t in $tests; do echo "== $t"; timeout 500 $B/$t --test-threads=1 2>&1 | grep -E "^test |test result|skipped|panicked" | tail -${TAIL:-12}; done ;;
  sanitize)
    cs=/usr/local/cuda/bin/compute-sanitizer
    for t in ${2:-device_decode faults}; do
      echo "== memcheck $t"; timeout 550 $cs --tool memcheck --leak-check full $B/$t --test-threads=1 2>&1 | grep -E "ERROR SUMMARY|LEAK SUMMARY|test result" | tail -4
      echo "== racecheck $t"; timeout 550 $cs --tool racecheck $B/$t --test-threads=1 2>&1 | grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result" | tail -3
    done ;;
  reads)
    for f in plain snappy; do for i in 1 2 3; do
      $B/gpu-parquet read $F/$f.parquet ${EXTRA:-} 2>&1 | grep -E "^decoded|^steps|^device memory"
    done; done ;;
  bench)
    for f in plain snappy; do $B/gpu-parquet bench $F/$f.parquet --reps 5 ${EXTRA:-}; done ;;
  python)
    python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site .devpack/gpu_parquet-*.whl
    python3 -m pytest -q -p no:cacheprovider python/tests 2>&1 | tail -3
    python3 python/gpu_checks/pylibcudf_import.py testdata/*.parquet $F/plain.parquet ;;
  *) sed -n 2,11p "$0"; exit 2 ;;
esac

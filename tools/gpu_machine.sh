#!/usr/bin/env bash
# Runs on the GPU machine, from the project copy's root, over what tools/prepare_device.sh carried
# (`setup` does what its carried inputs allow, so it runs from tools/ in the first call, then again).
#   setup     nvCOMP into /tmp/site, the two benchmark files into /tmp/bench (about 30 s)
#   types     the type benchmark's files (tools/make_type_bench.py: MATRIX, SIZE_MB, TYPES) into /tmp/typebench;
#             then F=/tmp/typebench FILES="NAME ..." (file names less .parquet) for bench and cudf
#   lineitem  TPC-H lineitem (SF, default 10) as tpchgen-cli writes it, snappy and zstd, into /tmp/bench
#             (tools/make_lineitem.sh; its wheel carried in .wheels/; KINDS=zstd writes only that one)
#   tests     the GPU test binaries (TESTS; one test thread: they share the device and cuFile's statistics)
#   sanitize  the same under compute-sanitizer memcheck (leak check) and racecheck (our gp_* kernels):
#             summaries only; `sanitize "BIN ..."` for chosen binaries
#   memcheck  memcheck of one test binary (`memcheck BIN [FILTER]`) with every report's first lines
#   reads     `read` of both benchmark files, 3 times each: the decode report's totals and step windows
#   corrupt   the corruption suite's GPU test over every backend (cuFile with udev data); under a sanitizer
#   race      racecheck of test binaries (`race "BIN ..."`)
#   ncu       the GPU time of each kernel (ncu, kernels serialised; tools/ncu_kernel_times.py) over one
#             `read` of each of FILES (EXTRA: more read arguments; BIN: a binary of .device/bin; TOP
#             kernels, default 24, and the total)
#   ncusec    what bounds chosen kernels (ncu's SpeedOfLight, Occupancy, LaunchStats, WarpStateStats;
#             tools/ncu_sections.py: a line per launch) over one `read` of each of FILES: KERNELS, a regex
#             of kernel names (default every gp_ kernel), LAUNCHES (default 16) after SKIP launches (0)
#   ncusrc    where chosen kernels stall, by CUDA line: one launch of each of KERNELS (names, default
#             gp_dict_indices; after SKIP launches, default 3) over one `read` of each of FILES under ncu's
#             source counters (tools/ncu_source_lines.py: the TOP lines of most stall samples, default
#             20; with $OUT set, the source page's CSV comes back as src_KERNEL.csv)
#   steps     one `read --json` of each of FILES (default: both flat files; EXTRA: more read arguments)
#             through tools/step_windows.py (each step's windows)
#   timeline  nsys's trace of one `read --warm-up 1` of each of FILES (BIN, EXTRA as for ncu) through
#             tools/gpu_busy.py: how much of the last read the GPU spent in kernels and in host-to-device
#             copies, by BIN_MS window (where the machine has nsys)
#   pypaths   examples/compare_paths.py on the plain file (KvikIO ON/OFF/AUTO, cuDF where installed,
#             gpu_parquet): as the machine is, then with the udev data that lets cuFile register files
#   dask      examples/dask_read.py on both benchmark files (dask.distributed from .devpack/dask/;
#             WORKERS, default one per GPU), equal to pyarrow's single-process read
#   multi     examples/multi_gpu on the dataset of both benchmark files (DEVICES, default every GPU;
#             on one GPU, 0,0 puts two shares on it), and the dataset test binary
#   analytics examples/analytics_job on the plain benchmark file (GPU kernel against arrow's compute)
#   paths     examples/compare_paths on the plain file: as the machine is (cuFile refused), then with the
#             udev data that lets cuFile register files (DEVICE.md), so its compat mode runs
#   bench     `bench` of FILES (default: both flat files; hot and cold)
#   python    the Python package's wheel (.devpack/) into /tmp/site, its pytest suite, and the pylibcudf
#             import check (python/gpu_checks/pylibcudf_import.py; needs cuDF installed in /tmp/site)
#   walls     A/B of `read FILE --warm-up 2` walls, interleaved, N rounds (default 6): `walls FILE` with
#             RUNS="bin[,VAR=VALUE...] ..." (binaries in .device/bin; default: gpu-parquet), best / median
#             and every wall per run, FILE plain or snappy
#   abbench   the same runs' `bench FILE --only-decode --no-cold` decode rows, ROUNDS rounds (default 1)
#   trace     each of RUNS' (as `walls` takes them) `bench FILE --reps 2 --only-decode --no-cold` with
#             GPU_PARQUET_TRACE_FETCH=1 (`trace FILE`): the decode-alone rows, then each held step's phases
#             (headers, decompression, kernels) and how its headers and kernels went; the whole trace to
#             $OUT/trace_FILE_K.txt where OUT is set
#   overlap   steps held and decoded at once on FILE (`overlap FILE`): `walls` of the default against
#             SETS of HELD,DECODING (default "5,4 7,6 9,8", through GPU_PARQUET_STEPS_IN_FLIGHT and
#             GPU_PARQUET_DECODE_THREADS; or RUNS as `walls` takes them), then one `read --warm-up 1` of
#             each: its peak and nvCOMP scratch
#   cudf      the run beside cuDF (README, "Performance") over FILES (default: plain snappy;
#             lineitem_snappy lineitem_zstd after `lineitem`): bench hot, cudf_baseline.py at 4 and at
#             32 KvikIO threads, bench hot again (OURS: a RUNS spec, default gpu-parquet), each after
#             the page cache was dropped and refilled by one `cat` of the file (run AZ's staged reads
#             ran up to a third slower once other files were written and the cache dropped and refilled
#             by other readers); then bench hot and cold, dd of the files
#             after dropping the page cache, read --verify; the cuDF
#             wheels as a tar split into .cudf-parts/p00... (shared/bench/README.md), each carried by an
#             earlier call on the same warm machine: `part` (carry [".cudf-parts/p00"], then p01, ...)
#   selective the selective reads of issue 43 on lineitem_sorted (`selective [FILE]`): `bench --filter`
#             rows (filtered, unfiltered, pages holding matching rows) beside tools/cudf_filters.py
# State lives in /tmp, which goes when the machine is released (about 30 s idle). With $OUT set (the
# device tool's folder of files that come back), each verb's whole output is also appended to
# $OUT/gpu_machine-VERB.txt: a call's reply keeps only the tail of its output.
set -uo pipefail
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ] && [ -z "${GPU_MACHINE_TEED:-}" ]; then
  GPU_MACHINE_TEED=1 bash "$0" "$@" 2>&1 | tee -a "$OUT/gpu_machine-${1:-help}.txt"
  exit "${PIPESTATUS[0]}"
fi
here=$PWD
export GPU_PARQUET_TESTING=$here/.device/parquet-testing
export GPU_PARQUET_NVCOMP=/tmp/site/nvidia/libnvcomp/lib64
export GPU_PARQUET_KERNEL_CACHE=/tmp/kcache
export PYTHONPATH=/tmp/site
B=$here/.device/bin
F=${F:-/tmp/bench}
tests=${TESTS:-device device_nvcomp device_decode device_filter corruption faults concurrency}
files=${FILES:-plain snappy}
# The udev data cuFile's compat mode needs before it registers files on this machine (DEVICE.md).
udev_data() {
  mkdir -p /run/udev/data && printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n' > /run/udev/data/b254:0
}
# Empties the page cache (root on that machine), for cold reads.
drop_page_cache() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# A bench's copy, staged and decode rows, squeezed to a line each (the per-step detail rows left out).
bench_rows() { grep -E "decode|staged|pinned" | grep -v "one step of" | sed 's/  */ /g' | cut -c1-220; }
# Runs a RUNS spec (a binary of .device/bin, then the environment it runs with, comma-separated) with
# the arguments after it.
run_spec() { local spec; IFS=, read -ra spec <<< "$1"; env "${spec[@]:1}" $B/${spec[0]} "${@:2}"; }
# `bench FILE --only-decode` of a spec, as every run beside cuDF and A/B measures it, its rows squeezed.
decode_bench() { run_spec "$1" bench $F/$2.parquet --reps 5 --staged-threads 12 --only-decode "${@:3}" 2>&1 | bench_rows; }
case "${1:-}" in
  setup)
    # Each part where its input was carried: nvCOMP from .wheels/, the bench files from .device/.
    if [ ! -d /tmp/site/nvidia/libnvcomp ] && ls .wheels/*.whl >/dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --target /tmp/site .wheels/*.whl && echo "nvCOMP installed"
    fi
    if [ -f .device/bench/make_bench_files.py ]; then
      mkdir -p $F && python3 .device/bench/make_bench_files.py $F >/dev/null && ls -l $F
    fi ;;
  lineitem)
    bash .device/make_lineitem.sh $F ${SF:-10} ;;
  types)
    python3 .device/make_type_bench.py /tmp/typebench ${TYPES:-} | sed 's/ bytes.*//' ;;
  tests)
    for t in $tests; do echo "== $t"; timeout 500 $B/$t --test-threads=1 2>&1 | grep -E "^test |test result|skipped|panicked" | tail -${TAIL:-12}; done ;;
  sanitize)
    cs=/usr/local/cuda/bin/compute-sanitizer
    for t in ${2:-device_decode faults}; do
      echo "== memcheck $t"; timeout 550 $cs --tool memcheck --leak-check full $B/$t --test-threads=1 2>&1 | grep -E "ERROR SUMMARY|LEAK SUMMARY|test result" | tail -4
      # Racecheck looks at shared memory: our kernels only (gp_*), nvCOMP's run uninstrumented.
      echo "== racecheck $t"; timeout 550 $cs --tool racecheck --kernel-name kns=gp_ $B/$t --test-threads=1 2>&1 | grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result" | tail -3
    done ;;
  memcheck)
    # Each report with its first frames that name a library or function (nvCOMP's, cuFile's or ours).
    cs=/usr/local/cuda/bin/compute-sanitizer
    timeout 550 $cs --tool memcheck --leak-check full --print-limit 20 $B/$2 --test-threads=1 ${3:-} 2>&1 \
      | grep -E "^=========|test result" | grep -vE "Host Frame: +in (device|faults|corruption|concurrency|libc)" \
      | sed -E 's/ \[0x[0-9a-f]+\]//' | cut -c1-160 | head -${HEAD:-80} ;;
  corrupt)
    # The corruption suite's GPU test over staged, staged O_DIRECT and cuFile (its compat mode, with
    # the udev data that lets it register files: DEVICE.md); `corrupt memcheck|racecheck` under the
    # sanitizer, with SHARD=K/N and BACKENDS (GPU_PARQUET_TEST_SHARD, GPU_PARQUET_TEST_BACKENDS).
    udev_data
    t=damaged_files_give_clear_errors_or_arrow_rs_tables_on_the_gpu
    cs=/usr/local/cuda/bin/compute-sanitizer
    case "${2:-}" in
      memcheck) run=($cs --tool memcheck --leak-check full) ;;
      racecheck) run=($cs --tool racecheck --kernel-name kns=gp_) ;;
      *) run=() ;;
    esac
    GPU_PARQUET_TEST_SHARD=${SHARD:-0/1} GPU_PARQUET_TEST_BACKENDS=${BACKENDS:-staged,direct,cufile} GPU_PARQUET_TEST_TIMEOUT_S=300 \
      timeout ${LIMIT:-550} "${run[@]}" $B/corruption --test-threads=1 --nocapture $t 2>&1 \
      | grep -E "GPU decoder over|skipped|cases|refused|same_as|named_chunk|defects|SUMMARY|test result|panicked" | head -20 ;;
  race)
    # Racecheck (our gp_* kernels) of test binaries, each within LIMIT seconds.
    cs=/usr/local/cuda/bin/compute-sanitizer
    for t in ${2:-device device_nvcomp faults concurrency dataset}; do
      echo "== racecheck $t"; timeout ${LIMIT:-200} $cs --tool racecheck --kernel-name kns=gp_ $B/$t --test-threads=1 ${3:-} 2>&1 | grep -E "RACECHECK SUMMARY|ERROR SUMMARY|test result" | tail -3
    done ;;
  ncu)
    for f in $files; do
      echo "== ncu ${BIN:-gpu-parquet} read $f ${EXTRA:-}"
      /usr/local/cuda/bin/ncu --metrics gpu__time_duration.sum --csv $B/${BIN:-gpu-parquet} read $F/$f.parquet ${EXTRA:-} 2>/dev/null \
        | python3 tools/ncu_kernel_times.py ${TOP:-24}
    done ;;
  ncusec)
    for f in $files; do
      echo "== ncu sections ${BIN:-gpu-parquet} read $f ${EXTRA:-} (${KERNELS:-gp_})"
      /usr/local/cuda/bin/ncu --kernel-name "regex:${KERNELS:-gp_}" --launch-skip ${SKIP:-0} --launch-count ${LAUNCHES:-16} \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --csv --page details \
        $B/${BIN:-gpu-parquet} read $F/$f.parquet ${EXTRA:-} 2>/dev/null | python3 tools/ncu_sections.py
    done ;;
  ncusrc)
    # ncu finds the kernel files by the names the program's #line directives give them (file names
    # alone), in the working directory.
    cp src/decode/kernels/*.cu src/decode/kernels/*.cuh "$here/"
    ncu=/usr/local/cuda/bin/ncu
    for f in $files; do for k in ${KERNELS:-gp_dict_indices}; do
      echo "== ncu source ${BIN:-gpu-parquet} read $f ${EXTRA:-} ($k, after ${SKIP:-3} launches)"
      $ncu --kernel-name "$k" --launch-skip ${SKIP:-3} --launch-count 1 --section SourceCounters --section WarpStateStats \
        --section SpeedOfLight --section Occupancy --import-source yes -f -o /tmp/ncusrc \
        $B/${BIN:-gpu-parquet} read $F/$f.parquet ${EXTRA:-} > /dev/null 2>&1
      $ncu -i /tmp/ncusrc.ncu-rep --csv --page details | python3 tools/ncu_sections.py
      $ncu -i /tmp/ncusrc.ncu-rep --page source --csv --print-source cuda,sass > /tmp/ncusrc.csv
      python3 tools/ncu_source_lines.py /tmp/ncusrc.csv ${TOP:-20}
      if [ -n "${OUT:-}" ]; then cp /tmp/ncusrc.csv "$OUT/src_$k.csv"; fi
    done; done ;;
  timeline)
    # nsys's trace of one `read --warm-up 1` of each of FILES through tools/gpu_busy.py: the share of
    # the last read in which kernels and host-to-device copies ran, by BIN_MS window.
    ns=$(ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
    if [ -z "$ns" ]; then echo "no nsys on this machine"; exit 0; fi
    for f in $files; do
      echo "== timeline ${BIN:-gpu-parquet} read $f --warm-up 1 ${EXTRA:-}"
      $ns profile --trace cuda --sample none --cpuctxsw none --force-overwrite true -o /tmp/tl \
        $B/${BIN:-gpu-parquet} read $F/$f.parquet --warm-up 1 ${EXTRA:-} > /dev/null 2>&1
      $ns stats --report cuda_gpu_trace --format csv --force-export true --output /tmp/tl /tmp/tl.nsys-rep > /dev/null 2>&1
      python3 tools/gpu_busy.py /tmp/tl_cuda_gpu_trace.csv
    done ;;
  steps)
    for f in $files; do
      $B/gpu-parquet read $F/$f.parquet --json ${EXTRA:-} | python3 tools/step_windows.py
    done ;;
  paths)
    $B/compare_paths $F/plain.parquet --reps 3
    udev_data
    echo "== with /run/udev/data/b254:0"; $B/compare_paths $F/plain.parquet --reps 3 --no-cold ;;
  pypaths)
    python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site .devpack/gpu_parquet-*.whl
    python3 examples/compare_paths.py $F/plain.parquet --reps ${REPS:-3}
    udev_data
    echo "== with /run/udev/data/b254:0"; python3 examples/compare_paths.py $F/plain.parquet --reps ${REPS:-3} ;;
  dask)
    python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site .devpack/gpu_parquet-*.whl .devpack/dask/*.whl
    python3 examples/dask_read.py $F/plain.parquet $F/snappy.parquet ${WORKERS:+--workers $WORKERS} ;;
  multi)
    $B/dataset --test-threads=1 2>&1 | grep -E "^test |skipped|test result"
    $B/multi_gpu $F/plain.parquet $F/snappy.parquet --devices ${DEVICES:-0,0} --reps 3
    echo "== gpu-parquet dataset"; $B/gpu-parquet dataset $F/plain.parquet $F/snappy.parquet --devices ${DEVICES:-0,0} --verify ;;
  analytics)
    $B/analytics_job $F/plain.parquet 0.5 ;;
  reads)
    for f in plain snappy; do for i in 1 2 3; do
      $B/gpu-parquet read $F/$f.parquet ${EXTRA:-} 2>&1 | grep -E "^decoded|^steps|^device memory"
    done; done ;;
  bench)
    for f in $files; do $B/gpu-parquet bench $F/$f.parquet --reps 5 --drop-caches ${EXTRA:-}; done ;;
  python)
    python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site .devpack/gpu_parquet-*.whl
    python3 -m pytest -q -p no:cacheprovider python/tests 2>&1 | tail -3
    # KvikIO (inside cuDF) in its POSIX mode: cuFile is refused on this machine anyway (DEVICE.md).
    KVIKIO_COMPAT_MODE=ON python3 python/gpu_checks/pylibcudf_import.py testdata/*.parquet $F/plain.parquet ;;
  walls)
    f=${2:?walls FILE}; runs=${RUNS:-gpu-parquet}; k=0
    for r in $runs; do : > /tmp/walls.$k; k=$((k + 1)); done
    for i in $(seq ${N:-6}); do k=0; for r in $runs; do
      run_spec "$r" read $F/$f.parquet --warm-up 2 --json \
        | python3 -c "import json,sys; print(json.load(sys.stdin)['decode']['wall']*1e3)" >> /tmp/walls.$k
      k=$((k + 1))
    done; done
    k=0; for r in $runs; do
      echo "$f [$r]: $(sort -n /tmp/walls.$k | awk '{a[NR]=$1} END {m=(a[int((NR+1)/2)]+a[int(NR/2)+1])/2; printf "best %.2f median %.2f |", a[1], m}') $(sort -n /tmp/walls.$k | awk '{printf "%.1f ", $1}')"
      k=$((k + 1))
    done ;;
  abbench)
    f=${2:?abbench FILE}
    for i in $(seq ${ROUNDS:-1}); do for r in ${RUNS:-gpu-parquet}; do
      echo "== $i $r"; decode_bench "$r" $f --no-cold
    done; done ;;
  trace)
    f=${2:?trace FILE}; k=0
    for r in ${RUNS:-gpu-parquet}; do
      t=/tmp/trace_${f}_$k.txt
      GPU_PARQUET_TRACE_FETCH=1 run_spec "$r" bench $F/$f.parquet --reps 2 --only-decode --no-cold --staged-threads 12 > $t 2>&1
      echo "== $r"; grep -E "^decode only" $t | bench_rows
      grep -E "held step|step's headers|step's kernels|header pass" $t | tail -${TAIL:-24} | cut -c1-170
      if [ -n "${OUT:-}" ]; then cp $t "$OUT/"; fi
      k=$((k + 1))
    done ;;
  overlap)
    f=${2:?overlap FILE}; runs=${RUNS:-}
    if [ -z "$runs" ]; then
      runs=gpu-parquet
      for set in ${SETS:-5,4 7,6 9,8}; do
        runs="$runs gpu-parquet,GPU_PARQUET_STEPS_IN_FLIGHT=${set%,*},GPU_PARQUET_DECODE_THREADS=${set#*,}"
      done
    fi
    RUNS="$runs" bash "$0" walls "$f"
    for r in $runs; do
      echo "$f [$r]: $(run_spec "$r" read $F/$f.parquet --warm-up 1 2>&1 | grep -E "^device memory|^nvCOMP scratch" \
        | sed -E 's/ \(with what.*//; s/device memory: //' | tr '\n' ' ')"
    done ;;
  part)
    mkdir -p /tmp/parts && cp .cudf-parts/p* /tmp/parts/ && ls /tmp/parts ;;
  cudf)
    # Installed once per machine (a second `cudf`, on the type benchmark's files, reuses it).
    [ -d /tmp/site/cudf ] || { mkdir -p /tmp/whl && cat /tmp/parts/p0* | tar xf - -C /tmp/whl \
      && python3 -m pip install -q --no-index --no-deps --target /tmp/site /tmp/whl/*.whl 2>&1 | tail -2; }
    # Every hot figure over a page cache filled the same way: cudf_baseline.py drops it for its cold
    # run, and in run AZ the staged reads ran up to a third slower after such drops and refills.
    refill() { drop_page_cache; cat "$F/$1.parquet" > /dev/null; }
    for f in $files; do refill $f; echo "== ours $f"; decode_bench ${OURS:-gpu-parquet} $f --no-cold; done
    for f in $files; do for th in 4 32; do
      refill $f; echo "== cudf $f ($th KvikIO threads)"
      KVIKIO_COMPAT_MODE=ON python3 .device/bench/cudf_baseline.py $F/$f.parquet $th 2>&1 | grep -E "^\{"
    done; done
    for f in $files; do refill $f; echo "== ours again $f"; decode_bench ${OURS:-gpu-parquet} $f --no-cold; done
    for f in $files; do refill $f; echo "== ours, hot and cold $f"; decode_bench ${OURS:-gpu-parquet} $f --drop-caches; done
    for f in $files; do drop_page_cache; echo "== dd $f"; dd if=$F/$f.parquet of=/dev/null bs=16M iflag=direct 2>&1 | tail -1; done
    for f in $files; do $B/gpu-parquet read $F/$f.parquet --verify 2>&1 | grep -E "verified|peak|page headers|GB/s"; done ;;
  selective)
    # Issue 43's queries on lineitem_sorted (after `lineitem`, with sort_parquet carried), ours then
    # cuDF's (tools/cudf_filters.py; cuDF installed by `cudf` first), then ours again: Q6, Q1, a point
    # lookup on the sort column and one answered by bloom filters. Each: NAME|COLUMNS|OUR FILTER|DNF.
    f=$F/${2:-lineitem_sorted}.parquet
    queries=(
      "q6|l_extendedprice,l_discount|l_shipdate >= '1994-01-01' and l_shipdate < '1995-01-01' and l_discount between 0.05 and 0.07 and l_quantity < 24|[[\"l_shipdate\",\">=\",\"1994-01-01\"],[\"l_shipdate\",\"<\",\"1995-01-01\"],[\"l_discount\",\">=\",0.05],[\"l_discount\",\"<=\",0.07],[\"l_quantity\",\"<\",24]]"
      "q1|l_returnflag,l_linestatus,l_quantity,l_extendedprice,l_discount,l_tax|l_shipdate <= '1998-09-02'|[[\"l_shipdate\",\"<=\",\"1998-09-02\"]]"
      "point|l_orderkey,l_extendedprice|l_shipdate = '1995-06-17'|[[\"l_shipdate\",\"=\",\"1995-06-17\"]]"
      "bloom|l_shipdate,l_extendedprice|l_orderkey = 30000001|[[\"l_orderkey\",\"=\",30000001]]"
    )
    for round in ours cudf again; do for q in "${queries[@]}"; do
      IFS='|' read -r name cols expr dnf <<< "$q"
      echo "== $round $name"
      if [ $round = cudf ]; then
        KVIKIO_COMPAT_MODE=ON python3 tools/cudf_filters.py $f "$cols" "$dnf" 4,32 2>&1 | grep -E "^\{|Error"
      else
        $B/gpu-parquet bench $f --reps 5 --staged-threads 12 --only-decode --columns "$cols" \
          --filter "$name:$expr" $([ $round = ours ] && echo --drop-caches) 2>&1 | grep -E "^filter|^decode: file" | sed 's/  */ /g'
      fi
    done; done ;;
  *) sed -n '2,/^# State lives/p' "$0"; exit 2 ;;
esac

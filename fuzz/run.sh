#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60), seeded from the parquet-testing corpus.
# Crashes land in fuzz/artifacts/<target>/; copy each into tests/fuzz-regressions/<target>/ and fix it.
# Usage: fuzz/run.sh [SECONDS] [TARGET ...]   (needs the nightly toolchain and `cargo install cargo-fuzz`)
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-60}; shift || true
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=(footer_plan page_headers hybrid delta whole_file)
testing=${GPU_PARQUET_TESTING:-../../shared/parquet-testing}
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  if [ -d "$testing/data" ] && [ -z "$(ls -A "corpus/$t")" ]; then
    case $t in
      footer_plan|whole_file)
        # Small files only: the whole-file target reads and decodes every input twice.
        find "$testing/data" "$testing/bad_data" ../testdata -name '*.parquet' -size -64k \
          -exec cp -t "corpus/$t" {} + 2>/dev/null || true ;;
      page_headers)
        # A column chunk starts right after the leading magic in most files.
        for f in "$testing"/data/*.parquet; do
          head -c 65540 "$f" | tail -c +5 > "corpus/$t/$(basename "$f")"
        done ;;
    esac
  fi
  echo "== $t: $secs s"
  mkdir -p logs
  # parquet 60.1.0 reserves num_children x 8 bytes for a schema group before checking the count
  # against the footer (fixed upstream in apache/arrow-rs#9884): up to 16 GiB of untouched virtual
  # memory, a clean error afterwards (tests/fuzz-regressions/footer_plan/schema-num-children-7gib).
  # The malloc limit is raised past it so that the run goes on to find other defects; RSS stays capped.
  extra=(); case $t in footer_plan|whole_file) extra=(-malloc_limit_mb=20480) ;; esac
  cargo +nightly fuzz run -O "$t" "corpus/$t" -- -max_total_time="$secs" \
    -rss_limit_mb=4096 "${extra[@]}" -timeout=20 -print_final_stats=1 > "logs/$t.log" 2>&1 || echo "   $t stopped with a finding (logs/$t.log)"
  grep -E "stat::number_of_executed_units|stat::peak_rss|SUMMARY|panicked at" "logs/$t.log" | head -5 || true
  echo "   corpus: $(ls "corpus/$t" | wc -l) inputs; crashes: $(ls "artifacts/$t" 2>/dev/null | wc -l)"
done

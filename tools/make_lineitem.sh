#!/usr/bin/env bash
# Writes TPC-H lineitem at scale factor SF (default 10: 59,986,052 rows) as real users write it, with
# tpchgen-cli (DataFusion's generator, a static binary from PyPI: `pip install tpchgen-cli`, or its
# wheel carried in .wheels/ to a machine without a network), into DIR (default /tmp/bench):
#   lineitem_snappy.parquet  tpchgen-cli's defaults (SNAPPY, about 7 MiB row groups)
#   lineitem_zstd.parquet    --compression 'ZSTD(1)' --row-group-bytes 128MB
#   lineitem_sorted.parquet  the snappy file sorted by l_shipdate, with page statistics, the page index
#                            and bloom filters on l_orderkey and l_partkey (the selective-scan benchmark),
#                            written by examples/sort_parquet.rs (SORT: its binary, default
#                            .device/bin/sort_parquet) where that binary is there
# All ask for Utf8View in their Arrow schema, as the generator writes it.
# KINDS (default "snappy zstd"): which of the two to write, e.g. KINDS=zstd on a short loan.
# Usage: tools/make_lineitem.sh [DIR] [SF]
set -euo pipefail
dir=${1:-/tmp/bench}
sf=${2:-10}
gen=$(command -v tpchgen-cli || true)
if [ -z "$gen" ]; then
  # A carried wheel: install it beside the other carried packages.
  site=${SITE:-/tmp/site}
  if ! [ -x "$site/bin/tpchgen-cli" ]; then
    python3 -m pip install -q --no-index --no-deps --target "$site" .wheels/tpchgen_cli-*.whl
  fi
  gen=$site/bin/tpchgen-cli
fi
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/lineitem.XXXX")
trap 'rm -rf "$tmp"' EXIT
kinds=${KINDS:-snappy zstd}
for kind in $kinds; do
  case $kind in
    snappy) "$gen" parquet -s "$sf" --tables lineitem --no-progress -o "$tmp/snappy" ;;
    zstd) "$gen" parquet -s "$sf" --tables lineitem --no-progress --compression 'ZSTD(1)' --row-group-bytes 128MB -o "$tmp/zstd" ;;
    *) echo "make_lineitem.sh: KINDS takes snappy and zstd, not $kind" >&2; exit 2 ;;
  esac
  mv "$tmp/$kind/lineitem.parquet" "$dir/lineitem_$kind.parquet"
done
sort=${SORT:-.device/bin/sort_parquet}
if [ -x "$sort" ] && [[ " $kinds " == *" snappy "* ]]; then
  "$sort" "$dir/lineitem_snappy.parquet" "$dir/lineitem_sorted.parquet" --by l_shipdate \
    --row-group-rows 4194304 --bloom l_orderkey,l_partkey
fi
ls -l "$dir"/lineitem_*.parquet

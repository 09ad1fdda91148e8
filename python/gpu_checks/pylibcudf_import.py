#!/usr/bin/env python3
"""On the GPU machine (not collected by pytest): tables read by gpu_parquet and imported by pylibcudf
through __arrow_c_device_array__ must hold pyarrow's values, and the import must not copy the data
(rmm's statistics: what pylibcudf allocates during the import stays far below the columns' size).
Needs the gpu_parquet wheel and pylibcudf (../shared/bench/README.md says how to carry it).
Usage: pylibcudf_import.py FILE..."""
import sys

import cupy as cp
import pyarrow as pa
import pyarrow.parquet as pq
import pylibcudf as plc
import rmm
import rmm.statistics

import gpu_parquet

rmm.statistics.enable_statistics()


def to_host(table, names):
    for convert in (lambda: plc.interop.to_arrow(table), lambda: table.to_arrow()):
        try:
            got = convert()
            break
        except AttributeError:
            continue
    else:
        raise RuntimeError("no pylibcudf to_arrow in this version")
    return pa.table(list(got.columns), names=names)


failed = 0
for path in sys.argv[1:]:
    t = gpu_parquet.read(path, steps=1)
    if t.device != "cuda":
        print(f"{path}: decoded on {t.device}, not the GPU")
        failed += 1
        continue
    size = t.report["decode"]["output_bytes"]
    rmm.statistics.push_statistics()
    table = plc.Table.from_arrow(t)
    cp.cuda.Device().synchronize()
    stats = rmm.statistics.pop_statistics()
    want = pq.read_table(path)
    got = to_host(table, want.column_names)
    same = all(got.column(i).combine_chunks().equals(want.column(i).combine_chunks()) for i in range(want.num_columns))
    no_copy = stats.peak_bytes < max(size // 20, 1 << 20)
    print(
        f"{path}: {t.num_rows} rows, columns {size} bytes; pylibcudf import allocated peak {stats.peak_bytes} bytes "
        f"({'no copy' if no_copy else 'A COPY'}); values {'equal to' if same else 'DIFFERENT FROM'} pyarrow's"
    )
    failed += (not same) + (not no_copy)
sys.exit(1 if failed else 0)

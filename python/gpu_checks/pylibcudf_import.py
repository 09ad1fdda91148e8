#!/usr/bin/env python3
"""On the GPU machine (not collected by pytest): tables read by gpu_parquet and imported by pylibcudf
through __arrow_c_device_array__ must hold pyarrow's values, and the import must not copy the data
(rmm's statistics: what pylibcudf allocates during the import stays far below the columns' size).
Needs the gpu_parquet wheel and pylibcudf (../shared/bench/README.md says how to carry it).
Reads go through the staged backend: with cuFile and KvikIO (inside cuDF) in one process, libcufile
aborted on the GPU machine ("Assertion failure, file index :cufio-plat line :149").
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


def to_host(table):
    # pylibcudf 26.10: Table.to_arrow (plc.interop.to_arrow is gone); child field names are dropped.
    return pa.table(table.to_arrow())


failed = refused = 0
for path in sys.argv[1:]:
    # One batch: __arrow_c_device_array__ hands out a single array (the stream interface is for more).
    t = gpu_parquet.read(path, steps=1, backend="staged", memory_limit_mb=1 << 20)
    if t.device != "cuda":
        print(f"{path}: decoded on {t.device}, not the GPU")
        failed += 1
        continue
    size = t.report["decode"]["output_bytes"]
    rmm.statistics.push_statistics()
    try:
        table = plc.Table.from_arrow(t)
        cp.cuda.Device().synchronize()
    except Exception as e:  # noqa: BLE001 - pylibcudf refuses some types; say which file and why
        rmm.statistics.pop_statistics()
        print(f"{path}: pylibcudf refused the import: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        refused += 1
        continue
    stats = rmm.statistics.pop_statistics()
    want = pq.read_table(path)
    got = to_host(table)
    # Compare values under pyarrow's types: pylibcudf's to_arrow renames struct and list children.
    same = got.num_columns == want.num_columns and all(
        got.column(i).combine_chunks().view(want.schema.field(i).type).equals(want.column(i).combine_chunks())
        for i in range(want.num_columns)
    )
    no_copy = stats.peak_bytes < max(size // 20, 1 << 20)
    print(
        f"{path}: {t.num_rows} rows, columns {size} bytes; pylibcudf import allocated peak {stats.peak_bytes} bytes "
        f"({'no copy' if no_copy else 'A COPY'}); values {'equal to' if same else 'DIFFERENT FROM'} pyarrow's"
    )
    failed += (not same) + (not no_copy)
print(f"{len(sys.argv) - 1} files: {failed} failed, {refused} refused by pylibcudf")
sys.exit(1 if failed else 0)

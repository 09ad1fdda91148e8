#!/usr/bin/env python3
"""Writes the type benchmark's files, after libcudf's PARQUET_READER_NVBENCH: one file per data type x
cardinality x run length x codec, each about SIZE_MB (default 512) of uncompressed data in 128 Mi-byte
row groups, seeded (the same bytes every run). `bench` and cudf_baseline.py then read each file.

  types        int32 int64 float64 decimal128 timestamp bool string string_long list struct, and the
               nestings: map (string to int32), list_struct (list of struct of int32 and string),
               list_list (list of list of int32); lists hold 0 to 6 items
  cardinality  0 (every value drawn from the whole range) or 1000 (values drawn from 1000 distinct)
  run length   1 (no runs) or 32 (each value repeated 32 times, as sorted or clustered data has)
  codec        SNAPPY or NONE (dictionary encoding where pyarrow chooses it)
  nulls        10 % in every column

Files are named TYPE-cCARD-rRUN-CODEC.parquet. MATRIX picks a subset: "full" (every combination, 80
files), or "default": every type at (1000, 32, SNAPPY) and at (0, 1, SNAPPY), plus int64 and string at
(1000, 32, NONE), 28 files. Needs numpy and pyarrow (both on the GPU machine).
Usage: make_type_bench.py [OUT_DIR] [TYPE ...]     (env: MATRIX, SIZE_MB)"""
import itertools, os, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq

SIZE = int(os.environ.get("SIZE_MB", 512)) << 20
TYPES = ["int32", "int64", "float64", "decimal128", "timestamp", "bool", "string", "string_long", "list", "struct",
         "map", "list_struct", "list_list"]
# Uncompressed bytes per row, roughly (for the row count of SIZE).
WIDTH = {"int32": 4, "int64": 8, "float64": 8, "decimal128": 16, "timestamp": 8, "bool": 1, "string": 12,
         "string_long": 48, "list": 4 * 4 + 4, "struct": 4 + 8 + 12, "map": 3 * (12 + 4) + 4,
         "list_struct": 3 * (4 + 12) + 4, "list_list": 3 * (3 * 4 + 4) + 4}


def arr(values, **kwargs):
    """pa.array, as one chunk (pyarrow chunks large string inputs)."""
    a = pa.array(values, **kwargs)
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def draw(rng, n, card, run):
    """n indices: from the whole range (card 0) or from card distinct values, each repeated run times."""
    m = -(-n // run)
    idx = rng.integers(0, card if card else 1 << 62, m, dtype=np.int64)
    return np.repeat(idx, run)[:n]


def strings(idx, long):
    # Short strings (5 to 20 bytes, mostly inline in Arrow's views) or long ones (32 to 64 bytes).
    base = np.char.mod("%x", idx % (1 << 40))
    pad = np.array(["-" * k for k in range(65)])
    lens = (idx % 33 + 32) if long else (idx % 16 + 5)
    return np.char.add(base, pad[np.maximum(lens - np.char.str_len(base), 0)])


def fan_out(values):
    """0 to 6 entries per value (value % 7, about 3): their int32 offsets, and each entry's value, from
    its parent's value and its place, so that the parents' cardinality and runs carry into it."""
    counts = (values % 7).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return offsets, np.repeat(values, counts) * 7 + (np.arange(offsets[-1]) - np.repeat(offsets[:-1], counts))


def column(kind, rng, n, card, run):
    idx = draw(rng, n, card, run)
    nulls = rng.random(n) < 0.10
    if kind == "int32":
        return pa.array((idx % (1 << 31)).astype(np.int32), mask=nulls)
    if kind == "int64":
        return pa.array(idx, mask=nulls)
    if kind == "float64":
        return pa.array((idx % (1 << 52)) / 3.0, mask=nulls)
    if kind == "decimal128":
        return pa.array((idx % (10 ** 13)).astype(np.int64), mask=nulls).cast(pa.decimal128(21, 2)).cast(pa.decimal128(18, 2), safe=False)
    if kind == "timestamp":
        return pa.array(idx % (1 << 50), mask=nulls, type=pa.timestamp("us"))
    if kind == "bool":
        return pa.array(idx % 2 == 0, mask=nulls)
    if kind in ("string", "string_long"):
        return arr(strings(idx, kind == "string_long"), mask=nulls)
    if kind == "list":
        # 0 to 6 items of int32 per list (about 3 on average).
        offsets, _ = fan_out(idx)
        items = pa.array((np.arange(offsets[-1]) * 2654435761 % (1 << 31)).astype(np.int32))
        return pa.ListArray.from_arrays(pa.array(offsets), items, mask=pa.array(nulls))
    if kind in ("map", "list_struct", "list_list"):
        offsets, entry = fan_out(idx)
        offsets = pa.array(offsets)
        ints = pa.array((entry * 2654435761 % (1 << 31)).astype(np.int32), mask=entry % 10 == 3)
        if kind == "map":
            return pa.MapArray.from_arrays(offsets, arr(strings(entry, False)), ints, mask=pa.array(nulls))
        if kind == "list_struct":
            items = pa.StructArray.from_arrays([ints, arr(strings(entry, False))], names=["a", "s"])
            return pa.ListArray.from_arrays(offsets, items, mask=pa.array(nulls))
        inner_offsets, leaf = fan_out(entry)
        inner = pa.ListArray.from_arrays(pa.array(inner_offsets), pa.array((leaf % (1 << 31)).astype(np.int32)))
        return pa.ListArray.from_arrays(offsets, inner, mask=pa.array(nulls))
    if kind == "struct":
        return pa.StructArray.from_arrays(
            [pa.array((idx % (1 << 31)).astype(np.int32)), pa.array(idx / 7.0), arr(strings(idx, False))],
            names=["a", "b", "s"], mask=pa.array(nulls))
    raise ValueError(kind)


def write(out, kind, card, run, codec):
    path = os.path.join(out, f"{kind}-c{card}-r{run}-{codec.lower()}.parquet")
    if os.path.exists(path):
        return path
    rows = SIZE // WIDTH[kind]
    group = max((128 << 20) // WIDTH[kind], 1)
    rng = np.random.default_rng([TYPES.index(kind), card, run])
    writer = None
    for start in range(0, rows, group):
        n = min(group, rows - start)
        t = pa.table({"v": column(kind, rng, n, card, run)})
        if writer is None:
            writer = pq.ParquetWriter(path + ".tmp", t.schema, compression=codec)
        writer.write_table(t, row_group_size=n)
    writer.close()
    os.rename(path + ".tmp", path)
    return path


def matrix(types):
    if os.environ.get("MATRIX") == "full":
        return list(itertools.product(types, (0, 1000), (1, 32), ("SNAPPY", "NONE")))
    m = [(t, 1000, 32, "SNAPPY") for t in types] + [(t, 0, 1, "SNAPPY") for t in types]
    return m + [(t, 1000, 32, "NONE") for t in ("int64", "string") if t in types]


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/typebench"
    types = sys.argv[2:] or TYPES
    os.makedirs(out, exist_ok=True)
    for args in matrix(types):
        p = write(out, *args)
        md = pq.ParquetFile(p).metadata
        raw = sum(md.row_group(g).total_byte_size for g in range(md.num_row_groups))
        print(f"{p}: {os.path.getsize(p)} bytes, {raw} uncompressed, {md.num_rows} rows, {md.num_row_groups} row groups")

#!/usr/bin/env python3
"""Writes Parquet files from other writers (pyarrow, polars, duckdb, fastparquet) into argv[1].

Used by tests/other_writers.rs, which reads every file with our pipeline and with arrow-rs and
requires equal results. Deterministic: data is computed from row numbers, no randomness or clocks.

Writes argv[1]/manifest.json:
    {"writers": {"pyarrow": {"version": "...", "files": ["pyarrow-....parquet", ...]}, ...},
     "missing": {"polars": "No module named 'polars'", ...}}
A writer that imports but then fails to write a file is a bug in this script: it exits non-zero.
"""

import datetime as dt
import decimal
import json
import os
import sys
import traceback

N = 3000  # rows per file: a few row groups at the sizes used below, still quick in a debug build


def nullable(values, every):
    """Every `every`-th value (from the 3rd row on) becomes null."""
    return [None if i % every == 3 else v for i, v in enumerate(values)]


def pyarrow_files(out):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = range(N)
    utc = dt.timezone.utc
    base = dt.datetime(2024, 1, 1, 12, 0, 0)
    flat = pa.table(
        {
            "i8": pa.array(nullable([(i % 256) - 128 for i in rows], 11), pa.int8()),
            "i16": pa.array(nullable([(i * 37) % 65536 - 32768 for i in rows], 13), pa.int16()),
            "i32": pa.array(nullable([i * 1_000_003 % 2**31 - 2**30 for i in rows], 7), pa.int32()),
            "i64": pa.array([i * 10**12 - 5 * 10**14 for i in rows], pa.int64()),
            "u8": pa.array(nullable([i % 256 for i in rows], 17), pa.uint8()),
            "u16": pa.array([i * 7 % 65536 for i in rows], pa.uint16()),
            "u32": pa.array(nullable([(i * 2_654_435_761) % 2**32 for i in rows], 19), pa.uint32()),
            "u64": pa.array([(i * 11_400_714_819_323_198_485) % 2**64 for i in rows], pa.uint64()),
            "f32": pa.array(nullable([i / 8 - 100.5 for i in rows], 9), pa.float32()),
            "f64": pa.array([(-1) ** i * i / 3 for i in rows], pa.float64()),
            "s": pa.array(nullable([f"str-{i % 97}-{'x' * (i % 5)}" for i in rows], 5), pa.string()),
            "ls": pa.array(nullable([f"large-{i}" for i in rows], 6), pa.large_string()),
            "bin": pa.array(nullable([bytes([i % 256, (i * 3) % 256]) * (i % 4) for i in rows], 8), pa.binary()),
            "lbin": pa.array([bytes([i % 7]) * (i % 6) for i in rows], pa.large_binary()),
            "flag": pa.array(nullable([i % 3 == 0 for i in rows], 10), pa.bool_()),
            "day": pa.array(nullable([dt.date(2000, 1, 1) + dt.timedelta(days=i) for i in rows], 12), pa.date32()),
            "ts_ms": pa.array([base + dt.timedelta(milliseconds=i * 1001) for i in rows], pa.timestamp("ms")),
            "ts_us": pa.array(
                nullable([base + dt.timedelta(microseconds=i * 999_999) for i in rows], 14), pa.timestamp("us")
            ),
            "ts_ns": pa.array([1_700_000_000_000_000_000 + i * 123_456_789 for i in rows], pa.timestamp("ns")),
            "ts_ms_tz": pa.array(
                [(base + dt.timedelta(seconds=i)).replace(tzinfo=utc) for i in rows], pa.timestamp("ms", tz="UTC")
            ),
            "ts_us_tz": pa.array(
                nullable([1_600_000_000_000_000 + i * 77 for i in rows], 15),
                pa.timestamp("us", tz="Europe/Paris"),
            ),
            "ts_ns_tz": pa.array([1_650_000_000_000_000_000 + i for i in rows], pa.timestamp("ns", tz="+05:30")),
            "t32": pa.array([i * 1000 % 86_400_000 for i in rows], pa.time32("ms")),
            "t64": pa.array([i * 1_000_001 % 86_400_000_000 for i in rows], pa.time64("us")),
            "dec9": pa.array(
                nullable([decimal.Decimal(i * 13 - 20000).scaleb(-2) for i in rows], 16), pa.decimal128(9, 2)
            ),
            "dec18": pa.array([decimal.Decimal(i * 10**9 + 7).scaleb(-4) for i in rows], pa.decimal128(18, 4)),
            "dec38": pa.array(
                [decimal.Decimal(i * 10**20 - 3).scaleb(-10) for i in rows], pa.decimal128(38, 10)
            ),
            "dec256": pa.array([decimal.Decimal(i * 10**30 + 1).scaleb(-5) for i in rows], pa.decimal256(50, 5)),
            "fsb": pa.array(nullable([i.to_bytes(4, "little") * 4 for i in rows], 18), pa.binary(16)),
        }
    )
    nested = pa.table(
        {
            "id": pa.array(rows, pa.int64()),
            "li": pa.array(nullable([list(range(i % 5)) for i in rows], 7), pa.list_(pa.int32())),
            "ls": pa.array(
                [[None if (i + k) % 4 == 0 else f"e{i}-{k}" for k in range(i % 3)] for i in rows],
                pa.list_(pa.string()),
            ),
            "lls": pa.array([[[k] * (k % 3) for k in range(i % 4)] for i in rows], pa.list_(pa.list_(pa.int16()))),
            "lst": pa.array(
                nullable([[{"a": i + k, "b": f"b{k}" if k % 2 else None} for k in range(i % 4)] for i in rows], 9),
                pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string())])),
            ),
            "st": pa.array(
                nullable([{"x": i / 2, "y": {"z": i * 3, "w": None if i % 5 == 0 else "w"}} for i in rows], 8),
                pa.struct([("x", pa.float64()), ("y", pa.struct([("z", pa.int64()), ("w", pa.string())]))]),
            ),
            "m": pa.array(
                nullable([[(f"k{k}", None if k == 2 else k * i) for k in range(i % 4)] for i in rows], 10),
                pa.map_(pa.string(), pa.int32()),
            ),
            "ll": pa.array([list(range(i % 3)) for i in rows], pa.large_list(pa.int64())),
            "fsl": pa.array([[i, i + 1, i + 2] for i in rows], pa.list_(pa.float32(), 3)),
        }
    )
    dict_table = pa.table(
        {
            "cat": pa.array(nullable([f"c{i % 13}" for i in rows], 7)).dictionary_encode(),
            "num": pa.array([i % 5 for i in rows], pa.int32()).dictionary_encode(),
            "plain": pa.array([f"p{i}" for i in rows]),
        }
    )
    files = []

    def write(name, table, **kw):
        path = os.path.join(out, f"pyarrow-{name}.parquet")
        pq.write_table(table, path, **kw)
        files.append(os.path.basename(path))

    for codec in ["NONE", "SNAPPY", "GZIP", "ZSTD", "LZ4", "BROTLI"]:
        write(f"flat-{codec.lower()}", flat, compression=codec, row_group_size=1000)
    write("flat-plain", flat, use_dictionary=False, compression="SNAPPY", row_group_size=1000)
    write("flat-v2", flat, data_page_version="2.0", compression="ZSTD", row_group_size=1000)
    write("flat-v2-plain", flat, data_page_version="2.0", use_dictionary=False, compression="NONE")
    write("flat-small-row-groups", flat, row_group_size=64, compression="SNAPPY")
    write("flat-page-index", flat, write_page_index=True, data_page_size=2048, row_group_size=1000)
    write("flat-no-stats-no-schema", flat, write_statistics=False, store_schema=False)
    write(
        "flat-delta",
        flat.select(["i32", "i64", "u32", "s", "bin", "ts_us"]),
        use_dictionary=False,
        column_encoding={
            "i32": "DELTA_BINARY_PACKED",
            "i64": "DELTA_BINARY_PACKED",
            "u32": "DELTA_BINARY_PACKED",
            "s": "DELTA_BYTE_ARRAY",
            "bin": "DELTA_LENGTH_BYTE_ARRAY",
            "ts_us": "DELTA_BINARY_PACKED",
        },
        data_page_version="2.0",
    )
    write(
        "flat-byte-stream-split",
        flat.select(["f32", "f64", "i32", "dec9"]),
        use_dictionary=False,
        use_byte_stream_split=True,
        compression="ZSTD",
    )
    for codec in ["NONE", "SNAPPY", "ZSTD", "LZ4", "GZIP", "BROTLI"]:
        write(f"nested-{codec.lower()}", nested, compression=codec, row_group_size=1000)
    write("nested-v2", nested, data_page_version="2.0", row_group_size=700, data_page_size=1024)
    write("nested-plain-small-rg", nested, use_dictionary=False, row_group_size=100)
    write("nested-page-index", nested, write_page_index=True, data_page_size=1024)
    write("dictionary", dict_table, row_group_size=1000)
    write("dictionary-v2", dict_table, data_page_version="2.0", row_group_size=1000, compression="GZIP")
    write("empty", flat.slice(0, 0))
    return pa.__version__, files


def polars_files(out):
    import polars as pl

    rows = list(range(N))
    df = pl.DataFrame(
        {
            "i8": pl.Series(nullable([(i % 256) - 128 for i in rows], 11), dtype=pl.Int8),
            "i16": pl.Series([i % 30000 for i in rows], dtype=pl.Int16),
            "i32": pl.Series(nullable([i * 7 for i in rows], 7), dtype=pl.Int32),
            "i64": pl.Series([i * 10**12 for i in rows], dtype=pl.Int64),
            "u8": pl.Series([i % 256 for i in rows], dtype=pl.UInt8),
            "u16": pl.Series([i % 65536 for i in rows], dtype=pl.UInt16),
            "u32": pl.Series(nullable([i * 65537 for i in rows], 13), dtype=pl.UInt32),
            "u64": pl.Series([(i * 11_400_714_819_323_198_485) % 2**64 for i in rows], dtype=pl.UInt64),
            "f32": pl.Series([i / 4 for i in rows], dtype=pl.Float32),
            "f64": pl.Series(nullable([i / 3 for i in rows], 9), dtype=pl.Float64),
            "s": pl.Series(nullable([f"s{i % 50}" for i in rows], 5), dtype=pl.String),
            "bin": pl.Series([bytes([i % 256]) * (i % 3) for i in rows], dtype=pl.Binary),
            "flag": pl.Series(nullable([i % 2 == 0 for i in rows], 6), dtype=pl.Boolean),
            "day": pl.Series([dt.date(2020, 1, 1) + dt.timedelta(days=i) for i in rows], dtype=pl.Date),
            "ts_ms": pl.Series([dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i) for i in rows]).cast(
                pl.Datetime("ms")
            ),
            "ts_us": pl.Series([dt.datetime(2024, 1, 1) + dt.timedelta(microseconds=i) for i in rows]).cast(
                pl.Datetime("us")
            ),
            "ts_ns_tz": pl.Series([dt.datetime(2024, 1, 1) + dt.timedelta(minutes=i) for i in rows]).cast(
                pl.Datetime("ns", "UTC")
            ),
            "dec": pl.Series([decimal.Decimal(i).scaleb(-2) for i in rows], dtype=pl.Decimal(12, 2)),
            "cat": pl.Series(nullable([f"c{i % 9}" for i in rows], 8), dtype=pl.Categorical),
            "li": pl.Series(nullable([list(range(i % 4)) for i in rows], 7), dtype=pl.List(pl.Int64)),
            "st": pl.Series([{"a": i, "b": f"b{i % 3}"} for i in rows]),
            "lst": pl.Series([[{"x": k, "y": None if k else 1.5} for k in range(i % 3)] for i in rows]),
        }
    )
    files = []
    for codec in ["uncompressed", "snappy", "gzip", "zstd", "lz4", "brotli"]:
        name = f"polars-{codec}.parquet"
        df.write_parquet(os.path.join(out, name), compression=codec, row_group_size=1000)
        files.append(name)
    name = "polars-small-row-groups.parquet"
    df.write_parquet(os.path.join(out, name), row_group_size=128, data_page_size=1024, statistics=False)
    files.append(name)
    return pl.__version__, files


def duckdb_files(out):
    import duckdb

    con = duckdb.connect()
    query = f"""
        SELECT
            (i % 100)::TINYINT AS i8, (i * 3)::SMALLINT AS i16,
            CASE WHEN i % 7 = 3 THEN NULL ELSE i * 11 END::INTEGER AS i32,
            i::BIGINT * 1000000007 AS i64, (i::HUGEINT * 100000000000000000) AS i128,
            (i % 200)::UTINYINT AS u8, (i * 5)::USMALLINT AS u16, (i * 70000)::UINTEGER AS u32,
            (i::UBIGINT * 1000000000000) AS u64,
            (i / 8)::FLOAT AS f32, CASE WHEN i % 9 = 3 THEN NULL ELSE i / 3 END::DOUBLE AS f64,
            CASE WHEN i % 5 = 3 THEN NULL ELSE 'str-' || (i % 41) END AS s,
            ('blob' || i)::BLOB AS bin, i % 2 = 0 AS flag,
            DATE '2001-01-01' + i::INTEGER AS day,
            TIMESTAMP '2024-01-01 00:00:00' + INTERVAL (i) SECOND AS ts_us,
            (TIMESTAMP '2024-01-01 00:00:00' + INTERVAL (i) MILLISECOND)::TIMESTAMP_MS AS ts_ms,
            (TIMESTAMP '2024-01-01 00:00:00' + INTERVAL (i) MICROSECOND)::TIMESTAMP_NS AS ts_ns,
            (TIMESTAMPTZ '2024-01-01 00:00:00+00' + INTERVAL (i) MINUTE) AS ts_tz,
            (i / 100)::DECIMAL(9, 2) AS dec9, (i * 1000 / 7)::DECIMAL(18, 4) AS dec18,
            (i * 1000000 / 7)::DECIMAL(38, 10) AS dec38,
            CASE WHEN i % 4 = 3 THEN NULL ELSE range(i % 5)::BIGINT[] END AS li,
            [{{'a': i, 'b': 'b' || i}}, {{'a': -i, 'b': NULL}}][1:(i % 3)] AS lst,
            {{'x': i / 2, 'y': {{'z': i * 2}}}} AS st,
            MAP(['k' || (i % 3), 'j' || (i % 3)], [i, i + 1]) AS m
        FROM range({N}) t(i)
        ORDER BY i
    """
    files = []
    for codec in ["uncompressed", "snappy", "gzip", "zstd", "lz4", "brotli"]:
        name = f"duckdb-{codec}.parquet"
        con.execute(
            f"COPY ({query}) TO '{os.path.join(out, name)}' (FORMAT PARQUET, COMPRESSION {codec}, ROW_GROUP_SIZE 1000)"
        )
        files.append(name)
    name = "duckdb-v2.parquet"
    con.execute(
        f"COPY ({query}) TO '{os.path.join(out, name)}' (FORMAT PARQUET, PARQUET_VERSION V2, ROW_GROUP_SIZE 500)"
    )
    files.append(name)
    return duckdb.__version__, files


def fastparquet_files(out):
    import fastparquet
    import numpy as np
    import pandas as pd

    rows = np.arange(N)
    df = pd.DataFrame(
        {
            "i8": (rows % 100).astype("int8"),
            "i16": (rows * 3).astype("int16"),
            "i32": (rows * 11).astype("int32"),
            "i64": rows.astype("int64") * 10**9,
            "u8": (rows % 256).astype("uint8"),
            "u16": (rows * 5).astype("uint16"),
            "u32": (rows * 70000).astype("uint32"),
            "u64": rows.astype("uint64") * 10**12,
            "nint": pd.array([None if i % 7 == 3 else i for i in range(N)], dtype="Int64"),
            "f32": (rows / 8).astype("float32"),
            "f64": np.where(rows % 9 == 3, np.nan, rows / 3),
            "s": pd.Series([None if i % 5 == 3 else f"s{i % 31}" for i in range(N)], dtype=object),
            "bin": pd.Series([bytes([i % 256]) * (i % 4) for i in range(N)], dtype=object),
            "flag": rows % 2 == 0,
            "nflag": pd.array([None if i % 6 == 3 else i % 3 == 0 for i in range(N)], dtype="boolean"),
            "ts": pd.Timestamp("2024-01-01") + pd.to_timedelta(rows, unit="s"),
            "ts_tz": (pd.Timestamp("2024-01-01") + pd.to_timedelta(rows, unit="ms")).tz_localize("UTC"),
            "cat": pd.Categorical([f"c{i % 6}" for i in range(N)]),
        }
    )
    files = []

    def write(name, frame=df, **kw):
        path = os.path.join(out, f"fastparquet-{name}.parquet")
        fastparquet.write(path, frame, **kw)
        files.append(os.path.basename(path))

    for codec in [None, "SNAPPY", "GZIP", "ZSTD", "LZ4", "BROTLI"]:
        write(f"{codec or 'none'}".lower(), compression=codec, row_group_offsets=1000)
    write("int96-times", times="int96", row_group_offsets=500)
    # Required (non-null) columns: only the columns without nulls.
    required = df[["i8", "i32", "u64", "f32", "flag", "ts", "cat"]]
    write("required-small-row-groups", required, has_nulls=False, row_group_offsets=128, stats=False)
    return fastparquet.__version__, files


WRITERS = [
    ("pyarrow", "pyarrow", pyarrow_files),
    ("polars", "polars", polars_files),
    ("duckdb", "duckdb", duckdb_files),
    ("fastparquet", "fastparquet", fastparquet_files),
]


def main():
    if len(sys.argv) != 2:
        print("usage: make_files.py OUT_DIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    manifest = {"writers": {}, "missing": {}}
    failed = False
    for name, module, make in WRITERS:
        try:
            __import__(module)
        except ImportError as e:
            manifest["missing"][name] = str(e)
            print(f"missing writer {name}: {e}")
            continue
        try:
            version, files = make(out)
        except Exception:  # a writer that imports must write every file: report and fail
            print(f"writer {name} failed:\n{traceback.format_exc()}", file=sys.stderr)
            failed = True
            continue
        manifest["writers"][name] = {"version": version, "files": files}
        print(f"{name} {version}: {len(files)} files")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

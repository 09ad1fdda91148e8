#!/usr/bin/env python3
"""A dataset read by a Dask (distributed) cluster in which each worker owns one GPU: the files are
shared out in contiguous runs of about equal size, each worker reads its run with gpu_parquet onto its
GPU and hands the tables to the next step as pylibcudf tables (imported without a copy through
__arrow_c_device_array__); the next step, on the same worker, sums a column per file with pylibcudf and
returns the table to the client for the check. The result must equal a single-process read
(pyarrow.parquet) file by file, and the per-file sums must equal pyarrow's.

Without pylibcudf the GPU tables are handed on as gpu_parquet's own device tables (copied back for the
check); without GPUs the workers read on the host path and hand pyarrow tables on: the same pipeline,
which CI runs (tests/python_package.rs runs python/tests/test_dask_example.py, which runs this).

Usage: examples/dask_read.py FILE_OR_DIR... [--workers N] [--column NAME] [--scheduler ADDRESS]
  --workers    workers of the local cluster (default: one per visible GPU, or 2 without a GPU)
  --scheduler  an existing cluster's scheduler (tcp://host:8786) instead of a local one: on several
               machines, start `dask scheduler` on one and `dask worker ADDRESS --nworkers G
               --nthreads 1` on each (G = its GPUs; with CUDA_VISIBLE_DEVICES set per worker, or
               dask-cuda's `dask cuda worker`, each worker sees its GPU as device 0)
  --column     the column summed in the next step (default: the first numeric one)
"""
import argparse
import os
import pathlib
import sys
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def visible_gpus():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no cupy or no driver: no GPU for this example
        return 0


def read_run(files, device, mode):
    """On a worker: read each file onto `device` (or on the host) and hand it on as the next step's
    input: a pylibcudf table (mode "pylibcudf"), gpu_parquet's own device table ("gpu"), or a pyarrow
    table ("host"). Returns (tables, what happened, the worker's pid)."""
    import gpu_parquet

    out, notes = [], []
    for f in files:
        if mode in ("pylibcudf", "gpu"):
            # One batch per file, so the whole file exports as one ArrowDeviceArray.
            t = gpu_parquet.read(f, device=device, steps=1, memory_limit_mb=1 << 20, backend="staged")
            if mode == "pylibcudf":
                import pylibcudf as plc

                out.append(("pylibcudf", plc.Table.from_arrow(t), t.column_names))
            else:
                out.append(("gpu", t, t.column_names))
            notes.append(f"{pathlib.Path(f).name}: {t.num_rows} rows on GPU {device} ({t.device}), handed on as {mode}")
        else:
            t = gpu_parquet.read(f, backend="host")
            out.append(("host", t.to_arrow(), t.column_names))
            notes.append(f"{pathlib.Path(f).name}: {t.num_rows} rows on the host")
    return out, notes, os.getpid()


def next_step(read, column):
    """On the same worker: the sum of `column` per file (pylibcudf on the GPU, pyarrow on the host),
    and each table as pyarrow for the client's check."""
    tables, notes, pid = read
    results = []
    for where, table, names in tables:
        if where == "pylibcudf":
            import pylibcudf as plc

            col = table.columns()[names.index(column)]
            total = plc.reduce.reduce(col, plc.aggregation.sum(), col.type()).to_py()
            host = pa.table(table.to_arrow())
            host = pa.table(host.columns, names=names)
        else:
            # gpu_parquet's device table copied back (no pylibcudf here), or the host read's table.
            host = table.to_arrow() if where == "gpu" else table
            total = pc.sum(host.column(column)).as_py()
        results.append((host, total))
    return results, notes, pid


def shares(files, n):
    """Contiguous runs of files of about equal bytes, one per worker (some may be empty)."""
    sizes = [os.path.getsize(f) for f in files]
    total, before, out = max(sum(sizes), 1), 0, [[] for _ in range(n)]
    for f, s in zip(files, sizes):
        out[min((before + s // 2) * n // total, n - 1)].append(f)
        before += s
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--column")
    ap.add_argument("--scheduler")
    args = ap.parse_args()
    files = []
    for i in args.inputs:
        p = pathlib.Path(i)
        files += sorted(str(f) for f in p.rglob("*.parquet")) if p.is_dir() else [str(p)]
    if not files:
        sys.exit("no Parquet files given")
    schema = pq.read_schema(files[0])
    column = args.column or next(
        f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
    )

    from dask.distributed import Client, LocalCluster

    gpus = visible_gpus()
    try:
        import pylibcudf  # noqa: F401

        has_plc = True
    except ImportError:
        has_plc = False
    mode = "host" if not gpus else ("pylibcudf" if has_plc else "gpu")
    if args.scheduler:
        client = Client(args.scheduler)
    else:
        n = args.workers or (gpus if gpus else 2)
        # One process per worker, one thread each: a worker is one GPU's owner.
        client = Client(LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None))
    workers = sorted(client.scheduler_info()["workers"])
    print(
        f"{len(files)} files, {len(workers)} workers, {gpus} GPUs visible; "
        + {
            "pylibcudf": "reading onto the GPUs, handing pylibcudf tables on",
            "gpu": "reading onto the GPUs, handing gpu_parquet's device tables on (no pylibcudf here)",
            "host": "reading on the host path (no GPU), handing pyarrow tables on",
        }[mode]
    )

    started = time.perf_counter()
    futures = []
    for k, (addr, run) in enumerate(zip(workers, shares(files, len(workers)))):
        if not run:
            continue
        # Worker k owns GPU k (on a multi-node cluster, each worker's own device 0: see --scheduler).
        device = k % max(gpus, 1) if not args.scheduler else 0
        read = client.submit(read_run, run, device, mode, workers=[addr], pure=False)
        futures.append((run, client.submit(next_step, read, column, workers=[addr], pure=False)))
    got = []
    for run, fut in futures:
        results, notes, pid = fut.result()
        for n in notes:
            print(f"  worker pid {pid}: {n}")
        got += list(zip(run, results))
    wall = time.perf_counter() - started

    failed = 0
    for f, (table, total) in got:
        want = pq.read_table(f)
        same = table.num_rows == want.num_rows and all(
            table.column(i).combine_chunks().view(want.schema.field(i).type).equals(want.column(i).combine_chunks())
            for i in range(want.num_columns)
        )
        want_total = pc.sum(want.column(column)).as_py()
        same_total = total == want_total or (
            isinstance(total, float) and abs(total - want_total) <= 1e-9 * max(abs(want_total), 1.0)
        )
        if not (same and same_total):
            print(f"  {f}: DIFFERENT from the single-process read (values equal: {same}; sum {total} vs {want_total})")
            failed += 1
    rows = sum(t.num_rows for _, (t, _) in got)
    print(
        f"{rows} rows in {wall:.2f} s over {len(futures)} workers; {len(got) - failed} of {len(files)} files "
        f"equal to the single-process read (values and the sum of '{column}')"
    )
    client.close()
    sys.exit(1 if failed or len(got) != len(files) else 0)


if __name__ == "__main__":
    main()

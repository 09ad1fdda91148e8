#!/usr/bin/env python3
"""One Parquet file through KvikIO (compat mode ON, OFF, AUTO), cuDF (pylibcudf, where installed) and
gpu_parquet (staged and cuFile backends) in one table, with cuFile's own statistics around each row:
what the seed's verification procedure did by hand (did the bytes go through nvidia-fs, cuFile's POSIX
compat mode, or neither?).

Raw rows read every column chunk into one device buffer (as cuDF's reader does) and count the chunks'
bytes; decoded rows count the row groups' uncompressed bytes (cuDF's measure). Best of REPS hot reads;
a row's cuFile statistics cover all its reads (one warm-up and REPS timed).
Each row's cuFile statistics (level 3, summed over GPUs: nvfs reads, POSIX reads, bytes) are taken
before and after its reads through gpu_parquet.CufileStats (or cuda.bindings.cufile); where none can
be read, the row says why.

Usage: examples/compare_paths.py FILE [--reps N]
Needs cupy and pyarrow; kvikio, pylibcudf, cuda-bindings and gpu_parquet each where installed (a row
that cannot run says why). On the GPU machine: tools/gpu_machine.sh pypaths.
"""
import argparse
import os
import time

import pyarrow.parquet as pq

ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--kvikio-threads", type=int, default=16, help="KvikIO's thread pool (its best on the H200: 16)")
ap.add_argument("--kvikio-task-mib", type=int, default=16, help="KvikIO's task size")
args = ap.parse_args()

md = pq.ParquetFile(args.file).metadata
ranges = []
for g in range(md.num_row_groups):
    for c in range(md.num_columns):
        cc = md.row_group(g).column(c)
        start = cc.dictionary_page_offset if cc.has_dictionary_page and cc.dictionary_page_offset else cc.data_page_offset
        ranges.append((start, cc.total_compressed_size))
raw_bytes = sum(n for _, n in ranges)
decoded_bytes = sum(md.row_group(g).total_byte_size for g in range(md.num_row_groups))


class CufileStats:
    """cuFile's level-3 statistics (summed over GPUs), or why there are none: through
    gpu_parquet.CufileStats (the libcufile that gpu_parquet and KvikIO load from the CUDA toolkit), else
    through cuda.bindings.cufile (which may load a libcufile of its own, whose counters would then miss
    the other libraries' reads)."""

    def __init__(self):
        self.why, self.source = None, None
        errors = []
        try:
            import gpu_parquet

            self.ours = gpu_parquet.CufileStats()
            self.take = lambda: self.ours.snapshot()
            self.source = "gpu_parquet.CufileStats"
        except Exception as e:  # noqa: BLE001 - try the next source, keep the reason
            errors.append(f"gpu_parquet: {type(e).__name__}: {e}")
            try:
                from cuda.bindings import cufile

                cufile.driver_open()
                cufile.set_stats_level(3)
                cufile.stats_start()

                def take():
                    s = cufile.StatsLevel3()
                    cufile.get_stats_l3(s.ptr)
                    g = s.per_gpu_stats
                    n = max(int(s.num_gpus), 1)
                    total = lambda f: int(sum(int(x) for x in list(getattr(g, f))[:n]))  # noqa: E731
                    return {"nvfs_reads": total("n_nvfs_reads"), "posix_reads": total("n_posix_reads"),
                            "read_bytes": total("read_bytes")}

                self.take = take
                self.take()
                self.source = "cuda.bindings.cufile"
            except Exception as e2:  # noqa: BLE001
                errors.append(f"cuda.bindings: {type(e2).__name__}: {e2}")
                self.why = "; ".join(errors)

    def around(self, fn):
        """Runs fn, returns (its result, the statistics' change or why there is none)."""
        if self.why:
            return fn(), "no cuFile statistics"
        before = self.take()
        out = fn()
        after = self.take()
        d = {k: after[k] - before[k] for k in ("nvfs_reads", "posix_reads", "read_bytes")}
        return out, f"nvfs {d['nvfs_reads']} reads, POSIX {d['posix_reads']} reads, {d['read_bytes'] / 1e6:.1f} MB"


stats = CufileStats()
print(f"{args.file}: {raw_bytes / 1e6:.1f} MB of column chunks, {decoded_bytes / 1e6:.1f} MB uncompressed; best of {args.reps} hot reads")
print(f"cuFile statistics: {stats.source or 'unavailable (' + stats.why + ')'}")
print(f"{'path':<30} {'hot ms':>9} {'GB/s':>8}  cuFile statistics over the row / what the path says")


class Rows:
    """Prints each row as soon as it is measured: a library that aborts the process keeps the rows before."""

    def append(self, r):
        label, ms, gbps, where, delta = r
        print(f"{label:<30} {ms} {gbps}  {delta}", flush=True)
        if where:
            print(f"{'':<50}{where}", flush=True)


rows = Rows()


def best_of(fn):
    fn()  # warm: page cache, driver, kernels
    times = []
    for _ in range(max(args.reps, 1)):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def row(label, nbytes, fn, where=""):
    try:
        secs, cufile_delta = stats.around(lambda: best_of(fn))
        rows.append((label, f"{secs * 1e3:9.1f}", f"{nbytes / secs / 1e9:8.2f}", where() if callable(where) else where, cufile_delta))
    except Exception as e:  # noqa: BLE001 - a path this machine lacks: its reason is the row
        rows.append((label, "        -", "       -", f"unavailable: {type(e).__name__}: {str(e).splitlines()[0][:150]}", ""))


try:
    import cupy as cp
    import kvikio
    import kvikio.defaults

    buf = cp.empty(raw_bytes, dtype=cp.uint8)

    def kvikio_read():
        with kvikio.CuFile(args.file, "r") as f:
            futures, off = [], 0
            for start, n in ranges:
                futures.append(f.pread(buf[off:off + n], n, start))
                off += n
            for fut in futures:
                fut.get()
        cp.cuda.Device().synchronize()

    for mode in ("ON", "OFF", "AUTO"):
        def read_in(mode=mode):
            kvikio.defaults.set({"compat_mode": getattr(kvikio.CompatMode, mode), "num_threads": args.kvikio_threads,
                                 "task_size": args.kvikio_task_mib << 20})
            kvikio_read()

        def where(mode=mode):
            try:
                setting = kvikio.defaults.get("compat_mode")
            except Exception:  # noqa: BLE001 - older KvikIO: no generic getter
                setting = mode
            return (f"kvikio {kvikio.__version__}, compat_mode setting {setting}, {args.kvikio_threads} threads, "
                    f"{args.kvikio_task_mib} MiB tasks")

        row(f"kvikio compat={mode}", raw_bytes, read_in, where)
except ImportError as e:
    rows.append(("kvikio", "        -", "       -", f"not installed ({e})", ""))

try:
    import pylibcudf as plc

    def cudf_read():
        opts = plc.io.parquet.ParquetReaderOptions.builder(plc.io.SourceInfo([args.file])).build()
        plc.io.parquet.read_parquet(opts)
        cp.cuda.Device().synchronize()

    row("cuDF (pylibcudf) decoded", decoded_bytes, cudf_read, f"pylibcudf {plc.__version__}, KVIKIO_COMPAT_MODE={os.environ.get('KVIKIO_COMPAT_MODE', 'unset')}")
except ImportError as e:
    rows.append(("cuDF decoded", "        -", "       -", f"not installed ({e}); cuDF travels in pieces: ../shared/bench/README.md", ""))

try:
    import gpu_parquet

    for backend in ("host", "staged", "cufile"):
        last = {}

        def ours(backend=backend, last=last):
            last["t"] = gpu_parquet.read(args.file, backend=backend)

        def where(last=last):
            r = last["t"].report
            paths = r["total"]
            moved = ", ".join(
                f"{b / 1e6:.1f} MB {name} ({paths['reads'][name]} reads)" for name, b in paths["bytes"].items() if b
            )
            check = r.get("cufile_stats_check")
            verdict = "" if not check else f"; its own cuFile check: {'agrees' if check['agree'] else 'DISAGREES'}"
            return f"gpu_parquet on {last['t'].device}: {moved}{verdict}"

        row(f"gpu_parquet {backend} decoded", decoded_bytes, ours, where)
except ImportError as e:
    rows.append(("gpu_parquet", "        -", "       -", f"not installed ({e})", ""))

#!/usr/bin/env python3
"""How busy the GPU was over time, from nsys's cuda_gpu_trace report (CSV: `nsys stats --report
cuda_gpu_trace --format csv`). Activity is cut into bursts wherever the GPU did nothing for GAP_MS
(default 20: a `read --warm-up N`'s reads come out as N + 1 bursts); for each burst: its length, the
share of it in which at least one kernel ran and in which a host-to-device copy ran, and, for the last
burst, the same per BIN_MS window (default 5), so a read whose SMs idle while its steps are read shows
where. Usage: gpu_busy.py TRACE.csv   (env: GAP_MS, BIN_MS)"""
import csv, os, sys

GAP = float(os.environ.get("GAP_MS", 20)) * 1e6
BIN = float(os.environ.get("BIN_MS", 5)) * 1e6


def union(intervals):
    """Sorted, merged (start, end) intervals."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def covered(merged, lo, hi):
    """Nanoseconds of [lo, hi) inside the merged intervals."""
    return sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in merged)


def main(path):
    kernels, copies = [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            # nsys names its columns "Start (ns)" and "Duration (ns)", and its copies "[CUDA memcpy
            # Host-to-Device]" ("[CUDA memcpy HtoD]" in older releases).
            start = float(row.get("Start (ns)", row.get("Start")))
            dur = float(row.get("Duration (ns)", row.get("Duration")))
            name = row.get("Name", "")
            if "memcpy Host-to-Device" in name or "memcpy HtoD" in name:
                copies.append((start, start + dur))
            elif not name.startswith("[CUDA"):
                kernels.append((start, start + dur))
    every = union(kernels + copies)
    if not every:
        sys.exit("no GPU activity in the trace")
    bursts = [list(every[0])]
    for s, e in every[1:]:
        if s - bursts[-1][1] >= GAP:
            bursts.append([s, e])
        else:
            bursts[-1][1] = e
    k, c = union(kernels), union(copies)
    for i, (lo, hi) in enumerate(bursts):
        n = hi - lo
        print(f"burst {i}: {n / 1e6:.2f} ms, kernels {100 * covered(k, lo, hi) / n:.0f} %, "
              f"host-to-device copies {100 * covered(c, lo, hi) / n:.0f} %")
    lo, hi = bursts[-1]
    print(f"last burst by {BIN / 1e6:g} ms (from its start: kernels %, copies %)")
    t = lo
    while t < hi:
        u = min(t + BIN, hi)
        print(f"  {(t - lo) / 1e6:6.1f} ms  {100 * covered(k, t, u) / (u - t):3.0f}  {100 * covered(c, t, u) / (u - t):3.0f}")
        t = u


if __name__ == "__main__":
    main(sys.argv[1])

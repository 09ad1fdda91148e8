#!/usr/bin/env python3
"""Sums `ncu --metrics gpu__time_duration.sum --csv ...` output (stdin) per kernel name: launches and
total milliseconds, largest first (the first TOP kernels where given), then the total of all.
Usage: ncu ... | ncu_kernel_times.py [TOP]"""
import csv
import sys
from collections import defaultdict

lines = [l for l in sys.stdin if l.startswith('"')]
tot = defaultdict(lambda: [0, 0.0])
for row in csv.DictReader(lines):
    if row.get("Metric Name") != "gpu__time_duration.sum":
        continue
    v = float(row["Metric Value"].replace(",", ""))
    unit = row.get("Metric Unit", "ns")
    us = v / 1e3 if unit == "ns" else v * 1e3 if unit == "ms" else v if unit in ("us", "usecond") else v / 1e3
    name = row["Kernel Name"][:60]
    tot[name][0] += 1
    tot[name][1] += us
top = int(sys.argv[1]) if len(sys.argv) > 1 else None
for name, (n, us) in sorted(tot.items(), key=lambda x: -x[1][1])[:top]:
    print(f"{us / 1e3:9.2f} ms {n:5d}x  {name}")
print(f"{sum(v[1] for v in tot.values()) / 1e3:9.2f} ms in all")

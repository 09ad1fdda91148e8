#!/usr/bin/env python3
"""Squeezes `ncu --section ... --csv --page details` output (stdin) to one line per kernel launch: its
duration and the figures that say what bounds it (compute and DRAM throughput, achieved against
theoretical occupancy, registers, grid, waves, block size, shared memory and
the blocks an SM holds by registers, shared memory and warps). Lines before the CSV header (ncu's own) are skipped.
Usage: ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --csv --page details ... |
       ncu_sections.py"""
import csv
import sys

WANT = [
    ("Duration", "time"),
    ("Compute (SM) Throughput", "SM %"),
    ("DRAM Throughput", "DRAM %"),
    ("Memory Throughput", "mem %"),
    ("Warp Cycles Per Issued Instruction", "cycles/issue"),
    ("Achieved Occupancy", "occ %"),
    ("Theoretical Occupancy", "of %"),
    ("Registers Per Thread", "regs"),
    ("Grid Size", "grid"),
    ("Waves Per SM", "waves"),
    ("Block Size", "block"),
    ("Static Shared Memory Per Block", "smem"),
    ("Dynamic Shared Memory Per Block", "dyn smem"),
    ("Block Limit Registers", "blocks/SM by regs"),
    ("Block Limit Shared Mem", "by smem"),
    ("Block Limit Warps", "by warps"),
]

lines = [l for l in sys.stdin if l.startswith('"')]
launches = {}
for row in csv.DictReader(lines):
    name = row.get("Metric Name")
    if not any(name == w for w, _ in WANT):
        continue
    key = (int(row["ID"]), row["Kernel Name"][:32])
    value = row["Metric Value"]
    if name == "Duration":
        value = f'{value} {row.get("Metric Unit", "")}'.strip()
    launches.setdefault(key, {})[name] = value
for (launch, kernel), got in sorted(launches.items()):
    print(f"{launch:4d} {kernel:32s} " + "; ".join(f"{short} {got[w]}" for w, short in WANT if w in got))

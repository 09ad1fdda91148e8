#!/usr/bin/env python3
"""Sums `ncu -i REPORT --page source --csv --print-source cuda,sass` output (a file, or stdin) per CUDA
source line: its share of the launch's warp stall samples and of its instructions, and its three
largest stall reasons; the TOP lines of most samples (default 20), largest first.
The kernel files must lie where ncu looked for them when it profiled (`--import-source yes`): the
program names them by file name alone (`#line 1 "zstd.cu"`), so copy src/decode/kernels/* into the
working directory first (tools/gpu_machine.sh ncusrc does).
Usage: ncu_source_lines.py [CSV] [TOP]"""
import csv
import sys


def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    args = sys.argv[1:]
    src = open(args.pop(0)) if args and not args[0].isdigit() else sys.stdin
    top = int(args[0]) if args else 20
    header, path, lines = None, None, []
    for row in csv.reader(src):
        if len(row) >= 2 and row[0] == "File Path":
            path = row[1].split("/")[-1]
        elif row and row[0] == "Line No":
            header = row
        elif header and row and row[0] not in ("", "Function Name"):
            lines.append((path, row[0], row[1], row))
    if not header:
        sys.exit("no source page in the input (was the report taken with --import-source yes?)")
    col = {name: i for i, name in enumerate(header)}
    samples, insts = col["Warp Stall Sampling (All Samples)"], col["Instructions Executed"]
    stalls = [(i, n[len("stall_"):]) for i, n in enumerate(header) if n.startswith("stall_")]
    total_s = sum(num(r[samples]) for *_, r in lines) or 1.0
    total_i = sum(num(r[insts]) for *_, r in lines) or 1.0
    print(f"{total_s:.0f} stall samples, {total_i / 1e6:.1f}M instructions")
    for path, line, text, r in sorted(lines, key=lambda x: -num(x[3][samples]))[:top]:
        reasons = sorted(((num(r[i]), n) for i, n in stalls), reverse=True)[:3]
        why = " ".join(f"{n}={v:.0f}" for v, n in reasons)
        print(f"{path}:{line} {100 * num(r[samples]) / total_s:.1f}% samples {100 * num(r[insts]) / total_i:.1f}% "
              f"instructions  {why} | {text.strip()[:90]}")


main()

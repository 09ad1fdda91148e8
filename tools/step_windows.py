#!/usr/bin/env python3
"""Prints the steps of a GPU decode from `gpu-parquet read FILE --json` (stdin): when each step's reads
and decode ran (ms from the start of the read), the decode's wait for its reads, and where the decode's
time went (headers, decompression, kernels), and the CPU time its decoding thread used meanwhile
("cpu": about the decode's length where that thread worked or spun throughout, well under it where it
slept on its waits; "-" from builds before it was reported)."""
import json
import sys

r = json.load(sys.stdin)
d = r["decode"]
print(f"wall {d['wall'] * 1e3:.1f} ms, {len(d['steps'])} steps, setup {d.get('setup')}")
print(f"{'step':>4} {'MB':>7} {'read from':>9} {'to':>7} {'decode from':>11} {'to':>7} {'wait':>6} {'headers':>7} {'decomp':>7} {'kernels':>7} {'cpu':>6} {'io wall':>7} {'1st rd':>6} {'last':>6}")
for k, s in enumerate(d["steps"]):
    rw, dw, st = s["read_window"], s["decode_window"], s["stats"]
    print(
        f"{k:>4} {s['chunk_bytes'] / 1e6:>7.1f} {rw['from'] * 1e3:>9.1f} {rw['to'] * 1e3:>7.1f} "
        f"{dw['from'] * 1e3:>11.1f} {dw['to'] * 1e3:>7.1f} {s['io_wait'] * 1e3:>6.1f} "
        f"{st['headers_time'] * 1e3:>7.1f} {st['decompress_time'] * 1e3:>7.1f} {st['decode_time'] * 1e3:>7.1f}"
        + (f" {s['decode_cpu'] * 1e3:>6.1f}" if "decode_cpu" in s else f" {'-':>6}")
        + (f" {b['wall'] * 1e3:>7.1f} {b['first_read'] * 1e3:>6.1f} {b['last_done'] * 1e3:>6.1f}" if (b := s.get('backend')) else "")
    )
# Where the wall goes: the GPU waits for the first read, decodes beside the reads, then finishes
# after the last read (the tail a step's latency sets); and how many steps decoded at once on average.
steps = d["steps"]
if steps:
    first_decode = min(s["decode_window"]["from"] for s in steps)
    last_read = max(s["read_window"]["to"] for s in steps)
    end = max(s["decode_window"]["to"] for s in steps)
    busy = sum(s["decode_window"]["to"] - s["decode_window"]["from"] for s in steps)
    span = max(end - first_decode, 1e-9)
    print(
        f"first decode at {first_decode * 1e3:.1f} ms; last read ended at {last_read * 1e3:.1f} ms; "
        f"decode after it {(end - last_read) * 1e3:.1f} ms; {busy / span:.1f} steps decoding at once on average"
    )

"""Reads FILE through BACKEND (default cufile) in this process and returns normally: the package keeps
its backend for the process, so the cuFile driver is still open when Python exits. libcufile's own
teardown of a driver left open crashed processes at exit (SIGSEGV); run it and check the exit status:

    python3 exit_after_cufile_read.py FILE [BACKEND]; echo "exit status $?"
"""
import sys

import gpu_parquet

path = sys.argv[1]
backend = sys.argv[2] if len(sys.argv) > 2 else "cufile"
table = gpu_parquet.read(path, backend=backend)
report = table.report
print(f"{backend}: {table.to_arrow().num_rows} rows; report keys: {sorted(report)[:8]}")

"""examples/dask_read.py on a local Dask cluster of two worker processes (host path in CI): the files
shared out between the workers, read with gpu_parquet, handed to the next step, equal to a
single-process pyarrow read file by file."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytest.importorskip("distributed", reason="dask.distributed is not installed (.ci/run installs it)")


def test_dask_workers_read_the_dataset_as_one_process_does():
    files = [str(ROOT / "testdata" / n) for n in ("flat_plain.parquet", "flat_snappy_dict.parquet", "flat_zstd.parquet")]
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "dask_read.py"), *files, "--workers", "2"],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 of 3 files equal to the single-process read" in r.stdout, r.stdout
    # Both workers took a share: two distinct worker processes read files.
    pids = {line.split()[2].rstrip(":") for line in r.stdout.splitlines() if line.strip().startswith("worker pid")}
    assert len(pids) == 2, r.stdout

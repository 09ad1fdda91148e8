"""gpu-parquet: load Parquet columns onto NVIDIA GPUs, reporting the I/O path every byte took.

``read(path)`` returns a :class:`Table`: on a GPU machine its columns are decoded in device memory and
export without a copy through the Arrow PyCapsule device interface (``__arrow_c_device_array__``,
``__arrow_c_device_stream__``), which ``pylibcudf.Table.from_arrow`` accepts; without a GPU (or with
``backend="host"``) they are decoded by arrow-rs on the host. ``Table.report`` holds the per-column
path counters; ``Table.to_arrow()`` gives a ``pyarrow.Table``. Reads release the GIL.
"""

import json as _json

from ._gpu_parquet import CufileStats, GpuParquetError, Table, check_json as _check_json, read

__all__ = ["CufileStats", "GpuParquetError", "Table", "check", "read"]


def check(directory=None, device=0):
    """What this machine offers for reading files in ``directory``: the GPU, cuFile and its
    configuration, nvidia-fs, O_DIRECT; and which path ``backend="auto"`` takes. A dict."""
    return _json.loads(_check_json(directory, device))

"""gpu-parquet: load Parquet columns onto NVIDIA GPUs, reporting the I/O path every byte took.

``read(path)`` returns a :class:`Table`: on a GPU machine its columns are decoded in device memory and
export without a copy through the Arrow PyCapsule device interface (``__arrow_c_device_array__``,
``__arrow_c_device_stream__``), which ``pylibcudf.Table.from_arrow`` accepts; without a GPU (or with
``backend="host"``) they are decoded by arrow-rs on the host. ``Table.report`` holds the per-column
path counters; ``Table.to_arrow()`` gives a ``pyarrow.Table`` (needs ``pip install gpu-parquet[arrow]``).
Reads release the GIL.

``read_dataset(path_or_files)`` reads many files of one schema (hive ``key=value/`` folders become
columns; a partition column is read when ``columns`` names it, or when ``columns`` is None);
``iter_batches(path, memory_limit="256MiB")`` streams a file (or dataset) a step of row groups at a
time as one-batch tables. All three take ``filters=`` (a str or pyarrow's DNF form) and ``decode=``
("auto", "gpu", "host"). ``memory_limit`` takes bytes or a size such as ``"64MiB"``; ``columns`` takes
a list of names or one name. A missing file raises ``FileNotFoundError``, a bad argument ``ValueError``
naming it, a wrong type ``TypeError``, a failed read ``GpuParquetError`` (a ``RuntimeError``).
"""

import json as _json

from ._gpu_parquet import (
    Batches,
    CufileStats,
    GpuParquetError,
    Table,
    check_json as _check_json,
    iter_batches,
    read,
    read_dataset,
)

__all__ = ["Batches", "CufileStats", "GpuParquetError", "Table", "check", "iter_batches", "read", "read_dataset"]


def check(directory=None, device=0):
    """What this machine offers for reading files in ``directory``: the GPU, cuFile and its
    configuration, nvidia-fs, O_DIRECT; and which path ``backend="auto"`` takes. A dict.

    Arguments:
        directory: the directory whose file system is checked (O_DIRECT, cuFile); None: the current one.
        device: the CUDA device ordinal to check.
    """
    return _json.loads(_check_json(directory, device))

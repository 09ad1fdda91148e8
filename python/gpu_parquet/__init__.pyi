from os import PathLike
from typing import Any, Callable, Iterator, Optional, Sequence, Union

Size = Union[int, str]
"""Bytes, or a size such as "64MiB", "2GiB", "1.5GB"."""
Columns = Union[str, Sequence[str]]
"""Column names, or one name."""
Filters = Union[str, Sequence[Any]]
"""A str ("year = 2024 and id < 100") or pyarrow's DNF form: a list of (column, op, value) tuples, or
a list of such lists."""


class GpuParquetError(RuntimeError): ...

class CufileStats:
    """cuFile's level-3 statistics as this package's libcufile counts them (holds the driver open)."""
    def __init__(self, device: int = 0) -> None: ...
    def snapshot(self) -> dict[str, int]: ...

class Table:
    """A read's columns (device or host memory), its report, and the Arrow PyCapsule interfaces."""
    @property
    def num_rows(self) -> int: ...
    @property
    def column_names(self) -> list[str]: ...
    @property
    def device(self) -> str: ...
    @property
    def num_batches(self) -> int: ...
    @property
    def report(self) -> dict[str, Any]: ...
    @property
    def report_json(self) -> str: ...
    def to_arrow(self) -> Any:
        """A pyarrow.Table in host memory; raises ImportError without pip install gpu-parquet[arrow]."""
    def __arrow_c_device_array__(self, requested_schema: Optional[object] = None, **kwargs: Any) -> tuple[object, object]: ...
    def __arrow_c_device_stream__(self, requested_schema: Optional[object] = None, **kwargs: Any) -> object: ...
    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> object: ...
    def __len__(self) -> int: ...

class Batches(Iterator[Table]):
    """One-batch Tables in host memory, read a row group group at a time (iter_batches, read_dataset(stream=True))."""
    @property
    def column_names(self) -> list[str]: ...
    def __iter__(self) -> Batches: ...
    def __next__(self) -> Table: ...

def read(
    path: Union[str, PathLike[str]],
    columns: Optional[Columns] = None,
    row_groups: Optional[Sequence[int]] = None,
    backend: str = "auto",
    decode: str = "auto",
    device: Optional[int] = None,
    threads: Optional[int] = None,
    memory_limit: Optional[Size] = None,
    steps: Optional[int] = None,
    trust_compressed: bool = False,
    nvcomp: Optional[str] = None,
    progress: Union[bool, Callable[[dict[str, int]], None], None] = None,
    memory_limit_mb: Optional[int] = None,
    filters: Optional[Filters] = None,
    filter_passes: Optional[int] = None,
) -> Table:
    """Reads a Parquet file (see help(gpu_parquet.read) for every argument).

    path: the file. columns: names, or one name. row_groups: indices. backend: "auto", "cufile",
    "staged" or "host". decode: "auto", "gpu" or "host". device: CUDA ordinal. threads: I/O threads
    (0 .. 1024). memory_limit: bytes or "64MiB" (1 MiB .. 1 PiB). steps: decode steps (1 .. 4096).
    trust_compressed: skip checking compressed page sizes. nvcomp: nvCOMP library path or "off".
    progress: True, or a callable taking a dict (its exception is raised from read).
    memory_limit_mb: deprecated, MiB. filters: a str ("a >= 3 and s in ('x', 'y')") or pyarrow's DNF
    (a list of (column, op, value) tuples, or a list of such lists): only the rows that pass.
    filter_passes: 2 reads the filter's columns first, then only the other columns' pages holding
    matching rows; 1 reads them all at once; None (default) reads a step in one pass where its other
    columns' pages are few and in the page cache, else in two.
    """

def read_dataset(
    path_or_files: Union[str, PathLike[str], Sequence[Union[str, PathLike[str]]]],
    columns: Optional[Columns] = None,
    row_groups: Optional[Sequence[int]] = None,
    backend: str = "auto",
    decode: str = "auto",
    device: Optional[int] = None,
    threads: Optional[int] = None,
    memory_limit: Optional[Size] = None,
    steps: Optional[int] = None,
    trust_compressed: bool = False,
    nvcomp: Optional[str] = None,
    memory_limit_mb: Optional[int] = None,
    filters: Optional[Filters] = None,
    stream: bool = False,
    filter_passes: Optional[int] = None,
) -> Union[Table, Batches]:
    """Reads files of one schema (a directory, glob, file or list) as one host Table; hive
    key=value folders become columns (see help(gpu_parquet.read_dataset) for every argument).

    columns: names (one str is one column); a partition column only when named, all when None.
    decode: "auto" (GPU where the backend reads into device memory, else host), "gpu" (raises
    GpuParquetError without a GPU) or "host". filters: as read's; "and" terms on partition columns
    skip files. stream=True returns a Batches iterator instead. The rest as read.
    """

def iter_batches(
    path: Union[str, PathLike[str], Sequence[Union[str, PathLike[str]]]],
    columns: Optional[Columns] = None,
    row_groups: Optional[Sequence[int]] = None,
    backend: str = "auto",
    decode: str = "auto",
    device: Optional[int] = None,
    threads: Optional[int] = None,
    memory_limit: Optional[Size] = None,
    steps: Optional[int] = None,
    trust_compressed: bool = False,
    nvcomp: Optional[str] = None,
    memory_limit_mb: Optional[int] = None,
    filters: Optional[Filters] = None,
    filter_passes: Optional[int] = None,
) -> Batches:
    """Streams a file (or dataset) as one-batch host Tables, a step of row groups at a time within
    memory_limit; arguments as read_dataset (see help(gpu_parquet.iter_batches))."""

def check(directory: Optional[Union[str, PathLike[str]]] = None, device: int = 0) -> dict[str, Any]:
    """What this machine offers for reading files in directory (GPU, cuFile, nvidia-fs, O_DIRECT)."""

"""The Python package on the host path (CI, no GPU): values equal pyarrow's, the report names the
path every byte took, the Arrow PyCapsule interfaces hand out the same columns, bad input raises."""
import concurrent.futures
import ctypes
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_parquet

TESTDATA = pathlib.Path(__file__).resolve().parents[2] / "testdata"
FILES = sorted(TESTDATA.glob("*.parquet"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_host_read_equals_pyarrow(path):
    t = gpu_parquet.read(path, backend="host")
    assert t.device == "cpu"
    want = pq.read_table(path)
    got = t.to_arrow()
    assert got.num_rows == want.num_rows == t.num_rows == len(t)
    assert got.column_names == want.column_names == t.column_names
    for name in want.column_names:
        g, w = got.column(name).combine_chunks(), want.column(name).combine_chunks()
        # Dictionary-typed columns (the file's Arrow schema keeps them so) compare by their values:
        # arrow-rs and pyarrow choose different dictionaries and key types (and pyarrow restores
        # dictionaries of strings only).
        if pa.types.is_dictionary(g.type):
            g = g.dictionary_decode()
        if pa.types.is_dictionary(w.type):
            w = w.dictionary_decode()
            g = g.cast(w.type)  # pyarrow's dictionary of LargeUtf8 values comes back as Utf8
        assert g.equals(w), name


def test_report_counts_every_byte_on_the_host_path():
    path = TESTDATA / "flat_snappy_dict.parquet"
    t = gpu_parquet.read(path, backend="host")
    r = t.report
    assert r["columns"], r
    md = pq.ParquetFile(path).metadata
    chunk_bytes = sum(
        md.row_group(g).column(c).total_compressed_size for g in range(md.num_row_groups) for c in range(md.num_columns)
    )
    counts = [c["counts"]["bytes"] for c in r["columns"]]
    assert sum(c["host"] for c in counts) >= chunk_bytes
    assert all(c["nvfs"] == 0 and c["staged"] == 0 and c["cufile-compat"] == 0 for c in counts)
    assert all("host" in c["reasons"][0] for c in r["columns"])


def test_projection_and_row_groups():
    path = TESTDATA / "flat_plain.parquet"
    t = gpu_parquet.read(path, columns=["id", "s"], row_groups=[1], backend="host")
    want = pq.ParquetFile(path).read_row_group(1, columns=["id", "s"])
    assert t.to_arrow().equals(want)


class _ArrowArray(ctypes.Structure):
    _fields_ = [
        ("length", ctypes.c_int64),
        ("null_count", ctypes.c_int64),
        ("offset", ctypes.c_int64),
        ("n_buffers", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("buffers", ctypes.c_void_p),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


class _ArrowDeviceArray(ctypes.Structure):
    _fields_ = [
        ("array", _ArrowArray),
        ("device_id", ctypes.c_int64),
        ("device_type", ctypes.c_int32),
        ("sync_event", ctypes.c_void_p),
        ("reserved", ctypes.c_int64 * 3),
    ]


class _ArrowSchema(ctypes.Structure):
    _fields_ = [
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_char_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


class _DeviceStream(ctypes.Structure):
    pass


_DeviceStream._fields_ = [
    ("device_type", ctypes.c_int32),
    ("get_schema", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_DeviceStream), ctypes.POINTER(_ArrowSchema))),
    ("get_next", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_DeviceStream), ctypes.POINTER(_ArrowDeviceArray))),
    ("get_last_error", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.POINTER(_DeviceStream))),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_DeviceStream))),
    ("private_data", ctypes.c_void_p),
]


def _capsule_pointer(capsule, name):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, name)


def test_device_array_capsule_on_the_host_is_a_cpu_array():
    path = TESTDATA / "flat_zstd.parquet"
    t = gpu_parquet.read(path, backend="host")
    assert t.num_batches > 1  # joined into one host array
    schema, array = t.__arrow_c_device_array__()
    device = _ArrowDeviceArray.from_address(_capsule_pointer(array, b"arrow_device_array"))
    assert device.device_type == 1 and not device.sync_event
    batch = pa.RecordBatch._import_from_c_device_capsule(schema, array)
    assert pa.Table.from_batches([batch]).equals(pq.read_table(path))


def test_device_stream_capsule_hands_out_every_batch_then_its_end():
    # pyarrow 26 has no importer of device streams: drive the C callbacks with ctypes.
    path = TESTDATA / "flat_snappy_dict.parquet"
    t = gpu_parquet.read(path, backend="host")
    capsule = t.__arrow_c_device_stream__()
    stream = ctypes.cast(_capsule_pointer(capsule, b"arrow_device_array_stream"), ctypes.POINTER(_DeviceStream))
    assert stream.contents.device_type == 1
    c_schema = _ArrowSchema()
    assert stream.contents.get_schema(stream, ctypes.byref(c_schema)) == 0
    schema = pa.Schema._import_from_c(ctypes.addressof(c_schema))
    batches = []
    while True:
        out = _ArrowDeviceArray()
        assert stream.contents.get_next(stream, ctypes.byref(out)) == 0
        if not out.array.release:
            break
        assert out.device_type == 1
        batches.append(pa.RecordBatch._import_from_c(ctypes.addressof(out.array), schema))
    assert len(batches) == t.num_batches
    assert pa.Table.from_batches(batches).equals(pq.read_table(path))
    assert stream.contents.get_last_error(stream) is None
    del capsule  # releases the stream


def test_bad_input_raises_a_clear_error():
    with pytest.raises(FileNotFoundError, match="no-such-file"):
        gpu_parquet.read(TESTDATA / "no-such-file.parquet", backend="host")
    with pytest.raises(ValueError, match="backend"):
        gpu_parquet.read(FILES[0], backend="warp")
    with pytest.raises(gpu_parquet.GpuParquetError, match="nope"):
        gpu_parquet.read(FILES[0], columns=["nope"], backend="host")


def test_reads_on_threads_agree():
    path = TESTDATA / "nested.parquet"
    want = pq.read_table(path)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: gpu_parquet.read(path, backend="host").to_arrow(), range(8)))
    assert all(g.equals(want) for g in got)


def test_check_describes_the_machine():
    c = gpu_parquet.check(str(TESTDATA))
    assert isinstance(c, dict) and c


def test_progress_callback_sees_the_whole_read():
    path = TESTDATA / "flat_snappy_dict.parquet"
    seen = []
    t = gpu_parquet.read(path, backend="host", row_groups=[0, 2], progress=seen.append)
    assert len(seen) == 1
    p = seen[0]
    assert (p["steps_done"], p["steps"]) == (1, 1)
    assert p["rows_done"] == p["rows"] == t.num_rows
    assert p["bytes_done"] == p["bytes"] == t.report["useful_bytes"] > 0


def test_progress_true_writes_a_line_and_bad_values_are_refused(capfd):
    path = TESTDATA / "flat_plain.parquet"
    gpu_parquet.read(path, backend="host", progress=True)
    err = capfd.readouterr().err
    assert "step 1/1" in err and "flat_plain.parquet" in err, err
    gpu_parquet.read(path, backend="host", progress=False)
    assert capfd.readouterr().err == ""
    with pytest.raises(TypeError, match="progress"):
        gpu_parquet.read(path, backend="host", progress="yes")


def test_cufile_stats_without_a_gpu_is_a_clear_error():
    try:
        stats = gpu_parquet.CufileStats()
    except gpu_parquet.GpuParquetError as e:
        assert "cuFile" in str(e) or "CUDA" in str(e) or "libcu" in str(e), str(e)
        return
    # A machine with cuFile: the counters are there and never go down.
    first = stats.snapshot()
    assert set(first) == {"total_reads", "nvfs_reads", "posix_reads", "read_bytes"}
    assert all(v >= 0 for v in first.values())

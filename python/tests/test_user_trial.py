"""Defects a new user's trial found (issue 42, item 5): errors name Python arguments and have the
exception types a Python user expects, a single column name is accepted, every argument is documented,
a failing progress callback fails the read, memory limits take sizes."""
import pathlib
import warnings

import pytest

import gpu_parquet

TESTDATA = pathlib.Path(__file__).resolve().parents[2] / "testdata"
FLAT = TESTDATA / "flat_plain.parquet"


def test_bad_numbers_name_the_python_argument_and_raise_value_error():
    with pytest.raises(ValueError, match=r"^threads=1000000: ") as e:
        gpu_parquet.read(FLAT, backend="host", threads=1000000)
    assert "--" not in str(e.value)
    with pytest.raises(ValueError, match=r"^steps=0: ") as e:
        gpu_parquet.read(FLAT, backend="host", steps=0)
    assert "--" not in str(e.value)


def test_a_missing_file_raises_file_not_found_error():
    with pytest.raises(FileNotFoundError, match="no-such-file"):
        gpu_parquet.read(TESTDATA / "no-such-file.parquet", backend="host")


def test_wrong_argument_types_raise_type_error():
    with pytest.raises(TypeError):
        gpu_parquet.read(FLAT, backend="host", threads="four")
    with pytest.raises(TypeError, match="columns"):
        gpu_parquet.read(FLAT, backend="host", columns=[1, 2])
    with pytest.raises(TypeError, match="memory_limit"):
        gpu_parquet.read(FLAT, backend="host", memory_limit=1.5)


def test_a_single_column_name_is_one_column():
    name = gpu_parquet.read(FLAT, backend="host").column_names[0]
    one = gpu_parquet.read(FLAT, backend="host", columns=name)
    assert one.column_names == [name]
    assert one.to_arrow().equals(gpu_parquet.read(FLAT, backend="host", columns=[name]).to_arrow())


def test_help_explains_every_argument():
    import inspect

    for function in (gpu_parquet.read, gpu_parquet.read_dataset, gpu_parquet.iter_batches):
        doc = function.__doc__
        for arg in inspect.signature(function).parameters:
            assert f"{arg}:" in doc or f"{arg} :" in doc, (function.__name__, arg)
    assert gpu_parquet.Table.to_arrow.__doc__


def test_pyarrow_is_an_optional_extra():
    text = (pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert 'arrow = ["pyarrow' in text


def test_to_arrow_without_pyarrow_names_the_extra(monkeypatch):
    import sys

    t = gpu_parquet.read(FLAT, backend="host")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"gpu-parquet\[arrow\]"):
        t.to_arrow()


def test_an_exception_in_the_progress_callback_is_raised_from_read():
    class Stop(Exception):
        pass

    def boom(_):
        raise Stop("callback failed")

    with pytest.raises(Stop, match="callback failed"):
        gpu_parquet.read(FLAT, backend="host", progress=boom)


@pytest.mark.parametrize(
    "limit, rows_equal", [(64 << 20, True), ("64MiB", True), ("2GiB", True), ("1 GB", True)]
)
def test_memory_limit_takes_bytes_or_a_size(limit, rows_equal):
    t = gpu_parquet.read(FLAT, backend="host", memory_limit=limit)
    assert (t.num_rows == gpu_parquet.read(FLAT, backend="host").num_rows) == rows_equal


def test_bad_memory_limits_are_value_errors_naming_the_argument():
    for bad in ("64XB", "", "-1MiB", "MiB", 0, 100):
        with pytest.raises(ValueError, match=r"^memory_limit="):
            gpu_parquet.read(FLAT, backend="host", memory_limit=bad)
    with pytest.raises(ValueError, match="memory_limit"):
        gpu_parquet.read(FLAT, backend="host", memory_limit="1GiB", memory_limit_mb=64)


def test_memory_limit_mb_still_works_and_is_deprecated():
    with pytest.warns(DeprecationWarning, match="memory_limit"):
        t = gpu_parquet.read(FLAT, backend="host", memory_limit_mb=64)
    assert t.num_rows > 0
    with pytest.raises(ValueError, match=r"^memory_limit_mb=0: "):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gpu_parquet.read(FLAT, backend="host", memory_limit_mb=0)


def test_read_dataset_makes_hive_partitions_columns(tmp_path):
    import shutil

    import pyarrow.parquet as pq

    for year in (2023, 2024):
        (tmp_path / f"year={year}").mkdir()
        shutil.copy(FLAT, tmp_path / f"year={year}" / "part-0.parquet")
    (tmp_path / "_SUCCESS").write_text("")
    t = gpu_parquet.read_dataset(tmp_path, backend="host")
    want = pq.read_table(FLAT)
    assert t.column_names == want.column_names + ["year"]
    got = t.to_arrow()
    assert got.num_rows == 2 * want.num_rows
    assert got.column("year").to_pylist() == [2023] * want.num_rows + [2024] * want.num_rows
    copy = tmp_path / "copy.parquet"
    shutil.copy(FLAT, copy)
    one = gpu_parquet.read_dataset([FLAT, copy], columns=want.column_names[0], backend="host")
    assert one.column_names == want.column_names[:1] and one.num_rows == 2 * want.num_rows
    with pytest.raises(FileNotFoundError):
        gpu_parquet.read_dataset([FLAT, TESTDATA / "no-such-file.parquet"], backend="host")
    with pytest.raises(ValueError, match=r"^threads=1000000: "):
        gpu_parquet.read_dataset(tmp_path, backend="host", threads=1000000)


def test_iter_batches_streams_a_row_group_group_at_a_time():
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = TESTDATA / "flat_snappy_dict.parquet"
    groups = pq.ParquetFile(path).num_row_groups
    assert groups > 1
    batches = gpu_parquet.iter_batches(path, backend="host", memory_limit="1MiB")
    tables = list(batches)
    assert len(tables) >= groups
    got = pa.concat_tables([t.to_arrow() for t in tables])
    assert got.equals(pq.read_table(path))
    assert next(iter(batches), None) is None
    streamed = gpu_parquet.read_dataset(path, backend="host", stream=True, memory_limit=1 << 20)
    assert sum(t.num_rows for t in streamed) == got.num_rows


def test_streamed_batches_name_the_selected_columns():
    name = gpu_parquet.read(FLAT, backend="host").column_names[1]
    batches = gpu_parquet.iter_batches(FLAT, backend="host", columns=name)
    assert batches.column_names == [name]
    assert all(t.column_names == [name] for t in batches)

"""read_dataset / iter_batches (issue 42): columns= chooses partition columns as pyarrow.dataset does
(and as the CLI's `dataset --columns`), filters= equals pyarrow.dataset's filtered read, and
decode= routes to the GPU only where there is one."""
import pathlib
import shutil

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import gpu_parquet

TESTDATA = pathlib.Path(__file__).resolve().parents[2] / "testdata"
FLAT = TESTDATA / "flat_snappy_dict.parquet"


@pytest.fixture
def hive(tmp_path):
    for year in (2023, 2024, 2025):
        for city in ("Oslo", "Rome"):
            d = tmp_path / f"year={year}" / f"city={city}"
            d.mkdir(parents=True)
            shutil.copy(FLAT, d / "part-0.parquet")
    return tmp_path


def pyarrow_read(root, columns=None, filter=None):
    ds = pads.dataset(root, format="parquet", partitioning="hive")
    return ds.to_table(columns=columns, filter=filter)


def same(got, want):
    assert got.column_names == want.column_names
    for name in want.column_names:
        g, w = got.column(name).combine_chunks(), want.column(name).combine_chunks()
        if pa.types.is_dictionary(g.type):
            g = g.dictionary_decode()
        assert g.equals(w.cast(g.type)), name


def test_partition_columns_are_read_when_named_or_when_columns_is_none(hive):
    every = gpu_parquet.read_dataset(hive, backend="host")
    assert every.column_names[-2:] == ["year", "city"]
    same(every.to_arrow(), pyarrow_read(hive))
    picked = gpu_parquet.read_dataset(hive, columns=["s", "city"], backend="host")
    assert picked.column_names == ["s", "city"]
    same(picked.to_arrow(), pyarrow_read(hive, columns=["s", "city"]))
    plain = gpu_parquet.read_dataset(hive, columns="id", backend="host")
    assert plain.column_names == ["id"]
    batches = gpu_parquet.iter_batches(hive, columns=["id", "year"], backend="host")
    assert batches.column_names == ["id", "year"]
    assert all(t.column_names == ["id", "year"] for t in batches)
    with pytest.raises(gpu_parquet.GpuParquetError, match="'nope'"):
        gpu_parquet.read_dataset(hive, columns=["id", "nope"], backend="host")


CASES = [
    ("year = 2024 and id < 100", (pads.field("year") == 2024) & (pads.field("id") < 100)),
    (
        [("city", "=", "Rome"), ("i32", "<", 0)],
        (pads.field("city") == "Rome") & (pads.field("i32") < 0),
    ),
    ([("year", "in", [2023, 2025])], pads.field("year").isin([2023, 2025])),
    ("s in ('value-001', 'value-150') or id > 2390", pads.field("s").isin(["value-001", "value-150"]) | (pads.field("id") > 2390)),
]


@pytest.mark.parametrize("filters,expression", CASES, ids=[str(c[0]) for c in CASES])
def test_filters_equal_pyarrow_dataset(hive, filters, expression):
    columns = ["id", "s", "year"]
    got = gpu_parquet.read_dataset(hive, columns=columns, filters=filters, backend="host")
    want = pyarrow_read(hive, columns=columns, filter=expression)
    assert got.num_rows == want.num_rows > 0
    same(got.to_arrow(), want)
    streamed = gpu_parquet.iter_batches(hive, columns=columns, filters=filters, backend="host", memory_limit="1MiB")
    same(pa.concat_tables([t.to_arrow() for t in streamed]), want)


def test_filters_on_one_file_and_bad_filters():
    got = gpu_parquet.iter_batches(FLAT, filters=[("id", "<", 10)], backend="host")
    assert sum(t.num_rows for t in got) == 10
    assert gpu_parquet.read_dataset(FLAT, filters="id < 0", backend="host").num_rows == 0
    with pytest.raises(ValueError, match="filters"):
        gpu_parquet.read_dataset(FLAT, filters="id <", backend="host")
    with pytest.raises(TypeError, match="filters"):
        gpu_parquet.iter_batches(FLAT, filters=42, backend="host")


def test_a_filter_mixing_partition_and_file_columns_says_so(hive):
    with pytest.raises(gpu_parquet.GpuParquetError, match=r"mixes partition columns \(year\)"):
        gpu_parquet.read_dataset(hive, filters="year = 2024 or id < 3", backend="host")


def test_no_file_passes_the_partition_filter(hive):
    t = gpu_parquet.read_dataset(hive, filters=[("year", "=", 1999)], backend="host")
    assert t.num_rows == 0


def test_the_dataset_report_counts_the_files_partition_terms_rule_out(hive):
    t = gpu_parquet.read_dataset(hive, filters="year = 2024 and id < 10", backend="host")
    r = t.report
    assert (r["files"], r["files_read"], r["files_pruned_by_partition_filter"]) == (6, 2, 4)
    assert r["rows"] == t.num_rows == 20


def _has_gpu():
    try:
        return gpu_parquet.check()["gpu"]["info"] is not None
    except Exception:
        return False


def test_decode_gpu_raises_without_a_gpu_and_auto_falls_back(hive):
    if _has_gpu():
        pytest.skip("this machine has a GPU: decode='gpu' decodes there")
    for call in (
        lambda: gpu_parquet.read_dataset(hive, decode="gpu"),
        lambda: gpu_parquet.iter_batches(FLAT, decode="gpu"),
        lambda: gpu_parquet.read(FLAT, decode="gpu"),
    ):
        with pytest.raises(gpu_parquet.GpuParquetError, match=r'decode="gpu": no GPU here'):
            call()
    auto = gpu_parquet.read_dataset(hive, columns=["id", "year"], decode="auto")
    same(auto.to_arrow(), pyarrow_read(hive, columns=["id", "year"]))
    assert sum(t.num_rows for t in gpu_parquet.iter_batches(FLAT, decode="auto")) == pq.ParquetFile(FLAT).metadata.num_rows
    with pytest.raises(ValueError, match=r'^decode="cpu"'):
        gpu_parquet.iter_batches(FLAT, decode="cpu")

"""filters= (issue 43): the rows equal pyarrow's read_table(filters=...), given as a string or in
pyarrow's DNF form; the report says what was pruned; bad filters raise clearly."""
import datetime
import decimal
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_parquet

TESTDATA = pathlib.Path(__file__).resolve().parents[2] / "testdata"
FLAT = TESTDATA / "flat_snappy_dict.parquet"

# (our string, the same filter in pyarrow's DNF form)
CASES = [
    ("id < 100", [("id", "<", 100)]),
    ("id >= 2000 and i32 < 0", [("id", ">=", 2000), ("i32", "<", 0)]),
    ("id < 10 or id > 2390", [[("id", "<", 10)], [("id", ">", 2390)]]),
    ("i32 != 5", [("i32", "!=", 5)]),
    ("s in ('value-001', 'value-150')", [("s", "in", ["value-001", "value-150"])]),
    ("f64 between 100.5 and 200.25", [("f64", ">=", 100.5), ("f64", "<=", 200.25)]),
    ("f32 > 10000", [("f32", ">", 10000.0)]),
    ("price <= -40000.50", [("price", "<=", decimal.Decimal("-40000.50"))]),
    ("day >= '2025-01-01'", [("day", ">=", datetime.date(2025, 1, 1))]),
    ("flag = true", [("flag", "==", True)]),
]


def same(got, want):
    assert got.num_rows == want.num_rows
    assert got.column_names == want.column_names
    for name in want.column_names:
        g, w = got.column(name).combine_chunks(), want.column(name).combine_chunks()
        if pa.types.is_dictionary(g.type):
            g = g.dictionary_decode()
        if pa.types.is_dictionary(w.type):
            w = w.dictionary_decode()
            g = g.cast(w.type)
        assert g.equals(w), name


@pytest.mark.parametrize("text,dnf", CASES, ids=[c[0] for c in CASES])
def test_filters_equal_pyarrow(text, dnf):
    want = pq.read_table(FLAT, filters=dnf)
    assert 0 < want.num_rows < 2400
    for filters in (text, dnf):
        t = gpu_parquet.read(FLAT, backend="host", filters=filters)
        same(t.to_arrow(), want)
        pruning = t.report["pruning"]
        assert pruning["row_groups"] == 3
        assert pruning["row_groups_selected"] <= 3


def test_not_in_keeps_nulls_as_pyarrow_does():
    dnf = [("i32", "not in", [1, 2, 3])]
    want = pq.read_table(FLAT, filters=dnf)
    assert want.column("i32").null_count > 0
    same(gpu_parquet.read(FLAT, backend="host", filters=dnf).to_arrow(), want)
    # The string form is SQL's: null is not "not in" a list.
    got = gpu_parquet.read(FLAT, backend="host", filters="i32 not in (1, 2, 3)").to_arrow()
    assert got.column("i32").null_count == 0


def test_pruning_is_reported_and_filter_columns_are_dropped():
    t = gpu_parquet.read(FLAT, backend="host", columns=["s"], filters="id >= 2000")
    assert t.column_names == ["s"]
    assert t.num_rows == 400
    p = t.report["pruning"]
    assert p["row_groups_pruned_by_statistics"] == 2
    assert p["columns"][0]["column"] == "id"
    want = pq.read_table(FLAT, columns=["s"], filters=[("id", ">=", 2000)])
    same(t.to_arrow(), want)


def test_bad_filters_raise_clearly():
    with pytest.raises(ValueError, match="at position 5"):
        gpu_parquet.read(FLAT, backend="host", filters="id < ")
    with pytest.raises(gpu_parquet.GpuParquetError, match="column 'nope'"):
        gpu_parquet.read(FLAT, backend="host", filters=[("nope", "=", 1)])
    with pytest.raises(gpu_parquet.GpuParquetError, match="column 'id'"):
        gpu_parquet.read(FLAT, backend="host", filters=[("id", "=", "one")])
    with pytest.raises(ValueError, match="unknown operator"):
        gpu_parquet.read(FLAT, backend="host", filters=[("id", "like", 1)])
    with pytest.raises(TypeError):
        gpu_parquet.read(FLAT, backend="host", filters=42)
    with pytest.raises(TypeError, match="type"):
        gpu_parquet.read(FLAT, backend="host", filters=[("id", "=", object())])

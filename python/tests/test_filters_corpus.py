"""filters= on parquet-testing files with page indexes (alltypes_tiny_pages*: 7300 rows of tiny pages)
and bloom filters (data_index_bloom_encoding_*): the rows equal pyarrow's read_table(filters=...),
and pruning by the page index or the bloom filters is reported where it must happen."""
import datetime
import os
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_parquet

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = pathlib.Path(os.environ.get("GPU_PARQUET_TESTING", ROOT.parent / "shared" / "parquet-testing")) / "data"
TINY = ["alltypes_tiny_pages.parquet", "alltypes_tiny_pages_plain.parquet"]
BLOOM = ["data_index_bloom_encoding_stats.parquet", "data_index_bloom_encoding_with_length.parquet"]

# (our string, pyarrow's DNF)
TINY_CASES = [
    ("id < 100", [("id", "<", 100)]),
    ("id between 3000 and 3100", [("id", ">=", 3000), ("id", "<=", 3100)]),
    ("id > 7000 or id < 5", [[("id", ">", 7000)], [("id", "<", 5)]]),
    ("int_col = 3 and id >= 7200", [("int_col", "==", 3), ("id", ">=", 7200)]),
    ("string_col in ('1', '7') and id < 500", [("string_col", "in", ["1", "7"]), ("id", "<", 500)]),
    ("double_col > 60 and bool_col = true", [("double_col", ">", 60.0), ("bool_col", "==", True)]),
    ("timestamp_col >= '2010-01-01 00:00:00'", [("timestamp_col", ">=", datetime.datetime(2010, 1, 1))]),
    ("not (id >= 10)", [("id", "<", 10)]),
]

if not CORPUS.is_dir():
    pytest.skip(f"parquet-testing corpus not found at {CORPUS} (set GPU_PARQUET_TESTING)", allow_module_level=True)


def same(got, want):
    assert got.num_rows == want.num_rows
    assert got.column_names == want.column_names
    for name in want.column_names:
        g, w = got.column(name).combine_chunks(), want.column(name).combine_chunks()
        if g.type != w.type:
            g = g.cast(w.type)
        assert g.equals(w), name


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("text,dnf", TINY_CASES, ids=[c[0] for c in TINY_CASES])
def test_page_indexed_files_equal_pyarrow(name, text, dnf):
    path = CORPUS / name
    want = pq.read_table(path, filters=dnf)
    assert want.num_rows < 7300
    for filters in (text, dnf):
        t = gpu_parquet.read(path, backend="host", filters=filters)
        same(t.to_arrow(), want)
    # One pass: the same rows.
    same(gpu_parquet.read(path, backend="host", filters=text, filter_passes=1).to_arrow(), want)


def test_two_passes_read_only_the_pages_holding_matching_rows():
    # int_col is not sorted: pruning keeps most pages, the filter's own column tells which rows.
    path = CORPUS / TINY[0]
    two = gpu_parquet.read(
        path, backend="host", columns=["string_col", "double_col"], filters="int_col = 3 and id < 2000", filter_passes=2
    )
    one = gpu_parquet.read(
        path, backend="host", columns=["string_col", "double_col"], filters="int_col = 3 and id < 2000", filter_passes=1
    )
    same(two.to_arrow(), one.to_arrow())
    p = two.report["passes"]
    assert p["payload"] < p["payload_one_pass"], p
    assert "passes" not in one.report
    assert two.report["useful_bytes"] < one.report["useful_bytes"]
    # The default: a small file, in the page cache, reads in one pass.
    auto = gpu_parquet.read(path, backend="host", columns=["string_col", "double_col"], filters="int_col = 3 and id < 2000")
    same(auto.to_arrow(), one.to_arrow())
    assert "passes" not in auto.report
    with pytest.raises(ValueError, match="filter_passes=3"):
        gpu_parquet.read(path, backend="host", filters="id < 3", filter_passes=3)


def test_the_page_index_prunes_pages_of_a_selective_filter():
    t = gpu_parquet.read(CORPUS / TINY[0], backend="host", filters="id between 3000 and 3100")
    p = t.report["pruning"]
    assert p["pages_pruned"] > 0 and p["bytes_avoided"] > 0, p
    assert p["rows_selected"] < p["rows"], p


@pytest.mark.parametrize("name", BLOOM)
def test_bloom_filtered_files_equal_pyarrow(name):
    path = CORPUS / name
    values = pq.read_table(path).column("String").to_pylist()
    present = next(v for v in values if v is not None)
    for value, rows in ((present, None), ("not a value of the file", 0)):
        want = pq.read_table(path, filters=[("String", "==", value)])
        t = gpu_parquet.read(path, backend="host", filters=[("String", "==", value)])
        same(t.to_arrow(), want)
        if rows == 0:
            # The absent value is ruled out before any data page is read.
            p = t.report["pruning"]
            assert p["row_groups_selected"] == 0, p
            assert t.num_rows == 0

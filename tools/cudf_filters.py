#!/usr/bin/env python3
"""cuDF's side of `gpu-parquet bench --filter` (issue 43): pylibcudf read_parquet of FILE's COLUMNS with
a filter, into device columns, best of REPS hot runs plus one cold run (after dropping the page cache,
where the process may), at each KvikIO thread count given. One JSON line per setting: time, the rows
kept, and the bytes the process read from files during one read (/proc/self/io rchar: KvikIO's preads,
the footer included).

FILTER is pyarrow's DNF as JSON (`[["l_quantity", "<", 24], ...]` or a list of such lists). Its leaves
that libcudf's AST takes (numbers, dates, timestamps, strings: not decimals, which its literals lack)
go to `ParquetReaderOptions.set_filter`, so libcudf prunes row groups and filters rows itself; the other
leaves are applied after the read with pylibcudf's binary operations and `apply_boolean_mask`, inside
the timed read, as cudf's own read_parquet(filters=...) does. The rows kept are checked once against
the rows pyarrow's dataset counts with the same filter.
Usage: cudf_filters.py FILE COLUMNS FILTER [THREADS,...]   (COLUMNS comma-separated; '' for all)"""
import json, os, subprocess, sys

path, columns, dnf = sys.argv[1], sys.argv[2], sys.argv[3]
threads = (sys.argv[4] if len(sys.argv) > 4 else "4,32").split(",")
code = r'''
import datetime, decimal, json, os, subprocess, sys, time
import cupy as cp, pyarrow as pa, pyarrow.dataset, pyarrow.parquet as pq, pylibcudf as plc
from pylibcudf.expressions import ASTOperator, ColumnNameReference, Literal, Operation

path, columns, dnf = sys.argv[1], [c for c in sys.argv[2].split(",") if c], json.loads(sys.argv[3])
reps = int(os.environ.get("REPS", 5))
if dnf and not isinstance(dnf[0][0], list):
    dnf = [dnf]
schema = pq.read_schema(path)
AST_OPS = {"=": ASTOperator.EQUAL, "==": ASTOperator.EQUAL, "!=": ASTOperator.NOT_EQUAL,
           "<": ASTOperator.LESS, "<=": ASTOperator.LESS_EQUAL, ">": ASTOperator.GREATER,
           ">=": ASTOperator.GREATER_EQUAL}
BIN_OPS = {"=": "EQUAL", "==": "EQUAL", "!=": "NOT_EQUAL", "<": "LESS", "<=": "LESS_EQUAL",
           ">": "GREATER", ">=": "GREATER_EQUAL"}

def arrow_scalar(col, value):
    t = schema.field(col).type
    if pa.types.is_date(t) and isinstance(value, str):
        value = datetime.date.fromisoformat(value)
    if pa.types.is_decimal(t):
        value = decimal.Decimal(str(value))
    return pa.scalar(value, type=t)

def plc_scalar(s):
    return plc.Scalar.from_arrow(s) if hasattr(plc.Scalar, "from_arrow") else plc.interop.from_arrow(s)

def ast_ok(col):
    t = schema.field(col).type
    return not (pa.types.is_decimal(t) or pa.types.is_dictionary(t))

def leaves(col, op, value):
    """(op, value) pairs of a leaf: `in` as equalities (or-ed), `not in` as inequalities (and-ed)."""
    if op == "in":
        return "or", [("=", v) for v in value]
    if op == "not in":
        return "and", [("!=", v) for v in value]
    return "and", [(op, value)]

def ast_leaf(col, op, value):
    how, parts = leaves(col, op, value)
    exprs = [Operation(AST_OPS[o], ColumnNameReference(col), Literal(plc_scalar(arrow_scalar(col, v))))
             for o, v in parts]
    join = ASTOperator.LOGICAL_OR if how == "or" else ASTOperator.LOGICAL_AND
    e = exprs[0]
    for x in exprs[1:]:
        e = Operation(join, e, x)
    return e

# One conjunction: its AST leaves pushed down, the rest after the read. A disjunction of several
# goes to libcudf whole when every leaf is AST-able, else entirely after the read.
single = len(dnf) == 1
pushed, after = [], []
for conj in dnf:
    for leaf in conj:
        (pushed if (single or all(ast_ok(l[0]) for c in dnf for l in c)) and ast_ok(leaf[0]) else after).append(leaf)
if not single and after:
    pushed, after = [], [l for c in dnf for l in c]
def and_all(es, op=ASTOperator.LOGICAL_AND):
    e = es[0]
    for x in es[1:]:
        e = Operation(op, e, x)
    return e
filt = None
if pushed:
    if single:
        filt = and_all([ast_leaf(*l) for l in pushed])
    else:
        filt = and_all([and_all([ast_leaf(*l) for l in c]) for c in dnf], ASTOperator.LOGICAL_OR)
# Filter columns are read too (libcudf may not resolve names outside the projection), then dropped.
need = [l[0] for c in dnf for l in c if columns and l[0] not in columns]
need = sorted(set(need))
read_cols = columns + need

cast_scalars = {}
def scalar_like(column, c, v):
    """The literal v of column c as a scalar of the column's cuDF type: libcudf reads a decimal of
    precision up to 18 as DECIMAL64 where Arrow's type is decimal128, and its comparisons take only
    operands of one type. Cast once, then reused."""
    key = (c, repr(v))
    if key not in cast_scalars:
        s = plc_scalar(arrow_scalar(c, v))
        of = lambda t: (t.id(), t.scale())
        if of(s.type()) != of(column.type()):
            one = plc.unary.cast(plc.Column.from_scalar(s, 1), column.type())
            s = plc.copying.get_element(one, 0)
        cast_scalars[key] = s
    return cast_scalars[key]

def mask_of(table, names):
    bool8 = plc.DataType(plc.TypeId.BOOL8)
    def col(name): return table.columns()[names.index(name)]
    def leaf_mask(c, op, v):
        how, parts = leaves(c, op, v)
        ms = [plc.binaryop.binary_operation(col(c), scalar_like(col(c), c, x),
                                            getattr(plc.binaryop.BinaryOperator, BIN_OPS[o]), bool8)
              for o, x in parts]
        join = plc.binaryop.BinaryOperator.NULL_LOGICAL_OR if how == "or" else plc.binaryop.BinaryOperator.NULL_LOGICAL_AND
        m = ms[0]
        for x in ms[1:]:
            m = plc.binaryop.binary_operation(m, x, join, bool8)
        return m
    def all_of(ls, op):
        ms = [leaf_mask(*l) for l in ls]
        m = ms[0]
        for x in ms[1:]:
            m = plc.binaryop.binary_operation(m, x, op, bool8)
        return m
    AND, OR = plc.binaryop.BinaryOperator.NULL_LOGICAL_AND, plc.binaryop.BinaryOperator.NULL_LOGICAL_OR
    if single:
        return all_of(after, AND)
    ms = [all_of(c, AND) for c in dnf]
    m = ms[0]
    for x in ms[1:]:
        m = plc.binaryop.binary_operation(m, x, OR, bool8)
    return m

def run():
    b = plc.io.parquet.ParquetReaderOptions.builder(plc.io.SourceInfo([path]))
    opts = b.build()
    if read_cols:
        opts.set_columns(read_cols)
    if filt is not None:
        opts.set_filter(filt)
    r = plc.io.parquet.read_parquet(opts)
    t, names = r.tbl, r.column_names()
    if after:
        t = plc.stream_compaction.apply_boolean_mask(t, mask_of(t, names))
    if need:
        t = plc.Table([c for c, n in zip(t.columns(), names) if n not in need])
    cp.cuda.Device().synchronize()
    return t

def rchar():
    for line in open("/proc/self/io"):
        if line.startswith("rchar:"):
            return int(line.split()[1])
def typed(l):
    c, op, v = l
    return (c, op, [arrow_scalar(c, x).as_py() for x in v] if op in ("in", "not in") else arrow_scalar(c, v).as_py())
# Counted, not read: pyarrow cannot filter the string_view columns tpchgen writes.
want = pyarrow.dataset.dataset(path, format="parquet").count_rows(
    filter=pq.filters_to_expression([[typed(l) for l in c] for c in dnf]))
r0 = rchar(); t = run(); read_bytes = rchar() - r0
rows = t.num_rows(); del t
def once():
    t0 = time.perf_counter(); t = run(); return time.perf_counter() - t0
best = min(once() for _ in range(reps))
cold = None
if subprocess.run("sync; echo 3 > /proc/sys/vm/drop_caches", shell=True, stderr=subprocess.DEVNULL).returncode == 0:
    cold = once()
print(json.dumps({"peer": "cudf filters", "file": os.path.basename(path), "kvikio_threads": int(os.environ["KVIKIO_NTHREADS"]),
                  "pushed_down": len(pushed), "after_read": len(after), "rows": rows, "pyarrow_rows": want,
                  "rows_match": rows == want, "bytes_read": read_bytes, "hot_s": round(best, 4),
                  "cold_s": cold and round(cold, 4)}), flush=True)
'''
for th in threads:
    env = dict(os.environ, KVIKIO_NTHREADS=th)
    subprocess.run([sys.executable, "-c", code, path, columns, dnf], env=env, check=False)

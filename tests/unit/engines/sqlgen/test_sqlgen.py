"""engines.sqlgen: the API, group validation, the shape and safety of the SQL, DuckDB basics.

The differential tests (tests/differential/test_sqlgen_engines.py) run every shipped query's
groups and random expressions on DuckDB and Spark; here are the contract-level checks: input
naming and order, errors for invalid groups, identifiers and literals in the generated SQL,
hostile string literals, exact result types, and the scalar semantics of docs/semantics.md
on DuckDB, value by value.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
import sqlglot
from sqlglot import exp

from engines.arrow_types import arrow_type
from engines.duckdb.exact_sums import prepare, run_sql
from engines.row.compile import compile_filter, compile_map
from engines.sqlgen import DIALECTS, GroupSQL, analyse_group, group_sql
from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import PlanError, UnsupportedError
from optimizer.ir.expr import AggCall, Binary, Cast, ColumnRef, Expr, Func, Literal, Unary
from optimizer.ir.plan import (
    R2S,
    Aggregate,
    Join,
    LogicalPlan,
    Operator,
    PlanBuilder,
    Project,
    Select,
    Sink,
    Source,
    StreamMode,
    Window,
    WindowKind,
)
from optimizer.ir.schema import Field, Schema
from optimizer.ir.types import DataType
from optimizer.sql import plan_query

ROOT = Path(__file__).resolve().parents[4]
QUERIES = sorted((ROOT / "queries").glob("*/*.sql"))
GOLDEN = sorted((ROOT / "tests" / "golden" / "queries").glob("*.sql"))
DIALECT_NAMES = sorted(DIALECTS)

INTEGER, BIGINT, DOUBLE, BOOLEAN, VARCHAR, NULL = (
    DataType.INTEGER,
    DataType.BIGINT,
    DataType.DOUBLE,
    DataType.BOOLEAN,
    DataType.VARCHAR,
    DataType.NULL,
)

Row = tuple[Any, ...]


# -- helpers --------------------------------------------------------------------------------


def _plan(path: Path, catalog: Catalog) -> LogicalPlan:
    from optimizer.sql.catalog import load_catalog

    cat = catalog if path in GOLDEN else load_catalog(path.parent / "catalog.toml")
    return plan_query(path.read_text(), cat, path.name)


def chain_plan(schema: Schema, *makers: Callable[[str], Operator]) -> tuple[LogicalPlan, list[str]]:
    """source -> UNBOUNDED window -> makers[0] -> makers[1] ... -> rstream -> sink."""
    b = PlanBuilder()
    cur = b.add(lambda i: Source(i, schema, "t", 0, "s"))
    cur = b.add(
        lambda i: Window(i, schema, WindowKind.UNBOUNDED, None, 1, False, 0, "s", "UNBOUNDED"),
        cur,
    )
    ids = []
    for make in makers:
        cur = b.add(make, cur)
        ids.append(cur)
    out = b.op(cur).schema
    cur = b.add(lambda i: R2S(i, out, StreamMode.RSTREAM), cur)
    return b.build(b.add(lambda i: Sink(i, out), cur)), ids


def relation(rows: list[Row], schema: Schema) -> pa.Table:
    return pa.table(
        {
            f"c{i}": pa.array([r[i] for r in rows], type=arrow_type(f.dtype))
            for i, f in enumerate(schema)
        }
    )


def run_duckdb(g: GroupSQL, tables: dict[str, pa.Table]) -> pa.Table:
    con = duckdb.connect()
    prepare(con)
    for name, table in tables.items():
        con.register(name, table)
    return run_sql(con, g.sql)


def rows_of(table: pa.Table) -> list[Row]:
    return list(zip(*(c.to_pylist() for c in table.columns), strict=True))


def project_values(exprs: list[Expr], schema: Schema, rows: list[Row]) -> list[list[Any]]:
    """Each expression's values per row, computed by DuckDB through a one-project group."""
    out_schema = Schema(tuple(Field(f"e{k}", e.dtype) for k, e in enumerate(exprs)))
    plan, (prj,) = chain_plan(schema, lambda i: Project(i, out_schema, tuple(exprs)))
    table = run_duckdb(group_sql(plan, [prj], "duckdb"), {"in0": relation(rows, schema)})
    return [c.to_pylist() for c in table.columns]


def same_value(a: Any, b: Any) -> bool:
    """Equal, NaN == NaN, and zeros of the same sign."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return type(a) is type(b) and a == b


# -- API and group validation ---------------------------------------------------------------


def test_api_of_a_maximal_group(smartplug: Catalog) -> None:
    plan = _plan(ROOT / "queries" / "smartplug" / "q1.sql", smartplug)
    group = plan.r2r_ids()
    for dialect in DIALECT_NAMES:
        g = group_sql(plan, group, dialect)
        assert isinstance(g, GroupSQL) and isinstance(g.sql, str)
        # Inputs in the order the group's operators appear in plan.topological(), port order.
        assert g.inputs == [("window2", "in0"), ("window1", "in1")]
        assert g.output_schema == plan.op("aggregate2").schema
        assert group_sql(plan, list(reversed(group)), dialect) == g  # order of ids is irrelevant
        assert sqlglot.parse_one(g.sql, read=dialect).find(exp.Select) is not None


def test_the_top_of_a_partial_group_and_row_engine_inputs(smartplug: Catalog) -> None:
    plan = _plan(ROOT / "queries" / "smartplug" / "q1.sql", smartplug)
    g = group_sql(plan, ["join1", "aggregate2"], "duckdb")
    # join1's inputs are a select and an aggregate left on the row engine.
    assert g.inputs == [("select2", "in0"), ("aggregate1", "in1")]
    assert g.output_schema == plan.op("aggregate2").schema
    assert analyse_group(plan, ["aggregate2", "join1"]).top == "aggregate2"


def test_one_external_operator_feeding_twice_is_one_table() -> None:
    schema = Schema((Field("k", BIGINT), Field("v", DOUBLE)))
    b = PlanBuilder()
    src = b.add(lambda i: Source(i, schema, "t", 0, "s"))
    win = b.add(
        lambda i: Window(i, schema, WindowKind.UNBOUNDED, None, 1, False, 0, "s", "UNBOUNDED"),
        src,
    )
    pred = Binary(">", ColumnRef(1, "v", DOUBLE), Literal(1.0, DOUBLE), BOOLEAN)
    sel = b.add(lambda i: Select(i, schema, pred), win)
    joined = schema.concat(schema)
    cond = Binary("=", ColumnRef(0, "k", BIGINT), ColumnRef(2, "k", BIGINT), BOOLEAN)
    join = b.add(lambda i: Join(i, joined, cond, 2), sel, win)  # the window feeds twice
    join2 = b.add(lambda i: Join(i, joined.concat(schema), None, 4), join, win)
    out = b.add(lambda i: R2S(i, joined.concat(schema), StreamMode.RSTREAM), join2)
    plan = b.build(b.add(lambda i: Sink(i, joined.concat(schema)), out))
    g = group_sql(plan, [sel, join, join2], "duckdb")
    assert g.inputs == [(win, "in0")]
    rows = [(1, 0.5), (1, 2.0), (2, 3.0)]
    got = rows_of(run_duckdb(g, {"in0": relation(rows, schema)}))
    left = [r for r in rows if r[1] > 1.0]
    expected = [a + b + c for a in left for b in rows if a[0] == b[0] for c in rows]
    assert sorted(got) == sorted(expected)
    assert " CROSS JOIN " in g.sql


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ([], "at least one operator"),
        (["nope1"], "unknown operator 'nope1'"),
        (["window1", "select2"], "window operator"),
        (["rstream1"], "rstream operator"),
        (["aggregate1", "select2"], "must be connected"),
        (["select2", "aggregate1", "select1"], "must be connected"),
    ],
)
def test_invalid_groups_are_plan_errors(smartplug: Catalog, group: list[str], message: str) -> None:
    plan = _plan(ROOT / "queries" / "smartplug" / "q1.sql", smartplug)
    with pytest.raises(PlanError, match=message):
        group_sql(plan, group, "duckdb")


def test_a_group_with_two_outputs_is_a_plan_error() -> None:
    schema = Schema((Field("k", BIGINT),))
    b = PlanBuilder()
    src = b.add(lambda i: Source(i, schema, "t", 0, "s"))
    win = b.add(
        lambda i: Window(i, schema, WindowKind.UNBOUNDED, None, 1, False, 0, "s", "UNBOUNDED"),
        src,
    )
    sel = b.add(lambda i: Select(i, schema, Literal(True, BOOLEAN)), win)
    proj_a = b.add(lambda i: Project(i, schema, (ColumnRef(0, "k", BIGINT),)), sel)
    proj_b = b.add(lambda i: Project(i, schema, (ColumnRef(0, "k", BIGINT),)), sel)
    both = schema.concat(schema)
    join = b.add(lambda i: Join(i, both, None, 1), proj_a, proj_b)
    out = b.add(lambda i: R2S(i, both, StreamMode.RSTREAM), join)
    plan = b.build(b.add(lambda i: Sink(i, both), out))
    with pytest.raises(PlanError, match=f"exactly one operator .* 2: {sel}, {proj_a}"):
        group_sql(plan, [sel, proj_a], "duckdb")
    assert group_sql(plan, [sel, proj_a, proj_b, join], "spark").inputs == [(win, "in0")]


def test_invalid_group_argument_and_dialect(smartplug: Catalog) -> None:
    plan = _plan(ROOT / "queries" / "smartplug" / "q1.sql", smartplug)
    with pytest.raises(PlanError, match="sequence of operator ids"):
        group_sql(plan, "join1", "duckdb")
    with pytest.raises(PlanError, match="unknown SQL dialect"):
        group_sql(plan, ["join1"], "postgres")
    with pytest.raises(PlanError) as info:
        group_sql(plan, ["jion1"], "duckdb")
    assert info.value.hint == "did you mean 'join1'?"
    assert group_sql(plan, ["join1"], "DuckDB").sql == group_sql(plan, ["join1"], "duckdb").sql


# -- the generated SQL ----------------------------------------------------------------------

GENERATED_NAME = re.compile(r"(in|t|c|k)\d+|[slr]")
OUR_STRINGS = {"NaN", "Infinity", "-Infinity", "-0.0", "-%"}


@pytest.mark.parametrize("path", QUERIES + GOLDEN, ids=lambda p: p.stem)
def test_sql_names_only_generated_identifiers(smartplug: Catalog, path: Path) -> None:
    plan = _plan(path, smartplug)
    ir_strings = {
        e.value
        for op in plan.operators()
        for root in _expressions(op)
        for e in root.walk()
        if isinstance(e, Literal) and isinstance(e.value, str)
    }
    for dialect in DIALECT_NAMES:
        for group in [plan.r2r_ids(), *([i] for i in plan.r2r_ids())]:
            g = group_sql(plan, group, dialect)
            tree = sqlglot.parse_one(g.sql, read=dialect)
            names = {i.name for i in tree.find_all(exp.Identifier)}
            assert all(GENERATED_NAME.fullmatch(n) for n in names), names
            strings = {lit.this for lit in tree.find_all(exp.Literal) if lit.is_string}
            assert strings <= ir_strings | OUR_STRINGS
            outputs = tree.expressions
            assert [o.alias for o in outputs] == [f"c{i}" for i in range(len(g.output_schema))]
            assert all(isinstance(o.this, exp.Cast) for o in outputs)


def _expressions(op: Operator) -> list[Expr]:
    if isinstance(op, Select):
        return [op.predicate]
    if isinstance(op, Project):
        return list(op.exprs)
    if isinstance(op, Join):
        return [op.condition] if op.condition is not None else []
    if isinstance(op, Aggregate):
        return [*op.group_by, *op.aggs]
    return []


HOSTILE = [
    "it's",
    "'; DROP TABLE x; --",
    "'') OR (1=1) --",
    "back\\slash",
    "\\'",
    "trailing\\",
    "new\nline",
    "tab\tand\r\ncrlf",
    "unicode é ü 日本 🎉",
    '"double" `tick`',
    "$$ /* c */ %_",
    "\\n \\u0041 \\x00",
    "nul\x00byte",
    "",
]


@pytest.mark.parametrize("text", HOSTILE, ids=repr)
def test_hostile_string_literals_on_duckdb(text: str) -> None:
    schema = Schema((Field("s", VARCHAR), Field("n", BIGINT)))
    rows: list[Row] = [(s, k) for k, s in enumerate(HOSTILE)] + [("plain", 99), (None, 100)]
    pred = Binary("=", ColumnRef(0, "s", VARCHAR), Literal(text, VARCHAR), BOOLEAN)
    out = Schema((Field("s", VARCHAR), Field("n", BIGINT), Field("lit", VARCHAR)))
    plan, (sel, prj) = chain_plan(
        schema,
        lambda i: Select(i, schema, pred),
        lambda i: Project(
            i, out, (ColumnRef(0, "s", VARCHAR), ColumnRef(1, "n", BIGINT), Literal(text, VARCHAR))
        ),
    )
    g = group_sql(plan, [sel, prj], "duckdb")
    got = rows_of(run_duckdb(g, {"in0": relation(rows, schema)}))
    expected = [(*r, text) for r in compile_filter(pred, [True, True])(rows)]
    assert got == expected
    assert len(got) == 1


def test_result_types_are_exact_on_duckdb(smartplug: Catalog) -> None:
    schema = Schema(
        (Field("k", INTEGER), Field("i", INTEGER), Field("v", DOUBLE), Field("s", VARCHAR))
    )
    aggs = (
        AggCall(
            "SUM", ColumnRef(1, "i", INTEGER), False, BIGINT
        ),  # HUGEINT in DuckDB without the cast
        AggCall("AVG", ColumnRef(1, "i", INTEGER), False, DOUBLE),
        AggCall("MEDIAN", ColumnRef(1, "i", INTEGER), False, DOUBLE),
        AggCall("COUNT", None, False, BIGINT),
        AggCall("COUNT", ColumnRef(3, "s", VARCHAR), True, BIGINT),
        AggCall("MIN", ColumnRef(3, "s", VARCHAR), False, VARCHAR),
        AggCall("SUM", ColumnRef(2, "v", DOUBLE), False, DOUBLE),
    )
    out = Schema((Field("k", INTEGER), *(Field(f"a{n}", a.dtype) for n, a in enumerate(aggs))))
    plan, (agg,) = chain_plan(
        schema, lambda i: Aggregate(i, out, (ColumnRef(0, "k", INTEGER),), aggs)
    )
    rows = [
        (1, 1, 0.5, "x"),
        (1, 2, 1.5, "y"),
        (1, 3, 2.0, "x"),
        (1, 4, 4.0, None),
        (2, 5, 1.0, "b"),
    ]
    table = run_duckdb(group_sql(plan, [agg], "duckdb"), {"in0": relation(rows, schema)})
    assert table.schema.types == [arrow_type(f.dtype) for f in out]
    assert sorted(rows_of(table)) == [
        (1, 10, 2.5, 2.5, 4, 2, "x", 8.0),
        (2, 5, 5.0, 5.0, 1, 1, "b", 1.0),
    ]


def test_global_aggregate_over_empty_input_is_one_row() -> None:
    schema = Schema((Field("v", DOUBLE),))
    aggs = (
        AggCall("COUNT", None, False, BIGINT),
        AggCall("SUM", ColumnRef(0, "v", DOUBLE), False, DOUBLE),
        AggCall("MEDIAN", ColumnRef(0, "v", DOUBLE), False, DOUBLE),
    )
    out = Schema(tuple(Field(f"a{n}", a.dtype) for n, a in enumerate(aggs)))
    plan, (agg,) = chain_plan(schema, lambda i: Aggregate(i, out, (), aggs))
    g = group_sql(plan, [agg], "duckdb")
    assert "GROUP BY" not in g.sql
    assert rows_of(run_duckdb(g, {"in0": relation([], schema)})) == [(0, None, None)]


def test_computed_group_keys_group_by_columns_only(smartplug: Catalog) -> None:
    text = (
        "SELECT plug_id % 2 AS p, ROUND(value / 3, 1) AS r, COUNT(*) AS n "
        "FROM readings [RANGE 10 SECONDS] GROUP BY plug_id % 2, ROUND(value / 3, 1)"
    )
    plan = plan_query(text, smartplug)
    for dialect in DIALECT_NAMES:
        tree = sqlglot.parse_one(group_sql(plan, ["aggregate1"], dialect).sql, read=dialect)
        for select in tree.find_all(exp.Select):
            group = select.args.get("group")
            if group is not None:
                assert all(isinstance(k, exp.Column) for k in group.expressions)
    rows = [(1, 10, 1.5, 1, p, 0, 0) for p in (0, 1, 2, 3)] + [(2, 10, 0.3, 1, 5, 0, 0)]
    schema = plan.op("window1").schema
    got = rows_of(
        run_duckdb(group_sql(plan, ["aggregate1"], "duckdb"), {"in0": relation(rows, schema)})
    )
    assert sorted(got) == [(0, 0.5, 2), (1, 0.1, 1), (1, 0.5, 2)]


def test_unsupported_constructs_are_reported() -> None:
    schema = Schema((Field("s", VARCHAR), Field("x", DOUBLE)))
    to_int = Schema((Field("n", INTEGER),))
    plan, (prj,) = chain_plan(
        schema, lambda i: Project(i, to_int, (Cast(ColumnRef(0, "s", VARCHAR), INTEGER),))
    )
    with pytest.raises(UnsupportedError, match=r"VARCHAR to INTEGER.*Spark"):
        group_sql(plan, [prj], "spark")
    assert "CAST(s.c0 AS INT)" in group_sql(plan, [prj], "duckdb").sql  # DuckDB defines it
    to_text = Schema((Field("t", VARCHAR),))
    plan, (prj,) = chain_plan(
        schema, lambda i: Project(i, to_text, (Cast(ColumnRef(1, "x", DOUBLE), VARCHAR),))
    )
    with pytest.raises(UnsupportedError, match="DOUBLE to VARCHAR"):
        group_sql(plan, [prj], "spark")
    out = Schema((Field("a", DOUBLE),))
    plan, (agg,) = chain_plan(
        schema,
        lambda i: Aggregate(i, out, (), (AggCall("SUM", ColumnRef(1, "x", DOUBLE), True, DOUBLE),)),
    )
    with pytest.raises(UnsupportedError, match="SUM\\(DISTINCT"):
        group_sql(plan, [agg], "duckdb")


# -- scalar semantics on DuckDB, value by value (docs/semantics.md) -------------------------

NUMS = Schema((Field("i", BIGINT), Field("j", BIGINT), Field("x", DOUBLE), Field("y", DOUBLE)))
NUM_ROWS: list[Row] = [
    (5, 0, 1.0, 0.0),
    (-7, 3, -1.0, -0.0),
    (7, -3, 0.0, 0.0),
    (None, 2, 5.5, 2.0),
]


def _col(i: int) -> ColumnRef:
    return ColumnRef(i, NUMS[i].name, NUMS[i].dtype)


def _bin(op: str, a: Expr, b: Expr, t: DataType) -> Binary:
    return Binary(op, a, b, t)


SEMANTICS: list[tuple[str, Expr, list[Any]]] = [
    ("x / y is IEEE", _bin("/", _col(2), _col(3), DOUBLE), [math.inf, math.inf, math.nan, 2.75]),
    ("i / j", _bin("/", _col(0), _col(1), DOUBLE), [math.inf, -7 / 3, 7 / -3, None]),
    ("i % j: NULL by 0, dividend's sign", _bin("%", _col(0), _col(1), BIGINT), [None, -1, 1, None]),
    ("x % y: NaN by 0", _bin("%", _col(2), _col(3), DOUBLE), [math.nan, math.nan, math.nan, 1.5]),
    (
        "x / -0.0",
        _bin("/", _col(2), Literal(-0.0, DOUBLE), DOUBLE),
        [-math.inf, math.inf, math.nan, -math.inf],
    ),
    (
        "CAST(x * 2.5) half even",
        Cast(_bin("*", _col(2), Literal(2.5, DOUBLE), DOUBLE), INTEGER),
        [2, -2, 0, 14],
    ),
    (
        "ROUND half away",
        Func("ROUND", (_bin("*", _col(2), Literal(2.5, DOUBLE), DOUBLE),), DOUBLE),
        [3.0, -3.0, 0.0, 14.0],
    ),
    (
        "ROUND(x / 4, 1)",
        Func("ROUND", (_bin("/", _col(2), Literal(4, BIGINT), DOUBLE), Literal(1, BIGINT)), DOUBLE),
        [0.3, -0.3, 0.0, 1.4],
    ),
    (
        "FLOOR is DOUBLE",
        Func("FLOOR", (_bin("/", _col(2), Literal(2, BIGINT), DOUBLE),), DOUBLE),
        [0.0, -1.0, 0.0, 2.0],
    ),
    (
        "CEIL keeps -0.0",
        Func("CEIL", (_bin("/", _col(2), Literal(2, BIGINT), DOUBLE),), DOUBLE),
        [1.0, -0.0, 0.0, 3.0],
    ),
    (
        "LEAST ignores NULL",
        Func("LEAST", (_col(0), Literal(None, NULL), _col(1)), BIGINT),
        [0, -7, -3, 2],
    ),
    ("GREATEST ignores NULL", Func("GREATEST", (_col(0), _col(1)), BIGINT), [5, 3, 7, 2]),
    ("NEG of BIGINT", Unary("NEG", _col(0), BIGINT), [-5, 7, -7, None]),
    (
        "integer * stays exact",
        _bin("*", _col(0), Literal(2**40, BIGINT), BIGINT),
        [5 * 2**40, -7 * 2**40, 7 * 2**40, None],
    ),
]


@pytest.mark.parametrize(("what", "expr", "expected"), SEMANTICS, ids=[s[0] for s in SEMANTICS])
def test_scalar_semantics_on_duckdb(what: str, expr: Expr, expected: list[Any]) -> None:
    (values,) = project_values([expr], NUMS, NUM_ROWS)
    assert all(same_value(a, b) for a, b in zip(values, expected, strict=True)), values
    # The row engine agrees (up to the sign of zero: it gives +0.0 for CEIL(-0.5)).
    row = [r[0] for r in compile_map([expr], [True] * 4)(NUM_ROWS)]
    assert all(
        (a is None and b is None) or (a is not None and b is not None and (a == b or a != a))
        for a, b in zip(values, row, strict=True)
    ), row


LITERALS: list[tuple[Any, DataType]] = [
    (0.1, DOUBLE),
    (0.1 + 0.2, DOUBLE),
    (-0.0, DOUBLE),
    (5e-324, DOUBLE),
    (1.7976931348623157e308, DOUBLE),
    (-1e-300, DOUBLE),
    (123456789.123456789, DOUBLE),
    (math.inf, DOUBLE),
    (-math.inf, DOUBLE),
    (math.nan, DOUBLE),
    (2**63 - 1, BIGINT),
    (-(2**63), BIGINT),
    (2**31 - 1, INTEGER),
    (-(2**31), INTEGER),
    (True, BOOLEAN),
    (None, DOUBLE),
    (None, NULL),
]


def test_literals_round_trip_exactly_on_duckdb() -> None:
    exprs: list[Expr] = [Literal(v, t) for v, t in LITERALS]
    values = project_values(exprs, NUMS, NUM_ROWS[:1])
    for (v, _), (got,) in zip(LITERALS, values, strict=True):
        assert same_value(got, v) or (v is None and got is None), (v, got)


# -- architecture -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", sorted((ROOT / "engines" / "sqlgen").glob("*.py")), ids=lambda p: p.name
)
def test_sqlgen_imports_only_the_ir_sqlglot_and_the_stdlib(path: Path) -> None:
    import sys

    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            allowed = (
                name.startswith(("optimizer.ir", "engines.sqlgen"))
                or top == "sqlglot"
                or top in sys.stdlib_module_names
                or top == "__future__"
            )
            assert allowed, f"{path.name} imports {name}"


def test_malformed_operators_are_internal_errors() -> None:
    from optimizer.ir.errors import InternalError

    schema = Schema((Field("k", BIGINT), Field("v", DOUBLE)))
    out = Schema((Field("x", DOUBLE),))
    plan, (prj,) = chain_plan(schema, lambda i: Project(i, out, (ColumnRef(5, "x", DOUBLE),)))
    with pytest.raises(InternalError, match="reads column 5"):
        group_sql(plan, [prj], "duckdb")
    plan, (prj,) = chain_plan(schema, lambda i: Project(i, schema, (ColumnRef(0, "k", BIGINT),)))
    with pytest.raises(InternalError, match="does not fit"):
        group_sql(plan, [prj], "spark")

"""Generated SQL (engines.sqlgen) on DuckDB, Spark and DataFusion against the row engine's
semantics.

Two levels:

* **Groups of operators.** For every shipped query (queries/*/*.sql) and every golden query
  (tests/golden/queries/*.sql), and for several migration candidates per plan (every single
  R2R operator alone, every maximal connected set of R2R operators, a few random connected
  subsets), the group's SQL runs over its input tables and must return, as a bag, exactly the
  relation a small reference evaluator computes. The evaluator (:class:`Reference`) applies
  each operator to whole relations using the row engine's compiled scalar code
  (``engines.row.compile``: compile_filter / compile_map / compile_predicate /
  compile_scalar) and plain-Python SQL aggregates; the windows' contents are fixed samples of
  a random ``readings`` table (tests/datagen.py). The group's inputs are what the evaluator
  computes for the operators feeding it.
* **Expressions.** Hypothesis draws random typed IR expressions (arithmetic with ``/`` and
  ``%`` and zero divisors, comparisons, AND/OR/NOT with NULLs, CASE, CAST, ROUND, FLOOR,
  CEIL, ABS, LEAST, GREATEST, COALESCE) over a small table with NULLs, zeros, negative zero and
  ties; each is evaluated by the row compiler, by DuckDB and by Spark through a one-operator
  group, and the values must agree (NaN == NaN, floats within 1e-9 relative).

The row engine is compared on every expression, NaN in comparisons included (NaN equals
NaN and is larger than every number, as in DuckDB). Expressions DuckDB rejects at run time
(integer overflow, CAST of NaN or infinity to an integer) are skipped.

Spark tests are marked ``spark`` and share one session (fixture ``spark``). DataFusion runs
every case DuckDB runs, through the real engine (engines.datafusion) over one shared
SessionContext (fixture ``datafusion``).
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engines.arrow_types import arrow_type
from engines.columnar import QueryDataError
from engines.duckdb.exact_sums import prepare, run_sql
from engines.row.compile import (
    compile_filter,
    compile_map,
    compile_predicate,
    compile_scalar,
)
from engines.sqlgen import GroupSQL, analyse_group, group_sql
from optimizer.ir.errors import PlanError, UnsupportedError
from optimizer.ir.expr import (
    COMPARISONS,
    AggCall,
    Binary,
    Case,
    Cast,
    ColumnRef,
    Expr,
    Func,
    Literal,
    Unary,
)
from optimizer.ir.plan import (
    R2S,
    Aggregate,
    Join,
    LogicalPlan,
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
from optimizer.ir.types import DataType, arithmetic_result, common_numeric
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import random_readings
from tests.oracle import assert_same_stream
from tests.shipped import READINGS

ROOT = Path(__file__).resolve().parent.parent.parent
SHIPPED = READINGS  # the smart-plug queries (keyed ones: test_multi_stream.py)
GOLDEN = sorted((ROOT / "tests" / "golden" / "queries").glob("*.sql"))
SMARTPLUG = ROOT / "queries" / "smartplug" / "catalog.toml"

Row = tuple[Any, ...]
Rows = list[Row]


# ---------------------------------------------------------------------------------------------
# Reference evaluator: whole relations, the row engine's compiled scalar code
# ---------------------------------------------------------------------------------------------


def _median(values: list[Any]) -> float:
    s = sorted(values)
    n = len(s)
    return (s[(n - 1) // 2] + s[n // 2]) / 2.0


def _aggregate_value(call: AggCall, fn: Callable[[Row], Any] | None, rows: Rows) -> Any:
    """One SQL aggregate over a group's rows (NULLs ignored, NULL over no values)."""
    if call.arg is None:
        return len(rows)
    assert fn is not None
    values = [v for v in map(fn, rows) if v is not None]
    if call.func == "COUNT":
        return len(set(values)) if call.distinct else len(values)
    if not values:
        return None
    if call.func == "SUM":
        return sum(values)
    if call.func == "AVG":
        return sum(values) / len(values)
    if call.func == "MIN":
        return min(values)
    if call.func == "MAX":
        return max(values)
    if call.func == "MEDIAN":
        return _median(values)
    raise AssertionError(call.func)


class Reference:
    """Evaluates a plan's R2R operators over fixed window contents, relation at a time."""

    def __init__(self, plan: LogicalPlan, windows: dict[str, Rows]) -> None:
        self.plan = plan
        self.memo: dict[str, Rows] = dict(windows)

    def width(self, op_id: str) -> int:
        return len(self.plan.op(op_id).schema)

    def rows(self, op_id: str) -> Rows:
        if op_id not in self.memo:
            self.memo[op_id] = self._evaluate(op_id)
        return self.memo[op_id]

    def _evaluate(self, op_id: str) -> Rows:
        op = self.plan.op(op_id)
        ins = self.plan.inputs(op_id)
        nulls = [True] * sum(self.width(i) for i in ins)  # anything may be NULL
        if isinstance(op, Select):
            return compile_filter(op.predicate, nulls)(self.rows(ins[0]))
        if isinstance(op, Project):
            return compile_map(op.exprs, nulls)(self.rows(ins[0]))
        if isinstance(op, Join):
            left, right = self.rows(ins[0]), self.rows(ins[1])
            if op.condition is None:
                return [a + b for a in left for b in right]
            test = compile_predicate(op.condition, nulls)
            return [a + b for a in left for b in right if test(a + b)]
        if isinstance(op, Aggregate):
            keys = [compile_scalar(k, nulls) for k in op.group_by]
            args = [None if a.arg is None else compile_scalar(a.arg, nulls) for a in op.aggs]
            groups: dict[Row, Rows] = {}
            for r in self.rows(ins[0]):
                groups.setdefault(tuple(k(r) for k in keys), []).append(r)
            if not op.group_by and not groups:
                groups[()] = []  # a global aggregate has one row even over no input
            return [
                (*key, *(_aggregate_value(a, f, rs) for a, f in zip(op.aggs, args, strict=True)))
                for key, rs in groups.items()
            ]
        raise AssertionError(f"not an R2R operator: {op_id}")


#: The window contents: samples of one random readings table (114 rows, 2 houses, 5 plugs,
#: values with ties and zeros, both properties). Window k gets a different 80% of it.
#: Values are rounded to multiples of 1/8 so that every SUM / AVG is exact whatever the
#: summation order: engines add doubles in different orders (Spark per partition), and a
#: ROUND or comparison of a sum at a tie would otherwise legitimately differ by one digit.
READINGS = random_readings(11, seconds=40, plugs=5, houses=2)
READING_ROWS: Rows = [
    (*r[:2], round(r[2] * 8) / 8, *r[3:])
    for r in zip(*(c.to_pylist() for c in READINGS.columns), strict=True)
]


def window_contents(plan: LogicalPlan) -> dict[str, Rows]:
    out = {}
    for k, wid in enumerate(plan.ids_of("window")):
        assert plan.op(wid).schema.names == READINGS.column_names
        out[wid] = [r for i, r in enumerate(READING_ROWS) if (i + k) % 5 != 0]
    return out


# ---------------------------------------------------------------------------------------------
# Plans and groups
# ---------------------------------------------------------------------------------------------


def _case_name(path: Path) -> str:
    return f"golden_{path.stem}" if path in GOLDEN else f"{path.parent.name}_{path.stem}"


@cache
def load_plan(path: Path) -> LogicalPlan:
    catalog = SMARTPLUG if path in GOLDEN else path.parent / "catalog.toml"
    return plan_query(path.read_text(), load_catalog(catalog), path.name)


@cache
def reference(path: Path) -> Reference:
    plan = load_plan(path)
    return Reference(plan, window_contents(plan))


def is_group(plan: LogicalPlan, ops: Sequence[str]) -> bool:
    try:
        analyse_group(plan, ops)
    except PlanError:
        return False
    return True


def _neighbours(plan: LogicalPlan, op_id: str, r2r: set[str]) -> list[str]:
    return [n for n in (*plan.inputs(op_id), *plan.consumers(op_id)) if n in r2r]


def candidate_groups(plan: LogicalPlan, seed: int, random_groups: int = 3) -> list[tuple[str, ...]]:
    """Every single R2R operator, every maximal connected R2R set, a few random subsets."""
    r2r_order = plan.r2r_ids()
    r2r = set(r2r_order)
    groups: list[tuple[str, ...]] = [(i,) for i in r2r_order]
    seen: set[str] = set()
    for start in r2r_order:  # maximal connected sets: components of the R2R subgraph
        if start in seen:
            continue
        comp, stack = {start}, [start]
        while stack:
            for n in _neighbours(plan, stack.pop(), r2r):
                if n not in comp:
                    comp.add(n)
                    stack.append(n)
        seen |= comp
        ordered = tuple(i for i in r2r_order if i in comp)
        if len(ordered) > 1 and is_group(plan, ordered):
            groups.append(ordered)
    rng = random.Random(seed)
    for _ in range(200):
        if len(groups) >= len(r2r_order) + 1 + random_groups or len(r2r_order) < 3:
            break
        chosen = {rng.choice(r2r_order)}
        target = rng.randint(2, len(r2r_order) - 1)
        while len(chosen) < target:
            frontier = sorted({n for c in chosen for n in _neighbours(plan, c, r2r)} - chosen)
            if not frontier:
                break
            chosen.add(rng.choice(frontier))
        ordered = tuple(i for i in r2r_order if i in chosen)
        if len(ordered) > 1 and ordered not in groups and is_group(plan, ordered):
            groups.append(ordered)
    return groups


GROUP_CASES = [
    pytest.param(path, group, id=f"{_case_name(path)}:{'+'.join(group)}")
    for n, path in enumerate(SHIPPED + GOLDEN)
    for group in candidate_groups(load_plan(path), seed=n)
]


def spark_group_cases() -> list[Any]:
    """The groups run on Spark (a Spark query costs ~0.5 s): single operators only once per
    distinct SQL text, the maximal groups and one random subset per plan."""
    out, texts = [], set()
    for n, path in enumerate(SHIPPED + GOLDEN):
        plan = load_plan(path)
        for group in candidate_groups(plan, seed=n, random_groups=1):
            if len(group) == 1:
                text = group_sql(plan, group, "spark").sql
                if text in texts:
                    continue
                texts.add(text)
            out.append(pytest.param(path, group, id=f"{_case_name(path)}:{'+'.join(group)}"))
    return out


# ---------------------------------------------------------------------------------------------
# Running generated SQL
# ---------------------------------------------------------------------------------------------


def arrow_relation(rows: Rows, schema: Schema) -> pa.Table:
    """A relation as an input table: columns c0 .. c{n-1} typed from the IR schema."""
    return pa.table(
        {
            f"c{i}": pa.array([r[i] for r in rows], type=arrow_type(f.dtype))
            for i, f in enumerate(schema)
        }
    )


def group_inputs(ref: Reference, g: GroupSQL) -> dict[str, pa.Table]:
    return {
        table: arrow_relation(ref.rows(ext), ref.plan.op(ext).schema) for ext, table in g.inputs
    }


def run_duckdb(sql: str, tables: dict[str, pa.Table]) -> pa.Table:
    con = duckdb.connect()
    prepare(con)
    try:
        for name, table in tables.items():
            con.register(name, table)
        return run_sql(con, sql)
    finally:
        con.close()


def run_spark(spark: Any, sql: str, tables: dict[str, pa.Table]) -> pa.Table:
    for name, table in tables.items():
        spark.createDataFrame(table).createOrReplaceTempView(name)
    return spark.sql(sql).toArrow()


def run_datafusion(engine: Any, sql: str, tables: dict[str, pa.Table]) -> pa.Table:
    """Register the tables (zero-copy record batches) and run ``sql`` on the hycq engine."""
    for name, table in tables.items():
        engine.set_input(name, [(0, table)], table.schema)
    return engine.query(sql)


def _with_ts(table: pa.Table) -> pa.Table:
    return table.append_column("_ts", pa.array([0] * table.num_rows, pa.int64()))


def assert_relation(actual: pa.Table, expected: Rows, schema: Schema, engine: str) -> None:
    """Columns c0.., exact Arrow types, and the same bag of rows (floats within 1e-9)."""
    names = [f"c{i}" for i in range(len(schema))]
    assert actual.column_names == names
    got = [(n, t) for n, t in zip(actual.column_names, actual.schema.types, strict=True)]
    want = [(n, arrow_type(f.dtype)) for n, f in zip(names, schema, strict=True)]
    if engine == "spark":  # Spark's Arrow export may use large strings
        got = [(n, pa.string() if t == pa.large_string() else t) for n, t in got]
    assert got == want, f"result types on {engine}"
    assert_same_stream(_with_ts(actual), _with_ts(arrow_relation(expected, schema)))


# ---------------------------------------------------------------------------------------------
# Groups of the shipped and golden queries
# ---------------------------------------------------------------------------------------------


def test_every_query_yields_groups() -> None:
    assert len(SHIPPED) >= 9 and len(GOLDEN) >= 7
    per_plan = {p: [c for c in GROUP_CASES if c.values[0] == p] for p in SHIPPED + GOLDEN}
    assert all(len(cs) >= 1 for cs in per_plan.values()), {
        p.name: len(cs) for p, cs in per_plan.items()
    }


@pytest.mark.parametrize(("path", "group"), GROUP_CASES)
def test_group_on_duckdb(path: Path, group: tuple[str, ...]) -> None:
    ref = reference(path)
    g = group_sql(ref.plan, group, "duckdb")
    actual = run_duckdb(g.sql, group_inputs(ref, g))
    assert_relation(actual, ref.rows(analyse_group(ref.plan, group).top), g.output_schema, "duckdb")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for the whole module (ANSI off, Arrow on)."""
    pytest.importorskip("pyspark")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.ansi.enabled", "true")  # as engines.spark runs it
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def datafusion() -> Any:
    """One DataFusion engine (SessionContext) for the whole module."""
    pytest.importorskip("datafusion")
    from engines.datafusion import DataFusionEngine

    return DataFusionEngine(threads=2)


@pytest.mark.parametrize(("path", "group"), GROUP_CASES)
def test_group_on_datafusion(datafusion: Any, path: Path, group: tuple[str, ...]) -> None:
    ref = reference(path)
    g = group_sql(ref.plan, group, "datafusion")
    actual = run_datafusion(datafusion, g.sql, group_inputs(ref, g))
    top = analyse_group(ref.plan, group).top
    assert_relation(actual, ref.rows(top), g.output_schema, "datafusion")


@pytest.mark.spark
@pytest.mark.parametrize(("path", "group"), spark_group_cases())
def test_group_on_spark(spark: Any, path: Path, group: tuple[str, ...]) -> None:
    ref = reference(path)
    g = group_sql(ref.plan, group, "spark")
    actual = run_spark(spark, g.sql, group_inputs(ref, g))
    assert_relation(actual, ref.rows(analyse_group(ref.plan, group).top), g.output_schema, "spark")


# ---------------------------------------------------------------------------------------------
# Random expressions: row compiler vs DuckDB vs Spark
# ---------------------------------------------------------------------------------------------

INTEGER, BIGINT, DOUBLE, BOOLEAN, VARCHAR, NULL = (
    DataType.INTEGER,
    DataType.BIGINT,
    DataType.DOUBLE,
    DataType.BOOLEAN,
    DataType.VARCHAR,
    DataType.NULL,
)
NUMERIC = (INTEGER, BIGINT, DOUBLE)

#: The expression table: a row id, then columns with NULLs, zeros, -0.0, ties and halves.
EXPR_SCHEMA = Schema(
    (
        Field("rid", BIGINT),
        Field("i0", INTEGER),
        Field("i1", INTEGER),
        Field("b0", BIGINT),
        Field("d0", DOUBLE),
        Field("d1", DOUBLE),
        Field("z", BOOLEAN),
        Field("s", VARCHAR),
    )
)
EXPR_ROWS: Rows = [
    (0, 0, 3, 10, 2.5, 0.0, True, "a"),
    (1, 1, 0, -3, -2.5, 2.0, False, ""),
    (2, -1, 2, 0, 0.0, -1.5, None, None),
    (3, 2, None, 4, 0.5, None, True, "it's"),
    (4, -7, 2, None, -0.5, 0.1, False, "b\\c"),
    (5, 3, -3, 1, 1.25, 3.0, None, "é"),
    (6, None, 4, 2, None, 1.0, True, "a"),
    (7, 5, 0, -9, 3.75, -0.0, True, "'; --"),
    (8, 0, 1, 0, 10.0, 0.0, False, "b"),
    (9, 100, 7, 3, -1.5, 2.5, None, "A"),
    (10, -100, 7, 5, 0.125, -4.0, True, "z"),
    (11, 7, -5, 6, 2.675, 0.3, False, "a"),
    (12, 4, 4, 7, 1.005, -0.5, True, "b"),
]
EXPR_NULLS = [True] * len(EXPR_SCHEMA)
COLUMNS = {
    t: [i for i, f in enumerate(EXPR_SCHEMA) if f.dtype == t and i > 0]
    for t in (INTEGER, BIGINT, DOUBLE, BOOLEAN, VARCHAR)
}
LITERALS: dict[DataType, list[Any]] = {
    INTEGER: [0, 1, -2, 7],
    BIGINT: [0, 1, -1, 2, 3, -7, 100],
    DOUBLE: [0.0, -0.0, 0.5, -2.5, 2.675, 1.005, 0.1, 3.0, 0.001, 1e300],
    BOOLEAN: [True, False],
    VARCHAR: ["a", "", "it's", "b\\c", "é"],
}


def _unify(types: Sequence[DataType]) -> DataType | None:
    known = [t for t in types if t is not NULL]
    if not known:
        return NULL
    if all(t == known[0] for t in known):
        return known[0]
    if all(t.is_numeric for t in known):
        out = known[0]
        for t in known[1:]:
            out = common_numeric(out, t)
        return out
    return None


@st.composite
def leaf(draw: st.DrawFn, t: DataType) -> Expr:
    if draw(st.integers(0, 9)) == 0:
        return Literal(None, NULL)
    if COLUMNS.get(t) and draw(st.booleans()):
        i = draw(st.sampled_from(COLUMNS[t]))
        return ColumnRef(i, EXPR_SCHEMA[i].name, t)
    return Literal(draw(st.sampled_from(LITERALS[t])), t)


def _numeric_with(draw: st.DrawFn, t: DataType, n: int) -> list[DataType]:
    """``n`` operand types whose unification is ``t`` (numeric ``t``)."""
    pool = {INTEGER: [INTEGER], BIGINT: [INTEGER, BIGINT], DOUBLE: [INTEGER, BIGINT, DOUBLE]}[t]
    types = [draw(st.sampled_from(pool)) for _ in range(n)]
    types[draw(st.integers(0, n - 1))] = t
    return types


@st.composite
def typed_expr(draw: st.DrawFn, t: DataType, depth: int) -> Expr:
    """A random expression whose type is ``t`` (or NULL, when NULL literals decide it)."""
    if depth <= 0 or draw(st.integers(0, 4)) == 0:
        return draw(leaf(t))

    def sub(u: DataType) -> Expr:
        return draw(typed_expr(u, depth - 1))

    if t is BOOLEAN:
        kind = draw(
            st.sampled_from(["cmp", "cmp", "and", "or", "not", "null", "case", "cast", "text"])
        )
        if kind == "text":
            name = draw(st.sampled_from(["STARTS_WITH", "ENDS_WITH", "CONTAINS"]))
            return Func(name, (sub(VARCHAR), sub(VARCHAR)), BOOLEAN)
        if kind == "cmp":
            a = draw(st.sampled_from([INTEGER, BIGINT, DOUBLE, DOUBLE, VARCHAR, BOOLEAN]))
            b = draw(st.sampled_from(NUMERIC)) if a.is_numeric else a
            op = draw(st.sampled_from(sorted(COMPARISONS)))
            return Binary(op, sub(a), sub(b), BOOLEAN)
        if kind in ("and", "or"):
            return Binary(kind.upper(), sub(BOOLEAN), sub(BOOLEAN), BOOLEAN)
        if kind == "not":
            return Unary("NOT", sub(BOOLEAN), BOOLEAN)
        if kind == "null":
            op = draw(st.sampled_from(["IS NULL", "IS NOT NULL"]))
            return Unary(
                op, sub(draw(st.sampled_from([INTEGER, DOUBLE, BOOLEAN, VARCHAR]))), BOOLEAN
            )
        if kind == "cast":
            return Cast(sub(draw(st.sampled_from([INTEGER, BIGINT, DOUBLE]))), BOOLEAN)
    if t is VARCHAR:
        kind = draw(
            st.sampled_from(["case", "coalesce", "cast", "concat", "pipe", "substring", "trim"])
            | st.sampled_from(["replace", "pad", "case_map"])
        )
        if kind == "coalesce":
            texts = (sub(VARCHAR), sub(VARCHAR))
            return Func("COALESCE", texts, _unify([a.dtype for a in texts]) or VARCHAR)
        if kind == "cast":
            return Cast(sub(draw(st.sampled_from([INTEGER, BIGINT, BOOLEAN]))), VARCHAR)
        if kind in ("concat", "pipe"):
            n = draw(st.integers(1, 3)) if kind == "concat" else 2
            return Func(
                "CONCAT" if kind == "concat" else "||",
                tuple(sub(VARCHAR) for _ in range(n)),
                VARCHAR,
            )
        if kind == "substring":
            positions = tuple(
                sub(draw(st.sampled_from([INTEGER, BIGINT])))
                for _ in range(draw(st.integers(1, 2)))
            )
            return Func("SUBSTRING", (sub(VARCHAR), *positions), VARCHAR)
        if kind == "trim":
            name = draw(st.sampled_from(["TRIM", "LTRIM", "RTRIM"]))
            chars = (sub(VARCHAR),) if draw(st.booleans()) else ()
            return Func(name, (sub(VARCHAR), *chars), VARCHAR)
        if kind == "replace":
            return Func("REPLACE", (sub(VARCHAR), sub(VARCHAR), sub(VARCHAR)), VARCHAR)
        if kind == "case_map":  # DuckDB and the row engine (not Spark's or DataFusion's)
            return Func(draw(st.sampled_from(["UPPER", "LOWER"])), (sub(VARCHAR),), VARCHAR)
        if kind == "pad":  # a short length (an INTEGER, as DuckDB wants) and a literal padding
            count = Cast(Binary("%", sub(INTEGER), Literal(9, BIGINT), BIGINT), INTEGER)
            fill = Literal(draw(st.sampled_from(["*", "ab", "é"])), VARCHAR)
            return Func(
                draw(st.sampled_from(["LPAD", "RPAD"])), (sub(VARCHAR), count, fill), VARCHAR
            )
    if t in NUMERIC:
        kinds = ["neg", "abs", "floor", "ceil", "least", "greatest", "coalesce", "case", "cast"]
        if t is not INTEGER:
            kinds += ["arith", "arith", "arith", "mod", "mod"]
        if t is DOUBLE:
            kinds += ["div", "div", "div", "round", "round", "math", "math", "power"]
        if t is INTEGER:
            kinds += ["sign"]
        if t is BIGINT:
            kinds += ["length"]
        kind = draw(st.sampled_from(kinds))
        if kind == "math":
            name = draw(st.sampled_from(["SQRT", "EXP", "LN", "LOG10", "LOG2"]))
            return Func(name, (sub(draw(st.sampled_from(NUMERIC))),), DOUBLE)
        if kind == "power":
            args = (sub(draw(st.sampled_from(NUMERIC))), sub(draw(st.sampled_from(NUMERIC))))
            return Func("POWER", args, DOUBLE)
        if kind == "sign":
            return Func("SIGN", (sub(draw(st.sampled_from(NUMERIC))),), INTEGER)
        if kind == "length":
            return Func("LENGTH", (sub(VARCHAR),), BIGINT)
        if kind == "arith":
            a, b = _numeric_with(draw, t, 2)
            op = draw(st.sampled_from(["+", "-", "*"]))
            left, right = sub(a), sub(b)
            return Binary(op, left, right, arithmetic_result(op, left.dtype, right.dtype))
        if kind == "mod":
            a, b = _numeric_with(draw, t, 2)
            left, right = sub(a), sub(b)
            return Binary("%", left, right, arithmetic_result("%", left.dtype, right.dtype))
        if kind == "div":
            return Binary(
                "/",
                sub(draw(st.sampled_from(NUMERIC))),
                sub(draw(st.sampled_from(NUMERIC))),
                DOUBLE,
            )
        if kind in ("neg", "abs", "floor", "ceil"):
            x = sub(t)
            if kind == "neg":
                return Unary("NEG", x, x.dtype)
            if kind in ("floor", "ceil") and t is not DOUBLE:
                kind = "abs"  # FLOOR/CEIL are DOUBLE (optimizer/ir/functions.py): type t needed
            return Func(kind.upper(), (x,), DOUBLE if kind in ("floor", "ceil") else x.dtype)
        if kind == "round":
            digits = draw(st.sampled_from([0, 0, 1, 2, -1]))
            x = sub(draw(st.sampled_from(NUMERIC)))
            if digits or draw(st.booleans()):
                return Func("ROUND", (x, Literal(digits, BIGINT)), DOUBLE)
            return Func("ROUND", (x,), DOUBLE)
        if kind in ("least", "greatest", "coalesce"):
            n = draw(st.integers(1 if kind != "coalesce" else 2, 3))
            args = tuple(sub(u) for u in _numeric_with(draw, t, n))
            return Func(kind.upper(), args, _unify([a.dtype for a in args]) or t)
        if kind == "cast":
            src = draw(st.sampled_from([u for u in (INTEGER, BIGINT, DOUBLE, BOOLEAN) if u != t]))
            return Cast(sub(src), t)
    # CASE (any type)
    whens = tuple((sub(BOOLEAN), sub(t)) for _ in range(draw(st.integers(1, 2))))
    default = sub(t) if draw(st.booleans()) else Literal(None, NULL)
    dtype = _unify([v.dtype for _, v in whens] + [default.dtype])
    return Case(whens, default, dtype if dtype is not None else t)


expressions = st.sampled_from([BOOLEAN, INTEGER, BIGINT, DOUBLE, DOUBLE, VARCHAR]).flatmap(
    lambda t: typed_expr(t, 3)
)


def expression_plan(exprs: Sequence[Expr]) -> LogicalPlan:
    """window -> project(rid, exprs...) -> rstream -> sink, over the expression table."""
    b = PlanBuilder()
    src = b.add(lambda i: Source(i, EXPR_SCHEMA, "t", 0, "s"))
    win = b.add(
        lambda i: Window(i, EXPR_SCHEMA, WindowKind.UNBOUNDED, None, 1, False, 0, "s", "UNBOUNDED"),
        src,
    )
    items = (ColumnRef(0, "rid", BIGINT), *exprs)
    schema = Schema(tuple(Field(f"e{k}", e.dtype) for k, e in enumerate(items)))
    prj = b.add(lambda i: Project(i, schema, items), win)
    out = b.add(lambda i: R2S(i, schema, StreamMode.RSTREAM), prj)
    return b.build(b.add(lambda i: Sink(i, schema), out))


EXPR_INPUT = arrow_relation(EXPR_ROWS, EXPR_SCHEMA)


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        if math.isinf(fa) or math.isinf(fb):
            return fa == fb
        return math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)


def _column(table: pa.Table, k: int) -> list[Any]:
    order = table.column("c0").to_pylist()
    values = table.column(f"c{k}").to_pylist()
    return [v for _, v in sorted(zip(order, values, strict=True))]


def row_values(e: Expr) -> list[Any]:
    return [r[0] for r in compile_map([e], EXPR_NULLS)(EXPR_ROWS)]


def duckdb_values(e: Expr) -> list[Any] | None:
    """DuckDB's values of ``e`` per row, or None when DuckDB refuses the values (an integer
    overflow, a CAST of NaN or infinity to an integer). Any other error (SQL that does not
    parse or bind, an internal error) fails the test: the generated SQL must be valid."""
    g = group_sql(expression_plan([e]), ["project1"], "duckdb")
    try:
        return _column(run_duckdb(g.sql, {"in0": EXPR_INPUT}), 1)
    except (duckdb.OutOfRangeException, duckdb.ConversionException):
        return None


def c_round(y: float) -> float:
    """C's round: half away from zero, exact (no floor(y + 0.5) double rounding)."""
    if not math.isfinite(y):
        return y
    a = abs(y)
    f = math.floor(a)
    return math.copysign(float(f + 1 if a - f >= 0.5 else f), y)


def duckdb_round(x: float, n: int) -> float:
    """DuckDB's ROUND of a DOUBLE (RoundOperatorPrecision)."""
    scale = 10.0 ** abs(n)
    r = c_round(x * scale) / scale if n >= 0 else c_round(x / scale) * scale
    return r if math.isfinite(r) else x


def portable(e: Expr, dialect: str) -> bool:
    """Whether the engine computes every function of ``e`` as DuckDB does (UPPER and LOWER
    are left out of Spark's and DataFusion's capabilities: never placed there)."""
    from engines.sqlgen import get_dialect

    missing = get_dialect(dialect).unsupported_functions()
    return not any(isinstance(n, Func) and n.name in missing for n in e.walk())


def check_against_row(e: Expr, sql_values: list[Any]) -> str | None:
    """Compare the SQL values with the row compiler's; returns a skip reason or None."""
    try:
        expected = row_values(e)
    except UnsupportedError:
        return "not supported by the row engine"
    assert all(_same(a, b) for a, b in zip(sql_values, expected, strict=True)), (
        f"{e.display()}\n  SQL: {sql_values}\n  row: {expected}"
    )
    return None


EXPR_SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(EXPR_SETTINGS, max_examples=300)
@given(expressions)
def test_expressions_duckdb_vs_row(e: Expr) -> None:
    got = duckdb_values(e)
    if got is None:
        return  # DuckDB raised (overflow, CAST of NaN/inf to an integer): nothing to compare
    check_against_row(e, got)


@pytest.mark.spark
@settings(EXPR_SETTINGS, max_examples=25)
@given(st.lists(expressions, min_size=4, max_size=8))
def test_expressions_spark_vs_duckdb_vs_row(spark: Any, exprs: list[Expr]) -> None:
    ok = []
    for e in exprs:
        if not portable(e, "spark"):
            continue
        got = duckdb_values(e)
        if got is not None:
            ok.append((e, got))
            check_against_row(e, got)
    if not ok:
        return
    g = group_sql(expression_plan([e for e, _ in ok]), ["project1"], "spark")
    table = run_spark(spark, g.sql, {"in0": EXPR_INPUT})
    for k, (e, want) in enumerate(ok, start=1):
        got = _column(table, k)
        assert all(_same(a, b) for a, b in zip(got, want, strict=True)), (
            f"{e.display()}\n  Spark:  {got}\n  DuckDB: {want}\n  SQL: {g.sql}"
        )


@settings(EXPR_SETTINGS, max_examples=60)
@given(st.lists(expressions, min_size=4, max_size=8))
def test_expressions_datafusion_vs_duckdb_vs_row(datafusion: Any, exprs: list[Expr]) -> None:
    """DataFusion's values equal DuckDB's (the reference; DuckDB against the row engine is
    the test above); where DuckDB raises (an overflow, CAST of NaN to an integer),
    DataFusion must raise the same data error."""
    ok = []
    for e in exprs:
        if not portable(e, "datafusion"):
            continue
        got = duckdb_values(e)
        g = group_sql(expression_plan([e]), ["project1"], "datafusion")
        if got is None:
            with pytest.raises(QueryDataError):
                run_datafusion(datafusion, g.sql, {"in0": EXPR_INPUT})
            continue
        ok.append((e, got))  # DuckDB against the row engine: the test above
    if not ok:
        return
    g = group_sql(expression_plan([e for e, _ in ok]), ["project1"], "datafusion")
    table = run_datafusion(datafusion, g.sql, {"in0": EXPR_INPUT})
    for k, (e, want) in enumerate(ok, start=1):
        got = _column(table, k)
        assert all(_same(a, b) for a, b in zip(got, want, strict=True)), (
            f"{e.display()}\n  DataFusion: {got}\n  DuckDB: {want}\n  SQL: {g.sql}"
        )


# ---------------------------------------------------------------------------------------------
# Hostile string literals on Spark (DuckDB: tests/unit/engines/sqlgen/test_sqlgen.py)
# ---------------------------------------------------------------------------------------------

HOSTILE = [
    "it's",
    "'; DROP TABLE x; --",
    "back\\slash",
    "\\'",
    "trailing\\",
    "\\\\",
    "new\nline",
    "tab\tand\r\ncrlf",
    "unicode é ü 日本 🎉",
    '"double" `tick`',
    "$$ /* c */ %_",
    "\\n \\u0041 \\0",
    "nul\x00byte",
    "",
]


def _engine_runner(request: pytest.FixtureRequest, engine: str) -> Callable[..., pa.Table]:
    """``run(sql, tables)`` on Spark or DataFusion (their shared session fixtures)."""
    session = request.getfixturevalue(engine)
    runner = run_spark if engine == "spark" else run_datafusion
    return lambda sql, tables: runner(session, sql, tables)


ENGINES = [pytest.param("spark", marks=pytest.mark.spark), "datafusion"]


@pytest.mark.parametrize("engine", ENGINES)
def test_hostile_string_literals(request: pytest.FixtureRequest, engine: str) -> None:
    """One select on ``s = <hostile text> OR n = 99``, projecting ``s = <text>`` and the text
    itself for every hostile text: the rows and values are exactly the row engine's."""
    schema = Schema((Field("s", VARCHAR), Field("n", BIGINT)))
    rows: Rows = [(s, k) for k, s in enumerate(HOSTILE)] + [("plain", 99), (None, 100)]
    s_col, n_col = ColumnRef(0, "s", VARCHAR), ColumnRef(1, "n", BIGINT)
    pred = Binary(
        "OR",
        Binary("=", s_col, Literal(HOSTILE[1], VARCHAR), BOOLEAN),
        Binary("=", n_col, Literal(99, BIGINT), BOOLEAN),
        BOOLEAN,
    )
    exprs: list[Expr] = [n_col]
    for text in HOSTILE:
        exprs += [Binary("=", s_col, Literal(text, VARCHAR), BOOLEAN), Literal(text, VARCHAR)]
    out = Schema(tuple(Field(f"e{k}", e.dtype) for k, e in enumerate(exprs)))
    b = PlanBuilder()
    src = b.add(lambda i: Source(i, schema, "t", 1, "s"))
    win = b.add(
        lambda i: Window(i, schema, WindowKind.UNBOUNDED, None, 1, False, 1, "s", "UNBOUNDED"),
        src,
    )
    sel = b.add(lambda i: Select(i, schema, pred), win)
    prj = b.add(lambda i: Project(i, out, tuple(exprs)), sel)
    r2s = b.add(lambda i: R2S(i, out, StreamMode.RSTREAM), prj)
    plan = b.build(b.add(lambda i: Sink(i, out), r2s))
    expected = compile_map(exprs, [True, True])(compile_filter(pred, [True, True])(rows))
    run = _engine_runner(request, engine)
    got = run(group_sql(plan, [sel, prj], engine).sql, {"in0": arrow_relation(rows, schema)})
    assert sorted(zip(*(c.to_pylist() for c in got.columns), strict=True)) == sorted(expected)
    assert len(expected) == 2 and sum(v is True for r in expected for v in r) == 1


# ---------------------------------------------------------------------------------------------
# Special values on Spark: the dialect rewrites against DuckDB, zeros' signs included
# ---------------------------------------------------------------------------------------------

SPECIAL_SCHEMA = Schema(
    (
        Field("rid", BIGINT),
        Field("x", DOUBLE),
        Field("y", DOUBLE),
        Field("w", DOUBLE),
        Field("i", INTEGER),
        Field("j", BIGINT),
    )
)
_X = [2.5, -2.5, 0.5, -0.5, -0.4, 0.0, -0.0, 2.675, 1.005, 0.49999999999999994]
_X += [4503599627370497.0, 1e20, -1e20, 1e300, -1e300, math.nan, math.inf, -math.inf, None]
_X += [15.0, 25.0, -0.001, 1.7976931348623157e308, 123.456]
_Y = [0.0, -0.0, 2.0, -3.0, math.inf, math.nan, None, 0.5]
_W = [2.5, 3.5, -2.5, -3.5, 0.5, -0.5, 1e9, -0.49999999999999994, 7.0, None]
_I = [5, -7, 7, 0, None, -2147483647, 2147483647]
_J = [0, 3, -3, 2, None, -1, 1]
SPECIAL_ROWS: Rows = [
    (k, _X[k % len(_X)], _Y[k % len(_Y)], _W[k % len(_W)], _I[k % len(_I)], _J[k % len(_J)])
    for k in range(56)
]


def _special_exprs() -> list[Expr]:
    x, y, w = (ColumnRef(n, SPECIAL_SCHEMA[n].name, DOUBLE) for n in (1, 2, 3))
    i, j = ColumnRef(4, "i", INTEGER), ColumnRef(5, "j", BIGINT)
    one = Literal(1, BIGINT)

    def f(name: str, *args: Expr) -> Func:
        return Func(name, args, DOUBLE)

    def div(a: Expr, b: Expr) -> Binary:
        return Binary("/", a, b, DOUBLE)

    return [
        div(x, y),
        div(y, x),
        div(i, j),
        div(x, Literal(0.0, DOUBLE)),
        div(x, Literal(-0.0, DOUBLE)),
        div(i, Literal(0, BIGINT)),
        Binary("%", x, y, DOUBLE),
        Binary("%", x, Literal(0.0, DOUBLE), DOUBLE),
        Binary("%", i, j, BIGINT),
        Binary("%", j, Literal(0, BIGINT), BIGINT),
        f("FLOOR", x),
        f("CEIL", x),
        div(one, f("FLOOR", x)),
        div(one, f("CEIL", x)),
        f("ROUND", x),
        f("ROUND", x, Literal(1, BIGINT)),
        f("ROUND", x, Literal(2, BIGINT)),
        f("ROUND", x, Literal(-1, BIGINT)),
        f("ROUND", x, Literal(-2, BIGINT)),
        f("ROUND", x, Literal(-308, BIGINT)),
        div(one, f("ROUND", x)),
        div(one, f("ROUND", x, Literal(1, BIGINT))),
        f("ROUND", i, Literal(-1, BIGINT)),
        Cast(w, INTEGER),
        Cast(w, BIGINT),
        Cast(Func("ROUND", (w,), DOUBLE), BIGINT),
        Func("LEAST", (x, y), DOUBLE),
        Func("GREATEST", (x, Literal(None, NULL), y), DOUBLE),
        Func("ABS", (i,), INTEGER),
        Unary("NEG", i, INTEGER),
        Unary("NEG", x, DOUBLE),
        Binary("*", i, i, BIGINT),
        Binary("=", x, y, BOOLEAN),
        Binary("<", x, y, BOOLEAN),
    ]


def _exactly_same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("engine", ENGINES)
def test_special_values_match_duckdb_exactly(request: pytest.FixtureRequest, engine: str) -> None:
    exprs = _special_exprs()
    b = PlanBuilder()
    src = b.add(lambda i: Source(i, SPECIAL_SCHEMA, "t", 0, "s"))
    win = b.add(
        lambda i: Window(
            i, SPECIAL_SCHEMA, WindowKind.UNBOUNDED, None, 1, False, 0, "s", "UNBOUNDED"
        ),
        src,
    )
    items = (ColumnRef(0, "rid", BIGINT), *exprs)
    schema = Schema(tuple(Field(f"e{k}", e.dtype) for k, e in enumerate(items)))
    prj = b.add(lambda i: Project(i, schema, items), win)
    out = b.add(lambda i: R2S(i, schema, StreamMode.RSTREAM), prj)
    plan = b.build(b.add(lambda i: Sink(i, schema), out))
    table = {"in0": arrow_relation(SPECIAL_ROWS, SPECIAL_SCHEMA)}
    want = run_duckdb(group_sql(plan, [prj], "duckdb").sql, table)
    got = _engine_runner(request, engine)(group_sql(plan, [prj], engine).sql, table)
    problems = []
    for k, e in enumerate(exprs, start=1):
        for rid, a, d in zip(_column(got, 0), _column(got, k), _column(want, k), strict=True):
            if not _exactly_same(a, d):
                problems.append(
                    f"{e.display()} at x,y,w,i,j={SPECIAL_ROWS[rid][1:]}: {engine} {a!r}, "
                    f"DuckDB {d!r}"
                )
    assert not problems, "\n".join(problems[:20])


def _round_inputs() -> list[float]:
    """Doubles whose scaled value x * 10^n lands on, next to, or is exactly a half, for
    n = 1..3, plus random magnitudes: DuckDB (2.0.1 and later) resolves a product that is a
    tie only in doubles (2.675 * 100 = 267.5) by the exact product (ROUND(2.675, 2) = 2.67)."""
    rng = random.Random(5)
    xs = [2.675, 1.005, 0.285, 20.65, -20.65, 0.125, -0.125, 0.005, -0.005, 5e-324, 1e300]
    for _ in range(400):
        n = rng.randint(1, 3)
        base = (rng.randint(-(10**6), 10**6) + 0.5) / 10**n
        for step in (-2, -1, 0, 1, 2):
            y = base
            for _ in range(abs(step)):
                y = math.nextafter(y, math.inf if step > 0 else -math.inf)
            xs.append(y)
    xs += [rng.uniform(-1e6, 1e6) for _ in range(200)]
    return xs


ROUND_DIGITS = (1, 2, 3, 5, 10, 22, 25)


def _round_plan() -> tuple[Any, Any, Schema]:
    schema = Schema((Field("rid", BIGINT), Field("x", DOUBLE)))
    x = ColumnRef(1, "x", DOUBLE)
    rounds = [Func("ROUND", (x, Literal(n, BIGINT)), DOUBLE) for n in ROUND_DIGITS]
    items = (ColumnRef(0, "rid", BIGINT), *rounds)
    out_schema = Schema(tuple(Field(f"e{k}", e.dtype) for k, e in enumerate(items)))
    b = PlanBuilder()
    src = b.add(lambda i: Source(i, schema, "t", 0, "s"))
    win = b.add(
        lambda i: Window(i, schema, WindowKind.UNBOUNDED, None, 1, False, 0, "s", "UNBOUNDED"),
        src,
    )
    prj = b.add(lambda i: Project(i, out_schema, items), win)
    r2s = b.add(lambda i: R2S(i, out_schema, StreamMode.RSTREAM), prj)
    plan = b.build(b.add(lambda i: Sink(i, out_schema), r2s))
    return plan, prj, schema


@pytest.mark.parametrize("engine", ["row", *ENGINES])
def test_round_ties_match_duckdb(request: pytest.FixtureRequest, engine: str) -> None:
    """ROUND(x, n > 0) on tie-adjacent doubles equals DuckDB's bit for bit on every engine."""
    xs = _round_inputs()
    plan, prj, schema = _round_plan()
    rows: Rows = [(k, x) for k, x in enumerate(xs)]
    table = {"in0": arrow_relation(rows, schema)}
    want = run_duckdb(group_sql(plan, [prj], "duckdb").sql, table)
    if engine == "row":
        op = plan.op(prj)
        assert isinstance(op, Project)
        got_rows = compile_map(list(op.exprs), [False, False])(rows)
        got = pa.table({f"c{k}": [r[k] for r in got_rows] for k in range(len(ROUND_DIGITS) + 1)})
    else:
        got = _engine_runner(request, engine)(group_sql(plan, [prj], engine).sql, table)
    problems = []
    for k, n in enumerate(ROUND_DIGITS, start=1):
        for rid, a, d in zip(_column(got, 0), _column(got, k), _column(want, k), strict=True):
            if not _exactly_same(a, d):
                problems.append(f"ROUND({xs[rid]!r}, {n}): {engine} {a!r}, DuckDB {d!r}")
    assert not problems, f"{len(problems)} differ:\n" + "\n".join(problems[:20])

"""Deeply nested expressions: the binder accepts at most ``MAX_DEPTH`` levels, and everything
it accepts runs on every engine (the row engine compiles Python source and DuckDB/Spark get
sqlglot-generated SQL, both recursive; Python nests about 200 levels at most). Deeper queries
are a positioned user error, never a RecursionError or SyntaxError (exit 1).

Long expressions are not deep: CASEs of any number of WHENs (a lookup table written as
CASE), COALESCEs of any number of arguments, AND / OR chains and IN lists of thousands of
terms run on every engine, in selects, aggregates' arguments, GROUP BY, HAVING and WHERE
(the row engine's generated Python stays flat: tests/unit/engines/row/test_flat_codegen.py)."""

from __future__ import annotations

import functools
from pathlib import Path

import pyarrow as pa
import pytest
import sqlglot

from engines.sqlgen import group_sql
from hycq.api import LoadedQuery, execute, explain, resolve_placement
from optimizer.ir.errors import UnsupportedError
from optimizer.ir.placement import groups
from optimizer.sql import plan_query
from optimizer.sql.bind import MAX_DEPTH
from optimizer.sql.catalog import load_catalog
from tests.datagen import small_smartplug
from tests.engines import COLUMNAR, placement_of
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")


def deep_query(terms: int) -> str:
    """A left-deep ``+`` chain in SELECT and a left-deep ``OR`` chain in WHERE."""
    total = " + ".join(f"value * {k}" for k in range(terms))
    cond = " OR ".join(f"value > {k}" for k in range(terms))
    return f"SELECT plug_id, {total} AS x\nFROM readings [RANGE 2 SECONDS]\nWHERE {cond}\n"


def deepest_accepted() -> int:
    terms = 1
    while True:
        try:
            plan_query(deep_query(terms + 1), CATALOG)
        except UnsupportedError:
            return terms
        terms += 1


def test_the_deepest_accepted_query_runs_on_every_engine() -> None:
    terms = deepest_accepted()
    assert terms >= MAX_DEPTH - 10
    text = deep_query(terms)
    plan = plan_query(text, CATALOG)
    data = small_smartplug(3, seed=3, rate=20.0)
    expected = oracle(text, CATALOG, {"readings": data})
    assert expected.num_rows > 0
    for placement in ("row", "column"):
        got = execute(plan, CATALOG, {"readings": data}, placement)
        assert_same_stream(got.table, expected, rel=1e-6)
    explain(LoadedQuery(text, "deep.sql", CATALOG, plan, 0.0))
    spark = list(groups(plan, resolve_placement(plan, "column", "spark")))
    assert spark and all(g.engine == "spark" for g in spark)
    for g in spark:  # Spark SQL is generated (not run: no JVM here) without recursion errors
        assert group_sql(plan, g.operators, "spark").sql


@pytest.mark.parametrize("terms", [MAX_DEPTH + 10, 1000, 5000])
def test_deeper_queries_are_positioned_user_errors(terms: int) -> None:
    text = deep_query(terms)
    with pytest.raises(UnsupportedError, match=r"nested too deeply \(\d+ levels; at most") as err:
        plan_query(text, CATALOG, "deep.sql")
    # The deepest expression is the + chain (one level more per term): it is underlined
    # whole. The OR chain is as long but not deep (bound flat, compiled balanced).
    assert (err.value.line, err.value.col) == (1, len("SELECT plug_id, ") + 1)
    assert err.value.render().startswith("error: deep.sql:1:17: the query is nested too deeply")


# -- long, not deep: CASE lists, COALESCE arguments, AND / OR chains, IN lists -------------

#: WHENs and arguments of the long expressions (a lookup table written as CASE).
LONG = 300


def long_case(n: int = LONG) -> str:
    """A CASE of ``n`` WHENs over ``id`` (1..60 here) whose matching WHENs lie at the end
    (``id + i = n``) and in the middle (every 7th compares ``value``); ELSE -1."""
    whens = [
        f"WHEN value > {i / 10} THEN {i % 11}"
        if i % 7 == 3
        else f"WHEN id + {i} = {n} THEN {i % 13}"
        for i in range(n)
    ]
    return f"CASE {' '.join(whens)} ELSE -1 END"


def nullable_case(n: int = LONG) -> str:
    """A CASE of ``n`` WHENs without ELSE (NULL for most ids) and nullable conditions."""
    whens = [f"WHEN (CASE WHEN id > {i} THEN id END) = {n - i} THEN id * {i % 5}" for i in range(n)]
    return f"CASE {' '.join(whens)} END"


def long_chain(op: str, n: int = 2 * LONG) -> str:
    if op == "OR":  # true for the ids 1..60 at the chain's end (and 40 values past them)
        return " OR ".join(f"id = {n - i - 40}" for i in range(n))
    return " AND ".join(f"id <> {i if i % 500 == 7 else 3 * n + i}" for i in range(n))


def nullable_sum(terms: int) -> str:
    """A left-deep ``+`` chain over a nullable value: NULL-guarded code at every level."""
    return " + ".join(f"(CASE WHEN id > {k} THEN value END) * {k}" for k in range(terms))


LONG_QUERIES = {
    "case_select": f"SELECT id, {long_case()} AS c, {nullable_case()} AS d "
    "FROM readings [RANGE 2 SECONDS]",
    "case_aggregate": f"SELECT plug_id, SUM({long_case()}) AS s, MAX({nullable_case()}) AS m "
    "FROM readings [RANGE 3 SECONDS] GROUP BY plug_id",
    "case_group_by": f"SELECT {long_case(300)} AS c, COUNT(*) AS n FROM readings "
    f"[RANGE 3 SECONDS] GROUP BY {long_case(300)}",
    "case_having": "SELECT plug_id, COUNT(*) AS n FROM readings [RANGE 3 SECONDS] "
    f"GROUP BY plug_id HAVING SUM({long_case()}) > 2",
    "case_where": f"SELECT id, value FROM readings [RANGE 2 SECONDS] WHERE {long_case()} > 2",
    "coalesce": "SELECT id, COALESCE("
    + ", ".join(f"CASE WHEN id = {LONG - i} THEN {i} END" for i in range(LONG))
    + ", -1) AS c FROM readings [RANGE 2 SECONDS]",
    "or_chain": f"SELECT id, ({long_chain('OR')}) AS b FROM readings [RANGE 2 SECONDS] "
    f"WHERE {long_chain('OR')} OR value > 10",
    "and_chain": "SELECT plug_id, COUNT(*) AS n FROM readings [RANGE 2 SECONDS] "
    f"WHERE {long_chain('AND')} GROUP BY plug_id",
    "in_list": "SELECT plug_id, SUM(CASE WHEN id IN ("
    + ", ".join(str(5 * LONG - i) for i in range(5 * LONG))
    + ") THEN value END) AS s FROM readings [RANGE 2 SECONDS] GROUP BY plug_id",
}


@functools.cache
def _long_data(seconds: int = 4) -> pa.Table:
    return small_smartplug(seconds, seed=3, rate=15.0)


@functools.cache
def _expected(text: str, seconds: int = 4) -> pa.Table:
    out = oracle(text, CATALOG, {"readings": _long_data(seconds)})
    assert out.num_rows > 0
    return out


def _check(text: str, engine: str, seconds: int = 4) -> None:
    """The query on ``engine`` alone equals the oracle (over ``seconds`` of readings)."""
    placement, column_engine = placement_of(engine)
    plan = plan_query(text, CATALOG, "long.sql")
    data = {"readings": _long_data(seconds)}
    got = execute(plan, CATALOG, data, placement, column_engine=column_engine)
    assert_same_stream(got.table, _expected(text, seconds), rel=1e-6)


@pytest.mark.parametrize("name", sorted(LONG_QUERIES))
def test_long_expressions_run_on_every_engine(engine: str, name: str) -> None:
    """Long (not deep) expressions in selects, aggregates' arguments, GROUP BY, HAVING and
    WHERE: the row engine's generated Python stays flat (a CASE of 300 WHENs is not 300
    nested conditionals), and every engine's result is the oracle's."""
    _check(LONG_QUERIES[name], engine)


@functools.cache
def _deepest_nullable_terms() -> int:
    terms = 1
    while True:
        try:
            plan_query(f"SELECT id, {nullable_sum(terms + 1)} AS x FROM readings [NOW]", CATALOG)
        except UnsupportedError:
            return terms
        terms += 1


def test_deepest_nullable_expression_runs_on_every_engine(engine: str) -> None:
    """The deepest accepted ``+`` chain over a nullable value (NULL-guarded at each level:
    two levels of Python per level of the query, past Python's 200 when inline)."""
    terms = _deepest_nullable_terms()
    assert terms >= MAX_DEPTH // 2
    _check(f"SELECT id, {nullable_sum(terms)} AS x FROM readings [RANGE 2 SECONDS]", engine)


@pytest.mark.slow
def test_longer_expressions_plan_generate_and_run() -> None:
    """1,000 WHENs, a COALESCE of 1,000 arguments and OR and AND chains of 2,000 terms (IN
    lists of 10,000 items: tests/e2e/test_hostile_queries.py): parsed and bound without
    recursion errors, the row engine equals the oracle, and the SQL generated for every
    columnar engine parses back (sqlglot recurses through it) as one statement. (Running
    it costs DuckDB seconds per instant; the 300-WHEN cases above run on every engine.)"""
    big = 1000
    text = (
        f"SELECT plug_id, SUM({long_case(big)}) AS s, MAX(COALESCE("
        + ", ".join(f"CASE WHEN id = {big - i} THEN {i} END" for i in range(big))
        + ", -1)) AS c, COUNT(*) AS n FROM readings [RANGE 2 SECONDS] "
        f"WHERE ({long_chain('OR', 2 * big)}) AND ({long_chain('AND', 2 * big)}) "
        "GROUP BY plug_id"
    )
    _check(text, "row", seconds=2)
    plan = plan_query(text, CATALOG)
    for dialect in COLUMNAR:
        for g in groups(plan, resolve_placement(plan, "column", dialect)):
            if g.engine == dialect:
                sql = group_sql(plan, g.operators, dialect).sql
                assert len(sqlglot.parse(sql, read=dialect)) == 1

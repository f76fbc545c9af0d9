"""Deeply nested expressions: the binder accepts at most ``MAX_DEPTH`` levels, and everything
it accepts runs on every engine (the row engine compiles Python source and DuckDB/Spark get
sqlglot-generated SQL, both recursive; Python nests about 200 levels at most). Deeper queries
are a positioned user error, never a RecursionError or SyntaxError (exit 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engines.sqlgen import group_sql
from hycq.api import LoadedQuery, execute, explain, resolve_placement
from optimizer.ir.errors import UnsupportedError
from optimizer.ir.placement import groups
from optimizer.sql import plan_query
from optimizer.sql.bind import MAX_DEPTH
from optimizer.sql.catalog import load_catalog
from tests.datagen import small_smartplug
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

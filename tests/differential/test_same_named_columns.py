"""Queries whose relations carry two columns of one name, against the oracle on every engine.

A join's output holds the columns of both sides: ``ts, k, v, ts, k, v`` for a self-join or a
join of two streams of one shape (queries/keyed: r, s, t). Equating, grouping on or selecting
the same-named column of both sides (``l.ts = w.ts``, ``GROUP BY x.k, y.k``), and a key that
is also the stream's timestamp or an aggregate's argument (``GROUP BY ts``, ``MAX(k) ...
GROUP BY k``) must run, and equal the oracle, whatever runs it: the optimizer's statistics
pass over the samples (placement ``auto``), each engine alone (tests/engines.py), and mixed
placements of the row engine and DuckDB. Every Arrow table built on the way (samples' key
columns, MIG inputs and outputs, generated SQL, Arrow windows) names its columns uniquely.
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path

import pyarrow as pa
import pytest

from engines.sources.keyed import KeyedGenerator, KeyedStream
from hycq.api import execute
from hycq.planning import OptimizerOptions
from optimizer.ir.plan import Category
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.engines import placement_of
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "keyed" / "catalog.toml")

QUERIES = {
    "self_join_on_ts": "SELECT COUNT(*) AS n FROM r [RANGE 2 SECONDS] AS l, "
    "r [RANGE 2 SECONDS] AS w WHERE l.ts = w.ts",
    "two_streams_on_ts": "SELECT COUNT(*) AS n, SUM(a.v - b.v) AS d FROM r [RANGE 2 SECONDS] "
    "AS a, s [RANGE 3 SECONDS] AS b WHERE a.ts = b.ts",
    "join_on_key_and_ts": "SELECT l.k, COUNT(*) AS n FROM r [RANGE 3 SECONDS] AS l JOIN "
    "r [RANGE 2 SECONDS] AS w ON l.k = w.k AND l.ts = w.ts GROUP BY l.k",
    "group_by_both_keys": "SELECT x.k AS xk, y.k AS yk, COUNT(*) AS n FROM r [RANGE 2 SECONDS] "
    "AS x, r [RANGE 4 SECONDS] AS y WHERE x.k = y.k GROUP BY x.k, y.k",
    "group_by_both_ts": "SELECT x.ts, y.ts, MAX(x.v) AS m FROM r [RANGE 2 SECONDS] AS x, "
    "s [RANGE 2 SECONDS] AS y WHERE x.k = y.k GROUP BY x.ts, y.ts",
    "select_both_sides": "SELECT x.k, y.k, x.ts, y.ts, x.v, y.v FROM r [RANGE 2 SECONDS] AS x, "
    "s [RANGE 1 SECONDS] AS y WHERE x.k = y.k AND x.v < y.v",
    "three_streams": "SELECT x.k, y.k, z.k, COUNT(*) AS n FROM r [RANGE 2 SECONDS] AS x, "
    "s [RANGE 3 SECONDS] AS y, t [RANGE 2 SECONDS] AS z WHERE x.k = y.k AND y.k = z.k "
    "AND x.ts = z.ts GROUP BY x.k, y.k, z.k",
    "correlated_count": "SELECT a.k, COUNT(*) AS n FROM r [RANGE 4 SECONDS] AS a, "
    "(SELECT k, MAX(v) AS v FROM r [RANGE 4 SECONDS] GROUP BY k) AS m "
    "WHERE a.k = m.k AND a.v >= m.v GROUP BY a.k",
    "aggregates_of_both": "SELECT a.k, a.v, b.v FROM (SELECT k, SUM(v) AS v FROM r "
    "[RANGE 3 SECONDS] GROUP BY k) AS a, (SELECT k, MIN(v) AS v FROM s [RANGE 2 SECONDS] "
    "GROUP BY k) AS b WHERE a.k = b.k",
    "group_by_timestamp": "SELECT ts, COUNT(*) AS n FROM r [RANGE 3 SECONDS] GROUP BY ts",
    "key_is_argument": "SELECT k, MAX(k) AS m, MIN(ts) AS t0 FROM r [RANGE 3 SECONDS] "
    "GROUP BY k, ts",
}
SECONDS = 16


@functools.cache
def _data() -> dict[str, pa.Table]:
    return {n: KeyedGenerator(KeyedStream(n, rate=4, keys=3), seed=5).table(SECONDS) for n in "rst"}


@functools.cache
def _expected(name: str) -> pa.Table:
    out = oracle(QUERIES[name], CATALOG, _data())
    assert out.num_rows > 0
    return out


def _check(name: str, placement: str | dict[str, str], engine: str = "duckdb") -> None:
    plan = plan_query(QUERIES[name], CATALOG, f"{name}.sql")
    engines = ("row",) if engine == "row" else ("row", engine)
    result = execute(
        plan,
        CATALOG,
        dict(_data()),
        placement,
        column_engine="duckdb" if engine == "row" else engine,
        optimizer=OptimizerOptions(engines=engines),
    )
    assert_same_stream(result.table, _expected(name))
    assert result.dead_letter == 0


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_on_every_engine(engine: str, name: str) -> None:
    """The whole plan on the engine, then as the optimizer places it (statistics measured
    on the input tables) with the engine and the row engine to choose from."""
    placement, _ = placement_of(engine)
    _check(name, placement, engine)
    _check(name, "auto", engine)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_mixed_placement(name: str) -> None:
    """Every placement of the relational operators on the row engine and DuckDB that uses
    both (joins' and aggregates' outputs cross between the engines as Arrow tables)."""
    plan = plan_query(QUERIES[name], CATALOG)
    r2r = [i for i in plan.topological() if plan.op(i).category is Category.R2R]
    mixed = [c for c in itertools.product(("row", "duckdb"), repeat=len(r2r)) if len(set(c)) > 1]
    for combo in mixed:
        _check(name, dict(zip(r2r, combo, strict=True)))

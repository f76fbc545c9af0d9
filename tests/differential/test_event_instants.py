"""Event-driven instants: the row engine steps only where a window changes, results unchanged.

Windows without SLIDE over streams in milliseconds slide every millisecond; with a few tuples
a second almost every instant changes nothing. The clock (engines/row/clock.py) steps only
the instants where a tuple becomes visible or expires (or a pane leaves, or a tumbling
relation is replaced), and RSTREAM emits its unchanged relation at the others. Checked here:

* the result stream equals the oracle's (tests/oracle.py evaluates every instant from scratch)
  on the row engine and with every operator on DuckDB (Arrow windows + a MIG), over sparse
  ms streams: sliding, tumbling, hopping, NOW, ROWS and UNBOUNDED windows, several slides in
  one plan, panes, global aggregates (which answer over empty windows), joins of streams of
  different densities, ISTREAM / DSTREAM / RSTREAM;
* it is *identical* (same rows, same order, same ``_ts``) to the dense clock's, which steps
  every instant;
* the operators' ``steps`` (and a MIG's queries) follow the events, not the ticks.
"""

from __future__ import annotations

import functools
from typing import Any

import pyarrow as pa
import pytest

from engines.assembly import Assembly
from engines.row.executor import RowExecutor
from engines.sources.keyed import KeyedGenerator, KeyedStream
from hycq.api import execute
from optimizer.ir.catalog import Catalog
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text
from tests.oracle import assert_same_stream, oracle

CATALOG: Catalog = parse_catalog_text(
    "".join(
        f"""
[streams.{name}]
timestamp = "ts"
time_unit = "{unit}"
rate = 10
[streams.{name}.columns]
ts = "BIGINT"
k = "INTEGER"
v = "DOUBLE"
"""
        for name, unit in (("a", "ms"), ("b", "ms"), ("c", "s"))
    )
)

#: a: sparse (10 tuples/s over 1000 instants/s), b: denser (60/s), c: seconds, 2/s.
STREAMS = {
    "a": KeyedStream("a", rate=10, keys=3, time_unit="ms"),
    "b": KeyedStream("b", rate=60, keys=3, time_unit="ms", start=0.2),
    "c": KeyedStream("c", rate=2, keys=3, time_unit="s"),
}
#: The oracle evaluates every one of the 800 instants (about 4 ms each): a subset of the
#: queries runs against it; all run against the dense clock over a longer span.
ORACLE_SECONDS = 0.8
SECONDS = 3.0

QUERIES: dict[str, str] = {
    "sliding_istream": "SELECT ISTREAM k, v FROM a [RANGE 300 MILLISECONDS]",
    "sliding_dstream": "SELECT DSTREAM k, v FROM a [RANGE 300 MILLISECONDS]",
    "sliding_rstream": "SELECT RSTREAM k, v FROM a [RANGE 300 MILLISECONDS]",
    "panes_rstream": "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM a [RANGE 400 MILLISECONDS] "
    "GROUP BY k",
    "panes_istream": "SELECT ISTREAM k, MAX(v) AS m FROM b [RANGE 200 MILLISECONDS] GROUP BY k",
    "global_rstream": "SELECT COUNT(*) AS n, SUM(v) AS s FROM a [RANGE 150 MILLISECONDS]",
    "global_istream": "SELECT ISTREAM COUNT(*) AS n FROM a [RANGE 150 MILLISECONDS]",
    "tumbling_rstream": "SELECT k, SUM(v) AS s FROM a "
    "[RANGE 250 MILLISECONDS SLIDE 250 MILLISECONDS] GROUP BY k",
    "tumbling_dstream": "SELECT DSTREAM k, v FROM a "
    "[RANGE 250 MILLISECONDS SLIDE 250 MILLISECONDS]",
    "hopping_istream": "SELECT ISTREAM COUNT(*) AS n FROM b "
    "[RANGE 50 MILLISECONDS SLIDE 200 MILLISECONDS]",
    "now_istream": "SELECT ISTREAM k, v FROM a [NOW]",
    "now_rstream": "SELECT RSTREAM COUNT(*) AS n FROM a [NOW]",
    "rows_istream": "SELECT ISTREAM k, v FROM a [ROWS 3]",
    "rows_rstream": "SELECT RSTREAM MAX(v) AS m FROM a [ROWS 2]",
    "unbounded_rstream": "SELECT RSTREAM COUNT(*) AS n FROM a [UNBOUNDED]",
    "join_istream": "SELECT ISTREAM a.k, a.v, b.v AS bv FROM a [RANGE 400 MILLISECONDS] AS a, "
    "b [RANGE 100 MILLISECONDS] AS b WHERE a.k = b.k",
    "join_rstream": "SELECT RSTREAM a.k, COUNT(*) AS n FROM a [RANGE 300 MILLISECONDS] AS a, "
    "b [RANGE 60 MILLISECONDS] AS b WHERE a.k = b.k GROUP BY a.k",
    "two_slides": "SELECT ISTREAM a.k, COUNT(*) AS n "
    "FROM a [RANGE 1 SECOND SLIDE 200 MILLISECONDS] AS a, b [RANGE 300 MILLISECONDS] AS b "
    "WHERE a.k = b.k GROUP BY a.k",
    "two_units": "SELECT RSTREAM c.k, COUNT(*) AS n FROM c [RANGE 1 SECOND] AS c, "
    "a [RANGE 500 MILLISECONDS] AS a WHERE c.k = a.k GROUP BY c.k",
}


@functools.cache
def _data(seconds: float = SECONDS, seed: int = 3) -> dict[str, pa.Table]:
    return {n: KeyedGenerator(s, seed=seed).table(seconds) for n, s in STREAMS.items()}


def _inputs(query: str, seconds: float = SECONDS) -> dict[str, pa.Table]:
    plan = plan_query(QUERIES[query], CATALOG)
    used = {op.stream for op in plan.operators() if hasattr(op, "stream")}
    return {n: t for n, t in _data(seconds).items() if n in used}


#: The queries held to the oracle: one per kind of window, R2S and join shape.
ORACLE_QUERIES = [
    "panes_istream",
    "global_rstream",
    "tumbling_dstream",
    "hopping_istream",
    "now_rstream",
    "rows_istream",
    "join_istream",
    "two_slides",
]


@functools.cache
def _expected(query: str) -> pa.Table:
    return oracle(QUERIES[query], CATALOG, _inputs(query, ORACLE_SECONDS))


def _execute(query: str, placement: str = "row", seconds: float = SECONDS) -> Any:
    plan = plan_query(QUERIES[query], CATALOG)
    return execute(plan, CATALOG, _inputs(query, seconds), placement=placement)


def _dense(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every engine built from now on step every instant (the reference clock)."""

    def make_engine(self: Assembly, emit: Any, on_late: Any = None) -> RowExecutor:
        return RowExecutor(
            self.plan, emit, on_late, groups=self.groups, make_group=self.make_group, dense=True
        )

    monkeypatch.setattr(Assembly, "make_engine", make_engine)


@pytest.mark.parametrize("placement", ["row", "column"])
@pytest.mark.parametrize("query", ORACLE_QUERIES)
def test_equals_the_oracle(query: str, placement: str) -> None:
    result = _execute(query, placement, ORACLE_SECONDS)
    assert result.dead_letter == 0
    assert_same_stream(result.table, _expected(query))


@pytest.mark.parametrize("query", sorted(QUERIES))
def test_identical_to_the_dense_clock(query: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sparse = _execute(query)
    _dense(monkeypatch)
    dense = _execute(query)
    assert sparse.table.equals(dense.table)  # same rows, same order, same _ts
    assert sparse.metrics["results"] == dense.metrics["results"]
    r2s = [op for op in dense.metrics["operators"].values() if op["kind"].endswith("stream")]
    got = [op for op in sparse.metrics["operators"].values() if op["kind"].endswith("stream")]
    assert got[0]["tuples_out"] == r2s[0]["tuples_out"]  # RSTREAM counts its idle output


def _sparse_stream(seconds: int) -> dict[str, pa.Table]:
    """2 tuples a second over 1000 instants a second."""
    gen = KeyedGenerator(KeyedStream("a", rate=2, keys=3, time_unit="ms"), seed=5)
    return {"a": gen.table(seconds)}


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT ISTREAM k, COUNT(*) AS n FROM a [RANGE 500 MILLISECONDS] GROUP BY k",
        "SELECT ISTREAM a.k, b.v FROM a [RANGE 300 MILLISECONDS] AS a, "
        "a [RANGE 100 MILLISECONDS] AS b WHERE a.k = b.k",
        "SELECT RSTREAM k, v FROM a [RANGE 700 MILLISECONDS]",
    ],
)
def test_steps_follow_events_not_ticks(sql: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seconds = 60
    data = _sparse_stream(seconds)
    events = data["a"].num_rows  # 120 tuples over 60,000 instants
    plan = plan_query(sql, CATALOG)
    result = execute(plan, CATALOG, data)
    ops = result.metrics["operators"]
    # Each tuple changes a window twice (it enters and it leaves): every operator steps at
    # most twice per tuple and window, plus the first instant.
    windows = sum(op["kind"] == "window" for op in ops.values())
    for op in ops.values():
        if op["kind"] not in ("istream", "dstream", "rstream"):
            assert op["steps"] <= 2 * events * windows + 1, op
    assert max(op["steps"] for op in ops.values()) >= events // 2
    # The dense clock steps all 60,000 instants; the output is the same.
    _dense(monkeypatch)
    dense = execute(plan, CATALOG, data)
    assert min(op["steps"] for op in dense.metrics["operators"].values()) >= 1000 * (seconds - 1)
    assert result.table.equals(dense.table)


def test_mig_runs_its_query_only_when_an_input_changed() -> None:
    seconds = 30
    data = _sparse_stream(seconds)
    sql = "SELECT ISTREAM k, COUNT(*) AS n FROM a [RANGE 500 MILLISECONDS] GROUP BY k"
    result = execute(plan_query(sql, CATALOG), CATALOG, data, placement="column")
    (mig,) = result.extras["migs"]
    assert 0 < mig.stats.queries <= 2 * data["a"].num_rows + 1
    # The same stream as the row engine's (which the tests above hold to the oracle).
    assert_same_stream(result.table, execute(plan_query(sql, CATALOG), CATALOG, data).table)

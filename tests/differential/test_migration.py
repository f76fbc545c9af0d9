"""Live plan migration against the oracle: every run with migrations gives the result stream
of the query from scratch (tests/oracle.py, no migration), as bags per ``_ts``.

The generic strategies (GMS, GPT, GHM: engines/migration/generic.py) migrate between any two
plans of a query: other join orders of 2- and 3-way keyed joins, row <-> DuckDB, mixed
placements, DataFusion and Spark; aggregates with panes, MEDIAN (opaque), ISTREAM, DSTREAM and
RSTREAM outputs (no result repeated or lost at the switch); several migrations in one run,
also overlapping ones (a migration due while a GPT still runs waits for it); late tuples the
running plan rejected are not replayed. Hypothesis draws migration times and targets.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engines.migration import strategies
from engines.migration.request import MigrationRequest, ScheduledMigration
from engines.sources.keyed import KeyedGenerator, KeyedStream
from hycq.api import LoadedQuery, execute, resolve_placement
from hycq.migrations import plan_with_order
from optimizer.ir.errors import PlanError
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.lateness import dead_letter_count, without_late
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "keyed" / "catalog.toml")
SECONDS = 40

QUERIES = {
    "j2": (ROOT / "queries/keyed/j2.sql").read_text(),
    "j3": (ROOT / "queries/keyed/j3.sql").read_text(),
    "join_aggs": (ROOT / "queries/keyed/join_aggs.sql").read_text(),
    "istream": (ROOT / "queries/keyed/istream.sql").read_text(),
    "rstream": (ROOT / "queries/keyed/rstream.sql").read_text(),
    "theta": (ROOT / "queries/keyed/theta.sql").read_text(),
    "mixed_units": (ROOT / "queries/keyed/mixed_units.sql").read_text(),
    "dstream": "SELECT DSTREAM r.k, COUNT(*) AS pairs\n"
    "FROM r [RANGE 6 SECONDS SLIDE 1 SECOND] AS r, s [RANGE 4 SECONDS SLIDE 2 SECONDS] AS s\n"
    "WHERE r.k = s.k GROUP BY r.k",
    "median": "SELECT k, MEDIAN(v) AS med, COUNT(*) AS n\n"
    "FROM r [RANGE 8 SECONDS SLIDE 1 SECOND] GROUP BY k",
    "paned": "SELECT k, SUM(v) AS total, COUNT(*) AS n, MAX(v) AS top\n"
    "FROM s [RANGE 12 SECONDS SLIDE 2 SECONDS] GROUP BY k",
    "rows": "SELECT r.k, COUNT(*) AS n\n"
    "FROM r [ROWS 30] AS r, s [RANGE 5 SECONDS SLIDE 1 SECOND] AS s\n"
    "WHERE r.k = s.k GROUP BY r.k",
}


def _streams(seed: int, seconds: int = SECONDS) -> dict[str, pa.Table]:
    shapes = {
        "r": KeyedStream("r", rate=8, keys=12),
        "s": KeyedStream("s", rate=14, keys=12, start=3),
        "t": KeyedStream("t", rate=5, keys=12, silent=((15, 19),)),
        "m": KeyedStream("m", rate=9, keys=12, time_unit="ms", start=2),
    }
    return {n: KeyedGenerator(s, seed=seed).table(seconds) for n, s in shapes.items()}


@functools.cache
def _expected(query: str, seed: int = 3) -> pa.Table:
    return oracle(QUERIES[query], CATALOG, _streams(seed))


def _loaded(query: str) -> LoadedQuery:
    text = QUERIES[query]
    return LoadedQuery(text, f"{query}.sql", CATALOG, plan_query(text, CATALOG, query), 0.0)


def _target(
    query: str, order: str | None, placement: Any, engine: str = "duckdb"
) -> tuple[Any, dict[str, str]]:
    plan = plan_with_order(_loaded(query), order)
    if callable(placement):
        placement = placement(plan)
    return plan, resolve_placement(plan, placement, engine)


def _run(
    query: str,
    start: tuple[str | None, Any],
    steps: list[tuple[float, str | None, Any, str]],
    engine: str = "duckdb",
    seed: int = 3,
    data: dict[str, pa.Table] | None = None,
) -> Any:
    """Run ``query`` from plan ``start`` (join order, placement) with migrations ``steps``
    (AT seconds, join order, placement, strategy) and check it against the oracle."""
    plan, placement = _target(query, start[0], start[1], engine)
    schedule = []
    for at, order, where, strategy in steps:
        p, pl = _target(query, order, where, engine)
        schedule.append(ScheduledMigration(at, MigrationRequest(p, pl, strategy)))
    inputs = data if data is not None else _streams(seed)
    result = execute(
        plan, CATALOG, inputs, placement=placement, column_engine=engine, schedule=schedule
    )
    if data is None:
        assert_same_stream(result.table, _expected(query, seed))
        assert result.dead_letter == 0
    return result


def _join_on(engine: str) -> Any:
    """A mixed placement: the joins on ``engine``, the rest on the row engine."""
    return lambda plan: dict.fromkeys(plan.ids_of("join"), engine)


GENERIC = ["gms", "gpt", "ghm"]


@pytest.mark.parametrize("strategy", GENERIC)
@pytest.mark.parametrize(
    ("query", "first", "second"),
    [("j2", "r,s", "s,r"), ("j3", "r,s,t", "t,s,r"), ("j3", "s,t,r", "r,t,s")],
)
def test_join_order_change(strategy: str, query: str, first: str, second: str) -> None:
    result = _run(query, (first, "row"), [(12, second, "row", strategy)])
    (rec,) = result.metrics["migrations"]
    assert rec["happened"] and rec["completed"] and rec["strategy"] == strategy
    assert rec["to"]["join_order"] == second.split(",")
    assert rec["from"]["join_order"] == first.split(",")
    assert rec["states_moved"] == 0 and rec["keys_completed"] is None
    assert rec["rejected_by_new_plan"] == 0
    assert result.metrics["plans"][-1]["join_order"] == second.split(",")


@pytest.mark.parametrize("strategy", GENERIC)
@pytest.mark.parametrize(
    ("before", "after"),
    [("row", "column"), ("column", "row"), ("row", "mixed"), ("mixed", "column")],
)
def test_placement_change(strategy: str, before: str, after: str) -> None:
    def where(p: str) -> Any:
        return _join_on("duckdb") if p == "mixed" else p

    result = _run("j3", ("r,s,t", where(before)), [(15, "s,r,t", where(after), strategy)])
    (rec,) = result.metrics["migrations"]
    assert rec["completed"]
    final = result.metrics["placement"]
    assert final == rec["to"]["placement"]
    if after == "column":
        assert "duckdb" in final.values()
        assert any(m.get("engine") == "duckdb" for m in result.metrics["operators"].values())


@pytest.mark.parametrize("strategy", GENERIC)
@pytest.mark.parametrize("query", ["istream", "dstream", "rstream", "median", "paned", "join_aggs"])
def test_outputs_and_aggregates(strategy: str, query: str) -> None:
    """ISTREAM/DSTREAM state at the switch equals the old plan's (nothing re-emitted or
    lost), RSTREAM over a NOW window, MEDIAN (opaque to the row engine's incremental
    aggregates), paned SUM/COUNT/MAX, and a join of aggregates."""
    _run(query, (None, "row"), [(9, None, "column", strategy), (23, None, "row", strategy)])


@pytest.mark.parametrize("strategy", GENERIC)
@pytest.mark.parametrize(("query", "order"), [("theta", "s,r"), ("mixed_units", "m,r")])
def test_theta_join_and_mixed_time_units(strategy: str, query: str, order: str) -> None:
    """A join without equality, and streams in seconds and milliseconds (the query runs in
    milliseconds: AT, horizons and instants in its ticks)."""
    _run(query, (None, "row"), [(11.5, order, "column", strategy), (26, None, "row", strategy)])


def test_rows_window_gms_and_ghm_replay_the_last_n_tuples() -> None:
    for strategy in ("gms", "ghm"):
        _run("rows", ("r,s", "row"), [(14, "s,r", "column", strategy)])


def test_rows_window_refuses_gpt_and_auto_picks_gms() -> None:
    old = _target("rows", "r,s", "row")
    new = _target("rows", "s,r", "column")
    with pytest.raises(PlanError, match="not a time-based window"):
        strategies.check("gpt", old, new)
    assert strategies.choose_auto(old, new, False)[0] == "gms"
    result = _run("rows", ("r,s", "row"), [(14, "s,r", "column", "auto")])
    assert result.metrics["migrations"][0]["strategy"] == "gms"


def test_unbounded_window_refuses_replay() -> None:
    text = "SELECT k, COUNT(*) AS n FROM r [UNBOUNDED] GROUP BY k"
    q = LoadedQuery(text, "u.sql", CATALOG, plan_query(text, CATALOG), 0.0)
    plan = plan_with_order(q, None)
    row = resolve_placement(plan, "row")
    col = resolve_placement(plan, "column")
    for name in GENERIC:
        with pytest.raises(PlanError, match=r"UNBOUNDED|not a time-based"):
            strategies.check(name, (plan, row), (plan, col))
    with pytest.raises(PlanError, match="no available strategy"):
        strategies.choose_auto((plan, row), (plan, col), True)


def test_several_migrations_and_auto_choices() -> None:
    result = _run(
        "j3",
        ("r,s,t", "row"),
        [
            (5, "t,s,r", "row", "gpt"),
            (8, "t,s,r", "row", "auto"),  # no change
            (30, "s,r,t", "column", "gms"),
            (33, "r,t,s", _join_on("duckdb"), "ghm"),
        ],
    )
    recs = result.metrics["migrations"]
    assert [r["strategy"] for r in recs] == ["gpt", "none", "gms", "ghm"]
    assert all(r["happened"] for r in recs)
    # GPT at 5 s ran in parallel for one window horizon (20 s) before dropping the old plan
    assert recs[0]["old_plan_dropped_at"] >= recs[0]["at"] + 20
    assert result.metrics["plans"][-1]["join_order"] == ["r", "t", "s"]


def test_overlapping_migration_waits_for_the_running_gpt() -> None:
    """A migration due while a GPT is still running starts when the GPT has switched."""
    result = _run("j2", ("r,s", "row"), [(6, "s,r", "column", "gpt"), (9, "r,s", "row", "gms")])
    first, second = result.metrics["migrations"]
    assert first["completed"] and second["completed"]
    assert second.get("deferred") is True and second["requested_at_s"] == 9
    assert second["at"] >= first["old_plan_dropped_at"]
    assert result.metrics["placement"] == second["to"]["placement"]


def test_migration_after_the_end_of_input_never_happens() -> None:
    result = _run("j2", ("r,s", "row"), [(SECONDS + 50, "s,r", "row", "gms")])
    (rec,) = result.metrics["migrations"]
    assert rec["happened"] is False and rec["at"] is None and "ended" in rec["note"]


def test_gpt_cut_short_by_the_end_of_input() -> None:
    result = _run("j3", ("r,s,t", "row"), [(SECONDS - 5, "t,s,r", "row", "gpt")])
    (rec,) = result.metrics["migrations"]
    assert rec["happened"] and rec["completed"] is False


def test_late_tuples_rejected_by_the_old_plan_are_not_replayed() -> None:
    """Out-of-order tuples: the ones the running plan rejected as late are dead-lettered once
    and never reach the new plan through the replay."""
    data = _streams(5)
    r = data["r"]
    n = r.num_rows
    # Move every 9th tuple 40 rows later: some arrive after their instant fired (late).
    order = list(range(n))
    for i in range(0, n - 40, 9):
        order.insert(i + 40, order.pop(i))
    data["r"] = r.take(pa.array(order))
    text = QUERIES["j2"]
    expected = oracle(text, CATALOG, without_late(text, CATALOG, data))
    late = dead_letter_count(text, CATALOG, data)
    assert late > 0
    for strategy in GENERIC:
        result = _run("j2", ("r,s", "row"), [(20, "s,r", "column", strategy)], data=data)
        assert result.dead_letter == late
        assert_same_stream(result.table, expected)


ORDERS = {"j2": ["r,s", "s,r"], "j3": ["r,s,t", "s,r,t", "t,s,r", "r,t,s", "s,t,r", "t,r,s"]}


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    query=st.sampled_from(["j2", "j3"]),
    data=st.data(),
)
def test_random_migrations(query: str, data: st.DataObject) -> None:
    k = data.draw(st.integers(0, 5), label="migrations")
    placements = ["row", "column", "mixed"]
    steps = []
    for _ in range(k):
        at = data.draw(st.floats(0, SECONDS + 5, allow_nan=False), label="at")
        order = data.draw(st.sampled_from(ORDERS[query]), label="order")
        where = data.draw(st.sampled_from(placements), label="placement")
        strategy = data.draw(st.sampled_from(["auto", *GENERIC]), label="strategy")
        steps.append((at, order, _join_on("duckdb") if where == "mixed" else where, strategy))
    _run(query, (ORDERS[query][0], "row"), steps)


def test_datafusion_to_row_and_back() -> None:
    _run(
        "j3",
        ("r,s,t", "column"),
        [(10, "t,s,r", "row", "gms"), (25, "s,t,r", "column", "gpt")],
        engine="datafusion",
    )


@pytest.mark.spark
def test_spark_placement_change() -> None:
    _run("j2", ("r,s", "row"), [(10, "s,r", "column", "ghm")], engine="spark")


def test_ghm_in_small_chunks_catches_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """GHM replaying a few tuples per call still catches up with input arriving meanwhile
    (its budget grows with what arrived) and completes."""
    monkeypatch.setattr(strategies, "GHM_CHUNK_ROWS", 4)
    result = _run("j3", ("r,s,t", "row"), [(12, "t,r,s", "column", "ghm")])
    (rec,) = result.metrics["migrations"]
    assert rec["completed"] and rec["tuples_replayed"] > 4
    assert rec["old_plan_dropped_at"] > rec["at"]  # the old plan answered during the replay


# -- the row-level strategies (engines/row/migration) through the driver ----------------------

ROW_LEVEL = ["ms", "jisc", "pt", "hybmig", "hybmig-lazy"]


@pytest.mark.parametrize("strategy", ROW_LEVEL)
@pytest.mark.parametrize(
    ("query", "first", "second"),
    [
        ("j2", "r,s", "s,r"),
        ("j3", "r,s,t", "t,s,r"),
        ("j3", "s,t,r", "r,t,s"),
        ("istream", None, None),
    ],
)
def test_row_strategies_change_the_join_order(
    strategy: str, query: str, first: str | None, second: str | None
) -> None:
    """MS, JISC and PT wired into the driver: a join-order change of an all-row plan, and a
    second one back, against the oracle."""
    if first is None:  # istream.sql joins r and s
        first, second = "r,s", "s,r"
    result = _run(
        query, (first, "row"), [(11, second, "row", strategy), (27, first, "row", strategy)]
    )
    recs = result.metrics["migrations"]
    assert [r["strategy"] for r in recs] == [strategy, strategy]
    assert all(r["happened"] and r["completed"] for r in recs)
    if strategy == "jisc":
        assert all(isinstance(r["keys_completed"], int) for r in recs)
    if strategy == "ms":
        assert all(r["states_moved"] > 0 for r in recs)


def test_auto_picks_jisc_for_a_join_order_change_of_a_row_plan() -> None:
    result = _run("j3", ("r,s,t", "row"), [(13, "t,s,r", "row", "auto")])
    (rec,) = result.metrics["migrations"]
    assert rec["strategy"] == "jisc"


@pytest.mark.parametrize("strategy", ["ms", "jisc"])
def test_state_moving_strategies_migrate_unbounded_windows(strategy: str) -> None:
    """Replay is impossible over an UNBOUNDED window; moving state is not."""
    text = (
        "SELECT r.k, COUNT(*) AS n FROM r [UNBOUNDED] AS r, "
        "s [RANGE 5 SECONDS SLIDE 1 SECOND] AS s WHERE r.k = s.k GROUP BY r.k"
    )
    q = LoadedQuery(text, "u.sql", CATALOG, plan_query(text, CATALOG), 0.0)
    before, after = plan_with_order(q, "r,s"), plan_with_order(q, "s,r")
    schedule = [
        ScheduledMigration(14, MigrationRequest(after, resolve_placement(after, "row"), strategy))
    ]
    streams = _streams(5)
    result = execute(before, CATALOG, streams, placement="row", schedule=schedule)
    assert_same_stream(result.table, oracle(text, CATALOG, streams))
    assert result.metrics["migrations"][0]["completed"]


def test_pt_cut_short_by_the_end_of_input_finishes_the_run() -> None:
    """The input ends while PT still runs both plans: PT finishes the run itself."""
    result = _run("j3", ("r,s,t", "row"), [(SECONDS - 1.5, "t,s,r", "row", "pt")])
    (rec,) = result.metrics["migrations"]
    assert rec["happened"]


def _sparse(ts: list[int]) -> pa.Table:
    origin = 1_400_000_000
    n = len(ts)
    return pa.table(
        {
            "ts": pa.array([origin + t for t in ts], pa.int64()),
            "k": pa.array([1] * n, pa.int32()),
            "v": pa.array([float(t) for t in ts]),
        }
    )


@pytest.mark.parametrize(
    "strategy", ["pt", "jisc", "ms", "hybmig", "hybmig-lazy", "gpt", "gms", "ghm"]
)
@pytest.mark.parametrize("r2s", ["DSTREAM", "ISTREAM", "RSTREAM"])
def test_sparse_input_where_only_old_tuples_expire(strategy: str, r2s: str) -> None:
    """The row clock steps only instants where a window changes: while a migration runs both
    plans, an instant where only an *old* tuple leaves an old window (no new input) must be
    stepped too (the deletions of the old results are due there)."""
    text = (
        f"SELECT {r2s} r.k, COUNT(*) AS n FROM r [RANGE 3 SECONDS] AS r, "
        "s [RANGE 3 SECONDS] AS s WHERE r.k = s.k GROUP BY r.k"
    )
    q = LoadedQuery(text, "sparse.sql", CATALOG, plan_query(text, CATALOG), 0.0)
    streams = {"r": _sparse([0, 1, 2, 10, 11, 19]), "s": _sparse([0, 1, 2, 10, 14, 20])}
    before, after = plan_with_order(q, "r,s"), plan_with_order(q, "s,r")
    schedule = [
        ScheduledMigration(at, MigrationRequest(p, resolve_placement(p, "row"), strategy))
        for at, p in ((2.5, after), (12.5, before))
    ]
    result = execute(before, CATALOG, streams, placement="row", schedule=schedule)
    assert_same_stream(result.table, oracle(text, CATALOG, streams))
    assert all(r["happened"] for r in result.metrics["migrations"])

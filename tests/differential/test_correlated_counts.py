"""Correlated counts kept per key (engines/mig/correlated_counts.py) give the oracle's stream.

Q1's shape: a window joined with its own per-key aggregate, the matches counted per key. A
DuckDB MIG keeps the counts from the rows that entered and left the window and recounts only
the keys whose aggregate changed. The oracle (DuckDB re-running the whole query over each
window) knows nothing of that rule. Queries vary the inner aggregate (MAX, MIN, AVG, COUNT),
the residual (signed zeros and infinities through a division, NULL thresholds), the outer
counts and keys, and the windows (time with and without slides, rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engines.mig.correlated_counts
import engines.mig.kept_aggregates
import optimizer.ir.incremental
from engines import registry
from engines.sqlgen.correlated import CorrelatedSQL
from hycq.api import EngineSettings, execute
from optimizer.ir.correlated import (
    CorrelatedPrices,
    CorrelatedShape,
    correlated_count,
    scan_count,
)
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import make_readings, small_smartplug
from tests.lateness import without_late
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")


@pytest.fixture
def every_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep state over every window, however small (the default bars are 150,000 and 1.5 M
    rows), so the correlated count runs on test-sized data."""
    monkeypatch.setattr(optimizer.ir.incremental, "MIN_ROWS", 0)
    monkeypatch.setattr(optimizer.ir.incremental, "CHANGE_RATIO", 0)
    monkeypatch.setattr(optimizer.ir.incremental, "PANE_RATIO", 0)
    monkeypatch.setattr(optimizer.ir.incremental, "PANE_MIN_ROWS", 0)
    monkeypatch.setattr(engines.mig.kept_aggregates.IncrementalState, "_cheaper", lambda *_a: True)
    # and take the kept path whenever it may, even where another path is faster
    monkeypatch.setattr(
        engines.mig.correlated_counts.CorrelatedState,
        "_choose",
        lambda _self, paths: _first(paths, "kept"),
    )


def _first(paths: list[str], path: str) -> str:
    return path if path in paths else "plain"


@pytest.fixture
def scan_first(every_window: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """As ``every_window``, but the scan path at every slide it may take (the plain
    statement runs first: the scan casts its results to that statement's types)."""
    monkeypatch.setattr(
        engines.mig.correlated_counts.CorrelatedState,
        "_choose",
        lambda _self, paths: _first(paths, "scan"),
    )


#: Counting shapes over a window {w} and its own per-plug aggregate.
SHAPES = {
    "max": (
        "SELECT r.plug_id, COUNT(*) AS n FROM readings {w} AS r, "
        "(SELECT plug_id, MAX(value) AS hi FROM readings {w} GROUP BY plug_id) AS m "
        "WHERE r.plug_id = m.plug_id AND r.value > 0.9 * m.hi GROUP BY r.plug_id"
    ),
    "avg": (
        "SELECT r.plug_id, COUNT(*) AS n FROM readings {w} AS r, "
        "(SELECT plug_id, AVG(value) AS a FROM readings {w} GROUP BY plug_id) AS m "
        "WHERE r.plug_id = m.plug_id AND r.value > m.a GROUP BY r.plug_id"
    ),
    # MIN through a division: a MIN of 0.5 makes the threshold +inf. (Not 1.0 / m.lo: the
    # MIN of a window holding 0.0 and -0.0 has either sign, in DuckDB as anywhere.)
    "min_division": (
        "SELECT r.plug_id, COUNT(*) AS n, COUNT(r.value) AS v FROM readings {w} AS r, "
        "(SELECT plug_id, MIN(value) AS lo FROM readings {w} GROUP BY plug_id) AS m "
        "WHERE m.plug_id = r.plug_id AND r.value < 1.0 / (m.lo - 0.5) GROUP BY r.plug_id"
    ),
    # two keys, one of them an extra outer key (id parity); keys on a select's output
    "two_keys": (
        "SELECT r.household_id, r.plug_id, r.id % 2 AS odd, COUNT(*) AS n FROM readings {w} AS r,"
        " (SELECT plug_id, household_id, COUNT(*) AS c, MAX(value) AS hi FROM readings {w} "
        "WHERE value >= 0 GROUP BY plug_id, household_id) AS m "
        "WHERE r.plug_id = m.plug_id AND r.household_id = m.household_id AND r.value >= 0 "
        "AND r.value * m.c >= m.hi GROUP BY r.household_id, r.plug_id, r.id % 2"
    ),
}
WINDOWS = ["[RANGE 6 SECONDS]", "[RANGE 8 SECONDS SLIDE 2 SECONDS]", "[ROWS 9]"]
VALUES = st.sampled_from([-2.5, -0.0, 0.0, 0.5, 1.0, 3.5, 7.25, 7.25, 1024.0])


@st.composite
def plug_streams(draw: st.DrawFn) -> list[tuple[int, float, int, int, int]]:
    """In-order (ts, value, plug, property, household): gaps longer than the windows,
    repeated timestamps and values, three plugs in two households."""
    n = draw(st.integers(1, 45))
    ts, rows = 1000, []
    for _ in range(n):
        ts += draw(st.sampled_from([0, 0, 1, 1, 2, 11]))
        rows.append((ts, draw(VALUES), draw(st.integers(0, 2)), 1, draw(st.integers(0, 1))))
    return rows


def _run(query: str, data: Any, catalog: Any = CATALOG) -> Any:
    return execute(
        plan_query(query, catalog),
        catalog,
        {"readings": data},
        placement="column",
        settings=EngineSettings(incremental=True),
    )


def _correlated(result: Any) -> dict[str, int]:
    for m in result.metrics["operators"].values():
        if m.get("correlated"):
            return dict(m["correlated"])
    return {}


@pytest.mark.usefixtures("every_window")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=plug_streams(), window=st.sampled_from(WINDOWS), shape=st.sampled_from(list(SHAPES)))
def test_kept_counts_give_the_oracles_stream(
    rows: list[tuple[int, float, int, int, int]], window: str, shape: str
) -> None:
    q = SHAPES[shape].format(w=window)
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    assert _correlated(result), "the group did not take the correlated path"


@pytest.mark.usefixtures("every_window")
def test_a_minus_zero_threshold_reads_as_zero() -> None:
    """A one-second window: plug 0's readings alternate between -0.0 and 0.0, equal as
    numbers (``IS DISTINCT FROM`` calls the state row unchanged). Signed zeros are canonical
    (docs/semantics.md): MIN is +0.0 either way, so 1.0 / MIN is +inf at every instant and
    plug 0's row is in every one, as the oracle's; a kept count that let a -0.0 through
    would turn it to -inf and drop the row every other second. Plugs 1-3 keep their MIN
    (the kept path runs: one key in four changed)."""
    w = "[RANGE 1 SECOND]"
    q = (
        f"SELECT r.plug_id, COUNT(*) AS n FROM readings {w} AS r, (SELECT plug_id, "
        f"MIN(value) AS lo FROM readings {w} GROUP BY plug_id) AS m "
        "WHERE m.plug_id = r.plug_id AND r.value < 1.0 / m.lo GROUP BY r.plug_id"
    )
    rows = []
    for i in range(12):
        rows += [(1000 + i, -0.0 if i % 2 else 0.0, 0)] + [(1000 + i, 0.25, p) for p in (1, 2, 3)]
    data = make_readings(rows)
    result = _run(q, data)
    expected = oracle(q, CATALOG, {"readings": data})
    assert expected.filter(pc.equal(expected.column(0), 0)).num_rows == 12  # every instant
    assert_same_stream(result.table, expected)
    assert _correlated(result)["kept"] >= 8


@pytest.mark.usefixtures("every_window")
@pytest.mark.parametrize("shape", list(SHAPES))
def test_most_slides_are_kept_and_few_keys_recounted(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A steady stream of 6 plugs over a 30-second window: the counts are kept at most
    slides and the stream is the oracle's. Every shape keeps some slides (with the recount
    bar lifted for the AVG, whose value moves for every touched plug)."""
    monkeypatch.setattr(engines.mig.correlated_counts, "RECOUNT_SHARE", 1.0)
    rows = [
        (1000 + i // 4, float((i * 37) % 23) - 3.0, i % 3, 1, (i // 3) % 2) for i in range(4 * 150)
    ]
    q = SHAPES[shape].format(w="[RANGE 30 SECONDS SLIDE 1 SECOND]")
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    c = _correlated(result)
    assert c["kept"] > 100 and c["plain"] <= 3, c


@pytest.mark.usefixtures("every_window")
def test_many_changed_keys_run_another_path() -> None:
    """An AVG moves for every plug a slide touches: with the default bar the plain statement
    or the scan runs at those slides, and the stream is the same."""
    rows = [(1000 + i // 3, float((i * 37) % 23), i % 3) for i in range(3 * 120)]
    q = SHAPES["avg"].format(w="[RANGE 30 SECONDS SLIDE 1 SECOND]")
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    c = _correlated(result)
    assert c["plain"] + c["scan"] > 100 and c["kept"] == 0, c


@pytest.mark.usefixtures("every_window")
@pytest.mark.parametrize("name", ["q1", "q2"])
def test_shipped_q1_q2_keep_their_counts(name: str) -> None:
    """The shipped Q1 (MAX) and Q2 (AVG) on generated smart-plug data, wholly on DuckDB."""
    path = ROOT / "queries" / "smartplug" / f"{name}.sql"
    query = path.read_text()
    data = small_smartplug(200, seed=11, rate=8.0)
    expected = oracle(query, CATALOG, without_late(query, CATALOG, {"readings": data}))
    result = _run(query, data)
    assert_same_stream(result.table, expected)
    c = _correlated(result)
    assert c["kept"] + c["plain"] + c["scan"] > 100, c
    if name == "q1":  # a MAX seldom changes
        assert c["kept"] > c["plain"], c


def test_the_fastest_path_is_taken_and_the_others_probed_in_turn() -> None:
    """The runtime's choice (engines.mig.correlated_counts): each path first, WARM slides each (its
    least time counts); then the fastest on average, and every PROBE_EVERY slides one of
    the others, in turn."""
    spec = CorrelatedSQL(
        CorrelatedShape("top", "join", "inner", "window", (0,), 1, 1, ()), "w", "st"
    )
    state = engines.mig.correlated_counts.CorrelatedState(spec)
    state._paths = paths = ["plain", "kept", "scan"]
    warm = engines.mig.correlated_counts.WARM
    seconds = {"plain": 0.010, "kept": 0.004, "scan": 0.002}
    for path in paths:
        for k in range(warm):
            assert state.adapting and state._choose(paths) == path
            state._time(path, seconds[path] * (3 if k == 0 else 1))  # a slow first slide
    assert not state.adapting and state.stats.seconds == seconds
    every = engines.mig.correlated_counts.PROBE_EVERY
    choices = [state._choose(paths) for _ in range(2 * every)]
    assert choices.count("scan") == 2 * every - 2
    assert {choices[every - 1], choices[2 * every - 1]} == {"plain", "kept"}
    state.stats.seconds["scan"] = 0.020
    choices = [state._choose(paths) for _ in range(every)]
    assert choices.count("kept") == every - 1 and choices[-1] != "kept"


def test_the_saving_grows_with_the_window_and_vanishes_with_many_changes() -> None:
    """optimizer.ir.correlated.CorrelatedPrices with DuckDB's default constants: Q1's
    12 M-row window at 40k tuples/s saves tens of milliseconds a slide; a 300k-row window
    does not pay the extra query; over half the keys changed saves nothing."""
    prices = CorrelatedPrices.of(registry.cost_defaults()["duckdb"])
    big = prices.saving(10.8e6, 80_000, 0.004, 3)
    assert 0.02 < big < 0.08
    assert prices.saving(300_000, 2_000, 0.004, 3) < 0
    assert prices.saving(10.8e6, 80_000, 0.6, 3) == 0.0
    assert prices.saving(10.8e6, 80_000, 0.3, 3) < big


#: Shapes the scan path takes (``optimizer.ir.correlated.ScanCount``): comparisons without
#: arithmetic, OR and IS NULL across the sides, COUNT(x) of either side, no residual at all,
#: three keys (one of them negative).
SCAN_SHAPES = {
    "avg": SHAPES["avg"],
    "or_null": (
        "SELECT r.household_id, r.plug_id, COUNT(*) AS n, COUNT(r.value) AS v "
        "FROM readings {w} AS r, (SELECT plug_id, household_id, MAX(value) AS hi "
        "FROM readings {w} GROUP BY plug_id, household_id) AS m "
        "WHERE r.plug_id = m.plug_id AND m.household_id = r.household_id "
        "AND (r.value >= m.hi OR r.value IS NULL OR m.hi < 0.5) "
        "GROUP BY r.household_id, r.plug_id"
    ),
    "count_inner": (
        "SELECT r.plug_id, COUNT(m.lo) AS c, COUNT(*) AS n FROM readings {w} AS r, "
        "(SELECT plug_id, MIN(value) AS lo FROM readings {w} GROUP BY plug_id) AS m "
        "WHERE r.plug_id = m.plug_id AND r.value <> m.lo GROUP BY r.plug_id"
    ),
    "no_residual": (
        "SELECT r.plug_id, COUNT(*) AS n FROM readings {w} AS r, "
        "(SELECT plug_id, SUM(value) AS s FROM readings {w} GROUP BY plug_id) AS m "
        "WHERE r.plug_id = m.plug_id AND r.value > 1.0 GROUP BY r.plug_id"
    ),
    "three_keys": (
        "SELECT r.house_id, r.household_id, r.plug_id, COUNT(*) AS n FROM readings {w} AS r, "
        "(SELECT house_id, household_id, plug_id, AVG(value) AS a FROM readings {w} "
        "WHERE property = 1 GROUP BY house_id, household_id, plug_id) AS m "
        "WHERE r.property = 1 AND r.house_id = m.house_id AND r.household_id = m.household_id "
        "AND r.plug_id = m.plug_id AND r.value <= m.a "
        "GROUP BY r.house_id, r.household_id, r.plug_id"
    ),
}


@st.composite
def keyed_streams(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """In-order (ts, value, plug, property, household, house): both properties, negative
    house ids. (A NULL value or key never reaches a query: the row is dead-lettered.)"""
    n = draw(st.integers(1, 45))
    ts, rows = 1000, []
    for _ in range(n):
        ts += draw(st.sampled_from([0, 0, 1, 1, 2, 11]))
        rows.append(
            (
                ts,
                draw(VALUES),
                draw(st.integers(0, 2)),
                draw(st.sampled_from([1, 1, 0])),
                draw(st.integers(0, 1)),
                draw(st.sampled_from([-3, 0, 0, 5])),
            )
        )
    return rows


@pytest.mark.usefixtures("scan_first")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=keyed_streams(), window=st.sampled_from(WINDOWS), shape=st.sampled_from(list(SCAN_SHAPES))
)
def test_scanned_counts_give_the_oracles_stream(
    rows: list[tuple[Any, ...]], window: str, shape: str
) -> None:
    q = SCAN_SHAPES[shape].format(w=window)
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    c = _correlated(result)
    assert c and c["scan_off"] is False, c
    assert c["scan"] > 0 or c["plain"] + c["kept"] <= 1, c


@pytest.mark.usefixtures("scan_first")
def test_a_steady_stream_is_scanned_at_every_slide() -> None:
    """Six plugs over a 30-second window: after the first slide (plain, for the result's
    types) every slide is scanned, and the stream is the oracle's."""
    rows = [
        (1000 + i // 4, float((i * 37) % 23) - 3.0, i % 3, 1, (i // 3) % 2) for i in range(4 * 150)
    ]
    q = SCAN_SHAPES["three_keys"].format(w="[RANGE 30 SECONDS SLIDE 1 SECOND]")
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    c = _correlated(result)
    assert c["plain"] == 1 and c["scan"] > 100, c


@pytest.mark.usefixtures("scan_first")
@pytest.mark.parametrize("seed", [3, 17])
@pytest.mark.parametrize("left_select", ["duckdb", "row"])
def test_shipped_q2_scanned_in_hybrid_placements(seed: int, left_select: str) -> None:
    """Q2 on generated smart-plug data of two seeds, the scan at every slide it may take:
    wholly on DuckDB, and with the join's left select on the row engine (an Arrow filter
    feeding the MIG filtered chunks, as the optimizer places it on some shapes)."""
    query = (ROOT / "queries" / "smartplug" / "q2.sql").read_text()
    plan = plan_query(query, CATALOG)
    kinds = ("select", "project", "join", "aggregate")
    placement = {i: "duckdb" for i in plan.topological() if plan.op(i).kind in kinds}
    (join,) = [i for i in placement if plan.op(i).kind == "join"]
    placement[plan.inputs(join)[0]] = left_select  # r.property = 1
    data = small_smartplug(200, seed=seed, rate=8.0)
    expected = oracle(query, CATALOG, without_late(query, CATALOG, {"readings": data}))
    result = execute(
        plan, CATALOG, {"readings": data}, placement=placement,
        settings=EngineSettings(incremental=True),
    )  # fmt: skip
    assert_same_stream(result.table, expected)
    c = _correlated(result)
    assert c["scan"] > 100 and c["scan_off"] is False, c


@pytest.mark.usefixtures("scan_first")
def test_a_key_beyond_the_packing_gives_the_scan_up() -> None:
    """Three keys get 21 bits each: a house id of 2**20 cannot be packed. The scan stops for
    the rest of the run (its metrics say why) and the SQL paths give the oracle's stream."""
    rows = [
        (1000 + i // 4, float((i * 37) % 23), i % 3, 1, 0, 2**20 if i > 200 else 7)
        for i in range(4 * 100)
    ]
    q = SCAN_SHAPES["three_keys"].format(w="[RANGE 30 SECONDS SLIDE 1 SECOND]")
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    c = _correlated(result)
    assert "2^20" in c["scan_off"] and c["scan"] > 10, c


def test_the_scan_is_offered_only_where_arrow_compares_as_sql() -> None:
    """Comparisons of columns (with OR, IS NULL, COUNT(x)) are admitted; arithmetic in the
    residual (``0.9 * m.hi``, a division) and an extra outer key are not."""
    w = "[RANGE 10 SECONDS]"
    for name, sql in SCAN_SHAPES.items():
        shape = _shape(sql.format(w=w))
        assert shape is not None and scan_count(_plan(sql.format(w=w)), shape), name
    for name in ("max", "min_division", "two_keys"):
        sql = SHAPES[name].format(w=w)
        assert scan_count(_plan(sql), _shape(sql)) is None, name


def _plan(sql: str) -> Any:
    return plan_query(sql, CATALOG)


def _shape(sql: str) -> Any:
    plan = plan_query(sql, CATALOG)
    kinds = ("select", "project", "join", "aggregate")
    ops = [i for i in plan.topological() if plan.op(i).kind in kinds]
    top = ops[-1]
    aggs = {i for i in ops if plan.op(i).kind == "aggregate" and i != top}
    windows = {i for i in plan.topological() if plan.op(i).kind == "window"}
    return correlated_count(plan, ops, top, aggs, windows)


def test_the_shape_is_recognised_only_where_deltas_are_exact() -> None:
    w = "[RANGE 10 SECONDS]"
    assert _shape(SHAPES["max"].format(w=w)) is not None
    assert _shape(SHAPES["two_keys"].format(w=w)) is not None
    # a SUM is not a count
    assert _shape(SHAPES["max"].format(w=w).replace("COUNT(*) AS n", "SUM(r.value) AS n")) is None
    # not joined on every key of the inner aggregate: a row matches several inner rows
    partial = SHAPES["two_keys"].format(w=w).replace(" AND r.household_id = m.household_id", "")
    assert _shape(partial) is None
    # the outer count not grouped by the joined key
    assert (
        _shape(
            f"SELECT r.household_id, COUNT(*) AS n FROM readings {w} AS r, (SELECT plug_id, "
            f"MAX(value) AS hi FROM readings {w} GROUP BY plug_id) AS m WHERE r.plug_id = "
            "m.plug_id AND r.value > m.hi / 2 GROUP BY r.household_id"
        )
        is None
    )

"""DuckDB MIGs that keep SUM/COUNT/AVG incrementally give the oracle's stream, with exact sums.

engines/sqlgen/incremental.py and engines/mig/kept_aggregates.py: a qualifying aggregate's
totals are kept per key in a state table, merged with each slide's new and expired chunks, in
128-bit integers at a scale 2^S. The checks here are independent of that rule: the oracle (DuckDB
re-running the query over each window) and the exact-sum bound of docs/semantics.md computed
with fractions (tests/differential/test_window_sums.py). The MIG only keeps state over windows
worth it (``optimizer.ir.incremental.worth_it``); these tests lower the bar to every window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engines.mig.kept_aggregates
import optimizer.ir.incremental
from engines.columnar import QueryDataError
from hycq.api import EngineSettings, execute
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import make_readings, small_smartplug
from tests.differential.test_window_sums import (
    BIG_THEN_SMALL,
    GROUPED,
    RANGE,
    _at,
    check_stream,
    streams,
)
from tests.lateness import without_late
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")

#: Shipped queries with a qualifying aggregate when placed wholly on DuckDB.
QUERIES = [
    "smartplug/q1.sql",  # MAX: pane partials
    "smartplug/q2.sql",
    "smartplug/q3.sql",  # MAX and AVG: pane partials
    "smartplug/q4.sql",
    "smartplug/q5.sql",
    "smartplug/q6.sql",
    "unseen/u3_houses_above_average.sql",
    "unseen/u4_plug_peaks.sql",
    "unseen/u5_new_high_loads.sql",
]


@pytest.fixture
def every_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep state over every window, however small (the default bar is 150,000 rows)."""
    monkeypatch.setattr(optimizer.ir.incremental, "MIN_ROWS", 0)
    monkeypatch.setattr(optimizer.ir.incremental, "CHANGE_RATIO", 0)
    monkeypatch.setattr(optimizer.ir.incremental, "PANE_RATIO", 0)
    monkeypatch.setattr(optimizer.ir.incremental, "PANE_MIN_ROWS", 0)
    # and merge at every slide, even where re-aggregating a small window would be cheaper
    monkeypatch.setattr(engines.mig.kept_aggregates.IncrementalState, "_cheaper", lambda *_a: True)


def _run(
    query: str,
    data: Any,
    incremental: bool = True,
    catalog: Any = CATALOG,
    placement: str | dict[str, str] = "column",
) -> Any:
    return execute(
        plan_query(query, catalog),
        catalog,
        {"readings": data},
        placement=placement,
        settings=EngineSettings(incremental=incremental),
    )


def _kept(result: Any) -> dict[str, dict[str, Any]]:
    """Per incrementally kept aggregate: its builds and merges (all MIGs of the run)."""
    out: dict[str, dict[str, Any]] = {}
    for m in result.metrics["operators"].values():
        out.update(m.get("incremental") or {})
    return out


def _rows(result: Any) -> list[Any]:
    names = [c for c in result.table.column_names if c != "_ts"]
    cols = [result.table.column(c).to_pylist() for c in names]
    return list(zip(result.table.column("_ts").to_pylist(), zip(*cols, strict=True), strict=True))


@pytest.mark.usefixtures("every_window")
@pytest.mark.parametrize("name", QUERIES)
def test_shipped_queries_on_duckdb_with_incremental_aggregates(name: str) -> None:
    path = ROOT / "queries" / name
    catalog = load_catalog(path.parent / "catalog.toml")
    query = path.read_text()
    data = small_smartplug(320, seed=5, rate=6.0)
    expected = oracle(query, catalog, without_late(query, catalog, {"readings": data}))
    result = _run(query, data, catalog=catalog)
    assert_same_stream(result.table, expected)
    kept = _kept(result)
    assert kept and all(k["merges"] > 100 for k in kept.values()), kept
    assert all(m.get("incremental_off") is None for m in result.metrics["operators"].values())


@pytest.mark.usefixtures("every_window")
def test_a_large_value_leaving_the_window_is_forgotten() -> None:
    """docs/semantics.md's example: after 1e15 has left, three 0.001s sum to 0.003."""
    q = "SELECT SUM(value) AS s, AVG(value) AS a, COUNT(*) AS c FROM readings [RANGE 3 SECONDS]"
    result = _run(q, make_readings(BIG_THEN_SMALL))
    assert _kept(result)["aggregate1"]["merges"] >= 3
    assert _at(_rows(result), 1400000003) == (0.003, 0.001, 3)


@pytest.mark.usefixtures("every_window")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=streams(),
    window=st.sampled_from(
        [f"[RANGE {RANGE} SECONDS]", f"[RANGE {RANGE} SECONDS SLIDE 1 SECOND]", "[ROWS 5]"]
    ),
)
def test_incremental_sums_within_the_exact_bound(
    rows: list[tuple[int, float, int]], window: str
) -> None:
    """Values from 1e-3 to 1e15 of both signs: every SUM and AVG within the bound of adding
    the window's values exactly in some order (fractions, not the engine's rule)."""
    result = _run(GROUPED.format(w=window), make_readings(rows))
    check_stream(_rows(result), rows, window)


@pytest.mark.usefixtures("every_window")
def test_a_row_window_given_more_rows_than_it_holds_at_one_instant() -> None:
    """[ROWS 9] given 10 rows at one instant: the window's new chunk is cut again in the
    same delta, so its first version entered and left at once and must count neither way
    (it was counted as entered: 19 rows instead of 9, found by the correlated counts'
    differential test)."""
    q = "SELECT plug_id, COUNT(*) AS n, SUM(value) AS s FROM readings [ROWS 9] GROUP BY plug_id"
    data = make_readings([(1000, 2.5, 0)] + [(1001, 2.5, 0)] * 10 + [(1002, 1.0, 1)] * 3)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    assert _kept(result)["aggregate1"]["merges"] >= 2


@pytest.mark.usefixtures("every_window")
def test_a_value_too_small_for_the_scale_rebuilds_the_state() -> None:
    """After values near 2^60 the scale cannot hold 0.00001; once they have left, a new
    small value makes the state be rebuilt at a finer scale, and the sums stay within the
    bound."""
    rows = [(1000 + i, 2.0**60 + 2.0**9 * i, i % 2) for i in range(3)]
    rows += [(1010 + i, 1e-5 * (i + 1), i % 2) for i in range(8)]
    result = _run(GROUPED.format(w="[RANGE 4 SECONDS]"), make_readings(rows))
    check_stream(_rows(result), rows, "[RANGE 4 SECONDS]")
    assert _kept(result)["aggregate1"]["builds"] >= 2


@pytest.mark.usefixtures("every_window")
def test_a_non_finite_argument_gives_the_aggregate_back_to_re_evaluation() -> None:
    """5 / 0 is +inf, which no scale sums exactly: the MIG re-evaluates the window from then on
    and says why; the stream is still the oracle's."""
    q = (
        "SELECT plug_id, SUM(value / (value - 5.0)) AS s, COUNT(*) AS c "
        "FROM readings [RANGE 3 SECONDS] GROUP BY plug_id"
    )
    rows = [(1000 + i, float(i), i % 2) for i in range(10)]  # at value 5.0: 5 / 0 = +inf
    rows += [(1010, 0.0, 0)]
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    offs = [m.get("incremental_off") for m in result.metrics["operators"].values()]
    assert any(offs), offs


@pytest.mark.usefixtures("every_window")
def test_empty_windows_without_group_by() -> None:
    """Without GROUP BY one row at every instant, also over an empty window (COUNT 0, SUM
    NULL), through a gap longer than the window."""
    q = "SELECT SUM(value) AS s, COUNT(value) AS n, COUNT(*) AS c FROM readings [RANGE 2 SECONDS]"
    rows = [(1000, 1.5, 0), (1001, 2.5, 1), (1008, 4.0, 0), (1009, 8.0, 1)]
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    assert _kept(result)["aggregate1"]["merges"] >= 2


@pytest.mark.usefixtures("every_window")
@pytest.mark.parametrize("incremental", [True, False])
def test_an_integer_sum_that_overflows_stops_the_run_either_way(incremental: bool) -> None:
    """An integer SUM beyond BIGINT is an error (docs/semantics.md), kept or re-evaluated."""
    q = "SELECT SUM(ts * 1000000000) AS s FROM readings [RANGE 10 SECONDS]"
    rows = [(1400000000 + i, 1.0, 0) for i in range(9)]
    with pytest.raises(QueryDataError):
        _run(q, make_readings(rows), incremental)


def test_small_windows_are_re_evaluated_by_default() -> None:
    """Below the bar the MIG re-evaluates (three small queries cost more than a small scan)."""
    data = small_smartplug(80, seed=5, rate=6.0)
    result = _run((ROOT / "queries" / "smartplug" / "q4.sql").read_text(), data)
    kept = _kept(result)
    assert kept and all(k["merges"] == 0 and k["builds"] == 0 for k in kept.values()), kept


@pytest.mark.usefixtures("every_window")
def test_no_incremental_re_evaluates_every_window() -> None:
    """``--no-incremental`` (EngineSettings.incremental=False): no state is kept, and the
    stream is the same."""
    data = small_smartplug(80, seed=5, rate=6.0)
    query = (ROOT / "queries" / "smartplug" / "q4.sql").read_text()
    plain = _run(query, data, incremental=False)
    assert not _kept(plain)
    assert_same_stream(plain.table, _run(query, data).table)


#: Aggregates with a MIN or MAX, kept from pane partials (engines.mig.kept_aggregates.PanedState).
PANED = (
    "SELECT plug_id, MAX(value) AS hi, MIN(value) AS lo, COUNT(*) AS c, SUM(value) AS s, "
    "AVG(value) AS a, MAX(id) AS last, MAX((value - 1.0) / (value * value - 1.0)) AS n_hi, "
    "MIN((value - 1.0) / (value * value - 1.0)) AS n_lo, MIN((value - 1.0) / (value + 2.5)) "
    "AS inf_lo FROM readings {w} WHERE value <> 7.25 GROUP BY plug_id"
)
#: Values whose sums are exact in any order (so the oracle's and the panes' agree exactly),
#: and signed zeros. Through PANED's divisions, 1.0 gives NaN (0 / 0; DuckDB orders NaN above
#: every number) and -2.5 gives -inf.
PANE_VALUES = st.sampled_from([-2.5, -0.0, 0.0, 1.0, 7.25, 1024.0, 3.5])


@st.composite
def pane_streams(draw: st.DrawFn) -> list[tuple[int, float, int]]:
    n = draw(st.integers(1, 40))
    ts, rows = 1000, []
    for _ in range(n):
        ts += draw(st.integers(0, 3))
        rows.append((ts, draw(PANE_VALUES), draw(st.integers(0, 2))))
    return rows


@pytest.mark.usefixtures("every_window")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=pane_streams(),
    window=st.sampled_from(
        ["[RANGE 5 SECONDS]", "[RANGE 6 SECONDS SLIDE 2 SECONDS]", "[ROWS 7]", "[RANGE 9 SECONDS]"]
    ),
)
def test_min_max_from_pane_partials_give_the_oracles_stream(
    rows: list[tuple[int, float, int]], window: str
) -> None:
    """MIN, MAX (with NaN, infinities, signed zeros), COUNT, SUM, AVG kept from pane
    partials, over time and row windows with gaps longer than the window: the oracle's
    stream, slide by slide."""
    q = PANED.format(w=window)
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    assert all(m.get("incremental_off") is None for m in result.metrics["operators"].values())


@pytest.mark.usefixtures("every_window")
@pytest.mark.parametrize("bulk", [4, 0])
def test_pane_partials_are_merged_into_blocks_and_expire_with_them(
    bulk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 40-second window of 1-second slides: blocks of 6 panes form, expire, and the
    result is the oracle's; the final merges read fewer partials than there are panes.
    ``bulk`` 0: every pane's partial comes from the one-query path of a rebuild."""
    monkeypatch.setattr(engines.mig.kept_aggregates, "BULK_PANES", bulk)
    q = PANED.format(w="[RANGE 40 SECONDS SLIDE 1 SECOND]")
    rows = [(1000 + i // 3, float((i * 37) % 101), i % 3) for i in range(3 * 120)]
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    kept = _kept(result)["aggregate1"]
    assert kept["merges"] > 100 and kept["builds"] == 1, kept
    # 40 panes of 3 groups: at most 40 // 6 blocks and 2 * 6 loose panes of 3 rows
    assert kept["rows_merged"] / kept["merges"] < 3 * (40 // 6 + 2 * 6)


@pytest.mark.usefixtures("every_window")
def test_global_max_over_empty_windows() -> None:
    """Without GROUP BY: one row at every instant, NULLs and COUNT 0 over an empty window."""
    q = "SELECT MAX(value) AS hi, MIN(value) AS lo, COUNT(*) AS c FROM readings [RANGE 2 SECONDS]"
    rows = [(1000, 1.5, 0), (1001, 2.5, 1), (1008, 4.0, 0), (1009, 8.0, 1)]
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    assert _kept(result)["aggregate1"]["merges"] >= 2


def test_pane_partials_that_do_not_pay_give_way_to_re_evaluation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One tuple per key and slide: the partials hold as many rows as the window, so the MIG
    re-aggregates the window instead, says why, and the stream is the same."""
    monkeypatch.setattr(optimizer.ir.incremental, "MIN_ROWS", 0)
    monkeypatch.setattr(optimizer.ir.incremental, "CHANGE_RATIO", 0)
    monkeypatch.setattr(optimizer.ir.incremental, "PANE_MIN_ROWS", 0)
    # and merge at every slide, even where re-aggregating a small window would be cheaper
    monkeypatch.setattr(engines.mig.kept_aggregates.IncrementalState, "_cheaper", lambda *_a: True)
    q = PANED.format(w="[RANGE 30 SECONDS SLIDE 1 SECOND]")
    rows = [(1000 + i, 1.0 * i, i) for i in range(120)]  # a new plug every second
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    offs = [m.get("incremental_off") for m in result.metrics["operators"].values()]
    assert any(o and "pane partials" in o for o in offs), offs


def test_one_aggregate_from_pane_partials_the_other_re_evaluated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Q3's shape: the long window is large enough for pane partials, the short one never
    is. The group's SQL reads the long one's state and re-aggregates the short one (a SQL
    per set of kept aggregates), and the short one's partials are given up once its window
    has stopped growing; the stream is the oracle's."""
    monkeypatch.setattr(optimizer.ir.incremental, "MIN_ROWS", 0)
    monkeypatch.setattr(optimizer.ir.incremental, "CHANGE_RATIO", 0)
    monkeypatch.setattr(optimizer.ir.incremental, "PANE_MIN_ROWS", 60)
    q = (
        "SELECT l.plug_id, l.hi AS hi_long, s.hi AS hi_short, l.a - s.a AS trend FROM "
        "(SELECT plug_id, MAX(value) AS hi, AVG(value) AS a FROM readings "
        "[RANGE 40 SECONDS SLIDE 1 SECOND] GROUP BY plug_id) AS l, "
        "(SELECT plug_id, MAX(value) AS hi, AVG(value) AS a FROM readings "
        "[RANGE 8 SECONDS SLIDE 1 SECOND] GROUP BY plug_id) AS s WHERE l.plug_id = s.plug_id"
    )
    rows = [(1000 + i // 3, float((i * 37) % 101), i % 3) for i in range(3 * 90)]
    data = make_readings(rows)
    result = _run(q, data)
    assert_same_stream(result.table, oracle(q, CATALOG, {"readings": data}))
    kept = _kept(result)
    assert list(kept) == ["aggregate1"] and kept["aggregate1"]["merges"] > 30, kept
    offs = [m.get("incremental_off") for m in result.metrics["operators"].values()]
    assert any(o and o.startswith("aggregate2: the pane partials do not pay") for o in offs)


@pytest.mark.usefixtures("every_window")
def test_pane_partials_over_a_fifo_input_from_the_row_engine() -> None:
    """Q1 with its selects on the row engine and the MAX, the join and the count in DuckDB
    (the plan chosen at 40k on 50,000 plugs): the MAX's input is a FIFO relation shipped
    slide by slide, whose front chunk an expiry cuts (aggregated again, outside every
    block). The stream is the oracle's."""
    path = ROOT / "queries" / "smartplug" / "q1.sql"
    query = path.read_text()
    data = small_smartplug(200, seed=11, rate=8.0)
    placement = dict.fromkeys(("aggregate1", "join1", "aggregate2"), "duckdb")
    result = _run(query, data, placement=placement)
    expected = oracle(query, CATALOG, without_late(query, CATALOG, {"readings": data}))
    assert_same_stream(result.table, expected)
    kept = _kept(result)
    assert kept["aggregate1"]["merges"] > 100, kept


@pytest.mark.usefixtures("every_window")
def test_states_that_rest_and_resume_give_the_oracles_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A state dropped while re-aggregating is cheaper (``IncrementalState.resting``) and
    built again from the window later: every transition, for Q4's two AVGs and Q6's three,
    against the oracle (the decision is forced: three slides merged, two re-aggregated)."""
    calls = {"n": 0}

    def alternate(_self: Any, _window: int, _changed: int) -> bool:
        calls["n"] += 1
        return calls["n"] % 5 < 3

    monkeypatch.setattr(engines.mig.kept_aggregates.IncrementalState, "_cheaper", alternate)
    for name in ("smartplug/q4.sql", "smartplug/q6.sql"):
        query = (ROOT / "queries" / name).read_text()
        data = small_smartplug(200, seed=11, rate=6.0)
        expected = oracle(query, CATALOG, without_late(query, CATALOG, {"readings": data}))
        result = _run(query, data)
        assert_same_stream(result.table, expected)
        kept = _kept(result)
        assert all(k["rested"] > 20 and k["builds"] > 20 for k in kept.values()), kept


def test_a_merge_over_many_groups_of_a_small_window_rests() -> None:
    """The comparison itself, at DuckDB's default constants: a state of 50,000 groups over a
    600k-row window (Q6's 1-minute AVG on 50,000 plugs at 10k) costs more to merge than to
    re-aggregate; 1,677 groups over 6 M rows (Q2's AVG at 40k) do not."""
    from engines import registry
    from engines.mig.kept_aggregates import IncrementalState
    from optimizer.ir.incremental import ExactStatePrices

    prices = ExactStatePrices.of(registry.cost_defaults()["duckdb"])
    assert prices is not None
    state = IncrementalState(_spec_with_selects(), prices)
    state.shape = (50_000, 0.5)
    assert not state._cheaper(600_000, 20_000)
    state.shape = (1_677, 0.5)
    assert state._cheaper(12_000_000, 80_000)
    state.resting, state.shape = True, (1_677, 0.5)  # resumes only well below break-even
    window = 4_000_000
    for changed in range(0, 2_000_000, 1000):
        kept = prices.kept(changed * 0.5, 1_677)
        again = prices.reevaluated(window, window * 0.5, 1_677, True, 1)  # one AVG of a DOUBLE
        if 0.8 * again <= kept < again:
            assert not state._cheaper(window, changed)
            state.resting = False
            assert state._cheaper(window, changed)
            break
    else:
        pytest.fail("no slide between resuming and break-even")


def _spec_with_selects() -> Any:
    from engines.sqlgen.incremental import IncrementalAggregate

    return IncrementalAggregate(
        "aggregate1", "in0", "st", "nw", "od", ("s.c4",), "s.c3 = 1", (("AVG", "s.c2", True),)
    )

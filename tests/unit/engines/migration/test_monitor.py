"""The run-time monitor's bookkeeping: attribution to event-seconds, smoothing, gaps,
executor changes (its figures on real runs: tests/unit/hycq/test_adapt_drift.py)."""

from __future__ import annotations

import doctest
import json
from pathlib import Path
from typing import Any

import pytest

import engines.migration.monitor as monitor_module
from engines.migration.monitor import HALF_LIFE_S, RuntimeMonitor
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[4]
CAT = load_catalog(ROOT / "queries" / "keyed" / "catalog.toml")
PLAN = plan_query("SELECT k FROM r [RANGE 2 SECONDS] WHERE v > 0.5", CAT)


def counters(n_in: float, n_out: float, busy: float = 0.0) -> Any:
    return lambda: {
        "select1": {"kind": "select", "tuples_in": n_in, "tuples_out": n_out, "busy_s": busy}
    }


def test_the_docstring_example_holds() -> None:
    assert doctest.testmod(monitor_module).failed == 0


def test_ewma_half_life_and_per_second_busy_time() -> None:
    m = RuntimeMonitor(PLAN, tps=1000)  # milliseconds
    total = 0.0
    for sec in range(40):
        n = 100 if sec < 20 else 1_100
        m.on_input("r", n, sec * 1000, sec * 1000 + 999)
        total += n
        m.on_instant(sec * 1000 + 500, counters(total, total / 2, 0.01 * (sec + 1)))
    st = m.statistics()
    # 19 seconds after the step: 1 - 0.5 ** (19 / 5) of the way from 100 to 1100
    expect = 100 + 1000 * (1 - 0.5 ** (19 / HALF_LIFE_S))
    assert abs(m.rates["r"].value - expect) < 1.0  # type: ignore[operator]
    # the optimizer gets the larger of that and the arrivals over the window's span (2 s):
    # what the window holds
    assert st.rates["r"] == 1100.0
    assert st.selectivities == {"v > 0.5": 0.5}
    figures = m.operator_figures()["select1"]
    assert abs(figures["u"] - 0.01) < 1e-4  # 10 ms busy per event-second
    timeline = m.per_second()
    assert [e["second"] for e in timeline] == list(range(39))
    json.dumps(timeline)


def test_a_batch_spanning_seconds_is_spread_and_late_rows_count_now() -> None:
    m = RuntimeMonitor(PLAN, tps=1)
    m.on_input("r", 30, 0, 2)  # 10 per second
    m.on_instant(0, counters(0, 0))
    m.on_instant(3, counters(0, 0))
    m.on_input("r", 5, 1, 1)  # late: seconds 0..2 are closed, it counts in second 3
    m.on_instant(4, counters(0, 0))
    rows = [e["streams"]["r"]["rows"] for e in m.per_second()]
    assert rows == [10, 10, 10, 5]


def test_a_long_gap_is_skipped_in_one_step() -> None:
    m = RuntimeMonitor(PLAN, tps=1)
    m.on_input("r", 100, 0, 0)
    m.on_instant(0, counters(100, 10))
    m.on_input("r", 100, 10**9, 10**9)
    m.on_instant(10**9, counters(200, 20))
    m.on_instant(10**9 + 1, counters(200, 20))
    timeline = m.per_second()
    assert timeline[-2]["gap_seconds"] == 10**9 - 1
    assert m.statistics().rates["r"] < 1e-6 + 100 * 0.5 ** ((10**9 - 1) / HALF_LIFE_S) + 100


def test_a_new_executor_restarts_operator_figures() -> None:
    m = RuntimeMonitor(PLAN, tps=1)
    for sec in range(5):
        m.on_input("r", 100, sec, sec)
        m.on_instant(sec, counters(100 * (sec + 1), 90 * (sec + 1)))
    assert abs(m.statistics().selectivities["v > 0.5"] - 0.9) < 1e-9
    # a migrated-to executor starts from zero: its counters go backwards
    for sec in range(5, 12):
        m.on_input("r", 100, sec, sec)
        m.on_instant(sec, counters(100 * (sec - 4), 10 * (sec - 4)))
    assert abs(m.statistics().selectivities["v > 0.5"] - 0.1) < 1e-9
    m.set_plan(PLAN)
    assert m.statistics().selectivities == {}  # restarted: nothing measured on it yet
    assert abs(m.statistics().rates["r"] - 100) < 1e-9  # rates carry on


def test_after_a_migration_the_new_executors_counters_are_a_base_not_one_seconds_work() -> None:
    """A migrated-to executor's counters already hold the migration's work (a replay, a
    parallel track): the first reading after ``set_plan`` is only the base, so that work is
    not charged to one event-second (it made the adaptive controller read a plan at 60
    core-seconds per second on the ramp)."""
    m = RuntimeMonitor(PLAN, tps=1)
    m.on_input("r", 100, 0, 0)
    m.on_instant(0, counters(100, 50))
    m.set_plan(PLAN)
    assert m.plan_seconds == 0
    m.on_input("r", 100, 1, 1)
    m.on_instant(1, counters(1_000_000, 10))  # the replay's work
    for sec in range(2, 6):
        m.on_input("r", 100, sec, sec)
        m.on_instant(sec, counters(1_000_000 + 100 * (sec - 1), 10 + 20 * (sec - 1)))
    assert m.plan_seconds == 5  # seconds 0-4 closed (0 by the base reading)
    figures = m.operator_figures()
    assert all(abs(f["tuples_in"] - 100) < 1e-9 for f in figures.values() if f["kind"] == "select")
    assert abs(m.statistics().selectivities["v > 0.5"] - 0.2) < 1e-9


def test_after_a_rate_drop_the_rate_is_what_the_window_still_holds() -> None:
    """A 5-minute window keeps the tuples of a high rate for 5 minutes after it drops: what
    costs the window's content (a MIG's SQL, a replay) costs that, so the optimizer gets
    the average over the window's span until it drains, then the smoothed arrivals."""
    plan = plan_query("SELECT k FROM r [RANGE 100 SECONDS] WHERE v > 0.5", CAT)
    m = RuntimeMonitor(plan, tps=1)
    for sec in range(200):
        n = 20_000 if sec < 100 else 2_000
        m.on_input("r", n, sec, sec)
        m.on_instant(sec + 1, counters(0, 0))
        if sec == 149:
            # 50 s after the drop: half the window is still the high rate
            assert m.statistics().rates["r"] == pytest.approx(11_000, rel=0.01)
            assert m.rates["r"].value == pytest.approx(2_000, rel=0.01)
    assert m.statistics().rates["r"] == pytest.approx(2_000, rel=0.01)


def test_windows_are_steady_once_full_at_a_stable_rate() -> None:
    """The cost model prices full windows at the current rate; the monitor says when the
    windows are so: not while they fill, not while a rate step works through them."""
    plan = plan_query("SELECT k FROM r [RANGE 20 SECONDS] WHERE v > 0.5", CAT)
    m = RuntimeMonitor(plan, tps=1)
    steady = []
    for sec in range(100):
        n = 1_000 if sec < 50 else 20_000
        m.on_input("r", n, sec, sec)
        m.on_instant(sec + 1, counters(0, 0))
        steady.append(m.windows_steady())
    assert not any(steady[:19])  # filling
    assert all(steady[25:50])  # full at 1k
    assert not any(steady[51:60])  # the step works through the window
    assert all(steady[80:])  # full at 20k

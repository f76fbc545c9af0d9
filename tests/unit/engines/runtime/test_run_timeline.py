"""The run metrics' per-second ``timeline`` (engines/runtime/timeline.py) and the report's
"run over time" section built from it.

The timeline's figures add up to the run's totals (tuples, results, instants, wall time)
whatever the slices, gaps and out-of-order timestamps; a long run is coarsened to at most
``max_entries`` buckets; and the report escapes every text a migration record or an adaptive
decision carries.
"""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.runtime.safe_json import json_text
from engines.runtime.timeline import Timeline
from hycq import api
from hycq.planning import OptimizerOptions, optimize
from hycq.reporting import build_report, render

ROOT = Path(__file__).resolve().parents[4]
Q2 = ROOT / "queries" / "smartplug" / "q2.sql"


def _feed(
    tl: Timeline, slices: list[list[int]], emits_per_slice: int, tps: int
) -> tuple[int, int, int, float]:
    """Feed ``slices`` as a run would, with a fake wall clock; return the totals."""
    wall = 0.0
    tl.start(wall)
    tuples = results = instants = 0
    last = None
    for k, ts in enumerate(slices):
        arr = np.asarray(ts, dtype=np.int64)
        if k % 2:  # as the run loop calls it: an Arrow column and its bounds
            tl.tuples(pa.array(arr), int(arr.min()), int(arr.max()))
        else:
            tl.tuples(arr)
        tuples += len(ts)
        top = max(ts)
        for j in range(emits_per_slice):
            wall += 0.001 * (k + 1)
            instant = (top // tps) * tps - j * tps
            if last is not None and instant <= last:
                continue
            last = instant
            tl.emitted(instant, k + j, 0.5 * (j + 1), wall)
            results += k + j
            instants += 1
        wall += 0.0005
        tl.step_done(wall)
    return tuples, results, instants, wall


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 50_000), min_size=1, max_size=40), min_size=1, max_size=30),
    st.integers(0, 3),
    st.sampled_from([1, 1000]),
    st.integers(2, 64),
)
def test_figures_add_up_to_the_totals(
    slices: list[list[int]], emits: int, tps: int, cap: int
) -> None:
    tl = Timeline(tps, max_entries=cap)
    tuples, results, instants, wall = _feed(tl, slices, emits, tps)
    out = tl.metrics()
    entries = out["entries"]
    assert len(entries) <= cap
    assert sum(e["tuples"] for e in entries) == tuples
    assert sum(e["results"] for e in entries) == results
    assert sum(e["instants"] for e in entries) == instants
    assert math.isclose(sum(e["wall_s"] for e in entries), wall, abs_tol=1e-5 * len(entries))
    res = out["resolution_s"]
    assert res & (res - 1) == 0  # a power of two
    assert [e["t_s"] for e in entries] == sorted({e["t_s"] for e in entries})
    assert all(e["t_s"] % res == 0 for e in entries)
    for e in entries:
        lat = e["latency_ms"]
        if e["instants"]:
            assert lat["p50"] is not None and lat["p50"] <= lat["max"]
        else:
            assert lat == {"p50": None, "max": None}
    json.loads(json_text(out))  # JSON-safe


def test_a_tuple_counts_to_its_own_second_and_an_instant_to_the_second_it_closes() -> None:
    tl = Timeline(1000)
    tl.start(0.0)
    tl.tuples(np.array([5_000, 5_999, 6_000, 4_000]))  # origin 5 s; 4 s is before it
    tl.emitted(6_000, 3, 2.0, 1.0)  # instant 6 s closes (5 s, 6 s]: second 0
    tl.emitted(7_000, 1, 4.0, 1.5)
    tl.step_done(2.0)
    e0, e1 = tl.metrics()["entries"]
    assert (e0["t_s"], e0["tuples"], e0["results"], e0["wall_s"]) == (0, 3, 3, 1.0)
    assert (e1["t_s"], e1["tuples"], e1["results"], e1["wall_s"]) == (1, 1, 1, 1.0)
    assert e0["throughput"] == 3.0 and e1["latency_ms"] == {"p50": 4.0, "max": 4.0}


def test_a_long_run_is_coarsened_and_a_huge_gap_costs_nothing() -> None:
    tl = Timeline(1, max_entries=100)
    tl.start(0.0)
    for s in range(1000):
        tl.tuples(np.array([s, s]))
        tl.step_done(float(s + 1))
    out = tl.metrics()
    assert out["resolution_s"] == 16 and len(out["entries"]) == 63
    assert sum(e["tuples"] for e in out["entries"]) == 2000
    gap = Timeline(1000)
    gap.start(0.0)
    gap.tuples(np.array([0, 2**62, 5]))  # a slice across ~146 million years: no dense count
    assert sum(e["tuples"] for e in gap.metrics()["entries"]) == 3


def test_each_entry_names_the_plan_in_charge() -> None:
    tl = Timeline(1)
    tl.start(0.0)
    tl.tuples(np.arange(100, 130))
    tl.step_done(1.0)
    entries = tl.metrics([None, 110, 120])["entries"]
    plan = {e["t_s"]: e["plan"] for e in entries}
    # second 9 holds instants up to 110: plan 0 emitted them; 10 is plan 1's from 111
    assert (plan[0], plan[9], plan[10], plan[19], plan[20]) == (0, 0, 1, 1, 2)


# -- the report ---------------------------------------------------------------------------

HOSTILE = "</td><script>alert('x')</script><img src=x onerror=alert(1)>"


class _Text(HTMLParser):
    """Visible text plus tooltip (``<title>``) text, and the tags of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._style = False

    def handle_data(self, data: str) -> None:
        if not self._style:
            self.text.append(data)


def _metrics_with(hostile: str) -> dict[str, Any]:
    tl = Timeline(1)
    tl.start(0.0)
    for s in range(30):
        tl.tuples(np.array([1000 + s] * 10))
        tl.emitted(1000 + s + 1, 2, 1.0 + s, s + 0.5)
        tl.step_done(s + 1.0)
    label_a = {"join_order": ["r", hostile], "placement": {hostile: "duckdb", "join1": "row"}}
    label_b = {"join_order": [hostile, "r"], "placement": {"join1": "row"}}
    record = {
        "at": 1010,
        "at_s": 10.0,
        "requested_at_s": 10.0,
        "source": f"10={hostile}.json",
        "reason": {"kind": "scripted"},
        "strategy": "gpt",
        "strategy_choice": hostile,
        "from": label_a,
        "to": label_b,
        "duration_ms": 12.5,
        "states_moved": 0,
        "states_recomputed": None,
        "keys_completed": None,
        "tuples_replayed": 0,
        "output_gap_ms": 3.25,
        "old_plan_dropped_at": 1020,
        "switched_at": 1020,
        "completed": True,
        "happened": True,
        "note": hostile,
    }
    decisions = [
        {"at": 1000 + s, "decision": "stay", "why": f"warming up {hostile}"} for s in range(5)
    ] + [
        {
            "at": 1005,
            "decision": "migrate",
            "trigger": "better",
            "running": {"utilization": 0.5},
            "best": {"utilization": 0.1},
        }
    ]
    return {
        "tuples_in": 300,
        "placement": {},
        "operators": {},
        "migrations": [record],
        "plans": [
            {"from_instant": None, **label_a},
            {"from_instant": 1020, **label_b},
        ],
        "adapt_decisions": decisions,
        "timeline": tl.metrics([None, 1020]),
    }


@pytest.fixture(scope="module")
def q2_opt() -> Any:
    return optimize(api.load_query(Q2), OptimizerOptions(rate=40_000.0, cost_model="analytical"))


def test_the_report_marks_migrations_and_escapes_their_labels(q2_opt: Any) -> None:
    page = render(build_report(q2_opt, run_metrics=_metrics_with(HOSTILE)))
    assert "<script" not in page and "<img" not in page
    parsed = _Text()
    parsed.feed(page)
    text = "".join(parsed.text)
    assert 'id="timeline"' in page and 'class="timeline"' in page
    assert text.count(HOSTILE) >= 6  # source, choice, orders, placement, note, decision
    markers = [a for t, a in parsed.tags if t == "g" and a.get("class") == "marker"]
    assert len(markers) == 1
    assert "M1 gpt" in text and f"r,{HOSTILE} [{HOSTILE}: duckdb] -> {HOSTILE},r" in text
    assert "old plan dropped at 20 s" in text  # (1020 - origin 1000) / 1 tick per second
    # five "warming up" checks fold into one row; the migrate check has its own
    assert "10 s – 14 s" not in text and "0 s – 4 s" in text and "trigger: better" in text
    bands = [a for t, a in parsed.tags if t == "rect" and a.get("class") == "band"]
    assert len(bands) == 2


def test_a_run_without_migrations_shows_the_timeline_only(q2_opt: Any) -> None:
    metrics = _metrics_with("x")
    for key in ("migrations", "plans", "adapt_decisions"):
        del metrics[key]
    page = render(build_report(q2_opt, run_metrics=metrics))
    assert 'class="timeline"' in page and 'class="marker"' not in page
    assert "<h3>Migrations</h3>" not in page and "Adaptive decisions" not in page

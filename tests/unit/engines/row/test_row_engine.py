"""Row-engine behaviour that the differential tests do not pin down by themselves:
hand-computed results, operator state, snapshot/restore, lateness and count slides."""

from __future__ import annotations

import copy
import pickle
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from engines.row.executor import RowExecutor
from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import PlanError
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text

CATALOG_TEXT = """
[streams.s]
timestamp = "ts"
rate = 10
[streams.s.columns]
ts = "BIGINT"
k = "INTEGER"
v = "DOUBLE"
"""


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return parse_catalog_text(CATALOG_TEXT)


def _table(rows: list[tuple[int, int, float]]) -> pa.Table:
    ts, k, v = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            "k": pa.array(k, pa.int32()),
            "v": pa.array(v, pa.float64()),
        }
    )


def _run(
    query: str, cat: Catalog, rows: list[tuple[int, int, float]], batch: int = 3
) -> tuple[list[tuple[int, tuple[Any, ...]]], RowExecutor]:
    out: list[tuple[int, tuple[Any, ...]]] = []
    ex = RowExecutor(plan_query(query, cat), lambda t, rs: out.extend((t, r) for r in rs))
    for b in _table(rows).to_batches(max_chunksize=batch):
        ex.ingest("s", b, 0)
    ex.finish()
    return out, ex


def _per_instant(out: list[tuple[int, tuple[Any, ...]]]) -> dict[int, Counter[tuple[Any, ...]]]:
    res: dict[int, Counter[tuple[Any, ...]]] = {}
    for t, r in out:
        res.setdefault(t, Counter())[r] += 1
    return res


DATA = [(1, 1, 1.0), (1, 2, 5.0), (2, 1, 3.0), (3, 1, 2.0), (5, 2, 4.0), (6, 1, 1.0)]


def test_sliding_sum_and_max_by_hand(cat: Catalog) -> None:
    out, _ = _run(
        "SELECT k, SUM(v) AS s, MAX(v) AS m FROM s [RANGE 3 SECONDS] GROUP BY k", cat, DATA
    )
    got = _per_instant(out)
    assert sorted(got) == [1, 2, 3, 4, 5, 6]  # instants from min ts to max ts, gaps included
    assert got[1] == Counter({(1, 1.0, 1.0): 1, (2, 5.0, 5.0): 1})
    assert got[3] == Counter({(1, 6.0, 3.0): 1, (2, 5.0, 5.0): 1})  # (0, 3]
    assert got[4] == Counter({(1, 5.0, 3.0): 1})  # (1, 4]: ts 1 expired
    assert got[5] == Counter({(1, 2.0, 2.0): 1, (2, 4.0, 4.0): 1})
    assert got[6] == Counter({(1, 1.0, 1.0): 1, (2, 4.0, 4.0): 1})


def test_global_count_over_empty_window_is_zero(cat: Catalog) -> None:
    out, _ = _run("SELECT COUNT(*) AS n, SUM(v) AS s FROM s [RANGE 1 SECOND]", cat, DATA)
    got = _per_instant(out)
    assert got[4] == Counter({(0, None): 1})
    assert got[1] == Counter({(2, 6.0): 1})


def test_istream_and_dstream_are_bag_differences(cat: Catalog) -> None:
    ins, _ = _run("SELECT ISTREAM k FROM s [RANGE 2 SECONDS]", cat, DATA)
    dels, _ = _run("SELECT DSTREAM k FROM s [RANGE 2 SECONDS]", cat, DATA)
    # Window (T-2, T]: T=1 {1,2}; T=2 {1,2,1}; T=3 {1,1}; T=4 {1}; T=5 {2}; T=6 {2,1}
    assert _per_instant(ins) == {
        1: Counter({(1,): 1, (2,): 1}),
        2: Counter({(1,): 1}),
        5: Counter({(2,): 1}),
        6: Counter({(1,): 1}),
    }
    assert _per_instant(dels) == {
        3: Counter({(2,): 1}),
        4: Counter({(1,): 1}),
        5: Counter({(1,): 1}),
    }


def test_now_window_and_tumbling_use_replacing_deltas(cat: Catalog) -> None:
    out, ex = _run("SELECT RSTREAM k, v * 2 AS d FROM s [NOW] WHERE v > 1", cat, DATA)
    assert _per_instant(out) == {
        1: Counter({(2, 10.0): 1}),
        2: Counter({(1, 6.0): 1}),
        3: Counter({(1, 4.0): 1}),
        5: Counter({(2, 8.0): 1}),
    }
    assert all(n.op.replace_out for n in ex.nodes if n.op.kind in ("window", "select", "project"))


def test_late_tuples_are_dead_lettered(cat: Catalog) -> None:
    rows = [(1, 1, 1.0), (3, 1, 1.0), (2, 1, 7.0), (4, 1, 1.0), (1, 1, 9.0), (4, 2, 2.0)]
    out, ex = _run("SELECT COUNT(*) AS n FROM s [UNBOUNDED]", cat, rows, batch=1)
    # ts 2 arrives after instant 2 fired (ts 3 was seen); ts 1 arrives after instant 3 fired.
    assert ex.late_count == 2
    assert _per_instant(out)[4] == Counter({(4,): 1})


def test_count_slide_fires_every_m_tuples(cat: Catalog) -> None:
    out, _ = _run("SELECT SUM(v) AS s FROM s [ROWS 3 SLIDE 2]", cat, DATA, batch=4)
    # evaluations after tuples 2, 4, 6: windows {1,5}, {5,3,2}, {2,4,1}
    assert out == [(1, (6.0,)), (3, (10.0,)), (6, (7.0,))]


def test_count_slide_cannot_mix_with_other_windows(cat: Catalog) -> None:
    plan = plan_query("SELECT a.k FROM s [ROWS 3 SLIDE 2] AS a, s [NOW] AS b", cat)
    with pytest.raises(PlanError, match="tuple-count SLIDE"):
        RowExecutor(plan, lambda t, r: None)


QUERIES = [
    "SELECT k, AVG(v) AS a, MAX(v) AS m, MEDIAN(v) AS med FROM s [RANGE 4 SECONDS] GROUP BY k",
    "SELECT a.k, COUNT(*) AS n FROM s [RANGE 3 SECONDS] AS a JOIN s [RANGE 5 SECONDS] AS b "
    "ON a.k = b.k AND a.v < b.v GROUP BY a.k",
    "SELECT ISTREAM COUNT(DISTINCT k) AS n FROM s [ROWS 4]",
]


@pytest.mark.parametrize("query", QUERIES)
def test_snapshot_restore_mid_run_gives_the_same_stream(cat: Catalog, query: str) -> None:
    rows = [(t, t % 3, float((t * 7) % 11)) for t in range(1, 40) for _ in range(2)]
    table = _table(rows)
    plan = plan_query(query, cat)
    full: list[Any] = []
    ex = RowExecutor(plan, lambda t, rs: full.extend((t, r) for r in rs))
    for b in table.to_batches(max_chunksize=5):
        ex.ingest("s", b, 0)
    ex.finish()

    first: list[Any] = []
    a = RowExecutor(plan, lambda t, rs: first.extend((t, r) for r in rs))
    batches = table.to_batches(max_chunksize=5)
    for b in batches[:7]:
        a.ingest("s", b, 0)
    snap = pickle.loads(pickle.dumps(a.snapshot()))  # plain data: survives serialisation
    state = copy.deepcopy(a.operator_state())
    assert state and all(isinstance(v, dict) for v in state.values())
    b2 = RowExecutor(plan, lambda t, rs: first.extend((t, r) for r in rs))
    b2.restore(snap)
    for b in batches[7:]:
        b2.ingest("s", b, 0)
    b2.finish()
    assert _per_instant(first) == _per_instant(full)


def test_window_state_exposes_timestamps(cat: Catalog) -> None:
    _, ex = _run("SELECT SUM(v) AS s FROM s [RANGE 3 SECONDS]", cat, DATA)
    win = ex.operator_state()["window1"]
    assert win["oldest_pane"] == 5 and win["newest_pane"] == 6 and win["tuples"] == 2
    _, ex = _run("SELECT a.v FROM s [RANGE 3 SECONDS] AS a, s [NOW] AS b", cat, DATA)
    win = ex.operator_state()["window1"]
    assert win["oldest_ts"] == 5 and win["newest_ts"] == 6 and win["tuples"] == 2


PANED = [
    "SELECT k, COUNT(*) AS n, SUM(v) AS s, AVG(v) AS a, MIN(v) AS lo, MAX(v) AS hi "
    "FROM s [RANGE 6 SECONDS SLIDE 2 SECONDS] WHERE v > 1 GROUP BY k",
    "SELECT MAX(v * 2) AS m, COUNT(v) AS c FROM s [RANGE 4 SECONDS]",
    "SELECT ISTREAM k, MIN(v) AS lo FROM s [RANGE 5 SECONDS] GROUP BY k",
]


@pytest.mark.parametrize("query", PANED)
def test_panes_match_tuple_at_a_time_windows(cat: Catalog, query: str) -> None:
    rows = [(t, (t * 5) % 3, float((t * 7) % 11)) for t in range(1, 60) for _ in range(3)]
    rows += [(70, 1, 2.0), (71, 2, 9.0)]  # a gap: panes expire with no new tuples
    plan = plan_query(query, cat)
    results = []
    for panes in (True, False):
        out: list[Any] = []
        ex = RowExecutor(plan, lambda t, rs, o=out: o.extend((t, r) for r in rs), panes=panes)
        assert ("PanedRangeWindow" in type(ex.windows[0]).__name__) == panes
        for b in _table(rows).to_batches(max_chunksize=4):
            ex.ingest("s", b, 0)
        ex.finish()
        results.append(_per_instant(out))
    assert results[0] == results[1]


@pytest.mark.parametrize(
    ("window", "late_insert", "expect"),
    [
        ("RANGE 5 SECONDS", True, "insert"),
        ("RANGE 6 SECONDS SLIDE 2 SECONDS", True, "insert"),
        ("UNBOUNDED", True, "insert"),
        ("NOW", True, "drop"),  # its window at the next instant never holds a late tuple
        ("RANGE 2 SECONDS SLIDE 2 SECONDS", True, "drop"),  # tumbling: nor does this one
        ("ROWS 3", True, "drop"),  # defined on arrival order
        ("RANGE 5 SECONDS", False, "drop"),
    ],
)
def test_late_policy_says_what_becomes_of_late_tuples(
    cat: Catalog, window: str, late_insert: bool, expect: str
) -> None:
    """What a quality-driven policy prices (engines/disorder/quality.py)."""
    plan = plan_query(f"SELECT k, SUM(v) AS s FROM s [{window}] GROUP BY k", cat)
    ex = RowExecutor(plan, lambda t, r: None, late_insert=late_insert)
    assert ex.late_policy() == {"s": expect}

"""Windowed SUM and AVG of DOUBLE are accurate relative to what is *in* the window.

docs/semantics.md ("Floating-point sums") bounds every engine's window sum of n values x_i by
``|SUM - S| <= gamma(n-1) * sum(|x_i|)`` and the mean by ``|AVG - S/n| <= gamma(n) * sum(|x_i|)
/ n``, with ``S`` the exact sum and ``gamma(k) = k*u / (1 - k*u)``, ``u = 2**-53``: the bound of
adding up exactly the window's values in some order. A running sum that subtracts expired
values breaks it as soon as a large value has passed through the window (1e15 followed by
0.001s), which is what these tests pin down on every path that computes a sum:

* the row engine's paned windows (pane partials, two stacks per group),
* its tuple-at-a-time FIFO windows (two stacks per group; RANGE without panes and ROWS),
* its non-FIFO input (an aggregate over a join: exact integer sums),
* DuckDB and Spark placements (the whole window re-aggregated at every instant).

The exact sums are computed here with ``fractions.Fraction`` over each window's contents,
independently of every engine and of the oracle.

The issue's second example comes out as 2.0999999999999996, not 2.1: three 0.7s added in
doubles give that in any order (the exact sum lies halfway between the two doubles); the
old running sum gave 2.1000000059604647.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engines.row.executor import RowExecutor
from hycq.api import execute
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import make_readings

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")
U = Fraction(1, 2**53)
RANGE = 4

#: One query per path that computes a sum; ``{w}`` is the window.
GROUPED = "SELECT plug_id, SUM(value) AS s, AVG(value) AS a, COUNT(*) AS c FROM readings {w} " \
    "GROUP BY plug_id"  # fmt: skip
#: After a join with a one-row relation: the aggregate sees deletes in any order (non-FIFO).
JOINED = (
    "SELECT r.plug_id, SUM(r.value) AS s, AVG(r.value) AS a, COUNT(*) AS c "
    "FROM readings {w} AS r, (SELECT COUNT(*) AS n FROM readings {w}) AS g "
    "GROUP BY r.plug_id"
)


def gamma(k: int) -> Fraction:
    return k * U / (1 - k * U) if k > 0 else Fraction(0)


def window_contents(rows: list[tuple[int, float, int]], t: int, window: str) -> list[Any]:
    """The tuples (ts, value, plug) in the window at instant ``t`` (docs/semantics.md)."""
    seen = [r for r in rows if r[0] <= t]
    if window.startswith("[ROWS"):
        n = int(window.split()[1].rstrip("]"))
        order = sorted(range(len(seen)), key=lambda i: seen[i][0])  # stable: ties by arrival
        return [seen[i] for i in order[-n:]]
    size = int(window.split()[1])  # [RANGE <size> SECONDS ...]
    return [r for r in seen if t - size < r[0]]


def check_stream(
    got: list[tuple[int, tuple[Any, ...]]], rows: list[tuple[int, float, int]], window: str
) -> None:
    """Every (instant, plug) row within the bound of its window's exact sum; none missing."""
    lo, hi = min(r[0] for r in rows), max(r[0] for r in rows)
    expected: dict[tuple[int, int], list[float]] = defaultdict(list)
    for t in range(lo, hi + 1):
        for _, v, plug in window_contents(rows, t, window):
            expected[(t, plug)].append(v)
    seen = set()
    for t, (plug, s, a, c) in got:
        xs = expected[(t, plug)]
        assert c == len(xs), (t, plug, c, xs)
        exact = sum(map(Fraction, xs), Fraction(0))
        mass = sum((abs(Fraction(x)) for x in xs), Fraction(0))
        n = len(xs)
        assert abs(Fraction(s) - exact) <= gamma(n - 1) * mass, (t, plug, s, float(exact), xs)
        assert abs(Fraction(a) - exact / n) <= gamma(n) * mass / n, (t, plug, a, xs)
        seen.add((t, plug))
    assert seen == set(expected), sorted(set(expected) ^ seen)[:5]


def run_row(query: str, rows: list[tuple[int, float, int]], panes: bool) -> list[Any]:
    out: list[tuple[int, tuple[Any, ...]]] = []
    ex = RowExecutor(
        plan_query(query, CATALOG), lambda t, rs: out.extend((t, r) for r in rs), panes=panes
    )
    for batch in make_readings(rows).to_batches(max_chunksize=3):
        ex.ingest("readings", batch, 1)
    ex.finish()
    return out


def run_placement(
    query: str, rows: list[tuple[int, float, int]], placement: str, engine: str = "duckdb"
) -> list[Any]:
    result = execute(
        plan_query(query, CATALOG),
        CATALOG,
        {"readings": make_readings(rows)},
        placement=placement,
        column_engine=engine,
    )
    names = [c for c in result.table.column_names if c != "_ts"]
    cols = [result.table.column(c).to_pylist() for c in names]
    return list(zip(result.table.column("_ts").to_pylist(), zip(*cols, strict=True), strict=True))


def row_paths(window: str) -> dict[str, Callable[[list[Any]], list[Any]]]:
    """The row engine's ways of computing one windowed sum, by name."""
    grouped, joined = GROUPED.format(w=window), JOINED.format(w=window)
    return {
        "panes": lambda rows: run_row(grouped, rows, panes=True),
        "fifo": lambda rows: run_row(grouped, rows, panes=False),
        "join": lambda rows: run_row(joined, rows, panes=True),
    }


# -- the issue's examples ----------------------------------------------------------------------

BIG_THEN_SMALL = [(1400000000, 1e15, 1)] + [(1400000000 + i, 0.001, 1) for i in (1, 2, 3, 4)]
AWKWARD = [(1000, 123456789.123, 1)] + [(1000 + i, 0.7, 1) for i in (1, 2, 3, 4, 5)]
WINDOW3 = "[RANGE 3 SECONDS]"


def _at(got: list[Any], t: int) -> tuple[Any, ...]:
    (row,) = [r for ts, r in got if ts == t]
    return tuple(row)


@pytest.mark.parametrize("path", ["panes", "fifo", "join"])
def test_large_value_leaving_the_window_is_forgotten_on_the_row_engine(path: str) -> None:
    got = row_paths(WINDOW3)[path](BIG_THEN_SMALL)
    assert _at(got, 1400000003)[1:] == (0.003, 0.001, 3)
    assert _at(got, 1400000004)[1:] == (0.003, 0.001, 3)
    got = row_paths(WINDOW3)[path](AWKWARD)
    for t in (1003, 1004, 1005):  # 0.7 + 0.7 + 0.7 is 2.0999999999999996 in doubles
        s, a, c = _at(got, t)[1:]
        assert abs(s - 2.1) < 5e-16 and abs(a - 0.7) < 2e-16 and c == 3
    check_stream(got, AWKWARD, WINDOW3)


@pytest.mark.parametrize("placement", ["row", "column"])
def test_issue_example_on_row_and_duckdb_placements(placement: str) -> None:
    q = "SELECT SUM(value) AS s, AVG(value) AS a, COUNT(*) AS c FROM readings [RANGE 3 SECONDS]"
    got = run_placement(q, BIG_THEN_SMALL, placement)
    assert _at(got, 1400000003) == (0.003, 0.001, 3)


@pytest.mark.spark
def test_issue_examples_on_spark() -> None:
    q = "SELECT SUM(value) AS s, AVG(value) AS a, COUNT(*) AS c FROM readings [RANGE 3 SECONDS]"
    got = run_placement(q, BIG_THEN_SMALL, "column", "spark")
    assert _at(got, 1400000003) == (0.003, 0.001, 3)
    check_stream(run_placement(GROUPED.format(w=WINDOW3), AWKWARD, "column", "spark"), AWKWARD,
                 WINDOW3)  # fmt: skip


# -- random values spanning 1e-3 .. 1e15, both signs -------------------------------------------

magnitudes = st.one_of(
    st.floats(-3, 15).map(lambda e: 10.0**e),
    st.sampled_from([1e15, 0.001, 0.1, 0.2, 0.3, 123456789.123, 0.7]),
)
values = st.builds(lambda sign, m: sign * m, st.sampled_from([1.0, -1.0]), magnitudes)


@st.composite
def streams(draw: st.DrawFn) -> list[tuple[int, float, int]]:
    """In-order tuples (ts, value, plug): gaps and equal timestamps, two plugs."""
    n = draw(st.integers(1, 30))
    steps = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    ts, rows = 1000, []
    for step in steps:
        ts += step
        rows.append((ts, draw(values), draw(st.integers(0, 1))))
    return rows


WINDOWS = [f"[RANGE {RANGE} SECONDS]", f"[RANGE {RANGE} SECONDS SLIDE 1 SECOND]", "[ROWS 5]"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=streams(), window=st.sampled_from(WINDOWS), path=st.sampled_from(["panes", "fifo"]))
def test_row_engine_fifo_sums_within_the_bound(
    rows: list[tuple[int, float, int]], window: str, path: str
) -> None:
    check_stream(row_paths(window)[path](rows), rows, window)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=streams())
def test_row_engine_sums_after_a_join_within_the_bound(rows: list[tuple[int, float, int]]) -> None:
    window = f"[RANGE {RANGE} SECONDS]"
    check_stream(row_paths(window)["join"](rows), rows, window)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=streams(), window=st.sampled_from(WINDOWS))
def test_duckdb_sums_within_the_bound(rows: list[tuple[int, float, int]], window: str) -> None:
    check_stream(run_placement(GROUPED.format(w=window), rows, "column"), rows, window)


SPARK_CASES = [
    BIG_THEN_SMALL,
    [(1000, -1e15, 0), (1000, 1e15, 0), (1001, 0.001, 0), (1002, -3.5e-3, 1), (1003, 7e12, 1)],
    [(1000 + i // 2, (-1) ** i * 10.0 ** (i % 19 - 3), i % 2) for i in range(14)],
]


@pytest.mark.spark
@pytest.mark.parametrize("rows", SPARK_CASES)
def test_spark_sums_within_the_bound(rows: list[tuple[int, float, int]]) -> None:
    window = f"[RANGE {RANGE} SECONDS]"
    check_stream(run_placement(GROUPED.format(w=window), rows, "column", "spark"), rows, window)


def test_sum_over_an_unbounded_window_keeps_constant_state() -> None:
    """Nothing leaves an UNBOUNDED window: its DOUBLE sum stays a plain running sum (the
    two stacks would keep every value for good)."""
    ex = RowExecutor(
        plan_query("SELECT plug_id, SUM(value) AS s FROM readings [UNBOUNDED] GROUP BY plug_id",
                   CATALOG),
        lambda t, r: None,
    )  # fmt: skip
    (agg,) = [n.op for n in ex.nodes if n.op.kind == "aggregate"]
    rows = [(1000 + i, 0.5, 0) for i in range(50)]
    ex.ingest("readings", make_readings(rows).to_batches()[0], 1)
    ex.finish()
    assert all(not isinstance(v, list) for st_ in agg.groups.values() for v in st_)
    assert agg.out[0] == (0, 25.0)


def test_nonfinite_values_in_exact_sums() -> None:
    """Sums after a join hold +-inf and NaN as IEEE addition does, and recover once they
    leave the window (an exact sum has no memory of them)."""
    q = JOINED.format(w="[RANGE 2 SECONDS]").replace("SUM(r.value)", "SUM(r.value / r.id)")
    rows = [(1000, 1.0, 0), (1001, -1.0, 0), (1002, 2.0, 0), (1003, 0.0, 0), (1005, 3.0, 0)]
    ids = [0, 0, 1, 0, 1]  # value / id: inf, -inf, 2, NaN, 3
    table = make_readings(rows).set_column(0, "id", pa.array(ids, pa.int64()))
    out: list[Any] = []
    ex = RowExecutor(plan_query(q, CATALOG), lambda t, rs: out.extend((t, r) for r in rs))
    ex.ingest("readings", table.to_batches()[0], 1)
    ex.finish()
    s = {t: r[1] for t, r in out}
    inf = float("inf")
    assert s[1000] == inf and s[1002] == -inf
    assert all(s[t] != s[t] for t in (1001, 1003, 1004))  # NaN
    assert s[1005] == 3.0

"""Windowed SUM and AVG of DOUBLE are exact: the same bits on every path and engine.

docs/semantics.md ("Floating-point sums"): the SUM of the DOUBLE values in a window is their
exact sum rounded once to the nearest double (ties to even, an exact zero is +0.0, beyond
the largest double an infinity), and AVG is that SUM divided by the count (one IEEE
division). The result then depends on the multiset of values only, never on the order they
arrived or left in, the batch sizes or the engine. These tests compare bits (``float.hex``)
with a truth computed here with ``fractions.Fraction`` over each window's contents,
independently of every engine, the kernels and the oracle, on every path that computes a sum:

* the row engine's paned windows (exact pane partials, merged by integer arithmetic),
* its tuple-at-a-time FIFO windows (RANGE without panes, ROWS),
* its non-FIFO input (an aggregate over a join: deletes in any order),
* its inputs without deletes (a tumbling window's replaced relation, UNBOUNDED),
* DuckDB and DataFusion placements (the whole plan columnar, or only the aggregate), and
  Spark's (under the ``spark`` mark),

over values with ties (a constant plug, whose AVG is its value), mixed magnitudes (1e16, 1,
-1e16: a running sum loses the 1), subnormals, and sums that overflow.
"""

from __future__ import annotations

import math
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
from hycq.api import execute, resolve_placement
from optimizer.ir.placement import complete_placement
from optimizer.ir.plan import Aggregate
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import make_readings
from tests.oracle import plan_instants

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")
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

Stream = list[tuple[int, float, int]]  # (ts, value, plug), in arrival order
Output = list[tuple[int, tuple[Any, ...]]]  # (instant, row)


# -- the truth ---------------------------------------------------------------------------------


def exact_sum(xs: list[float]) -> float:
    """The exact sum of finite doubles rounded once to the nearest double, ties to even
    (``int / int`` is correctly rounded); +0.0 for an exact zero; an infinity beyond the
    largest double (where the exact sum rounds past it)."""
    total = sum(map(Fraction, xs), Fraction(0))
    try:
        return total.numerator / total.denominator + 0.0
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def parse_window(window: str) -> tuple[str, int, int]:
    """(kind, size, slide) of ``[RANGE r SECONDS [SLIDE s SECONDS]]``, ``[ROWS n]`` or
    ``[UNBOUNDED]`` (size 0)."""
    words = window.strip("[]").split()
    if words[0] == "UNBOUNDED":
        return "UNBOUNDED", 0, 1
    if words[0] == "ROWS":
        return "ROWS", int(words[1]), 1
    slide = int(words[4]) if "SLIDE" in words else 1
    return "RANGE", int(words[1]), slide


def window_contents(rows: Stream, t: int, window: str) -> Stream:
    """The tuples in the window at instant ``t`` (docs/semantics.md, "Slide instants")."""
    kind, size, _ = parse_window(window)
    seen = [r for r in rows if r[0] <= t]
    if kind == "ROWS":
        order = sorted(range(len(seen)), key=lambda i: seen[i][0])  # stable: ties by arrival
        return [seen[i] for i in order[-size:]]
    if kind == "UNBOUNDED":
        return seen
    return [r for r in seen if t - size < r[0]]


def expected_rows(rows: Stream, window: str) -> dict[tuple[int, int], tuple[str, str, int]]:
    """(instant, plug) -> (SUM, AVG as ``float.hex``, COUNT) at every plan instant."""
    _, _, slide = parse_window(window)
    lo, hi = min(r[0] for r in rows), max(r[0] for r in rows)
    values: dict[tuple[int, int], list[float]] = defaultdict(list)
    for t in plan_instants([slide], lo, hi):
        for _, v, plug in window_contents(rows, t, window):
            values[(t, plug)].append(v)
    out = {}
    for key, xs in values.items():
        s = exact_sum(xs)
        out[key] = (s.hex(), (s / len(xs)).hex(), len(xs))
    return out


def check_stream(got: Output, rows: Stream, window: str) -> None:
    """Every (instant, plug) row is the truth's, bit for bit; none missing or extra."""
    want = expected_rows(rows, window)
    have = {}
    for t, (plug, s, a, c) in got:
        assert (t, plug) not in have, f"two rows for plug {plug} at {t}"
        have[(t, plug)] = (float(s).hex(), float(a).hex(), c)
    wrong = {
        k: (have.get(k), want.get(k)) for k in set(want) | set(have) if have.get(k) != want.get(k)
    }
    assert not wrong, "(instant, plug): (got, exact) for " + "; ".join(
        f"{k}: {v}" for k, v in sorted(wrong.items())[:5]
    )


# -- the paths ---------------------------------------------------------------------------------


def run_row(query: str, rows: Stream, panes: bool, batch: int = 3) -> Output:
    out: Output = []
    ex = RowExecutor(
        plan_query(query, CATALOG), lambda t, rs: out.extend((t, r) for r in rs), panes=panes
    )
    for b in make_readings(rows).to_batches(max_chunksize=batch):
        ex.ingest("readings", b, 1)
    ex.finish()
    return out


def run_placement(
    query: str, rows: Stream, placement: str, engine: str = "duckdb", batch: int = 0
) -> Output:
    """The stream of ``placement``: "row", "column" (every operator ``engine`` can run) or
    "mixed" (the aggregates on ``engine``, the rest on the row engine); ``batch`` > 0 feeds
    the input in batches of that many rows."""
    plan = plan_query(query, CATALOG)
    chosen: str | dict[str, str] = placement
    if placement == "mixed":
        aggs = [op.id for op in plan.operators() if isinstance(op, Aggregate)]
        chosen = complete_placement(
            plan, {**resolve_placement(plan, "row"), **dict.fromkeys(aggs, engine)}
        )
    data: Any = make_readings(rows)
    if batch:
        data = data.to_batches(max_chunksize=batch)
    result = execute(plan, CATALOG, {"readings": data}, placement=chosen, column_engine=engine)
    names = [c for c in result.table.column_names if c != "_ts"]
    cols = [result.table.column(c).to_pylist() for c in names]
    return list(zip(result.table.column("_ts").to_pylist(), zip(*cols, strict=True), strict=True))


def row_paths(window: str) -> dict[str, Callable[[Stream, int], Output]]:
    """The row engine's ways of computing one windowed sum, by name (``(rows, batch)``)."""
    grouped, joined = GROUPED.format(w=window), JOINED.format(w=window)
    return {
        "panes": lambda rows, b: run_row(grouped, rows, panes=True, batch=b),
        "fifo": lambda rows, b: run_row(grouped, rows, panes=False, batch=b),
        "join": lambda rows, b: run_row(joined, rows, panes=True, batch=b),
    }


# -- the issue's examples ----------------------------------------------------------------------

BIG_THEN_SMALL = [(1400000000, 1e15, 1)] + [(1400000000 + i, 0.001, 1) for i in (1, 2, 3, 4)]
AWKWARD = [(1000, 123456789.123, 1)] + [(1000 + i, 0.7, 1) for i in (1, 2, 3, 4, 5)]
#: 1e16 + 1 - 1e16 is 0 in any running sum (1e16 + 1 rounds to 1e16); exactly it is 1.
CANCELLING = [(1000, 1e16, 0), (1000, 1.0, 0), (1001, -1e16, 0), (1002, 0.5, 0)]
WINDOW3 = "[RANGE 3 SECONDS]"
#: Subnormals, a sum that overflows to inf, a constant plug.
EXTREMES = [(1000, 5e-324, 0), (1000, 1.7976931348623157e308, 1), (1001, 1.7976931348623157e308, 1)]
EXTREMES += [(1001, -1.5e-323, 0), (1002, 0.7, 2), (1002, 0.7, 2), (1003, 0.7, 2)]
EXAMPLES = [BIG_THEN_SMALL, AWKWARD, CANCELLING, EXTREMES]


def _at(got: Output, t: int) -> tuple[Any, ...]:
    (row,) = [r for ts, r in got if ts == t]
    return tuple(row)


@pytest.mark.parametrize("path", ["panes", "fifo", "join"])
def test_large_value_leaving_the_window_is_forgotten_on_the_row_engine(path: str) -> None:
    got = row_paths(WINDOW3)[path](BIG_THEN_SMALL, 3)
    assert _at(got, 1400000003)[1:] == (0.003, 0.001, 3)
    assert _at(got, 1400000004)[1:] == (0.003, 0.001, 3)
    for rows in EXAMPLES:
        check_stream(row_paths(WINDOW3)[path](rows, 3), rows, WINDOW3)


def test_a_value_next_to_a_huge_one_counts_on_the_row_engine() -> None:
    """1e16 + 1 - 1e16 is 1 (exactly), not 0 (a running sum's), on every row path."""
    for path in ("panes", "fifo", "join"):
        got = row_paths(WINDOW3)[path](CANCELLING, 1)
        assert _at(got, 1001)[1:] == (1.0, 1.0 / 3, 3), path


@pytest.mark.parametrize("engine", ["duckdb", "datafusion"])
@pytest.mark.parametrize("placement", ["row", "column", "mixed"])
def test_issue_examples_on_every_placement(placement: str, engine: str) -> None:
    q = "SELECT SUM(value) AS s, AVG(value) AS a, COUNT(*) AS c FROM readings [RANGE 3 SECONDS]"
    got = run_placement(q, BIG_THEN_SMALL, placement, engine)
    assert _at(got, 1400000003) == (0.003, 0.001, 3)
    for rows in EXAMPLES:
        check_stream(run_placement(GROUPED.format(w=WINDOW3), rows, placement, engine), rows,
                     WINDOW3)  # fmt: skip


@pytest.mark.spark
def test_issue_examples_on_spark() -> None:
    q = "SELECT SUM(value) AS s, AVG(value) AS a, COUNT(*) AS c FROM readings [RANGE 3 SECONDS]"
    got = run_placement(q, BIG_THEN_SMALL, "column", "spark")
    assert _at(got, 1400000003) == (0.003, 0.001, 3)
    for rows in EXAMPLES:
        check_stream(run_placement(GROUPED.format(w=WINDOW3), rows, "column", "spark"), rows,
                     WINDOW3)  # fmt: skip


# -- random values: ties, mixed magnitudes, subnormals, overflow --------------------------------

magnitudes = st.one_of(
    st.floats(-3, 16).map(lambda e: 10.0**e),
    st.sampled_from([1e16, 1.0, 0.001, 0.1, 0.2, 0.3, 123456789.123, 0.7, 0.0]),
    st.integers(1, 2**20).map(lambda k: k * 5e-324),  # subnormals (the smallest is 5e-324)
    st.floats(1e-300, 1e-8),  # below the row engine's coarse units (2**-28)
    st.sampled_from([1.7976931348623157e308, 8.98846567431158e307]),  # sums overflow
)
values = st.builds(lambda sign, m: sign * m, st.sampled_from([1.0, -1.0]), magnitudes)


@st.composite
def streams(draw: st.DrawFn) -> Stream:
    """In-order tuples (ts, value, plug): gaps and equal timestamps, two plugs; plug 2 is
    constant (its AVG is its value, the ties of issue 48)."""
    n = draw(st.integers(1, 30))
    steps = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    constant = draw(st.sampled_from([0.1, 0.7, 271.7, 1e16 / 3, 5e-324, 123456789.123]))
    ts, rows = 1000, []
    for step in steps:
        ts += step
        plug = draw(st.integers(0, 2))
        rows.append((ts, constant if plug == 2 else draw(values), plug))
    return rows


WINDOWS = [
    f"[RANGE {RANGE} SECONDS]",
    f"[RANGE {RANGE} SECONDS SLIDE 2 SECONDS]",
    "[ROWS 5]",
    f"[RANGE {RANGE} SECONDS SLIDE {RANGE} SECONDS]",  # tumbling: a replaced relation
    "[UNBOUNDED]",  # nothing leaves
]
BATCHES = st.sampled_from([1, 3, 1000])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=streams(),
    window=st.sampled_from(WINDOWS),
    path=st.sampled_from(["panes", "fifo"]),
    batch=BATCHES,
)
def test_row_engine_window_sums_are_exact(rows: Stream, window: str, path: str, batch: int) -> None:
    check_stream(row_paths(window)[path](rows, batch), rows, window)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=streams(), window=st.sampled_from(WINDOWS), batch=BATCHES)
def test_row_engine_sums_after_a_join_are_exact(rows: Stream, window: str, batch: int) -> None:
    check_stream(row_paths(window)["join"](rows, batch), rows, window)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=streams(),
    window=st.sampled_from(WINDOWS),
    engine=st.sampled_from(["duckdb", "datafusion"]),
    placement=st.sampled_from(["column", "mixed"]),
    batch=st.sampled_from([0, 2]),
)
def test_columnar_window_sums_are_exact(
    rows: Stream, window: str, engine: str, placement: str, batch: int
) -> None:
    query = (JOINED if placement == "mixed" else GROUPED).format(w=window)
    check_stream(run_placement(query, rows, placement, engine, batch), rows, window)


SPARK_CASES = [
    BIG_THEN_SMALL,
    CANCELLING,
    EXTREMES,
    [(1000, -1e15, 0), (1000, 1e15, 0), (1001, 0.001, 0), (1002, -3.5e-3, 1), (1003, 7e12, 1)],
    [(1000 + i // 2, (-1) ** i * 10.0 ** (i % 19 - 3), i % 2) for i in range(14)],
]


@pytest.mark.spark
@pytest.mark.parametrize("rows", SPARK_CASES)
def test_spark_window_sums_are_exact(rows: Stream) -> None:
    window = f"[RANGE {RANGE} SECONDS]"
    check_stream(run_placement(GROUPED.format(w=window), rows, "column", "spark"), rows, window)


def test_sum_over_an_unbounded_window_keeps_constant_state() -> None:
    """Nothing leaves an UNBOUNDED window: its DOUBLE sum's state is three integers per
    group, however many values it has seen (no list of them)."""
    ex = RowExecutor(
        plan_query("SELECT plug_id, SUM(value) AS s FROM readings [UNBOUNDED] GROUP BY plug_id",
                   CATALOG),
        lambda t, r: None,
    )  # fmt: skip
    (agg,) = [n.op for n in ex.nodes if n.op.kind == "aggregate"]
    rows = [(1000 + i, 0.5, 0) for i in range(50)]
    ex.ingest("readings", make_readings(rows).to_batches()[0], 1)
    ex.finish()
    assert all(isinstance(v, int) for st_ in agg.groups.values() for v in st_)
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

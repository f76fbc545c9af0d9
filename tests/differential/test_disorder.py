"""Disordered streams through K-slack buffers (``--disorder``), every placement against the
truth and against an independent expectation.

The data: keyed streams in event-time order (engines/sources/keyed.py), then each tuple
delayed by a bounded random amount and the stream written in *arrival* order (sorted by
timestamp + delay, ties by position): per stream a maximum delay, very different between
streams in some cases.

* The truth is the oracle (tests/oracle.py) over every tuple: it sorts by event time itself.
* What a run with ``--disorder kslack:K`` must produce comes from the definitions alone:
  each stream's arrivals go through the reference K-slack (tests/kslack_reference.py, tuple
  by tuple from Eq. 3.1), and the released sequences through the documented late rule
  (tests/lateness.py); the tuples it marks are the expected dead letters, and the oracle over
  the others is the expected result.
* With K at least the largest delay, that expectation is the truth itself (checked too).
* With late insertion (``--late insert``, the row engine's windows), a late tuple that falls
  into a window at an instant after the one that had fired when it arrived counts from then
  on: the expected result at instant T is the oracle over the on-time tuples plus the late
  ones that arrived before T fired; only the late tuples in no later window are dead letters.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from engines.runtime.options import RunOptions
from engines.sources.keyed import KeyedGenerator, KeyedStream
from hycq.api import execute
from optimizer.ir.plan import Source
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.differential.test_engines import random_placements
from tests.engines import marks_of
from tests.kslack_reference import delays, released_order
from tests.lateness import late_in_own_stream, late_instants
from tests.oracle import TS, assert_same_stream, oracle, parse_windows, time_base

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "keyed" / "catalog.toml")
KEYED = ROOT / "queries" / "keyed"
QUERIES = {
    "agg": "SELECT k, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS top\n"
    "FROM r [RANGE 5 SECONDS SLIDE 1 SECOND] GROUP BY k",
    "j2": (KEYED / "j2.sql").read_text(),
    "join_aggs": (KEYED / "join_aggs.sql").read_text(),
    "mixed_units": (KEYED / "mixed_units.sql").read_text(),
}
SECONDS = 40
#: Without buffers (or with a small K) the late rule may drop most of a disordered stream.
pytestmark = pytest.mark.filterwarnings("ignore:.*were dead-lettered:RuntimeWarning")


def _disorder(table: pa.Table, max_delay: int, seed: int) -> pa.Table:
    """``table`` (in event-time order) in arrival order: each tuple delayed by 0..max_delay
    ticks of its own stream."""
    rng = np.random.default_rng(seed)
    ts = np.asarray(table.column("ts").to_numpy(), dtype=np.int64)
    arrival = ts + rng.integers(0, max_delay + 1, len(ts))
    return table.take(pa.array(np.lexsort((np.arange(len(ts)), arrival))))


@functools.cache
def _workload(delays_by_stream: tuple[tuple[str, int], ...], seed: int = 3) -> dict[str, pa.Table]:
    """Keyed streams r, s, t (seconds) and m (ms), disordered per ``delays_by_stream``
    ((stream, max delay in its own ticks)); a stream not named stays in order."""
    streams = {n: KeyedStream(n, rate=6, keys=12) for n in "rst"}
    streams["m"] = KeyedStream("m", rate=7, keys=12, time_unit="ms", start=3)
    tables = {n: KeyedGenerator(s, seed=seed).table(SECONDS) for n, s in streams.items()}
    for k, (name, d) in enumerate(delays_by_stream):
        tables[name] = _disorder(tables[name], d, seed + k)
    return tables


def _reads(query: str) -> set[str]:
    plan = plan_query(QUERIES[query], CATALOG)
    return {op.stream for op in plan.operators() if isinstance(op, Source)}


def _expected(
    query: str, data: dict[str, pa.Table], k_by_stream: dict[str, int]
) -> tuple[pa.Table, int]:
    """(result, dead letters) a K-slack of ``k_by_stream`` (ticks of each stream's own unit,
    a whole number of them) must give, from the definitions (module docstring)."""
    reads = _reads(query)
    released = {}
    for name in reads:
        t = data[name]
        order = released_order(t.column("ts").to_pylist(), k_by_stream[name])
        released[name] = t.take(pa.array(order, pa.int64()))
    late = late_in_own_stream(QUERIES[query], CATALOG, released)
    kept = {
        n: t.filter(pa.array([not x for x in late[n]], pa.bool_())) for n, t in released.items()
    }
    return oracle(QUERIES[query], CATALOG, kept), sum(sum(v) for v in late.values())


def _expected_insert(
    query: str, data: dict[str, pa.Table], k_by_stream: dict[str, int]
) -> tuple[pa.Table, int]:
    """(result, dead letters) with late insertion (module docstring), from the definitions:
    a late tuple counts when some window over its stream holds it at an instant after the
    one fired at its arrival (brute force over the window's instants)."""
    from optimizer.ir.catalog import TIME_UNITS_MS
    from optimizer.ir.errors import Source as Text
    from optimizer.sql.parse import parse_select

    tree = parse_select(Text(QUERIES[query]))
    windows = parse_windows(tree, CATALOG)
    base = time_base(tree, CATALOG)
    reads = _reads(query)
    released = {}
    for name in reads:
        t = data[name]
        order = released_order(t.column("ts").to_pylist(), k_by_stream[name])
        released[name] = t.take(pa.array(order, pa.int64()))
    fired = late_instants(QUERIES[query], CATALOG, released)
    on_time: dict[str, list[bool]] = {}
    inserted: list[tuple[int, str, int]] = []  # (fired, stream, row)
    dead = 0
    for name in reads:
        factor = TIME_UNITS_MS[CATALOG.get(name).time_unit] // TIME_UNITS_MS[base]
        ts = released[name].column("ts").to_pylist()
        on_time[name] = [f is None for f in fired[name]]
        for i, f in enumerate(fired[name]):
            if f is None:
                continue
            t = ts[i] * factor
            counts = False
            for w in (w for w in windows if w.stream == name):
                if w.kind == "unbounded":
                    counts = True
                elif w.kind in ("range", "now"):
                    assert w.size is not None
                    first = (f // w.slide + 1) * w.slide
                    counts |= any(
                        big - w.size < t <= big
                        for big in range(first, first + w.size + w.slide, w.slide)
                    )
            if counts:
                inserted.append((f, name, i))
            else:
                dead += 1

    def tables(upto: int | None) -> dict[str, pa.Table]:
        keep = {n: list(v) for n, v in on_time.items()}
        for f, n, i in inserted:
            if upto is not None and f <= upto:
                keep[n][i] = True
        return {n: released[n].filter(pa.array(keep[n], pa.bool_())) for n in reads}

    pieces = []
    bounds = sorted({f for f, _, _ in inserted})
    edges = [None, *bounds]
    for k, lo in enumerate(edges):
        out = oracle(QUERIES[query], CATALOG, tables(lo))
        ts_col = out.column(TS).to_pylist()
        hi = edges[k + 1] if k + 1 < len(edges) else None
        mask = [(lo is None or x > lo) and (hi is None or x <= hi) for x in ts_col]
        pieces.append(out.filter(pa.array(mask, pa.bool_())))
    return pa.concat_tables(pieces), dead


@functools.cache
def _truth(query: str, key: tuple[tuple[str, int], ...]) -> pa.Table:
    data = _workload(key)
    return oracle(QUERIES[query], CATALOG, {n: data[n] for n in _reads(query)})


def _run(
    query: str,
    data: dict[str, pa.Table],
    disorder: str,
    placement: str | dict[str, str] = "row",
    engine: str = "duckdb",
    batch_rows: int | None = None,
    late: str | None = "drop",
) -> Any:
    from engines.disorder.spec import parse_disorder

    plan = plan_query(QUERIES[query], CATALOG, f"{query}.sql")
    inputs: dict[str, Any] = {
        n: t.to_batches(max_chunksize=batch_rows) if batch_rows else t
        for n, t in data.items()
        if n in _reads(query)
    }
    options = RunOptions(keep_results=True, disorder=parse_disorder(disorder), late=late)
    return execute(
        plan, CATALOG, inputs, placement=placement, column_engine=engine, options=options
    )


def _k_ticks(query: str, k_s: float) -> dict[str, int]:
    """K of ``k_s`` seconds in each stream's own ticks (the test's streams: s and ms)."""
    return {n: int(k_s * (1000 if n == "m" else 1)) for n in _reads(query)}


# Each stream's largest delay in its own ticks: r up to 4 s, s up to 2 s, m up to 3000 ms.
DISORDER = (("r", 4), ("s", 2), ("m", 3000))


def test_the_data_is_disordered_as_stated() -> None:
    data = _workload(DISORDER)
    for name, d in DISORDER:
        got = max(delays(data[name].column("ts").to_pylist()))
        assert 0 < got <= d, name
    assert max(delays(data["t"].column("ts").to_pylist())) == 0


PLACEMENTS = [("row", "duckdb"), ("column", "duckdb")]


@pytest.mark.parametrize("query", sorted(QUERIES))
@pytest.mark.parametrize(("placement", "engine"), PLACEMENTS, ids=["row", "duckdb"])
def test_k_covering_the_largest_delay_gives_the_truth(
    query: str, placement: str, engine: str
) -> None:
    data = _workload(DISORDER)
    result = _run(query, data, "kslack:4s", placement, engine)
    assert_same_stream(result.table, _truth(query, DISORDER))
    assert result.dead_letter == 0
    assert result.metrics["tuples_in"] == sum(data[n].num_rows for n in _reads(query))
    expected, dead = _expected(query, data, _k_ticks(query, 4))
    assert dead == 0
    assert_same_stream(expected, _truth(query, DISORDER))


@pytest.mark.parametrize("query", ["agg", "j2", "mixed_units"])
def test_without_buffers_disorder_drops_tuples(query: str) -> None:
    """The default (``none``): the late rule alone, as before (and the same count as the
    independent expectation with K = 0)."""
    data = _workload(DISORDER)
    result = _run(query, data, "none")
    expected, dead = _expected(query, data, dict.fromkeys(_reads(query), 0))
    assert dead > 0
    assert result.dead_letter == dead
    assert_same_stream(result.table, expected)


@pytest.mark.parametrize("query", sorted(QUERIES))
@pytest.mark.parametrize("k_s", [1, 2])
@pytest.mark.parametrize(("placement", "engine"), PLACEMENTS, ids=["row", "duckdb"])
def test_small_k_drops_exactly_what_it_cannot_place(
    query: str, k_s: int, placement: str, engine: str
) -> None:
    data = _workload(DISORDER)
    result = _run(query, data, f"kslack:{k_s}s", placement, engine)
    expected, dead = _expected(query, data, _k_ticks(query, k_s))
    assert result.dead_letter == dead
    assert_same_stream(result.table, expected)
    late = result.metrics["disorder"]["streams"]
    assert sum(s["late_dropped"] for s in late.values()) == dead


@pytest.mark.parametrize("batch_rows", [1, 7, 100])
def test_results_do_not_depend_on_batch_sizes(batch_rows: int) -> None:
    data = _workload(DISORDER)
    result = _run("j2", data, "kslack:1s", batch_rows=batch_rows)
    expected, dead = _expected("j2", data, _k_ticks("j2", 1))
    assert result.dead_letter == dead
    assert_same_stream(result.table, expected)


def test_two_streams_with_very_different_delays() -> None:
    """r in order, s up to 9 s late: a K-slack of 9 s loses nothing; without buffers the late
    rule drops much of s."""
    key = (("s", 9),)
    data = _workload(key)
    result = _run("j2", data, "kslack:9s")
    assert result.dead_letter == 0
    assert_same_stream(result.table, _truth("j2", key))
    d = result.metrics["disorder"]["streams"]
    assert d["s"]["max_delay_s"] == max(delays(data["s"].column("ts").to_pylist()))
    assert d["r"]["max_delay_s"] == 0 and d["s"]["k_s"] == 9
    assert 0 < d["s"]["buffered_peak"] <= 10 * 6 * 2  # within K (+1 s) of the stream's rate
    # An instant's results wait until a tuple K past it has arrived: 9 s in event time.
    lag = result.metrics["disorder"]["event_latency_s"]
    assert lag["max"] >= lag["p50"] >= 9
    short = _run("j2", data, "kslack:2s").metrics["disorder"]["event_latency_s"]
    assert 2 <= short["p50"] < 9
    none = _run("j2", data, "none")
    assert none.dead_letter > data["s"].num_rows // 4


def test_max_k_slack_loses_only_before_the_largest_delay_is_seen() -> None:
    data = _workload(DISORDER)
    result = _run("agg", data, "max")
    d = result.metrics["disorder"]["streams"]["r"]
    assert d["k_s"] == d["max_delay_s"] == max(delays(data["r"].column("ts").to_pylist()))
    none = _run("agg", data, "none")
    assert result.dead_letter < none.dead_letter


@pytest.mark.parametrize("query", sorted(QUERIES))
@pytest.mark.parametrize("k_s", [0, 1])
def test_late_insertion_into_open_row_windows(query: str, k_s: int) -> None:
    data = _workload(DISORDER)
    result = _run(query, data, f"kslack:{k_s}s", late="insert")
    expected, dead = _expected_insert(query, data, _k_ticks(query, k_s))
    _, dropped = _expected(query, data, _k_ticks(query, k_s))
    assert dead < dropped  # the case has late tuples that still count
    assert result.dead_letter == dead
    assert_same_stream(result.table, expected)
    d = result.metrics["disorder"]
    assert d["late_inserted"] == dropped - dead
    assert sum(s["late_inserted"] for s in d["streams"].values()) == dropped - dead


@pytest.mark.parametrize("batch_rows", [1, 13])
def test_late_insertion_does_not_depend_on_batch_sizes(batch_rows: int) -> None:
    data = _workload(DISORDER)
    result = _run("j2", data, "kslack:0s", batch_rows=batch_rows, late="insert")
    expected, dead = _expected_insert("j2", data, _k_ticks("j2", 0))
    assert result.dead_letter == dead
    assert_same_stream(result.table, expected)


@pytest.mark.parametrize("query", ["agg", "j2"])
def test_late_insertion_is_the_default_with_buffers_and_columnar_windows_still_drop(
    query: str,
) -> None:
    """Streams read by an Arrow window (a MIG) drop late tuples even with insertion on."""
    data = _workload(DISORDER)
    result = _run(query, data, "kslack:1s", "column", "duckdb", late=None)
    expected, dead = _expected(query, data, _k_ticks(query, 1))
    assert result.dead_letter == dead
    assert_same_stream(result.table, expected)
    assert result.metrics["disorder"]["late"] == "insert"


MIXED = [("row", "duckdb")]


@pytest.mark.parametrize("mix", [pytest.param(m, marks=marks_of(m), id="+".join(m)) for m in MIXED])
@pytest.mark.parametrize("query", ["j2", "join_aggs"])
def test_mixed_placements(query: str, mix: tuple[str, ...]) -> None:
    plan = plan_query(QUERIES[query], CATALOG, f"{query}.sql")
    data = _workload(DISORDER)
    expected, dead = _expected(query, data, _k_ticks(query, 1))
    placements = random_placements(plan, 3, mix, seed=5)
    assert placements
    for p in placements:
        exact = _run(query, data, "kslack:4s", p, mix[-1])
        assert_same_stream(exact.table, _truth(query, DISORDER))
        assert exact.dead_letter == 0
        small = _run(query, data, "kslack:1s", p, mix[-1])
        assert small.dead_letter == dead
        assert_same_stream(small.table, expected)


@pytest.mark.spark
def test_spark_with_k_covering_the_largest_delay() -> None:
    data = _workload(DISORDER)
    result = _run("j2", data, "kslack:4s", "column", "spark")
    assert_same_stream(result.table, _truth("j2", DISORDER))
    assert result.dead_letter == 0

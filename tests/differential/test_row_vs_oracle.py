"""The row engine against the oracle (tests/oracle.py), query by query and on random queries.

Every test runs a query on the row engine through ``hycq.api.execute`` (placement ``row``)
and on the oracle over the same input, and compares the result streams as bags per ``_ts``
(columns by position, floats within 1e-9). Inputs may hold late or invalid tuples: the oracle
gets the input without the late ones (``tests.lateness.without_late``; it drops invalid ones
itself) and the engine's ``dead_letter`` must count both (``dead_letter_count``).

The module is skipped while ``hycq.api.execute`` does not exist yet.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hycq.api
from optimizer.ir.catalog import Catalog
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import (
    make_readings,
    random_readings,
    readings_tables,
    small_smartplug,
    with_disorder,
)
from tests.lateness import dead_letter_count, late_in_own_stream, without_late
from tests.oracle import assert_same_stream, oracle, parse_windows
from tests.querygen import cql_queries
from tests.shipped import READINGS

execute = getattr(hycq.api, "execute", None)
pytestmark = pytest.mark.skipif(
    execute is None, reason="hycq.api.execute (the row engine) does not exist yet"
)

ROOT = Path(__file__).resolve().parent.parent.parent
SHIPPED = READINGS  # the smart-plug queries (keyed ones: test_multi_stream.py)
GOLDEN = sorted((ROOT / "tests" / "golden" / "queries").glob("*.sql"))
SMARTPLUG = ROOT / "queries" / "smartplug" / "catalog.toml"


def check(query: str, catalog: Catalog, data: pa.Table, name: str = "<query>") -> None:
    """Run ``query`` on the row engine and on the oracle; compare streams and dead letters."""
    assert execute is not None
    plan = plan_query(query, catalog, name)
    inputs = {"readings": data}
    result = execute(plan, catalog, inputs, placement="row")
    expected = oracle(query, catalog, without_late(query, catalog, inputs))
    assert_same_stream(result.table, expected)
    rejected = dead_letter_count(query, catalog, inputs)
    assert result.dead_letter == rejected, (
        f"dead_letter {result.dead_letter}, expected {rejected} of {data.num_rows} input rows"
    )


# -- the shipped queries and the golden extras -----------------------------------------------------

#: Event-seconds and rate (tuples/s) of smart-plug data per query: long enough for the
#: 5-minute windows to fill and slide, short enough to keep each test within ~20 s.
SPANS: dict[str, tuple[int, float]] = {
    "join_5": (360, 12.0),
    "join_8": (300, 8.0),
    "avg_per_plug": (420, 20.0),
    "distinct_nested": (240, 20.0),
    "dstream_unbounded": (120, 20.0),
    "group_ordinal": (120, 20.0),
    "istream_filter": (120, 20.0),
    "rows_window": (300, 20.0),
    "theta_join": (90, 12.0),
}
DEFAULT_SPAN = (420, 16.0)  # Q1-Q6, join_2: 7 minutes, two minutes of full 5-minute windows


@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_shipped_query(path: Path) -> None:
    seconds, rate = SPANS.get(path.stem, DEFAULT_SPAN)
    data = small_smartplug(seconds, seed=11, rate=rate)
    check(path.read_text(), load_catalog(path.parent / "catalog.toml"), data, str(path))


@pytest.mark.slow
@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_query(path: Path) -> None:
    seconds, rate = SPANS.get(path.stem, DEFAULT_SPAN)
    data = small_smartplug(seconds, seed=5, rate=rate)
    check(path.read_text(), load_catalog(SMARTPLUG), data, str(path))


# -- random queries x random data ------------------------------------------------------------------


def _count_sliding(query: str, catalog: Catalog) -> bool:
    from optimizer.ir.errors import Source
    from optimizer.sql.parse import parse_select

    return any(w.count_slide for w in parse_windows(parse_select(Source(query)), catalog))


@settings(
    max_examples=int(os.environ.get("HYCQ_DIFF_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    query=cql_queries(),
    data=readings_tables(),
    disorder=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_random_query(
    smartplug: Catalog, query: str, data: pa.Table, disorder: bool, seed: int
) -> None:
    # Disorder only for time-sliding queries: whether a count-sliding query has late tuples
    # is checked on its own below.
    if disorder and not _count_sliding(query, smartplug):
        data = with_disorder(data, seed, moves=3)
    check(query, smartplug, data)


# -- data edge cases ------------------------------------------------------------------------------

EDGE_QUERIES = {
    "global_aggs": "SELECT COUNT(*) AS n, SUM(value) AS s, MIN(value) AS lo, MAX(value) AS hi, "
    "AVG(value) AS a, MEDIAN(value) AS med, COUNT(DISTINCT plug_id) AS plugs "
    "FROM readings [RANGE 3 SECONDS]",
    "grouped_tumbling": "SELECT plug_id, property, COUNT(*) AS n, AVG(value) AS a, "
    "MAX(value) AS m FROM readings [RANGE 2 SECONDS SLIDE 2 SECONDS] GROUP BY plug_id, property",
    "istream_now": "SELECT ISTREAM id, value * 2 AS v FROM readings [NOW] WHERE value > 0",
    "dstream_rows": "SELECT DSTREAM plug_id, COUNT(DISTINCT value) AS d, MAX(value) AS m "
    "FROM readings [ROWS 3] GROUP BY plug_id",
    "unbounded_having": "SELECT house_id, plug_id, MEDIAN(value) AS med FROM readings "
    "[UNBOUNDED SLIDE 3 SECONDS] GROUP BY house_id, plug_id HAVING COUNT(*) > 1",
    "self_join": "SELECT a.id, b.id, a.value - b.value AS d FROM readings [NOW] AS a, "
    "readings [RANGE 2 SECONDS] AS b WHERE a.plug_id = b.plug_id AND a.value <= b.value",
    "q1_like": "SELECT r.plug_id, COUNT(*) AS n FROM readings [RANGE 4 SECONDS] AS r, "
    "(SELECT plug_id, MAX(value) AS m FROM readings [RANGE 4 SECONDS] WHERE property = 1 "
    "GROUP BY plug_id) AS m WHERE r.property = 1 AND r.plug_id = m.plug_id "
    "AND r.value > 0.9 * m.m GROUP BY r.plug_id",
    "q5_like": "SELECT p.house_id, MAX(p.total) AS top FROM (SELECT house_id, plug_id, "
    "SUM(value) AS total FROM readings [RANGE 5 SECONDS SLIDE 2 SECONDS] GROUP BY house_id, "
    "plug_id) AS p GROUP BY p.house_id",
    "distinct": "SELECT DISTINCT plug_id, ROUND(value, 0) AS v FROM readings [RANGE 2 SECONDS]",
}


def _equal_timestamps() -> pa.Table:
    # 30 tuples on 3 timestamps.
    return make_readings(
        [(1000 + 5 * (i // 10), float(i % 4) * 2.5, i % 3, i % 2) for i in range(30)]
    )


def _gaps() -> pa.Table:
    # Data at 1000-1002, then nothing until 1020 (empty windows), then 1020-1021.
    rows = [(t, float(t % 7), t % 2, 1) for t in (1000, 1000, 1001, 1002, 1020, 1021, 1021)]
    return make_readings(rows)


def _burst() -> pa.Table:
    rows = [(1000 + t, 1.0 * t, t % 3, 1) for t in range(8)]
    rows[4:4] = [(1004, float(i % 5), i % 3, i % 2) for i in range(60)]
    return make_readings(rows)


def _late() -> pa.Table:
    # Late tuples: 1001 after 1003 arrived (late), 1003 again (fine), 999 (late).
    rows = [
        (1000, 1.0, 0),
        (1002, 2.0, 1),
        (1003, 3.0, 0),
        (1001, 4.0, 1),
        (1003, 5.0, 1),
        (1004, 6.0, 0),
        (999, 7.0, 0),
        (1005, 8.0, 2),
    ]
    return make_readings(rows)


def _single() -> pa.Table:
    return make_readings([(1000, 5.0)])


EDGE_DATA = {
    "equal_ts": _equal_timestamps,
    "gaps": _gaps,
    "burst": _burst,
    "late": _late,
    "single": _single,
    "empty": lambda: make_readings([]),
    "disorder": lambda: with_disorder(random_readings(4, seconds=25, rate=3), seed=4, moves=6),
}


@pytest.mark.parametrize("data_name", sorted(EDGE_DATA))
@pytest.mark.parametrize("query_name", sorted(EDGE_QUERIES))
def test_edge_case(smartplug: Catalog, query_name: str, data_name: str) -> None:
    check(EDGE_QUERIES[query_name], smartplug, EDGE_DATA[data_name](), query_name)


def test_late_tuples_are_dead_lettered(smartplug: Catalog) -> None:
    data = _late()
    query = EDGE_QUERIES["global_aggs"]
    late = late_in_own_stream(query, smartplug, {"readings": data})["readings"]
    assert [t for t, x in zip(data.column("ts").to_pylist(), late, strict=True) if x] == [
        1001,
        999,
    ]
    check(query, smartplug, data)


def test_invalid_tuples_are_dead_lettered(smartplug: Catalog) -> None:
    data = make_readings(
        [
            (1000, 1.0),
            (1000, math.nan),
            (1001, math.inf),
            (1001, 2.0),
            (1002, -math.inf),
            (1002, 3.0),
        ]
    )
    data = data.set_column(4, "plug_id", pa.array([0, 0, 0, 0, 0, None], pa.int32()))
    check(EDGE_QUERIES["global_aggs"], smartplug, data)  # 4 rejected rows


@pytest.mark.parametrize("disorder", [False, True], ids=["in_order", "disorder"])
def test_count_sliding(smartplug: Catalog, disorder: bool) -> None:
    # With disorder this also pins down that a count-sliding query has no late tuples (it has
    # no slide instants; see tests/lateness.py).
    data = random_readings(9, seconds=30, rate=3)
    if disorder:
        data = with_disorder(data, seed=9, moves=6)
    check(
        "SELECT MEDIAN(value) AS m, COUNT(*) AS n, MAX(plug_id) AS p "
        "FROM readings [ROWS 5 SLIDE 2]",
        smartplug,
        data,
    )


def test_rows_window_takes_the_most_recent_tuples_by_timestamp(smartplug: Catalog) -> None:
    # semantics.md: ROWS n holds the n most recent tuples with ts <= T_w, by timestamp (ties by
    # arrival). 11 arrives before 10 (valid: no instant has been emitted yet), so at T=12 the
    # two most recent are 11 (2.0) and 12 (8.0): 10.0, not 4.0 + 8.0.
    data = make_readings([(11, 2.0), (10, 4.0), (12, 8.0)])
    check("SELECT SUM(value) AS s FROM readings [ROWS 2]", smartplug, data)

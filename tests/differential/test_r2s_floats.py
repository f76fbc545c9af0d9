"""ISTREAM / DSTREAM over float aggregates and NaN: one rule, every engine and the oracle.

docs/semantics.md: a row of R(T) is unchanged when a row of R(T') agrees with it exactly on
every non-float value and within the comparison tolerance on every float value (NaN equal to
NaN); identical rows pair first, the rest in sorted order within groups of equal non-float
values. Engines sum in different orders, so without the rule the window {0.2, 0.1, 0.3}
seen in two arrival orders is "new" on one engine (0.6 then 0.6000000000000001) and not on
another; and a NaN result was re-emitted at every instant by the columnar placements.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engines.row.bags import bag_difference
from hycq.api import execute
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import make_readings
from tests.oracle import assert_same_stream, oracle, r2s_difference, result_rows

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")
NAN = float("nan")


def run(query: str, data: pa.Table, placement: str, engine: str = "duckdb") -> pa.Table:
    return execute(
        plan_query(query, CATALOG), CATALOG, {"readings": data}, placement, column_engine=engine
    ).table


def check_all(query: str, data: pa.Table, engines: tuple[str, ...] = ("duckdb",)) -> pa.Table:
    """The oracle's stream, which the row placement and each column engine's must equal."""
    expected = oracle(query, CATALOG, {"readings": data})
    assert_same_stream(run(query, data, "row"), expected)
    for engine in engines:
        assert_same_stream(run(query, data, "column", engine), expected)
    return expected


# -- the rule itself, engine side and oracle side ----------------------------------------------

RULE_CASES: list[tuple[list[Any], list[Any], list[Any], list[Any]]] = [
    # (R(T), R(T'), new rows, gone rows)
    ([(1, 0.6000000000000001)], [(1, 0.6)], [], []),
    ([(1, 0.61)], [(1, 0.6)], [(1, 0.61)], [(1, 0.6)]),
    ([(1, NAN)], [(1, NAN)], [], []),
    ([(1, NAN)], [(1, 0.0)], [(1, NAN)], [(1, 0.0)]),
    ([(1, math.inf)], [(1, math.inf)], [], []),
    ([(1, math.inf)], [(1, -math.inf)], [(1, math.inf)], [(1, -math.inf)]),
    ([(1, 5.5e-17)], [(1, 0.0)], [], []),  # 0.1 + 0.2 - 0.3 in another order
    ([(1, None)], [(1, 0.0)], [(1, None)], [(1, 0.0)]),  # NULL is not close to a number
    ([(2, 0.6)], [(1, 0.6)], [(2, 0.6)], [(1, 0.6)]),  # integers are exact
    ([(10**12, 1.0)], [(10**12 + 1, 1.0)], [(10**12, 1.0)], [(10**12 + 1, 1.0)]),
    ([("a", 1.0), ("a", 1.0)], [("a", 1.0 + 1e-12)], [("a", 1.0)], []),  # bags
    # Sorted pairing: 1.0 takes 1.0 + 5e-10 (the first close one), 2.0 its own partner.
    ([(0, 2.0), (0, 1.0)], [(0, 2.0 + 1e-9), (0, 1.0 + 5e-10)], [], []),
]


@pytest.mark.parametrize(("now", "before", "new", "gone"), RULE_CASES)
def test_engine_and_oracle_apply_the_same_rule(
    now: list[Any], before: list[Any], new: list[Any], gone: list[Any]
) -> None:
    def norm(rows: list[Any]) -> list[str]:
        return sorted(map(repr, rows))

    for diff in (bag_difference, r2s_difference):
        got_new, got_gone = diff(now, before)
        assert (norm(got_new), norm(got_gone)) == (norm(new), norm(gone)), diff.__name__


# -- the example: {0.2, 0.1, 0.3} in every arrival order -------------------------------


def three_values(order: tuple[float, ...]) -> pa.Table:
    """The window [RANGE 2 SECONDS] holds {0.2, 0.1, 0.3} at T=1002 and T=1003, in two
    different arrival orders: (a, b, c) then (b, c, a). Then the values really change."""
    a, b, c = order
    return make_readings(
        [(1001, a), (1002, b), (1002, c), (1003, a), (1004, 0.25), (1005, 0.25), (1006, 0.5)]
    )


ISTREAM_SUM = "SELECT ISTREAM SUM(value) AS s, AVG(value) AS a FROM readings [RANGE 2 SECONDS]"
DSTREAM_SUM = (
    "SELECT DSTREAM plug_id, SUM(value) AS s FROM readings [RANGE 2 SECONDS] GROUP BY plug_id"
)


@pytest.mark.parametrize("order", list(itertools.permutations((0.2, 0.1, 0.3))))
def test_three_values_in_any_order_agree_on_row_and_duckdb(order: tuple[float, ...]) -> None:
    data = three_values(order)
    expected = check_all(ISTREAM_SUM, data)
    assert 1003 not in expected.column("_ts").to_pylist()  # unchanged: not a new row
    check_all(DSTREAM_SUM, data)


@pytest.mark.spark
@pytest.mark.parametrize("order", [(0.2, 0.3, 0.1), (0.3, 0.1, 0.2)])
def test_three_values_agree_on_spark(order: tuple[float, ...]) -> None:
    expected = check_all(ISTREAM_SUM, three_values(order), engines=("spark",))
    assert 1003 not in expected.column("_ts").to_pylist()


# -- NaN: equal to itself, never re-emitted ----------------------------------------------------

NAN_QUERY = (
    "SELECT ISTREAM house_id, MIN(0.0 / value) AS z FROM readings [RANGE 5 SECONDS] "
    "WHERE value = 0 AND house_id < 2 GROUP BY house_id"
)


def zeros() -> pa.Table:
    """Two houses reporting value 0 every second (and a third, filtered out)."""
    return make_readings([(1000 + t, 0.0, 0, 1, 0, h) for t in range(12) for h in (0, 1, 2)])


def test_nan_istream_emits_each_group_once_on_row_and_duckdb() -> None:
    expected = check_all(NAN_QUERY, zeros())
    rows = result_rows(expected)
    assert [(r[0], r[2]) for r in rows] == [(0, 1000), (1, 1000)]
    assert all(math.isnan(r[1]) for r in rows)


@pytest.mark.spark
def test_nan_istream_emits_each_group_once_on_spark() -> None:
    expected = check_all(NAN_QUERY, zeros(), engines=("spark",))
    assert expected.num_rows == 2


#: NaN made by arithmetic (inf - inf) is grouped, counted, ordered and compared as DuckDB
#: does: one group, NaN larger than every number, equal to itself in ISTREAM/DSTREAM.
NAN_STATE_QUERIES = [
    "SELECT RSTREAM value / 0.0 - value / 0.0 AS z FROM readings [RANGE 2 SECONDS]",
    "SELECT value / 0.0 - value / 0.0 AS z, COUNT(*) AS n FROM readings [RANGE 3 SECONDS] "
    "GROUP BY value / 0.0 - value / 0.0",
    "SELECT house_id, MAX(value / 0.0 - value / 0.0) AS hi, MIN(0.0 / value) AS lo, "
    "MEDIAN(0.0 / value) AS med, COUNT(DISTINCT 0.0 / value) AS d "
    "FROM readings [RANGE 3 SECONDS] GROUP BY house_id",
    "SELECT ISTREAM z FROM (SELECT SUM(value / 0.0 - value / 0.0) AS z "
    "FROM readings [RANGE 2 SECONDS]) AS q",
    "SELECT DSTREAM a.z, COUNT(*) AS n FROM (SELECT house_id, AVG(value / 0.0 - value / 0.0) "
    "AS z FROM readings [RANGE 2 SECONDS] GROUP BY house_id) AS a, readings [RANGE 2 SECONDS] "
    "AS b WHERE a.house_id = b.house_id GROUP BY a.z",
    "SELECT ISTREAM house_id, MAX(v) AS m FROM (SELECT house_id, value + 0.0 / value AS v "
    "FROM readings [RANGE 3 SECONDS]) AS q GROUP BY house_id",
    # NaN in comparisons (WHERE, CASE, HAVING, a join's residual): equal to itself and
    # larger than every number, as DuckDB compares
    "SELECT id, 0.0 / value = 0.0 / value AS eq, value / 0.0 - value / 0.0 > 1e308 AS gt, "
    "CASE WHEN 0.0 / value < 1.0 THEN 1 ELSE 2 END AS c FROM readings [RANGE 2 SECONDS] "
    "WHERE 0.0 / value >= value",
    "SELECT house_id, MAX(0.0 / value) AS m FROM readings [RANGE 3 SECONDS] GROUP BY house_id "
    "HAVING MAX(0.0 / value) > 100.0",
    "SELECT a.id, b.id AS bid FROM readings [RANGE 2 SECONDS] AS a, readings [RANGE 2 SECONDS] "
    "AS b WHERE 0.0 / a.value > b.value AND a.house_id = b.house_id",
]


def nan_data() -> pa.Table:
    values = [0.0, 0.0, 5.0, 0.0, 0.0, 1.0, 0.0, 2.0, 0.0, 0.0]
    return make_readings(
        [(1000 + i, v, 0, 1, 0, i % 2) for i, v in enumerate(values)]
        + [(1012, 0.0, 0, 1, 0, 1), (1013, 3.0, 0, 1, 0, 0)]
    )


@pytest.mark.parametrize("query", NAN_STATE_QUERIES)
def test_nan_results_on_row_and_duckdb(query: str) -> None:
    check_all(query, nan_data())


# -- random sums of awkward decimals, ISTREAM and DSTREAM ----------------------------------------

awkward = st.sampled_from([0.1, 0.2, 0.3, 0.7, 1.1, 2.675, 1e-3, 1e6 + 0.1])


@st.composite
def readings(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(1, 25))
    ts, rows = 1000, []
    for _ in range(n):
        ts += draw(st.integers(0, 2))
        rows.append((ts, draw(awkward), draw(st.integers(0, 1))))
    return make_readings(rows)


R2S_QUERIES = [
    "SELECT ISTREAM plug_id, SUM(value) AS s, AVG(value) AS a FROM readings [RANGE 3 SECONDS] "
    "GROUP BY plug_id",
    "SELECT DSTREAM SUM(value) AS s FROM readings [ROWS 3]",
    "SELECT ISTREAM r.plug_id, SUM(r.value + g.s) AS t FROM readings [RANGE 2 SECONDS] AS r, "
    "(SELECT SUM(value) AS s FROM readings [RANGE 4 SECONDS]) AS g GROUP BY r.plug_id",
]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=readings(), query=st.sampled_from(R2S_QUERIES))
def test_random_float_istream_dstream_agree(data: pa.Table, query: str) -> None:
    check_all(query, data)


def test_nan_join_keys_match_on_row_and_duckdb() -> None:
    """A NaN key (from a global aggregate, so the key column may be NULL too) joins with
    NaN, as DuckDB's `=` on NaN is true; NULL keys still never match."""
    query = (
        "SELECT a.z, b.n FROM (SELECT MIN(0.0 / value) AS z FROM readings [RANGE 2 SECONDS]) AS a, "
        "(SELECT MAX(0.0 / value) AS z, COUNT(*) AS n FROM readings [RANGE 3 SECONDS]) AS b "
        "WHERE a.z = b.z"
    )
    expected = check_all(query, nan_data())
    assert any(math.isnan(z) for z in expected.column("z").to_pylist())


def test_nan_from_a_tumbling_window_groups_downstream() -> None:
    """A tumbling window's aggregate rows are rebuilt every instant (replacing deltas): its
    NaN results still group as one value in the aggregate above."""
    query = (
        "SELECT q.a, COUNT(*) AS n FROM (SELECT house_id, AVG(value / 0.0 - value / 0.0) AS a "
        "FROM readings [RANGE 2 SECONDS SLIDE 2 SECONDS] GROUP BY house_id) AS q GROUP BY q.a"
    )
    expected = check_all(query, nan_data())
    assert max(expected.column("n").to_pylist()) == 2

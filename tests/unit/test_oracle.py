"""The oracle itself, on tiny inputs whose results are worked out by hand in the comments.

Data rows are ``(ts, value[, plug_id[, property]])`` (see tests.datagen.make_readings); ids run
1, 2, ... in arrival order. ``_ts`` is the last element of every expected row.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from optimizer.ir.catalog import Catalog
from optimizer.sql.catalog import parse_catalog_text
from tests.datagen import make_readings, readings_tables
from tests.oracle import (
    assert_same_stream,
    oracle,
    plan_instants,
    result_rows,
    well_formed_inputs,
)
from tests.querygen import binds, cql_queries


def run(cat: Catalog, query: str, rows: list[tuple]) -> list[tuple]:
    return result_rows(oracle(query, cat, {"readings": make_readings(rows)}))


# -- time-sliding windows -----------------------------------------------------------------------

FIVE = [(10, 1.0), (10, 2.0), (11, 4.0), (13, 8.0), (14, 16.0)]


def test_range_slide_1(smartplug: Catalog) -> None:
    # Instants 10..14; the window at T holds T-3 < ts <= T.
    # T=10 {10,10}; 11 {10,10,11}; 12 (9,12] {10,10,11}; 13 (10,13] {11,13}; 14 (11,14] {13,14}
    got = run(
        smartplug, "SELECT COUNT(*) AS n, SUM(value) AS s FROM readings [RANGE 3 SECONDS]", FIVE
    )
    assert got == [(2, 3.0, 10), (3, 7.0, 11), (3, 7.0, 12), (2, 12.0, 13), (2, 24.0, 14)]


def test_range_slide_2(smartplug: Catalog) -> None:
    # Slide 2: instants are the multiples of 2 in [ceil(10/2)*2, ceil(14/2)*2] = 10, 12, 14.
    # T=10 (6,10] {10,10}; 12 (8,12] {10,10,11}; 14 (10,14] {11,13,14}
    q = "SELECT COUNT(*) AS n, SUM(value) AS s FROM readings [RANGE 4 SECONDS SLIDE 2 SECONDS]"
    assert run(smartplug, q, FIVE) == [(2, 3.0, 10), (3, 7.0, 12), (3, 28.0, 14)]


def test_slide_instants_rounded_up_at_both_ends(smartplug: Catalog) -> None:
    # Data 11, 12, 15 with slide 2: instants 12, 14, 16 (16 > max_ts: ceil(15/2)*2).
    # T=12 (8,12] {11,12}; 14 (10,14] {11,12}; 16 (12,16] {15}
    rows = [(11, 1.0), (12, 2.0), (15, 4.0)]
    q = "SELECT COUNT(*) AS n, SUM(value) AS s FROM readings [RANGE 4 SECONDS SLIDE 2 SECONDS]"
    assert run(smartplug, q, rows) == [(2, 3.0, 12), (2, 3.0, 14), (1, 4.0, 16)]
    # A slide that does not divide the range: slide 3, instants 12, 15.
    # T=12 (8,12] {11,12}; 15 (11,15] {12,15}
    q = "SELECT COUNT(*) AS n, SUM(value) AS s FROM readings [RANGE 4 SECONDS SLIDE 3 SECONDS]"
    assert run(smartplug, q, rows) == [(2, 3.0, 12), (2, 6.0, 15)]


def test_now_grouped_and_global(smartplug: Catalog) -> None:
    rows = [(10, 1.0, 0), (10, 2.0, 1), (10, 3.0, 0), (12, 5.0, 1)]
    # NOW at T holds ts == T. Grouped: no group at the empty instant 11.
    q = "SELECT plug_id, SUM(value) AS s FROM readings [NOW] GROUP BY plug_id"
    assert run(smartplug, q, rows) == [(0, 4.0, 10), (1, 2.0, 10), (1, 5.0, 12)]
    # Global aggregates give one row even over the empty window at 11: COUNT 0, others NULL.
    q = "SELECT COUNT(*) AS n, SUM(value) AS s, MAX(value) AS m FROM readings [NOW]"
    assert run(smartplug, q, rows) == [(3, 6.0, 3.0, 10), (0, None, None, 11), (1, 5.0, 5.0, 12)]


def test_unbounded(smartplug: Catalog) -> None:
    rows = [(10, 5.0), (12, 3.0), (12, 9.0)]
    q = "SELECT MAX(value) AS m, COUNT(*) AS n FROM readings [UNBOUNDED]"
    assert run(smartplug, q, rows) == [(5.0, 1, 10), (5.0, 1, 11), (9.0, 3, 12)]
    # UNBOUNDED SLIDE 2: instants 10, 12.
    q = "SELECT COUNT(*) AS n FROM readings [UNBOUNDED SLIDE 2 SECONDS]"
    assert run(smartplug, q, rows) == [(1, 10), (3, 12)]


def test_rows_time_sliding(smartplug: Catalog) -> None:
    rows = [(10, 1.0), (10, 2.0), (10, 4.0), (12, 8.0), (13, 16.0)]
    # The 2 most recent tuples (by ts, ties by arrival) with ts <= T:
    # 10 {2,4}; 11 {2,4}; 12 {4,8}; 13 {8,16}
    q = "SELECT SUM(value) AS s FROM readings [ROWS 2]"
    assert run(smartplug, q, rows) == [(6.0, 10), (6.0, 11), (12.0, 12), (24.0, 13)]


def test_rows_orders_by_timestamp_then_arrival(smartplug: Catalog) -> None:
    # 11 arrives first, then 10: the oracle goes by event time, so instants start at 10.
    # T=10 {10}; T=11 {10, 11}; T=12 the two most recent by ts {11 (2), 12 (8)} = 10, not 4 + 8.
    rows = [(11, 2.0), (10, 4.0), (12, 8.0)]
    q = "SELECT SUM(value) AS s FROM readings [ROWS 2]"
    assert run(smartplug, q, rows) == [(4.0, 10), (6.0, 11), (10.0, 12)]


def test_count_slide(smartplug: Catalog) -> None:
    rows = [(10, 1.0), (10, 2.0), (11, 4.0), (12, 8.0), (12, 16.0), (13, 32.0), (15, 64.0)]
    # Evaluated at tuples 2, 4, 6 (tuple 7 is a partial slide): tuples k*2-2 .. k*2,
    # _ts = the timestamp of tuple k*2. #1..#2 = 3 at 10; #2..#4 = 14 at 12; #4..#6 = 56 at 13.
    q = "SELECT SUM(value) AS s, COUNT(*) AS n FROM readings [ROWS 3 SLIDE 2]"
    assert run(smartplug, q, rows) == [(3.0, 2, 10), (14.0, 3, 12), (56.0, 3, 13)]


def test_gaps_and_union_of_instants(smartplug: Catalog) -> None:
    # Every second between the first and last tuple is an instant, also without data.
    q = "SELECT COUNT(*) AS n FROM readings [RANGE 1 SECOND]"
    assert run(smartplug, q, [(10, 1.0), (15, 1.0)]) == [
        (1, 10),
        (0, 11),
        (0, 12),
        (0, 13),
        (0, 14),
        (1, 15),
    ]
    q = "SELECT plug_id, COUNT(*) AS n FROM readings [RANGE 1 SECOND] GROUP BY plug_id"
    assert run(smartplug, q, [(10, 1.0), (15, 1.0)]) == [(0, 1, 10), (0, 1, 15)]
    # Two windows, slides 2 and 3; data 10, 11, 13, 17. Instants: {10,12,14,16,18} (slide 2,
    # from ceil(10/2)*2 to ceil(17/2)*2) U {12,15,18} (slide 3, 12 to 18).
    # At T each window shows T_w = floor(T/s)*s:
    # T=10: a@10 (6,10] {10} 1; b@9 (6,9] {} 0        T=12: a@12 {10,11} 2; b@12 (9,12] 2
    # T=14: a@14 (10,14] {11,13} 2; b@12 2            T=15: a@14 2; b@15 (12,15] {13} 1
    # T=16: a@16 (12,16] {13} 1; b@15 1               T=18: a@18 (14,18] {17} 1; b@18 {17} 1
    q = (
        "SELECT a.n, b.n FROM "
        "(SELECT COUNT(*) AS n FROM readings [RANGE 4 SECONDS SLIDE 2 SECONDS]) AS a, "
        "(SELECT COUNT(*) AS n FROM readings [RANGE 3 SECONDS SLIDE 3 SECONDS]) AS b"
    )
    rows = [(10, 1.0), (11, 1.0), (13, 1.0), (17, 1.0)]
    assert run(smartplug, q, rows) == [
        (1, 0, 10),
        (2, 2, 12),
        (2, 2, 14),
        (2, 1, 15),
        (1, 1, 16),
        (1, 1, 18),
    ]


def test_no_input_no_output(smartplug: Catalog) -> None:
    out = oracle(
        "SELECT COUNT(*) AS n FROM readings [NOW]", smartplug, {"readings": make_readings([])}
    )
    assert out.num_rows == 0
    assert out.column_names == ["n", "_ts"]


def test_millisecond_stream() -> None:
    cat = parse_catalog_text(
        '[streams.readings]\ntimestamp = "ts"\ntime_unit = "ms"\n'
        '[streams.readings.columns]\nid = "BIGINT"\nts = "BIGINT"\nvalue = "DOUBLE"\n'
    )
    data = pa.table(
        {"id": [1, 2, 3, 4], "ts": [1000, 1500, 2999, 4000], "value": [1.0, 2.0, 3.0, 4.0]}
    )
    # RANGE 2 s = 2000 ticks, slide 1 s = 1000 ticks: instants 1000, 2000, 3000, 4000.
    # 1000 (-1000,1000] {1000}; 2000 (0,2000] {1000,1500}; 3000 {1500,2999}; 4000 {2999,4000}
    q = "SELECT COUNT(*) AS n FROM readings [RANGE 2 SECONDS SLIDE 1 SECOND]"
    got = result_rows(oracle(q, cat, {"readings": data}))
    assert got == [(1, 1000), (2, 2000), (2, 3000), (2, 4000)]


def test_mixed_time_units_use_the_finest() -> None:
    # a in seconds, b in milliseconds: the time base is ms; a's timestamps become ms, the
    # default slide of a window on a stays 1 s (1000 ms), b's is 1 ms.
    cat = parse_catalog_text(
        '[streams.a]\ntimestamp = "ts"\ntime_unit = "s"\n'
        '[streams.a.columns]\nid = "BIGINT"\nts = "BIGINT"\n'
        '[streams.b]\ntimestamp = "ts"\ntime_unit = "ms"\n'
        '[streams.b.columns]\nid = "BIGINT"\nts = "BIGINT"\n'
    )
    a = pa.table({"id": [1, 2], "ts": [10, 11]})
    b = pa.table({"id": [1, 2, 2], "ts": [10_500, 11_000, 11_999]})
    q = (
        "SELECT COUNT(*) AS c FROM a [RANGE 1 SECOND SLIDE 1 SECOND] AS x, "
        "b [RANGE 1 SECOND SLIDE 1 SECOND] AS y WHERE x.id = y.id"
    )
    # Instants 10000, 11000, 12000 ms. T=10000: x {1@10000}, y (9000,10000] {}: 0.
    # T=11000: x {2@11000}, y (10000,11000] {1, 2}: 1. T=12000: x {}, y {2@11999}: 0.
    got = result_rows(oracle(q, cat, {"a": a, "b": b}))
    assert got == [(0, 10_000), (1, 11_000), (0, 12_000)]
    # A selected timestamp column shows the time base too.
    q = "SELECT x.ts FROM a [NOW] AS x, b [RANGE 1 SECOND SLIDE 1 SECOND] AS y WHERE x.id = y.id"
    assert result_rows(oracle(q, cat, {"a": a, "b": b})) == [(11_000, 11_000)]


# -- output modes --------------------------------------------------------------------------------

STREAM_ROWS = [(10, 1.0, 0), (10, 1.0, 1), (11, 1.0, 0), (13, 1.0, 1)]


def test_istream_dstream_grouped(smartplug: Catalog) -> None:
    # RANGE 2: R(10) {(0,1),(1,1)}; R(11) {(0,2),(1,1)}; R(12) {(0,1)}; R(13) {(1,1)}
    body = "plug_id, COUNT(*) AS n FROM readings [RANGE 2 SECONDS] GROUP BY plug_id"
    assert run(smartplug, f"SELECT ISTREAM {body}", STREAM_ROWS) == [
        (0, 1, 10),
        (1, 1, 10),
        (0, 2, 11),
        (0, 1, 12),
        (1, 1, 13),
    ]
    assert run(smartplug, f"SELECT DSTREAM {body}", STREAM_ROWS) == [
        (0, 1, 11),
        (0, 2, 12),
        (1, 1, 12),
        (0, 1, 13),
    ]
    assert len(run(smartplug, f"SELECT RSTREAM {body}", STREAM_ROWS)) == 6


def test_istream_dstream_are_bag_differences(smartplug: Catalog) -> None:
    # R(10) {0,1}; R(11) {0,1,0}; R(12) {0}; R(13) {1}
    body = "plug_id FROM readings [RANGE 2 SECONDS]"
    assert run(smartplug, f"SELECT ISTREAM {body}", STREAM_ROWS) == [
        (0, 10),
        (1, 10),
        (0, 11),
        (1, 13),
    ]
    assert run(smartplug, f"SELECT DSTREAM {body}", STREAM_ROWS) == [
        (0, 12),
        (1, 12),
        (0, 13),
    ]


# -- joins, typing ------------------------------------------------------------------------------


def test_join(smartplug: Catalog) -> None:
    rows = [(10, 1.0, 0), (10, 2.0, 1), (11, 3.0, 0), (11, 4.0, 0), (12, 5.0, 1)]
    # T=10: a {#1,#2}, b (8,10] {#1,#2}: no pair with the same plug and another id.
    # T=11: a {#3,#4}, b (9,11] {#1..#4}: #3 with #1, #4; #4 with #1, #3.
    # T=12: a {#5}, b (10,12] {#3,#4,#5}: nothing.
    q = (
        "SELECT a.plug_id, a.value, b.value FROM readings [NOW] AS a, "
        "readings [RANGE 2 SECONDS] AS b WHERE a.plug_id = b.plug_id AND a.id <> b.id"
    )
    assert run(smartplug, q, rows) == [
        (0, 3.0, 1.0, 11),
        (0, 3.0, 4.0, 11),
        (0, 4.0, 1.0, 11),
        (0, 4.0, 3.0, 11),
    ]
    out = oracle(q, smartplug, {"readings": make_readings(rows)})
    assert out.column_names == ["plug_id", "value", "value_1", "_ts"]
    # Theta join with JOIN ... ON and a global count: pairs a.value < b.value.
    # T=10: (1<2) 1; T=11: a{3,4} b{1,2,3,4}: 3<4 -> 1; T=12: a{5}: 0
    q = (
        "SELECT COUNT(*) AS n FROM readings [NOW] AS a "
        "JOIN readings [RANGE 2 SECONDS] AS b ON a.value < b.value"
    )
    assert run(smartplug, q, rows) == [(1, 10), (1, 11), (0, 12)]


def test_derived_table_like_q1(smartplug: Catalog) -> None:
    rows = [(10, 10.0, 0), (10, 9.5, 0), (10, 5.0, 0), (10, 3.0, 1), (11, 1.0, 1)]
    # T=10: max plug 0 = 10, 0.9*10 = 9: 10, 9.5 count 2; max plug 1 = 3: 3 > 2.7 count 1.
    # T=11 (RANGE 2): plug 0 same (2); plug 1 max 3, values 3 and 1 > 2.7: 1.
    q = (
        "SELECT r.plug_id, COUNT(*) AS n FROM readings [RANGE 2 SECONDS] AS r, "
        "(SELECT plug_id, MAX(value) AS m FROM readings [RANGE 2 SECONDS] GROUP BY plug_id) AS m "
        "WHERE r.plug_id = m.plug_id AND r.value > 0.9 * m.m GROUP BY r.plug_id"
    )
    assert run(smartplug, q, rows) == [(0, 2, 10), (1, 1, 10), (0, 2, 11), (1, 1, 11)]


def test_median_and_duckdb_arithmetic(smartplug: Catalog) -> None:
    rows = [(10, 1.0), (10, 20.0), (10, 2.0), (10, 10.0)]
    # Even count: the mean of the two middle values (2 + 10) / 2.
    assert run(smartplug, "SELECT MEDIAN(value) AS m FROM readings [NOW]", rows) == [(6.0, 10)]
    rows = [(10, 0.0), (10, 1.0)]
    # x/0 is +inf, 0/0 NaN; % by an integer zero is NULL; decimal literals are DOUBLE.
    q = (
        "SELECT value / 0 AS d, plug_id % 0 AS r, 2.5 AS lit, CAST(2.5 AS INTEGER) AS c "
        "FROM readings [NOW]"
    )
    out = oracle(q, smartplug, {"readings": make_readings(rows)})
    assert out.schema.field("lit").type == pa.float64()
    d = sorted(out.column("d").to_pylist(), key=lambda x: (not math.isnan(x), x))
    assert math.isnan(d[0]) and d[1] == math.inf
    assert out.column("r").to_pylist() == [None, None]
    assert out.column("c").to_pylist() == [2, 2]  # a DOUBLE casts half to even (DuckDB)


# -- valid input ---------------------------------------------------------------------------------


def test_out_of_order_input_counts_by_event_time(smartplug: Catalog) -> None:
    # Arrivals 10, 12, 11, 12, 13, 9: the oracle drops nothing for being late; every tuple
    # counts at its event time. Instants 9..13, RANGE 2 holds T-2 < ts <= T:
    # 9 {9}; 10 {9,10}; 11 {10,11}; 12 {11,12,12}; 13 {12,12,13}
    data = make_readings([(10, 1.0), (12, 1.0), (11, 1.0), (12, 1.0), (13, 1.0), (9, 1.0)])
    q = "SELECT COUNT(*) AS n FROM readings [RANGE 2 SECONDS]"
    got = result_rows(oracle(q, smartplug, {"readings": data}))
    assert got == [(1, 9), (2, 10), (2, 11), (3, 12), (3, 13)]
    # The same as the input sorted by event time.
    ordered = data.sort_by([("ts", "ascending")])
    assert_same_stream(
        oracle(q, smartplug, {"readings": data}), oracle(q, smartplug, {"readings": ordered})
    )


def test_invalid_fields_rejected(smartplug: Catalog) -> None:
    data = make_readings([(10, 1.0), (10, math.nan), (11, math.inf), (11, 2.0)])
    data = data.set_column(4, "plug_id", pa.array([0, 0, 0, None], pa.int32())).append_column(
        "dummy", pa.array([0, 0, 0, 0])
    )  # extra columns are ignored
    q = "SELECT COUNT(*) AS n FROM readings [UNBOUNDED]"
    valid = well_formed_inputs(q, smartplug, {"readings": data})["readings"]
    assert valid.column("id").to_pylist() == [1]
    assert result_rows(oracle(q, smartplug, {"readings": data})) == [(1, 10)]


def test_count_slide_keeps_arrival_order(smartplug: Catalog) -> None:
    # A count-sliding window is defined on the arrival sequence: tuples 12 (1.0), 10 (2.0),
    # 11 (4.0); ROWS 2 SLIDE 1 evaluates after each: {1}, {1,2}, {2,4} at _ts 12, 10, 11.
    data = make_readings([(12, 1.0), (10, 2.0), (11, 4.0)])
    q = "SELECT SUM(value) AS s FROM readings [ROWS 2 SLIDE 1]"
    assert run(smartplug, q, [(12, 1.0), (10, 2.0), (11, 4.0)]) == [
        (3.0, 10),
        (6.0, 11),
        (1.0, 12),
    ]
    assert well_formed_inputs(q, smartplug, {"readings": data})["readings"].num_rows == 3


def test_plan_instants() -> None:
    assert plan_instants([2], 11, 15) == [12, 14, 16]
    assert plan_instants([2, 3], 10, 17) == [10, 12, 14, 15, 16, 18]
    assert plan_instants([5], -7, -1) == [-5, 0]


# -- assert_same_stream --------------------------------------------------------------------------


def _stream(rows: list[tuple], names: tuple[str, ...] = ("a", "b")) -> pa.Table:
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in range(len(names) + 1)]
    return pa.table([list(c) for c in cols], names=[*names, "_ts"])


def test_assert_same_stream_tolerates_order_floats_nan_none() -> None:
    exp = _stream([(1, 0.1 + 0.2, 10), (2, math.nan, 10), (None, 1e-12, 11), (3, 1e20, 11)])
    act = _stream([(3, 1e20 * (1 + 1e-12), 11), (None, 0.0, 11), (2, math.nan, 10), (1, 0.3, 10)])
    assert_same_stream(act, exp, exact=False)
    # Names do not matter, positions do.
    assert_same_stream(act.rename_columns(["x", "y", "_ts"]), exp, exact=False)


def test_assert_same_stream_compares_bits_by_default() -> None:
    """The default comparison is bit for bit: the last bit of a sum, the sign of a zero and
    a value within the tolerance all differ; NaN equals NaN, NULL equals NULL, and an
    integer equals the double of its value (hycq's ROUND of an integer is a DOUBLE)."""
    for a, b in [(0.1 + 0.2, 0.3), (-0.0, 0.0), (1e20 * (1 + 1e-12), 1e20)]:
        with pytest.raises(AssertionError, match="differ"):
            assert_same_stream(_stream([(1, a, 10)]), _stream([(1, b, 10)]))
        assert_same_stream(_stream([(1, a, 10)]), _stream([(1, b, 10)]), exact=False)
    same = _stream([(1, math.nan, 10), (2, None, 10), (3, 0.5, 11)])
    assert_same_stream(same, _stream([(1, math.nan, 10), (2, None, 10), (3, 0.5, 11)]))
    doubles = pa.table({"x": [2.0, 3.0], "_ts": [10, 10]})
    integers = pa.table({"_ts": [10, 10], "x": [3, 2]})  # positions of _ts differ too
    assert_same_stream(doubles, integers)
    with pytest.raises(AssertionError, match="differ"):
        assert_same_stream(doubles, pa.table({"x": [2, 4], "_ts": [10, 10]}))


def test_assert_same_stream_reports_first_difference() -> None:
    exp = _stream([(1, 1.0, 10), (1, 1.0, 10), (2, 2.0, 11), (5, 5.0, 12)])
    act = _stream([(1, 1.0, 10), (2, 2.0000001, 11), (5, 5.0, 12), (7, 7.0, 13)])
    with pytest.raises(AssertionError) as err:
        assert_same_stream(act, exp)
    text = str(err.value)
    assert "first at _ts=10" in text
    assert "missing (expected, not in actual): 1" in text
    assert "other differing _ts: [11, 13]" in text
    with pytest.raises(AssertionError, match="column count"):
        assert_same_stream(act.drop_columns(["b"]), exp)
    with pytest.raises(AssertionError):
        assert_same_stream(_stream([(1, None, 10)]), _stream([(1, 0.0, 10)]))


# -- the generators feed the oracle ---------------------------------------------------------------


@settings(
    max_examples=15,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(query=cql_queries(), data=readings_tables(max_seconds=20, disorder=True))
def test_random_queries_bind_and_run(smartplug: Catalog, query: str, data: pa.Table) -> None:
    assert binds(query)
    out = oracle(query, smartplug, {"readings": data})
    assert out.column_names[-1] == "_ts"
    # Feeding the well-formed input again changes nothing.
    valid = well_formed_inputs(query, smartplug, {"readings": data})
    assert_same_stream(oracle(query, smartplug, valid), out)

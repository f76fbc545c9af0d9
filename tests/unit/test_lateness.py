"""tests/lateness.py: which tuples an engine may drop as late, worked out by hand."""

from __future__ import annotations

import math

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.ir.catalog import Catalog
from optimizer.sql.catalog import parse_catalog_text
from tests.datagen import make_readings, random_readings, with_disorder
from tests.lateness import dead_letter_count, late_in_own_stream, without_late

TWO = parse_catalog_text(
    "".join(
        f'[streams.{n}]\ntimestamp = "ts"\ntime_unit = "{u}"\n'
        f'[streams.{n}.columns]\nts = "BIGINT"\nk = "INTEGER"\n'
        for n, u in (("a", "s"), ("b", "s"), ("c", "ms"))
    )
)
JOIN = (
    "SELECT COUNT(*) AS n FROM a [RANGE 3 SECONDS SLIDE {s} SECONDS] AS x, "
    "b [RANGE 3 SECONDS SLIDE {s} SECONDS] AS y WHERE x.k = y.k"
)


def _keyed(ts: list[int]) -> pa.Table:
    return pa.table({"ts": pa.array(ts, pa.int64()), "k": pa.array([0] * len(ts), pa.int32())})


def test_one_stream_slide_1(smartplug: Catalog) -> None:
    # Arrivals 10, 12, 11, 12, 13, 9: after 12 arrives instant 11 has fired, so 11 is late;
    # the second 12 is fine; 9 is late.
    data = make_readings([(10, 1.0), (12, 1.0), (11, 1.0), (12, 1.0), (13, 1.0), (9, 1.0)])
    q = "SELECT COUNT(*) AS n FROM readings [RANGE 2 SECONDS]"
    assert late_in_own_stream(q, smartplug, {"readings": data}) == {
        "readings": [False, False, True, False, False, True]
    }
    kept = without_late(q, smartplug, {"readings": data})["readings"]
    assert kept.column("id").to_pylist() == [1, 2, 4, 5]
    assert dead_letter_count(q, smartplug, {"readings": data}) == 2


def test_one_stream_slide_5(smartplug: Catalog) -> None:
    # Slide 5: arrivals 12, 14, 11 (no instant fired yet: 10 < ceil(12/5)*5, so 11 is
    # accepted and the first instant is ceil(11/5)*5 = 15), 16 (fires 15), 15 (late), 16.
    data = make_readings([(12, 1.0), (14, 1.0), (11, 1.0), (16, 1.0), (15, 1.0), (16, 1.0)])
    q = "SELECT COUNT(*) AS n FROM readings [RANGE 10 SECONDS SLIDE 5 SECONDS]"
    kept = without_late(q, smartplug, {"readings": data})["readings"]
    assert kept.column("id").to_pylist() == [1, 2, 3, 4, 6]


def test_malformed_rows_are_not_late_but_counted(smartplug: Catalog) -> None:
    data = make_readings([(10, 1.0), (12, math.nan), (11, 2.0)])
    q = "SELECT COUNT(*) AS n FROM readings [RANGE 2 SECONDS]"
    # The NaN row never reaches the clock, so 11 is in order after 10.
    assert late_in_own_stream(q, smartplug, {"readings": data}) == {
        "readings": [False, False, False]
    }
    assert dead_letter_count(q, smartplug, {"readings": data}) == 1


def test_count_slide_has_no_late_tuples(smartplug: Catalog) -> None:
    data = make_readings([(12, 1.0), (10, 1.0), (11, 1.0)])
    q = "SELECT COUNT(*) AS n FROM readings [ROWS 2 SLIDE 1]"
    assert dead_letter_count(q, smartplug, {"readings": data}) == 0


def test_disorder_drops_some_tuples(smartplug: Catalog) -> None:
    data = with_disorder(random_readings(3, seconds=30, rate=3), seed=3, moves=6)
    q = "SELECT COUNT(*) AS n FROM readings [RANGE 3 SECONDS]"
    kept = without_late(q, smartplug, {"readings": data})["readings"]
    assert 0 < kept.num_rows < data.num_rows


def test_another_stream_far_ahead_makes_nothing_late() -> None:
    # a is far ahead of b (and denser): b's tuples are in order in b, so none is late,
    # whatever the interleaving.
    a = _keyed(list(range(100, 200)))
    b = _keyed([100, 150, 199])
    assert late_in_own_stream(JOIN.format(s=1), TWO, {"a": a, "b": b}) == {
        "a": [False] * 100,
        "b": [False] * 3,
    }


def test_late_only_by_its_own_stream() -> None:
    # b: 10, 13, 11 — 11 comes after 13 in b, and instants 11 and 12 fire once both streams
    # have passed them (a reaches 20): 11 is late. a's 12 after its own 20 is late as well.
    a = _keyed([10, 20, 12])
    b = _keyed([10, 13, 11])
    assert late_in_own_stream(JOIN.format(s=1), TWO, {"a": a, "b": b}) == {
        "a": [False, False, True],
        "b": [False, False, True],
    }


def test_first_instant_follows_the_smallest_timestamp_of_all_streams() -> None:
    # Slide 5. b delivers 10 and ends; a delivers 16, 19, then 14. The clock started at 10
    # (b), so instants 10 and 15 have fired when 14 arrives after a's 19: 14 is late. With a
    # alone the first instant would be 20 and 14 would count.
    a = _keyed([16, 19, 14])
    b = _keyed([10])
    late = late_in_own_stream(JOIN.format(s=5), TWO, {"a": a, "b": b})
    assert late == {"a": [False, False, True], "b": [False]}
    assert late_in_own_stream(JOIN.format(s=5), TWO, {"a": a, "b": _keyed([])})["a"] == [
        False,
        False,
        False,
    ]


def test_mixed_units_compare_in_the_time_base() -> None:
    # a in seconds, c in ms: a's 11 s = 11000 ms. c: 10500, 12000, 11500 (after 12000 in c;
    # instants are whole seconds, 11000 fired once both passed it): 11500 is not after
    # 11000, so not late; 10900 would be.
    q = (
        "SELECT COUNT(*) AS n FROM a [RANGE 2 SECONDS SLIDE 1 SECOND] AS x, "
        "c [RANGE 2 SECONDS SLIDE 1 SECOND] AS y WHERE x.k = y.k"
    )
    a = _keyed([10, 11, 12, 13])
    assert late_in_own_stream(q, TWO, {"a": a, "c": _keyed([10500, 12000, 11500])})["c"] == [
        False,
        False,
        False,
    ]
    assert late_in_own_stream(q, TWO, {"a": a, "c": _keyed([10500, 12000, 10900])})["c"] == [
        False,
        False,
        True,
    ]


@settings(max_examples=40, deadline=None, database=None)
@given(
    streams=st.lists(
        st.lists(st.integers(0, 40), min_size=0, max_size=30).map(sorted),
        min_size=2,
        max_size=2,
    ),
    slide=st.sampled_from([1, 2, 5]),
)
def test_in_order_streams_are_never_late(streams: list[list[int]], slide: int) -> None:
    inputs = {"a": _keyed(streams[0]), "b": _keyed(streams[1])}
    late = late_in_own_stream(JOIN.format(s=slide), TWO, inputs)
    assert not any(late["a"]) and not any(late["b"])

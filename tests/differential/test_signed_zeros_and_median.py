"""Signed zeros and MEDIAN: the same bits on every engine, whatever the arrival order.

docs/semantics.md, "Signed zeros": ``-0.0`` is ``+0.0`` wherever one of equal values is
kept (a GROUP BY key, SELECT DISTINCT, MIN, MAX, MEDIAN, COUNT(DISTINCT), LEAST, GREATEST,
IN); DuckDB itself keeps whichever zero came first (its MAX over {0.0, -0.0} is the first
one). "MEDIAN": the MEDIAN of an even count is DuckDB's interpolation of the two middle
values (``fma(lo, 0.5, hi * 0.5)``), which these tests take from DuckDB's own MEDIAN, run
here directly: DataFusion's ``(lo + hi) / 2`` overflows for two large values and Spark's
unfused ``0.5 * lo + 0.5 * hi`` rounds a subnormal ``lo`` differently.

Each case runs on the row engine, DuckDB and DataFusion (Spark under its mark) and on the
oracle, and compares bits (``assert_same_stream(exact=True)``), with the input in both
arrival orders.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hycq.api import execute
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import make_readings
from tests.engines import engine_params, placement_of
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")
W = "[RANGE 3 SECONDS]"

#: Queries where one of two equal zeros is kept; ``-value`` makes a -0.0 from a 0.0.
ZERO_QUERIES = {
    "aggregates": "SELECT plug_id, MAX(value) AS hi, MIN(value) AS lo, MEDIAN(value) AS med, "
    "COUNT(DISTINCT value) AS d, MAX(-value) AS nhi, MIN(-value) AS nlo, "
    f"MAX(LEAST(value, -value)) AS l FROM readings {W} GROUP BY plug_id",
    "key": f"SELECT value, COUNT(*) AS n FROM readings {W} GROUP BY value",
    "computed_key": f"SELECT -value AS v, COUNT(*) AS n FROM readings {W} GROUP BY -value",
    "distinct": f"SELECT DISTINCT plug_id, -value AS v FROM readings {W}",
    "least": "SELECT id, LEAST(value, -value) AS l, GREATEST(-value, value) AS g "
    f"FROM readings {W}",
    "in": "SELECT id FROM readings [RANGE 3 SECONDS] WHERE -value IN ("
    + ", ".join(f"{k}.0" for k in range(30))
    + ")",
}
#: Zeros of both signs in one plug and one instant, then alone, then next to numbers.
ZEROS = [(1000, 0.0, 0), (1000, -0.0, 0), (1001, -0.0, 1), (1002, 0.0, 1), (1002, 2.5, 0)]


def run(query: str, rows: list[tuple[int, float, int]], engine: str) -> pa.Table:
    """``query``'s result stream on ``engine`` (the whole plan, as far as it can run it)."""
    placement, column_engine = placement_of(engine)
    data = make_readings(rows)
    plan = plan_query(query, CATALOG)
    result = execute(
        plan, CATALOG, {"readings": data}, placement=placement, column_engine=column_engine
    )
    return result.table


def _bits(x: Any) -> Any:
    return struct.pack("<d", x) if isinstance(x, float) else x


def _signs(table: pa.Table) -> list[float]:
    """Every zero in ``table``'s DOUBLE columns."""
    return [
        v
        for c in table.columns
        if pa.types.is_floating(c.type)
        for v in c.to_pylist()
        if v is not None and v == 0
    ]


@pytest.mark.parametrize("engine", engine_params())
@pytest.mark.parametrize("name", sorted(ZERO_QUERIES))
def test_a_kept_zero_is_positive_in_either_arrival_order(name: str, engine: str) -> None:
    query = ZERO_QUERIES[name]
    results = []
    for rows in (ZEROS, [(t, v, p) for t, v, p in reversed(ZEROS)]):
        rows = sorted(rows, key=lambda r: r[0])  # the order within an instant changes
        got = run(query, rows, engine)
        want = oracle(query, CATALOG, {"readings": make_readings(rows)})
        assert_same_stream(got, want, exact=True)
        results.append(got)
    zeros = _signs(results[0]) + _signs(results[1])
    assert all(math.copysign(1.0, z) > 0 for z in zeros), zeros
    assert zeros or name == "in", "no zero in the result"
    if name == "in":  # -0.0 is in a list holding 0.0 (hashed by DataFusion)
        assert results[0].num_rows == 2 * 3 + 3, results[0]


# -- MEDIAN ----------------------------------------------------------------------------------

MAX = 1.7976931348623157e308
#: Pairs whose mean rounds differently by formula: (lo + hi) / 2, lo + (hi - lo) / 2,
#: lo / 2 + hi / 2 and the fused fma(lo, 0.5, hi * 0.5) disagree on some of them.
PAIRS = [
    (0.1, 0.2),
    (0.1, 0.7),
    (-0.1, 0.3),
    (MAX, math.nextafter(MAX, 0)),
    (-MAX, MAX),
    (1e308, 1e308),
    (-1e308, -1e308),
    (-5e-324, 5e-324),
    (5e-324, 5e-324),
    (5e-324, 1.5e-323),
    (-1.5e-323, 2.2250738585072014e-308),
    (3 * 5e-324, 1.0),
    (1e16, 1e16 + 2),
]


def duckdb_median(values: list[float]) -> float:
    """DuckDB's own MEDIAN of ``values`` (the definition)."""
    con = duckdb.connect()
    try:
        con.register("v", pa.table({"x": pa.array(values, pa.float64())}))
        return con.execute("SELECT MEDIAN(x) FROM v").fetchall()[0][0]
    finally:
        con.close()


def medians(values_by_plug: list[list[float]], engine: str) -> list[float]:
    """MEDIAN(value) per plug at the one instant, on ``engine``."""
    rows = [(1000, v, plug) for plug, vs in enumerate(values_by_plug) for v in vs]
    q = f"SELECT plug_id, MEDIAN(value) AS m FROM readings {W} GROUP BY plug_id"
    table = run(q, rows, engine)
    got = dict(zip(table.column("plug_id").to_pylist(), table.column("m").to_pylist(), strict=True))
    return [got[p] for p in range(len(values_by_plug))]


@pytest.mark.parametrize("engine", engine_params())
def test_median_of_an_even_count_has_duckdbs_bits(engine: str) -> None:
    groups = [list(p) for p in PAIRS] + [[p[0], p[1], 7.0, -7.0] for p in PAIRS[:4]]
    got = medians(groups, engine)
    want = [duckdb_median(g) for g in groups]
    assert [_bits(x) for x in got] == [_bits(x) for x in want], list(
        zip(groups, got, want, strict=True)
    )


doubles = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**20), 2**20).map(lambda k: k * 5e-324),  # subnormals
    st.sampled_from([0.1, 0.2, 0.7, MAX, -MAX, 1e16, 0.0]),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    groups=st.lists(st.lists(doubles, min_size=1, max_size=6), min_size=1, max_size=6),
    engine=st.sampled_from(["row", "datafusion"]),
)
def test_median_is_duckdbs_on_random_values(groups: list[list[float]], engine: str) -> None:
    got = medians(groups, engine)
    want = [duckdb_median([v + 0.0 for v in g]) for g in groups]
    assert [_bits(x) for x in got] == [_bits(x) for x in want], list(
        zip(groups, got, want, strict=True)
    )

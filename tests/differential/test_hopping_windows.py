"""Windows whose slide is longer than the window: hopping windows with gaps.

docs/semantics.md defines ``[RANGE r SLIDE s]`` at instant ``T_w = k * s`` as the tuples with
``T_w - r < ts <= T_w`` for any ``s``, and ``[ROWS n SLIDE m]`` evaluation ``k`` as tuples
``k*m - n + 1 .. k*m`` for any ``m``; with ``s > r`` (``m > n``) the tuples between two
windows belong to none. Every engine runs them and gives the oracle's result stream.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hycq.api import execute
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import readings_tables, small_smartplug
from tests.engines import placement_of
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")

QUERIES = [
    "SELECT COUNT(*) AS n, SUM(value) AS s FROM readings [RANGE 2 SECONDS SLIDE 5 SECONDS]",
    "SELECT plug_id, MAX(value) AS m, AVG(value) AS a, MEDIAN(value) AS med "
    "FROM readings [RANGE 3 SECONDS SLIDE 7 SECONDS] WHERE property = 1 GROUP BY plug_id",
    "SELECT ISTREAM plug_id, COUNT(*) AS n FROM readings [RANGE 1 SECOND SLIDE 4 SECONDS] "
    "GROUP BY plug_id",
    "SELECT a.plug_id, COUNT(*) AS n FROM readings [RANGE 2 SECONDS SLIDE 3 SECONDS] AS a, "
    "readings [RANGE 5 SECONDS] AS b WHERE a.plug_id = b.plug_id GROUP BY a.plug_id",
    "SELECT COUNT(*) AS n, SUM(value) AS s, MIN(id) AS first FROM readings [ROWS 3 SLIDE 7]",
    "SELECT DSTREAM plug_id, MAX(value) AS m FROM readings [ROWS 2 SLIDE 5] GROUP BY plug_id",
]


def run(query: str, data: pa.Table, placement: str, engine: str = "duckdb") -> pa.Table:
    plan = plan_query(query, CATALOG)
    return execute(plan, CATALOG, {"readings": data}, placement, column_engine=engine).table


@pytest.mark.parametrize("query", QUERIES)
def test_hopping_windows(engine: str, query: str) -> None:
    # Spark answers a slide in 0.1-1 s: 15 event-seconds, still several hops of each window.
    data = small_smartplug(15 if engine == "spark" else 40, seed=9, rate=3.0)
    expected = oracle(query, CATALOG, {"readings": data})
    assert expected.num_rows > 0
    placement, column = placement_of(engine)
    assert_same_stream(run(query, data, placement, column), expected)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=readings_tables(), query=st.sampled_from(QUERIES))
def test_hopping_windows_on_random_data(data: pa.Table, query: str) -> None:
    expected = oracle(query, CATALOG, {"readings": data})
    assert_same_stream(run(query, data, "row"), expected)
    assert_same_stream(run(query, data, "column"), expected)


def test_gap_tuples_are_in_no_window() -> None:
    """Hand-checked: windows (T-2, T] at T = 1005, 1010, 1015 over one tuple per second."""
    data = small_smartplug(1, seed=1, rate=1.0).slice(0, 0)
    rows = [{"id": i, "ts": 1001 + i, "value": 1.0, "property": 1, "plug_id": 0,
             "household_id": 0, "house_id": 0} for i in range(14)]  # fmt: skip
    data = pa.Table.from_pylist(rows, schema=data.schema)
    got = run(QUERIES[0], data, "row")
    assert list(zip(got.column("_ts").to_pylist(), got.column("n").to_pylist(), strict=True)) == [
        (1005, 2),
        (1010, 2),
        (1015, 1),
    ]

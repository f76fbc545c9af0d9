"""Bad rows of in-memory, generated and live inputs are set aside (``engines.runtime.validate``).

A NULL in a DOUBLE column was kept until the twelfth stop of issue 20: ``is_finite`` of NULL
is NULL, and ``or_`` of NULL is NULL, so the row was neither dropped nor counted, and the row
engine (which read it as NaN) and DuckDB (NULL) counted ``COUNT(value)`` differently.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa

from engines.runtime.dead_letters import DeadLetters, validate
from hycq.api import execute
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import make_readings
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[4]


def test_nulls_and_non_finite_values_are_set_aside_with_their_reasons() -> None:
    batch = pa.record_batch(
        {
            "x": pa.array([1.0, None, math.nan, math.inf, 2.0, -math.inf], pa.float64()),
            "k": pa.array([1, 2, 3, 4, None, 6], pa.int32()),
        }
    )
    dead = DeadLetters(None)
    kept = validate(batch, "s", dead)
    assert kept.column(0).to_pylist() == [1.0]
    assert dead.by_kind["invalid"] == 5


def test_a_null_value_row_is_dead_lettered_by_every_engine() -> None:
    catalog = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")
    q = (
        "SELECT plug_id, COUNT(*) AS n, COUNT(value) AS v "
        "FROM readings [RANGE 6 SECONDS] GROUP BY plug_id"
    )
    data = make_readings([(1000, None, 0), (1001, 1.0, 0), (1002, None, 1), (1003, 2.0, 1)])
    expected = oracle(q, catalog, {"readings": data})
    for placement in ("row", "column"):
        r = execute(plan_query(q, catalog), catalog, {"readings": data}, placement=placement)
        assert r.dead_letter == 2
        assert_same_stream(r.table, expected)
    assert expected.column("v").to_pylist() == expected.column("n").to_pylist()

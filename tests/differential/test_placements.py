"""The optimizer's plans (``--placement auto``) give the oracle's result stream.

Whole plans on each engine and random mixed placements are in test_engines.py (the suite over
every engine); here the optimizer chooses the join order and the placement. The oracle
(DuckDB re-running the query over each window, tests/oracle.py) is computed once per query
and data set.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pyarrow as pa
import pytest

from hycq.api import execute
from hycq.planning import OptimizerOptions
from optimizer.ir.catalog import Catalog
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import small_smartplug
from tests.lateness import without_late
from tests.oracle import assert_same_stream, oracle
from tests.shipped import READINGS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = READINGS  # the smart-plug queries (keyed ones: test_multi_stream.py)

#: (event-seconds, tuples/s): 5-minute windows fill and slide for 20 s.
SPAN = (320, 6.0)
#: The 5- and 8-way joins' windows are up to 15 minutes long; their 1- and 3-minute windows
#: expire within two minutes.
MIXED_SPAN = {"join_5": (200, 6.0), "join_8": (200, 4.0)}


def _catalog_for(path: Path) -> Catalog:
    return load_catalog(path.parent / "catalog.toml")


@functools.cache
def _case(path: Path, seconds: int, rate: float, seed: int) -> tuple[str, pa.Table, pa.Table]:
    """(query text, input data, the oracle's result stream), computed once."""
    query = path.read_text()
    catalog = _catalog_for(path)
    data = small_smartplug(seconds, seed=seed, rate=rate)
    expected = oracle(query, catalog, without_late(query, catalog, {"readings": data}))
    return query, data, expected


@pytest.mark.slow
@pytest.mark.parametrize("rate", [2000.0, 40000.0])
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_optimizer_plan(path: Path, rate: float) -> None:
    """``--placement auto``: the optimizer's plan (Phase-One join order included) at two
    rates gives the oracle's stream; at 40k tuples/s Q2's correlated aggregate leaves the
    row engine (the dissertation's hybrid plan). Q1's stays on it: its per-plug MAX changes
    for ~0.7% of the plugs per slide, so the row join seldom re-probes (docs/optimizer.md)."""
    query, data, expected = _case(path, *MIXED_SPAN.get(path.stem, SPAN), seed=3)
    catalog = _catalog_for(path)
    result = execute(
        plan_query(query, catalog, path.name),
        catalog,
        {"readings": data},
        placement="auto",
        optimizer=OptimizerOptions(rate=rate, cost_model="analytical"),
    )
    assert_same_stream(result.table, expected)
    assert not result.metrics["faults"]
    m = result.metrics
    assert m["cost_model"] == "analytical"
    if rate == 40000.0 and path.stem == "q2":
        assert set(m["placement"].values()) == {"row", "duckdb"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_optimizer_plan_over_datafusion(path: Path) -> None:
    """``--placement auto`` with DataFusion as the only columnar engine gives the oracle's
    stream, and places nothing on an engine it was not offered."""
    query, data, expected = _case(path, *MIXED_SPAN.get(path.stem, SPAN), seed=3)
    catalog = _catalog_for(path)
    result = execute(
        plan_query(query, catalog, path.name),
        catalog,
        {"readings": data},
        placement="auto",
        column_engine="datafusion",
        optimizer=OptimizerOptions(rate=40000.0, engines=("row", "datafusion")),
    )
    assert_same_stream(result.table, expected)
    assert set(result.metrics["placement"].values()) <= {"row", "datafusion"}


ARROW_SELECTS = [
    "property = 1",
    "property = 1 AND plug_id <> 2",
    "NOT (property = 0) OR value > 100",
    "value >= 10.5 AND house_id IN (0, 1)",  # IN: not Arrow-filtered (row filter)
    "value * 2 > 30",  # arithmetic: not Arrow-filtered
]


@pytest.mark.parametrize("where", ARROW_SELECTS)
def test_a_select_feeding_a_columnar_group_filters_arrow_in_its_window(where: str) -> None:
    """A select on the row engine whose only consumer is a columnar group filters the
    window's Arrow batches (engines.row.arrow_ops.arrow_filter) instead of turning them into
    tuples; its result stream is the oracle's, and a predicate Arrow cannot evaluate exactly
    stays a row filter."""
    from hycq.api import resolve_placement
    from optimizer.ir.placement import complete_placement
    from optimizer.ir.plan import Select

    query = (
        "SELECT plug_id, MAX(value) AS m, COUNT(*) AS n "
        f"FROM readings [RANGE 20 SECONDS SLIDE 1 SECOND] WHERE {where} GROUP BY plug_id"
    )
    catalog = _catalog_for(ROOT / "queries" / "smartplug" / "q1.sql")
    data = small_smartplug(60, seed=4, rate=30.0)
    expected = oracle(query, catalog, {"readings": data})
    plan = plan_query(query, catalog)
    select = next(op.id for op in plan.operators() if isinstance(op, Select))
    aggregate = plan.consumers(select)[0]
    placement = complete_placement(plan, {**resolve_placement(plan, "row"), aggregate: "duckdb"})
    result = execute(plan, catalog, {"readings": data}, placement=placement)
    assert_same_stream(result.table, expected)
    ops = result.metrics["operators"]
    arrow = "IN" not in where and "*" not in where
    # An Arrow-filtered select is charged by its window: it counts what it dropped.
    assert ops[select]["tuples_in"] == data.num_rows
    assert (ops[select]["tuples_out"] < ops[select]["tuples_in"]) or not arrow

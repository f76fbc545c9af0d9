"""Source-driven estimation (Eq. 6.1-6.3), window cardinalities, selectivities, precision."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from optimizer.estimate import (
    EQUALITY,
    RANGE,
    estimate,
    predicate_selectivity,
)
from optimizer.ir.catalog import Catalog
from optimizer.ir.cost import Precision
from optimizer.ir.expr import Binary, ColumnRef, Literal, Unary
from optimizer.ir.plan import R2S, PlanBuilder, Sink, Source, StreamMode, Window, WindowKind
from optimizer.ir.types import DataType
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from optimizer.statistics import sample_selectivities

ROOT = Path(__file__).resolve().parents[3]
JOINS = ROOT / "queries" / "joins"
QUERIES = ROOT / "queries" / "smartplug"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(JOINS / "catalog.toml")


def _window_plan(kind: WindowKind, size: int | None, slide: int, slide_rows: bool = False):
    cat = load_catalog(JOINS / "catalog.toml")
    schema = cat.get("readings").schema  # type: ignore[union-attr]
    b = PlanBuilder()
    src = b.add(lambda i: Source(i, schema, "readings", 1, "s"))
    win = b.add(lambda i: Window(i, schema, kind, size, slide, slide_rows, 1, "s", "w"), src)
    out = b.add(lambda i: R2S(i, schema, StreamMode.RSTREAM), win)
    return b.build(b.add(lambda i: Sink(i, schema), out)), cat


@pytest.mark.parametrize(
    ("kind", "size", "slide", "rows", "card", "slide_s"),
    [
        (WindowKind.RANGE, 300, 1, False, 300 * 500.0, 1.0),
        (WindowKind.ROWS, 1000, 10, True, 1000.0, 10 / 500),
        (WindowKind.NOW, 1, 1, False, 500.0, 1.0),
        (WindowKind.UNBOUNDED, None, 1, False, 500.0 * 3600, 1.0),
    ],
)
def test_window_cardinalities(kind, size, slide, rows, card, slide_s) -> None:
    plan, cat = _window_plan(kind, size, slide, rows)
    w = estimate(plan, cat, rates=500)["window1"]
    assert math.isclose(w.cardinality.value, card) and math.isclose(w.slide_seconds, slide_s)
    assert w.lambda_out.value == 500 and w.lambda_out.precision is Precision.EXACT
    if kind is WindowKind.UNBOUNDED:
        assert w.cardinality.precision is Precision.ESTIMATED


def test_equations_6_1_to_6_3_on_join_2(catalog: Catalog) -> None:
    plan = plan_query((JOINS / "join_2.sql").read_text(), catalog)
    est = estimate(plan, catalog, rates=2000)
    sel = est["select1"]  # property = 1: default equality selectivity
    assert math.isclose(sel.lambda_out.value, 2000 * EQUALITY)
    assert math.isclose(sel.cardinality.value, 2000 * 60 * EQUALITY)
    agg = est["aggregate1"]  # Eq. 6.3 refined to the groups an AVG changes per 1-s slide
    g, events = agg.groups.value, 2 * sel.lambda_out.value  # type: ignore[union-attr]
    assert math.isclose(agg.lambda_out.value, 2 * g * (1 - math.exp(-events / g)))
    assert agg.lambda_out.value <= 2 * g
    assert agg.groups.value <= sel.cardinality.value  # type: ignore[union-attr]
    j = est["join1"]  # Eq. 6.2
    (l_in, r_in), (l_w, r_w) = j.lambda_in, j.input_cardinality
    f = j.selectivity.value  # type: ignore[union-attr]
    assert math.isclose(j.lambda_out.value, l_in.value * f * r_w.value + r_in.value * f * l_w.value)
    assert math.isclose(est["project1"].lambda_out.value, j.lambda_out.value)  # f = 1
    assert j.lambda_out.precision is Precision.ESTIMATED


def test_catalog_statistics_override_defaults(catalog: Catalog) -> None:
    stream = catalog.get("readings")
    assert stream is not None
    stats = replace(
        stream,
        selectivity=(("property = 1", 0.5),),
        distinct=(("house_id", 40), ("household_id", 10), ("plug_id", 5)),
    )
    cat = Catalog({"readings": stats})
    plan = plan_query((JOINS / "join_2.sql").read_text(), cat)
    est = estimate(plan, cat)
    assert est["select1"].selectivity.value == 0.5  # type: ignore[union-attr]
    assert est["select1"].selectivity.precision is Precision.EXACT  # type: ignore[union-attr]
    groups = est["aggregate1"].groups
    assert groups is not None and groups.value == 2000 and groups.precision is Precision.EXACT
    # Joining two per-plug aggregates on the plug key: 1 / 2000, so lambda_out = sum of inputs.
    j = est["join1"]
    assert math.isclose(j.selectivity.value, 1 / 2000)  # type: ignore[union-attr]
    lam_in = sum(e.value for e in j.lambda_in)
    assert math.isclose(j.lambda_out.value, lam_in) and math.isclose(j.cardinality.value, 2000)


def test_default_predicate_selectivities() -> None:
    v = ColumnRef(0, "v", DataType.DOUBLE)
    eq = Binary("=", v, Literal(1.0, DataType.DOUBLE), DataType.BOOLEAN)
    rng = Binary(">", v, Literal(1.0, DataType.DOUBLE), DataType.BOOLEAN)
    both = Binary("AND", eq, rng, DataType.BOOLEAN)
    either = Binary("OR", eq, rng, DataType.BOOLEAN)
    assert predicate_selectivity(eq, {}).value == EQUALITY
    assert math.isclose(predicate_selectivity(both, {}).value, EQUALITY * RANGE)
    assert math.isclose(
        predicate_selectivity(either, {}).value, EQUALITY + RANGE - EQUALITY * RANGE
    )
    assert math.isclose(predicate_selectivity(Unary("NOT", rng, DataType.BOOLEAN), {}).value, 2 / 3)
    assert predicate_selectivity(both, {"v = 1.0": 0.5}).value == 0.5 * RANGE


def test_rate_override_per_stream_and_missing_rate(catalog: Catalog) -> None:
    plan = plan_query((JOINS / "join_2.sql").read_text(), catalog)
    assert estimate(plan, catalog, rates={"readings": 40000})["window1"].lambda_out.value == 40000
    with pytest.raises(ValueError, match="no arrival rate"):
        estimate(plan, None)


def test_selectivity_measured_from_a_sample(catalog: Catalog) -> None:
    plan = plan_query((JOINS / "join_2.sql").read_text(), catalog)
    sample = pa.table({"property": [0, 1, 1, 1], "value": [1.0, 2.0, 3.0, 4.0]})
    measured = sample_selectivities(plan, sample)
    assert measured == {"property = 1": 0.75}
    est = estimate(plan, catalog, selectivities=measured)
    assert est["select1"].selectivity.value == 0.75  # type: ignore[union-attr]


def test_aggregate_output_changed_groups(catalog: Catalog) -> None:
    """A per-plug MAX emits two rows per plug whose MAX changes: ~2 * slide / range of the
    touched plugs per slide, so its output does not grow with the rate as Eq. 6.3's would."""
    stream = catalog.get("readings")
    assert stream is not None
    cat = Catalog(
        {
            "readings": replace(
                stream,
                selectivity=(("property = 1", 0.5),),
                distinct=(("house_id", 40), ("household_id", 10), ("plug_id", 5)),
            )
        }
    )
    plan = plan_query((QUERIES / "q1.sql").read_text(), cat)
    outs = []
    for rate in (1000, 40000):
        agg = estimate(plan, cat, rates=rate)["aggregate1"]
        assert agg.groups is not None and agg.groups.value == 2000
        outs.append(agg.lambda_out.value)
        assert math.isclose(agg.lambda_out.value, 2 * 2000 * 2 / 300)  # 2 rows x G x p
    assert outs[0] == outs[1]

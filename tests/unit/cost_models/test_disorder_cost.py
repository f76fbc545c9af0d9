"""The cost model knows the K-slack buffers: with ``--disorder`` the gateway pays a
per-tuple buffering cost on every source, the same in every placement."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from cost_models.analytical import AnalyticalCostModel
from optimizer.costmodel import BUFFER_TUPLE_S, PlanCoster, with_buffering
from optimizer.estimate import estimate
from optimizer.ir.plan import Source
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[3]
CATALOG = load_catalog(ROOT / "queries" / "keyed" / "catalog.toml")


def _costs(model: object, base: object = None) -> tuple[float, float, float]:
    plan = plan_query((ROOT / "queries" / "keyed" / "j2.sql").read_text(), CATALOG)
    est = estimate(plan, CATALOG, rates=None)
    rate = sum(est[i].lambda_out.value for i in plan.sources)
    off = PlanCoster(est, base or AnalyticalCostModel(), shared_row_core=True)  # type: ignore[arg-type]
    on = PlanCoster(est, model, shared_row_core=True)  # type: ignore[arg-type]
    row = dict.fromkeys(plan.r2r_ids(), "row")
    assert all(isinstance(plan.op(i), Source) for i in plan.sources)
    return (
        off.placement_cost(row).utilization,
        on.placement_cost(row).utilization,
        rate,
    )


def test_buffers_cost_per_source_tuple() -> None:
    off, on, rate = _costs(with_buffering(AnalyticalCostModel()))
    assert on - off == pytest.approx(rate * BUFFER_TUPLE_S)


def test_a_configured_buffering_cost_is_kept_and_off_without_buffers() -> None:
    model = AnalyticalCostModel(buffering=1e-6)
    assert with_buffering(model).buffering == 1e-6  # type: ignore[attr-defined]
    assert with_buffering(model, on=False).buffering == 0.0  # type: ignore[attr-defined]
    assert with_buffering(AnalyticalCostModel(), on=False) == AnalyticalCostModel()


def test_a_plugin_model_is_wrapped() -> None:
    inner = AnalyticalCostModel()

    @dataclass(frozen=True)
    class Plugin:
        name: str = "plugin"

        def unit_cost(self, op, engine, est):  # type: ignore[no-untyped-def]
            return inner.unit_cost(op, engine, est)

        def group_cost(self, group, estimates):  # type: ignore[no-untyped-def]
            return inner.group_cost(group, estimates)

    wrapped = with_buffering(Plugin())  # type: ignore[arg-type]
    assert wrapped.name == "plugin"
    off, on, rate = _costs(wrapped, Plugin())
    assert on - off == pytest.approx(rate * BUFFER_TUPLE_S)

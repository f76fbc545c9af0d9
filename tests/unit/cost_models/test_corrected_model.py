"""The cost model corrected by measurement (cost_models.corrected): each class of work is
scaled by its own factor, and a plan's predicted busy time splits into those classes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cost_models.corrected import CorrectedModel, uncorrected
from hycq.api import load_query
from hycq.planning import OptimizerOptions, optimize
from optimizer.ir.errors import OptionError
from optimizer.ir.measured import MeasuredStatistics

ROOT = Path(__file__).resolve().parents[3]
MEASURED = MeasuredStatistics({"r": 2000.0, "s": 2000.0}, {}, {}, 60.0)


def _classes(correction: tuple[tuple[str, float], ...], placement: str) -> dict[str, float]:
    q = load_query(ROOT / "queries" / "keyed" / "join_aggs.sql")
    opt = optimize(q, OptimizerOptions(correction=correction), measured=MEASURED)
    r2r = set(opt.plan.r2r_ids())
    where = {o: (placement if o in r2r else "row") for o in opt.plan.topological()}
    return opt.coster.utilization_by_class(where)


def test_each_class_is_scaled_by_its_own_factor() -> None:
    base = _classes((), "row")
    assert {"row:gateway", "row:aggregate", "row:join", "row:select"} <= set(base)
    scaled = _classes((("row:aggregate", 3.0), ("row", 2.0)), "row")
    assert scaled["row:aggregate"] == pytest.approx(3 * base["row:aggregate"])
    # classes without a factor of their own take the overall row factor
    assert scaled["row:join"] == pytest.approx(2 * base["row:join"])
    assert scaled["row:gateway"] == pytest.approx(2 * base["row:gateway"])
    col = _classes((), "duckdb")
    col_scaled = _classes((("duckdb", 0.5), ("row:gateway", 4.0)), "duckdb")
    assert col_scaled["duckdb"] == pytest.approx(0.5 * col["duckdb"])
    assert col_scaled["row:gateway"] == pytest.approx(4 * col["row:gateway"])
    assert "row:aggregate" not in col  # the aggregates run on DuckDB


def test_the_classes_add_up_to_the_placement_cost() -> None:
    q = load_query(ROOT / "queries" / "keyed" / "join_aggs.sql")
    opt = optimize(q, OptimizerOptions(), measured=MEASURED)
    split = opt.coster.utilization_by_class(opt.placement)
    assert sum(split.values()) == pytest.approx(opt.cost.utilization)


def test_bad_factors_are_refused_and_the_base_is_recoverable() -> None:
    q = load_query(ROOT / "queries" / "keyed" / "join_aggs.sql")
    model = optimize(q, OptimizerOptions(), measured=MEASURED).model
    with pytest.raises(OptionError):
        CorrectedModel(model, {"row": 0.0})
    wrapped = CorrectedModel(CorrectedModel(model, {"row": 2.0}), {"duckdb": 3.0})
    assert uncorrected(wrapped) is model

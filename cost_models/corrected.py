"""A cost model corrected by what a running plan was measured to cost.

A cost model is fitted offline (``hycq calibrate``) on plans, rates and window sizes that
need not be the ones a long-running query meets: Q2's all-row plan over a 5-minute window
at 20k tuples/s measures about three times the row-engine busy time the calibrated model
predicts (docs/performance.md, the ramp). ``hycq run --adapt`` measures the running plan's
busy time per operator (the run-time monitor) and can compare it with the model's prediction
for the same plan on the same measured statistics; :class:`CorrectedModel` scales the
model's costs on each engine by that measured-over-predicted ratio, so that every candidate
plan is priced on the scale the machine actually shows. Factors per class of work: on the
row engine one per kind of R2R operator (select, project, join, aggregate) and one for the
gateway (sources, windows and the conversion of their arrivals to tuples, R2S, the sink,
the engine thread's time between operators), plus an overall row factor for classes the
running plan did not exercise; and one per columnar engine (its groups' per-invocation
cost). Per class, because the model's errors are: Q2 all-row at 20k tuples/s is 2-3x
over the model in its aggregates and joins over 5-minute windows, not in its gateway, and
one row factor would price a columnar plan's remaining gateway as if it were. Work the
running plan does not exercise keeps factor 1 (the model is all we know about it).

This is the online use of "a cost model that learns from runs": the factors are ephemeral
(one run), the offline refit is ``hycq calibrate``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from optimizer.ir.costing import (
    GATEWAY,
    CostModel,
    Estimates,
    OpEstimate,
    cost_class,
    factor_key,
)
from optimizer.ir.errors import OptionError
from optimizer.ir.placement import ROW, Group
from optimizer.ir.plan import Operator


class CorrectedModel:
    """``base`` with its costs multiplied by measured-over-predicted factors: a row
    operator's by ``factors["row:<class>"]`` (:func:`cost_class`), else ``factors["row"]``;
    a columnar group's by ``factors[<engine>]``; 1 where no factor is given."""

    def __init__(self, base: CostModel, factors: Mapping[str, float]) -> None:
        for engine, f in factors.items():
            if not isinstance(f, int | float) or not math.isfinite(f) or f <= 0:
                raise OptionError(f"cost correction for {engine} must be a number > 0, got {f!r}")
        self.base = base
        self.factors = dict(factors)
        self.name = f"{base.name}*measured"

    def __getattr__(self, attr: str) -> Any:  # other attributes of the base model
        return getattr(self.base, attr)

    def row_factor(self, cls: str) -> float:
        return self.factors.get(factor_key(ROW, cls), self.factors.get(ROW, 1.0))

    @property
    def ingest(self) -> float:
        """The gateway's per-tuple conversion cost: gateway work, scaled with it."""
        return float(getattr(self.base, "ingest", 0.0)) * self.row_factor(GATEWAY)

    @property
    def arrow_window(self) -> float | None:
        """A window's per-tuple cost as Arrow chunks (``PlanCoster.arrow_credits``):
        gateway work, scaled with it."""
        base = getattr(self.base, "arrow_window", None)
        return None if base is None else float(base) * self.row_factor(GATEWAY)

    @property
    def arrow_select(self) -> float | None:
        """An Arrow select's cost per row it passes: gateway work (its window's), scaled with it."""
        base = getattr(self.base, "arrow_select", None)
        return None if base is None else float(base) * self.row_factor(GATEWAY)

    @property
    def buffering(self) -> float:
        """The K-slack buffers' per-tuple cost (``--disorder``): gateway work too."""
        return float(getattr(self.base, "buffering", 0.0)) * self.row_factor(GATEWAY)

    def unit_cost(self, op: Operator, engine: str, estimates: OpEstimate) -> float:
        base = self.base.unit_cost(op, engine, estimates)
        if engine == ROW:
            return base * self.row_factor(cost_class(op))
        return base * self.factors.get(engine, 1.0)

    def group_cost(self, group: Group, estimates: Estimates) -> float:
        return self.base.group_cost(group, estimates) * self.factors.get(group.engine, 1.0)


def uncorrected(model: CostModel) -> CostModel:
    """The model under any correction."""
    while isinstance(model, CorrectedModel):
        model = model.base
    return model

"""A cost model corrected by what a running plan was measured to cost.

A cost model is fitted offline (``hycq calibrate``) on plans, rates and window sizes that
need not be the ones a long-running query meets: Q2's all-row plan over a 5-minute window
at 20k tuples/s measures about three times the row-engine busy time the calibrated model
predicts (experiments/README.md, the ramp). ``hycq run --adapt`` measures the running plan's
busy time per operator (the run-time monitor) and can compare it with the model's prediction
for the same plan on the same measured statistics; :class:`CorrectedModel` scales the
model's costs on each engine by that measured-over-predicted ratio, so that every candidate
plan is priced on the scale the machine actually shows. One factor per engine: the row
engine (every row operator's per-tuple cost and the gateway's Arrow-to-tuple conversion) and
each columnar engine (its groups' per-invocation cost). An engine the running plan does not
exercise keeps factor 1 (the model is all we know about it).

This is the online use of "a cost model that learns from runs": the factors are ephemeral
(one run), the offline refit is ``hycq calibrate``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from optimizer.ir.costing import CostModel, Estimates, OpEstimate
from optimizer.ir.errors import OptionError
from optimizer.ir.placement import ROW, Group
from optimizer.ir.plan import Operator


class CorrectedModel:
    """``base`` with its costs on engine ``e`` multiplied by ``factors[e]`` (default 1)."""

    def __init__(self, base: CostModel, factors: Mapping[str, float]) -> None:
        for engine, f in factors.items():
            if not isinstance(f, int | float) or not math.isfinite(f) or f <= 0:
                raise OptionError(f"cost correction for {engine} must be a number > 0, got {f!r}")
        self.base = base
        self.factors = dict(factors)
        self.name = f"{base.name}*measured"

    def __getattr__(self, attr: str) -> Any:  # other attributes of the base model
        return getattr(self.base, attr)

    @property
    def ingest(self) -> float:
        """The gateway's per-tuple conversion cost: row-engine work, scaled with it."""
        return float(getattr(self.base, "ingest", 0.0)) * self.factors.get(ROW, 1.0)

    @property
    def buffering(self) -> float:
        """The K-slack buffers' per-tuple cost (``--disorder``): row-engine work too."""
        return float(getattr(self.base, "buffering", 0.0)) * self.factors.get(ROW, 1.0)

    def unit_cost(self, op: Operator, engine: str, estimates: OpEstimate) -> float:
        return self.base.unit_cost(op, engine, estimates) * self.factors.get(engine, 1.0)

    def group_cost(self, group: Group, estimates: Estimates) -> float:
        return self.base.group_cost(group, estimates) * self.factors.get(group.engine, 1.0)


def uncorrected(model: CostModel) -> CostModel:
    """The model under any correction."""
    while isinstance(model, CorrectedModel):
        model = model.base
    return model

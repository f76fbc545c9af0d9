"""The optimizer's interface to cost models: the estimates it hands them, the protocol they
implement.

The estimator (``optimizer.estimate``) computes, for every operator of a plan, the rates and
cardinalities of :class:`OpEstimate`; all of a plan's are one :class:`Estimates`. A
:class:`CostModel` prices work from them; it never estimates cardinalities itself, so
swapping models keeps experiments comparable. Cost models (``cost_models``, and plugins of
the entry-point group ``hycq.cost_models``) import this module and nothing else of the
optimizer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from optimizer.ir.cost import Estimate
from optimizer.ir.placement import Group
from optimizer.ir.plan import Category, LogicalPlan, Operator


@dataclass(frozen=True, slots=True)
class OpEstimate:
    """The estimates of one operator (``optimizer.estimate`` documents how each is derived).

    * ``lambda_in``: per input port, tuples arriving per second of source time;
    * ``lambda_out``: output tuples per second of source arrivals;
    * ``cardinality``: the size of the operator's relation at one slide instant (|w|);
    * ``input_cardinality``: the inputs' cardinalities, in port order;
    * ``slide_seconds``: how often the relation changes;
    * ``selectivity``, ``groups`` and ``touched`` where they apply.
    """

    lambda_in: tuple[Estimate, ...]
    lambda_out: Estimate
    cardinality: Estimate
    input_cardinality: tuple[Estimate, ...]
    slide_seconds: float
    selectivity: Estimate | None = None
    groups: Estimate | None = None
    touched: float | None = None
    """Aggregates: groups one slide touches (arrivals and expirations of a window input,
    the delta tuples of a derived input), balls into bins over ``groups``."""
    examined: float | None = None
    """Joins with a residual predicate: stored tuples per second of source arrivals that
    the row hash join's probes test it on (the equi-keys' matches; with no equi-key, the
    whole other side); None when every matched pair is output."""

    @property
    def total_in(self) -> Estimate:
        """Sum of the input arrivals (per source second)."""
        total = Estimate.exact(0.0)
        for lam in self.lambda_in:
            total = total + lam
        return total

    @property
    def invocations_per_second(self) -> float:
        """Slides per second of source time (``n_slide`` of Eq. 6.3)."""
        return 1.0 / self.slide_seconds if self.slide_seconds > 0 else 0.0


@dataclass(frozen=True)
class Estimates:
    """Per-operator estimates of one plan under one set of rates."""

    plan: LogicalPlan
    ops: Mapping[str, OpEstimate]
    rates: Mapping[str, float] = field(default_factory=dict)
    declared: Mapping[str, float] = field(default_factory=dict)
    """Every declared or measured selectivity, by predicate display text."""
    key_distinct: Callable[[str, list[int]], Estimate] | None = None
    """Distinct count of a composite key (columns) of an operator (by id)."""

    def __getitem__(self, op_id: str) -> OpEstimate:
        return self.ops[op_id]


class CostModel(Protocol):
    """Prices row operators per tuple and columnar groups per invocation.

    * ``unit_cost(op, engine, estimates)``: seconds per input tuple for an operator run
      tuple-at-a-time by the row engine (``c_ji`` of Eq. 6.4, the same for every input);
    * ``group_cost(group, estimates)``: seconds per invocation of a columnar group (a DB-op
      / migration candidate) = transfer in + SQL + transfer out + fixed per-invocation
      overhead; the group is invoked once per slide.

    ``optimizer.costmodel.PlanCoster`` turns these seconds into utilizations and plan costs.
    """

    name: str

    def unit_cost(self, op: Operator, engine: str, estimates: OpEstimate) -> float:
        """Seconds per input tuple for ``op`` on the row engine (``engine`` is ``"row"``)."""
        ...

    def group_cost(self, group: Group, estimates: Estimates) -> float:
        """Seconds per invocation of ``group`` on ``group.engine`` (inf if it cannot run)."""
        ...


# Classes of work for a cost model corrected by measurement (cost_models.corrected, the
# --adapt controller): defined here so the optimizer can attribute predicted work to them
# without importing a cost model.
#: The class of the row engine's gateway work: sources, windows (and converting their
#: arrivals to tuples), R2S operators, the sink, K-slack buffering.
GATEWAY = "gateway"


def cost_class(op: Operator) -> str:
    """The correction class of a row operator: its kind for an R2R operator (``select``,
    ``project``, ``join``, ``aggregate``), :data:`GATEWAY` for every other one."""
    return op.kind if op.category is Category.R2R else GATEWAY


def factor_key(engine: str, cls: str | None = None) -> str:
    """The key of a correction factor: ``row:<class>`` for a class of row work, else the
    engine's name (``row`` itself: every row class not measured on its own)."""
    return f"{engine}:{cls}" if cls is not None else engine

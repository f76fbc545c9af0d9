"""Value types of the optimizer: statistics with their precision, and the plan cost.

Three things are kept apart (STYLE.md, practice 5): a *statistic* says how sure it is
(:class:`Precision`, :class:`Estimate`, after DataFusion's ``Precision<T>``); the estimator
(``optimizer.estimate``) turns statistics into rates and cardinalities; a cost model turns
those into a :class:`Cost`. Swapping cost models never changes the estimates.

A plan's cost is the pair ``C(P) = <C_b, C_u>`` of the dissertation (Eq. 6.5/6.6): the
bottleneck ``C_b = max_j u_j`` and the total utilization ``C_u = sum_j u_j`` over the units
that run the plan. A unit is usually one operator or one columnar group; when several
operators share one core (the single-threaded row engine, ``shared_row_core``), their loads
add up into one ``core_load`` term, which is itself a unit of the maximum.

Plans are ranked by ONE comparison, :func:`sort_key`, implementing Definition 6.1: a feasible
plan (C_b <= 1) beats an infeasible one; two feasible plans rank by lower C_u; two infeasible
plans by lower C_b (higher throughput). The ``utilization_only`` variant (``--no-feasibility``,
section 6.4.3) ranks by C_u alone.

Example:
    >>> a = Cost.unit(0.4) + Cost.unit(0.3)
    >>> (a.bottleneck, round(a.utilization, 3), a.feasible)
    (0.4, 0.7, True)
    >>> b = Cost.unit(1.5)
    >>> better(a, b), better(b, a)
    (True, False)
    >>> better(b, a, utilization_only=True)
    False
    >>> Estimate.exact(2.0) * Estimate.estimated(0.5)
    Estimate(value=1.0, precision=<Precision.ESTIMATED: 'estimated'>)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

# -- statistics ---------------------------------------------------------------------------


class Precision(Enum):
    """How much a number can be trusted: measured/declared, derived by a rule, or unknown."""

    EXACT = "exact"
    ESTIMATED = "estimated"
    ABSENT = "absent"

    def combine(self, other: Precision) -> Precision:
        """The precision of a value computed from two others: the weaker one wins."""
        if Precision.ABSENT in (self, other):
            return Precision.ABSENT
        if Precision.ESTIMATED in (self, other):
            return Precision.ESTIMATED
        return Precision.EXACT


@dataclass(frozen=True, slots=True)
class Estimate:
    """A number with its :class:`Precision`. ``Absent`` absorbs any arithmetic.

    Plain floats in arithmetic count as exact constants. An absent estimate has value NaN.
    """

    value: float
    precision: Precision

    @staticmethod
    def exact(value: float) -> Estimate:
        return Estimate(float(value), Precision.EXACT)

    @staticmethod
    def estimated(value: float) -> Estimate:
        return Estimate(float(value), Precision.ESTIMATED)

    @staticmethod
    def absent() -> Estimate:
        return Estimate(math.nan, Precision.ABSENT)

    @property
    def is_absent(self) -> bool:
        return self.precision is Precision.ABSENT

    def or_default(self, default: Estimate) -> Estimate:
        """Self, or ``default`` when absent."""
        return default if self.is_absent else self

    def to_estimated(self) -> Estimate:
        """The same value, demoted to Estimated (unless absent)."""
        return self if self.is_absent else Estimate(self.value, Precision.ESTIMATED)

    def _apply(self, other: Estimate | float, fn: Callable[[float, float], float]) -> Estimate:
        o = other if isinstance(other, Estimate) else Estimate.exact(other)
        precision = self.precision.combine(o.precision)
        if precision is Precision.ABSENT:
            return Estimate.absent()
        return Estimate(fn(self.value, o.value), precision)

    def __add__(self, other: Estimate | float) -> Estimate:
        return self._apply(other, lambda a, b: a + b)

    __radd__ = __add__

    def __mul__(self, other: Estimate | float) -> Estimate:
        return self._apply(other, lambda a, b: a * b)

    __rmul__ = __mul__

    def __sub__(self, other: Estimate | float) -> Estimate:
        return self._apply(other, lambda a, b: a - b)

    def __rsub__(self, other: float) -> Estimate:
        return Estimate.exact(other) - self

    def __truediv__(self, other: Estimate | float) -> Estimate:
        return self._apply(other, lambda a, b: a / b if b else math.inf)

    def __rtruediv__(self, other: float) -> Estimate:
        return Estimate.exact(other) / self

    def min(self, other: Estimate | float) -> Estimate:
        """The smaller value (e.g. a group count capped by the input cardinality)."""
        return self._apply(other, min)

    def max(self, other: Estimate | float) -> Estimate:
        return self._apply(other, max)

    def __str__(self) -> str:
        if self.is_absent:
            return "absent"
        mark = "" if self.precision is Precision.EXACT else "~"
        return f"{mark}{self.value:.4g}"


# -- cost ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cost:
    """``<C_b, C_u>`` of a (partial) plan, in utilization units (1.0 = one core saturated).

    ``unit_peak`` is the largest u of an independently running unit (an operator, or a
    columnar group); ``core_load`` is the summed u of the operators that share one core.
    ``bottleneck`` (C_b) is the larger of the two; ``utilization`` (C_u) sums everything.
    """

    utilization: float = 0.0
    unit_peak: float = 0.0
    core_load: float = 0.0

    @staticmethod
    def unit(u: float) -> Cost:
        """The cost of one independently running unit with utilization ``u`` (Eq. 6.4)."""
        return Cost(u, u, 0.0)

    @staticmethod
    def on_core(u: float) -> Cost:
        """The cost of an operator that shares the single row-engine core."""
        return Cost(u, 0.0, u)

    @staticmethod
    def from_totals(bottleneck: float, utilization: float) -> Cost:
        """A cost given directly as ``<C_b, C_u>``."""
        return Cost(utilization, bottleneck, 0.0)

    @property
    def bottleneck(self) -> float:
        """C_b (Eq. 6.5)."""
        return max(self.unit_peak, self.core_load)

    @property
    def feasible(self) -> bool:
        """The plan keeps up with the arrival rate: no unit is over-utilized (C_b <= 1)."""
        return self.bottleneck <= 1.0

    def __add__(self, other: Cost) -> Cost:
        """Cost of running both: utilizations add, peaks max, shared-core loads add."""
        return Cost(
            self.utilization + other.utilization,
            max(self.unit_peak, other.unit_peak),
            self.core_load + other.core_load,
        )

    def __str__(self) -> str:
        return f"<C_b={self.bottleneck:.6g}, C_u={self.utilization:.6g}>"


#: The neutral cost (an empty plan).
ZERO = Cost()

#: The cost of a plan that cannot run (an operator on an engine that cannot execute it).
INFEASIBLE = Cost(math.inf, math.inf, 0.0)


def merge(costs: Iterable[Cost]) -> Cost:
    """The cost of running all parts together (the sum under :meth:`Cost.__add__`)."""
    total = ZERO
    for c in costs:
        total = total + c
    return total


def sort_key(cost: Cost, utilization_only: bool = False) -> tuple[float, float, float]:
    """The total order of Definition 6.1 (smaller is better).

    Feasible plans come first, ranked by C_u; infeasible ones follow, ranked by C_b. The last
    component breaks ties only (by the other measure). With ``utilization_only`` the rank is
    C_u alone (then C_b), the dissertation's feasibility-blind variant.
    """
    if utilization_only:
        return (0.0, cost.utilization, cost.bottleneck)
    if cost.feasible:
        return (0.0, cost.utilization, cost.bottleneck)
    return (1.0, cost.bottleneck, cost.utilization)


def primary_key(cost: Cost, utilization_only: bool = False) -> tuple[float, float]:
    """The part of :func:`sort_key` Definition 6.1 itself defines (class and measure)."""
    k = sort_key(cost, utilization_only)
    return (k[0], k[1])


def better(a: Cost, b: Cost, utilization_only: bool = False) -> bool:
    """Whether ``a`` is strictly preferred to ``b`` (Definition 6.1, ties broken)."""
    return sort_key(a, utilization_only) < sort_key(b, utilization_only)

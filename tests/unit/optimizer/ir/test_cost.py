"""Cost and statistics value types: Definition 6.1, Eq. 6.5/6.6, precision arithmetic."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from optimizer.ir.cost import (
    INFEASIBLE,
    ZERO,
    Cost,
    Estimate,
    Precision,
    better,
    merge,
    primary_key,
    sort_key,
)


def test_bottleneck_is_max_and_utilization_is_sum() -> None:
    c = merge([Cost.unit(0.2), Cost.unit(0.7), Cost.unit(0.3)])
    assert c.bottleneck == 0.7 and math.isclose(c.utilization, 1.2) and c.feasible


def test_shared_core_loads_add_into_one_bottleneck_term() -> None:
    c = Cost.on_core(0.6) + Cost.on_core(0.6) + Cost.unit(0.5)
    assert math.isclose(c.bottleneck, 1.2) and not c.feasible
    assert math.isclose(c.utilization, 1.7)


def test_definition_6_1_feasible_beats_infeasible() -> None:
    feasible_but_busy = Cost.from_totals(0.99, 50.0)
    infeasible = Cost.from_totals(1.01, 1.01)
    assert better(feasible_but_busy, infeasible) and not better(infeasible, feasible_but_busy)


def test_definition_6_1_two_feasible_rank_by_utilization() -> None:
    assert better(Cost.from_totals(0.9, 1.0), Cost.from_totals(0.1, 1.5))


def test_definition_6_1_two_infeasible_rank_by_bottleneck() -> None:
    assert better(Cost.from_totals(2.0, 9.0), Cost.from_totals(3.0, 3.0))


def test_utilization_only_ignores_feasibility() -> None:
    a, b = Cost.from_totals(0.5, 2.0), Cost.from_totals(1.5, 1.6)
    assert better(a, b) and better(b, a, utilization_only=True)


def test_infeasible_constant_loses_to_everything_finite() -> None:
    assert better(Cost.from_totals(1e9, 1e9), INFEASIBLE)
    assert not INFEASIBLE.feasible and ZERO.feasible


costs = st.builds(
    Cost.from_totals,
    st.floats(0, 5, allow_nan=False),
    st.floats(0, 20, allow_nan=False),
)


@given(costs, costs, st.floats(0, 5, allow_nan=False))
def test_adding_a_unit_never_reverses_a_strict_preference(a: Cost, b: Cost, u: float) -> None:
    """The monotonicity the principle of optimality and section 6.3.4's pruning rely on."""
    if primary_key(a) < primary_key(b):
        assert primary_key(a + Cost.unit(u)) <= primary_key(b + Cost.unit(u))


@given(costs, costs)
def test_sort_key_is_a_total_order(a: Cost, b: Cost) -> None:
    assert (sort_key(a) < sort_key(b)) + (sort_key(b) < sort_key(a)) + (
        sort_key(a) == sort_key(b)
    ) == 1


def test_estimate_precision_weakest_wins_and_absent_absorbs() -> None:
    e = Estimate.exact(3.0) * Estimate.estimated(2.0)
    assert e.value == 6.0 and e.precision is Precision.ESTIMATED
    assert (Estimate.exact(2.0) + 1.0).precision is Precision.EXACT
    assert (Estimate.absent() * 0.0).is_absent and (5.0 * Estimate.absent()).is_absent
    assert (1.0 - Estimate.estimated(0.25)).value == 0.75
    assert (1.0 / Estimate.exact(4.0)).value == 0.25
    assert Estimate.absent().or_default(Estimate.exact(1.0)).value == 1.0

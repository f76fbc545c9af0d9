"""Phase One: System-R DP over join orders equals exhaustive enumeration; plan rewiring."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cost_models.analytical import AnalyticalCostModel
from engines import registry
from optimizer.costmodel import PlanCoster
from optimizer.estimate import estimate
from optimizer.ir.catalog import Catalog
from optimizer.ir.cost import primary_key
from optimizer.phase_one import (
    _ChainModel,
    best_order,
    exhaustive_order,
    join_chains,
    optimize_join_order,
)
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[3]
MODEL = AnalyticalCostModel().with_engines(registry.cost_defaults())


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(ROOT / "queries" / "joins" / "catalog.toml")


def join_query(minutes: list[int], star: bool = True) -> str:
    """A join_N-like query (the Q4 template) over windows of the given sizes.

    ``star`` joins every window with the first (as the shipped join_N); otherwise a chain.
    """
    subs = [
        f"(SELECT house_id, household_id, plug_id, AVG(value) AS avg_load "
        f"FROM readings [RANGE {m} MINUTES SLIDE 1 SECOND] WHERE property = 1 "
        f"GROUP BY house_id, household_id, plug_id) AS w{k}"
        for k, m in enumerate(minutes)
    ]
    conds = []
    for k in range(1, len(minutes)):
        a = 0 if star else k - 1
        conds += [f"w{a}.{c} = w{k}.{c}" for c in ("house_id", "household_id", "plug_id")]
    cols = ", ".join(f"w{k}.avg_load AS a{k}" for k in range(len(minutes)))
    return f"SELECT w0.plug_id, {cols} FROM {', '.join(subs)} WHERE {' AND '.join(conds)}"


CASES = [
    ([1, 3], True, 2000),
    ([9, 1, 5], True, 2000),
    ([1, 7, 3, 5], False, 20000),
    ([2, 9, 4, 1, 6], True, 40000),
    ([5, 1, 8, 2, 7, 3], False, 2000),
    ([3, 10, 1, 7, 2, 9, 4], True, 2000),
]


@pytest.mark.parametrize(("minutes", "star", "rate"), CASES)
@pytest.mark.parametrize("shared", [False, True])
def test_dp_equals_exhaustive_join_order(catalog, minutes, star, rate, shared) -> None:
    plan = plan_query(join_query(minutes, star), catalog)
    est = estimate(plan, catalog, rates=rate)
    (chain,) = join_chains(plan)
    cm = _ChainModel(plan, chain, est, MODEL, shared)
    _, dp_cost, examined = best_order(cm)
    _, ex_cost, _ = exhaustive_order(cm)
    (a0, a1), (b0, b1) = primary_key(dp_cost), primary_key(ex_cost)
    assert a0 == b0 and math.isclose(a1, b1, rel_tol=1e-9, abs_tol=1e-12)
    m = len(minutes)
    assert examined == sum(k * math.comb(m, k) for k in range(2, m + 1))


def test_principle_of_optimality_every_subset(catalog) -> None:
    """Each DP entry is optimal for its own subset (checked by sub-chain enumeration)."""
    plan = plan_query(join_query([5, 1, 8, 2, 7], False), catalog)
    est = estimate(plan, catalog, rates=30000)
    (chain,) = join_chains(plan)
    cm = _ChainModel(plan, chain, est, MODEL, False)
    import itertools

    for size in (2, 3, 4):
        for subset in itertools.combinations(range(5), size):
            best = min(
                (primary_key(cm.order_cost(p)) for p in itertools.permutations(subset)),
            )
            dp = min(
                primary_key(cm.order_cost((*p, j)))
                for j in subset
                for p in itertools.permutations(set(subset) - {j})
            )
            assert best == dp


@pytest.mark.parametrize("minutes", [[9, 1, 5], [1, 7, 3, 5], [3, 10, 1, 7, 2]])
def test_rewired_plan_is_valid_and_costs_what_the_dp_said(catalog, minutes) -> None:
    plan = plan_query(join_query(minutes, True), catalog)
    est = estimate(plan, catalog, rates=2000)
    r = optimize_join_order(plan, est, MODEL)
    new = r.plan
    assert sorted(new.ids_of("join")) == sorted(plan.ids_of("join"))
    assert len(new.r2r_ids()) == len(plan.r2r_ids())  # the restore fused into project1
    assert new.op(new.sink).schema == plan.op(plan.sink).schema
    # Projections name the same output columns (order restored).
    old_p, new_p = plan.op("project1"), new.op("project1")
    in_old = plan.op(plan.inputs("project1")[0]).schema
    in_new = new.op(new.inputs("project1")[0]).schema
    for e_old, e_new in zip(old_p.exprs, new_p.exprs, strict=True):  # type: ignore[attr-defined]
        assert in_old[e_old.index] == in_new[e_new.index]
    # Re-estimating the rewired plan gives the join cost the DP computed.
    est2 = estimate(new, catalog, rates=2000)
    coster = PlanCoster(est2, MODEL)
    joins = [coster.row_cost(j) for j in new.ids_of("join")]
    assert math.isclose(sum(c.utilization for c in joins), r.join_cost.utilization, rel_tol=1e-9)
    again = optimize_join_order(plan, est, MODEL)
    assert again.orders == r.orders and list(again.plan.topological()) == list(new.topological())


def test_restore_project_when_consumer_is_not_a_projection(catalog) -> None:
    text = join_query([9, 1, 5], True).replace("SELECT w0.plug_id, a", "SELECT w0.plug_id, a")
    text = (
        "SELECT w0.plug_id, COUNT(*) AS n FROM "
        + text.split(" FROM ", 1)[1]
        + " GROUP BY w0.plug_id"
    )
    plan = plan_query(text, catalog)
    r = optimize_join_order(plan, estimate(plan, catalog, rates=2000), MODEL)
    if r.orders[0] != tuple(join_chains(plan)[0].leaves):
        (agg_input,) = r.plan.inputs("aggregate4")
        assert r.plan.op(agg_input).kind == "project"
        assert r.plan.op(agg_input).schema == plan.op(plan.inputs("aggregate4")[0]).schema


def test_queries_without_joins_are_unchanged(catalog) -> None:
    plan = plan_query((ROOT / "queries" / "smartplug" / "q5.sql").read_text(), catalog)
    r = optimize_join_order(plan, estimate(plan, catalog), MODEL)
    assert r.plan is plan and r.plans_examined == 1  # the plan itself

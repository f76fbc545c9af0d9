"""The cost model follows how plans run (issue 20, fifth stop).

* A MIG waits for its engine's query on the row thread (``engines.mig.operator``): with a shared row
  core, a group's u adds to the row core's load instead of being a unit of its own, so a
  mixed plan's C_b is the sum of its row work and its queries.
* A row select over a window whose only consumer is a columnar group runs as an Arrow
  filter (``engines.row.lowering``): the model charges it ``arrow_select`` per arrival and
  ships its rows as Arrow, and decides which selects those are exactly as the lowering
  does (``optimizer.ir.arrow_filter``)."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cost_models.analytical import AnalyticalCostModel, transfer_rows
from engines import registry
from engines.row.base import Delta, RowOperator
from engines.row.lowering import lower_plan
from optimizer.costmodel import PlanCoster, group_utilization, operator_utilization
from optimizer.estimate import estimate
from optimizer.ir.arrow_filter import arrow_selected
from optimizer.ir.placement import ROW, Group, complete_placement, external_inputs, groups
from optimizer.ir.plan import Select
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[3]
SMARTPLUG = ROOT / "queries" / "smartplug"
CATALOG = load_catalog(SMARTPLUG / "catalog.toml")
MODEL = AnalyticalCostModel().with_engines(registry.cost_defaults())
RATE = 10_000.0


def _q(name: str):  # type: ignore[no-untyped-def]
    plan = plan_query((SMARTPLUG / f"{name}.sql").read_text(), CATALOG)
    return plan, estimate(plan, CATALOG, rates=RATE)


def _placement(plan, columnar: dict[str, str]) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return complete_placement(plan, {**dict.fromkeys(plan.r2r_ids(), ROW), **columnar})


def test_a_groups_query_adds_to_the_row_core_it_waits_on() -> None:
    plan, est = _q("q5")
    _inner, outer = plan.ids_of("aggregate")
    placement = _placement(plan, {outer: "duckdb"})  # the outer MAX reads a row aggregate
    shared = PlanCoster(est, MODEL, shared_row_core=True)
    cost = shared.placement_cost(placement)
    row = sum(
        shared.row_cost(o).utilization for o in plan.topological() if placement.get(o) != "duckdb"
    )
    group = group_utilization(MODEL, Group("duckdb", (outer,), outer), est)
    # the RSTREAM above takes the group's result as Arrow: no tuples to keep or emit
    (r2s,) = plan.consumers(outer)
    row -= shared.row_cost(r2s).utilization
    assert group > 0 and row > 0
    assert cost.bottleneck == pytest.approx(row + group)
    assert cost.bottleneck == pytest.approx(cost.utilization)
    # the dissertation's pipelined units: the larger of the two
    apart = PlanCoster(est, MODEL, shared_row_core=False).placement_cost(placement)
    assert apart.bottleneck < cost.bottleneck
    assert apart.bottleneck >= group


def test_an_arrow_select_costs_its_filter_and_ships_arrow() -> None:
    plan, est = _q("q5")
    (select,) = plan.ids_of("select")
    inner, outer = plan.ids_of("aggregate")
    assert arrow_selected(plan, select)  # property = 1 over a window that feeds only it
    placement = _placement(plan, {inner: "duckdb", outer: "duckdb"})
    coster = PlanCoster(est, MODEL, shared_row_core=True)
    g = Group("duckdb", (inner, outer), outer)
    tuples, arrow, _back = transfer_rows(g, est)
    assert tuples == 0.0
    assert arrow == pytest.approx(est[select].lambda_out.value * est[outer].slide_seconds)
    (window,) = plan.inputs(select)
    lam = est[window].total_in.value  # the source's arrivals, each through the window
    # the gateway as Arrow: the window keeps chunks, the select filters them, the
    # stream (this window its only one) is never converted to tuples, and the RSTREAM
    # hands the group's Arrow result to the sink (no tuples)
    (r2s,) = plan.consumers(outer)
    assert plan.op(r2s).kind == "rstream"
    gateway = (
        coster.fixed.utilization
        - (MODEL.window + MODEL.ingest) * lam
        + MODEL.arrow_window * lam
        - coster.row_cost(r2s).utilization
    )
    passed = est[select].lambda_out.value  # an Arrow select is priced per row it passes
    expected = gateway + MODEL.arrow_select * passed + group_utilization(MODEL, g, est)
    assert coster.placement_cost(placement).bottleneck == pytest.approx(expected)
    # the same select in the group: no row select, no conversion; the window ships Arrow
    members = (select, inner, outer)
    in_group = coster.placement_cost(_placement(plan, dict.fromkeys(members, "duckdb")))
    assert in_group.bottleneck == pytest.approx(
        gateway + group_utilization(MODEL, Group("duckdb", members, outer), est)
    )
    # the dissertation's units: no Arrow prices (the row costs stand as charged)
    apart = PlanCoster(est, MODEL, shared_row_core=False).placement_cost(placement)
    assert apart.utilization == pytest.approx(
        coster.fixed.utilization
        + coster.row_cost(select).utilization
        + group_utilization(MODEL, g, est)
    )


@pytest.mark.parametrize("mode", ["ISTREAM", "DSTREAM", "RSTREAM"])
def test_an_r2s_over_a_group_works_on_its_arrow_result(mode: str) -> None:
    sql = (
        f"SELECT {mode} plug_id, SUM(value) AS s FROM readings "
        "[RANGE 1 MINUTE SLIDE 1 SECOND] GROUP BY plug_id"
    )
    plan = plan_query(sql, CATALOG)
    est = estimate(plan, CATALOG, rates=RATE)
    (agg,) = plan.ids_of("aggregate")
    (r2s,) = plan.consumers(agg)
    coster = PlanCoster(est, MODEL, shared_row_core=True)
    row_u = coster.row_cost(r2s).utilization
    assert row_u > 0
    # over the group's Arrow result: RSTREAM passes it on, ISTREAM/DSTREAM diff its rows
    rows = est[agg].cardinality.value * est[agg].invocations_per_second
    arrow_u = 0.0 if mode == "RSTREAM" else MODEL.arrow_r2s_diff * rows
    column = _placement(plan, {agg: "duckdb"})
    assert coster.arrow_row_u(column)[r2s] == pytest.approx(arrow_u)
    g = Group("duckdb", (agg,), agg)
    own = coster.group_own_u("duckdb", (agg,))
    assert own == pytest.approx(group_utilization(MODEL, g, est))
    cost = coster.placement_cost(column).utilization
    assert cost == pytest.approx(
        coster.fixed.utilization + own - sum(coster.arrow_credits(g).values())
    )
    # the R2S's part of the credits: its row u, less its price on Arrow
    free = PlanCoster(est, replace(MODEL, arrow_r2s_diff=0.0), shared_row_core=True)
    assert cost - free.placement_cost(column).utilization == pytest.approx(arrow_u)
    no_credit = free.placement_cost(column).utilization + row_u
    assert no_credit - cost == pytest.approx(row_u - arrow_u)
    # the all-row plan pays the row price
    assert coster.placement_cost({}).utilization == pytest.approx(
        coster.fixed.utilization + coster.row_cost(agg).utilization
    )


@pytest.mark.parametrize(("query", "inputs"), [("q5", 1), ("q2", 2), ("q6", 3)])
def test_a_group_pays_per_input_it_is_handed_every_slide(query: str, inputs: int) -> None:
    plan, est = _q(query)
    ops = tuple(plan.r2r_ids())
    (top,) = [o for o in ops if not any(c in ops for c in plan.consumers(o))]
    g = Group("duckdb", ops, top)
    assert len(external_inputs(g, plan)) == inputs  # the query's windows
    free = replace(MODEL, ship_input=0.0)
    assert MODEL.group_cost(g, est) - free.group_cost(g, est) == pytest.approx(
        inputs * MODEL.ship_input
    )


def test_an_input_read_on_two_ports_is_handed_once() -> None:
    sql = (
        "SELECT a.plug_id, COUNT(*) AS n FROM readings [RANGE 1 MINUTE SLIDE 1 SECOND] AS a, "
        "readings [RANGE 1 MINUTE SLIDE 1 SECOND] AS b WHERE a.plug_id = b.plug_id "
        "GROUP BY a.plug_id"
    )
    plan = plan_query(sql, CATALOG)
    (join,) = plan.ids_of("join")
    ins = plan.inputs(join)
    g = Group("duckdb", (join,), join)
    assert external_inputs(g, plan) == list(dict.fromkeys(ins))


def test_a_select_arrow_cannot_evaluate_exactly_keeps_its_tuple_costs() -> None:
    sql = (
        "SELECT plug_id, SUM(value) AS s FROM readings [RANGE 1 MINUTE SLIDE 1 SECOND] "
        "WHERE value * 2 > 30 GROUP BY plug_id"
    )
    plan = plan_query(sql, CATALOG)
    est = estimate(plan, CATALOG, rates=RATE)
    (select,) = plan.ids_of("select")
    (agg,) = plan.ids_of("aggregate")
    assert not arrow_selected(plan, select)
    coster = PlanCoster(est, MODEL, shared_row_core=True)
    g = Group("duckdb", (agg,), agg)
    tuples, arrow, _ = transfer_rows(g, est)
    assert arrow == 0.0 and tuples > 0
    select_u = operator_utilization(MODEL, plan.op(select), est[select])
    # the window under a row select is a row window: tuples, its row price, and the
    # stream's conversion (charged to the gateway, the window its only one) stands
    (window,) = plan.inputs(select)
    conversion = MODEL.ingest * est[window].lambda_out.value
    assert coster.row_cost(window).utilization == pytest.approx(
        operator_utilization(MODEL, plan.op(window), est[window]) + conversion
    )
    (r2s,) = plan.consumers(agg)  # passes the group's Arrow result on: its row u comes off
    assert coster.placement_cost(_placement(plan, {agg: "duckdb"})).bottleneck == pytest.approx(
        coster.fixed.utilization
        - coster.row_cost(r2s).utilization
        + select_u
        + group_utilization(MODEL, g, est)
    )


class _Unused(RowOperator):
    """Stands where a MIG would: these tests only lower plans, nothing runs."""

    def step(self, instant: int, inputs: list[Delta]) -> Delta:  # pragma: no cover
        raise AssertionError("lowering only")


def _lowered_arrow_selects(plan, placement: dict[str, str]) -> set[str]:  # type: ignore[no-untyped-def]
    gs = groups(plan, placement)
    lowering = lower_plan(plan, groups=gs, make_group=lambda g, _ins: _Unused(g.top))
    return set(lowering.arrow_selects)


def _modelled_arrow_selects(plan, placement: dict[str, str]) -> set[str]:  # type: ignore[no-untyped-def]
    out = set()
    for op in plan.operators():
        if not isinstance(op, Select) or placement.get(op.id, ROW) != ROW:
            continue
        consumers = plan.consumers(op.id)
        if (
            len(consumers) == 1
            and placement.get(consumers[0], ROW) != ROW
            and arrow_selected(plan, op.id)
        ):
            out.add(op.id)
    return out


@pytest.mark.parametrize("name", ["q1", "q2", "q3", "q4", "q5", "q6"])
def test_the_model_and_the_lowering_pick_the_same_arrow_selects(name: str) -> None:
    plan, _ = _q(name)
    r2r = plan.r2r_ids()
    rng = random.Random(name)
    choices: list[dict[str, Any]] = [
        dict(zip(r2r, bits, strict=True))
        for bits in itertools.product([ROW, "duckdb"], repeat=len(r2r))
    ]
    rng.shuffle(choices)
    seen_arrow = 0
    for p in choices[:48]:
        placement = complete_placement(plan, p)
        lowered = _lowered_arrow_selects(plan, placement)
        assert lowered == _modelled_arrow_selects(plan, placement), placement
        seen_arrow += bool(lowered)
    assert seen_arrow  # the case occurs among the placements tried


def test_reports_keep_the_groups_own_cost_and_take_the_credits_off_the_row_classes() -> None:
    """Per class and per engine (what ``--adapt`` compares with measured busy time): the
    group is its own query's cost, the Arrow prices come off the row classes they replace,
    and the parts add up to the plan's cost."""
    plan, est = _q("q5")
    inner, outer = plan.ids_of("aggregate")
    placement = _placement(plan, {inner: "duckdb", outer: "duckdb"})
    coster = PlanCoster(est, MODEL, shared_row_core=True)
    total = coster.placement_cost(placement).utilization
    own = group_utilization(MODEL, Group("duckdb", (inner, outer), outer), est)
    by_class = coster.utilization_by_class(placement)
    by_engine = coster.utilization_by_engine(placement)
    assert by_class["duckdb"] == pytest.approx(own)
    assert by_engine["duckdb"] == pytest.approx(own)
    assert sum(by_class.values()) == pytest.approx(total)
    assert sum(by_engine.values()) == pytest.approx(total)
    assert all(v >= -1e-12 for v in by_class.values()), by_class
    assert by_class["row:select"] == pytest.approx(0.0, abs=1e-12)  # it runs as Arrow


def test_a_stream_is_converted_once_while_any_of_its_windows_reads_tuples() -> None:
    """The gateway converts each batch once for all of a stream's row windows
    (``engines.row.executor``): Q3's conversion is charged in full whether one or both of
    its windows feed row operators, and taken back only when neither does, in one group
    (``arrow_credits``) or in two (``split_conversion``, ``placement_cost``)."""
    plan, est = _q("q3")
    windows = plan.ids_of("window")
    assert len(windows) == 2
    (_src,) = {plan.inputs(w)[0] for w in windows}
    lam = est[windows[0]].lambda_out.value
    conversion = MODEL.ingest * lam
    coster = PlanCoster(est, MODEL, shared_row_core=True)
    assert sum(coster._ingest(w) for w in windows) == pytest.approx(conversion)
    agg1, agg2 = plan.ids_of("aggregate")
    sel1, sel2 = plan.ids_of("select")
    # one aggregate (with its select) on DuckDB: the other window still reads tuples
    one = Group("duckdb", (sel2, agg2), agg2)
    assert coster._conversion_credit(coster._arrow_windows(one)) == 0.0
    # both windows feed one group: the stream is never converted
    both = _placement(plan, dict.fromkeys(plan.r2r_ids(), "duckdb"))
    assert coster.split_conversion(both) == 0.0
    (g,) = groups(plan, both)
    credits = coster.arrow_credits(Group("duckdb", tuple(g.operators), g.top))
    assert sum(credits.values()) >= conversion
    # each window feeds its own group (the join stays on the row engine): neither group
    # reads the stream whole, so placement_cost takes the conversion back itself
    split = _placement(plan, {sel1: "duckdb", agg1: "duckdb", sel2: "duckdb", agg2: "duckdb"})
    assert len(groups(plan, split)) == 2
    assert coster.split_conversion(split) == pytest.approx(conversion)
    additive = coster.fixed + coster.r2r_cost(split)
    exact = coster.placement_cost(split)
    assert additive.bottleneck - exact.bottleneck == pytest.approx(conversion)
    by_class = coster.utilization_by_class(split)
    assert sum(by_class.values()) == pytest.approx(exact.utilization)
    # the search ranks whole plans by the exact cost
    from optimizer.phase_two import place

    for exhaustive in (False, True):
        found = place(plan, est, MODEL, (ROW, "duckdb"), shared_row_core=True,
                      exhaustive=exhaustive)  # fmt: skip
        exact = coster.placement_cost(found.placement)
        assert found.cost.bottleneck == pytest.approx(exact.bottleneck)


@pytest.mark.parametrize("name", ["q1", "q3", "q4", "q5", "q6"])
def test_shown_operator_costs_are_non_negative_and_sum_to_the_plan_cost(name: str) -> None:
    """What explain shows per operator (groups at their own u, Arrow windows and selects
    at their Arrow prices, every other operator at its row cost) is never negative and sums
    to the placement's cost, over random placements."""
    plan, est = _q(name)
    coster = PlanCoster(est, MODEL, shared_row_core=True)
    rng = random.Random(7)
    ids = plan.r2r_ids()
    for _ in range(25):
        placement = _placement(plan, {i: "duckdb" for i in ids if rng.random() < 0.5})
        shown = coster.arrow_row_u(placement)
        total = 0.0
        grouped: set[str] = set()
        for g in groups(plan, placement):
            u = coster.group_own_u(g.engine, g.operators)
            assert u >= 0
            total += u
            grouped.update(g.operators)
        for op_id in plan.topological():
            if op_id in grouped:
                continue
            u = shown.get(op_id, coster.row_cost(op_id).utilization)
            assert u >= -1e-12, (op_id, placement)
            total += u
        assert total == pytest.approx(coster.placement_cost(placement).utilization)

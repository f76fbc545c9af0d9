"""Everything a placement report shows, gathered from one ``Optimized`` plan.

No HTML here (see :mod:`hycq.reporting.page`): :func:`build_report` calls the same functions
``hycq explain`` does (``api.explain``, ``Optimized.operator_rows``, the one plan printer) and
adds what only the report shows: the generated SQL of every group, the alternatives with
their Definition 6.1 verdicts, the plan over rates, and measurements when given.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engines import registry
from hycq.planning import Optimized
from hycq.reporting.alternatives import Alternatives, Sweep, alternatives, off_row, rate_sweep
from hycq.reporting.measured import BenchData, UnitRow, load_bench, run_units
from hycq.reporting.text import engine_tag
from optimizer.ir.cost import Cost
from optimizer.ir.display import render_plan
from optimizer.ir.errors import HycqError
from optimizer.ir.placement import complete_placement, groups

if TYPE_CHECKING:  # pragma: no cover
    pass


@dataclass(frozen=True)
class GroupView:
    """A migration candidate as the report shows it: its id, members and SQL."""

    id: str
    engine: str
    operators: list[str]
    top: str
    u: float
    seconds_per_invocation: float
    sql: str
    """The generated SQL (exactly what the MIG operator runs), or why there is none."""
    sql_ok: bool
    inputs: list[tuple[str, str]]
    """(table in the SQL, the operator whose output it holds: columns c0, c1, ...)."""
    outputs: list[str]
    """The top operator's output columns, which the SQL's c0, c1, ... are."""


@dataclass(frozen=True)
class Report:
    query_name: str
    query_text: str
    info: dict[str, Any]
    """``api.explain``'s object for the optimizer's choice (options, statistics, trace)."""
    shown_label: str
    """Which placement is shown: the optimizer's choice, or the placement a run used."""
    placement: dict[str, str]
    rows: list[dict[str, Any]]
    """``Optimized.operator_rows`` of the shown placement."""
    groups: list[GroupView]
    cost: Cost
    max_rate: float | None
    plan_text: str
    """The shown plan by the one plan printer, with explain's engine tags."""
    phase_one_text: str
    bound_text: str | None
    """The plan as bound, before Phase One, when Phase One reordered joins."""
    alternatives: Alternatives
    sweep: Sweep | None
    rate: float | None
    bench: BenchData | None = None
    run: dict[str, Any] | None = None
    run_units: list[UnitRow] | None = None
    joins: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Per join chain: the join implementation chosen (``--join-impl auto``, or what the run
    used) and every alternative's predicted row-engine cost (``api.join_settings``)."""


def build_report(
    opt: Optimized,
    *,
    placement: dict[str, str] | None = None,
    shown_label: str | None = None,
    bench: Path | None = None,
    run_metrics: dict[str, Any] | None = None,
) -> Report:
    """Gather a report of ``placement`` (default: the optimizer's choice) of ``opt.plan``.

    ``bench`` is a ``hycq bench --json`` file; ``run_metrics`` the metrics of a run.
    """
    from engines.sqlgen import group_sql
    from hycq import api

    q = opt.query
    shown = (
        complete_placement(opt.plan, placement, registry.capabilities())
        if placement
        else dict(opt.placement)
    )
    info = api.explain(q, opt.options.rate, opt.options.engines, optimized=opt)
    rows = opt.operator_rows(shown)
    views = []
    for k, g in enumerate(groups(opt.plan, shown)):
        inputs: list[tuple[str, str]] = []
        try:
            gen = group_sql(opt.plan, g.operators, g.engine, f"g{k}_")
            sql, ok = gen.sql, True
            inputs = [(table, op_id) for op_id, table in gen.inputs]
        except HycqError as err:
            sql, ok = f"(no SQL: {err})", False
        views.append(
            GroupView(
                f"g{k}",
                g.engine,
                list(g.operators),
                g.top,
                opt.coster.group_own_u(g.engine, g.operators),
                opt.model.group_cost(g, opt.estimates),
                sql,
                ok,
                inputs,
                [f.name for f in opt.plan.op(g.top).schema],
            )
        )
    rate = info["rate"]
    bench_data = load_bench(bench, q.name) if bench is not None else None
    units = None
    if run_metrics is not None:
        units = run_units(
            run_metrics,
            rows,
            [(v.id, v.operators) for v in views],
            shared_core=opt.coster.shared_row_core,
        )
    joins = (run_metrics or {}).get("join_impls")
    if joins is None:
        from types import SimpleNamespace

        chosen = api.join_settings(opt, SimpleNamespace(join_impl="auto"))
        joins = chosen[1] if chosen is not None else []
    return Report(
        query_name=q.name,
        query_text=q.text,
        info=info,
        shown_label=shown_label
        or (
            "the optimizer's choice"
            if off_row(shown) == off_row(opt.placement)
            else "the given placement"
        ),
        placement=shown,
        rows=rows,
        groups=views,
        cost=opt.cost_of(shown),
        max_rate=api.max_feasible_rate(opt, shown),
        plan_text=render_plan(opt.plan, annotate=engine_tag(rows)),
        phase_one_text=render_plan(opt.plan),
        bound_text=None if opt.plan is q.plan else render_plan(q.plan),
        alternatives=alternatives(opt, shown),
        sweep=rate_sweep(opt, shown, rate) if rate else None,
        rate=rate,
        bench=bench_data,
        run=run_metrics,
        run_units=units,
        joins=list(joins),
    )

"""Phase Two (section 6.3.3/6.3.4): place each R2R operator on an engine, bottom-up.

Sources, windows, R2S operators and the sink always run on the row engine (the gateway);
every R2R operator may run on any enabled engine whose capabilities cover it. A set of
connected R2R operators on the same columnar engine forms one group (a DB-op) whose cost is
not the sum of its members' costs, which is why the search is not a plain per-operator DP.

The search builds, for every R2R operator v in topological order, a set of *partial plans*
(placements of v's subtree):

* **row-rooted partial plans**: v on the row engine over the Pareto set (C_u, unit peak,
  shared-core load, operators off row) of each input's closed partial plans. A row
  operator's u is the same in every partial plan rooted at it and a consumer sees only v's
  (placement-independent) output, so nothing else about an input plan matters; a single
  best input plan would not be exact because Definition 6.1 mixes max-type and sum-type
  measures (found by the property tests under a shared row core);
* **every columnar-rooted partial plan**: v on engine e over each combination of its inputs'
  partial plans; inputs whose root is on e merge into v's open group, others are closed.
  They must all be kept, since merging with a consumer changes a group's cost.

A partial plan is ``closed`` cost (settled operators and groups) plus an open group. Global
rule: once a complete plan is known to be feasible (the all-row or all-columnar plan is
costed first), partial plans whose closed part is already infeasible are dropped: C_b never
decreases under extension. Unary chains then have n + 1 complete plans to examine.

Plans with more than ``max_subplan`` (15) R2R operators are *decomposed*: walking in
post-order, whenever an operator's not-yet-settled subtree would exceed the limit, each of
its inputs' subplans is settled to its single best partial plan first.

``exhaustive=True`` instead costs every placement (product of allowed engines per operator).

Example:
    >>> from pathlib import Path
    >>> from optimizer.sql import plan_query
    >>> from optimizer.sql.catalog import load_catalog
    >>> from optimizer.estimate import estimate
    >>> from cost_models.analytical import AnalyticalCostModel
    >>> root = Path(__file__).parents[1] / "queries/joins"
    >>> cat = load_catalog(root / "catalog.toml")
    >>> plan = plan_query((root / "join_2.sql").read_text(), cat)
    >>> r = place(plan, estimate(plan, cat), AnalyticalCostModel(), engines=("row", "duckdb"))
    >>> r.plans_examined, r.feasible
    (11, True)
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from optimizer.costmodel import PlanCoster
from optimizer.ir.cost import ZERO, Cost, sort_key
from optimizer.ir.costing import CostModel, Estimates
from optimizer.ir.errors import PlanError
from optimizer.ir.placement import ROW, EngineCapabilities, capability_table, check_placement
from optimizer.ir.plan import Category, LogicalPlan

#: R2R operators per subplan above which a plan is decomposed (section 6.4.1).
MAX_SUBPLAN = 15


@dataclass(frozen=True)
class PhaseTwoResult:
    """The chosen placement (every operator id -> engine) and how it was found."""

    placement: dict[str, str]
    cost: Cost
    plans_examined: int
    """Complete plans costed (Table 6.1's "# plans examined in Phase-Two")."""
    partial_plans: int
    """Partial plans built over the whole search (complete ones included)."""
    seconds: float
    exhaustive: bool
    decomposed: bool = False

    @property
    def feasible(self) -> bool:
        return self.cost.feasible


@dataclass(frozen=True, slots=True)
class _Partial:
    closed: Cost
    engine: str
    open_ops: tuple[str, ...]  # the open group (columnar root); () for a row root
    assign: tuple[tuple[str, str], ...]
    columnar: int  # operators off the row engine (the tie-break)


def allowed_engines(
    plan: LogicalPlan,
    op_id: str,
    engines: Sequence[str],
    capabilities: Mapping[str, EngineCapabilities] | None = None,
) -> list[str]:
    """The enabled engines that can run ``op_id`` (row for gateway operators), by their
    declared ``capabilities`` (see ``optimizer.ir.placement.capability_table``)."""
    if plan.op(op_id).category is not Category.R2R:
        return [ROW]
    table = capability_table(capabilities, engines)
    base = dict.fromkeys(plan.topological(), ROW)
    out = []
    for e in engines:
        try:
            check_placement(plan, {**base, op_id: e}, table)
        except PlanError:
            continue
        out.append(e)
    return out


def place(
    plan: LogicalPlan,
    estimates: Estimates,
    model: CostModel,
    engines: Sequence[str] = (ROW,),
    *,
    capabilities: Mapping[str, EngineCapabilities] | None = None,
    shared_row_core: bool = False,
    utilization_only: bool = False,
    exhaustive: bool = False,
    prune_infeasible: bool = True,
    decompose: bool = True,
    max_subplan: int = MAX_SUBPLAN,
    exhaustive_limit: int | None = None,
) -> PhaseTwoResult:
    """Choose the Definition-6.1-best placement of ``plan`` over the enabled ``engines``.

    ``capabilities`` says what each engine can run (hycq passes the engine registry's; see
    ``optimizer.ir.placement.capability_table``). ``exhaustive_limit`` makes
    ``exhaustive=True`` raise ValueError instead of costing more placements than that.
    """
    start = time.perf_counter()
    engines = [ROW, *(e for e in engines if e != ROW)]
    coster = PlanCoster(estimates, model, shared_row_core)
    allowed = {i: allowed_engines(plan, i, engines, capabilities) for i in plan.r2r_ids()}
    if exhaustive:
        placement, cost, n = _exhaustive(plan, coster, allowed, utilization_only, exhaustive_limit)
        return PhaseTwoResult(placement, cost, n, n, time.perf_counter() - start, True)
    search = _Search(plan, coster, allowed, utilization_only)
    search.prune = prune_infeasible and not utilization_only and search.known_feasible()
    search.limit = max_subplan if decompose and len(allowed) > max_subplan else None
    placement, cost, n = search.run()
    return PhaseTwoResult(
        placement,
        cost,
        n,
        search.partials,
        time.perf_counter() - start,
        False,
        search.limit is not None,
    )


def _full(plan: LogicalPlan, assign: Mapping[str, str]) -> dict[str, str]:
    return {i: assign.get(i, ROW) for i in plan.topological()}


def _exhaustive(
    plan: LogicalPlan,
    coster: PlanCoster,
    allowed: Mapping[str, list[str]],
    utilization_only: bool,
    limit: int | None,
) -> tuple[dict[str, str], Cost, int]:
    ids = list(allowed)
    total = 1
    for i in ids:
        total *= len(allowed[i])
    if limit is not None and total > limit:
        raise ValueError(f"{total} placements exceed the exhaustive limit {limit}")
    best: tuple[tuple[float, ...], dict[str, str], Cost] | None = None
    for n, choice in enumerate(itertools.product(*(allowed[i] for i in ids)), start=1):
        assign = dict(zip(ids, choice, strict=True))
        cost = coster.placement_cost(assign)
        key = (*sort_key(cost, utilization_only), _columnar_count(assign))
        if best is None or key < best[0]:
            best = (key, assign, cost)
        total = n
    if best is None:  # no R2R operator
        cost = coster.placement_cost({})
        return _full(plan, {}), cost, 1
    return _full(plan, best[1]), best[2], total


def _columnar_count(assign: Mapping[str, str]) -> float:
    """Tie-break: among equally good plans prefer fewer operators off the row engine."""
    return float(sum(e != ROW for e in assign.values()))


class _Search:
    """The pruned bottom-up search of the module docstring."""

    def __init__(
        self,
        plan: LogicalPlan,
        coster: PlanCoster,
        allowed: Mapping[str, list[str]],
        utilization_only: bool,
    ) -> None:
        self.plan = plan
        self.coster = coster
        self.allowed = allowed
        self.utilization_only = utilization_only
        self.prune = False
        self.limit: int | None = None
        self.partials = 0

    def known_feasible(self) -> bool:
        """Global rule: is a uniform (all-row or all-one-engine) plan feasible?"""
        engines = {e for es in self.allowed.values() for e in es}
        for e in sorted(engines):
            uniform = all(e in es for es in self.allowed.values())
            if uniform and self.coster.placement_cost(dict.fromkeys(self.allowed, e)).feasible:
                return True
        return False

    def final(self, p: _Partial) -> Cost:
        """The partial plan's cost with its open group closed."""
        if not p.open_ops:
            return p.closed
        return p.closed + self.coster.columnar_cost(p.engine, p.open_ops, p.open_ops[0])

    def key(self, p: _Partial) -> tuple[float, ...]:
        return (
            *sort_key(self.final(p) + self.coster.fixed, self.utilization_only),
            float(p.columnar),
        )

    def best(self, ps: Sequence[_Partial]) -> _Partial:
        return min(ps, key=self.key)

    def settled(self, ps: Sequence[_Partial]) -> list[_Partial]:
        """The input plans a row operator can sit on: the Pareto set of their closed costs.

        A row root closes every input group, and a consumer sees only the root, so an input
        plan matters only through its final cost. One best plan per input is not enough:
        Definition 6.1 ranks a whole plan by max-type (C_b, and the shared row core's load
        adds up across inputs) and sum-type (C_u) measures together, so the input plan with
        the best rank alone can combine into a worse plan than one with, say, less row-core
        load. Plans no better in every component (C_u, unit peak, core load, operators off
        the row engine) than another are dropped."""
        finals = [(self.final(p), p) for p in ps]
        keep: list[tuple[Cost, _Partial]] = []
        for c, p in sorted(finals, key=lambda cp: (cp[0].utilization, cp[1].columnar)):
            if any(_covers(k, kp, c, p) for k, kp in keep):
                continue
            keep.append((c, p))
        return [p for _, p in keep]

    def run(self) -> tuple[dict[str, str], Cost, int]:
        plan = self.plan
        ids = list(self.allowed)
        if not ids:
            return _full(plan, {}), self.coster.placement_cost({}), 1
        table: dict[str, list[_Partial]] = {}
        open_size: dict[str, int] = {}
        for v in ids:
            ins = [i for i in plan.inputs(v) if i in self.allowed]
            size = 1 + sum(open_size[i] for i in ins)
            if self.limit is not None and size > self.limit:
                for i in ins:  # decomposition: settle each input subplan first
                    table[i] = [self.best(table[i])]
                    open_size[i] = 0
                size = 1
            open_size[v] = size
            table[v] = self.extend(v, [table[i] for i in ins])
            for i in ins:
                del table[i]
        (root,) = table  # every R2R operator has one consumer, so one tree remains
        finals = table[root]
        # The whole plans are ranked by their exact cost: additive costing over-charges
        # a stream converted for no row window when its windows feed different groups
        # (PlanCoster.split_conversion); the partials could not know.
        exact = {id(p): self.coster.placement_cost(dict(p.assign)) for p in finals}
        chosen = min(
            finals,
            key=lambda p: (*sort_key(exact[id(p)], self.utilization_only), float(p.columnar)),
        )
        return _full(plan, dict(chosen.assign)), exact[id(chosen)], len(finals)

    def extend(self, v: str, inputs: list[list[_Partial]]) -> list[_Partial]:
        out: list[_Partial] = []
        # Not ``fixed``: a group's Arrow credits may still take some of it back.
        floor = self.coster.fixed_floor
        for e in self.allowed[v]:
            if e == ROW:
                combos: list[tuple[Cost, tuple[str, ...], tuple[_Partial, ...]]] = []
                row = self.coster.row_cost(v)
                for picks in itertools.product(*(self.settled(ps) for ps in inputs)):
                    closed = row
                    for p in picks:
                        closed = closed + self.final(p)
                    combos.append((closed, (), picks))
            else:
                combos = []
                for combo in itertools.product(*inputs):
                    closed = ZERO
                    group: tuple[str, ...] = (v,)
                    for p in combo:
                        if p.open_ops and p.engine == e:
                            closed = closed + p.closed
                            group += p.open_ops
                        else:
                            closed = closed + self.final(p)
                    combos.append((closed, group, combo))
            # Dominance: partial plans with the same open group on the same engine have the
            # same future (only the open group merges with consumers), so one whose closed
            # cost is no better in every component (C_u, unit peak, shared-core load) than
            # another's can never win. Keep the Pareto set per open group.
            frontier: dict[tuple[str, ...], list[_Partial]] = {}
            for closed, group, parts in combos:
                self.partials += 1
                if self.prune and not (closed + floor).feasible:
                    continue
                assign = (*tuple(a for p in parts for a in p.assign), (v, e))
                columnar = sum(p.columnar for p in parts) + (e != ROW)
                cand = _Partial(closed, e, group, assign, columnar)
                key = tuple(sorted(group))
                kept = frontier.setdefault(key, [])
                if any(_dominates(k, cand) for k in kept):
                    continue
                kept[:] = [k for k in kept if not _dominates(cand, k)]
                kept.append(cand)
            for kept in frontier.values():
                out.extend(kept)
        return out


def _covers(x: Cost, a: _Partial, y: Cost, b: _Partial) -> bool:
    """Cost ``x`` of plan ``a`` is at least as good as ``y`` of ``b`` in every component."""
    return (
        x.utilization <= y.utilization
        and x.unit_peak <= y.unit_peak
        and x.core_load <= y.core_load
        and a.columnar <= b.columnar
    )


def _dominates(a: _Partial, b: _Partial) -> bool:
    """``a`` is at least as good as ``b`` in every cost component and the tie-break."""
    x, y = a.closed, b.closed
    return (
        x.utilization <= y.utilization
        and x.unit_peak <= y.unit_peak
        and x.core_load <= y.core_load
        and a.columnar <= b.columnar
    )

"""The placements a report compares the shown one with, and how the plan changes with rate.

* **Alternatives**: pure row, pure column (every R2R operator on one columnar engine), the
  optimizer's own choice when the shown placement is another one (``run --placement row``),
  and the next best placements. Those come from costing every placement when there are at
  most :data:`ENUMERATE_LIMIT`, else every placement that changes one operator's engine of
  the shown plan. Each gets its cost vector (``Optimized.cost_of``), the rate where it stops
  keeping up (``api.max_feasible_rate``) and its Definition 6.1 verdict (:mod:`.compare`).
* **Rate sweep**: the Phase-Two placement of the same (Phase-One) plan re-estimated at rates
  around the report's rate, and the rates where that placement switches (bisected between
  grid points). Only the placement is re-optimized: the join order stays the one chosen at
  the report's rate, and the statistics are the same sample.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

from hycq.planning import Optimized
from hycq.reporting.compare import Verdict, compare
from optimizer.costmodel import PlanCoster
from optimizer.estimate import estimate
from optimizer.ir.cost import Cost, sort_key
from optimizer.ir.placement import ROW
from optimizer.phase_two import allowed_engines, place

#: Cost every placement when there are at most this many (2^12).
ENUMERATE_LIMIT = 4096
#: Next-best placements listed.
NEXT_BEST = 5


@dataclass(frozen=True)
class Alternative:
    """One placement compared with the shown one."""

    name: str
    placement: dict[str, str]
    cost: Cost
    max_rate: float | None
    """Predicted rate where its C_b reaches 1 (None: keeps up at any rate)."""
    verdict: Verdict


@dataclass(frozen=True)
class Alternatives:
    items: list[Alternative]
    space: int
    """Placements of the plan over the enabled engines."""
    method: str
    """How the next best ones were found, in words."""
    rank: int | None
    """The shown placement's rank (1 = best) among those costed, when all were costed."""
    impossible: list[str]
    """Uniform placements that cannot run, with the reason."""


def off_row(placement: Mapping[str, str]) -> dict[str, str]:
    """The operators a placement puts on a columnar engine (how placements are named)."""
    return {k: v for k, v in placement.items() if v != ROW}


def _columnar(placement: Mapping[str, str]) -> int:
    return sum(e != ROW for e in placement.values())


def _key(placement: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(off_row(placement).items()))


def allowed(opt: Optimized) -> dict[str, list[str]]:
    """The engines each R2R operator may run on (the enabled ones that can run it)."""
    plan = opt.plan
    engines, caps = opt.options.engines, opt.capabilities
    return {i: allowed_engines(plan, i, engines, caps) for i in plan.r2r_ids()}


def alternatives(opt: Optimized, shown: Mapping[str, str], max_rate: bool = True) -> Alternatives:
    """The alternatives of the module docstring, ordered as Phase Two would rank them."""
    from hycq.api import max_feasible_rate

    plan = opt.plan
    options = allowed(opt)
    base = dict.fromkeys(plan.topological(), ROW)
    uo = not opt.options.feasibility
    shown_cost = opt.cost_of(shown)

    def rank_key(p: Mapping[str, str]) -> tuple[float, ...]:
        return (*sort_key(opt.cost_of(p), uo), float(_columnar(p)))

    named: list[tuple[str, dict[str, str]]] = [("pure row", dict(base))]
    impossible = []
    for engine in opt.options.engines:
        if engine == ROW:
            continue
        cannot = [i for i, es in options.items() if engine not in es]
        if cannot:
            impossible.append(f"pure {engine}: {engine} cannot run {', '.join(cannot)}")
        elif options:
            named.append((f"pure {engine}", {**base, **dict.fromkeys(options, engine)}))
    if _key(shown) != _key(opt.placement):
        named.append(("optimizer's choice (auto)", dict(opt.placement)))

    space = math.prod(len(es) for es in options.values())
    ids = list(options)
    rank = None
    if space <= ENUMERATE_LIMIT:
        pool = [
            {**base, **dict(zip(ids, choice, strict=True))}
            for choice in itertools.product(*(options[i] for i in ids))
        ]
        method = f"all {space} placements costed"
        shown_key = rank_key(shown)
        rank = 1 + sum(rank_key(p) < shown_key for p in pool)
    else:
        pool = [
            {**shown, op_id: engine}
            for op_id in ids
            for engine in options[op_id]
            if engine != shown.get(op_id, ROW)
        ]
        method = (
            f"{space:,} placements are too many to cost; every placement that moves one "
            f"operator of the shown plan to another engine ({len(pool)}) was costed"
        )
    pool.sort(key=rank_key)
    seen = {_key(shown)} | {_key(p) for _, p in named}
    nxt = 0
    for p in pool:
        if nxt == NEXT_BEST:
            break
        if _key(p) in seen:
            continue
        seen.add(_key(p))
        nxt += 1
        named.append((f"next best #{nxt}", p))

    items = []
    for name, p in named:
        cost = opt.cost_of(p)
        if _key(p) == _key(shown):
            verdict = Verdict("same", "—", "this is the shown placement")
        else:
            verdict = compare(shown_cost, _columnar(shown), cost, _columnar(p), uo)
        limit = max_feasible_rate(opt, p) if max_rate else None
        items.append(Alternative(name, p, cost, limit, verdict))
    return Alternatives(items, space, method, rank, impossible)


# -- the plan over rates ----------------------------------------------------------------


@dataclass(frozen=True)
class RatePoint:
    rate: float
    placement: dict[str, str]
    """The best placement at this rate (operators off the row engine only)."""
    cost: Cost
    shown_cost: Cost
    """The shown placement's cost at this rate."""


@dataclass(frozen=True)
class Switch:
    """The best placement changes at ``rate`` (bisected between two grid rates)."""

    rate: float
    before: dict[str, str]
    after: dict[str, str]


@dataclass(frozen=True)
class Sweep:
    points: list[RatePoint]
    switches: list[Switch]


def rate_sweep(
    opt: Optimized, shown: Mapping[str, str], rate: float, decades: int = 2, per_decade: int = 3
) -> Sweep:
    """Best placement at rates ``rate * 10^k`` for k in [-decades, decades], and switches."""
    plan, catalog, model = opt.plan, opt.query.catalog, opt.model
    shared = opt.coster.shared_row_core
    uo = not opt.options.feasibility

    def at(r: float) -> RatePoint:
        est = estimate(plan, catalog, rates=r, sample=opt.statistics)
        best = place(
            plan,
            est,
            model,
            opt.options.engines,
            capabilities=opt.capabilities,
            shared_row_core=shared,
            utilization_only=uo,
        )
        coster = PlanCoster(est, model, shared)
        return RatePoint(r, off_row(best.placement), best.cost, coster.placement_cost(shown))

    n = decades * per_decade
    points = [at(rate * 10 ** (k / per_decade)) for k in range(-n, n + 1)]
    switches = []
    for a, b in itertools.pairwise(points):
        if a.placement == b.placement:
            continue
        lo, hi = a, b
        for _ in range(8):  # geometric bisection to within 0.3%
            mid = at(math.sqrt(lo.rate * hi.rate))
            if mid.placement == lo.placement:
                lo = mid
            else:
                hi = mid
        switches.append(Switch(hi.rate, a.placement, hi.placement))
    return Sweep(points, switches)

"""Choosing a join chain's implementation on the row engine: the binary tree Phase One
ordered, MJoin, MJoin with A-Caching's caches, or the tree with JIT (``--join-impl auto``).

Each implementation is priced in row-engine seconds per second of input (a utilization):
``chain_work`` counts its units of work per second from the Phase-One chain model's
estimates (``optimizer.phase_one._ChainModel``: each leaf's rate ``lambda`` and window
cardinality, the cardinality ``|S|`` of the join of any leaf set ``S``, independent of the
order), and ``UNIT_S`` prices each unit. Sliding windows send each tuple twice (insert,
later delete), hence the factors 2.

* tree (left-deep, Phase One's order): each join takes both inputs' changes (``probe``),
  stores them (``store``) and builds its output (``out``).
* MJoin: pipeline ``i`` (greedy order: smallest next set cardinality first) takes each
  change (``probe``), probes once per bound partial at every further step
  (``probe_inner``), binds intermediate partials to loop variables (``bind``) and builds
  only the results (``out``); an input probed on several key columns keeps one more hash
  index per extra key (``store_m``).
* A-Caching: MJoin plus its own work per input tuple (``ac_tuple``: profiling, timing, the
  adaptive loop) minus the caches' net gain (section 1.3): per pipeline the best single
  cache over a segment of two or more relations that ends the pipeline. A hit replaces the
  segment's probes and binds by one lookup (``probe_inner``) and still builds the results;
  every change of the segment's join is an Update (``update``). The miss probability is
  ``min(1, keys / lookups in a window)``: an entry stays valid while its key keeps being
  looked up, so a key misses about once per window length.
* JIT: the tree, with the output of a producer join discounted by the probability that its
  key has a partner in the consumer's opposite state, ``1 - exp(-fanout)`` with ``fanout =
  |L + j| / |L|`` the consumer's expected partners per partial (Poisson); the consumer stores
  and probes only those; JIT's bookkeeping costs ``book`` per tuple and key attribute on
  both sides of a link.

The unit costs are fitted to measured join time on calibration workloads that are not the
ones the choice is judged on (``python experiments/join_impls.py fit``): only ratios between
implementations at one point are trusted (this VM's speed drifts), so the fit has a free
speed per point. An alternative replaces the tree only when predicted ``MARGIN`` (10%)
cheaper: the fit's median error on those ratios is about 11%.

The costs are a model (stated as such in explain); ``python experiments/join_impls.py
choice`` measures how often it picks the measured best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from optimizer.ir.join_chains import JOIN_IMPLS, JoinChain, join_chains
from optimizer.ir.plan import Join, LogicalPlan

#: Unit costs (seconds) of the row engine's join work, per unit of ``work`` below. Fitted by
#: non-negative least squares (relative error) to the joins' measured busy time on
#: calibration workloads that are not the choice experiment's points: ``python
#: experiments/join_impls.py fit`` (docs/performance.md, "Join implementations").
UNIT_S: dict[str, float] = {
    # a tuple arriving at a join operator: dispatch, its first probe and, for MJoin, its
    # store inserts (one count per input tuple: the fit cannot tell them apart)
    "probe": 0.446e-6,
    # a further probe inside MJoin's compiled loop nest, per bound partial
    "probe_inner": 0.246e-6,
    # an insert or delete in a binary join's store (tree and JIT)
    "store": 0.0169e-6,
    # an insert or delete in each further hash index of an n-ary store (MJoin, A-Caching)
    "store_m": 0.251e-6,
    # building a result tuple (every tree join's output; MJoin's final results)
    "out": 0.349e-6,
    # an intermediate partial bound to a loop variable in MJoin's compiled loop
    "bind": 0.0085e-6,
    # JIT's bookkeeping per tuple and key attribute of a link
    "book": 0.407e-6,
    # A-Caching's own work per input tuple (profiling, timing, the adaptive loop)
    "ac_tuple": 0.467e-6,
    # an operator's fixed work per instant it steps (a join of the tree, the n-ary operator)
    "step": 0.0,
    # a cache Update per update partial (not fitted: experiments/join_impls.py units)
    "update": 0.5e-6,
}
UNITS = tuple(UNIT_S)

#: An alternative replaces the tree only when predicted this much cheaper.
MARGIN = 0.10

IMPLS = JOIN_IMPLS


@dataclass(frozen=True)
class ChainChoice:
    """The implementation chosen for one chain, with every alternative's predicted cost."""

    root: str
    leaves: tuple[str, ...]
    chosen: str
    predicted: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "leaves": list(self.leaves),
            "chosen": self.chosen,
            "predicted_seconds_per_second": self.predicted,
        }


@dataclass
class ChainWork:
    """Per implementation, its units of work per second of input (``UNIT_S``'s keys), and
    for A-Caching the candidate caches: per pipeline, ``(work, lookups, updates, miss)`` of
    each segment that ends the pipeline (seconds come from the units)."""

    work: dict[str, dict[str, float]]
    caches: list[list[tuple[dict[str, float], float, float, float]]]


def chain_work(chain_model: Any) -> ChainWork:
    """Count each implementation's work on the chain (module docstring)."""
    cm = chain_model
    m = len(cm.est)
    lam = [float(e.lambda_out.value) for e in cm.est]
    card = [max(1e-9, float(e.cardinality.value)) for e in cm.est]

    def size(s: frozenset[int]) -> float:
        return max(0.0, float(cm.of_set(s)[1].value))

    def rate(s: frozenset[int]) -> float:
        return max(0.0, float(cm.of_set(s)[0].value))

    def zero() -> dict[str, float]:
        return dict.fromkeys(UNITS, 0.0)

    work = {impl: zero() for impl in IMPLS}
    instants = 1.0 / max(1e-9, min(float(e.slide_seconds) for e in cm.est))
    for impl in IMPLS:
        work[impl]["step"] = instants * (1 if impl in ("mjoin", "acaching") else m - 1)
    # tree: Phase One's left-deep order is the chain's leaf order after rewiring
    order = list(range(m))
    outs: list[tuple[frozenset[int], int, float]] = []
    tree = work["tree"]
    for k in range(1, m):
        left = frozenset(order[:k])
        j = order[k]
        lam_l = rate(left) if k > 1 else lam[order[0]]
        lam_out = rate(left | {j})
        tree["probe"] += 2 * (lam_l + lam[j])
        tree["store"] += 2 * (lam_l + lam[j])
        tree["out"] += 2 * lam_out
        outs.append((left, j, lam_out))
    # MJoin: one pipeline per input, greedy order (smallest next set first)
    mj = work["mjoin"]
    caches: list[list[tuple[dict[str, float], float, float, float]]] = []
    for i in range(m):
        bound = frozenset({i})
        steps: list[tuple[frozenset[int], float, float]] = []
        rest = set(range(m)) - {i}
        while rest:
            p = min(sorted(rest), key=lambda q: size(bound | {q}))
            per = size(bound) / card[i] if len(bound) > 1 else 1.0
            nxt = size(bound | {p}) / card[i]
            steps.append((bound, per, nxt))
            bound = bound | {p}
            rest.discard(p)
        mj["probe"] += 2 * lam[i]
        for k, (_, per, nxt) in enumerate(steps):
            if k:
                mj["probe_inner"] += 2 * lam[i] * per
            mj["out" if k == len(steps) - 1 else "bind"] += 2 * lam[i] * nxt
        keys = sum(1 for leaves, _ in cm.filters if len(leaves) == 2 and i in leaves)
        mj["store_m"] += 2 * lam[i] * max(0, keys - 1)
        # A-Caching's candidates: a segment from step ``start`` to the pipeline's end, over
        # two or more relations (a cache of one relation is its index); a hit replaces the
        # segment's probes and binds, and still builds the results
        pipe = []
        window = max(1.0, card[i] / max(lam[i], 1e-9))
        for start in range(len(steps)):
            seg = frozenset(range(m)) - steps[start][0]
            if len(seg) < 2:
                continue
            seg_work = zero()
            for k in range(start, len(steps)):
                _, per, nxt = steps[k]
                seg_work["probe_inner"] += 2 * lam[i] * per
                if k < len(steps) - 1:
                    seg_work["bind"] += 2 * lam[i] * nxt
            lookups = 2 * lam[i] * steps[start][1]
            nkeys = max(1.0, min(size(seg), lookups))
            miss = min(1.0, nkeys / max(lookups * window, 1e-9))
            updates = 2 * rate(seg)  # every change of the segment's join is an Update
            pipe.append((seg_work, lookups, updates, miss))
        caches.append(pipe)
    ac = work["acaching"]
    ac.update(mj)
    ac["ac_tuple"] = 2 * sum(lam)
    # JIT: the tree, a consumer's producer input discounted by the probability of a partner
    jit = work["jit"]
    for k, (left, j, lam_out) in enumerate(outs):
        lam_l = rate(left) if k > 0 else lam[order[0]]
        if k > 0:  # a producer's partial finds, on average, |L+j| / |L| partners
            full = lam_l
            fanout = size(left | {j}) / max(size(left), 1e-9)
            lam_l *= 1 - math.exp(-fanout)
            # bookkeeping: the consumer counts its other side's values and notes the
            # partials it stores, per key attribute; the producer indexes its tuples
            attrs = max(1, sum(1 for leaves, _ in cm.filters if j in leaves and leaves & left))
            jit["book"] += 2 * (full + lam[j] + lam[order[k - 1]]) * attrs
        jit["probe"] += 2 * (lam_l + lam[j])
        jit["store"] += 2 * (lam_l + lam[j])
        jit["out"] += 2 * lam_out
    return ChainWork(work, caches)


def seconds(work: dict[str, float], units: dict[str, float] | None = None) -> float:
    """Row-engine seconds per second of ``work`` at ``units`` (default ``UNIT_S``)."""
    u = UNIT_S if units is None else units
    return sum(n * u[k] for k, n in work.items())


def cache_gain(cw: ChainWork, units: dict[str, float] | None = None) -> float:
    """A-Caching's predicted saving: per pipeline, the best single cache over its last steps
    (a segment ending at the last step, so no other Update is skipped), the work it saves on
    hits minus the lookups and the updates."""
    u = UNIT_S if units is None else units
    gain = 0.0
    for pipe in cw.caches:
        best = 0.0
        for seg_work, lookups, updates, miss in pipe:
            saved = seconds(seg_work, u)
            cost = lookups * u["probe_inner"] + updates * u["update"]
            best = max(best, saved - miss * saved - cost)
        gain += best
    return gain


def choose(
    plan: LogicalPlan, chain_model: Any, chain: JoinChain, forced: str | None = None
) -> ChainChoice:
    """Price every implementation of ``chain`` and pick the cheapest (or ``forced``)."""
    cw = chain_work(chain_model)
    costs = {impl: seconds(cw.work[impl]) for impl in IMPLS}
    costs["acaching"] -= cache_gain(cw)
    # the tree unless an alternative is predicted clearly cheaper (the model's resolution)
    cheapest = min(IMPLS, key=lambda k: (costs[k], IMPLS.index(k)))
    chosen = forced or (cheapest if costs[cheapest] < (1 - MARGIN) * costs["tree"] else "tree")
    return ChainChoice(chain.root, chain.leaves, chosen, costs)


def choose_all(plan: LogicalPlan, make_model: Any, forced: str | None = None) -> list[ChainChoice]:
    """A choice per maximal join chain of ``plan`` (``make_model(chain)`` builds its chain
    model)."""
    return [
        choose(plan, make_model(chain), chain, forced)
        for chain in join_chains(plan)
        if isinstance(plan.op(chain.root), Join)
    ]

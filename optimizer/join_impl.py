"""Choosing a join chain's implementation on the row engine: the binary tree Phase One
ordered, MJoin, MJoin with A-Caching's caches, or the tree with JIT (``--join-impl auto``).

Each implementation is priced in row-engine seconds per second of input (a utilization),
from the Phase-One chain model's estimates (``optimizer.phase_one._ChainModel``: each leaf's
rate ``lambda`` and window cardinality, the cardinality ``|S|`` of the join of any leaf set
``S``, independent of the order), with three unit costs: a hash probe (``PROBE_S``), building a
result tuple (``OUT_S``), and inserting or deleting a tuple in a store index (``STORE_S``).
Sliding windows send each tuple twice (insert, later delete), hence the factor 2.

* tree (left-deep, Phase One's order): each join probes with both inputs' changes, stores
  both inputs and builds its output: ``sum_joins 2 * ((lam_L + lam_j) * (PROBE + STORE) +
  lam_out * OUT)``.
* MJoin: pipeline ``i`` (greedy order: smallest next set cardinality first) probes once per
  partial at every step: ``2 * lam_i * sum_l |S_l| / |i|`` probes; its compiled loop binds
  intermediate partials to loop variables (``BIND_S`` each) and builds only the results
  (``OUT_S``); each input is stored once per index (one per distinct probe key), at
  ``STORE_M_S`` (the n-ary store's defaultdict indexes).
* A-Caching: MJoin plus its profiler's overhead (``ACACHING_OVERHEAD``) minus the caches'
  net gain (section 1.3), the caches chosen by the same
  selection the runtime uses (``engines.row.acaching.select``), with the miss probability of a
  segment estimated as ``min(1, keys / lookups in a window)``: an entry stays valid while its
  key keeps being looked up, so a key misses about once per window length.
* JIT: the tree, with the output of a producer join discounted by the probability that its
  key has a partner in the consumer's opposite state, ``1 - exp(-fanout)`` with ``fanout =
  |L + j| / |L|`` the consumer's expected partners per partial (Poisson); the consumer stores
  and probes only those; JIT's bookkeeping costs ``BOOK_S`` per tuple and key attribute
  on both sides of a link.

An alternative replaces the tree only when predicted ``MARGIN`` (10%) cheaper.

The costs are a model (stated as such in explain); ``python experiments/join_impls.py
choice`` measures how often it picks the measured best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from optimizer.ir.join_chains import JoinChain, join_chains
from optimizer.ir.plan import Join, LogicalPlan

#: Unit costs (seconds) of the row engine's join work, measured on this machine
#: (experiments/README.md, "Join implementations").
PROBE_S = 0.40e-6
OUT_S = 0.20e-6
STORE_S = 0.55e-6
#: MJoin's compiled pipelines: an intermediate partial is a loop variable, not a tuple; an
#: insert plus delete in an n-ary store index costs 0.32 us against the binary store's 0.43
#: (timeit over 20,000 tuples, 2026-11-26), so 0.55 x 0.32 / 0.43.
BIND_S = 0.05e-6
STORE_M_S = 0.41e-6

#: A-Caching's own work as a fraction of its MJoin's: the profiled tuples (2%, several
#: times a cached tuple's cost), the per-batch timing and the adaptive loop (measured at
#: 1.09x-1.17x MJoin's join time with no cache in use, experiments/README.md fig6).
ACACHING_OVERHEAD = 0.12
#: JIT's bookkeeping per tuple and key attribute (value counts, partial notes, indexes).
BOOK_S = 0.15e-6
#: An alternative replaces the tree only when predicted this much cheaper.
MARGIN = 0.10

IMPLS = ("tree", "mjoin", "acaching", "jit")


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


def choose(
    plan: LogicalPlan, chain_model: Any, chain: JoinChain, forced: str | None = None
) -> ChainChoice:
    """Price every implementation of ``chain`` and pick the cheapest (or ``forced``)."""
    cm = chain_model
    m = len(chain.leaves)
    lam = [float(e.lambda_out.value) for e in cm.est]
    card = [max(1e-9, float(e.cardinality.value)) for e in cm.est]

    def size(s: frozenset[int]) -> float:
        return max(0.0, float(cm.of_set(s)[1].value))

    def rate(s: frozenset[int]) -> float:
        return max(0.0, float(cm.of_set(s)[0].value))

    costs: dict[str, float] = {}
    # tree: Phase One's left-deep order is the chain's leaf order after rewiring
    order = list(range(m))
    tree = 0.0
    outs: list[tuple[frozenset[int], int, float]] = []
    for k in range(1, m):
        left = frozenset(order[:k])
        j = order[k]
        lam_l = rate(left) if k > 1 else lam[order[0]]
        lam_out = rate(left | {j})
        tree += 2 * ((lam_l + lam[j]) * (PROBE_S + STORE_S) + lam_out * OUT_S)
        outs.append((left, j, lam_out))
    costs["tree"] = tree
    # MJoin
    mj = 0.0
    pipes: list[list[tuple[frozenset[int], float]]] = []
    for i in range(m):
        bound = frozenset({i})
        steps = []
        rest = set(range(m)) - {i}
        while rest:
            p = min(sorted(rest), key=lambda q: size(bound | {q}))
            per = size(bound) / card[i] if len(bound) > 1 else 1.0
            nxt = size(bound | {p}) / card[i]
            last = len(rest) == 1
            mj += 2 * lam[i] * (per * PROBE_S + nxt * (OUT_S if last else BIND_S))
            steps.append((bound, per))
            bound = bound | {p}
            rest.discard(p)
        pipes.append(steps)
        mj += 2 * lam[i] * STORE_M_S * max(1, m - 1)
    costs["mjoin"] = mj
    # A-Caching: per pipeline, the best single cache over its last steps (a segment ending
    # at the last step, so no other Update is skipped), gain = work saved minus misses.
    gain = 0.0
    for i, steps in enumerate(pipes):
        best = 0.0
        for start in range(1, len(steps)):
            work = sum(2 * lam[i] * (per * PROBE_S + per * OUT_S) for _, per in steps[start:])
            lookups = 2 * lam[i] * steps[start][1]
            seg = frozenset(range(m)) - steps[start][0]
            keys = max(1.0, min(size(seg), lookups))
            window = max(1.0, card[i] / max(lam[i], 1e-9))
            miss = min(1.0, keys / max(lookups * window, 1e-9))
            upd = sum(2 * lam[p] * STORE_S for p in seg)
            best = max(best, work - lookups * PROBE_S - miss * work - upd)
        gain += best
    costs["acaching"] = mj * (1 + ACACHING_OVERHEAD) - gain
    # JIT: discount producer outputs without a partner in the consumer's opposite state
    jit = 0.0
    for k, (left, j, lam_out) in enumerate(outs):
        lam_l = rate(left) if k > 0 else lam[order[0]]
        if k > 0:  # a producer's partial finds, on average, |L+j| / |L| partners
            full = lam_l
            fanout = size(left | {j}) / max(size(left), 1e-9)
            lam_l *= 1 - math.exp(-fanout)
            # bookkeeping: the consumer counts its other side's values and notes the
            # partials it stores, per key attribute; the producer indexes its tuples
            attrs = max(1, sum(1 for leaves, _ in cm.filters if j in leaves and leaves & left))
            jit += 2 * (full + lam[j] + lam[order[k - 1]]) * attrs * BOOK_S
        jit += 2 * ((lam_l + lam[j]) * (PROBE_S + STORE_S) + lam_out * OUT_S)
    costs["jit"] = jit
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

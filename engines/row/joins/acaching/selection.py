"""A-Caching's cache selection: the compatible candidate set of largest net gain.

Selection (section 1.5): the set of candidates, pairwise compatible (no two overlap in a
pipeline; no cache's Update point falls strictly inside another used segment of that
pipeline, whose hits would skip it), that maximizes ``sum benefit - sum cost`` (a shared
cache's cost counted once): exhaustive search up to ``EXHAUSTIVE_SITES`` candidates (the
paper's "negligible for n <= 6"), the greedy of Thm. 4.3 beyond (``_greedy``). Memory
(section 5): chosen caches get buckets greedily by ``(benefit - cost) / expected bytes``
under ``memory_bytes``.

The package docstring (``engines.row.joins.acaching``) lists the other parts.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from engines.row.joins.acaching.candidates import Candidate, compatible
from engines.row.joins.acaching.estimator import Estimate
from engines.row.joins.mjoin import (
    NarySpec,
    Pipeline,
)

#: Exhaustive selection up to this many candidates (2^n subsets, pruned by conflicts).
EXHAUSTIVE_SITES = 18


def select(
    est: dict[Candidate, Estimate], spec: NarySpec, pipelines: Sequence[Pipeline]
) -> list[Candidate]:
    """The compatible candidate set of largest total net gain (module docstring)."""
    cands = [c for c in est if est[c].benefit > 0]
    if len(cands) <= EXHAUSTIVE_SITES:
        return _exhaustive(cands, est, spec, pipelines)
    return _greedy(cands, est, spec, pipelines)


def _gain(chosen: Sequence[Candidate], est: dict[Candidate, Estimate]) -> float:
    groups = {c.group: est[c].cost for c in chosen}
    return sum(est[c].benefit for c in chosen) - sum(groups.values())


def _exhaustive(
    cands: list[Candidate],
    est: dict[Candidate, Estimate],
    spec: NarySpec,
    pipelines: Sequence[Pipeline],
) -> list[Candidate]:
    best: tuple[float, list[Candidate]] = (0.0, [])

    def go(k: int, chosen: list[Candidate]) -> None:
        nonlocal best
        if k == len(cands):
            g = _gain(chosen, est)
            if g > best[0] + 1e-15:
                best = (g, list(chosen))
            return
        c = cands[k]
        chosen.append(c)
        if compatible(chosen, spec, pipelines):
            go(k + 1, chosen)
        chosen.pop()
        go(k + 1, chosen)

    go(0, [])
    return best[1]


def _greedy(
    cands: list[Candidate],
    est: dict[Candidate, Estimate],
    spec: NarySpec,
    pipelines: Sequence[Pipeline],
) -> list[Candidate]:
    """Selection beyond ``EXHAUSTIVE_SITES`` candidates: the better (by net gain) of Thm.
    4.3's greedy, whose guarantee is on the total cost (a log factor), not on the gain, and
    a greedy adding candidates by net gain."""
    a = _greedy_cover(cands, est, spec, pipelines)
    b = _greedy_gain(cands, est, spec, pipelines)
    return a if _gain(a, est) >= _gain(b, est) else b


def _greedy_gain(
    cands: list[Candidate],
    est: dict[Candidate, Estimate],
    spec: NarySpec,
    pipelines: Sequence[Pipeline],
) -> list[Candidate]:
    chosen: list[Candidate] = []
    for c in sorted(cands, key=lambda c: -est[c].benefit):
        trial = [*chosen, c]
        if compatible(trial, spec, pipelines) and _gain(trial, est) > _gain(chosen, est):
            chosen = trial
    return chosen


def _greedy_cover(
    cands: list[Candidate],
    est: dict[Candidate, Estimate],
    spec: NarySpec,
    pipelines: Sequence[Pipeline],
) -> list[Candidate]:
    """Thm. 4.3's greedy (research section 1.5): selection as covering every operator (a
    pipeline step) once at least cost. A step left uncached costs its own work ``d_l c_l``;
    a cache costs its Lookup's ``proc = work - benefit``, and its sharing group pays its
    Update cost ``L_r`` once. Repeatedly take the cheapest cover per operator: a single
    step, or a group's best prefix ``S`` (members sorted by proc per operator) at
    ``D_r = (L_r + sum_S proc) / operators covered``; members overlap nothing taken and
    stay compatible, so no overlap remains to resolve."""

    def ops(c: Candidate) -> set[tuple[int, int]]:
        return {(c.pipeline, pos) for pos in range(c.first, c.last + 1)}

    def proc(c: Candidate) -> float:
        return max(0.0, est[c].work - est[c].benefit)

    own: dict[tuple[int, int], float] = {}
    for c in cands:
        for k, op in enumerate(sorted(ops(c))):
            w = est[c].step_work
            own[op] = w[k] if k < len(w) else est[c].work / len(ops(c))
    groups: dict[Any, list[Candidate]] = {}
    for c in cands:
        groups.setdefault(c.group, []).append(c)
    covered: set[tuple[int, int]] = set()
    chosen: list[Candidate] = []
    paid: set[Any] = set()
    while len(covered) < len(own):
        best: tuple[float, list[Candidate]] | None = None
        for g, members in groups.items():
            ranked = sorted(
                (c for c in members if not ops(c) & covered),
                key=lambda c: proc(c) / len(ops(c)),
            )
            total = 0.0 if g in paid else est[members[0]].cost
            taken: list[Candidate] = []
            taken_ops: set[tuple[int, int]] = set()
            for c in ranked:
                if ops(c) & taken_ops or not compatible([*chosen, *taken, c], spec, pipelines):
                    continue
                taken.append(c)
                taken_ops |= ops(c)
                total += proc(c)
                d = total / len(taken_ops)
                if best is None or d < best[0]:
                    best = (d, list(taken))
        single = min((w, op) for op, w in own.items() if op not in covered)
        if best is None or single[0] <= best[0]:
            covered.add(single[1])  # this step stays uncached
            continue
        for c in best[1]:
            chosen.append(c)
            covered |= ops(c)
            paid.add(c.group)
    return chosen if _gain(chosen, est) > 0 else []


def all_subsets(
    cands: Sequence[Candidate], spec: NarySpec, pipelines: Sequence[Pipeline]
) -> list[list[Candidate]]:
    """Every compatible cache set (tests force each)."""
    return [
        list(combo)
        for r in range(len(cands) + 1)
        for combo in itertools.combinations(cands, r)
        if compatible(list(combo), spec, pipelines)
    ]

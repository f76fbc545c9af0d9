"""A-Caching's profiler and cost figures: miss estimation, profiled work, estimates.

Profiler (section 1.4): a fraction ``sample`` of each input's delta tuples bypasses the caches
and runs through the pipeline step by step (single-step compiled runners, the call's fixed
cost subtracted): per step, the partials that entered (delta) and the time spent (tau);
``W`` observations kept. A pipeline with no observation yet is profiled whole. A candidate
not in use estimates its miss probability from a bitmap at its Lookup position (``alpha *
W_d`` bits, one hash, reset every ``W_d`` lookups) with the linear-counting correction ``-m
ln(1 - b/m)`` for the distinct keys seen; a cache in use observes its miss rate directly.

Costs (section 1.3), per interval: ``d_l`` = partials reaching step ``l``, ``c_l`` its time per
partial, ``d_out`` what leaves the segment::

    benefit = sum d_l c_l - d_first * probe - miss * (sum d_l c_l + d_out * update)
    cost    = update * (d(segment) tuples reaching the Updates of every pipeline of S)

``probe`` and ``update`` are per-lookup and per-update costs (``PROBE_S + PER_TUPLE_S *
entry size``, ``UPDATE_S``): constants of this implementation, measured on this machine
(``UPDATE_S`` by ``python experiments/join_impls.py units``; docs/joins.md).

The package docstring (``engines.row.joins.acaching``) lists the other parts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engines.row.joins.acaching.candidates import Candidate
from engines.row.joins.mjoin import (
    Pipeline,
    run_pipeline,
)

#: Costs (s) of the Lookup and Update operators, measured on this machine: a probe 0.12 us;
#: emitting a non-empty entry 0.30 us more plus 0.06 us per tuple (timeit over 100,000
#: lookups of 1,000 keys); an Update point 0.5 us per partial reaching it: the compiled
#: pipeline splits there (the partial is built as a tuple), then key, lookup and append
#: (``python experiments/join_impls.py units``: 0.3-0.55 us per Q3 r or s tuple, about 0.6
#: update partials each). A lookup costs ``PROBE_S + NONEMPTY_S * min(1, e) + PER_TUPLE_S *
#: e`` for entries of ``e`` tuples.
PROBE_S = 0.12e-6
NONEMPTY_S = 0.30e-6
PER_TUPLE_S = 0.06e-6
UPDATE_S = 0.5e-6


class MissEstimator:
    """Miss-probability estimate at a Lookup position of a cache not in use (section 1.4,
    changed: see below).

    Sampled keys are hashed into a bitmap of ``m`` bits (one hash function); the number of
    distinct keys seen is estimated by linear counting, ``d = -m ln(1 - b/m)`` with ``b``
    bits set, and the key *domain* ``D`` from ``d`` distinct among ``n`` sampled lookups by
    solving ``d = D (1 - exp(-n/D))`` (uniform draws).

    The paper resets its bitmap every ``W_d`` lookups and takes ``distinct / W_d`` as the miss
    probability: right when an entry lives about ``W_d`` lookups. Our entries stay exact as
    long as they are not evicted (the Update operators maintain them), so a key misses when it
    is looked up for the first time since the cache started, or after a colliding key evicted
    it: ``miss = D / (N * horizon) + (1 - exp(-D / B))`` for ``N`` lookups per interval, the
    first misses amortized over ``horizon`` intervals, and ``B`` direct-mapped buckets.
    """

    __slots__ = ("bits", "m", "seen", "set")

    def __init__(self, m: int = 1 << 16) -> None:
        self.m = m
        self.bits = bytearray(m)
        self.set = 0
        self.seen = 0

    def add(self, u: Any) -> None:
        h = hash(u) % self.m
        if not self.bits[h]:
            self.bits[h] = 1
            self.set += 1
        self.seen += 1

    def distinct(self) -> float:
        frac = min(self.set / self.m, 1 - 1 / self.m)
        return -self.m * math.log(1 - frac)

    def domain(self) -> float | None:
        """Estimated number of distinct keys (None before 8 sampled lookups)."""
        n = self.seen
        if n < 8:
            return None
        d = min(self.distinct(), float(n))
        if d >= 0.95 * n:  # nearly every key new: the domain is far larger than the sample
            return 20.0 * n
        lo, hi = d, 1e12
        for _ in range(100):  # d = D (1 - exp(-n / D)) grows with D
            mid = math.sqrt(lo * hi)
            if mid * (1 - math.exp(-n / mid)) < d:
                lo = mid
            else:
                hi = mid
        return hi

    def estimate(self, lookups: float, horizon: float, buckets: float) -> float | None:
        dom = self.domain()
        if dom is None:
            return None
        cold = dom / max(lookups * horizon, 1e-9)
        return min(1.0, cold + (1 - math.exp(-dom / max(buckets, 1.0))))


@dataclass
class _Obs:
    """Profiled work of one pipeline: per step, partials in and seconds; per window."""

    n: int = 0
    delta: list[int] = field(default_factory=list)  # entering step l; last = outputs
    tau: list[float] = field(default_factory=list)


@dataclass
class Estimate:
    """A candidate's figures at one selection (section 1.3), per interval."""

    candidate: Candidate
    benefit: float
    cost: float  # of its group (counted once per group)
    miss: float
    entry_size: float
    entries: float
    work: float
    #: ``d_l c_l`` of each step of the segment (``work`` is their sum).
    step_work: tuple[float, ...] = ()


def _call_overhead(pipe: Pipeline, stores: Sequence[Any]) -> float:
    """Seconds of one timed single-step runner call on one partial that finds nothing (the
    stores are empty when an operator is built): what the profiler subtracts per call."""
    probe = [(None,) * pipe.widths[0]]
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(100):
            t1 = time.perf_counter()
            run_pipeline(pipe, stores, probe, [0], 0, 0, final=False)
            _ = time.perf_counter() - t1
        best = min(best, (time.perf_counter() - t0) / 100)
    return best

"""A-Caching (Babu, Munagala, Widom, Motwani; ICDE'05; seed 002): adaptive caching of
subresults inside an MJoin (``engines.row.mjoin``), per research/acaching-and-jit.md section 1.

A *candidate* caches segment ``first..last`` (step indexes) of pipeline ``i``: the inputs ``S``
it joins, keyed by the segment columns that the prefix (the pipeline's inputs before the
segment) is equal to. It is valid only when

* every predicate between prefix and segment is a hashable equality (so an entry's key is a
  function of the segment tuple: the Update operators can find the entry of a segment change;
  theta predicates inside the prefix or the segment are fine), and
* the *prefix invariant* (Def. 3.2) holds: for every ``l`` in ``S``, pipeline ``l``'s first
  ``|S| - 1`` steps join exactly ``S - {l}``, so that after them pipeline ``l`` carries
  ``d(segment)``; an Update operator placed there inserts (or deletes) each such tuple into
  the cache entry of its key, if that entry exists.

Candidates of different pipelines with the same inputs and key are one *shared* cache
(Def. 4.1): one storage, one set of Updates, several Lookups.

Storage (section 3.3): direct-mapped, a fixed number of buckets; creating a key's entry
evicts whatever key held its bucket, which is always safe (a miss recomputes). The entries
themselves live in a dict (``SubresultCache``), so Lookups and Updates are one ``get``.
Entries are exact (Def. 3.1): ``v = sigma_{K=u}(segment)``, empty ones included. Each
Lookup runs before the segment: a hit emits ``q + s`` for every ``s`` of the
entry and jumps past the segment; misses of one batch are grouped by key, the segment runs
once per distinct key from one representative partial, and the result creates the entry.

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

Selection (section 1.5): the set of candidates, pairwise compatible (no two overlap in a
pipeline; no cache's Update point falls strictly inside another used segment of that
pipeline, whose hits would skip it), that maximizes ``sum benefit - sum cost`` (a shared
cache's cost counted once): exhaustive search up to ``EXHAUSTIVE_SITES`` candidates (the
paper's "negligible for n <= 6"), the greedy of Thm. 4.3 beyond (``_greedy``). Memory
(section 5): chosen caches get buckets greedily by ``(benefit - cost) / expected bytes``
under ``memory_bytes``.

Adaptive loop (section 1.6): every ``interval`` input tuples, once every pipeline has ``W``
observations, the estimates are recomputed; selection re-runs only when one moved by more
than 20% since the last selection, and a used cache whose benefit fell below its cost is
dropped at once. With ``adapt_orders`` (the default) the probe orders are re-chosen A-Greedy
style from the stores' current sizes and key counts first; a pipeline whose order changes
drops the caches that touch it and is profiled afresh (so the orders decide which
candidates exist: a cache over ``S join T`` in ``R``'s pipeline needs ``S``'s and ``T``'s
pipelines to start with each other). Caches start empty when chosen.

Trials (ours): a selection that adds caches is judged on measured time after a settling
interval (``_judge``): seconds per work unit of each pipeline's unsampled path, against the
interval before, weighted by the current work mix; slower by more than ``TRIAL_MARGIN``, it is
reverted and the added groups are banned from selection for ``BAN_INTERVALS`` intervals,
doubling per refutation. The model's constants are one machine's and its profile a sample;
the trial makes a wrong prediction cost two intervals, not the rest of the run.

Not built: globally-consistent caches (section 1.8); re-profiling a used cache that hides an
unused subset.
"""

from __future__ import annotations

import itertools
import math
import operator
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engines.row.base import Row, Rows
from engines.row.mjoin import (
    MJoinOp,
    NarySpec,
    Pipeline,
    greedy_order,
    index_cols,
    run_pipeline,
    run_steps,
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
#: A trial (a selection that added caches) is reverted when the pipelines' measured time
#: per tuple grew by more than this; the groups it added are then left out of selection for
#: ``BAN_INTERVALS`` intervals, doubling at each refutation.
TRIAL_MARGIN = 0.10
#: A trial is judged only if the stores' size moved by less than this fraction meanwhile.
STORE_DRIFT = 0.25
BAN_INTERVALS = 8
#: A pipeline takes a new A-Greedy probe order only when it builds at most this fraction of
#: the partials of its current order (a reorder drops the caches touching the pipeline).
REORDER_GAIN = 0.9
#: While no estimate moves, the sampling stride doubles per interval, up to 2**CALM_LEVELS.
CALM_LEVELS = 3
#: Exhaustive selection up to this many candidates (2^n subsets, pruned by conflicts).
EXHAUSTIVE_SITES = 18
#: Bytes per cached tuple reference and per entry (CPython list slot, entry list and key).
TUPLE_BYTES = 8
ENTRY_BYTES = 120


@dataclass(frozen=True)
class Candidate:
    """A cacheable segment ``first..last`` (step indexes) of pipeline ``pipeline``."""

    pipeline: int
    first: int
    last: int
    inputs: frozenset[int]
    key_cols: tuple[int, ...]  # global segment columns of the key, one per equality, sorted
    prefix_cols: tuple[int, ...]  # flat columns of the partial before ``first``, aligned

    @property
    def group(self) -> tuple[frozenset[int], tuple[int, ...]]:
        """Sharing identity: candidates with equal groups are one cache (Def. 4.1)."""
        return self.inputs, self.key_cols

    def label(self) -> str:
        ins = ",".join(str(p) for p in sorted(self.inputs))
        return f"p{self.pipeline}[{self.first}..{self.last}]{{{ins}}}"


def candidates(spec: NarySpec, pipelines: Sequence[Pipeline]) -> list[Candidate]:
    """Every valid candidate (module docstring) for the current probe orders."""
    out = []
    starts = spec.starts
    for i, pipe in enumerate(pipelines):
        nsteps = len(pipe.steps)
        for first in range(nsteps):
            for last in range(first + 1, nsteps):
                prefix = set(pipe.order[: first + 1])
                seg = frozenset(pipe.order[first + 1 : last + 2])
                pairs: list[tuple[int, int]] = []  # (segment column, prefix column)
                ok = True
                for c in spec.conjuncts:
                    ins = spec.inputs_of(c)
                    if not (ins & prefix and ins & seg) or not ins <= prefix | seg:
                        continue  # inside one side, or applied after the segment
                    eq = spec.hashable(c)
                    if eq is None:
                        ok = False
                        break
                    a, b = eq
                    if spec.owner(a) in seg:
                        a, b = b, a
                    pairs.append((b, a))
                if not ok or not pairs:
                    continue
                if not all(frozenset(pipelines[p].order[1 : len(seg)]) == seg - {p} for p in seg):
                    continue
                pairs.sort()
                key = tuple(b for b, _ in pairs)
                prefix_flat = tuple(
                    pipe.flat_starts[spec.owner(a)] + a - starts[spec.owner(a)] for _, a in pairs
                )
                out.append(Candidate(i, first, last, seg, key, prefix_flat))
    return out


def compatible(chosen: Sequence[Candidate], spec: NarySpec, pipelines: Sequence[Pipeline]) -> bool:
    """No two chosen segments overlap in a pipeline, and no Update point of a chosen cache
    lies strictly inside a chosen segment of its pipeline."""
    by_pipe: dict[int, list[tuple[int, int]]] = {}
    for c in chosen:
        for a, b in by_pipe.get(c.pipeline, ()):
            if not (c.last < a or b < c.first):
                return False
        by_pipe.setdefault(c.pipeline, []).append((c.first, c.last))
    for c in chosen:
        t = len(c.inputs) - 2  # Update after this step index, in each pipeline of S
        for p in c.inputs:
            for a, b in by_pipe.get(p, ()):
                if a <= t < b:
                    return False
    return True


#: An empty slot of ``SubresultCache.slots``.
_EMPTY: Any = object()


class SubresultCache:
    """Direct-mapped storage of one (possibly shared) cache: ``buckets`` slots; a key ``u``
    lives in slot ``hash(u) % buckets`` and creating it evicts the slot's previous key. Tuples
    are the segment's, in the layout of ``layout`` (global columns).

    The slots hold only keys; the entries live in a dict ``u -> tuples``, so a Lookup or an
    Update is one ``dict.get`` (the hot loops) while which keys are present is exactly the
    direct-mapped table's (``slots`` is kept in step by ``create`` and ``drop``)."""

    __slots__ = ("buckets", "entries", "hits", "inconsistent", "layout", "misses", "slots")

    def __init__(self, buckets: int, layout: tuple[int, ...]) -> None:
        self.buckets = max(1, buckets)
        self.slots: list[Any] = [_EMPTY] * self.buckets
        self.entries: dict[Any, Rows] = {}
        self.hits = 0
        self.misses = 0
        self.inconsistent = 0
        self.layout = layout

    def probe(self, u: Any) -> Rows | None:
        return self.entries.get(u)

    def create(self, u: Any, v: Rows) -> None:
        h = hash(u) % self.buckets
        old = self.slots[h]
        if old is not _EMPTY and old is not u and old != u:
            del self.entries[old]  # the direct-mapped eviction
        self.slots[h] = u
        self.entries[u] = v

    def drop(self, u: Any) -> None:
        if self.entries.pop(u, None) is not None:
            self.slots[hash(u) % self.buckets] = _EMPTY

    def insert(self, u: Any, s: Row) -> None:
        e = self.entries.get(u)
        if e is not None:
            e.append(s)

    def delete(self, u: Any, s: Row) -> None:
        e = self.entries.get(u)
        if e is not None:
            try:
                e.remove(s)
            except ValueError:  # cannot happen while Def. 3.1 holds: drop the entry (safe)
                self.drop(u)
                self.inconsistent += 1

    def tuples(self) -> int:
        return sum(len(v) for v in self.entries.values())

    def __len__(self) -> int:
        return len(self.entries)


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


def buckets_for(keys: float) -> int:
    """Direct-mapped buckets for ``keys`` expected keys: a power of two >= 8 x keys (about 12%
    of the keys then share a bucket with another), at least 64."""
    return max(64, 1 << max(0, math.ceil(math.log2(8 * keys + 1))))


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


@dataclass
class _Site:
    """A cache in use at one pipeline: its Lookup (before step ``first``)."""

    cand: Candidate
    cache: SubresultCache
    key: Callable[[Row], Any]
    width: int  # flat columns of the prefix (the segment starts there)
    to_cache: Callable[[Row], Row] | None  # segment tuple (site layout) -> cache layout
    #: Generated by ``_lookup_code``: the Lookup loop and one prefix's emission.
    look: Callable[..., Any] | None = None
    emit: Callable[..., Any] | None = None


@dataclass
class _Update:
    """An Update operator: after step ``after`` of a pipeline, ``d(segment)`` into a cache."""

    after: int
    cache: SubresultCache
    key: Callable[[Row], Any]
    to_cache: Callable[[Row], Row] | None


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


def _getter(positions: Sequence[int]) -> Callable[[Row], Any]:
    return operator.itemgetter(*positions)  # one position: the value itself, not a 1-tuple


def _perm(src: Sequence[int], dst: Sequence[int]) -> Callable[[Row], Row] | None:
    """Rows laid out as global columns ``src`` -> laid out as ``dst`` (None if equal)."""
    if list(src) == list(dst):
        return None
    where = {g: k for k, g in enumerate(src)}
    idx = [where[g] for g in dst]
    if len(idx) == 1:
        k = idx[0]
        return lambda r: (r[k],)
    g = operator.itemgetter(*idx)
    return g


def _lookup_code(
    spec: NarySpec,
    pipe: Pipeline,
    c: Candidate,
    site_layout: Sequence[int],
    layout: tuple[int, ...],
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The Lookup at ``c`` as generated code: ``look(partials, get, extend)`` emits every
    hit's results and returns the misses grouped by key (or None); ``emit(q, v, extend)``
    emits one prefix's results with an entry ``v``. Keys and results are built inline from
    the prefix ``q`` and the cached tuple ``s`` (in ``layout``): when the segment ends the
    pipeline the results are in the join's output layout (often just ``s + q`` or ``q + s``),
    else in the pipeline's flat layout."""
    where = {g: k for k, g in enumerate(layout)}
    cols = c.prefix_cols
    key = f"q[{cols[0]}]" if len(cols) == 1 else "(" + ", ".join(f"q[{k}]" for k in cols) + ",)"
    if c.last < len(pipe.steps) - 1:  # flat partials continue down the pipeline
        if list(site_layout) == list(layout):
            expr = "q + s"
        else:
            expr = "q + (" + ", ".join(f"s[{where[g]}]" for g in site_layout) + ",)"
    else:
        prefix = [
            spec.starts[p] + k for p in pipe.order[: c.first + 1] for k in range(spec.widths[p])
        ]
        total = list(range(sum(spec.widths)))
        if prefix + list(layout) == total:
            expr = "q + s"
        elif list(layout) + prefix == total:
            expr = "s + q"
        else:
            parts = []
            for g in total:
                owner = spec.owner(g)
                if owner in c.inputs:
                    parts.append(f"s[{where[g]}]")
                else:
                    parts.append(f"q[{pipe.flat_starts[owner] + g - spec.starts[owner]}]")
            expr = "(" + ", ".join(parts) + ",)"
    src = (
        "def _look(partials, get, extend):\n"
        "    missed = None\n"
        "    for q in partials:\n"
        f"        u = {key}\n"
        "        v = get(u)\n"
        "        if v is None:\n"
        "            if missed is None:\n"
        "                missed = {u: [q]}\n"
        "            else:\n"
        "                m = missed.get(u)\n"
        "                if m is None:\n"
        "                    missed[u] = [q]\n"
        "                else:\n"
        "                    m.append(q)\n"
        "        elif v:\n"
        f"            extend([{expr} for s in v])\n"
        "    return missed\n"
        "\n"
        "def _emit(q, v, extend):\n"
        f"    extend([{expr} for s in v])\n"
    )
    namespace: dict[str, Any] = {}
    exec(compile(src, f"<hycq:acaching-lookup {c.label()}>", "exec"), namespace)
    return namespace["_look"], namespace["_emit"]


class ACachingJoinOp(MJoinOp):
    """MJoin with adaptive subresult caches (module docstring).

    ``memory_bytes`` bounds the caches (None: unlimited); ``interval`` input tuples between
    selections; ``sample`` the profiled fraction; ``seed`` the sampler's seed. ``force``
    installs a given cache set and stops adapting (tests, experiments)."""

    impl = "acaching"

    def __init__(
        self,
        op_id: str,
        spec: NarySpec,
        replace_in: Sequence[bool],
        orders: Sequence[Sequence[int]] | None = None,
        memory_bytes: int | None = None,
        interval: int = 10_000,
        sample: float = 0.02,
        window: int = 10,
        seed: int = 0,
        adapt_orders: bool = True,
    ) -> None:
        super().__init__(op_id, spec, replace_in, orders)
        self.memory_bytes = memory_bytes
        self.interval = interval
        self.sample = sample
        self.w = window
        self.rng = random.Random(seed)
        self._base_stride = max(1, round(1 / sample)) if sample > 0 else 1
        self._stride = self._base_stride
        self.calm = 0  # intervals without a moved estimate (the stride doubles with each)
        self._phase = [self.rng.randrange(self._stride) for _ in range(spec.n)]
        self.adapt_orders = adapt_orders
        self.forced = False
        self.obs: list[deque[_Obs]] = [deque(maxlen=window) for _ in range(spec.n)]
        self.cur: list[_Obs] = [self._fresh_obs(i) for i in range(spec.n)]
        self.obs_size = 16  # sampled tuples per observation
        self.rates = [0] * spec.n  # input tuples this interval
        self.since = 0
        self.cands: list[Candidate] = []
        self.estimators: dict[Candidate, MissEstimator] = {}
        self.used: dict[tuple[frozenset[int], tuple[int, ...]], SubresultCache] = {}
        #: Groups whose cache started empty since the last selection: their observed miss
        #: rate is a cold start's, so the estimate stands in for it once.
        self.fresh: set[tuple[frozenset[int], tuple[int, ...]]] = set()
        self.chosen: list[Candidate] = []
        self.sites: list[list[_Site]] = [[] for _ in range(spec.n)]
        self.updates: list[list[_Update]] = [[] for _ in range(spec.n)]
        self.last_estimates: dict[Candidate, Estimate] = {}
        self.reselections: list[dict[str, Any]] = []
        self.timeline: list[dict[str, Any]] = []
        self.tuples_seen = 0
        self.cache_probes = 0
        #: Measured cost of the unsampled path, per pipeline, this interval: seconds, tuples.
        self.spent = [0.0] * spec.n
        self.passed = [0] * spec.n
        #: A change of the cache set on trial: the set before, its measured cost per tuple
        #: per pipeline, and intervals left to settle (cold caches) before it is judged.
        self.trial: dict[str, Any] | None = None
        #: Groups a trial refuted: group -> intervals left excluded; and how often refuted.
        self.banned: dict[Any, int] = {}
        self.refuted: dict[Any, int] = {}
        self.reverts = 0
        self.call_s = _call_overhead(self.pipelines[0], self.stores)
        self._refresh_candidates()

    def _fresh_obs(self, i: int) -> _Obs:
        steps = len(self.pipelines[i].steps)
        return _Obs(0, [0] * (steps + 1), [0.0] * steps)

    def _refresh_candidates(self) -> None:
        self.cands = candidates(self.spec, self.pipelines)
        #: Per pipeline: its candidates and their Lookup keys (the profiler's estimators).
        self._cands_of: list[list[tuple[Candidate, Callable[[Row], Any]]]] = [
            [(c, _getter(c.prefix_cols)) for c in self.cands if c.pipeline == i]
            for i in range(self.spec.n)
        ]
        self.estimators = {c: self.estimators.get(c) or MissEstimator() for c in self.cands}

    # -- installing caches --------------------------------------------------------------------

    def install(self, chosen: Sequence[Candidate], buckets: dict[Any, int] | None = None) -> None:
        """Use exactly the caches ``chosen`` (compatible candidates of the current orders);
        kept groups keep their entries unless their bucket count changes."""
        if not compatible(chosen, self.spec, self.pipelines):
            raise ValueError("incompatible cache set")
        starts, widths = self.spec.starts, self.spec.widths
        layouts: dict[Any, tuple[int, ...]] = {}
        groups: dict[Any, list[Candidate]] = {}
        for c in chosen:
            groups.setdefault(c.group, []).append(c)
        new_used: dict[Any, SubresultCache] = {}
        for g, cs in groups.items():
            # the segment's columns in input order: for a segment ending a pipeline the
            # output is then often ``entry + prefix`` or ``prefix + entry`` (no permutation)
            layout = tuple(starts[p] + k for p in sorted(cs[0].inputs) for k in range(widths[p]))
            layouts[g] = layout
            want = (buckets or {}).get(g) or self._default_buckets(g)
            old = self.used.get(g)
            if old is not None and old.buckets == want and old.layout == layout:
                new_used[g] = old
            else:
                new_used[g] = SubresultCache(want, layout)
        self.fresh |= {g for g, c in new_used.items() if self.used.get(g) is not c}
        self.used = new_used
        self.chosen = list(chosen)
        self.sites = [[] for _ in range(self.spec.n)]
        self.updates = [[] for _ in range(self.spec.n)]
        for c in chosen:
            pipe = self.pipelines[c.pipeline]
            cache = self.used[c.group]
            order = pipe.order[c.first + 1 : c.last + 2]
            site_layout = [starts[p] + k for p in order for k in range(widths[p])]
            width = pipe.flat_starts[order[0]]
            self.sites[c.pipeline].append(
                _Site(
                    c,
                    cache,
                    _getter(c.prefix_cols),
                    width,
                    _perm(site_layout, cache.layout),
                    *_lookup_code(self.spec, pipe, c, site_layout, cache.layout),
                )
            )
        for g, cs in groups.items():
            seg = cs[0].inputs
            cache = self.used[g]
            for p in seg:
                pipe = self.pipelines[p]
                order = pipe.order[: len(seg)]
                flat = [starts[q] + k for q in order for k in range(widths[q])]
                where = {gcol: f for f, gcol in enumerate(flat)}
                self.updates[p].append(
                    _Update(
                        len(seg) - 2,
                        cache,
                        _getter([where[k] for k in cs[0].key_cols]),
                        _perm(flat, cache.layout),
                    )
                )
        for s in self.sites:
            s.sort(key=lambda x: x.cand.first)
        self.timeline.append(
            {
                "at_tuples": self.tuples_seen,
                "caches": sorted({c.label() for c in chosen}),
            }
        )

    def force(self, chosen: Sequence[Candidate], buckets: int | None = None) -> None:
        """Install ``chosen`` with ``buckets`` slots each and stop adapting."""
        self.forced = True
        self.install(chosen, {c.group: buckets for c in chosen} if buckets else None)

    def _default_buckets(self, group: Any) -> int:
        for c in self.cands:
            if c.group == group and c in self.last_estimates:
                return max(
                    64, 1 << max(0, math.ceil(math.log2(2 * self.last_estimates[c].entries + 1)))
                )
        return 1024

    def reorder(self, i: int, order: Sequence[int]) -> None:
        if tuple(order) == self.pipelines[i].order:
            return
        super().reorder(i, order)
        keep = [c for c in self.chosen if c.pipeline != i and i not in c.inputs]
        self.trial = None  # the costs it compares were measured under the old order
        self.calm = 0
        self._stride = self._base_stride
        self._refresh_candidates()
        keep = [c for c in keep if c in self.cands]
        self.install(keep)
        self.obs[i].clear()
        self.cur[i] = self._fresh_obs(i)
        self.last_estimates = {}

    def _reset_derived(self) -> None:
        for g, cache in list(self.used.items()):
            self.used[g] = SubresultCache(cache.buckets, cache.layout)
        if self.chosen:
            self.install(self.chosen)

    # -- processing ---------------------------------------------------------------------------

    def _pipeline(self, i: int, rows: Rows, deleting: bool) -> Rows:
        pipe = self.pipelines[i]
        if pipe.pre is not None:
            rows = [r for r in rows if pipe.pre(r)]
        self.rates[i] += len(rows)
        self.tuples_seen += len(rows)
        if not rows:
            return rows
        if not self.forced and self.sample > 0:
            # every stride-th tuple, the phase carried across batches (a random start):
            # sampling costs two slices, not a random draw per tuple
            # a pipeline not yet profiled (new, or just reordered) is sampled whole until its
            # first observation: selection waits for every pipeline's
            stride = self._stride if self.obs[i] else 1
            start = self._phase[i] % stride
            self._phase[i] = (start - len(rows)) % stride
            if start < len(rows):
                sampled = rows[start::stride]
                rest = list(rows)
                del rest[start::stride]
                profiled = self._output(pipe, self._profiled(i, sampled, deleting))
                return profiled + self._timed(i, rest, deleting)
        return self._timed(i, rows, deleting)

    def _timed(self, i: int, rows: Rows, deleting: bool) -> Rows:
        """``_cached``, its time and tuples counted per pipeline (what a trial judges)."""
        t0 = time.perf_counter()
        out = self._cached(i, rows, deleting)
        self.spent[i] += time.perf_counter() - t0
        self.passed[i] += len(rows) + len(out)  # work units: tuples in and results out
        return out

    def _cached(self, i: int, partials: Rows, deleting: bool) -> Rows:
        """Pipeline ``i`` with its Lookups and Updates; results in the output layout.

        Between the Lookups and the Update points the steps run as compiled runners
        (``Pipeline.runner``); a Lookup whose segment ends the pipeline emits the output
        layout directly."""
        pipe = self.pipelines[i]
        sites = self.sites[i]
        updates = self.updates[i]
        counts = [0]
        last = len(pipe.steps) - 1
        if not sites and not updates:
            out = run_pipeline(pipe, self.stores, partials, counts)
            self.probes += counts[0]
            return out
        stops = sorted({s.cand.first for s in sites} | {u.after + 1 for u in updates})
        pos = 0
        si = 0
        while pos <= last and partials:
            site = sites[si] if si < len(sites) else None
            if site is not None and site.cand.first == pos:
                partials = self._lookup(site, pipe.steps, partials, counts)
                pos = site.cand.last + 1
                si += 1
            else:
                end = min([x for x in stops if x > pos] + [last + 1])
                partials = run_pipeline(pipe, self.stores, partials, counts, pos, end - 1)
                pos = end
            for u in updates:
                if u.after == pos - 1:
                    self._update(u, partials, deleting)
        self.probes += counts[0]
        return partials if pos > last else []

    def _lookup(self, site: _Site, steps: list[Any], partials: Rows, counts: list[int]) -> Rows:
        cache = site.cache
        out: Rows = []
        extend = out.extend
        self.cache_probes += len(partials)
        assert site.look is not None and site.emit is not None
        misses = site.look(partials, cache.entries.get, extend)
        if misses is None:
            cache.hits += len(partials)
            return out
        missed = sum(len(qs) for qs in misses.values())
        cache.hits += len(partials) - missed
        cache.misses += missed
        seg = steps[site.cand.first : site.cand.last + 1]
        width = site.width
        to = site.to_cache
        emit = site.emit
        for u, qs in misses.items():
            res = run_steps(seg, self.stores, [qs[0]], counts)
            v = [r[width:] for r in res]
            if to is not None:
                v = [to(s) for s in v]
            cache.create(u, v)
            if v:
                for q in qs:
                    emit(q, v, extend)
        return out

    @staticmethod
    def _update(u: _Update, partials: Rows, deleting: bool) -> None:
        cache, key, to = u.cache, u.key, u.to_cache
        if deleting:
            for r in partials:
                cache.delete(key(r), r if to is None else to(r))
            return
        get = cache.entries.get
        for r in partials:  # cache.insert, inlined
            e = get(key(r))
            if e is not None:
                e.append(r if to is None else to(r))

    def _profiled(self, i: int, partials: Rows, deleting: bool) -> Rows:
        """The sampled tuples: step by step, timed, bypassing Lookups (Updates still run: the
        caches must see every change)."""
        pipe = self.pipelines[i]
        steps = pipe.steps
        obs = self.cur[i]
        obs.n += len(partials)
        est = self._cands_of[i]
        counts = [0]
        for pos in range(len(steps)):
            obs.delta[pos] += len(partials)
            for c, key in est:
                if c.first == pos:
                    add = self.estimators[c].add
                    for q in partials:
                        add(key(q))
            pipe.runner(pos, pos, False)  # compiled before the clock starts
            t0 = time.perf_counter()
            # one step as the compiled runner runs it (flat partials)
            partials = run_pipeline(pipe, self.stores, partials, counts, pos, pos, final=False)
            # the call's fixed cost is the profiler's, not the step's work per tuple
            obs.tau[pos] += max(0.0, time.perf_counter() - t0 - self.call_s)
            for u in self.updates[i]:
                if u.after == pos:
                    self._update(u, partials, deleting)
        obs.delta[len(steps)] += len(partials)
        self.probes += counts[0]
        if obs.n >= self.obs_size:
            self.obs[i].append(obs)
            self.cur[i] = self._fresh_obs(i)
        return partials

    def step(self, instant: int, inputs: list[Any]) -> Any:
        out = super().step(instant, inputs)
        self.since += sum(len(d.ins) + len(d.dels) for d in inputs if not d.empty and not d.replace)
        # until the first selection, look every quarter interval (caches start sooner)
        limit = self.interval if self.last_estimates else max(1, self.interval // 4)
        if self.since >= limit and not self.forced:
            self._adapt()
        return out

    # -- the adaptive loop --------------------------------------------------------------------

    def estimates(self) -> dict[Candidate, Estimate]:
        """Section 1.3's figures for every candidate (empty until profiled)."""
        if not all(len(self.obs[i]) >= 1 for i in range(self.spec.n)):
            return {}
        sums = []
        for i in range(self.spec.n):
            obs = list(self.obs[i])
            n = sum(o.n for o in obs)
            d = [sum(o.delta[pos] for o in obs) for pos in range(len(obs[0].delta))]
            t = [sum(o.tau[pos] for o in obs) for pos in range(len(obs[0].tau))]
            sums.append((n, d, t))
        rates = self.rates
        out: dict[Candidate, Estimate] = {}
        group_cost: dict[Any, float] = {}
        for c in self.cands:
            if c.group in group_cost:
                continue
            upd = 0.0
            for p in c.inputs:
                n, d, _ = sums[p]
                if n:
                    upd += rates[p] * d[len(c.inputs) - 1] / n
            group_cost[c.group] = UPDATE_S * upd
        for c in self.cands:
            n, d, t = sums[c.pipeline]
            if not n:
                continue
            r = rates[c.pipeline]
            steps_w = tuple(r * t[pos] / n for pos in range(c.first, c.last + 1))
            work = sum(steps_w)  # sum d_l c_l
            d_first = r * d[c.first] / n
            d_out = r * d[c.last + 1] / n
            entry = d[c.last + 1] / d[c.first] if d[c.first] else 0.0
            est = self.estimators[c]
            dom = est.domain()
            entries = dom if dom is not None else max(64.0, d_first)
            cache = self.used.get(c.group)
            settled = c.group not in self.fresh  # a new cache's first interval is cold
            if cache is not None and c in self.chosen and settled and cache.hits + cache.misses:
                miss = cache.misses / (cache.hits + cache.misses)
            else:
                m = est.estimate(d_first, self.w, buckets_for(entries))
                miss = 1.0 if m is None else m
            probe = PROBE_S + NONEMPTY_S * min(1.0, entry) + PER_TUPLE_S * entry
            benefit = work - d_first * probe - miss * (work + d_out * UPDATE_S)
            out[c] = Estimate(c, benefit, group_cost[c.group], miss, entry, entries, work, steps_w)
        return out

    def _measured(self) -> list[float | None]:
        """This interval's measured seconds per work unit (a tuple in or a result out: the
        results grow with the windows, whatever the caches) of each pipeline's unsampled
        path."""
        return [t / n if n else None for t, n in zip(self.spent, self.passed, strict=True)]

    def _judge(self) -> bool:
        """Judge the cache set on trial against the set it replaced, on measured time: the
        pipelines' seconds per work unit weighted by this interval's work units. Reverts (and bans
        the groups it added, for ``BAN_INTERVALS`` doubling per refutation) when the new set
        is slower by more than ``TRIAL_MARGIN``. Returns whether the set was reverted."""
        trial = self.trial
        if trial is None:
            return False
        if trial["settle"] > 0:
            trial["settle"] -= 1
            return False
        self.trial = None
        stored = sum(st.size for st in self.stores)
        if abs(stored - trial["stored"]) > STORE_DRIFT * max(trial["stored"], 1):
            # windows still filling (or draining): the two intervals are not comparable;
            # the model's choice stands
            return False
        now = self._measured()
        before, after = 0.0, 0.0
        for i, (old, new) in enumerate(zip(trial["cost"], now, strict=True)):
            if old is None or new is None:
                continue
            before += self.passed[i] * old  # this interval's work units as the weights
            after += self.passed[i] * new
        if before <= 0 or after <= before * (1 + TRIAL_MARGIN):
            return False
        old_set = [c for c in trial["old"] if c in self.cands]
        added = {c.group for c in self.chosen} - {c.group for c in old_set}
        for g in added:
            self.refuted[g] = self.refuted.get(g, 0) + 1
            self.banned[g] = BAN_INTERVALS * 2 ** (self.refuted[g] - 1)
        self.reverts += 1
        self.install(old_set)
        self.reselections.append(
            {
                "at_tuples": self.tuples_seen,
                "chosen": sorted(c.label() for c in old_set),
                "reverted": {"measured_before_s": before, "measured_after_s": after},
            }
        )
        return True

    def _adapt(self) -> None:
        if self.adapt_orders:
            self._adapt_orders()
        est = self.estimates()
        self.since = 0
        self.banned = {g: k - 1 for g, k in self.banned.items() if k > 1}
        reverted = self._judge()
        if est and not reverted and self.trial is None:
            est_ok = {c: e for c, e in est.items() if c.group not in self.banned}
            drop = [c for c in self.chosen if c in est and est[c].benefit - est[c].cost < 0]
            moved = self._moved(est)
            # profile less while nothing moves (the profiled tuples bypass the caches: at a
            # high hit rate they cost several cached tuples each), fully again on a move
            self.calm = 0 if (moved or drop) else min(self.calm + 1, CALM_LEVELS)
            self._stride = self._base_stride << self.calm
            if moved or drop:
                chosen = select(est_ok, self.spec, self.pipelines)
                buckets = self._allocate(chosen, est)
                chosen = [c for c in chosen if buckets.get(c.group, 0) > 0]
                if set(chosen) != set(self.chosen):
                    added = {c.group for c in chosen} - {c.group for c in self.chosen}
                    if added:  # adding caches is a hypothesis of the model: test it
                        self.trial = {
                            "old": list(self.chosen),
                            "cost": self._measured(),
                            "settle": 1,
                            "stored": sum(st.size for st in self.stores),
                        }
                    self.install(chosen, buckets)
                self.reselections.append(
                    {
                        "at_tuples": self.tuples_seen,
                        "chosen": sorted(c.label() for c in chosen),
                        "candidates": len(est),
                        "net": {c.label(): est[c].benefit - est[c].cost for c in est},
                        "estimates": {
                            c.label(): {
                                "benefit_s": est[c].benefit,
                                "cost_s": est[c].cost,
                                "miss": est[c].miss,
                                "entry_size": est[c].entry_size,
                                "keys": est[c].entries,
                                "work_s": est[c].work,
                            }
                            for c in est
                        },
                    }
                )
                self.last_estimates = est
        for c in self.used.values():
            c.hits = c.misses = 0
        self.rates = [0] * self.spec.n
        self.spent = [0.0] * self.spec.n
        self.passed = [0] * self.spec.n
        if est:
            self.fresh = {g for g in self.fresh if g in self.used and len(self.used[g]) == 0}

    def _moved(self, est: dict[Candidate, Estimate]) -> bool:
        if not self.last_estimates:
            return True
        for c, e in est.items():
            old = self.last_estimates.get(c)
            if old is None:
                return True
            for a, b in ((e.benefit, old.benefit), (e.cost, old.cost), (e.miss, old.miss)):
                if abs(a - b) > 0.2 * max(abs(b), 1e-9):
                    return True
        return False

    def _allocate(
        self, chosen: Sequence[Candidate], est: dict[Candidate, Estimate]
    ) -> dict[Any, int]:
        """Buckets per chosen group: unlimited memory -> ~2x the expected entries; under a
        budget, greedily by net gain per expected byte (section 5)."""
        groups: dict[Any, list[Candidate]] = {}
        for c in chosen:
            groups.setdefault(c.group, []).append(c)
        want: dict[Any, tuple[float, int, float]] = {}
        for g, cs in groups.items():
            net = sum(est[c].benefit for c in cs) - est[cs[0]].cost
            entries = max(est[c].entries for c in cs)
            size = max(est[c].entry_size for c in cs)
            buckets = buckets_for(entries)
            per_entry = ENTRY_BYTES + TUPLE_BYTES * size
            want[g] = (net, buckets, per_entry)
        if self.memory_bytes is None:
            return {g: b for g, (_, b, _) in want.items()}
        left = float(self.memory_bytes)
        out = {}
        for g, (_net, b, per) in sorted(
            want.items(), key=lambda kv: -kv[1][0] / (kv[1][1] * kv[1][2])
        ):
            n = int(min(b, left // per))
            if n >= 1:
                out[g] = n
                left -= n * per
        return out

    def _adapt_orders(self) -> None:
        def fanout(p: int, cols: tuple[int, ...]) -> float:
            s = self.stores[p]
            if not cols:
                return float(s.size) + 1.0
            keys = s.distinct(cols) if cols in s.indexes else max(1, s.size // 2)
            return s.size / max(1, keys)

        def cost(order: tuple[int, ...]) -> float:
            """Partials built along ``order`` per delta tuple (sum of fan-out products)."""
            total, partials = 0.0, 1.0
            for k in range(1, len(order)):
                cols = index_cols(self.spec, frozenset(order[:k]), order[k])
                partials *= fanout(order[k], cols)
                total += partials
            return total

        for i in range(self.spec.n):
            order = greedy_order(self.spec, i, fanout)
            # hysteresis: a reorder drops caches, so only for a clearly cheaper order
            if order != self.pipelines[i].order and cost(order) < REORDER_GAIN * cost(
                self.pipelines[i].order
            ):
                self.reorder(i, order)

    # -- reporting ------------------------------------------------------------------------------

    def join_metrics(self) -> dict[str, Any]:
        m = super().join_metrics()
        caches = []
        for c in self.chosen:
            cache = self.used[c.group]
            e = self.last_estimates.get(c)
            caches.append(
                {
                    "segment": c.label(),
                    "pipeline": c.pipeline,
                    "inputs": sorted(c.inputs),
                    "key": list(c.key_cols),
                    "entries": len(cache),
                    "tuples": cache.tuples(),
                    "buckets": cache.buckets,
                    "hit_rate": (
                        cache.hits / (cache.hits + cache.misses)
                        if cache.hits + cache.misses
                        else None
                    ),
                    "benefit_minus_cost": None if e is None else e.benefit - e.cost,
                    "inconsistent": cache.inconsistent,
                }
            )
        m.update(
            {
                "candidates": len(self.cands),
                "caches": caches,
                "cache_probes": self.cache_probes,
                "reselections": len(self.reselections),
                "reverts": self.reverts,
                "banned": sorted(c.label() for c in self.cands if c.group in self.banned),
                "selections": self.reselections[-20:],
                "timeline": self.timeline[-50:],
            }
        )
        return m


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

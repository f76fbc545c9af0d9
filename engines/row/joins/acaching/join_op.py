"""``ACachingJoinOp``: the MJoin with adaptive subresult caches, and its adaptive loop.

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

The package docstring (``engines.row.joins.acaching``) lists the other parts.
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from engines.row.base import Row, Rows
from engines.row.joins.acaching.cache import ENTRY_BYTES, TUPLE_BYTES, SubresultCache, buckets_for
from engines.row.joins.acaching.candidates import Candidate, candidates, compatible
from engines.row.joins.acaching.codegen import _getter, _lookup_code, _perm, _Site, _Update
from engines.row.joins.acaching.estimator import (
    NONEMPTY_S,
    PER_TUPLE_S,
    PROBE_S,
    UPDATE_S,
    Estimate,
    MissEstimator,
    _call_overhead,
    _Obs,
)
from engines.row.joins.acaching.selection import select
from engines.row.joins.mjoin import (
    MJoinOp,
    NarySpec,
    greedy_order,
    index_cols,
    run_pipeline,
    run_steps,
)

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


class ACachingJoinOp(MJoinOp):
    """MJoin with adaptive subresult caches (the package docstring).

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

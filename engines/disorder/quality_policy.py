"""Quality-driven K-slack policies: K adapted to a result-quality target (``--disorder quality``).

:func:`make_quality_policy` builds a :class:`~engines.disorder.policy.SlackPolicy` from the
user's target (:class:`QualityOptions`: ``--max-error EPS --confidence 1-DELTA`` for windowed
aggregates, ``--min-recall GAMMA [--recall-period P]`` for window joins, ``--adapt-method
am|pd``, ``--quality-param NAME=VALUE``) and what the policy must know of the query
(:class:`QueryShape`: its windows, slide, aggregate and time base, and per stream what the
engine does with a late tuple: ``insert`` it into the windows to come or ``drop`` it).

Until its first adaptation (``warmup``) a stream's K is the largest delay seen so far
(Max-K-slack; the dissertation starts at 0, but a K raised later takes effect only after
that much stream time, since the buffer's bound does not move back).

Aggregates (:class:`AggregateQualityPolicy`, one model per stream). Every ``L_adt`` of a
stream's progress (after ``warmup``), the coverage threshold ``Cvrg_thr`` of the error target
is recomputed (engines/disorder/aggregate_quality.py, Eq. 4.1; ``N = r W`` with ``r`` the
stream's measured rate, ``mu``, ``sigma^2`` from the ``values`` it was fed, COUNT's without),
then

* ``am``: K = the least multiple of g whose expected coverage reaches it (Alg. 4.4; where
  late tuples are dropped, the coverage is the share in order after the buffer);
* ``pd``: alpha moves by the PD law (Eq. 3.7, U_p = 0.2, U_d = 4) on ``Cvrg_thr - measured
  coverage`` and K = alpha * MaxD. The measured coverage is the latest ``coverage`` fed, or
  else the policy's own Alg. 4.3 monitor over the ``timestamps`` fed. Without either, PD
  leaves K where it is. (``hycq run`` refuses PD for aggregates, engines/disorder/quality.py:
  held at the threshold, the mean coverage leaves about half the windows below it.)

Joins (:class:`JoinQualityPolicy`, one K for all streams by Same-K). Every ``L_adt`` of the
largest stream progress, the interval closes: its true result count ``N_true(L)`` (the
NonEqSel monitor's ``sum M_j``) and the results ``produced`` in it join the history of the last
``P_meas / L_adt`` intervals, then

* ``am``: Gamma' from Eq. 4.9 (with min, and never below Gamma), and K = the least multiple
  of g whose expected recall (Eq. 4.6 with the streams' late policies; for two streams
  whose inserted late tuples join with every partner still in its window, ``reinsert``,
  :func:`~engines.disorder.join_quality.pair_recall`; NonEqSel selectivity ratio, capped at
  1, when join counts were fed, EqSel otherwise) reaches Gamma' (Alg. 4.7). Without
  ``produced`` / join counts, Gamma' = Gamma and EqSel: AM still works from the delays
  alone;
* ``pd``: the recall over the last P_meas (sum produced / sum true of the history) is the
  process variable, ``(1 + Gamma) / 2`` the setpoint (half the allowed misses: the target
  is a floor for every period), U_p = 0.6, U_d = 0.8, K = alpha * max_i MaxD_i with alpha
  starting at 1 (where the warm-up leaves K). Without ``produced`` and join counts, PD
  leaves K where it is.

``feedback()`` figures (all optional; keys not listed are ignored):

==================  =========  ===============================================================
key                 policy     meaning
==================  =========  ===============================================================
``values``          aggregate  float array: the aggregated attribute of tuples the stream
                               received (updates mu and sigma^2 of Eq. 4.1)
``coverage``        aggregate  float: measured coverage of a window whose result was emitted
                               and whose late tuples have come in (Alg. 4.3), for PD
``timestamps``      aggregate  int array: event timestamps of arrived tuples (ticks); the
                               policy then measures coverage itself (Alg. 4.3)
``closed_up_to``    aggregate  int: with ``timestamps``: windows at instants <= it had been
                               emitted when they arrived (default: progress - K)
``dropped``         aggregate  bool array, with ``timestamps``: late tuples the engine drops
                               (missed in every window)
``groups``          aggregate  int: distinct group keys seen; N of Eq. 4.1 is per group
                               (the stream's tuples per window / groups)
``delays``          join       int array: delays (ticks) of tuples the join processed ...
``n_cross``         join       ... with the cross-product size each probe met ...
``n_join``          join       ... and the join results it produced ...
``probed``          join       ... and False for a late tuple inserted without probing
``produced``        join       int: join results emitted since the last ``produced``
==================  =========  ===============================================================
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engines.disorder.aggregate_quality import (
    AGGREGATES,
    CoverageMonitor,
    ValueStats,
    am_slack,
    coverage_threshold,
)
from engines.disorder.delay_model import DelayStats
from engines.disorder.join_quality import SelectivityMonitor, SyncSlack, am_join_slack
from engines.disorder.pd import PDController
from engines.disorder.quality_options import QualityOptions
from optimizer.ir.errors import OptionError

__all__ = [
    "AggregateQualityPolicy",
    "JoinQualityPolicy",
    "QualityOptions",
    "QueryShape",
    "make_quality_policy",
]


@dataclass(frozen=True)
class QueryShape:
    """What a quality policy needs of the query: per input stream its window range (ticks),
    the slide (ticks), the aggregate (sum, count, avg), ticks per second, and per stream
    what the engine does with a late tuple (``late``: ``insert`` into the windows still to
    come, the dissertation's Alg. 4.6 and the default, or ``drop``: a columnar window,
    ``--late drop``)."""

    windows: Mapping[str, int]
    slide: int
    ticks_per_second: int
    aggregate: str = "sum"
    late: Mapping[str, str] = field(default_factory=dict)
    largest_slide: int = 0
    """The plan's largest slide (ticks; 0: ``slide``): how long after the instant fired a
    late tuple inserted into a window may wait for the window's next instant."""
    reinsert: bool = False
    """An inserted late tuple joins, from the next instant on, with every partner still in
    its window (this repository's row engine, which evaluates each instant's relations);
    False: Alg. 4.6's insertion without probing (only later arrivals meet it)."""

    def drops(self, stream: str) -> bool:
        """Does the engine drop the late tuples of ``stream``?"""
        return self.late.get(stream, "insert") == "drop"


class _Base:
    name = "quality"

    def __init__(self, options: QualityOptions, shape: QueryShape) -> None:
        if not shape.windows:
            raise OptionError("--disorder quality needs a windowed input stream")
        for s, w in shape.windows.items():
            if w < 1:
                raise OptionError(f"--disorder quality: stream {s} has no time window")
        self.options = options
        self.shape = shape
        p = options.params
        tps = shape.ticks_per_second
        self.g = p.ticks(p.g, tps)
        self.b = p.ticks(p.b, tps)
        self.l_adt = p.ticks(p.l_adt, tps)
        self.warmup = round(p.warmup * tps)
        self.stats = {s: DelayStats(self.g, p.stat_window) for s in shape.windows}
        self._k: dict[str, int] = dict.fromkeys(shape.windows, 0)
        self._now: dict[str, int] = {}
        self._first: dict[str, int] = {}
        self._count: dict[str, int] = dict.fromkeys(shape.windows, 0)
        #: (progress, stream, K) after every adaptation, for metrics.
        self.history: list[tuple[int, str, int]] = []
        self.adapt_seconds: list[float] = []

    def _check(self, stream: str) -> None:
        if stream not in self.stats:
            raise KeyError(f"stream {stream!r} is not an input of the query")

    def _seen(self, stream: str, delays: np.ndarray, now: int) -> None:
        self._check(stream)
        self.stats[stream].add(delays)
        self._first.setdefault(stream, now)
        self._now[stream] = max(now, self._now.get(stream, now))
        self._count[stream] += len(delays)

    def _warm_up(self, streams: list[str], delay: int, now: int, tag: str | None = None) -> None:
        """Before the first adaptation, K of ``streams`` is the largest delay seen so far
        (``delay``, rounded up to g: Max-K-slack). Our choice: the dissertation starts at
        K = 0, but the buffer's bound does not move back, so a K raised at the first
        adaptation takes effect only after that much stream time, and where late tuples are
        dropped every window they fall into loses them until then."""
        k = -(-max(0, delay) // self.g) * self.g
        if k > self._k[streams[0]]:
            self.history.append((now, tag or streams[0], k))
        for s in streams:
            self._k[s] = max(self._k[s], k)

    def k(self, stream: str) -> int:
        self._check(stream)
        return self._k[stream]

    def report(self) -> dict[str, Any]:
        """What the policy did, for run metrics: K per stream over time, adaptations and
        their mean cost."""
        t = self.adapt_seconds
        return {
            "method": self.options.method,
            "k": {s: self._k[s] for s in self._k},
            "k_history": [list(h) for h in self.history],
            "adaptations": len(t),
            "adapt_us_mean": 1e6 * float(np.mean(t)) if t else None,
            "max_delay": {s: st.max_ever for s, st in self.stats.items()},
            "late": {s: "drop" if self.shape.drops(s) else "insert" for s in self.shape.windows},
        }


class AggregateQualityPolicy(_Base):
    """K per stream for a relative-error target of a windowed aggregate (module docstring)."""

    def __init__(self, options: QualityOptions, shape: QueryShape) -> None:
        super().__init__(options, shape)
        if options.max_error is None:
            raise OptionError("an aggregate's quality target is --max-error EPS")
        if shape.aggregate not in AGGREGATES:
            raise OptionError(
                f"--max-error models SUM, COUNT and AVG, not {shape.aggregate.upper()}",
                hint="use --disorder kslack:K or max for this query",
            )
        p = options.params
        up, ud = p.gains("aggregate")
        self.pd = {s: PDController(up, ud) for s in shape.windows}
        self.values = {s: ValueStats() for s in shape.windows}
        self.monitors = {
            s: CoverageMonitor(w, max(1, shape.slide), p.q) for s, w in shape.windows.items()
        }
        self._measured: dict[str, float | None] = dict.fromkeys(shape.windows)
        #: Distinct group keys per stream (``groups`` feedback): a window's N is per group.
        self.groups: dict[str, int] = dict.fromkeys(shape.windows, 1)
        self._next: dict[str, int] = {}
        self._adapted: set[str] = set()  # streams past their warm-up
        self._thr: dict[str, tuple[int, float]] = {}
        self.recalc = p.ticks(p.recalc, shape.ticks_per_second)

    def observe(self, stream: str, delays: np.ndarray, now: int) -> None:
        self._seen(stream, delays, now)
        if stream not in self._adapted:
            self._warm_up([stream], self.stats[stream].max_ever, now)
        nxt = self._next.setdefault(stream, self._first[stream] + self.warmup)
        if now >= nxt:
            self._next[stream] = now + self.l_adt
            self._adapt(stream, now)

    def feedback(self, stream: str, figures: Mapping[str, Any]) -> None:
        self._check(stream)
        if "groups" in figures:
            self.groups[stream] = max(1, int(figures["groups"]))
        if "values" in figures:
            self.values[stream].add(np.asarray(figures["values"]))
        if "coverage" in figures and figures["coverage"] is not None:
            self._measured[stream] = float(figures["coverage"])
        if "timestamps" in figures:
            now = self._now.get(stream, 0)
            closed = figures.get("closed_up_to", now - self._k[stream])
            dropped = figures.get("dropped")
            self.monitors[stream].arrive(
                np.asarray(figures["timestamps"]),
                int(closed),
                None if dropped is None else np.asarray(dropped, dtype=bool),
            )

    def threshold(self, stream: str) -> float:
        """Cvrg_thr of ``stream`` now (Eq. 4.1)."""
        now = self._now.get(stream, 0)
        cached = self._thr.get(stream)
        if cached is not None and now - cached[0] < self.recalc:
            return cached[1]
        span = max(1, now - self._first.get(stream, now) + 1)
        n = self._count[stream] / span * self.shape.windows[stream] / self.groups[stream]
        v = self.values[stream]
        mu, var = (v.mean, v.var) if v.n else (1.0, 0.0)
        agg = self.shape.aggregate if v.n or self.shape.aggregate != "sum" else "count"
        assert self.options.max_error is not None
        thr = coverage_threshold(self.options.max_error, self.options.delta, n, mu, var, agg)
        self._thr[stream] = (now, thr)
        return thr

    def _adapt(self, stream: str, now: int) -> None:
        start = time.perf_counter()
        self._adapted.add(stream)
        thr = self.threshold(stream)
        st = self.stats[stream]
        if self.options.method == "am":
            k = am_slack(
                st.cdf(),
                thr,
                self.shape.windows[stream],
                self.b,
                self.g,
                st.max_recent,
                drop=self.shape.drops(stream),
            )
        else:
            measured = self._measured[stream]
            recent = st.latest()
            own = self.monitors[stream].measure(now, recent[recent > 0], st.max_ever)
            if measured is None:
                measured = own
            if measured is None:
                self.adapt_seconds.append(time.perf_counter() - start)
                return
            self.pd[stream].step(thr, measured)
            self._measured[stream] = None
            k = self.pd[stream].slack(st.max_ever, self.g)
        self.adapt_seconds.append(time.perf_counter() - start)
        if k != self._k[stream]:
            self.history.append((now, stream, k))
        self._k[stream] = k


class JoinQualityPolicy(_Base):
    """One K for every stream of a window join, for a recall target (module docstring)."""

    def __init__(self, options: QualityOptions, shape: QueryShape) -> None:
        super().__init__(options, shape)
        if options.min_recall is None:
            raise OptionError("a join's quality target is --min-recall GAMMA")
        if len(shape.windows) < 2:
            raise OptionError("--min-recall is for joins of two or more windowed streams")
        p = options.params
        period = options.recall_period if options.recall_period is not None else p.p_meas
        self.intervals = max(1, round(period / p.l_adt))
        # PD starts where the warm-up leaves K, at the largest delay (alpha = 1), and comes
        # down while the recall is above its setpoint.
        self.pd = PDController(*p.gains("join"), alpha0=1.0)
        self.sync = SyncSlack()
        self.monitor = SelectivityMonitor(self.g)
        self._produced = 0
        self._fed = False
        #: (true, produced) of the last P/L closed intervals.
        self.past: deque[tuple[float, float]] = deque(maxlen=self.intervals)
        self._next: int | None = None
        self.target = options.min_recall
        self.requirement = options.min_recall  # Gamma' of the last adaptation
        #: True and produced results of every closed interval (the run's estimated recall).
        self.totals = [0.0, 0.0]

    def observe(self, stream: str, delays: np.ndarray, now: int) -> None:
        self._seen(stream, delays, now)
        if len(self._now) == len(self.stats):
            self.sync.sample(self._now)
        top = max(self._now.values())
        if self._next is None:
            self._next = min(self._first.values()) + self.warmup
        if not self.adapt_seconds:
            delay = max(st.max_ever for st in self.stats.values())
            self._warm_up(list(self.stats), delay, top, "*")
        if top >= self._next:
            self._next = top + self.l_adt
            self._adapt(top)

    def feedback(self, stream: str, figures: Mapping[str, Any]) -> None:
        self._check(stream)
        if "produced" in figures:
            self._produced += int(figures["produced"])
            self._fed = True
        if "delays" in figures and "n_cross" in figures and "n_join" in figures:
            self.monitor.record(
                np.asarray(figures["delays"]),
                np.asarray(figures["n_cross"]),
                np.asarray(figures["n_join"]),
                None if figures.get("probed") is None else np.asarray(figures["probed"]),
            )

    def _adapt(self, now: int) -> None:
        start = time.perf_counter()
        closed = self.monitor
        measured = self._fed and closed.true_count > 0
        if measured:
            self.past.append((closed.true_count, float(self._produced)))
            self.totals[0] += closed.true_count
            self.totals[1] += float(self._produced)
        names = list(self.stats)
        slack = self.sync.slack()
        k_sync = [slack.get(s, 0) for s in names]
        max_recent = max(self.stats[s].max_recent for s in names)
        if self.options.method == "am":
            target = self.target
            if measured and self.intervals > 1:
                # The period P is the last P - L (the just closed interval included) and
                # the next L, whose true results are estimated by the closed interval's.
                # Never below Gamma (our fix): a K lowered for one interval stays in force
                # for up to the old K of stream time after it is raised again (the bound
                # does not move back), so spending a surplus loses more than planned.
                hist = list(self.past)[-(self.intervals - 1) :]
                target = max(self.target, _instant(self.target, hist, closed.true_count))
            self.requirement = target
            k = am_join_slack(
                [self.stats[s].cdf() for s in names],
                [self.shape.windows[s] for s in names],
                self.b,
                self.g,
                target,
                max_recent,
                k_sync,
                closed if closed.selectivity() is not None else None,
                [self.shape.drops(s) for s in names],
                reinsert=self.shape.reinsert,
                slide=max(self.shape.slide, self.shape.largest_slide),
            )
        elif measured:
            true = sum(t for t, _ in self.past)
            got = sum(p for _, p in self.past)
            # The setpoint halves the allowed misses (our choice): PD holds the recall of
            # the last P around its setpoint, so with Gamma itself about every other period
            # would fall short of a target that is a floor for every period.
            setpoint = (1.0 + self.target) / 2.0
            self.pd.step(setpoint, min(1.0, got / true) if true else 1.0)
            k = self.pd.slack(max(self.stats[s].max_ever for s in names), self.g)
        else:
            k = self._k[names[0]]
        self.monitor = SelectivityMonitor(self.g)
        self._produced = 0
        self.adapt_seconds.append(time.perf_counter() - start)
        if k != self._k[names[0]]:
            self.history.append((now, "*", k))
        for s in names:
            self._k[s] = k

    def report(self) -> dict[str, Any]:
        """The base report, with the recall the policy estimated over the closed intervals
        (produced over true results, as counted at the buffers; None without counts)."""
        out = super().report()
        true, got = self.totals
        out["estimated_recall"] = got / true if true else None
        return out


def _instant(gamma: float, past: list[tuple[float, float]], true_next: float) -> float:
    from engines.disorder.join_quality import instant_requirement

    return instant_requirement(gamma, sum(t for t, _ in past), sum(p for _, p in past), true_next)


def make_quality_policy(
    options: QualityOptions, shape: QueryShape
) -> AggregateQualityPolicy | JoinQualityPolicy:
    """The quality-driven SlackPolicy for ``options``' target: an aggregate policy for
    ``--max-error``, a join policy for ``--min-recall`` (exit-2 errors for a missing or
    mismatched target)."""
    if options.target == "error":
        return AggregateQualityPolicy(options, shape)
    if options.target == "recall":
        return JoinQualityPolicy(options, shape)
    raise OptionError(
        "--disorder quality needs a target",
        hint="--max-error EPS [--confidence 0.95] for an aggregate, --min-recall GAMMA for a join",
    )

"""Quality-driven buffer sizes for windowed aggregates (Ji's dissertation, section 4.1).

The user's requirement is ``P(eps > eps_thr) <= delta`` for the relative error ``eps = |A -
A^| / |A|`` of every window's aggregate. A window that received a share ``C`` (its
*coverage*) of its ``N = r W`` tuples misses ``1 - C`` of a SUM on average, and the sampling
error of the received part adds ``c_delta`` standard errors, so the error bound holds when
(Eq. 4.1, Alg. 4.2; no 1/C up-scaling of the result):

    (1 - C) + c_delta * sqrt((C - C^2) (sigma^2 + mu^2) / (N mu^2)) <= eps_thr

``mu`` and ``sigma^2`` are the mean and variance of the aggregated attribute, ``c_delta`` the
two-sided normal critical value (1.96 at delta = 0.05). The coverage threshold ``Cvrg_thr``
is the least such ``C`` (:func:`coverage_threshold`, in closed form: with ``x = 1 - C`` the
condition is ``x + a sqrt(x (1 - x)) <= eps`` with ``a = c_delta sqrt((sigma^2 + mu^2) /
(N mu^2))``, which holds exactly for ``x`` up to the smaller root of ``(1 + a^2) x^2 - (a^2 +
2 eps) x + eps^2 = 0``). COUNT is SUM over values 1 (``mu = 1``, ``sigma = 0``). AVG is not
biased by missing tuples, only made noisier: its condition here is ``c_delta (sigma / mu)
sqrt((1 - C) / (C N)) <= eps_thr`` (the sampling error of a mean of ``C N`` of ``N`` values
with the finite-population correction; the dissertation defers other aggregates to [LZ08]:
this is our choice, documented in docs/disorder-quality.md).

Then (Alg. 4.4, AM-based adaptation) the buffer size is the least ``K = 0, g, 2g, ...`` (up
to MaxD^R, the largest recent delay) whose *expected* coverage (engines/disorder/
delay_model.py, Eq. 4.2) reaches ``Cvrg_thr``: :func:`am_slack`. The PD controller instead
steers the *measured* coverage (:class:`CoverageMonitor`, Alg. 4.3) to ``Cvrg_thr``.

Example: windows of 10000 tuples, eps 1 %, delta 5 % (c = 1.96). COUNT: x = 1 - C solves
x + 0.0196 sqrt(x (1 - x)) = 0.01 at x = 0.00823 (0.00823 + 0.0196 * 0.0904 = 0.0100); a
SUM whose values have sigma = mu doubles the variance term (a = 0.0277): x = 0.0076.
    >>> round(coverage_threshold(0.01, 0.05, n=10000, mu=1.0, var=0.0, aggregate="count"), 4)
    0.9918
    >>> round(coverage_threshold(0.01, 0.05, n=10000, mu=1.0, var=1.0), 4)
    0.9924
"""

from __future__ import annotations

import math
from functools import cache
from statistics import NormalDist

import numpy as np

from engines.disorder.delay_model import expected_coverage, in_order_share

#: Aggregates whose coverage threshold is modelled.
AGGREGATES = ("sum", "count", "avg")


@cache
def critical_value(delta: float) -> float:
    """c_delta: the two-sided standard normal critical value, ``Phi^-1(1 - delta / 2)``."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    return NormalDist().inv_cdf(1.0 - delta / 2.0)


def error_bound(c: float, eps_delta: float, n: float, mu: float, var: float) -> float:
    """The left side of Eq. 4.1 at coverage ``c`` (``eps_delta`` is ``c_delta``): the
    relative error of a SUM that holds with probability ``1 - delta``."""
    if mu == 0 or n <= 0:
        return math.inf if c < 1 else 0.0
    return (1.0 - c) + eps_delta * math.sqrt(max(0.0, c - c * c) * (var + mu * mu) / (n * mu * mu))


def coverage_threshold(
    eps: float, delta: float, n: float, mu: float, var: float, aggregate: str = "sum"
) -> float:
    """Cvrg_thr: the least coverage meeting the error target (module docstring); 1.0 when
    only a complete window does (``mu = 0``, no tuples) and 0.0 when any coverage does."""
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    c_delta = critical_value(delta)
    if aggregate == "count":
        mu, var = 1.0, 0.0
    if n <= 0 or mu == 0:
        return 1.0
    rel_var = var / (mu * mu)
    if aggregate == "avg":
        # c sqrt(rel_var (1 - C) / (C N)) <= eps  <=>  (1 - C) / C <= eps^2 N / (c^2 rel_var)
        if rel_var == 0:
            return 0.0
        ratio = eps * eps * n / (c_delta * c_delta * rel_var)
        return 1.0 / (1.0 + ratio)
    if eps >= 1:
        return 0.0
    a2 = c_delta * c_delta * (rel_var + 1.0) / n
    disc = (a2 + 2 * eps) ** 2 - 4 * (1 + a2) * eps * eps
    x = ((a2 + 2 * eps) - math.sqrt(max(0.0, disc))) / (2 * (1 + a2))
    return min(1.0, max(0.0, 1.0 - x))


def am_slack(
    cdf: np.ndarray,
    threshold: float,
    window: int,
    basic: int,
    granularity: int,
    max_delay: int,
    k_sync: int = 0,
    drop: bool = False,
) -> int:
    """Alg. 4.4: the least K in ``0, g, 2g, ...`` whose expected coverage reaches
    ``threshold``, searching no further than the largest recent delay (K is then that delay
    rounded up to g: every tuple waits for every earlier one).

    ``drop``: the engine drops late tuples (a columnar window, ``--late drop``) instead of
    inserting them into the windows still to come. A tuple behind the buffer then counts in
    no window, however old the window is when its result is produced, so the coverage of
    every window is the share of tuples in order after the buffer, ``F_{D^K}(0)``
    (:func:`~engines.disorder.delay_model.in_order_share`), not Eq. 3.5's."""
    top = -(-max(0, max_delay) // granularity)
    ks = np.arange(top + 1, dtype=np.int64) * granularity
    if drop:
        cover = in_order_share(cdf, granularity, ks, k_sync)
    else:
        cover = expected_coverage(cdf, window, basic, granularity, ks, k_sync)
    ok = np.nonzero(cover >= threshold - 1e-12)[0]
    return int(ks[ok[0]]) if len(ok) else int(ks[-1])


class ValueStats:
    """Running mean and variance of the aggregated attribute (Welford, merged per batch)."""

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self._m2 = 0.0

    def add(self, values: np.ndarray) -> None:
        v = np.asarray(values, dtype=np.float64)
        v = v[np.isfinite(v)]
        if not len(v):
            return
        n2, mean2, m2b = len(v), float(v.mean()), float(((v - v.mean()) ** 2).sum())
        total = self.n + n2
        delta = mean2 - self.mean
        self.mean += delta * n2 / total
        self._m2 += m2b + delta * delta * self.n * n2 / total
        self.n = total

    @property
    def var(self) -> float:
        return self._m2 / self.n if self.n else 0.0


class CoverageMonitor:
    """Measured window coverage (Alg. 4.3) for sliding windows ``(T - range, T]`` at
    instants ``T = k * slide``.

    Per window, ``N_rcv`` counts the tuples that arrived before the window's result was
    produced and ``N_miss`` those that came after; ``Cvrg = N_rcv / (N_rcv + N_miss)``. A
    window's count is final only once no more late tuples are expected, so the coverage
    reported is that of the latest window ending at or before ``now - M``, ``M`` the
    ``q``-quantile of the late delays observed (the retrospect parameter); windows older than
    ``now - MaxD`` are purged.
    """

    def __init__(self, range_: int, slide: int, q: float = 0.99) -> None:
        if range_ < 1 or slide < 1:
            raise ValueError("range and slide must be >= 1 tick")
        self.range = range_
        self.slide = slide
        self.q = q
        self._base = 0  # window index of _rcv[0]
        self._rcv = np.zeros(0, dtype=np.int64)
        self._miss = np.zeros(0, dtype=np.int64)
        self._started = False

    def _grow(self, lo: int, hi: int) -> None:
        """Make window indices ``lo .. hi`` addressable."""
        if not self._started:
            self._base, self._started = lo, True
        if lo < self._base:  # older than anything kept: prepend
            pad = self._base - lo
            self._rcv = np.concatenate([np.zeros(pad, np.int64), self._rcv])
            self._miss = np.concatenate([np.zeros(pad, np.int64), self._miss])
            self._base = lo
        need = hi - self._base + 1
        if need > len(self._rcv):
            extra = max(need - len(self._rcv), len(self._rcv))
            self._rcv = np.concatenate([self._rcv, np.zeros(extra, np.int64)])
            self._miss = np.concatenate([self._miss, np.zeros(extra, np.int64)])

    def arrive(self, ts: np.ndarray, closed_up_to: int, dropped: np.ndarray | None = None) -> None:
        """Tuples with timestamps ``ts`` arrived while the windows at instants ``<=
        closed_up_to`` had been produced: they count as missed there, received after;
        those ``dropped`` (late tuples the engine drops) count as missed in every window."""
        ts = np.asarray(ts, dtype=np.int64)
        if not len(ts):
            return
        first = -(-ts // self.slide)  # the first instant T >= ts
        last = (ts + self.range - 1) // self.slide  # the last T < ts + range
        closed = closed_up_to // self.slide
        self._grow(int(first.min()), int(last.max()))
        split = np.clip(closed + 1, first, last + 1)  # windows first..split-1 are missed
        if dropped is not None:
            split = np.where(np.asarray(dropped, dtype=bool), last + 1, split)
        size = len(self._rcv)
        diff_m = np.zeros(size + 1, np.int64)
        diff_r = np.zeros(size + 1, np.int64)
        np.add.at(diff_m, first - self._base, 1)
        np.add.at(diff_m, split - self._base, -1)
        np.add.at(diff_r, split - self._base, 1)
        np.add.at(diff_r, last + 1 - self._base, -1)
        self._miss += np.cumsum(diff_m)[:size]
        self._rcv += np.cumsum(diff_r)[:size]

    def measure(self, now: int, late_delays: np.ndarray, max_delay: int) -> float | None:
        """The coverage of the latest window ending at or before ``now - M`` (None when no
        such window holds tuples); purges windows before ``now - max_delay - range``."""
        if not self._started:
            return None
        late = np.asarray(late_delays, dtype=np.int64)
        m = int(np.quantile(late, self.q, method="higher")) if len(late) else 0
        idx = (now - m) // self.slide - self._base
        result = None
        if 0 <= idx < len(self._rcv):
            total = self._rcv[idx] + self._miss[idx]
            if total:
                result = float(self._rcv[idx] / total)
        keep_from = (now - max_delay - self.range) // self.slide - self._base
        if keep_from > 0:
            cut = min(int(keep_from), len(self._rcv))
            self._rcv, self._miss = self._rcv[cut:], self._miss[cut:]
            self._base += cut
        return result

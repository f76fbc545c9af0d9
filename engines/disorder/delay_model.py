"""The analytical model of disorder after a K-slack buffer (Ji's dissertation, section 3.3).

Delays are *coarse*: ``D = 0`` for delay 0, ``D = d`` for delay in ``((d - 1) g, d g]``
(``g`` the K-search granularity). ``f_D`` is the distribution of ``D`` over the latest delays
of a stream (:class:`DelayStats`). A buffer of size ``K`` (plus the sync buffer's implicit
``K_sync``) leaves a tuple of delay ``delay`` with ``max(0, delay - K - K_sync)``, so
(Eq. 3.4) ``f_{D^K}(0) = sum_{d <= (K + K_sync) / g} f_D(d)`` and ``f_{D^K}(d) = f_D(d + (K +
K_sync) / g)``: the cumulative distribution of ``D^K`` is that of ``D`` shifted,
``F_{D^K}(x) = F_D(x + (K + K_sync) / g)``.

A window of size ``W`` is cut into ``n = ceil(W / b)`` basic windows, ``l = 1`` the newest.
When the window's result is produced, a tuple of basic window ``l`` is in it iff its remaining
delay is at most ``(l - 1) b``, so (Eqs. 3.5, 3.6) the expected window size is

    |w| = r b sum_{l < n} F_{D^K}((l - 1) b / g) + r (W - (n - 1) b) F_{D^K}((n - 1) b / g)

and the expected coverage ``|w| / (r W)`` (Eq. 4.2) does not depend on the rate:
:func:`expected_coverage` evaluates it for many K at once.

Example (g = b = 1 tick, W = 2 ticks, delays 0 or 1 tick with probability 1/2 each):
    >>> s = DelayStats(granularity=1, capacity=100)
    >>> s.add(np.array([0, 1, 0, 1]))
    >>> expected_coverage(s.cdf(), window=2, basic=1, granularity=1, ks=np.array([0, 1]))
    array([0.75, 1.  ])
"""

from __future__ import annotations

import math

import numpy as np


class DelayStats:
    """The latest ``capacity`` delays of a stream (ticks), their coarse distribution f_D and
    the largest delay among them (MaxD^R) and ever (MaxD)."""

    def __init__(self, granularity: int, capacity: int) -> None:
        if granularity < 1 or capacity < 1:
            raise ValueError("granularity and capacity must be >= 1")
        self.g = granularity
        self.capacity = capacity
        self._ring = np.zeros(capacity, dtype=np.int64)
        self._count = 0  # delays ever added
        self.max_ever = 0
        #: Counts of coarse delays in the window, kept up to date by add() (so cdf() costs
        #: the number of coarse delays, not the window's size).
        self._hist = np.zeros(1, dtype=np.int64)

    def _count_in(self, delays: np.ndarray, sign: int) -> None:
        if not len(delays):
            return
        counts = np.bincount(self.coarse(delays))
        if len(counts) > len(self._hist):
            self._hist = np.concatenate(
                [self._hist, np.zeros(len(counts) - len(self._hist), np.int64)]
            )
        self._hist[: len(counts)] += sign * counts

    def add(self, delays: np.ndarray) -> None:
        """Record delays (ticks, >= 0) in arrival order."""
        d = np.asarray(delays, dtype=np.int64)
        if not len(d):
            return
        d = np.maximum(d, 0)
        self.max_ever = max(self.max_ever, int(d.max()))
        if len(d) >= self.capacity:
            # the oldest of the latest delays goes where the next write lands
            self._count += len(d)
            self._ring[:] = np.roll(d[-self.capacity :], self._count % self.capacity)
            self._hist = np.zeros(1, dtype=np.int64)
            self._count_in(self._ring, 1)
            return
        size = self.size
        at = self._count % self.capacity
        first = min(len(d), self.capacity - at)
        replaced = [self._ring[at : min(at + first, size)]]
        if len(d) > first:
            replaced.append(self._ring[: min(len(d) - first, size)])
        self._count_in(np.concatenate(replaced), -1)
        self._ring[at : at + first] = d[:first]
        self._ring[: len(d) - first] = d[first:]
        self._count += len(d)
        self._count_in(d, 1)

    @property
    def size(self) -> int:
        return min(self._count, self.capacity)

    def latest(self) -> np.ndarray:
        """The delays in the statistics window (any order)."""
        return self._ring[: self.size]

    @property
    def max_recent(self) -> int:
        """MaxD^R: the largest delay in the statistics window (0 without delays)."""
        return int(self.latest().max()) if self.size else 0

    def coarse(self, delays: np.ndarray) -> np.ndarray:
        """Coarse delays: 0 for 0, ``ceil(delay / g)`` otherwise."""
        return -(-np.asarray(delays, dtype=np.int64) // self.g)

    def cdf(self) -> np.ndarray:
        """``F_D(d)`` for ``d = 0 .. max coarse delay`` (beyond: 1); ``[1.0]`` when empty."""
        if not self.size:
            return np.ones(1)
        nonzero = np.flatnonzero(self._hist)
        counts = self._hist[: int(nonzero[-1]) + 1]
        return np.cumsum(counts) / counts.sum()


def coverage_weights(window: int, basic: int, granularity: int) -> tuple[np.ndarray, np.ndarray]:
    """Per basic window ``l = 1..n``: its share of ``W`` and its coarse delay allowance
    ``floor((l - 1) b / g)`` (Eq. 3.5)."""
    n = max(1, math.ceil(window / basic))
    sizes = np.full(n, float(basic))
    sizes[-1] = window - (n - 1) * basic
    allowance = (np.arange(n, dtype=np.int64) * basic) // granularity
    return sizes / window, allowance


def expected_coverage(
    cdf: np.ndarray,
    window: int,
    basic: int,
    granularity: int,
    ks: np.ndarray,
    k_sync: int = 0,
) -> np.ndarray:
    """Expected coverage ``|w| / (r W)`` of a window of ``window`` ticks behind a K-slack of
    each K in ``ks`` (ticks) and an implicit sync slack ``k_sync`` (Eqs. 3.4-3.6, 4.2).

    When ``basic`` is a multiple of ``granularity`` (the defaults: b = g) the sums over the
    basic windows come from running sums of ``F_D`` (one pass, however many K: what keeps an
    adaptation under a millisecond); otherwise term by term (:func:`coverage_direct`)."""
    shift = (np.asarray(ks, dtype=np.int64) + int(k_sync)) // granularity
    if basic % granularity or not len(shift) or shift.min() < 0:
        return coverage_direct(cdf, window, basic, granularity, ks, k_sync)
    share, _ = coverage_weights(window, basic, granularity)
    n = len(share)
    m = basic // granularity
    top = (n - 1) * m + int(shift.max()) + 1
    rows = -(-top // m) + 1
    ext = np.ones(rows * m)
    ext[: min(len(cdf), len(ext))] = cdf[: len(ext)]
    # C[i, r] = sum_{t < i} F[r + t m]: basic windows l = 1..n-1 read F[(l-1) m + s].
    c = np.vstack([np.zeros((1, m)), np.cumsum(ext.reshape(rows, m), axis=0)])
    q, r = shift // m, shift % m
    body = c[q + n - 1, r] - c[q, r]
    return (
        np.asarray(share[0] * body + share[-1] * ext[(n - 1) * m + shift])
        if n > 1
        else (np.asarray(share[-1] * ext[shift]))
    )


def coverage_direct(
    cdf: np.ndarray,
    window: int,
    basic: int,
    granularity: int,
    ks: np.ndarray,
    k_sync: int = 0,
) -> np.ndarray:
    """:func:`expected_coverage` term by term (any b and g; the reference for the fast path)."""
    share, allowance = coverage_weights(window, basic, granularity)
    shift = (np.asarray(ks, dtype=np.int64) + int(k_sync)) // granularity
    idx = allowance[None, :] + shift[:, None]
    f = cdf[np.minimum(idx, len(cdf) - 1)]
    return np.asarray(f @ share)


def in_order_share(
    cdf: np.ndarray, granularity: int, ks: np.ndarray, k_sync: int = 0
) -> np.ndarray:
    """``f_{D^K}(0)`` for each K in ``ks``: the share of tuples in order after the buffer."""
    shift = (np.asarray(ks, dtype=np.int64) + int(k_sync)) // granularity
    return np.asarray(cdf[np.minimum(shift, len(cdf) - 1)])

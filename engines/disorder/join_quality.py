"""Quality-driven buffer sizes for window joins (Ji's dissertation, section 4.2).

The user's requirement is a recall: of the true join results with timestamps in the last
``P_meas``, at least a share ``Gamma`` is produced (Eq. 4.3). The pieces:

* **Same-K** (Thm. 4.1): buffers ``(k_1 .. k_m)`` on streams whose progress is ``T_i`` behave
  like one common ``k = min_i T_i - min_i (T_i - k_i)`` (:func:`same_k`), so the search is over
  one K for every stream. Each stream also has the sync buffer's implicit slack ``K_i^sync =
  T_i - T_sync``, estimated as ``avg K_i^sync - min_j avg K_j^sync`` (:class:`SyncSlack`; by
  Prop. 4.1 from the raw streams).
* **Result counts** in an interval of length ``L`` (Eqs. 4.4, 4.5, the garbled join/cross
  symbols fixed as in the research summary): ``N_true(L) = sel * prod_i r_i * L * sum_i
  prod_{j != i} W_j`` and ``N_prod(L, K) = sel(K) * sum_i r_i L f_{D_i^K}(0) prod_{j != i}
  |w_j|``; their ratio is the expected recall (Eq. 4.6, :func:`expected_recall`):

      gamma(L, K) = [sel(K) / sel] * sum_i f_{D_i^K}(0) prod_{j != i} V_j(K)
                                   / sum_i prod_{j != i} W_j

  with ``V_j(K) = |w_j| / r_j = W_j * coverage_j(K)`` (engines/disorder/delay_model.py).
* **Selectivity** (:class:`SelectivityMonitor`): *EqSel* takes ``sel(K) = sel``; *NonEqSel*
  keeps per coarse delay ``d`` the cross-product counts ``M_x[d]`` and join-result counts
  ``M_j[d]`` of the tuples the join saw in the last interval (a late tuple, which is inserted
  without probing, is given the largest counts seen in the interval), and ``sel(K) = sum_{d
  <= K} M_j / sum_{d <= K} M_x`` (Eqs. 4.7, 4.8).
* **Instant requirement** (Eq. 4.9, with *min*, not the text's max): the recall the next
  interval must reach so that the whole period reaches Gamma,
  ``Gamma' = min(1, max(0, (Gamma (N_true(P-L) + N_true(L)) - N_prod(P-L)) / N_true(L)))``.
* **AM** (Alg. 4.7): the least ``K = 0, g, 2g, ...`` up to ``max_i MaxD_i^R`` with ``gamma(L,
  K) >= Gamma'`` (:func:`am_join_slack`).

Example: two streams, 2-tick windows, b = g = 1, each half in order and half 1 tick late:
    >>> cdf = np.array([0.5, 1.0])
    >>> [round(float(x), 4) for x in expected_recall([cdf, cdf], [2, 2], 1, 1, np.array([0, 1]))]
    [0.375, 1.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from engines.disorder.delay_model import expected_coverage, in_order_share


def same_k(progress: Sequence[int], ks: Sequence[int]) -> int:
    """Thm. 4.1: the common K equivalent to buffers ``ks`` on streams at ``progress``."""
    if len(progress) != len(ks) or not len(progress):
        raise ValueError("one K per stream, at least one stream")
    return min(progress) - min(t - k for t, k in zip(progress, ks, strict=True))


class SyncSlack:
    """Running averages of ``K_i^sync = T_i - min_j T_j`` and the estimate ``avg K_i^sync -
    min_j avg K_j^sync`` of each stream's implicit sync slack."""

    def __init__(self) -> None:
        self._sum: dict[str, float] = {}
        self._n = 0

    def sample(self, progress: Mapping[str, int]) -> None:
        if not progress:
            return
        low = min(progress.values())
        for name, t in progress.items():
            self._sum[name] = self._sum.get(name, 0.0) + (t - low)
        self._n += 1

    def slack(self) -> dict[str, int]:
        if not self._n:
            return {}
        avg = {k: v / self._n for k, v in self._sum.items()}
        low = min(avg.values())
        return {k: round(v - low) for k, v in avg.items()}


def expected_recall(
    cdfs: Sequence[np.ndarray],
    windows: Sequence[int],
    basic: int,
    granularity: int,
    ks: np.ndarray,
    k_sync: Sequence[int] | None = None,
    sel_ratio: np.ndarray | float = 1.0,
) -> np.ndarray:
    """gamma(L, K) of Eq. 4.6 for each K in ``ks`` (one delay CDF and window per stream)."""
    m = len(cdfs)
    if m != len(windows) or m < 2:
        raise ValueError("a join needs two or more streams, one CDF and window each")
    ks = np.asarray(ks, dtype=np.int64)
    sync = list(k_sync) if k_sync is not None else [0] * m
    w = np.asarray(windows, dtype=np.float64)
    v = np.stack(
        [
            w[j] * expected_coverage(cdfs[j], windows[j], basic, granularity, ks, sync[j])
            for j in range(m)
        ]
    )  # V_j(K), shape (m, len(ks))
    f0 = np.stack([in_order_share(cdfs[i], granularity, ks, sync[i]) for i in range(m)])
    num = np.zeros(len(ks))
    den = 0.0
    for i in range(m):
        others = [j for j in range(m) if j != i]
        num += f0[i] * np.prod(v[others], axis=0)
        den += float(np.prod(w[others]))
    return np.asarray(sel_ratio) * num / den


def true_results(
    sel: float, rates: Sequence[float], windows: Sequence[float], length: float
) -> float:
    """Eq. 4.4: expected true join results in an interval of ``length`` (rates per tick)."""
    m = len(rates)
    total = sum(float(np.prod([windows[j] for j in range(m) if j != i])) for i in range(m))
    return sel * float(np.prod(rates)) * length * total


def produced_results(
    sel_k: float,
    rates: Sequence[float],
    in_order: Sequence[float],
    sizes: Sequence[float],
    length: float,
) -> float:
    """Eq. 4.5: expected produced results: ``sel(K) sum_i r_i L f_{D_i^K}(0) prod_{j != i}
    |w_j|`` (``sizes`` the expected window sizes |w_j| in tuples)."""
    m = len(rates)
    return sel_k * sum(
        rates[i] * length * in_order[i] * float(np.prod([sizes[j] for j in range(m) if j != i]))
        for i in range(m)
    )


def instant_requirement(
    gamma: float, true_past: float, produced_past: float, true_next: float
) -> float:
    """Eq. 4.9 solved for Gamma' (with min, the summary's fix): the recall the next interval
    must reach so that the period ``P`` (``P - L`` past plus ``L`` next) reaches Gamma."""
    if true_next <= 0:
        return gamma
    need = (gamma * (true_past + true_next) - produced_past) / true_next
    return min(1.0, max(0.0, need))


class SelectivityMonitor:
    """NonEqSel statistics of one interval (module docstring): per coarse delay, the
    cross-product and join-result counts of the tuples the join processed."""

    def __init__(self, granularity: int) -> None:
        self.g = granularity
        self.m_cross = np.zeros(1)
        self.m_join = np.zeros(1)
        self._max_x = 0.0
        self._max_j = 0.0

    def record(
        self,
        delays: np.ndarray,
        n_cross: np.ndarray,
        n_join: np.ndarray,
        probed: np.ndarray | None = None,
    ) -> None:
        """Tuples the join processed: their delays (ticks), the cross-product count and the
        join-result count of their probe; ``probed`` False for late tuples inserted without
        probing (given the interval's largest counts)."""
        d = -(-np.maximum(np.asarray(delays, dtype=np.int64), 0) // self.g)
        nx = np.asarray(n_cross, dtype=np.float64).copy()
        nj = np.asarray(n_join, dtype=np.float64).copy()
        late = np.zeros(len(d), bool) if probed is None else ~np.asarray(probed, dtype=bool)
        if (~late).any():  # the largest counts of probed tuples so far in the interval
            self._max_x = max(self._max_x, float(nx[~late].max()))
            self._max_j = max(self._max_j, float(nj[~late].max()))
        nx[late] = self._max_x
        nj[late] = self._max_j
        size = int(d.max()) + 1 if len(d) else 1
        if size > len(self.m_cross):
            self.m_cross = np.concatenate([self.m_cross, np.zeros(size - len(self.m_cross))])
            self.m_join = np.concatenate([self.m_join, np.zeros(size - len(self.m_join))])
        np.add.at(self.m_cross, d, nx)
        np.add.at(self.m_join, d, nj)

    @property
    def true_count(self) -> float:
        """N_true of the interval: the join results its tuples make, ``sum_d M_j[d]``."""
        return float(self.m_join.sum())

    def selectivity(self, up_to: int | None = None) -> float | None:
        """``sel(K)`` over coarse delays ``<= up_to`` (None: all, Eq. 4.7); None when no
        cross products were counted."""
        end = len(self.m_cross) if up_to is None else min(len(self.m_cross), up_to + 1)
        cross = float(self.m_cross[:end].sum())
        return float(self.m_join[:end].sum()) / cross if cross > 0 else None

    def ratio(self, ks: np.ndarray) -> np.ndarray:
        """``sel(K) / sel`` (Eq. 4.8) for each K (ticks); 1 where undefined (EqSel)."""
        full = self.selectivity()
        out = np.ones(len(ks))
        if not full:
            return out
        cross = np.cumsum(self.m_cross)
        join = np.cumsum(self.m_join)
        idx = np.minimum(np.asarray(ks, dtype=np.int64) // self.g, len(cross) - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            sel_k = np.where(cross[idx] > 0, join[idx] / cross[idx], full)
        return np.asarray(sel_k / full)


def am_join_slack(
    cdfs: Sequence[np.ndarray],
    windows: Sequence[int],
    basic: int,
    granularity: int,
    target: float,
    max_delay: int,
    k_sync: Sequence[int] | None = None,
    monitor: SelectivityMonitor | None = None,
) -> int:
    """Alg. 4.7: the least common K in ``0, g, 2g, ...`` (at most ``max_delay`` rounded up
    to g) whose expected recall reaches ``target`` (NonEqSel when ``monitor`` has counts)."""
    top = -(-max(0, max_delay) // granularity)
    ks = np.arange(top + 1, dtype=np.int64) * granularity
    ratio = monitor.ratio(ks) if monitor is not None else 1.0
    gamma = expected_recall(cdfs, windows, basic, granularity, ks, k_sync, ratio)
    ok = np.nonzero(gamma >= target - 1e-12)[0]
    return int(ks[ok[0]]) if len(ok) else int(ks[-1])

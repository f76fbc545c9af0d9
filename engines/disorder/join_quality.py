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
    drop: Sequence[bool] | None = None,
    reinsert: bool = False,
    slide: int = 0,
) -> np.ndarray:
    """gamma(L, K) of Eq. 4.6 for each K in ``ks`` (one delay CDF and window per stream).

    ``reinsert``: a late tuple that is not dropped joins, from the next instant on, with
    every partner still in its window (this repository's row engine, ``--late insert``,
    docs/disorder.md), not only with the tuples that arrive after it (Alg. 4.6): for two
    streams the recall is then :func:`pair_recall` (``slide``: the windows' slide, ticks);
    for more, Eq. 4.6 is kept, which counts lost a superset of what such a run loses.

    ``drop``: per stream, whether the engine drops its late tuples (a columnar window,
    ``--late drop``) instead of inserting them (Alg. 4.6). A dropped tuple is in no window,
    so as the earlier member of a result it counts only when it was in order after the
    buffer: ``V_j(K) = W_j f_{D_j^K}(0)`` instead of ``W_j Cvrg_j(K)`` (however long it had
    to arrive). The later member must be in order either way (``f_{D_i^K}(0)``)."""
    m = len(cdfs)
    if m != len(windows) or m < 2:
        raise ValueError("a join needs two or more streams, one CDF and window each")
    drops = list(drop) if drop is not None else [False] * m
    if len(drops) != m:
        raise ValueError("one drop flag per stream")
    ks = np.asarray(ks, dtype=np.int64)
    sync = list(k_sync) if k_sync is not None else [0] * m
    if reinsert and m == 2:
        pair = pair_recall(cdfs, windows, granularity, ks, sync, drops, slide)
        return np.asarray(sel_ratio) * pair
    w = np.asarray(windows, dtype=np.float64)
    f0 = np.stack([in_order_share(cdfs[i], granularity, ks, sync[i]) for i in range(m)])
    v = np.stack(
        [
            w[j]
            * (
                f0[j]
                if drops[j]
                else expected_coverage(cdfs[j], windows[j], basic, granularity, ks, sync[j])
            )
            for j in range(m)
        ]
    )  # V_j(K), shape (m, len(ks))
    num = np.zeros(len(ks))
    den = 0.0
    for i in range(m):
        others = [j for j in range(m) if j != i]
        num += f0[i] * np.prod(v[others], axis=0)
        den += float(np.prod(w[others]))
    return np.asarray(sel_ratio) * num / den


def pair_recall(
    cdfs: Sequence[np.ndarray],
    windows: Sequence[int],
    granularity: int,
    ks: np.ndarray,
    k_sync: Sequence[int],
    drop: Sequence[bool],
    slide: int = 0,
) -> np.ndarray:
    """The expected recall of a two-stream window join for each K in ``ks`` when a late
    tuple that is not dropped joins, from the next instant on, with every partner still in
    its window (``--late insert`` on the row engine); ``drop[i]``: stream ``i`` drops its
    late tuples instead.

    A tuple of delay ``d`` behind a buffer ``K`` (plus its sync slack) is late by ``e = d -
    K`` when ``d > K``; inserted, it counts from an instant at most ``e + s`` after its
    timestamp (``s``: the slide). Take a result whose member from stream ``i`` is the later
    one, by ``Delta`` (uniform in ``[0, W_j)`` for steady rates; the results with ``i``
    later are a share ``W_j / (W_i + W_j)``). It is produced when both members count before
    the first of the two windows closes, ``min(ts_j + W_j, ts_i + W_i)``:

    * the later one: ``e_i + s < min(W_j - Delta, W_i)``, so on average over ``Delta`` the
      probability is ``mean_{u in (0, W_j]} F_i(K + max(0, min(u, W_i) - s))``;
    * the earlier one: ``e_j + s < min(W_j, Delta + W_i)``, taken as ``e_j + s <
      min(W_i, W_j)`` (never more than that): ``F_j(K + max(0, min(W_i, W_j) - s))``;
    * a member of a dropping stream must be in order: ``F(K)``.

    Delays are independent across tuples, and coarse (grid ``g``, rounded down: the
    estimate errs low). Vectorised over K with prefix sums of the CDFs.

    Example: a stream in order and one half in order, half one tick late, 2-tick windows,
    slide 1: a result is lost only when its late member counts after the window closes:
        >>> cdf0, cdf1 = np.array([1.0]), np.array([0.5, 1.0])
        >>> [round(float(x), 3) for x in pair_recall([cdf0, cdf1], [2, 2], 1, np.array([0, 1]),
        ...                                            [0, 0], [False, False], 1)]
        [0.875, 1.0]
    """
    if len(cdfs) != 2:
        raise ValueError("pair_recall is for two streams")
    ks = np.asarray(ks, dtype=np.int64)
    g = max(1, int(granularity))
    sg = -(-max(0, int(slide)) // g)
    wg = [max(1, int(w) // g) for w in windows]
    base = [(ks + int(k_sync[i])) // g for i in range(2)]
    span = int(max(b.max() for b in base)) + max(wg) + 2 if len(ks) else 2
    ext = []
    for cdf in cdfs:
        e = np.ones(span)
        e[: min(len(cdf), span)] = cdf[:span]
        ext.append(e)
    terms = []
    for i, j in ((0, 1), (1, 0)):
        c_i, c_j = ext[i], ext[j]
        earlier = c_j[base[j] + (0 if drop[j] else max(0, min(wg[0], wg[1]) - sg))]
        if drop[i]:
            later = c_i[base[i]]
        else:
            # mean over m = 1..M of c_i[base + max(0, min(m, W_i) - sg)], M = W_j / g
            big_m, w_i = wg[j], wg[i]
            prefix = np.concatenate([[0.0], np.cumsum(c_i)])
            flat0 = min(big_m, sg)  # m <= sg: no allowance
            hi = max(0, min(big_m, w_i) - sg)  # then allowances 1..hi, one m each
            tail = max(0, big_m - w_i)  # m > W_i: the allowance stays at W_i - sg
            total = flat0 * c_i[base[i]] + prefix[base[i] + hi + 1] - prefix[base[i] + 1]
            total = total + tail * c_i[base[i] + max(0, w_i - sg)]
            later = total / big_m
        terms.append(later * earlier)
    w0, w1 = float(windows[0]), float(windows[1])
    return np.asarray((terms[0] * w1 + terms[1] * w0) / (w0 + w1))


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
    drop: Sequence[bool] | None = None,
    reinsert: bool = False,
    slide: int = 0,
) -> int:
    """Alg. 4.7: the least common K in ``0, g, 2g, ...`` (at most ``max_delay`` rounded up
    to g) whose expected recall reaches ``target`` (NonEqSel when ``monitor`` has counts,
    its ratio capped at 1;
    ``drop``, ``reinsert``, ``slide``: what the engine does with late tuples,
    :func:`expected_recall`)."""
    top = -(-max(0, max_delay) // granularity)
    ks = np.arange(top + 1, dtype=np.int64) * granularity
    # The selectivity ratio may only lower the estimate (our choice): counted per interval
    # it is noisy, and a ratio above 1 at small K made AM pick K = 0 at Gamma = 0.99.
    ratio = np.minimum(monitor.ratio(ks), 1.0) if monitor is not None else 1.0
    gamma = expected_recall(
        cdfs, windows, basic, granularity, ks, k_sync, ratio, drop, reinsert, slide
    )
    ok = np.nonzero(gamma >= target - 1e-12)[0]
    return int(ks[ok[0]]) if len(ok) else int(ks[-1])

"""Buffer-side join counts for the join quality policy (Ji Sec. 4.2: NonEqSel and recall).

The recall models need, per tuple a window join processes, its delay, the size of the cross
product its probe met and the join results it made (``n_cross``, ``n_join``), and the results
the query produced. The engines (row, MIG, columnar) do not count probes, so, as the
aggregate policy measures its figures at the K-slack buffers, this counts them there, where
every placement's tuples pass: :class:`JoinCounter` keeps, per stream, the timestamps and
join keys of the tuples that have *arrived* (not only those released) and, for each
arriving tuple ``t`` of stream ``i``, counts per other stream ``j`` the arrived tuples that
share ``t``'s key and lie within the windows of each other (``ts_j`` in
``(ts - W_j, ts + W_i)``). Then ``n_join(t) = prod_j matches_j`` and ``n_cross(t) = prod_j
all_j``: the results (and combinations) that ``t``, arriving last, completes.

Counting each result when its last member arrives counts every true result exactly once
(for two streams exactly; for more, the product also counts combinations of tuples of two
other streams that are not within each other's windows: an over-count that cancels in the
ratios the models use, sel(K) / sel and produced / true). The join must be an equi-join
whose keys form one class over all its streams (``a.k = b.k AND b.k = c.k``, x3); other
joins get no counts (the policy then falls back to EqSel, and PD holds K).

``produced`` is estimated the same way (:meth:`JoinCounter.arrived` with ``late``): a result
is lost only when the tuple that completes it is late (released behind its stream, it
enters the windows without probing) and every partner has already been released (none is
still held to probe it later). The engine's own late rule goes by fired instants, so a
tuple released behind by less than a slide still probes: the estimate counts it lost.

Vectorised: per stream one sorted array of timestamps and one of ``key code * 2^40 + ts -
base``; an arriving batch costs one ``searchsorted`` pair per other stream and one merge.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

#: Timestamps relative to the first one fit below this (ticks: 35 years of milliseconds).
_SPAN = 1 << 40


class JoinCounter:
    """Arrival-order join counts (module docstring). ``windows``: per stream its window
    range (ticks); ``keys``: per stream its join key column; ``horizon``: ticks beyond the
    largest window that arrived tuples are kept for late partners."""

    def __init__(self, windows: Mapping[str, int], keys: Mapping[str, int], horizon: int) -> None:
        self.windows = dict(windows)
        self.keys = dict(keys)
        self.horizon = max(0, int(horizon))
        self.vocab: dict[object, int] = {}
        self.base: int | None = None
        self.ts: dict[str, np.ndarray] = {s: np.empty(0, np.int64) for s in windows}
        self.comp: dict[str, np.ndarray] = {s: np.empty(0, np.int64) for s in windows}
        self.top: int | None = None

    def codes(self, column: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """The join key values as small integer codes (one dictionary for all streams; a
        NULL key gets -1 and matches nothing)."""
        values = column.to_pylist() if len(column) else []
        uniq = {v for v in values if v is not None}
        for v in uniq:
            self.vocab.setdefault(v, len(self.vocab))
        vocab = self.vocab
        return np.fromiter(
            (vocab[v] if v is not None else -1 for v in values), np.int64, len(values)
        )

    def arrived(
        self,
        stream: str,
        batch: pa.RecordBatch,
        ts: np.ndarray,
        late: np.ndarray | None = None,
        k: int = 0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Count, for each tuple of ``batch`` (arriving on ``stream``, timestamps ``ts``), the
        combinations and results it completes; then remember the tuples. Returns
        ``(n_cross, n_join, n_produced)`` as float arrays.

        ``late``: the tuples released behind their stream's progress (delay > ``k``, the
        K of every stream): they enter the windows without probing, so of the results they
        complete only those with a partner still held in its buffer (``ts_j > T_j - k``,
        ``T_j`` that stream's largest timestamp) are produced, when that partner is released
        and probes. Every other tuple produces all the results it completes."""
        ts = np.asarray(ts, dtype=np.int64)
        n = len(ts)
        if self.base is None and n:
            self.base = int(ts.min()) - (1 << 38)
        code = self.codes(batch.column(self.keys[stream]))
        cross = np.ones(n)
        join = np.ones(n)
        lost = np.ones(n)
        w_i = self.windows[stream]
        base = self.base or 0
        for other, w_j in self.windows.items():
            if other == stream:
                continue
            lo, hi = ts - w_j, ts + w_i  # partner timestamps in (lo, hi)
            t_j = self.ts[other]
            cross *= np.searchsorted(t_j, hi, "left") - np.searchsorted(t_j, lo, "right")
            c_j = self.comp[other]
            key = code * _SPAN - base
            first = np.searchsorted(c_j, key + lo, "right")
            m = np.searchsorted(c_j, key + hi, "left") - first
            join *= np.where(code >= 0, m, 0)
            if late is not None and len(t_j):
                released = int(t_j.max()) - k  # partners at or below it have gone out
                upto = np.minimum(hi - 1, released)
                out = np.maximum(np.searchsorted(c_j, key + upto, "right") - first, 0)
                lost *= np.where(code >= 0, out, 0)
        produced = join.copy()
        if late is not None:
            produced = np.where(late, join - lost, join)
        self._remember(stream, ts, code)
        return cross, join, produced

    def _remember(self, stream: str, ts: np.ndarray, code: np.ndarray) -> None:
        if not len(ts):
            return
        self.top = int(ts.max()) if self.top is None else max(self.top, int(ts.max()))
        keep = code >= 0
        comp = code[keep] * _SPAN + (ts[keep] - (self.base or 0))
        self.ts[stream] = np.sort(np.concatenate([self.ts[stream], ts]), kind="stable")
        self.comp[stream] = np.sort(np.concatenate([self.comp[stream], comp]), kind="stable")
        # Forget what no future tuple can meet: older than every window plus the horizon.
        floor = self.top - max(self.windows.values()) - self.horizon
        t = self.ts[stream]
        if len(t) and t[0] < floor - max(self.windows.values()):
            cut = np.searchsorted(t, floor, "left")
            self.ts[stream] = t[cut:]
            c = self.comp[stream]
            rel = c % _SPAN + (self.base or 0)
            self.comp[stream] = c[rel >= floor]

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

``produced`` follows what the engine does with a late tuple (:meth:`JoinCounter.arrived`
with ``late``: the tuples the engine may find behind an instant already fired), per stream
(``drop``: the streams whose late tuples are dropped, a columnar window or ``--late drop``,
docs/disorder.md):

* a tuple that is not late produces every result it completes with the *kept* tuples of the
  other streams (those not dropped): the engine evaluates each instant's relations, so a
  pair is produced once both are in their windows, whichever was released first;
* a late tuple of a ``drop`` stream produces nothing and is not kept: the results later
  partners would complete with it are lost too;
* a late tuple of an ``insert`` stream enters its windows at the first instant ``N`` after
  the one fired (the caller gives an upper bound of ``N``): it produces its results with the
  kept partners whose windows are still open at ``N`` (``ts_j > N - W_j``), none when its
  own window has closed by then (``ts <= N - W_i``: not taken, dropped like the above).

Counted lost is a superset of what the engine loses when ``late`` is (the caller marks a
tuple late when it is not after the last instant that *could* have fired) and ``N`` is an
upper bound: the estimate of the recall errs low.

Vectorised: per stream one sorted array of timestamps and one of ``key code * 2^40 + ts -
base``; an arriving batch costs one ``searchsorted`` pair per other stream and one merge.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import pyarrow as pa

#: Timestamps relative to the first one fit below this (ticks: 35 years of milliseconds).
_SPAN = 1 << 40


class JoinCounter:
    """Arrival-order join counts (module docstring). ``windows``: per stream its window
    range (ticks); ``keys``: per stream its join key column; ``horizon``: ticks beyond the
    largest window that arrived tuples are kept for late partners; ``drop``: the streams
    whose late tuples the engine drops (module docstring)."""

    def __init__(
        self,
        windows: Mapping[str, int],
        keys: Mapping[str, int],
        horizon: int,
        drop: Collection[str] = (),
    ) -> None:
        self.windows = dict(windows)
        self.keys = dict(keys)
        self.horizon = max(0, int(horizon))
        self.vocab: dict[object, int] = {}
        self.base: int | None = None
        self.ts: dict[str, np.ndarray] = {s: np.empty(0, np.int64) for s in windows}
        self.comp: dict[str, np.ndarray] = {s: np.empty(0, np.int64) for s in windows}
        #: ``comp`` of the tuples kept (not dropped as late): the partners that produce.
        self.kept: dict[str, np.ndarray] = {s: np.empty(0, np.int64) for s in windows}
        #: Streams whose late tuples are dropped (the others insert them).
        self.drop: set[str] = set(drop)
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
        opens: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Count, for each tuple of ``batch`` (arriving on ``stream``, timestamps ``ts``), the
        combinations and results it completes, and those of its results the run produces;
        then remember the tuples. Returns ``(n_cross, n_join, n_produced)`` as float arrays.

        ``late``: per tuple, whether the engine may take it as late; ``opens``: per tuple,
        an upper bound of the first instant at which a late tuple inserted into its windows
        counts (default: its timestamp plus the largest window, so nothing is produced).
        What a late tuple produces: module docstring."""
        ts = np.asarray(ts, dtype=np.int64)
        n = len(ts)
        if self.base is None and n:
            self.base = int(ts.min()) - (1 << 38)
        code = self.codes(batch.column(self.keys[stream]))
        w_i = self.windows[stream]
        late_mask = np.zeros(n, bool) if late is None else np.asarray(late, dtype=bool)
        if opens is None:
            opens = ts + max(self.windows.values())
        opens = np.asarray(opens, dtype=np.int64)
        # A late tuple is lost to the windows of a drop stream, and to an insert stream's
        # when its own window has closed by the instant it would count in.
        closed = np.ones(n, bool) if stream in self.drop else opens >= ts + w_i
        dropped = late_mask & closed
        inserted = late_mask & ~dropped
        cross = np.ones(n)
        join = np.ones(n)
        produced = np.where(dropped, 0.0, 1.0)
        base = self.base or 0
        key = code * _SPAN - base
        for other, w_j in self.windows.items():
            if other == stream:
                continue
            lo, hi = ts - w_j, ts + w_i  # partner timestamps in (lo, hi)
            t_j = self.ts[other]
            cross *= np.searchsorted(t_j, hi, "left") - np.searchsorted(t_j, lo, "right")
            c_j = self.comp[other]
            m = np.searchsorted(c_j, key + hi, "left") - np.searchsorted(c_j, key + lo, "right")
            join *= np.where(code >= 0, m, 0)
            # Kept partners; an inserted late tuple meets those still in their windows at
            # the instant it counts in.
            k_j = self.kept[other]
            low = np.where(inserted, np.maximum(lo, opens - w_j), lo)
            got = np.searchsorted(k_j, key + hi, "left") - np.searchsorted(k_j, key + low, "right")
            produced *= np.where(code >= 0, np.maximum(got, 0), 0)
        self._remember(stream, ts, code, ~dropped)
        return cross, join, produced

    def _remember(self, stream: str, ts: np.ndarray, code: np.ndarray, kept: np.ndarray) -> None:
        if not len(ts):
            return
        self.top = int(ts.max()) if self.top is None else max(self.top, int(ts.max()))
        keep = code >= 0
        base = self.base or 0
        comp = code[keep] * _SPAN + (ts[keep] - base)
        self.ts[stream] = np.sort(np.concatenate([self.ts[stream], ts]), kind="stable")
        self.comp[stream] = np.sort(np.concatenate([self.comp[stream], comp]), kind="stable")
        kept_comp = code[keep & kept] * _SPAN + (ts[keep & kept] - base)
        self.kept[stream] = np.sort(np.concatenate([self.kept[stream], kept_comp]), kind="stable")
        # Forget what no future tuple can meet: older than every window plus the horizon.
        floor = self.top - max(self.windows.values()) - self.horizon
        t = self.ts[stream]
        if len(t) and t[0] < floor - max(self.windows.values()):
            cut = np.searchsorted(t, floor, "left")
            self.ts[stream] = t[cut:]
            for arrays in (self.comp, self.kept):
                c = arrays[stream]
                arrays[stream] = c[c % _SPAN + base >= floor]

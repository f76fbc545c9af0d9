"""Per-stream K-slack buffers on Arrow batches (the dissertation's Eq. 3.1).

A stream's tuples arrive in *arrival* order with event timestamps that may be out of order.
The buffer of stream ``i`` holds them and releases, in timestamp order, every held tuple
``e`` with ``e.ts + K <= T``, ``T`` the largest timestamp the stream has shown so far; the
released sequence is what the merge of the streams (engines/time_merge.py), the clock and
every engine downstream see, row and columnar placements alike. What K is comes from the
run's :class:`~engines.disorder.policy.SlackPolicy` (engines/disorder/policies.py), asked
once per arriving batch after it has seen the batch's delays.

Exactly, tuple by tuple (whatever the batch sizes): when the ``j``-th tuple arrives, ``T_j``
is the running maximum, and the buffer's *bound* ``B_j = max(B_{j-1}, T_j - K_j)`` (never
moving back when K grows); a held tuple ``i <= j`` is released at the first arrival ``j``
with ``B_j >= ts_i``, and the tuples released at one arrival go out sorted by timestamp
(ties in arrival order). A tuple whose delay exceeds K arrives with ``ts_i <= B_i`` and is
released at once: it is behind tuples already released, and the engine's late rule decides
whether it still counts (docs/semantics.md, "Late tuples"; its dead letter names K). At the
end of the stream everything held is released.

Vectorised: per arriving batch one running maximum, one ``searchsorted`` of the held and the
new timestamps against the batch's bounds, one ``lexsort`` of the released ones and one Arrow
``take``; no Python per row.

Memory: the buffer holds only tuples with ``ts > B``, i.e. timestamps in ``(T - K, T]`` of
its own stream: at most the stream's rate times K tuples (for ``max``, K is the largest delay
seen). The peak is reported (``buffered_peak``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from engines.disorder.policy import SlackPolicy

#: Most entries a stream's K timeline keeps (a longer run samples every 2, 4, ... seconds).
MAX_K_SAMPLES = 2048


@dataclass
class StreamDisorder:
    """What one stream's buffer measured (the ``disorder`` metrics, docs/disorder.md)."""

    name: str
    tps: int
    max_delay: int = 0  # ticks
    buffered_peak: int = 0
    arrived: int = 0
    released_behind: int = 0  # released behind a larger timestamp already released (delay > K)
    late_dropped: int = 0  # counted by the run loop from the engine's late rule
    late_inserted: int = 0
    #: [event-second of the stream's progress, K in seconds], sampled per event-second.
    k_samples: list[list[float]] = field(default_factory=list)
    _every: int = 1
    _next_second: int | None = None

    def sample_k(self, top: int, k: int) -> None:
        second = top // self.tps
        if self._next_second is not None and second < self._next_second:
            return
        self.k_samples.append([float(second), k / self.tps])
        self._next_second = second + self._every
        if len(self.k_samples) > MAX_K_SAMPLES:
            self.k_samples = self.k_samples[::2]
            self._every *= 2

    def metrics(self, k_now: int) -> dict[str, Any]:
        return {
            "k_s": k_now / self.tps,
            "k_timeline": self.k_samples,
            "max_delay_s": self.max_delay / self.tps,
            "buffered_peak": self.buffered_peak,
            "arrived": self.arrived,
            "released_behind": self.released_behind,
            "late_dropped": self.late_dropped,
            "late_inserted": self.late_inserted,
        }


class KSlackBuffer:
    """The K-slack buffer of one stream (module docstring). ``time_column``: index of the
    timestamp column (already in the query's time base)."""

    def __init__(self, stream: str, time_column: int, policy: SlackPolicy, tps: int) -> None:
        self.stream = stream
        self.time_column = time_column
        self.policy = policy
        self.stats = StreamDisorder(stream, tps)
        self.top: int | None = None  # T: the largest timestamp seen
        self.bound: int | None = None  # B: everything at or below it has been released
        self.released_top: int | None = None  # largest timestamp released so far
        self._held: pa.Table | None = None
        self._held_ts = np.empty(0, dtype=np.int64)
        #: Wall time (perf_counter) of the arrival that released the last batch.
        self.last_release_wall = 0.0
        #: Chunks of (released timestamp where the released progress moved up, the stream's
        #: largest arrived timestamp then): what :meth:`arrived_when_past` looks up.
        self._progress: deque[tuple[np.ndarray, np.ndarray]] = deque()
        #: A quality-driven policy's buffer-side feedback hook (engines/disorder/quality.py):
        #: ``arrived(stream, batch, timestamps, bound before the batch, bound after each
        #: tuple)``, or None. Called after K is asked for: the bounds are those of the K the
        #: batch is released with (a tuple with ``ts <=`` its own bound is released at once).
        self._arrived = getattr(policy, "arrived", None)

    def arrived_when_past(self, instant: int) -> int | None:
        """The stream's largest arrived timestamp at the arrival that released its first
        tuple after ``instant`` (None if none is released yet). Calls must come with
        non-decreasing instants: what lies at or before one is forgotten."""
        chunks = self._progress
        while chunks:
            ts, tops = chunks[0]
            i = int(np.searchsorted(ts, instant, side="right"))
            if i < len(ts):
                if i:
                    chunks[0] = (ts[i:], tops[i:])
                return int(tops[i])
            chunks.popleft()
        return None

    @property
    def held(self) -> int:
        return len(self._held_ts)

    def k(self) -> int:
        return max(0, int(self.policy.k(self.stream)))

    def push(self, batch: pa.RecordBatch, wall: float | None = None) -> pa.RecordBatch | None:
        """Take an arriving batch; the tuples it releases (in release order), or None."""
        n = batch.num_rows
        if n == 0:
            return None
        ts = np.asarray(
            batch.column(self.time_column).to_numpy(zero_copy_only=False), dtype=np.int64
        )
        running = np.maximum.accumulate(ts)
        if self.top is not None:
            running = np.maximum(running, self.top)
        before = np.empty(n, dtype=np.int64)  # the stream's maximum before each tuple
        before[0] = self.top if self.top is not None else ts[0]
        before[1:] = running[:-1]
        delays = np.maximum(before - ts, 0)
        self.top = int(running[-1])
        st = self.stats
        st.arrived += n
        st.max_delay = max(st.max_delay, int(delays.max()))
        self.policy.observe(self.stream, delays, self.top)
        k = self.k()
        st.sample_k(self.top, k)
        bounds = running - k
        if self.bound is not None:
            bounds = np.maximum(bounds, self.bound)
        if self._arrived is not None:
            self._arrived(self.stream, batch, ts, self.bound, bounds)
        self.bound = int(bounds[-1])
        # Release arrival of each held (older) and each new tuple: the first arrival in this
        # batch whose bound reaches its timestamp (n: still held).
        held_at = np.searchsorted(bounds, self._held_ts, side="left")
        new_at = np.maximum(np.arange(n), np.searchsorted(bounds, ts, side="left"))
        at = np.concatenate([held_at, new_at])
        all_ts = np.concatenate([self._held_ts, ts])
        table = pa.Table.from_batches([batch])
        if self._held is not None:
            table = pa.concat_tables([self._held, table])
        out_mask = at < n
        stay = np.flatnonzero(~out_mask)
        self._held = table.take(pa.array(stay)) if len(stay) else None
        self._held_ts = all_ts[stay]
        st.buffered_peak = max(st.buffered_peak, self.held)
        go = np.flatnonzero(out_mask)
        if not len(go):
            return None
        self.last_release_wall = wall if wall is not None else time.perf_counter()
        # By release arrival, then timestamp, then arrival (``go`` is in arrival order).
        order = go[np.lexsort((go, all_ts[go], at[go]))]
        return self._emit(table, order, all_ts[order], running[at[order]])

    def flush(self) -> pa.RecordBatch | None:
        """End of the stream: release everything held, in timestamp order."""
        if self._held is None or not self.held:
            return None
        order = np.argsort(self._held_ts, kind="stable")
        assert self.top is not None
        tops = np.full(len(order), self.top, dtype=np.int64)
        out = self._emit(self._held, order, self._held_ts[order], tops)
        self._held, self._held_ts = None, np.empty(0, dtype=np.int64)
        self.last_release_wall = time.perf_counter()
        return out

    def _emit(
        self, table: pa.Table, order: np.ndarray, ts: np.ndarray, tops: np.ndarray
    ) -> pa.RecordBatch:
        """The released rows ``order`` of ``table`` (timestamps ``ts``, and the stream's
        largest timestamp when each was released, ``tops``)."""
        # Released behind a larger timestamp released before it: out of order downstream.
        first = self.released_top if self.released_top is not None else ts[0]
        prior = np.maximum(np.concatenate([[first], np.maximum.accumulate(ts)[:-1]]), first)
        self.stats.released_behind += int((ts < prior).sum())
        # Where the released progress moves up, and the arrival top that moved it there.
        up = ts > prior if self.released_top is not None else np.r_[True, ts[1:] > prior[1:]]
        if up.any():
            self._progress.append((ts[up], tops[up]))
        top = int(ts.max())
        self.released_top = top if self.released_top is None else max(self.released_top, top)
        return table.take(pa.array(order)).combine_chunks().to_batches()[0]


def paced(
    batches: Iterator[pa.RecordBatch], time_column: int, pace: int
) -> Iterator[pa.RecordBatch]:
    """``batches`` cut where the stream's progress (running maximum timestamp) enters a new
    multiple of ``pace`` ticks: an adaptive policy then sees arrivals, and sets K, at that
    pace, interleaved with the other streams by the time merge, instead of a whole file
    batch at once. Zero-copy slices; one vectorised pass per batch."""
    top: int | None = None
    for b in batches:
        if b.num_rows == 0:
            continue
        ts = np.asarray(b.column(time_column).to_numpy(zero_copy_only=False), dtype=np.int64)
        running = np.maximum.accumulate(ts)
        if top is not None:
            running = np.maximum(running, top)
        top = int(running[-1])
        step = running // pace
        cuts = np.flatnonzero(step[1:] != step[:-1]) + 1
        start = 0
        for cut in (*cuts.tolist(), b.num_rows):
            yield b.slice(start, cut - start)
            start = cut


def released(buffer: KSlackBuffer, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The stream ``batches`` as its K-slack buffer releases it (flushed at the end)."""
    for b in batches:
        out = buffer.push(b, time.perf_counter())
        if out is not None and out.num_rows:
            yield out
    rest = buffer.flush()
    if rest is not None and rest.num_rows:
        yield rest

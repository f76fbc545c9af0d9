"""Merging a query's input streams into one arrival sequence by event time.

Every input stream arrives as Arrow batches of any size (a file reader's 65,536 rows, a
generator's one second, a single row). The engine must see them in event-time order *across*
streams, tuple by tuple, whatever the batch sizes: instant T may fire only once every stream
has passed T (docs/semantics.md, "Several streams"). ``TimeMerge`` does that without turning a
batch into Python rows: it slices batches at the frontier with ``numpy.searchsorted``.

How::

    stream r: [ 10 10 11 12 | 12 13 ... ]        one pending batch per stream (its "head")
    stream s: [ 10 11 11 11 11 11 12 13 ... ]    progress key of a tuple = running maximum
                                                 of its stream's timestamps up to it
    -> pick the stream whose next key is smallest (ties: the first stream), emit the prefix
       of its head whose keys are <= the edge, where the edge is the smallest other head's
       next key, rounded up to the next slide-instant boundary (``grid``): no instant lies
       inside one emitted slice, so coarser slices change nothing the engine computes.

The progress key of a stream that is itself out of order is its running maximum: a tuple
behind its stream's maximum travels with the tuples around it, and the engine decides whether
it is late in its own stream. After each slice the merge reports, through ``on_progress``,
the key of the stream's next tuple (the head it has just read), and ``on_end`` when a stream
has no tuple left, so the engine's clock moves as soon as every live stream has shown a tuple
after an instant, and an ended stream no longer holds it back.

Memory: a stream is read at most one batch ahead of the merge point (its head; a new batch is
read only once the previous one has been emitted), so a stream far ahead of the others, or
much denser, is not loaded whole. ``span`` (``--duration``) keeps the tuples before
``first + span``, ``first`` being the smallest first timestamp over the streams, and stops
reading a stream past it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: ``prepare(index, batch) -> batch``: applied to every batch as it is read (validation,
#: time-base conversion); may drop rows.
Prepare = Callable[[int, pa.RecordBatch], pa.RecordBatch]
_INT64_MAX = 2**63 - 1
#: what ``_read`` returns for a live stream's idle report
_IDLE: Any = object()
_TYPE_MAX = {pa.int32(): 2**31 - 1, pa.int64(): _INT64_MAX}


@dataclass
class _Head:
    """One stream's reading state: its pending batch and the progress keys of its rows."""

    index: int
    batches: Iterator[pa.RecordBatch]
    time_column: int
    batch: pa.RecordBatch | None = None
    keys: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    top: int | None = None  # the running maximum over every row read so far
    batches_read: int = 0
    rows_read: int = 0
    rows_emitted: int = 0
    ended: bool = False


class TimeMerge:
    """Iterate ``(stream index, batch slice)`` in event-time order over several streams.

    ``streams``: per stream, its batches and the index of its timestamp column. ``grid``:
    the plan's slide lengths (slice boundaries may snap to their multiples; empty: exact
    tuple order). ``on_progress(index, key)`` and ``on_end(index)`` report a stream's next
    progress key and its end, always before the next slice is yielded.
    """

    def __init__(
        self,
        streams: Sequence[tuple[Iterator[pa.RecordBatch], int]],
        grid: Sequence[int] = (),
        prepare: Prepare | None = None,
        span: float | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        on_end: Callable[[int], None] | None = None,
        live: Collection[int] = (),
    ) -> None:
        self.heads = [_Head(i, iter(b), t) for i, (b, t) in enumerate(streams)]
        self.grid = sorted({int(s) for s in grid if s > 0})
        self.prepare = prepare
        self.span = span
        self.limit: int | None = None  # exclusive upper bound of timestamps (span)
        self.on_progress = on_progress
        self.on_end = on_end
        #: streams read live (MQTT, stdin): an empty batch from one is its idle report
        self.live = frozenset(live)
        #: per stream, idle reports acted on
        self.idle_reports: dict[int, int] = {}

    # -- reading ----------------------------------------------------------------------------

    def _read(self, h: _Head) -> Any:
        """The stream's next non-empty batch (prepared and cut), None at its end, or
        ``_IDLE`` when a live stream that has shown tuples reports it went quiet."""
        if h.ended:
            return None
        for raw in h.batches:
            if raw.num_rows == 0:
                if h.index in self.live and h.top is not None:
                    return _IDLE
                continue
            h.batches_read += 1
            h.rows_read += raw.num_rows
            b = self.prepare(h.index, raw) if self.prepare is not None else raw
            if b.num_rows and self.limit is not None:
                b = self._cut(h, b)
                if b is None:
                    break
            if b.num_rows:
                return b
        h.ended = True
        return None

    def _cut(self, h: _Head, b: pa.RecordBatch) -> pa.RecordBatch | None:
        """Keep ``ts < limit``; None (stop reading the stream) once a whole batch is past it."""
        assert self.limit is not None
        ts = b.column(h.time_column)
        if int(pc.min(ts).as_py()) >= self.limit:
            return None
        if self.limit > _TYPE_MAX.get(ts.type, _INT64_MAX):
            return b  # beyond the column type's range: every value is below it
        return b.filter(pc.less(ts, pa.scalar(self.limit, type=ts.type)))

    def _load(self, h: _Head, b: pa.RecordBatch | None) -> None:
        """Make ``b`` the head of ``h`` (computing its progress keys), or end the stream."""
        if b is None:
            h.batch, h.keys, h.ended = None, np.empty(0, dtype=np.int64), True
            if self.on_end is not None:
                self.on_end(h.index)
            return
        ts = np.asarray(b.column(h.time_column).to_numpy(zero_copy_only=False), dtype=np.int64)
        keys = np.maximum.accumulate(ts)
        if h.top is not None:
            keys = np.maximum(keys, h.top)
        h.top = int(keys[-1])
        h.batch, h.keys = b, keys
        self._report(h)

    def _report(self, h: _Head) -> None:
        if self.on_progress is not None:
            self.on_progress(h.index, int(h.keys[0]))

    # -- merging ----------------------------------------------------------------------------

    def __iter__(self) -> Iterator[tuple[int, pa.RecordBatch]]:
        first = [self._read(h) for h in self.heads]
        if self.span is not None:
            starts = [
                int(b.column(h.time_column)[0].as_py())
                for h, b in zip(self.heads, first, strict=True)
                if b is not None
            ]
            if starts:
                # Timestamps are whole ticks: ts < first + span is ts < first + ceil(span),
                # computed in integers (first + 1e-9 would round back to first).
                self.limit = min(starts) + math.ceil(self.span)
                first = [
                    self._cut(h, b) if b is not None else None
                    for h, b in zip(self.heads, first, strict=True)
                ]
                first = [b if b is None or b.num_rows else None for b in first]
        for h, b in zip(self.heads, first, strict=True):
            self._load(h, b)
        while True:
            live = [h for h in self.heads if h.batch is not None]
            if not live:
                return
            head = min(live, key=lambda h: (int(h.keys[0]), h.index))
            others = [int(h.keys[0]) for h in live if h is not head]
            batch = head.batch
            assert batch is not None
            if others:
                edge = self._edge(min(others))
                n = int(np.searchsorted(head.keys, edge, side="right"))
            else:
                n = batch.num_rows
            piece = batch if n == batch.num_rows else batch.slice(0, n)
            rest = batch.num_rows - n
            head.batch = batch.slice(n, rest) if rest else None
            head.keys = head.keys[n:]
            head.rows_emitted += n
            yield head.index, piece
            if head.batch is None:
                nxt = self._read(head)
                while nxt is _IDLE:
                    # A quiet live stream: its tuples up to its running maximum are taken as
                    # complete (later ones behind it are late); an empty slice hands the
                    # loop control so that it tells the engine.
                    assert head.top is not None
                    self.idle_reports[head.index] = self.idle_reports.get(head.index, 0) + 1
                    if self.on_progress is not None:
                        self.on_progress(head.index, head.top + 1)
                    yield head.index, piece.slice(0, 0)
                    nxt = self._read(head)
                self._load(head, nxt)
            else:
                self._report(head)

    def _edge(self, bound: int) -> int:
        """The largest key a slice may reach when another stream's next key is ``bound``:
        ``bound`` itself, or the next multiple of a slide at or after it (tuples between two
        instant boundaries may arrive in any order across streams without changing what
        fires before them)."""
        if not self.grid:
            return bound
        return min(min(-(-bound // s) * s for s in self.grid), _INT64_MAX)

    # -- introspection (tests, metrics) -----------------------------------------------------

    def pending_rows(self, index: int) -> int:
        """Rows of stream ``index`` read but not yet emitted (at most one batch)."""
        h = self.heads[index]
        return h.batch.num_rows if h.batch is not None else 0

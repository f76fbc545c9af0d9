"""Arrow windows: window contents kept as Arrow chunks, for windows that feed a MIG.

When a window's consumer runs on a columnar engine, its tuples never need to become Python
objects: the window buffers the arriving Arrow batches and, at each of its slide instants,
cuts the visible rows into one *chunk* (a ``pyarrow.Table``) per slide. Expiry drops whole
chunks (and trims the oldest one when the range is not a multiple of the slide). The window
reports ``ChunkChange(added, removed)`` and the MIG mirrors the chunk set into its engine
(DuckDB scans a registered ring of Arrow chunks without copying them).

Semantics are exactly those of the tuple windows in ``engines.row.windows``, and so is
``next_change`` (the event-driven clock's question: when does this window change next?).
"""

from __future__ import annotations

from collections import deque
from time import perf_counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engines.row.base import NO_CHANGE, ChunkChange, Delta, RowOperator


class ArrowWindow(RowOperator):
    """A RANGE / NOW / UNBOUNDED / ROWS window over Arrow batches (see module docstring)."""

    kind = "window"

    def __init__(
        self,
        op_id: str,
        time_column: int,
        window: str,
        size: int | None,
        slide: int,
        count_mode: bool = False,
    ) -> None:
        super().__init__(op_id, replace_out=False)
        self.ts = time_column
        self.window = window  # "range" | "now" | "unbounded" | "rows"
        self.size = size
        self.slide = slide
        self.count_mode = count_mode
        self._pending: list[pa.RecordBatch] = []
        self._pending_max: int | None = None
        self._pending_min: int | None = None
        self.chunks: deque[tuple[int, int, pa.Table]] = deque()  # (id, label instant, rows)
        self.rows = 0
        self._next_id = 0
        self.last_instant: int | None = None
        #: A pushed-down selection as a ``pyarrow.compute`` expression (see
        #: ``engines.row.arrow_ops.arrow_filter``), applied to every batch on arrival, and the
        #: metrics of the select operator it stands for.
        self.prefilter: Any | None = None
        self.prefilter_metrics: Any | None = None

    def own_instant(self, instant: int) -> bool:
        return self.count_mode or instant % self.slide == 0

    def push_arrow(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self.prefilter is not None:
            m = self.prefilter_metrics
            t0 = perf_counter()
            n = batch.num_rows
            batch = batch.filter(self.prefilter)
            if m is not None:
                m.tuples_in += n
                m.tuples_out += batch.num_rows
                m.busy_s += perf_counter() - t0
            if batch.num_rows == 0:
                return
        self._pending.append(batch)
        lo_hi = pc.min_max(batch.column(self.ts))
        lo, hi = lo_hi["min"].as_py(), lo_hi["max"].as_py()
        if self._pending_max is None or hi > self._pending_max:
            self._pending_max = hi
        if self._pending_min is None or lo < self._pending_min:
            self._pending_min = lo

    def next_change(self, after: int) -> int | None:
        """The earliest own instant > ``after`` at which ``step`` may return a change: a
        pending tuple becomes visible, the oldest chunk's oldest tuple expires, or a
        tumbling window's non-empty relation is replaced. None: no change is due."""
        due: int | None = None
        if self._pending_min is not None:
            due = self._own_at_or_after(self._pending_min, after)
        if self.chunks and not self.count_mode:
            _, label, table = self.chunks[0]
            expiry: int | None = None
            if self.window == "now" or (self.window == "range" and self.size == self.slide):
                assert self.last_instant is not None
                expiry = self._own_at_or_after(self.last_instant + self.slide, after)
            elif self.window == "range":
                assert self.size is not None
                # Chunks are in timestamp order: the first row is the oldest tuple (an
                # emptied straddling chunk goes when its label leaves).
                oldest = table.column(self.ts)[0].as_py() if table.num_rows else label
                expiry = self._own_at_or_after(oldest + self.size, after)
            if expiry is not None:
                due = expiry if due is None else min(due, expiry)
        return due

    def _own_at_or_after(self, ts: int, after: int) -> int:
        """The first own instant >= ``ts`` and > ``after``."""
        s = self.slide
        return max(-(-ts // s) * s, after // s * s + s)

    def _take_visible(self, instant: int) -> pa.Table | None:
        if not self._pending:
            return None
        table = pa.Table.from_batches(self._pending)
        if self.count_mode or (self._pending_max is not None and self._pending_max <= instant):
            self._pending, self._pending_max, self._pending_min = [], None, None
            visible = table
        else:
            ts = table.column(self.ts)
            keep = pc.less_equal(ts, instant)
            visible = table.filter(keep)
            rest = table.filter(pc.invert(keep))
            self._pending = rest.to_batches()
            if rest.num_rows:
                lo_hi = pc.min_max(rest.column(self.ts))
                self._pending_min, self._pending_max = lo_hi["min"].as_py(), lo_hi["max"].as_py()
            else:
                self._pending_min = self._pending_max = None
        if visible.num_rows == 0:
            return None
        if not self.count_mode:
            # Timestamp order (stable: ties keep arrival order), as the tuple windows see it.
            ts = visible.column(self.ts)
            if visible.num_rows > 1 and not _sorted(ts):
                visible = visible.take(
                    pc.sort_indices(visible, [(visible.schema.names[self.ts], "ascending")])
                )
        return visible.combine_chunks()

    def _add(self, label: int, table: pa.Table, change: ChunkChange) -> None:
        cid = self._next_id
        self._next_id += 1
        self.chunks.append((cid, label, table))
        self.rows += table.num_rows
        change.added.append((cid, table))

    def _drop_left(self, change: ChunkChange) -> tuple[int, int, pa.Table]:
        cid, label, table = self.chunks.popleft()
        self.rows -= table.num_rows
        change.removed.append(cid)
        return cid, label, table

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        if not self.own_instant(instant):
            return NO_CHANGE
        self.last_instant = instant
        visible = self._take_visible(instant)
        change = ChunkChange()
        if self.window in ("now",) or (
            self.window == "range" and self.size == self.slide and not self.count_mode
        ):
            while self.chunks:  # tumbling: the relation is replaced
                self._drop_left(change)
            if visible is not None:
                self._add(instant, visible, change)
        elif self.window == "range":
            assert self.size is not None
            bound = instant - self.size
            if visible is not None and self.slide > self.size:
                # A hopping window with gaps: tuples between two windows are in neither.
                visible = visible.filter(pc.greater(visible.column(self.ts), bound))
                visible = visible if visible.num_rows else None
            if visible is not None:
                self._add(instant, visible, change)
            while self.chunks and self.chunks[0][1] <= bound:
                self._drop_left(change)
            if self.chunks:  # a chunk straddling the bound (range not a multiple of slide)
                _, label, table = self.chunks[0]
                ts = table.column(self.ts)
                if pc.min(ts).as_py() <= bound:
                    self._drop_left(change)
                    kept = table.filter(pc.greater(ts, bound))
                    self.chunks.appendleft((self._next_id, label, kept))
                    self.rows += kept.num_rows
                    change.added.insert(0, (self._next_id, kept))
                    self._next_id += 1
        elif self.window == "unbounded":
            if visible is not None:
                self._add(instant, visible, change)
        else:  # rows
            assert self.size is not None
            if visible is not None:
                self._add(instant, visible, change)
            excess = self.rows - self.size
            while excess > 0 and self.chunks:
                _, label, table = self.chunks[0]
                if table.num_rows <= excess:
                    self._drop_left(change)
                    excess -= table.num_rows
                else:
                    self._drop_left(change)
                    kept = table.slice(excess)
                    self.chunks.appendleft((self._next_id, label, kept))
                    self.rows += kept.num_rows
                    change.added.insert(0, (self._next_id, kept))
                    self._next_id += 1
                    excess = 0
        if not change.added and not change.removed:
            return NO_CHANGE
        change.order = [cid for cid, _, _ in self.chunks]
        return Delta(chunks=change)

    def contents(self) -> list[tuple[int, pa.Table]]:
        """The current chunks (id, table), oldest first."""
        return [(cid, t) for cid, _, t in self.chunks]

    def state(self) -> dict[str, Any]:
        oldest = newest = None
        if self.chunks:
            oldest = pc.min(self.chunks[0][2].column(self.ts)).as_py()
            newest = pc.max(self.chunks[-1][2].column(self.ts)).as_py()
        return {
            "tuples": self.rows,
            "chunks": len(self.chunks),
            "oldest_ts": oldest,
            "newest_ts": newest,
            "pending": sum(b.num_rows for b in self._pending),
            "last_instant": self.last_instant,
        }

    def snapshot(self) -> dict[str, Any]:
        return {
            "pending": list(self._pending),
            "pending_max": self._pending_max,
            "pending_min": self._pending_min,
            "chunks": list(self.chunks),
            "rows": self.rows,
            "next_id": self._next_id,
            "last_instant": self.last_instant,
        }

    def restore(self, snap: dict[str, Any]) -> None:
        self._pending = list(snap["pending"])
        self._pending_max = snap["pending_max"]
        self._pending_min = snap.get("pending_min")
        if self._pending_min is None and self._pending:
            self._pending_min = min(pc.min(b.column(self.ts)).as_py() for b in self._pending)
        self.chunks = deque(snap["chunks"])
        self.rows = snap["rows"]
        self._next_id = snap["next_id"]
        self.last_instant = snap["last_instant"]


def _sorted(col: pa.ChunkedArray | pa.Array) -> bool:
    arr = col.to_numpy() if isinstance(col, pa.ChunkedArray) else col.to_numpy(zero_copy_only=False)
    return bool(np.all(arr[1:] >= arr[:-1]))

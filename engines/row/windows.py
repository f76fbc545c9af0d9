"""S2R operators: time- and count-based windows (sliding, tumbling, NOW, UNBOUNDED).

Source tuples are *pushed* into a window's pending buffer as they arrive; at each of the
window's slide instants T the window makes the tuples with ``ts <= T`` visible and expires
the ones that fell out, emitting one :class:`Delta` (docs/semantics.md, "Slide instants").

* Sliding RANGE: contents are a deque in timestamp order; tuples with ``ts <= T - range``
  expire from the left, so deletes leave in insertion order (FIFO), which lets MIN/MAX
  downstream use monotonic deques. With a slide longer than the range (a hopping window with
  gaps) the tuples of a gap are dropped unseen.
* Tumbling RANGE (slide == range) and NOW: the relation at T is exactly the new tuples, so
  the window emits replacing deltas and keeps no contents.
* Paned RANGE (sliding, range a multiple of the slide, feeding only an aggregate of COUNT,
  SUM, AVG, MIN, MAX through selects/projects): the window keeps no tuples at all. Each slide
  interval is a *pane*; the aggregate keeps per-pane partial aggregates, and when a pane
  leaves the window the window just names it (``Delta.expire``) and the aggregate subtracts
  its partials. Expiry then costs per group and pane, not per tuple ("No pane, no gain",
  Li et al., SIGMOD Record 2005).
* UNBOUNDED: nothing ever expires; the window only counts what it has shown.
* ROWS n: the last n tuples; with a tuple-count SLIDE the executor calls ``step`` after
  every m-th tuple (count mode).

``next_change(after)`` tells the event-driven clock (``engines.row.clock``) the earliest of
the window's own instants after ``after`` at which its step can change anything: a pending
tuple becomes visible, or the oldest content (tuple or pane) expires, or a tumbling window's
non-empty relation is replaced. At every other instant the step returns ``NO_CHANGE``.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from operator import itemgetter
from time import perf_counter
from typing import Any

import numpy as np

from engines.row.base import NO_CHANGE, Delta, OperatorMetrics, RowOperator, Rows


class _WindowBase(RowOperator):
    kind = "window"

    def __init__(self, op_id: str, time_column: int, slide: int, replace_out: bool) -> None:
        super().__init__(op_id, replace_out)
        self.ts = time_column
        self.slide = slide
        self.count_mode = False  # set by the executor for tuple-count slides
        self._ts_of = itemgetter(time_column)
        self._pending: Rows = []
        self._pending_sorted = True
        self._pending_max: Any = None
        self.last_instant: int | None = None
        # A select pushed into the window (see RowExecutor): filters tuples as they arrive,
        # charging its time and counts to the select operator's metrics.
        self.prefilter: Callable[[Rows], Rows] | None = None
        self.prefilter_metrics: OperatorMetrics | None = None

    # -- input ------------------------------------------------------------------------------

    def push(self, rows: Rows, ts_sorted: bool = True) -> None:
        """Append arriving tuples; ``ts_sorted`` says the batch is in timestamp order."""
        if not rows:
            return
        if self.prefilter is not None:
            m = self.prefilter_metrics
            assert m is not None
            t0 = perf_counter()
            m.tuples_in += len(rows)
            rows = self.prefilter(rows)
            m.tuples_out += len(rows)
            m.busy_s += perf_counter() - t0
            if not rows:
                return
        ts_of = self._ts_of
        if self._pending and ts_of(rows[0]) < self._pending_max:
            self._pending_sorted = False
        if not ts_sorted:
            self._pending_sorted = False
        self._pending.extend(rows)
        last = ts_of(rows[-1]) if ts_sorted else max(map(ts_of, rows))
        if self._pending_max is None or last > self._pending_max:
            self._pending_max = last

    def _take_visible(self, instant: int) -> Rows:
        """Remove and return the pending tuples with ts <= instant, in timestamp order."""
        pending = self._pending
        if not pending:
            return []
        if self.count_mode:
            self._pending = []
            self._pending_max = None
            return pending
        if not self._pending_sorted:
            pending.sort(key=self._ts_of)  # stable: arrival order kept among equal ts
            self._pending_sorted = True
        if self._pending_max is not None and self._pending_max <= instant:
            self._pending = []
            self._pending_max = None
            return pending
        cut = bisect_right(pending, instant, key=self._ts_of)
        visible = pending[:cut]
        self._pending = pending[cut:]
        return visible

    def own_instant(self, instant: int) -> bool:
        return self.count_mode or instant % self.slide == 0

    def counts_late(self, ts: np.ndarray, fired: np.ndarray) -> np.ndarray:
        """Of late tuples (timestamps ``ts``, each not after the instant ``fired`` when it
        arrived), which fall into this window at one of its instants still to come. A
        window over arrival order (ROWS) or without contents to insert into takes none."""
        return np.zeros(len(ts), dtype=bool)

    def _in_next_window(self, ts: np.ndarray, fired: np.ndarray, size: int) -> np.ndarray:
        """``ts`` inside the window of range ``size`` at the first own instant after
        ``fired`` (every later one starts later)."""
        nxt = (fired // self.slide + 1) * self.slide
        return ts > nxt - size

    # -- the next change (event-driven clock) -----------------------------------------------

    def next_change(self, after: int) -> int | None:
        """The earliest own instant > ``after`` at which ``step`` may return a change, or
        None when nothing is pending and nothing expires (module docstring)."""
        return self._pending_due(after)

    def _own_at_or_after(self, ts: int, after: int) -> int:
        """The first own instant >= ``ts`` and > ``after``."""
        s = self.slide
        return max(-(-ts // s) * s, after // s * s + s)

    def _pending_due(self, after: int) -> int | None:
        """The own instant at which the earliest pending tuple becomes visible."""
        pending = self._pending
        if not pending:
            return None
        if not self._pending_sorted:
            pending.sort(key=self._ts_of)  # stable, as ``_take_visible`` sorts anyway
            self._pending_sorted = True
        return self._own_at_or_after(self._ts_of(pending[0]), after)

    # -- state ------------------------------------------------------------------------------

    def _base_snapshot(self) -> dict[str, Any]:
        return {
            "pending": list(self._pending),
            "pending_sorted": self._pending_sorted,
            "pending_max": self._pending_max,
            "last_instant": self.last_instant,
        }

    def _base_restore(self, snap: dict[str, Any]) -> None:
        self._pending = list(snap["pending"])
        self._pending_sorted = snap["pending_sorted"]
        self._pending_max = snap["pending_max"]
        self.last_instant = snap["last_instant"]


class SlidingRangeWindow(_WindowBase):
    """``[RANGE r SLIDE s]`` with s < r: a FIFO deque of the tuples with T - r < ts <= T."""

    def __init__(self, op_id: str, time_column: int, size: int, slide: int) -> None:
        super().__init__(op_id, time_column, slide, replace_out=False)
        self.size = size
        self.contents: deque[Any] = deque()

    def counts_late(self, ts: np.ndarray, fired: np.ndarray) -> np.ndarray:
        return self._in_next_window(ts, fired, self.size)

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        if not self.own_instant(instant):
            return NO_CHANGE
        self.last_instant = instant
        visible = self._take_visible(instant)
        bound = instant - self.size
        ts = self.ts
        if visible and visible[0][ts] <= bound:
            # A slide longer than the range: tuples in the gap between two windows are in
            # none of them, so they are never shown (``visible`` is in timestamp order).
            visible = visible[bisect_right(visible, bound, key=self._ts_of) :]
        contents = self.contents
        if visible and contents and visible[0][ts] < contents[-1][ts]:
            # Late tuples (``--late insert``): keep the contents in timestamp order.
            merged = list(heapq.merge(contents, visible, key=self._ts_of))
            contents.clear()
            contents.extend(merged)
        else:
            contents.extend(visible)
        dels: Rows = []
        if contents and contents[0][ts] <= bound:
            popleft = contents.popleft
            append = dels.append
            while contents and contents[0][ts] <= bound:
                append(popleft())
        if not visible and not dels:
            return NO_CHANGE
        return Delta(visible, dels)

    def next_change(self, after: int) -> int | None:
        due = self._pending_due(after)
        if self.contents:  # the oldest tuple leaves at the first instant T with T - r >= ts
            expiry = self._own_at_or_after(self.contents[0][self.ts] + self.size, after)
            due = expiry if due is None else min(due, expiry)
        return due

    def state(self) -> dict[str, Any]:
        c = self.contents
        return {
            "tuples": len(c),
            "oldest_ts": c[0][self.ts] if c else None,
            "newest_ts": c[-1][self.ts] if c else None,
            "pending": len(self._pending),
            "last_instant": self.last_instant,
        }

    def snapshot(self) -> dict[str, Any]:
        return {**self._base_snapshot(), "contents": list(self.contents)}

    def restore(self, snap: dict[str, Any]) -> None:
        self._base_restore(snap)
        self.contents = deque(snap["contents"])


class TumblingWindow(_WindowBase):
    """``[RANGE r SLIDE r]`` and ``[NOW]``: the relation at T is exactly the new tuples."""

    def __init__(self, op_id: str, time_column: int, slide: int) -> None:
        super().__init__(op_id, time_column, slide, replace_out=True)
        self._nonempty = False

    def counts_late(self, ts: np.ndarray, fired: np.ndarray) -> np.ndarray:
        return self._in_next_window(ts, fired, self.slide)

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        if not self.own_instant(instant):
            return NO_CHANGE
        self.last_instant = instant
        visible = self._take_visible(instant)
        if not visible and not self._nonempty:
            return NO_CHANGE
        self._nonempty = bool(visible)
        return Delta(visible, [], replace=True)

    def next_change(self, after: int) -> int | None:
        due = self._pending_due(after)
        if self._nonempty and self.last_instant is not None:
            # A non-empty relation is replaced (by an empty one) at the next own instant.
            replaced = self._own_at_or_after(self.last_instant + self.slide, after)
            due = replaced if due is None else min(due, replaced)
        return due

    def state(self) -> dict[str, Any]:
        return {"pending": len(self._pending), "last_instant": self.last_instant}

    def snapshot(self) -> dict[str, Any]:
        return {**self._base_snapshot(), "nonempty": self._nonempty}

    def restore(self, snap: dict[str, Any]) -> None:
        self._base_restore(snap)
        self._nonempty = snap["nonempty"]


class UnboundedWindow(_WindowBase):
    """``[UNBOUNDED]``: every tuple with ts <= T; nothing expires, so only inserts flow."""

    def __init__(self, op_id: str, time_column: int, slide: int) -> None:
        super().__init__(op_id, time_column, slide, replace_out=False)
        self.shown = 0

    def counts_late(self, ts: np.ndarray, fired: np.ndarray) -> np.ndarray:
        return np.ones(len(ts), dtype=bool)  # every later instant shows every tuple

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        if not self.own_instant(instant):
            return NO_CHANGE
        self.last_instant = instant
        visible = self._take_visible(instant)
        if not visible:
            return NO_CHANGE
        self.shown += len(visible)
        return Delta(visible, [])

    def state(self) -> dict[str, Any]:
        return {"tuples": self.shown, "pending": len(self._pending)}

    def snapshot(self) -> dict[str, Any]:
        return {**self._base_snapshot(), "shown": self.shown}

    def restore(self, snap: dict[str, Any]) -> None:
        self._base_restore(snap)
        self.shown = snap["shown"]


class RowsWindow(_WindowBase):
    """``[ROWS n]``: the n most recent visible tuples (by timestamp, ties by arrival; FIFO
    expiry)."""

    def __init__(self, op_id: str, time_column: int, rows: int, slide: int) -> None:
        super().__init__(op_id, time_column, slide, replace_out=False)
        self.rows = rows
        self.contents: deque[Any] = deque()

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        if not self.own_instant(instant):
            return NO_CHANGE
        self.last_instant = instant
        visible = self._take_visible(instant)
        if not visible:
            return NO_CHANGE
        contents = self.contents
        old = len(contents)
        overflow = old + len(visible) - self.rows
        dels: Rows = []
        if overflow > 0:
            if overflow <= old:
                popleft = contents.popleft
                dels = [popleft() for _ in range(overflow)]
            else:  # the new tuples alone exceed n: drop everything old and the oldest new
                dels = list(contents)
                contents.clear()
                visible = visible[overflow - old :]
        contents.extend(visible)
        return Delta(visible, dels)

    def state(self) -> dict[str, Any]:
        return {"tuples": len(self.contents), "capacity": self.rows, "pending": len(self._pending)}

    def snapshot(self) -> dict[str, Any]:
        return {**self._base_snapshot(), "contents": list(self.contents)}

    def restore(self, snap: dict[str, Any]) -> None:
        self._base_restore(snap)
        self.contents = deque(snap["contents"])


class PanedRangeWindow(_WindowBase):
    """``[RANGE r SLIDE s]`` (r a multiple of s) feeding a paned aggregate: panes, no tuples.

    The pane of instant T holds the tuples with T - s < ts <= T and is named T. At T the
    window emits the pane's tuples as inserts and names the pane that just expired, T - r.
    """

    def __init__(self, op_id: str, time_column: int, size: int, slide: int) -> None:
        super().__init__(op_id, time_column, slide, replace_out=False)
        self.size = size
        self.panes: deque[tuple[int, int]] = deque()  # (pane end instant, tuple count)

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        if not self.own_instant(instant):
            return NO_CHANGE
        self.last_instant = instant
        visible = self._take_visible(instant)
        panes = self.panes
        if visible:
            panes.append((instant, len(visible)))
        bound = instant - self.size
        expired: list[int] = []
        while panes and panes[0][0] <= bound:
            expired.append(panes.popleft()[0])
        if not visible and not expired:
            return NO_CHANGE
        return Delta(visible, [], False, tuple(expired))

    def next_change(self, after: int) -> int | None:
        due = self._pending_due(after)
        if self.panes:  # pane T leaves the window at T + r
            expiry = self._own_at_or_after(self.panes[0][0] + self.size, after)
            due = expiry if due is None else min(due, expiry)
        return due

    def state(self) -> dict[str, Any]:
        p = self.panes
        return {
            "panes": len(p),
            "tuples": sum(n for _, n in p),
            "oldest_pane": p[0][0] if p else None,
            "newest_pane": p[-1][0] if p else None,
            "pending": len(self._pending),
            "last_instant": self.last_instant,
        }

    def snapshot(self) -> dict[str, Any]:
        return {**self._base_snapshot(), "panes": list(self.panes)}

    def restore(self, snap: dict[str, Any]) -> None:
        self._base_restore(snap)
        self.panes = deque(snap["panes"])

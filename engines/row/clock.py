"""The row engine's event-time clock: plan instants, per-stream progress and the late rule.

A plan instant is a multiple of some window's slide. Instants fire once event time has
passed them in *every* input stream: each stream has a progress (the largest timestamp it
has delivered, or that the run-time has seen at the head of its reader,
:meth:`EventClock.advance_stream`); the clock is the smallest progress over the streams that
have not ended (:meth:`EventClock.end_stream`), and every plan instant below it fires. A
stream that has shown no tuple yet holds the clock back; an ended one no longer does.
:meth:`EventClock.finish` fires the remaining instants up to each window's last one.

A tuple is *late* when its timestamp is not after an instant that had already fired when it
arrived (only a tuple out of order in its own stream can be; docs/semantics.md); the
executor drops it and reports it (:meth:`EventClock.late_mask`).

A plan with a tuple-count SLIDE runs in *count mode*: an instant fires after every m-th tuple
and carries that tuple's timestamp; the executor counts (``count_seen``) as it pushes tuples.

The clock decides *when* instants fire; firing one (stepping every operator) is the
executor's ``step`` callback, which reports back with :meth:`EventClock.fired`.

Event-driven instants. Between two changes of its windows a plan's relations stand still, so
an instant where no window changes needs no step: nothing enters or leaves any window, every
operator would pass "no change" on, ISTREAM and DSTREAM would emit nothing. With a ``due``
callback (the executor asks each window for the next instant at which a tuple of it becomes
visible or expires, :meth:`engines.row.windows._WindowBase.next_change`) the clock steps only
those instants, plus the plan's first instant (an aggregate without GROUP BY answers there
even over empty windows). The instants in between still *pass*: the late rule and
``last_fired`` go by every plan instant as before, and the ``idle`` callback receives them
(lazily) so that RSTREAM, whose output is the whole relation at every instant, emits the
unchanged relation there without stepping anything. So a window without SLIDE over a stream
in milliseconds with two tuples a second steps a few instants a second, not 1000. Without
``due`` the clock steps every plan instant (``dense``: the reference for tests and
benchmarks).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

#: ``late_mask``'s "no instant fired" and "no timestamp seen yet" (a clock start after
#: every timestamp, so no instant is due).
_NO_INSTANT = np.iinfo(np.int64).min
_NO_TS = 2**62

#: ``on_late(stream, row, reason)``: a late tuple was rejected.
OnLate = Callable[[str, tuple[Any, ...], str], None]
#: ``rescue(at, ts, fired)``: of the late tuples at positions ``at`` of a batch (their
#: timestamps, and the instant fired when each arrived), which still fall into a window that
#: will produce results (late insertion): a boolean mask over them.
Rescue = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
#: ``due(after, last)``: the earliest instant after ``after`` at which some window changes
#: (window ``k`` only up to ``last[k]`` when ``last`` is given), or None.
Due = Callable[[int, Sequence[int] | None], int | None]
#: ``idle(instants)``: plan instants that pass without a step, lazily, in order.
Idle = Callable[[Iterator[int]], None]


class EventClock:
    """Fires the plan instants of windows with slides ``slides`` over ``streams``.

    ``step(instant)`` runs one instant; it must call :meth:`fired` once the instant's
    results are computed (before handing them out, so that a stop raised while emitting
    leaves the clock after the instant). With ``due`` only the instants where something
    changes are stepped and the others go to ``idle``, which calls :meth:`passed` for each
    instant it handles (module docstring).
    """

    def __init__(
        self,
        slides: Sequence[int],
        streams: Sequence[str],
        step: Callable[[int], None],
        count_slide: int | None = None,
        on_late: OnLate | None = None,
        due: Due | None = None,
        idle: Idle | None = None,
    ) -> None:
        self.slides = list(slides)
        self.step = step
        self.due = due
        self.idle = idle
        self.count_slide = count_slide
        self.on_late = on_late
        self.min_ts: int | None = None
        self.max_ts: int | None = None
        self.last_fired: int | None = None
        self.next: list[int] | None = None  # next instant per window (dense time mode)
        self.first: list[int] | None = None  # first instant per window (time mode)
        self.count_seen = 0
        #: Instants stepped (with ``due``, the instants that passed idle are not counted).
        self.instants_fired = 0
        self.late_count = 0
        #: Late tuples kept because they still count in a future window (``rescue``), per
        #: stream.
        self.late_inserted: dict[str, int] = {}
        #: The input streams, their event-time progress (None until a stream shows its first
        #: tuple) and the ones that have ended.
        self.streams = sorted(streams)
        self.progress: dict[str, int | None] = dict.fromkeys(self.streams)
        self.ended: set[str] = set()
        #: While True (``RowExecutor.begin_rebuild``), tuples are taken without the late rule
        #: and no instant fires: they were on time when another plan took them.
        self.held = False

    # -- progress ---------------------------------------------------------------------------

    def advance_stream(self, stream: str, ts: int) -> None:
        """``stream`` will deliver nothing that moves its progress below ``ts`` (the run-time
        has read its next tuple, whose running-maximum timestamp is ``ts``): fire what that
        allows. A tuple of the stream that later arrives with a timestamp not after an
        instant fired meanwhile is out of order in its own stream, and late."""
        if stream not in self.progress or self.count_slide is not None:
            return
        p = self.progress[stream]
        if p is None or ts > p:
            self.progress[stream] = ts
            self.fire_due()

    def end_stream(self, stream: str) -> None:
        """``stream`` has ended: it no longer holds the clock back."""
        if stream not in self.progress or stream in self.ended:
            return
        self.ended.add(stream)
        if self.count_slide is None:
            self.fire_due()

    def watermark(self) -> int | None:
        """The clock: the smallest progress over the streams that have not ended. None while
        one of them has shown no tuple yet, and once all have ended (``finish`` then fires
        the rest)."""
        live = [self.progress[s] for s in self.streams if s not in self.ended]
        if not live or any(p is None for p in live):
            return None
        return min(p for p in live if p is not None)

    def fire_due(self) -> None:
        if self.held:
            return
        mark = self.watermark()
        if mark is not None:
            self._fire_before(mark)

    def advance(self, stream: str, lo: int, hi: int) -> None:
        """Account for accepted tuples of ``stream`` with timestamps in [lo, hi] and fire
        what is due."""
        if self.last_fired is None and (self.min_ts is None or lo < self.min_ts):
            self.min_ts = lo  # before the first instant fires, the clock starts at the minimum
        if self.max_ts is None or hi > self.max_ts:
            self.max_ts = hi
        p = self.progress.get(stream)
        if stream in self.progress and (p is None or hi > p):
            self.progress[stream] = hi
        self.fire_due()

    # -- the late rule ----------------------------------------------------------------------

    def late_mask(
        self,
        stream: str,
        ts: np.ndarray,
        row_at: Callable[[int], tuple[Any, ...]],
        rescue: Rescue | None = None,
    ) -> np.ndarray:
        """Which tuples of a batch of ``stream`` to keep (vectorised; Python runs only per
        late tuple, to report it).

        Tuple ``i`` is late when its timestamp is not after the last plan instant that had
        fired when it arrived. Instants fire tuple by tuple as the clock moves: for tuple
        ``i`` the clock is the smaller of its own stream's running maximum (including the
        tuples before it in this batch) and the other live streams' progress, so only a tuple
        out of order in its own stream can be late. Until the first instant fires, the first
        instant follows the smallest timestamp seen (as ``_init`` does). Late tuples are
        counted and reported to ``on_late`` with the reason. With ``rescue``, the late tuples
        it marks are kept instead (counted in ``late_inserted``): they still fall into a
        window that has results to come (docs/disorder.md, "Late tuples inside open windows").
        """
        n = len(ts)
        keep = np.ones(n, dtype=bool)
        if n == 0 or not self.slides or self.held:
            return keep
        others = [self.progress[s] for s in self.streams if s != stream and s not in self.ended]
        if any(p is None for p in others):
            return keep  # another stream has shown nothing yet: no instant can fire
        own = self.progress.get(stream)
        running = np.maximum.accumulate(ts)
        if own is not None:
            running = np.maximum(running, own)
        clock = np.minimum(running, min(p for p in others if p is not None)) if others else running
        if self.last_fired is not None:
            assert self.min_ts is not None
            fired = self._fired_below(clock, np.full(n, self.min_ts, dtype=np.int64))
        else:
            # The smallest timestamp before each tuple: the clock's start until it fires.
            start = np.empty(n, dtype=np.int64)
            start[0] = self.min_ts if self.min_ts is not None else _NO_TS
            if n > 1:
                start[1:] = np.minimum(np.minimum.accumulate(ts[:-1]), start[0])
            fired = self._fired_below(clock, start)
            first = np.flatnonzero(fired != _NO_INSTANT)
            if len(first) and first[0] + 1 < n:
                f = int(first[0])  # the first instant fires here: the start is fixed from now on
                fired[f + 1 :] = self._fired_below(clock[f + 1 :], np.full(n - f - 1, start[f]))
        late = (fired != _NO_INSTANT) & (ts <= fired)
        if not late.any():
            return keep
        if rescue is not None:
            at = np.flatnonzero(late)
            saved = at[rescue(at, ts[at], fired[at])]
            if len(saved):
                late[saved] = False
                self.late_inserted[stream] = self.late_inserted.get(stream, 0) + len(saved)
                if not late.any():
                    return keep
        for idx in np.flatnonzero(late).tolist():
            self.late_count += 1
            if self.on_late is not None:
                reason = (
                    f"late in stream '{stream}': timestamp {int(ts[idx])} is not after instant "
                    f"{int(fired[idx])}, which had fired when it arrived (stream '{stream}' "
                    f"had already delivered timestamp {int(running[idx])})"
                )
                self.on_late(stream, row_at(idx), reason)
        return ~late

    def _fired_below(self, bound: np.ndarray, start: np.ndarray) -> np.ndarray:
        """Per element: the largest plan instant < ``bound`` that is not before the first
        instant of a clock starting at ``start`` (``_NO_INSTANT`` if there is none)."""
        best = np.full(len(bound), _NO_INSTANT, dtype=np.int64)
        for s in sorted(set(self.slides)):
            first = -(-start // s) * s
            cand = (-(-bound // s) - 1) * s
            np.copyto(best, cand, where=(cand >= first) & (cand > best))
        return best

    # -- firing -----------------------------------------------------------------------------

    def fired(self, instant: int) -> None:
        """The executor has stepped every operator at ``instant``."""
        self.last_fired = instant
        self.instants_fired += 1

    def passed(self, instant: int) -> None:
        """``instant`` passed without a step (``idle``); its results are handed out."""
        self.last_fired = instant

    def _init(self) -> None:
        assert self.min_ts is not None
        self.first = [-(-self.min_ts // s) * s for s in self.slides]
        self.next = list(self.first)

    def _fire_before(self, bound: int, last: Sequence[int] | None = None) -> None:
        """Fire every plan instant T < bound (of window ``k`` only up to ``last[k]``)."""
        if self.min_ts is None:
            return
        if self.last_fired is None:
            self._init()  # the minimum may still move until the first instant fires
        if self.due is not None:
            self._fire_changes(bound, last)
            return
        nxt = self.next
        assert nxt is not None
        while True:
            live = [nxt[k] for k in range(len(nxt)) if last is None or nxt[k] <= last[k]]
            if not live:
                return
            instant = min(live)
            if instant >= bound:
                return
            self.step(instant)
            for k, s in enumerate(self.slides):
                if nxt[k] == instant:
                    nxt[k] += s

    def _fire_changes(self, bound: int, last: Sequence[int] | None) -> None:
        """Event-driven firing: step the instants < bound where a window changes (and the
        first instant), let the others pass through ``idle``."""
        assert self.due is not None and self.first is not None
        while True:
            if self.last_fired is None:
                instant: int | None = min(self.first)  # the first instant always steps
            else:
                instant = self.due(self.last_fired, last)
            if instant is None or instant >= bound:
                break
            if self.last_fired is not None:
                self._pass(self.last_fired, instant, last)
            self.step(instant)
        top = self._last_instant_below(bound, last)
        if top is not None and self.last_fired is not None and top > self.last_fired:
            self._pass(self.last_fired, top + 1, last)
            self.last_fired = top

    def _pass(self, lo: int, hi: int, last: Sequence[int] | None) -> None:
        """The plan instants strictly between ``lo`` and ``hi`` pass without a step."""
        if self.idle is not None and hi - lo > 1:
            self.idle(self._instants_between(lo, hi, last))

    def _instants_between(self, lo: int, hi: int, last: Sequence[int] | None) -> Iterator[int]:
        """Plan instants in (lo, hi), in order: multiples of each slide within its window's
        first and last instant."""
        assert self.first is not None
        ranges = []
        for k, s in enumerate(self.slides):
            a = max(lo // s * s + s, self.first[k])
            b = hi if last is None else min(hi, last[k] + 1)
            if a < b:
                ranges.append(range(a, b, s))
        if len(ranges) == 1:
            yield from ranges[0]
            return
        prev = None
        for t in heapq.merge(*ranges):
            if t != prev:
                yield t
                prev = t

    def _last_instant_below(self, bound: int, last: Sequence[int] | None) -> int | None:
        """The largest plan instant < bound (of window ``k`` at most ``last[k]``)."""
        assert self.first is not None
        best: int | None = None
        for k, s in enumerate(self.slides):
            cand = (-(-bound // s) - 1) * s
            if last is not None:
                cand = min(cand, last[k])
            if cand >= self.first[k] and (best is None or cand > best):
                best = cand
        return best

    def finish(self) -> None:
        """End of input: fire the remaining instants up to each window's last one."""
        if self.count_slide is not None or self.max_ts is None:
            return
        if self.last_fired is None:
            self._init()
        last = [-(-self.max_ts // s) * s for s in self.slides]
        if last:
            self._fire_before(max(last) + 1, last)

    # -- state ------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "min_ts": self.min_ts,
            "max_ts": self.max_ts,
            "last_fired": self.last_fired,
            "next": self._next_instants(),
            "first": list(self.first) if self.first is not None else None,
            "count_seen": self.count_seen,
            "instants_fired": self.instants_fired,
            "progress": dict(self.progress),
            "ended": sorted(self.ended),
        }

    def restore(self, c: dict[str, Any]) -> None:
        self.min_ts, self.max_ts, self.last_fired = c["min_ts"], c["max_ts"], c["last_fired"]
        self.next = list(c["next"]) if c["next"] is not None else None
        first = c.get("first")
        if first is None and self.min_ts is not None and self.last_fired is not None:
            first = [-(-self.min_ts // s) * s for s in self.slides]
        self.first = list(first) if first is not None else None
        self.count_seen = c["count_seen"]
        self.instants_fired = c["instants_fired"]
        self.progress = dict(c["progress"])
        self.ended = set(c["ended"])

    def _next_instants(self) -> list[int] | None:
        """The next instant per window after ``last_fired`` (what the dense loop keeps)."""
        if self.first is None:
            return None
        if self.last_fired is None:
            return list(self.first)
        last = self.last_fired
        return [max(f, last // s * s + s) for f, s in zip(self.first, self.slides, strict=True)]

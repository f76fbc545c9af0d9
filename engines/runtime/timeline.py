"""The run's per-second timeline: tuples in, wall time, results and latency per event-second.

The run loop (engines/runtime/loop.py) feeds a :class:`Timeline` as it goes, at costs it
already pays: O(1) per input slice within one event-second (the loop knows each slice's
smallest and largest timestamp), one vectorised count (``numpy.bincount``) per slice across
seconds, no Python per tuple; O(1) per emitted instant and per loop step.
``metrics()`` gives the JSON-safe ``timeline`` of the run metrics (docs/migration.md,
"Metrics": the fields and how they add up to the run's totals).

Which second a figure belongs to:

* a tuple counts to the second of its own timestamp, ``(ts - origin) // tps``, ``origin``
  being the run's first tuple (the origin ``--duration`` and ``--migrate AT`` count from);
  a tuple before the origin (out of order) counts to second 0;
* an instant T (its results, its emit latency, and the wall time spent since the previous
  emit or loop step) counts to the second holding ``T - 1`` tick, the last tick of input
  the instant closes, so a second's tuples and the work of the instants they complete
  fall in the same second;
* wall time after the last emit of a loop step (reading, ingesting tuples whose instants
  have not fired yet) counts to the second of the step's newest tuple.

Bounded: at most ``max_entries`` buckets. A run longer than that many seconds is kept at a
coarser resolution (each bucket 2, 4, 8, ... seconds: neighbouring buckets are merged as the
run grows), so the metrics stay the same size however long the run.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

#: The most buckets a timeline holds (a longer run doubles the seconds per bucket).
MAX_ENTRIES = 2048
#: A slice whose timestamps span more seconds than this is counted with numpy.unique.
_DENSE_SPAN = 4096


class Timeline:
    """Per-second figures of one run (see module doc). ``tps``: ticks per second of the
    query's time base."""

    def __init__(self, tps: int, max_entries: int = MAX_ENTRIES) -> None:
        self.tps = tps
        self.max_entries = max(2, max_entries)
        self.origin: int | None = None
        self.width = 1  # seconds per bucket
        # bucket -> [tuples, wall seconds, results, instants]
        self._buckets: dict[int, list[float]] = {}
        self._emit_second = array("q")
        self._emit_latency = array("d")
        self._last_wall: float | None = None
        self._last_second = 0

    # -- feeding ------------------------------------------------------------------------------

    def start(self, wall: float) -> None:
        """The run's wall clock starts (``time.perf_counter()``)."""
        self._last_wall = wall

    def tuples(self, timestamps: Any, lo: int | None = None, hi: int | None = None) -> None:
        """A slice of input was taken: ``timestamps`` (a numpy or Arrow array, ticks of the
        query's time base), ``lo``/``hi`` its smallest and largest when known. A slice within
        one second (the usual case) is counted in O(1); only a slice across seconds is
        converted to numpy and counted per second (vectorised)."""
        n = len(timestamps)
        if n == 0:
            return
        if self.origin is None:
            first = timestamps[0]
            self.origin = int(first.as_py() if hasattr(first, "as_py") else first)
        origin, tps = self.origin, self.tps
        if lo is not None and hi is not None:
            s_lo, s_hi = max(0, (lo - origin) // tps), max(0, (hi - origin) // tps)
            if s_lo == s_hi:
                self._last_second = max(self._last_second, s_hi)
                self._grow(s_hi)
                self._bucket(s_hi)[0] += n
                return
        if hasattr(timestamps, "to_numpy"):
            timestamps = timestamps.to_numpy(zero_copy_only=False)
        ts = np.asarray(timestamps, dtype=np.int64)
        seconds = np.maximum((ts - origin) // tps, 0)
        lo_s, hi_s = int(seconds.min()), int(seconds.max())
        self._last_second = max(self._last_second, hi_s)
        self._grow(hi_s)
        if hi_s - lo_s <= _DENSE_SPAN:
            counts = np.bincount(seconds - lo_s)
            for k in np.flatnonzero(counts).tolist():
                self._bucket(lo_s + k)[0] += int(counts[k])
        else:
            values, counts = np.unique(seconds, return_counts=True)
            for sec, c in zip(values.tolist(), counts.tolist(), strict=True):
                self._bucket(sec)[0] += c

    def emitted(self, instant: int, rows: int, latency_ms: float, wall: float) -> None:
        """Instant ``instant`` emitted ``rows`` result rows at wall time ``wall``, ``latency_ms``
        after the call that fired it began."""
        second = self._instant_second(instant)
        self._grow(second)
        bucket = self._bucket(second)
        bucket[2] += rows
        bucket[3] += 1
        self._add_wall(bucket, wall)
        self._emit_second.append(second)
        self._emit_latency.append(latency_ms)

    def step_done(self, wall: float) -> None:
        """A loop step ended: its wall time since the last emit goes to its newest second."""
        if self.origin is None:
            return  # nothing read yet: the time goes to the first second that has input
        self._grow(self._last_second)
        self._add_wall(self._bucket(self._last_second), wall)

    # -- reading ------------------------------------------------------------------------------

    def metrics(self, plan_starts: Sequence[int | None] | None = None) -> dict[str, Any]:
        """The ``timeline`` metrics. ``plan_starts``: per plan of the run (metrics ``plans``),
        the instant after which it emitted (None: from the start); with it every entry names
        the plan in charge at its end."""
        w = self.width
        lat_by: dict[int, list[float]] = {}
        if len(self._emit_second):
            seconds = np.frombuffer(self._emit_second, dtype=np.int64) // w
            lat = np.frombuffer(self._emit_latency, dtype=np.float64)
            order = np.argsort(seconds, kind="stable")
            seconds, lat = seconds[order], lat[order]
            cuts = np.flatnonzero(np.diff(seconds)) + 1
            for part_s, part_l in zip(np.split(seconds, cuts), np.split(lat, cuts), strict=True):
                lat_by[int(part_s[0])] = [
                    round(float(np.percentile(part_l, 50)), 3),
                    round(float(part_l.max()), 3),
                ]
        starts = list(plan_starts) if plan_starts else None
        entries = []
        for b in sorted(self._buckets):
            tuples, wall, results, instants = self._buckets[b]
            p50, mx = lat_by.get(b, [None, None])
            entry: dict[str, Any] = {
                "t_s": b * w,
                "tuples": int(tuples),
                "wall_s": round(wall, 6),
                "throughput": round(tuples / wall, 3) if wall > 0 else None,
                "results": int(results),
                "instants": int(instants),
                "latency_ms": {"p50": p50, "max": mx},
            }
            if starts is not None and self.origin is not None:
                end = self.origin + (b + 1) * w * self.tps  # the bucket's last instant
                entry["plan"] = max(
                    (j for j, s in enumerate(starts) if s is None or s < end), default=0
                )
            entries.append(entry)
        return {
            "origin": self.origin,
            "ticks_per_second": self.tps,
            "resolution_s": w,
            "max_entries": self.max_entries,
            "entries": entries,
        }

    # -- internals ----------------------------------------------------------------------------

    def _instant_second(self, instant: int) -> int:
        if self.origin is None:
            return 0
        return max(0, (instant - 1 - self.origin) // self.tps)

    def _bucket(self, second: int) -> list[float]:
        b = second // self.width
        bucket = self._buckets.get(b)
        if bucket is None:
            bucket = self._buckets[b] = [0, 0.0, 0, 0]
        return bucket

    def _add_wall(self, bucket: list[float], wall: float) -> None:
        if self._last_wall is not None:
            bucket[1] += max(0.0, wall - self._last_wall)
        self._last_wall = wall

    def _grow(self, second: int) -> None:
        """Coarsen until ``second`` falls within ``max_entries`` buckets."""
        while second // self.width >= self.max_entries:
            self.width *= 2
            merged: dict[int, list[float]] = {}
            for b, vals in self._buckets.items():
                into = merged.setdefault(b // 2, [0, 0.0, 0, 0])
                for k in range(4):
                    into[k] += vals[k]
            self._buckets = merged

"""Whether a run kept up with a live source, judged by lag rather than by a nominal rate.

A live source (MQTT, stdin, a pipe) delivers at its own pace, so ``throughput >= rate`` (the
rule for files and generators replayed at ``--pace max``) says little about it: a run that
takes a 2,000 tuples/s stream as it comes measures a little under 2,000/s over its wall
time, and the rate it is compared with is only the catalog's (or ``--rate``). The rule for a
run that reads a live source:

* after each batch the plan took and each instant it emitted, its **lag** is the wall time
  since the first batch, less the time the run spent waiting for live input meanwhile
  (engines/input_wait.py), less the event time from the first tuple to the newest one taken
  so far (the instants' work counts, also the work after the stream's last batch);
* the run **kept up** when over no stretch of it the lag grew by more than
  ``max(1 s, 10% of the event span)`` (the tolerance ``--pace realtime`` uses):
  ``max_i (lag_i - min_{j<=i} lag_j) <= tolerance``. That largest growth is reported as
  ``live_lag_s``.

A plan slower than the stream's event time never waits for input, and its lag grows with
every event-second; one that keeps up waits for the next data and its lag does not grow. The
waiting is left out so that a source that keeps the run waiting (quiet, paused, replaying
old timestamps, published faster than real time) is not counted as the plan falling behind.

Example:
    >>> meter = LagMeter(tps=1)
    >>> meter.start(wall=0.0, waited=0.0, ts=100)
    >>> for second in range(1, 6):  # a plan at half the stream's speed, never waiting
    ...     meter.taken(wall=2.0 * second, waited=0.0, ts=100 + second)
    >>> meter.growth, meter.kept_up(event_s=5.0)
    (5.0, False)
    >>> meter = LagMeter(tps=1)
    >>> meter.start(wall=0.0, waited=0.0, ts=100)
    >>> for second in range(1, 6):  # busy 0.2 s per event-second, waiting the rest
    ...     wall = second + 0.2  # second s's data arrives at s and takes 0.2 s
    ...     meter.taken(wall=wall, waited=wall - 0.2 * second, ts=100 + second)
    >>> round(meter.growth, 6), meter.kept_up(event_s=5.0)
    (0.0, True)
"""

from __future__ import annotations


def tolerance_s(event_s: float) -> float:
    """How far a run may fall behind its stream and still have kept up (seconds)."""
    return max(1.0, 0.1 * event_s)


class LagMeter:
    """The lag rule of the module docstring, fed by the run loop (``tps``: ticks per second
    of the query's time base)."""

    def __init__(self, tps: int) -> None:
        self.tps = tps
        self._wall0: float | None = None
        self._waited0 = 0.0
        self._ts0 = 0
        self._newest = 0
        self._lowest: float | None = None
        #: the largest growth of the lag over any stretch of the run (seconds)
        self.growth = 0.0

    def start(self, wall: float, waited: float, ts: int) -> None:
        """The first batch is taken at ``wall``, ``waited`` seconds of input wait so far,
        its first timestamp ``ts`` (ticks)."""
        self._wall0, self._waited0, self._ts0, self._newest = wall, waited, ts, ts
        self._lowest = 0.0  # the lag at the start, by definition

    def taken(self, wall: float, waited: float, ts: int) -> None:
        """The plan took a batch whose newest timestamp is ``ts``, or emitted instant ``ts``;
        done at ``wall``."""
        if self._wall0 is None:
            self.start(wall, waited, ts)
        assert self._wall0 is not None
        self._newest = max(self._newest, ts)
        busy = (wall - self._wall0) - (waited - self._waited0)
        lag = busy - (self._newest - self._ts0) / self.tps
        self._lowest = lag if self._lowest is None else min(self._lowest, lag)
        self.growth = max(self.growth, lag - self._lowest)

    def kept_up(self, event_s: float) -> bool:
        return self.growth <= tolerance_s(event_s)

"""Wall time spent waiting for a live source (MQTT, stdin, a pipe) to deliver anything.

The readers add to it while they block with nothing to read (``MqttFeed.chunks``,
``Pipe._fill``); the run loop reads it, so that a run over a live source can tell the time
its plan needed from the time the source kept it waiting (``kept_up`` of a live run,
engines/runtime/live_lag.py). One process-wide clock, as the stop flag of
engines/interrupts.py is: readers run on the thread that runs the plan.

Example:
    >>> before = waited()
    >>> with waiting():
    ...     pass
    >>> waited() >= before
    True
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

_waited = 0.0


def waited() -> float:
    """Seconds spent waiting for live input so far (in this process)."""
    return _waited


@contextmanager
def waiting() -> Iterator[None]:
    """Count the time inside the block as waiting for input."""
    global _waited
    start = time.perf_counter()
    try:
        yield
    finally:
        _waited += time.perf_counter() - start

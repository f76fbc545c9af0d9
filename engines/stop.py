"""A run's stop request, visible to code that blocks for long inside an instant.

``hycq run`` turns SIGINT/SIGTERM into a request to stop (``engines.runtime._StopSignal``):
the run loop sees it between batches. Some work inside one instant can take far longer than
a batch, above all restarting a columnar engine after a fault (a new Spark JVM takes ~10 s),
so the signal handler also sets this process-wide flag (signals are process-wide too), and
such code polls it and gives up with :class:`StopRequested`, which the run loop treats like
the signal itself: the instants already emitted are committed and the run ends as
interrupted.
"""

from __future__ import annotations

import threading

from optimizer.ir.errors import HycqError

_requested = threading.Event()


class StopRequested(HycqError):
    """A stop was requested while an instant was being computed; the instant is abandoned."""


def request() -> None:
    """Record a stop request (called from the signal handler)."""
    _requested.set()


def clear() -> None:
    """Forget any stop request (at the start and end of a run)."""
    _requested.clear()


def requested() -> bool:
    return _requested.is_set()


def check(what: str) -> None:
    """Raise :class:`StopRequested` if a stop was requested; ``what`` names the work given up."""
    if _requested.is_set():
        raise StopRequested(f"stop requested: {what} abandoned")


def join(thread: threading.Thread, what: str, poll_s: float = 0.1) -> None:
    """Wait for ``thread`` to finish, or raise :class:`StopRequested` as soon as a stop is
    requested (the thread is left to finish on its own; make it a daemon)."""
    while thread.is_alive():
        check(what)
        thread.join(poll_s)

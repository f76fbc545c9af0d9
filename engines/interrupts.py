"""Signals as requests to stop, for every hycq command.

Two levels, both installed only on the main thread (where Python runs signal handlers) and
never over a signal the parent process set to be ignored (``nohup``, background jobs):

* :func:`install_default` (the CLI, for the whole process): SIGINT, SIGTERM and SIGHUP raise
  :class:`Interrupted`, so ``finally`` blocks run and no temporary file survives the process
  (the default action of SIGTERM and SIGHUP would kill it on the spot).
* :class:`GracefulStop` (``hycq run``, for the run loop): the *first* signal only records a
  request; the run loop, the instant loop (through the sink) and long waits (Spark start-up,
  reading a pipe) poll :func:`stop_requested` or call :func:`check_stop`, which raises
  :class:`StopRequested` for the run loop to turn into the graceful stop (the instants emitted
  so far are committed). A second signal raises :class:`Interrupted` at once.

Whatever an interrupted call turns the exception into (DuckDB reports "Query interrupted" as a
RuntimeError), :func:`received` still names the signal, so the CLI exits with 128 + its
number instead of calling it an internal error.

Example:
    >>> stop = GracefulStop(enabled=False)
    >>> stop_requested(), received()
    (False, None)
    >>> stop.restore()
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

#: The signals hycq turns into a stop (SIGHUP: the terminal went away).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_received: int | None = None  # the last stop signal this process received
_stop: int | None = None  # a graceful stop is requested (by this signal)
_hard: int | None = None  # Interrupted was raised (by this signal): stop at once


class Interrupted(KeyboardInterrupt):
    """A signal stopped the process at once (exit status 128 + ``signum``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopRequested(BaseException):
    """Raised where a graceful stop was requested; the run loop stops there and commits.

    A BaseException, so that handlers of ordinary errors (engine faults, reader errors) let
    it through.
    """


def received() -> int | None:
    """The number of the last stop signal received, or None."""
    return _received


def stop_requested() -> bool:
    """Whether a graceful stop is pending (cheap: a module global)."""
    return _stop is not None


def request_stop(signum: int = signal.SIGINT) -> None:
    """Request a graceful stop as a first signal does, without one (tests, an application
    embedding hycq): the next check ends the run as interrupted by ``signum``."""
    global _stop
    _stop = signum


def reraise_if_interrupted() -> None:
    """Raise :class:`Interrupted` again if a signal already stopped the process at once: for
    handlers of engine failures, since a call cut short by it is not an engine fault."""
    if _hard is not None:
        raise Interrupted(_hard)


def check_stop() -> None:
    """Raise :class:`StopRequested` when a graceful stop is pending."""
    if _stop is not None:
        raise StopRequested


def wait(thread: threading.Thread, timeout: float | None) -> bool:
    """Join ``thread`` for up to ``timeout`` seconds (None: no limit) while honouring stop
    requests; True if it finished. Raises :class:`StopRequested` on a graceful stop."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while thread.is_alive():
        check_stop()
        left = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
        if left <= 0:
            return False
        thread.join(left)
    return True


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise(signum: int, frame: Any) -> None:
    global _received, _hard
    _received = _hard = signum
    raise Interrupted(signum)


def install_default() -> dict[int, Any]:
    """Make SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` (and forget any signal
    received before); returns the previous handlers for :func:`restore`."""
    global _received, _stop, _hard
    _received = _stop = _hard = None
    previous: dict[int, Any] = {}
    if not _main_thread():
        return previous
    for sig in SIGNALS:
        handler = signal.getsignal(sig)
        if handler is not signal.SIG_IGN:
            previous[sig] = signal.signal(sig, _raise)
    return previous


def restore(previous: dict[int, Any]) -> None:
    """Put back handlers saved by :func:`install_default`."""
    for sig, handler in previous.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


class GracefulStop:
    """The run loop's handler: the first signal requests a stop, a second one raises.

    ``enabled`` False (API callers, tests) installs nothing; :meth:`restore` puts the
    previous handlers back.
    """

    def __init__(self, enabled: bool) -> None:
        global _stop
        _stop = None
        self.signum: int | None = None
        """The signal that requested the stop, or None."""
        self._previous: dict[int, Any] = {}
        if enabled and _main_thread():
            for sig in SIGNALS:
                previous = signal.getsignal(sig)
                if previous is not signal.SIG_IGN:
                    self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        global _received, _stop, _hard
        _received = signum
        if self.signum is not None:
            _hard = signum
            raise Interrupted(signum)
        self.signum = _stop = signum

    @property
    def requested(self) -> bool:
        if self.signum is None and _stop is not None:
            self.signum = _stop  # requested without a signal (request_stop)
        return self.signum is not None

    def sleep_until(self, due: float) -> None:
        """Sleep until ``due`` (perf_counter time) or until a stop is requested."""
        while not self.requested:
            left = due - time.perf_counter()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    def restore(self) -> None:
        """Put the previous handlers back; the pending request (``signum``) is kept here
        but no longer seen by :func:`stop_requested`."""
        global _stop
        _stop = None
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}

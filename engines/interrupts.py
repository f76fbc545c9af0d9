"""Signals as requests to stop, for every hycq command.

Two levels, both installed only on the main thread (where Python runs signal handlers) and
never over a signal the parent process set to be ignored (``nohup``, background jobs):

* :func:`install_default` (the CLI, for the whole process): SIGINT, SIGTERM and SIGHUP raise
  :class:`Interrupted`, so ``finally`` blocks run and no temporary file survives the process
  (the default action of SIGTERM and SIGHUP would kill it on the spot).
* :class:`GracefulStop` (``hycq run``, for the run loop): the *first* signal records a
  request; the run loop, the instant loop (through the sink) and long waits (Spark start-up,
  reading a pipe) poll :func:`stop_requested` or call :func:`check_stop`, which raises
  :class:`StopRequested` for the run loop to turn into the graceful stop (the instants emitted
  so far are committed). A second signal raises :class:`Interrupted` at once.

Inside an instant's work (the run loop's calls into the engines, :func:`interruptible`) the
first signal does not wait for a poll: the handler raises :class:`StopRequested` where the
engine is, however long its loops (a join producing a cross product, a migration's state
transfer). The engine's state is then thrown away (the output holds the instants completed
before; a checkpoint is written from its input log, not from that state), so nothing there
needs to be consistent, except what outlives the stop: the sink and the dead-letter file,
written in :func:`held` sections, where the raise waits for the section's end. A call into a
columnar engine (:func:`native`) is held too, and the stop cancels it instead: DuckDB through
``interrupt()``, Spark by cancelling its jobs, DataFusion (which has no cancel) by running the
query on a helper thread that the stop abandons (:func:`run_stoppable`). So a stop is
honoured within a fraction of a second of the signal wherever the run is (docs/checkpoints.md,
"Stopping").

While the run loop waits for input (:func:`waiting_for_input`), :func:`check_stop` also runs
the loop's callback, so that the loop can take a checkpoint while a live source is quiet.

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

import contextlib
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

#: The signals hycq turns into a stop (SIGHUP: the terminal went away).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_received: int | None = None  # the last stop signal this process received
_stop: int | None = None  # a graceful stop is requested (by this signal)
_hard: int | None = None  # Interrupted was raised (by this signal): stop at once
_zone = 0  # depth of interruptible() sections: a stop request raises there at once
_held = 0  # depth of held() sections: the raise waits for the outermost one's end
_cancels: list[Callable[[], None]] = []  # the running native calls' cancels, innermost last
_waiting: Callable[[], None] | None = None  # the run loop's callback while it waits for input
_in_waiting = False  # that callback is running (it is not re-entered)

T = TypeVar("T")


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
    embedding hycq): the next check ends the run as interrupted by ``signum``, and a running
    native call (:func:`native`) is cancelled."""
    global _stop
    _stop = signum
    _cancel_native()


def reraise_if_interrupted() -> None:
    """Raise :class:`Interrupted` again if a signal already stopped the process at once: for
    handlers of engine failures, since a call cut short by it is not an engine fault."""
    if _hard is not None:
        raise Interrupted(_hard)


def check_stop() -> None:
    """Raise :class:`StopRequested` when a graceful stop is pending. While the run loop
    waits for input (:func:`waiting_for_input`), also run its callback: every wait that
    polls for stop requests gives the loop its turn (a checkpoint while a source is quiet)."""
    global _in_waiting
    if _stop is not None:
        raise StopRequested
    if _waiting is not None and not _in_waiting and not _zone:
        _in_waiting = True
        try:
            _waiting()
        finally:
            _in_waiting = False


@contextlib.contextmanager
def waiting_for_input(callback: Callable[[], None] | None) -> Iterator[None]:
    """While the body runs (the run loop's wait for its next input), :func:`check_stop`
    calls ``callback`` (None: nothing)."""
    global _waiting
    previous, _waiting = _waiting, callback
    try:
        yield
    finally:
        _waiting = previous


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """An instant's work: a stop request raises :class:`StopRequested` inside it at once
    (from the signal handler, wherever the code is), not at the next poll. Only for code
    whose state the stop throws away (module docstring); what must outlive it goes in
    :func:`held`. A stop already pending raises on entry."""
    global _zone
    _zone += 1
    try:
        if _stop is not None and not _held:
            raise StopRequested
        yield
    finally:
        _zone -= 1


@contextlib.contextmanager
def held() -> Iterator[None]:
    """A section of an instant's work that a stop must not cut (writing an instant's results
    or a dead letter): a stop requested inside raises at its end instead."""
    global _held
    _held += 1
    try:
        yield
    finally:
        _held -= 1
    if _stop is not None and _zone and not _held:
        raise StopRequested


@contextlib.contextmanager
def native(cancel: Callable[[], None]) -> Iterator[None]:
    """A call into a columnar engine (held, like :func:`held`): a stop request calls
    ``cancel`` (e.g. DuckDB's ``interrupt``), which makes the call fail at once; an error
    leaving the call while a stop is pending becomes :class:`StopRequested`."""
    _cancels.append(cancel)
    try:
        with held():
            yield
    except Exception:
        if _stop is not None:  # the cancelled call's error (or any): the stop it was
            raise StopRequested from None
        raise
    finally:
        _cancels.remove(cancel)


def in_zone() -> bool:
    """Whether an instant's work is running (:func:`interruptible`)."""
    return _zone > 0


class _Worker:
    """The daemon thread that runs :func:`run_stoppable`'s calls, one at a time (a thread
    per call would cost more than a small query)."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event]]
        self.jobs = queue.SimpleQueue()
        thread = threading.Thread(target=self._serve, name="hycq-native-call", daemon=True)
        thread.start()

    def _serve(self) -> None:
        while True:
            call, box, done = self.jobs.get()
            try:
                box["value"] = call()
            except BaseException as err:  # noqa: BLE001 - re-raised on the caller's thread
                box["error"] = err
            done.set()


_worker: _Worker | None = None


def run_stoppable(call: Callable[[], T]) -> T:
    """``call()`` on a helper thread, waited for while honouring stop requests: for a native
    call that cannot be cancelled (DataFusion). On a stop it is abandoned (the thread runs on
    to its end in the background; its result is dropped; later calls get a new thread) and
    :class:`StopRequested` raised."""
    global _worker
    if _worker is None:
        _worker = _Worker()
    box: dict[str, Any] = {}
    done = threading.Event()
    _worker.jobs.put((call, box, done))
    try:
        while not done.wait(0.05):
            if _stop is not None:
                raise StopRequested
    except BaseException:
        _worker = None  # busy with the abandoned call
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def _cancel_native() -> None:
    """Cancel the running native calls (a signal handler's first act); a cancel that fails
    is ignored: the call then ends by itself, and the stop follows."""
    for cancel in tuple(_cancels):
        with contextlib.suppress(Exception):  # best effort, inside a signal handler
            cancel()


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
    _cancel_native()  # a DuckDB query would otherwise run to its end before failing
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
        global _stop, _zone, _held
        _stop = None
        _zone = _held = 0
        self.signum: int | None = None
        """The signal that requested the stop, or None."""
        self._previous: dict[int, Any] = {}
        self._wakeup: tuple[int, int] | None = None  # (the pipe's write end, previous fd)
        if enabled and _main_thread():
            for sig in SIGNALS:
                previous = signal.getsignal(sig)
                if previous is not signal.SIG_IGN:
                    self._previous[sig] = signal.signal(sig, self._handle)
            if self._previous:
                self._watch()

    def _watch(self) -> None:
        """Cancel native calls as the signal arrives, from a helper thread: the Python
        handler runs only when the main thread next runs Python code, and DuckDB lets it
        run only at its own checks (up to seconds apart). The C-level handler writes the
        signal's number to a pipe (``signal.set_wakeup_fd``) that the thread reads."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        try:
            previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except (ValueError, OSError):  # not supported here: the handler cancels, later
            os.close(read_fd)
            os.close(write_fd)
            return
        self._wakeup = (write_fd, previous)
        stops = {int(sig) for sig in self._previous}

        def watch() -> None:
            while True:
                try:
                    data = os.read(read_fd, 64)
                except OSError:
                    return
                if not data:  # restore() closed the pipe's write end
                    os.close(read_fd)
                    return
                if any(b in stops for b in data):
                    _cancel_native()

        threading.Thread(target=watch, name="hycq-signal-watch", daemon=True).start()

    def _handle(self, signum: int, frame: Any) -> None:
        global _received, _stop, _hard
        _received = signum
        if self.signum is not None:
            _hard = signum
            _cancel_native()
            raise Interrupted(signum)
        self.signum = _stop = signum
        _cancel_native()
        if _zone and not _held:  # inside an instant's work: stop it here (module docstring)
            raise StopRequested

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
        global _stop, _zone, _held
        _stop = None
        _zone = _held = 0  # even if a raise cut a section's bookkeeping short
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}
        if self._wakeup is not None:
            write_fd, previous = self._wakeup
            self._wakeup = None
            if _main_thread():
                signal.set_wakeup_fd(previous)
            os.close(write_fd)  # the watcher reads the end of the pipe, closes it, stops

"""One MQTT client's connection as the user and the metrics see it.

A user watching a silent run must be able to tell a dead broker from a quiet topic: when the
connection is lost, hycq prints a ``warning:`` line on stderr at once, another while the broker
stays unreachable (every :data:`REMIND_EVERY_S`), and one when the connection is back. A
broker that flaps is summarised, not echoed: after a "reconnected" line, the next "lost" line
waits until :data:`WARN_EVERY_S` have passed, and then counts the disconnects meanwhile (a
"reconnected" line always follows a "lost" one at once, so the last line printed tells the
state). The counters go to the run's metrics (:meth:`Link.metrics`).

:class:`Link` is told by paho's network thread (:meth:`up`, :meth:`lost`, :meth:`tick` on a
failed reconnect) and ticked by the thread that reads or publishes, so a deferred line comes
out even when the broker sends nothing.

Example:
    >>> import io
    >>> err = io.StringIO()
    >>> link = Link("r", "h:1", "no data arrives meanwhile", err)
    >>> link.up(); link.lost("gone"); link.up()
    >>> for line in err.getvalue().splitlines():
    ...     print(line.split(";")[0].replace("0.0 s", "T s"))
    warning: r: lost the connection to the MQTT broker at h:1 (gone)
    warning: r: reconnected to the MQTT broker at h:1 after T s
    >>> link.connects, link.disconnects
    (2, 1)
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

#: Reconnect backoff (seconds): paho waits the first delay, then doubles it up to the second.
RECONNECT_MIN_S, RECONNECT_MAX_S = 1, 5
#: At most one "lost" line per this many seconds after a "reconnected" one (a flapping broker).
WARN_EVERY_S = 10.0
#: While the broker stays unreachable, a reminder this often.
REMIND_EVERY_S = 30.0


class Link:
    """Connection state, counters and rate-limited warnings of one client (module
    docstring). ``label`` names the client's role (a stream and its address, or an output
    option), ``broker`` its HOST:PORT, ``meanwhile`` what a lost connection means for the run.
    """

    def __init__(
        self,
        label: str,
        broker: str,
        meanwhile: str,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self._clock = clock
        self.broker = broker
        self.meanwhile = meanwhile
        self._stream = stream
        self.connects = 0
        self.disconnects = 0
        self.warnings = 0
        self._down_s = 0.0
        self._longest_s = 0.0
        self._spell_s = 0.0  # the last outage's length
        self._down_since: float | None = None
        self._reason = ""
        self._lock = threading.Lock()
        #: what the last line printed said (down or not), when, and the disconnects then
        self._told_down = False
        self._told_at = -math.inf
        self._told_disconnects = 0

    # -- told by paho's thread --------------------------------------------------------------

    def up(self) -> None:
        """The broker accepted a connection."""
        with self._lock:
            self.connects += 1
            if self._down_since is not None:
                self._spell_s = self._clock() - self._down_since
                self._down_s += self._spell_s
                self._longest_s = max(self._longest_s, self._spell_s)
                self._down_since = None
            self._tick()

    def lost(self, reason: Any) -> None:
        """The connection was lost (paho reconnects on its own)."""
        with self._lock:
            self.disconnects += 1
            if self._down_since is None:
                self._down_since = self._clock()
            self._reason = str(reason)
            self._tick()

    def tick(self) -> None:
        """Print what is due (a deferred line, a reminder)."""
        with self._lock:
            self._tick()

    # -- read by the run --------------------------------------------------------------------

    def down_for(self) -> float | None:
        """Seconds since the connection was lost, or None while it is up."""
        since = self._down_since
        return None if since is None else self._clock() - since

    def metrics(self) -> dict[str, Any]:
        down = self.down_for() or 0.0
        return {
            "connects": self.connects,
            "disconnects": self.disconnects,
            "disconnected_s": round(self._down_s + down, 3),
            "longest_disconnect_s": round(max(self._longest_s, down), 3),
            "connection_warnings": self.warnings,
        }

    # -- the rule ---------------------------------------------------------------------------

    def _tick(self) -> None:
        now = self._clock()
        down = self._down_since is not None
        since_told = now - self._told_at
        if down and not self._told_down:
            if since_told < WARN_EVERY_S:
                return  # a flapping broker: said once per WARN_EVERY_S
            flaps = self.disconnects - self._told_disconnects
            again = f" ({flaps} disconnects in the last {since_told:.0f} s)" if flaps > 1 else ""
            self._say(
                f"lost the connection to the MQTT broker at {self.broker} ({self._reason})"
                f"{again}; reconnecting ({RECONNECT_MIN_S} s, doubling to {RECONNECT_MAX_S} s)"
                f"; {self.meanwhile}",
                now,
            )
        elif down and since_told >= REMIND_EVERY_S:
            spell = now - (self._down_since or now)
            self._say(f"the MQTT broker at {self.broker} is still unreachable ({spell:.0f} s)", now)
        elif not down and self._told_down:
            self._say(
                f"reconnected to the MQTT broker at {self.broker} after {self._spell_s:.1f} s",
                now,
            )
        elif not down and self.disconnects > self._told_disconnects and since_told >= WARN_EVERY_S:
            flaps = self.disconnects - self._told_disconnects
            self._say(
                f"lost and regained the connection to the MQTT broker at {self.broker} "
                f"{flaps} time(s) in the last {since_told:.0f} s",
                now,
            )

    def _say(self, text: str, now: float) -> None:
        self._told_down = self._down_since is not None
        self._told_at = now
        self._told_disconnects = self.disconnects
        self.warnings += 1
        stream = self._stream if self._stream is not None else sys.stderr
        stream.write(f"warning: {self.label}: {text}\n")
        stream.flush()

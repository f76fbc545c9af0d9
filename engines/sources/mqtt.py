"""Live streams over MQTT (paho-mqtt, QoS 1): a subscription read as a stream's input, and a
publisher for a run's results.

Input (``--data STREAM=mqtt://HOST:PORT/TOPIC``): each message's payload is

* one or more CSV lines in the stream's raw format (no header: the catalog's columns in
  order; for the smart-plug data the DEBS 2014 line ``id,ts,value,property,plug,household,
  house``), or
* a JSON object with the catalog's columns by name (a raw-format column name works too;
  extra keys are ignored), or a JSON array of such objects;

and the payload ``{"end_of_stream": true}`` ends the stream (the run ends cleanly once every
stream has ended). Whatever in a message is not rows (binary or non-UTF-8 bytes, JSON the
decoder refuses or nested past its limit, wrong JSON types, an empty message, a message or
line over the size limits, an unterminated quote) goes to the dead letters with the topic,
the message's number and the reason, as a bad file row does, and costs only what it holds
(engines/sources/mqtt_payload.py).

:class:`MqttFeed` turns the subscription into the line feed the CSV reader parses pipes from
(``sniff`` / ``chunks`` / ``close``, engines.sources.files.csv_reader.Pipe): JSON objects
become raw CSV lines, so every value is validated by the one reader. paho's network thread
puts messages on a queue bounded in messages (:data:`QUEUE_MESSAGES`) and bytes
(:data:`QUEUE_BYTES`); when the plan is slower than the broker, the queue fills and the
network thread waits for room. Unacknowledged QoS 1 messages then stay with the broker (its
per-client queue) instead of in hycq's memory: that is the backpressure, and
``queue_full_waits`` / ``queue_full_s`` in the metrics say how often and how long it applied.

The session is persistent (``clean_session=False``, a client id per run) and the client
reconnects with backoff (1 s doubling to 5 s) and resubscribes, so a broker restart loses
no QoS 1 message the broker kept (with the broker's persistence on, also those it held when
it went down). A lost connection is a ``warning:`` on stderr (and another when it is back,
engines/sources/mqtt_link.py); ``connects``, ``disconnects`` and ``disconnected_s`` are
reported. Messages are acknowledged when they reach the queue: a crash of hycq loses what
was queued but not yet processed (``--checkpoint`` bounds it).

Output (``--output mqtt://HOST:PORT/TOPIC``): :class:`MqttPublisher` publishes each
instant's results as one message of JSON lines (``_ts`` included), QoS 1. It holds what the
broker has not acknowledged: while connected at most :data:`PUBLISH_WINDOW` messages, while
the broker is unreachable at most :data:`OUTPUT_BUFFER_MESSAGES` messages and
:data:`OUTPUT_BUFFER_BYTES` bytes; paho reconnects with the same backoff and sends them
again (at least once: one in flight when the broker died may
arrive twice). A full buffer makes the run wait for the broker, and so does the run's end
(every message acknowledged before it reports success); once the broker has been
unreachable for :data:`OUTPUT_OUTAGE_S` seconds, the wait ends with exit 2 naming the broker
and the results it did not take.
"""

from __future__ import annotations

import bisect
import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from engines import interrupts
from engines.input_wait import waiting
from engines.sources.files.csv_reader import IDLE
from engines.sources.mqtt_link import RECONNECT_MAX_S, RECONNECT_MIN_S, Link
from engines.sources.mqtt_payload import (
    HEAD_BYTES,
    MAX_LINE_BYTES,
    MAX_MESSAGE_BYTES,
    payload_lines,
)
from optimizer.ir.errors import DataError, OptionError

SCHEME = "mqtt://"
#: The payload that ends a stream.
END_OF_STREAM = {"end_of_stream": True}
#: Messages, and their bytes, paho's thread may queue ahead of the plan before it waits
#: (backpressure).
QUEUE_MESSAGES = 1024
QUEUE_BYTES = 64 << 20
#: A chunk for the reader grows while messages keep coming, until the queue has been empty
#: this long (seconds) or the chunk holds a reader block: at full speed the plan sees big
#: batches (per-batch work amortized), at a trickle each message within 10 ms.
QUIET_S = 0.01
#: Seconds to wait for the broker's CONNACK (and SUBACK) before giving up with exit 2.
CONNECT_TIMEOUT_S = 10.0
#: Unacknowledged messages the publisher lets paho hold while connected before it waits (flow
#: control: the broker takes them as fast as it acknowledges).
PUBLISH_WINDOW = 256
#: Result messages, and their bytes, the publisher holds until the broker acknowledges them
#: while it is unreachable: what carries a run across an outage of the output broker.
OUTPUT_BUFFER_MESSAGES = 10_000
OUTPUT_BUFFER_BYTES = 256 << 20
#: How long (seconds) a run waits for an unreachable output broker when the buffer is full
#: or the run has ended: then it stops with exit 2 naming the broker.
OUTPUT_OUTAGE_S = 60.0

_ids = itertools.count()


def is_mqtt(text: object) -> bool:
    return isinstance(text, str | MqttUrl) and str(text).lower().startswith(SCHEME)


@dataclass(frozen=True)
class MqttUrl:
    """``mqtt://HOST[:PORT]/TOPIC`` (port 1883 by default; the topic may hold ``/`` and, to
    subscribe, the wildcards ``+`` and ``#``)."""

    host: str
    port: int
    topic: str

    @classmethod
    def parse(cls, text: str, option: str) -> MqttUrl:
        def bad(why: str) -> OptionError:
            return OptionError(
                f"{option} {text}: {why}",
                hint="an MQTT address is mqtt://HOST:PORT/TOPIC, e.g. mqtt://127.0.0.1:1883/plugs",
            )

        if not text.lower().startswith(SCHEME):
            raise bad("not an mqtt:// address")
        # split by hand: a topic's wildcard '#' is not a URL fragment
        authority, _, topic = text[len(SCHEME) :].partition("/")
        parts = urlsplit(f"//{authority}")
        try:
            port = parts.port if parts.port is not None else 1883
        except ValueError:
            raise bad("the port is not a number from 0 to 65535") from None
        host = parts.hostname
        if not host:
            raise bad("no host")
        if not topic:
            raise bad("no topic")
        return cls(host, port, topic)

    def __str__(self) -> str:
        return f"mqtt://{self.host}:{self.port}/{self.topic}"

    def check_publishable(self, option: str) -> None:
        """OptionError for a topic one cannot publish to (wildcards)."""
        if any(c in self.topic for c in "+#"):
            raise OptionError(
                f"{option} {self}: cannot publish to a topic with wildcards (+, #)",
                hint="name one topic, e.g. mqtt://127.0.0.1:1883/results",
            )

    @property
    def name(self) -> str:
        """Like ``Path.name``: how dead letters and messages name the source."""
        return f"mqtt topic {self.topic}"


def _client(client_id: str, clean: bool) -> Any:
    import paho.mqtt.client as mqtt

    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=clean,
        protocol=mqtt.MQTTv311,
    )
    client.reconnect_delay_set(RECONNECT_MIN_S, RECONNECT_MAX_S)
    return client


def _connect(client: Any, url: MqttUrl, option: str) -> None:
    try:
        client.connect(url.host, url.port, keepalive=30)
    except (OSError, ValueError) as err:
        raise DataError(
            f"{option}: cannot connect to the MQTT broker at {url.host}:{url.port}: "
            f"{getattr(err, 'strerror', None) or err}",
            hint="start the broker (e.g. mosquitto -p PORT) or fix the address",
        ) from None


def _client_id(role: str) -> str:
    return f"hycq-{role}-{os.getpid()}-{next(_ids)}-{time.time_ns() % 10**9}"


OnBadMessage = Callable[[str, int, str, str], None]


class _Inbox:
    """paho's thread to the reader: a queue bounded in messages and in bytes (a message
    bigger than the byte bound still goes in alone)."""

    def __init__(self, messages: int, max_bytes: int) -> None:
        self.maxsize = messages
        self.max_bytes = max_bytes
        self._items: deque[tuple[tuple[str, bytes, int], int]] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self.peak = 0
        self.peak_bytes = 0

    def _full(self, size: int) -> bool:
        return len(self._items) >= self.maxsize or (
            bool(self._items) and self._bytes + size > self.max_bytes
        )

    def put(self, item: tuple[str, bytes, int], timeout: float) -> bool:
        """Queue ``item`` (topic, payload kept, real size), waiting up to ``timeout``
        seconds for room; False if there was none."""
        size = len(item[1])
        with self._cond:
            if self._full(size):
                self._cond.wait(timeout)
                if self._full(size):
                    return False
            self._items.append((item, size))
            self._bytes += size
            self.peak = max(self.peak, len(self._items))
            self.peak_bytes = max(self.peak_bytes, self._bytes)
            self._cond.notify_all()
        return True

    def get(self, timeout: float) -> tuple[str, bytes, int] | None:
        """The oldest item, waiting up to ``timeout`` seconds; None if none came."""
        with self._cond:
            if not self._items:
                self._cond.wait(timeout)
                if not self._items:
                    return None
            item, size = self._items.popleft()
            self._bytes -= size
            self._cond.notify_all()
        return item


class MqttFeed:
    """A subscription as a line feed for the CSV reader (module docstring)."""

    def __init__(
        self,
        url: MqttUrl,
        columns: Sequence[tuple[str, str]],
        on_bad: OnBadMessage | None,
        option: str = "--data",
        queue_messages: int = QUEUE_MESSAGES,
        client_id: str | None = None,
        label: str | None = None,
    ) -> None:
        self.url = url
        #: per column of a raw line, in order: its catalog name and its raw-format name
        self.columns = list(columns)
        self.on_bad = on_bad
        self.option = option
        self._inbox = _Inbox(queue_messages, QUEUE_BYTES)
        self._subscribed = threading.Event()
        self._error: str | None = None
        self._ended = False
        self._closed = False
        # line numbers (as the CSV reader counts them: from 1, blank lines skipped) of the
        # first line of each message fed, with its topic and number (dead letters)
        self._starts: list[int] = []
        self._where: list[tuple[str, int]] = []
        self._lines = 0
        self._max_line = MAX_LINE_BYTES
        self.messages = 0
        self.bad_messages = 0
        self.rejected = 0
        #: the connection, told to the user (``warning:`` lines) and the metrics
        self.link = Link(
            label or f"{option} {url}", f"{url.host}:{url.port}", "no data arrives meanwhile"
        )
        self.queue_full_waits = 0
        self.queue_full_s = 0.0
        #: ``--idle-timeout``: wall seconds of silence (after some data) before the feed
        #: hands out an IDLE chunk (its stream then counts as past its last timestamp)
        self.idle_s: float | None = None
        self.idle_reports = 0
        #: a checkpointed run passes one id for the run and its resumes (the broker keeps
        #: the session, and what was published meanwhile, under it)
        self.client = _client(client_id or _client_id("in"), clean=False)
        self.client.on_connect = self._on_connect
        self.client.on_connect_fail = lambda *a: self.link.tick()
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe
        _connect(self.client, url, option)
        self.client.loop_start()
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while not self._subscribed.wait(0.1):
            if self._error is not None or time.monotonic() > deadline:
                self.close()
                raise DataError(
                    f"{option} {url}: the broker did not accept the subscription"
                    + (f": {self._error}" if self._error else f" in {CONNECT_TIMEOUT_S:g} s"),
                    hint="check the broker's address, its log and its access rules",
                )
            interrupts.check_stop()

    # -- paho's network thread --------------------------------------------------------------

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            self._error = str(reason)
            return
        self.link.up()
        # (re)subscribe on every connect: a broker without the session forgot it
        client.subscribe(self.url.topic, qos=1)

    def _on_subscribe(self, client: Any, userdata: Any, mid: Any, codes: Any, props: Any) -> None:
        failed = [c for c in codes if c.is_failure]
        if failed:
            self._error = f"subscription refused ({failed[0]})"
        else:
            self._subscribed.set()

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        if not self._closed:
            self.link.lost(reason)

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        payload = msg.payload
        size = len(payload)
        # an oversize message is a dead letter: only its head is kept (engines/sources/
        # mqtt_payload.py), so the queue's memory stays bounded
        kept = bytes(payload[:HEAD_BYTES]) if size > MAX_MESSAGE_BYTES else bytes(payload)
        try:
            topic = str(msg.topic)
        except UnicodeDecodeError:  # brokers refuse such topics; never end paho's thread
            topic = self.url.topic
        item = (topic, kept, size)
        if self._inbox.put(item, 0):
            return
        # backpressure: wait for the plan, the broker keeps the rest
        self.queue_full_waits += 1
        t0 = time.monotonic()
        while not self._closed and not self._inbox.put(item, 0.1):
            pass
        self.queue_full_s += time.monotonic() - t0

    # -- the reader's side (main thread) ----------------------------------------------------

    def sniff(self) -> bytes:
        """Raw lines have no header to sniff: nothing (the format is the stream's raw one)."""
        return b""

    def _next(self, timeout: float) -> tuple[str, bytes, int] | None:
        """The next message, waiting up to ``timeout`` (counted as waiting for input)."""
        with waiting():
            return self._inbox.get(timeout)

    def chunks(self, block: int) -> Iterator[bytes]:
        """Complete lines of the messages that have arrived, at most about ``block`` bytes at
        a time (``QUIET_S``); ends at the end-of-stream message."""
        last: float | None = None  # when the last chunk (or IDLE) was handed out
        # a line must fit the reader's block (Arrow cannot parse one that straddles two)
        self._max_line = min(MAX_LINE_BYTES, block // 2)
        while not self._ended:
            self.link.tick()
            item = self._next(0.1)
            if item is None:
                interrupts.check_stop()
                if (
                    self.idle_s is not None
                    and last is not None
                    and time.monotonic() - last >= self.idle_s
                ):
                    last = time.monotonic()
                    self.idle_reports += 1
                    yield IDLE
                continue
            parts = [self._lines_of(*item)]
            size = len(parts[0])
            while size < block and not self._ended:
                # more while they keep coming: big batches run the plan faster
                item = self._next(QUIET_S)
                if item is None:
                    break
                parts.append(self._lines_of(*item))
                size += len(parts[-1])
            chunk = b"".join(parts)
            if chunk:
                last = time.monotonic()
                yield chunk

    def _lines_of(self, topic: str, payload: bytes, size: int) -> bytes:
        """A message's rows as raw CSV lines, each ending in a line end; what is not rows
        goes to the dead letters here (engines/sources/mqtt_payload.py)."""
        if self._ended:
            return b""
        self.messages += 1
        number = self.messages
        found = payload_lines(payload, self.columns, size, self._max_line)
        self._ended = found.end
        if found.rejected:
            self.bad_messages += 1
        for part in found.rejected:
            self._bad(topic, number, part.text, part.reason)
        lines = found.lines
        if lines:
            self._starts.append(self._lines + 1)
            self._where.append((topic, number))
            self._lines += len(lines)
        return b"".join(ln + b"\n" for ln in lines)

    def _bad(self, topic: str, number: int, text: str, reason: str) -> None:
        self.rejected += 1
        if self.on_bad is None:
            raise DataError(f"{self.url.name} message {number}: {reason}")
        self.on_bad(topic, number, text, reason)

    def where(self, line: int) -> tuple[str, int]:
        """The topic and message number of the CSV reader's line ``line``."""
        k = bisect.bisect_right(self._starts, line) - 1
        return self._where[max(k, 0)] if self._where else (self.url.topic, 0)

    @property
    def peak_queue(self) -> int:
        """The most messages the queue held at once."""
        return self._inbox.peak

    def metrics(self) -> dict[str, Any]:
        return {
            "source": str(self.url),
            "messages": self.messages,
            "bad_messages": self.bad_messages,
            "rejected_parts": self.rejected,
            **self.link.metrics(),
            "queue_capacity": self._inbox.maxsize,
            "queue_capacity_bytes": self._inbox.max_bytes,
            "peak_queue": self._inbox.peak,
            "peak_queue_bytes": self._inbox.peak_bytes,
            "queue_full_waits": self.queue_full_waits,
            "queue_full_s": round(self.queue_full_s, 3),
            "ended_by_message": self._ended,
            "idle_reports": self.idle_reports,
        }

    def close(self) -> None:
        """Unsubscribe (the broker stops keeping messages for this session) and disconnect."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._subscribed.is_set():
                self.client.unsubscribe(self.url.topic)
            self.client.disconnect()
        finally:
            self.client.loop_stop()


class MqttPublisher:
    """Publishes messages to one topic at QoS 1 and holds them until the broker acknowledges
    them, within a bound, across outages of the broker (module docstring); :meth:`close`
    waits for every acknowledgement."""

    def __init__(
        self,
        url: MqttUrl,
        option: str = "--output",
        buffer_messages: int | None = None,
        buffer_bytes: int | None = None,
        outage_s: float | None = None,
    ) -> None:
        url.check_publishable(option)
        self.url = url
        self.option = option
        self.buffer_messages = buffer_messages or OUTPUT_BUFFER_MESSAGES
        self.buffer_bytes = buffer_bytes or OUTPUT_BUFFER_BYTES
        self.outage_s = OUTPUT_OUTAGE_S if outage_s is None else outage_s
        self.messages = 0
        self.peak_unacked = 0
        #: message id -> bytes, of every message the broker has not acknowledged yet
        self._unacked: dict[int, int] = {}
        self._unacked_bytes = 0
        #: ids acknowledged by paho's thread, taken by the publishing thread (no shared lock:
        #: paho calls on_publish under its own)
        self._acked: deque[int] = deque()
        self._ack = threading.Event()
        self._connected = threading.Event()
        self._closing = False
        self.link = Link(
            f"{option} {url}",
            f"{url.host}:{url.port}",
            f"results are kept until it is back (at most {self.buffer_messages:,} messages)",
        )
        self.client = _client(_client_id("out"), clean=True)
        self.client.on_connect = self._on_connect
        self.client.on_connect_fail = lambda *a: self.link.tick()
        self.client.on_disconnect = self._on_disconnect
        self.client.on_publish = self._on_publish
        _connect(self.client, url, option)
        self.client.loop_start()
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while not self._connected.wait(0.1):
            if time.monotonic() > deadline:
                self.client.loop_stop()
                raise DataError(
                    f"{option} {url}: no answer from the broker in {CONNECT_TIMEOUT_S:g} s",
                    hint="check the broker's address and its log",
                )
            interrupts.check_stop()

    # -- paho's network thread --------------------------------------------------------------

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if not reason.is_failure:
            self.link.up()
            self._connected.set()

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        if not self._closing:
            self.link.lost(reason)

    def _on_publish(self, client: Any, userdata: Any, mid: int, reason: Any, props: Any) -> None:
        self._acked.append(mid)
        self._ack.set()

    # -- the publishing thread --------------------------------------------------------------

    def publish(self, payload: bytes | str) -> None:
        """Publish one message; waits while the buffer of unacknowledged ones is full."""
        import paho.mqtt.client as mqtt

        data = payload.encode() if isinstance(payload, str) else payload
        while not self._has_room(len(data)):
            self._wait("the buffer of unacknowledged results is full", stop=True)
        info = self.client.publish(self.url.topic, data, qos=1)
        # not connected: paho keeps the message and sends it once it is back
        if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
            raise DataError(
                f"{self.option} {self.url}: cannot publish: {mqtt.error_string(info.rc)}"
            )
        self._unacked[info.mid] = len(data)
        self._unacked_bytes += len(data)
        self.messages += 1
        self.peak_unacked = max(self.peak_unacked, len(self._unacked))
        self.link.tick()

    def _take_acks(self) -> None:
        self._ack.clear()
        while self._acked:
            size = self._unacked.pop(self._acked.popleft(), None)
            if size is not None:
                self._unacked_bytes -= size

    def _has_room(self, size: int) -> bool:
        """Whether one more message of ``size`` bytes fits: the window while connected, the
        buffer while the broker is unreachable."""
        self._take_acks()
        connected = self.link.down_for() is None
        limit = min(PUBLISH_WINDOW, self.buffer_messages) if connected else self.buffer_messages
        if len(self._unacked) >= limit:
            return False
        return not self._unacked or self._unacked_bytes + size <= self.buffer_bytes

    def _wait(self, why: str, stop: bool) -> None:
        """Wait a moment for acknowledgements; a DataError once the broker has been
        unreachable for ``outage_s``, or at once when it is and a stop was requested (a
        signal is not kept waiting on a broker that is gone). ``stop``: a stop request ends
        the wait with StopRequested instead (the run loop's graceful stop)."""
        down = self.link.down_for()
        stopping = not stop and interrupts.stop_requested()
        if stopping and down is not None and down < self.outage_s:
            why = "the run was stopped by a signal"
        if down is not None and (down >= self.outage_s or stopping):
            held = len(self._unacked)
            raise DataError(
                f"{self.option} {self.url}: the MQTT broker at {self.url.host}:{self.url.port} "
                f"has been unreachable for {down:.0f} s and {why}: the {held:,} result "
                f"message(s) ({self._unacked_bytes:,} bytes) it did not acknowledge are lost",
                hint=f"keep the broker up; hycq holds up to {self.buffer_messages:,} messages "
                f"and waits {self.outage_s:g} s for it (docs/live.md)",
            )
        if stop:
            interrupts.check_stop()
        self.link.tick()
        self._ack.wait(0.1)

    def metrics(self) -> dict[str, Any]:
        return {
            "published_messages": self.messages,
            "peak_unacknowledged": self.peak_unacked,
            "buffer_messages": self.buffer_messages,
            "buffer_bytes": self.buffer_bytes,
            **self.link.metrics(),
        }

    def flush(self, why: str = "a checkpoint waits for it") -> None:
        """Wait until the broker acknowledged every message published so far (a stop
        request does not cut this short: it is a commit)."""
        while self._unacked or self._acked:
            self._take_acks()
            if self._unacked:
                self._wait(why, stop=False)

    def close(self) -> None:
        """Wait until the broker acknowledged every message, then disconnect."""
        try:
            self.flush("the run has ended")
        finally:
            self._closing = True
            self.client.disconnect()
            self.client.loop_stop()

    def abort(self) -> None:
        self._closing = True
        self._unacked.clear()
        self.client.disconnect()
        self.client.loop_stop()

"""Live streams over MQTT (paho-mqtt, QoS 1): a subscription read as a stream's input, and a
publisher for a run's results.

Input (``--data STREAM=mqtt://HOST:PORT/TOPIC``): each message's payload is

* one or more CSV lines in the stream's raw format (no header: the catalog's columns in
  order; for the smart-plug data the DEBS 2014 line ``id,ts,value,property,plug,household,
  house``), or
* a JSON object with the catalog's columns by name (a raw-format column name works too;
  extra keys are ignored), or a JSON array of such objects;

and the payload ``{"end_of_stream": true}`` ends the stream (the run ends cleanly once every
stream has ended). A bad message or line goes to the dead letters with the topic, the
message's number and the reason, as a bad file row does.

:class:`MqttFeed` turns the subscription into the line feed the CSV reader parses pipes from
(``sniff`` / ``chunks`` / ``close``, engines.sources.files.csv_reader.Pipe): JSON objects
become raw CSV lines, so every value is validated by the one reader. paho's network thread
puts messages on a bounded queue (:data:`QUEUE_MESSAGES`); when the plan is slower than the
broker, the queue fills and the network thread waits for room. Unacknowledged QoS 1
messages then stay with the broker (its per-client queue) instead of in hycq's memory: that
is the backpressure, and ``queue_full_waits`` / ``queue_full_s`` in the metrics say how
often and how long it applied.

The session is persistent (``clean_session=False``, a client id per run) and the client
reconnects with backoff (0.1 s doubling to 5 s) and resubscribes, so a broker restart loses
no QoS 1 message the broker kept (with the broker's persistence on, also those it held when
it went down). ``connects``, ``disconnects`` and ``disconnected_s`` are reported. Messages
are acknowledged when they reach the queue: a crash of hycq loses what was queued but not
yet processed (checkpoints are the remedy, not built yet).

Output (``--output mqtt://HOST:PORT/TOPIC``): :class:`MqttPublisher` publishes each
instant's results as one message of JSON lines (``_ts`` included), QoS 1, and waits for the
broker's acknowledgements before the run reports success.
"""

from __future__ import annotations

import bisect
import csv
import io
import itertools
import json
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from engines import interrupts
from engines.sources.files.csv_reader import IDLE
from optimizer.ir.errors import DataError, OptionError

SCHEME = "mqtt://"
#: The payload that ends a stream.
END_OF_STREAM = {"end_of_stream": True}
#: Messages paho's thread may queue ahead of the plan before it waits (backpressure).
QUEUE_MESSAGES = 1024
#: A chunk for the reader grows while messages keep coming, until the queue has been empty
#: this long (seconds) or the chunk holds a reader block: at full speed the plan sees big
#: batches (per-batch work amortized), at a trickle each message within 10 ms.
QUIET_S = 0.01
#: Seconds to wait for the broker's CONNACK (and SUBACK) before giving up with exit 2.
CONNECT_TIMEOUT_S = 10.0
#: Reconnect backoff (seconds): paho doubles the delay from the first to the second.
RECONNECT_MIN_S, RECONNECT_MAX_S = 1, 5
#: Unacknowledged published messages the publisher lets paho hold before it waits.
PUBLISH_WINDOW = 256

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
    ) -> None:
        self.url = url
        #: per column of a raw line, in order: its catalog name and its raw-format name
        self.columns = list(columns)
        self.on_bad = on_bad
        self.option = option
        self._queue: queue.Queue[tuple[str, bytes]] = queue.Queue(maxsize=queue_messages)
        self._subscribed = threading.Event()
        self._error: str | None = None
        self._ended = False
        self._closed = False
        # line numbers (as the CSV reader counts them: from 1, blank lines skipped) of the
        # first line of each message fed, with its topic and number (dead letters)
        self._starts: list[int] = []
        self._where: list[tuple[str, int]] = []
        self._lines = 0
        self.messages = 0
        self.bad_messages = 0
        self.connects = 0
        self.disconnects = 0
        self.disconnected_s = 0.0
        self._down_since: float | None = None
        self.queue_full_waits = 0
        self.queue_full_s = 0.0
        self.peak_queue = 0
        #: ``--idle-timeout``: wall seconds of silence (after some data) before the feed
        #: hands out an IDLE chunk (its stream then counts as past its last timestamp)
        self.idle_s: float | None = None
        self.idle_reports = 0
        #: a checkpointed run passes one id for the run and its resumes (the broker keeps
        #: the session, and what was published meanwhile, under it)
        self.client = _client(client_id or _client_id("in"), clean=False)
        self.client.on_connect = self._on_connect
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
        self.connects += 1
        if self._down_since is not None:
            self.disconnected_s += time.monotonic() - self._down_since
            self._down_since = None
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
        if self._closed:
            return
        self.disconnects += 1
        self._down_since = time.monotonic()

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        item = (str(msg.topic), bytes(msg.payload))
        try:
            self._queue.put_nowait(item)
        except queue.Full:  # backpressure: wait for the plan, the broker keeps the rest
            self.queue_full_waits += 1
            t0 = time.monotonic()
            while not self._closed:
                try:
                    self._queue.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            self.queue_full_s += time.monotonic() - t0
        self.peak_queue = max(self.peak_queue, self._queue.qsize())

    # -- the reader's side (main thread) ----------------------------------------------------

    def sniff(self) -> bytes:
        """Raw lines have no header to sniff: nothing (the format is the stream's raw one)."""
        return b""

    def chunks(self, block: int) -> Iterator[bytes]:
        """Complete lines of the messages that have arrived, at most about ``block`` bytes at
        a time (``QUIET_S``); ends at the end-of-stream message."""
        last: float | None = None  # when the last chunk (or IDLE) was handed out
        while not self._ended:
            try:
                topic, payload = self._queue.get(timeout=0.1)
            except queue.Empty:
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
            parts = [self._lines_of(topic, payload)]
            size = len(parts[0])
            while size < block and not self._ended:
                try:  # more while they keep coming: big batches run the plan faster
                    topic, payload = self._queue.get(timeout=QUIET_S)
                except queue.Empty:
                    break
                parts.append(self._lines_of(topic, payload))
                size += len(parts[-1])
            chunk = b"".join(parts)
            if chunk:
                last = time.monotonic()
                yield chunk

    def _lines_of(self, topic: str, payload: bytes) -> bytes:
        """A message's payload as raw CSV lines (blank lines dropped, each ending in a line
        end); bad JSON goes to the dead letters here."""
        if self._ended:
            return b""
        self.messages += 1
        number = self.messages
        text = payload.strip()
        lines: list[bytes]
        if text[:1] in (b"{", b"["):
            lines = self._json_lines(topic, number, text)
        else:
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if lines:
            self._starts.append(self._lines + 1)
            self._where.append((topic, number))
            self._lines += len(lines)
        return b"".join(ln + b"\n" for ln in lines)

    def _json_lines(self, topic: str, number: int, text: bytes) -> list[bytes]:
        try:
            doc = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            self._bad(topic, number, text, f"not valid JSON: {err}")
            return []
        if doc == END_OF_STREAM:
            self._ended = True
            return []
        objects = doc if isinstance(doc, list) else [doc]
        out = []
        for k, obj in enumerate(objects):
            where = f"object {k + 1}: " if isinstance(doc, list) else ""
            if not isinstance(obj, dict):
                self._bad(topic, number, json.dumps(obj), f"{where}not a JSON object")
                continue
            keys = [name if name in obj else raw for name, raw in self.columns]
            missing = [
                name for (name, _), key in zip(self.columns, keys, strict=True) if key not in obj
            ]
            if missing:
                self._bad(
                    topic, number, json.dumps(obj), f"{where}missing column(s) {', '.join(missing)}"
                )
                continue
            values = ["" if obj[k] is None else _cell(obj[k]) for k in keys]
            buf = io.StringIO()
            csv.writer(buf, lineterminator="").writerow(values)
            out.append(buf.getvalue().encode())
        return out

    def _bad(self, topic: str, number: int, raw: bytes | str, reason: str) -> None:
        self.bad_messages += 1
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        if self.on_bad is None:
            raise DataError(f"{self.url.name} message {number}: {reason}")
        self.on_bad(topic, number, text, reason)

    def where(self, line: int) -> tuple[str, int]:
        """The topic and message number of the CSV reader's line ``line``."""
        k = bisect.bisect_right(self._starts, line) - 1
        return self._where[max(k, 0)] if self._where else (self.url.topic, 0)

    def metrics(self) -> dict[str, Any]:
        down = self.disconnected_s
        if self._down_since is not None:
            down += time.monotonic() - self._down_since
        return {
            "source": str(self.url),
            "messages": self.messages,
            "bad_messages": self.bad_messages,
            "connects": self.connects,
            "disconnects": self.disconnects,
            "disconnected_s": round(down, 3),
            "queue_capacity": self._queue.maxsize,
            "peak_queue": self.peak_queue,
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


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float | int | str):
        return str(value)
    return json.dumps(value)


class MqttPublisher:
    """Publishes messages to one topic at QoS 1, at most :data:`PUBLISH_WINDOW` of them
    unacknowledged; :meth:`close` waits for every acknowledgement."""

    def __init__(self, url: MqttUrl, option: str = "--output") -> None:
        url.check_publishable(option)
        self.url = url
        self.option = option
        self.messages = 0
        self._pending: deque[Any] = deque()
        self._connected = threading.Event()
        self.client = _client(_client_id("out"), clean=True)
        self.client.on_connect = lambda *a: self._connected.set()
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

    def publish(self, payload: bytes | str) -> None:
        info = self.client.publish(self.url.topic, payload, qos=1)
        self.messages += 1
        self._pending.append(info)
        while len(self._pending) > PUBLISH_WINDOW:
            self._wait(self._pending.popleft())

    def _wait(self, info: Any) -> None:
        while not info.is_published():
            interrupts.check_stop()
            info.wait_for_publish(timeout=0.1)

    def close(self) -> None:
        """Wait until the broker acknowledged every message, then disconnect."""
        try:
            while self._pending:
                self._wait(self._pending.popleft())
        finally:
            self.client.disconnect()
            self.client.loop_stop()

    def abort(self) -> None:
        self._pending.clear()
        self.client.disconnect()
        self.client.loop_stop()

"""Live streams over MQTT against a real Mosquitto broker (tests/mqtt.py): a query fed over
MQTT gives the oracle's result stream on row, DuckDB and mixed placements; results published
over MQTT are the oracle's; bad messages are dead-lettered with their topic; a broker restart
mid-run loses nothing (QoS 1, persistent session); backpressure bounds the queue; bad
addresses exit 2; SIGINT exits 130 with the output committed."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from engines.arrow_types import arrow_schema
from optimizer.sql.catalog import load_catalog
from tests.datagen import small_smartplug
from tests.lateness import without_late
from tests.mqtt import Broker
from tests.oracle import assert_same_stream, oracle

pytest.importorskip("paho.mqtt")

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ROOT / "queries" / "smartplug"
CATALOG = load_catalog(QUERIES / "catalog.toml")
SCHEMA = arrow_schema(CATALOG.get("readings").schema)
_topics = iter(range(10**6))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    b = Broker(tmp_path_factory.mktemp("mosquitto"))
    yield b
    b.stop()


def _topic(name: str) -> str:
    return f"hycq/test/{name}/{next(_topics)}"


@pytest.fixture(scope="module")
def readings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    """Raw DEBS lines of a small data set (5-minute windows fill and slide), and its table."""
    table = small_smartplug(330, seed=9, rate=6.0).select(SCHEMA.names).cast(SCHEMA)
    path = tmp_path_factory.mktemp("mqtt") / "readings.csv"
    pacsv.write_csv(table, path, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return path, table


def _expected(query: str, table: pa.Table) -> pa.Table:
    text = (QUERIES / f"{query}.sql").read_text()
    return oracle(text, CATALOG, without_late(text, CATALOG, {"readings": table}))


def _start_run(query: str, url: str, *args: str) -> subprocess.Popen[str]:
    """``hycq run`` subscribed to ``url``: returns once it says it is subscribed."""
    p = subprocess.Popen(
        [sys.executable, "-m", "hycq.cli", "run", str(QUERIES / f"{query}.sql"),
         "--data", f"readings={url}", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert p.stderr is not None
    line = p.stderr.readline()  # the first note is the subscription's
    if "subscribed to" not in line:
        p.kill()
        rest = p.communicate()[1]
        raise AssertionError(line + rest)
    return p


def _finish(p: subprocess.Popen[str], timeout: float = 120) -> str:
    _, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err
    return err


def _publisher(broker: Broker) -> Any:
    import paho.mqtt.client as mqtt

    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"test-pub-{time.time_ns()}")
    c.connect("127.0.0.1", broker.port)
    c.loop_start()
    return c


def _send(client: Any, topic: str, payloads: list[bytes | str]) -> None:
    infos = [client.publish(topic, p, qos=1) for p in payloads]
    for info in infos:
        info.wait_for_publish(timeout=30)
        assert info.is_published()


@pytest.mark.parametrize(("query", "placement"), [("q1", "row"), ("q2", "column"), ("q4", "auto")])
def test_mqtt_input_equals_the_oracle(
    broker: Broker, readings: tuple[Path, pa.Table], query: str, placement: str, tmp_path: Path
) -> None:
    """CSV-line batches, JSON objects and a JSON array mixed; bad messages dead-lettered."""
    from hycq.publish import publish

    table = readings[1]
    topic = _topic(query)
    out, dead, metrics = tmp_path / "out.parquet", tmp_path / "dead.jsonl", tmp_path / "m.json"
    p = _start_run(
        query, broker.url(topic), "--placement", placement, "--output", str(out),
        "--dead-letter", str(dead), "--metrics", str(metrics),
    )  # fmt: skip
    rows = table.to_pylist()
    third = len(rows) // 3
    head = pa.Table.from_pylist(rows[:third], schema=SCHEMA)
    lines = b"".join(
        b",".join(str(v).encode() for v in r.values()) + b"\n" for r in rows[third : third + 40]
    )
    c = _publisher(broker)
    try:
        # the first third as CSV messages of 100 rows (through `hycq data publish`'s code)
        head_file = tmp_path / "head.csv"
        pacsv.write_csv(head, head_file, pacsv.WriteOptions(include_header=False))
        publish(head_file, broker.url(topic), batch=100, end=False)
        # 40 rows as one message of raw lines, then bad messages, then JSON
        _send(c, topic, [lines, b"not,a,reading", b'{"id": 1, "ts": 2}', b"{broken json"])
        objects = rows[third + 40 : third + 60]
        _send(c, topic, [json.dumps(o) for o in objects])
        _send(c, topic, [json.dumps(rows[third + 60 :])])
        _send(c, topic, [json.dumps({"end_of_stream": True})])
    finally:
        c.disconnect()
        c.loop_stop()
    _finish(p)
    assert_same_stream(pq.read_table(out), _expected(query, table))
    letters = [json.loads(x) for x in dead.read_text().splitlines()]
    reasons = sorted(x["reason"] for x in letters)
    assert len(reasons) == 3, reasons
    assert all(r.startswith(f"mqtt topic {topic} message ") for r in reasons), reasons
    assert any("expected 7 fields, found 3" in r for r in reasons)
    assert any("missing column(s)" in r for r in reasons)
    assert any("not valid JSON" in r for r in reasons)
    live = json.loads(metrics.read_text())["live_sources"]["readings"]
    assert live["ended_by_message"] and live["connects"] == 1


def test_results_published_over_mqtt_equal_the_oracle(
    broker: Broker, readings: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """``--output mqtt://...``: one message of JSON lines per instant, ``_ts`` included."""
    path, table = readings
    topic = _topic("out")
    got: list[bytes] = []
    ready = threading.Event()
    import paho.mqtt.client as mqtt

    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"test-sub-{time.time_ns()}")
    sub.on_subscribe = lambda *a: ready.set()
    sub.on_message = lambda c, u, m: got.append(bytes(m.payload))
    sub.connect("127.0.0.1", broker.port)
    sub.loop_start()
    sub.subscribe(topic, qos=1)
    assert ready.wait(10)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "hycq.cli", "run", str(QUERIES / "q1.sql"),
             "--data", f"readings={path}", "--output", broker.url(topic),
             "--metrics", str(tmp_path / "m.json")],
            capture_output=True, text=True, timeout=300, cwd=ROOT,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        sent = json.loads((tmp_path / "m.json").read_text())["published_messages"]
        deadline = time.monotonic() + 30
        while len(got) < sent and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sub.disconnect()
        sub.loop_stop()
    assert len(got) == sent > 1
    rows = [json.loads(line) for msg in got for line in msg.decode().splitlines()]
    first = [json.loads(line) for line in got[0].decode().splitlines()]
    assert len({r["_ts"] for r in first}) == 1  # one instant per message
    expected = _expected("q1", table)
    assert_same_stream(pa.Table.from_pylist(rows).select(expected.column_names), expected)


def test_broker_restart_mid_run_loses_nothing(
    tmp_path: Path, readings: tuple[Path, pa.Table]
) -> None:
    """Half the data, a broker restart (its persistence keeps hycq's session), the other
    half published while hycq is still reconnecting: the result stream is complete."""
    from hycq.publish import publish

    b = Broker(tmp_path / "broker")
    try:
        table = readings[1]
        topic = _topic("restart")
        out, metrics = tmp_path / "out.parquet", tmp_path / "m.json"
        p = _start_run("q1", b.url(topic), "--output", str(out), "--metrics", str(metrics))
        rows = table.to_pylist()
        half = len(rows) // 2
        first, second = tmp_path / "a.csv", tmp_path / "b.csv"
        for f, part in ((first, rows[:half]), (second, rows[half:])):
            t = pa.Table.from_pylist(part, schema=SCHEMA)
            pacsv.write_csv(t, f, pacsv.WriteOptions(include_header=False))
        publish(first, b.url(topic), batch=50, end=False)
        time.sleep(0.5)
        b.restart()
        publish(second, b.url(topic), batch=50)  # hycq reconnects within its backoff
        _finish(p)
        assert_same_stream(pq.read_table(out), _expected("q1", table))
        live = json.loads(metrics.read_text())["live_sources"]["readings"]
        assert live["disconnects"] >= 1 and live["connects"] >= 2, live
    finally:
        b.stop()


def test_backpressure_bounds_the_queue(broker: Broker) -> None:
    """A plan that does not read: the queue fills to its capacity and paho's thread waits
    (the broker keeps the rest); once read, every message arrives, in order."""
    from engines.sources.mqtt import MqttFeed, MqttUrl

    topic = _topic("bp")
    feed = MqttFeed(MqttUrl.parse(broker.url(topic), "--data"), [("a", "a")], None,
                    queue_messages=4)  # fmt: skip
    c = _publisher(broker)
    try:
        n = 60
        infos = [c.publish(topic, f"{k}", qos=1) for k in range(n)]
        deadline = time.monotonic() + 10
        while feed.queue_full_waits == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert feed.queue_full_waits >= 1 and feed.peak_queue <= 4
        values: list[int] = []
        chunks = feed.chunks(1 << 16)
        while len(values) < n:
            values += [int(x) for x in next(chunks).split()]
        assert values == list(range(n))
        for info in infos:
            assert info.is_published() or info.wait_for_publish(10) is None
    finally:
        c.disconnect()
        c.loop_stop()
        feed.close()


def test_sigint_exits_130_with_the_output_committed(
    broker: Broker, readings: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    from hycq.publish import publish

    path, _ = readings
    topic = _topic("int")
    out = tmp_path / "out.csv"
    p = _start_run("q1", broker.url(topic), "--output", str(out))
    publish(path, broker.url(topic), batch=200, end=False)  # no end: the run waits for more
    time.sleep(2)
    assert p.poll() is None
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=60)
    assert p.returncode == 130
    assert out.exists() and len(out.read_text().splitlines()) > 1


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mqtt://127.0.0.1:1/t", "cannot connect to the MQTT broker at 127.0.0.1:1"),
        ("mqtt://127.0.0.1:1883", "no topic"),
        ("mqtt://:1883/t", "no host"),
        ("mqtt://127.0.0.1:99999/t", "the port is not a number"),
    ],
)
def test_bad_mqtt_addresses_exit_2(url: str, message: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "run", str(QUERIES / "q1.sql"),
         "--data", f"readings={url}"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_publish_to_a_wildcard_topic_is_exit_2(readings: tuple[Path, pa.Table]) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "data", "publish", str(readings[0]),
         "--to", "mqtt://127.0.0.1:1883/a/#"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 2 and "wildcards" in r.stderr, r.stderr


def test_checkpointed_mqtt_run_killed_and_resumed(
    broker: Broker, readings: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """``--checkpoint`` with an MQTT input: the run is killed (SIGKILL) once the first half
    is checkpointed; the second half is published while it is down; ``--resume`` reconnects
    with the same persistent session, gets the queued messages, and the output equals the
    oracle's on every tuple (docs/checkpoints.md: messages after the last checkpoint would be
    lost; a checkpoint after every batch leaves none)."""
    from hycq.publish import publish

    table = readings[1]
    topic = _topic("ckpt")
    out, ckpt = tmp_path / "out.jsonl", tmp_path / "ckpt"
    args = ["--placement", "row", "--output", str(out), "--checkpoint-every", "0.001"]
    p = _start_run("q2", broker.url(topic), *args, "--checkpoint", str(ckpt))
    half = table.num_rows // 2
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    no_header = pacsv.WriteOptions(include_header=False)
    pacsv.write_csv(table.slice(0, half), first, no_header)
    pacsv.write_csv(table.slice(half), second, no_header)
    publish(first, broker.url(topic), batch=50, end=False)
    deadline = time.monotonic() + 60
    delivered = 0
    while delivered < half and time.monotonic() < deadline:
        time.sleep(0.1)
        manifests = sorted(ckpt.glob("ckpt-*.json"))
        if manifests:
            with contextlib.suppress(OSError, ValueError):
                delivered = json.loads(manifests[-1].read_text())["delivered"].get("readings", 0)
    assert delivered == half, delivered
    p.kill()
    p.communicate()
    publish(second, broker.url(topic), batch=50)  # queued by the broker for the session
    q = subprocess.Popen(
        [sys.executable, "-m", "hycq.cli", "run", str(QUERIES / "q2.sql"),
         "--data", f"readings={broker.url(topic)}", *args, "--resume", str(ckpt)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    _finish(q)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    expected = _expected("q2", table)
    assert_same_stream(pa.Table.from_pylist(rows, schema=expected.schema), expected)


def test_idle_timeout_fires_the_last_instant_of_a_quiet_broker(
    broker: Broker, readings: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """``--idle-timeout 0.5``: once no message has come for 0.5 s, the stream counts as
    past its last timestamp and that second's instant fires without waiting for more."""
    import select

    from hycq.publish import publish

    table = readings[1]
    ts = table.column("ts").to_pylist()
    half = len(ts) // 2
    while ts[half] == ts[half - 1]:  # cut between two event-seconds
        half += 1
    topic = _topic("idle")
    p = _start_run(
        "q2", broker.url(topic), "--placement", "row", "--output", "-", "--idle-timeout", "0.5"
    )
    assert p.stdout is not None
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    no_header = pacsv.WriteOptions(include_header=False)
    pacsv.write_csv(table.slice(0, half), first, no_header)
    pacsv.write_csv(table.slice(half), second, no_header)
    try:
        publish(first, broker.url(topic), batch=100, end=False)
        lines: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
            lines and json.loads(lines[-1])["_ts"] == ts[half - 1]
        ):
            if select.select([p.stdout], [], [], 0.2)[0]:
                lines.append(p.stdout.readline())
        assert lines and json.loads(lines[-1])["_ts"] == ts[half - 1]
        assert p.poll() is None  # still subscribed
        publish(second, broker.url(topic), batch=100)
        out = p.stdout.read()  # what the text buffer holds too (communicate() would skip it)
        assert p.wait(timeout=120) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for pipe in (p.stdout, p.stderr):
            if pipe is not None:
                pipe.close()
    rows = [json.loads(x) for x in lines + out.splitlines() if x.strip()]
    expected = _expected("q2", table)
    assert_same_stream(pa.Table.from_pylist(rows).select(expected.column_names), expected)


def _raw_lines(rows: list[dict[str, Any]]) -> bytes:
    """Rows as the stream's raw CSV lines (what a device sends)."""
    return b"".join(b",".join(str(v).encode() for v in r.values()) + b"\n" for r in rows)


def test_hostile_payloads_are_dead_letters_and_the_run_goes_on(
    broker: Broker, readings: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """Every way a message can be bad (binary, invalid UTF-8, JSON the decoder cannot take or
    nested past its limit, wrong JSON types, empty, over the size limits, an unterminated
    quote) costs only what it holds: a dead letter naming the topic and the message; the
    good rows around it, even in the same message, reach the result, which is the oracle's."""
    import random

    from engines.sources.mqtt_payload import MAX_LINE_BYTES, MAX_MESSAGE_BYTES

    table = readings[1]
    rows = table.to_pylist()
    topic = _topic("hostile")
    out, dead = tmp_path / "out.parquet", tmp_path / "dead.jsonl"
    p = _start_run("q1", broker.url(topic), "--output", str(out), "--dead-letter", str(dead))
    good = iter(rows)

    def take(n: int) -> list[dict[str, Any]]:
        return [r for _, r in zip(range(n), good, strict=False)]

    def bad(**change: Any) -> dict[str, Any]:  # an object beside the good rows
        return {**rows[0], **change}

    noise = random.Random(47).randbytes(5000)
    payloads: list[tuple[bool, bytes]] = [(False, _raw_lines(take(40)))]
    # each a function: the good rows it holds are taken in publishing order
    hostile: list[Callable[[], bytes]] = [
        lambda: noise,  # binary
        lambda: _raw_lines(take(3)) + b"1,\xff\xfe,3,1,1,1,1\n" + _raw_lines(take(3)),  # UTF-8
        lambda: b"[" * 100_000,  # nested past the decoder's limit
        lambda: b'{"a":' * 100_000,
        lambda: b"",  # empty
        lambda: b" \n\r\n\t",  # blank
        lambda: b"x" * (MAX_MESSAGE_BYTES + 1),  # over the message limit
        lambda: _raw_lines(take(2)) + b"9" * (MAX_LINE_BYTES + 1) + b"\n" + _raw_lines(take(2)),
        lambda: _raw_lines(take(2)) + b'"1,2,3,4,5,6,7\n' + _raw_lines(take(2)),  # open quote
        # wrong JSON types beside good objects in one array
        lambda: json.dumps(
            [
                *take(1),
                bad(value=[1.0]),
                bad(house_id={"a": 1}),
                bad(ts=True),
                bad(id="1\n2"),
                *take(1),
            ]
        ).encode(),
        lambda: json.dumps(bad(id="9" * 4 * MAX_LINE_BYTES)).encode(),  # a line too long
        lambda: b'{"id": 1, "ts": ' + b"7" * 5000 + b"}",  # an integer the decoder refuses
        lambda: json.dumps({"end_of_stream": 1}).encode(),  # not the end: a bad object
        lambda: b"1\x00,2,3,4,5,6,7",  # a NUL byte
        lambda: '{"x": 1}'.encode("utf-16"),  # not UTF-8
    ]
    for h in hostile:
        payloads += [(True, h()), (False, _raw_lines(take(5)))]
    payloads.append((False, _raw_lines(list(good))))
    c = _publisher(broker)
    try:
        _send(c, topic, [pl for _, pl in payloads])
        _send(c, topic, [json.dumps({"end_of_stream": True})])
    finally:
        c.disconnect()
        c.loop_stop()
    err = _finish(p)
    assert "Traceback" not in err
    assert_same_stream(pq.read_table(out), _expected("q1", table))
    letters = [json.loads(x) for x in dead.read_text().splitlines()]
    assert all(x["reason"].startswith(f"mqtt topic {topic} message ") for x in letters)
    named = {int(x["reason"].split(" message ")[1].split(":")[0]) for x in letters}
    assert named == {k + 1 for k, (is_bad, _) in enumerate(payloads) if is_bad}, letters
    reasons = " | ".join(x["reason"] for x in letters)
    for part in ("not valid UTF-8", "not valid JSON", "nested too deeply", "empty message",
                 "over the limit", "per line", "unterminated quote", "a JSON array",
                 "a JSON object", "line break"):  # fmt: skip
        assert part in reasons, part


class _Lines:
    """A process's stderr as it comes (a thread reads it), so a test can wait for a line
    while the run goes on."""

    def __init__(self, pipe: Any) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: Any) -> None:
        for line in pipe:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait_for(self, *parts: str, timeout: float = 20) -> str:
        """The first line holding every one of ``parts`` (AssertionError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if all(p in line for p in parts):
                        return line
                left = deadline - time.monotonic()
                assert left > 0, f"no line with {parts} in:\n{''.join(self.lines)}"
                self._cond.wait(left)

    def text(self) -> str:
        self._thread.join(timeout=10)
        return "".join(self.lines)


def _reap(p: subprocess.Popen[str] | None) -> None:
    """Kill ``p`` if it still runs and close its pipes."""
    if p is None:
        return
    if p.poll() is None:
        p.kill()
    p.wait()
    for pipe in (p.stdout, p.stderr):
        if pipe is not None:
            pipe.close()


def _subscriber(port: int, topic: str, got: list[bytes]) -> Any:
    """A persistent QoS 1 subscription on the broker at ``port`` (kept by the broker across
    its restart)."""
    import paho.mqtt.client as mqtt

    ready = threading.Event()
    c = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=f"test-sub-{time.time_ns()}",
        clean_session=False,
    )
    c.on_connect = lambda client, *a: client.subscribe(topic, qos=1)
    c.on_subscribe = lambda *a: ready.set()
    c.on_message = lambda client, u, m: got.append(bytes(m.payload))
    c.reconnect_delay_set(0.2, 1)
    c.connect("127.0.0.1", port)
    c.loop_start()
    assert ready.wait(10)
    return c


def _settled(got: list[bytes], quiet_s: float, timeout: float = 30) -> int:
    """How many messages ``got`` holds once none has come for ``quiet_s`` seconds."""
    deadline = time.monotonic() + timeout
    seen, since = len(got), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if len(got) != seen:
            seen, since = len(got), time.monotonic()
        elif seen and time.monotonic() - since >= quiet_s:
            break
    return seen


def test_a_lost_input_connection_is_a_warning_while_it_lasts(
    tmp_path: Path, readings: tuple[Path, pa.Table]
) -> None:
    """The input broker killed (SIGKILL) and started again: a ``warning:`` line says the
    connection is lost while it is, another when it is back; the metrics count it; nothing
    is lost (the broker kept the session)."""
    from hycq.publish import publish

    b = Broker(tmp_path / "broker")
    p = None
    try:
        path, table = readings
        topic = _topic("warn")
        out, metrics = tmp_path / "out.parquet", tmp_path / "m.json"
        p = _start_run("q1", b.url(topic), "--output", str(out), "--metrics", str(metrics))
        err = _Lines(p.stderr)
        time.sleep(1.5)  # the broker has saved hycq's session (autosave, tests/mqtt.py)
        b.kill()
        lost = err.wait_for("lost the connection", timeout=10)
        assert lost.startswith(f"warning: stream 'readings' ({b.url(topic)}): "), lost
        assert f"MQTT broker at 127.0.0.1:{b.port}" in lost and "no data arrives" in lost
        assert p.poll() is None
        b.start()
        back = err.wait_for("reconnected to the MQTT broker", timeout=20)
        assert back.startswith("warning: stream 'readings'"), back
        publish(path, b.url(topic), batch=100)
        assert p.wait(timeout=120) == 0, err.text()
        text = err.text()
        assert "Traceback" not in text and text.count("warning:") == 2, text
        live = json.loads(metrics.read_text())["live_sources"]["readings"]
        assert live["disconnects"] == 1 and live["connects"] == 2, live
        assert live["connection_warnings"] == 2 and live["longest_disconnect_s"] > 0, live
        assert_same_stream(pq.read_table(out), _expected("q1", table))
    finally:
        _reap(p)
        b.stop()


def test_output_broker_killed_and_restarted_mid_run_loses_no_result(
    broker: Broker, readings: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """``--output mqtt://...``: the output broker is killed (SIGKILL) after the first half's
    results; the second half's are computed while it is down and held; once it is back they
    are published, and the result stream a subscriber gets is the oracle's (QoS 1: at
    least once, so a message in flight at the kill may come twice)."""
    from hycq.publish import publish

    out_broker = Broker(tmp_path / "out-broker")
    got: list[bytes] = []
    sub = _subscriber(out_broker.port, "results", got)
    p = None
    try:
        table = readings[1]
        topic = _topic("outage")
        metrics = tmp_path / "m.json"
        time.sleep(1.5)  # the subscriber's session saved before the broker is killed
        p = _start_run(
            "q1", broker.url(topic), "--output", out_broker.url("results"),
            "--metrics", str(metrics),
        )  # fmt: skip
        err = _Lines(p.stderr)
        half = table.num_rows // 2
        first, second = tmp_path / "first.csv", tmp_path / "second.csv"
        no_header = pacsv.WriteOptions(include_header=False)
        pacsv.write_csv(table.slice(0, half), first, no_header)
        pacsv.write_csv(table.slice(half), second, no_header)
        publish(first, broker.url(topic), batch=50, end=False)
        before = _settled(got, quiet_s=1.0)
        assert before > 0
        out_broker.kill()
        err.wait_for("warning: --output", "lost the connection", timeout=10)
        publish(second, broker.url(topic), batch=50, end=False)
        time.sleep(1.0)  # the second half's instants fire while the broker is down
        out_broker.start()
        err.wait_for("warning: --output", "reconnected", timeout=20)
        c = _publisher(broker)
        try:
            _send(c, topic, [json.dumps({"end_of_stream": True})])
        finally:
            c.disconnect()
            c.loop_stop()
        assert p.wait(timeout=120) == 0, err.text()
        m = json.loads(metrics.read_text())
        unique = list(dict.fromkeys(got))
        deadline = time.monotonic() + 30
        while len(unique) < m["published_messages"] and time.monotonic() < deadline:
            time.sleep(0.1)
            unique = list(dict.fromkeys(got))
    finally:
        _reap(p)
        sub.disconnect()
        sub.loop_stop()
        out_broker.stop()
    assert "Traceback" not in err.text()
    output = m["mqtt_output"]
    assert output["disconnects"] == 1 and output["connects"] == 2, output
    assert output["peak_unacknowledged"] > 10, output  # held while the broker was down
    assert len(unique) == m["published_messages"] > before
    rows = [json.loads(line) for msg in unique for line in msg.decode().splitlines()]
    expected = _expected("q1", table)
    assert_same_stream(pa.Table.from_pylist(rows).select(expected.column_names), expected)


def test_a_full_output_buffer_waits_for_the_broker_then_stops_naming_it(tmp_path: Path) -> None:
    """Past the bound: with the broker down, messages are held up to the buffer's size;
    the next one waits, and once the broker has been unreachable for the outage limit the
    publisher stops with a DataError (exit 2) naming the broker and what is lost."""
    from engines.sources.mqtt import MqttPublisher, MqttUrl
    from optimizer.ir.errors import DataError

    b = Broker(tmp_path / "broker")
    url = MqttUrl.parse(b.url("results"), "--output")
    publisher = None
    try:
        publisher = MqttPublisher(url, buffer_messages=3, outage_s=1.0)
        publisher.publish(b"acknowledged")
        b.kill()
        deadline = time.monotonic() + 10
        while publisher.link.down_for() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        t0 = time.monotonic()
        for _ in range(2):
            publisher.publish(b"held")  # within the bound (with the first, if unacknowledged)
        with pytest.raises(DataError) as caught:
            publisher.publish(b"one too many")
            publisher.publish(b"two too many")
        waited = time.monotonic() - t0
        assert 0.9 <= waited < 10, waited
        text = str(caught.value)
        assert text.startswith(f"--output {url}: the MQTT broker at 127.0.0.1:{b.port} ")
        assert "the buffer of unacknowledged results is full: the 3 result message(s)" in text
    finally:
        if publisher is not None:
            publisher.abort()
        b.stop()


def test_output_broker_gone_at_the_end_is_exit_2_naming_it(
    tmp_path: Path,
    readings: tuple[Path, pa.Table],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The output broker killed mid-run and never back: the run ends, waits the outage
    limit (1 s here) for the results it holds, and exits 2 with one ``error:`` line naming
    the broker; no internal error."""
    import os

    from engines.sources import mqtt as mqtt_module
    from hycq.cli import main

    monkeypatch.setattr(mqtt_module, "OUTPUT_OUTAGE_S", 1.0)
    b = Broker(tmp_path / "broker")
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    lines = readings[0].read_bytes().splitlines(keepends=True)
    half = len(lines) // 2

    def feed() -> None:
        with fifo.open("wb") as f:
            f.write(b"".join(lines[:half]))
            f.flush()
            time.sleep(1.0)
            b.kill()
            time.sleep(0.5)
            f.write(b"".join(lines[half:]))

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        url = b.url("results")
        code = main(["run", str(QUERIES / "q1.sql"), "--data", f"readings={fifo}", "--output", url])
    finally:
        writer.join(timeout=30)
        b.stop()
    err = capsys.readouterr().err
    assert code == 2, err
    assert (
        f"error: --output {url}: the MQTT broker at 127.0.0.1:{b.port} has been unreachable" in err
    )
    assert "the run has ended" in err and "internal error" not in err and "Traceback" not in err


#: A self-join on a low-cardinality key: the row engine takes ~2 wall seconds per event-second
#: of it at 1,000 tuples/s, so a live stream at that rate outruns it.
SLOW_JOIN = """SELECT COUNT(*) AS n
FROM readings [RANGE 10 SECONDS SLIDE 1 SECOND] AS a,
     readings [RANGE 10 SECONDS SLIDE 1 SECOND] AS b
WHERE a.property = b.property AND a.value < b.value
"""


@pytest.mark.parametrize(
    ("query", "rate", "kept_up"), [("q2", 2000, True), ("slow join", 2000, False)]
)
def test_a_live_source_is_judged_by_lag(
    broker: Broker, tmp_path: Path, query: str, rate: int, kept_up: bool
) -> None:
    """A stream published in real time (``hycq data publish --pace realtime``): the run is
    judged by whether its lag behind the stream's event time stayed bounded, not by its
    throughput against the nominal rate (which a run that takes a stream as it comes always
    misses by a little). A plan slower than the stream is still told it did not keep up."""
    from hycq.publish import publish

    if query == "q2":
        path, extra = QUERIES / "q2.sql", []
    else:
        path = tmp_path / "slow.sql"
        path.write_text(SLOW_JOIN)
        extra = ["--catalog", str(QUERIES / "catalog.toml"), "--placement", "row"]
    topic = _topic("lag")
    metrics = tmp_path / "m.json"
    p = subprocess.Popen(
        [sys.executable, "-m", "hycq.cli", "run", str(path), "--data",
         f"readings={broker.url(topic)}", "--metrics", str(metrics), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert p.stderr is not None and "subscribed to" in p.stderr.readline()
        catalog = QUERIES / "catalog.toml"
        time.sleep(1.0)  # the source starts a moment after the query, as a user's would
        publish(path, broker.url(topic), catalog=catalog, rate=rate, duration=4, pace="realtime")
        _, err = p.communicate(timeout=120)
    finally:
        _reap(p)
    assert p.returncode == 0, err
    m = json.loads(metrics.read_text())
    assert m["kept_up"] is kept_up and m.get("kept_up_rule") == "lag", m
    summary = next(line for line in err.splitlines() if " tuples in " in line)
    if kept_up:
        assert m["live_lag_s"] <= 1.0 and "live source, kept up: lag grew by at most" in summary
    else:
        assert m["live_lag_s"] > 1.0 and "live source, did NOT keep up: fell" in summary


def _readme_live_example() -> str:
    """The shell block of the README's "Live streams" section, as a user pastes it."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Live streams", 1)[1].split("\n## ", 1)[0]
    return section.split("```bash\n", 1)[1].split("\n```", 1)[0] + "\n"


def _daemons(port: int) -> list[int]:
    """Ids of the ``mosquitto -p PORT -d`` processes (the example's broker)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            args = (proc / "cmdline").read_bytes().split(b"\0")
            if Path(args[0].decode()).name == "mosquitto" and args[1:4] == [
                b"-p",
                str(port).encode(),
                b"-d",
            ]:
                found.append(int(proc.name))
    return found


def test_the_readme_live_example_runs_as_written(
    tmp_path: Path, readings: tuple[Path, pa.Table]
) -> None:
    """The README's live example, pasted into a shell as written, on a free port instead of
    1883 and over 4 event-seconds instead of 360: every result of the readings it publishes
    reaches the results topic (none published before the query subscribed is lost), and the
    run's summary says it kept up with the live source."""
    import os
    import stat

    from engines.runtime import RunOptions
    from hycq.flags import CLI_OPTION_NAMES
    from hycq.publish import stream_batches
    from tests.mqtt import BINARY, free_port

    if BINARY is None:
        pytest.skip("mosquitto is not installed (apt-get install -y mosquitto)")
    script = _readme_live_example()
    assert script.count("1883") >= 4 and "--duration 360" in script, script
    port = free_port()
    script = script.replace("1883", str(port)).replace("--duration 360", "--duration 4")
    shim = tmp_path / "bin" / "hycq"  # `hycq` as installed, from this checkout
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m hycq.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "queries").symlink_to(ROOT / "queries")
    path = os.pathsep.join([str(shim.parent), str(Path(BINARY).parent), os.environ["PATH"]])
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT)}
    got: list[bytes] = []
    shell = subprocess.Popen(
        ["bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=tmp_path, env=env,
    )  # fmt: skip
    sub = None
    try:
        deadline = time.monotonic() + 20
        while sub is None:  # the example's broker: subscribe as soon as it listens
            try:
                sub = _subscriber(port, "results", got)
            except OSError:
                assert time.monotonic() < deadline, "the example's broker did not start"
                time.sleep(0.05)
        out, err = shell.communicate(timeout=180)
        assert shell.returncode == 0, out + err
        _settled(got, quiet_s=1.0)
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.communicate()
        if sub is not None:
            sub.disconnect()
            sub.loop_stop()
        for pid in _daemons(port):
            os.kill(pid, signal.SIGTERM)
    assert "note: stream 'readings' subscribed to" in out, out + err
    summary = next(line for line in out.splitlines() if " tuples in " in line)
    assert "live source, kept up" in summary and "error" not in out + err, out + err
    options = RunOptions(rate=2000, duration=4, names=CLI_OPTION_NAMES)
    _, batches, _ = stream_batches(QUERIES / "q2.sql", None, None, options)
    published = pa.Table.from_batches(list(batches)).select(SCHEMA.names).cast(SCHEMA)
    rows = [json.loads(line) for msg in dict.fromkeys(got) for line in msg.decode().splitlines()]
    expected = _expected("q2", published)
    assert_same_stream(pa.Table.from_pylist(rows).select(expected.column_names), expected)


def test_a_stop_is_not_kept_waiting_on_a_dead_output_broker(
    broker: Broker, readings: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """SIGINT while the output broker is down and results wait for it: the run does not
    wait the outage limit; it stops at once with exit 2 saying what is lost."""
    out_broker = Broker(tmp_path / "out-broker")
    p = None
    try:
        path, _ = readings
        topic = _topic("stop")
        url = out_broker.url("results")
        p = _start_run("q1", broker.url(topic), "--output", url)
        err = _Lines(p.stderr)
        lines = path.read_bytes().splitlines(keepends=True)
        half = len(lines) // 2
        c = _publisher(broker)
        try:
            _send(c, topic, [b"".join(lines[:half])])
            time.sleep(1.0)  # its results are published
            out_broker.kill()
            err.wait_for("warning: --output", "lost the connection", timeout=10)
            _send(c, topic, [b"".join(lines[half:])])  # results held for the broker
        finally:
            c.disconnect()
            c.loop_stop()
        time.sleep(1.0)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        code = p.wait(timeout=30)
        assert time.monotonic() - t0 < 10
        text = err.text()
    finally:
        _reap(p)
        out_broker.stop()
    assert code == 2, text
    assert f"error: --output {url}: the MQTT broker at 127.0.0.1:{out_broker.port} " in text
    assert "the run was stopped by a signal" in text and "Traceback" not in text


def test_publish_of_a_file_with_an_unterminated_quote_loses_only_that_line(
    broker: Broker, tmp_path: Path
) -> None:
    """``hycq data publish FILE`` reads the file as ``run`` does: an unterminated quote on
    line 51 of 20,000 costs that line, not the 19,950 after it."""
    lines = [f"{i},{1377986401 + i // 50},{i * 0.5},1,{i % 7},0,0" for i in range(20000)]
    lines[50] = lines[50].replace(",", ',"', 1)
    path = tmp_path / "q.csv"
    path.write_text("\n".join(lines) + "\n")
    r = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "data", "publish", str(path),
         "--to", broker.url(_topic("quote")), "--batch", "5000"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "published 19,999 rows" in r.stdout, (r.stdout, r.stderr)

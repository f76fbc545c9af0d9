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
from collections.abc import Iterator
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

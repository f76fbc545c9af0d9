"""``hycq run ... --data STREAM=-``: a stream's raw CSV lines from standard input, read as
they arrive, with the same validation and dead letters as a file; results on stdout appear
as instants fire, before the input ends."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from engines.arrow_types import arrow_schema
from optimizer.sql.catalog import load_catalog
from tests.datagen import small_smartplug
from tests.lateness import without_late
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")
SCHEMA = arrow_schema(CATALOG.get("readings").schema)
BAD = b"garbage,line\n"


def _cmd(query: str, *args: str) -> list[str]:
    sql = ROOT / "queries" / "smartplug" / f"{query}.sql"
    return [sys.executable, "-m", "hycq.cli", "run", str(sql), "--data", "readings=-", *args]


@pytest.fixture(scope="module")
def raw() -> tuple[bytes, pa.Table]:
    """Raw DEBS lines (no header) of a small data set, and the table they hold."""
    table = small_smartplug(330, seed=5, rate=6.0).select(SCHEMA.names).cast(SCHEMA)
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return sink.getvalue().to_pybytes(), table


def _expected(query: str, table: pa.Table) -> pa.Table:
    text = (ROOT / "queries" / "smartplug" / f"{query}.sql").read_text()
    return oracle(text, CATALOG, without_late(text, CATALOG, {"readings": table}))


@pytest.mark.parametrize(("query", "placement"), [("q1", "row"), ("q2", "column"), ("q4", "auto")])
def test_stdin_equals_the_oracle_and_dead_letters_bad_lines(
    raw: tuple[bytes, pa.Table], query: str, placement: str, tmp_path: Path
) -> None:
    data, table = raw
    lines = data.splitlines(keepends=True)
    cut = len(lines) // 3
    fed = b"".join(lines[:cut]) + BAD + b"".join(lines[cut:])
    out, dead = tmp_path / "out.parquet", tmp_path / "dead.jsonl"
    r = subprocess.run(
        _cmd(query, "--placement", placement, "--output", str(out), "--dead-letter", str(dead)),
        input=fed,
        capture_output=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr.decode()
    assert_same_stream(pq.read_table(out), _expected(query, table))
    (letter,) = [json.loads(x) for x in dead.read_text().splitlines()]
    assert letter["row"] == "garbage,line"
    assert letter["reason"].startswith(f"stdin line {cut + 1}: ")


def _in_two_parts(
    cmd: list[str], first: bytes, rest: bytes, enough: Callable[[bytes], bool], wait_s: float
) -> tuple[bytes, bytes]:
    """Run ``cmd``, write ``first`` to its stdin and read its stdout until ``enough`` of it
    came (or ``wait_s`` passed) while stdin stays open; check the run still waits, then
    write ``rest`` and end the input. What came before the rest, and everything."""
    with subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as p:
        assert p.stdin is not None and p.stdout is not None
        try:
            p.stdin.write(first)
            p.stdin.flush()
            got = b""
            deadline = time.monotonic() + wait_s
            while not enough(got) and time.monotonic() < deadline:
                if select.select([p.stdout], [], [], 0.2)[0]:
                    chunk = p.stdout.read1(1 << 16)
                    assert chunk, "stdout closed before the input ended"
                    got += chunk
            assert p.poll() is None  # still running: it waits for more input
            before = got
            p.stdin.write(rest)
            p.stdin.close()
            got += p.stdout.read()
            assert p.wait(timeout=300) == 0
        finally:
            if p.poll() is None:
                p.kill()
    return before, got


def _instants(out: bytes) -> list[int]:
    return [json.loads(x)["_ts"] for x in out.splitlines() if x.endswith(b"}")]


def test_results_appear_before_the_input_ends(raw: tuple[bytes, pa.Table]) -> None:
    """A producer writes the first half and waits: result lines arrive on stdout while the
    input is still open; after the rest and end of input, the whole stream is the oracle's."""
    data, table = raw
    lines = data.splitlines(keepends=True)
    half = len(lines) // 2
    before, got = _in_two_parts(
        _cmd("q1", "--placement", "row", "--output", "-"),
        b"".join(lines[:half]),
        b"".join(lines[half:]),
        lambda out: out.count(b"\n") >= 3,
        120,
    )
    assert before.count(b"\n") >= 3, "no result before the end of input"
    rows = [json.loads(x) for x in got.decode().splitlines()]
    expected = _expected("q1", table)
    assert_same_stream(pa.Table.from_pylist(rows).select(expected.column_names), expected)


@pytest.mark.parametrize("idle", [None, "0.5"])
def test_idle_timeout_fires_the_last_instant_of_a_quiet_stdin(
    raw: tuple[bytes, pa.Table], idle: str | None
) -> None:
    """The producer stops after an event-second: without ``--idle-timeout`` that second's
    instant waits for the next tuple; with it, the instant fires once stdin has been quiet
    for 0.5 s. Either way the whole result stream is the oracle's (the rest starts after)."""
    data, table = raw
    lines = data.splitlines(keepends=True)
    ts = table.column("ts").to_pylist()
    half = len(lines) // 2
    while ts[half] == ts[half - 1]:  # cut between two event-seconds
        half += 1
    last = ts[half - 1]
    args = ["--placement", "row", "--output", "-"] + (["--idle-timeout", idle] if idle else [])
    before, got = _in_two_parts(
        _cmd("q2", *args),
        b"".join(lines[:half]),
        b"".join(lines[half:]),
        lambda out: last in _instants(out)[-1:],
        20 if idle else 6,
    )
    seen = set(_instants(before))
    assert (last in seen) == (idle is not None), (last, max(seen, default=None))
    rows = [json.loads(x) for x in got.decode().splitlines()]
    expected = _expected("q2", table)
    assert_same_stream(pa.Table.from_pylist(rows).select(expected.column_names), expected)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", "other=-"], "standard input is already read by another stream"),
    ],
)
def test_stdin_twice_is_exit_2(args: list[str], message: str) -> None:
    r = subprocess.run(_cmd("q1", *args), capture_output=True, text=True, timeout=120, input="")
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_bench_refuses_stdin() -> None:
    sql = ROOT / "queries" / "smartplug" / "q1.sql"
    r = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "bench", str(sql), "--data", "readings=-"],
        capture_output=True,
        text=True,
        timeout=120,
        input="",
    )
    assert r.returncode == 2 and "can be read only once" in r.stderr, r.stderr


def _drained(fd: int, timeout: float) -> None:
    """Wait until the pipe written through ``fd`` is empty: its reader took everything."""
    import fcntl
    import struct
    import termios

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        if left == 0:
            return
        time.sleep(0.01)
    raise AssertionError("hycq did not read its stdin")


def test_a_stream_on_stdin_in_real_time_is_judged_by_lag(tmp_path: Path) -> None:
    """stdin fed at 2,000 tuples/s in real time, one event-second a wall second from when
    hycq took the first: the run is judged by its lag behind the stream's event time, which
    stayed bounded (engines/runtime/live_lag.py), not by its throughput against the
    nominal rate."""
    from engines.runtime import RunOptions
    from hycq.flags import CLI_OPTION_NAMES
    from hycq.publish import _payload, stream_batches

    options = RunOptions(rate=2000, duration=5, names=CLI_OPTION_NAMES)
    _, batches, _ = stream_batches(ROOT / "queries" / "smartplug" / "q2.sql", None, None, options)
    table = pa.Table.from_batches(list(batches))
    seconds = table.column("ts").to_numpy() - table.column("ts")[0].as_py()
    metrics = tmp_path / "m.json"
    with subprocess.Popen(
        _cmd("q2", "--metrics", str(metrics)),
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
    ) as p:  # fmt: skip
        assert p.stdin is not None and p.stderr is not None
        start = 0.0
        for second in range(int(seconds.max()) + 1):
            time.sleep(max(0.0, start + second - time.monotonic()))
            p.stdin.write(_payload(table.filter(pa.array(seconds == second)), "csv"))
            p.stdin.flush()
            if second == 0:  # the clock starts once hycq has read the first second
                _drained(p.stdin.fileno(), timeout=120)
                start = time.monotonic()
        p.stdin.close()
        err = p.stderr.read().decode()
        p.wait(timeout=120)
    assert p.returncode == 0, err
    m = json.loads(metrics.read_text())
    assert m.get("kept_up_rule") == "lag" and m["kept_up"] is True, m
    assert m["live_lag_s"] <= 1.0 and m["event_seconds"] == 5, m
    assert "live source, kept up: lag grew by at most" in err

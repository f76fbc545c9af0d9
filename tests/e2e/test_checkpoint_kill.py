"""``hycq run --checkpoint DIR`` killed with SIGKILL at random moments, again and again,
each time continued with ``--resume DIR``: the output file in the end is the oracle's result
stream (engines/runtime/checkpoint.py; in-process crash points: tests/differential).

The runs replay event time against the wall clock (``--pace realtime``), so a kill lands in
the middle of the stream at a random instant, between checkpoints or during one.

Checkpoints follow the wall clock whatever the size of the input's batches: a small file (one
batch) replayed in real time, and standard input that goes quiet, are checkpointed every
``--checkpoint-every`` seconds too.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from engines.arrow_types import arrow_schema
from optimizer.sql.catalog import load_catalog
from tests.datagen import small_smartplug
from tests.lateness import without_late
from tests.oracle import assert_same_stream, oracle

#: event-seconds of data: the length of an uninterrupted run
SECONDS = 24
ROOT = Path(__file__).resolve().parents[2]
CATALOG_PATH = ROOT / "queries" / "smartplug" / "catalog.toml"
CATALOG = load_catalog(CATALOG_PATH)
SCHEMA = arrow_schema(CATALOG.get("readings").schema)
#: per plug, the average of 20-second windows and how many readings were above it: a window
#: short enough that the checkpoints' log is cut many times during the run
QUERY = """
SELECT r.plug_id, r.household_id, r.house_id, COUNT(*) AS above, MAX(a.avg_value) AS avg_value
FROM readings [RANGE 20 SECONDS SLIDE 2 SECONDS] AS r,
     (SELECT plug_id, household_id, house_id, AVG(value) AS avg_value
      FROM readings [RANGE 20 SECONDS SLIDE 2 SECONDS]
      WHERE property = 1
      GROUP BY plug_id, household_id, house_id) AS a
WHERE r.property = 1 AND r.plug_id = a.plug_id AND r.household_id = a.household_id
  AND r.house_id = a.house_id AND r.value > a.avg_value
GROUP BY r.plug_id, r.household_id, r.house_id
"""


def _data(folder: Path, seconds: int) -> tuple[Path, pa.Table]:
    table = small_smartplug(seconds, seed=23, rate=400.0).select(SCHEMA.names).cast(SCHEMA)
    path = folder / "readings.csv"
    pacsv.write_csv(table, path, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return path, table


def _kill_and_resume(folder: Path, placement: str, kills: int, seed: int) -> list[str]:
    """Start the run, SIGKILL it after a random delay, resume, ... ``kills`` times, then
    let the last resume finish. What each attempt ended with."""
    sql = folder / "query.sql"
    sql.write_text(QUERY)
    data, _ = _data(folder, SECONDS)
    rng = random.Random(seed)
    base = [
        sys.executable, "-m", "hycq.cli", "run", str(sql), "--catalog", str(CATALOG_PATH),
        "--data", f"readings={data}", "--placement", placement, "--pace", "realtime",
        "--output", str(folder / "out.jsonl"), "--checkpoint-every", "0.3",
    ]  # fmt: skip
    ends = []
    for attempt in range(kills + 1):
        flag = ["--resume" if attempt else "--checkpoint", str(folder / "ckpt")]
        log = folder / f"attempt-{attempt}.log"
        with log.open("wb") as err:
            proc = subprocess.Popen(base + flag, stdout=subprocess.DEVNULL, stderr=err, cwd=folder)
        if attempt < kills:
            # from the first checkpoint on (start-up takes seconds on a busy machine)
            _wait_for_checkpoint(proc, folder / "ckpt")
            deadline = time.monotonic() + rng.uniform(0.5, 2.5)
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        if proc.poll() is None and attempt < kills:
            proc.kill()
            proc.wait()
            ends.append("killed")
            continue
        proc.wait(timeout=300)
        assert proc.returncode == 0, log.read_text()
        ends.append("finished")
        break
    return ends


def _wait_for_checkpoint(proc: subprocess.Popen[bytes], folder: Path, limit: float = 90) -> None:
    """Until ``folder`` holds a checkpoint manifest (or the run ended)."""
    deadline = time.monotonic() + limit
    while proc.poll() is None and not list(folder.glob("ckpt-*.json")):
        assert time.monotonic() < deadline, "the run wrote no checkpoint"
        time.sleep(0.05)


def _check(folder: Path) -> None:
    _, table = _data(folder, SECONDS)
    expected = oracle(QUERY, CATALOG, without_late(QUERY, CATALOG, {"readings": table}))
    rows = [json.loads(x) for x in (folder / "out.jsonl").read_text().splitlines()]
    assert_same_stream(pa.Table.from_pylist(rows, schema=expected.schema), expected)


def test_killed_runs_resume_to_the_oracles_output(tmp_path: Path) -> None:
    ends = _kill_and_resume(tmp_path, "auto", kills=4, seed=1)
    assert ends.count("killed") >= 2, ends
    _check(tmp_path)


@pytest.mark.long
@pytest.mark.parametrize("placement", ["row", "column"])
def test_twenty_kills(tmp_path: Path, placement: str) -> None:
    ends = _kill_and_resume(tmp_path, placement, kills=20, seed=7)
    assert ends.count("killed") >= 10, ends
    _check(tmp_path)


def _manifest(folder: Path) -> dict | None:
    """The newest checkpoint manifest in ``folder`` (None: none yet)."""
    newest = sorted(folder.glob("ckpt-*.json"))
    return json.loads(newest[-1].read_text()) if newest else None


def test_a_small_realtime_file_is_checkpointed_by_the_clock(tmp_path: Path) -> None:
    """Far fewer rows than one read batch (65,536), replayed in real time: a kill after a few
    seconds finds a checkpoint holding the rows read so far, and the resumed run's output is
    byte for byte the uninterrupted run's."""
    sql = tmp_path / "query.sql"
    sql.write_text(QUERY)
    data, table = _data(tmp_path, SECONDS)
    assert table.num_rows < 65536
    base = [
        sys.executable, "-m", "hycq.cli", "run", str(sql), "--catalog", str(CATALOG_PATH),
        "--data", f"readings={data}", "--placement", "row",
    ]  # fmt: skip
    ckpt, out = tmp_path / "ckpt", tmp_path / "out.jsonl"
    log = tmp_path / "first.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [*base, "--pace", "realtime", "--output", str(out), "--checkpoint", str(ckpt),
             "--checkpoint-every", "1"],
            stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path,
        )  # fmt: skip
    try:
        _wait_for_checkpoint(proc, ckpt)
        time.sleep(4.0)
        assert proc.poll() is None, log.read_text()
        proc.kill()
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    m = _manifest(ckpt)
    assert m is not None and m["number"] >= 3, m
    assert m["delivered"]["readings"] > 0 and m["last_instant"] is not None
    # the file's rows changed since (a value of the part already read): refused, exit 2
    original, st = data.read_bytes(), data.stat()
    first, rest = original.split(b"\n", 1)
    fields = first.split(b",")
    fields[2] = fields[2][:-1] + (b"1" if fields[2][-1:] != b"1" else b"2")
    data.write_bytes(b",".join(fields) + b"\n" + rest)
    refused = subprocess.run(
        [*base, "--output", str(out), "--resume", str(ckpt)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    error, hint = refused.stderr.strip().splitlines()
    assert error.startswith("error: --resume: the input of stream 'readings' changed"), error
    assert str(data) in error and "modified" in error and hint.lstrip().startswith("hint: ")
    data.write_bytes(original)
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    resumed = subprocess.run(
        [*base, "--output", str(out), "--resume", str(ckpt)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from ckpt-" in resumed.stderr
    whole = tmp_path / "whole.jsonl"
    plain = subprocess.run(
        [*base, "--output", str(whole)], capture_output=True, text=True, timeout=300,
        cwd=tmp_path,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    assert out.read_bytes() == whole.read_bytes()
    # the resumed run's summary: its rate is the data's, its counts say what they cover
    rate = re.compile(r"rate ([\d,.]+)/s")
    assert rate.findall(resumed.stderr) == rate.findall(plain.stderr) != []
    totals = re.search(r"(\d+) result rows over (\d+) instants", plain.stderr)
    assert totals is not None
    assert f"whole stream: {table.num_rows} tuples, {totals.group(0)}" in resumed.stderr


def test_quiet_stdin_is_checkpointed_by_the_clock(tmp_path: Path) -> None:
    """Rows on standard input, then silence (the pipe stays open): a checkpoint holding the
    rows comes within the interval, not only when the next rows arrive."""
    data, table = _data(tmp_path, 6)
    ckpt = tmp_path / "ckpt"
    sql = tmp_path / "query.sql"
    sql.write_text(QUERY)
    log = tmp_path / "run.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hycq.cli", "run", str(sql), "--catalog", str(CATALOG_PATH),
             "--data", "readings=-", "--placement", "row", "--output",
             str(tmp_path / "out.jsonl"), "--checkpoint", str(ckpt), "--checkpoint-every", "1"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path,
        )  # fmt: skip
    assert proc.stdin is not None
    try:
        proc.stdin.write(data.read_bytes())  # (the reader waits for a first line to start)
        proc.stdin.flush()
        deadline = time.monotonic() + 90
        m = _manifest(ckpt)
        while not (m and m["delivered"].get("readings") == table.num_rows):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"no checkpoint of the rows: {m}"
            time.sleep(0.1)
            m = _manifest(ckpt)
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

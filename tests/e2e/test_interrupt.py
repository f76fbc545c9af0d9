"""SIGINT / SIGTERM during ``hycq run``: the run stops between batches, commits the instants
it has computed (valid Parquet/CSV/JSON lines, dead-letter and metrics files), prints a
summary and exits 130 (SIGINT) or 143 (SIGTERM). The output is a prefix of the oracle's result
stream: every instant up to the last one written, exactly.

Real subprocesses at ``--pace realtime`` (so the run is still going when the signal comes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from engines.sources.files import read_batches
from optimizer.sql.catalog import load_catalog
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
Q1 = ROOT / "queries" / "smartplug" / "q1.sql"
CATALOG = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")


def hycq(*args: str | Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "hycq.cli", *map(str, args)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two minutes of two houses at 100 tuples/s (far longer than any test lets it run)."""
    path = tmp_path_factory.mktemp("data") / "readings.csv"
    done = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "data", "generate", "--out", str(path),
         "--seconds", "120", "--houses", "2", "--rate", "100"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return path


def wait_until_running(proc: subprocess.Popen[str], folder: Path, output: str) -> None:
    """Until the run loop has started (the sink's temp file exists), then 3.5 s more."""
    deadline = time.monotonic() + 90
    while not list(folder.glob(f".{output}.*.tmp")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.05)
    time.sleep(3.5)


def read_output(path: Path) -> pa.Table:
    if path.suffix == ".parquet":
        return pq.read_table(path)
    if path.suffix == ".csv":
        return pacsv.read_csv(path)
    return pa.Table.from_pylist([json.loads(line) for line in path.read_text().splitlines()])


def interrupt(
    data: Path, folder: Path, suffix: str, placement: str, sig: signal.Signals
) -> tuple[subprocess.Popen[str], str, pa.Table, dict]:
    out = f"out{suffix}"
    proc = hycq(
        "run", Q1, "--data", f"readings={data}", "--pace", "realtime", "--placement", placement,
        "--output", out, "--metrics", "m.json", "--dead-letter", "dl.jsonl", cwd=folder,
    )  # fmt: skip
    wait_until_running(proc, folder, out)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig.value, (proc.returncode, stderr)
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert not list(folder.glob(".*.tmp")), "temporary files left behind"
    metrics = json.loads((folder / "m.json").read_text())
    assert (folder / "dl.jsonl").read_text() == ""  # committed, even though empty
    return proc, stderr, read_output(folder / out), metrics


def expected_prefix(data: Path, last_instant: int) -> pa.Table:
    """The oracle's result stream of the whole file, up to ``last_instant``: a slide instant's
    result depends only on tuples with earlier or equal timestamps."""
    table = pa.Table.from_batches(list(read_batches(data)))
    prefix = table.filter(pc.less_equal(table.column("ts"), last_instant))
    return oracle(Q1.read_text(), CATALOG, {"readings": prefix})


@pytest.mark.parametrize(
    ("suffix", "placement"), [(".parquet", "column"), (".csv", "auto"), (".jsonl", "row")]
)
def test_sigint_commits_a_prefix_of_the_oracle_stream(
    data: Path, tmp_path: Path, suffix: str, placement: str
) -> None:
    _, stderr, got, m = interrupt(data, tmp_path, suffix, placement, signal.SIGINT)
    assert m["interrupted"] == "SIGINT"
    assert "tuples in" in stderr and "result rows" in stderr  # the run's summary line
    assert f"interrupted by SIGINT: complete results up to instant {m['last_instant']}" in stderr
    assert got.num_rows == m["results"] > 0
    instants = got.column("_ts").to_pylist()
    assert max(instants) == m["last_instant"]
    assert m["tuples_in"] < 12000  # it did stop early
    assert_same_stream(got, expected_prefix(data, m["last_instant"]))


def test_sigterm_stops_the_same_way(data: Path, tmp_path: Path) -> None:
    _, stderr, got, m = interrupt(data, tmp_path, ".parquet", "column", signal.SIGTERM)
    assert m["interrupted"] == "SIGTERM" and "interrupted by SIGTERM" in stderr
    assert got.num_rows > 0
    assert_same_stream(got, expected_prefix(data, m["last_instant"]))


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command name) of the live child processes of ``pid`` (Linux /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append((int(stat.parent.name), name))
    return out


def _alive(pid: int) -> bool:
    try:
        text = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2 :].split()[0] != "Z"  # a zombie has exited


@pytest.mark.spark
def test_sigint_with_spark_leaves_no_jvm(data: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    proc = hycq(
        "run", Q1, "--data", f"readings={data}", "--pace", "realtime", "--placement", "column",
        "--column-engine", "spark", "--output", "out.parquet", "--metrics", "m.json",
        cwd=tmp_path,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    jvms: list[int] = []
    while not jvms or not list(tmp_path.glob(".out.parquet.*.tmp")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "Spark did not start"
        jvms = [pid for pid, name in _children(proc.pid) if name == "java"]
        time.sleep(0.2)
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted by SIGINT" in stderr
    pq.read_table(tmp_path / "out.parquet")  # a valid file (its footer was written)
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in jvms):
        assert time.monotonic() < deadline, f"Spark JVM {jvms} still running after exit"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def long_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten minutes of two houses at 20 tuples/s: one file batch, hundreds of instants."""
    path = tmp_path_factory.mktemp("long") / "readings.csv"
    done = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "data", "generate", "--out", str(path),
         "--seconds", "600", "--houses", "2", "--rate", "20"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return path


@pytest.mark.spark
def test_sigterm_while_spark_restarts_after_a_fault(long_data: Path, tmp_path: Path) -> None:
    """The Spark JVM is killed mid-run; while the MIG restarts Spark (a new JVM is starting)
    SIGTERM arrives: the run stops within seconds with exit 143 and commits every instant
    it had emitted, instead of finishing the restart and then the rest of the file batch
    (at --pace max one batch spans hundreds of instants)."""
    pytest.importorskip("pyspark")
    query = tmp_path / "q.sql"
    query.write_text(
        "SELECT plug_id, COUNT(*) AS n, AVG(value) AS a FROM readings [RANGE 10 SECONDS] "
        "GROUP BY plug_id\n"
    )
    (tmp_path / "catalog.toml").write_text((ROOT / "queries/smartplug/catalog.toml").read_text())
    err_path = tmp_path / "stderr.txt"
    with err_path.open("w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hycq.cli", "run", query.name, "--data",
             f"readings={long_data}", "--placement", "column", "--column-engine", "spark",
             "--output", "out.jsonl", "--metrics", "m.json"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=err_file, text=True,
        )  # fmt: skip

    def java() -> list[int]:
        return [pid for pid, name in _children(proc.pid) if name == "java"]

    # Running once results reach the output file (JSON lines are written in 8 KB blocks:
    # a dozen instants or so): the first JVM has answered queries.
    deadline = time.monotonic() + 240
    while not any(p.stat().st_size for p in tmp_path.glob(".out.jsonl.*.tmp")):
        assert proc.poll() is None, err_path.read_text()
        assert time.monotonic() < deadline, "no results from Spark"
        time.sleep(0.2)
    (first,) = java()
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while not [pid for pid in java() if pid != first]:
        assert proc.poll() is None, err_path.read_text()
        assert time.monotonic() < deadline, "the MIG did not restart Spark"
        time.sleep(0.05)
    restarting = [pid for pid in java() if pid != first]
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # it did not stop: do not leave it running
            proc.kill()
            proc.communicate()
    elapsed = time.monotonic() - sent
    stderr = err_path.read_text()
    assert proc.returncode == 143, stderr
    assert elapsed < 30, f"took {elapsed:.1f} s to stop after SIGTERM"
    assert "interrupted by SIGTERM" in stderr and "internal error" not in stderr
    m = json.loads((tmp_path / "m.json").read_text())
    assert m["interrupted"] == "SIGTERM" and m["faults"], m
    got = read_output(tmp_path / "out.jsonl")
    assert got.num_rows == m["results"] > 0
    expected = expected_prefix_of(query, long_data, m["last_instant"])
    assert_same_stream(got, expected)
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in restarting):
        assert time.monotonic() < deadline, f"Spark JVM {restarting} still running after exit"
        time.sleep(0.2)


def expected_prefix_of(query: Path, data: Path, last_instant: int) -> pa.Table:
    table = pa.Table.from_batches(list(read_batches(data)))
    prefix = table.filter(pc.less_equal(table.column("ts"), last_instant))
    return oracle(query.read_text(), CATALOG, {"readings": prefix})

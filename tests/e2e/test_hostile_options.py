"""Options and small input files that used to be accepted silently or fail late.

* ``bench --plans ''``, ``--engines ''`` (explain, report, calibrate) name nothing: exit 2.
* A placement JSON with a key given twice is refused; one starting with a BOM is read.
* ``--debug`` works after the subcommand as well as before it.
* ``--report``'s path is checked before the run.
* A bad ``--spark-conf`` is one line, exit 2, within ``--spark-connect-timeout``.
* ``data publish`` of a source with no valid row is exit 2 and sends nothing (not even the
  end-of-stream message); rejected rows are counted, reported and dead-lettered.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hycq.cli import main
from tests.mqtt import Broker

ROOT = Path(__file__).resolve().parents[2]
Q1 = ROOT / "queries" / "smartplug" / "q1.sql"
Q5 = ROOT / "queries" / "smartplug" / "q5.sql"


def run_main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def assert_one_error(code: int, err: str, *parts: str) -> None:
    assert code == 2, (code, err)
    assert err.startswith("error: ") and err.count("error: ") == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(err.splitlines()) <= 3, err
    for part in parts:
        assert part in err, (part, err)


@pytest.mark.parametrize(
    ("args", "part"),
    [
        (("bench", Q1, "--plans", ""), "--plans names no plan"),
        (("bench", Q1, "--plans", " , ,"), "--plans names no plan"),
        (("explain", Q1, "--engines", ""), "--engines names no engine"),
        (("explain", Q1, "--engines", ","), "--engines names no engine"),
        (("report", Q1, "--engines", " ", "--out", "r.html"), "--engines names no engine"),
        (("calibrate", "--engines", "", "--quick"), "--engines names no engine"),
        (("bench", Q1, "--rates", ""), "--rates"),
        (("bench", Q1, "--rates", "1000,,2000"), "--rates"),
    ],
    ids=lambda a: " ".join(map(str, a[:1] + a[2:4])) if isinstance(a, tuple) else None,
)
def test_empty_lists_are_refused(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str | Path, ...],
    part: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = run_main(capsys, *args)
    assert_one_error(code, err, part)
    assert "measuring" not in err and not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("text", "part"),
    [
        ('{"aggregate1": "row", "aggregate1": "duckdb"}', "operator 'aggregate1' is given twice"),
        ('{"select1": "row", "aggregate1": "row", "select1": "row"}', "'select1' is given twice"),
    ],
)
def test_duplicate_keys_in_a_placement_file_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, part: str
) -> None:
    (tmp_path / "p.json").write_text(text)
    code, err = run_main(capsys, "run", Q5, "--placement", tmp_path / "p.json", "--duration", "2")
    assert_one_error(code, err, part)


def test_a_placement_file_with_a_bom_is_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "p.json").write_bytes(b"\xef\xbb\xbf" + b'{"aggregate1": "duckdb"}')
    code, err = run_main(
        capsys, "run", Q5, "--placement", tmp_path / "p.json", "--duration", "2", "--metrics",
        tmp_path / "m.json",
    )  # fmt: skip
    assert code == 0, err
    assert '"aggregate1": "duckdb"' in (tmp_path / "m.json").read_text()


@pytest.mark.parametrize(
    "args",
    [
        ("--debug", "explain", Q5),
        ("explain", "--debug", Q5),
        ("explain", Q5, "--debug"),
        ("data", "generate", "--debug", "--out", "g.csv", "--seconds", "1"),
        ("run", Q5, "--duration", "1", "--debug"),
    ],
    ids=["before", "after", "at the end", "data generate", "run"],
)
def test_debug_is_accepted_anywhere(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str | Path, ...],
) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = run_main(capsys, *args)
    assert code == 0, err


def test_debug_after_the_subcommand_shows_the_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hycq import cli

    def broken(args: object) -> int:
        raise RuntimeError("a deliberate bug")

    monkeypatch.setattr(cli, "_explain", broken)
    code, err = run_main(capsys, "explain", Q5, "--debug")
    assert code == 1 and "Traceback" in err and "a deliberate bug" in err
    code, err = run_main(capsys, "explain", Q5)
    assert code == 1 and "Traceback" not in err and "rerun with --debug" in err


@pytest.mark.parametrize(
    ("report", "part"),
    [
        ("nowhere/r.html", "output folder does not exist"),
        ("r.txt", "--report must end in .html"),
        ("adir.html", "is a directory"),
    ],
)
def test_the_report_path_is_checked_before_the_run(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    report: str,
    part: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir.html").mkdir()
    code, err = run_main(capsys, "run", Q1, "--duration", "30", "--report", report)
    assert_one_error(code, err, part)
    assert "tuples in" not in err


# -- Spark settings ----------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize(
    ("conf", "timeout", "part"),
    [
        ("spark.driver.memory=zzz", "60", "Invalid maximum heap size"),
        ("spark.master=spark://127.0.0.1:9", "8", "Spark did not start within 8 s"),
        ("spark.master=nonsense", "60", "cannot start Spark (spark.master=nonsense)"),
    ],
    ids=["heap", "unreachable master", "bad master"],
)
def test_a_bad_spark_conf_is_one_line_within_the_timeout(
    tmp_path: Path, conf: str, timeout: str, part: str
) -> None:
    pytest.importorskip("pyspark")
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "run", Q5, "--duration", "2", "--placement", "column",
         "--column-engine", "spark", "--spark-conf", conf, "--spark-connect-timeout", timeout,
         "--output", "o.csv"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert time.monotonic() - start < float(timeout) + 40
    assert_one_error(proc.returncode, proc.stderr, part, "--spark-conf")
    assert proc.stdout == "" and not list(tmp_path.iterdir())


# -- data publish: no valid row -----------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    pytest.importorskip("paho.mqtt")
    b = Broker(tmp_path_factory.mktemp("mosquitto"))
    yield b
    b.stop()


@pytest.fixture
def received(broker: Broker) -> Iterator[tuple[str, list[bytes]]]:
    """A topic and the payloads a subscriber got on it (subscribed before the test runs)."""
    import threading

    import paho.mqtt.client as mqtt

    topic = f"hycq/test/publish/{time.time_ns()}"
    got: list[bytes] = []
    ready = threading.Event()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"sub-{time.time_ns()}")
    c.on_message = lambda _c, _u, msg: got.append(msg.payload)
    c.on_subscribe = lambda *_a: ready.set()
    c.connect("127.0.0.1", broker.port)
    c.subscribe(topic, qos=1)
    c.loop_start()
    assert ready.wait(10)
    yield broker.url(topic), got
    c.loop_stop()
    c.disconnect()


@pytest.fixture
def keyed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    """A keyed catalog (streams r, s, t: ts, k, v) and a smart-plug file beside it."""
    code, err = run_main(capsys, "data", "generate", "--generator", "keyed", "--out", tmp_path,
                         "--seconds", "2")  # fmt: skip
    assert code == 0, err
    code, err = run_main(capsys, "data", "generate", "--out", tmp_path / "sp.csv", "--seconds", "2")
    assert code == 0, err
    return tmp_path


def _settle(got: list[Any]) -> list[Any]:
    time.sleep(0.5)  # a message sent would have arrived by now
    return got


@pytest.mark.parametrize(
    ("file", "part"),
    [
        ("sp.csv", "no valid row in file sp.csv: all 6,708 rows were rejected"),
        ("header.csv", "no rows to publish in file header.csv"),
        ("empty.csv", "empty.csv: the file is empty"),
    ],
    ids=["rows that fit no column", "header only", "empty"],
)
def test_publishing_no_valid_row_is_exit_2_and_sends_nothing(
    capsys: pytest.CaptureFixture[str],
    keyed: Path,
    received: tuple[str, list[bytes]],
    monkeypatch: pytest.MonkeyPatch,
    file: str,
    part: str,
) -> None:
    monkeypatch.chdir(keyed)
    (keyed / "header.csv").write_text("ts,k,v\n")
    (keyed / "empty.csv").write_text("")
    url, got = received
    code, err = run_main(
        capsys, "data", "publish", file, "--catalog", "catalog.toml", "--stream", "r", "--to", url
    )
    assert_one_error(code, err, part)
    assert _settle(got) == []


def test_rejected_rows_are_counted_reported_and_dead_lettered(
    capsys: pytest.CaptureFixture[str],
    keyed: Path,
    received: tuple[str, list[bytes]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(keyed)
    (keyed / "one.csv").write_text("ts,k,v\nx,y,z\n1400000000,1,1.5\n1400000001,2,2.5\n")
    url, got = received
    try:
        code = main(["data", "publish", "one.csv", "--catalog", "catalog.toml", "--stream", "r",
                     "--to", url, "--dead-letter", "dl.jsonl"])  # fmt: skip
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "published 2 rows" in out and "1 row rejected (dead letters: dl.jsonl)" in out
    dead = [json.loads(line) for line in (keyed / "dl.jsonl").read_text().splitlines()]
    assert len(dead) == 1 and "line 2" in dead[0]["reason"] and dead[0]["stream"] == "r"
    assert len(_settle(got)) == 2  # one message of two rows, then the end of the stream
    code, err = run_main(capsys, "data", "publish", "one.csv", "--catalog", "catalog.toml",
                         "--stream", "r", "--to", url, "--dead-letter", "one.csv")  # fmt: skip
    assert_one_error(code, err, "--dead-letter one.csv is the same file as")


@pytest.mark.parametrize(
    ("query", "data", "part"),
    [
        ("q.sql", "r=sp.csv", "no valid row in file sp.csv: all 6708 rows were rejected"),
        (Q1, "readings=r.csv", "r.csv: missing column 'id'"),
    ],
    ids=["rows that fit no column", "a header that fits no column"],
)
def test_explain_of_a_data_file_without_a_valid_row_is_exit_2(
    capsys: pytest.CaptureFixture[str],
    keyed: Path,
    monkeypatch: pytest.MonkeyPatch,
    query: str | Path,
    data: str,
    part: str,
) -> None:
    """explain --data samples the file the run would read: a file that gives no valid row
    fails as the run would, instead of a plan for default statistics."""
    monkeypatch.chdir(keyed)
    (keyed / "q.sql").write_text("SELECT k, COUNT(*) AS n FROM r [RANGE 2 SECONDS] GROUP BY k\n")
    code, err = run_main(capsys, "explain", query, "--data", data)
    assert_one_error(code, err, part)

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
from tests.cli import run_main
from tests.mqtt import Broker

ROOT = Path(__file__).resolve().parents[2]
Q1 = ROOT / "queries" / "smartplug" / "q1.sql"
Q5 = ROOT / "queries" / "smartplug" / "q5.sql"


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
    from hycq.cli import cmd_explain

    def broken(args: object) -> int:
        raise RuntimeError("a deliberate bug")

    monkeypatch.setattr(cmd_explain, "run", broken)
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
        ("spark.master=local[abc]", "60", "Could not parse Master URL: 'local[abc]'"),
        ("spark.master=spark://127.0.0.1:1", "8", "(spark.master=spark://127.0.0.1:1)"),
    ],
    ids=["heap", "unreachable master", "bad master", "bad local master", "closed port"],
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


def _descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command name) of every process below ``pid`` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        ppid = int(text[text.rindex(")") + 2 :].split()[1])
        child = int(stat.parent.name)
        children.setdefault(ppid, []).append(child)
        names[child] = name
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append((child, names[child]))
            todo.append(child)
    return found


@pytest.mark.spark
@pytest.mark.slow
def test_a_jvm_killed_during_start_up_is_started_again(tmp_path: Path) -> None:
    """The JVM is SIGKILLed as soon as it appears, before Spark answers: the start is tried
    again, as a JVM that dies mid-run is restarted, and the run completes."""
    import signal

    pytest.importorskip("pyspark")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hycq.cli", "run", str(Q5), "--duration", "2", "--placement",
         "column", "--column-engine", "spark", "--output", "o.csv", "--metrics", "m.json"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and proc.poll() is None:
        java = [pid for pid, name in _descendants(proc.pid) if name == "java"]
        if java:
            killed = java[0]
            import os

            os.kill(killed, signal.SIGKILL)
        time.sleep(0.05)
    try:
        _, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert killed is not None, "no JVM appeared"
    assert proc.returncode == 0, err
    assert "the JVM died while Spark was starting" in err and "starting it again" in err, err
    assert "Traceback" not in err
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["results"] > 0 and (tmp_path / "o.csv").stat().st_size > 0


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
        ("sp.csv", "no valid row in file sp.csv: all 4,000 rows were rejected"),
        ("header.csv", "file header.csv has no rows"),
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
        ("q.sql", "r=sp.csv", "no valid row in file sp.csv: all 4000 rows were rejected"),
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


# -- every numeric option, and every number inside a compound value -------------------------

#: What each numeric option gets: none, a negative, huge, one past any integer type, NaN and
#: the infinities (given as ``--opt=VALUE``, so that argparse takes ``-1`` as the value).
HOSTILE_NUMBERS = ("0", "-1", "1e308", "99999999999999999999", "nan", "inf", "-inf")
#: Wall seconds a command that took a value may run before it is sent SIGTERM: it must then
#: stop within STOP_S (exit 130 + 13 = 143) with no traceback.
BUDGET_S = 2.0
STOP_S = 15.0
SUM_QUERY = (
    "SELECT house_id, SUM(value) AS s FROM readings [RANGE 60 SECONDS SLIDE 1 SECOND] "
    "WHERE property = 1 GROUP BY house_id\n"
)


def _numeric_options() -> list[tuple[tuple[str, ...], str]]:
    """(command path, option) of every option of every command whose value is a number,
    found by walking the parsers (a new numeric option is checked without editing this)."""
    import argparse

    from hycq import cli

    numeric = {float, int}

    def is_numeric(action: argparse.Action) -> bool:
        kind = action.type
        if kind in numeric:
            return True
        for probe in ("1", "0.5"):  # a number parser takes one of them and refuses "x"
            try:
                kind(probe)  # type: ignore[misc]
                break
            except (argparse.ArgumentTypeError, TypeError, ValueError):
                continue
        else:
            return False
        try:
            kind("x")  # type: ignore[misc]
        except argparse.ArgumentTypeError as err:
            return "number" in str(err) or "integer" in str(err)
        except ValueError:
            return True
        return False

    found: list[tuple[tuple[str, ...], str]] = []

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))
            elif action.option_strings and callable(action.type) and is_numeric(action):
                found.append((path, action.option_strings[-1]))

    walk(cli.build_parser(), ())
    return found


NUMERIC_OPTIONS = _numeric_options()


@pytest.fixture(scope="module")
def numeric_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Everything the base commands read: result files, run metrics, a profile, a query."""
    folder = tmp_path_factory.mktemp("numbers")
    (folder / "res.jsonl").write_text('{"_ts": 1, "k": 1, "n": 2, "s": 1.5}\n')
    (folder / "tru.jsonl").write_text('{"_ts": 1, "k": 1, "n": 2, "s": 1.5}\n')
    (folder / "sum.sql").write_text(SUM_QUERY)
    (folder / "t.json").write_text('{"placement": "row"}')
    assert main(["run", str(Q5), "--duration", "2", "--metrics", str(folder / "m.json")]) == 0
    params = {"select": 1e-7, "engines": {}}
    doc = {"format": 1, "created": "x", "machine": {}, "fits": {}, "parameters": params}
    (folder / "p.json").write_text(json.dumps(doc))
    return folder


@pytest.fixture
def numeric_work(numeric_files: Path, tmp_path: Path) -> Path:
    """A fresh copy of ``numeric_files`` per case (a case may write or delete files)."""
    import shutil

    for f in numeric_files.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def _base(path: tuple[str, ...], option: str, url: str) -> list[str]:
    """A cheap command of ``path`` that reaches the code using ``option``."""
    catalog = str(ROOT / "queries" / "smartplug" / "catalog.toml")
    bench = ["bench", str(Q5), "--rates", "100", "--plans", "row", "--measure", "1",
             "--repeat", "1", "--max-repeat", "1", "--warm-limit", "1"]  # fmt: skip
    base = {
        ("explain",): ["explain", str(Q5)],
        ("run",): ["run", str(Q5), "--duration", "1"],
        ("report",): ["report", str(Q5), "--out", "r.html"],
        ("bench",): bench,
        ("calibrate",): ["calibrate", "--quick", "--engines", "row", "--out", "c.json"],
        ("quality",): ["quality", "res.jsonl", "--truth", "tru.jsonl"],
        ("data", "generate"): ["data", "generate", "--out", "g.csv", "--seconds", "1"],
        ("data", "publish"): ["data", "publish", str(Q5), "--to", url, "--duration", "1"],
    }[path]
    context = {
        "--reoptimize-every": ["--adapt"],
        "--max-error": ["--disorder", "quality", "--catalog", catalog],
        "--confidence": ["--disorder", "quality", "--max-error", "0.1", "--catalog", catalog],
        "--recall-period": ["--disorder", "quality", "--max-error", "0.1", "--catalog", catalog],
        "--join-memory": ["--join-impl", "acaching"],
        "--checkpoint-every": ["--checkpoint", "ck", "--output", "o.jsonl"],
        "--duckdb-threads": ["--placement", "column"],
        "--datafusion-threads": ["--placement", "column", "--column-engine", "datafusion"],
        "--ways": ["--generator", "multiway", "--shape", "clique"],
        "--multiplicity": ["--generator", "multiway"],
        "--window": ["--generator", "multiway"],
        "--join-streams": ["--generator", "keyed"],
        "--shift-at": ["--generator", "keyed", "--join-streams", "3"],
        "--keys": ["--generator", "keyed"],
        "--skew": ["--generator", "keyed"],
        "--origin": ["--generator", "keyed"],
        "--plug-rate": [],
    }.get(option, [])
    if path == ("run",) and option in ("--max-error", "--confidence", "--recall-period"):
        base[1] = "sum.sql"
    if path == ("quality",):
        context = []
    if path == ("calibrate",) and option in ("--weight", "--holdout", "--seed"):
        base = ["calibrate", "--from", "m.json", "--profile", "p.json", "--out", "o.json"]
    if path == ("data", "generate") and "--generator" in context and context[1] != "smartplug":
        base[base.index("--out") + 1] = "out"
    if option in base:
        at = base.index(option)
        del base[at : at + 2]
    return base + context


def _outcome(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, float]:
    """Run ``argv`` in-process; a command still going after BUDGET_S is sent SIGTERM."""
    import os
    import signal

    previous = signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGTERM))
    start = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, BUDGET_S)
    try:
        try:
            code = main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return code, capsys.readouterr().err, time.monotonic() - start


def _assert_run_or_named_error(code: int, err: str, took: float, option: str) -> None:
    """A run (exit 0, or 143 when the budget's SIGTERM stopped it, promptly), or exit 2
    with one ``error:`` naming the option; never an internal error or a traceback."""
    assert "Traceback" not in err and "internal error" not in err, err
    assert code in (0, 2, 143), (code, err)
    if code == 2:
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert err.startswith("error: ") and len(errors) == 1, err
        assert option in err, (option, err)
    if code == 143:
        assert took < BUDGET_S + STOP_S, (took, err)


@pytest.mark.parametrize("value", HOSTILE_NUMBERS)
@pytest.mark.parametrize(
    ("path", "option"), NUMERIC_OPTIONS, ids=[" ".join((*p, o)) for p, o in NUMERIC_OPTIONS]
)
def test_every_numeric_option_is_a_run_or_an_exit_2_naming_it(
    capsys: pytest.CaptureFixture[str],
    numeric_work: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    path: tuple[str, ...],
    option: str,
    value: str,
) -> None:
    url = "mqtt://127.0.0.1:1/none"
    if path == ("data", "publish"):
        url = request.getfixturevalue("broker").url("hycq/test/numbers")
    monkeypatch.chdir(numeric_work)
    argv = [*_base(path, option, url), f"{option}={value}"]
    _assert_run_or_named_error(*_outcome(capsys, argv), option)


#: Numbers inside compound values: (option, the command with {} where the number goes).
COMPOUND = [
    ("--disorder", ["run", str(Q5), "--duration", "1", "--disorder", "kslack:{}s"]),
    ("--disorder", ["run", str(Q5), "--duration", "1", "--disorder", "kslack:{}ms"]),
    ("--disorder", ["run", str(Q5), "--duration", "1", "--disorder", "kslack:{}"]),
    ("--migrate", ["run", str(Q5), "--duration", "1", "--migrate", "{}=t.json"]),
    *(
        (
            "--quality-param",
            [
                "run",
                "sum.sql",
                "--catalog",
                str(ROOT / "queries" / "smartplug" / "catalog.toml"),
                "--duration",
                "1",
                "--disorder",
                "quality",
                "--max-error",
                "0.1",
                "--quality-param",
                f"{name}={{}}",
            ],
        )
        for name in ("b", "g", "q", "up", "ud", "p_meas", "l_adt", "stat_window", "warmup")
    ),
    (
        "--rates",
        [
            "bench",
            str(Q5),
            "--rates",
            "100,{}",
            "--plans",
            "row",
            "--measure",
            "1",
            "--repeat",
            "1",
            "--max-repeat",
            "1",
            "--warm-limit",
            "1",
        ],
    ),
    *(
        (
            "--rate-profile",
            ["data", "generate", "--out", "g.csv", "--seconds", "2", "--rate-profile", prof],
        )
        for prof in ("0:{}", "0:10,{}:20", "0:10~{}:20")
    ),
    *(
        ("--delay", ["data", "generate", *gen, "--seconds", "2", "--delay", d])
        for d in ("zipf:{},1", "zipf:3,{}", "zipf:{}ms,1")
        for gen in (["--out", "g.csv"], ["--generator", "keyed", "--out", "kd"])
    ),
    *(
        (
            "--stream",
            [
                "data",
                "generate",
                "--generator",
                "keyed",
                "--out",
                "kd",
                "--seconds",
                "2",
                "--stream",
                f"r:{setting}",
            ],
        )
        for setting in (
            "rate={}",
            "keys={}",
            "skew={}",
            "start={}",
            "end={}",
            "hot={}",
            "sel={}",
            "silent=0-{}",
            "silent={}-1",
            "rate=0:{}",
            "keys=0:{}",
            "delay=zipf:{},1",
        )
    ),
]


@pytest.mark.parametrize("value", HOSTILE_NUMBERS)
@pytest.mark.parametrize(("option", "argv"), COMPOUND, ids=[" ".join(a[-2:]) for _, a in COMPOUND])
def test_every_number_inside_a_compound_value_is_a_run_or_an_exit_2_naming_it(
    capsys: pytest.CaptureFixture[str],
    numeric_work: Path,
    monkeypatch: pytest.MonkeyPatch,
    option: str,
    argv: list[str],
    value: str,
) -> None:
    monkeypatch.chdir(numeric_work)
    at = len(argv) - 1
    filled = [*argv[:at], argv[at].format(value)]
    _assert_run_or_named_error(*_outcome(capsys, filled), option)


# -- generations that imply absurd amounts of work ------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("--out", "g.csv", "--rate", "1e9", "--seconds", "1e9"),
        ("--out", "g.parquet", "--rate", "1e9", "--seconds", "1e9"),
        ("--out", "g.csv", "--plugs", "1000000", "--plug-rate", "1000", "--seconds", "1e9"),
        ("--out", "g.csv", "--rate-profile", "0:10,60:1e9", "--seconds", "1e9"),
        ("--generator", "keyed", "--out", "out", "--rate", "1e9", "--seconds", "1e9"),
        ("--generator", "keyed", "--out", "out", "--stream", "r:rate=1e9,silent=5-10",
         "--seconds", "1e9"),
        ("--generator", "keyed", "--join-streams", "8", "--out", "out", "--rate", "1e9",
         "--seconds", "1e9"),
        ("--generator", "multiway", "--out", "out", "--rate", "1e8", "--seconds", "1e9"),
        ("--generator", "x4", "--out", "out", "--rate", "1e9", "--seconds", "1e9"),
    ],
    ids=["csv", "parquet", "plugs", "profile", "keyed", "silent", "join streams", "multiway",
         "x4"],
)  # fmt: skip
def test_a_generation_beyond_the_disk_is_refused_up_front(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
) -> None:
    """10^18 rows (16 exabytes and more) fit no disk: refused before anything is written,
    naming the options that set the amount, at once (not after counting the rows)."""
    monkeypatch.chdir(tmp_path)
    code, err, _ = _outcome(capsys, ["data", "generate", *args])  # SIGTERM after BUDGET_S
    assert_one_error(code, err, "rows, at least", "free in", "--seconds")
    assert list(tmp_path.iterdir()) == []


def test_a_generation_beyond_memory_is_refused_up_front(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """x3 builds each stream as one table: 3 x 10^10 rows need 720 GB of memory, while as
    Parquet they need only 60 GB of disk (skipped where the disk has less)."""
    import shutil

    if shutil.disk_usage(tmp_path).free < 60e9:
        pytest.skip("less than 60 GB free: the disk check would refuse first")
    monkeypatch.chdir(tmp_path)
    argv = ["data", "generate", "--generator", "x3", "--out", "out", "--format", "parquet",
            "--rate", "1e6", "--seconds", "1e4"]  # fmt: skip
    code, err, _ = _outcome(capsys, argv)
    assert_one_error(code, err, "30,000,000,000 rows in memory", "available", "--rate")
    assert list(tmp_path.iterdir()) == []


def test_a_long_generation_shows_progress_and_stops_at_sigterm(tmp_path: Path) -> None:
    """A generation that fits but takes long says how far it got, and SIGTERM stops it at
    once, leaving neither the file nor a temporary one."""
    import shutil
    import signal
    import threading

    if shutil.disk_usage(tmp_path).free < 20e9:
        pytest.skip("less than 20 GB free: the generation would be refused up front")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hycq.cli", "data", "generate", "--out", "big.csv", "--rate",
         "1e7", "--seconds", "100"],
        cwd=tmp_path, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stderr.readline()), daemon=True)
    reader.start()
    try:
        reader.join(30)  # the first line comes after PROGRESS_S
        assert lines, "no progress line within 30 s"
        assert lines[0].startswith("generating big.csv: "), lines
        assert "of 1,000,000,000 rows" in lines[0], lines
        proc.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        rest = proc.communicate(timeout=30)[1]
    finally:
        proc.kill()
        proc.wait()
    assert time.monotonic() - stopped < 5
    assert proc.returncode == 128 + signal.SIGTERM, rest
    assert "Traceback" not in rest and list(tmp_path.iterdir()) == []

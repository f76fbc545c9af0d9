"""Options and small input files that used to be accepted silently or fail late.

* ``bench --plans ''``, ``--engines ''`` (explain, report, calibrate) name nothing: exit 2.
* A placement JSON with a key given twice is refused; one starting with a BOM is read.
* ``--debug`` works after the subcommand as well as before it.
* ``--report``'s path is checked before the run.
* A bad ``--spark-conf`` is one line, exit 2, within ``--spark-connect-timeout``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from hycq.cli import main

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

"""The real command line on bad input: exit 2, one ``error: ...`` message, no traceback.

Runs ``python -m hycq.cli`` in a subprocess, as users and outside checks do (CONTRACT.md,
"Commands"). Also checks that ``hycq explain`` works on every shipped query and that
``--json`` carries the CONTRACT's fields.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ROOT / "queries"
SHIPPED = sorted(QUERIES.glob("*/*.sql"))
CATALOG = QUERIES / "smartplug" / "catalog.toml"
Q1 = QUERIES / "smartplug" / "q1.sql"


def hycq(*args: str | Path, stdin: str = "", cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hycq.cli", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def assert_user_error(proc: subprocess.CompletedProcess[str], *parts: str) -> str:
    """Exit 2, stderr is one error message (no traceback, no internal error)."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    assert "internal error" not in proc.stderr
    assert proc.stderr.count("error: ") == 1, proc.stderr
    for part in parts:
        assert part in proc.stderr, (part, proc.stderr)
    return proc.stderr


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A query folder with the shipped catalog."""
    (tmp_path / "catalog.toml").write_text(CATALOG.read_text(encoding="utf-8"), encoding="utf-8")
    return tmp_path


def test_bind_error_in_query_file(folder: Path) -> None:
    (folder / "bad.sql").write_text(
        "SELECT plug_id,\n       valeu\nFROM readings [NOW]\n", encoding="utf-8"
    )
    err = assert_user_error(hycq("explain", "bad.sql", cwd=folder))
    assert err.splitlines() == [
        "error: bad.sql:2:8: unknown column 'valeu'",
        "         valeu",
        "         ^^^^^",
        "  hint: did you mean 'value'?",
    ]


@pytest.mark.parametrize(
    ("query", "position", "message"),
    [
        (
            "SELECT value\nFROM readings [RANGE 5 SECONDS\nWHERE value > 1\n",
            "3:1",
            "expected ']' to close the window clause",
        ),
        ("SELECT value FROM readings [RANGE 5 MONTHS]", "1:37", "unknown time unit 'MONTHS'"),
        ("SELECT value\nFROM readings\n", "2:6", "stream 'readings' needs a window"),
        ("SELECT value FROM readings [NOW]\nORDER BY value\n", "2:1", "ORDER BY is not supported"),
        ("SELECT value FROM readings [NOW]\nWHERE label = 'open\n", "2:15", "unterminated string"),
        ("SELECT value FROM readings [NOW]; SELECT 1", "1:35", "several statements"),
    ],
)
def test_query_errors_are_positioned_and_underlined(
    folder: Path, query: str, position: str, message: str
) -> None:
    (folder / "q.sql").write_text(query, encoding="utf-8")
    err = assert_user_error(hycq("explain", "q.sql", cwd=folder), f"q.sql:{position}: {message}")
    lines = err.splitlines()
    assert re.fullmatch(r"error: q\.sql:\d+:\d+: .+", lines[0])
    col = int(position.split(":")[1])
    line_no = int(position.split(":")[0])
    assert lines[1] == "  " + query.split("\n")[line_no - 1]
    assert re.fullmatch(r" {2}" + " " * (col - 1) + r"\^+", lines[2]), lines[2]


def test_query_from_stdin(folder: Path) -> None:
    proc = hycq(
        "explain",
        "-",
        "--catalog",
        "catalog.toml",
        stdin="SELECT x FROM readings [NOW]",
        cwd=folder,
    )
    assert_user_error(proc, "<stdin>:1:8: unknown column 'x'", "^")


def test_empty_query_file(folder: Path) -> None:
    (folder / "empty.sql").write_text("-- nothing\n", encoding="utf-8")
    assert_user_error(hycq("explain", "empty.sql", cwd=folder), "empty.sql:1:1: the query is empty")


def test_missing_query_file(folder: Path) -> None:
    assert_user_error(hycq("explain", "nope.sql", cwd=folder), "query file not found: nope.sql")


def test_query_path_is_a_directory(folder: Path) -> None:
    assert_user_error(hycq("explain", str(folder)), "is a directory")


def test_query_file_not_utf8(folder: Path) -> None:
    (folder / "latin1.sql").write_bytes(b"SELECT value FROM readings [NOW] -- caf\xe9\n")
    assert_user_error(hycq("explain", "latin1.sql", cwd=folder), "not UTF-8")


def test_bad_catalog(tmp_path: Path) -> None:
    (tmp_path / "catalog.toml").write_text(
        CATALOG.read_text(encoding="utf-8").replace("rate = 2000", "rat = 2000"), encoding="utf-8"
    )
    (tmp_path / "q.sql").write_text("SELECT value FROM readings [NOW]\n", encoding="utf-8")
    assert_user_error(
        hycq("explain", "q.sql", cwd=tmp_path),
        "catalog.toml: unknown key 'streams.readings.rat'",
        "hint: did you mean 'rate'?",
    )


def test_missing_catalog(tmp_path: Path) -> None:
    (tmp_path / "q.sql").write_text("SELECT value FROM readings [NOW]\n", encoding="utf-8")
    assert_user_error(hycq("explain", "q.sql", cwd=tmp_path), "catalog file not found")


def test_catalog_option_pointing_at_a_query(folder: Path) -> None:
    assert_user_error(hycq("explain", Q1, "--catalog", Q1), "invalid TOML")


@pytest.mark.parametrize("rate", ["abc", "-1", "0", "nan", "inf"])
def test_bad_rate(rate: str) -> None:
    assert_user_error(hycq("explain", Q1, f"--rate={rate}"), "--rate")


def test_unknown_engine() -> None:
    assert_user_error(
        hycq("explain", Q1, "--engines", "row,duckbd"),
        "unknown engine 'duckbd' in --engines",
        "did you mean 'duckdb'?",
    )


def test_unknown_subcommand() -> None:
    assert_user_error(hycq("explian", Q1), "invalid choice: 'explian'", "did you mean 'explain'?")


def test_unknown_option() -> None:
    assert_user_error(hycq("explain", Q1, "--jsn"), "unrecognized arguments: --jsn")


def test_no_subcommand() -> None:
    assert_user_error(hycq(), "required")


# -- the shipped queries --------------------------------------------------------------------

KINDS = {
    "source",
    "window",
    "select",
    "project",
    "join",
    "aggregate",
    "istream",
    "dstream",
    "rstream",
    "sink",
}
ENGINES = {"row", "duckdb", "spark"}


@pytest.mark.parametrize("path", SHIPPED, ids=[f"{p.parent.name}/{p.name}" for p in SHIPPED])
def test_explain_shipped_query(path: Path) -> None:
    text = hycq("explain", path)
    assert text.returncode == 0, text.stderr
    assert text.stderr == ""
    assert "window" in text.stdout

    proc = hycq("explain", path, "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    for key in (
        "operators",
        "groups",
        "cost",
        "feasible",
        "plans_examined",
        "optimization_ms",
        "cost_model",
    ):
        assert key in info, key
    ops = info["operators"]
    ids = [op["id"] for op in ops]
    assert len(set(ids)) == len(ids)
    for op in ops:
        assert {"id", "kind", "engine", "inputs", "lambda_out", "u"} <= set(op), op
        assert op["kind"] in KINDS
        assert op["engine"] in ENGINES
        assert set(op["inputs"]) <= set(ids)
    kinds = [op["kind"] for op in ops]
    assert kinds.count("sink") == 1 and "source" in kinds and "window" in kinds
    for group in info["groups"]:
        assert group["engine"] in ENGINES and set(group["operators"]) <= set(ids)
    assert set(info["cost"]) >= {"bottleneck", "utilization"}
    assert set(info["plans_examined"]) >= {"phase_one", "phase_two"}
    assert set(info["optimization_ms"]) >= {"phase_one", "phase_two", "total"}
    assert isinstance(info["feasible"], bool)
    assert all(isinstance(info["cost"][k], float) for k in ("bottleneck", "utilization"))


def test_explain_ids_are_stable() -> None:
    path = QUERIES / "joins" / "join_5.sql"
    runs = [json.loads(hycq("explain", path, "--json").stdout) for _ in range(2)]
    assert [op["id"] for op in runs[0]["operators"]] == [op["id"] for op in runs[1]["operators"]]


INSTANT_COLUMN_CASES = [
    ("SELECT house_id AS _ts, COUNT(*) AS c\nFROM readings [RANGE 3 SECONDS] GROUP BY house_id",
     "1:8", "house_id AS _ts"),
    ("SELECT q._TS FROM (SELECT house_id AS _ts FROM readings [NOW]) AS q", "1:8", "q._TS"),
    ("SELECT * FROM (SELECT value, ts AS _ts FROM readings [NOW]) AS q", "1:8", "*"),
]  # fmt: skip


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
@pytest.mark.parametrize(("query", "where", "underlined"), INSTANT_COLUMN_CASES)
def test_result_column_named_ts_is_refused(
    folder: Path, suffix: str, query: str, where: str, underlined: str
) -> None:
    """``_ts`` is the slide-instant column of every output format: a result column of that
    name is refused before anything is written (JSON lines would drop it, the CSV header
    would hold it twice, the Parquet file would not read back)."""
    (folder / "q.sql").write_text(query + "\n", encoding="utf-8")
    out = folder / f"out{suffix}"
    err = assert_user_error(
        hycq("run", "q.sql", "--duration", "3", "--output", out.name, cwd=folder),
        f"q.sql:{where}:",
        "named _ts",
        "hint: ",
    )
    line = err.splitlines()[1]
    col = int(where.split(":")[1]) - 1
    assert err.splitlines()[2][2 + col :].startswith("^" * len(underlined)), err
    assert line.strip().startswith("SELECT")
    assert not out.exists() and not list(folder.glob(".out*"))


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_renamed_ts_column_round_trips(folder: Path, suffix: str) -> None:
    """The hint's fix: the column renamed, every format reads back with both columns."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    (folder / "q.sql").write_text(
        "SELECT q._ts AS ts_value FROM (SELECT ts AS _ts FROM readings [NOW]) AS q\n",
        encoding="utf-8",
    )
    out = folder / f"out{suffix}"
    done = hycq("run", "q.sql", "--duration", "3", "--output", out.name, cwd=folder)
    assert done.returncode == 0, done.stderr
    if suffix == ".parquet":
        rows = pq.read_table(out).to_pylist()
    elif suffix == ".csv":
        rows = pacsv.read_csv(out).to_pylist()
    else:
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(set(r) == {"ts_value", "_ts"} and r["ts_value"] == r["_ts"] for r in rows)


def test_version_prints_the_package_version() -> None:
    """``hycq --version``: ``hycq <version>`` from the package metadata, exit 0; the same
    version as pyproject.toml and ``hycq.__version__``."""
    import tomllib
    from importlib.metadata import version

    import hycq as package

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    proc = hycq("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"hycq {version('hycq')}\n" and proc.stderr == ""
    assert version("hycq") == declared == package.__version__

"""Bad input to ``hycq run`` anywhere: options, placement files, data files, output paths.

Every case is exit 2 with one ``error: ...`` message (naming the option, file or position, and
a hint where one helps) and no traceback. Most cases call ``hycq.cli.main`` in-process (the
same code as the console script, without an interpreter start per case); a few go through a
real subprocess to show the process-level behaviour is the same. Output paths are checked
before the run starts, so a typo in --metrics does not cost the whole run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cli import run_main

ROOT = Path(__file__).resolve().parents[2]
Q5 = ROOT / "queries" / "smartplug" / "q5.sql"
CATALOG = ROOT / "queries" / "smartplug" / "catalog.toml"
GOOD_ROW = "1,1377986401,2.5,1,0,0,0\n"


def assert_user_error(code: int, err: str, *parts: str) -> None:
    assert code == 2, (code, err)
    assert err.startswith("error: "), err
    assert err.count("error: ") == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    for part in parts:
        assert part in err, (part, err)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A folder of bad inputs."""
    (tmp_path / "dir.csv").mkdir()
    (tmp_path / "dir.parquet").mkdir()
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "blank.csv").write_text("\n\n")
    (tmp_path / "binary.csv").write_bytes(b"\x00\x01\x02" * 50)
    (tmp_path / "header_only.csv").write_text("id,ts,value\n")
    (tmp_path / "not_parquet.parquet").write_text("hello")
    (tmp_path / "file").write_text("not a folder")
    pq.write_table(
        pa.table({"id": [1], "ts": ["x"], "value": [1.0], "property": [1], "plug_id": [1],
                  "household_id": [1], "house_id": [1]}),
        tmp_path / "ts_string.parquet",
    )  # fmt: skip
    pq.write_table(pa.table({"a": [1]}), tmp_path / "other.parquet")
    for name, text in {
        "engine.json": '{"aggregate1": "oracle"}',
        "op.json": '{"aggregate9": "duckdb"}',
        "list.json": "[1, 2]",
        "broken.json": '{"aggregate1": ',
    }.items():
        (tmp_path / name).write_text(text)
    return tmp_path


RUN = ("run", Q5, "--duration", "2")


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        (("--rate", "-5"), ["--rate", "must be a positive number"]),
        (("--rate", "nan"), ["--rate"]),
        (("--duration", "0"), ["--duration", "must be a positive number"]),
        (("--duration", "-3"), ["--duration"]),
        (("--duration", "soon"), ["--duration", "expected a number"]),
        (("--pace", "fast"), ["--pace", "invalid choice: 'fast'"]),
        (
            ("--column-engine", "oracle"),
            [
                "unknown columnar engine 'oracle' in --column-engine",
                "registered columnar engines: duckdb, spark, datafusion",
            ],
        ),
        (("--column-engine", "row"), ["not a columnar engine: 'row' in --column-engine"]),
        (("--column-engine", "datafusoin"), ["did you mean 'datafusion'?"]),
        (("--datafusion-conf", "batch_size=1"), ["--datafusion-conf expects datafusion.KEY"]),
        (("--datafusion-threads", "0"), ["--datafusion-threads"]),
        (("--placement", "rows"), ["--placement must be auto, row, column or a .json file"]),
        (("--duckdb-threads", "0"), ["--duckdb-threads"]),
        (("--data", "readings"), ["--data expects STREAM=PATH", "hint:"]),
        (("--data", "=x.csv"), ["--data expects STREAM=PATH"]),
        (("--data", "readings="), ["--data expects STREAM=PATH"]),
        (("--data", "nope=x.csv"), ["'nope', which the catalog does not have", "hint:"]),
        (("--spark-conf", "master=local"), ["--spark-conf expects spark.KEY=VALUE"]),
        (("--cost-model", "analytcal"), ["unknown cost model", "did you mean 'analytical'?"]),
        (("--cost-model", "missing.toml"), ["cost-model file not found"]),
        (("--row-core", "both"), ["--row-core", "invalid choice"]),
        (("--output", "out.txt"), ["--output must end in .parquet, .csv or .jsonl"]),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else None,
)
def test_bad_options(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], parts: list[str]
) -> None:
    assert_user_error(*run_main(capsys, *RUN, *args), *parts)


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        (
            "engine.json",
            ["unknown engine 'oracle' in placement file", "registered engines: row, duckdb"],
        ),
        ("op.json", ["unknown operator 'aggregate9'", "hint:"]),
        ("list.json", ["must be a JSON object"]),
        ("broken.json", ["broken.json:1:", "invalid JSON"]),
        ("missing.json", ["placement file not found"]),
        ("dir.parquet/x.json", ["placement file not found"]),
    ],
)
def test_bad_placement_files(
    capsys: pytest.CaptureFixture[str], files: Path, name: str, parts: list[str]
) -> None:
    assert_user_error(*run_main(capsys, *RUN, "--placement", files / name), *parts)


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("missing.csv", ["data file not found", "hint:"]),
        ("dir.csv", ["is a directory", "hint:"]),
        ("empty.csv", ["the file is empty", "hint:"]),
        ("blank.csv", ["the file is empty"]),
        ("binary.csv", ["not a text (CSV) file", "hint:"]),
        ("header_only.csv", ["missing column 'property'", "hint:"]),
        ("not_parquet.parquet", ["cannot read parquet data", "hint:"]),
        ("ts_string.parquet", ["column 'ts' has type string", "hint: ts must be integer"]),
        ("other.parquet", ["missing column 'id' (columns found: a)", "hint:"]),
    ],
)
def test_bad_data_files(
    capsys: pytest.CaptureFixture[str], files: Path, name: str, parts: list[str]
) -> None:
    out = files / "o.parquet"
    code, err = run_main(capsys, *RUN, "--data", f"readings={files / name}", "--output", out)
    assert_user_error(code, err, *parts)
    assert not out.exists() and not list(files.glob(".o.parquet*"))


@pytest.mark.parametrize("option", ["--output", "--metrics", "--dead-letter"])
@pytest.mark.parametrize(
    ("target", "part"),
    [
        ("nowhere/x.parquet", "output folder does not exist"),
        ("file/x.parquet", "not a folder"),
        ("dir.parquet", "is a directory"),
    ],
)
def test_unwritable_output_paths_fail_before_the_run(
    capsys: pytest.CaptureFixture[str], files: Path, option: str, target: str, part: str
) -> None:
    code, err = run_main(capsys, *RUN, option, files / target)
    assert_user_error(code, err, part)
    assert "tuples in" not in err  # nothing ran


def test_bad_catalogs(capsys: pytest.CaptureFixture[str], files: Path) -> None:
    assert_user_error(*run_main(capsys, *RUN, "--catalog", files / "nope.toml"), "not found")
    assert_user_error(*run_main(capsys, *RUN, "--catalog", files / "dir.csv"), "cannot read")
    bad = files / "bad.toml"
    bad.write_text(CATALOG.read_text().replace("[streams.readings.columns]", "[streams.r;x]"))
    assert_user_error(*run_main(capsys, *RUN, "--catalog", bad), "bad.toml")


def test_a_too_deep_query_is_a_positioned_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    query = tmp_path / "deep.sql"
    query.write_text("SELECT " + " + ".join(["value"] * 400) + " AS x\nFROM readings [NOW]\n")
    code, err = run_main(capsys, "run", query, "--catalog", CATALOG, "--duration", "2")
    assert_user_error(code, err, "deep.sql:1:8: the query is nested too deeply", "hint:")


@pytest.mark.parametrize(
    "args",
    [
        ("--metrics", "nowhere/m.json"),
        ("--data", "readings=empty.csv"),
        ("--duration", "-1"),
    ],
)
def test_the_real_process_agrees(files: Path, args: tuple[str, ...]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hycq.cli", *map(str, RUN), *args],
        cwd=files,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_user_error(proc.returncode, proc.stderr)
    assert proc.stdout == ""


KEYED = ROOT / "queries" / "keyed" / "catalog.toml"


@pytest.mark.parametrize("command", ["run", "explain", "bench"])
def test_data_for_a_stream_the_query_does_not_read_is_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    """A catalog stream the query does not read: one warning line, the command goes on; a
    stream the catalog does not have stays exit 2."""
    query = tmp_path / "r.sql"
    query.write_text("SELECT COUNT(*) AS n FROM r [RANGE 2 SECONDS SLIDE 1 SECOND]\n")
    (tmp_path / "s.csv").write_text("ts,k,v\n1400000000,1,1.5\n")
    extra = {
        "run": ("--duration", "3"),
        "explain": (),
        "bench": ("--rates", "200", "--measure", "1", "--preroll", "0", "--repeat", "1"),
    }[command]
    given = ("--catalog", KEYED, "--data", f"s={tmp_path / 's.csv'}")
    code, err = run_main(capsys, command, query, *given, *extra)
    assert code == 0, err
    assert err.count("warning: --data") == 1, err  # (bench warns of a busy machine too)
    assert "warning: --data names stream 's', which the query does not read: ignored" in err
    code, err = run_main(capsys, command, query, "--catalog", KEYED, "--data", "q=x.csv", *extra)
    assert_user_error(code, err, "'q', which the catalog does not have", "hint:")

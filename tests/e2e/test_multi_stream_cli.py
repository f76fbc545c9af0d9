"""Several input streams through the real CLI: ``hycq data generate --generator keyed`` and
``hycq run`` over its files, against the oracle.

The first test reproduces a reported failure: three keyed streams r, s, t (seconds), 150 s
at 20 tuples/s each, CSV files with a header, the 3-way window join, ``--placement row``. It
used to dead-letter every tuple of s and t (the streams were merged batch by batch); it must
give the oracle's rows at every instant with nothing dead-lettered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from optimizer.sql.catalog import load_catalog, parse_catalog_text
from tests.lateness import without_late
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
J3 = ROOT / "queries" / "keyed" / "j3.sql"


def hycq(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hycq.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def _read(folder: Path, names: str) -> dict[str, pa.Table]:
    return {n: pacsv.read_csv(folder / f"{n}.csv") for n in names}


def test_issue_reproduction_three_way_join(tmp_path: Path) -> None:
    data = tmp_path / "data"
    gen = hycq(
        "data", "generate", "--generator", "keyed", "--out", data, "--seconds", "150",
        "--rate", "20", "--origin", "1000",
    )  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    assert "r.csv (3000 rows), s.csv (3000 rows), t.csv (3000 rows)" in gen.stderr
    assert (data / "r.csv").read_text().splitlines()[0] == '"ts","k","v"'  # with a header
    out, metrics = tmp_path / "out.parquet", tmp_path / "m.json"
    run = hycq(
        "run", J3, "--catalog", data / "catalog.toml",
        "--data", f"r={data / 'r.csv'}", "--data", f"s={data / 's.csv'}",
        "--data", f"t={data / 't.csv'}",
        "--output", out, "--placement", "row", "--metrics", metrics,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "9000 tuples" in run.stderr and "0 rows dead-lettered" in run.stderr, run.stderr
    assert "over 150 instants" in run.stderr
    m = json.loads(metrics.read_text())
    assert m["dead_letter"] == 0 and m["tuples_in"] == 9000
    got = pq.read_table(out)
    expected = oracle(J3.read_text(), load_catalog(data / "catalog.toml"), _read(data, "rst"))
    assert_same_stream(got, expected)
    instants = set(got.column("_ts").to_pylist())
    assert instants == set(expected.column("_ts").to_pylist())
    assert len(instants) == 149 and min(instants) >= 1000 and max(instants) <= 1149


def test_streams_of_different_shapes_on_duckdb(tmp_path: Path) -> None:
    """A dense stream, a late-starting one that ends early, a silent one; Parquet files."""
    data = tmp_path / "data"
    gen = hycq(
        "data", "generate", "--generator", "keyed", "--out", data, "--seconds", "80",
        "--format", "parquet", "--keys", "30", "--seed", "5",
        "--stream", "r:rate=200", "--stream", "s:rate=4,start=15,end=60",
        "--stream", "t:rate=10,silent=20-45",
    )  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    query = ROOT / "queries" / "keyed" / "join_aggs.sql"
    out = tmp_path / "out.jsonl"
    run = hycq(
        "run", query, "--catalog", data / "catalog.toml", "--placement", "column",
        "--output", out,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "0 rows dead-lettered" in run.stderr
    got = pa.Table.from_pylist([json.loads(line) for line in out.read_text().splitlines()])
    tables = {n: pq.read_table(data / f"{n}.parquet") for n in "rs"}
    expected = oracle(query.read_text(), load_catalog(data / "catalog.toml"), tables)
    assert expected.num_rows > 0
    assert_same_stream(got.select([*expected.column_names]), expected)


MIXED_CATALOG = """
[streams.a]
timestamp = "ts"
time_unit = "s"
[streams.a.columns]
id = "BIGINT"
ts = "BIGINT"

[streams.b]
timestamp = "ts"
time_unit = "ms"
[streams.b.columns]
id = "BIGINT"
ts = "BIGINT"
"""
MIXED_QUERY = (
    "SELECT COUNT(*) AS c FROM a [RANGE 1 SECOND] AS x, b [RANGE 1 SECOND] AS y WHERE x.id = y.id\n"
)


def test_mixed_time_units_run_in_milliseconds(tmp_path: Path) -> None:
    """A reported failure: stream a in seconds, b in milliseconds. The run converts a to ms:
    instants every millisecond (b's default slide) over the data's 2 seconds, not over
    ~1.4e12 raw ticks (which ran without end)."""
    (tmp_path / "catalog.toml").write_text(MIXED_CATALOG)
    (tmp_path / "q.sql").write_text(MIXED_QUERY)
    t0 = 1_400_000_000
    a = pa.table({"id": [i % 5 for i in range(10)], "ts": [t0 + i // 5 for i in range(10)]})
    b = pa.table({"id": [i % 7 for i in range(20)], "ts": [t0 * 1000 + 100 * i for i in range(20)]})
    pacsv.write_csv(a, tmp_path / "a.csv")
    pacsv.write_csv(b, tmp_path / "b.csv")
    out = tmp_path / "out.csv"
    run = hycq(
        "run", tmp_path / "q.sql", "--catalog", tmp_path / "catalog.toml",
        "--data", f"a={tmp_path / 'a.csv'}", "--data", f"b={tmp_path / 'b.csv'}",
        "--output", out, "--placement", "row",
        timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = pacsv.read_csv(out)
    cat = parse_catalog_text(MIXED_CATALOG)
    expected = oracle(MIXED_QUERY, cat, {"a": a, "b": b})
    assert_same_stream(got, expected)
    ts = got.column("_ts").to_pylist()
    # Every ms from the first to the last timestamp (b's slide), and a's last slide instant
    # ceil(1900 / 1000) * 1000 ms after the start.
    assert (min(ts), max(ts)) == (t0 * 1000, t0 * 1000 + 2000)
    assert len(ts) == 1902 and max(got.column("c").to_pylist()) > 0


def test_a_late_tuple_is_late_in_its_own_stream(tmp_path: Path) -> None:
    """r is in order; s has one tuple out of order (1003 after 1006). Only that tuple is
    dead-lettered, and the reason names its stream and why."""
    data = tmp_path / "data"
    gen = hycq("data", "generate", "--generator", "keyed", "--out", data, "--seconds", "20",
               "--rate", "3", "--keys", "4", "--origin", "1000", "--stream", "r",
               "--stream", "s")  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    s = pacsv.read_csv(data / "s.csv")
    late_row = {"ts": 1003, "k": 1, "v": 5.0}
    rows = s.to_pylist()
    at = next(i for i, row in enumerate(rows) if row["ts"] == 1007)
    rows.insert(at, late_row)  # after every tuple of 1006
    pacsv.write_csv(pa.Table.from_pylist(rows, schema=s.schema), data / "s.csv")
    query = ROOT / "queries" / "keyed" / "j2.sql"
    out, dead = tmp_path / "out.parquet", tmp_path / "dead.jsonl"
    run = hycq(
        "run", query, "--catalog", data / "catalog.toml", "--placement", "row",
        "--output", out, "--dead-letter", dead,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    records = [json.loads(line) for line in dead.read_text().splitlines()]
    assert len(records) == 1
    assert records[0]["stream"] == "s" and records[0]["row"] == late_row
    assert records[0]["reason"] == (
        "late in stream 's': timestamp 1003 is not after instant 1005, which had fired when "
        "it arrived (stream 's' had already delivered timestamp 1006)"
    )
    inputs = _read(data, "rs")
    cat = load_catalog(data / "catalog.toml")
    assert_same_stream(pq.read_table(out), oracle(query.read_text(), cat, without_late(
        query.read_text(), cat, inputs)))  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--generator", "keyed", "--houses", "3"], "--houses is for --generator smartplug"),
        (["--generator", "keyed", "--stream", "r:rate=x"], "bad value 'x' for rate"),
        (["--generator", "keyed", "--stream", "r:speed=3"], "unknown setting 'speed'"),
        (["--generator", "keyed", "--stream", "r:start=9,end=3"], "end must be after start"),
        (["--generator", "keyed", "--stream", "r", "--stream", "R"], "must be distinct"),
        (["--keys", "5"], "--keys: only for --generator keyed"),
    ],
)
def test_generate_keyed_bad_options(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / ("d" if "keyed" in args else "f.csv")
    r = hycq("data", "generate", "--out", out, *args)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: ") and message in r.stderr, r.stderr

"""`hycq run` on data files with bad rows: they are dead-lettered, the run goes on, and the
results over the valid rows equal a run over the clean file (docs/semantics.md, "Time and
input"). Runs the real CLI in a subprocess."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
Q5 = ROOT / "queries" / "smartplug" / "q5.sql"
START = 1377986401  # first timestamp of generated data

#: (bad DEBS line, a fragment of the reason the dead-letter file must give). Timestamps are in
#: the middle of the 30 s of data, so that the rows would matter if they were taken.
BAD = [
    (f"9001,{START + 15},12.5,1,0,0", "expected 7 fields, found 6"),
    (f"9002,{START + 15},12.5,1,0,0,0,0", "expected 7 fields, found 8"),
    (f"9003,{START + 15},abc,1,0,0,0", "unparsable value 'abc' in column 'value'"),
    (f"9004,{START + 15},,1,0,0,0", "missing value in column 'value'"),
    (f"9005,{START + 15},nan,1,0,0,0", "non-finite value 'nan' in column 'value'"),
    (f"9006,{START + 15},inf,1,0,0,0", "non-finite value 'inf' in column 'value'"),
    (f"9007,{START + 15},12.5,1,2147483648,0,0", "out of range for INTEGER in column 'plug_id'"),
]
#: Older than every slide instant emitted by then: late (counted by the engine).
LATE = f"9008,{START - 1000},12.5,1,0,0,0"


def hycq(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hycq.cli", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    path = folder / "f.csv"
    done = hycq(
        "data", "generate", "--out", path, "--seconds", "30", "--houses", "2", "--rate", "200",
        cwd=folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return path


def inject(clean: Path, out: Path) -> dict[str, int]:
    """Write ``clean`` with the bad rows inserted; returns each bad row's 1-based line."""
    lines = clean.read_text().splitlines()
    assert len(lines) == 6000
    where = {}
    rows = [*(row for row, _ in BAD), LATE]
    for k, row in enumerate(rows):  # one every 400 lines from line 3001 on: many instants in
        at = 3000 + 401 * k
        lines.insert(at, row)
        where[row] = at + 1
    out.write_text("\n".join(lines) + "\n")
    return where


def run(data: Path, folder: Path, suffix: str, *extra: str | Path) -> tuple[Path, dict, Path]:
    out = folder / f"out{suffix}"
    metrics = folder / "m.json"
    dead = folder / "dl.jsonl"
    done = hycq(
        "run", Q5, "--data", f"readings={data}", "--output", out, "--dead-letter", dead,
        "--metrics", metrics, *extra, cwd=folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return out, json.loads(metrics.read_text()), dead


def results(path: Path) -> pa.Table:
    """The result table, sorted (the order of rows within an instant is not specified)."""
    if path.suffix == ".parquet":
        table = pq.read_table(path)
    else:
        table = pa.Table.from_pylist([json.loads(line) for line in path.read_text().splitlines()])
    return table.sort_by([("_ts", "ascending"), *((n, "ascending") for n in table.column_names)])


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_bad_rows_are_dead_lettered_and_results_are_exact(
    clean: Path, tmp_path: Path, suffix: str
) -> None:
    (tmp_path / "clean").mkdir()
    (tmp_path / "dirty").mkdir()
    expected_out, expected_m, expected_dead = run(clean, tmp_path / "clean", suffix)
    assert expected_m["dead_letter"] == 0
    assert expected_dead.read_text() == ""

    dirty = tmp_path / "dirty.csv"
    where = inject(clean, dirty)
    out, m, dead = run(dirty, tmp_path / "dirty", suffix)

    assert m["dead_letter"] == len(BAD) + 1
    assert m["dead_letter_reasons"] == {"invalid": len(BAD), "late": 1}
    assert m["tuples_in"] == expected_m["tuples_in"] + 1  # the late row reaches the engine
    records = [json.loads(line) for line in dead.read_text().splitlines()]
    invalid = [r for r in records if not r["reason"].startswith("late")]
    assert len(invalid) == len(BAD)
    for record, (row, reason) in zip(invalid, BAD, strict=True):
        assert record["stream"] == "readings"
        assert record["row"] == row
        assert record["reason"].startswith(f"dirty.csv line {where[row]}: ")
        assert reason in record["reason"]

    got, want = results(out), results(expected_out)
    assert want.num_rows > 0
    assert got.equals(want)


def test_late_rows_are_written_to_the_dead_letter_file(clean: Path, tmp_path: Path) -> None:
    dirty = tmp_path / "dirty.csv"
    inject(clean, dirty)
    _, m, dead = run(dirty, tmp_path, ".parquet")
    assert m["dead_letter"] == len(BAD) + 1
    rows = [json.loads(line)["row"] for line in dead.read_text().splitlines()]
    assert len(rows) == len(BAD) + 1
    assert any(str(START - 1000) in json.dumps(row) for row in rows)


def test_a_custom_stream_with_text_and_boolean_columns(tmp_path: Path) -> None:
    (tmp_path / "catalog.toml").write_text(
        '[streams.events]\ntimestamp = "ts"\ntime_unit = "s"\nrate = 5\n'
        '[streams.events.columns]\nts = "BIGINT"\nname = "VARCHAR"\nok = "BOOLEAN"\n'
        'amount = "DOUBLE"\nn = "INTEGER"\n'
    )
    query = tmp_path / "q.sql"
    query.write_text(
        "SELECT name, COUNT(*) AS c, SUM(amount) AS total, MAX(n) AS top\n"
        "FROM events [RANGE 10 SECONDS SLIDE 5 SECONDS]\nWHERE ok\nGROUP BY name\n"
    )
    names = ["alpha", "beta", '"gamma, delta"']
    rows = [
        f"{100 + i // 5},{names[i % 3]},{'true' if i % 4 else 'FALSE'},{i / 8},{i % 7 - 3},x"
        for i in range(300)
    ]
    header = "extra,ts,n,amount,ok,name"  # any order, an extra column
    reorder = [5, 0, 4, 3, 2, 1]  # the header's columns among a row's fields

    def order(line: str) -> str:
        cells = next(csv.reader([line]))
        return ",".join(f'"{c}"' if "," in c else c for c in (cells[k] for k in reorder))

    def write(path: Path, lines: list[str]) -> None:
        path.write_text(header + "\n" + "\n".join(lines) + "\n")

    good = [order(r) for r in rows]
    bad = [
        "x,150,1,2.5,maybe,alpha",  # not a boolean
        "x,150,1,2.5,true",  # a field short
        "x,150,99999999999,2.5,true,alpha",  # n does not fit INTEGER
        "x,150,1,2.5,true,",  # empty name
    ]
    clean, dirty = tmp_path / "clean.csv", tmp_path / "dirty.csv"
    write(clean, good)
    write(dirty, good[:200] + bad + good[200:])
    outs = []
    for data in (clean, dirty):
        out = tmp_path / f"{data.stem}.parquet"
        metrics = tmp_path / f"{data.stem}.json"
        done = hycq(
            "run", query, "--data", f"events={data}", "--output", out, "--metrics", metrics,
            "--dead-letter", tmp_path / f"{data.stem}.dl.jsonl", cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outs.append((results(out), json.loads(metrics.read_text())))
    (want, m_clean), (got, m_dirty) = outs
    assert m_clean["dead_letter"] == 0 and m_dirty["dead_letter"] == len(bad)
    assert want.num_rows > 0 and got.equals(want)
    assert "gamma, delta" in want.column("name").to_pylist()
    reasons = [
        json.loads(line)["reason"]
        for line in (tmp_path / "dirty.dl.jsonl").read_text().splitlines()
    ]
    assert reasons == [
        "dirty.csv line 202: unparsable value 'maybe' in column 'ok' (expected BOOLEAN)",
        "dirty.csv line 203: expected 6 fields, found 5",
        "dirty.csv line 204: value '99999999999' out of range for INTEGER in column 'n'",
        "dirty.csv line 205: missing value in column 'name'",
    ]


def test_a_file_without_a_needed_column_is_a_user_error(clean: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.csv"
    lines = clean.read_text().splitlines()[:50]
    # A header without house_id (and one row per line with the six remaining columns).
    wrong.write_text(
        "id,timestamp,value,property,plug_id,household_id\n"
        + "\n".join(line.rsplit(",", 1)[0] for line in lines)
        + "\n"
    )
    dead = tmp_path / "dl.jsonl"
    done = hycq(
        "run", Q5, "--data", f"readings={wrong}", "--output", tmp_path / "o.jsonl",
        "--dead-letter", dead, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("error:")
    assert "missing column 'house_id'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "o.jsonl").exists()

"""End to end: out-of-order data from ``hycq data generate --delay``, a run that drops late
tuples (today's ``--disorder none``), the truth from the same data sorted by event time, and
``hycq quality`` between them; the truth against itself is perfect."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.csv as pacsv

ROOT = Path(__file__).resolve().parents[2]


def _hycq(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hycq.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_quality_of_a_run_on_delayed_data(tmp_path: Path) -> None:
    data = tmp_path / "d"
    gen = _hycq("data", "generate", "--generator", "keyed", "--out", data, "--seconds", "20",
                "--rate", "200", "--time-unit", "ms", "--keys", "5", "--delay", "zipf:2s,1.5",
                "--stream", "r")  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    query = data / "q.sql"
    query.write_text(
        "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM r [RANGE 2 SECONDS SLIDE 100 MILLISECONDS] "
        "GROUP BY k\n"
    )
    table = pacsv.read_csv(data / "r.csv")
    pacsv.write_csv(table.take(pc.sort_indices(table, [("ts", "ascending")])), data / "sorted.csv")
    res, truth = tmp_path / "res.parquet", tmp_path / "truth.parquet"
    run = _hycq("run", query, "--placement", "row", "--output", res)
    assert run.returncode == 0, run.stderr
    ok = _hycq("run", query, "--placement", "row", "--data", f"r={data / 'sorted.csv'}",
               "--output", truth)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    args = ("--value", "n,s", "--count", "n", "--max-error", "0.01", "--min-recall", "0.9",
            "--time-unit", "ms", "--recall-period", "5", "--json")  # fmt: skip
    q = json.loads(_hycq("quality", res, "--truth", truth, *args).stdout)
    # late tuples were dropped: windows miss some of theirs
    assert 0.5 < q["coverage"]["mean"] < 0.99
    assert q["error"]["phi_eps"] < 0.5 and q["error"]["wrong"] > 0
    same = json.loads(_hycq("quality", truth, "--truth", truth, *args).stdout)
    assert same["recall"]["overall"] == 1.0 and same["recall"]["phi_gamma"] == 1.0
    assert same["error"]["phi_eps"] == 1.0 and same["coverage"]["full"] == 1.0

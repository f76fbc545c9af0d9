"""``--join-impl`` on the command line: run writes the same results with every
implementation and reports each join's work and the predictions; explain shows the choice;
bad combinations exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
Q3 = ROOT / "queries" / "multiway" / "q3.sql"


def hycq(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hycq.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def run_q3(impl: str, out: Path, *extra: str | Path) -> subprocess.CompletedProcess[str]:
    """``hycq run`` of Q3 on the row engine for 20 s of data with ``--join-impl impl``."""
    return hycq(
        "run", Q3, "--placement", "row", "--duration", "20", "--join-impl", impl,
        "--output", out, *extra,
    )  # fmt: skip


def test_run_every_impl_same_results(tmp_path: Path) -> None:
    tables = {}
    for impl in ("tree", "mjoin", "acaching", "jit", "auto"):
        out, met = tmp_path / f"{impl}.parquet", tmp_path / f"{impl}.json"
        r = run_q3(impl, out, "--join-memory", "1", "--metrics", met)
        assert r.returncode == 0, r.stderr
        tables[impl] = pq.read_table(out)
        m = json.loads(met.read_text())
        joins = [v["join"] for v in m["operators"].values() if "join" in v]
        assert joins and all(j["probes"] > 0 for j in joins)
        if impl != "tree":
            (choice,) = m["join_impls"]
            assert set(choice["predicted_seconds_per_second"]) == {
                "tree",
                "mjoin",
                "acaching",
                "jit",
            }
            if impl != "auto":
                assert choice["chosen"] == impl and joins[0]["impl"] == impl
    first = tables["tree"]
    assert first.num_rows == 20
    for t in tables.values():
        assert t.equals(first)


def test_explain_shows_the_choice() -> None:
    r = hycq("explain", Q3, "--join-impl", "auto")
    assert r.returncode == 0, r.stderr
    assert "join chain join2" in r.stdout and "predicted row-engine ms per second" in r.stdout
    j = hycq("explain", Q3, "--join-impl", "jit", "--json")
    assert json.loads(j.stdout)["join_impls"][0]["chosen"] == "jit"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--join-impl", "hash"), "invalid choice"),
        (("--join-memory", "-1"), "must be a number >= 0"),
        (("--join-impl", "mjoin", "--adapt"), "cannot be combined with plan migration"),
    ],
)
def test_bad_options_exit_2(args: tuple[str, ...], message: str) -> None:
    r = hycq("run", Q3, "--duration", "5", *args)
    assert r.returncode == 2 and message in r.stderr


def test_report_shows_the_joins(tmp_path: Path) -> None:
    """``hycq report`` shows the choice per join chain against the alternatives; the report
    of an A-Caching run shows what the join did (caches, re-selections)."""
    out = tmp_path / "plan.html"
    r = hycq("report", Q3, "--out", out)
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert 'id="joins"' in page and "Implementation per join chain" in page
    assert "acaching ms/s" in page and "mjoin ms/s" in page
    ran = tmp_path / "ran.html"
    r = run_q3("acaching", tmp_path / "o.parquet", "--report", ran)
    assert r.returncode == 0, r.stderr
    page = ran.read_text()
    assert "What each join did in the run" in page and "re-selections" in page
    assert "<b>acaching</b>" in page

"""The multiway join-workload generator (engines/sources/multiway.py) and its CLI."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow.compute as pc
import pytest

from engines.sources.multiway import MultiwayStream, query_text, stream_table, workload
from optimizer.ir.errors import OptionError
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.cli import run_cli


def test_rates_domains_and_determinism() -> None:
    s = MultiwayStream("r", (("a", "INTEGER"), ("v", "DOUBLE")), rate=4, keys=10, start=2)
    t = stream_table(s, 12, seed=3, origin=0)
    assert t.num_rows == 40 and t.column("ts").to_pylist()[:5] == [2, 2, 2, 2, 3]
    assert pc.min(t["a"]).as_py() >= 0 and pc.max(t["a"]).as_py() < 10
    assert t.equals(stream_table(s, 12, seed=3, origin=0))
    assert not t.equals(stream_table(s, 12, seed=4, origin=0))
    # a column's draws do not depend on the other columns
    alone = MultiwayStream("r", (("a", "INTEGER"),), rate=4, keys=10, start=2)
    assert stream_table(alone, 12, seed=3, origin=0)["a"].equals(t["a"])


def test_q3_multiplicities() -> None:
    r, s, t = workload("q3", rate=50, window=10, multiplicity=5)
    assert r.keys == s.keys == t.keys == 500 and t.rate == 5 * r.rate
    tt = stream_table(t, 100, seed=1)
    per_window = tt.num_rows / 10  # 10 windows of 10 s
    assert per_window / t.keys == pytest.approx(5, rel=0.01)  # multiplicity 5 in t


@pytest.mark.parametrize("shape", ["q3", "clique", "star"])
def test_queries_bind(shape: str, tmp_path: Path) -> None:
    from engines.sources.multiway import write_workload

    streams = workload(shape, n=5, rate=10, window=5)
    write_workload(streams, tmp_path, 5, 1)
    plan = plan_query(query_text(shape, streams, 5), load_catalog(tmp_path / "catalog.toml"))
    assert len(plan.ids_of("join")) == len(streams) - 1


def test_bad_settings() -> None:
    with pytest.raises(OptionError, match="rate must be positive"):
        MultiwayStream("r", (("a", "INTEGER"),), rate=0)
    with pytest.raises(OptionError, match="INTEGER or DOUBLE"):
        MultiwayStream("r", (("a", "VARCHAR"),))
    with pytest.raises(OptionError, match="unknown multiway shape"):
        workload("ring")


def _hycq(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def test_cli_writes_a_runnable_workload(tmp_path: Path) -> None:
    out = tmp_path / "w"
    gen = _hycq(
        "data",
        "generate",
        "--generator",
        "multiway",
        "--shape",
        "star",
        "--ways",
        "3",
        "--rate",
        "20",
        "--seconds",
        "20",
        "--out",
        out,
    )
    assert gen.returncode == 0, gen.stderr
    run = _hycq(
        "run",
        out / "query.sql",
        "--catalog",
        out / "catalog.toml",
        "--join-impl",
        "acaching",
        "--placement",
        "row",
    )
    assert run.returncode == 0, run.stderr
    bad = _hycq(
        "data",
        "generate",
        "--generator",
        "multiway",
        "--shape",
        "clique",
        "--ways",
        "9",
        "--out",
        tmp_path / "x",
    )
    assert bad.returncode == 2 and "2 to 8 streams" in bad.stderr

"""The engine registry end to end: ``hycq run`` on DataFusion alone and on plans mixing every
columnar engine gives the oracle's result stream; explain places on DataFusion when the cost
model says it is cheaper; unknown engine names are exit 2 naming the registered engines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from optimizer.sql.catalog import load_catalog
from tests.datagen import small_smartplug
from tests.lateness import without_late
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG_PATH = ROOT / "queries" / "smartplug" / "catalog.toml"
R2R = {"select", "project", "join", "aggregate"}

pytest.importorskip("datafusion")


def hycq(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hycq.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def readings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A data file (its 5-minute windows fill and slide) and the table it holds."""
    data = small_smartplug(330, seed=11, rate=6.0)
    path = tmp_path_factory.mktemp("engines") / "readings.parquet"
    pq.write_table(data, path)
    return path, data


def _run_and_compare(query: str, data: tuple[Path, object], out: Path, *args: str) -> dict:
    path, table = data
    metrics = out.with_suffix(".json")
    r = hycq(
        "run", str(ROOT / "queries" / "smartplug" / f"{query}.sql"),
        "--data", f"readings={path}", "--output", str(out), "--metrics", str(metrics), *args,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    text = (ROOT / "queries" / "smartplug" / f"{query}.sql").read_text()
    catalog = load_catalog(CATALOG_PATH)
    expected = oracle(text, catalog, without_late(text, catalog, {"readings": table}))
    assert_same_stream(pq.read_table(out), expected)
    return json.loads(metrics.read_text())


def _r2r_ids(query: str) -> list[str]:
    r = hycq("explain", str(ROOT / "queries" / "smartplug" / f"{query}.sql"), "--json")
    assert r.returncode == 0, r.stderr
    return [op["id"] for op in json.loads(r.stdout)["operators"] if op["kind"] in R2R]


@pytest.mark.parametrize("query", ["q1", "q4"])
def test_column_placement_on_datafusion(query: str, readings: tuple, tmp_path: Path) -> None:
    m = _run_and_compare(
        query, readings, tmp_path / "out.parquet", "--placement", "column",
        "--column-engine", "datafusion",
    )  # fmt: skip
    r2r = set(_r2r_ids(query))
    assert {m["placement"][i] for i in r2r} == {"datafusion"}


def _mixed(query: str, engines: list[str], tmp_path: Path) -> Path:
    ids = _r2r_ids(query)
    placement = {op: engines[k % len(engines)] for k, op in enumerate(ids)}
    assert set(engines) - {"row"} <= set(placement.values())
    path = tmp_path / "placement.json"
    path.write_text(json.dumps(placement))
    return path


def test_mixed_placement_row_duckdb_datafusion(readings: tuple, tmp_path: Path) -> None:
    placement = _mixed("q1", ["datafusion", "duckdb", "row"], tmp_path)
    m = _run_and_compare("q1", readings, tmp_path / "out.parquet", "--placement", str(placement))
    assert {g["engine"] for g in m["groups"]} == {"duckdb", "datafusion"}


@pytest.mark.spark
def test_mixed_placement_over_every_engine(tmp_path: Path) -> None:
    """Spark answers a query in 0.1-1 s: 14 event-seconds (14 slides) of data."""
    data = small_smartplug(14, seed=11, rate=20.0)
    pq.write_table(data, tmp_path / "short.parquet")
    placement = _mixed("q1", ["datafusion", "duckdb", "spark", "row"], tmp_path)
    out = tmp_path / "out.parquet"
    m = _run_and_compare(
        "q1", (tmp_path / "short.parquet", data), out, "--placement", str(placement)
    )
    assert {g["engine"] for g in m["groups"]} == {"duckdb", "spark", "datafusion"}


def _explain_placement(tmp_path: Path, datafusion_fixed: float) -> set[str]:
    model = tmp_path / "model.toml"
    model.write_text(
        "[cost_model]\nbase = 'analytical'\n"
        f"[cost_model.parameters.engines.datafusion]\nfixed = {datafusion_fixed}\n"
        "select = 1e-9\nproject = 1e-9\naggregate = 1e-9\njoin_input = 1e-9\n"
        "join_output = 1e-9\nexact_sum = 1e-9\n"
    )
    r = hycq(
        "explain", str(ROOT / "queries" / "smartplug" / "q2.sql"), "--json", "--rate", "40000",
        "--engines", "row,duckdb,datafusion", "--cost-model", str(model),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return {op["engine"] for op in json.loads(r.stdout)["operators"]}


def test_explain_places_on_datafusion_when_it_is_cheaper(tmp_path: Path) -> None:
    assert "datafusion" in _explain_placement(tmp_path, 1e-4)
    assert "datafusion" not in _explain_placement(tmp_path, 10.0)


@pytest.mark.parametrize(
    "args",
    [
        ("explain", "--engines", "row,postgres"),
        ("run", "--placement", "column", "--column-engine", "postgres", "--duration", "2"),
        ("report", "--engines", "row,postgres", "--out", "r.html"),
    ],
    ids=["explain", "run", "report"],
)
def test_unknown_engine_is_exit_2_with_the_registered_names(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    command, *rest = args
    r = hycq(command, str(ROOT / "queries" / "smartplug" / "q1.sql"), *rest, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "unknown" in r.stderr and "'postgres'" in r.stderr
    assert "duckdb, spark, datafusion" in r.stderr
    assert "Traceback" not in r.stderr

"""``hycq run`` end to end through the real console entry point: outputs, metrics, pacing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
Q5 = ROOT / "queries" / "smartplug" / "q5.sql"
CONTRACT_METRICS = {
    "tuples_in",
    "wall_s",
    "throughput",
    "rate",
    "kept_up",
    "results",
    "latency_ms",
    "peak_rss_mb",
    "placement",
    "dead_letter",
}


def hycq(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hycq.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def q5_parquet(tmp_path_factory: pytest.TempPathFactory) -> tuple[pa.Table, dict]:
    d = tmp_path_factory.mktemp("run")
    out, metrics = d / "q5.parquet", d / "m.json"
    r = hycq("run", str(Q5), "--duration", "20", "--output", str(out), "--metrics", str(metrics))
    assert r.returncode == 0, r.stderr
    return pq.read_table(out), json.loads(metrics.read_text())


def test_parquet_output_has_query_columns_and_ts(q5_parquet: tuple[pa.Table, dict]) -> None:
    table, m = q5_parquet
    assert table.schema.names == ["house_id", "household_id", "max_plug_total", "_ts"]
    assert table.num_rows == m["results"] > 0
    ts = table.column("_ts").to_pylist()
    assert ts == sorted(ts) and len(set(ts)) == 20  # one result relation per slide instant


def test_metrics_have_the_contract_fields(q5_parquet: tuple[pa.Table, dict]) -> None:
    _, m = q5_parquet
    assert set(m) >= CONTRACT_METRICS
    assert m["tuples_in"] == 40000 and m["rate"] == 2000 and m["dead_letter"] == 0
    # Consistent with their definitions (no figure: timing belongs to the benchmarks).
    assert m["wall_s"] > 0 and m["throughput"] == pytest.approx(m["tuples_in"] / m["wall_s"])
    assert m["kept_up"] is (m["throughput"] >= m["rate"])  # at --pace max
    assert set(m["latency_ms"]) == {"p50", "p99"} and m["latency_ms"]["p99"] >= 0
    explained = json.loads(hycq("explain", str(Q5), "--json").stdout)
    assert m["placement"] == {op["id"]: op["engine"] for op in explained["operators"]}
    assert m["cost_model"] == explained["cost_model"]
    assert m["predicted"]["feasible"] is explained["feasible"]
    for op_id, op in m["operators"].items():
        assert {"tuples_in", "tuples_out", "busy_s", "u", "engine"} <= set(op), op_id


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_csv_and_jsonl_outputs_match_parquet(
    q5_parquet: tuple[pa.Table, dict], tmp_path: Path, suffix: str
) -> None:
    table, _ = q5_parquet
    out = tmp_path / f"q5{suffix}"
    r = hycq("run", str(Q5), "--duration", "20", "--output", str(out))
    assert r.returncode == 0, r.stderr
    if suffix == ".csv":
        got = pacsv.read_csv(out).cast(table.schema)
    else:
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        got = pa.Table.from_pylist(rows, schema=table.schema)
    assert got.sort_by([(n, "ascending") for n in table.schema.names]).equals(
        table.sort_by([(n, "ascending") for n in table.schema.names])
    )
    assert not list(tmp_path.glob(".*.tmp"))  # the temp file was renamed, not left behind


def test_stdout_output_is_json_lines() -> None:
    r = hycq("run", str(Q5), "--duration", "3", "--output", "-")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert rows and all(
        set(row) == {"house_id", "household_id", "max_plug_total", "_ts"} for row in rows
    )


def test_failed_run_leaves_no_partial_output(tmp_path: Path) -> None:
    out = tmp_path / "never.parquet"
    r = hycq("run", str(Q5), "--data", f"readings={tmp_path / 'missing.csv'}", "--output", str(out))
    assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr
    assert not out.exists() and not list(tmp_path.glob(".*"))


def test_file_replay_at_a_rate_rescales_timestamps(tmp_path: Path) -> None:
    data = tmp_path / "r.csv"
    assert (
        hycq(
            "data",
            "generate",
            "--out",
            str(data),
            "--seconds",
            "10",
            "--houses",
            "2",
            "--rate",
            "100",
        ).returncode
        == 0
    )
    m = tmp_path / "m.json"
    r = hycq("run", str(Q5), "--data", f"readings={data}", "--rate", "250", "--metrics", str(m))
    assert r.returncode == 0, r.stderr
    metrics = json.loads(m.read_text())
    assert metrics["tuples_in"] == 1000 and metrics["event_seconds"] == 4  # 1000 rows at 250/s


def test_realtime_pace_follows_the_wall_clock(tmp_path: Path) -> None:
    m = tmp_path / "m.json"
    start = time.perf_counter()
    r = hycq("run", str(Q5), "--duration", "3", "--pace", "realtime", "--metrics", str(m))
    elapsed = time.perf_counter() - start
    assert r.returncode == 0, r.stderr
    metrics = json.loads(m.read_text())
    assert metrics["wall_s"] >= 1.9 and elapsed >= 2  # three event-seconds: starts at 0, 1, 2
    assert metrics["kept_up"] is True and metrics["max_lag_s"] < 1.0


@pytest.mark.parametrize("query", sorted((ROOT / "queries").glob("*/*.sql")), ids=lambda p: p.stem)
def test_every_shipped_query_runs_on_the_row_engine(query: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.parquet"
    # The drifting join workloads run at a few tuples per second with rare matches; the
    # out-of-order star and chain joins (qddh) at Zipf skew 1 make thousands of results a
    # second.
    seconds = {"drift": "30", "qddh": "4", "multiway": "30"}.get(query.parent.name, "8")
    r = hycq("run", str(query), "--placement", "row", "--duration", seconds, "--output", str(out))
    assert r.returncode == 0, r.stderr
    assert pq.read_table(out).num_rows > 0


def test_generated_data_and_a_run_have_one_default_rate(tmp_path: Path) -> None:
    """``data generate`` and ``run`` (generator) default to the catalog's rate, so a file
    generated without --rate replays at the rate a run without --data has."""
    catalog = (ROOT / "queries" / "smartplug" / "catalog.toml").read_text()
    rate = next(int(line.split("=")[1]) for line in catalog.splitlines() if line.startswith("rate"))
    data = tmp_path / "d.csv"
    r = hycq("data", "generate", "--out", str(data), "--seconds", "3")
    assert r.returncode == 0, r.stderr
    assert f"wrote {3 * rate} rows" in r.stderr
    assert len(data.read_text().splitlines()) == 3 * rate
    m = tmp_path / "m.json"
    r = hycq("run", str(Q5), "--duration", "3", "--metrics", str(m))
    assert r.returncode == 0, r.stderr
    metrics = json.loads(m.read_text())
    assert metrics["rate"] == rate and metrics["tuples_in"] == 3 * rate

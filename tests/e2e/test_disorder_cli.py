"""``hycq run --disorder`` and ``--idle-timeout`` through the real CLI: a disordered CSV
stream, K covering its delays gives the truth with nothing dead-lettered and the
``disorder`` metrics; a smaller K dead-letters with reasons naming the stream and K; bad
specs and an unavailable policy exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from engines.disorder.policies import _REGISTRY
from optimizer.sql.catalog import load_catalog
from tests.differential.test_disorder import QUERIES, _workload
from tests.e2e.test_multi_stream_cli import hycq
from tests.kslack_reference import delays
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "queries" / "keyed" / "catalog.toml"


def _files(tmp_path: Path) -> tuple[Path, Path, dict]:
    data = _workload((("s", 5),))
    q = tmp_path / "j2.sql"
    q.write_text(QUERIES["j2"])
    for n in "rs":
        pacsv.write_csv(data[n], tmp_path / f"{n}.csv")
    return q, tmp_path, data


def test_kslack_covering_the_delays(tmp_path: Path) -> None:
    q, d, data = _files(tmp_path)
    out, metrics, dead = tmp_path / "o.parquet", tmp_path / "m.json", tmp_path / "d.jsonl"
    args = ["run", q, "--catalog", CATALOG, "--data", f"r={d / 'r.csv'}",
            "--data", f"s={d / 's.csv'}", "--placement", "row", "--output", out,
            "--metrics", metrics, "--dead-letter", dead]  # fmt: skip
    report = tmp_path / "r.html"
    run = hycq(*args, "--disorder", "kslack:5s", "--idle-timeout", "30", "--report", report)
    assert run.returncode == 0, run.stderr
    page = report.read_text()
    assert "Disorder: --disorder kslack:5000ms" in page and "peak buffered" in page
    truth = oracle(QUERIES["j2"], load_catalog(CATALOG), {n: data[n] for n in "rs"})
    assert_same_stream(pq.read_table(out), truth)
    m = json.loads(metrics.read_text())
    assert m["dead_letter"] == 0
    dis = m["disorder"]
    assert dis["policy"] == "kslack:5000ms" and dis["idle_timeout_s"] == 30
    assert dis["streams"]["s"]["max_delay_s"] == max(delays(data["s"].column("ts").to_pylist()))
    assert dis["streams"]["s"]["k_timeline"] and dis["streams"]["r"]["buffered_peak"] > 0
    assert dis["latency_ms"]["max"] >= dis["latency_ms"]["p99"] >= dis["latency_ms"]["p50"] > 0
    small = hycq(*args, "--disorder", "kslack:1s", "--late", "drop")
    assert small.returncode == 0, small.stderr
    m = json.loads(metrics.read_text())
    assert m["dead_letter"] > 0 and m["disorder"]["late"] == "drop"
    dropped = m["dead_letter"]
    insert = hycq(*args, "--disorder", "kslack:1s")  # insert: the default with a buffer
    assert insert.returncode == 0, insert.stderr
    mi = json.loads(metrics.read_text())
    assert mi["disorder"]["late"] == "insert"
    assert mi["disorder"]["late_inserted"] > 0
    assert mi["dead_letter"] + mi["disorder"]["late_inserted"] == dropped
    small = hycq(*args, "--disorder", "kslack:1s", "--late", "drop")
    m = json.loads(metrics.read_text())
    assert m["disorder"]["streams"]["s"]["late_dropped"] == m["dead_letter"]
    reasons = [json.loads(line)["reason"] for line in dead.read_text().splitlines()]
    assert all("K-slack of stream 's' (K = 1 s" in r for r in reasons)


@pytest.mark.parametrize("spec", ["kslack", "kslack:3", "kslack:2h", "sometimes"])
def test_bad_disorder_exits_2(tmp_path: Path, spec: str) -> None:
    q, d, _ = _files(tmp_path)
    run = hycq("run", q, "--catalog", CATALOG, "--data", f"r={d / 'r.csv'}",
               "--data", f"s={d / 's.csv'}", "--disorder", spec)  # fmt: skip
    assert run.returncode == 2
    assert "--disorder" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.skipif("quality" in _REGISTRY, reason="a quality policy is installed")
def test_quality_without_a_policy_exits_2(tmp_path: Path) -> None:
    from importlib.util import find_spec

    if find_spec("engines.disorder.quality") is not None:
        pytest.skip("a quality policy module is installed")
    q, d, _ = _files(tmp_path)
    run = hycq("run", q, "--catalog", CATALOG, "--data", f"r={d / 'r.csv'}",
               "--data", f"s={d / 's.csv'}", "--disorder", "quality")  # fmt: skip
    assert run.returncode == 2
    assert "no quality policy is available" in run.stderr

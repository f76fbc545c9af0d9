"""hycq's Spark engine on a real standalone cluster (engines/spark/cluster.py): a master and
two workers in their own JVMs on 127.0.0.1, executors in the workers. The result streams
equal the oracle's on a columnar and a mixed placement; a worker killed mid-run (its
executor lost) costs no result; the master killed mid-run costs no result either.

Each run is a ``hycq run`` subprocess (one SparkContext per process: the suite's shared
local session cannot also connect to the cluster). Queries slide every 10 seconds over two
minutes of data: a slide on this cluster costs about 3 s (docs/performance.md). The
default run has the mixed placement and the worker kill (about 2 minutes with the cluster's
start); ``-m long`` adds the columnar placements and the master kill."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engines.arrow_types import arrow_schema
from engines.spark.cluster import SparkCluster
from optimizer.sql.catalog import load_catalog
from tests.datagen import small_smartplug
from tests.lateness import without_late
from tests.oracle import assert_same_stream, oracle

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CATALOG_PATH = ROOT / "queries" / "smartplug" / "catalog.toml"
CATALOG = load_catalog(CATALOG_PATH)
SCHEMA = arrow_schema(CATALOG.get("readings").schema)
#: Q2 (queries/smartplug/q2.sql) with 1-minute windows sliding every 10 seconds.
Q2S = (
    (ROOT / "queries" / "smartplug" / "q2.sql")
    .read_text()
    .replace("RANGE 5 MINUTES SLIDE 1 SECOND", "RANGE 1 MINUTE SLIDE 10 SECONDS")
)
assert Q2S.count("RANGE 1 MINUTE SLIDE 10 SECONDS") == 2
#: A per-plug MAX on the row engine feeding a columnar join (a mixed placement).
MAXQ = """
SELECT house_id, household_id, plug_id, MAX(value) AS max_load, COUNT(*) AS n
FROM readings [RANGE 1 MINUTE SLIDE 10 SECONDS]
WHERE property = 1
GROUP BY house_id, household_id, plug_id
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    c = SparkCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2)
    c.start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def readings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    table = small_smartplug(120, seed=13, rate=20.0).select(SCHEMA.names).cast(SCHEMA)
    path = tmp_path_factory.mktemp("cluster-data") / "readings.parquet"
    pq.write_table(table, path)
    return path, table


def _cmd(query: Path, data: Path, out: Path, master: str, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "hycq.cli", "run", str(query), "--catalog", str(CATALOG_PATH),
        "--data", f"readings={data}", "--output", str(out), "--metrics",
        str(out.with_suffix(".json")), "--column-engine", "spark",
        "--spark-conf", f"spark.master={master}", "--spark-conf", "spark.executor.memory=512m",
        *args,
    ]  # fmt: skip


def _expected(text: str, table: pa.Table) -> pa.Table:
    return oracle(text, CATALOG, without_late(text, CATALOG, {"readings": table}))


def _apps(cluster: SparkCluster) -> int:
    s = cluster.status()
    return len(s.get("activeapps", [])) + len(s.get("completedapps", []))


@pytest.mark.parametrize(
    ("text", "placement"),
    [
        pytest.param(Q2S, "column", marks=pytest.mark.long),
        pytest.param(MAXQ, "column", marks=pytest.mark.long),
        (Q2S, {"join1": "spark", "aggregate2": "spark"}),
    ],
    ids=["q2s-column", "max-column", "q2s-mixed"],
)
def test_cluster_results_equal_the_oracle(
    cluster: SparkCluster, readings: tuple[Path, pa.Table], text: str,
    placement: str | dict[str, str], tmp_path: Path,
) -> None:  # fmt: skip
    path, table = readings
    query = tmp_path / "q.sql"
    query.write_text(text)
    out = tmp_path / "out.parquet"
    if isinstance(placement, dict):  # a mixed plan: the rest on the row engine
        (tmp_path / "placement.json").write_text(json.dumps(placement))
        placement = str(tmp_path / "placement.json")
    apps = _apps(cluster)
    r = subprocess.run(
        _cmd(query, path, out, cluster.master_url, "--placement", placement),
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert_same_stream(pq.read_table(out), _expected(text, table))
    metrics = json.loads(out.with_suffix(".json").read_text())
    if any(e == "spark" for e in metrics["placement"].values()):
        assert _apps(cluster) == apps + 1  # the run was an application of this cluster


def _wait_for_executors(cluster: SparkCluster, timeout: float = 180) -> None:
    """Until an application is running with executors on every worker."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        used = [w for w in cluster.alive_workers() if w.get("coresused", 0) > 0]
        if cluster.status().get("activeapps") and len(used) >= cluster.workers:
            return
        time.sleep(0.5)
    raise AssertionError(f"no application with executors on every worker: {cluster.status()}")


def _run_and_kill(
    cluster: SparkCluster, data: Path, tmp_path: Path, daemon: str
) -> tuple[int, str, Path]:
    """Q2S on the cluster (columnar), ``daemon`` SIGKILLed a few slides in, once an
    application runs with executors on every worker: exit code, stderr, output path."""
    query = tmp_path / "q.sql"
    query.write_text(Q2S)
    out = tmp_path / "out.parquet"
    p = subprocess.Popen(
        _cmd(query, data, out, cluster.master_url, "--placement", "column"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        _wait_for_executors(cluster)
        time.sleep(3)  # a few slides in
        cluster.kill(daemon)
        _, err = p.communicate(timeout=900)
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, err, out


def test_a_worker_killed_mid_run_costs_no_result(
    cluster: SparkCluster, readings: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """The worker and its executor JVM die; Spark reruns the lost tasks on the other."""
    path, table = readings
    try:
        code, err, out = _run_and_kill(cluster, path, tmp_path, "worker0")
    finally:
        cluster.start_worker(0)  # the next test has its two workers again
    assert code == 0, err
    assert_same_stream(pq.read_table(out), _expected(Q2S, table))


@pytest.mark.long
def test_the_master_killed_mid_run_costs_no_result(
    cluster: SparkCluster, readings: tuple[Path, pa.Table], tmp_path: Path
) -> None:
    """The last test of the module: it leaves the cluster without its master. A running
    application keeps its executors when the standalone master dies (only new executors
    need it), so the run finishes on Spark; should the engine fail, the group would restart
    or move to DuckDB (engines/mig/operator.py), and the result stream is the oracle's either
    way."""
    path, table = readings
    code, err, out = _run_and_kill(cluster, path, tmp_path, "master")
    assert code == 0, err
    assert_same_stream(pq.read_table(out), _expected(Q2S, table))
    metrics = json.loads(out.with_suffix(".json").read_text())
    engines = {g["engine"] for g in metrics["groups"]}
    print("groups after the master was killed:", engines, "faults:", metrics["faults"])

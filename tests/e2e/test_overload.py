"""Overload: a plan offered about 3x the rate it can process, at ``--pace realtime``.

The run loop pulls one batch from the source only after the engine has taken the previous
one (engines/runtime/loop.py): there is no queue between reading and processing, so a plan that
cannot keep up slows the reading down instead of buffering a backlog. The run falls behind
the wall clock, reports ``kept_up: false`` and the throughput it achieved, and its memory is
what the plan needs at that rate (the same as a run at max pace), not a growing backlog.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from engines.row.executor import RowExecutor
from engines.runtime import RunOptions
from hycq.api import execute
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "queries" / "smartplug" / "catalog.toml"


# -- the mechanism: no read-ahead under overload --------------------------------------------

MS_CATALOG = parse_catalog_text(
    '[streams.s]\ntimestamp = "ts"\ntime_unit = "ms"\nrate = 1000\n'
    '[streams.s.columns]\nts = "BIGINT"\nv = "DOUBLE"\n'
)
MS_QUERY = (
    "SELECT COUNT(*) AS n, SUM(v) AS total FROM s [RANGE 100 MILLISECONDS SLIDE 50 MILLISECONDS]"
)
BATCHES, SPAN_MS = 30, 20  # 30 batches of 20 event-milliseconds (one tuple per ms)


def test_an_overloaded_realtime_run_reads_no_further_ahead_than_one_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine takes 3x the event time of every batch; the source is never more than the
    batch being ingested ahead of the engine, and the results are still exact."""
    count = {"produced": 0, "ingested": 0, "ahead": 0}

    def source() -> Any:
        for k in range(BATCHES):
            ts = np.arange(k * SPAN_MS, (k + 1) * SPAN_MS, dtype=np.int64)
            count["produced"] += 1
            yield pa.record_batch({"ts": ts, "v": ts * 0.5})

    real_ingest = RowExecutor.ingest

    def slow_ingest(self: RowExecutor, stream: str, batch: Any, time_column: int) -> int:
        count["ahead"] = max(count["ahead"], count["produced"] - count["ingested"])
        time.sleep(3 * SPAN_MS / 1000)  # 3x slower than the data arrives
        count["ingested"] += 1
        return real_ingest(self, stream, batch, time_column)

    monkeypatch.setattr(RowExecutor, "ingest", slow_ingest)
    plan = plan_query(MS_QUERY, MS_CATALOG)
    result = execute(
        plan, MS_CATALOG, {"s": source()}, "row", RunOptions(pace="realtime", keep_results=True)
    )
    m = result.metrics
    assert count["ingested"] == BATCHES and count["ahead"] == 1
    assert m["kept_up"] is False and m["max_lag_s"] > 1.0
    assert m["throughput"] < 0.5 * m["rate"]  # about a third of it
    data = pa.Table.from_batches(list(source()))
    assert_same_stream(result.table, oracle(MS_QUERY, MS_CATALOG, {"s": data}))


# -- end to end: hycq run at 3x the plan's capacity -----------------------------------------


def heavy_query(folder: Path) -> Path:
    """A pure row-engine plan with a per-tuple cost of a few microseconds (5 x 60 terms) over
    a 1-second window: its capacity is tens of thousands of tuples/s, its memory small."""
    items = ",\n       ".join(
        "MAX(" + " + ".join(f"ABS(value - {k + 60 * j})" for k in range(60)) + f") AS m{j}"
        for j in range(5)
    )
    path = folder / "heavy.sql"
    path.write_text(
        f"SELECT plug_id, COUNT(*) AS n,\n       {items}\n"
        "FROM readings [RANGE 1 SECOND]\nGROUP BY plug_id\n"
    )
    return path


def run(folder: Path, query: Path, rate: float, seconds: int, pace: str) -> dict[str, Any]:
    metrics = folder / f"m_{pace}_{rate:.0f}.json"
    done = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "run", str(query), "--catalog", str(CATALOG),
         "--placement", "row", "--rate", f"{rate:.0f}", "--duration", str(seconds),
         "--pace", pace, "--metrics", str(metrics)],
        capture_output=True, text=True, timeout=300, cwd=folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    m: dict[str, Any] = json.loads(metrics.read_text())
    m["stderr"] = done.stderr
    return m


def test_three_times_the_capacity_at_realtime_pace(tmp_path: Path) -> None:
    query = heavy_query(tmp_path)
    probe = run(tmp_path, query, 40000, 2, "max")  # the plan's capacity and memory at max pace
    rate = 3 * probe["throughput"]

    m = run(tmp_path, query, rate, 3, "realtime")
    assert m["kept_up"] is False and "did NOT keep up" in m["stderr"]
    assert abs(m["tuples_in"] - 3 * rate) <= 3  # nothing dropped, nothing crashed
    # Behind the clock, realtime runs as fast as the plan goes: the achieved throughput is
    # reported, and the offered rate is about 3x it.
    assert rate / m["throughput"] >= 2.0, (rate, m["throughput"])
    assert m["max_lag_s"] > 1.0
    # No backlog in memory: no more than the same plan needs at max pace (at a lower rate,
    # so a 1-second window of fewer tuples; 40 MB of slack).
    assert m["peak_rss_mb"] <= probe["peak_rss_mb"] + 40, (m["peak_rss_mb"], probe["peak_rss_mb"])

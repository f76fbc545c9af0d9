"""A stop request reaches work that blocks inside an instant: an engine restart after a fault
(engines/interrupts.py). The end-to-end case (SIGTERM while a killed Spark JVM is being replaced)
is tests/e2e/test_interrupt.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engines import interrupts
from engines.columnar import EngineFault
from engines.duckdb.engine import DuckDBEngine
from hycq.api import execute
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import small_smartplug

ROOT = Path(__file__).resolve().parents[4]
CATALOG = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")


def test_join_gives_up_when_a_stop_is_requested() -> None:
    worker = threading.Thread(target=time.sleep, args=(30,), daemon=True)
    worker.start()
    stopper = interrupts.GracefulStop(enabled=False)
    threading.Timer(0.2, interrupts.request_stop).start()
    t0 = time.monotonic()
    try:
        with pytest.raises(interrupts.StopRequested):
            interrupts.wait(worker, None)
    finally:
        stopper.restore()
    assert time.monotonic() - t0 < 2
    assert not interrupts.stop_requested()


def test_fault_during_a_stop_request_is_not_recovered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The MIG does not restart its engine once a stop is requested: the run ends with the
    instants computed before the fault, and the flag is cleared for the next run."""
    calls = {"query": 0, "restart": 0}
    real_query = DuckDBEngine.query

    def query(self: DuckDBEngine, sql: str) -> Any:
        calls["query"] += 1
        if calls["query"] == 6:
            interrupts.request_stop()  # as the signal handler does
            raise EngineFault("injected: the engine died")
        return real_query(self, sql)

    def restart(self: DuckDBEngine) -> None:
        calls["restart"] += 1

    monkeypatch.setattr(DuckDBEngine, "query", query)
    monkeypatch.setattr(DuckDBEngine, "restart", restart)
    q = "SELECT plug_id, COUNT(*) AS n FROM readings [RANGE 5 SECONDS] GROUP BY plug_id"
    data = small_smartplug(30, seed=3, rate=5.0)
    result = execute(plan_query(q, CATALOG), CATALOG, {"readings": data}, "column")
    assert calls["restart"] == 0
    assert len(set(result.table.column("_ts").to_pylist())) == 5  # the instants before
    assert len(result.metrics["faults"]) == 1
    assert result.metrics["interrupted"] == "SIGINT"
    assert not interrupts.stop_requested()

"""Engine faults mid-run: the MIG restarts the engine, replays the instant from the Arrow data it
keeps, and the run ends with exactly the oracle's result stream and the faults in metrics."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from engines.duckdb.engine import DuckDBEngine
from hycq.api import execute
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from tests.datagen import small_smartplug
from tests.lateness import without_late
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")
QUERY = (ROOT / "queries" / "smartplug" / "q1.sql").read_text()


def _expected(data: pa.Table) -> pa.Table:
    return oracle(QUERY, CATALOG, without_late(QUERY, CATALOG, {"readings": data}))


def test_duckdb_connection_lost_mid_run(monkeypatch: pytest.MonkeyPatch) -> None:
    data = small_smartplug(40, seed=2, rate=20.0)
    calls = {"n": 0}
    real_query = DuckDBEngine.query

    def failing_query(self: DuckDBEngine, sql: str) -> Any:
        calls["n"] += 1
        if calls["n"] in (7, 19):
            self.con.close()  # a real DuckDB error follows: the connection is gone
        return real_query(self, sql)

    monkeypatch.setattr(DuckDBEngine, "query", failing_query)
    with pytest.warns(RuntimeWarning, match="restarting"):
        result = execute(plan_query(QUERY, CATALOG), CATALOG, {"readings": data}, "column")
    assert_same_stream(result.table, _expected(data))
    faults = result.metrics["faults"]
    assert len(faults) == 2 and all(f["engine"] == "duckdb" for f in faults)
    assert result.metrics["engines"]["duckdb"]["restarts"] == 2


def test_datafusion_session_loses_its_tables_mid_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real DataFusion failure (the session no longer knows the window tables) twice: the
    MIG restarts a fresh SessionContext, re-registers the Arrow inputs and replays."""
    pytest.importorskip("datafusion")
    from engines.datafusion.engine import DataFusionEngine

    data = small_smartplug(40, seed=5, rate=20.0)
    calls = {"n": 0}
    real_query = DataFusionEngine.query

    def failing_query(self: DataFusionEngine, sql: str) -> Any:
        calls["n"] += 1
        if calls["n"] in (5, 16):
            for name in self._tables:
                self.ctx.deregister_table(name)  # the query then fails inside DataFusion
        return real_query(self, sql)

    monkeypatch.setattr(DataFusionEngine, "query", failing_query)
    plan = plan_query(QUERY, CATALOG)
    with pytest.warns(RuntimeWarning, match="restarting"):
        result = execute(plan, CATALOG, {"readings": data}, "column", column_engine="datafusion")
    assert_same_stream(result.table, _expected(data))
    faults = result.metrics["faults"]
    assert len(faults) == 2 and all(f["engine"] == "datafusion" for f in faults)
    assert result.metrics["engines"]["datafusion"]["restarts"] == 2


@pytest.mark.spark
def test_spark_jvm_killed_mid_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from engines.spark.engine import SparkEngine

    data = small_smartplug(14, seed=4, rate=20.0)
    calls = {"n": 0, "killed": None}
    real_query = SparkEngine.query

    def killing_query(self: SparkEngine, sql: str) -> Any:
        calls["n"] += 1
        if calls["n"] == 5:
            pid = self.jvm_pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)  # the Spark JVM dies under the running query
            calls["killed"] = pid
        return real_query(self, sql)

    monkeypatch.setattr(SparkEngine, "query", killing_query)
    with pytest.warns(RuntimeWarning, match="restarting"):
        result = execute(
            plan_query(QUERY, CATALOG),
            CATALOG,
            {"readings": data},
            "column",
            column_engine="spark",
        )
    assert calls["killed"] is not None
    assert_same_stream(result.table, _expected(data))
    assert result.metrics["faults"] and result.metrics["engines"]["spark"]["restarts"] >= 1


def test_group_moves_to_fallback_engine_when_restarts_do_not_help(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A MIG whose engine keeps failing moves its group to the fallback engine."""
    from engines.columnar import EngineFault
    from engines.mig.operator import MigOp

    data = small_smartplug(20, seed=6, rate=20.0)
    broken = {"on": True}
    real_query = DuckDBEngine.query

    def query(self: DuckDBEngine, sql: str) -> Any:
        if getattr(self, "_broken", False) and broken["on"]:
            raise EngineFault("injected: this engine is broken")
        return real_query(self, sql)

    monkeypatch.setattr(DuckDBEngine, "query", query)
    real_init = MigOp.__init__

    def init(self: MigOp, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        self.engine._broken = True  # type: ignore[attr-defined]
        self.fallback = lambda: DuckDBEngine()  # a healthy engine of its own

    monkeypatch.setattr(MigOp, "__init__", init)
    with pytest.warns(RuntimeWarning) as caught:
        result = execute(plan_query(QUERY, CATALOG), CATALOG, {"readings": data}, "column")
    messages = [str(w.message) for w in caught]
    assert sum("restarting it" in m for m in messages) == 2, messages  # then the move
    assert sum("moved the group" in m for m in messages) == 1, messages
    assert_same_stream(result.table, _expected(data))
    assert len(result.metrics["faults"]) == 3  # first try + 2 restarts, then the move

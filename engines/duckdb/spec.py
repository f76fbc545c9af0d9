"""DuckDB's registration (engines/registry.py): the embedded default columnar engine."""

from __future__ import annotations

from typing import Any

from engines.registry import Calibration, EngineSpec, Setting
from optimizer.ir.placement import SQL_CAPABILITIES

NS = 1e-9


def _make(threads: int | None = None) -> Any:
    from engines.duckdb.engine import DuckDBEngine

    return DuckDBEngine(threads)


def _version() -> str:
    import duckdb

    return str(duckdb.__version__)


ENGINE = EngineSpec(
    name="duckdb",
    description="DuckDB, embedded (the default columnar engine)",
    capabilities=SQL_CAPABILITIES,  # the IR's semantics are DuckDB's
    colours=("#fde4c9", "#b85c0c"),
    factory=_make,
    dialect="duckdb",
    settings=(
        Setting("--duckdb-threads", "threads", "int", "DuckDB worker threads (default: all cores)"),
    ),
    # Hand-fitted to Q1 (cost_models/analytical.py): 2-5 ms per query measured.
    costs={
        "select": 8 * NS,
        "project": 4 * NS,
        "aggregate": 12 * NS,
        "join_input": 25 * NS,
        "join_output": 10 * NS,
        "fixed": 3e-3,
        # Incremental aggregates (engines/incremental.py): per merge, fitted to Q5's
        # 5-minute SUM on five data shapes, 800 to 50,000 plugs (experiments/README.md,
        # "Incremental aggregates").
        "inc_fixed": 6e-3,
        "inc_row": 130 * NS,
        "inc_group": 250 * NS,
    },
    calibration=Calibration(seconds=90, quick_seconds=25, version=_version),
)

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
    # Per-row SQL costs at scale: about the medians of six `hycq calibrate --engines duckdb`
    # runs on the 2-core reference machine (windows of 20k to 1.8M rows, 1,677 and 50,000
    # plugs; experiments/README.md, "DuckDB's constants at scale"). The fit cannot separate
    # join_output from the scans (it comes out 0); 2 ns is what materialising 0.6 M join
    # rows over a 12 M-row window took.
    costs={
        "select": 2.2 * NS,
        "project": 0.5 * NS,
        "aggregate": 5.5 * NS,
        "aggregate_large": 5 * NS,
        "join_input": 8 * NS,
        "join_output": 2 * NS,
        "fixed": 2.6e-3,
        # Incremental aggregates (engines/incremental.py): per merge, fitted (NNLS) to Q5's
        # 5-minute SUM on five data shapes, 800 to 50,000 plugs (experiments/README.md,
        # "Incremental aggregates", refitted at issue 20's fifth stop: the merges measured
        # 0.55-0.65x of the first fit's 6 ms + 130 ns/row + 250 ns/group).
        "inc_fixed": 4.8e-3,
        "inc_row": 50 * NS,
        "inc_group": 160 * NS,
        # Pane partials (engines/incremental.py, PanedState): per slide, measured on Q3's two
        # MAX+AVG aggregates wholly on DuckDB at 40k tuples/s, 1,677 to 50,000 plugs
        # (experiments/README.md, "MIN/MAX from pane partials").
        "pane_fixed": 7.5e-3,
        "pane_row": 28 * NS,
    },
    calibration=Calibration(seconds=90, quick_seconds=25, version=_version),
)

"""Apache DataFusion's registration (engines/registry.py): an embedded Arrow-native engine,
the optional extra ``hycq[datafusion]``."""

from __future__ import annotations

from typing import Any

from engines.registry import Calibration, EngineSpec, Setting
from engines.sqlgen import get_dialect
from optimizer.ir.limits import MAX_THREADS
from optimizer.ir.placement import SQL_CAPABILITIES

NS = 1e-9


def _make(threads: int | None = None, conf: dict[str, str] | None = None) -> Any:
    from engines.datafusion.engine import DataFusionEngine

    return DataFusionEngine(threads, conf)


def _version() -> str:
    import datafusion

    return str(datafusion.__version__)


ENGINE = EngineSpec(
    name="datafusion",
    description="Apache DataFusion, embedded (pip install 'hycq[datafusion]')",
    capabilities=SQL_CAPABILITIES.without_casts(
        get_dialect("datafusion").unsupported_casts()
    ).without_functions(get_dialect("datafusion").unsupported_functions()),
    colours=("#ece0f5", "#6a3d9a"),
    factory=_make,
    dialect="datafusion",
    settings=(
        Setting(
            "--datafusion-threads",
            "threads",
            "int",
            "DataFusion target partitions (worker threads; default: all cores; at most "
            f"{MAX_THREADS})",
            maximum=MAX_THREADS,
        ),
        Setting(
            "--datafusion-conf",
            "conf",
            "pairs",
            "a DataFusion session setting, e.g. datafusion.execution.batch_size=16384; repeatable",
            metavar="KEY=VALUE",
            prefix="datafusion.",
        ),
    ),
    # Measured once against DuckDB (`hycq calibrate --engines row,duckdb,datafusion` on the
    # shared 2-core development machine, 445 slides of the same five queries per engine):
    # DataFusion's SQL time per slide was 1.10x DuckDB's at the median (interquartile range
    # 0.71-1.72x), 1.38x on windows over 1.5 M rows, and at least 3.8 ms against DuckDB's
    # 3.2 ms. The joint NNLS fit was too noisy to use (R^2 0.13), so the defaults are
    # DuckDB's analytical constants x 1.25 per row and 3.6 ms per query; `hycq calibrate`
    # replaces them on a quiet machine (docs/performance.md).
    costs={
        "select": 1.25 * 8 * NS,
        "project": 1.25 * 4 * NS,
        "aggregate": 1.25 * 12 * NS,
        # An exact SUM/AVG of DOUBLE (ARRAY_AGG and hycq's kernel, engines/kernels/exact_sum.py),
        # per value on top of ``aggregate``: 33-60 ns at 0.1 M rows, 23-37 ns at 1-4 M rows of
        # 1,677 plugs on a quiet machine (experiments/exact_sum_cost.py; 3-10x a plain SUM).
        "exact_sum": 30 * NS,
        "join_input": 1.25 * 25 * NS,
        "join_output": 1.25 * 10 * NS,
        "fixed": 3.6e-3,
    },
    calibration=Calibration(seconds=90, quick_seconds=25, version=_version),
    extra="datafusion",
    module="datafusion",
)

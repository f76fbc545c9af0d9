"""Apache DataFusion's registration (engines/registry.py): an embedded Arrow-native engine,
the optional extra ``hycq[datafusion]``."""

from __future__ import annotations

from typing import Any

from engines.registry import Calibration, EngineSpec, Setting
from engines.sqlgen import get_dialect
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
    capabilities=SQL_CAPABILITIES.without_casts(get_dialect("datafusion").unsupported_casts()),
    colours=("#ece0f5", "#6a3d9a"),
    factory=_make,
    dialect="datafusion",
    settings=(
        Setting(
            "--datafusion-threads",
            "threads",
            "int",
            "DataFusion target partitions (worker threads; default: all cores)",
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
    # PLACEHOLDER_COSTS
    costs={
        "select": 8 * NS,
        "project": 4 * NS,
        "aggregate": 12 * NS,
        "join_input": 25 * NS,
        "join_output": 10 * NS,
        "fixed": 3e-3,
    },
    calibration=Calibration(seconds=90, quick_seconds=25, version=_version),
    extra="datafusion",
    module="datafusion",
)

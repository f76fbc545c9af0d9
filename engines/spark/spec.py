"""Spark SQL's registration (engines/registry.py): a local or cluster Spark session."""

from __future__ import annotations

from typing import Any

from engines.registry import Calibration, EngineSpec, Setting
from engines.sqlgen import get_dialect
from optimizer.ir.placement import SQL_CAPABILITIES

NS = 1e-9


def _make(conf: dict[str, str] | None = None, start_timeout: float | None = None) -> Any:
    from engines.spark.engine import SparkEngine

    if start_timeout is None:
        return SparkEngine(conf)
    return SparkEngine(conf, start_timeout)


def _version() -> str:
    import pyspark

    return str(pyspark.__version__)


ENGINE = EngineSpec(
    name="spark",
    description="Spark SQL through PySpark (local JVM or a cluster: --spark-conf)",
    capabilities=SQL_CAPABILITIES.without_casts(
        get_dialect("spark").unsupported_casts()
    ).without_functions(get_dialect("spark").unsupported_functions()),
    colours=("#dcefd6", "#3b7d2c"),
    factory=_make,
    dialect="spark",
    settings=(
        Setting(
            "--spark-conf",
            "conf",
            "pairs",
            "a Spark setting, e.g. spark.master=spark://host:7077; repeatable",
            metavar="KEY=VALUE",
            prefix="spark.",
        ),
        Setting(
            "--spark-connect-timeout",
            "start_timeout",
            "float",
            "seconds the Spark session may take to start before the run fails with exit 2 "
            "(default: 90; a local JVM needs 5-20 s)",
            metavar="S",
        ),
    ),
    # Twice DuckDB's per-row speed (more cores), 450 ms per query (cost_models/analytical.py).
    costs={
        "select": 4 * NS,
        "project": 2 * NS,
        "aggregate": 6 * NS,
        # An exact SUM/AVG of DOUBLE (COLLECT_LIST and hycq's kernel in an Arrow UDF), per
        # value on top of ``aggregate``: 0.3-0.8 us over 0.1-1 M rows of 1,677 plugs in
        # one-second chunks on a quiet machine (experiments/exact_sum_cost.py; 1.2x the plain
        # SUM's 1.9 s; 4 M rows of one-second chunks overflow Spark's union, issue 50's target).
        "exact_sum": 500 * NS,
        "join_input": 12.5 * NS,
        "join_output": 5 * NS,
        "fixed": 450e-3,
    },
    calibration=Calibration(seconds=15, quick_seconds=10, version=_version),
    fallback="duckdb",
)

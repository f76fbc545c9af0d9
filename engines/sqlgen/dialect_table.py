"""Every SQL dialect by name: :data:`DIALECTS` and :func:`get_dialect`.

An engine's registration names its dialect (``EngineSpec.dialect``, engines/registry.py);
the SQL generator looks it up here. The dialects are ``engines.sqlgen.dialects`` (the
interface and DuckDB's), ``engines.sqlgen.spark_dialect`` and
``engines.sqlgen.datafusion_dialect``.
"""

from __future__ import annotations

from engines.sqlgen.datafusion_dialect import DataFusionDialect
from engines.sqlgen.dialects import DuckDBDialect, SqlDialect
from engines.sqlgen.spark_dialect import SparkDialect
from optimizer.ir.errors import PlanError

DIALECTS: dict[str, SqlDialect] = {
    "duckdb": DuckDBDialect(),
    "spark": SparkDialect(),
    "datafusion": DataFusionDialect(),
}


def get_dialect(name: str) -> SqlDialect:
    """The dialect called ``name`` (``duckdb`` or ``spark``, case-insensitive)."""
    dialect = DIALECTS.get(name.lower()) if isinstance(name, str) else None
    if dialect is None:
        raise PlanError(
            f"unknown SQL dialect {name!r}", hint=f"use one of: {', '.join(sorted(DIALECTS))}"
        )
    return dialect

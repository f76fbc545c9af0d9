"""DuckDB, the embedded default columnar engine."""

from engines.duckdb.engine import DuckDBEngine

__all__ = ["DuckDBEngine"]

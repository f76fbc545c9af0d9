"""SQL generation for migration candidates (groups of R2R operators on a columnar engine).

``group_sql(plan, group, dialect)`` turns a connected group of select / project / join /
aggregate operators into one SELECT statement for DuckDB or Spark SQL that computes, from the
group's input relations, exactly what the row engine computes (docs/semantics.md). Only
``optimizer.ir``, sqlglot and the standard library are used: the engines that run the SQL
register the input tables and execute it.

Modules:
    group        validation of a group, its top operator and its input tables
    expressions  IR expression -> sqlglot expression tree
    dialects     the dialect interface, DuckDB's dialect and the builders the dialects share
    spark_dialect, datafusion_dialect
                 the per-dialect rewrites (IEEE division, modulo, ROUND, FLOOR, casts, ...)
    dialect_table
                 every dialect by name (``get_dialect``)
    generate     the statement: one CTE per operator, typed output columns
"""

from __future__ import annotations

from engines.sqlgen.dialect_table import DIALECTS, get_dialect
from engines.sqlgen.generate import GroupSQL, group_sql
from engines.sqlgen.group import GroupShape, analyse_group

__all__ = ["DIALECTS", "GroupSQL", "GroupShape", "analyse_group", "get_dialect", "group_sql"]

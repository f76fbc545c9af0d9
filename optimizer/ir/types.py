"""Scalar data types of the IR and the typing rules shared by every engine.

The rules follow DuckDB (CONTRACT: "aggregates follow SQL as DuckDB evaluates it"), so the row
engine, DuckDB and Spark agree on result types: ``/`` is floating division, AVG and MEDIAN are
DOUBLE, SUM of an integer is BIGINT, COUNT is BIGINT.
"""

from __future__ import annotations

from enum import Enum


class DataType(Enum):
    """The column types hycq supports."""

    BOOLEAN = "BOOLEAN"
    INTEGER = "INTEGER"
    BIGINT = "BIGINT"
    DOUBLE = "DOUBLE"
    VARCHAR = "VARCHAR"
    NULL = "NULL"  # the type of a bare NULL literal; unifies with anything

    @property
    def is_numeric(self) -> bool:
        return self in (DataType.INTEGER, DataType.BIGINT, DataType.DOUBLE, DataType.NULL)

    @property
    def is_integer(self) -> bool:
        return self in (DataType.INTEGER, DataType.BIGINT)

    def __str__(self) -> str:
        return self.value


#: Names accepted in catalogs and casts, mapped to our types.
TYPE_NAMES: dict[str, DataType] = {
    "BOOLEAN": DataType.BOOLEAN,
    "BOOL": DataType.BOOLEAN,
    "INTEGER": DataType.INTEGER,
    "INT": DataType.INTEGER,
    "INT4": DataType.INTEGER,
    "BIGINT": DataType.BIGINT,
    "INT8": DataType.BIGINT,
    "LONG": DataType.BIGINT,
    "DOUBLE": DataType.DOUBLE,
    "FLOAT8": DataType.DOUBLE,
    "FLOAT": DataType.DOUBLE,
    "REAL": DataType.DOUBLE,
    "VARCHAR": DataType.VARCHAR,
    "STRING": DataType.VARCHAR,
    "TEXT": DataType.VARCHAR,
}

_NUMERIC_RANK = {DataType.NULL: 0, DataType.INTEGER: 1, DataType.BIGINT: 2, DataType.DOUBLE: 3}


def common_numeric(a: DataType, b: DataType) -> DataType:
    """The wider of two numeric types (NULL unifies with anything)."""
    if a is DataType.NULL:
        return b
    if b is DataType.NULL:
        return a
    return a if _NUMERIC_RANK[a] >= _NUMERIC_RANK[b] else b


def comparable(a: DataType, b: DataType) -> bool:
    """Whether values of the two types may be compared with = < etc."""
    if DataType.NULL in (a, b) or a == b:
        return True
    return a.is_numeric and b.is_numeric


def arithmetic_result(op: str, a: DataType, b: DataType) -> DataType:
    """Result type of ``a op b`` for + - * / %; callers check both are numeric first."""
    if op == "/":
        return DataType.DOUBLE
    if a is DataType.NULL and b is DataType.NULL:
        return DataType.BIGINT
    wider = common_numeric(a, b)
    # Integer arithmetic is widened to BIGINT so that no engine overflows where another doesn't.
    return DataType.BIGINT if wider.is_integer else wider


def aggregate_result(func: str, arg: DataType | None) -> DataType:
    """Result type of an aggregate function over an argument type (None for COUNT(*))."""
    if func == "COUNT":
        return DataType.BIGINT
    if func in ("AVG", "MEDIAN"):
        return DataType.DOUBLE
    if func == "SUM":
        assert arg is not None
        return DataType.DOUBLE if arg is DataType.DOUBLE else DataType.BIGINT
    assert arg is not None  # MIN / MAX keep their argument's type
    return DataType.BIGINT if arg is DataType.NULL else arg

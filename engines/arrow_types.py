"""Mapping between IR types / schemas and Arrow types / schemas (shared by every engine)."""

from __future__ import annotations

import pyarrow as pa

from optimizer.ir.schema import Schema
from optimizer.ir.types import DataType

ARROW_TYPES: dict[DataType, pa.DataType] = {
    DataType.BOOLEAN: pa.bool_(),
    DataType.INTEGER: pa.int32(),
    DataType.BIGINT: pa.int64(),
    DataType.DOUBLE: pa.float64(),
    DataType.VARCHAR: pa.string(),
    DataType.NULL: pa.null(),
}


def arrow_type(dtype: DataType) -> pa.DataType:
    return ARROW_TYPES[dtype]


def arrow_schema(schema: Schema, extra: list[tuple[str, pa.DataType]] | None = None) -> pa.Schema:
    """Arrow schema of an IR schema (names as they are; duplicates allowed by Arrow)."""
    fields = [pa.field(f.name, arrow_type(f.dtype)) for f in schema]
    fields += [pa.field(n, t) for n, t in extra or []]
    return pa.schema(fields)

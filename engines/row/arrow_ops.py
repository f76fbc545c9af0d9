"""Relational helpers on Arrow tables used by the gateway (R2S over a MIG's Arrow result)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from engines.row.bags import bag_difference
from optimizer.ir.arrow_filter import arrow_filter

__all__ = ["arrow_bag_difference", "arrow_filter", "rows_of", "table_of"]


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows of a table as Python tuples (NULL as None)."""
    return list(zip(*[c.to_pylist() for c in table.columns], strict=True))


def table_of(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.Table:
    """Rows (tuples) back into a table with ``schema``."""
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
    return pa.Table.from_arrays(
        [pa.array(list(c), type=f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
    )


def arrow_bag_difference(new: pa.Table, old: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``engines.row.bags.bag_difference`` of two result tables: (rows of ``new`` without a
    partner in ``old``, rows of ``old`` without one in ``new``), as tables.

    Rows compare as Python tuples, so NULL equals NULL here, as R2S semantics require, and
    floats follow the R2S rule (within tolerance, NaN equal to itself).
    """
    if new.num_rows == 0 or old.num_rows == 0:
        return new, old
    entered, left = bag_difference(rows_of(new), rows_of(old))
    return table_of(entered, new.schema), table_of(left, old.schema)

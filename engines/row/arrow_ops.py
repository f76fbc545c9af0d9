"""Relational helpers on Arrow tables used by the gateway (R2S over a MIG's Arrow result)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows of a table as Python tuples (NULL as None)."""
    return list(zip(*[c.to_pylist() for c in table.columns], strict=True))


def table_of(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.Table:
    """Rows (tuples) back into a table with ``schema``."""
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
    return pa.Table.from_arrays(
        [pa.array(list(c), type=f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
    )


def bag_minus(a: pa.Table, b: pa.Table) -> pa.Table:
    """Bag difference ``a - b`` (each row of ``a`` kept max(0, n_a - n_b) times).

    Rows compare as Python tuples, so NULL equals NULL here, as R2S semantics require.
    """
    if a.num_rows == 0 or b.num_rows == 0:
        return a
    budget = Counter(rows_of(b))
    out = []
    for r in rows_of(a):
        n = budget.get(r)
        if n:
            budget[r] = n - 1
        else:
            out.append(r)
    return table_of(out, a.schema)

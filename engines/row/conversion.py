"""Arrow <-> tuple conversion for the row engine: the gateway's one place for it.

Streams arrive as Arrow batches; row operators work on Python tuples. ``batch_to_rows`` is
the conversion of every arrival a row window reads (the ``ingest`` cost of the cost model);
``canonical_rows`` converts a columnar engine's result for row consumers. The small helpers
read what the clock needs from a batch's timestamp column without building tuples.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from engines.row.base import Rows
from engines.row.scalars import NAN


def batch_to_rows(batch: pa.RecordBatch | pa.Table) -> Rows:
    """Arrow columns -> Python tuples (the row engine's one conversion; 0.4-0.6 us per row
    on the reference machine, the cost model's ``ingest``)."""
    return list(
        zip(
            *[
                c.to_numpy(zero_copy_only=False).tolist() if _plain(c) else c.to_pylist()
                for c in batch.columns
            ],
            strict=True,
        )
    )


def canonical_rows(table: pa.RecordBatch | pa.Table) -> Rows:
    """``batch_to_rows`` of a computed result (a MIG's), with every NaN the row engine's one
    NaN object, so that NaN rows equal each other in bags and groups (engines.row.scalars)."""
    import pyarrow.compute as pc

    rows = batch_to_rows(table)
    nan_cols = [
        i
        for i, c in enumerate(table.columns)
        if pa.types.is_floating(c.type) and pc.any(pc.is_nan(c)).as_py()
    ]
    if not nan_cols:
        return rows
    return [tuple(NAN if i in nan_cols and v != v else v for i, v in enumerate(r)) for r in rows]


def _plain(col: pa.Array | pa.ChunkedArray) -> bool:
    """Numeric without nulls: numpy's tolist builds the Python objects fastest."""
    t = col.type
    return col.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_floating(t))


def min_max(col: pa.Array | pa.ChunkedArray) -> tuple[int, int]:
    """Smallest and largest value of a timestamp column."""
    import pyarrow.compute as pc

    mm = pc.min_max(col)
    return int(mm["min"].as_py()), int(mm["max"].as_py())


def int64(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A timestamp column as an int64 numpy array (no nulls: the run-time validated it)."""
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)


def row_at(batch: pa.RecordBatch | pa.Table, idx: int) -> tuple[Any, ...]:
    """Row ``idx`` of a batch as a tuple (to report one late tuple)."""
    return tuple(c[idx].as_py() for c in batch.columns)


def is_sorted(col: pa.Array | pa.ChunkedArray) -> bool:
    """Whether a timestamp column is in non-decreasing order."""
    import pyarrow.compute as pc

    if len(col) < 2:
        return True
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return bool(pc.all(pc.less_equal(arr.slice(0, len(arr) - 1), arr.slice(1))).as_py())

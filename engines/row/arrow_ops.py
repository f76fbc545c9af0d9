"""Relational helpers on Arrow tables used by the gateway (R2S over a MIG's Arrow result)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from engines.row.bags import bag_difference


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


def arrow_filter(predicate: Any, finite: list[bool]) -> Any | None:
    """A ``pyarrow.compute`` expression equal to ``predicate`` under the row engine's
    semantics, or None when that cannot be promised.

    Used to filter a window's Arrow batches when the select's only consumer is a columnar
    group, so its tuples never become Python objects. Admitted: AND, OR, NOT, IS [NOT] NULL
    and comparisons of a column with a literal or another column of the same kind (integer
    with integer, DOUBLE with DOUBLE or a number below 2**53, VARCHAR with VARCHAR, BOOLEAN
    with BOOLEAN), on columns that are always finite (``finite`` by position: Arrow compares
    NaN by IEEE rules, the row engine as SQL engines do). No arithmetic: Arrow's integer
    arithmetic wraps where the row engine's raises, and its division differs. Three-valued
    logic is Kleene's in both, and a filter keeps only TRUE rows in both.
    """
    import pyarrow.compute as pc

    from optimizer.ir.expr import ARROW_COMPARISONS, Binary, ColumnRef, Literal, Unary
    from optimizer.ir.types import DataType

    kinds_of = {DataType.DOUBLE: "double", DataType.VARCHAR: "str", DataType.BOOLEAN: "bool"}

    def kind(t: DataType) -> str:
        return "int" if t.is_integer else kinds_of.get(t, "?")

    def operand(e: Any) -> tuple[Any, str] | None:
        if isinstance(e, ColumnRef):
            if e.dtype is DataType.DOUBLE and not finite[e.index]:
                return None
            return pc.field(e.index), kind(e.dtype)
        if not isinstance(e, Literal) or e.value is None:
            return None
        if isinstance(e.value, float):
            if e.value != e.value or e.value in (float("inf"), float("-inf")):
                return None
            return pc.scalar(e.value), "double"
        return pc.scalar(e.value), kind(e.dtype)

    def build(e: Any) -> Any | None:
        if isinstance(e, Binary) and e.op in ("AND", "OR"):
            a, b = build(e.left), build(e.right)
            if a is None or b is None:
                return None
            return (a & b) if e.op == "AND" else (a | b)
        if isinstance(e, Unary) and e.op == "NOT":
            a = build(e.operand)
            return None if a is None else ~a
        if isinstance(e, Unary) and e.op in ("IS NULL", "IS NOT NULL"):
            if not isinstance(e.operand, ColumnRef):
                return None
            f = pc.field(e.operand.index)
            return f.is_null() if e.op == "IS NULL" else f.is_valid()
        if isinstance(e, Binary) and e.op in ARROW_COMPARISONS:
            left, right = operand(e.left), operand(e.right)
            if left is None or right is None:
                return None
            kinds = {left[1], right[1]}
            if "?" in kinds or (len(kinds) > 1 and kinds != {"int", "double"}):
                return None
            if kinds == {"int", "double"}:
                # Arrow casts the integer side to double: exact for a literal below 2**53,
                # not for a column (the row engine compares exactly).
                side = e.left if left[1] == "int" else e.right
                if not isinstance(side, Literal) or abs(int(side.value)) >= 2**53:  # type: ignore[call-overload]
                    return None
            return pc.Expression._call(ARROW_COMPARISONS[e.op], [left[0], right[0]])
        return None

    return build(predicate)

"""Scalar functions hycq understands, declared as data: arity and result typing.

Every engine must implement each entry with DuckDB's semantics (the row engine in Python,
SQL generation for DuckDB and Spark). The binder rejects any other function with a hint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from optimizer.ir.types import DataType, common_numeric


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """Arity bounds and a typing rule ``(arg types) -> result type or None if ill-typed``."""

    name: str
    min_args: int
    max_args: int | None
    result: Callable[[Sequence[DataType]], DataType | None]
    doc: str


def _numeric_same(types: Sequence[DataType]) -> DataType | None:
    if not all(t.is_numeric for t in types):
        return None
    out = types[0]
    for t in types[1:]:
        out = common_numeric(out, t)
    return out


def _double(types: Sequence[DataType]) -> DataType | None:
    return DataType.DOUBLE if all(t.is_numeric for t in types) else None


def unify_types(types: Sequence[DataType]) -> DataType | None:
    """The common type of values of ``types`` (COALESCE, CASE branches): NULL if all are
    NULL, else the one non-NULL type, else the common numeric type, else None."""
    known = [t for t in types if t is not DataType.NULL]
    if not known:
        return DataType.NULL
    if all(t == known[0] for t in known):
        return known[0]
    return _numeric_same(known)


def _floor_ceil(types: Sequence[DataType]) -> DataType | None:
    return DataType.DOUBLE if types[0].is_numeric else None  # DOUBLE even for integers


FUNCTIONS: dict[str, FunctionSpec] = {
    f.name: f
    for f in [
        FunctionSpec("ABS", 1, 1, _numeric_same, "absolute value"),
        FunctionSpec("COALESCE", 1, None, unify_types, "first non-NULL argument"),
        FunctionSpec("LEAST", 1, None, unify_types, "smallest argument, NULLs ignored"),
        FunctionSpec("GREATEST", 1, None, unify_types, "largest argument, NULLs ignored"),
        FunctionSpec("FLOOR", 1, 1, _floor_ceil, "round down"),
        FunctionSpec("CEIL", 1, 1, _floor_ceil, "round up"),
        FunctionSpec("ROUND", 1, 2, _double, "round half away from zero to n decimals"),
    ]
}

#: Aliases accepted in query text, mapped to the canonical name.
FUNCTION_ALIASES = {"CEILING": "CEIL"}

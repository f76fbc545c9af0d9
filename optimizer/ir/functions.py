"""Scalar functions hycq understands, declared as data: arity and result typing.

Every engine must implement each entry with DuckDB's semantics (docs/semantics.md, "Scalar
functions": the row engine in Python, SQL generation for DuckDB, Spark and DataFusion, with
rewrites where an engine's own function differs); an engine that cannot leaves the function
out of its capabilities. The binder rejects any other function by the name the query
writes, with a hint.
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


def _is(types: Sequence[DataType], *kinds: str) -> bool:
    """Each type is of its kind: ``text`` (VARCHAR), ``int`` (an integer) or ``num``;
    NULL fits every kind (a bare NULL argument gives NULL)."""
    checks = {
        "text": lambda t: t is DataType.VARCHAR,
        "int": lambda t: t.is_integer,
        "num": lambda t: t.is_numeric,
    }
    return len(types) <= len(kinds) and all(
        t is DataType.NULL or checks[k](t) for t, k in zip(types, kinds, strict=False)
    )


def _typed(result: DataType, *kinds: str) -> Callable[[Sequence[DataType]], DataType | None]:
    """A typing rule: ``result`` when the arguments are of ``kinds`` (see :func:`_is`)."""

    def rule(types: Sequence[DataType]) -> DataType | None:
        return result if _is(types, *kinds) else None

    return rule


def _texts(types: Sequence[DataType]) -> DataType | None:
    return DataType.VARCHAR if all(t in (DataType.VARCHAR, DataType.NULL) for t in types) else None


_TEXT = DataType.VARCHAR
_DOUBLE = DataType.DOUBLE

#: Every function takes DuckDB's semantics (docs/semantics.md, "Scalar functions"); a
#: function is NULL when an argument is NULL unless its entry says otherwise.
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
        FunctionSpec("SQRT", 1, 1, _typed(_DOUBLE, "num"), "square root (NaN below 0)"),
        FunctionSpec("POWER", 2, 2, _typed(_DOUBLE, "num", "num"), "x to the power y (C pow)"),
        FunctionSpec("EXP", 1, 1, _typed(_DOUBLE, "num"), "e to the power x"),
        FunctionSpec("LN", 1, 1, _typed(_DOUBLE, "num"), "natural logarithm (-inf at 0)"),
        FunctionSpec("LOG10", 1, 1, _typed(_DOUBLE, "num"), "base-10 logarithm"),
        FunctionSpec("LOG2", 1, 1, _typed(_DOUBLE, "num"), "base-2 logarithm"),
        FunctionSpec("SIGN", 1, 1, _typed(DataType.INTEGER, "num"), "-1, 0 or 1 (0 for NaN)"),
        FunctionSpec("LENGTH", 1, 1, _typed(DataType.BIGINT, "text"), "characters (code points)"),
        FunctionSpec("LOWER", 1, 1, _typed(_TEXT, "text"), "lower case (DuckDB's mapping)"),
        FunctionSpec("UPPER", 1, 1, _typed(_TEXT, "text"), "upper case (DuckDB's mapping)"),
        FunctionSpec("SUBSTRING", 2, 3, _typed(_TEXT, "text", "int", "int"), "substring"),
        FunctionSpec("TRIM", 1, 2, _typed(_TEXT, "text", "text"), "strip spaces (or chars)"),
        FunctionSpec("LTRIM", 1, 2, _typed(_TEXT, "text", "text"), "strip on the left"),
        FunctionSpec("RTRIM", 1, 2, _typed(_TEXT, "text", "text"), "strip on the right"),
        FunctionSpec("REPLACE", 3, 3, _typed(_TEXT, "text", "text", "text"), "replace all"),
        FunctionSpec("CONCAT", 1, None, _texts, "concatenation, NULLs skipped (never NULL)"),
        FunctionSpec("||", 2, 2, _texts, "concatenation, NULL if an operand is"),
        FunctionSpec("STARTS_WITH", 2, 2, _typed(DataType.BOOLEAN, "text", "text"), "prefix"),
        FunctionSpec("ENDS_WITH", 2, 2, _typed(DataType.BOOLEAN, "text", "text"), "suffix"),
        FunctionSpec("CONTAINS", 2, 2, _typed(DataType.BOOLEAN, "text", "text"), "substring"),
        FunctionSpec("LPAD", 3, 3, _typed(_TEXT, "text", "int", "text"), "pad on the left"),
        FunctionSpec("RPAD", 3, 3, _typed(_TEXT, "text", "int", "text"), "pad on the right"),
    ]
}

#: Aliases accepted in query text, mapped to the canonical name (sqlglot already maps
#: SUBSTR, POW, CHAR_LENGTH, CHARACTER_LENGTH, LEN, LCASE and UCASE).
FUNCTION_ALIASES = {"CEILING": "CEIL", "SUBSTR": "SUBSTRING", "POW": "POWER"}

#: Functions that are NULL only when every argument is (the others: when any argument is).
NULL_IF_ALL_NULL = frozenset({"COALESCE", "LEAST", "GREATEST"})
#: Functions that are never NULL.
NEVER_NULL = frozenset({"CONCAT"})

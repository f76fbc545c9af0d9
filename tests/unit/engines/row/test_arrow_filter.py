"""engines.row.arrow_ops.arrow_filter: an Arrow filter stands for a row select only where it
keeps exactly the rows the row engine's compiled filter keeps (NULLs included), and refuses
what it cannot promise."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engines.row.arrow_ops import arrow_filter
from engines.row.compile import compile_filter
from optimizer.ir.expr import Binary, ColumnRef, Literal, Unary
from optimizer.ir.types import DataType

INT, D, S = DataType.BIGINT, DataType.DOUBLE, DataType.VARCHAR
A = ColumnRef(0, "a", INT)
B = ColumnRef(1, "b", INT)
X = ColumnRef(2, "x", D)
T = ColumnRef(3, "t", S)
BOOL = DataType.BOOLEAN


def lit(v: object, t: DataType) -> Literal:
    return Literal(v, t)


def cmp(op: str, left, right) -> Binary:  # type: ignore[no-untyped-def]
    return Binary(op, left, right, BOOL)


TABLE = pa.table(
    {
        "a": pa.array([1, 2, None, 4, 5, 2, None], pa.int64()),
        "b": pa.array([2, 2, 3, None, 1, 0, None], pa.int64()),
        "x": pa.array([0.5, 2.0, 3.5, None, -1.0, 2.0, 7.0], pa.float64()),
        "t": pa.array(["a", "é", None, "b", "ab", "", "z"], pa.string()),
    }
)

EXACT = [
    cmp("=", A, lit(2, INT)),
    cmp("<>", A, B),
    cmp("<", X, lit(2, INT)),
    cmp(">=", X, lit(2.0, D)),
    cmp("<=", T, lit("b", S)),
    Binary("AND", cmp(">", A, lit(1, INT)), cmp("<", X, lit(3.0, D)), BOOL),
    Binary("OR", cmp("=", A, lit(2, INT)), Unary("IS NULL", B, BOOL), BOOL),
    Unary("NOT", cmp("=", A, B), BOOL),
    Unary("IS NOT NULL", T, BOOL),
]


@pytest.mark.parametrize("pred", EXACT, ids=lambda p: p.display())
def test_arrow_filter_keeps_the_rows_the_row_filter_keeps(pred) -> None:  # type: ignore[no-untyped-def]
    expr = arrow_filter(pred, [True] * 4)
    assert expr is not None
    rows = list(zip(*(c.to_pylist() for c in TABLE.columns), strict=True))
    want = compile_filter(pred, [True] * 4)(rows)
    got = TABLE.filter(expr)
    assert list(zip(*(c.to_pylist() for c in got.columns), strict=True)) == want


@pytest.mark.parametrize(
    "pred",
    [
        cmp(">", Binary("*", X, lit(2, INT), D), lit(3, INT)),  # arithmetic
        cmp("<", A, X),  # an integer column against a DOUBLE column
        cmp("<", X, lit(2**60, INT)),  # inexact cast
        cmp(">", X, lit(float("nan"), D)),
    ],
    ids=["arithmetic", "int-vs-double-column", "big-int-literal", "nan-literal"],
)
def test_arrow_filter_refuses_what_it_cannot_promise(pred) -> None:  # type: ignore[no-untyped-def]
    assert arrow_filter(pred, [True] * 4) is None


def test_a_double_column_that_may_hold_nan_is_not_arrow_filtered() -> None:
    assert arrow_filter(cmp(">", X, lit(1.0, D)), [True, True, False, True]) is None

"""Generated row code may test a folded literal's identity (`(-0.0) is None`, `(None) is
True`): CPython's "is with a literal" SyntaxWarning must not stop compiling it, even when
warnings are errors (as under pytest here). Found by the Spark/DuckDB/row expression fuzzer."""

from __future__ import annotations

import warnings

from engines.row.compile import compile_map
from optimizer.ir.expr import Case, Literal, Unary
from optimizer.ir.types import DataType


def test_literal_identity_compiles_under_warnings_as_errors() -> None:
    neg_zero = Unary("NEG", Literal(0.0, DataType.DOUBLE), DataType.DOUBLE)
    e = Case(
        whens=((Literal(None, DataType.NULL), Unary("IS NULL", neg_zero, DataType.BOOLEAN)),),
        default=Literal(None, DataType.NULL),
        dtype=DataType.BOOLEAN,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compile_map([e], [False])([(1,), (2,)]) == [(None,), (None,)]
        is_null = Unary("IS NULL", neg_zero, DataType.BOOLEAN)
        assert compile_map([is_null], [False])([(1,)]) == [(False,)]

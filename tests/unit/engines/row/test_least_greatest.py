"""LEAST/GREATEST on the row engine order NaN as DuckDB does (greater than every number),
and ignore NULLs; Python's min/max return NaN when it comes first (found by the expression
property test: CAST(LEAST(b / b, 0) AS INTEGER) at b = 0 raised 'cannot CAST nan')."""

from __future__ import annotations

import itertools
import math

import duckdb
import pytest

from engines.row.scalars import _greatest, _least

NAN = float("nan")
VALUES = [NAN, 0.0, -1.5, 2.0, None]


def _sql(v: float | None) -> str:
    if v is None:
        return "NULL::DOUBLE"
    return "'nan'::DOUBLE" if v != v else f"{v}::DOUBLE"


@pytest.mark.parametrize("args", [*itertools.permutations(VALUES, 2), (NAN, NAN, 1.0)])
def test_least_and_greatest_match_duckdb(args: tuple[float | None, ...]) -> None:
    con = duckdb.connect()
    items = ", ".join(_sql(a) for a in args)
    ((least, greatest),) = con.sql(f"SELECT LEAST({items}), GREATEST({items})").fetchall()
    for got, want in ((_least(*args), least), (_greatest(*args), greatest)):
        if want is None or (isinstance(want, float) and math.isnan(want)):
            assert got is want or (got != got and want != want)
        else:
            assert got == want

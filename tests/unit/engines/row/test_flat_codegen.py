"""The row engine's generated Python stays flat however long or deep the expression.

CPython refuses more than 200 nested brackets in one expression (``SyntaxError: too many
nested parentheses``) and recurses while parsing and compiling. The binder accepts CASEs
with any number of WHENs, COALESCEs with any number of arguments and 128 levels of nesting;
every compiler of engines/row/compile.py (filters, maps, scalars, predicates) and the
aggregate's fused code must compile them, with nothing nested past ``NEST_BUDGET``, and
compute what the expression says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engines.row.aggregate import AggregateOp
from engines.row.base import Delta
from engines.row.compile import (
    NEST_BUDGET,
    compile_filter,
    compile_map,
    compile_predicate,
    compile_scalar,
    nesting,
)
from optimizer.ir.expr import AggCall, Binary, Case, ColumnRef, Expr, Func, Literal
from optimizer.ir.types import DataType

INT, DBL, BOOL = DataType.BIGINT, DataType.DOUBLE, DataType.BOOLEAN
K = ColumnRef(0, "k", INT)
V = ColumnRef(1, "v", DBL)
ROWS = [(k, k / 4) for k in range(-3, 40)]


def lit(v: Any, t: DataType = INT) -> Literal:
    return Literal(v, t)


def lookup(n: int) -> Case:
    """CASE WHEN k = n-1 THEN 0 WHEN k = n-2 THEN 1 ... ELSE -1: the ks found at the end."""
    whens = tuple((Binary("=", K, lit(n - 1 - i), BOOL), lit(i)) for i in range(n))
    return Case(whens, lit(-1), INT)


def lookup_value(k: int, n: int) -> int:
    return n - 1 - k if 0 <= k < n else -1


def maybe(k_above: int) -> Case:
    """CASE WHEN k > k_above THEN v END: NULL for small ks (a nullable operand)."""
    return Case(((Binary(">", K, lit(k_above), BOOL), V),), lit(None, DataType.NULL), DBL)


def deep_sum(levels: int) -> Expr:
    """A left-deep + chain over nullable operands, ``levels`` deep (NULL-guarded code)."""
    e: Expr = maybe(0)
    for i in range(1, levels):
        e = Binary("+", e, maybe(i % 5), DBL)
    return e


def deep_sum_value(k: int, levels: int) -> float | None:
    parts = [k / 4 if k > (i % 5) else None for i in range(levels)]
    return None if any(p is None for p in parts) else sum(parts)  # type: ignore[misc]


def sources(fn: Callable[..., Any]) -> list[str]:
    """The generated source of ``fn`` and of every helper function it calls."""
    namespace = fn.__globals__
    return [fn.__hycq_source__] + [
        f.__hycq_source__ for n, f in namespace.items() if n.startswith("_hx")
    ]


def assert_flat(fn: Callable[..., Any]) -> None:
    for src in sources(fn):
        assert nesting(src) <= NEST_BUDGET + 4, src[:200]


@pytest.mark.parametrize("n", [9, 300, 5000])
def test_long_case_compiles_flat_everywhere(n: int) -> None:
    case = lookup(n)
    want = [lookup_value(k, n) for k, _ in ROWS]
    mapped = compile_map([case], [False, False])
    assert [r[0] for r in mapped(ROWS)] == want
    assert_flat(mapped)
    scalar = compile_scalar(case, [False, False])
    assert [scalar(r) for r in ROWS] == want
    assert_flat(scalar)
    test = Binary(">", case, lit(n - 10), BOOL)
    kept = compile_filter(test, [False, False])
    assert [r[0] for r in kept(ROWS)] == [k for k, _ in ROWS if lookup_value(k, n) > n - 10]
    assert_flat(kept)
    pred = compile_predicate(test, [False, False])
    assert [pred(r) for r in ROWS] == [lookup_value(k, n) > n - 10 for k, _ in ROWS]


@pytest.mark.parametrize("n", [9, 2000])
def test_long_coalesce_is_lazy_and_flat(n: int) -> None:
    # COALESCE(CASE WHEN k = n-1 THEN 0 END, ..., CASE WHEN k = 0 THEN n-1 END, -1)
    args: list[Expr] = [
        Case(((Binary("=", K, lit(n - 1 - i), BOOL), lit(i)),), lit(None, DataType.NULL), INT)
        for i in range(n)
    ]
    e = Func("COALESCE", (*args, lit(-1)), INT)
    mapped = compile_map([e], [False, False])
    assert [r[0] for r in mapped(ROWS)] == [lookup_value(k, n) for k, _ in ROWS]
    assert_flat(mapped)


@pytest.mark.parametrize("levels", [60, 128])  # the binder accepts 128 levels
def test_deep_null_guarded_arithmetic_compiles_flat(levels: int) -> None:
    e = deep_sum(levels)
    mapped = compile_map([e], [False, False])
    got = [r[0] for r in mapped(ROWS)]
    want = [deep_sum_value(k, levels) for k, _ in ROWS]
    assert got == pytest.approx(want)
    assert_flat(mapped)


def test_aggregate_of_long_and_deep_arguments_and_keys() -> None:
    """SUM(long CASE) and MAX(deep nullable sum) grouped by a long CASE (the aggregate's
    fused update code) give what the expressions say."""
    n = 1000
    key = Case(tuple((Binary("=", K, lit(i), BOOL), lit(i % 3)) for i in range(n)), lit(-1), INT)
    aggs = [
        AggCall("SUM", lookup(n), False, INT),
        AggCall("MAX", deep_sum(150), False, DBL),
        AggCall("COUNT", None, False, INT),
    ]
    op = AggregateOp("agg", [key], aggs, [False, False], fifo=True, replace_in=False)
    got = op.step(1, [Delta(list(ROWS), [])]).ins
    expected: dict[int, list[Any]] = {}
    for k, _ in ROWS:
        g = k % 3 if 0 <= k < n else -1
        s = expected.setdefault(g, [0, None, 0])
        s[0] += lookup_value(k, n)
        m = deep_sum_value(k, 150)
        if m is not None:
            s[1] = m if s[1] is None else max(s[1], m)
        s[2] += 1
    assert sorted(got) == pytest.approx(sorted((g, *v) for g, v in expected.items()))
    # Deleting every row again leaves no group.
    gone = op.step(2, [Delta([], list(ROWS))])
    assert sorted(gone.dels) == sorted(got) and not op.groups

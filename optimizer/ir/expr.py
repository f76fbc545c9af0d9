"""Bound scalar and aggregate expressions.

Expressions are immutable, hashable and fully typed. Column references are *positional*
(``ColumnRef.index`` into the input schema of the operator that holds the expression), like
Calcite's RexInputRef: engines compile them to tuple indexing (row engine) or to a column of
the operator's input relation (SQL generation), and no name resolution happens after binding.

Example:
    >>> from optimizer.ir.types import DataType
    >>> v = ColumnRef(2, "value", DataType.DOUBLE)
    >>> e = Binary(">", v, Binary("*", Literal(0.9, DataType.DOUBLE), v, DataType.DOUBLE),
    ...            DataType.BOOLEAN)
    >>> e.display()
    'value > 0.9 * value'
    >>> sorted(columns_used(e))
    [2]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from optimizer.ir.types import DataType

#: Binary operators, with their SQL spelling and display precedence (higher binds tighter).
BINARY_OPS: dict[str, int] = {
    "OR": 1,
    "AND": 2,
    "=": 4,
    "<>": 4,
    "<": 4,
    "<=": 4,
    ">": 4,
    ">=": 4,
    "+": 5,
    "-": 5,
    "*": 6,
    "/": 6,
    "%": 6,
}
COMPARISONS = frozenset({"=", "<>", "<", "<=", ">", ">="})
ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})
LOGICAL = frozenset({"AND", "OR"})

#: Unary operators: NOT, NEG (arithmetic minus), IS NULL, IS NOT NULL.
UNARY_OPS = frozenset({"NOT", "NEG", "IS NULL", "IS NOT NULL"})

#: Aggregate functions. The incremental ones can be maintained under inserts and deletes.
AGGREGATES = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX", "MEDIAN"})
INCREMENTAL_AGGREGATES = frozenset({"COUNT", "SUM", "AVG"})


class Expr:
    """Base class of bound expressions."""

    __slots__ = ()

    #: The SQL type of the value (a dataclass field in every subclass).
    dtype: DataType

    def children(self) -> tuple[Expr, ...]:
        return ()

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        """A copy with new children (same arity); leaves return themselves."""
        return self

    def display(self) -> str:
        """SQL-like text used by the plan printer."""
        return _display(self, 0)

    def walk(self) -> Iterator[Expr]:
        """Pre-order traversal of this expression."""
        yield self
        for child in self.children():
            yield from child.walk()


@dataclass(frozen=True, slots=True)
class Literal(Expr):
    """A constant; ``value`` is a Python bool/int/float/str or None."""

    value: object
    dtype: DataType


@dataclass(frozen=True, slots=True)
class ColumnRef(Expr):
    """The ``index``-th column of the operator's input (for joins: left columns then right)."""

    index: int
    name: str
    dtype: DataType


#: SQL comparison operators -> the ``pyarrow.compute`` functions that evaluate them (the
#: optimizer's sample evaluator and the row engine's Arrow-filtered windows share it).
ARROW_COMPARISONS = {
    "=": "equal",
    "<>": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
}


@dataclass(frozen=True, slots=True)
class Binary(Expr):
    """``left op right`` for arithmetic, comparison and AND/OR (SQL three-valued logic)."""

    op: str
    left: Expr
    right: Expr
    dtype: DataType

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, left=children[0], right=children[1])


@dataclass(frozen=True, slots=True)
class Unary(Expr):
    """NOT, NEG, IS NULL, IS NOT NULL."""

    op: str
    operand: Expr
    dtype: DataType

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, operand=children[0])


@dataclass(frozen=True, slots=True)
class Func(Expr):
    """A scalar function call (see ``optimizer.ir.functions`` for the catalogue)."""

    name: str
    args: tuple[Expr, ...]
    dtype: DataType

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, args=children)


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    """``CAST(operand AS dtype)``."""

    operand: Expr
    dtype: DataType

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, operand=children[0])


@dataclass(frozen=True, slots=True)
class Case(Expr):
    """Searched ``CASE WHEN c1 THEN v1 ... ELSE d END`` (``default`` is NULL when absent)."""

    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr
    dtype: DataType

    def children(self) -> tuple[Expr, ...]:
        flat: list[Expr] = []
        for cond, value in self.whens:
            flat += [cond, value]
        return (*flat, self.default)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        pairs = tuple((children[i], children[i + 1]) for i in range(0, len(children) - 1, 2))
        return replace(self, whens=pairs, default=children[-1])


@dataclass(frozen=True, slots=True)
class InList(Expr):
    """``value IN (item, ...)``: true if it equals an item, else NULL if the value or an item
    is NULL, else false (the OR of the equalities, kept flat: a list of 10,000 items is one
    node, not 10,000 levels)."""

    value: Expr
    items: tuple[Expr, ...]
    dtype: DataType = DataType.BOOLEAN

    def children(self) -> tuple[Expr, ...]:
        return (self.value, *self.items)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, value=children[0], items=tuple(children[1:]))


@dataclass(frozen=True, slots=True)
class AggCall(Expr):
    """An aggregate call held by an Aggregate operator. ``arg`` is None for COUNT(*)."""

    func: str
    arg: Expr | None
    distinct: bool
    dtype: DataType

    def children(self) -> tuple[Expr, ...]:
        return () if self.arg is None else (self.arg,)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return replace(self, arg=children[0]) if children else self

    @property
    def incremental(self) -> bool:
        """Whether the aggregate can be maintained under inserts and deletes (Ch. 6)."""
        return self.func in INCREMENTAL_AGGREGATES and not self.distinct

    @property
    def sums_doubles(self) -> bool:
        """Whether the call adds DOUBLE values: SUM of a DOUBLE, AVG of anything but an
        integer. Those are summed exactly and rounded once (docs/semantics.md), which a
        columnar engine's SQL does with hycq's exact-sum function (priced apart)."""
        if self.arg is None or self.func not in ("SUM", "AVG"):
            return False
        if self.func == "AVG":
            return not self.arg.dtype.is_integer
        return self.arg.dtype is DataType.DOUBLE


def transform(expr: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rewrite bottom-up: ``fn`` returns a replacement for a node, or None to keep it."""
    children = expr.children()
    if children:
        new_children = tuple(transform(c, fn) for c in children)
        if new_children != children:
            expr = expr.with_children(new_children)
    replacement = fn(expr)
    return expr if replacement is None else replacement


def columns_used(expr: Expr) -> set[int]:
    """Input column indexes an expression reads."""
    return {e.index for e in expr.walk() if isinstance(e, ColumnRef)}


def column_equality(conjunct: Expr) -> tuple[int, int] | None:
    """The two column indexes of a conjunct ``a = b`` between two columns, else None.

    The one test behind every equi-join key (``optimizer.ir.plan.equi_pair``)."""
    if (
        isinstance(conjunct, Binary)
        and conjunct.op == "="
        and isinstance(conjunct.left, ColumnRef)
        and isinstance(conjunct.right, ColumnRef)
    ):
        return conjunct.left.index, conjunct.right.index
    return None


def shift_columns(expr: Expr, delta: int) -> Expr:
    """Add ``delta`` to every column index (moving an expression across a join side)."""

    def fn(e: Expr) -> Expr | None:
        return replace(e, index=e.index + delta) if isinstance(e, ColumnRef) else None

    return transform(expr, fn)


def remap_columns(expr: Expr, mapping: dict[int, int]) -> Expr:
    """Renumber column indexes through ``mapping`` (every used index must be present)."""

    def fn(e: Expr) -> Expr | None:
        return replace(e, index=mapping[e.index]) if isinstance(e, ColumnRef) else None

    return transform(expr, fn)


def conjuncts(expr: Expr) -> list[Expr]:
    """Split a predicate on top-level ANDs (iteratively: chains may be long)."""
    return _operands(expr, "AND")


def disjuncts(expr: Expr) -> list[Expr]:
    """Split a predicate on top-level ORs."""
    return _operands(expr, "OR")


def _operands(expr: Expr, op: str) -> list[Expr]:
    out: list[Expr] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Binary) and e.op == op:
            stack += [e.right, e.left]
        else:
            out.append(e)
    return out


#: Up to this many operands an AND/OR chain is built left-deep (``a AND b AND c``, as written);
#: longer ones are balanced, so that their depth grows with log2 of their length.
LEFT_DEEP_OPERANDS = 8


def chain(op: str, operands: list[Expr]) -> Expr:
    """``operands`` joined by AND or OR: left-deep when short, balanced when long (every
    consumer of the IR recurses, and a chain of 10,000 terms must not be 10,000 deep)."""
    if len(operands) <= LEFT_DEEP_OPERANDS:
        out = operands[0]
        for p in operands[1:]:
            out = Binary(op, out, p, DataType.BOOLEAN)
        return out
    level = list(operands)
    while len(level) > 1:
        pairs = [
            Binary(op, level[i], level[i + 1], DataType.BOOLEAN)
            for i in range(0, len(level) - 1, 2)
        ]
        level = pairs + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def conjoin(preds: list[Expr]) -> Expr | None:
    """AND a list of predicates together (None for an empty list)."""
    return chain("AND", preds) if preds else None


def _literal_text(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def _display(e: Expr, parent_prec: int) -> str:
    if isinstance(e, Literal):
        return _literal_text(e.value)
    if isinstance(e, ColumnRef):
        return e.name
    if isinstance(e, Binary):
        prec = BINARY_OPS[e.op]
        # Right operands of the same precedence get parentheses (a - (b - c)).
        text = f"{_display(e.left, prec)} {e.op} {_display(e.right, prec + 1)}"
        return f"({text})" if prec < parent_prec else text
    if isinstance(e, Unary):
        if e.op == "NOT":
            return f"NOT {_display(e.operand, 3)}"
        if e.op == "NEG":
            return f"-{_display(e.operand, 7)}"
        return f"{_display(e.operand, 7)} {e.op}"
    if isinstance(e, Func):
        if e.name == "||":  # the operator, written as one
            text = " || ".join(_display(a, 6) for a in e.args)
            return f"({text})" if parent_prec > 5 else text
        return f"{e.name}({', '.join(_display(a, 0) for a in e.args)})"
    if isinstance(e, Cast):
        return f"CAST({_display(e.operand, 0)} AS {e.dtype})"
    if isinstance(e, Case):
        parts = [f"WHEN {_display(c, 0)} THEN {_display(v, 0)}" for c, v in e.whens]
        return f"CASE {' '.join(parts)} ELSE {_display(e.default, 0)} END"
    if isinstance(e, InList):
        text = f"{_display(e.value, 5)} IN ({', '.join(_display(i, 0) for i in e.items)})"
        return f"({text})" if parent_prec > 4 else text
    if isinstance(e, AggCall):
        arg = "*" if e.arg is None else _display(e.arg, 0)
        return f"{e.func}({'DISTINCT ' if e.distinct else ''}{arg})"
    raise TypeError(f"unknown expression {e!r}")

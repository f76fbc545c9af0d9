"""Translate bound IR expressions into sqlglot expression trees for one dialect.

The translation is structural and typed: a :class:`~optimizer.ir.expr.ColumnRef` becomes the
column the caller maps its index to (``s.c3``, ``l.c0``, ``r.c2``), literals are built from
their typed Python values (never from query text), and every operator whose meaning depends
on SQL typing is given explicitly typed operands, so DuckDB and Spark compute the IR's result
type and value:

* ``+ - *`` on integers run in BIGINT (operands cast), so neither engine overflows at INT;
  with a DOUBLE operand both sides are cast to DOUBLE;
* ``/`` casts both operands to DOUBLE (IEEE division, dialect-specific for x / 0);
* ``%`` is integer or floating (fmod) by the IR result type, with the dialect's zero rule;
* NEG and ABS of an integer run in BIGINT (no INT overflow at -2**31);
* COALESCE / LEAST / GREATEST / CASE arguments are cast to the unified result type;
* ROUND's argument is cast to DOUBLE (its IR result type); FLOOR / CEIL of a DOUBLE give a
  DOUBLE, and of an integer the integer itself in the IR's declared result type.

Example:
    >>> from optimizer.ir.expr import Binary, ColumnRef, Literal
    >>> from optimizer.ir.types import DataType
    >>> from sqlglot import exp
    >>> from engines.sqlgen.dialect_table import get_dialect
    >>> t = ExprTranslator(get_dialect("duckdb"), lambda i: exp.column(f"c{i}", table="s"))
    >>> e = Binary(">", ColumnRef(2, "value", DataType.DOUBLE),
    ...            Literal(0.9, DataType.DOUBLE), DataType.BOOLEAN)
    >>> t.scalar(e).sql(dialect="duckdb")
    's.c2 > CAST(0.9 AS DOUBLE)'
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sqlglot import exp

from engines.sqlgen.dialects import (
    Divisor,
    SqlDialect,
    bigint_literal,
    cast,
    double_literal,
    paren,
    sql_type,
)
from optimizer.ir.errors import PlanError, UnsupportedError
from optimizer.ir.expr import (
    AggCall,
    Binary,
    Case,
    Cast,
    ColumnRef,
    Expr,
    Func,
    InList,
    Literal,
    Unary,
)
from optimizer.ir.types import DataType

_COMPARE: dict[str, type[exp.Binary]] = {
    "=": exp.EQ,
    "<>": exp.NEQ,
    "<": exp.LT,
    "<=": exp.LTE,
    ">": exp.GT,
    ">=": exp.GTE,
}
_ARITH: dict[str, type[exp.Binary]] = {"+": exp.Add, "-": exp.Sub, "*": exp.Mul}

#: Column resolver: input column index -> the SQL column expression.
ColumnFn = Callable[[int], exp.Expr]


class ExprTranslator:
    """IR expression -> sqlglot tree, over the input columns given by ``column``."""

    def __init__(self, dialect: SqlDialect, column: ColumnFn) -> None:
        self.dialect = dialect
        self.column = column

    # -- typing helpers ---------------------------------------------------------------------

    def typed(self, e: Expr, dtype: DataType) -> exp.Expr:
        """``e`` translated and cast to ``dtype`` unless it already has that type.

        A bare NULL (IR type NULL) becomes ``CAST(NULL AS dtype)``; a target of type NULL
        (nothing known) leaves the expression as it is.
        """
        out = self.scalar(e)
        if dtype is DataType.NULL or e.dtype == dtype:
            return out
        if isinstance(out, exp.Cast) and out.to == sql_type(dtype):
            return out
        return cast(out, dtype)

    def _orderable(self, e: Expr) -> exp.Expr:
        """``e`` translated for a comparison, ordering or grouping (the dialect's NaN rule)."""
        return self.dialect.orderable(self.scalar(e), e.dtype)

    def _canonical(self, e: Expr) -> exp.Expr:
        """``e`` translated where one of equal values is kept (MIN, MAX, COUNT(DISTINCT),
        IN): the NaN rule, and ``-0.0`` is ``+0.0`` (``SqlDialect.canonical``)."""
        return self.dialect.canonical(self.scalar(e), e.dtype)

    # -- scalar expressions -----------------------------------------------------------------

    def scalar(self, e: Expr) -> exp.Expr:
        """The SQL expression computing ``e`` (an aggregate call is rejected)."""
        if isinstance(e, Literal):
            return self._literal(e)
        if isinstance(e, ColumnRef):
            return self.column(e.index)
        if isinstance(e, Binary):
            return self._binary(e)
        if isinstance(e, Unary):
            return self._unary(e)
        if isinstance(e, Func):
            return self._func(e)
        if isinstance(e, Cast):
            return self._cast(e)
        if isinstance(e, Case):
            return self._case(e)
        if isinstance(e, InList):  # flat: IN of 10,000 items is one node in both engines
            return exp.In(
                this=paren(self._canonical(e.value)),
                expressions=[self._canonical(i) for i in e.items],
            )
        if isinstance(e, AggCall):
            raise PlanError(f"aggregate {e.display()} outside an aggregate operator")
        raise PlanError(f"cannot translate expression {e!r} to SQL")

    def _literal(self, e: Literal) -> exp.Expr:
        v, t = e.value, e.dtype
        if v is None:
            return exp.Null() if t is DataType.NULL else cast(exp.Null(), t)
        if t is DataType.BOOLEAN and isinstance(v, bool):
            return exp.Boolean(this=v)
        if t.is_integer and isinstance(v, int) and not isinstance(v, bool):
            return bigint_literal(v, t)
        if t is DataType.DOUBLE and isinstance(v, int | float) and not isinstance(v, bool):
            return double_literal(float(v))
        if t is DataType.VARCHAR and isinstance(v, str):
            # sqlglot escapes quotes (and, for Spark, backslashes) when rendering.
            return exp.Literal.string(v)
        raise PlanError(f"literal {v!r} does not fit its type {t}")

    def _binary(self, e: Binary) -> exp.Expr:
        op = e.op
        if op in ("AND", "OR"):
            node = exp.And if op == "AND" else exp.Or

            def operand(side: Expr) -> exp.Expr:
                out = self.typed(side, DataType.BOOLEAN)
                # A chain of one connective is written flat (a AND b AND c): both parsers
                # take any length of that (Spark's runs out of memory on 10,000 operands
                # nested in parentheses), and it means the same: AND and OR associate.
                same = isinstance(side, Binary) and side.op == op and isinstance(out, node)
                return out if same else paren(out)

            return node(this=operand(e.left), expression=operand(e.right))
        if _always_null(e.left) or _always_null(e.right):
            # Every other operator is NULL with a NULL operand. DuckDB folds that and the
            # row engine never evaluates the other side; Spark would, and raise where it
            # overflows (-NULL / -CAST(1e300 AS INT)): write the NULL itself.
            return self._literal(Literal(None, e.dtype))
        if op in _COMPARE:
            # Numeric comparisons coerce to the wider type in both engines, as in the IR.
            return _COMPARE[op](
                this=paren(self._orderable(e.left)), expression=paren(self._orderable(e.right))
            )
        if op in _ARITH:
            target = e.dtype if e.dtype is not DataType.NULL else DataType.BIGINT
            return self.dialect.arithmetic(
                _ARITH[op], self.typed(e.left, target), self.typed(e.right, target), target
            )
        if op == "/":
            return self.dialect.divide(
                self.typed(e.left, DataType.DOUBLE),
                self.typed(e.right, DataType.DOUBLE),
                _divisor(e.right),
            )
        if op == "%":
            if e.dtype is DataType.DOUBLE:
                return self.dialect.float_mod(
                    self.typed(e.left, DataType.DOUBLE),
                    self.typed(e.right, DataType.DOUBLE),
                    _divisor(e.right),
                )
            return self.dialect.int_mod(
                self.typed(e.left, DataType.BIGINT), self.typed(e.right, DataType.BIGINT)
            )
        raise PlanError(f"unknown binary operator {op!r}")

    def _unary(self, e: Unary) -> exp.Expr:
        if e.op == "IS NULL":
            return exp.Is(this=paren(self.scalar(e.operand)), expression=exp.Null())
        if e.op == "IS NOT NULL":
            return exp.Not(
                this=exp.Paren(
                    this=exp.Is(this=paren(self.scalar(e.operand)), expression=exp.Null())
                )
            )
        if e.op == "NOT":
            return exp.Not(this=paren(self.typed(e.operand, DataType.BOOLEAN)))
        if e.op == "NEG":
            return exp.Neg(this=paren(self.typed(e.operand, _widened(e.dtype))))
        raise PlanError(f"unknown unary operator {e.op!r}")

    def _func(self, e: Func) -> exp.Expr:
        name, args = e.name, e.args
        if name == "ABS":
            return exp.Abs(this=self.typed(args[0], _widened(e.dtype)))
        if name == "COALESCE":
            typed = [self.typed(a, e.dtype) for a in args]
            return exp.Coalesce(this=typed[0], expressions=typed[1:])
        if name in ("LEAST", "GREATEST"):
            typed = [self.dialect.canonical(self.typed(a, e.dtype), e.dtype) for a in args]
            return self.dialect.least_greatest(name, typed)
        if name in ("FLOOR", "CEIL"):
            if args[0].dtype.is_integer or args[0].dtype is DataType.NULL:
                # An integer is its own floor and ceiling, in the declared result type (the
                # IR types FLOOR(INTEGER) as INTEGER; DuckDB's FLOOR would give a DOUBLE).
                return self.typed(args[0], e.dtype)
            x = self.typed(args[0], DataType.DOUBLE)
            return self.dialect.floor(x) if name == "FLOOR" else self.dialect.ceil(x)
        if name == "ROUND":
            digits = 0
            if len(args) > 1:
                d = args[1]
                if not (isinstance(d, Literal) and isinstance(d.value, int)):
                    raise UnsupportedError(
                        "ROUND's second argument must be an integer literal in SQL generation"
                    )
                if isinstance(d.value, bool):
                    raise UnsupportedError("ROUND's second argument must be an integer")
                digits = d.value
            return self.dialect.round(self.typed(args[0], DataType.DOUBLE), digits)
        return self._string_or_math(e)

    def _string_or_math(self, e: Func) -> exp.Expr:
        """The functions of docs/semantics.md, "Scalar functions": DuckDB's spelling, or the
        dialect's rewrite where the engine's own function differs."""
        name, args = e.name, e.args
        d = self.dialect
        if name in ("SQRT", "EXP", "LN", "LOG10", "LOG2"):
            return d.math(name, self.typed(args[0], DataType.DOUBLE))
        if name == "POWER":
            return d.power(
                self.typed(args[0], DataType.DOUBLE), self.typed(args[1], DataType.DOUBLE)
            )
        if name == "SIGN":
            dtype = DataType.DOUBLE if args[0].dtype is DataType.DOUBLE else DataType.BIGINT
            return cast(d.sign(self.typed(args[0], dtype), dtype), DataType.INTEGER)
        text = [
            self.typed(a, DataType.VARCHAR)
            if i == 0 or a.dtype is DataType.NULL
            else self.scalar(a)
            for i, a in enumerate(args)
        ]
        if name == "LENGTH":
            return cast(exp.Anonymous(this="LENGTH", expressions=[text[0]]), DataType.BIGINT)
        if name in ("LOWER", "UPPER"):
            return d.case_map(name, text[0])
        if name == "SUBSTRING":
            ints = [self.typed(a, DataType.BIGINT) for a in args[1:]]
            return d.substring(text[0], ints[0], ints[1] if len(ints) > 1 else None)
        if name in ("TRIM", "LTRIM", "RTRIM"):
            chars = self.typed(args[1], DataType.VARCHAR) if len(args) > 1 else None
            return d.trim(name, text[0], chars)
        if name in ("REPLACE", "CONTAINS", "STARTS_WITH", "ENDS_WITH"):
            strings = [self.typed(a, DataType.VARCHAR) for a in args]
            return d.string_call(name, strings)
        if name == "CONCAT":
            return d.concat([self.typed(a, DataType.VARCHAR) for a in args])
        if name == "||":
            strings = [self.typed(a, DataType.VARCHAR) for a in args]
            return exp.DPipe(this=paren(strings[0]), expression=paren(strings[1]))
        if name in ("LPAD", "RPAD"):
            count = self.typed(args[1], DataType.INTEGER)
            return d.pad(name, text[0], count, self.typed(args[2], DataType.VARCHAR))
        raise UnsupportedError(f"function {name} has no SQL translation")

    def _cast(self, e: Cast) -> exp.Expr:
        src, dst = e.operand.dtype, e.dtype
        if src == dst:
            return self.scalar(e.operand)
        if dst is DataType.NULL:
            raise PlanError("CAST to the NULL type")
        if src is DataType.NULL:
            return cast(exp.Null(), dst)
        self.dialect.check_cast(src, dst)
        operand = self.scalar(e.operand)
        if src is DataType.DOUBLE and dst.is_integer:
            return self.dialect.double_to_integer(operand, dst)
        return cast(operand, dst)

    def _case(self, e: Case) -> exp.Expr:
        ifs = [
            exp.If(this=self.typed(c, DataType.BOOLEAN), true=self.typed(v, e.dtype))
            for c, v in e.whens
        ]
        default = self.typed(e.default, e.dtype)
        return exp.Case(ifs=ifs, default=default)

    # -- aggregates -------------------------------------------------------------------------

    def aggregate(self, call: AggCall) -> exp.Expr:
        """The SQL aggregate computing ``call`` over the operator's input columns."""
        func = call.func
        if call.distinct and func != "COUNT":
            raise UnsupportedError(
                f"{func}(DISTINCT ...) is not supported", hint="only COUNT(DISTINCT ...) is"
            )
        if call.arg is None:
            if func != "COUNT":
                raise PlanError(f"{func}(*) is not a valid aggregate")
            return exp.Count(this=exp.Star())
        if call.arg.dtype is DataType.NULL:
            # A bare NULL argument: give it the result type (Spark rejects SUM(NULL)).
            arg_type = DataType.BIGINT if func == "COUNT" else call.dtype
            call = AggCall(func, Cast(call.arg, arg_type), call.distinct, call.dtype)
        assert call.arg is not None
        if func == "COUNT":
            arg = self.scalar(call.arg)
            if call.distinct:
                arg = self._canonical(call.arg)
                return exp.Count(this=exp.Distinct(expressions=[arg]))
            return exp.Count(this=arg)
        if func == "SUM":
            if call.arg.dtype is DataType.DOUBLE:
                return self.dialect.exact_sum(self.scalar(call.arg))
            return self.dialect.sum(self.scalar(call.arg), call.arg.dtype)
        if func == "AVG":
            return self._average(call.arg)
        if func == "MIN":
            return exp.Min(this=self._canonical(call.arg))
        if func == "MAX":
            return exp.Max(this=self._canonical(call.arg))
        if func == "MEDIAN":
            x = self.typed(call.arg, DataType.DOUBLE)
            return self.dialect.median(self.dialect.canonical(x, DataType.DOUBLE))
        raise UnsupportedError(f"aggregate function {func} has no SQL translation")

    def _average(self, arg: Expr) -> exp.Expr:
        """AVG: the SUM rounded to a DOUBLE, divided by the count (docs/semantics.md): the
        correctly rounded sum for DOUBLE values, the exact integer total cast for integers.
        An empty group's SUM is NULL, and so is its average."""
        count = cast(exp.Count(this=self.scalar(arg)), DataType.DOUBLE)
        if arg.dtype.is_integer:
            total: exp.Expr = cast(self.dialect.sum(self.scalar(arg), arg.dtype), DataType.DOUBLE)
        else:
            total = self.dialect.exact_sum(self.typed(arg, DataType.DOUBLE))
        return exp.Div(this=paren(total), expression=paren(count))


def _widened(dtype: DataType) -> DataType:
    """The type integer arithmetic runs in: BIGINT for integers, the type itself otherwise."""
    if dtype.is_integer or dtype is DataType.NULL:
        return DataType.BIGINT
    return dtype


def _divisor(e: Expr) -> Divisor:
    """What is statically known about a divisor (after its cast to DOUBLE)."""
    if isinstance(e, Literal):
        v = e.value
        if v is None or isinstance(v, bool) or not isinstance(v, int | float):
            return Divisor.NONZERO  # NULL: the division is NULL in every engine
        if v != 0:
            return Divisor.NONZERO
        if isinstance(v, float) and math.copysign(1.0, v) < 0:
            return Divisor.NEGATIVE_ZERO
        return Divisor.ZERO
    if e.dtype is not DataType.DOUBLE:
        return Divisor.NO_NEGATIVE_ZERO  # an integer cast to DOUBLE is never -0.0
    return Divisor.ANY


def _always_null(e: Expr) -> bool:
    """Whether ``e`` is NULL whatever the row: the NULL literal (of any type), an
    expression of the NULL type, or a strict operator (arithmetic, comparison, negation,
    CAST) over such an operand."""
    if e.dtype is DataType.NULL or (isinstance(e, Literal) and e.value is None):
        return True
    if isinstance(e, Binary) and e.op not in ("AND", "OR"):
        return _always_null(e.left) or _always_null(e.right)
    if isinstance(e, Unary) and e.op in ("NEG", "NOT"):
        return _always_null(e.operand)
    if isinstance(e, Cast):
        return _always_null(e.operand)
    return False

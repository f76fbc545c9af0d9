"""Per-dialect SQL for the scalar and aggregate semantics of docs/semantics.md.

The IR's semantics are DuckDB's, so :class:`DuckDBDialect` mostly emits the plain construct
and :class:`SparkDialect` rewrites what Spark SQL evaluates differently. Every method takes
and returns sqlglot expression trees built from our generated names and typed IR literal
values: no query text is ever formatted into SQL. Arguments are owned by the callee (a tree
used twice is copied).

=================================  =========================  ==================================
IR semantics                       DuckDB                     Spark SQL
=================================  =========================  ==================================
``a / b`` IEEE (x/0 = +-inf, NaN)  ``a / b`` (IEEE already;  ``CASE WHEN b = 0 THEN a * +-inf
                                   ``a * +-inf`` for a        ELSE a / b END`` (Spark: NULL;
                                   constant zero b)           sign of b: ``CAST(b AS STRING)``)
integer ``a % b``, NULL if b = 0   ``a % NULLIF(b, 0)``       same
DOUBLE ``a % b``, NaN if b = 0     ``a % b`` (C fmod)         ``CASE WHEN b = 0 THEN a * NaN
                                                              ELSE a % b END`` (Spark: NULL)
CAST DOUBLE -> int, half to even   ``CAST(x AS INT)``         ``CAST(BROUND(x) AS INT)``
                                                              (Spark's cast truncates)
ROUND(x, n) half away from zero    ``ROUND(x, n)``            scaled ``ROUND(ABS(.))*SIGNUM(x)``
                                                              (Spark rounds the decimal text)
FLOOR / CEIL return DOUBLE         ``FLOOR(x)``, ``CEIL(x)``  via BIGINT below 2**52 only
                                                              (Spark returns BIGINT)
MEDIAN, DuckDB's interpolation     ``MEDIAN(x)``              ``hycq_median(ARRAY_AGG(x))``
DOUBLE / BIGINT literals           ``CAST(0.9 AS DOUBLE)``    same
VARCHAR literals                   ``'it''s'``                ``'it\\'s'`` (backslashes escaped)
=================================  =========================  ==================================

Both dialects: integer arithmetic is computed in BIGINT (operands cast) and ``/`` in DOUBLE;
LEAST / GREATEST ignore NULLs natively in both engines; NaN equals itself and is greater than
every other number in both engines, as DuckDB defines. Spark must run with its default
``spark.sql.parser.escapedStringLiterals=false`` (sqlglot escapes backslashes for it).
"""

from __future__ import annotations

import math
from enum import Enum
from typing import ClassVar

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.generator import Generator

from optimizer.ir.errors import PlanError, UnsupportedError
from optimizer.ir.types import DataType

#: SQL type names of the IR types (sqlglot renders VARCHAR as TEXT / STRING as appropriate).
_TYPE_NAMES = {
    DataType.BOOLEAN: "BOOLEAN",
    DataType.INTEGER: "INT",
    DataType.BIGINT: "BIGINT",
    DataType.DOUBLE: "DOUBLE",
    DataType.VARCHAR: "VARCHAR",
}

#: 2**52: every double at least this large in magnitude is an integer.
_EXACT_INTEGER_DOUBLE = 4503599627370496.0


#: Parsed once: ``exp.DataType.build`` parses its text, and a CASE of 1,000 WHENs casts
#: tens of thousands of values (4 s of generation); a copy of the node costs a tenth.
_SQL_TYPES = {dtype: exp.DataType.build(name) for dtype, name in _TYPE_NAMES.items()}


def sql_type(dtype: DataType) -> exp.DataType:
    """The sqlglot type node of an IR type (NULL has no SQL type and is rejected); a new
    node each time (sqlglot nodes know their parent)."""
    node = _SQL_TYPES.get(dtype)
    if node is None:
        raise PlanError(f"no SQL type for the IR type {dtype}")
    return node.copy()


def cast(e: exp.Expr, dtype: DataType) -> exp.Cast:
    """``CAST(e AS dtype)``."""
    return exp.Cast(this=e, to=sql_type(dtype))


def paren(e: exp.Expr) -> exp.Expr:
    """``e`` in parentheses unless it is atomic (sqlglot does not parenthesise by precedence)."""
    if isinstance(e, exp.Column | exp.Literal | exp.Null | exp.Boolean | exp.Paren):
        return e
    if isinstance(e, exp.Func) and not isinstance(e, exp.Binary | exp.Unary):
        return e  # calls, CAST and CASE render as one closed unit
    return exp.Paren(this=e)


def number(value: int) -> exp.Expr:
    """An integer constant of ours (comparisons with zero, ROUND digits)."""
    return exp.Literal.number(value)


def special_double(text: str) -> exp.Cast:
    """``CAST('NaN' | 'Infinity' | '-Infinity' | '-0.0' AS DOUBLE)``: constants of ours."""
    return cast(exp.Literal.string(text), DataType.DOUBLE)


def double_literal(value: float) -> exp.Expr:
    """A DOUBLE constant: ``CAST(<repr> AS DOUBLE)`` for finite values, else a string cast.

    ``repr`` is the shortest text that round-trips; both engines read it as a DECIMAL (or a
    DOUBLE in exponent form) and the cast yields exactly the same double. NaN, the
    infinities and -0.0 (which a DECIMAL cannot carry) go through ``CAST('...' AS DOUBLE)``.
    """
    if math.isnan(value):
        return special_double("NaN")
    if math.isinf(value):
        return special_double("Infinity" if value > 0 else "-Infinity")
    if value == 0.0 and math.copysign(1.0, value) < 0:
        return special_double("-0.0")
    return cast(exp.Literal.number(repr(value)), DataType.DOUBLE)


def bigint_literal(value: int, dtype: DataType = DataType.BIGINT) -> exp.Cast:
    """An integer constant typed exactly: ``CAST(5 AS BIGINT)``."""
    return cast(exp.Literal.number(value), dtype)


class Divisor(Enum):
    """What is statically known about a divisor (Spark needs it to emulate IEEE x / 0)."""

    NONZERO = "nonzero"  # a non-zero (or NULL) constant
    ZERO = "zero"  # the constant 0 or +0.0
    NEGATIVE_ZERO = "negative zero"  # the constant -0.0
    NO_NEGATIVE_ZERO = "no negative zero"  # an integer value cast to DOUBLE: never -0.0
    ANY = "any"  # any DOUBLE


def _fn(name: str, *args: exp.Expr) -> exp.Anonymous:
    """A call of a built-in function by its (fixed, ours) name, rendered as written."""
    return exp.Anonymous(this=name, expressions=list(args))


#: Veltkamp's splitting constant for doubles, 2**27 + 1 (Dekker's exact product below).
_SPLIT = 134217729.0


def _split(v: float) -> tuple[float, float]:
    """``v`` as ``hi + lo`` with each half of at most 26 significant bits (Veltkamp)."""
    c = _SPLIT * v
    hi = c - (c - v)
    return hi, v - hi


def _rounds_past_tie(x: exp.Expr, p: exp.Expr, scale: float) -> exp.Expr:
    """TRUE where ``p``, the double product ``x * scale``, is exactly a half (an integer
    plus 0.5 below 2**52) although the *exact* product is nearer zero: DuckDB (2.0.1 and
    later) resolves such a tie by the exact product, so ``ROUND(2.675, 2)`` is 2.67 although
    ``2.675 * 100`` is 267.5 in doubles. The exact product's error ``x * scale - p`` is
    Dekker's two-product in plain double arithmetic (exact for the products that can tie:
    ``|p| >= 0.5`` keeps every partial product far from underflow, and ``|p| < 2**52``
    from overflow)."""
    sh, sl = _split(scale)
    c = exp.Mul(this=double_literal(_SPLIT), expression=paren(x.copy()))
    xh = exp.Sub(this=c, expression=paren(exp.Sub(this=c.copy(), expression=paren(x.copy()))))
    xl = exp.Sub(this=paren(x.copy()), expression=paren(xh.copy()))

    def mul(a: exp.Expr, b: float) -> exp.Expr:
        return exp.Mul(this=paren(a.copy()), expression=double_literal(b))

    err: exp.Expr = exp.Sub(this=mul(xh, sh), expression=paren(p.copy()))
    err = exp.Add(this=paren(err), expression=mul(xh, sl))
    err = exp.Add(this=err, expression=mul(xl, sh))
    err = exp.Add(this=paren(err), expression=mul(xl, sl))
    a = exp.Abs(this=paren(p.copy()))
    half = exp.EQ(
        this=exp.Sub(this=a.copy(), expression=exp.Floor(this=a.copy())),
        expression=double_literal(0.5),
    )
    small = exp.LT(this=a, expression=double_literal(_EXACT_INTEGER_DOUBLE))
    nearer_zero = exp.LT(
        this=exp.Mul(this=paren(err), expression=_fn("SIGNUM", paren(p.copy()))),
        expression=double_literal(0.0),
    )
    return exp.And(this=exp.And(this=small, expression=half), expression=nearer_zero)


def _is_zero(e: exp.Expr) -> exp.EQ:
    return exp.EQ(this=paren(e), expression=number(0))


class SqlDialect:
    """The DuckDB rendering of every construct; :class:`SparkDialect` overrides what differs.

    ``name`` is the sqlglot dialect that renders the final statement.
    """

    name = "duckdb"

    # -- arithmetic -------------------------------------------------------------------------

    def divide(self, a: exp.Expr, b: exp.Expr, divisor: Divisor) -> exp.Expr:
        """IEEE division of two DOUBLE operands; ``divisor`` is what is known about ``b``.

        A constant zero divisor becomes ``a * +-inf`` (the same IEEE value). DuckDB needs it:
        its common-subexpression elimination takes ``x / 0.0`` and ``x / -0.0`` in one SELECT
        for the same expression (the constants compare equal), so one of them gets the other's
        sign.
        """
        if divisor in (Divisor.ZERO, Divisor.NEGATIVE_ZERO):
            sign = -1.0 if divisor is Divisor.NEGATIVE_ZERO else 1.0
            return exp.Mul(this=paren(a), expression=double_literal(sign * math.inf))
        return exp.Div(this=paren(a), expression=paren(b))

    def int_mod(self, a: exp.Expr, b: exp.Expr) -> exp.Expr:
        """Integer ``a % b`` (BIGINT operands): NULL for a zero divisor, sign of the dividend.

        ``NULLIF`` makes a zero divisor NULL, so neither engine's division-by-zero behaviour
        (DuckDB raises unless ``error_on_division_by_zero`` is off) is ever reached, and the
        operands are not repeated as in ``CASE WHEN b = 0 THEN NULL ELSE a % b END``.
        """
        return exp.Mod(this=paren(a), expression=exp.Nullif(this=b, expression=number(0)))

    def float_mod(self, a: exp.Expr, b: exp.Expr, divisor: Divisor) -> exp.Expr:
        """DOUBLE ``a % b`` (C fmod): NaN for a zero divisor or an infinite dividend."""
        return exp.Mod(this=paren(a), expression=paren(b))

    def arithmetic(
        self, node: type[exp.Binary], a: exp.Expr, b: exp.Expr, dtype: DataType
    ) -> exp.Expr:
        """``a + b``, ``a - b`` or ``a * b`` (``node``) of operands already cast to ``dtype``;
        integer arithmetic raises on overflow (DuckDB and Spark's ANSI mode do natively)."""
        return node(this=paren(a), expression=paren(b))

    # -- functions --------------------------------------------------------------------------

    def floor(self, x: exp.Expr) -> exp.Expr:
        """FLOOR of a DOUBLE, as a DOUBLE."""
        return exp.Floor(this=x)

    def ceil(self, x: exp.Expr) -> exp.Expr:
        """CEIL of a DOUBLE, as a DOUBLE."""
        return exp.Ceil(this=x)

    def round(self, x: exp.Expr, digits: int) -> exp.Expr:
        """ROUND of a DOUBLE to ``digits`` decimals, half away from zero (DuckDB's ROUND)."""
        if digits == 0:
            return exp.Round(this=x)
        return exp.Round(this=x, decimals=number(digits))

    def least_greatest(self, name: str, args: list[exp.Expr]) -> exp.Expr:
        """LEAST / GREATEST ignoring NULLs (both engines do natively; one argument is itself).

        Emitted as a plain call: sqlglot's own ``exp.Least`` would be rewritten for DuckDB
        into a NULL-propagating CASE.
        """
        if len(args) == 1:
            return args[0]
        return _fn(name, *args)

    def math(self, name: str, x: exp.Expr) -> exp.Expr:
        """SQRT, EXP, LN, LOG10 or LOG2 of a DOUBLE, as C computes it (NaN below the
        domain, -inf for the logarithm of a zero)."""
        return _fn(name, x)

    def power(self, x: exp.Expr, y: exp.Expr) -> exp.Expr:
        """C's pow of two DOUBLEs (pow(1, NaN) = 1, pow(0, -1) = inf, pow(-8, 1/3) = NaN)."""
        return _fn("POWER", x, y)

    def sign(self, x: exp.Expr, dtype: DataType) -> exp.Expr:
        """-1, 0 or 1 (0 for a zero or NaN) of a BIGINT or DOUBLE."""
        return _fn("SIGN", x)

    def case_map(self, name: str, s: exp.Expr) -> exp.Expr:
        """DuckDB's UPPER / LOWER (its simple per-character mapping)."""
        return _fn(name, s)

    def substring(self, s: exp.Expr, start: exp.Expr, length: exp.Expr | None) -> exp.Expr:
        """DuckDB's SUBSTRING of BIGINT positions (engines.row.scalars._substring)."""
        return _fn("SUBSTRING", s, start, *([length] if length is not None else []))

    def trim(self, name: str, s: exp.Expr, chars: exp.Expr | None) -> exp.Expr:
        """TRIM / LTRIM / RTRIM: spaces (``chars`` None) or any of ``chars`` off the ends."""
        return _fn(name, s, *([chars] if chars is not None else []))

    def string_call(self, name: str, args: list[exp.Expr]) -> exp.Expr:
        """REPLACE, CONTAINS, STARTS_WITH or ENDS_WITH of VARCHAR arguments."""
        return _fn(name, *args)

    def concat(self, parts: list[exp.Expr]) -> exp.Expr:
        """DuckDB's CONCAT: NULL parts are skipped, so the result is never NULL."""
        return _fn("CONCAT", *parts)

    def pad(self, name: str, s: exp.Expr, count: exp.Expr, fill: exp.Expr) -> exp.Expr:
        """LPAD / RPAD to ``count`` (INTEGER) characters with a non-empty ``fill``."""
        return _fn(name, s, count, fill)

    # -- casts ------------------------------------------------------------------------------

    def double_to_integer(self, x: exp.Expr, dtype: DataType) -> exp.Expr:
        """CAST of a DOUBLE to an integer type, rounding half to even (DuckDB's cast)."""
        return cast(x, dtype)

    def check_cast(self, src: DataType, dst: DataType) -> None:
        """Raise UnsupportedError for a cast this dialect cannot give DuckDB's result for."""

    def unsupported_casts(self) -> frozenset[tuple[str, str]]:
        """The (source, target) type names :meth:`check_cast` rejects: an engine's
        capabilities declare them, so the optimizer never places such a cast there."""
        out = set()
        types = [t for t in DataType if t is not DataType.NULL]
        for src in types:
            for dst in types:
                try:
                    self.check_cast(src, dst)
                except UnsupportedError:
                    out.add((src.value, dst.value))
        return frozenset(out)

    def unsupported_functions(self) -> frozenset[str]:
        """The scalar functions this dialect cannot give DuckDB's result for (its
        :meth:`case_map` raises): an engine's capabilities leave them out, so the optimizer
        never places them there."""
        out = set()
        for name in ("LOWER", "UPPER"):
            try:
                self.case_map(name, exp.Null())
            except UnsupportedError:
                out.add(name)
        return frozenset(out)

    # -- aggregates -------------------------------------------------------------------------

    def orderable(self, x: exp.Expr, dtype: DataType) -> exp.Expr:
        """``x`` (of IR type ``dtype``) where it is compared, ordered, grouped or counted
        distinct: NaN equals NaN and is larger than every number (DuckDB's rule)."""
        return x

    def canonical(self, x: exp.Expr, dtype: DataType) -> exp.Expr:
        """``x`` where one of several equal values is *chosen* or *kept*: a GROUP BY key,
        a MIN / MAX / MEDIAN / COUNT(DISTINCT) argument, a LEAST / GREATEST argument, an IN
        operand. :meth:`orderable`, and a DOUBLE's ``-0.0`` is ``+0.0`` (``x + 0.0``;
        docs/semantics.md, "Signed zeros"): which of two equal zeros an engine keeps
        depends on their arrival order (DuckDB's MAX over {0.0, -0.0} is the first one).
        Plain comparisons keep :meth:`orderable` (``-0.0 = 0.0`` already)."""
        x = self.orderable(x, dtype)
        if dtype is not DataType.DOUBLE:
            return x
        return exp.Add(this=paren(x), expression=double_literal(0.0))

    def sum(self, x: exp.Expr, dtype: DataType) -> exp.Expr:
        """SUM of ``x`` (of IR type ``dtype``); the caller casts the total to its IR type,
        which must raise when an integer total does not fit (DuckDB sums in HUGEINT)."""
        return exp.Sum(this=x)

    def median(self, x: exp.Expr) -> exp.Expr:
        """MEDIAN of a DOUBLE argument: the middle value, or for an even count DuckDB's
        interpolation of the two middle values, ``fma(lo, 0.5, hi * 0.5)``
        (``engines.kernels.median``): DuckDB's own MEDIAN here."""
        return exp.Median(this=x)

    def exact_sum(self, x: exp.Expr) -> exp.Expr:
        """The correctly rounded SUM of a DOUBLE ``x`` (docs/semantics.md, "Floating-point
        sums"). An engine's own SUM adds in an order of its choosing (threads, chunks), so
        its last bits depend on how the data arrived; here the group's values are collected
        (``ARRAY_AGG``, Spark's ``COLLECT_LIST``) and summed exactly by the vectorized UDF
        every engine registers (``EXACT_SUM_UDF``: ``engines.kernels.exact_sum.list_sums``).
        NULLs are skipped; a group without a value sums to NULL."""
        return _fn(EXACT_SUM_UDF, exp.ArrayAgg(this=x))


#: The UDF behind :meth:`SqlDialect.exact_sum`, registered by every columnar engine.
EXACT_SUM_UDF = "hycq_exact_sum"
#: DuckDB's one-pass exact sum, a macro of its connections (engines/duckdb/exact_sums.py).
SCALED_SUM_MACRO = "hycq_scaled_sum"


def _when(*pairs: tuple[exp.Expr, exp.Expr], default: exp.Expr) -> exp.Case:
    """``CASE WHEN c1 THEN v1 ... ELSE default END``."""
    return exp.Case(ifs=[exp.If(this=c, true=v) for c, v in pairs], default=default)


def _sign_emulated(x: exp.Expr, dtype: DataType) -> exp.Expr:
    """SIGN spelled out: NULL, then 0 for NaN (which Spark and DataFusion order above or
    below every number), then by comparison with 0."""
    pairs: list[tuple[exp.Expr, exp.Expr]] = [
        (exp.Is(this=paren(x.copy()), expression=exp.Null()), cast(exp.Null(), DataType.BIGINT))
    ]
    if dtype is DataType.DOUBLE:
        pairs.append((_fn("ISNAN", x.copy()), number(0)))
    pairs += [
        (exp.GT(this=paren(x.copy()), expression=number(0)), number(1)),
        (exp.LT(this=paren(x.copy()), expression=number(0)), number(-1)),
    ]
    return _when(*pairs, default=number(0))


def _substring_emulated(s: exp.Expr, start: exp.Expr, length: exp.Expr | None) -> exp.Expr:
    """DuckDB's SUBSTRING (engines.row.scalars._substring) through a SUBSTRING whose start
    is at least 1 and whose length is not negative, where every engine agrees: the bounds
    are computed in DECIMAL(38, 0), which holds any BIGINT sum exactly."""

    def dec(e: exp.Expr) -> exp.Expr:
        return exp.Cast(this=e.copy(), to=_DECIMAL.copy())

    n = dec(_fn("LENGTH", s.copy()))
    a = dec(start)
    begin = _when(
        (exp.GT(this=a.copy(), expression=number(0)), exp.Sub(this=a.copy(), expression=number(1))),
        (exp.LT(this=a.copy(), expression=number(0)), exp.Add(this=n.copy(), expression=a.copy())),
        default=dec(number(0)),
    )
    nulls: list[exp.Expr] = [s, start] + ([length] if length is not None else [])
    # DuckDB's two-argument form takes the length 2^32 - 1.
    b = dec(length if length is not None else number(2**32 - 1))
    zero_start = exp.EQ(this=a.copy(), expression=number(0))
    span = _when((zero_start, exp.Sub(this=b.copy(), expression=number(1))), default=b)
    forward = exp.GTE(this=paren(span.copy()), expression=number(0))
    end = exp.Add(this=paren(begin.copy()), expression=paren(span.copy()))
    lo: exp.Expr = _when((forward.copy(), begin.copy()), default=end.copy())
    hi: exp.Expr = _when((forward, end), default=begin)
    lo = _fn("GREATEST", lo, dec(number(0)))
    hi = _fn("LEAST", hi, n)
    piece = _fn(
        "SUBSTRING",
        s.copy(),
        cast(exp.Add(this=paren(lo.copy()), expression=number(1)), DataType.INTEGER),
        cast(exp.Sub(this=paren(hi.copy()), expression=paren(lo.copy())), DataType.INTEGER),
    )
    any_null = exp.or_(*(exp.Is(this=paren(e.copy()), expression=exp.Null()) for e in nulls))
    # DuckDB raises for a position or length outside [-2^32, 2^32 - 1]: so does the CAST of
    # such a value to INTEGER (an out-of-range cast raises in Spark's ANSI mode and in
    # DataFusion), evaluated only there.
    out_of_range = [
        (
            exp.or_(
                exp.LT(this=paren(e.copy()), expression=number(-(2**32))),
                exp.GT(this=paren(e.copy()), expression=number(2**32 - 1)),
            ),
            cast(cast(e.copy(), DataType.INTEGER), DataType.VARCHAR),
        )
        for e in nulls[1:]
    ]
    return _when(
        (any_null, cast(exp.Null(), DataType.VARCHAR)),
        *out_of_range,
        (exp.LT(this=lo, expression=hi), piece),
        default=exp.Literal.string(""),
    )


def _nonnegative(count: exp.Expr) -> exp.Expr:
    """``count``, or 0 where it is negative (NULL stays NULL)."""
    return _when((exp.LT(this=paren(count.copy()), expression=number(0)), number(0)), default=count)


#: DuckDB's MEDIAN of a list of doubles (``engines.kernels.median.list_medians``), for the
#: engines whose MEDIAN rounds the two middle values differently (DataFusion, Spark).
MEDIAN_UDF = "hycq_median"


def _list_median(x: exp.Expr) -> exp.Expr:
    """``hycq_median(ARRAY_AGG(x))``: DuckDB's MEDIAN where the engine's own differs."""
    return _fn(MEDIAN_UDF, exp.ArrayAgg(this=x))


class DuckDBDialect(SqlDialect):
    """DuckDB: the reference semantics, so constructs are emitted as they are, but for the
    exact SUM of DOUBLE: a macro summing the values scaled to 128-bit integers, at a scale
    the engine searches (engines/duckdb/exact_sums.py), 2-3x faster than ARRAY_AGG."""

    name = "duckdb"

    def exact_sum(self, x: exp.Expr) -> exp.Expr:
        return _fn(SCALED_SUM_MACRO, x)


class SparkDialect(SqlDialect):
    """Spark SQL 4 (ANSI mode off, though no rewrite here depends on it).

    ``MEDIAN`` is Spark's exact ``percentile(x, 0.5)``, which interpolates between the two
    middle values as ``0.5 * lo + 0.5 * hi`` unfused: for a subnormal ``lo`` that differs
    from DuckDB's fused ``fma(lo, 0.5, hi * 0.5)``, so MEDIAN runs the ``hycq_median`` UDF.
    """

    name = "spark"

    def median(self, x: exp.Expr) -> exp.Expr:
        return _list_median(x)

    def divide(self, a: exp.Expr, b: exp.Expr, divisor: Divisor) -> exp.Expr:
        # Spark yields NULL for x / 0. IEEE gives a * (+-inf): +-inf for a non-zero a, NaN for
        # a zero or NaN a, and a NULL a stays NULL. The sign of a zero divisor needs a run-time
        # test only for DOUBLE expressions: CAST(-0.0 AS STRING) is '-0.0'.
        if divisor in (Divisor.NONZERO, Divisor.ZERO, Divisor.NEGATIVE_ZERO):
            return super().divide(a, b, divisor)
        inf: exp.Expr = double_literal(math.inf)
        if divisor is Divisor.ANY:
            negative = exp.Like(
                this=cast(b.copy(), DataType.VARCHAR), expression=exp.Literal.string("-%")
            )
            inf = exp.Case(ifs=[exp.If(this=negative, true=double_literal(-math.inf))], default=inf)
        return exp.Case(
            ifs=[
                exp.If(
                    this=_is_zero(b.copy()),
                    true=exp.Mul(this=paren(a.copy()), expression=paren(inf)),
                )
            ],
            default=exp.Div(this=paren(a), expression=paren(b)),
        )

    def float_mod(self, a: exp.Expr, b: exp.Expr, divisor: Divisor) -> exp.Expr:
        # Spark yields NULL for x % 0.0; fmod gives NaN (a * NaN keeps a NULL dividend NULL).
        if divisor in (Divisor.ZERO, Divisor.NEGATIVE_ZERO):
            return exp.Mul(this=paren(a), expression=double_literal(math.nan))
        if divisor is Divisor.NONZERO:
            return exp.Mod(this=paren(a), expression=paren(b))
        return exp.Case(
            ifs=[
                exp.If(
                    this=_is_zero(b.copy()),
                    true=exp.Mul(this=paren(a.copy()), expression=double_literal(math.nan)),
                )
            ],
            default=exp.Mod(this=paren(a), expression=paren(b)),
        )

    @staticmethod
    def _integral(x: exp.Expr, value: exp.Expr) -> exp.Expr:
        """``value`` (computed through BIGINT) where that is exact, else ``x`` itself.

        Every double of magnitude >= 2**52 is an integer and NaN / +-inf are their own floor
        and ceiling (NaN is larger than any number in Spark, so ``ABS(NaN) < 2**52`` is
        false); a zero is its own floor and ceiling and keeps its sign, as in C.
        """
        exact = exp.And(
            this=exp.LT(
                this=exp.Abs(this=x.copy()), expression=double_literal(_EXACT_INTEGER_DOUBLE)
            ),
            expression=exp.NEQ(this=paren(x.copy()), expression=number(0)),
        )
        return exp.Case(ifs=[exp.If(this=exact, true=value)], default=x)

    def floor(self, x: exp.Expr) -> exp.Expr:
        # Spark's FLOOR returns BIGINT (saturating at 2**63, NaN -> 0).
        return self._integral(x, cast(exp.Floor(this=x.copy()), DataType.DOUBLE))

    def ceil(self, x: exp.Expr) -> exp.Expr:
        # CEIL(x) = -FLOOR(-x), so that CEIL of (-1, 0) is -0.0 as in C (CAST(0 AS DOUBLE)
        # would be +0.0).
        floor_neg = cast(exp.Floor(this=exp.Neg(this=paren(x.copy()))), DataType.DOUBLE)
        return self._integral(x, exp.Neg(this=floor_neg))

    def round(self, x: exp.Expr, digits: int) -> exp.Expr:
        # DuckDB computes r = round(x * 10^n) / 10^n (n >= 0) or round(x / 10^-n) * 10^-n
        # (n < 0) with C's round (half away from zero; a product that is a tie only in
        # doubles rounds by the exact product, _rounds_past_tie), and returns x when r is
        # not finite.
        # Spark's ROUND(x, n) rounds the *decimal text* of x (ROUND(1.005, 2) is 1.01, DuckDB
        # says 1.0), so only rounding to an integer is left to Spark: rounding the shortest
        # decimal text of y half up is exactly C's round of y. ROUND(ABS(y)) * SIGNUM(x)
        # keeps the sign of a zero result (Spark's ROUND(-0.4) is 0.0, C's round is -0.0).
        sign = _fn("SIGNUM", x.copy())
        if digits == 0:
            return exp.Mul(this=exp.Round(this=exp.Abs(this=x)), expression=sign)
        scale = 10.0 ** abs(digits)
        scaled: exp.Expr
        if digits > 0:
            scaled = exp.Mul(this=paren(x.copy()), expression=double_literal(scale))
            away = exp.Round(this=exp.Abs(this=scaled.copy()))
            # a double tie whose exact product is below it rounds towards zero (DuckDB)
            toward = exp.Sub(this=away.copy(), expression=double_literal(1.0))
            past = _rounds_past_tie(x, scaled, scale)
            magnitude = exp.Case(ifs=[exp.If(this=past, true=toward)], default=away)
            rounded = exp.Mul(this=magnitude, expression=sign)
            value: exp.Expr = exp.Div(this=paren(rounded), expression=double_literal(scale))
            # For a finite x the result is not finite exactly when x * 10^n overflows; a NaN
            # or infinite x gives itself either way.
            overflow = exp.EQ(this=exp.Abs(this=scaled), expression=double_literal(math.inf))
        else:
            scaled = exp.Div(this=paren(x.copy()), expression=double_literal(scale))
            rounded = exp.Mul(this=exp.Round(this=exp.Abs(this=scaled)), expression=sign)
            value = exp.Mul(this=paren(rounded), expression=double_literal(scale))
            overflow = exp.EQ(this=exp.Abs(this=value.copy()), expression=double_literal(math.inf))
        return exp.Case(ifs=[exp.If(this=overflow, true=x)], default=value)

    def math(self, name: str, x: exp.Expr) -> exp.Expr:
        # Spark's logarithms are NULL at and below zero (C: -inf at zero, NaN below).
        if name not in ("LN", "LOG10", "LOG2"):
            return super().math(name, x)
        return _when(
            (exp.EQ(this=paren(x.copy()), expression=number(0)), double_literal(-math.inf)),
            (exp.LT(this=paren(x.copy()), expression=number(0)), double_literal(math.nan)),
            default=_fn(name, x),
        )

    def power(self, x: exp.Expr, y: exp.Expr) -> exp.Expr:
        # Java's pow gives NaN for 1 to the power NaN or +-inf and for -1 to +-inf; C gives 1.
        one = double_literal(1.0)
        return _when(
            (
                exp.and_(
                    exp.EQ(this=paren(x.copy()), expression=one.copy()),
                    exp.Not(this=exp.Is(this=paren(y.copy()), expression=exp.Null())),
                ),
                one.copy(),
            ),
            (
                exp.and_(
                    exp.EQ(this=paren(x.copy()), expression=double_literal(-1.0)),
                    exp.EQ(this=exp.Abs(this=y.copy()), expression=double_literal(math.inf)),
                ),
                one.copy(),
            ),
            default=_fn("POWER", x, y),
        )

    def sign(self, x: exp.Expr, dtype: DataType) -> exp.Expr:
        # Spark's SIGN is a DOUBLE, NaN for NaN.
        return _sign_emulated(x, dtype)

    def case_map(self, name: str, s: exp.Expr) -> exp.Expr:
        raise UnsupportedError(
            f"{name} is not supported on Spark",
            hint="Spark maps the case of some characters differently from DuckDB (full "
            "mappings: 'ß' to 'SS'; a newer Unicode); run this operator on DuckDB",
        )

    def substring(self, s: exp.Expr, start: exp.Expr, length: exp.Expr | None) -> exp.Expr:
        # Spark reads a start of 0 as 1 and a negative length as 0.
        return _substring_emulated(s, start, length)

    def trim(self, name: str, s: exp.Expr, chars: exp.Expr | None) -> exp.Expr:
        if chars is None:
            return super().trim(name, s, chars)
        # Spark's two-argument LTRIM / RTRIM take the characters first: the standard form.
        position = {"TRIM": "BOTH", "LTRIM": "LEADING", "RTRIM": "TRAILING"}[name]
        return exp.Trim(this=s, expression=chars, position=position)

    def string_call(self, name: str, args: list[exp.Expr]) -> exp.Expr:
        spelled = {"STARTS_WITH": "STARTSWITH", "ENDS_WITH": "ENDSWITH"}.get(name, name)
        return _fn(spelled, *args)

    def concat(self, parts: list[exp.Expr]) -> exp.Expr:
        # Spark's CONCAT is NULL when a part is.
        return _fn(
            "CONCAT", *(exp.Coalesce(this=p, expressions=[exp.Literal.string("")]) for p in parts)
        )

    def double_to_integer(self, x: exp.Expr, dtype: DataType) -> exp.Expr:
        # Spark's cast truncates; BROUND rounds half to even first, as DuckDB's cast does.
        return cast(_fn("BROUND", x), dtype)

    def check_cast(self, src: DataType, dst: DataType) -> None:
        if src is DataType.VARCHAR and dst is not DataType.VARCHAR:
            raise UnsupportedError(
                f"CAST from VARCHAR to {dst} is not supported on Spark",
                hint="Spark parses numbers and booleans from text differently from DuckDB "
                "(invalid text is NULL, not an error); run this operator on DuckDB",
            )
        if src is DataType.DOUBLE and dst is DataType.VARCHAR:
            raise UnsupportedError(
                "CAST from DOUBLE to VARCHAR is not supported on Spark",
                hint="Spark formats doubles differently from DuckDB (1.0E20 vs 1e+20); "
                "run this operator on DuckDB",
            )


class _DataFusionGenerator(Generator):
    """sqlglot's generic (ANSI) generator, spelling VARCHAR as ``VARCHAR`` (not ``TEXT``)."""

    TYPE_MAPPING: ClassVar[dict[exp.DType, str]] = {
        **Generator.TYPE_MAPPING,
        exp.DType.TEXT: "VARCHAR",
    }


class DataFusion(Dialect):
    """The sqlglot dialect ``datafusion`` (sqlglot has none): sqlglot's generic dialect,
    which renders standard SQL without any engine's rewrites, as DataFusion's own parser
    reads by default (sqlparser's generic dialect): ``'it''s'`` with backslashes as they
    are, ``DOUBLE``, ``MEDIAN(x)``, ``ROUND(x, n)``. (PostgreSQL's generator, the nearest
    named one, rewrites ``ROUND(double, n)`` into a DECIMAL ROUND, which PostgreSQL needs and
    which changes the result: it is not used.)"""

    Generator = _DataFusionGenerator


#: Magnitude up to which ``CAST(x AS DECIMAL(38, 0))`` holds any product of two BIGINTs.
_DECIMAL = exp.DataType.build("DECIMAL(38, 0)")


class DataFusionDialect(SqlDialect):
    """Apache DataFusion (the ``datafusion`` Python package, 55.x).

    What DataFusion evaluates as DuckDB does, and is emitted as it is: IEEE division and
    fmod (``x / 0.0`` is +-inf, ``x % 0.0`` NaN), FLOOR / CEIL on DOUBLE, LEAST / GREATEST
    ignoring NULLs, -0.0 equal to 0.0 in comparisons and GROUP BY, NEG / ABS overflow
    errors, ``CAST`` errors for out-of-range values and NaN. What differs is rewritten here:

    * MEDIAN of an even count: DataFusion's is ``(lo + hi) / 2`` (infinite for two large
      values), so MEDIAN runs the ``hycq_median`` UDF (DuckDB's bits, :meth:`median`);
    * ``-0.0`` and ``0.0`` are distinct values in MIN / MAX, COUNT(DISTINCT), LEAST /
      GREATEST (totalOrder) and in long IN lists (hashed by their bits):
      :meth:`SqlDialect.canonical` makes every zero ``+0.0`` there, as on every engine;

    * NaN: DataFusion compares doubles by IEEE totalOrder, so a NaN with the sign bit set
      (x86 computes one for ``0 * inf``) sorts below every number and is distinct from a
      positive NaN; every DOUBLE that is compared, ordered (LEAST, GREATEST, MIN, MAX,
      MEDIAN), grouped on or counted distinct goes through ``NANVL(x, 'NaN')`` (:meth:`orderable`),
      after which NaN equals NaN and is larger than every number, as in DuckDB;

    * integer ``+ - *`` wrap around silently in DataFusion (even with its ANSI mode): they
      are computed in ``DECIMAL(38, 0)``, which holds any sum or product of two BIGINTs
      exactly, and cast back to the integer type, which raises on overflow as DuckDB does;
    * ``SUM`` of integers wraps too: it sums ``DECIMAL(38, 0)`` values (DuckDB sums in
      HUGEINT), and the generated cast to BIGINT raises when the total does not fit;
    * ``CAST(DOUBLE AS integer)`` truncates: it is rounded half to even first, as DuckDB's
      cast does;
    * ROUND(x, n) is spelled out as DuckDB computes it (scale, round, unscale; x itself when
      that overflows): DataFusion scales differently in the last digit.

    Declared unsupported (``engines/datafusion``: the optimizer never places such an
    operator on DataFusion, and generating it raises UnsupportedError): CAST from VARCHAR to
    any other type (DataFusion trims and parses text differently) and from DOUBLE to VARCHAR
    (DataFusion writes ``1e20`` and ``NaN`` where DuckDB writes ``1e+20`` and ``nan``).
    """

    name = "datafusion"

    def orderable(self, x: exp.Expr, dtype: DataType) -> exp.Expr:
        # DataFusion orders doubles by IEEE totalOrder, where a NaN with its sign bit set (what
        # x86 computes for 0 * inf, inf - inf, 0 / 0) is *smaller* than every number and
        # differs from a positive NaN: NANVL makes every NaN the positive one.
        if dtype is not DataType.DOUBLE:
            return x
        return _fn("NANVL", x, special_double("NaN"))

    def arithmetic(
        self, node: type[exp.Binary], a: exp.Expr, b: exp.Expr, dtype: DataType
    ) -> exp.Expr:
        if not dtype.is_integer:
            return super().arithmetic(node, a, b, dtype)
        wide = node(
            this=paren(exp.Cast(this=a, to=_DECIMAL.copy())),
            expression=paren(exp.Cast(this=b, to=_DECIMAL.copy())),
        )
        return cast(wide, dtype)

    def sum(self, x: exp.Expr, dtype: DataType) -> exp.Expr:
        if dtype.is_integer:
            return exp.Sum(this=exp.Cast(this=x, to=_DECIMAL.copy()))
        return super().sum(x, dtype)

    def median(self, x: exp.Expr) -> exp.Expr:
        # DataFusion's MEDIAN of an even count is (lo + hi) / 2: infinite for two values
        # near the largest double, and rounded differently from DuckDB's in the last bit.
        return _list_median(x)

    def double_to_integer(self, x: exp.Expr, dtype: DataType) -> exp.Expr:
        # Half to even: a tie (fraction exactly .5) rounds to the even neighbour 2*ROUND(x/2);
        # anything else rounds to the nearest (ROUND, half away from zero, is exact there).
        tie = exp.EQ(
            this=exp.Abs(this=exp.Sub(this=paren(x.copy()), expression=_fn("TRUNC", x.copy()))),
            expression=double_literal(0.5),
        )
        even = exp.Mul(
            this=double_literal(2.0),
            expression=exp.Round(
                this=exp.Div(this=paren(x.copy()), expression=double_literal(2.0))
            ),
        )
        rounded = exp.Case(ifs=[exp.If(this=tie, true=even)], default=exp.Round(this=x))
        return cast(rounded, dtype)

    def round(self, x: exp.Expr, digits: int) -> exp.Expr:
        # DuckDB: r = round(x * 10^n) / 10^n (n > 0; a product that is a tie only in doubles
        # rounds by the exact product, _rounds_past_tie) or round(x / 10^-n) * 10^-n (n < 0),
        # and x itself when r is not finite; DataFusion's ROUND(x, n) scales differently
        # (ROUND(1.7976931348623157e308, -2) loses the last digit), so it is spelled out.
        if digits == 0:
            return exp.Round(this=x)
        scale = double_literal(10.0 ** abs(digits))
        value: exp.Expr
        scaled: exp.Expr
        if digits > 0:
            scaled = exp.Mul(this=paren(x.copy()), expression=scale.copy())
            # a double tie whose exact product is below it rounds towards zero (DuckDB):
            # (|ROUND(p)| - 1) * SIGNUM(p) keeps the sign of a zero result
            toward = exp.Mul(
                this=paren(
                    exp.Sub(
                        this=exp.Abs(this=exp.Round(this=scaled.copy())),
                        expression=double_literal(1.0),
                    )
                ),
                expression=_fn("SIGNUM", paren(scaled.copy())),
            )
            past = _rounds_past_tie(x, scaled, 10.0 ** abs(digits))
            rounded = exp.Case(ifs=[exp.If(this=past, true=toward)], default=exp.Round(this=scaled))
            value = exp.Div(this=rounded, expression=scale)
        else:
            scaled = exp.Div(this=paren(x.copy()), expression=scale.copy())
            value = exp.Mul(this=exp.Round(this=scaled), expression=scale)
        overflow = exp.EQ(this=exp.Abs(this=value.copy()), expression=double_literal(math.inf))
        return exp.Case(ifs=[exp.If(this=overflow, true=x)], default=value)

    def math(self, name: str, x: exp.Expr) -> exp.Expr:
        # DataFusion's SQRT raises below zero (C: NaN).
        if name != "SQRT":
            return super().math(name, x)
        below = exp.LT(this=paren(x.copy()), expression=number(0))
        return _when((below, double_literal(math.nan)), default=_fn("SQRT", x))

    def power(self, x: exp.Expr, y: exp.Expr) -> exp.Expr:
        # DataFusion raises for zero to a negative power; C gives +-inf (-inf for -0.0 to a
        # negative odd integer: 1 / -0.0 is -inf).
        odd_negative_zero = exp.and_(
            exp.EQ(
                this=exp.Mod(this=paren(y.copy()), expression=double_literal(2.0)),
                expression=double_literal(-1.0),
            ),
            exp.LT(
                this=exp.Div(this=double_literal(1.0), expression=paren(x.copy())),
                expression=number(0),
            ),
        )
        infinity = _when(
            (odd_negative_zero, double_literal(-math.inf)), default=double_literal(math.inf)
        )
        zero_negative = exp.and_(
            exp.EQ(this=paren(x.copy()), expression=number(0)),
            # NANVL: a NaN with its sign bit set is below 0 in DataFusion's order
            exp.LT(this=self.orderable(y.copy(), DataType.DOUBLE), expression=number(0)),
        )
        return _when((zero_negative, infinity), default=_fn("POWER", x, y))

    def sign(self, x: exp.Expr, dtype: DataType) -> exp.Expr:
        # DataFusion has SIGNUM (a DOUBLE, NaN for NaN), no SIGN.
        return _sign_emulated(x, dtype)

    def case_map(self, name: str, s: exp.Expr) -> exp.Expr:
        raise UnsupportedError(
            f"{name} is not supported on DataFusion",
            hint="DataFusion maps the case of some characters differently from DuckDB (full "
            "mappings: 'ß' to 'SS'; a newer Unicode); run this operator on DuckDB",
        )

    def substring(self, s: exp.Expr, start: exp.Expr, length: exp.Expr | None) -> exp.Expr:
        # DataFusion counts a negative start as before the string and raises for a negative
        # length.
        return _substring_emulated(s, start, length)

    def trim(self, name: str, s: exp.Expr, chars: exp.Expr | None) -> exp.Expr:
        if chars is None:
            return super().trim(name, s, chars)
        return _fn({"TRIM": "BTRIM"}.get(name, name), s, chars)

    def concat(self, parts: list[exp.Expr]) -> exp.Expr:
        # DataFusion's simplifier drops empty-string arguments of CONCAT and then refuses a
        # CONCAT of none: COALESCE(a, '') || COALESCE(b, '') || ... means the same.
        out: exp.Expr = exp.Coalesce(this=parts[0], expressions=[exp.Literal.string("")])
        for p in parts[1:]:
            out = exp.DPipe(
                this=out, expression=exp.Coalesce(this=p, expressions=[exp.Literal.string("")])
            )
        return out

    def pad(self, name: str, s: exp.Expr, count: exp.Expr, fill: exp.Expr) -> exp.Expr:
        # DataFusion panics on a negative count (DuckDB: '').
        return _fn(name, s, _nonnegative(count), fill)

    def check_cast(self, src: DataType, dst: DataType) -> None:
        reason = DATAFUSION_UNSUPPORTED_CASTS.get((src, dst))
        if reason is not None:
            raise UnsupportedError(
                f"CAST from {src} to {dst} is not supported on DataFusion",
                hint=f"{reason}; run this operator on DuckDB",
            )


#: Casts DataFusion cannot give DuckDB's result for, and why.
DATAFUSION_UNSUPPORTED_CASTS: dict[tuple[DataType, DataType], str] = {
    **{
        (DataType.VARCHAR, t): "DataFusion parses numbers and booleans from text differently "
        "from DuckDB"
        for t in (DataType.BOOLEAN, DataType.INTEGER, DataType.BIGINT, DataType.DOUBLE)
    },
    (DataType.DOUBLE, DataType.VARCHAR): "DataFusion formats doubles differently from DuckDB "
    "(1e20 vs 1e+20, NaN vs nan)",
}


DIALECTS: dict[str, SqlDialect] = {
    "duckdb": DuckDBDialect(),
    "spark": SparkDialect(),
    "datafusion": DataFusionDialect(),
}


def get_dialect(name: str) -> SqlDialect:
    """The dialect called ``name`` (``duckdb`` or ``spark``, case-insensitive)."""
    dialect = DIALECTS.get(name.lower()) if isinstance(name, str) else None
    if dialect is None:
        raise PlanError(
            f"unknown SQL dialect {name!r}", hint=f"use one of: {', '.join(sorted(DIALECTS))}"
        )
    return dialect

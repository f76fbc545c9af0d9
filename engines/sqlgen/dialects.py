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
VARCHAR literals                   ``'it''s'``                ``'it\'s'`` (backslashes escaped)
=================================  =========================  ==================================

Both dialects: integer arithmetic is computed in BIGINT (operands cast) and ``/`` in DOUBLE;
LEAST / GREATEST ignore NULLs natively in both engines; NaN equals itself and is greater than
every other number in both engines, as DuckDB defines. Spark must run with its default
``spark.sql.parser.escapedStringLiterals=false`` (sqlglot escapes backslashes for it).

This module holds the interface (:class:`SqlDialect`, whose methods emit DuckDB's construct),
the SQL builders and emulations the dialects share, and :class:`DuckDBDialect`. Spark's
rewrites are ``engines.sqlgen.spark_dialect``, DataFusion's (with a sqlglot dialect for it)
``engines.sqlgen.datafusion_dialect``; ``engines.sqlgen.dialect_table`` looks them up by name.
"""

from __future__ import annotations

import math
from enum import Enum

from sqlglot import exp

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


#: Magnitude up to which ``CAST(x AS DECIMAL(38, 0))`` holds any product of two BIGINTs.
_DECIMAL = exp.DataType.build("DECIMAL(38, 0)")

"""Spark SQL's dialect: what Spark evaluates differently from DuckDB, rewritten.

:class:`SparkDialect` overrides the methods of :class:`engines.sqlgen.dialects.SqlDialect`
whose plain construct Spark SQL evaluates differently (division by zero, DOUBLE modulo, casts
to integers, ROUND, FLOOR / CEIL, MEDIAN, string literals, ...): the table in
``engines.sqlgen.dialects`` lists each rewrite. The emulations it shares with DataFusion
(SIGN, SUBSTRING, the MEDIAN UDF) are in ``engines.sqlgen.dialects``.
"""

from __future__ import annotations

import math

from sqlglot import exp

from engines.sqlgen.dialects import (
    _EXACT_INTEGER_DOUBLE,
    Divisor,
    SqlDialect,
    _fn,
    _is_zero,
    _list_median,
    _rounds_past_tie,
    _sign_emulated,
    _substring_emulated,
    _when,
    cast,
    double_literal,
    number,
    paren,
)
from optimizer.ir.errors import UnsupportedError
from optimizer.ir.types import DataType


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

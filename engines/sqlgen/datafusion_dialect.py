"""Apache DataFusion's dialect: a sqlglot dialect for it and the rewrites DuckDB's semantics need.

sqlglot has no DataFusion dialect: :class:`DataFusion` is sqlglot's generic one with
``VARCHAR`` spelled as such. :class:`DataFusionDialect` overrides the methods of
:class:`engines.sqlgen.dialects.SqlDialect` where DataFusion's result differs from DuckDB's
(MEDIAN, signed zeros, NaN ordering, integer overflow, SUBSTRING, ...; its docstring lists
them) and raises UnsupportedError for the casts it cannot reproduce
(:data:`DATAFUSION_UNSUPPORTED_CASTS`). docs/engines.md describes the engine.
"""

from __future__ import annotations

import math
from typing import ClassVar

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.generator import Generator

from engines.sqlgen.dialects import (
    _DECIMAL,
    SqlDialect,
    _fn,
    _list_median,
    _nonnegative,
    _rounds_past_tie,
    _sign_emulated,
    _substring_emulated,
    _when,
    cast,
    double_literal,
    number,
    paren,
    special_double,
)
from optimizer.ir.errors import UnsupportedError
from optimizer.ir.types import DataType


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

"""DuckDB's scalar semantics in Python: the helpers that the row engine's generated code calls.

``engines.row.compile`` translates an expression into Python source once; wherever an
operator or a function is not plain Python, the source calls one of these helpers, put into
the compiled function's namespace by :data:`RUNTIME` (the generated code names them, e.g.
``_div`` or ``_round``). Their semantics are DuckDB's (docs/semantics.md): ``/`` is IEEE
division, integer ``%`` by zero is NULL, ROUND rounds half away from zero, CAST of a DOUBLE
to an integer half to even, integer results out of BIGINT's range are a DataError, AND, OR,
NOT and IN are three-valued, LEAST and GREATEST skip NULLs and order NaN above every number.

:data:`NAN` is the row engine's one NaN object: every NaN a row holds is this one, so that
dict keys, bags and tuple comparisons (which test identity first) treat NaN rows as equal
(``_canon`` maps a computed NaN to it; ``engines.row.compile`` says where it is applied).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from engines.row.casemap import lower, upper
from optimizer.ir.errors import DataError

# -- runtime helpers referenced by generated code --------------------------------------------

#: The row engine's one NaN object (the module docstring; ``engines.row.compile`` applies it).
NAN = math.nan


def _canon(x: Any) -> Any:
    """``x``, or :data:`NAN` if ``x`` is a NaN."""
    return NAN if x != x else x


def _nan_key(x: Any) -> tuple[bool, Any]:
    """Sort/compare key ordering NaN above every number, as DuckDB does."""
    return (x != x, x)


def _ord(x: Any) -> tuple[bool, Any]:
    """Comparison key of a value that may be NaN: every NaN equal to every other NaN and
    larger than every number (DuckDB's comparisons: ``NaN = NaN`` and ``NaN > inf``)."""
    return (True, 0.0) if x != x else (False, x)


def _div(a: float, b: float) -> float:
    if b:
        return a / b
    if a != a or a == 0:  # NaN or 0 / 0
        return NAN
    return math.copysign(math.inf, a) * (math.copysign(1.0, b) if isinstance(b, float) else 1.0)


def _imod(a: int, b: int) -> int | None:
    if b == 0:
        return None
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _fmod(a: float, b: float) -> float:
    if b == 0 or math.isinf(a) or a != a or b != b:
        return NAN
    return math.fmod(a, b)


def _and3(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or3(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _not3(a: bool | None) -> bool | None:
    return None if a is None else not a


def _least(*args: Any) -> Any:
    """SQL LEAST: NULLs ignored, NaN greater than every number (as DuckDB and Spark order
    it; Python's ``min`` returns NaN when it comes first)."""
    vals = [a for a in args if a is not None]
    nums = [a for a in vals if a == a]
    if nums:
        return min(nums)
    return vals[0] if vals else None


def _greatest(*args: Any) -> Any:
    """SQL GREATEST: NULLs ignored, NaN greater than every number."""
    vals = [a for a in args if a is not None]
    for a in vals:
        if a != a:
            return a
    return max(vals) if vals else None


def _round_half_away(x: float) -> float:
    """C's round(): to the nearest integer, halves away from zero, computed exactly."""
    if math.isinf(x) or x != x:
        return x
    a = abs(x)
    f = math.floor(a)
    r = f + 1 if a - f >= 0.5 else f  # a - f is exact for every double
    return math.copysign(float(r), x)


def _round(x: Any, n: int = 0) -> Any:
    """DuckDB's ROUND of a DOUBLE: scale, round half away from zero (a scaled value that is
    a half only in doubles by its exact value), unscale; on overflow the input itself."""
    if x is None:
        return None
    x = float(x)
    if n == 0:
        return _round_half_away(x)
    if n > 0:
        p = 10.0**n
        y = x * p
        r = _round_half_away(y)
        a = abs(y)
        if a < 2**52 and a - math.floor(a) == 0.5 and abs(Fraction(x) * Fraction(p)) < a:
            # a tie only in doubles: the exact product is below it (DuckDB 2.0.1 resolves
            # such ties by the exact product: ROUND(2.675, 2) is 2.67)
            r = math.copysign(math.floor(a), y)
        out = r / p
    else:
        p = 10.0 ** (-n)
        out = _round_half_away(x / p) * p
    return x if (math.isinf(out) or out != out) else out


def _floor(x: float) -> float:
    if math.isinf(x) or x != x:
        return x
    r = math.floor(x)
    return math.copysign(0.0, x) if r == 0 else float(r)  # floor(-0.0) is -0.0, as in C


def _ceil(x: float) -> float:
    if math.isinf(x) or x != x:
        return x
    r = math.ceil(x)
    return math.copysign(0.0, x) if r == 0 else float(r)  # ceil(-0.5) is -0.0, as in C


_BIGINT = (-(2**63), 2**63 - 1)
_INTEGER = (-(2**31), 2**31 - 1)


def integer_overflow(value: Any, sql_type: str, what: str) -> DataError:
    """The error of an integer value outside its type (DuckDB raises too: docs/semantics.md)."""
    return DataError(
        f"integer overflow: {what} gives {value}, outside the {sql_type} range",
        hint="integer results must fit their type, as in DuckDB (docs/semantics.md); "
        "CAST the values to DOUBLE to compute with larger magnitudes",
    )


def checked_bigint(x: int) -> int:
    """A BIGINT result of integer arithmetic, checked (hycq integers do not wrap)."""
    if _BIGINT[0] <= x <= _BIGINT[1]:
        return x
    raise integer_overflow(x, "BIGINT", "integer arithmetic")


def _to_int(x: Any, bounds: tuple[int, int] = _BIGINT, sql_type: str = "BIGINT") -> int:
    if isinstance(x, float):
        if math.isinf(x) or x != x:
            raise DataError(
                f"cannot CAST {x} to {sql_type}",
                hint="only finite numbers convert to integers (as in DuckDB)",
            )
        x = round(x)  # half to even, as DuckDB casts a DOUBLE
    else:
        x = int(x)
    if bounds[0] <= x <= bounds[1]:
        return x
    raise integer_overflow(x, sql_type, f"CAST to {sql_type}")


def _to_int32(x: Any) -> int:
    return _to_int(x, _INTEGER, "INTEGER")


def _in3(x: Any, items: tuple[Any, ...]) -> bool | None:
    """SQL ``x IN (items)``: true if found, else NULL if x or an item is NULL, else false."""
    if x is None:
        return None
    null = False
    for v in items:
        if v is None:
            null = True
        elif x == v or (x != x and v != v):  # NaN is in a list holding NaN (DuckDB)
            return True
    return None if null else False


def _to_varchar(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    return str(x)


def _sqrt(x: float) -> float:
    """C's sqrt: NaN below zero (``math.sqrt`` raises), -0.0 of -0.0."""
    return NAN if x < 0 else math.sqrt(x)


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _logarithm(fn: Callable[[float], float]) -> Callable[[float], float]:
    """C's logarithm ``fn``: -inf at (either) zero, NaN below zero (``math`` raises)."""

    def log(x: float) -> float:
        if x > 0 or x != x:
            return fn(x)
        return -math.inf if x == 0 else NAN

    return log


def _odd_integer(y: float) -> bool:
    return math.isfinite(y) and y == math.floor(y) and math.fmod(y, 2.0) != 0


def _pow(x: float, y: float) -> float:
    """C's pow (DuckDB's POWER): ``math.pow`` with IEEE results where it raises (0 to a
    negative power is +-inf, a negative base to a fractional power NaN, overflow +-inf)."""
    try:
        return math.pow(x, y)
    except OverflowError:
        return -math.inf if x < 0 and _odd_integer(y) else math.inf
    except ValueError:
        if x == 0:
            return math.copysign(math.inf, x) if _odd_integer(y) else math.inf
        return NAN


def _sign(x: Any) -> int:
    """DuckDB's SIGN: -1, 0 or 1; 0 for a zero or NaN."""
    return 1 if x > 0 else -1 if x < 0 else 0


#: The positions and lengths DuckDB's SUBSTRING takes (others are an error).
SUBSTRING_RANGE = (-(2**32), 2**32 - 1)


def _substring(s: str, start: int, length: int | None = None) -> str:
    """DuckDB's SUBSTRING (positions 1-based; a start below 1 counts from the end, 0 is
    before the first character; a negative length takes the characters before start; a
    start or length outside :data:`SUBSTRING_RANGE` is an error)."""
    for value, what in ((start, "position"), (length, "length")):
        if value is not None and not SUBSTRING_RANGE[0] <= value <= SUBSTRING_RANGE[1]:
            raise DataError(
                f"SUBSTRING {what} {value} is outside the supported range "
                f"({SUBSTRING_RANGE[0]} to {SUBSTRING_RANGE[1]}), as in DuckDB",
                hint="keep SUBSTRING's position and length within that range",
            )
    n = len(s)
    if length is None:
        length = SUBSTRING_RANGE[1]  # DuckDB's two-argument form: this length
    if start > 0:
        begin = start - 1
    elif start < 0:
        begin = n + start
    else:
        begin, length = 0, length - 1
    lo, hi = (begin, begin + length) if length >= 0 else (begin + length, begin)
    lo, hi = max(lo, 0), min(hi, n)
    return s[lo:hi] if lo < hi else ""


def _replace(s: str, old: str, new: str) -> str:
    return s.replace(old, new) if old else s  # an empty search string changes nothing


def _pad(s: str, n: int, fill: str, left: bool) -> str:
    """DuckDB's LPAD / RPAD: ``s`` cut or padded to ``n`` characters (``fill`` repeated from
    its start; a count below 1 gives '')."""
    n = _to_int32(n)
    if n <= len(s):
        return s[: max(n, 0)]
    need = n - len(s)
    padding = (fill * (need // len(fill) + 1))[:need]
    return padding + s if left else s + padding


def _concat(*parts: str | None) -> str:
    """DuckDB's CONCAT: NULL arguments are skipped (never NULL)."""
    return "".join(p for p in parts if p is not None)


RUNTIME: dict[str, Any] = {
    "_NAN": NAN,
    "_canon": _canon,
    "_nan_key": _nan_key,
    "_ord": _ord,
    "_div": _div,
    "_imod": _imod,
    "_fmod": _fmod,
    "_and3": _and3,
    "_or3": _or3,
    "_not3": _not3,
    "_least": _least,
    "_greatest": _greatest,
    "_round": _round,
    "_floor": _floor,
    "_ceil": _ceil,
    "_to_int": _to_int,
    "_to_int32": _to_int32,
    "_ick": checked_bigint,
    "_in3": _in3,
    "_to_varchar": _to_varchar,
    "_sqrt": _sqrt,
    "_exp": _exp,
    "_ln": _logarithm(math.log),
    "_log10": _logarithm(math.log10),
    "_log2": _logarithm(math.log2),
    "_pow": _pow,
    "_sign": _sign,
    "_substring": _substring,
    "_replace": _replace,
    "_pad": _pad,
    "_concat": _concat,
    "_upper": upper,
    "_lower": lower,
    "abs": abs,
    "float": float,
}

"""Compile bound IR expressions into Python functions over tuples.

The row engine evaluates predicates and projections millions of times per second, so each
expression is translated once into Python *source* and compiled: a select becomes
``[r for r in rows if <cond>]``, a project ``[(<e1>, <e2>) for r in rows]``. The source is
generated from the typed IR only: column references become ``r[i]``, literals are ``repr`` of
their typed Python value, operators come from a fixed table. No text the user wrote reaches
``compile`` (CONTRACT: never eval user text).

NULL handling follows SQL three-valued logic, but only where a value can be NULL: the
compiler tracks which input columns are nullable (source columns never are: rows with NULLs
are dead-lettered at ingest) and emits plain Python operators on the non-null fast path.
Scalar semantics are DuckDB's (docs/semantics.md): ``/`` is IEEE division, integer ``%`` by
zero is NULL, ROUND rounds half away from zero, CAST of a DOUBLE to an integer half to even.

Generated code stays flat however long or deep the expression: CPython's parser refuses
more than 200 nested parentheses and its compiler recurses, while the binder accepts any
number of CASE WHENs and COALESCE arguments and 128 levels of nesting (two levels of Python
each when NULL-guarded). A CASE with more than :data:`INLINE_ITEMS` WHENs, or a COALESCE with
more arguments, becomes a helper function of ``if`` statements; any subexpression whose code
nests more than :data:`NEST_BUDGET` brackets is hoisted into a helper function of one
``return``. Helpers live in the compiled function's namespace (``env``); a query of usual
size has none, so its hot path is unchanged.

NaN is equal to itself (as in DuckDB) wherever values are grouped, counted or compared as
rows: the row engine represents every NaN by one object, :data:`NAN`, so dict keys, bags and
tuple comparisons (which test identity first) treat NaN rows as equal. A computed value can
only be a *new* NaN object when its expression may produce NaN; the compiler tracks which
columns may be non-finite (``finite``: source columns never are, NaN and infinity input is
dead-lettered) and wraps exactly those expressions in :func:`_canon` (``value * 2`` over a
source column is never NaN, so the fast path has no check).

Example:
    >>> from optimizer.ir.expr import Binary, ColumnRef, Literal
    >>> from optimizer.ir.types import DataType
    >>> pred = Binary(">", ColumnRef(0, "v", DataType.DOUBLE), Literal(1.5, DataType.DOUBLE),
    ...               DataType.BOOLEAN)
    >>> keep = compile_filter(pred, (False,))
    >>> keep([(1.0,), (2.0,), (3.0,)])
    [(2.0,), (3.0,)]
"""

from __future__ import annotations

import math
import operator
import re
import warnings
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from engines.row.casemap import lower, upper
from optimizer.ir.errors import DataError, UnsupportedError
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
from optimizer.ir.functions import NEVER_NULL, NULL_IF_ALL_NULL
from optimizer.ir.types import DataType

Row = tuple[Any, ...]
Rows = list[Row]

_PY_COMPARE = {"=": "==", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


# -- runtime helpers referenced by generated code --------------------------------------------

#: The row engine's one NaN object (see the module docstring).
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


# -- nullability ---------------------------------------------------------------------------


def nullable(e: Expr, cols: Sequence[bool]) -> bool:
    """Whether ``e`` can evaluate to NULL given which input columns can be NULL."""
    if isinstance(e, Literal):
        return e.value is None
    if isinstance(e, ColumnRef):
        return cols[e.index]
    if isinstance(e, Binary):
        either = nullable(e.left, cols) or nullable(e.right, cols)
        if e.op == "%" and e.dtype.is_integer:
            return True  # integer modulo by zero is NULL
        return either
    if isinstance(e, Unary):
        return False if e.op in ("IS NULL", "IS NOT NULL") else nullable(e.operand, cols)
    if isinstance(e, Func):
        if e.name in NULL_IF_ALL_NULL:
            return all(nullable(a, cols) for a in e.args)
        if e.name in NEVER_NULL:
            return False
        return any(nullable(a, cols) for a in e.args)
    if isinstance(e, Cast):
        return nullable(e.operand, cols)
    if isinstance(e, InList):
        return nullable(e.value, cols) or any(nullable(i, cols) for i in e.items)
    if isinstance(e, Case):
        return any(nullable(v, cols) for _, v in e.whens) or nullable(e.default, cols)
    if isinstance(e, AggCall):
        raise TypeError("aggregate calls are compiled by the aggregate operator")
    raise TypeError(f"unknown expression {e!r}")


def may_be_infinite(e: Expr, finite: Sequence[bool]) -> bool:
    """Whether ``e`` can evaluate to +-inf, given which input columns are always finite."""
    return _nonfinite(e, finite)[0]


def may_be_nan(e: Expr, finite: Sequence[bool]) -> bool:
    """Whether ``e`` can evaluate to NaN, given which input columns are always finite."""
    return _nonfinite(e, finite)[1]


def _nonfinite(e: Expr, finite: Sequence[bool]) -> tuple[bool, bool]:
    """(may be infinite, may be NaN). Finite doubles give NaN only through 0/0 or fmod, or by
    combining an infinity (inf - inf, inf * 0); ``+ - *`` of finite doubles may overflow to
    infinity but never give NaN. Integers, booleans and strings are always finite."""
    if e.dtype is not DataType.DOUBLE:
        return False, False
    if isinstance(e, Literal):
        v = e.value
        return isinstance(v, float) and math.isinf(v), isinstance(v, float) and v != v
    if isinstance(e, ColumnRef):
        return (not finite[e.index],) * 2
    if isinstance(e, Binary):
        (li, ln), (ri, rn) = _nonfinite(e.left, finite), _nonfinite(e.right, finite)
        if e.op in ("+", "-"):
            return True, ln or rn or (li and ri)
        if e.op == "*":
            return True, ln or rn or li or ri
        return True, True  # / and %: x / 0, 0 / 0, fmod(x, 0)
    if isinstance(e, Func) and e.name in _NONFINITE_FUNCTIONS:
        return True, True  # sqrt(-1), ln(0), exp(1000), pow(0, -1) of finite arguments
    parts = [_nonfinite(c, finite) for c in e.children()]
    if isinstance(e, Case):  # the conditions are booleans: only the values matter
        parts = [_nonfinite(v, finite) for _, v in e.whens] + [_nonfinite(e.default, finite)]
    return any(p[0] for p in parts), any(p[1] for p in parts)


#: DOUBLE functions that can give NaN or an infinity from finite arguments.
_NONFINITE_FUNCTIONS = frozenset({"SQRT", "POWER", "EXP", "LN", "LOG10", "LOG2"})

#: Functions compiled as one call of a runtime helper (``_sign(x)``) over their arguments,
#: NULL where an argument is; the DOUBLE ones take their arguments as floats.
_STRICT_CALLS: dict[str, str] = {
    "SQRT": "_sqrt",
    "EXP": "_exp",
    "LN": "_ln",
    "LOG10": "_log10",
    "LOG2": "_log2",
    "POWER": "_pow",
    "SIGN": "_sign",
    "LENGTH": "len",
    "LOWER": "_lower",
    "UPPER": "_upper",
    "SUBSTRING": "_substring",
    "REPLACE": "_replace",
}
_FLOAT_ARGS = frozenset({"SQRT", "EXP", "LN", "LOG10", "LOG2", "POWER"})
#: String methods: ``s.<method>(arg, ...)``.
_METHODS: dict[str, str] = {
    "STARTS_WITH": "startswith",
    "ENDS_WITH": "endswith",
    "TRIM": "strip",
    "LTRIM": "lstrip",
    "RTRIM": "rstrip",
}


# -- code generation -------------------------------------------------------------------------


#: Deepest bracket nesting of one generated expression before it is hoisted into a helper
#: function (CPython refuses 200; its parser and compiler recurse per level).
NEST_BUDGET = 40
#: CASEs with more WHENs, and COALESCEs with more arguments, are helper functions of ``if``
#: statements (inline, each WHEN nests the rest one level deeper).
INLINE_ITEMS = 8

#: Brackets and string literals (whose brackets do not nest) of generated code.
_BRACKETS = re.compile(r"[()\[\]{}]|'(?:[^'\\]|\\.)*'|" + r'"(?:[^"\\]|\\.)*"')


def nesting(code: str) -> int:
    """The deepest bracket nesting of generated Python ``code`` (string literals skipped)."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(code):
        c = m.group()
        if c in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in ")]}":
            depth -= 1
    return deepest


Env = dict[str, Any]
"""Helper functions generated code calls (``_hx<n>``), added to its namespace."""


class _Gen:
    """Generates one Python expression string for an IR expression over the tuple ``r``;
    helper functions it needs (see the module docstring) are compiled into ``env``."""

    def __init__(
        self,
        cols: Sequence[bool],
        var: str = "r",
        env: Env | None = None,
        finite: Sequence[bool] | None = None,
    ) -> None:
        self.cols = cols
        self.var = var
        self.env: Env = env if env is not None else {}
        self.finite = finite  # which columns are never NaN (None: compare as IEEE does)
        self._tmp = 0

    def may_be_nan(self, e: Expr) -> bool:
        """Whether ``e`` may be NaN, so a comparison of it needs DuckDB's NaN order."""
        return self.finite is not None and may_be_nan(e, self.finite)

    def tmp(self) -> str:
        self._tmp += 1
        return f"_t{self._tmp}"

    def null(self, e: Expr) -> bool:
        return nullable(e, self.cols)

    def gen(self, e: Expr) -> str:
        """The expression's code, hoisted into a helper when it nests too deeply."""
        code = self._gen(e)
        if nesting(code) > NEST_BUDGET:
            return self._helper([f"return {code}"])
        return code

    def _helper(self, body: list[str]) -> str:
        """Compile ``body`` (statements over ``var``) as a new helper function in ``env``;
        the call's code. Its own temporaries (``_t<n> :=``) are its locals."""
        name = f"_hx{len(self.env)}"
        lines = [f"def {name}({self.var}):", *(f"    {line}" for line in body)]
        self.env[name] = _build("\n".join(lines) + "\n", name, self.env)
        return f"{name}({self.var})"

    def _gen(self, e: Expr) -> str:
        if isinstance(e, Literal):
            return _literal(e)
        if isinstance(e, ColumnRef):
            return f"{self.var}[{e.index}]"
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
        if isinstance(e, InList):
            return self._in_list(e)
        raise TypeError(f"cannot compile {e!r}")

    def _guarded(self, parts: list[Expr], body: Callable[[list[str]], str]) -> str:
        """``body`` over the parts, NULL if any nullable part is NULL."""
        codes = [self.gen(p) for p in parts]
        if not any(self.null(p) for p in parts):
            return body(codes)
        names, checks = [], []
        for p, c in zip(parts, codes, strict=True):
            if self.null(p):
                t = self.tmp()
                checks.append(f"({t} := {c}) is None")
                names.append(t)
            else:
                names.append(c)
        return f"(None if {' or '.join(checks)} else {body(names)})"

    def _binary(self, e: Binary) -> str:
        op = e.op
        if op in ("AND", "OR"):
            a, b = self.gen(e.left), self.gen(e.right)
            if self.null(e.left) or self.null(e.right):
                return f"_{op.lower()}3({a}, {b})"
            return f"({a} {op.lower()} {b})"
        if op in _PY_COMPARE:
            py = _PY_COMPARE[op]
            if self.may_be_nan(e.left) or self.may_be_nan(e.right):
                # NaN equals NaN and is larger than every number (DuckDB); only where an
                # operand may be NaN, so finite comparisons keep the plain operator
                return self._guarded(
                    [e.left, e.right], lambda c: f"(_ord({c[0]}) {py} _ord({c[1]}))"
                )
            return self._guarded([e.left, e.right], lambda c: f"({c[0]} {py} {c[1]})")
        if op in ("+", "-", "*"):
            if e.dtype.is_integer:  # checked: BIGINT overflow is an error, as in DuckDB
                return self._guarded([e.left, e.right], lambda c: f"_ick({c[0]} {op} {c[1]})")
            return self._guarded([e.left, e.right], lambda c: f"({c[0]} {op} {c[1]})")
        if op == "/":
            return self._guarded([e.left, e.right], lambda c: f"_div({c[0]}, {c[1]})")
        if op == "%":
            fn = "_imod" if e.dtype.is_integer else "_fmod"
            return self._guarded([e.left, e.right], lambda c: f"{fn}({c[0]}, {c[1]})")
        raise TypeError(f"unknown operator {op}")

    def _unary(self, e: Unary) -> str:
        if isinstance(e.operand, Literal) and e.op in ("IS NULL", "IS NOT NULL"):
            is_null = e.operand.value is None  # folded: no `<literal> is None` in the code
            return repr(is_null if e.op == "IS NULL" else not is_null)
        if e.op == "IS NULL":
            return f"({self.gen(e.operand)} is None)"
        if e.op == "IS NOT NULL":
            return f"({self.gen(e.operand)} is not None)"
        if e.op == "NOT":
            code = self.gen(e.operand)
            return f"_not3({code})" if self.null(e.operand) else f"(not {code})"
        if e.op == "NEG":
            if e.dtype.is_integer:
                return self._guarded([e.operand], lambda c: f"_ick(-{c[0]})")
            return self._guarded([e.operand], lambda c: f"(-{c[0]})")
        raise TypeError(f"unknown unary operator {e.op}")

    def _func(self, e: Func) -> str:
        args = list(e.args)
        if e.name == "COALESCE":
            # Lazy, as SQL engines evaluate it: an argument after the first non-NULL one is
            # never computed (COALESCE(0, CAST(0/0 AS INTEGER)) is 0, not a cast error).
            if len(args) > INLINE_ITEMS:
                body: list[str] = []
                for a in args[:-1]:
                    body += [f"_c = {self.gen(a)}", "if _c is not None:", "    return _c"]
                return self._helper([*body, f"return {self.gen(args[-1])}"])
            code = self.gen(args[-1])
            for a in reversed(args[:-1]):
                t = self.tmp()
                code = f"({t} if ({t} := {self.gen(a)}) is not None else {code})"
            return code
        if e.name in ("LEAST", "GREATEST"):
            code = f"_{e.name.lower()}({', '.join(self.gen(a) for a in args)})"
            if e.dtype is not DataType.DOUBLE:
                return code
            t = self.tmp()  # -0.0 is +0.0 (docs/semantics.md, "Signed zeros")
            return f"(0.0 if ({t} := {code}) == 0 else {t})"
        if e.name == "ABS":
            if e.dtype.is_integer:
                return self._guarded(args, lambda c: f"_ick(abs({c[0]}))")
            return self._guarded(args, lambda c: f"abs({c[0]})")
        if e.name in ("FLOOR", "CEIL"):
            fn = f"_{e.name.lower()}"
            return self._guarded(args, lambda c: f"{fn}(float({c[0]}))")
        if e.name == "ROUND":
            return self._guarded(args, lambda c: f"_round({', '.join(c)})")
        return self._string_or_math(e, args)

    def _string_or_math(self, e: Func, args: list[Expr]) -> str:
        """The functions of ``_STRICT_CALLS``, ``_METHODS``, CONTAINS, LPAD / RPAD, CONCAT
        and ``||`` (docs/semantics.md, "Scalar functions")."""
        name = e.name
        if name in _STRICT_CALLS:
            fn = _STRICT_CALLS[name]
            if name in _FLOAT_ARGS:
                return self._guarded(args, lambda c: f"{fn}({', '.join(f'float({x})' for x in c)})")
            return self._guarded(args, lambda c: f"{fn}({', '.join(c)})")
        if name in _METHODS:
            method = _METHODS[name]
            if name.endswith("TRIM") and len(args) == 1:
                return self._guarded(args, lambda c: f"{c[0]}.{method}(' ')")  # spaces only
            return self._guarded(args, lambda c: f"{c[0]}.{method}({c[1]})")
        if name == "CONTAINS":
            return self._guarded(args, lambda c: f"({c[1]} in {c[0]})")
        if name in ("LPAD", "RPAD"):
            left = name == "LPAD"
            return self._guarded(args, lambda c: f"_pad({c[0]}, {c[1]}, {c[2]}, {left})")
        if name == "CONCAT":
            return f"_concat({', '.join(self.gen(a) for a in args)})"
        if name == "||":
            return self._guarded(args, lambda c: f"({c[0]} + {c[1]})")
        raise TypeError(f"unknown function {e.name}")

    def _cast(self, e: Cast) -> str:
        src, dst = e.operand.dtype, e.dtype
        if src == dst or src is DataType.NULL:
            return self.gen(e.operand)
        if dst is DataType.DOUBLE and (src.is_numeric or src is DataType.BOOLEAN):
            return self._guarded([e.operand], lambda c: f"float({c[0]})")
        if dst.is_integer and (src.is_numeric or src is DataType.BOOLEAN):
            fn = "_to_int32" if dst is DataType.INTEGER else "_to_int"
            return self._guarded([e.operand], lambda c: f"{fn}({c[0]})")
        if dst is DataType.VARCHAR and (src.is_integer or src is DataType.BOOLEAN):
            return self._guarded([e.operand], lambda c: f"_to_varchar({c[0]})")
        if dst is DataType.BOOLEAN and src.is_integer:
            return self._guarded([e.operand], lambda c: f"({c[0]} != 0)")
        raise UnsupportedError(
            f"CAST from {src} to {dst} is not supported by the row engine",
            hint="cast between numeric types, or integers/booleans to VARCHAR",
        )

    def _in_list(self, e: InList) -> str:
        """A set lookup for constant items (CPython makes ``x in {1, 2}`` a frozenset
        constant), else a flat tuple scanned by ``_in3``; never nested, whatever the length."""
        value = self.gen(e.value)
        if not all(isinstance(i, Literal) for i in e.items):
            items = ", ".join(self.gen(i) for i in e.items)
            return f"_in3({value}, ({items},))"
        values = [i.value for i in e.items if isinstance(i, Literal)]
        consts = [v for v in values if v is not None]
        if not consts:  # x IN (NULL, ...): NULL
            return "None"
        hashable = all(
            isinstance(v, bool | int | str) or (isinstance(v, float) and math.isfinite(v))
            for v in consts
        )
        texts = [_literal(Literal(v, DataType.NULL)) for v in consts]
        members = "{" + ", ".join(texts) + ",}" if hashable else "(" + ", ".join(texts) + ",)"
        missing = "None" if len(consts) < len(values) else "False"  # a NULL item: not found is NULL
        if not self.null(e.value):
            if missing == "False":
                return f"({value} in {members})"
            return f"(True if {value} in {members} else None)"
        t = self.tmp()
        return f"(None if ({t} := {value}) is None else (True if {t} in {members} else {missing}))"

    def _case(self, e: Case) -> str:
        if len(e.whens) > INLINE_ITEMS:  # one `if` statement per WHEN, not nested
            body: list[str] = []
            for cond, value in e.whens:
                c = self.gen(cond)
                body += [f"if ({c}) is True:" if self.null(cond) else f"if {c}:"]
                body += [f"    return {self.gen(value)}"]
            return self._helper([*body, f"return {self.gen(e.default)}"])
        out = self.gen(e.default)
        for cond, value in reversed(e.whens):
            c = self.gen(cond)
            test = f"({c}) is True" if self.null(cond) else c
            out = f"({self.gen(value)} if {test} else {out})"
        return out


def _literal(e: Literal) -> str:
    v = e.value
    if v is None or isinstance(v, bool | int | str):
        return repr(v)
    if isinstance(v, float):
        if math.isfinite(v):
            return repr(v)
        return "_NAN" if v != v else f"float({str(v)!r})"
    raise TypeError(f"unsupported literal {v!r}")


def _build(source: str, name: str, env: Env | None = None) -> Callable[..., Any]:
    """Compile ``source`` and return its function ``name`` (``env``: helpers it calls)."""
    namespace = dict(RUNTIME)
    namespace.update(env or {})
    with warnings.catch_warnings():
        # A folded operand can leave `(-0.0) is None` or `(None) is True` in the code: right
        # (identity with None/True/False is what the generator means), but CPython warns
        # ("is" with a literal), and under -W error the warning is a SyntaxError.
        warnings.simplefilter("ignore", SyntaxWarning)
        code = compile(source, f"<hycq:{name}>", "exec")
    exec(code, namespace)
    fn = namespace[name]
    fn.__hycq_source__ = source  # kept for debugging and tests
    return fn


# -- public compilers ------------------------------------------------------------------------


def expr_source(
    e: Expr,
    cols: Sequence[bool],
    var: str = "r",
    finite: Sequence[bool] | None = None,
    env: Env | None = None,
) -> str:
    """The Python expression text for ``e`` over tuple variable ``var`` (for fused codegen).

    With ``finite`` (which input columns are always finite) a value that may be a new NaN
    object is made :data:`NAN`; without it the value is left as computed. Helper functions
    the text calls (a long CASE, a deep expression) are added to ``env``, which the caller
    puts into the namespace it compiles the text in; without ``env`` the expression must
    need none (``ValueError`` otherwise).
    """
    helpers: Env = env if env is not None else {}
    code = _Gen(cols, var, helpers, finite).gen(e)
    if env is None and helpers:
        raise ValueError("expr_source: the expression needs helper functions; pass env")
    if finite is not None and not isinstance(e, ColumnRef) and may_be_nan(e, finite):
        return f"_canon({code})"
    return code


def compile_filter(
    pred: Expr, cols: Sequence[bool], finite: Sequence[bool] | None = None
) -> Callable[[Rows], Rows]:
    """``rows -> [r for r in rows if pred(r)]``; NULL counts as false. ``finite``: which
    columns are never NaN (comparisons of the others order NaN as DuckDB does)."""
    g = _Gen(cols, finite=finite)
    code = g.gen(pred)
    test = f"({code}) is True" if nullable(pred, cols) else code
    src = f"def _filter(rows):\n    return [r for r in rows if {test}]\n"
    return _build(src, "_filter", g.env)


def compile_map(
    exprs: Sequence[Expr], cols: Sequence[bool], finite: Sequence[bool] | None = None
) -> Callable[[Rows], Rows]:
    """``rows -> [(e1(r), e2(r), ...) for r in rows]``; NaN results are :data:`NAN`
    (``finite``: which input columns are always finite; all of them when omitted)."""
    fin = finite if finite is not None else [True] * len(cols)
    env: Env = {}
    items = ", ".join(expr_source(e, cols, finite=fin, env=env) for e in exprs)
    src = f"def _map(rows):\n    return [({items},) for r in rows]\n"
    return _build(src, "_map", env)


def compile_scalar(
    e: Expr, cols: Sequence[bool], finite: Sequence[bool] | None = None
) -> Callable[[Row], Any]:
    """``r -> e(r)`` for one tuple (``finite`` as for :func:`compile_filter`)."""
    g = _Gen(cols, finite=finite)
    code = g.gen(e)
    return _build(f"def _scalar(r):\n    return {code}\n", "_scalar", g.env)


def compile_predicate(
    pred: Expr, cols: Sequence[bool], finite: Sequence[bool] | None = None
) -> Callable[[Row], bool]:
    """``r -> bool``: true only when the predicate is TRUE (not NULL); ``finite`` as for
    :func:`compile_filter`."""
    g = _Gen(cols, finite=finite)
    code = g.gen(pred)
    test = f"({code}) is True" if nullable(pred, cols) else f"bool({code})"
    return _build(f"def _pred(r):\n    return {test}\n", "_pred", g.env)


def compile_key(indexes: Sequence[int]) -> Callable[[Row], Any]:
    """``r -> key``: a scalar for one column, a tuple for several, () for none.

    ``operator.itemgetter`` (C) for one or more columns: it gives exactly these values and
    costs a fraction of a Python function call on the join's hot paths."""
    if not indexes:
        return _build("def _key(r):\n    return ()\n", "_key")
    return operator.itemgetter(*indexes)

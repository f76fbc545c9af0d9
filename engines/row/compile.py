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
Where that is not plain Python, the generated code calls a helper of ``engines.row.scalars``
(its namespace starts as :data:`engines.row.scalars.RUNTIME`).

Generated code stays flat however long or deep the expression: CPython's parser refuses
more than 200 nested parentheses and its compiler recurses, while the binder accepts any
number of CASE WHENs and COALESCE arguments and 128 levels of nesting (two levels of Python
each when NULL-guarded). A CASE with more than :data:`INLINE_ITEMS` WHENs, or a COALESCE with
more arguments, becomes a helper function of ``if`` statements; any subexpression whose code
nests more than :data:`NEST_BUDGET` brackets is hoisted into a helper function of one
``return``. Helpers live in the compiled function's namespace (``env``); a query of usual
size has none, so its hot path is unchanged.

NaN is equal to itself (as in DuckDB) wherever values are grouped, counted or compared as
rows: the row engine represents every NaN by one object, :data:`engines.row.scalars.NAN`, so
dict keys, bags and tuple comparisons (which test identity first) treat NaN rows as equal. A
computed value can only be a *new* NaN object when its expression may produce NaN; the
compiler tracks which columns may be non-finite (``finite``: source columns never are, NaN
and infinity input is dead-lettered) and wraps exactly those expressions in ``_canon``
(``value * 2`` over a source column is never NaN, so the fast path has no check).

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
from typing import Any

from engines.row.scalars import RUNTIME
from optimizer.ir.errors import UnsupportedError
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

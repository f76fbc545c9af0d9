"""Scalar expressions: an AST expression over a schema -> a typed IR expression.

Column names resolve against the schema (the combined schema of a SELECT level, or the
aggregate's output above it), literals and operators are typed, and every ill-typed or
unsupported expression raises a positioned error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from sqlglot import exp

from optimizer.ir.errors import BindError, UnsupportedError, did_you_mean
from optimizer.ir.expr import (
    LEFT_DEEP_OPERANDS,
    Binary,
    Case,
    Cast,
    ColumnRef,
    Expr,
    Func,
    InList,
    Literal,
    Unary,
    chain,
)
from optimizer.ir.functions import FUNCTION_ALIASES, FUNCTIONS, unify_types
from optimizer.ir.schema import Schema
from optimizer.ir.types import TYPE_NAMES, DataType, arithmetic_result, comparable
from optimizer.sql.bind.scope import BinderState

_ARITH: dict[type[exp.Expr], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
}

_COMPARE: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
}

#: sqlglot's node type -> the IR function it binds to (arguments in the node's order).
_SCALAR_FUNCS: dict[type, str] = {
    exp.Abs: "ABS",
    exp.Coalesce: "COALESCE",
    exp.Greatest: "GREATEST",
    exp.Least: "LEAST",
    exp.Floor: "FLOOR",
    exp.Ceil: "CEIL",
    exp.Round: "ROUND",
    exp.Sqrt: "SQRT",
    exp.Pow: "POWER",
    exp.Exp: "EXP",
    exp.Ln: "LN",
    exp.Sign: "SIGN",
    exp.Length: "LENGTH",
    exp.Lower: "LOWER",
    exp.Upper: "UPPER",
    exp.Substring: "SUBSTRING",
    exp.Replace: "REPLACE",
    exp.Concat: "CONCAT",
    exp.StartsWith: "STARTS_WITH",
    exp.EndsWith: "ENDS_WITH",
    exp.Contains: "CONTAINS",
}

#: A function name as the query writes it: the identifier right before its '('.
_CALL_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")


#: A callable that binds a child AST.
_Sub = Callable[[exp.Expression], Expr]


class ScalarBinder(BinderState):
    """Binds scalar expressions."""

    def expr(
        self,
        node: exp.Expression,
        schema: Schema,
        post_agg: _Sub | None = None,
    ) -> Expr:
        """Bind a scalar expression over ``schema`` (``post_agg``: binds each child above the
        aggregate instead)."""

        def sub(child: exp.Expression) -> Expr:
            if post_agg is not None:
                return post_agg(child)
            return self.expr(child, schema)

        while isinstance(node, exp.Paren):  # any number of redundant parentheses
            node = node.this
        if isinstance(node, exp.Column):
            return self._column(node, schema)
        if isinstance(node, exp.Literal):
            return self._literal(node)
        if isinstance(node, exp.Boolean):
            return Literal(bool(node.this), DataType.BOOLEAN)
        if isinstance(node, exp.Null):
            return Literal(None, DataType.NULL)
        if isinstance(node, exp.AggFunc):
            raise self.error(BindError, "aggregate function in an unexpected place", node)
        if type(node) in _ARITH:
            op = _ARITH[type(node)]
            left, right = sub(node.this), sub(node.expression)
            for side, ast in ((left, node.this), (right, node.expression)):
                if not side.dtype.is_numeric:
                    raise self.error(
                        BindError,
                        f"cannot apply '{op}' to {left.dtype} and {right.dtype}",
                        ast,
                        "arithmetic needs numeric operands",
                    )
            return Binary(op, left, right, arithmetic_result(op, left.dtype, right.dtype))
        if type(node) in _COMPARE:
            op = _COMPARE[type(node)]
            left, right = sub(node.this), sub(node.expression)
            if not comparable(left.dtype, right.dtype):
                raise self.error(
                    BindError,
                    f"cannot compare {left.dtype} with {right.dtype}",
                    node,
                    "compare values of the same kind, or CAST one side",
                )
            return Binary(op, left, right, DataType.BOOLEAN)
        if isinstance(node, exp.And | exp.Or):
            op = "AND" if isinstance(node, exp.And) else "OR"
            operands = []
            for ast in _chain_operands(node):
                bound = sub(ast)
                self._require_boolean(bound, ast, op)
                operands.append(bound)
            if len(operands) > LEFT_DEEP_OPERANDS:
                listed = _as_in_list(operands, "=" if op == "OR" else "<>")
                if listed is not None and op == "OR":
                    return listed  # x = 1 OR x = 2 OR ...: one set lookup
                if listed is not None:
                    # x <> 1 AND x <> 2 AND ...: NOT (x IN (1, 2, ...)), equal in three-valued
                    # logic (NULL when x or an item is NULL and no item matched, FALSE if one
                    # did); a long AND chain is a tree as deep as it is long in the engines
                    # (Spark's optimizer overflows its stack on 10,000 conjuncts).
                    return Unary("NOT", listed, DataType.BOOLEAN)
            return chain(op, operands)
        if isinstance(node, exp.Not):
            inner = sub(node.this)
            self._require_boolean(inner, node.this, "NOT")
            return Unary("NOT", inner, DataType.BOOLEAN)
        if isinstance(node, exp.Neg):
            inner = sub(node.this)
            if not inner.dtype.is_numeric:
                raise self.error(BindError, f"cannot negate a {inner.dtype}", node)
            if isinstance(inner, Literal) and isinstance(inner.value, int | float):
                return Literal(-inner.value, inner.dtype)
            return Unary("NEG", inner, inner.dtype)
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise self.error(UnsupportedError, "only IS NULL / IS NOT NULL are supported", node)
            return Unary("IS NULL", sub(node.this), DataType.BOOLEAN)
        if isinstance(node, exp.Between):
            value, low, high = sub(node.this), sub(node.args["low"]), sub(node.args["high"])
            for bound in (low, high):
                if not comparable(value.dtype, bound.dtype):
                    raise self.error(
                        BindError, f"cannot compare {value.dtype} with {bound.dtype}", node
                    )
            return Binary(
                "AND",
                Binary(">=", value, low, DataType.BOOLEAN),
                Binary("<=", value, high, DataType.BOOLEAN),
                DataType.BOOLEAN,
            )
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("field") is not None:
                raise self.error(
                    UnsupportedError,
                    "IN with a subquery is not supported",
                    node,
                    "join with a derived table instead",
                )
            value = sub(node.this)
            if not node.expressions:
                raise self.error(BindError, "IN needs at least one value", node)
            items = []
            for item in node.expressions:
                cand = sub(item)
                if not comparable(value.dtype, cand.dtype):
                    raise self.error(
                        BindError, f"cannot compare {value.dtype} with {cand.dtype}", item
                    )
                items.append(cand)
            return InList(value, tuple(items))
        if isinstance(node, exp.Case):
            return self._case(node, sub)
        if isinstance(node, exp.Cast | exp.TryCast):
            if isinstance(node, exp.TryCast):
                raise self.error(UnsupportedError, "TRY_CAST is not supported", node, "use CAST")
            tname = node.to.sql(dialect="duckdb").upper()
            dtype = TYPE_NAMES.get(tname)
            if dtype is None:
                raise self.error(
                    UnsupportedError,
                    f"CAST to {tname} is not supported",
                    node,
                    "cast to BIGINT, INTEGER, DOUBLE, BOOLEAN or VARCHAR",
                )
            return Cast(sub(node.this), dtype)
        if isinstance(node, exp.Subquery | exp.Exists | exp.Select):
            raise self.error(
                UnsupportedError,
                "subqueries in expressions are not supported",
                node,
                "move the subquery to FROM as a derived table and join it",
            )
        if isinstance(node, exp.DPipe):  # a || b: NULL if either is (unlike CONCAT)
            return self._call("||", "||", [node.this, node.expression], node, sub)
        if isinstance(node, exp.Func):
            return self._function(node, sub)
        if isinstance(node, exp.Star):
            raise self.error(BindError, "'*' is not allowed here", node)
        raise self.error(
            UnsupportedError,
            f"unsupported expression: {node.sql(dialect='duckdb')}",
            node,
            "hycq supports arithmetic, comparisons, AND/OR/NOT, CASE, CAST, IN, BETWEEN "
            "and a few functions",
        )

    def _case(self, node: exp.Case, sub: _Sub) -> Expr:
        if node.this is not None:
            raise self.error(
                UnsupportedError,
                "simple CASE x WHEN ... is not supported",
                node,
                "write CASE WHEN x = ... THEN ...",
            )
        whens = []
        types: list[DataType] = []
        for w in node.args.get("ifs") or []:
            cond = sub(w.this)
            self._require_boolean(cond, w.this, "CASE WHEN")
            value = sub(w.args["true"])
            whens.append((cond, value))
            types.append(value.dtype)
        default_ast = node.args.get("default")
        default = sub(default_ast) if default_ast is not None else Literal(None, DataType.NULL)
        types.append(default.dtype)
        result = unify_types(types)
        if result is None:
            raise self.error(
                BindError,
                f"CASE branches have incompatible types {', '.join(map(str, types))}",
                node,
            )
        return Case(tuple(whens), default, result)

    def written_name(self, node: exp.Expr) -> str | None:
        """The function name as the query writes it (``REGEXP_MATCHES``, ``SUBSTR``, ``POW``:
        sqlglot's node may carry another), upper-cased; None for an operator (``||``)."""
        start = node.meta.get("start")
        if start is None:
            return None
        m = _CALL_NAME.match(self.src.text, start)
        return m.group(1).upper() if m else None

    def _function(self, node: exp.Func, sub: _Sub) -> Expr:
        written = self.written_name(node)
        if isinstance(node, exp.Anonymous):
            raw = node.name.upper()
            args = list(node.expressions)
        elif type(node) in _SCALAR_FUNCS:
            raw = _SCALAR_FUNCS[type(node)]
            args = list(node.iter_expressions())
        else:
            raw = written or node.sql_name().upper()
            args = list(node.iter_expressions())
        shown = written or raw
        if isinstance(node, exp.Nullif):
            return self._nullif(node, sub)
        if isinstance(node, exp.Log):
            return self._log(node, shown, sub)
        if isinstance(node, exp.Trim):
            return self._trim(node, shown, sub)
        if isinstance(node, exp.Pad):
            return self._pad(node, shown, sub)
        if isinstance(node, exp.Concat) and type(node) is not exp.Concat:
            raw = shown  # CONCAT_WS and other subclasses: not CONCAT
        name = FUNCTION_ALIASES.get(raw, raw)
        if FUNCTIONS.get(name) is None or name == "||":
            hint = did_you_mean(shown, list(FUNCTIONS)) or (
                f"supported: {', '.join(f for f in FUNCTIONS if f != '||')}"
            )
            what = f"unknown function {shown}"
            if isinstance(node, exp.RegexpLike):
                hint = "regular expressions are not supported (their dialects differ between "
                hint += "the engines); use STARTS_WITH, ENDS_WITH or CONTAINS"
                if written is None:
                    what = "the regular-expression match '~' is not supported"
            raise self.error(UnsupportedError, what, node, hint)
        if not isinstance(node, exp.Anonymous) and node.this is None and name != "CONCAT":
            # sqlglot accepts FLOOR() and CEIL() with no argument.
            raise self.error(BindError, f"wrong number of arguments to {shown}", node)
        return self._call(name, shown, args, node, sub)

    def _call(
        self, name: str, shown: str, args: list[exp.Expression], node: exp.Expr, sub: _Sub
    ) -> Func:
        """``name(args)`` bound and typed (``shown``: the name the query writes, for errors)."""
        spec = FUNCTIONS[name]
        if len(args) < spec.min_args or (spec.max_args is not None and len(args) > spec.max_args):
            raise self.error(BindError, f"wrong number of arguments to {shown}", node)
        bound = [sub(a) for a in args]
        dtype = spec.result([b.dtype for b in bound])
        if dtype is None:
            hint = "CAST the argument to the type the function takes"
            if spec.result([DataType.VARCHAR] * len(bound)) is not None:
                hint += ", e.g. CAST(x AS VARCHAR) for an integer x"
            elif spec.result([DataType.DOUBLE] * len(bound)) is not None:
                hint += ": a number"
            raise self.error(
                BindError,
                f"{shown} cannot take ({', '.join(str(b.dtype) for b in bound)})",
                node,
                hint,
            )
        if (
            name == "ROUND"
            and len(bound) == 2
            and not (isinstance(bound[1], Literal) and isinstance(bound[1].value, int))
        ):
            raise self.error(BindError, "ROUND's second argument must be an integer literal", node)
        return Func(name, tuple(bound), dtype)

    def _nullif(self, node: exp.Nullif, sub: _Sub) -> Expr:
        """``NULLIF(a, b)``: ``CASE WHEN a = b THEN NULL ELSE a END``, of a's type (DuckDB's;
        the comparison is the ``=`` of docs/semantics.md)."""
        a, b = sub(node.this), sub(node.expression)
        if not comparable(a.dtype, b.dtype):
            raise self.error(BindError, f"cannot compare {a.dtype} with {b.dtype}", node)
        equal = Binary("=", a, b, DataType.BOOLEAN)
        return Case(((equal, Literal(None, DataType.NULL)),), a, a.dtype)

    def _log(self, node: exp.Log, shown: str, sub: _Sub) -> Expr:
        """``LN``, ``LOG10``, ``LOG2``, ``LOG(x)`` (DuckDB's: base 10) and ``LOG(b, x)``
        (``LOG10(x) / LOG10(b)``, as DuckDB computes it). sqlglot parses ``LOG10(x)`` and
        ``LOG2(x)`` as ``LOG(10, x)`` and ``LOG(2, x)``: the written name tells them apart."""
        if node.args.get("expression") is None:
            return self._call("LOG10", shown, [node.this], node, sub)
        if shown in ("LOG10", "LOG2"):
            return self._call(shown, shown, [node.args["expression"]], node, sub)
        x = self._call("LOG10", shown, [node.args["expression"]], node, sub)
        base = self._call("LOG10", shown, [node.this], node, sub)
        return Binary("/", x, base, DataType.DOUBLE)

    def _trim(self, node: exp.Trim, shown: str, sub: _Sub) -> Expr:
        """``TRIM``/``LTRIM``/``RTRIM(s [, chars])`` and ``TRIM([BOTH|LEADING|TRAILING]
        [chars] FROM s)``: spaces (or any of ``chars``) off both ends, the left or the right."""
        position = str(node.args.get("position") or "BOTH").upper()
        name = {"LEADING": "LTRIM", "TRAILING": "RTRIM"}.get(position, "TRIM")
        args = [node.this] + ([node.expression] if node.expression is not None else [])
        if node.args.get("collation") is not None:
            raise self.error(UnsupportedError, f"{shown} with a collation is not supported", node)
        return self._call(name, shown, args, node, sub)

    def _pad(self, node: exp.Pad, shown: str, sub: _Sub) -> Expr:
        """``LPAD``/``RPAD(s, n, pad)``; ``pad`` must be a non-empty string literal: DuckDB
        stops on an empty one where padding is needed, which Spark and DataFusion do not."""
        name = "LPAD" if node.args.get("is_left") else "RPAD"
        pad = node.args.get("fill_pattern")
        args = [node.this, node.expression] + ([pad] if pad is not None else [])
        call = self._call(name, shown, args, node, sub)
        count = call.args[1]
        if count.dtype is DataType.BIGINT and not isinstance(count, Literal):
            raise self.error(
                BindError,
                f"{shown}'s length must be an INTEGER, not a BIGINT (as in DuckDB)",
                node.expression,
                "CAST it: CAST(n AS INTEGER)",
            )
        fill = call.args[2]
        if not (isinstance(fill, Literal) and isinstance(fill.value, str) and fill.value):
            raise self.error(
                BindError,
                f"{shown}'s padding must be a non-empty string literal",
                pad,
                f"e.g. {shown}(s, 8, ' ')",
            )
        return call

    def _column(self, node: exp.Column, schema: Schema) -> Expr:
        if isinstance(node.this, exp.Star):
            raise self.error(BindError, "'t.*' is only allowed in the SELECT list", node)
        if node.args.get("db") or node.args.get("catalog"):
            raise self.error(BindError, f"too many name parts in '{node.sql()}'", node)
        name, qual = node.name, node.table
        if qual:
            quals = {f.qualifier for f in schema if f.qualifier}
            if qual.lower() not in {q.lower() for q in quals}:
                raise self.error(
                    BindError,
                    f"unknown table alias '{qual}'",
                    node,
                    did_you_mean(qual, quals)
                    or (f"aliases in scope: {', '.join(sorted(quals))}" if quals else None),
                )
            cands = [
                i
                for i, f in enumerate(schema)
                if f.qualifier
                and f.qualifier.lower() == qual.lower()
                and f.name.lower() == name.lower()
            ]
            if not cands:
                names = [
                    f.name for f in schema if f.qualifier and f.qualifier.lower() == qual.lower()
                ]
                raise self.error(
                    BindError,
                    f"unknown column '{name}' in '{qual}'",
                    node,
                    did_you_mean(name, names) or f"columns of '{qual}': {', '.join(names)}",
                )
        else:
            cands = [i for i, f in enumerate(schema) if f.name.lower() == name.lower()]
            if not cands:
                names = [f.name for f in schema]
                raise self.error(
                    BindError,
                    f"unknown column '{name}'",
                    node,
                    did_you_mean(name, names)
                    or (f"available columns: {', '.join(dict.fromkeys(names))}" if names else None),
                )
        if len(cands) > 1:
            options = " or ".join(f"{schema[i].qualifier}.{schema[i].name}" for i in cands)
            raise self.error(
                BindError,
                f"column reference '{node.sql()}' is ambiguous",
                node,
                f"qualify it: {options}",
            )
        i = cands[0]
        f = schema[i]
        # Display name: qualified only where the bare name would be ambiguous in this schema.
        clash = sum(1 for g in schema if g.name.lower() == f.name.lower()) > 1
        shown = f"{f.qualifier}.{f.name}" if clash and f.qualifier else f.name
        return ColumnRef(i, shown, f.dtype)

    def _literal(self, node: exp.Literal) -> Literal:
        if node.is_string:
            return Literal(node.this, DataType.VARCHAR)
        text = node.this
        try:
            if text.isdigit():
                value = int(text)
                if value >= 2**63:
                    raise self.error(BindError, f"integer literal {text} is out of range", node)
                return Literal(value, DataType.BIGINT)
            value_f = float(text)
            if not math.isfinite(value_f):
                raise self.error(BindError, f"number literal {text} is out of range", node)
            return Literal(value_f, DataType.DOUBLE)
        except ValueError:
            raise self.error(BindError, f"invalid number '{text}'", node) from None

    def _require_boolean(self, e: Expr, ast: exp.Expression, clause: str) -> None:
        if e.dtype not in (DataType.BOOLEAN, DataType.NULL):
            raise self.error(
                BindError,
                f"{clause} needs a BOOLEAN condition, got {e.dtype}",
                ast,
                "compare the value, e.g. value > 0",
            )


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _chain_operands(node: exp.Expression) -> list[exp.Expression]:
    """The operands of an AND (or OR) chain, in order, through parentheses (iteratively:
    ``a OR b OR ...`` parses left-deep, as deep as it is long)."""
    kind = type(node)
    out: list[exp.Expression] = []
    stack: list[exp.Expr] = [node]
    while stack:
        n = _unparen(stack.pop())
        if type(n) is kind:
            stack += [n.expression, n.this]
        else:
            assert isinstance(n, exp.Expression)
            out.append(n)
    return out


def _as_in_list(operands: list[Expr], comparison: str) -> InList | None:
    """``x = c1 OR x = c2 OR ...`` (``comparison`` "="; or the operands of ``x <> c1 AND
    x <> c2 AND ...``, "<>"; constants, one x) as ``x IN (c1, c2, ...)``, else None."""
    value: Expr | None = None
    items = []
    for e in operands:
        if not (isinstance(e, Binary) and e.op == comparison):
            return None
        if isinstance(e.right, Literal) and not isinstance(e.left, Literal):
            x, c = e.left, e.right
        elif isinstance(e.left, Literal) and not isinstance(e.right, Literal):
            x, c = e.right, e.left
        else:
            return None
        if value is None:
            value = x
        elif x != value:
            return None
        items.append(c)
    assert value is not None
    return InList(value, tuple(items))

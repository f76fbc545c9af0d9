"""Aggregates and projection: GROUP BY, aggregate calls, HAVING and the SELECT list.

GROUP BY / aggregates / DISTINCT give an ``aggregate`` (keys, then aggregate calls), HAVING a
``select`` above it, and the SELECT list a ``project``. Above the aggregate, grouping keys and
aggregate calls become column references to its output.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from optimizer.ir.errors import BindError, QueryError, UnsupportedError, did_you_mean
from optimizer.ir.expr import AggCall, ColumnRef, Expr, Literal, columns_used
from optimizer.ir.plan import Aggregate, Project, Select
from optimizer.ir.schema import Field, Schema
from optimizer.ir.types import DataType, aggregate_result
from optimizer.sql.bind.scalars import ScalarBinder
from optimizer.sql.bind.scope import FromItem, Scope

_AGGS: dict[type, str] = {
    exp.Count: "COUNT",
    exp.Sum: "SUM",
    exp.Avg: "AVG",
    exp.Min: "MIN",
    exp.Max: "MAX",
    exp.Median: "MEDIAN",
}


class ProjectionBinder(ScalarBinder):
    """Binds the SELECT list, GROUP BY, HAVING and DISTINCT of one SELECT level."""

    def _bind_projection(self, select: exp.Select, scope: Scope, node: str) -> tuple[str, Schema]:
        combined = scope.schema
        items = self._expand_stars(select, scope)
        group = select.args.get("group")
        having = select.args.get("having")
        has_aggs = any(self._has_aggregate(e) for e, _ in items) or (
            having is not None and self._has_aggregate(having.this)
        )
        distinct = bool(select.args.get("distinct"))

        if group is None and not has_aggs:
            if having is not None:
                raise self.error(
                    BindError,
                    "HAVING needs GROUP BY or an aggregate",
                    having.this,
                    "use WHERE for conditions on single rows",
                )
            exprs = [self.expr(e, combined) for e, _ in items]
            names = self._output_names(items, exprs, select)
            out = self._project(node, combined, exprs, names)
            if distinct:
                out = self._distinct(out)
            return out, self.builder.op(out).schema

        # Aggregation.
        keys: list[Expr] = []
        key_asts: list[exp.Expression] = []
        for g in group.expressions if group is not None else []:
            g_ast = self._resolve_group_ref(g, items)
            self._no_aggregates(g_ast, "GROUP BY", "group by columns or expressions")
            bound = self.expr(g_ast, combined)
            if bound not in keys:
                keys.append(bound)
                key_asts.append(g_ast)
        aggs: list[AggCall] = []
        for e, _ in items:
            self._collect_aggs(e, combined, aggs)
        if having is not None:
            self._collect_aggs(having.this, combined, aggs)
        key_fields = tuple(
            Field(combined[k.index].name, k.dtype, combined[k.index].qualifier)
            if isinstance(k, ColumnRef)
            else Field(k.display(), k.dtype)
            for k in keys
        )
        agg_fields = tuple(Field(a.display(), a.dtype) for a in aggs)
        agg_schema = Schema(key_fields + agg_fields)
        agg_node = self.builder.add(
            lambda i: Aggregate(i, agg_schema, tuple(keys), tuple(aggs)), node
        )
        ctx = _AggContext(keys, aggs, combined)
        top = agg_node
        if having is not None:
            pred = self._post_agg(having.this, ctx)
            self._require_boolean(pred, having.this, "HAVING")
            top = self.builder.add(lambda i: Select(i, agg_schema, pred), agg_node)
        exprs = [self._post_agg(e, ctx) for e, _ in items]
        names = self._output_names(items, exprs, select)
        out = self._project(top, agg_schema, exprs, names)
        if distinct:
            out = self._distinct(out)
        return out, self.builder.op(out).schema

    def _project(self, node: str, schema: Schema, exprs: list[Expr], names: list[str]) -> str:
        # A projection makes a new relation: its columns lose their FROM qualifiers.
        out_schema = Schema(tuple(Field(n, e.dtype) for e, n in zip(exprs, names, strict=True)))
        in_order = len(exprs) == len(schema) and all(
            isinstance(e, ColumnRef) and e.index == i for i, e in enumerate(exprs)
        )
        if in_order and all(schema[i].name == n for i, n in enumerate(names)):
            return node
        op = self.builder.op(node)
        if in_order and isinstance(op, Aggregate):
            # A pure renaming of this level's aggregate output: name the aggregate's columns
            # instead of adding a project (the dissertation's plans have no such operator).
            self.builder.replace(Aggregate(op.id, out_schema, op.group_by, op.aggs))
            return node
        return self.builder.add(lambda i: Project(i, out_schema, tuple(exprs)), node)

    def _distinct(self, node: str) -> str:
        schema = self.builder.op(node).schema
        keys = tuple(ColumnRef(i, f.name, f.dtype) for i, f in enumerate(schema))
        return self.builder.add(lambda i: Aggregate(i, schema, keys, ()), node)

    def _expand_stars(
        self, select: exp.Select, scope: Scope
    ) -> list[tuple[exp.Expression, str | None]]:
        """SELECT items as (expression AST, alias); ``*`` and ``t.*`` expanded to columns."""
        out: list[tuple[exp.Expression, str | None]] = []
        for item in select.expressions:
            star = item.this if isinstance(item, exp.Column) else item
            if isinstance(star, exp.Star):
                for key in ("except_", "replace", "rename", "ilike"):
                    if star.args.get(key):
                        word = "EXCLUDE" if key == "except_" else key.upper()
                        raise self.error(
                            UnsupportedError,
                            f"SELECT * {word} is not supported",
                            item,
                            "list the columns you want",
                        )
            if isinstance(item, exp.Star):
                for it in scope.items:
                    out += [(self._column_ast(f, it), None) for f in it.schema]
                continue
            if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
                qual = item.table
                hits = [
                    it
                    for it in scope.items
                    if it.qualifier and it.qualifier.lower() == qual.lower()
                ]
                if not hits:
                    quals = [it.qualifier for it in scope.items if it.qualifier]
                    raise self.error(
                        BindError,
                        f"unknown table alias '{qual}'",
                        item,
                        did_you_mean(qual, quals),
                    )
                out += [(self._column_ast(f, hits[0]), None) for f in hits[0].schema]
                continue
            if isinstance(item, exp.Alias):
                if isinstance(item.this, exp.Star):
                    raise self.error(BindError, "cannot alias '*'", item)
                out.append((item.this, item.alias))
            else:
                out.append((item, None))
        return out

    @staticmethod
    def _column_ast(f: Field, it: FromItem) -> exp.Expression:
        col = exp.column(f.name, table=it.qualifier) if it.qualifier else exp.column(f.name)
        col.meta["expanded"] = True
        return col

    def _output_names(
        self,
        items: list[tuple[exp.Expression, str | None]],
        exprs: list[Expr],
        select: exp.Select,
    ) -> list[str]:
        """The SELECT list's column names: as written, a name an earlier column has (in any
        case: names are case-insensitive) getting ``_1``, ``_2``, ... appended. Renames are
        noted (one note per SELECT list, at the first renamed item, naming each)."""
        names: list[str] = []
        used: dict[str, str] = {}
        renamed: list[str] = []
        first: exp.Expression | None = None
        for (ast, alias), e in zip(items, exprs, strict=True):
            if alias:
                base = alias
            elif isinstance(ast, exp.Column):
                base = ast.name
            else:
                base = e.display()
            name, n = base, 0
            while name.lower() in used:
                n += 1
                name = f"{base}_{n}"
            if n:
                taken = used[base.lower()]
                other = f" ('{taken}' is taken)" if taken != base else ""
                renamed.append(f"'{base}' -> '{name}'{other}")
                first = first or (_star_of(select) if ast.meta.get("expanded") else ast)
            used[name.lower()] = name
            names.append(name)
        if renamed:
            self.note(
                "result column names must differ (case-insensitively); renamed "
                + ", ".join(renamed),
                first or select,
            )
        return names

    def _resolve_group_ref(
        self, g: exp.Expression, items: list[tuple[exp.Expression, str | None]]
    ) -> exp.Expression:
        """GROUP BY 2 (ordinal) and GROUP BY alias refer to SELECT items."""
        if isinstance(g, exp.Literal) and not g.is_string:
            try:
                n = int(g.this)
            except ValueError:
                raise self.error(BindError, "GROUP BY position must be an integer", g) from None
            if not 1 <= n <= len(items):
                raise self.error(
                    BindError,
                    f"GROUP BY position {n} is not in the SELECT list",
                    g,
                    f"positions run from 1 to {len(items)}",
                )
            return items[n - 1][0]
        if isinstance(g, exp.Column) and not g.table:
            for ast, alias in items:
                if (
                    alias
                    and alias.lower() == g.name.lower()
                    and not (isinstance(ast, exp.Column) and ast.name.lower() == g.name.lower())
                ):
                    return ast
        return g

    def _has_aggregate(self, node: exp.Expression) -> bool:
        return any(isinstance(n, tuple(_AGGS)) or self._is_agg_func(n) for n in node.walk())

    @staticmethod
    def _is_agg_func(n: exp.Expr) -> bool:
        return isinstance(n, exp.AggFunc)

    def _no_aggregates(self, node: exp.Expression, clause: str, hint: str) -> None:
        for n in node.walk():
            if isinstance(n, exp.AggFunc):
                raise self.error(
                    BindError, f"aggregate functions are not allowed in {clause}", n, hint
                )

    def _agg_call(self, node: exp.AggFunc, schema: Schema) -> AggCall:
        func = _AGGS.get(type(node))
        if func is None:
            name = node.sql_name() if hasattr(node, "sql_name") else node.key.upper()
            raise self.error(
                UnsupportedError,
                f"aggregate function {name} is not supported",
                node,
                "supported: COUNT, SUM, AVG, MIN, MAX, MEDIAN, COUNT(DISTINCT ...)",
            )
        arg_ast = node.this
        distinct = False
        if isinstance(arg_ast, exp.Distinct):
            if func != "COUNT":
                raise self.error(
                    UnsupportedError,
                    f"{func}(DISTINCT ...) is not supported",
                    node,
                    "only COUNT(DISTINCT ...) is supported",
                )
            if len(arg_ast.expressions) != 1:
                raise self.error(
                    UnsupportedError, "COUNT(DISTINCT ...) takes exactly one expression", node
                )
            distinct = True
            arg_ast = arg_ast.expressions[0]
            if isinstance(arg_ast, exp.Star):
                raise self.error(
                    UnsupportedError,
                    "COUNT(DISTINCT *) is not supported",
                    node,
                    "count one column: COUNT(DISTINCT col)",
                )
        if func == "MEDIAN" and node.args.get("expression") is not None:
            raise self.error(BindError, "MEDIAN takes one argument", node)
        for inner in arg_ast.walk() if arg_ast is not None else []:
            if isinstance(inner, exp.AggFunc):
                raise self.error(
                    BindError,
                    "aggregate functions cannot be nested",
                    inner,
                    "compute the inner aggregate in a derived table",
                )
        if arg_ast is None or isinstance(arg_ast, exp.Star):
            if func != "COUNT":
                raise self.error(BindError, f"{func}(*) is not valid", node, f"use {func}(column)")
            return AggCall("COUNT", None, False, DataType.BIGINT)
        arg = self.expr(arg_ast, schema)
        if func in ("SUM", "AVG", "MEDIAN") and not arg.dtype.is_numeric:
            raise self.error(
                BindError, f"{func} needs a numeric argument, got {arg.dtype}", arg_ast
            )
        if func in ("MIN", "MAX") and arg.dtype is DataType.BOOLEAN:
            raise self.error(BindError, f"{func} of a BOOLEAN is not supported", arg_ast)
        return AggCall(func, arg, distinct, aggregate_result(func, arg.dtype))

    def _collect_aggs(self, node: exp.Expression, schema: Schema, aggs: list[AggCall]) -> None:
        if isinstance(node, exp.AggFunc):
            call = self._agg_call(node, schema)
            if call not in aggs:
                aggs.append(call)
            return
        for child in node.iter_expressions():
            self._collect_aggs(child, schema, aggs)

    def _post_agg(self, node: exp.Expression, ctx: _AggContext) -> Expr:
        """Bind an expression above the aggregate: keys and aggregates become column refs."""
        n_keys = len(ctx.keys)
        if isinstance(node, exp.AggFunc):
            call = self._agg_call(node, ctx.input)
            i = ctx.aggs.index(call)
            return ColumnRef(n_keys + i, call.display(), call.dtype)
        if not self._has_aggregate(node):
            try:
                bound = self.expr(node, ctx.input)
            except QueryError:
                bound = None
            if bound is not None and bound in ctx.keys:
                k = ctx.keys.index(bound)
                return ColumnRef(k, _key_name(bound, ctx.input), bound.dtype)
            if bound is not None and not columns_used(bound):
                return bound  # a constant
        if isinstance(node, exp.Column):
            bound_col = self.expr(node, ctx.input)  # raises unknown/ambiguous first
            raise self.error(
                BindError,
                f"column '{node.sql()}' must appear in GROUP BY or be used in an aggregate "
                "function",
                node,
                f"add it to GROUP BY or wrap it, e.g. MAX({node.sql()})"
                if not isinstance(bound_col, Literal)
                else None,
            )
        return self.expr(node, Schema(()), post_agg=lambda child: self._post_agg(child, ctx))


@dataclass
class _AggContext:
    keys: list[Expr]
    aggs: list[AggCall]
    input: Schema


def _key_name(e: Expr, schema: Schema) -> str:
    return schema[e.index].name if isinstance(e, ColumnRef) else e.display()


def _star_of(select: exp.Select) -> exp.Expression | None:
    """The first ``*`` or ``alias.*`` of a SELECT list (where expanded columns come from)."""
    for item in select.expressions:
        if isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        ):
            return item
    return None

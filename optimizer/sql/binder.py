"""Binder: a parsed CQL SELECT + a catalog -> a typed LogicalPlan.

How a query becomes a plan (one SELECT level; derived tables recurse):

1. Each FROM item becomes a relation: a stream reference gives ``source -> window`` (one
   source per stream per query, shared by all its windows); a derived table is bound
   recursively. The FROM items' columns, concatenated in order, form the *combined schema*
   that names resolve against (``alias.column`` or an unambiguous ``column``).
2. The ON and WHERE predicates are split into conjuncts. A conjunct over one FROM item
   becomes a ``select`` right above that item (filters near the windows, as the
   dissertation's plans place them); the others become the condition of the first join at
   which all their inputs are present. Joins are left-deep in FROM order: Phase One of the
   optimizer reorders them.
3. GROUP BY / aggregates / DISTINCT give an ``aggregate`` (keys, then aggregate calls),
   HAVING a ``select`` above it, and the SELECT list a ``project``.
4. The top level adds the R2S operator (RSTREAM unless ISTREAM/DSTREAM is written) and the
   ``sink``.

Every user mistake raises a positioned QueryError subclass.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from optimizer.ir.catalog import TIME_UNITS_MS, Catalog, StreamDef
from optimizer.ir.errors import (
    BindError,
    QueryError,
    QuerySyntaxError,
    Source,
    UnsupportedError,
    did_you_mean,
)
from optimizer.ir.expr import (
    LEFT_DEEP_OPERANDS,
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
    chain,
    columns_used,
    conjoin,
    conjuncts,
    shift_columns,
)
from optimizer.ir.functions import FUNCTION_ALIASES, FUNCTIONS, unify_types
from optimizer.ir.plan import (
    R2S,
    Aggregate,
    Join,
    LogicalPlan,
    PlanBuilder,
    Project,
    Select,
    Sink,
    StreamMode,
    Window,
    WindowKind,
)
from optimizer.ir.plan import Source as SourceOp
from optimizer.ir.schema import Field, Schema
from optimizer.ir.types import (
    TYPE_NAMES,
    DataType,
    aggregate_result,
    arithmetic_result,
    comparable,
)
from optimizer.sql.dialect import TIME_UNITS, StreamWindow
from optimizer.sql.parse import MAX_DEPTH as PARSE_MAX_DEPTH

#: Largest window size or slide in stream ticks (exact in a double, no int64 overflow).
_MAX_TICKS = 2**53
_REL_MODIFIERS = {
    "sample": "TABLESAMPLE",
    "pivots": "PIVOT / UNPIVOT",
    "laterals": "LATERAL",
    "joins": "a parenthesized join",
    "version": "time travel (AT / AS OF)",
    "ordinality": "WITH ORDINALITY",
}
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
_AGGS: dict[type, str] = {
    exp.Count: "COUNT",
    exp.Sum: "SUM",
    exp.Avg: "AVG",
    exp.Min: "MIN",
    exp.Max: "MAX",
    exp.Median: "MEDIAN",
}
_SCALAR_FUNCS: dict[type, str] = {
    exp.Abs: "ABS",
    exp.Coalesce: "COALESCE",
    exp.Greatest: "GREATEST",
    exp.Least: "LEAST",
    exp.Floor: "FLOOR",
    exp.Ceil: "CEIL",
    exp.Round: "ROUND",
}


#: The slide-instant column every result row gets (CONTRACT.md); no result column may use it.
INSTANT_COLUMN = "_ts"

#: Deepest query AST the binder accepts (a ``+`` chain of n terms is about n levels deep;
#: parentheses and AND / OR chains are not depth).
MAX_DEPTH = PARSE_MAX_DEPTH
#: Clause nodes: a too-deep expression is reported from the node right below one of these.
_CLAUSES = (exp.Select, exp.Where, exp.Having, exp.Group, exp.Join, exp.From, exp.Subquery)


def span(node: exp.Expr) -> tuple[int, int]:
    """Character span (start, length) of a node, from the positions sqlglot keeps."""
    starts, ends = [], []
    for n in node.walk():
        meta = n.meta if isinstance(n, exp.Expr) else None
        if meta and "start" in meta:
            starts.append(meta["start"])
            ends.append(meta["end"])
    if isinstance(node, StreamWindow):
        return node.args["start"], node.args["end"] - node.args["start"] + 1
    if not starts:
        return 0, 1
    return min(starts), max(ends) - min(starts) + 1


@dataclass
class _Item:
    """One FROM item: its plan node, qualifier and columns (offset into the combined schema)."""

    node: str
    qualifier: str | None
    schema: Schema
    offset: int = 0
    ast: exp.Expression | None = None


@dataclass
class _Scope:
    """The combined schema of one SELECT level's FROM items."""

    items: list[_Item] = field(default_factory=list)

    @property
    def schema(self) -> Schema:
        fields: tuple[Field, ...] = ()
        for it in self.items:
            fields += it.schema.fields
        return Schema(fields)

    def item_of(self, index: int) -> int:
        for k, it in enumerate(self.items):
            if it.offset <= index < it.offset + len(it.schema):
                return k
        raise IndexError(index)


class Binder:
    """Binds one query; holds the plan builder so all levels share sources and id counters."""

    def __init__(self, catalog: Catalog, source: Source) -> None:
        self.catalog = catalog
        self.src = source
        self.builder = PlanBuilder()
        self._sources: dict[str, str] = {}
        #: The query's time base: the finest time unit among the streams it reads. Every
        #: stream's timestamps are converted to it at run time, so window sizes, slides and
        #: slide instants are all in its ticks (docs/semantics.md, "Time base").
        self.time_unit = "s"

    # -- errors ---------------------------------------------------------------------------

    def error(
        self, cls: type[QueryError], message: str, node: exp.Expr | None, hint: str | None = None
    ) -> QueryError:
        offset, length = span(node) if node is not None else (0, 1)
        return cls(message, self.src, offset, length, hint)

    # -- entry ----------------------------------------------------------------------------

    def bind(self, select: exp.Select) -> LogicalPlan:
        self._check_depth(select)
        self.time_unit = self._time_base(select)
        mode = self._r2s_mode(select)
        try:
            top, schema = self.bind_select(select)
        except RecursionError:
            raise self.error(
                UnsupportedError,
                "the query is nested too deeply",
                select,
                "simplify the expression or split it over derived tables",
            ) from None
        self._check_instant_column(select, schema)
        r2s = self.builder.add(lambda i: R2S(i, schema, mode), top)
        sink = self.builder.add(lambda i: Sink(i, schema), r2s)
        return self.builder.build(sink)

    def _time_base(self, select: exp.Select) -> str:
        """The finest time unit among the catalog streams the query reads (any nesting
        level); ``s`` when it reads none (binding then fails with a positioned error)."""
        units = {
            stream.time_unit
            for table in select.find_all(exp.Table)
            if table.args.get("cql_window") is not None
            and (stream := self.catalog.get(table.name)) is not None
        }
        return min(units, key=lambda u: TIME_UNITS_MS[u]) if units else "s"

    def _check_instant_column(self, select: exp.Select, schema: Schema) -> None:
        """Refuse a result column named ``_ts`` (any case): every output row gets the slide
        instant as ``_ts`` (CONTRACT.md), and a second one would be dropped by JSON lines,
        doubled in the CSV header and make the Parquet file unreadable."""
        if not any(f.name.lower() == INSTANT_COLUMN for f in schema):
            return
        named: exp.Expression | None = None
        star: exp.Expression | None = None
        for item in select.expressions:
            is_star = isinstance(item, exp.Star) or (
                isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
            )
            name = (
                item.alias
                if isinstance(item, exp.Alias)
                else item.name
                if isinstance(item, exp.Column) and not is_star
                else ""
            )
            if name.lower() == INSTANT_COLUMN:
                named = item
                break
            if is_star and star is None:
                star = item
        message = (
            f"a result column is named {INSTANT_COLUMN}, the name of the slide-instant column "
            "hycq adds to every result row"
        )
        if named is None and star is not None:
            raise self.error(
                BindError,
                f"SELECT * yields a column named {INSTANT_COLUMN}, the name of the "
                "slide-instant column hycq adds to every result row",
                star,
                f"list the columns instead and rename that one, e.g. {INSTANT_COLUMN} AS t",
            )
        raise self.error(
            BindError, message, named or select, f"rename it, e.g. AS {INSTANT_COLUMN}_value"
        )

    def _check_depth(self, select: exp.Select) -> None:
        """Reject expressions nested deeper than MAX_DEPTH levels (iteratively, so any depth
        is measured): the engines translate expressions recursively (Python source for the
        row engine, sqlglot SQL for DuckDB/Spark), and Python nests at most ~200 levels."""
        deepest = 0
        node: exp.Expr = select
        # (node, depth, the type of its nearest ancestor that is not a parenthesis)
        stack: list[tuple[exp.Expr, int, type]] = [(select, 1, exp.Select)]
        while stack:
            n, d, above = stack.pop()
            if d > deepest:
                deepest, node = d, n
            kind = above if isinstance(n, exp.Paren) else type(n)
            for child in n.iter_expressions():
                # Not depth: parentheses, and the links of an AND / OR chain (bound flat,
                # compiled balanced or as one IN list).
                same = isinstance(child, exp.Paren) or (
                    isinstance(child, exp.And | exp.Or) and type(child) is kind
                )
                stack.append((child, d if same else d + 1, kind))
        if deepest <= MAX_DEPTH:
            return
        # Point at the whole expression: the outermost node below its clause.
        while node.parent is not None and not isinstance(node.parent, _CLAUSES):
            node = node.parent
        raise self.error(
            UnsupportedError,
            f"the query is nested too deeply ({deepest} levels; at most {MAX_DEPTH})",
            node,
            "simplify the expression or split it over derived tables",
        )

    def _r2s_mode(self, select: exp.Select) -> StreamMode:
        mods = [m.name.upper() for m in select.args.get("operation_modifiers") or []]
        modes = [m for m in mods if m in ("ISTREAM", "DSTREAM", "RSTREAM")]
        if len(modes) > 1:
            offset, length = self._modifier_span(select, 1)
            raise QuerySyntaxError(
                f"conflicting output modes {', '.join(modes)}",
                self.src,
                offset,
                length,
                "write one of ISTREAM, DSTREAM or RSTREAM",
            )
        return StreamMode(modes[0].lower()) if modes else StreamMode.RSTREAM

    def _modifier_span(self, select: exp.Select, index: int) -> tuple[int, int]:
        """Span of the ``index``-th ISTREAM/DSTREAM/RSTREAM keyword of a SELECT."""
        return self._keyword_span(select, r"\b(?:ISTREAM|DSTREAM|RSTREAM)\b", index)

    def _keyword_span(self, node: exp.Expression, pattern: str, index: int = 0) -> tuple[int, int]:
        """Span of the ``index``-th match of ``pattern`` in a node's text (keywords have no
        node of their own), or the node's span."""
        start, length = span(node)
        text = self.src.text[start : start + length]
        hits = [(start + m.start(), len(m.group(0))) for m in re.finditer(pattern, text, re.I)]
        return hits[index] if index < len(hits) else (start, length)

    # -- one SELECT level -----------------------------------------------------------------

    def bind_select(self, select: exp.Select) -> tuple[str, Schema]:
        self._reject_unsupported(select)
        scope = self._bind_from(select)
        combined = scope.schema

        where = select.args.get("where")
        preds: list[tuple[Expr, exp.Expression]] = []
        if where is not None:
            self._no_aggregates(where.this, "WHERE", "use HAVING for conditions on aggregates")
            pred = self.expr(where.this, combined)
            self._require_boolean(pred, where.this, "WHERE")
            preds += [(c, where.this) for c in conjuncts(pred)]
        for it in scope.items[1:]:
            join_ast = it.ast
            on = join_ast.args.get("on") if join_ast is not None else None
            if on is not None:
                self._no_aggregates(on, "ON", "aggregate in a derived table and join on that")
                # ON may only use items up to and including this one (SQL scoping).
                visible = Schema(combined.fields[: it.offset + len(it.schema)])
                pred = self.expr(on, visible)
                self._require_boolean(pred, on, "ON")
                preds += [(c, on) for c in conjuncts(pred)]

        node = self._build_joins(scope, preds)
        return self._bind_projection(select, scope, node)

    def _reject_unsupported(self, select: exp.Select) -> None:
        for key, what, hint in (
            ("distinct", None, None),
            ("laterals", "LATERAL", "use a derived table in FROM"),
            ("prewhere", "PREWHERE", "use WHERE"),
            ("windows", "a WINDOW clause", "use CQL windows on streams"),
            ("sample", "TABLESAMPLE", "filter with WHERE"),
            ("connect", "CONNECT BY", None),
        ):
            value = select.args.get(key)
            if not value:
                continue
            if key == "distinct":
                if value.args.get("on"):
                    raise self.error(
                        UnsupportedError,
                        "DISTINCT ON is not supported",
                        value.args["on"],
                        "use GROUP BY",
                    )
                continue
            at = value[0] if isinstance(value, list) else value
            raise self.error(UnsupportedError, f"{what} is not supported", at, hint)
        group = select.args.get("group")
        if group is not None:
            if group.args.get("all") is True:
                offset, length = self._keyword_span(select, r"\bGROUP\s+BY\s+ALL\b")
                raise UnsupportedError(
                    "GROUP BY ALL is not supported",
                    self.src,
                    offset,
                    length,
                    "list the grouping columns: GROUP BY a, b",
                )
            for key in ("grouping_sets", "cube", "rollup"):
                if group.args.get(key):
                    raise self.error(
                        UnsupportedError,
                        f"{key.upper().replace('_', ' ')} is not supported",
                        select,
                        "use a plain GROUP BY",
                    )
            for g in group.expressions:
                if isinstance(g, exp.Rollup | exp.Cube | exp.GroupingSets):
                    what = {exp.Rollup: "ROLLUP", exp.Cube: "CUBE"}.get(type(g), "GROUPING SETS")
                    raise self.error(
                        UnsupportedError, f"{what} is not supported", g, "use a plain GROUP BY"
                    )
        if not select.expressions:
            offset, length = self._keyword_span(select, r"\bSELECT\b")
            raise QuerySyntaxError(
                "the SELECT list is empty",
                self.src,
                offset,
                length,
                "name the output columns: SELECT a, COUNT(*) FROM ...",
            )
        if not select.args.get("from_"):
            raise self.error(
                BindError,
                "the query has no FROM clause",
                select,
                "continuous queries read a stream: FROM readings [RANGE 1 MINUTE]",
            )

    # -- FROM -----------------------------------------------------------------------------

    def _bind_from(self, select: exp.Select) -> _Scope:
        scope = _Scope()
        from_ = select.args["from_"]
        entries: list[tuple[exp.Expression, exp.Join | None]] = [(from_.this, None)]
        extras = from_.expressions if hasattr(from_, "expressions") else []
        entries.extend((extra, None) for extra in extras)
        for join in select.args.get("joins") or []:
            self._check_join(join)
            entries.append((join.this, join))
        offset = 0
        seen: dict[str, exp.Expression] = {}
        for rel, join in entries:
            node, qualifier, schema = self._bind_relation(rel)
            if qualifier is not None:
                key = qualifier.lower()
                if key in seen:
                    raise self.error(
                        BindError,
                        f"duplicate table alias '{qualifier}'",
                        rel,
                        "give each FROM item its own alias: FROM readings [...] AS a, "
                        "readings [...] AS b",
                    )
                seen[key] = rel
            scope.items.append(_Item(node, qualifier, schema, offset, join))
            offset += len(schema)
        return scope

    def _check_join(self, join: exp.Join) -> None:
        side = (join.args.get("side") or "").upper()
        kind = (join.args.get("kind") or "").upper()
        if side or kind in ("OUTER", "SEMI", "ANTI", "ASOF", "POSITIONAL"):
            what = " ".join(x for x in (side, kind) if x) or "this"
            raise self.error(
                UnsupportedError,
                f"{what} JOIN is not supported",
                join.this,
                "hycq supports inner joins (JOIN ... ON, or FROM a, b WHERE ...)",
            )
        if join.args.get("method"):
            raise self.error(
                UnsupportedError,
                f"{join.args['method'].upper()} JOIN is not supported",
                join.this,
                "write the join condition explicitly with ON",
            )
        if join.args.get("using"):
            raise self.error(
                UnsupportedError,
                "JOIN ... USING is not supported",
                join.this,
                "write ON a.col = b.col",
            )
        if kind not in ("", "INNER", "CROSS"):
            raise self.error(UnsupportedError, f"{kind} JOIN is not supported", join.this)

    def _bind_relation(self, rel: exp.Expression) -> tuple[str, str | None, Schema]:
        if isinstance(rel, exp.Table) and isinstance(rel.this, exp.Identifier):
            self._reject_modifiers(rel, {"this", "alias", "db", "catalog", "cql_window"})
            return self._bind_stream(rel)
        if isinstance(rel, exp.Subquery) and isinstance(rel.this, exp.Select):
            self._reject_modifiers(rel, {"this", "alias"})
            inner = rel.this
            mods = [m.name.upper() for m in inner.args.get("operation_modifiers") or []]
            if mods:
                offset, length = self._modifier_span(inner, 0)
                raise UnsupportedError(
                    f"{mods[0]} is only allowed in the outermost SELECT",
                    self.src,
                    offset,
                    length,
                    "a derived table is a relation; drop the keyword",
                )
            node, schema = self.bind_select(inner)
            alias = rel.alias or None
            if alias is not None:
                self._check_column_aliases(rel)
            return node, alias, schema.requalify(alias)
        if isinstance(rel, exp.Subquery):
            raise self.error(
                UnsupportedError,
                "this kind of derived table is not supported",
                rel,
                "use (SELECT ...) AS name",
            )
        if isinstance(rel, exp.Table):
            raise self.error(
                UnsupportedError,
                "table functions in FROM are not supported",
                rel,
                "FROM takes streams with windows and derived tables",
            )
        raise self.error(
            UnsupportedError,
            f"{rel.key.upper()} in FROM is not supported",
            rel,
            "FROM takes streams with windows and derived tables",
        )

    def _reject_modifiers(self, rel: exp.Expression, allowed: set[str]) -> None:
        """TABLESAMPLE, PIVOT, time travel... on a FROM item: not silently ignored."""
        for key, value in rel.args.items():
            if key in allowed or value is None or value is False or value == []:
                continue
            what = _REL_MODIFIERS.get(key, key.upper().rstrip("_").replace("_", " "))
            at = value[0] if isinstance(value, list) else value
            raise self.error(
                UnsupportedError,
                f"{what} is not supported",
                at if isinstance(at, exp.Expression) else rel,
                "FROM takes streams with windows and derived tables",
            )

    def _check_column_aliases(self, rel: exp.Subquery) -> None:
        alias = rel.args.get("alias")
        if alias is not None and alias.args.get("columns"):
            raise self.error(
                UnsupportedError,
                "column aliases on derived tables are not supported",
                rel,
                "alias the columns inside the subquery's SELECT list",
            )

    def _bind_stream(self, table: exp.Table) -> tuple[str, str | None, Schema]:
        name = table.name
        if table.args.get("db") or table.args.get("catalog"):
            raise self.error(
                BindError,
                f"qualified stream names are not supported: '{table.sql()}'",
                table,
                "refer to the stream by its catalog name",
            )
        stream = self.catalog.get(name)
        if stream is None:
            known = [s.name for s in self.catalog.streams.values()]
            raise self.error(
                BindError,
                f"unknown stream '{name}'",
                table.this,
                did_you_mean(name, known) or f"streams in the catalog: {', '.join(known)}",
            )
        window_ast = table.args.get("cql_window")
        if window_ast is None:
            raise self.error(
                BindError,
                f"stream '{name}' needs a window",
                table.this,
                f"add one after the name, e.g. {name} [RANGE 5 MINUTES SLIDE 1 SECOND], "
                f"{name} [NOW] or {name} [UNBOUNDED]",
            )
        if table.args.get("alias") is not None and table.args["alias"].args.get("columns"):
            raise self.error(
                UnsupportedError,
                "column aliases on streams are not supported",
                table,
                "rename columns in the SELECT list",
            )
        src_id = self._sources.get(stream.name)
        schema = stream.schema
        qualifier = table.alias or stream.name
        qualified = schema.requalify(qualifier)
        if src_id is None:
            src_id = self.builder.add(
                lambda i: SourceOp(i, schema, stream.name, stream.time_index, self.time_unit)
            )
            self._sources[stream.name] = src_id
        win = self._window(window_ast, stream)
        win_id = self.builder.add(
            lambda i: Window(
                i,
                qualified,
                win[0],
                win[1],
                win[2],
                win[3],
                stream.time_index,
                self.time_unit,
                window_ast.args["text"],
            ),
            src_id,
        )
        return win_id, qualifier, qualified

    def _window(
        self, w: StreamWindow, stream: StreamDef
    ) -> tuple[WindowKind, int | None, int, bool]:
        """(kind, size, slide, slide_rows) in ticks of the query's time base, validated.

        The default slide is one tick of the stream's own unit (1 second for a stream in
        seconds, also when another stream makes the time base milliseconds).
        """
        tick_ms = TIME_UNITS_MS[self.time_unit]
        tick_name = "second" if self.time_unit == "s" else "millisecond"

        def ticks(amount: int, unit: str, what: str) -> int:
            ms = amount * TIME_UNITS[unit]
            if ms % tick_ms:
                raise self.error(
                    BindError,
                    f"{what} {amount} {unit} is not a whole number of {tick_name}s, the time "
                    f"unit of stream '{stream.name}'",
                    w,
                    f"use a multiple of 1 {tick_name}",
                )
            return ms // tick_ms

        kind = WindowKind(w.args["kind"])
        size: int | None = None
        slide_rows = False
        if kind is WindowKind.RANGE:
            size = ticks(w.args["size"], w.args["unit"], "window range")
        elif kind is WindowKind.ROWS:
            size = w.args["size"]
        elif kind is WindowKind.NOW:
            size = 1
        slide_amount = w.args.get("slide")
        if slide_amount is None:
            slide = TIME_UNITS_MS[stream.time_unit] // tick_ms
        elif w.args.get("slide_unit") is None:
            slide, slide_rows = slide_amount, True
        else:
            slide = ticks(slide_amount, w.args["slide_unit"], "window slide")
        for amount, what in ((size, "range"), (slide, "slide")):
            if amount is not None and amount > _MAX_TICKS:
                raise self.error(
                    BindError,
                    f"window {what} is too large",
                    w,
                    "windows span at most a few thousand years",
                )
        # A slide larger than the window is allowed: a hopping window whose gaps no window
        # covers ([RANGE 2 SECONDS SLIDE 5 SECONDS], [ROWS 3 SLIDE 7]; docs/semantics.md).
        return kind, size, slide, slide_rows

    # -- joins and filter placement -------------------------------------------------------

    def _build_joins(self, scope: _Scope, preds: list[tuple[Expr, exp.Expression]]) -> str:
        # Which FROM items each conjunct needs; constants go to the first item.
        pending: list[tuple[Expr, set[int]]] = []
        local: dict[int, list[Expr]] = {}
        for pred, _ in preds:
            items = {scope.item_of(i) for i in columns_used(pred)} or {0}
            if len(items) == 1:
                (k,) = items
                local.setdefault(k, []).append(shift_columns(pred, -scope.items[k].offset))
            else:
                pending.append((pred, items))

        def filtered(k: int) -> str:
            it = scope.items[k]
            cond = conjoin(local.get(k, []))
            if cond is None:
                return it.node
            return self.builder.add(lambda i: Select(i, it.schema, cond), it.node)

        node = filtered(0)
        width = len(scope.items[0].schema)
        schema = scope.items[0].schema
        for k in range(1, len(scope.items)):
            right = filtered(k)
            joined = set(range(k + 1))
            here = [p for p, items in pending if items <= joined]
            pending = [(p, items) for p, items in pending if not items <= joined]
            cond = conjoin(here)
            schema = schema.concat(scope.items[k].schema)
            out_schema, left_width = schema, width
            node = self.builder.add(
                lambda i: Join(i, out_schema, cond, left_width),  # noqa: B023 - called at once
                node,
                right,
            )
            width += len(scope.items[k].schema)
        assert not pending
        return node

    # -- SELECT list, GROUP BY, HAVING ----------------------------------------------------

    def _bind_projection(self, select: exp.Select, scope: _Scope, node: str) -> tuple[str, Schema]:
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
            names = self._output_names(items, exprs)
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
        names = self._output_names(items, exprs)
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
        self, select: exp.Select, scope: _Scope
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
    def _column_ast(f: Field, it: _Item) -> exp.Expression:
        col = exp.column(f.name, table=it.qualifier) if it.qualifier else exp.column(f.name)
        col.meta["expanded"] = True
        return col

    def _output_names(
        self, items: list[tuple[exp.Expression, str | None]], exprs: list[Expr]
    ) -> list[str]:
        names: list[str] = []
        used: set[str] = set()
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
            used.add(name.lower())
            names.append(name)
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

    # -- aggregates -----------------------------------------------------------------------

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
        return self.expr(node, Schema(()), post_agg=(self, ctx))

    # -- scalar expressions ---------------------------------------------------------------

    def expr(
        self,
        node: exp.Expression,
        schema: Schema,
        post_agg: tuple[Binder, _AggContext] | None = None,
    ) -> Expr:
        """Bind a scalar expression over ``schema`` (``post_agg``: children bind above it)."""

        def sub(child: exp.Expression) -> Expr:
            if post_agg is not None:
                return post_agg[0]._post_agg(child, post_agg[1])
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
            if op == "OR" and len(operands) > LEFT_DEEP_OPERANDS:
                listed = _as_in_list(operands)
                if listed is not None:
                    return listed  # x = 1 OR x = 2 OR ...: one set lookup
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

    def _function(self, node: exp.Func, sub: _Sub) -> Expr:
        if isinstance(node, exp.Anonymous):
            raw = node.name.upper()
            args = list(node.expressions)
        else:
            raw = _SCALAR_FUNCS.get(type(node)) or node.sql_name().upper()
            args = list(node.iter_expressions())
        name = FUNCTION_ALIASES.get(raw, raw)
        spec = FUNCTIONS.get(name)
        if spec is None:
            raise self.error(
                UnsupportedError,
                f"unknown function {raw}",
                node,
                did_you_mean(raw, list(FUNCTIONS)) or f"supported: {', '.join(FUNCTIONS)}",
            )
        if not isinstance(node, exp.Anonymous) and node.this is None:
            # sqlglot accepts FLOOR() and CEIL() with no argument.
            raise self.error(BindError, f"wrong number of arguments to {name}", node)
        if len(args) < spec.min_args or (spec.max_args is not None and len(args) > spec.max_args):
            raise self.error(BindError, f"wrong number of arguments to {name}", node)
        bound = [sub(a) for a in args]
        dtype = spec.result([b.dtype for b in bound])
        if dtype is None:
            raise self.error(
                BindError,
                f"{name} cannot take ({', '.join(str(b.dtype) for b in bound)})",
                node,
            )
        if (
            name == "ROUND"
            and len(bound) == 2
            and not (isinstance(bound[1], Literal) and isinstance(bound[1].value, int))
        ):
            raise self.error(BindError, "ROUND's second argument must be an integer literal", node)
        return Func(name, tuple(bound), dtype)

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


#: A callable that binds a child AST.
_Sub = Callable[[exp.Expression], Expr]


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


def _as_in_list(operands: list[Expr]) -> InList | None:
    """``x = c1 OR x = c2 OR ...`` (constants, one x) as ``x IN (c1, c2, ...)``, else None."""
    value: Expr | None = None
    items = []
    for e in operands:
        if not (isinstance(e, Binary) and e.op == "="):
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


@dataclass
class _AggContext:
    keys: list[Expr]
    aggs: list[AggCall]
    input: Schema


def _key_name(e: Expr, schema: Schema) -> str:
    return schema[e.index].name if isinstance(e, ColumnRef) else e.display()

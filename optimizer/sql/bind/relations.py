"""Relations and windows: FROM items become plan nodes, and ON / WHERE conjuncts are placed.

A stream reference gives ``source -> window`` (one source per stream per query, shared by all
its windows); a derived table is bound recursively. A conjunct over one FROM item becomes a
``select`` right above that item (filters near the windows, as the dissertation's plans place
them); the others become the condition of the first join at which all their inputs are
present. Joins are left-deep in FROM order: Phase One of the optimizer reorders them.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from optimizer.ir.catalog import TIME_UNITS_MS, StreamDef
from optimizer.ir.errors import BindError, UnsupportedError, did_you_mean
from optimizer.ir.expr import Expr, columns_used, conjoin, shift_columns
from optimizer.ir.plan import Join, Select, Window, WindowKind
from optimizer.ir.plan import Source as SourceOp
from optimizer.ir.schema import Schema
from optimizer.sql.bind.features import FeatureChecks
from optimizer.sql.bind.scope import FromItem, Scope
from optimizer.sql.dialect import TIME_UNITS, StreamWindow

#: Largest window size or slide in stream ticks (exact in a double, no int64 overflow).
_MAX_TICKS = 2**53


class RelationBinder(FeatureChecks):
    """Binds FROM items (streams with windows, derived tables) and builds the joins."""

    #: Binds one SELECT level (a derived table recurses through it): declared for this
    #: mixin's type, defined by ``Binder`` (optimizer/sql/bind/binder.py), the only class
    #: that combines the mixins.
    bind_select: Callable[[exp.Select], tuple[str, Schema]]

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

    def _bind_from(self, select: exp.Select) -> Scope:
        scope = Scope()
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
            scope.items.append(FromItem(node, qualifier, schema, offset, join))
            offset += len(schema)
        return scope

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

    def _build_joins(self, scope: Scope, preds: list[tuple[Expr, exp.Expression]]) -> str:
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

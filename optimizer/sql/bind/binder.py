"""The binder: one class assembled from the parts in this package (see ``__init__``)."""

from __future__ import annotations

from sqlglot import exp

from optimizer.ir.errors import UnsupportedError
from optimizer.ir.expr import Expr, conjuncts
from optimizer.ir.plan import R2S, LogicalPlan, Sink
from optimizer.ir.schema import Schema
from optimizer.sql.bind.aggregates import ProjectionBinder
from optimizer.sql.bind.relations import RelationBinder


class Binder(RelationBinder, ProjectionBinder):
    """Binds one query; holds the plan builder so all levels share sources and id counters."""

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

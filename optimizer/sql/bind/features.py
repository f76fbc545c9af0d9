"""Feature checks: query shapes hycq does not run are refused with a positioned error and a
hint (never silently ignored): unsupported clauses, joins and FROM modifiers, output modes,
nesting depth, and result columns that clash with the slide-instant column."""

from __future__ import annotations

from sqlglot import exp

from optimizer.ir.errors import BindError, QuerySyntaxError, UnsupportedError
from optimizer.ir.plan import StreamMode
from optimizer.ir.schema import Schema
from optimizer.sql.bind.scope import BinderState
from optimizer.sql.parse import MAX_DEPTH as PARSE_MAX_DEPTH

_REL_MODIFIERS = {
    "sample": "TABLESAMPLE",
    "pivots": "PIVOT / UNPIVOT",
    "laterals": "LATERAL",
    "joins": "a parenthesized join",
    "version": "time travel (AT / AS OF)",
    "ordinality": "WITH ORDINALITY",
}

#: The slide-instant column every result row gets (CONTRACT.md); no result column may use it.
INSTANT_COLUMN = "_ts"

#: Deepest query AST the binder accepts (a ``+`` chain of n terms is about n levels deep;
#: parentheses and AND / OR chains are not depth).
MAX_DEPTH = PARSE_MAX_DEPTH

#: Clause nodes: a too-deep expression is reported from the node right below one of these.
_CLAUSES = (exp.Select, exp.Where, exp.Having, exp.Group, exp.Join, exp.From, exp.Subquery)


class FeatureChecks(BinderState):
    """Checks on the AST that run before (or around) binding."""

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

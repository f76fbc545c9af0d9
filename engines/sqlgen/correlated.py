"""The SQL of a correlated count kept per key (``optimizer.ir.correlated``; DuckDB dialect).

The group's own SQL (the version reading the inner aggregate's state table) is reused three
times with its inputs renamed, so the counts are computed by exactly the expressions the plain
query uses:

* over the rows that entered the left window, joined with the state rows whose value did not
  change (``delta_sql(entered=True)``), and the same over the rows that left it;
* over the whole left window, joined with the state rows that changed (``recount_sql``).

``changes_sql`` marks which state rows changed since the last slide; ``merge_sql`` is one
statement that adds the deltas to the last result's rows of unchanged keys and appends the
recounted keys (one query's fixed cost instead of four).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from optimizer.ir.correlated import CorrelatedShape


class NotCorrelated(ValueError):
    """The group's SQL does not read the window and the state once each."""


@dataclass(frozen=True)
class CorrelatedSQL:
    """Table names and statements of one correlated count."""

    shape: CorrelatedShape
    window_table: str
    state_table: str

    @property
    def entered_table(self) -> str:
        return f"{self.window_table}_{self.shape.top}_entered"

    @property
    def left_table(self) -> str:
        return f"{self.window_table}_{self.shape.top}_left"

    @property
    def same_table(self) -> str:
        return f"{self.state_table}_{self.shape.top}_same"

    @property
    def changed_table(self) -> str:
        return f"{self.state_table}_{self.shape.top}_changed"

    @property
    def previous_table(self) -> str:
        return f"{self.state_table}_{self.shape.top}_previous"

    @property
    def result_table(self) -> str:
        return f"{self.state_table}_{self.shape.top}_result"

    def tables(self) -> list[str]:
        """Every table these statements read (registered by the runtime)."""
        return [
            self.entered_table,
            self.left_table,
            self.same_table,
            self.changed_table,
            self.previous_table,
            self.result_table,
        ]

    def variants(self, group_sql: str) -> tuple[str, str, str]:
        """(entered delta, left delta, recount) statements of ``group_sql``.

        Raises NotCorrelated unless ``group_sql`` reads the window table and the state table
        exactly once each (another reader of either would be renamed with it)."""
        tree = sqlglot.parse_one(group_sql, read="duckdb")
        names = [t.name for t in tree.find_all(exp.Table)]
        if names.count(self.window_table) != 1 or names.count(self.state_table) != 1:
            raise NotCorrelated(
                f"the group's SQL reads {self.window_table} {names.count(self.window_table)} "
                f"times and {self.state_table} {names.count(self.state_table)} times"
            )

        def renamed(window: str, state: str) -> str:
            def fn(node: exp.Expr) -> exp.Expr:
                if isinstance(node, exp.Table) and node.name in (
                    self.window_table,
                    self.state_table,
                ):
                    new = window if node.name == self.window_table else state
                    node = node.copy()
                    node.set("this", exp.to_identifier(new))
                return node

            return tree.transform(fn).sql(dialect="duckdb")

        return (
            renamed(self.entered_table, self.same_table),
            renamed(self.left_table, self.same_table),
            renamed(self.window_table, self.changed_table),
        )

    def changes_sql(self, columns: list[str], doubles: set[str]) -> str:
        """The current state with a column ``_changed``: true for a key that is new or whose
        row differs from the previous slide's (a DOUBLE 0.0 against -0.0 counts as changed:
        equal to ``IS DISTINCT FROM``, but not to every expression)."""
        n = len(self.shape.key_columns)
        keys = [f"k{j}" for j in range(n)]
        on = " AND ".join(f"n.{k} IS NOT DISTINCT FROM p.{k}" for k in keys)
        diffs = ["p._hit IS NULL"]
        for c in columns:
            if c in keys:
                continue
            diffs.append(f"n.{c} IS DISTINCT FROM p.{c}")
            if c in doubles:
                diffs.append(f"(n.{c} = 0 AND CAST(n.{c} AS VARCHAR) <> CAST(p.{c} AS VARCHAR))")
        cols = ", ".join(f"n.{c}" for c in columns)
        return (
            f"SELECT {cols}, ({' OR '.join(diffs)}) AS _changed FROM {self.state_table} AS n "
            f"LEFT JOIN (SELECT *, TRUE AS _hit FROM {self.previous_table}) AS p ON {on}"
        )

    def merge_sql(self, columns: list[str], variants: tuple[str, str, str]) -> str:
        """One statement for the new result: the last result's rows of unchanged keys plus
        the entered matches minus the left ones (rows whose COUNT(*) falls to 0 are gone),
        and the recounted keys. ``columns`` are the result's columns (the top's group keys,
        then its counts); ``variants`` are :meth:`variants` of the group's statement."""
        width = self.shape.group_width
        group, counts = columns[:width], columns[width:]
        on = " AND ".join(f"r.{columns[p]} = s.k{j}" for j, p in enumerate(self.shape.key_columns))
        signed_out = ", ".join([*group, *(f"-d.{c} AS {c}" for c in counts)])
        sums = ", ".join(f"CAST(SUM(u.{c}) AS BIGINT) AS {c}" for c in counts)
        star = columns[self.shape.star]
        delta_in, delta_out, recount = variants
        return (
            f"SELECT {', '.join(f'u.{c}' for c in group)}, {sums} FROM ("
            f"SELECT r.* FROM {self.result_table} AS r SEMI JOIN {self.same_table} AS s ON {on} "
            f"UNION ALL SELECT * FROM ({delta_in}) "
            f"UNION ALL SELECT {signed_out} FROM ({delta_out}) AS d"
            f") AS u GROUP BY {', '.join(f'u.{c}' for c in group)} HAVING SUM(u.{star}) > 0 "
            f"UNION ALL SELECT * FROM ({recount})"
        )

"""Validate a migration candidate and find its external inputs.

A migration candidate is a connected group of R2R operators (select, project, join,
aggregate) that a columnar engine runs as one SQL query. Exactly one of its operators feeds
an operator outside the group: that is the *top*, whose output is the query's result. Every
edge from an operator outside the group (a window, or an operator left on the row engine)
into the group is an *input* table; one outside operator feeding several group operators
(or both sides of a join) is one table.

Example:
    >>> from optimizer.sql import plan_query
    >>> from optimizer.sql.catalog import parse_catalog_text
    >>> cat = parse_catalog_text('''
    ... [streams.readings]
    ... timestamp = "ts"
    ... [streams.readings.columns]
    ... ts = "BIGINT"
    ... value = "DOUBLE"
    ... ''')
    >>> plan = plan_query("SELECT COUNT(*) AS n FROM readings [RANGE 2 SECONDS] WHERE value > 1",
    ...                   cat)
    >>> shape = analyse_group(plan, ["select1", "aggregate1"])
    >>> shape.operators, shape.top, shape.inputs
    (('select1', 'aggregate1'), 'aggregate1', (('window1', 'in0'),))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from optimizer.ir.errors import PlanError, did_you_mean
from optimizer.ir.plan import Category, LogicalPlan


@dataclass(frozen=True, slots=True)
class GroupShape:
    """A validated group: its operators (topological order), top operator and inputs.

    ``inputs`` holds ``(external operator id, table name)`` pairs, the tables named ``in0``,
    ``in1``, ... in the order the group's operators are met in ``plan.topological()``, each
    operator's inputs in port order.
    """

    operators: tuple[str, ...]
    top: str
    inputs: tuple[tuple[str, str], ...]

    def table_of(self, op_id: str) -> str:
        """The input table name of an external operator."""
        for ext, name in self.inputs:
            if ext == op_id:
                return name
        raise KeyError(op_id)


def analyse_group(plan: LogicalPlan, group: Sequence[str], table_prefix: str = "") -> GroupShape:
    """Check that ``group`` is a valid migration candidate of ``plan`` and describe it.

    Raises PlanError when the group is empty, names an unknown or non-R2R operator, is not
    connected, or has more than one operator feeding the rest of the plan. Input tables are
    named ``<table_prefix>in0``, ``<table_prefix>in1``, ... (a prefix keeps the inputs of
    several groups apart when they share one engine connection or session).
    """
    if table_prefix and not (table_prefix.isidentifier() and table_prefix.isascii()):
        raise PlanError(f"table prefix {table_prefix!r} is not a plain identifier")
    if isinstance(group, str):
        raise PlanError("a group is a sequence of operator ids, not one string")
    members = list(dict.fromkeys(group))
    if not members:
        raise PlanError("a migration candidate needs at least one operator")
    for op_id in members:
        if op_id not in plan:
            raise PlanError(
                f"unknown operator {op_id!r} in the group",
                hint=did_you_mean(op_id, plan.topological()),
            )
        op = plan.op(op_id)
        if op.category is not Category.R2R:
            raise PlanError(
                f"{op_id} is a {op.kind} operator; only relational operators (select, "
                "project, join, aggregate) can run as SQL on a columnar engine"
            )
    inside = set(members)
    parts = _components(plan, inside)
    if len(parts) > 1:
        raise PlanError(
            "the operators of a migration candidate must be connected; "
            f"these parts are not: {'; '.join(', '.join(p) for p in parts)}"
        )
    order = tuple(i for i in plan.topological() if i in inside)
    outputs = [i for i in order if any(c not in inside for c in plan.consumers(i))]
    if len(outputs) != 1:
        raise PlanError(
            f"a migration candidate must have exactly one operator feeding the rest of the "
            f"plan; this one has {len(outputs)}" + (f": {', '.join(outputs)}" if outputs else ""),
            hint="add the consumers of all but one of them to the group",
        )
    tables: dict[str, str] = {}
    for op_id in order:
        for src in plan.inputs(op_id):
            if src not in inside and src not in tables:
                tables[src] = f"{table_prefix}in{len(tables)}"
    return GroupShape(order, outputs[0], tuple(tables.items()))


def _components(plan: LogicalPlan, inside: set[str]) -> list[list[str]]:
    """Weakly connected components of the group (edges between group operators only)."""
    seen: set[str] = set()
    parts = []
    for start in sorted(inside):
        if start in seen:
            continue
        part, stack = [], [start]
        seen.add(start)
        while stack:
            cur = stack.pop()
            part.append(cur)
            for nxt in (*plan.inputs(cur), *plan.consumers(cur)):
                if nxt in inside and nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        parts.append(sorted(part))
    return sorted(parts)

"""CQL front end: dialect, parsing, catalog loading and binding to the logical plan IR."""

from __future__ import annotations

from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import Source
from optimizer.ir.plan import LogicalPlan
from optimizer.sql.bind import Binder
from optimizer.sql.parse import parse_select


def bind_query(
    text: str, catalog: Catalog, name: str = "<query>"
) -> tuple[LogicalPlan, tuple[str, ...]]:
    """Parse and bind CQL text: the logical plan and the binder's notes for the user
    (``FILE:LINE:COL: text``, e.g. a result column renamed); raises positioned QueryErrors."""
    source = Source(text, name)
    select = parse_select(source)
    binder = Binder(catalog, source)
    plan = binder.bind(select)
    return plan, tuple(binder.notes)


def plan_query(text: str, catalog: Catalog, name: str = "<query>") -> LogicalPlan:
    """Parse and bind CQL text into a logical plan (raises positioned QueryErrors)."""
    return bind_query(text, catalog, name)[0]


__all__ = ["bind_query", "plan_query"]

"""CQL front end: dialect, parsing, catalog loading and binding to the logical plan IR."""

from __future__ import annotations

from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import Source
from optimizer.ir.plan import LogicalPlan
from optimizer.sql.bind import Binder
from optimizer.sql.parse import parse_select


def plan_query(text: str, catalog: Catalog, name: str = "<query>") -> LogicalPlan:
    """Parse and bind CQL text into a logical plan (raises positioned QueryErrors)."""
    source = Source(text, name)
    select = parse_select(source)
    return Binder(catalog, source).bind(select)


__all__ = ["plan_query"]

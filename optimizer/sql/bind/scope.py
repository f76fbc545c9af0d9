"""Name scopes of one SELECT level, and the state every part of the binder shares.

A SELECT level's FROM items, concatenated in order, form the *combined schema* that column
names resolve against (``alias.column`` or an unambiguous ``column``). ``BinderState`` holds
what all levels of one query share (catalog, query text, plan builder, time base) and builds
positioned errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlglot import exp

from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import QueryError, Source
from optimizer.ir.plan import PlanBuilder
from optimizer.ir.schema import Field, Schema
from optimizer.sql.dialect import StreamWindow


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
class FromItem:
    """One FROM item: its plan node, qualifier and columns (offset into the combined schema)."""

    node: str
    qualifier: str | None
    schema: Schema
    offset: int = 0
    ast: exp.Expression | None = None


@dataclass
class Scope:
    """The combined schema of one SELECT level's FROM items."""

    items: list[FromItem] = field(default_factory=list)

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


class BinderState:
    """What all levels of one query share: the plan builder (so all levels share sources and
    id counters), the catalog, the query text for positioned errors, and the time base."""

    def __init__(self, catalog: Catalog, source: Source) -> None:
        self.catalog = catalog
        self.src = source
        self.builder = PlanBuilder()
        self._sources: dict[str, str] = {}
        #: The query's time base: the finest time unit among the streams it reads. Every
        #: stream's timestamps are converted to it at run time, so window sizes, slides and
        #: slide instants are all in its ticks (docs/semantics.md, "Time base").
        self.time_unit = "s"
        #: Notes for the user (``FILE:LINE:COL: text``): what the binder did that the query
        #: did not say, e.g. a result column renamed so that names differ.
        self.notes: list[str] = []

    def note(self, message: str, node: exp.Expr | None) -> None:
        """Record a positioned note (shown as ``note: FILE:LINE:COL: message``)."""
        offset, _ = span(node) if node is not None else (0, 1)
        line, col = self.src.position(offset)
        self.notes.append(f"{self.src.name}:{line}:{col}: {message}")

    def error(
        self, cls: type[QueryError], message: str, node: exp.Expr | None, hint: str | None = None
    ) -> QueryError:
        offset, length = span(node) if node is not None else (0, 1)
        return cls(message, self.src, offset, length, hint)

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

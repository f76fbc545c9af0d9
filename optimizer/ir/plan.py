"""Logical plan IR: immutable operators in a DAG.

A continuous query is a DAG (Ch. 2): sources -> windows (S2R) -> relational operators (R2R)
-> one R2S operator -> sink. One stream may feed several windows (Q1's self-join), so the plan
is a graph, held in networkx, whose nodes are operator ids and whose edges carry the input
``port`` (0 = left / only input, 1 = right input of a join).

Operators are frozen dataclasses that know their parameters and output schema but not their
inputs: the graph alone says who feeds whom, so a rewrite that rewires the plan never has to
copy operators, and sharing a source between windows needs no special case.

Operator ids are ``<kind><n>``, numbered per kind in the binder's deterministic creation
order, so the same query text always yields the same ids (CONTRACT: placement files use them).

Example:
    >>> from optimizer.ir.schema import Field, Schema
    >>> from optimizer.ir.types import DataType
    >>> s = Schema((Field("ts", DataType.BIGINT), Field("v", DataType.DOUBLE)))
    >>> b = PlanBuilder()
    >>> src = b.add(lambda i: Source(i, s, "readings", 0, "s"))
    >>> win = b.add(lambda i: Window(i, s, WindowKind.RANGE, 300, 1, False, 0, "s",
    ...                              "RANGE 5 MINUTES SLIDE 1 SECOND"), src)
    >>> out = b.add(lambda i: R2S(i, s, StreamMode.RSTREAM), win)
    >>> plan = b.build(b.add(lambda i: Sink(i, s), out))
    >>> [plan.op(i).kind for i in plan.topological()]
    ['source', 'window', 'rstream', 'sink']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Literal

import networkx as nx

from optimizer.ir.errors import InternalError
from optimizer.ir.expr import AggCall, ColumnRef, Expr, column_equality, conjuncts
from optimizer.ir.schema import Schema


class Category(StrEnum):
    """The CQL operator classes of Ch. 2."""

    SOURCE = "source"
    S2R = "s2r"
    R2R = "r2r"
    R2S = "r2s"
    SINK = "sink"


#: The arity of an operator taking any number (at least one) of inputs, e.g. a multiway join.
N_ARY = "n"


@dataclass(frozen=True, slots=True)
class Operator:
    """Base of all logical operators: a stable id and the output schema.

    A kind declares its ``arity``: a number of inputs, or :data:`N_ARY`. What a kind is to
    the rest of the system is either a method here (column lineage, the expressions it
    evaluates, its schema rule) or one registration per concern in an
    :class:`optimizer.ir.dispatch.KindTable` (docs/architecture.md lists them).
    """

    id: str
    schema: Schema

    kind: ClassVar[str] = "operator"
    category: ClassVar[Category] = Category.R2R
    arity: ClassVar[int | Literal["n"]] = 1

    def describe(self) -> str:
        """One-line parameter text for the plan printer."""
        return ""

    def input_column(self, column: int) -> tuple[int, int] | None:
        """``(input port, column)`` that output ``column`` carries unchanged, or None if it
        is computed or unknown. Default: the same column of the one input of a unary
        operator; None for other arities (a node with several inputs says which one)."""
        return (0, column) if self.arity == 1 else None

    def expressions(self) -> tuple[Expr, ...]:
        """The expressions the operator evaluates over its input columns (aggregate calls
        included), for capability checks and column bounds."""
        return ()

    def schema_fits(self, input_widths: Sequence[int]) -> bool:
        """Whether the output schema's width is consistent with the inputs' widths."""
        return True


@dataclass(frozen=True, slots=True)
class Source(Operator):
    """An input stream from the catalog. ``time_column`` indexes the event-time column."""

    stream: str
    time_column: int
    time_unit: str  # "s" or "ms": the unit of the stream's timestamps

    kind: ClassVar[str] = "source"
    category: ClassVar[Category] = Category.SOURCE
    arity: ClassVar[int | Literal["n"]] = 0

    def describe(self) -> str:
        return self.stream


class WindowKind(StrEnum):
    RANGE = "range"  # time-based sliding (tumbling when slide == size)
    ROWS = "rows"  # count-based
    NOW = "now"  # tuples with ts == T
    UNBOUNDED = "unbounded"  # every tuple with ts <= T


@dataclass(frozen=True, slots=True)
class Window(Operator):
    """S2R: the window at slide instant T holds the tuples with T - size < ts <= T.

    ``size`` and ``slide`` are in ticks of the stream's time unit, except that ``size`` counts
    tuples for ROWS windows and ``slide`` counts tuples when ``slide_rows`` is set. Slide
    instants are the multiples of ``slide`` (CONTRACT). NOW has size 1 tick; UNBOUNDED has
    size None.
    """

    window: WindowKind
    size: int | None
    slide: int
    slide_rows: bool
    time_column: int
    time_unit: str
    spec: str  # the window clause as written, for display

    kind: ClassVar[str] = "window"
    category: ClassVar[Category] = Category.S2R

    @property
    def tumbling(self) -> bool:
        return self.window is WindowKind.RANGE and self.size == self.slide

    def describe(self) -> str:
        return f"[{self.spec}]"


@dataclass(frozen=True, slots=True)
class Select(Operator):
    """R2R selection (filter); output schema equals input schema."""

    predicate: Expr

    kind: ClassVar[str] = "select"

    def describe(self) -> str:
        return self.predicate.display()

    def expressions(self) -> tuple[Expr, ...]:
        return (self.predicate,)

    def schema_fits(self, input_widths: Sequence[int]) -> bool:
        return len(self.schema) == input_widths[0]


@dataclass(frozen=True, slots=True)
class Project(Operator):
    """R2R projection / map: one expression per output column."""

    exprs: tuple[Expr, ...]

    kind: ClassVar[str] = "project"

    def input_column(self, column: int) -> tuple[int, int] | None:
        e = self.exprs[column]
        return (0, e.index) if isinstance(e, ColumnRef) else None

    def expressions(self) -> tuple[Expr, ...]:
        return self.exprs

    def schema_fits(self, input_widths: Sequence[int]) -> bool:
        return len(self.schema) == len(self.exprs)

    def describe(self) -> str:
        parts = []
        for e, f in zip(self.exprs, self.schema, strict=True):
            text = e.display()
            parts.append(text if text == f.name else f"{text} AS {f.name}")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Join(Operator):
    """R2R inner join; ``condition`` indexes the left columns then the right columns.

    None is a cross product. Equi-join keys are derived from the condition (``equi_keys``).
    """

    condition: Expr | None
    left_width: int

    kind: ClassVar[str] = "join"
    arity: ClassVar[int | Literal["n"]] = 2

    def input_column(self, column: int) -> tuple[int, int] | None:
        if column < self.left_width:
            return 0, column
        return 1, column - self.left_width

    def expressions(self) -> tuple[Expr, ...]:
        return (self.condition,) if self.condition is not None else ()

    def schema_fits(self, input_widths: Sequence[int]) -> bool:
        return input_widths[0] == self.left_width and len(self.schema) == sum(input_widths)

    def equi_keys(self) -> list[tuple[int, int]]:
        """(left index, right index) pairs of ``l = r`` conjuncts across the two sides."""
        if self.condition is None:
            return []
        return [p for c in conjuncts(self.condition) if (p := equi_pair(c, self.left_width))]

    def residual(self) -> list[Expr]:
        """Conjuncts of the condition that are not equi-join keys (theta part)."""
        if self.condition is None:
            return []
        return [c for c in conjuncts(self.condition) if equi_pair(c, self.left_width) is None]

    def describe(self) -> str:
        return "ON " + self.condition.display() if self.condition is not None else "CROSS"


def equi_pair(conjunct: Expr, left_width: int) -> tuple[int, int] | None:
    """``(left column, right column)`` if ``conjunct`` is ``l = r`` across a join's two sides
    (the left input has ``left_width`` columns; the right column counts from the right
    input's first column), else None."""
    cols = column_equality(conjunct)
    if cols is None:
        return None
    a, b = sorted(cols)
    return (a, b - left_width) if a < left_width <= b else None


@dataclass(frozen=True, slots=True)
class Aggregate(Operator):
    """R2R grouped aggregation: output is the group keys then the aggregates, in order."""

    group_by: tuple[Expr, ...]
    aggs: tuple[AggCall, ...]

    kind: ClassVar[str] = "aggregate"

    def input_column(self, column: int) -> tuple[int, int] | None:
        if column >= len(self.group_by):
            return None
        key = self.group_by[column]
        return (0, key.index) if isinstance(key, ColumnRef) else None

    def expressions(self) -> tuple[Expr, ...]:
        return (*self.group_by, *self.aggs)

    def schema_fits(self, input_widths: Sequence[int]) -> bool:
        return len(self.schema) == len(self.group_by) + len(self.aggs)

    @property
    def incremental(self) -> bool:
        """All aggregates maintainable under inserts and deletes (Ch. 6: AVG yes, MAX no)."""
        return all(a.incremental for a in self.aggs)

    def describe(self) -> str:
        aggs = ", ".join(
            a.display() if a.display() == f.name else f"{a.display()} AS {f.name}"
            for a, f in zip(self.aggs, self.schema.fields[len(self.group_by) :], strict=True)
        )
        if self.group_by:
            keys = ", ".join(e.display() for e in self.group_by)
            return f"{aggs} GROUP BY {keys}" if aggs else f"GROUP BY {keys}"
        return aggs


class StreamMode(StrEnum):
    ISTREAM = "istream"
    DSTREAM = "dstream"
    RSTREAM = "rstream"


@dataclass(frozen=True, slots=True)
class R2S(Operator):
    """ISTREAM (rows new at T), DSTREAM (rows gone at T) or RSTREAM (whole relation at T)."""

    mode: StreamMode

    category: ClassVar[Category] = Category.R2S

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.mode.value


@dataclass(frozen=True, slots=True)
class Sink(Operator):
    """The query result stream; columns are the query's output plus ``_ts`` at run time."""

    kind: ClassVar[str] = "sink"
    category: ClassVar[Category] = Category.SINK


#: The operator kinds of CONTRACT's explain output, in a fixed order.
KINDS = (
    "source",
    "window",
    "select",
    "project",
    "join",
    "aggregate",
    "istream",
    "dstream",
    "rstream",
    "sink",
)


class LogicalPlan:
    """An immutable DAG of operators with exactly one sink.

    Build one with :class:`PlanBuilder`; derive a changed plan with :meth:`replace` or
    :meth:`rewire`, which return new plans.
    """

    def __init__(self, graph: nx.DiGraph, sink: str) -> None:
        self._g = nx.freeze(graph)
        self.sink = sink
        self._order = list(
            nx.lexicographical_topological_sort(self._g, key=lambda n: self._g.nodes[n]["seq"])
        )
        # The graph is frozen, so adjacency is computed once (the optimizer asks millions of
        # times).
        self._inputs = {
            n: tuple(u for u, _, _ in sorted(self._g.in_edges(n, data="port"), key=lambda e: e[2]))
            for n in self._order
        }
        self._consumers = {
            n: tuple(sorted(self._g.successors(n), key=lambda c: self._g.nodes[c]["seq"]))
            for n in self._order
        }
        self._check()

    # -- access ---------------------------------------------------------------------------

    @property
    def graph(self) -> nx.DiGraph:
        """The frozen networkx graph (node attribute ``op``; edge attribute ``port``)."""
        return self._g

    def op(self, op_id: str) -> Operator:
        try:
            return self._g.nodes[op_id]["op"]
        except KeyError:
            raise KeyError(op_id) from None

    def __contains__(self, op_id: str) -> bool:
        return op_id in self._g

    def __len__(self) -> int:
        return len(self._order)

    def inputs(self, op_id: str) -> list[str]:
        """Input ids ordered by port (left first)."""
        try:
            return list(self._inputs[op_id])
        except KeyError:
            raise KeyError(op_id) from None

    def consumers(self, op_id: str) -> list[str]:
        try:
            return list(self._consumers[op_id])
        except KeyError:
            raise KeyError(op_id) from None

    def topological(self) -> list[str]:
        """Ids in a deterministic topological order (inputs before consumers)."""
        return list(self._order)

    def operators(self) -> Iterator[Operator]:
        for op_id in self._order:
            yield self.op(op_id)

    def ids_of(self, *kinds: str) -> list[str]:
        return [i for i in self._order if self.op(i).kind in kinds]

    @property
    def sources(self) -> list[str]:
        return self.ids_of("source")

    def r2r_ids(self) -> list[str]:
        return [i for i in self._order if self.op(i).category is Category.R2R]

    # -- derivation -----------------------------------------------------------------------

    def replace(self, op_id: str, new_op: Operator) -> LogicalPlan:
        """A plan with one operator swapped for another of the same id."""
        if new_op.id != op_id:
            raise InternalError(f"replacement for {op_id} has id {new_op.id}")
        g = nx.DiGraph(self._g)
        g.nodes[op_id]["op"] = new_op
        return LogicalPlan(g, self.sink)

    # -- invariants -----------------------------------------------------------------------

    def _check(self) -> None:
        if not nx.is_directed_acyclic_graph(self._g):
            raise InternalError("logical plan has a cycle")
        for op_id in self._order:
            op = self.op(op_id)
            ins = self.inputs(op_id)
            if op.arity == N_ARY:
                if not ins:
                    raise InternalError(f"{op_id} ({op.kind}) has no input, needs at least one")
            elif len(ins) != op.arity:
                raise InternalError(f"{op_id} ({op.kind}) has {len(ins)} inputs, needs {op.arity}")
            if op.id != op_id:
                raise InternalError(f"node {op_id} holds operator {op.id}")
        sinks = [n for n in self._order if self._g.out_degree(n) == 0]
        if sinks != [self.sink]:
            raise InternalError(f"plan must end in exactly one sink, found {sinks}")


class PlanBuilder:
    """Assigns stable ids (``<kind><n>``) and wires operators into a :class:`LogicalPlan`."""

    def __init__(self) -> None:
        self._g = nx.DiGraph()
        self._counters: dict[str, int] = {}
        self._seq = 0

    def next_id(self, kind: str) -> str:
        n = self._counters.get(kind, 0) + 1
        self._counters[kind] = n
        return f"{kind}{n}"

    def add(self, make: Callable[[str], Operator], *inputs: str) -> str:
        """Create an operator with a fresh id (``make(id)``) fed by ``inputs`` in port order."""
        probe = make("?")
        op = make(self.next_id(probe.kind))
        self._g.add_node(op.id, op=op, seq=self._seq)
        self._seq += 1
        for port, src in enumerate(inputs):
            self._g.add_edge(src, op.id, port=port)
        return op.id

    def op(self, op_id: str) -> Operator:
        return self._g.nodes[op_id]["op"]

    def replace(self, op: Operator) -> None:
        """Swap the operator stored under ``op.id`` (same inputs), e.g. to rename columns."""
        if op.id not in self._g:
            raise InternalError(f"no operator {op.id} to replace")
        self._g.nodes[op.id]["op"] = op

    def build(self, sink: str) -> LogicalPlan:
        # Drop anything not feeding the sink (cannot happen from the binder, but cheap).
        keep = nx.ancestors(self._g, sink) | {sink}
        return LogicalPlan(self._g.subgraph(keep).copy(), sink)

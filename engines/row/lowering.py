"""Lowering a logical plan to row-engine operators, with the row engine's physical rewrites.

Each logical operator kind is lowered by one function registered in :data:`LOWERINGS` (an
:class:`~optimizer.ir.dispatch.KindTable` keyed by the IR node class). The function gets the
operator and what is known about each of its inputs (:class:`Port`: the row operator built
for it, which columns may be NULL or non-finite, whether its deltas replace the relation,
whether it is window-derived) and returns the row operator with the same facts about its
output (:class:`Lowered`). A new operator kind is one row module plus one ``@LOWERINGS.register``
function here.

Physical rewrites decided while lowering:

* a select whose input is a time-based window with no other consumer filters inside the
  window (``PushedSelectOp``: the window never stores what the filter drops);
* a sliding RANGE window whose range is a multiple of its slide, feeding (through selects
  and projects) an aggregate of decomposable functions, keeps *panes* and the aggregate
  subtracts expired panes' partials (``PanedRangeWindow``);
* a window feeding a columnar group (MIG) keeps Arrow chunks (``ArrowWindow``); the group's
  operators run inside one MIG built by ``make_group`` at the group's top.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engines.row.aggregate import AggregateOp, finite_aggregate
from engines.row.arrow_window import ArrowWindow
from engines.row.base import RowOperator
from engines.row.compile import (
    compile_filter,
    compile_key,
    compile_map,
    compile_predicate,
    may_be_infinite,
    may_be_nan,
    nullable,
)
from engines.row.joins.acaching.join_op import ACachingJoinOp
from engines.row.joins.jit import JitJoinOp, link
from engines.row.joins.mjoin import MJoinOp, NarySpec
from engines.row.joins.tree import HashJoinOp
from engines.row.r2s import DStreamOp, IStreamOp, RStreamOp
from engines.row.stateless import ProjectOp, PushedSelectOp, SelectOp
from engines.row.windows import (
    PanedRangeWindow,
    RowsWindow,
    SlidingRangeWindow,
    TumblingWindow,
    UnboundedWindow,
    _WindowBase,
)
from optimizer.ir.arrow_filter import arrow_filter, arrow_select_candidate
from optimizer.ir.dispatch import KindTable
from optimizer.ir.errors import PlanError
from optimizer.ir.expr import Binary, ColumnRef, Expr, Unary, conjoin, conjuncts
from optimizer.ir.join_chains import JOIN_IMPLS, JoinChain, join_chains
from optimizer.ir.placement import Group, external_inputs
from optimizer.ir.plan import (
    R2S,
    Aggregate,
    Join,
    LogicalPlan,
    Operator,
    Project,
    Select,
    Sink,
    Source,
    StreamMode,
    Window,
    WindowKind,
    equi_pair,
)
from optimizer.ir.types import DataType


@dataclass(frozen=True)
class GroupInput:
    """One external input of a MIG group: the operator feeding it and how its data arrives."""

    op_id: str
    schema: Any  # optimizer.ir.schema.Schema
    arrow: bool  # an Arrow window: chunks, no tuples
    fifo: bool  # row deltas whose deletes are the oldest inserts (window-derived)


#: ``make_group(group, inputs) -> RowOperator``: builds the MIG operator for a group.
MakeGroup = Callable[[Group, list[GroupInput]], RowOperator]


@dataclass(frozen=True)
class Port:
    """What the lowering of an operator knows about one of its inputs."""

    op_id: str
    node: RowOperator | None  # None for a source (it is no row operator)
    nullable: list[bool]  # per column: may be NULL
    finite: list[bool]  # per column: never +-inf or NaN (engines.row.compile)
    replace: bool  # its deltas replace the relation wholesale
    fifo: bool  # reaches a FIFO window through selects/projects only
    expiring: bool  # may delete tuples (not an UNBOUNDED window's deltas)


@dataclass(frozen=True)
class Lowered:
    """A lowered operator and the facts about its output (see :class:`Port`)."""

    node: RowOperator
    nullable: list[bool]
    finite: list[bool]
    fifo: bool = False
    expiring: bool = True
    counts: bool = True  # False when its tuples are counted elsewhere (pushed selects)
    stream: str | None = None  # a window: the stream it reads


@dataclass
class Node:
    """One row operator in step order: its inputs are positions of earlier nodes."""

    op: RowOperator
    inputs: list[int]
    nullable: list[bool]
    counts: bool = True


#: ``lower(op, inputs, lowering) -> Lowered`` per logical operator kind.
LowerFn = Callable[[Any, list[Port], "Lowering"], Lowered]
LOWERINGS: KindTable[LowerFn] = KindTable("row-engine lowering")


@dataclass(frozen=True)
class JoinSettings:
    """How the row engine runs each maximal join chain (``optimizer.ir.join_chains``):
    ``impls`` per chain root id (others: ``default``); ``memory_bytes`` bounds A-Caching's
    caches; ``acaching`` passes options to ``ACachingJoinOp`` (interval, sample, ...)."""

    default: str = "tree"
    impls: Mapping[str, str] = field(default_factory=dict)
    memory_bytes: int | None = None
    acaching: Mapping[str, Any] = field(default_factory=dict)
    #: JIT consumers run the on/off controller (``JitJoinOp``; off by default: on the
    #: measured workloads it cost more than it saved and gave up JIT's memory savings).
    jit_adaptive: bool = False

    def impl(self, root: str) -> str:
        return self.impls.get(root, self.default)


@dataclass
class Lowering:
    """Lowers one plan (``run``); holds what the per-kind functions may ask about it."""

    plan: LogicalPlan
    panes: bool = True
    groups: Sequence[Group] = ()
    make_group: MakeGroup | None = None
    #: Late tuples may enter open windows (``--late insert``): window deltas are then not
    #: FIFO (a late tuple expires before tuples inserted ahead of it).
    late_insert: bool = False
    join: JoinSettings = field(default_factory=JoinSettings)
    nodes: list[Node] = field(default_factory=list)
    windows: list[_WindowBase | ArrowWindow] = field(default_factory=list)
    windows_by_stream: dict[str, list[_WindowBase]] = field(default_factory=dict)
    arrow_windows_by_stream: dict[str, list[ArrowWindow]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.group_of = {op: g for g in self.groups for op in g.operators}
        self.paned_aggregates: set[str] = set()
        #: Selects filtered as Arrow inside their window (select id -> that window).
        self.arrow_selects: dict[str, ArrowWindow] = {}
        if self.groups and self.make_group is None:
            raise PlanError("a placement with columnar groups needs a MIG factory")

    def _plan_joins(self) -> None:
        """Which join chains run as one n-ary operator (``nary``: root -> chain; the other
        joins of such a chain are ``absorbed``) and which joins are JIT-capable."""
        self.nary: dict[str, JoinChain] = {}
        self.absorbed: set[str] = set()
        self.jit_joins: set[str] = set()
        self.jit_roots: dict[str, JoinChain] = {}
        plan = self.plan
        for chain in join_chains(plan):
            impl = self.join.impl(chain.root)
            if impl not in JOIN_IMPLS:
                raise PlanError(f"unknown join implementation {impl!r}")
            if impl == "tree" or any(j in self.group_of for j in chain.joins):
                continue
            if impl == "jit":
                self.jit_joins.update(chain.joins)
                self.jit_roots[chain.root] = chain
                continue
            inner = [j for j in chain.joins if j != chain.root]
            if any(len(plan.consumers(j)) != 1 for j in inner):
                continue  # an intermediate result read elsewhere: keep the tree
            self.nary[chain.root] = chain
            self.absorbed.update(inner)

    def run(self) -> Lowering:
        plan = self.plan
        ports: dict[str, Port] = {}
        pos: dict[str, int] = {}
        self._plan_joins()
        for op_id in plan.topological():
            op = plan.op(op_id)
            if op_id in self.absorbed:
                continue  # runs inside its chain's n-ary join
            if isinstance(op, Source | Sink):
                if isinstance(op, Source):  # never NULL; non-finite input is dead-lettered
                    width = len(op.schema)
                    ports[op_id] = Port(
                        op_id, None, [False] * width, [True] * width, False, False, True
                    )
                continue
            group = self.group_of.get(op_id)
            if group is not None and op_id != group.top:
                continue  # runs inside its group's MIG, created at the group's top
            if group is not None:
                externals = external_inputs(group, self.plan)
                positions = [pos[i] for i in externals]
                lowered = self._group(group, op, [ports[i] for i in externals])
            elif op_id in self.nary:
                chain = self.nary[op_id]
                positions = [pos[leaf] for leaf in chain.leaves]
                lowered = self._nary(chain, [ports[leaf] for leaf in chain.leaves])
            else:
                ins = plan.inputs(op_id)
                positions = [pos[i] for i in ins if ports[i].node is not None]  # not sources
                fn = LOWERINGS.get(type(op))
                if fn is None:
                    raise PlanError(f"the row engine cannot run {op.kind} operators")
                lowered = fn(op, [ports[i] for i in ins], self)
            node = lowered.node
            if lowered.stream is not None:
                if isinstance(node, ArrowWindow):
                    self.arrow_windows_by_stream.setdefault(lowered.stream, []).append(node)
                else:
                    assert isinstance(node, _WindowBase)
                    self.windows_by_stream.setdefault(lowered.stream, []).append(node)
                self.windows.append(node)
            pos[op_id] = len(self.nodes)
            ports[op_id] = Port(
                op_id,
                node,
                lowered.nullable,
                lowered.finite,
                node.replace_out,
                lowered.fifo,
                lowered.expiring,
            )
            self.nodes.append(Node(node, positions, lowered.nullable, counts=lowered.counts))
            if op_id in self.jit_roots:
                self._link_jit(self.jit_roots[op_id], ports)
        return self

    # -- n-ary joins ----------------------------------------------------------------------------

    def _nary(self, chain: JoinChain, leaves: list[Port]) -> Lowered:
        """One MJoin (or A-Caching MJoin) for a whole join chain."""
        nullable = [v for p in leaves for v in p.nullable]
        finite = tuple(v for p in leaves for v in p.finite)
        spec = NarySpec(
            tuple(len(p.nullable) for p in leaves), tuple(chain.conjuncts), tuple(nullable), finite
        )
        replace_in = [p.replace for p in leaves]
        node: MJoinOp
        if self.join.impl(chain.root) == "acaching":
            node = ACachingJoinOp(
                chain.root,
                spec,
                replace_in,
                memory_bytes=self.join.memory_bytes,
                **dict(self.join.acaching),
            )
        else:
            node = MJoinOp(chain.root, spec, replace_in)
        return Lowered(node, nullable, list(finite))

    def _link_jit(self, chain: JoinChain, ports: dict[str, Port]) -> None:
        """JIT links of a lowered join tree, top-down (``engines.row.joins.jit.link`` says
        which)."""
        plan = self.plan
        for j in reversed(chain.joins):  # bottom-up list: the root first
            parent = ports[j].node
            op = plan.op(j)
            assert isinstance(op, Join) and isinstance(parent, JitJoinOp)
            keys = op.equi_keys()
            for side, child_id in enumerate(plan.inputs(j)):
                child = ports[child_id].node
                child_op = plan.op(child_id)
                if not isinstance(child, JitJoinOp) or not isinstance(child_op, Join):
                    continue
                pairs = [(a, b) if side == 0 else (b, a) for a, b in keys]
                if link(parent, side, child, pairs, child_op.left_width):
                    parent.adaptive = self.join.jit_adaptive
                    break

    # -- columnar groups --------------------------------------------------------------------

    def _group(self, group: Group, top: Operator, inputs: list[Port]) -> Lowered:
        """The MIG operator running ``group`` (its outputs may be NULL or non-finite)."""
        assert self.make_group is not None
        node = self.make_group(
            group,
            [
                GroupInput(
                    op_id=p.op_id,
                    schema=self.plan.op(p.op_id).schema,
                    arrow=isinstance(p.node, ArrowWindow) or getattr(p.node, "arrow", False),
                    fifo=p.fifo,
                )
                for p in inputs
            ],
        )
        width = len(top.schema)
        return Lowered(node, [True] * width, [False] * width)

    # -- physical rewrites ------------------------------------------------------------------

    def arrow_select(self, window: Window, below: Port) -> Any | None:
        """The Arrow filter for the select above ``window`` when that select runs on the
        row engine only to feed a columnar group: the plan's shape allows it
        (``optimizer.ir.arrow_filter.arrow_select_candidate``: a time-based window whose
        single consumer is the select, the select's single consumer), that consumer is in a
        group, and Arrow evaluates the predicate exactly (``arrow_filter``). The window then
        keeps Arrow chunks already filtered, and the window's tuples never become Python
        objects. None otherwise. The cost model asks the same questions
        (``cost_models.analytical``, Arrow selects)."""
        plan = self.plan
        if self.late_insert:
            return None
        consumers = plan.consumers(window.id)
        if len(consumers) != 1 or consumers[0] in self.group_of:
            return None
        select_id = consumers[0]
        if arrow_select_candidate(plan, select_id) is None:
            return None
        if plan.consumers(select_id)[0] not in self.group_of:
            return None
        select = plan.op(select_id)
        assert isinstance(select, Select)
        return arrow_filter(select.predicate, list(below.finite))

    def can_push_select(self, below: Port) -> bool:
        """A select may filter inside its input window when the window is time-based, has no
        other consumer and no filter yet (for ROWS windows filtering first would change which
        tuples are the last n)."""
        node = below.node
        return (
            isinstance(
                node, SlidingRangeWindow | TumblingWindow | UnboundedWindow | PanedRangeWindow
            )
            and node.prefilter is None
            and len(self.plan.consumers(below.op_id)) == 1
        )

    def paned_aggregate(self, window_id: str) -> str | None:
        """The aggregate this window can feed panes to, if the pattern allows it (and then
        marks that aggregate as paned).

        Pattern: a sliding RANGE window whose range is a multiple of its slide, followed by
        selects/projects only (each with one consumer) and then an aggregate of decomposable
        functions (COUNT, SUM, AVG, MIN, MAX without DISTINCT).
        """
        plan = self.plan
        op = plan.op(window_id)
        assert isinstance(op, Window)
        if not self.panes:
            return None
        if not (
            op.window is WindowKind.RANGE
            and not op.slide_rows
            and op.size is not None
            and op.size != op.slide
            and op.size % op.slide == 0
        ):
            return None
        cur = window_id
        while True:
            consumers = plan.consumers(cur)
            if len(consumers) != 1:
                return None
            cur = consumers[0]
            if cur in self.group_of:
                return None  # a MIG consumes tuples (or chunks), not panes
            nxt = plan.op(cur)
            if isinstance(nxt, Select | Project):
                continue
            if isinstance(nxt, Aggregate) and all(
                a.func in ("COUNT", "SUM", "AVG", "MIN", "MAX") and not a.distinct for a in nxt.aggs
            ):
                self.paned_aggregates.add(cur)
                return cur
            return None


def lower_plan(
    plan: LogicalPlan,
    panes: bool = True,
    groups: Sequence[Group] = (),
    make_group: MakeGroup | None = None,
    late_insert: bool = False,
    join: JoinSettings | None = None,
) -> Lowering:
    """Lower ``plan`` to row operators in step (topological) order; ``groups`` run as MIGs
    built by ``make_group``; ``panes=False`` disables the pane rewrite; ``late_insert``: late
    tuples may enter open windows (no panes, no FIFO deltas); ``join`` chooses each join
    chain's implementation (default: binary hash-join trees)."""
    return Lowering(
        plan, panes and not late_insert, groups, make_group, late_insert, join or JoinSettings()
    ).run()


# -- one lowering per logical operator kind ---------------------------------------------------


@LOWERINGS.register(Window)
def _window(op: Window, ins: list[Port], lowering: Lowering) -> Lowered:
    """A row window, or an Arrow window when its consumer runs in a columnar group."""
    stream = lowering.plan.op(ins[0].op_id)
    assert isinstance(stream, Source)
    consumer = lowering.plan.consumers(op.id)[0]
    node: _WindowBase | ArrowWindow
    arrow_select = lowering.arrow_select(op, ins[0])
    if consumer in lowering.group_of or arrow_select is not None:
        slide = 1 if op.slide_rows else op.slide
        node = ArrowWindow(
            op.id, op.time_column, op.window.value, op.size, slide, count_mode=op.slide_rows
        )
        if arrow_select is not None:
            node.prefilter = arrow_select
            lowering.arrow_selects[consumer] = node
    else:
        node = _row_window(op, lowering.paned_aggregate(op.id))
    # A window's input is a source: never NULL, always finite (as its Port says).
    return Lowered(
        node,
        ins[0].nullable,
        ins[0].finite,
        fifo=not lowering.late_insert,
        expiring=op.window is not WindowKind.UNBOUNDED,
        stream=stream.stream,
    )


def _row_window(op: Window, paned_for: str | None) -> _WindowBase:
    if op.window is WindowKind.UNBOUNDED:
        return UnboundedWindow(op.id, op.time_column, op.slide)
    if op.window is WindowKind.ROWS:
        assert op.size is not None
        w: _WindowBase = RowsWindow(
            op.id, op.time_column, op.size, 1 if op.slide_rows else op.slide
        )
        w.count_mode = op.slide_rows
        return w
    assert op.size is not None
    if op.size == op.slide and not op.slide_rows:
        return TumblingWindow(op.id, op.time_column, op.slide)
    if paned_for is not None:
        return PanedRangeWindow(op.id, op.time_column, op.size, op.slide)
    return SlidingRangeWindow(op.id, op.time_column, op.size, op.slide)


@LOWERINGS.register(Select)
def _select(op: Select, ins: list[Port], lowering: Lowering) -> Lowered:
    """A filter, pushed into its window when :meth:`Lowering.can_push_select` allows."""
    (i,) = ins
    keep = compile_filter(op.predicate, i.nullable, i.finite)
    node: RowOperator
    window = lowering.arrow_selects.get(op.id)
    if window is not None:  # filtered as Arrow inside its window (Lowering.arrow_select)
        node = PushedSelectOp(op.id, i.replace)
        node.arrow = True
        window.prefilter_metrics = node.metrics
    elif lowering.can_push_select(i):
        assert isinstance(i.node, _WindowBase)
        node = PushedSelectOp(op.id, i.replace)
        i.node.prefilter = keep
        i.node.prefilter_metrics = node.metrics
    else:
        node = SelectOp(op.id, keep, i.replace)
    counts = not isinstance(node, PushedSelectOp)  # the window counts what it filters
    return Lowered(node, i.nullable, i.finite, i.fifo, i.expiring, counts=counts)


@LOWERINGS.register(Project)
def _project(op: Project, ins: list[Port], lowering: Lowering) -> Lowered:
    (i,) = ins
    node = ProjectOp(op.id, compile_map(op.exprs, i.nullable, i.finite), i.replace)
    out_null = [nullable(e, i.nullable) for e in op.exprs]
    out_fin = [not (may_be_infinite(e, i.finite) or may_be_nan(e, i.finite)) for e in op.exprs]
    return Lowered(node, out_null, out_fin, i.fifo, i.expiring)


@LOWERINGS.register(Join)
def _join(op: Join, ins: list[Port], lowering: Lowering) -> Lowered:
    """A symmetric hash join on the equi-keys (nested loops without), residual as a filter."""
    left, right = ins
    in_null = left.nullable + right.nullable
    keys = op.equi_keys()
    residual = conjoin(op.residual())
    lk = compile_key([a for a, _ in keys])
    rk = compile_key([b for _, b in keys])
    # NULL keys never match in SQL; source columns are never NULL, derived ones may be.
    # (Only NULL is checked here: the hash lookup itself matches NaN keys, which equal
    # each other as in DuckDB, where a re-evaluated `a = b` would not.)
    if op.condition is not None and any(in_null[a] or in_null[op.left_width + b] for a, b in keys):
        not_null: list[Expr] = [
            Unary("IS NOT NULL", side, DataType.BOOLEAN)
            for c in conjuncts(op.condition)
            if isinstance(c, Binary) and equi_pair(c, op.left_width) is not None
            for side in (c.left, c.right)
            if isinstance(side, ColumnRef) and in_null[side.index]
        ]
        residual = conjoin([*not_null, *op.residual()])
    in_fin = left.finite + right.finite
    res = compile_predicate(residual, in_null, in_fin) if residual is not None else None
    cls = JitJoinOp if op.id in lowering.jit_joins else HashJoinOp
    node = cls(op.id, lk, rk, res, (left.replace, right.replace), nested_loop=not keys)
    return Lowered(node, in_null, in_fin)


@LOWERINGS.register(Aggregate)
def _aggregate(op: Aggregate, ins: list[Port], lowering: Lowering) -> Lowered:
    (i,) = ins
    node = AggregateOp(
        op.id,
        op.group_by,
        op.aggs,
        i.nullable,
        fifo=i.fifo,
        replace_in=i.replace,
        paned=op.id in lowering.paned_aggregates,
        input_finite=i.finite,
    )
    out_null = [nullable(g, i.nullable) for g in op.group_by] + [
        a.func != "COUNT"
        and (not op.group_by or (a.arg is not None and nullable(a.arg, i.nullable)))
        for a in op.aggs
    ]
    out_fin = [not (may_be_infinite(g, i.finite) or may_be_nan(g, i.finite)) for g in op.group_by]
    out_fin += [finite_aggregate(a, i.finite) for a in op.aggs]
    return Lowered(node, out_null, out_fin)


_R2S: dict[StreamMode, type[IStreamOp | DStreamOp | RStreamOp]] = {
    StreamMode.ISTREAM: IStreamOp,
    StreamMode.DSTREAM: DStreamOp,
    StreamMode.RSTREAM: RStreamOp,
}


@LOWERINGS.register(R2S)
def _r2s(op: R2S, ins: list[Port], lowering: Lowering) -> Lowered:
    (i,) = ins
    return Lowered(_R2S[op.mode](op.id, i.replace), i.nullable, i.finite)

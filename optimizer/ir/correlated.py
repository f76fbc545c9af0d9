"""Correlated counts kept per key: which columnar groups qualify (issue 20).

Q1 and Q2 of the dissertation are *correlated aggregates*: a window is joined with its own
per-key aggregate and the matches are counted per key ("the readings above 90% of the plug's
maximum"). Re-run at every slide, the join reads the whole window (millions of rows) to
recount every key, although at a slide most keys' aggregate did not change: for such a key,
the rows of the window that match it changed only by the rows that entered and left the
window. So its count moves by the matches among those rows, and only the keys whose
aggregate changed need a recount over the window (a scan with a small hash table instead of
one with every key). For a per-plug MAX, a key's MAX changes at a slide with a probability of
about twice the share of its window the slide replaces, so at 40k tuples/s a recount touches
well under 1% of the plugs (docs/placement-study.md, "Issue 20, seventh stop").

The shape (checked here, on the plan; the SQL side is ``engines.sqlgen.correlated`` and the
runtime ``engines.mig.correlated_counts``):

* the group's top operator is an aggregate whose calls are COUNT(*) or COUNT(x) without
  DISTINCT, at least one COUNT(*) (so a key's row exists exactly when the count is positive);
* its input is an inner join inside the group whose right input is an aggregate of the group
  kept incrementally, joined on all of that aggregate's group keys (``r.k = l.x`` for every
  key, so a left row matches at most one right row), the other conjuncts arbitrary;
* every equi-joined left column is one of the top's group keys (so each result row belongs
  to exactly one key of the right aggregate);
* the join's left input is a chain of selects and projects inside the group over one
  window-derived group input (whose changes are chunks in, chunks out).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from optimizer.ir.arrow_filter import arrow_filter
from optimizer.ir.expr import ColumnRef, Expr, conjoin, remap_columns
from optimizer.ir.plan import Aggregate, Join, LogicalPlan, Project, Select
from optimizer.ir.types import DataType

#: Above this share of changed keys a slide runs the group's plain statement: recounting
#: most keys reads the window as the plain join does, and the deltas would come on top.
RECOUNT_SHARE = 0.5
#: A recount probes the whole left window against the changed keys' small hash table: about
#: this share of a probe against every key's (Q1 on 10,000 plugs, 12 M rows at 40k tuples/s:
#: the recount of 40 keys took 41 ms against 98 ms for the plain join, of which the scan and
#: filter 20 ms).
RECOUNT_PROBE = 1.0 / 3.0


@dataclass(frozen=True, slots=True)
class CorrelatedPrices:
    """What a slide costs with the counts kept per key and without, from an engine's
    constants (``cost_models.analytical.ColumnarConstants`` or its defaults' mapping): the
    join's probe per row of its left input, one query's fixed cost, one SQL operator's."""

    join_input: float
    select: float
    fixed: float
    op_fixed: float

    @classmethod
    def of(cls, consts: Mapping[str, Any] | Any) -> CorrelatedPrices:
        get = consts.get if isinstance(consts, Mapping) else lambda k, d: getattr(consts, k, d)
        return cls(
            join_input=float(get("join_input", 0.0)),
            select=float(get("select", 0.0)),
            fixed=float(get("fixed", 0.0)),
            op_fixed=float(get("op_fixed", 0.0)),
        )

    def saving(self, left_rows: float, changed_rows: float, share: float, operators: int) -> float:
        """Seconds per slide the kept path saves (negative: it costs more) over a left input
        of ``left_rows`` (the rows reaching the join), ``changed_rows`` of them entering and
        leaving, a ``share`` of the keys changed, and ``operators`` SQL operators from the
        window to the count (each run again by the delta joins)."""
        if share > RECOUNT_SHARE:
            return 0.0
        probes = left_rows * self.join_input * (1.0 - min(1.0, RECOUNT_PROBE + share))
        deltas = changed_rows * (self.select + self.join_input)
        # the marking query, and the deltas' operators in the merged statement
        extra = self.fixed + (2 + 2 * operators) * self.op_fixed
        return probes - deltas - extra


@dataclass(frozen=True, slots=True)
class CorrelatedShape:
    """A group's top aggregate counting join matches per key of a kept aggregate."""

    top: str
    """The counting aggregate (the group's top operator)."""
    join: str
    inner: str
    """The kept aggregate on the join's right side."""
    window: str
    """The external window-derived operator the join's left side reads."""
    key_columns: tuple[int, ...]
    """Per group key ``k<j>`` of ``inner``: the top's output column holding the same value."""
    star: int
    """The top's output column of one COUNT(*) (a key's row exists while it is positive)."""
    group_width: int
    """The top's group keys (its first output columns; the counts follow)."""
    left: tuple[str, ...]
    """The selects and projects between the window and the join (nearest the join first)."""


def correlated_count(
    plan: LogicalPlan,
    group: Collection[str],
    top: str,
    kept: Collection[str],
    window_inputs: Collection[str],
) -> CorrelatedShape | None:
    """The shape of ``group`` (module docstring) if its ``top`` counts join matches per key of
    an aggregate in ``kept`` over a left side reading one of ``window_inputs``; else None."""
    inside = set(group)
    agg = plan.op(top)
    if not isinstance(agg, Aggregate) or not agg.group_by:
        return None
    if any(c.func != "COUNT" or c.distinct for c in agg.aggs):
        return None
    stars = [i for i, c in enumerate(agg.aggs) if c.arg is None]
    if not stars:
        return None
    (join_id,) = plan.inputs(top)
    join = plan.op(join_id)
    if join_id not in inside or not isinstance(join, Join) or len(plan.consumers(join_id)) != 1:
        return None
    left_id, inner_id = plan.inputs(join_id)
    inner = plan.op(inner_id)
    if inner_id not in kept or not isinstance(inner, Aggregate) or not inner.group_by:
        return None
    if len(plan.consumers(inner_id)) != 1:
        return None
    pairs = join.equi_keys()
    by_right: dict[int, int] = {}
    for left_col, right_col in pairs:
        by_right.setdefault(right_col, left_col)
    if set(by_right) != set(range(len(inner.group_by))):
        return None
    key_columns: list[int] = []
    for j in range(len(inner.group_by)):
        left_col = by_right[j]
        at = [
            p
            for p, k in enumerate(agg.group_by)
            if isinstance(k, ColumnRef) and k.index == left_col
        ]
        if not at:
            return None
        key_columns.append(at[0])
    path = _left_path(plan, inside, left_id)
    if path is None or path[1] not in window_inputs:
        return None
    left, window = path
    return CorrelatedShape(
        top=top,
        join=join_id,
        inner=inner_id,
        window=window,
        key_columns=tuple(key_columns),
        star=len(agg.group_by) + stars[0],
        group_width=len(agg.group_by),
        left=left,
    )


def _left_path(plan: LogicalPlan, inside: set[str], cur: str) -> tuple[tuple[str, ...], str] | None:
    """A chain of single-consumer selects and projects inside the group, and the external
    operator it reads."""
    chain: list[str] = []
    while cur in inside:
        op = plan.op(cur)
        if not isinstance(op, Select | Project) or len(plan.consumers(cur)) != 1:
            return None
        chain.append(cur)
        (cur,) = plan.inputs(cur)
    return tuple(chain), cur


@dataclass(frozen=True)
class ScanCount:
    """A correlated count the MIG can recount in Arrow at every slide (``engines.mig.count_scan``).

    The kept path (module docstring) pays off when few keys change; when an AVG moves for
    every plug touched at a slide, about half the keys change and every slide re-runs the
    plain join of the whole window against every key. This shape lets the runtime do that
    recount without a join: every row of the window gets a dense integer id for its key once,
    when its chunk arrives, so a slide gathers each row's right-hand columns from an array
    indexed by id, evaluates the residual predicate as Arrow does (``arrow_filter``: the same
    promise the row engine's Arrow selects rely on) and counts the matches per id with one
    ``bincount``. It applies when

    * the left chain's selects have Arrow filters and its projects only pick columns;
    * the join keys are integer columns on both sides, one left column per key;
    * the join's other conjuncts have an Arrow filter, over columns of either side;
    * the top groups exactly by the join's left keys and counts only ``*`` or plain columns.

    Columns are positions: ``window`` columns of the MIG's input table, ``inner`` columns of
    the kept aggregate's output (its keys ``k<j>``, then its values ``v<j>`` in the state).
    Arrow compares NaN by IEEE rules, so the runtime checks every DOUBLE column named in
    ``doubles`` is finite and otherwise gives the shape up (the filters assume it).
    """

    filter: Any | None
    """The left chain's selects as one ``pyarrow.compute`` expression over window columns."""
    left_keys: tuple[int, ...]
    """Per key ``k<j>`` of the inner aggregate: the window column equal to it."""
    columns: tuple[tuple[str, int], ...]
    """The columns the predicate and counts read: ("window", column) or ("inner", column)."""
    predicate: Any | None
    """The join's residual over ``columns`` (positions), None: every key match counts."""
    counts: tuple[int | None, ...]
    """Per count of the top: None for COUNT(*), else the position in ``columns`` of its arg."""
    key_positions: tuple[int, ...]
    """Per output column of the top's group keys: the inner key ``j`` it holds."""
    inner_types: tuple[DataType, ...]
    """The inner aggregate's output types (the state's ``v<j>`` are cast to them)."""
    doubles: tuple[tuple[str, int], ...]
    """DOUBLE columns the filter and the predicate compare, ("window" | "inner", column):
    each must be finite."""


def scan_count(plan: LogicalPlan, shape: CorrelatedShape) -> ScanCount | None:
    """The :class:`ScanCount` of a correlated group, or None when its shape or expressions
    do not allow one (the runtime then has the kept and plain paths only)."""
    window_schema = plan.op(shape.window).schema
    dtypes = [f.dtype for f in window_schema]
    cols: list[int | None] = list(range(len(window_schema)))
    filters: list[Expr] = []
    doubles: set[tuple[str, int]] = set()
    for op_id in reversed(shape.left):  # from the window up to the join
        op = plan.op(op_id)
        if isinstance(op, Select):
            used = {e.index for e in op.predicate.walk() if isinstance(e, ColumnRef)}
            if any(cols[i] is None for i in used):
                return None
            filters.append(remap_columns(op.predicate, {i: cols[i] for i in used}))  # type: ignore[misc]
            doubles |= {("window", cols[i]) for i in used if dtypes[cols[i]] is DataType.DOUBLE}  # type: ignore[index, misc]
        else:
            assert isinstance(op, Project)
            cols = [cols[e.index] if isinstance(e, ColumnRef) else None for e in op.exprs]
    where = conjoin(filters)
    flt = None
    if where is not None:
        flt = arrow_filter(where, [True] * len(window_schema))
        if flt is None:
            return None
    join = plan.op(shape.join)
    inner = plan.op(shape.inner)
    top = plan.op(shape.top)
    assert isinstance(join, Join) and isinstance(inner, Aggregate) and isinstance(top, Aggregate)
    n = len(inner.group_by)
    pairs = join.equi_keys()
    if len(pairs) != n or sorted(r for _, r in pairs) != list(range(n)):
        return None
    left_keys: list[int] = [0] * n
    for left_col, right_col in pairs:
        w = cols[left_col]
        if w is None or not dtypes[w].is_integer:
            return None
        if not inner.schema.fields[right_col].dtype.is_integer:
            return None
        left_keys[right_col] = w
    if len(top.group_by) != n or sorted(shape.key_columns) != list(range(n)):
        return None
    # the join's output: the left chain's columns, then the inner aggregate's
    width = join.left_width
    inner_types = tuple(f.dtype for f in inner.schema)
    columns: list[tuple[str, int]] = []

    def place(c: int, compared: bool = True) -> int | None:
        if c < width:
            w = cols[c]
            if w is None:
                return None
            col, dtype = ("window", w), dtypes[w]
        else:
            col, dtype = ("inner", c - width), inner_types[c - width]
        if col not in columns:
            columns.append(col)
        if compared and dtype is DataType.DOUBLE:
            doubles.add(col)
        return columns.index(col)

    residual = conjoin(join.residual())
    predicate = None
    if residual is not None:
        mapping: dict[int, int] = {}
        for e in residual.walk():
            if isinstance(e, ColumnRef):
                at = place(e.index)
                if at is None:
                    return None
                mapping[e.index] = at
        predicate = arrow_filter(remap_columns(residual, mapping), [True] * len(columns))
        if predicate is None:
            return None
    counts: list[int | None] = []
    for call in top.aggs:
        if call.arg is None:
            counts.append(None)
        elif isinstance(call.arg, ColumnRef) and (at := place(call.arg.index, False)) is not None:
            counts.append(at)
        else:
            return None
    positions = [0] * n
    for j, p in enumerate(shape.key_columns):
        positions[p] = j
    return ScanCount(
        filter=flt,
        left_keys=tuple(left_keys),
        columns=tuple(columns),
        predicate=predicate,
        counts=tuple(counts),
        key_positions=tuple(positions),
        inner_types=inner_types,
        doubles=tuple(sorted(doubles)),
    )

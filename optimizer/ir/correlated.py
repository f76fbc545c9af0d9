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
well under 1% of the plugs (experiments/README.md, "Issue 20, seventh stop").

The shape (checked here, on the plan; the SQL side is ``engines.sqlgen.correlated`` and the
runtime ``engines.correlated``):

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

from optimizer.ir.expr import ColumnRef
from optimizer.ir.plan import Aggregate, Join, LogicalPlan, Project, Select

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

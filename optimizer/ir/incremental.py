"""Which aggregates of a columnar group can be kept incrementally, and when it pays (issue 20).

One rule shared by the SQL generator (``engines.sqlgen.incremental``, which writes the state
upkeep), the MIG (``engines.mig``, which decides per slide) and the cost model
(``cost_models.analytical``, which prices it): an aggregate of the group whose calls are all
COUNT(*), COUNT(x), SUM(x) or AVG(x) without DISTINCT (SUM/AVG of numbers), reading one of the
group's window-derived inputs through selects inside the group only. Keeping it costs a few
small queries per slide plus the changed rows and the state's groups; it pays over windows of
at least ``MIN_ROWS`` rows holding at least ``CHANGE_RATIO`` times the rows that changed.

An aggregate with a MIN or MAX cannot be kept by adding and subtracting. It is kept instead
from *pane partials* (Li et al., "No pane, no gain", SIGMOD Record 2005): each chunk that
entered the window is aggregated once into a partial per key; partials of about sqrt(P)
consecutive panes are merged into block partials; at each slide the result is one merge of
the live blocks' and the loose panes' partials. It pays when those hold several times fewer
rows than the window (``paned_pays``): many tuples per key per slide, or many slides.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from optimizer.ir.expr import AggCall
from optimizer.ir.plan import Aggregate, LogicalPlan, Select
from optimizer.ir.types import DataType

#: Keep state only over windows of at least this many rows ...
MIN_ROWS = 150_000
#: ... holding at least this many times the rows that entered and left at a slide.
CHANGE_RATIO = 4


def call_qualifies(call: AggCall) -> bool:
    """COUNT(*), COUNT(x), SUM/AVG of a number; no DISTINCT."""
    if not call.incremental:  # COUNT, SUM, AVG without DISTINCT
        return False
    if call.arg is None:
        return call.func == "COUNT"
    if call.func == "COUNT":
        return call.arg.dtype is not DataType.NULL
    return call.arg.dtype in (DataType.INTEGER, DataType.BIGINT, DataType.DOUBLE)


def incremental_input(
    plan: LogicalPlan, group: Collection[str], op_id: str
) -> tuple[str, list[str]] | None:
    """For a qualifying aggregate ``op_id`` of ``group``: the external operator it reads and
    the selects of the group on the way (nearest first); None if it does not qualify. The
    caller checks that the external operator is window-derived."""
    op = plan.op(op_id)
    if not isinstance(op, Aggregate) or not all(call_qualifies(c) for c in op.aggs):
        return None
    return _window_read(plan, group, op_id, op)


def _window_read(
    plan: LogicalPlan, group: Collection[str], op_id: str, op: Aggregate
) -> tuple[str, list[str]] | None:
    """The external operator an aggregate of ``group`` reads through the group's selects,
    and those selects (nearest first); None for a NULL-typed key or another operator on the
    way."""
    if any(k.dtype is DataType.NULL for k in op.group_by):
        return None
    chain: list[str] = []
    (cur,) = plan.inputs(op_id)
    while cur in group and isinstance(plan.op(cur), Select):
        chain.append(cur)
        (cur,) = plan.inputs(cur)
    if cur in group:
        return None
    return cur, chain


def worth_it(window_rows: float, changed_rows: float) -> bool:
    """Whether keeping the state beats re-evaluating a window of ``window_rows`` rows of
    which ``changed_rows`` entered or left at this slide."""
    return window_rows >= MIN_ROWS and window_rows >= CHANGE_RATIO * changed_rows


# -- MIN/MAX (and what comes with them) from pane partials ------------------------------------

#: Keep pane partials only over windows of at least this many rows (a slide's four small
#: queries cost about what re-aggregating 1.5 M rows does in DuckDB) ...
PANE_MIN_ROWS = 1_500_000
#: ... when the rows the final merge reads are at most 1/PANE_RATIO of the window's rows.
PANE_RATIO = 4
#: Aggregate functions a pane partial can hold (MIN/MAX by value, the rest by sums/counts).
PANED_FUNCS = frozenset({"MIN", "MAX", "COUNT", "SUM", "AVG"})


def paned_call_qualifies(call: AggCall) -> bool:
    """MIN/MAX of any non-NULL type, COUNT, SUM/AVG of a number; no DISTINCT."""
    if call.distinct or call.func not in PANED_FUNCS:
        return False
    if call.arg is None:
        return call.func == "COUNT"
    if call.arg.dtype is DataType.NULL:
        return False
    if call.func in ("SUM", "AVG"):
        return call.arg.dtype in (DataType.INTEGER, DataType.BIGINT, DataType.DOUBLE)
    return True


def paned_input(
    plan: LogicalPlan, group: Collection[str], op_id: str
) -> tuple[str, list[str]] | None:
    """Like :func:`incremental_input` for an aggregate kept from pane partials: one with a
    MIN or MAX (the exact-sum state cannot hold those) whose calls all have partials."""
    op = plan.op(op_id)
    if not isinstance(op, Aggregate) or all(call_qualifies(c) for c in op.aggs):
        return None
    if not all(paned_call_qualifies(c) for c in op.aggs):
        return None
    return _window_read(plan, group, op_id, op)


def block_size(panes: int) -> int:
    """Panes per block: about the square root of the window's panes, so a final merge reads
    about 2 sqrt(P) tables of partials instead of P."""
    return max(1, math.isqrt(max(1, panes)))


def paned_rows(panes: float, pane_groups: float, block_groups: float) -> float:
    """Rows a final merge reads: the whole blocks' partials and about 1.5 blocks of single
    panes at the window's two ends."""
    b = block_size(int(panes))
    return (panes / b) * block_groups + 1.5 * b * pane_groups


def paned_large(window_rows: float) -> bool:
    """Whether a window is large enough for pane partials to pay."""
    return window_rows >= PANE_MIN_ROWS


def paned_pays(window_rows: float, merged_rows: float) -> bool:
    """Whether merging ``merged_rows`` partial rows beats re-aggregating a window of
    ``window_rows``."""
    return paned_large(window_rows) and merged_rows * PANE_RATIO <= window_rows

"""Which aggregates of a columnar group can be kept incrementally, and when it pays (issue 20).

One rule shared by the SQL generator (``engines.sqlgen.incremental``, which writes the state
upkeep), the MIG (``engines.mig``, which decides per slide) and the cost model
(``cost_models.analytical``, which prices it): an aggregate of the group whose calls are all
COUNT(*), COUNT(x), SUM(x) or AVG(x) without DISTINCT (SUM/AVG of numbers), reading one of the
group's window-derived inputs through selects inside the group only. Keeping it costs a few
small queries per slide plus the changed rows and the state's groups; it pays over windows of
at least ``MIN_ROWS`` rows holding at least ``CHANGE_RATIO`` times the rows that changed.
"""

from __future__ import annotations

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

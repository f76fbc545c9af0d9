"""Which aggregates of a columnar group can be kept incrementally, and when it pays (issue 20).

One rule shared by the SQL generator (``engines.sqlgen.incremental``, which writes the state
upkeep), the MIG (``engines.mig.operator``, which decides per slide) and the cost model
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
from collections.abc import Collection, Mapping
from dataclasses import dataclass

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


#: Group counts between which a group table's per-row cost grows to its large-table value
#: (``large_group_share``).
SMALL_GROUPS = 2_000
LARGE_GROUPS = 50_000


def large_group_share(groups: float) -> float:
    """How much of a large group table's extra cost per tuple a table of ``groups`` groups
    pays: 0 up to ``SMALL_GROUPS``, 1 from ``LARGE_GROUPS``, log-linear between.

    The per-tuple constants (row engine and SQL) were measured with the real plug count
    (1,677 groups), so they already hold the work of a small group table. Measured on the
    AVG query at 20k tuples/s (issue 20), the per-group cost grows with the group count as
    the group tables outgrow the caches: about 2 us per touched group at 1,677 groups, 3 at
    5,000, 4 at 20,000, 5 at 50,000, linear in log G.
    """
    if groups <= SMALL_GROUPS:
        return 0.0
    if groups >= LARGE_GROUPS:
        return 1.0
    return math.log(groups / SMALL_GROUPS) / math.log(LARGE_GROUPS / SMALL_GROUPS)


@dataclass(frozen=True)
class ExactStatePrices:
    """One slide of an exact-sum state against re-evaluating what it replaces (the
    aggregate and its selects), at an engine's constants (seconds; the fields of
    ``cost_models.analytical.ColumnarConstants`` of the same names, ``inc_*`` for the state).

    The one comparison the cost model and the MIG make (issue 20): a state's merge rewrites
    all its groups, so over many groups and a window that is not much larger (50,000 plugs,
    a 1-minute window at 10k tuples/s) re-aggregating is cheaper; Q6 on 20,000 plugs at 10k
    measured 311k tuples/s with its three states and 379k without.
    """

    inc_fixed: float
    inc_row: float
    inc_group: float
    select: float
    aggregate: float
    aggregate_large: float = 0.0
    exact_sum: float = 0.0

    @classmethod
    def of(cls, consts: Mapping[str, float | None] | object) -> ExactStatePrices | None:
        """From a mapping or an object with those fields; None without ``inc_fixed``."""

        def get(name: str) -> float | None:
            v = consts.get(name) if isinstance(consts, Mapping) else getattr(consts, name, None)
            return None if v is None else float(v)

        fixed = get("inc_fixed")
        if fixed is None:
            return None
        return cls(
            fixed,
            get("inc_row") or 0.0,
            get("inc_group") or 0.0,
            get("select") or 0.0,
            get("aggregate") or 0.0,
            get("aggregate_large") or 0.0,
            get("exact_sum") or 0.0,
        )

    def kept(self, changed_rows: float, groups: float) -> float:
        """A merge: ``changed_rows`` rows reaching the aggregate entered or left, into a
        state of ``groups`` groups."""
        return self.inc_fixed + self.inc_row * changed_rows + self.inc_group * groups

    def reevaluated(
        self,
        window_rows: float,
        reached_rows: float,
        groups: float,
        selects: bool,
        doubles: int = 0,
    ) -> float:
        """Re-aggregating: the selects scan the window's ``window_rows`` rows, the aggregate
        reads the ``reached_rows`` that pass them into ``groups`` groups, and sums each of
        them exactly for each of its ``doubles`` calls adding DOUBLEs."""
        per_row = self.aggregate + self.aggregate_large * large_group_share(groups)
        per_row += self.exact_sum * doubles
        return (self.select * window_rows if selects else 0.0) + per_row * reached_rows


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

"""Which row selects run as Arrow filters, and the filter itself.

A select that runs on the row engine only to feed a columnar group, directly above a
time-based window, filters the window's Arrow batches on arrival instead of turning them
into tuples (``engines.row.lowering.Lowering.arrow_select``): no tuple is built, converted
or shipped, and the group reads the filtered chunks as they are. The cost model prices
such a select as Arrow work (``cost_models.analytical``), so both ask the same questions
here: :func:`arrow_select_candidate` (the plan's shape) and :func:`arrow_filter` (a
predicate Arrow evaluates exactly as the row engine does).
"""

from __future__ import annotations

from typing import Any

from optimizer.ir.plan import LogicalPlan, Select, Window, WindowKind


def arrow_select_candidate(plan: LogicalPlan, select_id: str) -> Window | None:
    """The window below ``select_id`` if the plan's shape lets that select filter the
    window's Arrow batches once its one consumer runs in a columnar group: a Select with
    one consumer, directly over a time-based window (not ROWS, not sliding by rows) with no
    other consumer. None otherwise. The predicate is checked by :func:`arrow_filter`."""
    select = plan.op(select_id)
    if not isinstance(select, Select) or len(plan.consumers(select_id)) != 1:
        return None
    (below,) = plan.inputs(select_id)
    window = plan.op(below)
    if not isinstance(window, Window) or len(plan.consumers(below)) != 1:
        return None
    if window.window is WindowKind.ROWS or window.slide_rows:
        return None
    return window


def arrow_selected(plan: LogicalPlan, select_id: str) -> bool:
    """Whether ``select_id``, on the row engine with its consumer in a columnar group, runs
    as an Arrow filter: :func:`arrow_select_candidate` and a predicate :func:`arrow_filter`
    admits. The window's input is a source, whose columns are always finite (non-finite
    rows are set aside as bad data), as the lowering's ports say."""
    window = arrow_select_candidate(plan, select_id)
    if window is None:
        return False
    select = plan.op(select_id)
    assert isinstance(select, Select)
    return arrow_filter(select.predicate, [True] * len(window.schema)) is not None


def arrow_filter(predicate: Any, finite: list[bool]) -> Any | None:
    """A ``pyarrow.compute`` expression equal to ``predicate`` under the row engine's
    semantics, or None when that cannot be promised.

    Used to filter a window's Arrow batches when the select's only consumer is a columnar
    group, so its tuples never become Python objects. Admitted: AND, OR, NOT, IS [NOT] NULL
    and comparisons of a column with a literal or another column of the same kind (integer
    with integer, DOUBLE with DOUBLE or a number below 2**53, VARCHAR with VARCHAR, BOOLEAN
    with BOOLEAN), on columns that are always finite (``finite`` by position: Arrow compares
    NaN by IEEE rules, the row engine as SQL engines do). No arithmetic: Arrow's integer
    arithmetic wraps where the row engine's raises, and its division differs. Three-valued
    logic is Kleene's in both, and a filter keeps only TRUE rows in both.
    """
    import pyarrow.compute as pc

    from optimizer.ir.expr import ARROW_COMPARISONS, Binary, ColumnRef, Literal, Unary
    from optimizer.ir.types import DataType

    kinds_of = {DataType.DOUBLE: "double", DataType.VARCHAR: "str", DataType.BOOLEAN: "bool"}

    def kind(t: DataType) -> str:
        return "int" if t.is_integer else kinds_of.get(t, "?")

    def operand(e: Any) -> tuple[Any, str] | None:
        if isinstance(e, ColumnRef):
            if e.dtype is DataType.DOUBLE and not finite[e.index]:
                return None
            return pc.field(e.index), kind(e.dtype)
        if not isinstance(e, Literal) or e.value is None:
            return None
        if isinstance(e.value, float):
            if e.value != e.value or e.value in (float("inf"), float("-inf")):
                return None
            return pc.scalar(e.value), "double"
        return pc.scalar(e.value), kind(e.dtype)

    def build(e: Any) -> Any | None:
        if isinstance(e, Binary) and e.op in ("AND", "OR"):
            a, b = build(e.left), build(e.right)
            if a is None or b is None:
                return None
            return (a & b) if e.op == "AND" else (a | b)
        if isinstance(e, Unary) and e.op == "NOT":
            a = build(e.operand)
            return None if a is None else ~a
        if isinstance(e, Unary) and e.op in ("IS NULL", "IS NOT NULL"):
            if not isinstance(e.operand, ColumnRef):
                return None
            f = pc.field(e.operand.index)
            return f.is_null() if e.op == "IS NULL" else f.is_valid()
        if isinstance(e, Binary) and e.op in ARROW_COMPARISONS:
            left, right = operand(e.left), operand(e.right)
            if left is None or right is None:
                return None
            kinds = {left[1], right[1]}
            if "?" in kinds or (len(kinds) > 1 and kinds != {"int", "double"}):
                return None
            if kinds == {"int", "double"}:
                # Arrow casts the integer side to double: exact for a literal below 2**53,
                # not for a column (the row engine compares exactly).
                side = e.left if left[1] == "int" else e.right
                if not isinstance(side, Literal) or abs(int(side.value)) >= 2**53:  # type: ignore[call-overload]
                    return None
            return pc.Expression._call(ARROW_COMPARISONS[e.op], [left[0], right[0]])
        return None

    return build(predicate)

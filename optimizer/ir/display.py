"""The one plan printer: used by tests (golden files), ``hycq explain`` and the reports.

Plans print top-down from the sink in toydb's ``└─`` style. A shared subplan (one source
feeding two windows) is printed in full the first time and referenced afterwards.

Example:
    >>> from optimizer.sql import plan_query
    >>> from optimizer.sql.catalog import builtin_smartplug_catalog
    >>> plan = plan_query("SELECT plug_id, AVG(value) AS a FROM readings [RANGE 1 MINUTE] "
    ...                   "GROUP BY plug_id", builtin_smartplug_catalog())
    >>> print(render_plan(plan))
    sink1 sink
    └─ rstream1 rstream
       └─ project1 project plug_id, AVG(value) AS a
          └─ aggregate1 aggregate AVG(value) AS "AVG(value)" GROUP BY plug_id
             └─ window1 window [RANGE 1 MINUTE]
                └─ source1 source readings
"""

from __future__ import annotations

from collections.abc import Callable

from optimizer.ir.plan import LogicalPlan


def render_plan(
    plan: LogicalPlan,
    annotate: Callable[[str], str] | None = None,
    show_schema: bool = False,
) -> str:
    """Render ``plan`` as an indented tree.

    ``annotate(op_id)`` may add text after an operator (engine tags, costs); ``show_schema``
    adds each operator's output schema on its own line.
    """
    lines: list[str] = []
    seen: set[str] = set()

    def visit(op_id: str, prefix: str, connector: str, child_prefix: str) -> None:
        op = plan.op(op_id)
        text = f"{op.id} {op.kind}"
        detail = op.describe()
        if detail:
            text += f" {detail}"
        if annotate is not None:
            extra = annotate(op_id)
            if extra:
                text += f"  {extra}"
        if op_id in seen:
            lines.append(f"{prefix}{connector}{op.id} (shared, see above)")
            return
        seen.add(op_id)
        lines.append(f"{prefix}{connector}{text}")
        if show_schema:
            bar = "│  " if plan.inputs(op_id) else "   "
            lines.append(f"{prefix}{child_prefix}{bar}-> {op.schema.display()}")
        inputs = plan.inputs(op_id)
        for i, child in enumerate(inputs):
            last = i == len(inputs) - 1
            visit(
                child,
                prefix + child_prefix,
                "└─ " if last else "├─ ",
                "   " if last else "│  ",
            )

    visit(plan.sink, "", "", "")
    return "\n".join(lines)

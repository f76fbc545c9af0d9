"""Engine tags for the one plan printer (``optimizer.ir.display.render_plan``).

``hycq explain`` and the HTML report print the plan with the same printer and the same
tags, so the text a user reads in a terminal is the text in the report.

Example:
    >>> tag = engine_tag([{"id": "a", "kind": "join", "engine": "duckdb", "u": 0.25,
    ...                     "unit": "g0", "bottleneck": True}])
    >>> tag("a")
    '[duckdb u=0.25 g0 bottleneck]'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def engine_tag(operators: Sequence[Mapping[str, Any]]) -> Callable[[str], str]:
    """An ``annotate`` callback: ``[engine u=... g<k> bottleneck]`` per operator id.

    ``operators`` are rows of ``Optimized.operator_rows`` (or ``explain --json``).
    """
    ops = {op["id"]: op for op in operators}

    def tag(op_id: str) -> str:
        op = ops[op_id]
        text = f"[{op['engine']}"
        if op["u"] is not None and op["kind"] not in ("source", "sink"):
            text += f" u={op['u']:.3g}"
            if str(op["unit"]).startswith("g"):
                text += f" {op['unit']}"
        if op["bottleneck"]:
            text += " bottleneck"
        return text + "]"

    return tag

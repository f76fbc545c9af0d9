"""Stateless relational operators: select and project over deltas (both lists mapped)."""

from __future__ import annotations

from collections.abc import Callable

from engines.row.base import NO_CHANGE, Delta, RowOperator, Rows


class SelectOp(RowOperator):
    """Keeps the tuples for which the compiled predicate is TRUE (inserts and deletes alike)."""

    kind = "select"

    def __init__(self, op_id: str, keep: Callable[[Rows], Rows], replace_out: bool) -> None:
        super().__init__(op_id, replace_out)
        self.keep = keep

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        d = inputs[0]
        if d.empty:
            return NO_CHANGE
        keep = self.keep
        return Delta(keep(d.ins), keep(d.dels) if d.dels else [], d.replace)


class ProjectOp(RowOperator):
    """Maps every tuple through the compiled projection list."""

    kind = "project"

    def __init__(self, op_id: str, fn: Callable[[Rows], Rows], replace_out: bool) -> None:
        super().__init__(op_id, replace_out)
        self.fn = fn

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        d = inputs[0]
        if d.empty:
            return NO_CHANGE
        fn = self.fn
        return Delta(fn(d.ins), fn(d.dels) if d.dels else [], d.replace)

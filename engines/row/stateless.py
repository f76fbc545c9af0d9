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
        return Delta(keep(d.ins), keep(d.dels) if d.dels else [], d.replace, d.expire)


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
        return Delta(fn(d.ins), fn(d.dels) if d.dels else [], d.replace, d.expire)


class PushedSelectOp(RowOperator):
    """A select whose filter runs inside its input window as tuples arrive.

    Filtering commutes with time-based windows (a tuple's membership depends only on its own
    timestamp), so filtering on arrival halves what the window stores and filters every tuple
    once instead of twice (on insert and on expiry). The window charges the filtering to this
    operator's metrics; ``step`` passes the already-filtered delta through.
    """

    kind = "select"
    #: True when the window filters Arrow batches (its deltas are Arrow chunks for a MIG).
    arrow = False

    def __init__(self, op_id: str, replace_out: bool) -> None:
        super().__init__(op_id, replace_out)

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        return inputs[0]

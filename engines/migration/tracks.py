"""A plan running under the migration driver: its handle and where its output goes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from engines.runtime.engine import OnLate, PlanExecutor
from optimizer.ir.plan import LogicalPlan


class PlanHandle(Protocol):
    """One plan wired for execution (``engines.assembly.Assembly`` is one): the executor, its
    per-operator figures, its run extras, and ``close`` (which releases its columnar
    inputs; the engines themselves may be shared with other handles)."""

    plan: LogicalPlan
    placement: dict[str, str]

    @property
    def executor(self) -> PlanExecutor: ...

    def operator_metrics(self) -> dict[str, dict[str, Any]]: ...

    def extra_metrics(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


#: ``build(plan, placement, emit, on_late) -> PlanHandle``: a fresh plan, nothing ingested.
Build = Callable[[LogicalPlan, dict[str, str], Callable[[int, Any], None], OnLate], PlanHandle]


class Track:
    """A built plan plus the routing of its output: while ``live``, its results go to the
    run's sink; otherwise they are discarded (a plan being rebuilt or run in parallel).
    ``last_instant`` is the last instant it fired (live or not)."""

    def __init__(self, label: dict[str, Any]) -> None:
        self.label = label
        self.handle: PlanHandle | None = None
        self.live = False
        self.last_instant: int | None = None
        self.instants = 0
        self.rejected = 0
        self.sink: Callable[[int, Any], None] | None = None
        self.on_live_emit: Callable[[int], None] | None = None
        self.on_late_live: OnLate | None = None

    @property
    def executor(self) -> PlanExecutor:
        assert self.handle is not None
        return self.handle.executor

    def emit(self, instant: int, rows: Any) -> None:
        self.last_instant = instant
        self.instants += 1
        if self.live:
            assert self.sink is not None
            self.sink(instant, rows)
            if self.on_live_emit is not None:
                self.on_live_emit(instant)

    def late(self, stream: str, row: tuple[Any, ...], reason: str) -> None:
        """A late tuple rejected: the live plan's go to the dead letters; a plan fed only
        what the live plan accepted should reject none (counted in ``rejected``)."""
        if self.live and self.on_late_live is not None:
            self.on_late_live(stream, row, reason)
        else:
            self.rejected += 1


def ingest_accepted(executor: Any, stream: str, batch: Any, time_column: int) -> Any:
    """``executor.ingest_accepted`` when it has it; else ``ingest``, taking the whole batch
    as accepted when every row was, and None (unknown) when some were rejected."""
    fn = getattr(executor, "ingest_accepted", None)
    if fn is not None:
        return fn(stream, batch, time_column)
    n = executor.ingest(stream, batch, time_column)
    return batch if n == batch.num_rows else UNKNOWN


class Unknown:
    """Marks a batch of which an executor accepted an unknown part (no replay possible)."""


UNKNOWN = Unknown()


def now() -> float:
    return time.perf_counter()

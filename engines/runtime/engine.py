"""What the run-time needs from an engine, and how the engine reports back to it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pyarrow as pa

Rows = list[tuple[Any, ...]]


#: ``on_late(stream, row, reason)``: an engine reports a late tuple it rejected.
OnLate = Callable[[str, tuple[Any, ...], str], None]


class PlanExecutor(Protocol):
    """What the run-time needs from an engine (the row engine's RowExecutor implements it).

    ``advance_stream(stream, ts)``: the stream's next tuple has running-maximum timestamp
    ``ts`` (its event-time progress); ``end_stream(stream)``: it has no tuple left.
    """

    def ingest(self, stream: str, batch: pa.RecordBatch, time_column: int) -> int: ...

    def advance_stream(self, stream: str, ts: int) -> None: ...

    def end_stream(self, stream: str) -> None: ...

    def finish(self) -> None: ...


class Assembled(Protocol):
    """A plan wired for execution, as ``run_plan`` runs it (``engines.assembly.Assembly``
    and ``MigratingAssembly`` implement it): ``make_engine(emit, on_late)`` builds the
    executor once the run's output and late-tuple handling exist; ``operator_metrics`` and
    ``extra_metrics`` are read when the run ends; ``placement`` is the engine per operator
    the run starts with."""

    placement: dict[str, str]

    def make_engine(self, emit: Callable[[int, Any], None], on_late: OnLate) -> PlanExecutor: ...

    def operator_metrics(self, engine: Any = None) -> dict[str, dict[str, Any]]: ...

    def extra_metrics(self) -> dict[str, Any]: ...

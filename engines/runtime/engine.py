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

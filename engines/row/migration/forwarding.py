"""The PlanExecutor calls of a row migration that runs two plans as one executor.

Parallel Track and HybMig run the old and the new plan side by side until the old one can
be dropped; to the run loop and the migration driver they are one executor whose input,
clock and counters are the *new* executor's (the old plan is stepped from the new one's
clock). :class:`ForwardsToNew` is that forwarding, written once.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from engines.row.executor import RowExecutor


class ForwardsToNew:
    """Every PlanExecutor call goes to ``self.new``, the executor that continues alone."""

    new: RowExecutor

    def ingest(self, stream: str, batch: pa.RecordBatch | pa.Table, time_column: int) -> int:
        return self.new.ingest(stream, batch, time_column)

    def advance_stream(self, stream: str, ts: int) -> None:
        self.new.advance_stream(stream, ts)

    def end_stream(self, stream: str) -> None:
        self.new.end_stream(stream)

    def finish(self) -> None:
        self.new.finish()

    @property
    def successor(self) -> RowExecutor:
        """The executor that continues alone once the migration is done."""
        return self.new

    @property
    def late_count(self) -> int:
        return self.new.late_count

    @property
    def instants_fired(self) -> int:
        return self.new.instants_fired

    @property
    def last_fired(self) -> int | None:
        return self.new.last_fired

    def watermark(self) -> int | None:
        return self.new.watermark()

    def operator_metrics(self) -> dict[str, dict[str, Any]]:
        return self.new.operator_metrics()

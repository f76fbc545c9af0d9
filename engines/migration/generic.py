"""The generic strategies: a new plan's state rebuilt from input, for ANY pair of plans.

They treat both plans as black boxes (any join order, any placement: row, DuckDB, Spark,
DataFusion, mixed) and need nothing from an executor but the ``PlanExecutor`` calls plus
``begin_rebuild`` / ``end_rebuild`` on a fresh row executor (engines/row/executor.py):

* **GMS** (generic moving state): at the migration point the new plan is fed the replay
  buffer (the accepted input still within the horizon, engines/migration/replay.py) and the
  streams' progress; it recomputes the instants the old plan had fired (output discarded),
  so its windows, aggregates and R2S state equal the old plan's; then it replaces the old
  plan. Output stops while the replay runs.
* **GPT** (generic parallel track): from the migration on, the new plan is fed every tuple
  the old one accepts, and runs beside it with its output discarded; the old plan keeps
  producing output until every tuple it had before the migration has left every window
  (the first instant T with T - H_s >= the stream's progress at the migration, for every
  stream s; H_s its largest window range). From T on both plans hold the same window
  contents, hence the same state: the old plan is dropped. No output gap; the price is two
  plans running for one horizon. Not for ROWS windows (a count window never empties by
  time).
* **GHM** (generic hybrid migration): GMS's replay done in the background, a bounded part
  per call into the driver (a chunk plus twice what arrived since the last call, so it
  always catches up), while the old plan goes on producing; the input the old plan
  takes meanwhile is queued for the new one and replayed after the buffer; once it has
  caught up (it has fired exactly the old plan's instants) it replaces the old plan.

None of them moves or recomputes an operator's state as such: the migration record's
``states_moved`` is 0, ``states_recomputed`` and ``keys_completed`` are None, and
``tuples_replayed`` says how much input was replayed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from engines.migration.replay import Horizon, ReplayBuffer
from engines.migration.tracks import Track, ingest_accepted


@dataclass
class MigrationContext:
    """What a strategy starts from: the old (live) and the new (fresh, not live) plan at a
    point between two calls into the old one."""

    old: Track
    new: Track
    buffer: ReplayBuffer | None
    horizons: dict[str, Horizon]
    progress: dict[str, int]
    """Per stream, the event-time progress the old plan was told (largest timestamp or
    advance_stream value)."""
    ended: set[str]
    time_columns: dict[str, int]


@dataclass
class ActiveMigration:
    """A migration under way. The driver routes every call to it (``ingest`` returns the
    rows the live plan accepted) and calls ``poll`` after each; once ``done``, the driver
    makes ``successor`` the running plan and drops the other one."""

    ctx: MigrationContext
    done: bool = False
    stats: dict[str, Any] = field(
        default_factory=lambda: {
            "states_moved": 0,
            "states_recomputed": None,
            "keys_completed": None,
            "tuples_replayed": 0,
        }
    )

    @property
    def successor(self) -> Track:
        return self.ctx.new

    def ingest(self, stream: str, batch: pa.RecordBatch, time_column: int) -> Any:
        return ingest_accepted(self.ctx.old.executor, stream, batch, time_column)

    def advance_stream(self, stream: str, ts: int) -> None:
        self.ctx.old.executor.advance_stream(stream, ts)

    def end_stream(self, stream: str) -> None:
        self.ctx.old.executor.end_stream(stream)

    def poll(self) -> None:
        return None

    def abandon(self) -> None:
        """The input ended first: the old plan finishes the run alone."""
        return None


def _tell_progress(track: Track, progress: dict[str, int], ended: set[str]) -> None:
    ex = track.executor
    for stream, ts in sorted(progress.items()):
        ex.advance_stream(stream, ts)
    for stream in sorted(ended):
        ex.end_stream(stream)


class ReplayMigration(ActiveMigration):
    """GMS (``chunk_rows=None``: the whole replay at the migration point) and GHM (at most
    ``chunk_rows`` tuples replayed per call into the driver)."""

    def __init__(self, ctx: MigrationContext, chunk_rows: int | None) -> None:
        super().__init__(ctx)
        assert ctx.buffer is not None
        self.chunk_rows = chunk_rows
        self.start_instant = ctx.old.last_instant
        self.progress = dict(ctx.progress)
        self.ended = set(ctx.ended)
        # The replay: each stream's buffered tuples, cut into slices.
        self._todo: deque[tuple[str, pa.RecordBatch]] = deque()
        for stream, table in sorted(ctx.buffer.tables().items()):
            for batch in table.to_batches(max_chunksize=chunk_rows or None):
                self._todo.append((stream, batch))
        self._queue: deque[tuple[str, str, Any]] = deque()  # calls the old plan got since
        rebuild = getattr(ctx.new.executor, "begin_rebuild", None)
        assert rebuild is not None, "the new plan must be a fresh row executor"
        rebuild()
        self._rebuilt = False
        self._added = 0  # rows queued since the last poll
        if chunk_rows is None:
            while not self.done:
                self._work(None)

    def ingest(self, stream: str, batch: pa.RecordBatch, time_column: int) -> Any:
        acc = ingest_accepted(self.ctx.old.executor, stream, batch, time_column)
        if acc is not None and acc.num_rows:
            self._queue.append(("ingest", stream, (acc, time_column)))
            self._added += acc.num_rows
        return acc

    def advance_stream(self, stream: str, ts: int) -> None:
        self.ctx.old.executor.advance_stream(stream, ts)
        self._queue.append(("advance", stream, ts))

    def end_stream(self, stream: str) -> None:
        self.ctx.old.executor.end_stream(stream)
        self._queue.append(("end", stream, None))

    def poll(self) -> None:
        if not self.done:
            # Twice what arrived since the last poll on top of the chunk: the queue shrinks
            # at every call, so the new plan always catches up.
            assert self.chunk_rows is not None
            budget = self.chunk_rows + 2 * self._added
            self._added = 0
            self._work(budget)

    def _work(self, budget: int | None) -> None:
        """Replay up to ``budget`` tuples (None: all), then catch up with the queue."""
        new = self.ctx.new.executor
        spent = 0
        tc = self.ctx.time_columns
        while self._todo and (budget is None or spent < budget):
            stream, batch = self._todo.popleft()
            new.ingest(stream, batch, tc[stream])
            spent += batch.num_rows
            self.stats["tuples_replayed"] += batch.num_rows
        if self._todo:
            return
        if not self._rebuilt:
            new.end_rebuild(self.start_instant, self.progress, self.ended)  # type: ignore[attr-defined]
            self._rebuilt = True
        while self._queue and (budget is None or spent < budget):
            kind, stream, arg = self._queue.popleft()
            if kind == "ingest":
                batch, t = arg
                new.ingest(stream, batch, t)
                spent += batch.num_rows
            elif kind == "advance":
                new.advance_stream(stream, arg)
            else:
                new.end_stream(stream)
        if not self._queue:
            self.done = True


class ParallelMigration(ActiveMigration):
    """GPT: the new plan runs beside the old one until the pre-migration tuples expired."""

    def __init__(self, ctx: MigrationContext) -> None:
        super().__init__(ctx)
        self.stats["tuples_replayed"] = 0
        # The first instant at which no window holds a tuple the new plan has not seen.
        bounds = [ts + ctx.horizons[s].ticks for s, ts in ctx.progress.items() if s in ctx.horizons]
        self.switch_at: int | None = max(bounds) if bounds else None
        self.stats["parallel_until"] = self.switch_at
        _tell_progress(ctx.new, ctx.progress, ctx.ended)
        self._check()

    def ingest(self, stream: str, batch: pa.RecordBatch, time_column: int) -> Any:
        acc = ingest_accepted(self.ctx.old.executor, stream, batch, time_column)
        if acc is not None and acc.num_rows:
            self.ctx.new.executor.ingest(stream, acc, time_column)
        return acc

    def advance_stream(self, stream: str, ts: int) -> None:
        self.ctx.old.executor.advance_stream(stream, ts)
        self.ctx.new.executor.advance_stream(stream, ts)

    def end_stream(self, stream: str) -> None:
        self.ctx.old.executor.end_stream(stream)
        self.ctx.new.executor.end_stream(stream)

    def poll(self) -> None:
        self._check()

    def _check(self) -> None:
        new = self.ctx.new
        # No input before the migration: the new plan is already equal.
        if self.switch_at is None or (
            new.last_instant is not None and new.last_instant >= self.switch_at
        ):
            self.done = True

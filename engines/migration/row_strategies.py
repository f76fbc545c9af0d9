"""The row-level strategies (MS, JISC, PT, HybMig) registered with the migration driver.

They move operator state between two row executors by signature
(engines/row/migration/, docs/migration-row.md), so both plans must run every operator on the
row engine (``row_only``); where a plan has a shape they cannot handle they raise PlanError
saying why. That is checked before the run (``strategies.check``: a :func:`dry_run` of the
strategy on two fresh, throwaway executors of the plans), not only at the migration point.

* ``ms``: :func:`~engines.row.migration.move_states` at the migration point (done at once).
* ``jisc``: :func:`~engines.row.migration.jisc_transfer` at the migration point; the new
  plan's unmatched states complete lazily per key afterwards, so the record's
  ``keys_completed`` is read when the metrics are written (:func:`jisc_keys_completed`).
* ``pt``: :class:`~engines.row.migration.ParallelTrack` runs both plans and emits every
  result through the new plan's output; done when the old plan is dropped. If the input
  ends first, PT itself finishes the run (its output is the only correct one).
* ``hybmig``: :class:`~engines.row.migration.HybridMigration` likewise (leaf states shared,
  the old plan restricted to the results the predicate C assigns it); ``hybmig`` runs it
  with background state computation (the old plan goes as soon as every new state is
  complete), ``hybmig-lazy`` without (the old plan goes when a C leaf holds no old tuple).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from engines.migration.generic import ActiveMigration, MigrationContext
from engines.migration.strategies import StrategySpec, register, transfer_strategy
from engines.migration.tracks import ingest_accepted
from engines.row.executor import RowExecutor
from engines.row.migration import (
    HybridMigration,
    ParallelTrack,
    jisc_progress,
    jisc_transfer,
    move_states,
)
from optimizer.ir.plan import LogicalPlan


class RowParallelTrack(ActiveMigration):
    """PT (and HybMig) under the driver: every call goes to the two-plan executor, whose
    results leave through the new plan (live from the start; the old plan's own output is
    off)."""

    def __init__(self, ctx: MigrationContext) -> None:
        super().__init__(ctx)
        self.pt = self.make(ctx)
        ctx.old.live = False
        ctx.new.live = True
        self._update()

    #: The driver lets this strategy finish the run when the input ends during it.
    owns_output = True

    def make(self, ctx: MigrationContext) -> Any:
        return ParallelTrack(ctx.old.executor, ctx.new.executor)  # type: ignore[arg-type]

    def ingest(self, stream: str, batch: pa.RecordBatch, time_column: int) -> Any:
        acc = ingest_accepted(self.pt.new, stream, batch, time_column)
        self._update()
        return acc

    def advance_stream(self, stream: str, ts: int) -> None:
        self.pt.advance_stream(stream, ts)
        self._update()

    def end_stream(self, stream: str) -> None:
        self.pt.end_stream(stream)
        self._update()

    def finish_input(self) -> None:
        """End of input during PT: fire the remaining instants through PT."""
        self.pt.finish()
        self._update()

    def poll(self) -> None:
        self._update()

    def _update(self) -> None:
        self.stats["states_moved"] = self.pt.states_moved
        self.stats["states_recomputed"] = getattr(self.pt, "states_recomputed", 0)
        if self.pt.done and not self.done:
            self.done = True
            self.stats["old_plan_dropped_at"] = self.pt.dropped_at


class RowHybridMigration(RowParallelTrack):
    """HybMig under the driver (``bsc``: with background state computation)."""

    bsc = True

    def make(self, ctx: MigrationContext) -> Any:
        return HybridMigration(ctx.old.executor, ctx.new.executor, bsc=self.bsc)  # type: ignore[arg-type]


class RowHybridMigrationLazy(RowHybridMigration):
    bsc = False


def dry_run(migrate: Callable[[RowExecutor, RowExecutor], Any]) -> Any:
    """A ``precheck`` (engines/migration/strategies.py) that runs ``migrate(old, new)`` on two
    fresh, throwaway row executors of the plans: the row-level strategies check the plans'
    shapes when they start (a PlanError saying why), and with nothing ingested that is all
    they do; the run's own executors are not touched."""

    def precheck(old_plan: LogicalPlan, new_plan: LogicalPlan) -> None:
        old = RowExecutor(old_plan, _discard)
        new = RowExecutor(new_plan, _discard)
        migrate(old, new)

    return precheck


def _discard(instant: int, rows: Any) -> None:
    return None


def _jisc_start(ctx: MigrationContext) -> ActiveMigration:
    active = transfer_strategy(jisc_transfer)(ctx)
    # Completion happens after the migration: the driver reads the count at the end.
    active.stats["keys_completed"] = 0
    active.stats["_jisc_executor"] = ctx.new.executor
    return active


def jisc_keys_completed(executor: Any) -> int:
    """Keys completed so far by the JISC states of ``executor`` (0 once it was replaced)."""
    return int(jisc_progress(executor).keys_completed)


register(
    StrategySpec(
        "ms",
        "moving state: row states moved by signature, the unmatched ones recomputed",
        transfer_strategy(move_states),
        row_only=True,
        precheck=dry_run(move_states),
    )
)
register(
    StrategySpec(
        "jisc",
        "JISC: row states moved by signature, the rest completed lazily per key on first probe",
        _jisc_start,
        row_only=True,
        precheck=dry_run(jisc_transfer),
    )
)
register(
    StrategySpec(
        "pt",
        "parallel track: both row plans run, the old one drops all-new results at its top",
        RowParallelTrack,
        row_only=True,
        precheck=dry_run(ParallelTrack),
    )
)
register(
    StrategySpec(
        "hybmig",
        "HybMig: shared leaf states, the old plan restricted to C, background state computation",
        RowHybridMigration,
        row_only=True,
        precheck=dry_run(lambda old, new: HybridMigration(old, new, bsc=True)),
    )
)
register(
    StrategySpec(
        "hybmig-lazy",
        "HybMig without background state computation: the old plan runs until a C leaf ages",
        RowHybridMigrationLazy,
        row_only=True,
        precheck=dry_run(HybridMigration),
    )
)

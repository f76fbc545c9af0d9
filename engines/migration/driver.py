"""The migration driver: a ``PlanExecutor`` that runs a plan and replaces it mid-run.

``MigratingExecutor`` sits between the run loop (engines/runtime/loop.py) and the plans. It
holds the running plan (a :class:`~engines.migration.tracks.Track`), forwards every call to
it, and migrates

* at scripted event times (:class:`~engines.migration.request.ScheduledMigration`): an
  input batch is split (Arrow slice, ``numpy.searchsorted`` on its running maximum
  timestamps) so the migration happens as soon as the merged input reaches time AT (AT
  event-seconds after the run's first tuple, the origin ``--duration`` counts from too);
  a stream's progress report (``advance_stream``) that reaches AT triggers it as well;
* when the controller asks (``--adapt``): ``controller.check(now_tick, monitor)`` every
  ``check_every`` ticks of event time, after a call that fired an instant.

A migration always happens between two calls into the running plan. The strategy
(engines/migration/strategies.py) either finishes at once (GMS, MS, JISC) or runs while
input goes on (GPT, GHM, PT); meanwhile every call goes to it. A migration asked for while
another is under way waits until that one has completed, then starts (its record says
``deferred``); the controller is not consulted during a migration.

Results reach the run's sink only from the *live* plan; a plan being rebuilt or run in
parallel emits into nothing. Only what the live plan accepted is buffered for replay and fed
to a new plan, so a late tuple it rejected never comes back.

Metrics: one record per migration (``records()``), the final plan's operators, and the plan
timeline (``plans``); see docs/migration.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from engines.migration.generic import ActiveMigration, MigrationContext
from engines.migration.replay import Horizon, ReplayBuffer, replay_horizons
from engines.migration.request import (
    Controller,
    MigrationRequest,
    RuntimeMonitorHook,
    ScheduledMigration,
)
from engines.migration.strategies import check, choose_auto
from engines.migration.tracks import UNKNOWN, Build, Track, ingest_accepted
from engines.runtime.engine import OnLate
from optimizer.ir.errors import PlanError
from optimizer.ir.plan import LogicalPlan, Source


class MigratingExecutor:
    """Runs ``plan`` placed as ``placement`` and migrates it as scheduled or asked.

    ``build(plan, placement, emit, on_late)`` makes a fresh plan (one per migration target,
    sharing the run's columnar engines); ``emit``/``on_late`` are the run's. ``same_order``
    (old plan, new plan) -> bool tells ``auto`` whether the join order changes.
    ``ticks_per_second``: of the query's time base (to place AT and ``check_every``).
    ``label_of(plan)``: how records name a plan (e.g. ``{"join_order": [...]}``) when a
    request carries no label.
    """

    def __init__(
        self,
        build: Build,
        plan: LogicalPlan,
        placement: dict[str, str],
        emit: Callable[[int, Any], None],
        on_late: OnLate,
        *,
        ticks_per_second: int,
        label: dict[str, Any] | None = None,
        schedule: Sequence[ScheduledMigration] = (),
        controller: Controller | None = None,
        check_every: int | None = None,
        monitor: RuntimeMonitorHook | None = None,
        same_order: Callable[[LogicalPlan, LogicalPlan], bool] | None = None,
        label_of: Callable[[LogicalPlan], dict[str, Any]] | None = None,
        replay: bool = True,
    ) -> None:
        self.build = build
        self.sink = emit
        self.on_late = on_late
        self.tps = ticks_per_second
        self.schedule = sorted(schedule, key=lambda s: s.at_s)
        self.controller = controller
        self.check_every = check_every
        self.monitor = monitor
        self.same_order = same_order or (lambda a, b: False)
        self.label_of = label_of or (lambda p: {})
        self.time_columns = _time_columns(plan)
        # The buffer exists only if a replay-based strategy may run (no cost otherwise).
        self.horizons: dict[str, Horizon] = {}
        self.buffer: ReplayBuffer | None = None
        if replay:
            try:
                self.horizons = replay_horizons(plan)
            except PlanError:
                self.horizons = {}
            else:
                self.buffer = ReplayBuffer(self.horizons)
        self.tainted = False  # an executor accepted an unknown part of a batch
        self.progress: dict[str, int] = {}
        self.ended: set[str] = set()
        self.origin: int | None = None
        self.current = self._track(plan, placement, label or self.label_of(plan))
        self.current.live = True
        self.active: ActiveMigration | None = None
        self._active_record: dict[str, Any] | None = None
        self._waiting: list[tuple[MigrationRequest, dict[str, Any]]] = []
        self._records: list[dict[str, Any]] = []
        self._open_gaps: list[dict[str, Any]] = []
        self._last_emit: float | None = None
        self._fired: list[int] = []
        self._last_check: int | None = None
        self.plans: list[dict[str, Any]] = [
            {"from_instant": None, **self.current.label, "placement": placement}
        ]
        self._dropped_extras: list[dict[str, Any]] = []

    # -- plans ------------------------------------------------------------------------------

    def _track(self, plan: LogicalPlan, placement: dict[str, str], label: dict[str, Any]) -> Track:
        track = Track(label)
        track.sink = self.sink
        track.on_live_emit = self._live_emit
        track.on_late_live = self.on_late
        track.handle = self.build(plan, placement, track.emit, track.late)
        return track

    def _live_emit(self, instant: int) -> None:
        now = time.perf_counter()
        for rec in self._open_gaps:
            rec["_gap"] = max(rec["_gap"], now - rec["_prev"])
            rec["_prev"] = now
        for rec in [r for r in self._open_gaps if r.get("_switched")]:
            self._close_gap(rec)
        self._last_emit = now
        self._fired.append(instant)
        if self.buffer is not None:
            self.buffer.fired(instant)

    def _close_gap(self, rec: dict[str, Any]) -> None:
        rec["output_gap_ms"] = round(1e3 * rec.pop("_gap"), 3)
        rec.pop("_prev")
        rec.pop("_switched", None)
        self._open_gaps.remove(rec)

    # -- the PlanExecutor calls -------------------------------------------------------------

    def ingest(self, stream: str, batch: pa.RecordBatch, time_column: int) -> int:
        if batch.num_rows == 0:
            return 0
        return self._ingest_cut(stream, batch, time_column)

    def _charge(self, started: float) -> None:
        """Tell the monitor how long the engine worked on a call (all of it: operators,
        clock, deltas, output, migrations), for the engine thread's load."""
        if self.monitor is not None:
            self.monitor.engine_busy_s += time.perf_counter() - started

    def _ingest_cut(self, stream: str, batch: pa.RecordBatch, time_column: int) -> int:
        if self.origin is None:
            self.origin = int(batch.column(time_column)[0].as_py())
        self.time_columns[stream] = time_column
        taken = 0
        while batch.num_rows:
            at = self._next_at()
            check_at = self._next_check()
            if at is None and check_at is None:
                taken += self._ingest(stream, batch, time_column)
                break
            ts = np.asarray(batch.column(time_column).to_numpy(zero_copy_only=False), np.int64)
            keys = np.maximum.accumulate(ts)
            if stream in self.progress:
                keys = np.maximum(keys, self.progress[stream])
            if check_at is not None and (at is None or check_at < at):
                # A batch spanning a check is cut there, so the controller looks every
                # ``check_every`` ticks, not once per input batch (a file batch holds
                # 65,536 rows: 33 event-seconds at 2k tuples/s).
                cut = int(np.searchsorted(keys, check_at, side="left"))
                if cut == 0:  # no instant came at the boundary: one interval further
                    cut = int(np.searchsorted(keys, keys[0] + self.check_every, side="left"))
                if 0 < cut < batch.num_rows:
                    taken += self._ingest(stream, batch.slice(0, cut), time_column)
                    batch = batch.slice(cut)
                    continue
                if at is None:
                    taken += self._ingest(stream, batch, time_column)
                    break
            assert at is not None
            cut = int(np.searchsorted(keys, at, side="left"))
            if cut:
                taken += self._ingest(stream, batch.slice(0, cut), time_column)
            if cut == batch.num_rows:
                break
            self._scheduled_due()
            batch = batch.slice(cut)
        return taken

    def _next_check(self) -> int | None:
        """Where to cut the input for the controller's next check (ticks): the instant
        ``check_every`` after the last check fires once a stream has a tuple past it, so
        the cut is two ticks later (tuples before it go in first)."""
        if self.controller is None or self.check_every is None or self.origin is None:
            return None
        base = self._last_check if self._last_check is not None else self.origin
        return base + self.check_every + 2

    def _ingest(self, stream: str, batch: pa.RecordBatch, time_column: int) -> int:
        started = time.perf_counter()
        if self.active is not None:
            acc = self.active.ingest(stream, batch, time_column)
        else:
            acc = ingest_accepted(self.current.executor, stream, batch, time_column)
        if acc is UNKNOWN:
            self.tainted = True
            acc = None
        _lo, hi = _bounds(batch, time_column)
        self.progress[stream] = max(self.progress.get(stream, hi), hi)
        n = 0 if acc is None else int(acc.num_rows)
        if acc is not None and n:
            if self.buffer is not None:
                self.buffer.add(stream, acc)
            if self.monitor is not None:
                alo, ahi = _bounds(acc, time_column)
                self.monitor.on_input(stream, n, alo, ahi)
        self._charge(started)  # before the instants it fired are closed
        started = time.perf_counter()
        self._after_call()
        self._charge(started)
        return n

    def advance_stream(self, stream: str, ts: int) -> None:
        at = self._next_at()
        if at is not None and ts >= at:
            self._scheduled_due()
        if ts > self.progress.get(stream, ts - 1):
            self.progress[stream] = ts
        target = self.active if self.active is not None else self.current.executor
        target.advance_stream(stream, ts)
        self._after_call()

    def end_stream(self, stream: str) -> None:
        self.ended.add(stream)
        target = self.active if self.active is not None else self.current.executor
        target.end_stream(stream)
        self._after_call()

    def finish(self) -> None:
        finished = False
        if self.active is not None and getattr(self.active, "owns_output", False):
            # A strategy whose output is the run's (PT) finishes the run itself.
            self.active.finish_input()  # type: ignore[attr-defined]
            rec = self._active_record
            assert rec is not None
            if not self.active.done:
                rec["note"] = "the input ended while both plans ran: the migration finished it"
            self._complete()
            finished = True
        if self.active is not None:
            self.active.abandon()
            rec = self._active_record
            assert rec is not None
            rec["completed"] = False
            rec["note"] = "the input ended before the migration completed: the old plan ran on"
            self._drop(self.active.successor)
            self.active = None
            self._active_record = None
        for request, meta in self._waiting:
            self._records.append(
                self._never(
                    request,
                    meta,
                    "waited for a migration that did not complete before the input ended",
                )
            )
        self._waiting = []
        for sched in self.schedule:
            meta = {"requested_at_s": sched.at_s, "source": sched.source}
            self._records.append(
                self._never(sched.request, meta, "the input ended before this event time")
            )
        self.schedule = []
        if not finished:
            self.current.executor.finish()
        self._feed_instants()
        now = time.perf_counter()
        for rec in list(self._open_gaps):
            rec["_gap"] = max(rec["_gap"], now - rec["_prev"])
            self._close_gap(rec)

    # -- after every call -------------------------------------------------------------------

    def _after_call(self) -> None:
        if self.active is not None:
            self.active.poll()
            if self.active.done:
                self._complete()
        self._feed_instants()
        if self.active is None and self._waiting:
            request, meta = self._waiting.pop(0)
            self._begin(request, meta)
        if (
            self.active is None
            and self.controller is not None
            and self.check_every is not None
            and self.current.last_instant is not None
        ):
            now = self.current.last_instant
            if self._last_check is None or now - self._last_check >= self.check_every:
                self._last_check = now
                asked = self.controller.check(now, self.monitor)
                if asked is not None:
                    self._begin(asked, {"by": "controller"})

    def _feed_instants(self) -> None:
        fired, self._fired = self._fired, []
        if self.monitor is not None:
            for instant in fired:
                assert self.current.handle is not None
                self.monitor.on_instant(instant, self.current.handle)

    # -- scheduled migrations ---------------------------------------------------------------

    def _next_at(self) -> int | None:
        if not self.schedule or self.origin is None:
            return None
        return self.origin + round(self.schedule[0].at_s * self.tps)

    def _scheduled_due(self) -> None:
        sched = self.schedule.pop(0)
        meta = {"requested_at_s": sched.at_s, "source": sched.source}
        if self.active is not None:
            meta["deferred"] = True
            self._waiting.append((sched.request, meta))
        else:
            self._begin(sched.request, meta)

    # -- one migration ----------------------------------------------------------------------

    def _begin(self, request: MigrationRequest, meta: dict[str, Any]) -> None:
        old = self.current
        assert old.handle is not None
        old_pp = (old.handle.plan, old.handle.placement)
        new_pp = (request.plan, request.placement)
        name, why = request.strategy, "asked for"
        if name == "auto":
            overloaded = request.reason.get("trigger") == "infeasible"
            name, why = choose_auto(
                old_pp,
                new_pp,
                self.same_order(old_pp[0], new_pp[0]),
                overloaded,
                adaptive=meta.get("by") == "controller",
            )
        label_from = request.label_from or old.label
        label_to = request.label_to or self.label_of(request.plan)
        record: dict[str, Any] = {
            "at": old.last_instant,
            "at_s": self._seconds(old.last_instant),
            **meta,
            "reason": request.reason,
            "strategy": name,
            "strategy_choice": why,
            "from": {**label_from, "placement": old.handle.placement},
            "to": {**label_to, "placement": request.placement},
            "completed": True,
            "happened": True,
        }
        self._records.append(record)
        if name == "none":
            record.update(
                duration_ms=0.0,
                states_moved=0,
                states_recomputed=None,
                keys_completed=None,
                output_gap_ms=0.0,
                old_plan_dropped_at=None,
            )
            return
        spec = check(name, old_pp, new_pp)
        if spec.replay and (self.buffer is None or self.tainted):
            raise PlanError(
                f"migration strategy {name} replays input, which this run did not keep",
                hint="use --migration gpt",
            )
        start = time.perf_counter()
        new = self._track(request.plan, request.placement, label_to)
        ctx = MigrationContext(
            old,
            new,
            self.buffer,
            self.horizons,
            dict(self.progress),
            set(self.ended),
            self.time_columns,
        )
        record["_start"] = start
        record["_gap"] = 0.0
        record["_prev"] = self._last_emit if self._last_emit is not None else start
        self._open_gaps.append(record)
        self.active = spec.start(ctx) if spec.start is not None else None
        assert self.active is not None
        self._active_record = record
        if self.active.done:
            self._complete()

    def _complete(self) -> None:
        active, rec = self.active, self._active_record
        assert active is not None and rec is not None
        old, new = self.current, active.successor
        rec["duration_ms"] = round(1e3 * (time.perf_counter() - rec.pop("_start")), 3)
        for key, value in active.stats.items():
            rec[key] = value
        rec.setdefault("old_plan_dropped_at", old.last_instant)
        if new.last_instant is None:
            # A state-moving strategy (MS, JISC) hands the old plan's clock over: the new
            # plan has fired nothing itself and continues after the old plan's last instant.
            new.last_instant = old.last_instant
        rec["switched_at"] = new.last_instant
        rec["rejected_by_new_plan"] = new.rejected
        assert old.handle is not None
        rec["old_plan_operators"] = old.handle.operator_metrics()
        old.live = False
        new.live = True
        rec["_switched"] = True
        self._drop(old)
        self.current = new
        # The monitor's per-operator figures restart with the new plan; a controller that
        # did not ask for this migration (a scripted one) learns what runs now.
        set_plan = getattr(self.monitor, "set_plan", None)
        if set_plan is not None:
            set_plan(new.handle.plan)  # type: ignore[union-attr]
        adopt = getattr(self.controller, "adopt", None)
        if adopt is not None and rec.get("by") != "controller":
            adopt(new.handle.plan, new.handle.placement, new.last_instant or 0)  # type: ignore[union-attr]
        self.plans.append(
            {"from_instant": new.last_instant, **new.label, "placement": new.handle.placement}  # type: ignore[union-attr]
        )
        self.active = None
        self._active_record = None

    def _drop(self, track: Track) -> None:
        if track.handle is not None:
            self._dropped_extras.append(track.handle.extra_metrics())
            track.handle.close()

    def _never(self, request: MigrationRequest, meta: dict[str, Any], why: str) -> dict[str, Any]:
        return {
            "at": None,
            **meta,
            "reason": request.reason,
            "strategy": request.strategy,
            "to": {**request.label_to, "placement": request.placement},
            "happened": False,
            "completed": False,
            "note": why,
        }

    def _seconds(self, instant: int | None) -> float | None:
        if instant is None or self.origin is None:
            return None
        return (instant - self.origin) / self.tps

    # -- metrics ----------------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        """The ``migrations`` metrics: one record per migration (see docs/migration.md)."""
        from engines.migration.row_strategies import jisc_keys_completed

        for r in self._records:
            if "_jisc_executor" in r:  # JISC completes keys after the migration
                r["keys_completed"] = jisc_keys_completed(r["_jisc_executor"])
        return [{k: v for k, v in r.items() if not k.startswith("_")} for r in self._records]

    def operator_metrics(self) -> dict[str, dict[str, Any]]:
        """The final plan's operators (each with its engine); the dropped plans' are in the
        migration records (``old_plan_operators``)."""
        handle = self.current.handle
        assert handle is not None
        ops = handle.operator_metrics()
        for op_id, m in ops.items():
            m.setdefault("engine", handle.placement.get(op_id, "row"))
        return ops

    def extra_metrics(self) -> dict[str, Any]:
        handle = self.current.handle
        assert handle is not None
        extra = dict(handle.extra_metrics())
        extra["faults"] = [f for d in self._dropped_extras for f in d.get("faults", [])] + list(
            extra.get("faults", [])
        )
        extra["placement"] = handle.placement
        extra["migrations"] = self.records()
        extra["plans"] = self.plans
        per_second = getattr(self.monitor, "per_second", None)
        if per_second is not None:
            extra["statistics_timeline"] = per_second()
        decisions = getattr(self.controller, "decisions", None)
        if decisions is not None:
            extra["adapt_decisions"] = decisions
        return extra

    def close(self) -> None:
        """Release every plan still held (an error ended the run)."""
        if self.active is not None:
            self._drop(self.active.successor)
            self.active = None
        self._drop(self.current)


def _bounds(batch: Any, time_column: int) -> tuple[int, int]:
    import pyarrow.compute as pc

    mm = pc.min_max(batch.column(time_column))
    return int(mm["min"].as_py()), int(mm["max"].as_py())


def _time_columns(plan: LogicalPlan) -> dict[str, int]:
    out: dict[str, int] = {}
    for op in plan.operators():
        if isinstance(op, Source):
            for cid in plan.consumers(op.id):
                w = plan.op(cid)
                tc = getattr(w, "time_column", None)
                if tc is not None:
                    out[op.stream] = tc
    return out

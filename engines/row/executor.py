"""Runs a logical plan on the row engine: the orchestrator of lowering, clock and operators.

How a plan runs::

    Arrow batches ──ingest──▶ tuples ──push──▶ window pending buffers
                                                     │ at each slide instant T (in order):
    windows ─▶ select/project/join/aggregate ─▶ R2S ─▶ emit(T, rows)
               (each consumes its inputs' deltas, topological order)

1. The plan is lowered to row operators (``engines.row.lowering``: one function per
   operator kind, plus the physical rewrites: pushed selects, panes, Arrow windows and MIGs).
2. ``ingest(stream, batch)`` converts an Arrow batch to tuples (``engines.row.conversion``),
   drops *late* tuples and pushes the rest into every window over that stream.
3. The event-time clock (``engines.row.clock``) decides when instants fire: once event time
   has passed them in every stream that has not ended; ``finish()`` fires the rest.
4. At an instant where some window changes (a tuple becomes visible or expires) every
   operator steps once, in topological order, turning its inputs' deltas into its output
   delta; per-operator tuples in/out, steps and busy time are recorded (the measured
   utilisation u of the dissertation's cost model). An instant where no window changes is
   not stepped (the relations stand still: ISTREAM/DSTREAM would emit nothing), except that
   RSTREAM emits its unchanged relation there; so the work follows the events, not the
   ticks (``dense=True`` steps every instant, for reference).

A plan with a tuple-count SLIDE runs in *count mode*: an instant fires after every m-th tuple
and carries that tuple's timestamp.

``snapshot()`` / ``restore()`` capture every operator's state plus the clock, so a run can be
stopped and resumed (and, later, migrated) without changing its output.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from engines.row.arrow_window import ArrowWindow
from engines.row.base import Delta, Rows
from engines.row.clock import EventClock, OnLate, Rescue
from engines.row.conversion import batch_to_rows, int64, is_sorted, min_max, row_at
from engines.row.lowering import JoinSettings, MakeGroup, Node, lower_plan
from engines.row.r2s import RStreamOp
from engines.row.windows import _WindowBase
from optimizer.ir.errors import PlanError
from optimizer.ir.placement import Group
from optimizer.ir.plan import LogicalPlan, Window

Emit = Callable[[int, Any], None]  # (instant, rows or a pyarrow.Table)


class RowExecutor:
    """A compiled row-engine plan plus its event-time clock."""

    def __init__(
        self,
        plan: LogicalPlan,
        emit: Emit,
        on_late: OnLate | None = None,
        panes: bool = True,
        groups: Sequence[Group] = (),
        make_group: MakeGroup | None = None,
        dense: bool = False,
        late_insert: bool = False,
        join: JoinSettings | None = None,
    ) -> None:
        self.plan = plan
        self.emit = emit
        #: Late tuples that still fall into a row window with results to come enter it
        #: (``--late insert``, docs/disorder.md); the others are dropped as late.
        self.late_insert = late_insert
        lowered = lower_plan(plan, panes, groups, make_group, late_insert, join)
        self.nodes = lowered.nodes
        self.windows = lowered.windows
        self.windows_by_stream = lowered.windows_by_stream
        self.arrow_windows_by_stream = lowered.arrow_windows_by_stream
        self.r2s_pos = next(
            i for i, n in enumerate(self.nodes) if n.op.kind in ("istream", "dstream", "rstream")
        )
        self.count_slide = self._count_slide()
        streams = set(self.windows_by_stream) | set(self.arrow_windows_by_stream)
        r2s = self.nodes[self.r2s_pos]
        self._rstream = r2s.op if isinstance(r2s.op, RStreamOp) else None
        self.clock = EventClock(
            [w.slide for w in self.windows],
            sorted(streams),
            self._step,
            self.count_slide,
            on_late,
            due=None if dense else self._due,
            idle=None if dense else self._idle,
        )

    def _count_slide(self) -> int | None:
        counted = [w for w in self.windows if w.count_mode]
        if not counted:
            return None
        if len(self.windows) > 1:
            raise PlanError(
                "a window with a tuple-count SLIDE cannot be combined with other windows",
                hint="give the windows time-based slides, e.g. SLIDE 1 SECOND",
            )
        op = self.plan.op(counted[0].op_id)
        assert isinstance(op, Window)
        return op.slide

    # -- the clock's figures ------------------------------------------------------------------

    @property
    def late_count(self) -> int:
        """Late tuples rejected so far."""
        return self.clock.late_count

    @property
    def instants_fired(self) -> int:
        return self.clock.instants_fired

    @property
    def last_fired(self) -> int | None:
        return self.clock.last_fired

    def late_policy(self) -> dict[str, str]:
        """Per input stream what becomes of its late tuples: ``insert`` when ``--late
        insert`` holds and only row windows read the stream, one of which takes a late
        tuple that still falls into a window to come (``_rescuer``: a sliding RANGE or
        UNBOUNDED window takes one just behind the instant fired; NOW, ROWS and tumbling
        windows, whose next window starts after it, do not); ``drop`` otherwise (an Arrow
        window feeding a MIG keeps timestamp order, and ``--late drop`` drops them all).
        What a quality-driven policy prices (engines/disorder/quality.py)."""
        streams = set(self.windows_by_stream) | set(self.arrow_windows_by_stream)

        def takes(w: _WindowBase) -> bool:
            fired = np.array([w.slide * 1000], dtype=np.int64)  # one of its own instants
            return bool(w.counts_late(fired, fired)[0])

        def inserts(stream: str) -> bool:
            row_ws = self.windows_by_stream.get(stream, [])
            return (
                self.late_insert
                and any(takes(w) for w in row_ws)
                and not self.arrow_windows_by_stream.get(stream)
            )

        return {s: "insert" if inserts(s) else "drop" for s in sorted(streams)}

    def advance_stream(self, stream: str, ts: int) -> None:
        """See :meth:`engines.row.clock.EventClock.advance_stream`."""
        self.clock.advance_stream(stream, ts)

    def end_stream(self, stream: str) -> None:
        """``stream`` has ended: it no longer holds the clock back."""
        self.clock.end_stream(stream)

    def saw_range(self, stream: str, lo: int, hi: int) -> None:
        """Tuples of ``stream`` with timestamps from ``lo`` to ``hi`` were delivered to the
        run but filtered out before reaching this executor (a shared filter of a multi-query
        run, hycq/shared_run.py): the clock counts them as if taken (its first instant from
        the smallest timestamp, its last from the largest, progress up to ``hi``); no
        window sees them."""
        self.clock.advance(stream, lo, hi)

    def watermark(self) -> int | None:
        """See :meth:`engines.row.clock.EventClock.watermark`."""
        return self.clock.watermark()

    def finish(self) -> None:
        """End of input: fire the remaining instants up to each window's last one."""
        self.clock.finish()

    # -- ingest -----------------------------------------------------------------------------

    def ingest(self, stream: str, batch: pa.RecordBatch | pa.Table, time_column: int) -> int:
        """Push one Arrow batch of ``stream``; returns the number of tuples accepted.

        Tuples are built only if a row window reads the stream; Arrow windows (feeding MIGs)
        take the batch as it is.
        """
        accepted = self.ingest_accepted(stream, batch, time_column)
        return 0 if accepted is None else int(accepted.num_rows)

    def ingest_accepted(
        self, stream: str, batch: pa.RecordBatch | pa.Table, time_column: int
    ) -> pa.RecordBatch | pa.Table | None:
        """As :meth:`ingest`, returning the rows accepted (``batch`` itself when none was
        late; None when the plan does not read ``stream``): what a migration may replay."""
        if batch.num_rows == 0:
            return batch
        row_ws = self.windows_by_stream.get(stream, [])
        arrow_ws = self.arrow_windows_by_stream.get(stream, [])
        if not row_ws and not arrow_ws:
            return None
        if self.count_slide is not None:
            self._ingest_count_arrow(batch, row_ws, arrow_ws, time_column)
            return batch
        ts_col = batch.column(time_column)
        ts_sorted = is_sorted(ts_col)
        lo, hi = min_max(ts_col)
        clock = self.clock
        # Rows of late tuples kept for late insertion, and per row window which of them it
        # takes (only when some window does not take them all).
        saved: list[np.ndarray] = []
        if not (ts_sorted and (clock.last_fired is None or lo > clock.last_fired)):
            rescue = self._rescuer(row_ws, arrow_ws, saved) if self.late_insert else None
            keep = clock.late_mask(stream, int64(ts_col), lambda idx: row_at(batch, idx), rescue)
            if saved:
                ts_sorted = False
            if not keep.all():
                if saved:  # the saved rows' positions in the kept batch
                    saved[0] = np.cumsum(keep)[saved[0]] - 1
                batch = batch.filter(pa.array(keep, pa.bool_()))
                if batch.num_rows == 0:
                    return batch
                lo, hi = min_max(batch.column(time_column))
                ts_sorted = False
        if saved and len(saved[0]):
            self._ingest_with_late(stream, batch, time_column, row_ws, saved)
            return batch
        if row_ws:
            t0 = time.perf_counter()
            rows = batch_to_rows(batch)
            _push_timed(row_ws, rows, ts_sorted, (time.perf_counter() - t0) / len(row_ws))
        for aw in arrow_ws:
            t0 = time.perf_counter()
            aw.push_arrow(batch)
            aw.metrics.busy_s += time.perf_counter() - t0
        clock.advance(stream, lo, hi)
        return batch

    def _ingest_with_late(
        self,
        stream: str,
        batch: pa.RecordBatch | pa.Table,
        time_column: int,
        row_ws: list[_WindowBase],
        saved: list[np.ndarray],
    ) -> None:
        """Push ``batch`` (rows already accepted) tuple order kept: the on-time rows between
        two late rows kept for insertion go in and fire what they make due, then the late
        row enters the windows that take it. So a late row counts from the first instant
        after the one that had fired when it arrived, whatever the batch sizes."""
        clock = self.clock
        start = 0
        at = saved[0].tolist()
        for j, pos in enumerate([*at, batch.num_rows]):
            if pos > start:
                part = batch.slice(start, pos - start)
                rows = batch_to_rows(part)
                for w in row_ws:
                    w.push(rows, ts_sorted=False)
                lo, hi = min_max(part.column(time_column))
                clock.advance(stream, lo, hi)
            if pos == batch.num_rows:
                break
            late = batch_to_rows(batch.slice(pos, 1))
            for k, w in enumerate(row_ws):
                if saved[k + 1][j]:
                    w.push(late, ts_sorted=False)
            start = pos + 1

    @staticmethod
    def _rescuer(
        row_ws: list[_WindowBase], arrow_ws: list[ArrowWindow], saved: list[np.ndarray]
    ) -> Rescue | None:
        """The clock's ``rescue`` for a stream: a late tuple is kept when one of its row
        windows still shows it at an instant to come (``_WindowBase.counts_late``). Streams
        read by an Arrow window (a MIG) keep dropping late tuples: the columnar side takes
        its windows in timestamp order. ``saved`` receives the positions kept and, per
        window, which of them it takes."""
        if arrow_ws or not row_ws:
            return None

        def rescue(at: np.ndarray, ts: np.ndarray, fired: np.ndarray) -> np.ndarray:
            masks = [w.counts_late(ts, fired) for w in row_ws]
            anywhere = np.logical_or.reduce(masks)
            saved[:] = [at[anywhere], *(m[anywhere] for m in masks)]
            return anywhere

        return rescue

    # -- rebuilding state from another plan's input (engines.migration) -------------------

    def begin_rebuild(self) -> None:
        """Start rebuilding this fresh executor's state from tuples another plan accepted:
        until :meth:`end_rebuild`, :meth:`ingest` takes every tuple (no late rule: they were
        on time when the other plan took them) and fires no instant."""
        if self.clock.last_fired is not None or self.count_slide is not None:
            raise PlanError(
                "an executor that has run, or one in count mode, cannot rebuild its state "
                "by replay",
                hint="build a fresh executor; plans with a tuple-count SLIDE cannot migrate "
                "by replay",
            )
        self.clock.held = True

    def end_rebuild(
        self, start: int | None, progress: Mapping[str, int], ended: Iterable[str] = ()
    ) -> None:
        """End the rebuild: the clock starts at ``start`` (the other plan's last fired
        instant) or at the smallest timestamp replayed, whichever is smaller, so that it
        fires that instant again; the streams' ``progress`` and ``ended`` are those the
        other plan was told. The instants the other plan had fired are recomputed now
        (their results are the caller's to discard)."""
        clock = self.clock
        clock.held = False
        if start is not None:
            clock.min_ts = start if clock.min_ts is None else min(clock.min_ts, start)
            if clock.max_ts is None:
                clock.max_ts = start
        for stream, ts in progress.items():
            if stream in clock.progress:
                p = clock.progress[stream]
                clock.progress[stream] = ts if p is None else max(p, ts)
        for stream in ended:
            if stream in clock.progress:
                clock.ended.add(stream)
        clock.fire_due()

    def ingest_rows(self, stream: str, rows: Rows, time_column: int, ts_sorted: bool) -> int:
        """Push tuples that are already Python tuples (benchmarks, and other engines' output).

        Only row windows are fed: Arrow windows need Arrow batches (``ingest``).
        """
        windows = self.windows_by_stream.get(stream)
        if windows is None or not rows:
            return 0
        if self.count_slide is not None:
            return self._ingest_count(rows, windows, time_column)
        if ts_sorted:
            lo, hi = rows[0][time_column], rows[-1][time_column]
        else:
            lo = min(r[time_column] for r in rows)
            hi = max(r[time_column] for r in rows)
        clock = self.clock
        if not (ts_sorted and (clock.last_fired is None or lo > clock.last_fired)):
            ts = np.fromiter((r[time_column] for r in rows), dtype=np.int64, count=len(rows))
            keep = clock.late_mask(stream, ts, rows.__getitem__)
            if not keep.all():
                rows = [r for r, k in zip(rows, keep.tolist(), strict=True) if k]
                if not rows:
                    return 0
                lo = min(r[time_column] for r in rows)
                hi = max(r[time_column] for r in rows)
                ts_sorted = False
        _push_timed(windows, rows, ts_sorted, 0.0)
        clock.advance(stream, lo, hi)
        return len(rows)

    def _ingest_count(self, rows: Rows, windows: list[_WindowBase], t: int) -> int:
        m = self.count_slide
        assert m is not None
        clock = self.clock
        i = 0
        while i < len(rows):
            need = m - clock.count_seen % m
            chunk = rows[i : i + need]
            for w in windows:
                w.push(chunk, ts_sorted=False)
            clock.count_seen += len(chunk)
            i += len(chunk)
            if clock.count_seen % m == 0:
                self._step(chunk[-1][t])
        return len(rows)

    def _ingest_count_arrow(
        self,
        batch: pa.RecordBatch | pa.Table,
        row_ws: list[_WindowBase],
        arrow_ws: list[ArrowWindow],
        t: int,
    ) -> int:
        """Count mode over an Arrow batch: an instant after every m-th tuple."""
        m = self.count_slide
        assert m is not None
        clock = self.clock
        n = batch.num_rows
        i = 0
        ts_col = batch.column(t)
        while i < n:
            need = m - clock.count_seen % m
            piece = batch.slice(i, need)
            if row_ws:
                rows = batch_to_rows(piece)
                for w in row_ws:
                    w.push(rows, ts_sorted=False)
            for aw in arrow_ws:
                aw.push_arrow(piece)
            clock.count_seen += piece.num_rows
            i += piece.num_rows
            if clock.count_seen % m == 0:
                self._step(int(ts_col[i - 1].as_py()))
        return n

    def _step(self, instant: int) -> None:
        deltas: list[Delta] = []
        perf = time.perf_counter
        for node in self.nodes:
            inputs = [deltas[i] for i in node.inputs]
            t0 = perf()
            out = node.op.step(instant, inputs)
            charge_step(node, inputs, out, t0)
            deltas.append(out)
        self.fired_emit(instant, deltas)

    def fired_emit(self, instant: int, deltas: Sequence[Delta]) -> None:
        """``instant`` has been stepped (``deltas``: every node's output, in node order):
        tell the clock, then emit the R2S operator's output (a stop raised while emitting
        leaves the instant fired)."""
        self.clock.fired(instant)
        out = deltas[self.r2s_pos]
        self.emit(instant, out.table if out.table is not None else out.ins)

    # -- event-driven instants ---------------------------------------------------------------

    def _due(self, after: int, last: Sequence[int] | None) -> int | None:
        """The earliest instant after ``after`` at which a window changes (window ``k`` only
        up to ``last[k]``): the next instant to step."""
        best: int | None = None
        for k, w in enumerate(self.windows):
            t = w.next_change(after)
            if t is not None and (last is None or t <= last[k]) and (best is None or t < best):
                best = t
        return best

    def _idle(self, instants: Iterator[int]) -> None:
        """Instants where nothing changed: RSTREAM emits its unchanged relation at each (and
        counts it as the R2S operator's output); ISTREAM/DSTREAM emit nothing."""
        if self._rstream is None:
            return
        out = self._rstream.unchanged()
        n = len(out)
        if n == 0:
            return
        rows = out.table if out.table is not None else out.ins
        metrics = self._rstream.metrics if self.nodes[self.r2s_pos].counts else None
        passed, emit = self.clock.passed, self.emit
        for instant in instants:
            passed(instant)  # before emitting: a stop raised there leaves it passed
            if metrics is not None:
                metrics.tuples_out += n
            emit(instant, rows)

    # -- state ------------------------------------------------------------------------------

    def operator_state(self) -> dict[str, dict[str, Any]]:
        return {n.op.op_id: n.op.state() for n in self.nodes}

    def snapshot(self) -> dict[str, Any]:
        """Every operator's state plus the clock, as plain Python data."""
        return {
            "operators": {n.op.op_id: n.op.snapshot() for n in self.nodes},
            "clock": self.clock.snapshot(),
        }

    def restore(self, snap: dict[str, Any]) -> None:
        for n in self.nodes:
            n.op.restore(snap["operators"][n.op.op_id])
        self.clock.restore(snap["clock"])

    def operator_metrics(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for n in self.nodes:
            m: dict[str, Any] = {
                "kind": n.op.kind,
                "tuples_in": n.op.metrics.tuples_in,
                "tuples_out": n.op.metrics.tuples_out,
                "busy_s": n.op.metrics.busy_s,
                "steps": n.op.metrics.steps,
            }
            join = getattr(n.op, "join_metrics", None)
            if join is not None:
                m["join"] = join()
            out[n.op.op_id] = m
        return out


def _push_timed(
    windows: Sequence[_WindowBase], rows: Rows, ts_sorted: bool, extra_s: float
) -> None:
    """Push ``rows`` into each window, charging the time to the window's busy time (plus
    ``extra_s`` each: its share of converting the batch to tuples), so that a plan's
    measured busy time covers its input work as the cost model's does. A window's
    prefilter (a pushed-down selection) charges its own time to its select operator; that
    part is not charged twice."""
    perf = time.perf_counter
    for w in windows:
        pm = w.prefilter_metrics
        before = pm.busy_s if pm is not None else 0.0
        t0 = perf()
        w.push(rows, ts_sorted=ts_sorted)
        spent = perf() - t0
        if pm is not None:
            spent -= pm.busy_s - before
        w.metrics.busy_s += extra_s + spent


def charge_step(node: Node, inputs: Sequence[Delta], out: Delta, started: float) -> None:
    """Charge one step of ``node``'s operator to its metrics: the busy time since
    ``started`` (a ``time.perf_counter()`` reading), one step and, for a counted node, the
    tuples in and out. Every loop that steps row operators (the executor's, and the
    migrations' that step two plans at once) charges through here."""
    m = node.op.metrics
    m.busy_s += time.perf_counter() - started
    m.steps += 1
    if node.counts:
        if inputs:
            m.tuples_in += sum(len(d) for d in inputs)
        m.tuples_out += len(out)

"""Parallel Track (PT) inside the row engine: both plans run until the old one is useless.

At the migration (between two calls, after instant ``T0``) the new plan's join chain starts
with empty windows that receive every tuple not shown yet: the tuples pending in the old
windows and everything that arrives later ("new" tuples; per window, exactly those with a
timestamp after the window's last fired instant). Both plans see every new tuple (the old
plan's windows are fed through a tee). Per instant:

* the new chain computes the join of new tuples only (its windows hold nothing else);
* the old chain computes the full join and drops, at its *top* join, every result whose
  components are all new (dropping lower would lose a new partial result that still joins
  an old tuple above);
* both deltas, the old one permuted to the new chain's column order, are merged into one
  delta that feeds the new plan's operators above the chain (aggregate, R2S...), whose state
  was moved from the old plan by signature. Each result is thus counted by exactly one plan.

The old plan is dropped once none of its chain's windows holds an old tuple (at the latest
``T0`` plus the largest window): from then on its results would all be new. ``done`` turns
True and ``successor`` (the new RowExecutor) continues alone, with exactly the state a
from-scratch run would have.

Requirements (PlanError otherwise): one join chain per plan with the same output relation;
every leaf of the chain a RANGE, NOW or ROWS window seen through selects and projects that
keep the window's timestamp column up to the top join (the component timestamps are how the
old plan recognises all-new results); time-based slides; no columnar group.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import Any

from engines.row.base import NO_CHANGE, Delta, Row, Rows
from engines.row.executor import RowExecutor, charge_step
from engines.row.joins.tree import HashJoinOp
from engines.row.migration.forwarding import ForwardsToNew
from engines.row.migration.jisc import JiscJoinOp, join_rows
from engines.row.migration.signature import permutation, permute, require
from engines.row.migration.transfer import ExecutorView
from engines.row.windows import (
    RowsWindow,
    SlidingRangeWindow,
    TumblingWindow,
    _WindowBase,
)
from optimizer.ir.errors import PlanError
from optimizer.ir.plan import Window

_FALLBACK = "use ms, jisc or a generic strategy (gms, gpt, ghm)"


class _Tee(_WindowBase):
    """Stands in the new executor's window list of a stream and hands every arriving tuple to
    the old plan's windows of that stream (it is never stepped)."""

    def __init__(self, targets: list[_WindowBase]) -> None:
        super().__init__("pt-tee", 0, 1, False)
        self.targets = targets

    def push(self, rows: Rows, ts_sorted: bool = True) -> None:
        for w in self.targets:
            w.push(rows, ts_sorted=ts_sorted)

    def step(self, instant: int, inputs: list[Delta]) -> Delta:  # pragma: no cover
        raise AssertionError("the PT tee is not an operator")


class ParallelTrack(ForwardsToNew):
    """Runs ``old`` and ``new`` side by side (see the module docstring); a PlanExecutor."""

    def __init__(self, old: RowExecutor, new: RowExecutor) -> None:
        require(
            new.clock.instants_fired == 0 and new.clock.min_ts is None,
            "the new executor must be freshly built (nothing ingested)",
        )
        require(
            old.count_slide is None,
            "parallel track needs time-based slides (a tuple-count SLIDE cannot be split "
            "into old and new tuples)",
            hint=_FALLBACK,
        )
        self.old = old
        self.new = new
        self.at = old.clock.last_fired
        ov, nv = ExecutorView(old, "running"), ExecutorView(new, "new")
        self._ov, self._nv = ov, nv
        self.old_top = _top_join(ov)
        self.new_top = _top_join(nv)
        p = permutation(ov.sig(self.old_top), nv.sig(self.new_top))
        require(
            p is not None,
            "the two plans' join chains do not compute the same relation",
            hint=_FALLBACK,
        )
        assert p is not None
        self._perm = p
        self.old_track = sorted(_subtree(ov, self.old_top))
        new_track = _subtree(nv, self.new_top)
        for pos in self.old_track:  # an old JISC state still incomplete: complete it now
            op = ov.op(pos)
            if isinstance(op, JiscJoinOp):
                op.lazy.fill_all()
        self._checks = self._old_components(ov)
        self.states_moved = 0
        self._carry_over(ov, nv, new_track)
        self.replace = nv.op(self.new_top).replace_out
        top = ov.op(self.old_top)
        assert isinstance(top, HashJoinOp)
        self._last_old: Rows = permute(self._keep_old(join_rows(top)), p) if self.replace else []
        self._last_new: Rows = []
        self.done = False
        self.dropped_at: int | None = None
        self._tees: dict[str, _Tee] = {}
        for pos in self.old_track:
            w = ov.op(pos)
            if isinstance(w, _WindowBase):
                stream = _stream_of(ov, pos)
                tee = self._tees.get(stream)
                if tee is None:
                    tee = self._tees[stream] = _Tee([])
                    new.windows_by_stream.setdefault(stream, []).append(tee)
                tee.targets.append(w)
        new.clock.step = self._step
        # The new clock steps only instants where one of ITS windows changes; while both
        # plans run, an old tuple leaving an old window is a change too (deletions the old
        # chain must emit at that instant), so the old chain's windows are asked as well.
        self._base_due = new.clock.due
        if self._base_due is not None:
            old_windows = [w for pos in self.old_track if isinstance(w := ov.op(pos), _WindowBase)]
            new.clock.due = self._due_with(self._base_due, old_windows)
        self._maybe_drop(None)

    @staticmethod
    def _due_with(base: Any, windows: list[_WindowBase]) -> Any:
        def due(after: int, last: Any) -> int | None:
            best: int | None = base(after, last)
            bound = None if last is None else max(last)
            for w in windows:
                t = w.next_change(after)
                if t is not None and (bound is None or t <= bound) and (best is None or t < best):
                    best = t
            return best

        return due

    # -- set-up -----------------------------------------------------------------------------

    def _old_components(self, ov: ExecutorView) -> list[tuple[int, int, _WindowBase]]:
        """Per window of the old chain: (column of its timestamp in the top join's output,
        last instant it had shown at T0, the window)."""
        plan = ov.plan
        top_id = ov.op(self.old_top).op_id
        width = len(plan.op(top_id).schema)
        traced: dict[str, list[int]] = {}
        for c in range(width):
            op_id, col = top_id, c
            while True:
                op = plan.op(op_id)
                if isinstance(op, Window):
                    if col == op.time_column:
                        traced.setdefault(op_id, []).append(c)
                    break
                step = op.input_column(col)
                if step is None:
                    break
                op_id, col = plan.inputs(op_id)[step[0]], step[1]
        checks: list[tuple[int, int, _WindowBase]] = []
        for pos in self.old_track:
            w = ov.op(pos)
            if not isinstance(w, _WindowBase):
                continue
            if not isinstance(w, SlidingRangeWindow | TumblingWindow | RowsWindow):
                raise PlanError(
                    f"parallel track cannot run window {w.op_id} ({type(w).__name__}): its "
                    "old tuples never expire or it keeps no tuples",
                    hint=_FALLBACK,
                )
            cols = traced.get(w.op_id)
            if not cols:
                raise PlanError(
                    f"parallel track needs the timestamp of every join input, but the input "
                    f"from window {w.op_id} loses it below the top join {top_id}",
                    hint=_FALLBACK,
                )
            if w.last_instant is not None:
                checks.append((cols[0], w.last_instant, w))
        return checks

    def _carry_over(self, ov: ExecutorView, nv: ExecutorView, new_track: set[int]) -> None:
        """Move the states outside the chain, copy pending tuples into the new chain's
        windows and the clock."""
        pool: dict[Hashable, list[int]] = {}
        for i in range(len(ov.ex.nodes)):
            if not isinstance(ov.op(i), HashJoinOp):
                key = ov.state_key(i)
                if key is not None:
                    pool.setdefault(key, []).append(i)
        window_map: dict[int, int] = {}
        for i in range(len(nv.ex.nodes)):
            op = nv.op(i)
            if isinstance(op, HashJoinOp):
                require(i in new_track, f"join {op.op_id} lies outside the changed chain")
                continue
            key = nv.state_key(i)
            if key is None:
                continue
            olds = pool.get(key)
            if not olds:
                raise PlanError(
                    f"{op.kind} {op.op_id} of the new plan has no counterpart with the same "
                    "state in the running plan",
                    hint=_FALLBACK,
                )
            j = olds.pop(0)
            src = ov.op(j)
            if isinstance(op, _WindowBase):
                window_map[i] = j
            if i in new_track:
                assert isinstance(op, _WindowBase) and isinstance(src, _WindowBase)
                op._pending = list(src._pending)  # new tuples only: nothing shown yet
                op._pending_sorted = src._pending_sorted
                op._pending_max = src._pending_max
            else:
                op.restore(src.snapshot())
                self.states_moved += 1
        snap = self.old.clock.snapshot()
        if snap["next"] is not None:
            old_pos = {id(w): k for k, w in enumerate(self.old.windows)}
            snap["next"] = [
                snap["next"][old_pos[id(ov.op(window_map[nv.pos[w.op_id]]))]]
                for w in self.new.windows
            ]
        self.new.clock.restore(snap)
        self.new.clock.late_count = self.old.clock.late_count

    # -- running ----------------------------------------------------------------------------

    def _keep_old(self, rows: Rows) -> Rows:
        """The rows with at least one old component."""
        checks = [(c, t) for c, t, _ in self._checks]
        if not checks:
            return []
        return [r for r in rows if _has_old(r, checks)]

    def _old_delta(self, d: Delta) -> Delta:
        if d.empty:
            return NO_CHANGE
        p = self._perm
        ins = permute(self._keep_old(d.ins), p)
        dels = permute(self._keep_old(d.dels), p) if d.dels else []
        if d.replace:
            return Delta(ins, [], replace=True)
        if not ins and not dels:
            return NO_CHANGE
        return Delta(ins, dels)

    def _merge(self, nd: Delta, od: Delta) -> Delta:
        if self.replace:
            if nd.empty and od.empty:
                return NO_CHANGE
            if not nd.empty:
                self._last_new = list(nd.ins)
            if not od.empty:
                self._last_old = list(od.ins)
            return Delta(self._last_new + self._last_old, [], replace=True)
        if od.empty:
            return nd
        if nd.empty:
            return od
        return Delta(nd.ins + od.ins, nd.dels + od.dels)

    def _step(self, instant: int) -> None:
        perf = time.perf_counter
        old_nodes = self.old.nodes
        old_deltas: dict[int, Delta] = {}
        for pos in self.old_track:
            node = old_nodes[pos]
            t0 = perf()
            out = node.op.step(instant, [old_deltas[i] for i in node.inputs])
            node.op.metrics.busy_s += perf() - t0
            old_deltas[pos] = out
        od = self._old_delta(old_deltas[self.old_top])
        new = self.new
        deltas: list[Delta] = []
        for k, node in enumerate(new.nodes):
            inputs = [deltas[i] for i in node.inputs]
            t0 = perf()
            out = node.op.step(instant, inputs)
            if k == self.new_top:
                out = self._merge(out, od)
            charge_step(node, inputs, out, t0)
            deltas.append(out)
        new.fired_emit(instant, deltas)
        self._maybe_drop(instant)

    def _maybe_drop(self, instant: int | None) -> None:
        """Drop the old plan once its chain's windows hold no old tuple."""
        if self.done:
            return
        for _, t0, w in self._checks:
            if isinstance(w, TumblingWindow):
                if w._nonempty and (w.last_instant is None or w.last_instant <= t0):
                    return
            else:
                assert isinstance(w, SlidingRangeWindow | RowsWindow)
                if w.contents and w.contents[0][w.ts] <= t0:
                    return
        self.done = True
        self.dropped_at = instant if instant is not None else self.at
        for stream, tee in self._tees.items():
            self.new.windows_by_stream[stream].remove(tee)
        self.new.clock.step = self.new._step
        self.new.clock.due = self._base_due
        self._checks = []


def _has_old(row: Row, checks: list[tuple[int, int]]) -> bool:
    return any(row[c] <= t for c, t in checks)


def _top_join(view: ExecutorView) -> int:
    tops = [
        i
        for i, n in enumerate(view.ex.nodes)
        if isinstance(n.op, HashJoinOp)
        and not any(isinstance(view.op(c), HashJoinOp) for c in view.consumers.get(i, []))
    ]
    if len(tops) != 1:
        raise PlanError(
            f"parallel track needs exactly one join chain in the {view.role} plan "
            f"({len(tops)} found)",
            hint=_FALLBACK,
        )
    return tops[0]


def _subtree(view: ExecutorView, pos: int) -> set[int]:
    out = {pos}
    for i in view.ex.nodes[pos].inputs:
        out |= _subtree(view, i)
    return out


def _stream_of(view: ExecutorView, pos: int) -> str:
    op_id = view.op(pos).op_id
    for stream, ws in view.ex.windows_by_stream.items():
        if any(w.op_id == op_id for w in ws):
            return stream
    raise PlanError(f"window {op_id} reads no stream")  # pragma: no cover

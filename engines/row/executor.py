"""Runs a logical plan on the row engine.

How a plan runs::

    Arrow batches ──ingest──▶ tuples ──push──▶ window pending buffers
                                                     │ at each slide instant T (in order):
    windows ─▶ select/project/join/aggregate ─▶ R2S ─▶ emit(T, rows)
               (each consumes its inputs' deltas, topological order)

1. ``ingest(stream, batch)`` converts an Arrow batch to tuples, drops *late* tuples (a
   timestamp not later than an instant that had already fired when the tuple arrived, which
   only a tuple out of order in its own stream can be; docs/semantics.md) and pushes the rest
   into every window over that stream.
2. Instants fire once event time has passed them in *every* stream: each input stream has a
   progress (the largest timestamp it has delivered, or that the run-time has seen at the
   head of its reader, ``advance_stream``); the clock is the smallest progress over the
   streams that have not ended (``end_stream``), and every plan instant T below it fires. A
   stream that has shown no tuple yet holds the clock back; an ended one no longer does.
   ``finish()`` fires the remaining instants up to each window's last one. A plan instant is
   a multiple of some window's slide.
3. At an instant every operator steps once, in topological order, turning its inputs'
   deltas into its output delta; per-operator tuples in/out and busy time are recorded (the
   measured utilisation u of the dissertation's cost model).

A plan with a tuple-count SLIDE runs in *count mode*: an instant fires after every m-th tuple
and carries that tuple's timestamp.

``snapshot()`` / ``restore()`` capture every operator's state plus the clock, so a run can be
stopped and resumed (and, later, migrated) without changing its output.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from engines.row.aggregate import AggregateOp, finite_aggregate
from engines.row.arrow_window import ArrowWindow
from engines.row.base import Delta, RowOperator, Rows
from engines.row.compile import (
    NAN,
    compile_filter,
    compile_key,
    compile_map,
    compile_predicate,
    may_be_infinite,
    may_be_nan,
    nullable,
)
from engines.row.join import HashJoinOp
from engines.row.r2s import DStreamOp, IStreamOp, RStreamOp
from engines.row.stateless import ProjectOp, PushedSelectOp, SelectOp
from engines.row.windows import (
    PanedRangeWindow,
    RowsWindow,
    SlidingRangeWindow,
    TumblingWindow,
    UnboundedWindow,
    _WindowBase,
)
from optimizer.ir.errors import PlanError
from optimizer.ir.expr import Binary, ColumnRef, Expr, Unary, conjoin, conjuncts
from optimizer.ir.placement import Group
from optimizer.ir.plan import (
    R2S,
    Aggregate,
    Join,
    LogicalPlan,
    Project,
    Select,
    StreamMode,
    Window,
    WindowKind,
)
from optimizer.ir.plan import Source as SourceOp
from optimizer.ir.types import DataType

Emit = Callable[[int, Any], None]  # (instant, rows or a pyarrow.Table)

#: ``_late_mask``'s "no instant fired" and "no timestamp seen yet" (a clock start after
#: every timestamp, so no instant is due).
_NO_INSTANT = np.iinfo(np.int64).min
_NO_TS = 2**62


@dataclass(frozen=True)
class GroupInput:
    """One external input of a MIG group: the operator feeding it and how its data arrives."""

    op_id: str
    schema: Any  # optimizer.ir.schema.Schema
    arrow: bool  # an Arrow window: chunks, no tuples
    fifo: bool  # row deltas whose deletes are the oldest inserts (window-derived)


#: ``make_group(group, inputs) -> RowOperator``: builds the MIG operator for a group.
MakeGroup = Callable[[Group, list[GroupInput]], RowOperator]


@dataclass
class _Node:
    op: RowOperator
    inputs: list[int]  # positions in the step order
    nullable: list[bool]
    counts: bool = True  # False when the op's tuples are counted elsewhere (pushed selects)


class RowExecutor:
    """A compiled row-engine plan plus its event-time clock."""

    def __init__(
        self,
        plan: LogicalPlan,
        emit: Emit,
        on_late: Callable[[str, tuple[Any, ...], str], None] | None = None,
        panes: bool = True,
        groups: Sequence[Group] = (),
        make_group: MakeGroup | None = None,
    ) -> None:
        self.plan = plan
        self.use_panes = panes
        self.groups = list(groups)
        self.make_group = make_group
        self._group_of = {op: g for g in self.groups for op in g.operators}
        if self.groups and make_group is None:
            raise PlanError("a placement with columnar groups needs a MIG factory")
        self.arrow_windows_by_stream: dict[str, list[ArrowWindow]] = {}
        self.emit = emit
        self.nodes: list[_Node] = []
        self.windows_by_stream: dict[str, list[_WindowBase]] = {}
        self.windows: list[_WindowBase | ArrowWindow] = []
        self._paned_aggs: set[str] = set()
        self._build()
        self.r2s_pos = next(
            i for i, n in enumerate(self.nodes) if n.op.kind in ("istream", "dstream", "rstream")
        )
        self.count_slide = self._count_slide()
        # Clock state.
        self.min_ts: int | None = None
        self.max_ts: int | None = None
        self.last_fired: int | None = None
        self._next: list[int] | None = None  # next instant per window (time mode)
        self._count_seen = 0
        self.instants_fired = 0
        self.on_late = on_late
        self.late_count = 0
        #: The input streams the plan reads, their event-time progress (None until a stream
        #: shows its first tuple) and the ones that have ended.
        self.streams = sorted(set(self.windows_by_stream) | set(self.arrow_windows_by_stream))
        self.progress: dict[str, int | None] = dict.fromkeys(self.streams)
        self.ended: set[str] = set()

    # -- building ---------------------------------------------------------------------------

    def _build(self) -> None:
        plan = self.plan
        pos: dict[str, int] = {}
        nulls: dict[str, list[bool]] = {}
        finite: dict[str, list[bool]] = {}  # columns never +-inf or NaN (engines.row.compile)
        replace: dict[str, bool] = {}
        fifo_window: dict[str, bool] = {}  # reaches a FIFO window through select/project only
        expiring: dict[str, bool] = {}  # may delete tuples (not an UNBOUNDED window's deltas)
        for op_id in plan.topological():
            op = plan.op(op_id)
            ins = plan.inputs(op_id)
            if isinstance(op, SourceOp):
                nulls[op_id] = [False] * len(op.schema)
                finite[op_id] = [True] * len(op.schema)  # non-finite input is dead-lettered
                continue
            if op.kind == "sink":
                continue
            group = self._group_of.get(op_id)
            if group is not None and op_id != group.top:
                continue  # runs inside its group's MIG, created at the group's top
            in_null = [x for i in ins for x in nulls[i]] if group is None else []
            in_fin = [x for i in ins for x in finite[i]] if group is None else []
            node: RowOperator
            out_null = in_null
            out_fin = in_fin
            positions: list[int] = []
            if group is not None:
                externals = self._group_inputs(group)
                positions = [pos[i] for i in externals]
                inputs = [
                    GroupInput(
                        op_id=i,
                        schema=plan.op(i).schema,
                        arrow=isinstance(self.nodes[pos[i]].op, ArrowWindow),
                        fifo=fifo_window.get(i, False),
                    )
                    for i in externals
                ]
                assert self.make_group is not None
                node = self.make_group(group, inputs)
                out_null = [True] * len(op.schema)
                out_fin = [False] * len(op.schema)
            elif isinstance(op, Window):
                consumer = plan.consumers(op_id)[0]
                stream = plan.op(ins[0])
                assert isinstance(stream, SourceOp)
                if consumer in self._group_of:
                    node = self._arrow_window(op)
                    self.arrow_windows_by_stream.setdefault(stream.stream, []).append(node)
                else:
                    node = self._window(op, self._paned_aggregate(op_id))
                    self.windows_by_stream.setdefault(stream.stream, []).append(node)
                self.windows.append(node)
                fifo_window[op_id] = True
                expiring[op_id] = op.window is not WindowKind.UNBOUNDED
            else:
                positions = [pos[i] for i in ins]
                rep_in = [replace[i] for i in ins]
                if isinstance(op, Select):
                    keep = compile_filter(op.predicate, in_null)
                    below = self.nodes[positions[0]].op
                    if self._can_push_select(ins[0], below):
                        assert isinstance(below, _WindowBase)
                        node = PushedSelectOp(op_id, rep_in[0])
                        below.prefilter = keep
                        below.prefilter_metrics = node.metrics
                    else:
                        node = SelectOp(op_id, keep, rep_in[0])
                    fifo_window[op_id] = fifo_window.get(ins[0], False)
                    expiring[op_id] = expiring.get(ins[0], True)
                elif isinstance(op, Project):
                    node = ProjectOp(op_id, compile_map(op.exprs, in_null, in_fin), rep_in[0])
                    out_null = [nullable(e, in_null) for e in op.exprs]
                    out_fin = [
                        not (may_be_infinite(e, in_fin) or may_be_nan(e, in_fin)) for e in op.exprs
                    ]
                    fifo_window[op_id] = fifo_window.get(ins[0], False)
                    expiring[op_id] = expiring.get(ins[0], True)
                elif isinstance(op, Join):
                    node = self._join(op, in_null, (rep_in[0], rep_in[1]))
                elif isinstance(op, Aggregate):
                    node = AggregateOp(
                        op_id,
                        op.group_by,
                        op.aggs,
                        in_null,
                        fifo=fifo_window.get(ins[0], False),
                        replace_in=rep_in[0],
                        paned=op_id in self._paned_aggs,
                        deletes=expiring.get(ins[0], True),
                        input_finite=in_fin,
                    )
                    out_null = [nullable(g, in_null) for g in op.group_by] + [
                        a.func != "COUNT"
                        and (not op.group_by or (a.arg is not None and nullable(a.arg, in_null)))
                        for a in op.aggs
                    ]
                    out_fin = [
                        not (may_be_infinite(g, in_fin) or may_be_nan(g, in_fin))
                        for g in op.group_by
                    ] + [finite_aggregate(a, in_fin) for a in op.aggs]
                elif isinstance(op, R2S):
                    r2s: dict[StreamMode, type[IStreamOp | DStreamOp | RStreamOp]] = {
                        StreamMode.ISTREAM: IStreamOp,
                        StreamMode.DSTREAM: DStreamOp,
                        StreamMode.RSTREAM: RStreamOp,
                    }
                    node = r2s[op.mode](op_id, rep_in[0])
                else:  # pragma: no cover - the IR has no other operator kinds
                    raise PlanError(f"the row engine cannot run {op.kind} operators")
            pos[op_id] = len(self.nodes)
            nulls[op_id] = out_null
            finite[op_id] = out_fin
            replace[op_id] = node.replace_out
            self.nodes.append(
                _Node(node, positions, out_null, counts=not isinstance(node, PushedSelectOp))
            )

    def _group_inputs(self, group: Group) -> list[str]:
        """External inputs of a group: in topological order of its operators, port order
        (the order ``engines.sqlgen.group_sql`` names them in0, in1, ...)."""
        seen: list[str] = []
        members = set(group.operators)
        for op_id in group.operators:
            for i in self.plan.inputs(op_id):
                if i not in members and i not in seen:
                    seen.append(i)
        return seen

    @staticmethod
    def _arrow_window(op: Window) -> ArrowWindow:
        slide = 1 if op.slide_rows else op.slide
        return ArrowWindow(
            op.id, op.time_column, op.window.value, op.size, slide, count_mode=op.slide_rows
        )

    def _can_push_select(self, input_id: str, below: RowOperator) -> bool:
        """A select may filter inside its input window when the window is time-based, has no
        other consumer and no filter yet (for ROWS windows filtering first would change which
        tuples are the last n)."""
        return (
            isinstance(
                below, SlidingRangeWindow | TumblingWindow | UnboundedWindow | PanedRangeWindow
            )
            and below.prefilter is None
            and len(self.plan.consumers(input_id)) == 1
        )

    def _paned_aggregate(self, window_id: str) -> str | None:
        """The aggregate this window can feed panes to, if the pattern allows it.

        Pattern: a sliding RANGE window whose range is a multiple of its slide, followed by
        selects/projects only (each with one consumer) and then an aggregate of decomposable
        functions (COUNT, SUM, AVG, MIN, MAX without DISTINCT).
        """
        plan = self.plan
        op = plan.op(window_id)
        assert isinstance(op, Window)
        if not self.use_panes:
            return None
        if not (
            op.window is WindowKind.RANGE
            and not op.slide_rows
            and op.size is not None
            and op.size != op.slide
            and op.size % op.slide == 0
        ):
            return None
        cur = window_id
        while True:
            consumers = plan.consumers(cur)
            if len(consumers) != 1:
                return None
            cur = consumers[0]
            if cur in self._group_of:
                return None  # a MIG consumes tuples (or chunks), not panes
            nxt = plan.op(cur)
            if isinstance(nxt, Select | Project):
                continue
            if isinstance(nxt, Aggregate) and all(
                a.func in ("COUNT", "SUM", "AVG", "MIN", "MAX") and not a.distinct for a in nxt.aggs
            ):
                self._paned_aggs.add(cur)
                return cur
            return None

    @staticmethod
    def _window(op: Window, paned_for: str | None = None) -> _WindowBase:
        if op.window is WindowKind.UNBOUNDED:
            return UnboundedWindow(op.id, op.time_column, op.slide)
        if op.window is WindowKind.ROWS:
            assert op.size is not None
            w: _WindowBase = RowsWindow(
                op.id, op.time_column, op.size, 1 if op.slide_rows else op.slide
            )
            w.count_mode = op.slide_rows
            return w
        assert op.size is not None
        if op.size == op.slide and not op.slide_rows:
            return TumblingWindow(op.id, op.time_column, op.slide)
        if paned_for is not None:
            return PanedRangeWindow(op.id, op.time_column, op.size, op.slide)
        return SlidingRangeWindow(op.id, op.time_column, op.size, op.slide)

    @staticmethod
    def _join(op: Join, in_null: list[bool], rep: tuple[bool, bool]) -> HashJoinOp:
        keys = op.equi_keys()
        residual = conjoin(op.residual())
        lk = compile_key([a for a, _ in keys])
        rk = compile_key([b for _, b in keys])
        # NULL keys never match in SQL; source columns are never NULL, derived ones may be.
        # (Only NULL is checked here: the hash lookup itself matches NaN keys, which equal
        # each other as in DuckDB, where a re-evaluated `a = b` would not.)
        if op.condition is not None and any(
            in_null[a] or in_null[op.left_width + b] for a, b in keys
        ):
            not_null: list[Expr] = [
                Unary("IS NOT NULL", side, DataType.BOOLEAN)
                for c in conjuncts(op.condition)
                if isinstance(c, Binary) and c.op == "=" and c not in op.residual()
                for side in (c.left, c.right)
                if isinstance(side, ColumnRef) and in_null[side.index]
            ]
            residual = conjoin([*not_null, *op.residual()])
        res = compile_predicate(residual, in_null) if residual is not None else None
        return HashJoinOp(op.id, lk, rk, res, rep, nested_loop=not keys)

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

    # -- ingest -----------------------------------------------------------------------------

    def ingest(self, stream: str, batch: pa.RecordBatch | pa.Table, time_column: int) -> int:
        """Push one Arrow batch of ``stream``; returns the number of tuples accepted.

        Tuples are built only if a row window reads the stream; Arrow windows (feeding MIGs)
        take the batch as it is.
        """
        if batch.num_rows == 0:
            return 0
        row_ws = self.windows_by_stream.get(stream, [])
        arrow_ws = self.arrow_windows_by_stream.get(stream, [])
        if not row_ws and not arrow_ws:
            return 0
        if self.count_slide is not None:
            return self._ingest_count_arrow(batch, row_ws, arrow_ws, time_column)
        ts_col = batch.column(time_column)
        ts_sorted = _is_sorted(ts_col)
        lo, hi = _min_max(ts_col)
        if not (ts_sorted and (self.last_fired is None or lo > self.last_fired)):
            keep = self._late_mask(stream, _int64(ts_col), lambda idx: _row_at(batch, idx))
            if not keep.all():
                batch = batch.filter(pa.array(keep, pa.bool_()))
                if batch.num_rows == 0:
                    return 0
                lo, hi = _min_max(batch.column(time_column))
                ts_sorted = False
        if row_ws:
            rows = batch_to_rows(batch)
            for w in row_ws:
                w.push(rows, ts_sorted=ts_sorted)
        for aw in arrow_ws:
            aw.push_arrow(batch)
        self._advance(stream, lo, hi)
        return int(batch.num_rows)

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
        if not (ts_sorted and (self.last_fired is None or lo > self.last_fired)):
            ts = np.fromiter((r[time_column] for r in rows), dtype=np.int64, count=len(rows))
            keep = self._late_mask(stream, ts, rows.__getitem__)
            if not keep.all():
                rows = [r for r, k in zip(rows, keep.tolist(), strict=True) if k]
                if not rows:
                    return 0
                lo = min(r[time_column] for r in rows)
                hi = max(r[time_column] for r in rows)
                ts_sorted = False
        for w in windows:
            w.push(rows, ts_sorted=ts_sorted)
        self._advance(stream, lo, hi)
        return len(rows)

    # -- the clock --------------------------------------------------------------------------

    def advance_stream(self, stream: str, ts: int) -> None:
        """``stream`` will deliver nothing that moves its progress below ``ts`` (the run-time
        has read its next tuple, whose running-maximum timestamp is ``ts``): fire what that
        allows. A tuple of the stream that later arrives with a timestamp not after an
        instant fired meanwhile is out of order in its own stream, and late."""
        if stream not in self.progress or self.count_slide is not None:
            return
        p = self.progress[stream]
        if p is None or ts > p:
            self.progress[stream] = ts
            self._fire_due()

    def end_stream(self, stream: str) -> None:
        """``stream`` has ended: it no longer holds the clock back."""
        if stream not in self.progress or stream in self.ended:
            return
        self.ended.add(stream)
        if self.count_slide is None:
            self._fire_due()

    def watermark(self) -> int | None:
        """The clock: the smallest progress over the streams that have not ended. None while
        one of them has shown no tuple yet, and once all have ended (``finish`` then fires
        the rest)."""
        live = [self.progress[s] for s in self.streams if s not in self.ended]
        if not live or any(p is None for p in live):
            return None
        return min(p for p in live if p is not None)

    def _fire_due(self) -> None:
        mark = self.watermark()
        if mark is not None:
            self._fire_before(mark)

    def _advance(self, stream: str, lo: int, hi: int) -> None:
        """Account for accepted tuples of ``stream`` with timestamps in [lo, hi] and fire
        what is due."""
        if self.last_fired is None and (self.min_ts is None or lo < self.min_ts):
            self.min_ts = lo  # before the first instant fires, the clock starts at the minimum
        if self.max_ts is None or hi > self.max_ts:
            self.max_ts = hi
        p = self.progress.get(stream)
        if stream in self.progress and (p is None or hi > p):
            self.progress[stream] = hi
        self._fire_due()

    def _late_mask(
        self, stream: str, ts: np.ndarray, row_at: Callable[[int], tuple[Any, ...]]
    ) -> np.ndarray:
        """Which tuples of a batch of ``stream`` to keep (vectorised; Python runs only per
        late tuple, to report it).

        Tuple ``i`` is late when its timestamp is not after the last plan instant that had
        fired when it arrived. Instants fire tuple by tuple as the clock moves: for tuple
        ``i`` the clock is the smaller of its own stream's running maximum (including the
        tuples before it in this batch) and the other live streams' progress, so only a tuple
        out of order in its own stream can be late. Until the first instant fires, the first
        instant follows the smallest timestamp seen (as ``_init_clock`` does). Late tuples are
        counted and reported to ``on_late`` with the reason.
        """
        n = len(ts)
        keep = np.ones(n, dtype=bool)
        if n == 0 or not self.windows:
            return keep
        others = [self.progress[s] for s in self.streams if s != stream and s not in self.ended]
        if any(p is None for p in others):
            return keep  # another stream has shown nothing yet: no instant can fire
        own = self.progress.get(stream)
        running = np.maximum.accumulate(ts)
        if own is not None:
            running = np.maximum(running, own)
        clock = np.minimum(running, min(p for p in others if p is not None)) if others else running
        if self.last_fired is not None:
            assert self.min_ts is not None
            fired = self._fired_below(clock, np.full(n, self.min_ts, dtype=np.int64))
        else:
            # The smallest timestamp before each tuple: the clock's start until it fires.
            start = np.empty(n, dtype=np.int64)
            start[0] = self.min_ts if self.min_ts is not None else _NO_TS
            if n > 1:
                start[1:] = np.minimum(np.minimum.accumulate(ts[:-1]), start[0])
            fired = self._fired_below(clock, start)
            first = np.flatnonzero(fired != _NO_INSTANT)
            if len(first) and first[0] + 1 < n:
                f = int(first[0])  # the first instant fires here: the start is fixed from now on
                fired[f + 1 :] = self._fired_below(clock[f + 1 :], np.full(n - f - 1, start[f]))
        late = (fired != _NO_INSTANT) & (ts <= fired)
        if not late.any():
            return keep
        for idx in np.flatnonzero(late).tolist():
            self.late_count += 1
            if self.on_late is not None:
                reason = (
                    f"late in stream '{stream}': timestamp {int(ts[idx])} is not after instant "
                    f"{int(fired[idx])}, which had fired when it arrived (stream '{stream}' "
                    f"had already delivered timestamp {int(running[idx])})"
                )
                self.on_late(stream, row_at(idx), reason)
        return ~late

    def _fired_below(self, bound: np.ndarray, start: np.ndarray) -> np.ndarray:
        """Per element: the largest plan instant < ``bound`` that is not before the first
        instant of a clock starting at ``start`` (``_NO_INSTANT`` if there is none)."""
        best = np.full(len(bound), _NO_INSTANT, dtype=np.int64)
        for s in sorted({w.slide for w in self.windows}):
            first = -(-start // s) * s
            cand = (-(-bound // s) - 1) * s
            np.copyto(best, cand, where=(cand >= first) & (cand > best))
        return best

    def _ingest_count(self, rows: Rows, windows: list[_WindowBase], t: int) -> int:
        m = self.count_slide
        assert m is not None
        i = 0
        while i < len(rows):
            need = m - self._count_seen % m
            chunk = rows[i : i + need]
            for w in windows:
                w.push(chunk, ts_sorted=False)
            self._count_seen += len(chunk)
            i += len(chunk)
            if self._count_seen % m == 0:
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
        n = batch.num_rows
        i = 0
        ts_col = batch.column(t)
        while i < n:
            need = m - self._count_seen % m
            piece = batch.slice(i, need)
            if row_ws:
                rows = batch_to_rows(piece)
                for w in row_ws:
                    w.push(rows, ts_sorted=False)
            for aw in arrow_ws:
                aw.push_arrow(piece)
            self._count_seen += piece.num_rows
            i += piece.num_rows
            if self._count_seen % m == 0:
                self._step(int(ts_col[i - 1].as_py()))
        return n

    # -- firing -----------------------------------------------------------------------------

    def _init_clock(self) -> None:
        assert self.min_ts is not None
        self._next = [-(-self.min_ts // w.slide) * w.slide for w in self.windows]

    def _fire_before(self, bound: int) -> None:
        """Fire every plan instant T < bound."""
        if self.min_ts is None:
            return
        if self.last_fired is None:
            self._init_clock()  # the minimum may still move until the first instant fires
        nxt = self._next
        assert nxt is not None
        while True:
            instant = min(nxt)
            if instant >= bound:
                return
            self._step(instant)
            for k, w in enumerate(self.windows):
                if nxt[k] == instant:
                    nxt[k] += w.slide

    def finish(self) -> None:
        """End of input: fire the remaining instants up to each window's last one."""
        if self.count_slide is not None or self.max_ts is None:
            return
        if self.last_fired is None:
            self._init_clock()
        nxt = self._next
        assert nxt is not None
        last = [-(-self.max_ts // w.slide) * w.slide for w in self.windows]
        while True:
            live = [nxt[k] for k in range(len(nxt)) if nxt[k] <= last[k]]
            if not live:
                return
            instant = min(live)
            self._step(instant)
            for k, w in enumerate(self.windows):
                if nxt[k] == instant:
                    nxt[k] += w.slide

    def _step(self, instant: int) -> None:
        deltas: list[Delta] = []
        perf = time.perf_counter
        for node in self.nodes:
            op = node.op
            inputs = [deltas[i] for i in node.inputs]
            t0 = perf()
            out = op.step(instant, inputs)
            m = op.metrics
            m.busy_s += perf() - t0
            m.steps += 1
            if node.counts:
                if inputs:
                    m.tuples_in += sum(len(d) for d in inputs)
                m.tuples_out += len(out)
            deltas.append(out)
        self.last_fired = instant
        self.instants_fired += 1
        out = deltas[self.r2s_pos]
        self.emit(instant, out.table if out.table is not None else out.ins)

    # -- state ------------------------------------------------------------------------------

    def operator_state(self) -> dict[str, dict[str, Any]]:
        return {n.op.op_id: n.op.state() for n in self.nodes}

    def snapshot(self) -> dict[str, Any]:
        """Every operator's state plus the clock, as plain Python data."""
        return {
            "operators": {n.op.op_id: n.op.snapshot() for n in self.nodes},
            "clock": {
                "min_ts": self.min_ts,
                "max_ts": self.max_ts,
                "last_fired": self.last_fired,
                "next": list(self._next) if self._next is not None else None,
                "count_seen": self._count_seen,
                "instants_fired": self.instants_fired,
                "progress": dict(self.progress),
                "ended": sorted(self.ended),
            },
        }

    def restore(self, snap: dict[str, Any]) -> None:
        for n in self.nodes:
            n.op.restore(snap["operators"][n.op.op_id])
        c = snap["clock"]
        self.min_ts, self.max_ts, self.last_fired = c["min_ts"], c["max_ts"], c["last_fired"]
        self._next = list(c["next"]) if c["next"] is not None else None
        self._count_seen = c["count_seen"]
        self.instants_fired = c["instants_fired"]
        self.progress = dict(c["progress"])
        self.ended = set(c["ended"])

    def operator_metrics(self) -> dict[str, dict[str, Any]]:
        return {
            n.op.op_id: {
                "kind": n.op.kind,
                "tuples_in": n.op.metrics.tuples_in,
                "tuples_out": n.op.metrics.tuples_out,
                "busy_s": n.op.metrics.busy_s,
            }
            for n in self.nodes
        }


def batch_to_rows(batch: pa.RecordBatch | pa.Table) -> Rows:
    """Arrow columns -> Python tuples (the row engine's one conversion; ~1.5 us per row)."""
    return list(
        zip(
            *[
                c.to_numpy(zero_copy_only=False).tolist() if _plain(c) else c.to_pylist()
                for c in batch.columns
            ],
            strict=True,
        )
    )


def canonical_rows(table: pa.RecordBatch | pa.Table) -> Rows:
    """``batch_to_rows`` of a computed result (a MIG's), with every NaN the row engine's one
    NaN object, so that NaN rows equal each other in bags and groups (engines.row.compile)."""
    import pyarrow.compute as pc

    rows = batch_to_rows(table)
    nan_cols = [
        i
        for i, c in enumerate(table.columns)
        if pa.types.is_floating(c.type) and pc.any(pc.is_nan(c)).as_py()
    ]
    if not nan_cols:
        return rows
    return [tuple(NAN if i in nan_cols and v != v else v for i, v in enumerate(r)) for r in rows]


def _plain(col: pa.Array | pa.ChunkedArray) -> bool:
    """Numeric without nulls: numpy's tolist builds the Python objects fastest."""
    t = col.type
    return col.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_floating(t))


def _min_max(col: pa.Array | pa.ChunkedArray) -> tuple[int, int]:
    import pyarrow.compute as pc

    mm = pc.min_max(col)
    return int(mm["min"].as_py()), int(mm["max"].as_py())


def _int64(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A timestamp column as an int64 numpy array (no nulls: the run-time validated it)."""
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)


def _row_at(batch: pa.RecordBatch | pa.Table, idx: int) -> tuple[Any, ...]:
    return tuple(c[idx].as_py() for c in batch.columns)


def _is_sorted(col: pa.Array | pa.ChunkedArray) -> bool:
    import pyarrow.compute as pc

    if len(col) < 2:
        return True
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return bool(pc.all(pc.less_equal(arr.slice(0, len(arr) - 1), arr.slice(1))).as_py())

"""The replay buffer: the accepted input of the last horizon, per stream, as Arrow.

The generic strategies (GMS, GPT's bound, GHM) rebuild a new plan's state by replaying
input instead of moving operator state, so they work for any plan on any engine. What must
be replayed is what can still matter: every tuple a window of the query may still show.
At the last fired instant L a RANGE window of size r shows the tuples with L - r < ts <= L,
and later instants only later ones; a ROWS n window shows the n newest tuples with
``ts <= T_w``, its own last slide instant; a tuple not yet visible (ts > L) is pending and
always kept. A window's own last instant may lie up to slide - 1 before L (``T_w >= L -
slide + 1``), and so may the next instant's ``T_w``: per stream the buffer therefore keeps
the tuples with ``ts > L - H`` (H: the largest RANGE/NOW size plus slide - 1, and ROWS
slide - 1, over the stream's windows) plus, if the stream has ROWS windows, the ``n``
newest with ``ts <= L - G`` (G: the largest ROWS slide - 1; timestamp order, ties by
arrival, as the windows order them). That covers the ``n`` newest up to any ``T_w`` in
``[L - G, L]``: those newer than ``L - G`` are all kept, the others are among the ``n``
newest up to ``L - G``.

Only tuples the running plan *accepted* are buffered (the executor reports them,
``RowExecutor.ingest_accepted``): a late tuple it rejected must not come back through a
replay. An UNBOUNDED window needs every tuple ever seen: such plans cannot migrate by
replay (:func:`replay_horizons` raises). Eviction is lazy and batch-wise: each buffered
batch carries its smallest and largest timestamp, so a compaction drops whole batches that
fell out of the horizon and copies only the few that straddle its edge (filtering the whole
buffer copied a 5-minute window at 40k tuples/s, 12 M rows, in 1-2.4 s, an 11% slowdown of
``--adapt`` over the static plan on Q2's ramp). A stream with a ROWS window is compacted by
a filter over all its tuples (its ``n`` newest may lie anywhere).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from optimizer.ir.errors import PlanError
from optimizer.ir.plan import LogicalPlan, Source, Window, WindowKind


@dataclass(frozen=True)
class Horizon:
    """What a stream's windows may still need: ``ticks`` of event time before the last
    fired instant L, and the ``rows`` newest tuples with ``ts <= L - rows_lag`` (0: no ROWS
    window; ``rows_lag``: a time-sliding ROWS window's slide - 1)."""

    ticks: int
    rows: int
    time_column: int
    rows_lag: int = 0


def replay_horizons(plan: LogicalPlan) -> dict[str, Horizon]:
    """Per input stream, its :class:`Horizon` (PlanError for plans that cannot replay)."""
    out: dict[str, Horizon] = {}
    for op in plan.operators():
        if not isinstance(op, Window):
            continue
        (src_id,) = plan.inputs(op.id)
        src = plan.op(src_id)
        assert isinstance(src, Source)
        if op.window is WindowKind.UNBOUNDED:
            raise PlanError(
                f"{op.id} [{op.spec}] over '{src.stream}' is UNBOUNDED: a new plan cannot "
                "rebuild it by replaying a bounded horizon of input",
                hint="use another strategy (--migration ms/jisc once available) or a "
                "bounded window",
            )
        if op.slide_rows:
            raise PlanError(
                f"{op.id} [{op.spec}] slides by tuple count: the generic strategies "
                "replay by event time and cannot restore its tuple-count phase",
                hint="use a time-based SLIDE, or another strategy",
            )
        h = out.get(src.stream, Horizon(0, 0, op.time_column))
        size = op.size or 0
        if op.window is WindowKind.ROWS:
            # Its own last instant T_w may be up to slide - 1 before L: every tuple after
            # L - (slide - 1) is kept, and the n newest up to there.
            lag = max(h.rows_lag, op.slide - 1)
            h = Horizon(max(h.ticks, lag), max(h.rows, size), h.time_column, lag)
        else:
            # The window's own last instant may be up to slide - 1 before L.
            h = Horizon(max(h.ticks, size + op.slide - 1), h.rows, h.time_column, h.rows_lag)
        out[src.stream] = h
    return out


class ReplayBuffer:
    """Accepted tuples per stream (Arrow batches in arrival order) within the horizon."""

    #: A stream's buffer is compacted once it holds this many rows more than after the last
    #: compaction, and at least twice as many.
    MIN_SLACK = 4096

    def __init__(self, horizons: dict[str, Horizon]) -> None:
        self.horizons = horizons
        self._batches: dict[str, list[pa.RecordBatch]] = {s: [] for s in horizons}
        self._bounds: dict[str, list[tuple[int, int]]] = {s: [] for s in horizons}
        """Per buffered batch, its smallest and largest timestamp."""
        self._rows: dict[str, int] = dict.fromkeys(horizons, 0)
        self._kept: dict[str, int] = dict.fromkeys(horizons, 0)
        self.last_instant: int | None = None

    def add(self, stream: str, batch: pa.RecordBatch | pa.Table) -> None:
        """Buffer accepted tuples of ``stream`` (ignored if the plan does not read it)."""
        if stream not in self._batches or batch.num_rows == 0:
            return
        parts = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        column = self.horizons[stream].time_column
        for part in parts:
            if part.num_rows == 0:
                continue
            self._batches[stream].append(part)
            self._bounds[stream].append(_bounds(part, column))
        self._rows[stream] += batch.num_rows
        kept = self._kept[stream]
        if self._rows[stream] > max(kept + kept // 4, kept + self.MIN_SLACK):
            self._compact(stream)

    def fired(self, instant: int) -> None:
        """The running plan has fired ``instant`` (the horizon's reference point)."""
        self.last_instant = instant

    def rows(self, stream: str) -> int:
        return self._rows.get(stream, 0)

    def table(self, stream: str) -> pa.Table | None:
        """The buffered tuples of ``stream`` within the horizon, in arrival order."""
        self._compact(stream)
        batches = self._batches.get(stream)
        if not batches:
            return None
        return pa.Table.from_batches(batches)

    def tables(self) -> dict[str, pa.Table]:
        out = {}
        for s in self._batches:
            t = self.table(s)
            if t is not None and t.num_rows:
                out[s] = t
        return out

    def _compact(self, stream: str) -> None:
        """Drop what no window can need any more (see the module docstring)."""
        batches = self._batches[stream]
        last = self.last_instant
        if last is None or not batches:
            self._kept[stream] = self._rows[stream]
            return
        h = self.horizons[stream]
        if not h.rows:
            self._drop_batches(stream, last - h.ticks if h.ticks > 0 else last)
            return
        table = pa.Table.from_batches(batches)
        ts = np.asarray(table.column(h.time_column).to_numpy(zero_copy_only=False), dtype=np.int64)
        keep = ts > last - h.ticks if h.ticks > 0 else ts > last
        if h.rows:
            visible = np.flatnonzero(ts <= last - h.rows_lag)
            if len(visible):
                order = visible[np.argsort(ts[visible], kind="stable")]
                keep[order[-h.rows :]] = True
        if keep.all():
            self._kept[stream] = self._rows[stream]
            return
        kept = table.filter(pa.array(keep)).combine_chunks()
        self._batches[stream] = [b for b in kept.to_batches() if b.num_rows]
        self._bounds[stream] = [_bounds(b, h.time_column) for b in self._batches[stream]]
        self._rows[stream] = kept.num_rows
        self._kept[stream] = kept.num_rows

    def _drop_batches(self, stream: str, cutoff: int) -> None:
        """Keep the tuples with ``ts > cutoff``: whole batches kept or dropped by their
        bounds, the straddling ones filtered."""
        column = self.horizons[stream].time_column
        batches, bounds = [], []
        for batch, (lo, hi) in zip(self._batches[stream], self._bounds[stream], strict=True):
            if hi <= cutoff:
                continue
            if lo <= cutoff:
                batch = batch.filter(pc.greater(_ticks(batch, column), cutoff))
                lo = _bounds(batch, column)[0]
            batches.append(batch)
            bounds.append((lo, hi))
        self._batches[stream], self._bounds[stream] = batches, bounds
        rows = sum(b.num_rows for b in batches)
        self._rows[stream] = rows
        self._kept[stream] = rows


def _ticks(batch: pa.RecordBatch, column: int) -> pa.Array:
    """The batch's time column as int64 ticks."""
    col = batch.column(column)
    return col if pa.types.is_int64(col.type) else col.cast(pa.int64())


def _bounds(batch: pa.RecordBatch, column: int) -> tuple[int, int]:
    """The smallest and largest timestamp of a non-empty batch, in ticks."""
    mm = pc.min_max(_ticks(batch, column))
    return int(mm["min"].as_py()), int(mm["max"].as_py())

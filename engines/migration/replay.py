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
replay (:func:`replay_horizons` raises). Eviction is lazy and vectorised (a stream's
buffer is compacted when it has doubled since the last compaction).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

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
        self._rows: dict[str, int] = dict.fromkeys(horizons, 0)
        self._kept: dict[str, int] = dict.fromkeys(horizons, 0)
        self.last_instant: int | None = None

    def add(self, stream: str, batch: pa.RecordBatch | pa.Table) -> None:
        """Buffer accepted tuples of ``stream`` (ignored if the plan does not read it)."""
        if stream not in self._batches or batch.num_rows == 0:
            return
        if isinstance(batch, pa.Table):
            self._batches[stream].extend(batch.to_batches())
        else:
            self._batches[stream].append(batch)
        self._rows[stream] += batch.num_rows
        if self._rows[stream] > max(2 * self._kept[stream], self._kept[stream] + self.MIN_SLACK):
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
        self._batches[stream] = kept.to_batches()
        self._rows[stream] = kept.num_rows
        self._kept[stream] = kept.num_rows

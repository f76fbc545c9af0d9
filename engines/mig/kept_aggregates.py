"""The runtime half of incrementally kept aggregates in a DuckDB MIG (issue 20).

``engines.sqlgen.incremental`` says which aggregates of a group qualify and writes their SQL;
this module keeps each one's state table up to date from the chunks that entered and left
its input at a slide. The state is an Arrow table on the Python side (registered with the
engine, so an engine restart loses nothing), replaced only when a merge succeeded.

Exactness (docs/semantics.md, "Floating-point sums") is checked, never assumed: every new
chunk's DOUBLE arguments must be finite multiples of 2^-S below the headroom limit. When one
is not, the state is rebuilt from the whole window at a scale chosen for it; when no scale
fits (a NaN or an infinity in the window, or magnitudes 2^95 apart), the aggregate is given
back to plain re-evaluation for the rest of the run (``IncrementalUnavailable``), which the
MIG answers by regenerating its SQL without it.

An aggregate with a MIN or MAX is kept from pane partials instead (``PanedState``): every
chunk of the input is aggregated once when it arrives, runs of about sqrt(P) consecutive
chunks are merged into block partials once complete, and each slide merges the live blocks
and the loose chunks. Chunks are identified by the MIG's chunk ids: a chunk that changed
(the front of a FIFO input sliced by an expiry) is aggregated again, outside any block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engines.columnar import ColumnarEngine, QueryDataError
from engines.sqlgen.incremental import (
    IncrementalAggregate,
    KeptAggregate,
    PanedAggregate,
    headroom,
    scale_for,
)
from optimizer.ir.incremental import ExactStatePrices, block_size, paned_pays


class IncrementalUnavailable(Exception):
    """This aggregate cannot be kept exactly on this data: re-evaluate it over the window."""


@dataclass
class IncrementalStats:
    """What keeping one aggregate cost (the MIG's ``incremental`` metrics): states built from
    the whole window, slides merged, the rows those merges read, and their seconds."""

    builds: int = 0
    merges: int = 0
    rows_merged: int = 0
    seconds: float = 0.0
    rested: int = 0
    """Slides the aggregate was re-evaluated because that was cheaper than a merge."""


#: A resting state is built again only when a merge would cost at most this share of
#: re-aggregating (so a state near the break-even point does not flap).
RESUME = 0.8


class IncrementalState:
    """One incrementally kept aggregate of a MIG.

    With ``prices`` (the engine's constants), each slide first compares a merge with
    re-aggregating, using the window's rows, the rows that changed, and the last state's
    group count and share of the window reaching the aggregate: a state whose merge costs
    more is dropped (*resting*: the group's SQL re-aggregates) and built again from the
    window when a merge costs at most ``RESUME`` of re-aggregating. The cost model prices
    the same comparison (``cost_models.analytical._kept_incrementally``).
    """

    def __init__(self, spec: IncrementalAggregate, prices: ExactStatePrices | None = None) -> None:
        self.spec = spec
        self.prices = prices
        self.scale: int | None = None
        self.room = 0  # bits of headroom the scale keeps (engines.sqlgen.incremental)
        self.table: pa.Table | None = None
        self.stats = IncrementalStats()
        #: The last state's groups and the share of its window's rows that reached it.
        self.shape: tuple[int, float] | None = None
        self.resting = False

    @property
    def ready(self) -> bool:
        return self.table is not None

    def invalidate(self) -> None:
        """Forget the state: the next slide rebuilds it from the whole window."""
        self.table = None

    def _register(self, engine: ColumnarEngine, name: str, table: pa.Table) -> None:
        engine.set_input(name, [(0, table)], table.schema)

    def _scalar(self, engine: ColumnarEngine, sql: str) -> object:
        return engine.query(sql).column(0)[0].as_py()

    def rebuild(self, engine: ColumnarEngine) -> None:
        """The state over the input table as the engine holds it now (the MIG shipped it)."""
        spec = self.spec
        try:
            rows = self._scalar(engine, f"SELECT COUNT(*) FROM {spec.input_table}")
            room = headroom(int(rows))  # type: ignore[call-overload]
            magnitude = spec.magnitude_sql(spec.input_table)
            m = self._scalar(engine, magnitude) if magnitude else None
            scale = scale_for(float(m) if m is not None else None, int(rows))  # type: ignore[arg-type, call-overload]
            check = spec.check_sql(spec.input_table, scale, room)
            if check is not None and self._scalar(engine, check):
                raise IncrementalUnavailable(
                    f"{spec.op_id}: the window's values cannot all be summed exactly in 128 "
                    "bits (a non-finite value, or magnitudes too far apart)"
                )
            table = engine.query(spec.build_sql(scale))
        except QueryDataError as err:  # a 128-bit total overflowed
            raise IncrementalUnavailable(f"{spec.op_id}: {err}") from err
        self._register(engine, spec.state_table, table)
        self.scale, self.room, self.table = scale, room, table
        self.stats.builds += 1

    def merge(self, engine: ColumnarEngine, new: list[pa.Table], old: list[pa.Table]) -> None:
        """Apply one slide: ``new`` rows entered the input, ``old`` rows left it."""
        if self.table is None or self.scale is None:
            self.rebuild(engine)
            return
        if not new and not old:
            return
        spec = self.spec
        schema = (new or old)[0].schema
        new_t = pa.concat_tables(new) if new else schema.empty_table()
        old_t = pa.concat_tables(old) if old else schema.empty_table()
        self._register(engine, spec.new_table, new_t)
        self._register(engine, spec.old_table, old_t)
        try:
            check = spec.check_sql(spec.new_table, self.scale, self.room)
            if check is not None and new and self._scalar(engine, check):
                self.rebuild(engine)  # a new value needs another scale
                return
            table = engine.query(spec.merge_sql(self.scale))
        except QueryDataError:  # a total overflowed its 128 bits: start over
            self.rebuild(engine)
            return
        self._register(engine, spec.state_table, table)
        self.table = table
        self.stats.merges += 1
        self.stats.rows_merged += new_t.num_rows + old_t.num_rows

    def reregister(self, engine: ColumnarEngine) -> None:
        """Register the kept state again (a fresh engine after a restart or fallback)."""
        if self.table is not None:
            self._register(engine, self.spec.state_table, self.table)

    def apply(
        self,
        engine: ColumnarEngine,
        chunks: Sequence[tuple[int, pa.Table]],
        entered: list[pa.Table],
        left: list[pa.Table],
        whole: bool,
        schema: pa.Schema,
    ) -> None:
        """Bring the state up to this slide: ``entered`` rows arrived, ``left`` rows left
        (``whole``: the input changed otherwise, rebuild from its ``chunks``); or drop it
        when re-aggregating is cheaper (class docstring)."""
        window = sum(t.num_rows for _, t in chunks)
        if not self._cheaper(window, sum(t.num_rows for t in (*entered, *left))):
            self.resting, self.table = True, None
            self.stats.rested += 1
            return
        self.resting = False
        if whole:
            self.invalidate()
        self.merge(engine, entered, left)
        if self.table is not None and window > 0:
            reached = pc.sum(self.table.column("n")).as_py() or 0
            self.shape = (self.table.num_rows, min(1.0, reached / window))

    def _cheaper(self, window: int, changed: int) -> bool:
        """Whether a merge costs less than re-aggregating this slide (always, without
        prices or before a first state)."""
        if self.prices is None or self.shape is None:
            return True
        groups, share = self.shape
        kept = self.prices.kept(changed * share, groups)
        doubles = sum(1 for f, a, d in self.spec.calls if d and f in ("SUM", "AVG"))
        again = self.prices.reevaluated(
            window, window * share, groups, bool(self.spec.where), doubles
        )
        return kept < (RESUME * again if self.resting else again)

    @property
    def pays(self) -> bool:
        return True

    @property
    def gave_up(self) -> bool:
        return False


@dataclass
class _Pane:
    rows: int  # the chunk's rows when it was aggregated
    partial: pa.Table
    seq: int | None  # position in arrival order; None: outside every block


class PanedState:
    """One aggregate with a MIN or MAX kept from pane partials (module docstring)."""

    def __init__(self, spec: PanedAggregate) -> None:
        self.spec = spec
        self.panes: dict[int, _Pane] = {}
        self.blocks: dict[int, pa.Table] = {}
        self.block = 0  # panes per block: grows with the window (never shrinks)
        self.next_seq = 0
        self.table: pa.Table | None = None
        self.window_rows = 0
        self.merged_rows = 0  # partial rows the last final merge read
        self.unpaid = 0  # consecutive slides the partials did not pay (see ``gave_up``)
        self.most_panes = 0  # the most chunks the window has held (growing: more)
        self.stats = IncrementalStats()
        #: The scale of the DOUBLE sums' partials and the headroom bits it keeps (None: to
        #: choose from the window; ``spec.doubles`` empty: unused).
        self.scale: int | None = None
        self.room = 0

    @property
    def ready(self) -> bool:
        return self.table is not None

    @property
    def pays(self) -> bool:
        """Whether the final merge reads several times fewer rows than the window holds."""
        return paned_pays(self.window_rows, self.merged_rows)

    @property
    def gave_up(self) -> bool:
        """The partials of a window that stopped growing have not paid for longer than its
        turnover (its size and shape are what they will be): stop keeping them."""
        return self.unpaid > max(10, len(self.panes))

    def invalidate(self) -> None:
        self.panes, self.blocks, self.table, self.block = {}, {}, None, 0
        self.scale = None

    def _register(self, engine: ColumnarEngine, name: str, tables: list[pa.Table]) -> None:
        engine.set_input(name, list(enumerate(tables)), tables[0].schema)

    def _partial(self, engine: ColumnarEngine, chunk: pa.Table) -> pa.Table:
        self._register(engine, self.spec.new_table, [chunk])
        return engine.query(self.spec.partial_sql(self.spec.new_table, self.scale or 0, self.room))

    def _choose_scale(self, engine: ColumnarEngine, rows: int) -> int:
        """The scale of the DOUBLE sums for a window of ``rows`` rows, from the largest
        magnitude its values have now (``engines.sqlgen.incremental.scale_for``)."""
        magnitude = self.spec.magnitude_sql(self.spec.input_table)
        m = engine.query(magnitude).column(0)[0].as_py() if magnitude else None
        return scale_for(float(m) if m is not None else None, rows)

    def _rescale(self, engine: ColumnarEngine, rows: int) -> bool:
        """Pick a scale for the window (every pane is aggregated again at it); False when
        it is the scale the partials already had (no scale sums the window exactly)."""
        scale = self._choose_scale(engine, rows)
        room = headroom(rows)
        if scale == self.scale and room == self.room:
            return False
        self.panes, self.blocks, self.table = {}, {}, None
        self.scale, self.room = scale, room
        return True

    def _bad(self, partials: list[pa.Table]) -> bool:
        """Whether any of ``partials`` counts a value its scale could not sum exactly."""
        cols = self.spec.bad_columns
        return any((pc.sum(t.column(c)).as_py() or 0) > 0 for t in partials for c in cols)

    def _partials(self, engine: ColumnarEngine, chunks: list[pa.Table]) -> list[pa.Table]:
        """The partials of several chunks: one query when there are many (a rebuild after a
        restart or a warm start costs one re-aggregation, not one query per pane)."""
        if len(chunks) <= BULK_PANES:
            return [self._partial(engine, t) for t in chunks]
        tagged = [
            t.append_column("_pane", pa.repeat(pa.scalar(i, pa.int32()), t.num_rows))
            for i, t in enumerate(chunks)
        ]
        self._register(engine, self.spec.new_table, tagged)
        both = engine.query(
            self.spec.partial_sql(self.spec.new_table, self.scale or 0, self.room, by_pane=True)
        )
        panes = both.column("_pane").to_numpy()
        ends = np.searchsorted(panes, np.arange(len(chunks) + 1), side="left")
        rest = both.drop_columns(["_pane"])
        return [rest.slice(ends[i], ends[i + 1] - ends[i]) for i in range(len(chunks))]

    def apply(
        self,
        engine: ColumnarEngine,
        chunks: Sequence[tuple[int, pa.Table]],
        entered: list[pa.Table],
        left: list[pa.Table],
        whole: bool,
        schema: pa.Schema,
    ) -> None:
        """Bring the state up to the input's current ``chunks`` (oldest first; ``schema``
        is the input's, for an empty one)."""
        try:
            self._apply(engine, chunks, schema)
        except QueryDataError as err:  # a 128-bit total overflowed its headroom
            raise IncrementalUnavailable(f"{self.spec.op_id}: {err}") from err

    def _apply(
        self, engine: ColumnarEngine, chunks: Sequence[tuple[int, pa.Table]], schema: pa.Schema
    ) -> None:
        spec = self.spec
        live = list(chunks)
        rows = sum(t.num_rows for _, t in live)
        # A scale keeps ``room`` bits free: sums of fewer than 2**(room + 1) values of the
        # limit's size fit 128 bits. A first scale, or more room for a window that grew.
        if spec.doubles and (self.scale is None or rows >= 1 << self.room):
            self._rescale(engine, rows)
        for attempt in range(2):
            fresh = self._refresh(engine, live)
            if not self._bad([p.partial for p in fresh]):
                break
            if attempt or not self._rescale(engine, rows):
                raise IncrementalUnavailable(
                    f"{spec.op_id}: the window's values cannot all be summed exactly in 128 "
                    "bits (a non-finite value, or magnitudes too far apart)"
                )
        self._finish(engine, live, schema)

    def _refresh(self, engine: ColumnarEngine, live: list[tuple[int, pa.Table]]) -> list[_Pane]:
        """Aggregate the chunks without a current partial; the new panes."""
        if block_size(len(live)) > self.block:  # the window has grown: larger blocks
            self.block, self.blocks = block_size(len(live)), {}
        old = self.panes
        # Chunks after the last one already aggregated unchanged arrived since: they get
        # sequence numbers (and so blocks); a changed chunk before it does not.
        last_known = -1
        for i, (cid, t) in enumerate(live):
            p = old.get(cid)
            if p is not None and p.rows == t.num_rows:
                last_known = i
        todo = [
            i
            for i, (cid, t) in enumerate(live)
            if (p := old.get(cid)) is None or p.rows != t.num_rows
        ]
        fresh = dict(zip(todo, self._partials(engine, [live[i][1] for i in todo]), strict=True))
        panes: dict[int, _Pane] = {}
        for i, (cid, t) in enumerate(live):
            if i in fresh:
                seq = None
                if i > last_known:
                    seq, self.next_seq = self.next_seq, self.next_seq + 1
                panes[cid] = _Pane(t.num_rows, fresh[i], seq)
            else:
                panes[cid] = old[cid]
        self.panes = panes
        return [panes[live[i][0]] for i in fresh]

    def _finish(
        self, engine: ColumnarEngine, live: list[tuple[int, pa.Table]], schema: pa.Schema
    ) -> None:
        """Merge the blocks and loose panes into the state (when the partials pay)."""
        spec, panes = self.spec, self.panes
        built = self.table is None
        by_seq = {p.seq: p for p in panes.values() if p.seq is not None}
        b = self.block
        usable: dict[int, pa.Table] = {}
        covered: set[int] = set()
        for blk in sorted({seq // b for seq in by_seq}):
            members = range(blk * b, (blk + 1) * b)
            if not all(m in by_seq for m in members):
                continue
            table = self.blocks.get(blk)
            if table is None:
                self._register(engine, spec.parts_table, [by_seq[m].partial for m in members])
                table = engine.query(spec.merge_sql(spec.parts_table))
            usable[blk] = table
            covered.update(members)
        self.blocks = usable
        parts = list(usable.values()) + [
            p.partial for p in panes.values() if p.seq is None or p.seq not in covered
        ]
        if not parts:  # an empty input: the partial of no rows
            parts = [self._partial(engine, schema.empty_table())]
        self.window_rows = sum(t.num_rows for _, t in live)
        self.merged_rows = sum(t.num_rows for t in parts)
        growing = len(live) > self.most_panes
        self.most_panes = max(self.most_panes, len(live))
        if not self.pays:  # the MIG re-evaluates this aggregate this slide; panes are kept
            self.table = None
            # a window still filling may pay later; a full one counts towards giving up
            self.unpaid = 0 if growing else self.unpaid + 1
            return
        self.unpaid = 0
        self._register(engine, spec.parts_table, parts)
        table = engine.query(spec.final_sql(spec.parts_table, self.scale or 0))
        engine.set_input(spec.state_table, [(0, table)], table.schema)
        self.table = table
        if built:
            self.stats.builds += 1
        else:
            self.stats.merges += 1
            self.stats.rows_merged += self.merged_rows

    def reregister(self, engine: ColumnarEngine) -> None:
        if self.table is not None:
            engine.set_input(self.spec.state_table, [(0, self.table)], self.table.schema)


#: Chunks beyond this many are aggregated into pane partials by one query.
BULK_PANES = 4

#: The runtime state of a kept aggregate.
KeptState = IncrementalState | PanedState


def state_for(spec: KeptAggregate, prices: ExactStatePrices | None = None) -> KeptState:
    """The runtime state keeping ``spec`` (``prices``: see :class:`IncrementalState`)."""
    if isinstance(spec, PanedAggregate):
        return PanedState(spec)
    return IncrementalState(spec, prices)

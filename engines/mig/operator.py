"""The MIG operator: runs one migration candidate (a group of R2R operators) on a columnar engine.

Dissertation, section 6.2: a migration candidate becomes one SQL query; a MIG operator in the
row engine wraps it. At every instant where one of its inputs changed, the MIG

1. mirrors its inputs into the engine as Arrow (``ColumnarEngine.set_input``):
   * an Arrow window's chunks as they are (no per-tuple work at all),
   * deltas from row operators converted column by column: window-derived ("FIFO") inputs
     become one chunk per instant and expire whole chunks from the front; any other input
     is kept as a multiset and re-shipped when it changes;
2. re-executes the group's SQL (``ColumnarEngine.query``);
3. hands the result relation back: as an Arrow table to an R2S operator (which writes it to
   the sink without building tuples), or to a row operator as a *delta*: the rows that left
   and joined the result since the previous instant (a bag difference against the retained
   previous result). Row operators above a MIG therefore stay incremental: a row join over a
   per-plug MAX computed in DuckDB re-probes only the plugs whose MAX changed, which is what
   the cost model's ``lambda_out`` of the group's top operator assumes.

The MIG keeps every input as Arrow data on the Python side, so when the engine fails (a query
error, the Spark JVM killed) it restarts the engine, re-ships its inputs and re-runs the
instant; if the engine keeps failing it moves the group to a fallback engine. Each fault is
recorded; the instant's output is produced exactly once, so the result stream stays complete
and duplicate-free. A stop request (SIGINT/SIGTERM) during recovery abandons the instant at
once (``engines.interrupts.StopRequested``): the run ends with the instants before it.
"""

from __future__ import annotations

import time
import warnings
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from engines import interrupts, registry
from engines.arrow_types import arrow_schema
from engines.columnar import ColumnarEngine, EngineFault
from engines.mig.correlated_counts import CorrelatedState, Slide
from engines.mig.kept_aggregates import IncrementalUnavailable, KeptState, state_for
from engines.row.arrow_ops import table_of
from engines.row.base import NO_CHANGE, Delta, RowOperator
from engines.row.conversion import canonical_rows
from engines.row.lowering import GroupInput
from engines.sqlgen.correlated import CorrelatedSQL
from engines.sqlgen.incremental import KeptAggregate
from optimizer.ir.correlated import ScanCount
from optimizer.ir.incremental import ExactStatePrices, worth_it
from optimizer.ir.placement import Group


@dataclass
class _Input:
    """The Python-side copy of one MIG input: Arrow chunks (id, table), oldest first."""

    table_name: str
    schema: pa.Schema  # positional column names c0..c{n-1}
    arrow: bool
    fifo: bool
    chunks: deque[tuple[int, pa.Table]] = field(default_factory=deque)
    bag: dict[tuple[Any, ...], int] = field(default_factory=dict)
    next_id: int = 0
    rows: int = 0
    #: Since the last query: tables that entered and left (for incremental aggregates);
    #: ``whole`` when the change was not "chunks in, chunks out" (the state is rebuilt).
    entered: list[pa.Table] = field(default_factory=list)
    left: list[pa.Table] = field(default_factory=list)
    whole: bool = False

    def forget_changes(self) -> None:
        self.entered, self.left, self.whole = [], [], False

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id


@dataclass
class MigStats:
    """Where a MIG's time goes (seconds) and what it moved."""

    transfer_in_s: float = 0.0
    sql_s: float = 0.0
    transfer_out_s: float = 0.0
    rows_shipped: int = 0
    queries: int = 0
    faults: list[dict[str, Any]] = field(default_factory=list)
    #: (instant, seconds) of every step that ran the query: ship + SQL + hand-back.
    slides: list[tuple[int, float]] = field(default_factory=list)
    #: Per query run: rows in the group's inputs, rows out, and seconds for shipping the
    #: inputs, the SQL and the hand-back (what ``hycq calibrate`` fits cost functions to).
    trace: list[SlideTrace] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SlideTrace:
    instant: int
    rows_in: int
    rows_out: int
    ship_s: float
    sql_s: float
    out_s: float


class MigOp(RowOperator):
    """A migration candidate executed as one SQL query on a columnar engine."""

    kind = "mig"

    def __init__(
        self,
        group: Group,
        sql_for: Callable[[str], str],
        engine: ColumnarEngine,
        inputs: list[GroupInput],
        input_tables: list[str],
        to_arrow: bool,
        fallback: Callable[[], ColumnarEngine] | None = None,
        max_retries: int = 2,
        incremental: tuple[KeptAggregate, ...] = (),
        incremental_sql: Callable[[frozenset[str]], str] | None = None,
        correlated: CorrelatedSQL | None = None,
        correlated_scan: ScanCount | None = None,
    ) -> None:
        # An Arrow result (to an R2S operator) replaces the relation; tuples go out as deltas.
        super().__init__(f"mig[{group.top}]", replace_out=to_arrow)
        self.group = group
        self.sql_for = sql_for
        self.engine = engine
        self.sql = sql_for(engine.dialect)
        self.to_arrow = to_arrow
        self.fallback = fallback
        self.max_retries = max_retries
        self.stats = MigStats()
        self._started = False
        self._previous: Counter[tuple[Any, ...]] = Counter()
        """The last result handed to a row consumer (a bag), to emit differences."""
        self.defer = False
        """While True (a benchmark's warm start), input deltas are folded in but the query is
        not run: the group re-executes over whole relations anyway, so only the last
        instant before measuring matters. The first step after it runs the query."""
        self._pending: list[bool] = [False] * len(inputs)
        self.inputs = [
            _Input(name, _positional(gi.schema), gi.arrow, gi.fifo)
            for gi, name in zip(inputs, input_tables, strict=True)
        ]
        # Aggregates kept incrementally (engines.mig.kept_aggregates): the group's SQL reads them
        # from state tables, maintained before each query from the inputs' changes.
        self.incremental: list[KeptState] = []
        self.incremental_off: str | None = None
        self._last_incremental = False  # whether the last query read incremental states
        #: The group's SQL reading the states of the aggregates named (the others
        #: re-evaluated), per set used so far.
        self.incremental_sql = incremental_sql
        self._sql_reading: dict[frozenset[str], str] = {}
        if incremental and incremental_sql is not None and engine.dialect == "duckdb":
            # the engine's default constants decide, per slide, whether a merge pays
            prices = ExactStatePrices.of(registry.cost_defaults().get(engine.dialect, {}))
            self.incremental = [state_for(spec, prices) for spec in incremental]
        # A top counting join matches per key of a kept aggregate (Q1, Q2): the counts are
        # kept per key from the window's changes (engines.mig.correlated_counts).
        self.correlated = (
            CorrelatedState(correlated, correlated_scan)
            if correlated is not None and self.incremental
            else None
        )
        self._using: frozenset[str] = frozenset()

    # -- input upkeep -----------------------------------------------------------------------

    def _apply(self, inp: _Input, d: Delta) -> bool:
        """Fold one input delta into the Python-side copy; True if the relation changed."""
        if d.empty:
            return False
        if d.chunks is not None:
            have = dict(inp.chunks)
            removed = set(d.chunks.removed)
            for cid in d.chunks.removed:
                gone = have.pop(cid, None)
                if gone is not None:
                    inp.left.append(gone)
            live = set(d.chunks.order)
            for cid, table in d.chunks.added:
                if cid in removed and cid not in live:
                    # entered and left within this delta (a row window given more rows
                    # at one instant than it holds): never part of the input
                    continue
                have[cid] = table = table.rename_columns(inp.schema.names)
                inp.entered.append(table)
            inp.chunks = deque((cid, have[cid]) for cid in d.chunks.order)
            inp.rows = sum(t.num_rows for _, t in inp.chunks)
            return True
        inp.whole = inp.whole or not inp.fifo or d.replace or d.table is not None
        if d.table is not None:  # another MIG's result
            inp.chunks = deque([(inp.new_id(), d.table.rename_columns(inp.schema.names))])
            inp.rows = d.table.num_rows
            return True
        if d.replace:
            inp.chunks = deque([(inp.new_id(), table_of(d.ins, inp.schema))]) if d.ins else deque()
            inp.rows = len(d.ins)
            return True
        if inp.fifo:
            self._apply_fifo(inp, d)
        else:
            self._apply_bag(inp, d)
        return True

    def _apply_fifo(self, inp: _Input, d: Delta) -> None:
        """Window-derived deltas: deletes are the oldest inserted tuples, in order."""
        drop = len(d.dels)
        while drop > 0 and inp.chunks:
            cid, table = inp.chunks[0]
            if table.num_rows <= drop:
                inp.chunks.popleft()
                drop -= table.num_rows
                inp.rows -= table.num_rows
                inp.left.append(table)
            else:
                inp.chunks[0] = (cid, table.slice(drop))
                inp.left.append(table.slice(0, drop))
                inp.rows -= drop
                drop = 0
        if d.ins:
            table = table_of(d.ins, inp.schema)
            inp.chunks.append((inp.new_id(), table))
            inp.entered.append(table)
            inp.rows += len(d.ins)

    def _apply_bag(self, inp: _Input, d: Delta) -> None:
        bag = inp.bag
        for r in d.ins:
            bag[r] = bag.get(r, 0) + 1
        for r in d.dels:
            n = bag[r] - 1
            if n:
                bag[r] = n
            else:
                del bag[r]
        rows = [r for r, n in bag.items() for _ in range(n)]
        inp.chunks = deque([(inp.new_id(), table_of(rows, inp.schema))]) if rows else deque()
        inp.rows = len(rows)

    # -- execution --------------------------------------------------------------------------

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        changed = [self._apply(inp, d) for inp, d in zip(self.inputs, inputs, strict=True)]
        if self.correlated is not None and self.correlated.scanner is not None:
            window = self._input(self.correlated.spec.window_table)
            if not window.whole:
                self.correlated.follow(window.chunks, self.defer)
        if self.defer:
            self._pending = [a or b for a, b in zip(self._pending, changed, strict=True)]
            for state in self.incremental:  # rebuilt from the window when the query runs
                state.invalidate()
            if self.correlated is not None:
                self.correlated.invalidate()
            for inp in self.inputs:
                inp.forget_changes()
            return NO_CHANGE
        changed = [a or b for a, b in zip(self._pending, changed, strict=True)]
        self._pending = [False] * len(changed)
        if self._started and not any(changed):
            return NO_CHANGE
        first = not self._started
        self._started = True
        start = time.perf_counter()
        before = (self.stats.transfer_in_s, self.stats.sql_s)
        result = self._run(instant, [c or first for c in changed])
        rows_in = sum(i.rows for i in self.inputs)
        if self.to_arrow:
            self._trace(instant, rows_in, result.num_rows, before, 0.0)
            self.stats.slides.append((instant, time.perf_counter() - start))
            return Delta(table=result)
        t0 = time.perf_counter()
        current = Counter(canonical_rows(result))
        ins = list((current - self._previous).elements())
        dels = list((self._previous - current).elements())
        self._previous = current
        out_s = time.perf_counter() - t0
        self.stats.transfer_out_s += out_s
        self._trace(instant, rows_in, result.num_rows, before, out_s)
        self.stats.slides.append((instant, time.perf_counter() - start))
        return Delta(ins, dels) if ins or dels else NO_CHANGE

    def _trace(
        self, instant: int, rows_in: int, rows_out: int, before: tuple[float, float], out_s: float
    ) -> None:
        s = self.stats
        if self._last_incremental:  # the trace fits re-evaluation costs (hycq calibrate)
            return
        s.trace.append(
            SlideTrace(
                instant, rows_in, rows_out, s.transfer_in_s - before[0], s.sql_s - before[1], out_s
            )
        )

    def _ship(self, which: list[bool]) -> None:
        t0 = time.perf_counter()
        for inp, ship in zip(self.inputs, which, strict=True):
            if ship:
                self.engine.set_input(inp.table_name, list(inp.chunks), inp.schema)
                self.stats.rows_shipped += inp.rows
        self.stats.transfer_in_s += time.perf_counter() - t0

    def _worth_it(self) -> bool:
        """Whether keeping the aggregates incrementally beats re-evaluating them this slide.

        A merge costs three small queries (a check, the merge, the group's SQL reading the
        state) plus the changed rows; re-evaluation costs the whole window. So the windows
        must hold enough rows, and several times what changed (short or tumbling windows
        change wholesale): ``optimizer.ir.incremental.worth_it``."""
        by_table = {inp.table_name: inp for inp in self.inputs}
        inputs = [by_table[t] for t in {st.spec.input_table for st in self.incremental}]
        rows = sum(i.rows for i in inputs)
        changed = sum(t.num_rows for i in inputs for t in (*i.entered, *i.left))
        return worth_it(rows, changed)

    def _maintain(self) -> str:
        """Bring the incremental aggregates' states up to this slide (engines.mig.kept_aggregates);
        the SQL to run: the group's SQL over the states, or the plain one."""
        if not self._worth_it():
            for state in self.incremental:
                state.invalidate()
            self._last_incremental = False
            return self.sql
        self._last_incremental = True
        by_table = {inp.table_name: inp for inp in self.inputs}
        try:
            for state in self.incremental:
                t0 = time.perf_counter()
                inp = by_table[state.spec.input_table]
                state.apply(self.engine, inp.chunks, inp.entered, inp.left, inp.whole, inp.schema)
                state.stats.seconds += time.perf_counter() - t0
        except IncrementalUnavailable as why:
            self._plain(str(why))
            self._last_incremental = False
            return self.sql
        slow = [st for st in self.incremental if st.gave_up]
        if slow:  # pane partials that do not pay over a full window: stop keeping them
            names = ", ".join(st.spec.op_id for st in slow)
            self.incremental_off = (
                f"{names}: the pane partials do not pay (a window under 1.5 M rows, or "
                "partials holding more than a quarter of its rows): re-aggregating is cheaper"
            )
            self.incremental = [st for st in self.incremental if not st.gave_up]
        # this slide: the states that pay are read, the other aggregates re-evaluated
        using = frozenset(st.spec.op_id for st in self.incremental if st.ready and st.pays)
        self._using = using
        if not using:
            self._last_incremental = False
            return self.sql
        sql = self._sql_reading.get(using)
        if sql is None:
            assert self.incremental_sql is not None
            sql = self._sql_reading[using] = self.incremental_sql(using)
        return sql

    def _plain(self, why: str) -> None:
        """Give every aggregate back to re-evaluation over the window, for the rest of the run."""
        self.incremental_off = why
        self.incremental = []
        self.correlated = None

    def _query(self, sql: str) -> pa.Table:
        """Run the group's statement, through the correlated count when the slide allows."""
        c = self.correlated
        if c is None:
            return self.engine.query(sql)
        inner = c.spec.shape.inner
        state = next((st for st in self.incremental if st.spec.op_id == inner), None)
        window = self._input(c.spec.window_table)
        if (
            not self._last_incremental
            or inner not in self._using
            or state is None
            or state.table is None
            or window.whole
        ):
            c.invalidate()  # the chain breaks: the next kept slide starts a new one
            return self.engine.query(sql)
        slide = Slide(state.table, window.chunks, window.entered, window.left, window.schema)
        return c.query(self.engine, sql, slide)

    @property
    def adapting(self) -> bool:
        """Whether the MIG is still timing its ways of running a slide (a correlated count's
        paths): its slides are not the steady state yet (``hycq bench`` waits)."""
        return self.correlated is not None and self.correlated.adapting

    def _input(self, table: str) -> _Input:
        return next(i for i in self.inputs if i.table_name == table)

    def _run(self, instant: int, which: list[bool]) -> pa.Table:
        attempt = 0
        while True:
            try:
                self._ship(which)
                t0 = time.perf_counter()
                self._last_incremental = False
                sql = self._maintain() if self.incremental else self.sql
                result = self._query(sql)
                self.stats.sql_s += time.perf_counter() - t0
                self.stats.queries += 1
                for inp in self.inputs:
                    inp.forget_changes()
                return result
            except EngineFault as err:
                interrupts.reraise_if_interrupted()  # a signal cut the call short: no fault
                for state in self.incremental:  # a half-applied slide: rebuild on the retry
                    state.invalidate()
                if self.correlated is not None:
                    self.correlated.invalidate()
                attempt += 1
                self.stats.faults.append(
                    {"instant": instant, "engine": self.engine.name, "error": str(err)[:500]}
                )
                which = [True] * len(self.inputs)  # the new engine holds nothing yet
                # A run asked to stop does not wait for a restart (engines.interrupts).
                interrupts.check_stop()
                if attempt <= self.max_retries:
                    warnings.warn(
                        f"{self.op_id}: {self.engine.name} failed at instant {instant} "
                        f"({str(err).splitlines()[0][:200]}); restarting it and replaying "
                        "the instant from the retained Arrow inputs",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                    try:
                        self.engine.restart()
                    except EngineFault as again:  # it did not come back: one more attempt
                        interrupts.reraise_if_interrupted()
                        self.stats.faults.append(
                            {"instant": instant, "engine": self.engine.name,
                             "error": f"restart failed: {again}"[:500]}
                        )  # fmt: skip
                    continue
                if self.fallback is None:
                    raise
                old = self.engine.name
                self.engine = self.fallback()
                self.sql = self.sql_for(self.engine.dialect)
                if self.incremental:  # state tables are DuckDB's
                    self.incremental_off = f"the group moved to {self.engine.name}"
                    self.incremental = []
                    self.correlated = None
                self.fallback = None
                warnings.warn(
                    f"{self.op_id}: {old} keeps failing; moved the group to {self.engine.name}",
                    RuntimeWarning,
                    stacklevel=2,
                )
                attempt = 0

    # -- state ------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            "engine": self.engine.name,
            "operators": list(self.group.operators),
            "inputs": {
                i.table_name: {"tuples": i.rows, "chunks": len(i.chunks)} for i in self.inputs
            },
            "queries": self.stats.queries,
            "faults": len(self.stats.faults),
        }

    def snapshot(self) -> dict[str, Any]:
        return {
            "inputs": [
                {"chunks": list(i.chunks), "bag": dict(i.bag), "next_id": i.next_id, "rows": i.rows}
                for i in self.inputs
            ],
            "started": self._started,
            "pending": list(self._pending),
            "previous": dict(self._previous),
        }

    def restore(self, snap: dict[str, Any]) -> None:
        for inp, s in zip(self.inputs, snap["inputs"], strict=True):
            inp.chunks = deque(s["chunks"])
            inp.bag = dict(s["bag"])
            inp.next_id = s["next_id"]
            inp.rows = s["rows"]
            inp.forget_changes()
        self._started = snap["started"]
        self._pending = list(snap.get("pending", [False] * len(self.inputs)))
        self._previous = Counter(snap.get("previous", {}))
        for state in self.incremental:
            state.invalidate()
        if self.correlated is not None:
            self.correlated.invalidate()
        self._ship([True] * len(self.inputs))

    def close(self) -> None:
        """Release the group's inputs in its engine (the engine itself is shared)."""
        for inp in self.inputs:
            self.engine.drop_input(inp.table_name)
        if self.correlated is not None:
            for table in self.correlated.spec.tables():
                self.engine.drop_input(table)

    def mig_metrics(self) -> dict[str, Any]:
        s = self.stats
        times = sorted(t for _, t in s.slides)
        pct = (lambda q: 1e3 * times[min(len(times) - 1, int(q * len(times)))]) if times else None
        return {
            "slide_ms": {"p50": pct(0.5), "p99": pct(0.99), "max": 1e3 * times[-1]}
            if pct is not None
            else None,
            "engine": self.engine.name,
            "operators": list(self.group.operators),
            "transfer_in_s": s.transfer_in_s,
            "sql_s": s.sql_s,
            "transfer_out_s": s.transfer_out_s,
            "rows_shipped": s.rows_shipped,
            "queries": s.queries,
            "faults": s.faults,
            "incremental": {
                st.spec.op_id: {
                    "builds": st.stats.builds,
                    "merges": st.stats.merges,
                    "rows_merged": st.stats.rows_merged,
                    "seconds": st.stats.seconds,
                    "rested": st.stats.rested,
                }
                for st in self.incremental
            },
            "incremental_off": self.incremental_off,
            "correlated": None
            if self.correlated is None
            else {
                "top": self.correlated.spec.shape.top,
                "kept": self.correlated.stats.kept,
                "plain": self.correlated.stats.plain,
                "keys": self.correlated.stats.keys,
                "recounted": self.correlated.stats.recounted,
                "scan": self.correlated.stats.scan,
                "scan_off": None
                if self.correlated.scanner is None
                else self.correlated.scanner.off or False,
                "path_ms": {k: 1e3 * v for k, v in sorted(self.correlated.stats.seconds.items())},
            },
            # per query run: [instant, rows in, SQL seconds] (``hycq calibrate --from``)
            "trace": [[t.instant, t.rows_in, t.sql_s] for t in _spread(s.trace, TRACE_LIMIT)],
        }


#: At most this many slides of a MIG's trace go into the run's metrics (evenly spread).
TRACE_LIMIT = 2000


def _spread(items: list[SlideTrace], limit: int) -> list[SlideTrace]:
    if len(items) <= limit:
        return items
    step = len(items) / limit
    return [items[int(i * step)] for i in range(limit)]


def _positional(schema: Any) -> pa.Schema:
    """The Arrow schema of an IR schema with positional column names c0..c{n-1}."""
    base = arrow_schema(schema)
    return pa.schema([pa.field(f"c{i}", f.type) for i, f in enumerate(base)])

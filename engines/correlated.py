"""The runtime half of a correlated count kept per key in a DuckDB MIG (issue 20).

``optimizer.ir.correlated`` says which groups qualify (Q1, Q2: a window joined with its own
per-key aggregate, the matches counted per key) and ``engines.sqlgen.correlated`` writes the
statements. At each slide, once the inner aggregate's state is up to date, this module

1. compares the state with the previous slide's: a key whose row changed (or is new) is
   *changed*, every other key *same*;
2. counts the matches of the rows that entered and left the left window against the *same*
   keys, and recounts the *changed* keys over the whole window;
3. adds the deltas to the last result's rows of the *same* keys and appends the recounts.

The last result and state are kept as Arrow tables on the Python side. Anything that breaks
the chain (a warm start folding slides, an engine restart, a slide where the inner aggregate
was re-evaluated, a window whose change was not chunks in and out) makes the next slide run
the group's plain statement, which starts a new chain. When more than ``RECOUNT_SHARE`` of
the keys changed (an AVG moves for every touched plug), the plain statement runs instead.

Which path is cheaper depends on the window's size against the fixed cost of the extra
query and the joins of the deltas (``optimizer.ir.correlated.CorrelatedPrices``, which the
cost model uses). The runtime does not trust that estimate: it times both paths (a moving
average of each one's seconds per slide), takes the faster, and tries the other again every
``PROBE_EVERY`` slides. Either path gives the same rows; only the time differs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from engines.columnar import ColumnarEngine
from engines.sqlgen.correlated import CorrelatedSQL, NotCorrelated
from optimizer.ir.correlated import RECOUNT_SHARE

#: Every this many slides the path not taken runs once, to follow a change in their costs.
PROBE_EVERY = 50
#: Weight of the newest slide in each path's moving average of seconds.
ALPHA = 0.3


@dataclass
class CorrelatedStats:
    """What keeping the counts did: slides kept, plain runs, keys recounted, seconds."""

    kept: int = 0
    plain: int = 0
    keys: int = 0
    recounted: int = 0
    kept_s: float | None = None
    """Moving average of a kept slide's seconds (None: not timed yet)."""
    plain_s: float | None = None
    """Moving average of a plain slide's seconds."""


class CorrelatedState:
    """One MIG's correlated count (module docstring)."""

    def __init__(self, spec: CorrelatedSQL) -> None:
        self.spec = spec
        self.result: pa.Table | None = None
        self.previous: pa.Table | None = None
        self.stats = CorrelatedStats()
        self._variants: dict[str, tuple[str, str, str] | None] = {}
        self._since_probe = 0

    def invalidate(self) -> None:
        self.result = self.previous = None

    def variants(self, sql: str) -> tuple[str, str, str] | None:
        if sql not in self._variants:
            try:
                self._variants[sql] = self.spec.variants(sql)
            except NotCorrelated:
                self._variants[sql] = None
        return self._variants[sql]

    def query(
        self,
        engine: ColumnarEngine,
        sql: str,
        state: pa.Table,
        entered: list[pa.Table],
        left: list[pa.Table],
        window_schema: pa.Schema,
    ) -> pa.Table:
        """The group's result at this slide; ``sql`` is the group's statement reading the
        inner aggregate's ``state`` (already registered), ``entered``/``left`` the left
        window's rows since the last slide."""
        spec = self.spec
        variants = self.variants(sql)
        if variants is None or self.result is None or self.previous is None:
            return self._plain(engine, sql, state)
        if not self._try_kept():
            return self._plain(engine, sql, state)
        start = time.perf_counter()
        _register(engine, spec.previous_table, self.previous)
        doubles = {f.name for f in state.schema if pa.types.is_floating(f.type)}
        marked = engine.query(spec.changes_sql(state.schema.names, doubles))
        flag = marked.column("_changed")
        rows = marked.drop_columns(["_changed"])
        changed = rows.filter(flag)
        self.stats.keys += rows.num_rows
        if changed.num_rows > RECOUNT_SHARE * max(1, rows.num_rows):
            marking = time.perf_counter() - start
            result = self._plain(engine, sql, state)
            # what trying cost: the marking and the plain statement after it
            assert self.stats.plain_s is not None
            self.stats.kept_s = _average(self.stats.kept_s, marking + self.stats.plain_s)
            return result
        same = rows.filter(pc.invert(flag))
        _register(engine, spec.same_table, same)
        _register(engine, spec.changed_table, changed)
        _register(engine, spec.entered_table, _concat(entered, window_schema))
        _register(engine, spec.left_table, _concat(left, window_schema))
        _register(engine, spec.result_table, self.result)
        merged = engine.query(spec.merge_sql(self.result.schema.names, variants))
        result = merged.cast(self.result.schema)
        self.result, self.previous = result, state
        self.stats.kept += 1
        self.stats.recounted += changed.num_rows
        self.stats.kept_s = _average(self.stats.kept_s, time.perf_counter() - start)
        return result

    def _try_kept(self) -> bool:
        """Whether this slide takes the kept path: untimed, faster on average, or due for a
        probe of the slower one."""
        kept, plain = self.stats.kept_s, self.stats.plain_s
        if kept is None or plain is None:
            return True
        self._since_probe += 1
        if self._since_probe >= PROBE_EVERY:
            self._since_probe = 0
            return plain <= kept  # the path not taken
        return kept < plain

    def _plain(self, engine: ColumnarEngine, sql: str, state: pa.Table) -> pa.Table:
        start = time.perf_counter()
        result = engine.query(sql)
        self.result, self.previous = result, state
        self.stats.plain += 1
        self.stats.plain_s = _average(self.stats.plain_s, time.perf_counter() - start)
        return result


def _average(mean: float | None, x: float) -> float:
    return x if mean is None else (1.0 - ALPHA) * mean + ALPHA * x


def _register(engine: ColumnarEngine, name: str, table: pa.Table) -> None:
    engine.set_input(name, [(0, table)], table.schema)


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

"""The runtime half of a correlated count kept per key in a DuckDB MIG (issue 20).

``optimizer.ir.correlated`` says which groups qualify (Q1, Q2: a window joined with its own
per-key aggregate, the matches counted per key) and ``engines.sqlgen.correlated`` writes the
statements. At each slide, once the inner aggregate's state is up to date, the *kept* path

1. compares the state with the previous slide's: a key whose row changed (or is new) is
   *changed*, every other key *same*;
2. counts the matches of the rows that entered and left the left window against the *same*
   keys, and recounts the *changed* keys over the whole window;
3. adds the deltas to the last result's rows of the *same* keys and appends the recounts.

The last result and state are kept as Arrow tables on the Python side. Anything that breaks
the chain (a warm start folding slides, an engine restart, a slide where the inner aggregate
was re-evaluated, a window whose change was not chunks in and out) makes the next slide run
the group's *plain* statement, which starts a new chain. When more than ``RECOUNT_SHARE`` of
the keys changed (an AVG moves for every touched plug), the cheaper of the other paths runs.

A third path, the *scan*, where the group's shape allows it
(``optimizer.ir.correlated.ScanCount``), recounts every key at every slide in Arrow without a
join (``engines.mig.count_scan``): the answer when most keys change at every slide, as a
per-plug AVG's do. It needs no chain, and it starts one for the kept path.

Which path is cheapest depends on the window's size against the fixed cost of the extra
query and the joins of the deltas (``optimizer.ir.correlated.CorrelatedPrices``, which the
cost model uses). The runtime does not trust that estimate: it times every path it may
take (the least of its first ``WARM`` slides, then a moving average), takes the fastest,
and tries the others again, in turn, every ``PROBE_EVERY`` slides. Every path gives the
same rows; only the time differs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from engines.columnar import ColumnarEngine
from engines.mig.count_scan import ScanCounter, ScanUnavailable
from engines.sqlgen.correlated import CorrelatedSQL, NotCorrelated
from optimizer.ir.correlated import RECOUNT_SHARE, ScanCount

#: Every this many slides a path not taken runs once, to follow a change in their costs.
PROBE_EVERY = 50
#: Weight of the newest slide in each path's moving average of seconds.
ALPHA = 0.3
#: Slides each path runs before the fastest is chosen (its least seconds count).
WARM = 4
#: The window's chunks are encoded for the scan as they arrive while its average is within
#: this factor of the fastest path's.
FOLLOW = 1.5
#: The paths, in the order an untimed one is tried.
PATHS = ("plain", "kept", "scan")


@dataclass(frozen=True)
class Slide:
    """What one slide hands the correlated count: the inner aggregate's ``state`` (already
    registered with the engine), the left window's live ``chunks`` (id, rows), the rows
    that ``entered`` and ``left`` it since the last slide, and its schema."""

    state: pa.Table
    chunks: Iterable[tuple[int, pa.Table]]
    entered: list[pa.Table]
    left: list[pa.Table]
    schema: pa.Schema


@dataclass
class CorrelatedStats:
    """What keeping the counts did: slides per path, keys recounted, seconds per path."""

    kept: int = 0
    plain: int = 0
    scan: int = 0
    keys: int = 0
    recounted: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    """Per path, the moving average of a slide's seconds (absent: not timed yet)."""


class CorrelatedState:
    """One MIG's correlated count (module docstring)."""

    def __init__(self, spec: CorrelatedSQL, scan: ScanCount | None = None) -> None:
        self.spec = spec
        self.scanner = ScanCounter(scan) if scan is not None else None
        self.result: pa.Table | None = None
        self.previous: pa.Table | None = None
        self.schema: pa.Schema | None = None
        """The plain statement's result schema (the scan's results are cast to it)."""
        self.stats = CorrelatedStats()
        self._variants: dict[str, tuple[str, str, str] | None] = {}
        self._since_probe = 0
        self._probes = 0
        self._again: str | None = None
        self._samples: dict[str, int] = {}
        self._paths: list[str] = []  # the last slide's

    def invalidate(self) -> None:
        self.result = self.previous = None

    @property
    def adapting(self) -> bool:
        """Whether the last slide's paths are still being timed (``WARM`` slides each)."""
        return self._again is not None or any(self._samples.get(p, 0) < WARM for p in self._paths)

    def follow(self, window: Iterable[tuple[int, pa.Table]], warming: bool) -> None:
        """Encode the window's chunks for the scan as they arrive (each once), so the scan
        never meets a backlog: during a warm start, and while the last slide could scan
        and the scan may be chosen (untimed, or within ``FOLLOW`` of the fastest path).
        Called at every step of the MIG."""
        s = self.scanner
        if s is None or s.off is not None or not (warming or "scan" in self._paths):
            return
        times = self.stats.seconds
        if "scan" in times and times["scan"] > FOLLOW * min(times.values()):
            return
        with contextlib.suppress(ScanUnavailable):  # ``s.off`` says why; SQL goes on
            s.follow(window)

    def variants(self, sql: str) -> tuple[str, str, str] | None:
        if sql not in self._variants:
            try:
                self._variants[sql] = self.spec.variants(sql)
            except NotCorrelated:
                self._variants[sql] = None
        return self._variants[sql]

    def paths(self, sql: str) -> list[str]:
        """The paths this slide may take."""
        out = ["plain"]
        if self.variants(sql) is not None and self.result is not None:
            out.append("kept")
        if self.scanner is not None and self.scanner.off is None and self.schema is not None:
            out.append("scan")
        return out

    def query(self, engine: ColumnarEngine, sql: str, slide: Slide) -> pa.Table:
        """The group's result at this slide; ``sql`` is the group's statement reading the
        inner aggregate's state."""
        self._paths = self.paths(sql)
        path = self._choose(self._paths)
        if path == "scan":
            return self._scan(engine, sql, slide)
        if path == "kept":
            return self._kept(engine, sql, slide)
        return self._plain(engine, sql, slide.state)

    def _choose(self, paths: list[str]) -> str:
        """The path of this slide: an untimed one, the fastest on average, or (every
        ``PROBE_EVERY`` slides) one of the others in turn."""
        again, self._again = self._again, None
        if again in paths:
            return again
        times = self.stats.seconds
        untimed = [p for p in paths if self._samples.get(p, 0) < WARM]
        if untimed:
            return untimed[0]
        best = min(paths, key=lambda p: times[p])
        self._since_probe += 1
        others = [p for p in paths if p != best]
        if others and self._since_probe >= PROBE_EVERY:
            self._since_probe = 0
            self._probes += 1
            return others[self._probes % len(others)]
        return best

    def _time(self, path: str, seconds: float) -> None:
        """Fold one slide's seconds into ``path``'s average: the least of its first
        ``WARM`` slides (the first ones after a path starts pay for allocations the next
        ones reuse), then a moving average."""
        times, samples = self.stats.seconds, self._samples
        samples[path] = samples.get(path, 0) + 1
        if samples[path] <= WARM:
            times[path] = min(times.get(path, seconds), seconds)
        else:
            times[path] = (1 - ALPHA) * times[path] + ALPHA * seconds

    def _kept(self, engine: ColumnarEngine, sql: str, slide: Slide) -> pa.Table:
        state = slide.state
        spec = self.spec
        variants = self.variants(sql)
        assert variants is not None and self.result is not None and self.previous is not None
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
            # the cheaper of the others; what trying cost: the marking and that path
            times = self.stats.seconds
            others = [p for p in self.paths(sql) if p != "kept"]
            other = min(others, key=lambda p: times.get(p, 0.0))  # an untimed one first
            if other == "scan":
                result = self._scan(engine, sql, slide)
            else:
                result = self._plain(engine, sql, state)
            self._time("kept", marking + times[other if other in times else "plain"])
            return result
        same = rows.filter(pc.invert(flag))
        _register(engine, spec.same_table, same)
        _register(engine, spec.changed_table, changed)
        _register(engine, spec.entered_table, _concat(slide.entered, slide.schema))
        _register(engine, spec.left_table, _concat(slide.left, slide.schema))
        _register(engine, spec.result_table, self.result)
        merged = engine.query(spec.merge_sql(self.result.schema.names, variants))
        result = merged.cast(self.result.schema)
        self.result, self.previous = result, state
        self.stats.kept += 1
        self.stats.recounted += changed.num_rows
        self._time("kept", time.perf_counter() - start)
        return result

    def _scan(self, engine: ColumnarEngine, sql: str, slide: Slide) -> pa.Table:
        """The scan path (``engines.mig.count_scan``)."""
        assert self.scanner is not None and self.schema is not None
        start = time.perf_counter()
        try:
            result = self.scanner.count(slide.state, slide.chunks, self.schema)
        except ScanUnavailable:  # for the rest of the run (``scanner.off`` says why)
            return self._plain(engine, sql, slide.state)
        self.result, self.previous = result, slide.state
        self.stats.scan += 1
        # A slide that encoded chunks which entered before it (the whole window at the
        # path's first slide, or the backlog after the others ran for a while) is no
        # measure of the next: not timed, and the scan runs again at the next slide.
        if self.scanner.encoded > len(slide.entered):
            self._again = "scan"
        else:
            self._time("scan", time.perf_counter() - start)
        return result

    def _plain(self, engine: ColumnarEngine, sql: str, state: pa.Table) -> pa.Table:
        start = time.perf_counter()
        result = engine.query(sql)
        self.result, self.previous, self.schema = result, state, result.schema
        self.stats.plain += 1
        self._time("plain", time.perf_counter() - start)
        return result


def _register(engine: ColumnarEngine, name: str, table: pa.Table) -> None:
    engine.set_input(name, [(0, table)], table.schema)


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

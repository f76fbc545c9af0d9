"""The run-time statistics monitor: what the running query's input and operators do now.

The migration driver feeds it two kinds of events:

* ``on_input(stream, n_rows, lo_ts, hi_ts)`` for every batch the executor accepted;
* ``on_instant(T, executor)`` after instants fired (after every one, or only now and then:
  both work, see "Attribution"). ``executor`` is anything with ``operator_metrics() ->
  {op_id: {"kind", "tuples_in", "tuples_out", "busy_s", ...}}`` (a ``RowExecutor``), or a
  zero-argument callable returning that dict (use ``lambda: assembly.operator_metrics(ex)``
  to include the MIG operators' ``queries``, which give their slide times). When the
  executor also has ``operator_state()`` (a ``RowExecutor``), join stores' key counts and
  aggregates' group counts are read from it, once per event-second.

From these it derives, per event-second of the query's time base, smoothed figures:

* arrival rate per stream (tuples per event-second);
* per operator: tuples in and out, busy seconds and ``u`` (busy seconds per event-second:
  the measured utilisation of the cost model, Eq. 6.4);
* selectivity of every Select (tuples out / in; a select pushed into its window counts the
  arrivals it filters) and of every row join: output tuples / probed pairs, where a join's
  probed pairs in an interval are ``dL * |R| + |L| * dR`` (its input deltas times the other
  side's relation, Eq. 6.2 read backwards; ``|L|``, ``|R|`` from the join's stores). Joins
  whose input is replaced at every instant (tumbling and NOW windows, MIG outputs) are not
  measured: their output is the whole join, not a delta;
* distinct keys, where they are free: a hash join's key count per side and an aggregate's
  group count (no sketch over the data: nothing per tuple is added to the hot path);
* a MIG's slide time: its busy seconds per query it ran.

Smoothing: an exponentially weighted moving average per event-second with a half-life of
``half_life_s`` event-seconds (default :data:`HALF_LIFE_S` = 5: a step in the rate is
half-way in after 5 s and 90% in after 17 s, while Poisson noise at 1,000 tuples/s
averages out to about +-1.5%). The first measured second seeds the average (no start-up bias
towards 0). Ratios (selectivities) are ratios of smoothed sums, not smoothed ratios, so a
second with few tuples weighs little.

Attribution: an event-second closes when an instant of a later second is reported. Arrivals
are counted in the seconds their timestamps cover (spread evenly over ``lo_ts..hi_ts``);
operator counters are read at each ``on_instant`` and the change since the previous
closing read is spread evenly over the seconds being closed (with per-instant calls that is
exactly the work of that second's instants, give or take the first instant of the next
one). An event-time gap longer than :data:`SPREAD_LIMIT` seconds is skipped in one step:
the averages decay as over that many empty seconds, and the timeline gets one entry with
``gap_seconds``.

After a migration the driver should call ``set_plan(new_plan)``: operator figures restart
(op ids of another plan mean other operators), stream rates carry on. A change of executor
is also noticed by itself (operator ids change or counters go backwards).

``per_second()`` is the timeline for the run's metrics (JSON-safe); ``statistics()`` is
what the optimizer needs (:class:`optimizer.ir.measured.MeasuredStatistics`).

Example:
    >>> from pathlib import Path
    >>> from optimizer.sql import plan_query
    >>> from optimizer.sql.catalog import load_catalog
    >>> cat = load_catalog(Path(__file__).parents[2] / "queries/keyed/catalog.toml")
    >>> plan = plan_query("SELECT k FROM r [RANGE 2 SECONDS] WHERE v > 0.5", cat)
    >>> m = RuntimeMonitor(plan, tps=1)
    >>> for s in range(4):
    ...     m.on_input("r", 100, s, s)
    ...     m.on_instant(s, lambda s=s: {"select1": {"kind": "select", "tuples_in": 100 * (s + 1),
    ...                                             "tuples_out": 25 * (s + 1), "busy_s": 0.0}})
    >>> st = m.statistics()
    >>> st.rates, st.selectivities
    ({'r': 100.0}, {'v > 0.5': 0.25})
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from optimizer.ir.expr import ColumnRef, conjuncts
from optimizer.ir.measured import MeasuredStatistics
from optimizer.ir.plan import Aggregate, Join, LogicalPlan, Select, Source, Window, WindowKind

#: Half-life of the smoothing, in event-seconds.
HALF_LIFE_S = 5.0
#: Seconds a batch's arrivals or a reading's operator work are spread over at most; a longer
#: event-time gap is skipped in one step.
SPREAD_LIMIT = 3600
#: Timeline entries kept (the oldest are dropped, and counted, beyond this).
TIMELINE_LIMIT = 86_400
#: A selectivity needs this many smoothed input tuples (or probed pairs) per second.
MIN_DENOMINATOR = 1.0

Metrics = Mapping[str, Mapping[str, Any]]
MetricsSource = Any  # an object with operator_metrics(), or a callable returning them


class Ewma:
    """An exponentially weighted moving average over event-seconds (seeded by the first)."""

    __slots__ = ("alpha", "value")

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha
        self.value: float | None = None

    def update(self, x: float) -> None:
        self.value = x if self.value is None else self.value + self.alpha * (x - self.value)

    def decay(self, seconds: int) -> None:
        """As ``seconds`` updates with 0."""
        if self.value is not None and seconds > 0:
            self.value *= (1.0 - self.alpha) ** seconds


@dataclass
class _OpFigures:
    """Smoothed per-second figures of one operator."""

    kind: str
    tuples_in: Ewma
    tuples_out: Ewma
    busy_s: Ewma
    pairs: Ewma  # a join's probed pairs per second
    slide_s: Ewma  # a MIG's busy seconds per query
    keys: dict[str, Ewma] = field(default_factory=dict)  # "left"/"right"/"groups"


#: :meth:`RuntimeMonitor.windows_steady`: how far the smoothed rate may be from the average
#: over the largest window's span (relative) for the windows to count as steady.
STEADY_TOLERANCE = 0.25


class RuntimeMonitor:
    """Smoothed run-time statistics of one running query (see the module docstring).

    ``plan`` is the running plan (its operators' kinds, inputs and predicates); ``tps`` the
    query's time base (timestamp ticks per second).
    """

    def __init__(
        self,
        plan: LogicalPlan,
        tps: int,
        half_life_s: float = HALF_LIFE_S,
        timeline_limit: int = TIMELINE_LIMIT,
    ) -> None:
        if tps <= 0 or half_life_s <= 0:
            raise ValueError("tps and half_life_s must be positive")
        self.tps = int(tps)
        self.half_life_s = float(half_life_s)
        self.alpha = 1.0 - 0.5 ** (1.0 / self.half_life_s)
        self.streams = sorted({op.stream for op in plan.operators() if isinstance(op, Source)})
        self.rates = {s: Ewma(self.alpha) for s in self.streams}
        self._arrivals: dict[int, dict[str, float]] = {}
        self._open: int | None = None  # first event-second not yet closed
        self._timeline: deque[dict[str, Any]] = deque(maxlen=timeline_limit)
        self.timeline_dropped = 0
        self.seconds = 0  # event-seconds closed
        self._recent: dict[str, deque[float]] = {}  # arrivals per second over a window span
        self.engine_busy_s = 0.0
        """Wall seconds the engine spent on the query so far (the driver adds them): its
        operators, and everything between them (clock, deltas, output) that they do not
        time. Its increase per event-second is the load of the one engine thread."""
        self._engine_base = 0.0
        self.set_plan(plan, counters_from_zero=True)

    # -- feeding ----------------------------------------------------------------------------

    def set_plan(self, plan: LogicalPlan, counters_from_zero: bool = False) -> None:
        """The query now runs ``plan`` (after a migration): operator figures restart.

        The executor's counters already hold the migration's work (a replay, a parallel
        track): the first reading is only the base the next ones are measured from, unless
        ``counters_from_zero`` (a fresh executor that has done nothing yet)."""
        self.plan = plan
        self.ops: dict[str, _OpFigures] = {}
        self._base: dict[str, tuple[float, ...]] | None = None
        self._zero_base = counters_from_zero
        self.plan_seconds = 0
        """Event-seconds closed since the running plan was set."""
        self._sizes: dict[str, tuple[float, float]] = {}  # join -> (|L|, |R|) last read
        self._plan_info = _PlanInfo(plan)
        self._kinds: dict[str, str] = {}  # op id -> the kind the executor reports
        spans = _window_spans(plan, self.tps)
        for stream in self.streams:
            span = max(1, spans.get(stream, 1))
            old = self._recent.get(stream, deque())
            self._recent[stream] = deque(old, maxlen=span)
        self.engine_u = Ewma(self.alpha)

    def on_input(self, stream: str, n_rows: int, lo_ts: int, hi_ts: int) -> None:
        """``n_rows`` tuples of ``stream`` with timestamps in ``lo_ts..hi_ts`` were accepted."""
        if n_rows <= 0:
            return
        lo, hi = int(lo_ts) // self.tps, int(hi_ts) // self.tps
        if hi < lo:
            lo, hi = hi, lo
        if self._open is not None:  # arrivals for closed seconds count in the open one
            lo, hi = max(lo, self._open), max(hi, self._open)
        if hi - lo >= SPREAD_LIMIT:
            spread = {lo: n_rows / 2, hi: n_rows / 2}
        else:
            share = n_rows / (hi - lo + 1)
            spread = dict.fromkeys(range(lo, hi + 1), share)
        for sec, n in spread.items():
            bucket = self._arrivals.setdefault(sec, {})
            bucket[stream] = bucket.get(stream, 0.0) + n

    def on_instant(self, instant: int, executor: MetricsSource) -> None:
        """Instants up to ``instant`` have fired; ``executor`` reports operator counters."""
        sec = int(instant) // self.tps
        if self._open is None:
            self._open = min([sec, *self._arrivals])
        if sec <= self._open:
            return
        reading, self._kinds = _read(executor)
        states = _states(executor)
        self._close(self._open, sec, reading, states)
        self._open = sec

    # -- closing seconds ----------------------------------------------------------------------

    def _close(
        self,
        first: int,
        end: int,
        reading: dict[str, tuple[float, ...]],
        states: Mapping[str, Mapping[str, Any]],
    ) -> None:
        """Close event-seconds ``first..end-1`` with the operator work since the last read."""
        base = self._base
        fresh = base is None or set(base) != set(reading)
        if not fresh and base is not None:
            fresh = any(a < b for k in reading for a, b in zip(reading[k], base[k], strict=True))
        if fresh and base is not None:
            self.ops = {}  # another executor: its counters are not comparable
            self._sizes = {}
        delta = None
        if base is not None and not fresh:
            delta = {
                k: tuple(a - b for a, b in zip(v, base[k], strict=True)) for k, v in reading.items()
            }
        elif base is None and self._zero_base:
            delta = reading  # counters of a fresh executor start at zero
        self._base = reading
        n = end - first
        gap = 0
        if n > SPREAD_LIMIT:
            # a long event-time gap: decay over it, then one second takes everything
            gap = n - 1
            for stream in self.streams:
                self.rates[stream].decay(gap)
            for f in self.ops.values():
                for e in (f.tuples_in, f.tuples_out, f.busy_s, f.pairs):
                    e.decay(gap)
            seconds = [end - 1]
            arrivals: dict[str, float] = {}
            for sec in [s for s in self._arrivals if s < end]:
                for k, v in self._arrivals.pop(sec).items():
                    arrivals[k] = arrivals.get(k, 0.0) + v
            per_second = [arrivals]
        else:
            seconds = list(range(first, end))
            per_second = [self._arrivals.pop(s, {}) for s in seconds]
        share = 1.0 / len(seconds)
        sizes = self._join_sizes(states)
        for sec, arrivals in zip(seconds, per_second, strict=True):
            entry = self._second(sec, arrivals, delta, share, sizes, states)
            if gap:
                entry["gap_seconds"] = gap
            if len(self._timeline) == self._timeline.maxlen:
                self.timeline_dropped += 1
            self._timeline.append(entry)
            self.seconds += 1
            self.plan_seconds += 1
        self._sizes = sizes
        self._engine_base = self.engine_busy_s

    def _join_sizes(
        self, states: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, tuple[float, float]]:
        out = {}
        for op_id in self._plan_info.joins:
            st = states.get(op_id)
            if st is not None and "left_tuples" in st:
                out[op_id] = (float(st["left_tuples"]), float(st["right_tuples"]))
        return out

    def _second(
        self,
        sec: int,
        arrivals: Mapping[str, float],
        delta: Mapping[str, tuple[float, ...]] | None,
        share: float,
        sizes: Mapping[str, tuple[float, float]],
        states: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        streams = {}
        for stream in self.streams:
            n = arrivals.get(stream, 0.0)
            self.rates[stream].update(n)
            self._recent[stream].append(n)
            streams[stream] = {"rows": n, "rate": self.rates[stream].value}
        busy = self.engine_busy_s - self._engine_base
        if delta is not None or self._zero_base:
            self.engine_u.update(busy * share)
        ops_engine = {"engine_busy_s": busy * share, "engine_u_smoothed": self.engine_u.value}
        ops: dict[str, Any] = {}
        if delta is not None:
            info = self._plan_info
            for op_id, (t_in, t_out, busy, queries) in delta.items():
                f = self._figures(op_id)
                t_in, t_out, busy, queries = (
                    t_in * share,
                    t_out * share,
                    busy * share,
                    queries * share,
                )
                f.tuples_in.update(t_in)
                f.tuples_out.update(t_out)
                f.busy_s.update(busy)
                row: dict[str, Any] = {
                    "kind": f.kind,
                    "tuples_in": t_in,
                    "tuples_out": t_out,
                    "busy_s": busy,
                    "u": busy,  # busy seconds per event-second
                    "u_smoothed": f.busy_s.value,
                }
                if op_id in info.selects:
                    row["selectivity"] = _ratio(f.tuples_out, f.tuples_in)
                if f.kind == "join" and op_id in info.joins and op_id in sizes:
                    pairs = self._pairs(op_id, delta, sizes, share)
                    if pairs is not None:
                        f.pairs.update(pairs)
                        row["selectivity"] = _ratio(f.tuples_out, f.pairs)
                if f.kind == "mig" and queries > 0:
                    f.slide_s.update(busy / queries)
                    row["slide_ms"] = 1e3 * busy / queries
                keys = _keys(states.get(op_id, {}))
                for name, k in keys.items():
                    f.keys.setdefault(name, Ewma(self.alpha)).update(k)
                if keys:
                    row["keys"] = keys
                ops[op_id] = row
        return {"second": sec, "streams": streams, "operators": ops, **ops_engine}

    def _figures(self, op_id: str) -> _OpFigures:
        f = self.ops.get(op_id)
        if f is None:
            a = self.alpha
            kind = self._kinds.get(op_id) or self._plan_info.kinds.get(op_id, "?")
            f = _OpFigures(kind, Ewma(a), Ewma(a), Ewma(a), Ewma(a), Ewma(a))
            self.ops[op_id] = f
        return f

    def _pairs(
        self,
        op_id: str,
        delta: Mapping[str, tuple[float, ...]],
        sizes: Mapping[str, tuple[float, float]],
        share: float,
    ) -> float | None:
        """Pairs a join probed in one second: ``dL * |R| + |L| * dR`` (sizes averaged over
        the interval's two reads)."""
        ports = self._plan_info.ports.get(op_id)
        if ports is None:
            return None
        d = []
        for counted in ports:
            if counted not in delta:
                return None
            if self._kinds.get(counted) == "mig":
                return None  # a MIG hands over its whole relation at every slide
            d.append(delta[counted][1] * share)
        size_l, size_r = sizes[op_id]
        before = self._sizes.get(op_id, (size_l, size_r))
        avg_l, avg_r = (size_l + before[0]) / 2, (size_r + before[1]) / 2
        return d[0] * avg_r + avg_l * d[1]

    # -- reading ------------------------------------------------------------------------------

    def per_second(self) -> list[dict[str, Any]]:
        """The timeline: one entry per closed event-second, oldest first (JSON-safe):
        ``{"second", "streams": {name: {"rows", "rate"}}, "operators": {id: {"kind",
        "tuples_in", "tuples_out", "busy_s", "u", "u_smoothed"[, "selectivity"][, "keys"]
        [, "slide_ms"]}}[, "gap_seconds"]}`` (``rate``, ``u_smoothed`` and ``selectivity``
        smoothed; the rest that second's own figures)."""
        return [_json_safe(e) for e in self._timeline]

    def windows_steady(self, tolerance: float = STEADY_TOLERANCE) -> bool:
        """Whether the windows hold what the arrival rate says they hold (the steady state
        a cost model prices): the query has run for its largest window's span, and over
        that span every stream arrived at its smoothed rate, within ``tolerance``
        (relative). While a window fills, at the start or after a rate step, the measured
        cost of the operators over it is not yet the one the model predicts for the rate."""
        for stream in self.streams:
            recent = self._recent.get(stream)
            if recent is None or recent.maxlen is None or len(recent) < recent.maxlen:
                return False
            rate = self.rates[stream].value or 0.0
            average = sum(recent) / len(recent)
            top = max(rate, average)
            if top > 0 and abs(rate - average) > tolerance * top:
                return False
        return True

    def engine_utilization(self) -> float | None:
        """The engine thread's smoothed busy seconds per event-second (``engine_busy_s``
        as the driver reports it; None before anything was measured)."""
        return self.engine_u.value

    def operator_figures(self) -> dict[str, dict[str, Any]]:
        """Smoothed per-operator figures now: kind, tuples in/out per second, u, and where
        measured selectivity, key counts and MIG slide time (ms)."""
        out = {}
        info = self._plan_info
        for op_id, f in self.ops.items():
            row: dict[str, Any] = {
                "kind": f.kind,
                "tuples_in": f.tuples_in.value,
                "tuples_out": f.tuples_out.value,
                "u": f.busy_s.value,
            }
            if op_id in info.selects:
                row["selectivity"] = _ratio(f.tuples_out, f.tuples_in)
            elif op_id in info.joins and f.pairs.value is not None:
                row["selectivity"] = _ratio(f.tuples_out, f.pairs)
            if f.slide_s.value is not None:
                row["slide_ms"] = 1e3 * f.slide_s.value
            if f.keys:
                row["keys"] = {k: e.value for k, e in f.keys.items()}
            out[op_id] = _json_safe(row)
        return out

    def statistics(self) -> MeasuredStatistics:
        """What the optimizer needs: smoothed rates, selectivities (by predicate text) and
        distinct counts (by stream and columns); empty before the first closed second."""
        if not self.seconds:
            return MeasuredStatistics()
        info = self._plan_info
        rates = {}
        for s, ewma in self.rates.items():
            if ewma.value is None:
                continue
            # A window holds what arrived over its span: right after a rate drop it still
            # holds the higher rate's tuples, and what costs the window's content (a MIG
            # re-running its SQL, replaying it to another plan) costs that. So the rate the
            # optimizer gets is the larger of the smoothed arrivals and the average over
            # the largest window's span (a rise shows in the former at once).
            recent = self._recent[s]
            average = sum(recent) / len(recent) if recent else 0.0
            rates[s] = max(float(ewma.value), average)
        sel: dict[str, float] = {}
        distinct: dict[tuple[str, tuple[str, ...]], float] = {}
        for op_id, f in self.ops.items():
            if op_id in info.selects:
                r = _ratio(f.tuples_out, f.tuples_in)
                if r is not None:
                    sel[info.selects[op_id]] = min(1.0, r)
            if op_id in info.join_text and f.pairs.value is not None:
                r = _ratio(f.tuples_out, f.pairs)
                if r is not None:
                    sel[info.join_text[op_id]] = min(1.0, r)
            for side, key in info.keys.get(op_id, {}).items():
                e = f.keys.get(side)
                if e is not None and e.value is not None and e.value >= 1.0:
                    distinct[key] = max(distinct.get(key, 0.0), float(e.value))
        return MeasuredStatistics(rates, sel, distinct, float(self.seconds))


def _window_spans(plan: LogicalPlan, tps: int) -> dict[str, int]:
    """Stream -> the largest time-based window span over it, in whole event-seconds."""
    out: dict[str, int] = {}
    for op in plan.operators():
        if isinstance(op, Window) and op.window is WindowKind.RANGE and op.size is not None:
            (src,) = plan.inputs(op.id)
            source = plan.op(src)
            if isinstance(source, Source):
                span = -(-int(op.size) // tps)
                out[source.stream] = max(out.get(source.stream, 0), span)
    return out


class _PlanInfo:
    """What the monitor needs to know about the running plan, computed once per plan."""

    def __init__(self, plan: LogicalPlan) -> None:
        self.kinds = {op.id: op.kind for op in plan.operators()}
        self.selects = {
            op.id: op.predicate.display() for op in plan.operators() if isinstance(op, Select)
        }
        self.joins: set[str] = set()
        self.join_text: dict[str, str] = {}  # a join with one conjunct: its display text
        self.ports: dict[str, tuple[str, str]] = {}  # join -> ops whose tuples_out are its deltas
        self.keys: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {}
        for op in plan.operators():
            if isinstance(op, Join):
                self._join(plan, op)
            elif isinstance(op, Aggregate) and op.group_by:
                key = _stream_key(plan, plan.inputs(op.id)[0], _group_cols(op))
                if key is not None:
                    self.keys[op.id] = {"groups": key}

    def _join(self, plan: LogicalPlan, op: Join) -> None:
        left, right = plan.inputs(op.id)
        if _replaces(plan, left) or _replaces(plan, right):
            return  # a join of replaced relations recomputes: its deltas are not probes
        self.joins.add(op.id)
        self.ports[op.id] = (_counted(plan, left), _counted(plan, right))
        if op.condition is not None and len(conjuncts(op.condition)) == 1:
            self.join_text[op.id] = op.condition.display()
        pairs = op.equi_keys()
        if pairs:
            keys = {}
            for side, inp, cols in (
                ("left", left, [lc for lc, _ in pairs]),
                ("right", right, [rc for _, rc in pairs]),
            ):
                key = _stream_key(plan, inp, cols)
                if key is not None:
                    keys[side] = key
            self.keys[op.id] = keys


def _group_cols(op: Aggregate) -> list[int]:
    cols = [g.index for g in op.group_by if isinstance(g, ColumnRef)]
    return cols if len(cols) == len(op.group_by) else []


def _stream_key(
    plan: LogicalPlan, op_id: str, cols: list[int]
) -> tuple[str, tuple[str, ...]] | None:
    """``(stream, sorted names)`` the columns of ``op_id`` carry unchanged from one stream,
    through windows, selects, projects and group keys only (a join's relation holds other
    key counts than its stream's windows, so it is not looked through)."""
    if not cols:
        return None
    streams, names = set(), set()
    for c in cols:
        cur, col = op_id, c
        while True:
            op = plan.op(cur)
            if isinstance(op, Source):
                streams.add(op.stream)
                names.add(op.schema[col].name)
                break
            if isinstance(op, Join):
                return None
            lineage = op.input_column(col)
            if lineage is None:
                return None
            port, col = lineage
            cur = plan.inputs(cur)[port]
    if len(streams) != 1:
        return None
    return streams.pop(), tuple(sorted(names))


def _replaces(plan: LogicalPlan, op_id: str) -> bool:
    """Whether ``op_id``'s relation is replaced at every change (tumbling or NOW window
    below it through selects and projects; an aggregate's deltas are ordinary)."""
    cur = op_id
    while True:
        op = plan.op(cur)
        if isinstance(op, Window):
            return op.tumbling or op.window is WindowKind.NOW
        if op.kind not in ("select", "project"):
            return False
        cur = plan.inputs(cur)[0]


def _counted(plan: LogicalPlan, op_id: str) -> str:
    """The operator whose ``tuples_out`` counts the deltas ``op_id`` hands on: itself, or for
    a select the row engine pushes into its window (a time-based window with no other
    consumer: ``engines.row.lowering``), the window (the select counts arrivals)."""
    op = plan.op(op_id)
    if isinstance(op, Select):
        (below,) = plan.inputs(op_id)
        w = plan.op(below)
        if (
            isinstance(w, Window)
            and w.window is not WindowKind.ROWS
            and len(plan.consumers(below)) == 1
        ):
            return below
    return op_id


def _read(executor: MetricsSource) -> tuple[dict[str, tuple[float, ...]], dict[str, str]]:
    """Cumulative ``(tuples_in, tuples_out, busy_s, queries)`` and the kind per operator."""
    get: Callable[[], Metrics] = (
        executor.operator_metrics if hasattr(executor, "operator_metrics") else executor
    )
    out: dict[str, tuple[float, ...]] = {}
    kinds = {}
    for op_id, m in get().items():
        kinds[op_id] = str(m.get("kind", "?"))
        out[op_id] = (
            float(m.get("tuples_in") or 0),
            float(m.get("tuples_out") or 0),
            float(m.get("busy_s") or 0.0),
            float(m.get("queries") or 0),
        )
    return out, kinds


class ExecutorView:
    """An executor's counters and state for :meth:`RuntimeMonitor.on_instant`: ``metrics``
    (a callable, e.g. ``lambda: assembly.operator_metrics(executor)`` to include the MIG
    operators' figures) replaces ``executor.operator_metrics``; ``operator_state`` is the
    executor's, when it has one (join key counts, aggregate group counts)."""

    def __init__(self, executor: Any, metrics: Callable[[], Metrics] | None = None) -> None:
        self.executor = executor
        self.metrics = metrics

    def operator_metrics(self) -> Metrics:
        if self.metrics is not None:
            return self.metrics()
        result: Metrics = self.executor.operator_metrics()
        return result

    def operator_state(self) -> Mapping[str, Mapping[str, Any]]:
        return _states(self.executor)


def _states(executor: MetricsSource) -> Mapping[str, Mapping[str, Any]]:
    state = getattr(executor, "operator_state", None)
    return state() if callable(state) else {}


def _keys(state: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    if "left_keys" in state:
        out["left"] = float(state["left_keys"])
        out["right"] = float(state["right_keys"])
    if isinstance(state.get("groups"), int):
        out["groups"] = float(state["groups"])
    return out


def _ratio(num: Ewma, den: Ewma) -> float | None:
    if num.value is None or den.value is None or den.value < MIN_DENOMINATOR:
        return None
    return num.value / den.value


def _json_safe(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    return x

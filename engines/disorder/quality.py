"""``--disorder quality``: the quality-driven policy of a run, built from its plan.

Importing this module registers the ``quality`` factory (engines/disorder/policies.py imports
it the first time ``--disorder quality`` is asked for). The factory reads two run parameters
that the run loop puts into ``disorder_params``: ``plan`` (the LogicalPlan) and ``quality``
(the run's :class:`~engines.disorder.quality_options.QualityOptions`). It derives the
:class:`~engines.disorder.quality_policy.QueryShape` from the plan (per input stream its time
window's range in ticks, the slide, ticks per second, the aggregate) and builds the model with
:func:`~engines.disorder.quality_policy.make_quality_policy`, wrapped in
:class:`QualityDriven`, which adds what the buffers can measure themselves.

What each query shape gets (docs/disorder-quality.md, "Running it"):

* a windowed SUM, COUNT or AVG (one aggregate call, no join) with ``--max-error``: the
  aggregate model. Every arriving batch feeds, from the K-slack buffer (so whatever the
  placement, row, MIG or columnar): the delays (``observe``), the aggregated attribute
  (``values``), the timestamps with the buffer's bound before the batch (``timestamps`` and
  ``closed_up_to``: the policy's own Alg. 4.3 coverage monitor, which PD steers by) and the
  number of distinct group keys seen (``groups``: the model's window size is per group);
* a time-window join of two or more streams with ``--min-recall``: the join model, fed the
  delays as the merge releases them and, when the join's equi-keys form one class over all
  its streams, the join counts measured at the buffers (engines/disorder/join_counts.py:
  per tuple its delay, cross-product and result counts, for NonEqSel; the results produced,
  for Gamma' and PD). Other joins: AM works from the delays alone (EqSel), PD holds K.

The run loop also passes ``late``: per stream what the engine does with a late tuple
(engines/row/executor.py ``late_policy``: ``insert`` into the row windows still to come, or
``drop``: a window feeding a columnar engine, ``--late drop``; a stream the engine says
nothing of, as in a migrating run, drops). The models price it and the join counts follow
it; which tuples the engine may find late, and when an inserted one counts, is estimated
from the buffers' bounds (:meth:`QualityDriven._lateness`).

Anything else (MIN, MAX, several aggregates, count-based windows, a join without a recall
target, an aggregate without an error target, PD with an error target) is an OptionError
(exit 2) before the first tuple is read, saying what is supported.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engines.disorder.join_counts import JoinCounter
from engines.disorder.policies import register_policy
from engines.disorder.quality_options import QualityOptions
from engines.disorder.quality_policy import (
    AggregateQualityPolicy,
    JoinQualityPolicy,
    QueryShape,
    make_quality_policy,
)
from engines.disorder.spec import DisorderSpec
from optimizer.ir.errors import OptionError
from optimizer.ir.expr import ColumnRef
from optimizer.ir.plan import Aggregate, Join, LogicalPlan, Source, Window, WindowKind

#: Most distinct group keys a stream's count follows (beyond it the count stays there).
MAX_GROUPS = 100_000

SUPPORTED = (
    "--disorder quality serves a windowed SUM, COUNT or AVG (one aggregate, time windows) "
    "with --max-error EPS [--confidence C], or a time-window join of two or more streams "
    "with --min-recall GAMMA"
)


def _source_of(plan: LogicalPlan, op_id: str, column: int) -> tuple[str, int] | None:
    """The (stream, column) that output ``column`` of ``op_id`` carries unchanged, if any."""
    while True:
        op = plan.op(op_id)
        if isinstance(op, Source):
            return op.stream, column
        hop = op.input_column(column)
        if hop is None:
            return None
        port, column = hop
        op_id = plan.inputs(op_id)[port]


def _stream_of_window(plan: LogicalPlan, op_id: str) -> str:
    while not isinstance(plan.op(op_id), Source):
        op_id = plan.inputs(op_id)[0]
    src = plan.op(op_id)
    assert isinstance(src, Source)
    return src.stream


def _join_key_class(plan: LogicalPlan, streams: Mapping[str, int]) -> dict[str, int] | None:
    """Per stream its join key column, when the plan's equi-join keys form one class that
    holds exactly one column of every windowed stream (``a.k = b.k AND b.k = c.k``); else
    None (engines/disorder/join_counts.py counts only such joins)."""
    parent: dict[tuple[str, int], tuple[str, int]] = {}

    def find(x: tuple[str, int]) -> tuple[str, int]:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for op_id in plan.ids_of("join"):
        op = plan.op(op_id)
        assert isinstance(op, Join)
        left, right = plan.inputs(op_id)
        for lc, rc in op.equi_keys():
            a, b = _source_of(plan, left, lc), _source_of(plan, right, rc)
            if a is None or b is None:
                return None
            parent[find(a)] = find(b)
    classes: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for x in list(parent):
        classes.setdefault(find(x), []).append(x)
    for members in classes.values():
        by_stream: dict[str, list[int]] = {}
        for stream, col in members:
            by_stream.setdefault(stream, []).append(col)
        if set(by_stream) == set(streams) and all(len(c) == 1 for c in by_stream.values()):
            return {s: c[0] for s, c in by_stream.items()}
    return None


class PlanShape:
    """What the quality policy and its feedback need of a plan: the QueryShape, and per
    stream the source columns of the aggregated attribute and of the group keys. ``late``:
    per stream what the engine does with its late tuples (``insert`` or ``drop``), priced
    by the models."""

    def __init__(self, plan: LogicalPlan, tps: int, late: Mapping[str, str] | None = None) -> None:
        windows: dict[str, int] = {}
        slides: list[int] = []
        for op_id in plan.ids_of("window"):
            w = plan.op(op_id)
            assert isinstance(w, Window)
            if w.window is not WindowKind.RANGE or w.slide_rows or w.size is None:
                raise OptionError(
                    f"--disorder quality: window [{w.spec}] is not a time range window",
                    hint=SUPPORTED,
                )
            stream = _stream_of_window(plan, op_id)
            windows[stream] = max(windows.get(stream, 0), int(w.size))
            slides.append(int(w.slide))
        if not windows:
            raise OptionError("--disorder quality: the query has no time window", hint=SUPPORTED)
        #: The plan's slides (ticks): its instants are their multiples.
        self.slides = sorted(set(slides))
        self.join = bool(plan.ids_of("join"))
        #: Per stream the join key column (one key class over all streams), else None.
        self.join_keys = _join_key_class(plan, windows) if self.join else None
        self.values: dict[str, int] = {}
        self.keys: dict[str, list[int]] = {}
        aggregate = "sum"
        if not self.join:
            aggs = plan.ids_of("aggregate")
            if len(aggs) != 1:
                raise OptionError(
                    "--disorder quality: the query needs exactly one aggregation "
                    f"(it has {len(aggs)})",
                    hint=SUPPORTED,
                )
            op = plan.op(aggs[0])
            assert isinstance(op, Aggregate)
            if len(op.aggs) != 1 or op.aggs[0].distinct:
                raise OptionError(
                    "--disorder quality models one SUM, COUNT or AVG per query, not "
                    + ", ".join(a.display() for a in op.aggs),
                    hint=SUPPORTED,
                )
            call = op.aggs[0]
            aggregate = call.func.lower()
            if aggregate not in ("sum", "count", "avg"):
                raise OptionError(
                    f"--max-error models SUM, COUNT and AVG, not {call.func.upper()}",
                    hint="use --disorder kslack:K or max for this query",
                )
            below = plan.inputs(aggs[0])[0]
            if isinstance(call.arg, ColumnRef):
                found = _source_of(plan, below, call.arg.index)
                if found is not None:
                    self.values[found[0]] = found[1]
            for key in op.group_by:
                found = _source_of(plan, below, key.index) if isinstance(key, ColumnRef) else None
                if found is not None:
                    self.keys.setdefault(found[0], []).append(found[1])
        # A stream the engine says nothing of (a migrating run) drops its late tuples.
        modes = {s: (late or {}).get(s, "drop") for s in windows}
        self.shape = QueryShape(
            windows, min(slides), tps, aggregate, modes, max(slides), reinsert=True
        )


class QualityDriven:
    """A quality model (AggregateQualityPolicy or JoinQualityPolicy) with what the K-slack
    buffers measure: :meth:`arrived` is called by each buffer per arriving batch, after
    :meth:`observe`, with the batch, its timestamps and the buffer's bound before it.
    Times every ``observe`` (the adaptation runs inside it) for the run metrics."""

    name = "quality"

    def __init__(self, model: AggregateQualityPolicy | JoinQualityPolicy, plan: PlanShape) -> None:
        self.model = model
        self.plan = plan
        self._aggregate = isinstance(model, AggregateQualityPolicy)
        self._groups: dict[str, set[Any]] = {}
        self.observe_seconds: list[float] = []
        #: Join counts at the buffers (NonEqSel, produced) when the join's keys allow them.
        self.counter: JoinCounter | None = None
        if not self._aggregate and plan.join_keys is not None:
            self.counter = JoinCounter(
                plan.shape.windows,
                plan.join_keys,
                0,
                [s for s in plan.shape.windows if plan.shape.drops(s)],
            )
        self._delays: dict[str, np.ndarray] = {}
        self.join_fed = 0
        #: Arrivals reach the buffers in steps of this many ticks of each stream's progress
        #: (engines/disorder/kslack.py ``paced``): a tenth of the adaptation interval.
        self.pace_ticks = max(1, model.l_adt // 10)

    def observe(self, stream: str, delays: np.ndarray, now: int) -> None:
        start = time.perf_counter()
        self.model.observe(stream, delays, now)
        self.observe_seconds.append(time.perf_counter() - start)
        if self.counter is not None:
            self._delays[stream] = delays

    def arrived(
        self,
        stream: str,
        batch: pa.RecordBatch,
        ts: np.ndarray,
        closed_up_to: int | None,
        bounds: np.ndarray | None = None,
    ) -> None:
        """Buffer-side feedback of one arriving batch (module docstring). ``bounds``: the
        buffer's bound after each tuple (what the tuples the engine may find late, and the
        instant a late one counts from, are estimated by)."""
        late, opens = self._lateness(ts, bounds)
        if not self._aggregate:
            self._join_arrived(stream, batch, ts, late, opens)
            return
        figures: dict[str, Any] = {"timestamps": ts}
        if closed_up_to is not None:
            figures["closed_up_to"] = closed_up_to
        if late is not None and opens is not None:
            window = self.plan.shape.windows[stream]
            gone = np.ones(len(ts), bool) if self.plan.shape.drops(stream) else opens >= ts + window
            figures["dropped"] = late & gone
        col = self.plan.values.get(stream)
        if col is not None:
            v = pc.cast(batch.column(col), pa.float64()).to_numpy(zero_copy_only=False)
            figures["values"] = v[~np.isnan(v)]
        keys = self.plan.keys.get(stream)
        if keys:
            seen = self._groups.setdefault(stream, set())
            if len(seen) < MAX_GROUPS:
                names = [str(i) for i in range(len(keys))]
                combos = pa.Table.from_arrays([batch.column(c) for c in keys], names)
                rows = combos.group_by(names).aggregate([]).to_pydict().values()
                seen.update(zip(*rows, strict=True))
            figures["groups"] = len(seen)
        self.model.feedback(stream, figures)

    def _lateness(
        self, ts: np.ndarray, bounds: np.ndarray | None
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Per tuple: may the engine find it late, and an upper bound of the first instant a
        late one counts in (None without ``bounds``). A tuple released with the buffer's
        bound at ``B`` reaches an engine whose clock is at most ``B`` (every stream's
        progress is at most its bound, docs/semantics.md), so the last instant fired is at
        most the last plan instant below ``B``: the tuple is late only if it is not after
        that one, and it counts from the next instant of its window on, at most a slide
        later."""
        if bounds is None or not len(ts):
            return None, None
        b = np.asarray(bounds, dtype=np.int64)
        fired = np.full(len(b), np.iinfo(np.int64).min, dtype=np.int64)
        for s in self.plan.slides:
            np.maximum(fired, (-(-b // s) - 1) * s, out=fired)
        return ts <= fired, fired + max(self.plan.slides)

    def _join_arrived(
        self,
        stream: str,
        batch: pa.RecordBatch,
        ts: np.ndarray,
        late: np.ndarray | None,
        opens: np.ndarray | None,
    ) -> None:
        """The join counts of an arriving batch (engines/disorder/join_counts.py): per tuple
        its delay, combinations and results completed; ``produced``: those the run makes
        with what the engine does with the tuples it may find late (``late``, ``opens``;
        without them, those behind the stream's K count as late)."""
        delays = self._delays.pop(stream, None)
        if self.counter is None or delays is None or not len(ts):
            return
        self.counter.horizon = max(self.counter.horizon, int(delays.max()))
        if late is None:
            late = delays > self.model.k(stream)
        cross, join, produced = self.counter.arrived(stream, batch, ts, late, opens)
        self.join_fed += len(ts)
        self.model.feedback(
            stream,
            {
                "delays": delays,
                "n_cross": cross,
                "n_join": join,
                "produced": int(produced.sum()),
            },
        )

    def feedback(self, stream: str, figures: Mapping[str, Any]) -> None:
        self.model.feedback(stream, figures)

    def k(self, stream: str) -> int:
        return self.model.k(stream)

    def report(self) -> dict[str, Any]:
        """The model's report, the shape it served and the cost of the policy per call."""
        out = self.model.report()
        t = self.model.adapt_seconds
        o = self.observe_seconds
        out["target"] = (
            {"max_error": self.model.options.max_error, "confidence": 1 - self.model.options.delta}
            if self._aggregate
            else {"min_recall": self.model.options.min_recall}
        )
        out["shape"] = {
            "kind": "aggregate" if self._aggregate else "join",
            "aggregate": self.plan.shape.aggregate if self._aggregate else None,
            "windows_s": {
                s: w / self.plan.shape.ticks_per_second for s, w in self.plan.shape.windows.items()
            },
        }
        out["adapt_us_max"] = 1e6 * max(t) if t else None
        out["observe_calls"] = len(o)
        out["observe_us_mean"] = 1e6 * float(np.mean(o)) if o else None
        out["observe_us_max"] = 1e6 * max(o) if o else None
        if not self._aggregate:
            out["join_counts"] = {
                "keys": self.plan.join_keys,
                "tuples_counted": self.join_fed,
                "fed": self.counter is not None,
            }
        if self._aggregate:
            assert isinstance(self.model, AggregateQualityPolicy)
            out["groups"] = dict(self.model.groups)
            out["coverage_threshold"] = {s: self.model.threshold(s) for s in self.model.stats}
        return out


def build(spec: DisorderSpec, tps: int, params: Mapping[str, Any]) -> QualityDriven:
    """The ``quality`` factory: see the module docstring."""
    options = params.get("quality")
    plan = params.get("plan")
    if not isinstance(options, QualityOptions) or options.target is None:
        raise OptionError(
            "--disorder quality needs a quality target",
            hint="add --max-error EPS [--confidence C] for a windowed aggregate, or "
            "--min-recall GAMMA for a window join (docs/disorder-quality.md)",
        )
    if not isinstance(plan, LogicalPlan):
        raise OptionError("--disorder quality needs the query's plan (run it with hycq run)")
    late = params.get("late")
    shape = PlanShape(plan, tps, late if isinstance(late, Mapping) else None)
    if shape.join and options.target != "recall":
        raise OptionError(
            "--disorder quality: a join's target is --min-recall GAMMA, not --max-error",
            hint=SUPPORTED,
        )
    if not shape.join and options.target != "error":
        raise OptionError(
            "--disorder quality: a windowed aggregate's target is --max-error EPS, "
            "not --min-recall",
            hint=SUPPORTED,
        )
    if shape.join and len(shape.shape.windows) < 2:
        raise OptionError("--min-recall is for joins of two or more windowed streams")
    if not shape.join and options.method == "pd":
        raise OptionError(
            "--disorder quality --adapt-method pd with --max-error: the PD controller does "
            "not hold an error target (it steers the mean coverage of a window to the "
            "threshold, so about half the windows fall below it: measured Phi(0.01) 0.73 on "
            "the row engine, experiments/quality_targets.py)",
            hint="use --adapt-method am (the default) for a windowed aggregate; PD serves "
            "--min-recall joins",
        )
    model = make_quality_policy(options, shape.shape)
    return QualityDriven(model, shape)


def check_query(plan: LogicalPlan, options: QualityOptions | None, tps: int) -> None:
    """Raise the OptionError ``--disorder quality`` would for this plan and target."""
    build(DisorderSpec("quality"), tps, {"plan": plan, "quality": options})


register_policy("quality", build)

__all__ = ["PlanShape", "QualityDriven", "build", "check_query"]

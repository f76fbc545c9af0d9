"""``hycq bench``: predicted cost against measured sustained throughput, per query, rate and
plan (CONTRACT "hycq bench"; dissertation section 6.4).

For one (query, rate, placement) a measurement is:

1. **Data** of event-time density ``rate`` from the catalog's source (the generator), or a
   ``--data`` file replayed at that rate, read in one-event-second batches.
2. **Warm start**: the first ``W`` event-seconds (``W`` = the plan's longest window) are
   pushed through the plan at max pace before any timing, so every window is full when
   measuring starts. Columnar groups (MIG operators) only fold the window into their Arrow
   inputs during the warm start and skip their queries (they re-execute over whole relations
   each slide, so only the state at the end matters); row operators process every tuple,
   because their state (panes, hash tables) is built tuple by tuple. Nothing is emitted.
   One more event-second runs untimed (``SETTLE_S``): the deferred queries run, kept
   aggregates rebuild their state, and a row operator above a MIG catches up with its whole
   first result (a row join probing its whole window), which is not the steady state. So
   do up to ``ADAPT_S`` more while a MIG is still timing its ways of running a slide (a
   correlated count tries each of its paths a few times, ``engines.mig.correlated_counts``).
3. **Measurement**, interleaved: every placement of a point (up to ``interleave`` at a
   time) has its own engine, warmed on the same batches. Each round generates one span of
   ``measure`` event-seconds (generation is not timed) and times every engine over it in
   turn, rotating which goes first (ABC, BCA, CAB, ...): a noisy minute of the machine hits
   every plan, not one. Before its span, each plan runs ``preroll`` more event-seconds
   untimed (the round's first): the plans share one process, and the first slides after
   another plan ran would pay for its use of the caches and the allocator. Rounds continue
   until each plan has ``repeat`` spans and its median's 95% bootstrap interval is within
   ``precision`` (default 3%) of it, or ``max_repeat`` rounds (the span budget) were run.
   ``throughput`` is the median over spans of tuples / wall seconds: the highest input rate
   the plan sustains over data of that density with full windows. ``kept_up`` is
   ``throughput >= rate``.
   When the placements do not fit in one group, the first plan asked (``auto``) runs in
   every group beside ``interleave - 1`` others, and each other plan's spans become its
   ratios to the anchor's span of the same round times the anchor's median over all its
   groups (``anchored_spans``; :func:`hycq.bench_stats.anchored`): groups run minutes
   apart, and the same plan's median moved by up to 2.7x between runs on this machine.
   The others are grouped in the order of their predicted bottleneck cost (plans of like
   speed side by side), and afterwards the anchor and the plans within ``RUNOFF_WITHIN`` of
   the best run once more in one group of their own (the run-off, ``_runoff``), which their
   records then come from.
4. **Load**: around every span the machine's CPU time is read from ``/proc`` and this
   process's (and its children's, e.g. Spark's JVM) subtracted. A span during which other
   processes used half a core or more is not clean: the median and its interval use the
   clean spans only (all spans, with a warning in the record, if fewer than 3 were clean).
5. **Verdict** per point (:func:`hycq.bench_stats.judge`): each plan's ``vs_best`` and
   whether its interval overlaps the best one's (``tied_with_best``); ``best_separable``
   says whether the fastest plan is distinguishable from the second at all.

Plans: ``auto`` (the optimizer's choice at that rate), ``row``, ``column``, and ``all``: every
placement of the Phase-One plan when there are at most ``max_candidates`` of them, else the
``max_candidates / 2`` best predicted plus as many random ones (seeded). Placements that
coincide are measured once and reported under each name.
"""

from __future__ import annotations

import gc
import itertools
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any

from engines import registry
from engines.assembly import Assembly, EngineSettings
from engines.sources.mqtt import MqttUrl
from hycq import bench_stats
from hycq.planning import Optimized, OptimizerOptions, optimize
from hycq.query import LoadedQuery, resolve_placement
from optimizer.ir.catalog import TIME_UNITS_MS
from optimizer.ir.cost import sort_key
from optimizer.ir.errors import OptionError, did_you_mean
from optimizer.ir.limits import MAX_RATE
from optimizer.ir.plan import LogicalPlan, Window, WindowKind
from optimizer.phase_two import allowed_engines

PLANS = ("auto", "row", "column", "all")
#: Warm-up assumed for an UNBOUNDED window (it never fills).
UNBOUNDED_WARM_S = 60.0


@dataclass
class BenchOptions:
    rates: list[float]
    plans: list[str] = field(default_factory=lambda: ["auto", "row", "column"])
    column_engine: str = "duckdb"
    measure_seconds: int = 10
    repeat: int = 3
    """Timed spans at least, per plan."""
    max_repeat: int = 12
    """Timed spans at most (the span budget) while some median is less precise than
    ``precision``."""
    precision: float = 0.03
    """Wanted half-width of each median's 95% bootstrap interval, relative to the median."""
    interleave: int = 4
    """Plans measured side by side (each with its own engine alive); more placements than
    this are measured in groups of this size."""
    max_candidates: int = 20
    max_warm_wall: float = 120.0
    """Wall seconds the warm start may take. A plan that cannot fill its windows in this
    time is far below the rate: it is measured from where it got to (windows not full, so
    its throughput is an upper bound) and the record says ``warm_start.complete: false``."""
    optimizer: OptimizerOptions = field(default_factory=OptimizerOptions)
    settings: EngineSettings | None = None
    data: dict[str, Path | MqttUrl] = field(default_factory=dict)
    progress: Callable[[str], None] = field(default=lambda _m: None)
    operator_metrics: bool = False
    """Also sum every operator's run metrics over the timed spans (``Measurement.operators``;
    read between spans, outside the timing)."""
    preroll: int = 1
    """Event-seconds each plan runs untimed just before each of its spans (rounded up to the
    longest slide, as spans are) when several plans are measured side by side: they share
    one process, and a plan's first slides after another plan ran pay for that plan's use of
    the caches and the allocator. 0: none (as before issue 20's thirteenth stop)."""
    runoff: bool = True
    """With placements in several groups: measure the anchor and the fastest others (those
    within ``RUNOFF_WITHIN`` of the best, up to ``interleave - 1``) once more in one group
    of their own, unless one group already held exactly them (``_runoff``)."""

    def __post_init__(self) -> None:
        """The checks ``hycq bench`` makes of its flags, for every caller (API, experiments):
        a bad value is an OptionError naming the option, before anything is measured."""
        if not self.rates:
            raise OptionError("bench needs at least one rate", hint="e.g. --rates 1000,5000")
        for rate in self.rates:
            if not (math.isfinite(rate) and 0 < rate <= MAX_RATE):
                raise OptionError(
                    f"--rates: must be a positive number up to {MAX_RATE:g}, got '{rate:g}'",
                    hint="e.g. --rates 1000,5000,40000",
                )
        if not self.plans:
            raise OptionError("--plans names no plan", hint=f"plans: {', '.join(PLANS)}")
        for name in self.plans:
            check_plan_name(name)
        for option, value, low in (
            ("--measure", self.measure_seconds, 1),
            ("--repeat", self.repeat, 1),
            ("--max-repeat", self.max_repeat, 1),
            ("--interleave", self.interleave, 1),
            ("--preroll", self.preroll, 0),
        ):
            if value < low:
                raise OptionError(f"{option} must be at least {low}, got {value}")
        for option, number in (
            ("--precision", self.precision),
            ("--warm-limit", self.max_warm_wall),
        ):
            if not (math.isfinite(number) and number > 0):
                raise OptionError(f"{option} must be a positive number, got {number:g}")


def check_plan_name(name: str) -> None:
    """An OptionError unless ``name`` is one of :data:`PLANS` (with a did-you-mean hint)."""
    if name not in PLANS:
        raise OptionError(
            f"unknown plan '{name}' in --plans",
            hint=did_you_mean(name, PLANS) or f"plans: {', '.join(PLANS)}",
        )


#: Event-seconds after the warm start that run but are not timed (see ``measure_point``).
SETTLE_S = 1
#: At most this many more untimed event-seconds while a MIG is still adapting
#: (``engines.mig.operator.MigOp.adapting``).
ADAPT_S = 12
#: Wall seconds a plan's untimed lead-in before a span (``BenchOptions.preroll``) may take.
PREROLL_WALL_S = 1.0
#: The run-off (``BenchOptions.runoff``) takes the plans that measured at least this
#: fraction of the best one's throughput.
RUNOFF_WITHIN = 0.5


def warm_seconds(plan: LogicalPlan, rate: float) -> float:
    """Event-seconds until every window of ``plan`` is full (plus one slide)."""
    longest = 1.0
    for op in plan.operators():
        if not isinstance(op, Window):
            continue
        tick = TIME_UNITS_MS[op.time_unit] / 1000.0
        if op.window is WindowKind.RANGE:
            size = (op.size or 0) * tick
        elif op.window is WindowKind.ROWS:
            size = (op.size or 0) / rate if rate > 0 else 0.0
        elif op.window is WindowKind.UNBOUNDED:
            size = UNBOUNDED_WARM_S
        else:
            size = tick
        slide = op.slide / rate if op.slide_rows else op.slide * tick
        longest = max(longest, size + slide)
    return float(int(longest) + 1)


def span_seconds(plan: LogicalPlan, measure: int) -> int:
    """Event-seconds per timed span: ``measure`` rounded up to a multiple of the plan's
    longest time slide, so every span holds the same number of slide instants (a 3-second
    span of a 5-second slide holds a slide or none, and its throughput swings tenfold)."""
    longest = 1
    for op in plan.operators():
        if isinstance(op, Window) and not op.slide_rows and op.window is not WindowKind.ROWS:
            slide_s = op.slide * TIME_UNITS_MS[op.time_unit] / 1000.0
            longest = max(longest, math.ceil(slide_s))
    return max(1, math.ceil(measure / longest)) * longest


def candidates(
    opt: Optimized, plans: list[str], column_engine: str, limit: int
) -> list[tuple[str, dict[str, str]]]:
    """(plan name, placement) pairs to measure, in the order asked."""
    plan = opt.plan
    out: list[tuple[str, dict[str, str]]] = []
    for name in plans:
        if name == "auto":
            out.append(("auto", dict(opt.placement)))
        elif name in ("row", "column"):
            out.append((name, resolve_placement(plan, name, column_engine)))
        elif name == "all":
            out.extend(_all_placements(opt, column_engine, limit))
        else:
            check_plan_name(name)
    return out


def _all_placements(opt: Optimized, engine: str, limit: int) -> list[tuple[str, dict[str, str]]]:
    plan = opt.plan
    r2r = plan.r2r_ids()
    enabled = ("row", engine)
    caps = registry.capabilities(enabled)
    allowed = [allowed_engines(plan, i, enabled, caps) for i in r2r]
    total = 1
    for a in allowed:
        total *= len(a)
    base = resolve_placement(plan, "row")

    def named(choice: tuple[str, ...]) -> tuple[str, dict[str, str]]:
        p = {**base, **dict(zip(r2r, choice, strict=True))}
        tag = "".join("c" if e != "row" else "r" for e in choice)
        return f"p_{tag}", p

    if total <= limit:
        return [named(c) for c in itertools.product(*allowed)]
    rng = random.Random(7)
    scored = [
        (opt.cost_of(named(c)[1]), c)
        for c in itertools.islice(itertools.product(*allowed), 200_000)
    ]

    scored.sort(key=lambda x: sort_key(x[0], not opt.options.feasibility))
    best = [c for _, c in scored[: limit // 2]]
    rest = [c for _, c in scored[limit // 2 :]]
    picked = best + rng.sample(rest, min(len(rest), limit - len(best)))
    return [named(c) for c in picked]


@dataclass
class Measurement:
    throughput: float
    """Median over the clean spans (over all spans when fewer than 3 were clean)."""
    spans: list[float]
    warm_s: float
    warm_wall_s: float
    tuples_measured: int
    results: int
    slide_ms_p50: float | None
    warm_complete: bool = True
    late: int = 0
    """Tuples the engine dropped as late (none in a sound measurement: a bench that fed
    batches behind the progress it announced measured dropping, not processing)."""
    other_cores: list[float | None] = field(default_factory=list)
    """Per span: cores other processes used meanwhile (None: not measurable here)."""
    ci: tuple[float, float] = (0.0, 0.0)
    """95% bootstrap interval of ``throughput``."""
    operators: dict[str, dict[str, float]] = field(default_factory=dict)
    """With ``BenchOptions.operator_metrics``: per operator, its ``busy_s``, ``tuples_in``
    and ``tuples_out`` summed over the timed spans (full windows, the steady state)."""
    spans_wall_s: float = 0.0
    """Wall seconds of all timed spans together."""
    anchored: list[float] | None = None
    """When the point's placements ran in several groups: the spans as ratios to the
    anchor's span of the same round times the anchor's pooled median (``_anchor``), which
    ``throughput`` and ``ci`` then come from; None otherwise."""
    first_group: float | None = None
    """When the run-off measured this plan again (``BenchOptions.runoff``): its throughput
    from its first group, which the run-off's replaced."""

    @property
    def clean(self) -> list[float]:
        """The spans no other process disturbed (see :mod:`hycq.bench_stats`)."""
        return [
            s for s, o in zip(self.spans, self.other_cores, strict=False) if bench_stats.is_clean(o)
        ]

    def counted(self) -> list[float]:
        clean = self.clean
        return clean if len(clean) >= 3 else self.spans


@dataclass
class _Runner:
    """One placement being measured: its engine, kept alive across the point's rounds."""

    placement: dict[str, str]
    asm: Assembly
    engine: Any
    results: list[int]
    warm_wall: float = 0.0
    warm_complete: bool = True
    spans: list[float] = field(default_factory=list)
    other: list[float | None] = field(default_factory=list)
    measured: int = 0
    wall: float = 0.0
    operators: dict[str, dict[str, float]] = field(default_factory=dict)

    def add_operator_metrics(self, before: dict[str, Any], after: dict[str, Any]) -> None:
        """Add one span's difference of the run metrics' per-operator counters (and, for a
        MIG, of its seconds in SQL and in shipping rows in and out)."""
        for op_id, m in after.items():
            m0 = before.get(op_id, {})
            acc = self.operators.setdefault(op_id, {"busy_s": 0.0, "tuples_in": 0, "tuples_out": 0})
            for key in MIG_SECONDS:
                if key in m or (key == "kept_s" and "incremental" in m):
                    acc.setdefault(key, 0.0)
            for key in acc:
                acc[key] += _counter(m, key) - _counter(m0, key)


#: A MIG's counters of seconds (``engines.mig.operator``) that spans sum besides ``busy_s``:
#: ``kept_s`` is the time its kept aggregates took (``incremental``, part of ``sql_s``).
MIG_SECONDS = ("sql_s", "transfer_in_s", "transfer_out_s", "kept_s")


def _counter(m: Mapping[str, Any], key: str) -> float:
    if key == "kept_s":
        return sum(float(k.get("seconds", 0.0)) for k in (m.get("incremental") or {}).values())
    return float(m.get(key, 0) or 0)


def measure(
    q: LoadedQuery, plan: LogicalPlan, placement: dict[str, str], rate: float, o: BenchOptions
) -> Measurement:
    """One placement alone (see :func:`measure_point`)."""
    return measure_point(q, plan, [placement], rate, o)[0]


def measure_point(
    q: LoadedQuery,
    plan: LogicalPlan,
    placements: list[dict[str, str]],
    rate: float,
    o: BenchOptions,
) -> list[Measurement]:
    """Warm start, then interleaved timed spans (see the module docstring).

    Every placement gets its own engine over the same batches. The warm start feeds each
    batch to every engine (MIGs defer their queries); one more event-second runs untimed
    (``SETTLE_S``: the deferred queries run, and row operators above a MIG catch up with
    its whole result); then each round materialises one span of batches and times
    every engine over it in turn, starting with a different engine each round (ABC, BCA,
    CAB, ...), so a slow minute of the machine hits all plans alike. Rounds go on until
    every plan has ``o.repeat`` spans and each median's 95% bootstrap interval is within
    ``o.precision`` of it (clean spans only), or ``o.max_repeat`` rounds were run.
    """
    from engines.runtime import DeadLetters, MergedInputs, RunOptions, open_inputs
    from hycq.flags import CLI_OPTION_NAMES

    warm = warm_seconds(plan, rate)
    rounds = max(o.repeat, o.max_repeat)
    measure_s = span_seconds(plan, o.measure_seconds)
    preroll_s = span_seconds(plan, o.preroll) if o.preroll > 0 and len(placements) > 1 else 0
    total = warm + SETTLE_S + ADAPT_S + rounds * (preroll_s + measure_s)
    # Files are read in batches of about one event-second at the rate (as generators
    # emit): the warm start and the spans are cut at batch starts, and a 64k-row batch is a
    # minute of data at 1k tuples/s.
    options = RunOptions(
        rate=rate,
        duration=total,
        data=dict(o.data),
        names=CLI_OPTION_NAMES,
        read_batch_rows=max(1, round(rate)),
    )
    inputs = open_inputs(plan, q.catalog, options)
    merged = MergedInputs(plan, inputs, total, DeadLetters(None))
    stream = iter(merged)
    runners: list[_Runner] = []
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for placement in placements:
            counter = [0]

            def emit(_instant: int, rows: Any, c: list[int] = counter) -> None:
                c[0] += rows.num_rows if hasattr(rows, "num_rows") else len(rows)

            asm = Assembly(plan, placement, o.settings)
            runner = _Runner(placement, asm, None, counter)
            runners.append(runner)
            runner.engine = asm.make_engine(emit)
            for mig in asm.migs:
                mig.defer = True
        start_ts: int | None = None
        pending: tuple[Any, Any, Any] | None = None
        for inp, batch in stream:
            if batch.num_rows == 0:
                continue
            ts0 = batch.column(inp.stream.time_index)[0].as_py()
            start_ts = ts0 if start_ts is None else start_ts
            tells = merged.take_tells()
            if ts0 - start_ts >= warm * merged.tps:
                pending = (inp, batch, tells)
                break
            warming = [r for r in runners if r.warm_complete]
            if not warming:
                break
            for r in warming:
                t = time.perf_counter()
                merged.tell(r.engine, tells)
                r.engine.ingest(inp.stream.name, batch, inp.stream.time_index)
                r.warm_wall += time.perf_counter() - t
                if r.warm_wall > o.max_warm_wall:
                    r.warm_complete = False
        settle = [pending] if pending is not None else []
        for inp, batch in islice(stream, max(0, len(inputs) - len(settle))):
            settle.append((inp, batch, merged.take_tells()))
        for r in runners:
            for mig in r.asm.migs:
                mig.defer = False
            if r.warm_complete:
                # The first event-second after the warm start runs the deferred queries, and a
                # row operator above a MIG catches up with the whole result at once (a row
                # join probes its whole window): not the steady state, so not timed.
                for inp, batch, tells in settle:
                    merged.tell(r.engine, tells)
                    r.engine.ingest(inp.stream.name, batch, inp.stream.time_index)
        # Then as long as a MIG is still trying its ways of running (a correlated count
        # times each of its paths before it settles on the fastest): not the steady state.
        for _ in range(ADAPT_S):
            adapting = [
                r for r in runners if r.warm_complete and any(m.adapting for m in r.asm.migs)
            ]
            if not adapting:
                break
            for inp, batch in islice(stream, len(inputs)):
                tells = merged.take_tells()
                for r in runners:
                    if r.warm_complete:
                        merged.tell(r.engine, tells)
                        r.engine.ingest(inp.stream.name, batch, inp.stream.time_index)
        for r in runners:
            r.results[0] = 0  # count the measured spans' result rows only
        probe = bench_stats.LoadProbe()
        for k in range(rounds):
            # Batches of this span, generated before timing.
            # (each with the progress the merge reported on reading it, told before it)
            need = (preroll_s + measure_s) * len(inputs)
            span: list[tuple[Any, Any, Any]] = []
            for inp, batch in islice(stream, need):
                span.append((inp, batch, merged.take_tells()))
            lead, span = span[: preroll_s * len(inputs)], span[preroll_s * len(inputs) :]
            if not span:
                break
            for j in range(len(runners)):
                r = runners[(k + j) % len(runners)]
                t = time.perf_counter()
                results = r.results[0]
                for inp, batch, tells in lead:  # untimed: this plan's caches warm again
                    merged.tell(r.engine, tells)
                    if batch.num_rows:
                        r.engine.ingest(inp.stream.name, batch, inp.stream.time_index)
                    if time.perf_counter() - t > PREROLL_WALL_S:
                        break  # a plan this slow is warm long before its span starts
                r.results[0] = results  # the measured spans' result rows only
                n = 0
                before = r.asm.operator_metrics(r.engine) if o.operator_metrics else None
                probe.start()
                t = time.perf_counter()
                for inp, batch, tells in span:
                    merged.tell(r.engine, tells)
                    if batch.num_rows:
                        r.engine.ingest(inp.stream.name, batch, inp.stream.time_index)
                        n += batch.num_rows
                    if time.perf_counter() - t > o.max_warm_wall / 4:
                        break  # far below the rate: the tuples so far make the measurement
                wall = time.perf_counter() - t
                r.other.append(probe.other_cores(wall))
                r.spans.append(n / wall if wall > 0 else float("inf"))
                r.measured += n
                r.wall += wall
                if before is not None:
                    r.add_operator_metrics(before, r.asm.operator_metrics(r.engine))
            if k + 1 >= o.repeat and all(_precise(r, o.precision) for r in runners):
                break
    finally:
        if gc_was:
            gc.enable()
        for r in runners:
            r.asm.close()
    out = []
    for r in runners:
        m = Measurement(
            0.0,
            r.spans,
            warm,
            r.warm_wall,
            r.measured,
            r.results[0],
            _slide_p50(r.asm),
            r.warm_complete,
            int(getattr(r.engine, "late_count", 0)),
            r.other,
        )
        med, lo, hi = bench_stats.median_ci(m.counted())
        m.throughput, m.ci = med, (lo, hi)
        m.operators, m.spans_wall_s = r.operators, r.wall
        out.append(m)
    return out


def _precise(r: _Runner, precision: float) -> bool:
    clean = [s for s, c in zip(r.spans, r.other, strict=True) if bench_stats.is_clean(c)]
    return len(clean) >= 2 and bench_stats.half_width(clean) <= precision


def _slide_p50(asm: Assembly) -> float | None:
    slides = sorted(t for mig in asm.migs for _, t in mig.stats.slides)
    return 1e3 * slides[len(slides) // 2] if slides else None


def bench(queries: list[LoadedQuery], o: BenchOptions) -> list[dict[str, Any]]:
    """One CONTRACT record per (query, rate, plan)."""
    import dataclasses

    records: list[dict[str, Any]] = []
    for q in queries:
        for rate in o.rates:
            opts = dataclasses.replace(
                o.optimizer, rate=rate, engines=("row", o.column_engine), data=dict(o.data)
            )
            opt = optimize(q, opts)
            named = candidates(opt, o.plans, o.column_engine, o.max_candidates)
            distinct: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
            for _name, placement in named:
                distinct.setdefault(tuple(sorted(placement.items())), placement)
            keys = list(distinct)
            # The anchor first, the others by predicted bottleneck cost: plans of about the
            # same speed share a group (a plan 50x slower beside it slowed the anchor).
            keys[1:] = sorted(keys[1:], key=lambda k: opt.cost_of(distinct[k]).bottleneck)
            size = max(1, o.interleave)
            done: dict[tuple[tuple[str, str], ...], Measurement] = {}
            runs: list[tuple[list[Any], list[Measurement]]] = []
            for group in _groups(keys, size):
                _measure_group(q, opt, named, distinct, group, rate, o, runs, done)
            anchor = _anchor(runs, done) if len(runs) > 1 and size >= 2 else None
            final = _runoff(runs, done, size) if anchor is not None and o.runoff else None
            if final is not None:
                first = {k: done[k].throughput for k in final[1:]}
                _measure_group(q, opt, named, distinct, final, rate, o, runs, done, "run-off: ")
                anchor = _anchor(runs, done)
                for k, t in first.items():
                    done[k].first_group = t
            anchor_name = next(n for n, p in named if tuple(sorted(p.items())) == keys[0])
            verdicts = bench_stats.judge({str(k): (m.throughput, *m.ci) for k, m in done.items()})
            for name, placement in named:
                key = tuple(sorted(placement.items()))
                m = done[key]
                v = verdicts[str(key)]
                cost = opt.cost_of(placement)
                others = [c for c in m.other_cores if c is not None]
                records.append(
                    {
                        "query": q.name,
                        "rate": rate,
                        "plan": name,
                        "placement": {k: v for k, v in placement.items() if v != "row"},
                        "predicted": {
                            "bottleneck": cost.bottleneck,
                            "utilization": cost.utilization,
                            "feasible": cost.feasible,
                        },
                        "measured": {
                            "throughput": m.throughput,
                            "ci95": list(m.ci),
                            "precision": (m.ci[1] - m.ci[0]) / 2 / m.throughput
                            if m.throughput > 0
                            else None,
                            "kept_up": m.throughput >= rate,
                            "spans": m.spans,
                            "clean_spans": len(m.clean),
                            "tuples": m.tuples_measured,
                            "results": m.results,
                            "slide_ms_p50": m.slide_ms_p50,
                            "late_dropped": m.late,
                            "vs_best": v.vs_best,
                            "tied_with_best": v.tied_with_best,
                            "best_separable": v.best_separable,
                            "anchored_to": anchor_name if anchor is not None else None,
                            "anchored_spans": m.anchored,
                            "runoff": m.first_group is not None
                            or (final is not None and key == keys[0]),
                            "first_group_throughput": m.first_group,
                        },
                        "load": {
                            "other_cores": [
                                None if c is None else round(c, 3) for c in m.other_cores
                            ],
                            "other_cores_max": max(others) if others else None,
                            "clean": len(m.clean) == len(m.spans) and bool(others),
                            "warning": _load_warning(m),
                        },
                        "warm_start": {
                            "event_s": m.warm_s,
                            "wall_s": m.warm_wall_s,
                            "complete": m.warm_complete,
                        },
                        "cost_model": opt.model.name,
                        "row_core": opt.options.row_core,
                        "interleaved": min(size, len(keys)),
                    }
                )
    return records


def _measure_group(
    q: LoadedQuery,
    opt: Optimized,
    named: list[tuple[str, dict[str, str]]],
    distinct: dict[Any, dict[str, str]],
    group: list[Any],
    rate: float,
    o: BenchOptions,
    runs: list[tuple[list[Any], list[Measurement]]],
    done: dict[Any, Measurement],
    what: str = "",
) -> None:
    """Measure one group of placements side by side; add it to ``runs`` and ``done``."""
    names = [n for n, p in named if tuple(sorted(p.items())) in group]
    o.progress(f"{q.name} @ {rate:g}/s: {what}{', '.join(dict.fromkeys(names))}")
    ms = measure_point(q, opt.plan, [distinct[k] for k in group], rate, o)
    runs.append((group, ms))
    done.update(zip(group, ms, strict=True))


def _groups(keys: list[Any], size: int) -> list[list[Any]]:
    """The interleaved groups of a point's placements: all at once when they fit, else the
    first (the ``auto`` plan, or the first asked) in every group beside ``size - 1`` others,
    so that every placement is measured side by side with the same anchor."""
    if len(keys) <= size or size < 2:
        return [keys[g : g + max(1, size)] for g in range(0, len(keys), max(1, size))]
    head, rest = keys[0], keys[1:]
    return [[head, *rest[g : g + size - 1]] for g in range(0, len(rest), size - 1)]


def _anchor(
    runs: list[tuple[list[Any], list[Measurement]]], done: dict[Any, Measurement]
) -> Measurement | None:
    """Put placements measured in different groups on one scale (``bench_stats.anchored``).

    The anchor (every group's first placement) gets one measurement pooled over its groups;
    every other placement's throughput and interval become those of its spans' ratios to the
    anchor's spans of the same rounds, times the anchor's pooled median. Returns the pooled
    anchor, or None (nothing changed) when the anchor has too few clean spans."""
    head = runs[0][0][0]
    mine = [ms[0] for _g, ms in runs]
    pooled = replace(
        mine[0],
        spans=[s for m in mine for s in m.spans],
        other_cores=[c for m in mine for c in m.other_cores],
        tuples_measured=sum(m.tuples_measured for m in mine),
        results=sum(m.results for m in mine),
    )
    counted = pooled.counted()
    if len(counted) < 2:
        return None
    pooled.throughput, lo, hi = bench_stats.median_ci(counted)
    pooled.ci = (lo, hi)
    done[head] = pooled
    for group, ms in runs:
        a = ms[0]
        for key, m in zip(group[1:], ms[1:], strict=True):
            scaled = bench_stats.anchored(
                m.spans, m.other_cores, a.spans, a.other_cores, pooled.throughput
            )
            if scaled is not None:
                m.anchored = scaled
                m.throughput, lo, hi = bench_stats.median_ci(scaled)
                m.ci = (lo, hi)
            done[key] = m
    return pooled


def _runoff(
    runs: list[tuple[list[Any], list[Measurement]]], done: dict[Any, Measurement], size: int
) -> list[Any] | None:
    """The run-off's group, or None when none is needed.

    Anchoring assumes that what slows a group slows all its plans alike. It does not always:
    Q2 wholly on DuckDB over 1,677 plugs at 40k tuples/s had a median span of 385k in the
    group with two plans 50x slower and 710k and 733k in its other two groups; the hybrid
    beside it there had a median span of 488k, and anchored to that group's slow spans it
    came out at 810k, 1.22x the anchor's pooled 663k (issue 20, fourteenth stop). So the
    plans that could be the best (within ``RUNOFF_WITHIN`` of it, up to ``size - 1``
    besides the anchor) are timed once more side by side with nothing else, and their
    measurements replace those from their groups. None when a group already held exactly
    the anchor and these plans (then they were compared directly) or when no plan comes
    near the anchor."""
    head = runs[0][0][0]
    best = max(m.throughput for m in done.values())
    near = sorted(
        (k for k, m in done.items() if k != head and m.throughput >= RUNOFF_WITHIN * best),
        key=lambda k: -done[k].throughput,
    )[: size - 1]
    if not near or any(set(g) == {head, *near} for g, _ms in runs):
        return None
    return [head, *near]


def _load_warning(m: Measurement) -> str | None:
    if not any(c is not None for c in m.other_cores):
        return "machine load not measurable here (no /proc): spans counted as clean"
    dirty = len(m.spans) - len(m.clean)
    if not dirty:
        return None
    used = "the clean ones" if len(m.clean) >= 3 else "all of them (fewer than 3 were clean)"
    return (
        f"{dirty} of {len(m.spans)} spans ran while other processes used "
        f">= {bench_stats.CLEAN_OTHER_CORES} core; the median uses {used}"
    )


def plot(records: list[dict[str, Any]], path: Path) -> None:
    """Fig. 6.6: measured throughput against requested rate, one line per plan, one panel
    per query; the diagonal is 'keeps up'."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    queries = list(dict.fromkeys(r["query"] for r in records))
    fig, axes = plt.subplots(1, len(queries), figsize=(4.5 * len(queries), 4), squeeze=False)
    for ax, q in zip(axes[0], queries, strict=True):
        rows = [r for r in records if r["query"] == q]
        rates = sorted({r["rate"] for r in rows})
        for plan in dict.fromkeys(r["plan"] for r in rows):
            pts = sorted(
                (r["rate"], r["measured"]["throughput"]) for r in rows if r["plan"] == plan
            )
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=plan)
        ax.plot(rates, rates, color="grey", linestyle="--", linewidth=1, label="rate (keeps up)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(Path(q).stem)
        ax.set_xlabel("requested rate (tuples/s)")
        ax.set_ylabel("measured throughput (tuples/s)")
        ax.legend(fontsize="small")
    fig.tight_layout()
    from engines.output_files import OutputFile

    out = OutputFile(path, "--plot")
    with out, out.errors():
        fig.savefig(out.file("wb"), dpi=120, format="png")
    plt.close(fig)

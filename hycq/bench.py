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
3. **Measurement**: ``repeat`` consecutive spans of ``measure`` event-seconds, each timed on
   its own at max pace, with the batches generated beforehand (generation is not timed).
   ``throughput`` is the median over spans of tuples / wall seconds: the highest input rate
   the plan sustains over data of that density with full windows. ``kept_up`` is
   ``throughput >= rate``.

Plans: ``auto`` (the optimizer's choice at that rate), ``row``, ``column``, and ``all``: every
placement of the Phase-One plan when there are at most ``max_candidates`` of them, else the
``max_candidates / 2`` best predicted plus as many random ones (seeded). Placements that
coincide are measured once and reported under each name.
"""

from __future__ import annotations

import gc
import itertools
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from engines import registry
from engines.sources.mqtt import MqttUrl
from hycq.api import Assembly, EngineSettings, LoadedQuery, resolve_placement
from hycq.planning import Optimized, OptimizerOptions, optimize
from optimizer.ir.catalog import TIME_UNITS_MS
from optimizer.ir.cost import sort_key
from optimizer.ir.errors import OptionError
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
    max_candidates: int = 20
    max_warm_wall: float = 120.0
    """Wall seconds the warm start may take. A plan that cannot fill its windows in this
    time is far below the rate: it is measured from where it got to (windows not full, so
    its throughput is an upper bound) and the record says ``warm_start.complete: false``."""
    optimizer: OptimizerOptions = field(default_factory=OptimizerOptions)
    settings: EngineSettings | None = None
    data: dict[str, Path | MqttUrl] = field(default_factory=dict)
    progress: Callable[[str], None] = field(default=lambda _m: None)


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
            raise OptionError(f"unknown plan '{name}' in --plans", hint=f"use {', '.join(PLANS)}")
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


def measure(
    q: LoadedQuery, plan: LogicalPlan, placement: dict[str, str], rate: float, o: BenchOptions
) -> Measurement:
    """Warm start, then ``o.repeat`` timed spans (see the module docstring)."""
    from engines.runtime import DeadLetters, MergedInputs, RunOptions, open_inputs
    from hycq.flags import CLI_OPTION_NAMES

    warm = warm_seconds(plan, rate)
    total = warm + o.repeat * o.measure_seconds
    options = RunOptions(rate=rate, duration=total, data=dict(o.data), names=CLI_OPTION_NAMES)
    inputs = open_inputs(plan, q.catalog, options)
    merged = MergedInputs(plan, inputs, total, DeadLetters(None))
    stream = iter(merged)
    results = [0]

    def emit(_instant: int, rows: Any) -> None:
        results[0] += rows.num_rows if hasattr(rows, "num_rows") else len(rows)

    asm = Assembly(plan, placement, o.settings)
    gc_was = gc.isenabled()
    gc.disable()
    try:
        engine = asm.make_engine(emit)
        for mig in asm.migs:
            mig.defer = True
        t0 = time.perf_counter()
        complete = True
        start_ts: int | None = None
        pending = None
        for inp, batch in stream:
            if batch.num_rows == 0:
                continue
            ts0 = batch.column(inp.stream.time_index)[0].as_py()
            start_ts = ts0 if start_ts is None else start_ts
            if ts0 - start_ts >= warm * merged.tps:
                pending = (inp, batch, merged.take_tells())
                break
            merged.tell(engine)
            engine.ingest(inp.stream.name, batch, inp.stream.time_index)
            if time.perf_counter() - t0 > o.max_warm_wall:
                complete = False
                break
        warm_wall = time.perf_counter() - t0
        for mig in asm.migs:
            mig.defer = False
        results[0] = 0  # count the measured spans' result rows only
        spans: list[float] = []
        measured = 0
        for _ in range(o.repeat):
            # Batches of this span, generated before timing.
            # (each with the progress the merge reported on reading it, told before it)
            need = o.measure_seconds * len(inputs)
            span = [pending] if pending is not None else []
            for inp, batch in islice(stream, need - len(span)):
                span.append((inp, batch, merged.take_tells()))
            pending = None
            if not span:
                break
            n = 0
            t = time.perf_counter()
            for inp, batch, tells in span:
                merged.tell(engine, tells)
                if batch.num_rows:
                    engine.ingest(inp.stream.name, batch, inp.stream.time_index)
                    n += batch.num_rows
                if time.perf_counter() - t > o.max_warm_wall / 4:
                    break  # far below the rate: the tuples so far make the measurement
            wall = time.perf_counter() - t
            spans.append(n / wall if wall > 0 else float("inf"))
            measured += n
    finally:
        if gc_was:
            gc.enable()
        asm.close()
    slides = sorted(t for mig in asm.migs for _, t in mig.stats.slides)
    return Measurement(
        statistics.median(spans) if spans else 0.0,
        spans,
        warm,
        warm_wall,
        measured,
        results[0],
        1e3 * slides[len(slides) // 2] if slides else None,
        complete,
        int(getattr(engine, "late_count", 0)),
    )


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
            done: dict[tuple[tuple[str, str], ...], Measurement] = {}
            for name, placement in candidates(opt, o.plans, o.column_engine, o.max_candidates):
                key = tuple(sorted(placement.items()))
                if key not in done:
                    o.progress(f"{q.name} @ {rate:g}/s: {name}")
                    done[key] = measure(q, opt.plan, placement, rate, o)
                m = done[key]
                cost = opt.cost_of(placement)
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
                            "kept_up": m.throughput >= rate,
                            "spans": m.spans,
                            "tuples": m.tuples_measured,
                            "results": m.results,
                            "slide_ms_p50": m.slide_ms_p50,
                            "late_dropped": m.late,
                        },
                        "warm_start": {
                            "event_s": m.warm_s,
                            "wall_s": m.warm_wall_s,
                            "complete": m.warm_complete,
                        },
                        "cost_model": opt.model.name,
                        "row_core": opt.options.row_core,
                    }
                )
    return records


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

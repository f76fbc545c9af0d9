"""Several continuous queries over one shared source (``hycq run Q1.sql Q2.sql ... --output-dir``).

Ji's Chapter 5 for the queries a user runs together: the source is read once, the filters
of each query that sit on its time-based window are pulled up into a shared filter tree
(identical conjunct sets shared, common conjuncts shared by a parent filter), and each
query's K-slack buffering (its ``--disorder``: ``none`` or ``kslack:K``) is laid out over
that tree as K-slack chains by a configuration algorithm (``--shared-buffers``: ``opt``,
the memory-optimal default; ``greedy``; ``chained``; ``unshared``), so queries with
different K share their buffering without waiting longer than their own K
(engines/disorder/shared_plan.py, shared_runtime.py). Each query then runs on its own
executor (its placement, row engine and MIGs, as ``hycq run`` would) with its own result
and metrics files.

What each query receives: the rows of its stream that pass its pulled-up filters, released
exactly as one K-slack buffer of its K on the source would release them. The filters run in
DuckDB over Arrow; a row whose referenced DOUBLE column is NaN is passed on regardless (the
engines compare NaN differently, docs/semantics.md) and the query's own selection, still in
its plan, decides it. The query's clock is told the source's progress (the buffer's bound,
``T - K``) and the source's first and last timestamps, so its instants are the ones it would
have run alone even when its filters drop the stream's first or last tuples.

``--disorder max`` (K = the largest delay seen so far) re-places the buffers whenever K
grows (Ji's eager adaptation with smart buffer reuse, ``SharedSubplan.reconfigure``).

Limits (exit 2 with a message): every query reads the one same stream; ``--disorder`` is
``none``, ``kslack:K`` or ``max`` (``quality`` would need each query's model fed from its own
engine); count-based slides (ROWS ... SLIDE n) are not shared.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from engines.disorder.shared_plan import (
    ALGORITHMS,
    Configuration,
    Node,
    describe,
    filt,
    leaf,
    memory,
    source,
)
from engines.disorder.shared_runtime import SharedSubplan
from engines.disorder.spec import DisorderSpec
from optimizer.ir.errors import OptionError
from optimizer.ir.expr import Expr, columns_used, conjuncts
from optimizer.ir.plan import LogicalPlan, Select, Window, WindowKind
from optimizer.ir.plan import Source as SourceOp
from optimizer.ir.types import DataType

#: Rows of the source's first batch used to measure the shared filters' selectivities.
SAMPLE_ROWS = 20_000


@dataclass
class SharedQuery:
    """One query of a shared run: its name (output file stem), plan, catalog, placement,
    K-slack size (ticks of the stream's unit) and output paths."""

    name: str
    plan: LogicalPlan
    placement: dict[str, str]
    disorder: DisorderSpec
    kappa: int
    output: Path
    metrics: Path
    #: Filled in by the run.
    sink: Any = None
    engine: Any = None
    assembly: Any = None
    latencies: list[float] = field(default_factory=list)
    last_instant: int | None = None
    tuples_in: int = 0
    late: int = 0
    arrival: float = 0.0


def source_stream(plan: LogicalPlan) -> SourceOp:
    """The one Source of ``plan`` (OptionError for a query over several streams)."""
    sources = [plan.op(i) for i in plan.sources]
    streams = {s.stream for s in sources if isinstance(s, SourceOp)}
    if len(streams) != 1:
        raise OptionError(
            f"a shared run takes queries over one stream; this one reads {sorted(streams)}",
            hint="run queries over several streams one at a time",
        )
    op = sources[0]
    assert isinstance(op, SourceOp)
    return op


def pulled_filters(plan: LogicalPlan) -> list[Expr]:
    """The conjuncts of the selections that sit directly on a time-based window of the
    source: filtering commutes with those windows, so they may run before the windows (and
    before K-slack buffers). Count-based windows keep theirs."""
    out: list[Expr] = []
    for src_id in plan.sources:
        for win_id in plan.consumers(src_id):
            win = plan.op(win_id)
            if not isinstance(win, Window) or win.window is WindowKind.ROWS or win.slide_rows:
                continue
            for sel_id in plan.consumers(win_id):
                sel = plan.op(sel_id)
                if isinstance(sel, Select) and len(plan.consumers(win_id)) == 1:
                    out.extend(conjuncts(sel.predicate))
    return out


class FilterEvaluator:
    """Shared filters evaluated by DuckDB over Arrow tables of the source's columns."""

    def __init__(self, columns: list[str], types: list[DataType]) -> None:
        import duckdb

        self.columns = columns
        self.types = types
        self.con = duckdb.connect()
        self.con.execute("SET threads = 1")

    def sql(self, exprs: list[Expr]) -> str:
        """``exprs`` AND-ed, in DuckDB SQL over the source's column names, or-ed with "a
        referenced DOUBLE column is NaN" (the engine's own selection decides those rows)."""
        from sqlglot import exp

        from engines.sqlgen.dialect_table import get_dialect
        from engines.sqlgen.expressions import ExprTranslator

        def column(i: int) -> exp.Expr:
            return exp.column(self.columns[i], quoted=True)

        tr = ExprTranslator(get_dialect("duckdb"), column)
        parts = [f"({tr.scalar(e).sql(dialect='duckdb')})" for e in exprs]
        text = " AND ".join(parts) if parts else "TRUE"
        nan = sorted(
            {c for e in exprs for c in columns_used(e) if self.types[c] is DataType.DOUBLE}
        )
        if nan:
            text = f"({text}) OR " + " OR ".join(
                f"isnan({column(c).sql(dialect='duckdb')})" for c in nan
            )
        return text

    def predicate(self, exprs: list[Expr]) -> Callable[[pa.Table], np.ndarray]:
        """A callable: the row indices of a table that pass ``exprs``."""
        where = self.sql(exprs)
        con = self.con

        def rows(table: pa.Table) -> np.ndarray:
            indexed = table.append_column(
                "__shared_row", pa.array(np.arange(table.num_rows, dtype=np.int64))
            )
            con.register("__shared_in", indexed)
            try:
                got = con.sql(
                    f"SELECT __shared_row FROM __shared_in WHERE {where} ORDER BY 1"
                ).to_arrow_table()
            finally:
                con.unregister("__shared_in")
            return np.asarray(got.column(0).to_numpy(), dtype=np.int64)

        return rows

    def close(self) -> None:
        self.con.close()


def build_tree(
    queries: list[SharedQuery], evaluator: FilterEvaluator, stream: str
) -> tuple[Node, dict[str, str]]:
    """The shared filter tree: a filter node per distinct conjunct set of the queries and
    per non-empty intersection of two of them (so common conjuncts are shared), each under
    its largest proper subset (the source if none); each node filters by the conjuncts it
    adds to its parent; a query's leaf hangs under its own set. Returns the tree and, per
    filter node, the SQL it evaluates (for the report)."""
    sets: dict[str, frozenset[str]] = {}
    by_key: dict[str, Expr] = {}
    for q in queries:
        keys = set()
        for e in pulled_filters(q.plan):
            k = evaluator.sql([e])
            by_key[k] = e
            keys.add(k)
        sets[q.name] = frozenset(keys)
    family = {s for s in sets.values() if s}
    changed = True
    while changed:  # close under pairwise intersection
        changed = False
        for a in list(family):
            for b in list(family):
                c = a & b
                if c and c not in family:
                    family.add(c)
                    changed = True
    ordered = sorted(family, key=lambda s: (len(s), sorted(s)))
    parent: dict[frozenset[str], frozenset[str] | None] = {}
    for s in ordered:
        subs = [t for t in ordered if t < s]
        parent[s] = max(subs, key=lambda t: (len(t), sorted(t))) if subs else None
    names = {s: f"F{i + 1}" for i, s in enumerate(ordered)}
    nodes: dict[frozenset[str] | None, Node] = {None: source(stream)}
    sql: dict[str, str] = {}
    for s in ordered:
        p = parent[s]
        extra = sorted(s - (p or frozenset()))
        pred = evaluator.predicate([by_key[k] for k in extra])
        node = filt(names[s], 1.0, predicate=pred)
        sql[names[s]] = evaluator.sql([by_key[k] for k in extra])
        nodes[s] = node
        nodes[p].children.append(node)
    for q in queries:
        key = sets[q.name] or None
        nodes[key].children.append(leaf(q.name, f"leaf:{q.name}"))
    return nodes[None], sql


def measure_selectivities(root: Node, sample: pa.Table) -> None:
    """Each filter's selectivity on ``sample`` (its share of what reaches it; a filter that
    passes nothing of the sample is given one row's worth, so it stays a valid filter)."""

    def go(v: Node, rows: pa.Table) -> None:
        if v.is_filter:
            n = rows.num_rows
            kept = rows.take(pa.array(v.predicate(rows))) if n else rows
            v.selectivity = max(kept.num_rows, 1) / max(n, 1) if n else 1.0
            v.selectivity = min(1.0, v.selectivity)
            rows = kept
        for c in v.children:
            go(c, rows)

    go(root, sample)


def configure(
    root: Node, queries: list[SharedQuery], algorithm: str
) -> tuple[Configuration, float]:
    """The buffer configuration by ``algorithm`` and the microseconds it took."""
    kappa = {q.name: q.kappa for q in queries}
    t0 = time.perf_counter()
    config = ALGORITHMS[algorithm](root, kappa)
    return config, (time.perf_counter() - t0) * 1e6


def shared_report(
    root: Node, config: Configuration, queries: list[SharedQuery], sub: SharedSubplan,
    sql: dict[str, str], compute_us: float, rate: float,
) -> dict[str, Any]:  # fmt: skip
    """What ``shared.json`` records: the tree, the configuration, its predicted and measured
    buffered tuples, and what the unshared configuration would have held (predicted)."""
    kappa = {q.name: q.kappa for q in queries}
    tree = [
        {
            "name": v.name,
            "kind": v.kind,
            "selectivity": v.selectivity,
            "children": [c.name for c in v.children],
            **({"where": sql[v.name]} if v.name in sql else {}),
        }
        for v in root.walk()
    ]
    adaptations = sub.adaptations
    return {
        "algorithm": config.algorithm,
        "compute_us": compute_us,
        "adaptations": len(adaptations),
        "adaptation_us_mean": (
            sum(a.micros + a.release_micros for a in adaptations) / len(adaptations)
            if adaptations
            else None
        ),
        "tuples_migrated": sum(a.tuples_migrated for a in adaptations),
        "kappa_ticks": kappa,
        "tree": tree,
        "buffers": describe(sub.config),
        "buffered_mean": sub.held_mean(),
        "buffered_peak": sub.held_peak,
        "predicted_buffered": memory(root, sub.config, rate),
        "predicted_unshared": memory(root, ALGORITHMS["unshared"](root, kappa), rate),
    }


def write_json(path: Path, obj: Any) -> None:
    from engines.output_files import write_bytes
    from engines.runtime.safe_json import json_text

    write_bytes(path, json_text(obj), str(path))


def run_queries(
    queries: list[SharedQuery],
    catalog: Any,
    options: Any,
    algorithm: str = "opt",
    settings: Any = None,
    shared_json: Path | None = None,
) -> dict[str, Any]:
    """Run ``queries`` over their one shared stream (module docstring): read it once, push
    it through the shared filter tree and buffer configuration, run each query's executor
    on what it receives. Writes each query's output and metrics, and ``shared_json``.
    Returns the summary (``shared_json``'s content plus the per-query metrics)."""
    from engines import input_wait
    from engines.assembly import Assembly
    from engines.interrupts import GracefulStop, StopRequested
    from engines.runtime.dead_letters import DeadLetters, check_rejections
    from engines.runtime.inputs import MergedInputs, open_inputs
    from engines.runtime.live_lag import LagMeter
    from engines.runtime.loop import _live, _Stoppable, _until_stopped
    from engines.runtime.sinks import ResultSink, output_schema

    src = source_stream(queries[0].plan)
    for q in queries[1:]:
        other = source_stream(q.plan)
        if other.stream != src.stream or other.time_unit != src.time_unit:
            raise OptionError(
                f"query {q.name} reads stream '{other.stream}' ({other.time_unit}), "
                f"query {queries[0].name} reads '{src.stream}' ({src.time_unit})",
                hint="a shared run takes queries over one stream",
            )
        if (
            q.plan.op(q.plan.sources[0]).schema
            != queries[0].plan.op(queries[0].plan.sources[0]).schema
        ):
            raise OptionError(f"query {q.name} reads '{src.stream}' with other columns")
    stream = src.stream
    stream_def = catalog.get(stream)
    t_index = stream_def.time_index
    columns = [c.name for c in stream_def.columns]
    types = [c.dtype for c in queries[0].plan.op(queries[0].plan.sources[0]).schema]
    names = options.names
    dead = DeadLetters(options.dead_letter, names.dead_letter)
    inputs = open_inputs(queries[0].plan, catalog, options, dead)
    stop = GracefulStop(options.stop_on_signal)
    made: list[SharedQuery] = []
    evaluator = FilterEvaluator(columns, types)
    try:
        for q in queries:
            q.sink = ResultSink(output_schema(q.plan), str(q.output), False, f"{q.name} output")
            late_insert = options.late == "insert" or (
                options.late is None and q.disorder.buffered
            )  # as ``hycq run --late`` decides it for the query alone
            q.assembly = Assembly(q.plan, q.placement, settings, late_insert=late_insert)
            made.append(q)
            engine = q.assembly.make_engine(_emitter(q, stop), _late_handler(q, dead, columns))
            q.engine = _Stoppable(engine)  # a stop cuts an instant's work short (run_plan)
        merged = MergedInputs(queries[0].plan, inputs, options.duration, dead)
        items = iter(merged)
        first = next(items, None)
        root, sql = build_tree(queries, evaluator, stream)
        sample = first[1].slice(0, SAMPLE_ROWS) if first is not None else None
        if sample is not None:
            measure_selectivities(root, pa.Table.from_batches([sample]))
        config, compute_us = configure(root, queries, algorithm)
        sub = SharedSubplan(root, config, {q.name: q.kappa for q in queries}, columns[t_index])
        valid = 0
        lo_all: int | None = None
        hi_all: int | None = None
        max_delay = 0
        wall0 = time.perf_counter()
        # a live source is judged by lag, as in ``hycq run`` (engines/runtime/live_lag.py)
        live = LagMeter(1000 // {"s": 1000, "ms": 1}[src.time_unit])
        live_run = any(_live(i) for i in merged.inputs)
        if first is not None and first[1].num_rows:
            first_ts = first[1].column(t_index).to_numpy(zero_copy_only=False).min()
            live.start(wall0, input_wait.waited(), int(first_ts))
        pending = [first] if first is not None else []
        for item in _until_stopped(itertools.chain(pending, items), stop):
            batch = item[1]
            valid += batch.num_rows
            ts = np.asarray(batch.column(t_index).to_numpy(zero_copy_only=False), dtype=np.int64)
            lo, hi = int(ts.min()), int(ts.max())
            lo_all = lo if lo_all is None else min(lo_all, lo)
            hi_all = hi if hi_all is None else max(hi_all, hi)
            if any(q.disorder.kind == "max" for q in queries):
                # Max-K-slack: K = the largest delay seen so far, this batch's included (as
                # the single-query buffer asks its policy after observing the batch).
                before = np.maximum.accumulate(ts)
                if sub.top is not None:
                    before = np.maximum(before, sub.top)
                delay = int((np.concatenate([[before[0]], before[:-1]]) - ts).max())
                if delay > max_delay:
                    max_delay = delay
                    _adapt(sub, root, queries, algorithm, max_delay, stream, t_index)
            released = sub.push(batch)
            assert sub.top is not None
            for q in queries:
                bound = sub.top - q.kappa
                seen = lo_all <= bound  # the source's first tuple is released for q
                with contextlib.suppress(StopRequested):
                    if seen:  # the clock starts there, before q's own tuples fire anything
                        q.engine.saw_range(stream, lo_all, lo_all)
                    _deliver(q, stream, released.get(f"leaf:{q.name}"), t_index)
                    if seen:
                        q.engine.saw_range(stream, lo_all, bound)
            live.taken(time.perf_counter(), input_wait.waited(), hi)
        if not stop.requested:
            released = sub.flush()
            for q in queries:
                with contextlib.suppress(StopRequested):
                    if lo_all is not None:
                        q.engine.saw_range(stream, lo_all, lo_all)
                    _deliver(q, stream, released.get(f"leaf:{q.name}"), t_index)
                    if lo_all is not None and hi_all is not None:
                        q.engine.saw_range(stream, lo_all, hi_all)
                    q.engine.end_stream(stream)
                    q.engine.finish()
        wall = time.perf_counter() - wall0
        if not stop.requested:
            check_rejections(merged.inputs, {stream: valid}, valid, dead, names)
        for q in queries:
            q.sink.close()
        dead.close()
    except BaseException:
        for q in made:
            if q.sink is not None:
                q.sink.abort()
        dead.abort()
        raise
    finally:
        stop.restore()
        evaluator.close()
        for q in made:
            if q.assembly is not None:
                q.assembly.close()
    tps = 1000 // {"s": 1000, "ms": 1}[src.time_unit]
    event_s = (hi_all - lo_all + 1) / tps if lo_all is not None and hi_all is not None else 0.0
    rate = valid / event_s if event_s else 0.0
    report = shared_report(root, config, queries, sub, sql, compute_us, rate / tps)
    per_query = {}
    for q in queries:
        m = _query_metrics(q, valid, wall, rate, tps, stop)
        if live_run:
            m.update(kept_up=live.kept_up(event_s), kept_up_rule="lag", live_lag_s=live.growth)
        write_json(q.metrics, m)
        per_query[q.name] = m
    summary = {
        "stream": stream,
        "tuples_in": valid,
        "wall_s": wall,
        "throughput": valid / wall if wall > 0 else 0.0,
        "rate": rate,
        "dead_letter": dead.count,
        "interrupted": _signal_name(stop),
        "shared": report,
        "queries": {q.name: {"output": str(q.output), "metrics": str(q.metrics)} for q in queries},
    }
    if shared_json is not None:
        write_json(shared_json, summary)
    return {**summary, "metrics": per_query}


def _adapt(
    sub: SharedSubplan, root: Node, queries: list[SharedQuery], algorithm: str, k: int,
    stream: str, t_index: int,
) -> None:  # fmt: skip
    """The ``max`` queries' K becomes ``k``: a new configuration, reconfigured with smart
    buffer reuse (engines/disorder/shared_runtime.py); what it releases at once is
    delivered."""
    from engines.interrupts import StopRequested

    for q in queries:
        if q.disorder.kind == "max":
            q.kappa = k
    kappa = {q.name: q.kappa for q in queries}
    out, _ = sub.reconfigure(ALGORITHMS[algorithm](root, kappa), kappa, "smart")
    for q in queries:
        with contextlib.suppress(StopRequested):
            _deliver(q, stream, out.get(f"leaf:{q.name}"), t_index)


def _emitter(q: SharedQuery, stop: Any) -> Callable[[int, Any], None]:
    from engines import interrupts
    from engines.interrupts import StopRequested

    def emit(instant: int, rows: Any) -> None:
        with interrupts.held():  # an instant is written whole or not at all
            q.sink.write(instant, rows)
            q.latencies.append((time.perf_counter() - q.arrival) * 1e3)
            q.last_instant = instant
        if stop.requested:
            raise StopRequested

    return emit


def _late_handler(
    q: SharedQuery, dead: Any, columns: list[str]
) -> Callable[[str, tuple[Any, ...], str], None]:
    from engines import interrupts

    def on_late(stream: str, row: tuple[Any, ...], reason: str) -> None:
        note = f"; its delay exceeded the K-slack of query {q.name} (K = {q.kappa} ticks)"
        with interrupts.held():  # a dead letter is written whole
            q.late += 1
            dead.add(
                stream,
                dict(zip(columns, row, strict=False)),
                f"query {q.name}: {reason}{note if q.kappa else ''}",
                "late",
            )

    return on_late


def _deliver(q: SharedQuery, stream: str, rb: Any, t_index: int) -> None:
    """Hand ``q`` what the shared buffers released for it (its latencies count from here)."""
    q.arrival = time.perf_counter()
    if rb is None or rb.num_rows == 0:
        return
    q.tuples_in += rb.num_rows
    q.engine.ingest(stream, rb, t_index)


def _signal_name(stop: Any) -> str | None:
    import signal

    return signal.Signals(stop.signum).name if stop.signum is not None else None


def _query_metrics(
    q: SharedQuery, source_rows: int, wall: float, rate: float, tps: int, stop: Any
) -> dict[str, Any]:
    """A query's metrics file in a shared run: the fields of ``hycq run --metrics`` that
    apply to one query of several (docs/shared-queries.md)."""
    lat = q.latencies
    ops = q.assembly.operator_metrics() if q.assembly is not None else {}
    for op_id, m in ops.items():
        m.setdefault("engine", q.placement.get(op_id, "row"))
    throughput = source_rows / wall if wall > 0 else 0.0
    return {
        "query": q.name,
        "tuples_in": q.tuples_in,
        "source_tuples": source_rows,
        "wall_s": wall,
        "throughput": throughput,
        "rate": rate,
        "kept_up": bool(throughput >= rate),
        "results": q.sink.rows,
        "instants": len(lat),
        "latency_ms": {
            "p50": float(np.percentile(lat, 50)) if lat else None,
            "p99": float(np.percentile(lat, 99)) if lat else None,
        },
        "placement": q.placement,
        "dead_letter": q.late,
        "dead_letter_reasons": {"late": q.late} if q.late else {},
        "interrupted": _signal_name(stop),
        "last_instant": q.last_instant,
        "disorder": {"policy": q.disorder.text(), "k_s": q.kappa / tps},
        "operators": ops,
    }

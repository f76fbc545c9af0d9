"""The run loop: inputs through the engine to the sink, paced, stoppable, measured."""

from __future__ import annotations

import contextlib
import gc
import resource
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engines import input_wait, interrupts
from engines.interrupts import GracefulStop, StopRequested
from engines.output_files import check_distinct, check_writable, write_bytes
from engines.runtime.checkpoint import Checkpointer, Recorder, Reread, check_output
from engines.runtime.checkpoint_store import Loaded, restore_partial
from engines.runtime.dead_letters import DeadLetters, check_rejections
from engines.runtime.engine import Assembled, PlanExecutor, Rows
from engines.runtime.inputs import MergedInputs, open_inputs, plan_time_unit
from engines.runtime.live_lag import LagMeter, tolerance_s
from engines.runtime.options import RunOptions
from engines.runtime.resources import MemoryGuard, progress_bar, rss_mb
from engines.runtime.safe_json import json_text
from engines.runtime.sinks import ResultSink, output_schema
from engines.runtime.stream_input import StreamInput
from engines.runtime.timeline import Timeline
from engines.sources.mqtt import is_mqtt
from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import OptionError
from optimizer.ir.plan import LogicalPlan


@dataclass
class RunResult:
    """What a run produced: the result table (when kept in memory) and its metrics."""

    table: pa.Table | None
    metrics: dict[str, Any]
    #: Live objects of the run (e.g. its MIG operators) for benchmarks and tests; not JSON.
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def dead_letter(self) -> int:
        return int(self.metrics["dead_letter"])


def run_plan(
    plan: LogicalPlan,
    catalog: Catalog,
    options: RunOptions,
    assembly: Assembled,
    inputs: list[StreamInput] | None = None,
    extra: dict[str, Any] | None = None,
) -> RunResult:
    """Run ``plan`` over its inputs with the engine ``assembly`` wires
    (``engines.assembly``): ``assembly.make_engine(emit, on_late)`` once the output exists.

    The engine calls ``emit(T, rows)`` with the results of each instant and
    ``on_late(stream, row, reason)`` for each late tuple it rejects. The metrics carry the
    assembly's per-operator and extra figures, then ``extra`` (the caller's: predicted
    cost, join choices).
    """
    placement = assembly.placement
    names = options.names
    outputs = [
        (names.output, options.output),
        (names.metrics, options.metrics),
        (names.dead_letter, options.dead_letter),
    ]
    check_distinct([(names.data, str(v)) for v in options.data.values()], outputs)
    for option, path in outputs[1:]:
        if path is not None:
            check_writable(path, option)
    ckpt = _checkpointer(plan, placement, options, catalog)
    loaded = ckpt.loaded if ckpt is not None else None
    resume_floor = loaded.last_instant if loaded is not None else None
    file_output = options.output not in (None, "-") and not is_mqtt(options.output)
    # Created first: file readers send the rows they reject to it while the run reads them.
    dead = DeadLetters(options.dead_letter, names.dead_letter)
    if ckpt is not None and options.dead_letter is not None:
        dead.partial, dead.append = ckpt.partial_dead_letter, loaded is not None
    if loaded is not None:
        dead.restore(loaded.manifest["dead"])
    if inputs is None:
        inputs = open_inputs(plan, catalog, options, dead)
    #: the inputs a resumed run reads again from their start (files, generators)
    rereads = {i.stream.name: i.description for i in inputs if not _live(i)}
    if loaded is not None:
        before = loaded.manifest["dead"]["by_stream"]
        dead.mute = {s: int(n) for s, n in before.items() if s in rereads}
    stop = GracefulStop(options.stop_on_signal)
    try:
        sink = ResultSink(
            output_schema(plan),
            options.output,
            options.keep_results,
            names.output,
            partial=ckpt.partial_output if ckpt is not None and file_output else None,
            append=loaded is not None,
        )
    except BaseException:
        stop.restore()
        raise
    if loaded is not None:
        sink.rows = int(loaded.manifest["results"])
    latencies: list[float] = []
    arrival = [0.0]
    last_instant: list[int | None] = [resume_floor]
    timeline = Timeline(1)  # its time base is set once the inputs are merged

    merged: MergedInputs | None = None
    #: Per emitted instant with buffers: the arrival that let it fire, minus the instant.
    event_lags: list[int] = []

    def emit(instant: int, rows: Rows | pa.Table) -> None:
        if resume_floor is not None and instant <= resume_floor:
            return  # emitted before the checkpoint a resumed run replayed
        # An instant is written whole or not at all: a stop inside waits for its end.
        with interrupts.held():
            sink.write(instant, rows)
            now = time.perf_counter()
            latency = (now - arrival[0]) * 1e3
            latencies.append(latency)
            if merged is not None and merged.buffers:
                needed = merged.arrived_when_past(instant)
                if needed is not None:
                    event_lags.append(max(0, needed - instant))
            timeline.emitted(instant, len(rows), latency, now)
            last_instant[0] = instant
            if live_run:  # the work an instant needs counts, also after the last batch
                live_lag.taken(now, input_wait.waited(), instant)
        if stop.requested:  # checked at every instant: one input batch may fire millions
            raise StopRequested

    columns = {s.name: [c.name for c in s.columns] for s in catalog.streams.values()}

    def on_late(stream: str, row: tuple[Any, ...], reason: str) -> None:
        if recorder is not None and recorder.replaying:
            return  # set aside before the checkpoint: the dead-letter file holds it
        with interrupts.held():  # a dead letter is written whole
            if merged is not None:
                if stream in merged.buffers:
                    merged.buffers[stream].stats.late_dropped += 1
                reason += merged.late_note(stream)
            row_dict = dict(zip(columns.get(stream, []), row, strict=False))
            dead.add(stream, row_dict, reason, "late")

    engine: PlanExecutor
    recorder: Recorder | None = None
    reread: Reread | None = None
    try:
        engine = assembly.make_engine(emit, on_late)
    except StopRequested:  # stopped while the engines started (Spark): nothing read or emitted
        engine = _Idle()
    except BaseException:
        stop.restore()
        sink.abort()
        raise
    late = late_policy(engine)  # asked of the engine itself, before it is wrapped
    engine = _Stoppable(engine)
    if ckpt is not None:
        recorder = Recorder(engine)
        engine = recorder
        if loaded is not None:
            reread = Reread(loaded, recorder, rereads)
        else:
            recorder.digest(sorted(rereads))
    try:
        merged = MergedInputs(
            plan,
            inputs,
            options.duration,
            dead,
            options.disorder,
            {
                **options.disorder_params,
                "plan": plan,
                "quality": options.quality,
                "late": late,
            },
            options.idle_timeout,
        )
    except BaseException:
        stop.restore()
        sink.abort()
        raise
    inputs = merged.inputs  # the streams the plan reads
    tps = merged.tps  # ticks per second of the query's time base
    timeline.tps = tps
    total_expected = sum(i.expected_rows or 0 for i in inputs) or None
    progress = progress_bar(options, total_expected)
    tuples_in = 0
    valid: dict[str, int] = {}  # rows per stream that passed validation (and the cut)
    fresh: dict[str, int] = {}  # of those, the rows this process ingested (not skipped)
    spans: dict[str, tuple[int, int]] = {}  # (min, max) timestamp per stream
    min_ts: int | None = None
    max_ts: int | None = None
    realtime = options.pace == "realtime"
    rss_timeline: list[list[float]] = []
    sample_every = 10  # event-seconds between RSS samples
    next_sample = 0
    wall_start = time.perf_counter()
    timeline.start(wall_start)
    lag_max = 0.0
    #: a live source is judged by lag (engines/runtime/live_lag.py), not by the nominal rate
    live_run = any(_live(i) for i in inputs)
    live_lag = LagMeter(tps)
    memory = MemoryGuard(options.memory_limit_mb, options.names)
    # Window contents are long-lived and acyclic: keep the cyclic GC from re-scanning
    # millions of tuples in every full collection during the run (re-enabled afterwards).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    skipped = 0
    replay: dict[str, Any] = {}

    def checkpoint(step: bool = True) -> None:
        """Write a checkpoint if one is due (``step`` False: by the clock alone, while the
        loop waits for input or for the wall clock); the run stands between two pieces."""
        if ckpt is not None and not stop.requested and ckpt.due(step):
            _write_checkpoint(ckpt, recorder, last_instant[0], sink, dead, len(latencies), reread)

    try:
        if loaded is not None:
            assert recorder is not None
            time_index = {i.stream.name: i.stream.time_index for i in inputs}
            with contextlib.suppress(StopRequested):  # stopped while replaying: ends below
                replay = _replay(loaded, recorder, time_index)
        elif ckpt is not None:  # an empty first one: a crash before the next is resumable too
            _write_checkpoint(ckpt, recorder, last_instant[0], sink, dead)
        # While a live source is quiet, its wait gives the loop its turn (a checkpoint).
        on_wait = (lambda: checkpoint(step=False)) if ckpt is not None else None
        # Pieces of at most this many rows: checkpoints follow the wall clock, whatever the
        # size of the batches a source delivers (a generator's second at a high rate).
        limit = options.read_batch_rows if ckpt is not None else None
        # One slice at a time, read from the sources only when the engine has taken the
        # previous one (at most one pending batch per stream): there is no queue, so a plan
        # that cannot keep up slows the reading down (backpressure) instead of buffering a
        # backlog (at realtime pace it falls behind the wall clock: kept_up false).
        for inp, whole in _until_stopped(iter(merged), stop, on_wait):
            if stop.requested:
                break
            name = inp.stream.name
            t_index = inp.stream.time_index
            if whole.num_rows == 0:  # a quiet live stream's idle report (engines/time_merge.py)
                with contextlib.suppress(StopRequested):
                    merged.tell(engine)
                continue
            if reread is not None and reread.skipping(name):  # rows the replayed log held
                rest = reread.take(name, whole)
                taken = whole.num_rows - (0 if rest is None else rest.num_rows)
                valid[name] = valid.get(name, 0) + taken
                skipped += taken
                if rest is None:
                    merged.take_tells()  # told to the engine in the replay
                    continue
                whole = rest
            valid[name] = valid.get(name, 0) + whole.num_rows
            fresh[name] = fresh.get(name, 0) + whole.num_rows
            for batch in _pieces(whole, t_index, tps, realtime, limit):
                lo = int(pc.min(batch.column(t_index)).as_py())
                hi = int(pc.max(batch.column(t_index)).as_py())
                if min_ts is None:
                    min_ts = lo
                    live_lag.start(time.perf_counter(), input_wait.waited(), lo)
                if realtime:
                    due = wall_start + (lo - min_ts) / tps
                    now = time.perf_counter()
                    if due > now:
                        _sleep_until(stop, due, ckpt, lambda: checkpoint(step=False))
                    else:
                        lag_max = max(lag_max, now - due)
                if stop.requested:
                    break
                # End-to-end latency counts from the arrival that released the tuples from a
                # K-slack buffer (docs/disorder.md), else from when the loop took them.
                released_at = merged.arrival_wall()
                arrival[0] = released_at if released_at is not None else time.perf_counter()
                timeline.tuples(batch.column(t_index), lo, hi)
                try:
                    merged.tell(engine)
                except StopRequested:  # a stop at an instant the streams' progress fired
                    break
                # A stop at an instant (emit) or during an engine restart cuts the batch's
                # firing short; it was taken.
                with contextlib.suppress(StopRequested):
                    engine.ingest(name, batch, t_index)
                tuples_in += batch.num_rows
                min_ts = min(min_ts, lo)
                max_ts = hi if max_ts is None else max(max_ts, hi)
                live_lag.taken(time.perf_counter(), input_wait.waited(), hi)
                s_lo, s_hi = spans.get(name, (lo, hi))
                spans[name] = (min(s_lo, lo), max(s_hi, hi))
                if progress is not None:
                    progress.advance(batch.num_rows)
                if max_ts - min_ts >= next_sample:
                    rss_timeline.append([(max_ts - min_ts) / tps, rss_mb()])
                    next_sample += sample_every * tps
                memory.check(tuples_in)
                timeline.step_done(time.perf_counter())
                checkpoint()
        if ckpt is not None and stop.requested:  # interrupted: resume from here
            _write_checkpoint(ckpt, recorder, last_instant[0], sink, dead, len(latencies), reread)
        if reread is not None and not stop.requested:
            reread.finish()  # every skipped row was there (a shorter input is refused)
        if not stop.requested:
            arrival[0] = time.perf_counter()
            # End of input: fire the remaining instants. An interrupted run skips this: the
            # instants emitted so far (all before the last timestamp read) are exact, the
            # remaining ones would be computed as if the stream ended here.
            with contextlib.suppress(StopRequested):
                merged.tell(engine)
                engine.finish()
        wall_end = time.perf_counter()
        timeline.step_done(wall_end)
        wall_s = wall_end - wall_start
        if not stop.requested:
            check_rejections(inputs, valid, tuples_in + skipped, dead, names)
        table = sink.close()
        dead.close()
        if ckpt is not None and not stop.requested:
            ckpt.finished()
    except BaseException as err:
        sink.abort()
        if isinstance(err, KeyboardInterrupt):
            dead.abort()  # stopped at once: nothing is written
        else:  # the rows set aside so far are kept: they may say what went wrong
            try:
                dead.close()
            except Exception:  # noqa: BLE001 - the first error is the one to report
                dead.abort()
        raise
    finally:
        for inp in inputs:
            if inp.live is not None:
                inp.live.close()
        stop.restore()
        if gc_was_enabled:
            gc.enable()
        if progress is not None:
            progress.stop()

    event_s = (max_ts - min_ts + 1) / tps if min_ts is not None and max_ts is not None else 0.0
    # this process's part: a resumed run's skipped rows are not in ``spans``
    rate = sum(_density(i, fresh, spans, tps) for i in inputs)
    throughput = tuples_in / wall_s if wall_s > 0 else 0.0
    ops = assembly.operator_metrics(engine)
    for op_id, m in ops.items():
        m.setdefault("engine", placement.get(op_id, "row"))
        # u: the share of one core the operator needs to keep up with the data's own rate
        # (busy seconds per event-second), the dissertation's utilisation (Eq. 6.4).
        m["u"] = m["busy_s"] / event_s if event_s else None
    if realtime:  # the wall clock paces event time: how far the run fell behind it
        kept_up, rule = lag_max <= tolerance_s(event_s), "realtime"
    elif live_run:
        kept_up, rule = live_lag.kept_up(event_s), "lag"
    else:
        kept_up, rule = throughput >= rate, "throughput"
    metrics: dict[str, Any] = {
        "tuples_in": tuples_in,
        "wall_s": wall_s,
        "throughput": throughput,
        "rate": rate,
        "kept_up": bool(kept_up),
        "kept_up_rule": rule,
        "results": sink.rows,  # the output's: a resumed run's include those written before
        "instants": len(latencies) + (ckpt.instants_before if ckpt is not None else 0),
        "event_seconds": event_s,
        "latency_ms": {
            "p50": float(np.percentile(latencies, 50)) if latencies else None,
            "p99": float(np.percentile(latencies, 99)) if latencies else None,
        },
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "placement": placement,
        "dead_letter": dead.count,
        "dead_letter_reasons": dict(dead.by_kind),
        "interrupted": signal.Signals(stop.signum).name if stop.signum is not None else None,
        "last_instant": last_instant[0],
        "pace": options.pace,
        "max_lag_s": lag_max if realtime else None,
        "live_lag_s": live_lag.growth if live_run else None,
        "inputs": {i.stream.name: i.description for i in inputs},
        "rss_mb_timeline": rss_timeline,
        "operators": ops,
    }
    live = {i.stream.name: i.live.metrics() for i in inputs if i.live is not None}
    if live:
        metrics["live_sources"] = live
    if sink.publisher is not None:
        metrics["published_messages"] = sink.publisher.messages
        metrics["mqtt_output"] = sink.publisher.metrics()
    if ckpt is not None:
        metrics["checkpoint"] = ckpt.metrics()
        if loaded is not None:
            metrics["checkpoint"]["resumed"] = {
                "checkpoint": loaded.path.name,
                "instant": loaded.last_instant,
                "refused": loaded.refused,
                "skipped_rows": skipped,
                # what the run had done before this process: tuples_in, wall_s, throughput
                # and rate describe this process's part, results and instants the whole
                "tuples_before": sum(ckpt.delivered_before.values()),
                "instants_before": ckpt.instants_before,
                "results_before": int(loaded.manifest["results"]),
                **replay,
            }
    disorder = merged.disorder_metrics()
    inserted: dict[str, int] = getattr(getattr(engine, "clock", None), "late_inserted", {})
    for name, count in inserted.items():
        if disorder is not None and name in disorder:
            disorder[name]["late_inserted"] = count
    if disorder is not None or options.idle_timeout is not None or inserted:
        metrics["disorder"] = {
            "policy": options.disorder.text(),
            "streams": disorder or {},
            "quality": merged.policy_report(),
            "idle_timeout_s": options.idle_timeout,
            "idle_advanced": dict(merged.idle_advanced),
            "late": "insert" if getattr(engine, "late_insert", False) else "drop",
            "late_inserted": sum(inserted.values()),
            "latency_ms": {
                "p50": float(np.percentile(latencies, 50)) if latencies else None,
                "p99": float(np.percentile(latencies, 99)) if latencies else None,
                "max": float(max(latencies)) if latencies else None,
            },
            "event_latency_s": {
                "p50": float(np.percentile(event_lags, 50)) / tps if event_lags else None,
                "p99": float(np.percentile(event_lags, 99)) / tps if event_lags else None,
                "max": max(event_lags) / tps if event_lags else None,
            },
        }
    metrics.update(assembly.extra_metrics())
    metrics.update(extra or {})
    plans: Any = metrics.get("plans")  # a migrating run's plans: who emitted when
    starts = [p.get("from_instant") for p in plans] if isinstance(plans, list) and plans else None
    metrics["timeline"] = timeline.metrics(starts)
    if options.metrics is not None:
        write_bytes(options.metrics, json_text(metrics), names.metrics)
    return RunResult(table, metrics)


def late_policy(engine: Any) -> dict[str, str] | None:
    """Per input stream what the engine does with late tuples (``insert`` or ``drop``,
    :meth:`engines.row.executor.RowExecutor.late_policy`), None when the engine does not
    say (a migrating run: it drops them). A quality-driven policy prices it."""
    report = getattr(engine, "late_policy", None)
    return report() if callable(report) else None


def _checkpointer(
    plan: LogicalPlan, placement: dict[str, str], options: RunOptions, catalog: Catalog
) -> Checkpointer | None:
    """The run's checkpointer (None without ``--checkpoint``); a resumed one has loaded
    its checkpoint and restored the partial output files."""
    if options.checkpoint is None:
        return None
    check_output(options.output)
    if options.disorder.buffered:
        raise OptionError(
            "--checkpoint cannot be combined with a buffering --disorder policy yet: the "
            "K-slack buffers' contents are not part of a checkpoint",
            hint="drop --disorder (late tuples then follow --late), or drop --checkpoint",
        )
    ckpt = Checkpointer(options.checkpoint, plan, placement, options, plan_time_unit(plan), catalog)
    if ckpt.loaded is not None:
        sizes = ckpt.loaded.manifest["sizes"]
        restore_partial(ckpt.partial_output, options.output, sizes.get("output"), "output")
        dead_path = None if options.dead_letter is None else str(options.dead_letter)
        restore_partial(
            ckpt.partial_dead_letter, dead_path, sizes.get("dead_letter"), "dead-letter file"
        )
    return ckpt


def _replay(loaded: Loaded, recorder: Recorder, time_index: dict[str, int]) -> dict[str, Any]:
    """Feed a checkpoint's log to fresh engines (the output of its instants suppressed)."""
    start = time.perf_counter()
    rows = 0
    recorder.replaying = True
    try:
        for kind, stream, value in loaded.events():
            if kind == "i":
                recorder.ingest(stream, value, time_index[stream])
                rows += value.num_rows
            elif kind == "a":
                recorder.advance_stream(stream, value)
            else:
                recorder.end_stream(stream)
    finally:
        recorder.replaying = False
    return {"replayed_rows": rows, "replay_s": time.perf_counter() - start}


def _write_checkpoint(
    ckpt: Checkpointer,
    recorder: Recorder | None,
    last_instant: int | None,
    sink: ResultSink,
    dead: DeadLetters,
    instants: int = 0,
    reread: Reread | None = None,
) -> None:
    """A checkpoint of the run as it stands (none if nothing changed since the newest)."""
    assert recorder is not None
    sizes = {"output": sink.sync(), "dead_letter": dead.sync()}
    if ckpt.number and ckpt.unchanged(recorder, (last_instant, sizes, dead.count)):
        ckpt.skip()
        return
    if reread is not None:
        digests = reread.digests()
    else:
        digests = {s: d.hexdigest() for s, d in recorder.digests.items()}
    ckpt.write(recorder, last_instant, sizes, dead, sink.rows, instants, digests)


def _sleep_until(
    stop: GracefulStop, due: float, ckpt: Checkpointer | None, checkpoint: Callable[[], None]
) -> None:
    """Wait for the wall clock to reach ``due`` (realtime pace), writing the checkpoints that
    come due meanwhile; a stop request ends the wait."""
    while ckpt is not None and not stop.requested and ckpt.next_due < due:
        stop.sleep_until(ckpt.next_due)
        checkpoint()
    stop.sleep_until(due)


def _live(inp: StreamInput) -> bool:
    """A source a resumed run cannot read again from its start (MQTT, stdin, a pipe)."""
    return inp.live is not None or not inp.rereadable


def _density(
    inp: StreamInput, valid: dict[str, int], spans: dict[str, tuple[int, int]], tps: int
) -> float:
    """The input's rate: its requested density, or for a file replayed as it is the density
    it actually had (valid rows per event-second of the part read; ``spans`` in ticks of the
    query's time base, ``tps`` of them per second)."""
    name = inp.stream.name
    if not inp.measured or name not in spans:
        return inp.rate
    lo, hi = spans[name]
    seconds = (hi - lo + 1) / tps
    return valid.get(name, 0) / seconds


def _until_stopped(
    items: Iterator[tuple[StreamInput, pa.RecordBatch]],
    stop: GracefulStop,
    on_wait: Callable[[], None] | None = None,
) -> Iterator[tuple[StreamInput, pa.RecordBatch]]:
    """``items`` until a stop is requested (checked before each is read; a reader waiting
    on a pipe raises StopRequested, which ends the items too). While a reader waits (it
    polls for stop requests), ``on_wait`` runs at each poll."""
    while not stop.requested:
        try:
            with interrupts.waiting_for_input(on_wait):
                item = next(items)
        except (StopIteration, StopRequested):
            return
        yield item


class _Stoppable:
    """The engine as the run loop calls it: each call is an instant's work that a stop
    request interrupts where it is (engines.interrupts.interruptible), not only at the next
    instant; the engine is not used after that."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def ingest(self, stream: str, batch: pa.RecordBatch, time_column: int) -> int:
        with interrupts.interruptible():
            taken: int = self.engine.ingest(stream, batch, time_column)
            return taken

    def advance_stream(self, stream: str, ts: int) -> None:
        with interrupts.interruptible():
            self.engine.advance_stream(stream, ts)

    def end_stream(self, stream: str) -> None:
        with interrupts.interruptible():
            self.engine.end_stream(stream)

    def finish(self) -> None:
        with interrupts.interruptible():
            self.engine.finish()

    def saw_range(self, stream: str, lo: int, hi: int) -> None:
        """(A shared run's executors, hycq/shared_run.py.)"""
        with interrupts.interruptible():
            self.engine.saw_range(stream, lo, hi)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


class _Idle:
    """The engine of a run stopped before its engines started: takes nothing, fires nothing."""

    def ingest(self, stream: str, batch: pa.RecordBatch, time_column: int) -> int:
        return 0

    def advance_stream(self, stream: str, ts: int) -> None:
        return None

    def end_stream(self, stream: str) -> None:
        return None

    def finish(self) -> None:
        return None

    def operator_metrics(self) -> dict[str, dict[str, Any]]:
        return {}


def _pieces(
    batch: pa.RecordBatch, t: int, tps: int, realtime: bool, limit: int | None
) -> Iterator[pa.RecordBatch]:
    """The slices of ``batch`` the loop gives the engine one at a time: one per event-second
    at realtime pace (a file's batch spans many seconds), each at most ``limit`` rows (None:
    no limit); the whole batch otherwise."""
    pieces = _by_second(batch, t, tps) if realtime else iter((batch,))
    for piece in pieces:
        if limit is None or piece.num_rows <= limit:
            yield piece
            continue
        for start in range(0, piece.num_rows, limit):
            yield piece.slice(start, limit)


def _by_second(batch: pa.RecordBatch, t: int, tps: int) -> Iterator[pa.RecordBatch]:
    """Consecutive slices of ``batch``, one per event-second of the running maximum timestamp
    (arrival order is kept, so results do not change: lateness is per tuple)."""
    ts = batch.column(t).to_numpy(zero_copy_only=False)
    seconds = np.maximum.accumulate(ts) // tps
    cuts = np.flatnonzero(np.diff(seconds)) + 1
    start = 0
    for end in [*cuts.tolist(), batch.num_rows]:
        yield batch.slice(start, end - start)
        start = end

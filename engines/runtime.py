"""The run-time around an engine: sources, replay at a rate, pacing, sinks, dead letters, metrics.

``run_plan`` is what ``hycq run`` executes::

    sources (generator | CSV/Parquet replay, --rate rescales timestamps)
      -> validation (bad rows -> dead letter), conversion to the query's time base
      -> merge by event time across streams (engines.time_merge; --duration cuts)
      -> engine.ingest(stream, batch) / engine.advance_stream / engine.end_stream
      -> engine emits (T, rows) per slide instant  -> sink (+ `_ts`), latency per instant
    at the end: engine.finish(), sink committed atomically, metrics JSON

Everything stays Arrow until the engine: sources yield ``pyarrow.RecordBatch`` and validation
is vectorised. The row engine turns batches into tuples in its ``ingest``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import resource
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engines import stop as stop_flag
from engines.arrow_types import arrow_schema
from engines.defaults import DEFAULT_DURATION_S
from engines.stop import StopRequested
from engines.time_merge import TimeMerge
from optimizer.ir.catalog import TIME_UNITS_MS, Catalog, StreamDef
from optimizer.ir.errors import DataError, OptionError
from optimizer.ir.plan import LogicalPlan
from optimizer.ir.plan import Source as SourceOp
from optimizer.ir.plan import Window as WindowOp

Rows = list[tuple[Any, ...]]
#: ``on_late(stream, row, reason)``: an engine reports a late tuple it rejected.
OnLate = Callable[[str, tuple[Any, ...], str], None]


class Engine(Protocol):
    """What the run-time needs from an engine (the row engine's RowExecutor implements it).

    ``advance_stream(stream, ts)``: the stream's next tuple has running-maximum timestamp
    ``ts`` (its event-time progress); ``end_stream(stream)``: it has no tuple left.
    """

    def ingest(self, stream: str, batch: pa.RecordBatch, time_column: int) -> int: ...

    def advance_stream(self, stream: str, ts: int) -> None: ...

    def end_stream(self, stream: str) -> None: ...

    def finish(self) -> None: ...


@dataclass
class RunOptions:
    """Options of one run (the ``hycq run`` flags)."""

    rate: float | None = None
    duration: float | None = None
    pace: str = "max"
    data: dict[str, Path] = field(default_factory=dict)
    output: str | None = None  # path, or "-" for stdout
    keep_results: bool = False  # without output: keep the result table in memory (API, tests)
    metrics: Path | None = None
    dead_letter: Path | None = None
    progress: bool | None = None  # None: when stderr is a terminal
    batch_seconds: int = 1
    #: Rows per batch read from a data file (internal: tests vary it to show that results do
    #: not depend on batch sizes).
    read_batch_rows: int = 65536
    #: SIGINT/SIGTERM stop the run gracefully (the CLI): the loop stops between batches, the
    #: instants emitted so far are committed to the output, metrics say ``interrupted``. A
    #: second signal stops at once without committing. Off for API callers (and tests).
    stop_on_signal: bool = False


# -- sources -------------------------------------------------------------------------------


@dataclass
class StreamInput:
    """One input stream of a run: its catalog entry and its batches in arrival order."""

    stream: StreamDef
    batches: Iterator[pa.RecordBatch]
    rate: float  # tuples per event-second (density of the data)
    description: str
    expected_rows: int | None = None


def ticks_per_second(stream: StreamDef) -> int:
    """Ticks per second of the stream's own time unit (its raw timestamps)."""
    return 1000 // TIME_UNITS_MS[stream.time_unit]


def plan_time_unit(plan: LogicalPlan) -> str:
    """The query's time base: the unit the binder gave every source (the finest unit among
    the streams the query reads). Timestamps, windows, instants and ``_ts`` are in it."""
    units = {op.time_unit for op in plan.operators() if isinstance(op, SourceOp)}
    return min(units, key=lambda u: TIME_UNITS_MS[u]) if units else "s"


def plan_slides(plan: LogicalPlan) -> list[int]:
    """The slides (in ticks) of the plan's time-sliding windows: its instants are their
    multiples."""
    return sorted(
        {op.slide for op in plan.operators() if isinstance(op, WindowOp) and not op.slide_rows}
    )


def open_inputs(
    plan: LogicalPlan,
    catalog: Catalog,
    options: RunOptions,
    dead: DeadLetters | None = None,
) -> list[StreamInput]:
    """The input of every stream the plan reads, from --data files or the catalog's source.

    Bad rows of data files go to ``dead`` (and are skipped); without it they raise DataError.
    """
    names: list[str] = []
    for op_id in plan.sources:
        op = plan.op(op_id)
        assert isinstance(op, SourceOp)
        names.append(op.stream)
    known = {n.lower() for n in names}
    for given in options.data:
        if given.lower() not in known:
            raise OptionError(
                f"--data names stream '{given}', which the query does not read",
                hint=f"the query reads: {', '.join(names)}",
            )
    data = {k.lower(): v for k, v in options.data.items()}
    inputs = []
    for name in names:
        stream = catalog.get(name)
        assert stream is not None
        path = data.get(name.lower())
        if path is not None:
            inputs.append(_file_input(stream, path, None, options, dead))
        elif stream.source.kind == "generator":
            inputs.append(_generator_input(stream, options))
        elif stream.source.kind == "file":
            assert stream.source.path is not None
            inputs.append(
                _file_input(stream, stream.source.path, stream.source.format, options, dead)
            )
        else:
            raise DataError(
                f"stream '{name}' has no source in the catalog",
                hint=f"pass --data {name}=PATH (CSV or Parquet)",
            )
    return inputs


def _generator_input(stream: StreamDef, options: RunOptions) -> StreamInput:
    spec = stream.source
    rate = options.rate if options.rate is not None else stream.rate
    seconds = options.duration if options.duration is not None else DEFAULT_DURATION_S
    if spec.generator == "keyed":
        return _keyed_input(stream, rate, seconds, options)
    from engines.sources.smartplug import SmartPlugGenerator

    kwargs: dict[str, Any] = {
        k: v
        for k, v in spec.options
        if k in ("houses", "seed", "households_per_house", "plugs_per_household", "start")
    }
    gen = SmartPlugGenerator(rate=rate, **kwargs)
    return StreamInput(
        stream,
        gen.batches(seconds, options.batch_seconds),
        gen.rate,
        f"generator smartplug ({gen.houses} houses, {gen.plugs} plugs, seed {gen.seed})",
        expected_rows=gen.rows(seconds),
    )


def _keyed_input(
    stream: StreamDef, rate: float, seconds: float, options: RunOptions
) -> StreamInput:
    from engines.sources.keyed import DEFAULT_ORIGIN, KeyedGenerator, KeyedStream

    o = dict(stream.source.options)
    spec = KeyedStream(
        stream.name,
        rate=rate,
        keys=int(cast(int, o.get("keys", 100))),
        skew=float(cast(float, o.get("skew", 0.0))),
        start=float(cast(float, o.get("start", 0.0))),
        end=cast(float | None, o.get("end")),
        silent=cast(tuple[tuple[float, float], ...], o.get("silent", ())),
        time_unit=stream.time_unit,
    )
    gen = KeyedGenerator(
        spec,
        seed=int(cast(int, o.get("seed", 42))),
        origin=int(cast(int, o.get("origin", DEFAULT_ORIGIN))),
    )
    return StreamInput(
        stream,
        gen.batches(seconds, options.batch_seconds),
        rate,
        f"generator keyed ({rate:g} tuples/s, {spec.keys} keys, seed {gen.seed})",
        expected_rows=gen.rows(seconds),
    )


def _file_input(
    stream: StreamDef,
    path: Path,
    fmt: str | None,
    options: RunOptions,
    dead: DeadLetters | None = None,
) -> StreamInput:
    from engines.sources.files import OnBad, detect_format, read_batches

    if not path.exists():
        raise DataError(
            f"data file not found: {path}", hint="check the path given with --data STREAM=PATH"
        )
    if path.is_dir():
        raise DataError(
            f"data path is a directory, not a file: {path}",
            hint="give a CSV or Parquet file with --data STREAM=PATH",
        )
    tps = ticks_per_second(stream)
    if fmt is None:
        fmt = detect_format(path)
    on_bad: OnBad | None = None
    if dead is not None:
        unit = "row" if fmt == "parquet" else "line"
        name = stream.name

        def on_bad(number: int, raw: str, reason: str) -> None:
            # "row" is the line's text (Parquet: the row as JSON), not a dict of typed values.
            dead.add(name, cast(Any, raw), f"{path.name} {unit} {number}: {reason}")

    batches = read_batches(
        path,
        fmt,
        batch_rows=options.read_batch_rows,
        schema=arrow_schema(stream.schema),
        on_bad=on_bad,
    )
    t_index = stream.time_index
    if options.rate is not None:
        batches = _rescale(batches, t_index, options.rate, tps)
    rate = options.rate if options.rate is not None else stream.rate
    return StreamInput(stream, batches, rate, f"file {path}")


def _rescale(
    batches: Iterator[pa.RecordBatch], t: int, rate: float, tps: int
) -> Iterator[pa.RecordBatch]:
    """Replay at ``rate`` tuples per event-second: the i-th tuple gets ts0 + floor(i*tps/rate).

    This is the dissertation's replay tool: order is kept, density becomes ``rate``.
    """
    start: int | None = None
    index = 0
    for b in batches:
        n = b.num_rows
        if n == 0:
            continue
        if start is None:
            start = int(b.column(t)[0].as_py())
        i = np.arange(index, index + n, dtype=np.int64)
        index += n
        ts = start + np.floor(i * (tps / rate)).astype(np.int64)
        yield b.set_column(t, b.schema.field(t), pa.array(ts, type=b.schema.field(t).type))


class MergedInputs:
    """A run's inputs as one arrival sequence: every batch validated (bad rows to ``dead``)
    and converted to the query's time base, the streams merged by event time
    (``engines.time_merge``), ``duration`` seconds kept.

    Iterating yields ``(input, batch)``; before each ``engine.ingest`` call :meth:`tell`,
    which passes the streams' progress and ends reported since to the engine.
    """

    def __init__(
        self,
        plan: LogicalPlan,
        inputs: list[StreamInput],
        duration: float | None,
        dead: DeadLetters,
    ) -> None:
        reads = {op.stream for op in plan.operators() if isinstance(op, SourceOp)}
        # Inputs of streams the plan does not read (an API caller's extra tables) are skipped.
        inputs = [i for i in inputs if i.stream.name in reads]
        self.inputs = inputs
        self.time_unit = plan_time_unit(plan)
        self.tps = 1000 // TIME_UNITS_MS[self.time_unit]
        self.dead = dead
        self._progress: dict[str, int] = {}
        # Streams the plan reads without an input have ended from the start.
        self._ended: list[str] = sorted(reads - {i.stream.name for i in inputs})
        self.merge = TimeMerge(
            [(i.batches, i.stream.time_index) for i in inputs],
            grid=plan_slides(plan),
            prepare=self._prepare,
            span=duration * self.tps if duration is not None else None,
            on_progress=self._on_progress,
            on_end=self._on_end,
        )

    def __iter__(self) -> Iterator[tuple[StreamInput, pa.RecordBatch]]:
        for index, batch in self.merge:
            yield self.inputs[index], batch

    def tell(self, engine: Engine) -> None:
        """Pass the progress and ends reported since the last call on to ``engine``."""
        for name, key in self._progress.items():
            engine.advance_stream(name, key)
        self._progress.clear()
        for name in self._ended:
            engine.end_stream(name)
        self._ended.clear()

    def _on_progress(self, index: int, key: int) -> None:
        self._progress[self.inputs[index].stream.name] = key

    def _on_end(self, index: int) -> None:
        self._ended.append(self.inputs[index].stream.name)

    def _prepare(self, index: int, batch: pa.RecordBatch) -> pa.RecordBatch:
        stream = self.inputs[index].stream
        batch = validate(batch, stream.name, self.dead)
        return to_time_base(batch, stream, self.time_unit, self.dead)


def to_time_base(
    batch: pa.RecordBatch, stream: StreamDef, unit: str, dead: DeadLetters
) -> pa.RecordBatch:
    """The batch with its timestamps converted from the stream's unit to ``unit`` (a finer
    one, or the same). A timestamp too large to convert goes to ``dead``."""
    factor = TIME_UNITS_MS[stream.time_unit] // TIME_UNITS_MS[unit]
    if factor == 1 or batch.num_rows == 0:
        return batch
    t = stream.time_index
    ts = batch.column(t)
    field_type = batch.schema.field(t).type
    limit = (2**31 - 1 if field_type == pa.int32() else 2**63 - 1) // factor
    bad = pc.or_(pc.greater(ts, limit), pc.less(ts, -limit))
    if pc.any(bad).as_py():
        for row in batch.filter(bad).to_pylist():
            dead.add(
                stream.name,
                row,
                f"timestamp {row[stream.timestamp]} ({stream.time_unit}) does not fit in the "
                f"query's time base ({unit}): at most {limit}",
            )
        batch = batch.filter(pc.invert(bad))
        ts = batch.column(t)
    scaled = pc.multiply(ts.cast(pa.int64()), pa.scalar(factor, pa.int64())).cast(field_type)
    return batch.set_column(t, batch.schema.field(t), scaled)


# -- validation / dead letters ---------------------------------------------------------------


@dataclass
class DeadLetters:
    """Rejected input rows: counted always, written with their reason when a path is given."""

    path: Path | None
    count: int = 0
    by_kind: dict[str, int] = field(default_factory=lambda: {"invalid": 0, "late": 0})
    _fh: Any = None
    _tmp: Path | None = None

    def add(
        self, stream: str, row: dict[str, Any] | str, reason: str, kind: str = "invalid"
    ) -> None:
        """Count a rejected row (``kind`` invalid or late) and write it when a path is set."""
        self.count += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        if self.path is None:
            return
        if self._fh is None:
            self._tmp = _temp_beside(self.path)
            self._fh = self._tmp.open("w", encoding="utf-8")
        self._fh.write(json.dumps({"stream": stream, "reason": reason, "row": row}, default=str))
        self._fh.write("\n")

    def close(self) -> None:
        if self.path is None:
            return
        if self._fh is None:  # an empty dead-letter file still appears, so scripts can rely on it
            self._tmp = _temp_beside(self.path)
            self._tmp.write_text("")
        else:
            self._fh.close()
        assert self._tmp is not None
        os.replace(self._tmp, self.path)


def validate(batch: pa.RecordBatch, stream: str, dead: DeadLetters) -> pa.RecordBatch:
    """Drop rows with NULLs or non-finite floats (vectorised), sending them to ``dead``."""
    bad = None
    for col in batch.columns:
        mask = col.is_null()
        if pa.types.is_floating(col.type):
            mask = pc.or_(mask, pc.invert(pc.is_finite(col)))
        if col.null_count or pa.types.is_floating(col.type):
            bad = mask if bad is None else pc.or_(bad, mask)
    if bad is None or not pc.any(bad).as_py():
        return batch
    bad_rows = batch.filter(bad).to_pylist()
    for row in bad_rows:
        reasons = []
        for name, value in row.items():
            if value is None:
                reasons.append(f"missing value in column '{name}'")
            elif isinstance(value, float) and not math.isfinite(value):
                reasons.append(f"non-finite value {value} in column '{name}'")
        dead.add(stream, row, "; ".join(reasons))
    return batch.filter(pc.invert(bad))


# -- sinks ---------------------------------------------------------------------------------


def check_output_path(path: Path, option: str) -> None:
    """OptionError unless ``path`` can be written as a file (checked before a run starts, so a
    bad --metrics or --dead-letter path does not fail the run at its end)."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise OptionError(f"{option} {path} is a directory", hint="give a file path")
    if not parent.exists():
        raise OptionError(
            f"output folder does not exist: {parent}", hint=f"create it or fix {option}"
        )
    if not parent.is_dir():
        raise OptionError(f"{option} {path}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OptionError(f"{option} {path}: folder {parent} is not writable")


def _temp_beside(path: Path) -> Path:
    fd, name = tempfile.mkstemp(
        dir=path.parent or Path("."), prefix=f".{path.name}.", suffix=".tmp"
    )
    os.close(fd)
    return Path(name)


class ResultSink:
    """Collects result rows with their instant and writes them as Arrow (atomically).

    ``output``: a ``.parquet``/``.csv``/``.jsonl`` path, ``-`` (JSON lines on stdout), or None
    (keep the table in memory for the API and tests when ``keep``, else only count rows).
    """

    FLUSH_ROWS = 65536

    def __init__(self, schema: pa.Schema, output: str | None, keep: bool = True) -> None:
        self.schema = schema
        self.output = output
        self.keep = keep
        self.rows = 0
        self._buffer: Rows = []
        self._ts: list[int] = []
        self._batches: list[pa.RecordBatch] = []
        self._writer: Any = None
        self._tmp: Path | None = None
        self._fh: Any = None
        if output is not None and output != "-":
            path = Path(output)
            suffix = path.suffix.lower()
            if suffix not in (".parquet", ".csv", ".jsonl"):
                raise OptionError(
                    f"--output must end in .parquet, .csv or .jsonl (or be -), got '{output}'"
                )
            check_output_path(path, "--output")
            self._tmp = _temp_beside(path)
            if suffix == ".parquet":
                import pyarrow.parquet as pq

                self._writer = pq.ParquetWriter(self._tmp, schema)
            elif suffix == ".csv":
                import pyarrow.csv as pacsv

                self._writer = pacsv.CSVWriter(self._tmp, schema)
            else:
                self._fh = self._tmp.open("w", encoding="utf-8")
        elif output == "-":
            self._fh = sys.stdout

    def write(self, instant: int, rows: Rows | pa.Table) -> None:
        """Add the result rows of one instant (tuples, or an Arrow table from a MIG)."""
        if isinstance(rows, pa.Table):
            self._write_table(instant, rows)
            return
        if not rows:
            return
        if self.output is None and not self.keep:
            self.rows += len(rows)
            return
        self._buffer.extend(rows)
        self._ts.extend([instant] * len(rows))
        self.rows += len(rows)
        if len(self._buffer) >= self.FLUSH_ROWS:
            self.flush()

    def _write_table(self, instant: int, table: pa.Table) -> None:
        n = table.num_rows
        if n == 0:
            return
        self.rows += n
        if self.output is None and not self.keep:
            return
        self.flush()
        width = len(self.schema) - 1
        arrays = [
            table.column(i).cast(self.schema.field(i).type).combine_chunks() for i in range(width)
        ]
        arrays.append(pa.array([instant] * n, type=pa.int64()))
        self._write_batch(pa.RecordBatch.from_arrays(arrays, schema=self.schema))

    def flush(self) -> None:
        if not self._buffer:
            return
        width = len(self.schema) - 1
        cols = list(zip(*self._buffer, strict=True)) if self._buffer else [()] * width
        arrays = [pa.array(list(cols[i]), type=self.schema.field(i).type) for i in range(width)]
        arrays.append(pa.array(self._ts, type=pa.int64()))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._buffer, self._ts = [], []
        self._write_batch(batch)

    def _write_batch(self, batch: pa.RecordBatch) -> None:
        if self._writer is not None:
            self._writer.write_batch(batch)
        elif self._fh is not None:
            names = self.schema.names
            for row in batch.to_pylist():
                self._fh.write(json.dumps({n: row[n] for n in names}) + "\n")
        else:
            self._batches.append(batch)

    def close(self) -> pa.Table | None:
        """Flush, commit the output file (rename), and return the in-memory table if any."""
        self.flush()
        if self._writer is not None:
            self._writer.close()
        elif self._fh is not None:
            if self._fh is sys.stdout:
                self._fh.flush()
            else:
                self._fh.close()
        if self._tmp is not None and self.output is not None:
            os.replace(self._tmp, self.output)
        if self.output is None and self.keep:
            return pa.Table.from_batches(self._batches, schema=self.schema)
        return None

    def abort(self) -> None:
        if self._tmp is not None and self._tmp.exists():
            self._tmp.unlink()


# -- the run loop ----------------------------------------------------------------------------


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


def output_schema(plan: LogicalPlan) -> pa.Schema:
    return arrow_schema(plan.op(plan.sink).schema, [("_ts", pa.int64())])


def run_plan(
    plan: LogicalPlan,
    catalog: Catalog,
    options: RunOptions,
    make_engine: Callable[[Callable[[int, Rows], None], OnLate], Engine],
    placement: dict[str, str],
    inputs: list[StreamInput] | None = None,
    operator_metrics: Callable[[Engine], dict[str, dict[str, Any]]] | None = None,
    extra_metrics: Callable[[], dict[str, Any]] | None = None,
) -> RunResult:
    """Run ``plan`` over its inputs with the engine ``make_engine(emit, on_late)`` builds.

    The engine calls ``emit(T, rows)`` with the results of each instant and
    ``on_late(stream, row, reason)`` for each late tuple it rejects.
    """
    for path, option in ((options.metrics, "--metrics"), (options.dead_letter, "--dead-letter")):
        if path is not None:
            check_output_path(path, option)
    # Created first: file readers send the rows they reject to it while the run reads them.
    dead = DeadLetters(options.dead_letter)
    if inputs is None:
        inputs = open_inputs(plan, catalog, options, dead)
    stop = _StopSignal(options.stop_on_signal)
    try:
        sink = ResultSink(output_schema(plan), options.output, options.keep_results)
    except BaseException:
        stop.restore()
        raise
    latencies: list[float] = []
    arrival = [0.0]
    last_instant: list[int | None] = [None]

    def emit(instant: int, rows: Rows | pa.Table) -> None:
        sink.write(instant, rows)
        latencies.append((time.perf_counter() - arrival[0]) * 1e3)
        last_instant[0] = instant

    names = {s.name: [c.name for c in s.columns] for s in catalog.streams.values()}

    def on_late(stream: str, row: tuple[Any, ...], reason: str) -> None:
        dead.add(stream, dict(zip(names.get(stream, []), row, strict=False)), reason, "late")

    try:
        engine = make_engine(emit, on_late)
    except BaseException:
        stop.restore()
        sink.abort()
        raise
    merged = MergedInputs(plan, inputs, options.duration, dead)
    inputs = merged.inputs  # the streams the plan reads
    tps = merged.tps  # ticks per second of the query's time base
    total_expected = sum(i.expected_rows or 0 for i in inputs) or None
    progress = _progress(options, total_expected)
    tuples_in = 0
    min_ts: int | None = None
    max_ts: int | None = None
    realtime = options.pace == "realtime"
    rss_timeline: list[list[float]] = []
    sample_every = 10  # event-seconds between RSS samples
    next_sample = 0
    wall_start = time.perf_counter()
    lag_max = 0.0
    # Window contents are long-lived and acyclic: keep the cyclic GC from re-scanning
    # millions of tuples in every full collection during the run (re-enabled afterwards).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        # One slice at a time, read from the sources only when the engine has taken the
        # previous one (at most one pending batch per stream): there is no queue, so a plan
        # that cannot keep up slows the reading down (backpressure) instead of buffering a
        # backlog (at realtime pace it falls behind the wall clock: kept_up false).
        for inp, whole in merged:
            if stop.requested:
                break
            name = inp.stream.name
            t_index = inp.stream.time_index
            # Realtime replays event time against the wall clock one event-second at a time
            # (file batches span many seconds).
            pieces = _by_second(whole, t_index, tps) if realtime else iter((whole,))
            for batch in pieces:
                lo = int(pc.min(batch.column(t_index)).as_py())
                hi = int(pc.max(batch.column(t_index)).as_py())
                if min_ts is None:
                    min_ts = lo
                if realtime:
                    due = wall_start + (lo - min_ts) / tps
                    now = time.perf_counter()
                    if due > now:
                        stop.sleep_until(due)
                    else:
                        lag_max = max(lag_max, now - due)
                if stop.requested:
                    break
                arrival[0] = time.perf_counter()
                merged.tell(engine)
                try:
                    engine.ingest(name, batch, t_index)
                except StopRequested:
                    break  # a stop came while an engine was restarting: the loop ends below
                tuples_in += batch.num_rows
                min_ts = min(min_ts, lo)
                max_ts = hi if max_ts is None else max(max_ts, hi)
                if progress is not None:
                    progress.advance(batch.num_rows)
                if max_ts - min_ts >= next_sample:
                    rss_timeline.append([(max_ts - min_ts) / tps, _rss_mb()])
                    next_sample += sample_every * tps
        if not stop.requested:
            arrival[0] = time.perf_counter()
            merged.tell(engine)
            # End of input: fire the remaining instants. An interrupted run skips this: the
            # instants emitted so far (all before the last timestamp read) are exact, the
            # remaining ones would be computed as if the stream ended here.
            with contextlib.suppress(StopRequested):
                engine.finish()
        wall_s = time.perf_counter() - wall_start
        table = sink.close()
    except BaseException:
        sink.abort()
        raise
    finally:
        stop.restore()
        if gc_was_enabled:
            gc.enable()
        dead.close()
        if progress is not None:
            progress.stop()

    event_s = (max_ts - min_ts + 1) / tps if min_ts is not None and max_ts is not None else 0.0
    rate = sum(i.rate for i in inputs) if inputs else 0.0
    throughput = tuples_in / wall_s if wall_s > 0 else 0.0
    ops = operator_metrics(engine) if operator_metrics is not None else {}
    for op_id, m in ops.items():
        m.setdefault("engine", placement.get(op_id, "row"))
        # u: the share of one core the operator needs to keep up with the data's own rate
        # (busy seconds per event-second), the dissertation's utilisation (Eq. 6.4).
        m["u"] = m["busy_s"] / event_s if event_s else None
    kept_up = lag_max <= max(1.0, 0.1 * event_s) if realtime else throughput >= rate
    metrics = {
        "tuples_in": tuples_in,
        "wall_s": wall_s,
        "throughput": throughput,
        "rate": rate,
        "kept_up": bool(kept_up),
        "results": sink.rows,
        "instants": len(latencies),
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
        "inputs": {i.stream.name: i.description for i in inputs},
        "rss_mb_timeline": rss_timeline,
        "operators": ops,
    }
    if extra_metrics is not None:
        metrics.update(extra_metrics())
    if options.metrics is not None:
        tmp = _temp_beside(options.metrics)
        tmp.write_text(json.dumps(metrics, indent=2) + "\n")
        os.replace(tmp, options.metrics)
    return RunResult(table, metrics)


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


class _StopSignal:
    """SIGINT and SIGTERM as a request to stop the run loop between batches.

    Installed only when ``enabled`` and on the main thread (where Python runs signal
    handlers). The handler only records the signal, so no engine call (a DuckDB query, a
    Spark job) is cut in half; a second signal raises KeyboardInterrupt to stop at once.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, enabled: bool) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}
        stop_flag.clear()
        if enabled and threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum
        stop_flag.request()  # also ends an engine restart in progress (engines.stop)

    @property
    def requested(self) -> bool:
        return self.signum is not None or stop_flag.requested()

    def sleep_until(self, due: float) -> None:
        """Sleep until ``due`` (perf_counter time) or until a stop is requested."""
        while not self.requested:
            left = due - time.perf_counter()
            if left <= 0:
                return
            time.sleep(min(left, 0.05))

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}
        stop_flag.clear()


def _rss_mb() -> float:
    """Current resident set size in MB (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class _Progress:
    def __init__(self, total: int | None) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._p = Progress(
            TextColumn("[bold]hycq run"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("tuples"),
            TimeElapsedColumn(),
            transient=True,
        )
        self._task = self._p.add_task("run", total=total)
        self._p.start()

    def advance(self, n: int) -> None:
        self._p.advance(self._task, n)

    def stop(self) -> None:
        self._p.stop()


def _progress(options: RunOptions, total: int | None) -> _Progress | None:
    show = options.progress if options.progress is not None else sys.stderr.isatty()
    return _Progress(total) if show else None

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
import time
import warnings
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engines.arrow_types import arrow_schema
from engines.defaults import DEFAULT_DURATION_S
from engines.interrupts import GracefulStop, StopRequested
from engines.output_files import OutputFile, check_distinct, check_writable, write_bytes
from engines.time_merge import TimeMerge
from optimizer.ir.catalog import TIME_UNITS_MS, Catalog, StreamDef
from optimizer.ir.errors import DataError, OptionError
from optimizer.ir.plan import LogicalPlan
from optimizer.ir.plan import Source as SourceOp
from optimizer.ir.plan import Window as WindowOp

Rows = list[tuple[Any, ...]]
#: ``on_late(stream, row, reason)``: an engine reports a late tuple it rejected.
OnLate = Callable[[str, tuple[Any, ...], str], None]


class PlanExecutor(Protocol):
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
    #: RSS in MB above which the run stops with an error (a window of rate x range tuples
    #: that does not fit); None: 90% of the memory available when the run starts.
    memory_limit_mb: float | None = None


# -- sources -------------------------------------------------------------------------------


@dataclass
class StreamInput:
    """One input stream of a run: its catalog entry and its batches in arrival order."""

    stream: StreamDef
    batches: Iterator[pa.RecordBatch]
    rate: float  # tuples per event-second (density of the data)
    description: str
    expected_rows: int | None = None
    #: ``rate`` is only the catalog's: report the density the data actually had
    measured: bool = False


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
    skip: Collection[str] = (),
) -> list[StreamInput]:
    """The input of every stream the plan reads (but those named in ``skip``), from --data
    files or the catalog's source.

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
        if name.lower() in skip:
            continue
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
    from engines.sources.smartplug import SCHEMA, SmartPlugGenerator

    kwargs: dict[str, Any] = {
        k: v
        for k, v in spec.options
        if k in ("houses", "seed", "households_per_house", "plugs_per_household", "start")
    }
    gen = SmartPlugGenerator(rate=rate, **kwargs)
    # The catalog declares a subset of the generator's columns (checked when it was loaded).
    columns = [c.name.lower() for c in stream.columns]
    batches = gen.batches(seconds, options.batch_seconds)
    if columns != list(SCHEMA.names):
        names = [c.name for c in stream.columns]
        batches = (b.select(columns).rename_columns(names) for b in batches)
    return StreamInput(
        stream,
        batches,
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
    if fmt is None and path.is_file():  # a FIFO is sniffed by the reader (read only once)
        fmt = detect_format(path, [c.name for c in stream.columns])
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
    batches = _in_range(batches, t_index, stream.name, dead, path.name)
    if options.rate is not None:
        batches = _rescale(batches, t_index, options.rate, tps)
    rate = options.rate if options.rate is not None else stream.rate
    return StreamInput(stream, batches, rate, f"file {path}", measured=options.rate is None)


#: Largest timestamp magnitude hycq accepts, in ticks (2**62: an instant plus a window or a
#: slide, at most 2**53 ticks, never overflows BIGINT). Rows beyond are dead-lettered.
MAX_TIMESTAMP = 2**62


def _in_range(
    batches: Iterator[pa.RecordBatch], t: int, stream: str, dead: DeadLetters | None, where: str
) -> Iterator[pa.RecordBatch]:
    """Set aside rows whose timestamp is beyond +-MAX_TIMESTAMP (without ``dead``: DataError)."""
    for b in batches:
        ts = b.column(t)
        lo_hi = pc.min_max(ts)
        lo, hi = lo_hi["min"].as_py(), lo_hi["max"].as_py()
        if lo is None or (lo >= -MAX_TIMESTAMP and hi <= MAX_TIMESTAMP):
            yield b
            continue
        out = pc.or_(pc.less(ts, -MAX_TIMESTAMP), pc.greater(ts, MAX_TIMESTAMP))
        name = b.schema.field(t).name
        for row in b.filter(out).to_pylist():
            reason = (
                f"timestamp {row[name]} in column '{name}' is out of range "
                f"(at most {MAX_TIMESTAMP} in magnitude)"
            )
            if dead is None:
                raise DataError(f"{where}: {reason}", hint="timestamps are epoch seconds or ms")
            dead.add(stream, row, f"{where}: {reason}")
        kept = b.filter(pc.invert(out))
        if kept.num_rows:
            yield kept


def _rescale(
    batches: Iterator[pa.RecordBatch], t: int, rate: float, tps: int
) -> Iterator[pa.RecordBatch]:
    """Replay at ``rate`` tuples per event-second: the i-th tuple gets ts0 + floor(i*tps/rate).

    This is the dissertation's replay tool: order is kept, density becomes ``rate``. A rate
    so low that the timestamps would leave the supported range is an OptionError.
    """
    start: int | None = None
    index = 0
    for b in batches:
        n = b.num_rows
        if n == 0:
            continue
        if start is None:
            start = int(b.column(t)[0].as_py())
        if start + (index + n) * (tps / rate) > MAX_TIMESTAMP:
            raise OptionError(
                f"--rate {rate:g} spreads the data beyond the supported time range "
                f"({index + n} tuples at {rate:g} per second from timestamp {start})",
                hint="use a higher --rate",
            )
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

    def tell(self, engine: PlanExecutor) -> None:
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
    #: invalid rows per stream (the run checks that a stream kept some valid rows)
    by_stream: dict[str, int] = field(default_factory=dict)
    first_reason: dict[str, str] = field(default_factory=dict)
    _out: OutputFile | None = None

    def add(
        self, stream: str, row: dict[str, Any] | str, reason: str, kind: str = "invalid"
    ) -> None:
        """Count a rejected row (``kind`` invalid or late) and write it when a path is set."""
        self.count += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        if kind == "invalid":
            self.by_stream[stream] = self.by_stream.get(stream, 0) + 1
            self.first_reason.setdefault(stream, reason)
        if self.path is None:
            return
        out = self._open()
        with out.errors():
            fh = out.file("w")
            fh.write(json_line({"stream": stream, "reason": reason, "row": row}))

    def _open(self) -> OutputFile:
        if self._out is None:
            assert self.path is not None
            self._out = OutputFile(self.path, "--dead-letter")
        return self._out

    def close(self) -> None:
        """Commit the file (an empty one too, so that scripts can rely on it)."""
        if self.path is None:
            return
        out = self._open()
        out.file("w")
        out.commit()

    def abort(self) -> None:
        if self._out is not None:
            self._out.abort()


#: Arrow integer types of result columns -> their SQL names and ranges.
_INT_RANGES = {
    pa.int32(): ("INTEGER", -(2**31), 2**31 - 1),
    pa.int64(): ("BIGINT", -(2**63), 2**63 - 1),
}


def overflow_error(column: str, sql_type: str, value: Any, instant: Any) -> DataError:
    """The one error every placement gives for an integer result outside its type."""
    return DataError(
        f"integer overflow: column '{column}' at instant {instant} is {value}, outside the "
        f"{sql_type} range",
        hint="integer results must fit their type, as in DuckDB (docs/semantics.md); "
        "CAST the values to DOUBLE to compute with larger magnitudes",
    )


def _result_array(values: Sequence[Any], f: pa.Field, ts: list[int]) -> pa.Array:
    """One result column as Arrow; an integer out of its type's range is a DataError."""
    try:
        return pa.array(list(values), type=f.type)
    except (OverflowError, pa.ArrowInvalid):
        if f.type not in _INT_RANGES:
            raise
        sql_type, lo, hi = _INT_RANGES[f.type]
        for value, instant in zip(values, ts, strict=True):
            if isinstance(value, int) and not lo <= value <= hi:
                raise overflow_error(f.name, sql_type, value, instant) from None
        raise


def json_line(obj: dict[str, Any]) -> str:
    """One JSON line; NaN and infinities become null (they are not JSON)."""
    try:
        return json.dumps(obj, default=str, allow_nan=False) + "\n"
    except ValueError:
        return json.dumps(_finite(obj), default=str, allow_nan=False) + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


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


class ResultSink:
    """Collects result rows with their instant and writes them as Arrow (atomically).

    ``output``: a ``.parquet``/``.csv``/``.jsonl`` path, ``-`` (JSON lines on stdout), or None
    (keep the table in memory for the API and tests when ``keep``, else only count rows).
    JSON lines write NaN and infinities as null.
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
        self._out: OutputFile | None = None
        self._fh: Any = None
        if output is not None and output != "-":
            path = Path(output)
            suffix = path.suffix.lower()
            if suffix not in (".parquet", ".csv", ".jsonl"):
                raise OptionError(
                    f"--output must end in .parquet, .csv or .jsonl (or be -), got '{output}'"
                )
            check_writable(path, "--output")
            self._out = OutputFile(path, "--output")
            try:
                with self._out.errors():
                    if suffix == ".parquet":
                        import pyarrow.parquet as pq

                        self._writer = pq.ParquetWriter(self._out.file("wb"), schema)
                    elif suffix == ".csv":
                        import pyarrow.csv as pacsv

                        self._writer = pacsv.CSVWriter(self._out.file("wb"), schema)
                    else:
                        self._fh = self._out.file("w")
            except BaseException:
                self._out.abort()
                raise
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
        arrays = [_result_array(cols[i], self.schema.field(i), self._ts) for i in range(width)]
        arrays.append(pa.array(self._ts, type=pa.int64()))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._buffer, self._ts = [], []
        self._write_batch(batch)

    def _write_batch(self, batch: pa.RecordBatch) -> None:
        if self._writer is not None:
            assert self._out is not None
            with self._out.errors():
                self._writer.write_batch(batch)
        elif self._fh is not None:
            names = self.schema.names
            lines = "".join(json_line({n: row[n] for n in names}) for row in batch.to_pylist())
            if self._out is not None:
                with self._out.errors():
                    self._fh.write(lines)
            else:
                self._fh.write(lines)
        else:
            self._batches.append(batch)

    def close(self) -> pa.Table | None:
        """Flush, commit the output file (rename), and return the in-memory table if any."""
        self.flush()
        if self._out is not None:
            with self._out.errors():
                if self._writer is not None:
                    self._writer.close()
            self._out.commit()
        elif self._fh is not None:
            self._fh.flush()
        if self.output is None and self.keep:
            return pa.Table.from_batches(self._batches, schema=self.schema)
        return None

    def abort(self) -> None:
        """Drop the output: nothing appears at its path."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            with contextlib.suppress(Exception):
                writer.close()
            if hasattr(writer, "is_open"):
                writer.is_open = False  # a failed close is not retried (and reported) by __del__
        if self._out is not None:
            self._out.abort()


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
    make_engine: Callable[[Callable[[int, Rows], None], OnLate], PlanExecutor],
    placement: dict[str, str],
    inputs: list[StreamInput] | None = None,
    operator_metrics: Callable[[PlanExecutor], dict[str, dict[str, Any]]] | None = None,
    extra_metrics: Callable[[], dict[str, Any]] | None = None,
) -> RunResult:
    """Run ``plan`` over its inputs with the engine ``make_engine(emit, on_late)`` builds.

    The engine calls ``emit(T, rows)`` with the results of each instant and
    ``on_late(stream, row, reason)`` for each late tuple it rejects.
    """
    outputs = [
        ("--output", options.output),
        ("--metrics", options.metrics),
        ("--dead-letter", options.dead_letter),
    ]
    check_distinct([("--data", v) for v in options.data.values()], outputs)
    for option, path in outputs[1:]:
        if path is not None:
            check_writable(path, option)
    # Created first: file readers send the rows they reject to it while the run reads them.
    dead = DeadLetters(options.dead_letter)
    if inputs is None:
        inputs = open_inputs(plan, catalog, options, dead)
    stop = GracefulStop(options.stop_on_signal)
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
        if stop.requested:  # checked at every instant: one input batch may fire millions
            raise StopRequested

    names = {s.name: [c.name for c in s.columns] for s in catalog.streams.values()}

    def on_late(stream: str, row: tuple[Any, ...], reason: str) -> None:
        dead.add(stream, dict(zip(names.get(stream, []), row, strict=False)), reason, "late")

    engine: PlanExecutor
    try:
        engine = make_engine(emit, on_late)
    except StopRequested:  # stopped while the engines started (Spark): nothing read or emitted
        engine = _Idle()
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
    valid: dict[str, int] = {}  # rows per stream that passed validation (and the cut)
    spans: dict[str, tuple[int, int]] = {}  # (min, max) timestamp per stream
    min_ts: int | None = None
    max_ts: int | None = None
    realtime = options.pace == "realtime"
    rss_timeline: list[list[float]] = []
    sample_every = 10  # event-seconds between RSS samples
    next_sample = 0
    wall_start = time.perf_counter()
    lag_max = 0.0
    memory = _MemoryGuard(options.memory_limit_mb)
    # Window contents are long-lived and acyclic: keep the cyclic GC from re-scanning
    # millions of tuples in every full collection during the run (re-enabled afterwards).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        # One slice at a time, read from the sources only when the engine has taken the
        # previous one (at most one pending batch per stream): there is no queue, so a plan
        # that cannot keep up slows the reading down (backpressure) instead of buffering a
        # backlog (at realtime pace it falls behind the wall clock: kept_up false).
        for inp, whole in _until_stopped(iter(merged), stop):
            if stop.requested:
                break
            name = inp.stream.name
            t_index = inp.stream.time_index
            valid[name] = valid.get(name, 0) + whole.num_rows
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
                # A stop at an instant (emit) or during an engine restart cuts the batch's
                # firing short; it was taken.
                with contextlib.suppress(StopRequested):
                    engine.ingest(name, batch, t_index)
                tuples_in += batch.num_rows
                min_ts = min(min_ts, lo)
                max_ts = hi if max_ts is None else max(max_ts, hi)
                s_lo, s_hi = spans.get(name, (lo, hi))
                spans[name] = (min(s_lo, lo), max(s_hi, hi))
                if progress is not None:
                    progress.advance(batch.num_rows)
                if max_ts - min_ts >= next_sample:
                    rss_timeline.append([(max_ts - min_ts) / tps, _rss_mb()])
                    next_sample += sample_every * tps
                memory.check(tuples_in)
        if not stop.requested:
            arrival[0] = time.perf_counter()
            merged.tell(engine)
            # End of input: fire the remaining instants. An interrupted run skips this: the
            # instants emitted so far (all before the last timestamp read) are exact, the
            # remaining ones would be computed as if the stream ended here.
            with contextlib.suppress(StopRequested):
                engine.finish()
        wall_s = time.perf_counter() - wall_start
        if not stop.requested:
            _check_rejections(inputs, valid, tuples_in, dead)
        table = sink.close()
        dead.close()
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
        stop.restore()
        if gc_was_enabled:
            gc.enable()
        if progress is not None:
            progress.stop()

    event_s = (max_ts - min_ts + 1) / tps if min_ts is not None and max_ts is not None else 0.0
    rate = sum(_density(i, valid, spans, tps) for i in inputs)
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
        write_bytes(options.metrics, json_text(metrics), "--metrics")
    return RunResult(table, metrics)


def json_text(obj: Any) -> str:
    """Indented JSON with NaN and infinities as null."""
    return json.dumps(_finite(obj), indent=2, default=str, allow_nan=False) + "\n"


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


def _check_rejections(
    inputs: list[StreamInput], valid: dict[str, int], accepted: int, dead: DeadLetters
) -> None:
    """DataError when an input that had rows kept none; a warning when more than half of all
    rows were set aside (a file in the wrong format would otherwise give an empty result
    and exit 0)."""
    for inp in inputs:
        name = inp.stream.name
        bad = dead.by_stream.get(name, 0)
        if bad and not valid.get(name):
            raise DataError(
                f"no valid row in {inp.description}: all {bad} rows were rejected "
                f"(first: {dead.first_reason.get(name, '?')})",
                hint="pass --dead-letter PATH to see every rejected row and why; check the "
                "catalog's columns against the file",
            )
    read = accepted + dead.by_kind.get("invalid", 0)
    if dead.count and 2 * dead.count > read:
        warnings.warn(
            f"{dead.count} of {read} input rows were dead-lettered (more than half); the "
            "results cover only the rest",
            RuntimeWarning,
            stacklevel=3,
        )


def _until_stopped(
    items: Iterator[tuple[StreamInput, pa.RecordBatch]], stop: GracefulStop
) -> Iterator[tuple[StreamInput, pa.RecordBatch]]:
    """``items`` until a stop is requested (checked before each is read; a reader waiting
    on a pipe raises StopRequested, which ends the items too)."""
    while not stop.requested:
        try:
            item = next(items)
        except (StopIteration, StopRequested):
            return
        yield item


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


class _MemoryGuard:
    """Stops a run whose memory outgrows the machine with a clear error (exit 2) instead of
    the kernel's OOM killer or a MemoryError in the middle of an engine: checked after every
    batch (a batch is bounded, so the overshoot is too)."""

    def __init__(self, limit_mb: float | None) -> None:
        self.limit = limit_mb if limit_mb is not None else _default_memory_limit()

    def check(self, tuples_in: int) -> None:
        if self.limit is None:
            return
        rss = _rss_mb()
        if rss > self.limit:
            raise OptionError(
                f"out of memory: the run uses {rss:,.0f} MB after {tuples_in:,} tuples, more "
                f"than its limit of {self.limit:,.0f} MB",
                hint="windows hold rate x range tuples (a row-engine window at least one "
                "slide's): lower --rate, the window range or the slide; --memory-limit MB "
                "sets the limit",
            )


def _default_memory_limit() -> float | None:
    """90% of the memory available now plus what this process already uses (Linux)."""
    try:
        with open("/proc/meminfo") as fh:
            info = {line.split(":")[0]: line.split()[1] for line in fh}
        available = int(info["MemAvailable"]) / 1024.0
    except (OSError, KeyError, ValueError, IndexError):
        return None
    return 0.9 * (available + _rss_mb())


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

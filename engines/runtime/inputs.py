"""A run's inputs: sources opened (generators, CSV/Parquet replay, ``rate`` rescaling),
timestamps checked and converted to the query's time base, and the streams merged by event
time into one arrival sequence (``MergedInputs``)."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engines.arrow_types import arrow_schema
from engines.defaults import DEFAULT_DURATION_S
from engines.disorder.kslack import KSlackBuffer, paced, released
from engines.disorder.policies import make_policy
from engines.disorder.spec import DisorderSpec
from engines.runtime.dead_letters import NO_ROWS_HINT, DeadLetters, validate
from engines.runtime.engine import PlanExecutor
from engines.runtime.options import OptionNames, RunOptions
from engines.runtime.stream_input import StreamInput
from engines.sources.mqtt import MqttUrl
from engines.time_merge import TimeMerge
from optimizer.ir.catalog import TIME_UNITS_MS, Catalog, StreamDef
from optimizer.ir.errors import DataError, OptionError
from optimizer.ir.limits import MAX_RATE
from optimizer.ir.plan import LogicalPlan
from optimizer.ir.plan import Source as SourceOp
from optimizer.ir.plan import Window as WindowOp
from optimizer.ir.profile import parse_profile


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
    """The input of every stream the plan reads (but those named in ``skip``), from the
    ``data`` files or the catalog's source.

    A ``data`` stream the catalog does not have is an OptionError; one of the catalog's
    that the plan does not read is ignored (the CLI warns of it: :func:`unread_data`).
    Bad rows of data files go to ``dead`` (and are skipped); without it they raise DataError.
    """
    names = _streams_read(plan)
    check_data_streams(catalog, [plan], options.data, options.names.data)
    data = {k.lower(): v for k, v in options.data.items()}
    inputs = []
    for name in names:
        if name.lower() in skip:
            continue
        stream = catalog.get(name)
        assert stream is not None
        inputs.append(open_stream(stream, options, dead, data.get(name.lower())))
    return inputs


def _streams_read(plan: LogicalPlan) -> list[str]:
    """The streams the plan reads, in the order of its sources."""
    names: list[str] = []
    for op_id in plan.sources:
        op = plan.op(op_id)
        assert isinstance(op, SourceOp)
        names.append(op.stream)
    return names


def check_data_streams(
    catalog: Catalog, plans: Collection[LogicalPlan], data: Collection[str], option: str
) -> None:
    """OptionError for a ``data`` stream the catalog does not have (``option``: how
    messages name the data option)."""
    for given in data:
        if catalog.get(given) is None:
            read = sorted({n for plan in plans for n in _streams_read(plan)})
            raise OptionError(
                f"{option} names stream '{given}', which the catalog does not have",
                hint=f"the catalog's streams: {', '.join(sorted(catalog.streams))}; "
                f"the query reads: {', '.join(read)}",
            )


def unread_data(plans: Collection[LogicalPlan], data: Collection[str]) -> list[str]:
    """The ``data`` streams that none of ``plans`` reads, in the given order (open_inputs
    ignores them; the CLI warns of each)."""
    read = {name.lower() for plan in plans for name in _streams_read(plan)}
    return [given for given in data if given.lower() not in read]


def open_stream(
    stream: StreamDef,
    options: RunOptions,
    dead: DeadLetters | None = None,
    path: Path | MqttUrl | None = None,
) -> StreamInput:
    """One stream's input: ``path`` (a file, pipe or MQTT subscription) if given, else the
    catalog's source (``hycq data publish`` replays it)."""
    if isinstance(path, MqttUrl):
        return _mqtt_input(stream, path, options, dead)
    if path is not None:
        return _file_input(stream, path, None, options, dead)
    if stream.source.kind == "generator":
        return _generator_input(stream, options)
    if stream.source.kind == "file":
        assert stream.source.path is not None
        return _file_input(stream, stream.source.path, stream.source.format, options, dead)
    raise DataError(
        f"stream '{stream.name}' has no source in the catalog",
        hint=f"pass {options.names.data} {stream.name}=PATH (CSV or Parquet)",
    )


def _generator_input(stream: StreamDef, options: RunOptions) -> StreamInput:
    spec = stream.source
    rate = options.rate if options.rate is not None else stream.rate
    seconds = options.duration if options.duration is not None else DEFAULT_DURATION_S
    if spec.generator == "keyed":
        return _keyed_input(stream, rate, seconds, options)
    if spec.generator in ("x3", "x4"):
        return _qddh_input(stream, spec.generator, rate, seconds, options)
    if spec.generator == "multiway":
        return _multiway_input(stream, rate, seconds, options)
    from engines.sources.smartplug import SCHEMA, SmartPlugGenerator

    kwargs: dict[str, Any] = {
        k: v
        for k, v in spec.options
        if k
        in (
            "houses",
            "seed",
            "households_per_house",
            "plugs_per_household",
            "start",
            "plugs",
            "load_share",
        )
    }
    text = spec.option("rate_profile")
    if text is not None and options.rate is None:  # a --rate given to the run replaces it
        kwargs["rate_profile"] = parse_profile(
            str(text), f"{stream.name}: rate_profile", high=MAX_RATE, positive_somewhere=True
        )
    gen = SmartPlugGenerator(rate=rate, **kwargs)
    # The catalog declares a subset of the generator's columns (checked when it was loaded).
    columns = [c.name.lower() for c in stream.columns]
    try:
        batches = gen.batches(seconds, options.batch_seconds)
    except OptionError as err:  # too many tuples or timestamps: name the run's options
        flags = options.names
        raise OptionError(
            f"{flags.rate} {rate:g} x {flags.duration} {seconds:g}: {err.message}",
            hint=f"lower {flags.rate} or {flags.duration}",
        ) from None
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


def _multiway_input(
    stream: StreamDef, rate: float, seconds: float, options: RunOptions
) -> StreamInput:
    """A multiway join-workload stream (engines/sources/multiway.py), in event-time order."""
    from engines.sources.keyed import DEFAULT_ORIGIN
    from engines.sources.multiway import MultiwayStream, stream_table

    opt = stream.source.option
    columns = tuple((c.name, c.dtype.value) for c in stream.columns if c.name.lower() != "ts")
    spec = MultiwayStream(
        stream.name,
        columns,
        rate,
        int(cast(int, opt("keys", 100))),
        float(cast(float, opt("start", 0.0))),
        cast("float | None", opt("end", None)),
        stream.time_unit,
    )
    seed = int(cast(int, opt("seed", 42)))
    table = stream_table(spec, seconds, seed, int(cast(int, opt("origin", DEFAULT_ORIGIN))))
    table = table.select(["ts" if c.name.lower() == "ts" else c.name for c in stream.columns])
    what = f"generator multiway (stream {stream.name}, {rate:g} tuples/s, keys {spec.keys}, "
    return _table_input(stream, table, rate, options, what + f"seed {seed})")


def _qddh_input(
    stream: StreamDef, workload: str, rate: float, seconds: float, options: RunOptions
) -> StreamInput:
    """One stream of Ji's x3/x4 join workloads, in arrival order (delayed timestamps)."""
    from engines.sources.keyed import DEFAULT_ORIGIN
    from engines.sources.qddh_joins import stream_table

    seed = int(cast(int, stream.source.option("seed", 42)))
    origin = int(cast(int, stream.source.option("origin", DEFAULT_ORIGIN)))
    table = stream_table(workload, stream.name.lower(), seconds, seed, origin, rate)
    what = f"generator {workload} (stream {stream.name}, {rate:g} tuples/s, seed {seed})"
    return _table_input(stream, table, rate, options, what)


def _table_input(
    stream: StreamDef, table: pa.Table, rate: float, options: RunOptions, description: str
) -> StreamInput:
    """A generated table as a stream input: columns named as the catalog declares them, in
    batches of ``--batch-seconds`` worth of tuples."""
    table = table.rename_columns([c.name for c in stream.columns])
    chunk = max(1, int(rate * max(1, options.batch_seconds)))
    return StreamInput(
        stream,
        iter(table.to_batches(max_chunksize=chunk)),
        rate,
        description,
        expected_rows=table.num_rows,
    )


def _keyed_input(
    stream: StreamDef, rate: float, seconds: float, options: RunOptions
) -> StreamInput:
    from engines.sources.keyed import generator_from_options

    # A --rate given to the run replaces the catalog's rate profile.
    gen = generator_from_options(
        stream.name, rate, stream.time_unit, stream.source.options, options.rate is None
    )
    spec = gen.stream
    density = spec.rate_profile.text() if spec.rate_profile is not None else f"{spec.rate:g}"
    return StreamInput(
        stream,
        gen.batches(seconds, options.batch_seconds),
        spec.rate,
        f"generator keyed ({density} tuples/s, {spec.max_keys} keys, seed {gen.seed})",
        expected_rows=gen.rows(seconds),
    )


def _file_input(
    stream: StreamDef,
    path: Path,
    fmt: str | None,
    options: RunOptions,
    dead: DeadLetters | None = None,
) -> StreamInput:
    from engines.sources.files import OnBad, detect_format, empty_reason, read_batches

    if not path.exists():
        raise DataError(
            f"data file not found: {path}",
            hint=f"check the path given with {options.names.data} STREAM=PATH",
        )
    if path.is_dir():
        raise DataError(
            f"data path is a directory, not a file: {path}",
            hint=f"give a CSV or Parquet file with {options.names.data} STREAM=PATH",
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
        idle_s=options.idle_timeout,  # a pipe (stdin) quiet this long: its stream is idle
    )
    if fmt is not None and path.is_file():  # its header checked, has it rows?
        empty = empty_reason(path, fmt)
        if empty is not None:  # said before the run (a pipe's is told at its end)
            raise DataError(f"file {path} has no rows: {empty}", hint=NO_ROWS_HINT)
    t_index = stream.time_index
    batches = _in_range(batches, t_index, stream.name, dead, path.name)
    if options.rate is not None:
        batches = _rescale(batches, t_index, options.rate, tps, options.names)
    rate = options.rate if options.rate is not None else stream.rate
    return StreamInput(
        stream,
        batches,
        rate,
        f"file {path}",
        measured=options.rate is None,
        rereadable=path.is_file(),
        data_file=True,
    )


def _mqtt_input(
    stream: StreamDef, url: MqttUrl, options: RunOptions, dead: DeadLetters | None = None
) -> StreamInput:
    """A subscription (engines/sources/mqtt.py) read by the CSV reader as a pipe of the
    stream's raw lines: the same validation and dead letters as a file."""
    from engines.sources.files.formats import profile_for
    from engines.sources.files.reader import BatchReader
    from engines.sources.mqtt import MqttFeed

    schema = arrow_schema(stream.schema)
    name = stream.name
    on_message = None
    if dead is not None:

        def on_message(topic: str, number: int, raw: str, reason: str) -> None:
            dead.add(name, cast(Any, raw), f"mqtt topic {topic} message {number}: {reason}")

    raw = profile_for(schema).raw_columns  # a raw line's columns, in the schema's order
    columns = list(zip(schema.names, raw, strict=True))
    client_id = None
    if options.checkpoint is not None:  # one persistent session across crash and resume
        key = f"{options.checkpoint.directory.resolve()}|{name}".encode()
        client_id = f"hycq-ckpt-{hashlib.sha256(key).hexdigest()[:16]}"
    feed = MqttFeed(
        url,
        columns,
        on_message,
        options.names.data,
        client_id=client_id,
        label=f"stream '{name}' ({url})",
    )
    feed.idle_s = options.idle_timeout
    # what a publisher (or a test) waits for: messages published before are not delivered
    print(f"note: stream '{name}' subscribed to {url}", file=sys.stderr, flush=True)

    def on_line(number: int, raw: str, reason: str) -> None:
        topic, message = feed.where(number)
        if dead is None:
            raise DataError(f"mqtt topic {topic} message {message}: {reason}")
        dead.add(name, cast(Any, raw), f"mqtt topic {topic} message {message}: {reason}")

    try:
        reader = BatchReader(
            Path(url.name), "debs", options.read_batch_rows, schema, on_line, pipe=cast(Any, feed)
        )
    except BaseException:
        feed.close()
        raise
    batches = _in_range(iter(reader), stream.time_index, name, dead, url.name)
    if options.rate is not None:
        batches = _rescale(
            batches, stream.time_index, options.rate, ticks_per_second(stream), options.names
        )
    rate = options.rate if options.rate is not None else stream.rate
    return StreamInput(
        stream, batches, rate, str(url), measured=options.rate is None, live=feed, rereadable=False
    )


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
    batches: Iterator[pa.RecordBatch], t: int, rate: float, tps: int, names: OptionNames
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
            yield b  # a live source's idle report (engines/time_merge.py)
            continue
        if start is None:
            start = int(b.column(t)[0].as_py())
        if start + (index + n) * (tps / rate) > MAX_TIMESTAMP:
            raise OptionError(
                f"{names.rate} {rate:g} spreads the data beyond the supported time range "
                f"({index + n} tuples at {rate:g} per second from timestamp {start})",
                hint=f"use a higher {names.rate}",
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
        disorder: DisorderSpec | None = None,
        disorder_params: dict[str, Any] | None = None,
        idle_timeout: float | None = None,
    ) -> None:
        reads = {op.stream for op in plan.operators() if isinstance(op, SourceOp)}
        # Inputs of streams the plan does not read (an API caller's extra tables) are skipped.
        inputs = [i for i in inputs if i.stream.name in reads]
        self.inputs = inputs
        self.time_unit = plan_time_unit(plan)
        self.tps = 1000 // TIME_UNITS_MS[self.time_unit]
        self.dead = dead
        self.progress_bar: dict[str, int] = {}
        #: ``--idle-timeout`` in ticks, each live stream's progress as last told, the streams
        #: ended so far, and per stream how often the rule moved it (docs/disorder.md).
        self.idle_ticks = round(idle_timeout * self.tps) if idle_timeout is not None else None
        self.known: dict[str, int] = {}
        self.gone: set[str] = set()
        self.idle_advanced: dict[str, int] = {}
        # Streams the plan reads without an input have ended from the start.
        self._ended: list[str] = sorted(reads - {i.stream.name for i in inputs})
        #: The run's K-slack buffers, one per stream (none without ``disorder``).
        self.policy = make_policy(disorder, self.tps, disorder_params) if disorder else None
        self.buffers: dict[str, KSlackBuffer] = {}
        streams: list[tuple[Iterator[pa.RecordBatch], int]] = []
        for index, inp in enumerate(inputs):
            prepared = self._prepared(index, inp.batches)
            if self.policy is None:
                streams.append((inp.batches, inp.stream.time_index))
                continue
            buf = KSlackBuffer(inp.stream.name, inp.stream.time_index, self.policy, self.tps)
            self.buffers[inp.stream.name] = buf
            pace = getattr(self.policy, "pace_ticks", None)
            if pace is not None:  # an adaptive policy: arrivals in steps of its pace
                prepared = paced(prepared, inp.stream.time_index, max(1, int(pace)))
            streams.append((released(buf, prepared), inp.stream.time_index))
        self.merge = TimeMerge(
            streams,
            grid=plan_slides(plan),
            prepare=self._prepare if self.policy is None else None,
            span=duration * self.tps if duration is not None else None,
            on_progress=self._on_progress,
            on_end=self._on_end,
            live={i for i, inp in enumerate(inputs) if inp.live is not None or not inp.rereadable},
        )

    def __iter__(self) -> Iterator[tuple[StreamInput, pa.RecordBatch]]:
        for index, batch in self.merge:
            yield self.inputs[index], batch

    def arrival_wall(self) -> float | None:
        """Wall time (``perf_counter``) of the latest arrival that released tuples from a
        K-slack buffer: what completed whatever fires next (None without buffers)."""
        if not self.buffers:
            return None
        return max(b.last_release_wall for b in self.buffers.values())

    def arrived_when_past(self, instant: int) -> int | None:
        """The largest timestamp that had arrived (at its buffer) when the last stream to
        release a tuple after ``instant`` did so: how far input had to go before the instant
        could fire (ticks; None when no stream has released past it, e.g. at the end)."""
        tops = [b.arrived_when_past(instant) for b in self.buffers.values()]
        known = [t for t in tops if t is not None]
        return max(known) if known else None

    def late_note(self, stream: str) -> str:
        """What a late tuple's dead letter adds about the buffer of ``stream`` (and the
        idle-stream rule, if it moved the stream)."""
        idle = ""
        if stream in self.idle_advanced:
            idle = f"; stream '{stream}' was idle and moved on by --idle-timeout"
        buf = self.buffers.get(stream)
        if buf is None:
            return idle
        tps = self.tps
        return (
            f"; its delay exceeded the K-slack of stream '{stream}' "
            f"(K = {buf.k() / tps:g} s, --disorder {self.policy.name if self.policy else ''})"
            + idle
        )

    def disorder_metrics(self) -> dict[str, Any] | None:
        """Per stream what its buffer measured (docs/disorder.md), None without buffers."""
        if self.policy is None:
            return None
        return {name: b.stats.metrics(b.k()) for name, b in sorted(self.buffers.items())}

    def policy_report(self) -> dict[str, Any] | None:
        """A quality-driven policy's own account (its ``report()``: K history, adaptations
        and their cost), None for the fixed policies."""
        report = getattr(self.policy, "report", None)
        return report() if report is not None else None

    def take_tells(self) -> tuple[dict[str, int], list[str]]:
        """The progress and ends reported since the last call or :meth:`tell`, taken away:
        what a caller that reads batches ahead of ingesting them (``hycq bench``
        materialises a span before timing it) keeps with each batch and hands back to
        :meth:`tell` when it ingests that batch. Told all at once before the first batch,
        a span's progress would mark its own tuples late."""
        tells = (dict(self.progress_bar), list(self._ended))
        self.progress_bar.clear()
        self._ended.clear()
        return tells

    def tell(
        self, engine: PlanExecutor, tells: tuple[dict[str, int], list[str]] | None = None
    ) -> None:
        """Pass the progress and ends reported since the last call (or ``tells``, from
        :meth:`take_tells`) on to ``engine``."""
        progress, ended = tells if tells is not None else self.take_tells()
        for name, key in progress.items():
            engine.advance_stream(name, key)
            self.known[name] = max(key, self.known.get(name, key))
        for name in ended:
            engine.end_stream(name)
            self.gone.add(name)
        for name, floor in idle_floor(self.known, self.gone, self.idle_ticks).items():
            engine.advance_stream(name, floor)
            self.known[name] = floor
            self.idle_advanced[name] = self.idle_advanced.get(name, 0) + 1

    def _on_progress(self, index: int, key: int) -> None:
        self.progress_bar[self.inputs[index].stream.name] = key

    def _on_end(self, index: int) -> None:
        self._ended.append(self.inputs[index].stream.name)

    def _prepared(self, index: int, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            yield self._prepare(index, b)

    def _prepare(self, index: int, batch: pa.RecordBatch) -> pa.RecordBatch:
        stream = self.inputs[index].stream
        batch = validate(batch, stream.name, self.dead)
        return to_time_base(batch, stream, self.time_unit, self.dead)


def idle_floor(
    progress: dict[str, int], ended: Collection[str], idle_ticks: int | None
) -> dict[str, int]:
    """The idle-stream rule (``--idle-timeout``), in event time: a live stream whose progress
    is more than ``idle_ticks`` behind the leading live stream counts as progressed to the
    lead minus ``idle_ticks``. Returns the streams it moves and where to. This is the one
    place the rule lives; a live source's wall-clock silence would feed the same progress."""
    if idle_ticks is None:
        return {}
    live = {n: p for n, p in progress.items() if n not in ended}
    if len(live) < 2:
        return {}
    floor = max(live.values()) - idle_ticks
    return {n: floor for n, p in live.items() if p < floor}


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

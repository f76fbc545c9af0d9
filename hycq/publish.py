"""``hycq data publish``: replay a stream to an MQTT broker, as live devices would send it.

The stream comes from a query's catalog (``QUERY.sql``: the stream it reads, ``--stream``
when it reads several), from a catalog (``CATALOG.toml`` with ``--stream`` unless it has one
stream), or from a data file (``.csv`` / ``.parquet`` smart-plug readings, or any stream's
file with ``--catalog`` and ``--stream``); a catalog's stream is its generator's (or its
file's) data, ``--rate`` and ``--duration`` as for ``hycq run``. Each message holds up to
``--batch`` rows (fewer if they would pass the 16 MiB a stream takes in one message) as raw
CSV lines (the stream's raw format, what ``--data STREAM=mqtt://...`` reads) or a JSON
array of objects (``--format json``); at the end the end-of-stream message
``{"end_of_stream": true}`` (unless ``--no-end``). ``--pace realtime`` sends each message
when its first timestamp is due (event time mapped to wall time from the first row);
``max`` sends as fast as the broker acknowledges (QoS 1, a bounded number of messages
unacknowledged; a broker outage is ridden out as ``--output mqtt://`` does, docs/live.md).
Rows stay Arrow until they are written into a payload.

Rows that do not fit the stream's columns are not published: they are counted, reported
and written to ``dead_letter`` (as ``hycq run --dead-letter`` writes them). A source that
yields no valid row is an error (exit 2) and nothing is sent, not even the end-of-stream
message, as ``hycq run`` refuses an input that kept no valid row.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from engines.runtime import DeadLetters, RunOptions
from engines.sources.mqtt import END_OF_STREAM, MqttPublisher, MqttUrl
from engines.sources.mqtt_payload import MAX_MESSAGE_BYTES
from hycq.flags import CLI_OPTION_NAMES
from optimizer.ir.catalog import StreamDef
from optimizer.ir.errors import DataError, OptionError

#: The catalog of a data file published without ``--catalog``.
SMARTPLUG_CATALOG = Path(__file__).resolve().parents[1] / "queries" / "smartplug" / "catalog.toml"


@dataclass
class Published:
    rows: int
    messages: int
    wall_s: float
    source: str
    #: rows that fit no column (not published; written to ``dead_letter`` when given)
    rejected: int = 0
    #: ``time.time()`` when the first message was sent, and its first timestamp (ticks)
    first_wall: float | None = None
    first_ts: int | None = None


def _pick(streams: list[str], wanted: str | None, where: str) -> str:
    if wanted is not None:
        for s in streams:
            if s.lower() == wanted.lower():
                return s
        raise OptionError(
            f"--stream {wanted}: {where} has no such stream", hint=f"streams: {', '.join(streams)}"
        )
    if len(streams) != 1:
        raise OptionError(
            f"{where} has {len(streams)} streams: say which with --stream",
            hint=f"streams: {', '.join(streams)}",
        )
    return streams[0]


def stream_batches(
    source: Path,
    catalog_path: Path | None,
    stream_name: str | None,
    options: RunOptions,
    dead: DeadLetters | None = None,
) -> tuple[StreamDef, Any, str]:
    """The stream to publish, its Arrow batches and a description (module docstring); rows
    that fit no column go to ``dead``."""
    from engines.runtime.inputs import open_stream
    from hycq.query import load_query
    from optimizer.ir.plan import Source
    from optimizer.sql.catalog import load_catalog

    suffix = source.suffix.lower()
    dead = dead if dead is not None else DeadLetters(None)
    if suffix == ".sql":
        q = load_query(source, catalog_path)
        reads = [op.stream for op in q.plan.operators() if isinstance(op, Source)]
        name = _pick(sorted(set(reads)), stream_name, f"query {source}")
        stream = q.catalog.get(name)
        assert stream is not None
        inp = open_stream(stream, options, dead)
    elif suffix == ".toml":
        catalog = load_catalog(source)
        name = _pick(sorted(catalog.streams), stream_name, f"catalog {source}")
        stream = catalog.streams[name]
        inp = open_stream(stream, options, dead)
    elif suffix in (".csv", ".parquet"):
        if catalog_path is None:  # the smart-plug readings
            catalog_path = SMARTPLUG_CATALOG
        catalog = load_catalog(catalog_path)
        name = _pick(sorted(catalog.streams), stream_name, f"catalog {catalog_path}")
        stream = catalog.streams[name]
        inp = open_stream(stream, options, dead, path=source)
    else:
        raise OptionError(
            f"cannot publish {source}: give a query (.sql), a catalog (.toml) or a data file "
            "(.csv, .parquet)"
        )
    return stream, inp.batches, inp.description


def _payloads(rows: pa.Table, fmt: str, limit: int = MAX_MESSAGE_BYTES) -> Iterator[bytes]:
    """The rows as messages a stream takes whole: one, or halves of it until each is at
    most ``limit`` bytes (engines/sources/mqtt_payload.py; a single row over it goes alone,
    and the reader dead-letters it)."""
    data = _payload(rows, fmt)
    if len(data) <= limit or rows.num_rows <= 1:
        yield data
        return
    half = rows.num_rows // 2
    yield from _payloads(rows.slice(0, half), fmt, limit)
    yield from _payloads(rows.slice(half), fmt, limit)


def _payload(rows: pa.Table, fmt: str) -> bytes:
    """Raw CSV lines in the catalog's column order (no header), or a JSON array."""
    if fmt == "json":
        return json.dumps(rows.to_pylist()).encode()
    sink = pa.BufferOutputStream()
    pacsv.write_csv(rows, sink, pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    return sink.getvalue().to_pybytes()


def publish(
    source: Path,
    to: str,
    *,
    catalog: Path | None = None,
    stream: str | None = None,
    rate: float | None = None,
    duration: float | None = None,
    pace: str = "max",
    batch: int = 1000,
    fmt: str = "csv",
    end: bool = True,
    dead_letter: Path | None = None,
) -> Published:
    """Publish the stream (module docstring); returns what was sent."""
    url = MqttUrl.parse(to, "--to")
    url.check_publishable("--to")
    options = RunOptions(rate=rate, duration=duration, names=CLI_OPTION_NAMES)
    dead = DeadLetters(dead_letter, CLI_OPTION_NAMES.dead_letter)
    try:
        sdef, batches, description = stream_batches(source, catalog, stream, options, dead)
        done = _send(url, sdef, batches, description, dead, duration, pace, batch, fmt, end)
    except BaseException:
        dead.abort()
        raise
    dead.close()
    return done


def _send(
    url: MqttUrl,
    sdef: StreamDef,
    batches: Any,
    description: str,
    dead: DeadLetters,
    duration: float | None,
    pace: str,
    batch: int,
    fmt: str,
    end: bool,
) -> Published:
    """Publish the batches, then the end-of-stream message once some row was valid."""
    from engines.runtime.inputs import ticks_per_second

    tps = ticks_per_second(sdef)
    t_index = sdef.time_index
    publisher = MqttPublisher(url, "--to")
    rows = messages = 0
    start_wall: float | None = None
    first_ts: int | None = None
    t0 = time.perf_counter()
    limit: int | None = None
    first_epoch: float | None = None
    try:
        for b in batches:
            table = pa.Table.from_batches([b])
            if duration is not None and table.num_rows:
                if limit is None:
                    limit = int(table.column(t_index)[0].as_py()) + int(duration * tps)
                table = table.filter(pc.less(table.column(t_index), limit))
            for off in range(0, table.num_rows, batch):
                part = table.slice(off, batch)
                ts = int(part.column(t_index)[0].as_py())
                if first_ts is None:
                    first_ts, start_wall, first_epoch = ts, time.perf_counter(), time.time()
                if pace == "realtime":
                    assert start_wall is not None
                    wait = start_wall + (ts - first_ts) / tps - time.perf_counter()
                    if wait > 0:
                        time.sleep(wait)
                for payload in _payloads(part, fmt):
                    publisher.publish(payload)
                    messages += 1
                rows += part.num_rows
        if rows == 0:
            _nothing_valid(description, dead)
        if end:
            publisher.publish(json.dumps(END_OF_STREAM).encode())
            messages += 1
        publisher.close()
    except BaseException:
        publisher.abort()
        raise
    return Published(
        rows,
        messages,
        time.perf_counter() - t0,
        description,
        rejected=dead.by_kind.get("invalid", 0),
        first_wall=first_epoch,
        first_ts=first_ts,
    )


def _nothing_valid(description: str, dead: DeadLetters) -> None:
    """DataError for a source that gave no row to publish (module docstring)."""
    bad = dead.by_kind.get("invalid", 0)
    if bad:
        reason = next(iter(dead.first_reason.values()), "?")
        raise DataError(
            f"no valid row in {description}: all {bad:,} rows were rejected (first: {reason})",
            hint="pass --dead-letter PATH to see every rejected row and why; check the "
            "catalog's columns (--catalog, --stream) against the file",
        )
    raise DataError(
        f"no rows to publish in {description}",
        hint="check the file, --duration and the catalog's source",
    )

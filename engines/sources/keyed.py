"""Keyed multi-stream workloads: several streams of ``(ts, k, v)`` for window joins on keys.

A workload is a set of streams (``KeyedStream``), each with columns ``ts BIGINT`` (event time,
ticks of the stream's unit), ``k INTEGER`` (a key in ``0 .. keys-1``) and ``v DOUBLE`` (a
value in ``[0, 100)`` with two decimals). Every stream has its own rate, key domain, key skew,
start and end, silent periods and time unit, so one workload can hold streams of very
different densities that start, pause and stop at different times: what multi-stream joins,
plan migration and disorder handling are tested and measured on.

Time. Offsets are seconds after the workload's *origin* (epoch seconds, ``DEFAULT_ORIGIN``).
A stream's ``i``-th tuple (``i = 0, 1, ...``) lies at offset ``start + i / rate``, floored to
a tick of its unit; offsets in a silent period ``[from, to)`` produce nothing (a gap, not a
delay: the schedule goes on), and the stream stops at ``end`` (default: the span generated).
So a stream is in event-time order, with ``rate`` tuples per event-second (several tuples
share a timestamp when the rate is above one per tick).

Keys. ``skew = 0`` draws keys uniformly; ``skew = z > 0`` draws key ``j`` with probability
proportional to ``1 / (j + 1) ** z`` (Zipf over the finite domain: key 0 is the hottest).

Determinism. A stream's tuples depend only on the seed, the stream's name and its own
parameters (not on the other streams, nor on how its batches are cut): its draws come from
``PCG64(SeedSequence([seed, crc32(name)]))``, two doubles per tuple, consumed in order.

Example:
    >>> gen = KeyedGenerator(KeyedStream("r", rate=2, keys=5), seed=1, origin=100)
    >>> t = gen.table(3)
    >>> t.column("ts").to_pylist()
    [100, 100, 101, 101, 102, 102]
    >>> KeyedGenerator(KeyedStream("r", rate=2, keys=5, silent=((1, 2),)), origin=100).table(
    ...     3).column("ts").to_pylist()
    [100, 100, 102, 102]
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from engines.output_files import OutputFile, write_bytes
from optimizer.ir.catalog import TIME_UNITS_MS
from optimizer.ir.errors import OptionError

#: Columns of every keyed stream.
SCHEMA = pa.schema(
    [pa.field("ts", pa.int64()), pa.field("k", pa.int32()), pa.field("v", pa.float64())]
)
#: Catalog column types of ``SCHEMA``.
CATALOG_COLUMNS = (("ts", "BIGINT"), ("k", "INTEGER"), ("v", "DOUBLE"))
#: Offset 0 of a workload, epoch seconds (2014-05-13 16:53:20 UTC).
DEFAULT_ORIGIN = 1_400_000_000
#: The file formats ``write_workload`` writes (CSV with a header row, or Parquet).
FORMATS = ("csv", "parquet")


@dataclass(frozen=True)
class KeyedStream:
    """One stream of a keyed workload (see the module docstring).

    ``rate``: tuples per event-second; ``keys``: size of the key domain; ``skew``: Zipf
    exponent (0 = uniform); ``start`` / ``end``: offsets in seconds (``end`` None: the span
    generated); ``silent``: ``(from, to)`` offset pairs without tuples; ``time_unit``: ``s``
    or ``ms``.
    """

    name: str
    rate: float = 20.0
    keys: int = 100
    skew: float = 0.0
    start: float = 0.0
    end: float | None = None
    silent: tuple[tuple[float, float], ...] = field(default=())
    time_unit: str = "s"

    def __post_init__(self) -> None:
        problems = []
        if not self.name or not self.name.isidentifier():
            problems.append(f"stream name {self.name!r} must be an identifier, e.g. r")
        if not (math.isfinite(self.rate) and self.rate > 0):
            problems.append(f"rate must be a positive number, got {self.rate}")
        if isinstance(self.keys, bool) or not isinstance(self.keys, int) or self.keys < 1:
            problems.append(f"keys must be a positive integer, got {self.keys!r}")
        if not (math.isfinite(self.skew) and self.skew >= 0):
            problems.append(f"skew must be >= 0, got {self.skew}")
        if not (math.isfinite(self.start) and self.start >= 0):
            problems.append(f"start must be an offset >= 0 seconds, got {self.start}")
        if self.end is not None and not (math.isfinite(self.end) and self.end > self.start):
            problems.append(f"end must be after start ({self.start}), got {self.end}")
        for lo, hi in self.silent:
            if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo < hi):
                problems.append(f"silent period {lo}-{hi} must have 0 <= from < to")
        if self.time_unit not in TIME_UNITS_MS:
            problems.append(f"time unit must be 's' or 'ms', got {self.time_unit!r}")
        if problems:
            raise OptionError(f"stream {self.name}: " + "; ".join(problems))


class KeyedGenerator:
    """The tuples of one ``KeyedStream`` (see the module docstring)."""

    def __init__(self, stream: KeyedStream, seed: int = 42, origin: int = DEFAULT_ORIGIN) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise OptionError(f"seed must be an integer >= 0, got {seed!r}")
        if isinstance(origin, bool) or not isinstance(origin, int) or origin < 0:
            raise OptionError(f"origin must be an integer >= 0 (epoch seconds), got {origin!r}")
        self.stream = stream
        self.seed = seed
        self.origin = origin
        self.tps = 1000 // TIME_UNITS_MS[stream.time_unit]
        self._rate = Fraction(stream.rate).limit_denominator(1000)
        if stream.skew > 0:
            weights = 1.0 / np.arange(1, stream.keys + 1, dtype=np.float64) ** stream.skew
            self._cdf: np.ndarray | None = np.cumsum(weights) / weights.sum()
        else:
            self._cdf = None

    @property
    def rate(self) -> float:
        return self.stream.rate

    def _ticks(self, seconds: float) -> int:
        return round(seconds * self.tps)

    def _count(self, seconds: float) -> int:
        """Tuples scheduled in ``[start, min(end, seconds))`` (silent ones included)."""
        stop = seconds if self.stream.end is None else min(seconds, self.stream.end)
        span = self._ticks(stop) - self._ticks(self.stream.start)
        if span <= 0:
            return 0
        # Tuple i lies at tick start + floor(i * tps / rate): i < span * rate / tps.
        return math.ceil(Fraction(span) * self._rate / self.tps)

    def rows(self, seconds: float) -> int:
        """How many tuples ``batches(seconds)`` yields (without drawing them)."""
        total = self._count(seconds)
        kept = total
        for i0 in range(0, total, 1 << 20):
            rel = self._offsets(i0, min(1 << 20, total - i0))
            kept -= int(np.count_nonzero(~self._audible(rel)))
        return kept

    def _offsets(self, i0: int, n: int) -> np.ndarray:
        """Ticks after the origin of tuples ``i0 .. i0+n-1``."""
        i = np.arange(i0, i0 + n, dtype=np.int64)
        num, den = self._rate.numerator, self._rate.denominator
        return (i * (self.tps * den)) // num + self._ticks(self.stream.start)

    def _audible(self, rel: np.ndarray) -> np.ndarray:
        """Which offsets (ticks after the origin) lie outside every silent period."""
        keep = np.ones(len(rel), dtype=bool)
        for lo, hi in self.stream.silent:
            keep &= ~((rel >= self._ticks(lo)) & (rel < self._ticks(hi)))
        return keep

    def table(self, seconds: float) -> pa.Table:
        return pa.Table.from_batches(list(self.batches(seconds)), schema=SCHEMA)

    def batches(self, seconds: float, batch_seconds: int = 1) -> Iterator[pa.RecordBatch]:
        """The stream's tuples with offsets before ``seconds``, about ``batch_seconds``
        event-seconds per batch (batches that would be empty are skipped)."""
        if not (isinstance(seconds, int | float) and math.isfinite(seconds) and seconds >= 0):
            raise OptionError(f"seconds must be a number >= 0, got {seconds!r}")
        total = self._count(seconds)
        rng = np.random.Generator(
            np.random.PCG64(
                np.random.SeedSequence([self.seed, zlib.crc32(self.stream.name.encode())])
            )
        )
        per = max(1, math.ceil(float(self._rate) * max(1, batch_seconds)))
        origin = self.origin * self.tps
        keys = self.stream.keys
        for i0 in range(0, total, per):
            n = min(per, total - i0)
            rel = self._offsets(i0, n)
            draws = rng.random((n, 2))  # drawn for silent tuples too: batch-size independent
            keep = self._audible(rel)
            if not keep.any():
                continue
            if self._cdf is None:
                k = (draws[:, 0] * keys).astype(np.int64)
            else:
                k = np.searchsorted(self._cdf, draws[:, 0], side="right")
            k = np.minimum(k, keys - 1)
            v = np.floor(draws[:, 1] * 10000.0) / 100.0
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array((origin + rel)[keep], pa.int64()),
                    pa.array(k[keep].astype(np.int32), pa.int32()),
                    pa.array(v[keep], pa.float64()),
                ],
                schema=SCHEMA,
            )


def catalog_text(
    streams: Sequence[KeyedStream],
    seed: int,
    origin: int,
    files: dict[str, str] | None = None,
) -> str:
    """A catalog (TOML) for ``streams``: with ``files`` (stream -> file name), file sources;
    without, keyed-generator sources that regenerate the same tuples."""
    out = [
        'doc = "Keyed multi-stream workload: streams of (ts, k, v) for window joins on k '
        '(hycq data generate --generator keyed)."\n'
    ]
    for s in streams:
        unit = "seconds" if s.time_unit == "s" else "milliseconds"
        out.append(f"\n[streams.{s.name}]\n")
        out.append(f'doc = "{s.rate:g} tuples/s, keys 0..{s.keys - 1}, skew {s.skew:g}"\n')
        out.append(f'timestamp = "ts"\ntime_unit = "{s.time_unit}"  # {unit}\n')
        out.append(f"rate = {s.rate:g}\n")
        out.append(f"\n[streams.{s.name}.columns]\n")
        out.extend(f'{name} = "{dtype}"\n' for name, dtype in CATALOG_COLUMNS)
        out.append(f"\n[streams.{s.name}.source]\n")
        if files is not None:
            fmt = "parquet" if files[s.name].endswith(".parquet") else "csv"
            out.append(f'kind = "file"\npath = "{files[s.name]}"\nformat = "{fmt}"\n')
            continue
        out.append(f'kind = "generator"\ngenerator = "keyed"\nseed = {seed}\norigin = {origin}\n')
        out.append(f"keys = {s.keys}\n")
        if s.skew:
            out.append(f"skew = {s.skew:g}\n")
        if s.start:
            out.append(f"start = {s.start:g}\n")
        if s.end is not None:
            out.append(f"end = {s.end:g}\n")
        if s.silent:
            pairs = ", ".join(f"[{lo:g}, {hi:g}]" for lo, hi in s.silent)
            out.append(f"silent = [{pairs}]\n")
    return "".join(out)


def write_workload(
    folder: Path | str,
    streams: Sequence[KeyedStream],
    seconds: float,
    seed: int = 42,
    origin: int = DEFAULT_ORIGIN,
    fmt: str = "csv",
) -> dict[str, int]:
    """Write one file per stream (``<name>.csv`` with a header row, or ``<name>.parquet``)
    and ``catalog.toml`` naming them into ``folder``; returns rows per stream. Each file
    appears atomically (written to a temporary file and renamed)."""
    folder = Path(folder)
    if fmt not in FORMATS:
        raise OptionError(f"unknown format {fmt!r}", hint="use csv or parquet")
    names = [s.name for s in streams]
    if not streams:
        raise OptionError("a keyed workload needs at least one stream")
    if len({n.lower() for n in names}) != len(names):
        raise OptionError(f"stream names must be distinct, got {', '.join(names)}")
    counts: dict[str, int] = {}
    files: dict[str, str] = {}
    for s in streams:
        name = f"{s.name}.{fmt}"
        counts[s.name] = _write_stream(folder / name, KeyedGenerator(s, seed, origin), seconds, fmt)
        files[s.name] = name
    write_bytes(folder / "catalog.toml", catalog_text(streams, seed, origin, files), "--out")
    return counts


def _write_stream(path: Path, gen: KeyedGenerator, seconds: float, fmt: str) -> int:
    """Write one stream through :class:`OutputFile` (a temporary file renamed on success,
    removed on any failure or signal; the umask honoured; symlinks and devices written
    through)."""
    rows = 0
    per_batch = max(1, min(3600, (1 << 20) // max(1, math.ceil(gen.rate))))
    out = OutputFile(path, "--out")
    with out, out.errors():
        if fmt == "csv":
            with pacsv.CSVWriter(out.file("wb"), SCHEMA) as csv_writer:
                for batch in gen.batches(seconds, per_batch):
                    csv_writer.write_batch(batch)
                    rows += batch.num_rows
        else:
            with pq.ParquetWriter(out.file("wb"), SCHEMA) as pq_writer:
                for batch in gen.batches(seconds, per_batch):
                    pq_writer.write_batch(batch)
                    rows += batch.num_rows
    return rows


def parse_stream_spec(spec: str, defaults: KeyedStream) -> KeyedStream:
    """A ``KeyedStream`` from the CLI's ``NAME[:key=value,...]`` (keys rate, keys, skew,
    start, end, silent=FROM-TO[+FROM-TO...], unit), the rest taken from ``defaults``.

    >>> parse_stream_spec("s:rate=200,silent=30-60+90-95", KeyedStream("x")).silent
    ((30.0, 60.0), (90.0, 95.0))
    """
    name, _, rest = spec.partition(":")
    values: dict[str, object] = {
        "rate": defaults.rate,
        "keys": defaults.keys,
        "skew": defaults.skew,
        "start": defaults.start,
        "end": defaults.end,
        "silent": defaults.silent,
        "time_unit": defaults.time_unit,
    }
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq:
            raise OptionError(
                f"--stream {spec}: '{item}' is not key=value",
                hint="e.g. --stream s:rate=200,start=10,silent=30-60",
            )
        try:
            if key in ("rate", "skew", "start", "end"):
                values[key] = float(value)
            elif key == "keys":
                values["keys"] = int(value)
            elif key == "unit":
                values["time_unit"] = value.strip()
            elif key == "silent":
                pairs = []
                for part in value.split("+"):
                    lo, dash, hi = part.partition("-")
                    if not dash:
                        raise ValueError(part)
                    pairs.append((float(lo), float(hi)))
                values["silent"] = tuple(pairs)
            else:
                raise OptionError(
                    f"--stream {spec}: unknown setting '{key}'",
                    hint="settings: rate, keys, skew, start, end, silent, unit",
                )
        except ValueError:
            raise OptionError(
                f"--stream {spec}: bad value '{value}' for {key}",
                hint="numbers; silent periods as FROM-TO seconds, several joined by +",
            ) from None
    return KeyedStream(name=name.strip(), **values)  # type: ignore[arg-type]

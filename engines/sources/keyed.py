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

Drift (optimizer.ir.profile: ``SECONDS:VALUE`` points joined by ``,`` for a step or ``~``
for a linear ramp, offsets after the origin). ``rate_profile`` replaces the constant rate:
tuple ``i`` lies where the integral of the rate from ``start`` reaches ``i`` (so a step from
1000 to 40000 tuples/s at 60 s is exactly that, per second). ``keys_profile``,
``skew_profile`` and ``hot`` change the key domain, the Zipf exponent and the hot key
(key ``(j + hot) mod keys`` is drawn where ``j`` would be: with ``hot = 0:0,60:50`` the
hottest key moves from 0 to 50 at 60 s) at given times (steps only). ``selectivity`` sets
the fraction of tuples with ``v < 10`` (the workloads' typical predicate ``WHERE v < 10``;
uniform ``v`` gives 0.1): below 10 with that probability, uniform within [0, 10) or
[10, 100) otherwise (steps and ramps).

Disorder. ``delay`` (``--delay zipf:MAX,SKEW``, per stream ``delay=zipf:MAX,SKEW``) keeps
the schedule above as the *arrival* order and gives each tuple the event timestamp ``ts =
arrival - delay``, the delay Zipf-distributed over ``0 .. MAX`` ticks (engines/sources/
delays.py, Ji's synthetic method): the file is in arrival order, out of order in ``ts``.

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
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from engines.output_files import OutputFile, write_bytes
from engines.sources.delays import DelaySpec, delay_rng, parse_delay
from optimizer.ir.catalog import TIME_UNITS_MS
from optimizer.ir.errors import OptionError
from optimizer.ir.limits import LIMIT, MAX_KEYS, MAX_RATE, MAX_SKEW
from optimizer.ir.profile import Profile, parse_profile

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
    or ``ms``. Drift (module docstring): ``rate_profile`` (then ``rate`` is its first value),
    ``keys_profile``, ``skew_profile``, ``hot``, ``selectivity``.
    """

    name: str
    rate: float = 20.0
    keys: int = 100
    skew: float = 0.0
    start: float = 0.0
    end: float | None = None
    silent: tuple[tuple[float, float], ...] = field(default=())
    time_unit: str = "s"
    rate_profile: Profile | None = None
    keys_profile: Profile | None = None
    skew_profile: Profile | None = None
    hot: Profile | None = None
    selectivity: Profile | None = None
    #: Induced disorder (engines/sources/delays.py): tuples stay in arrival order, their
    #: timestamps are the arrival instant minus a Zipf delay.
    delay: DelaySpec | None = None

    @property
    def drifts(self) -> bool:
        """Keys or values follow a profile (the generator's drift path)."""
        return any(p is not None for p in (self.keys_profile, self.skew_profile, self.hot))

    @property
    def max_keys(self) -> int:
        return int(self.keys_profile.highest) if self.keys_profile is not None else self.keys

    def __post_init__(self) -> None:
        problems = []
        if self.rate_profile is not None:
            if self.rate_profile.highest <= 0:
                problems.append("rate profile is 0 everywhere")
            object.__setattr__(self, "rate", self.rate_profile.first or self.rate_profile.highest)
        if self.keys_profile is not None and min(self.keys_profile.values) < 1:
            problems.append("keys profile must stay >= 1")
        if self.selectivity is not None and not all(0 <= v <= 1 for v in self.selectivity.values):
            problems.append("selectivity must stay within [0, 1]")
        if not self.name or not self.name.isidentifier():
            problems.append(f"stream name {self.name!r} must be an identifier, e.g. r")
        if not (math.isfinite(self.rate) and 0 < self.rate <= MAX_RATE):
            problems.append(f"rate must be a positive number up to {MAX_RATE:g}, got {self.rate}")
        if (
            isinstance(self.keys, bool)
            or not isinstance(self.keys, int)
            or not 1 <= self.keys <= MAX_KEYS
        ):
            problems.append(f"keys must be an integer in [1, {MAX_KEYS:,}], got {self.keys!r}")
        if not (math.isfinite(self.skew) and 0 <= self.skew <= MAX_SKEW):
            problems.append(f"skew must be in [0, {MAX_SKEW:g}], got {self.skew}")
        if not (math.isfinite(self.start) and 0 <= self.start <= LIMIT):
            problems.append(f"start must be an offset in [0, {LIMIT:g}] seconds, got {self.start}")
        if self.end is not None and not (
            math.isfinite(self.end) and self.start < self.end <= LIMIT
        ):
            problems.append(f"end must be after start ({self.start}), got {self.end}")
        for lo, hi in self.silent:
            if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo < hi <= LIMIT):
                problems.append(f"silent period {lo}-{hi} must have 0 <= from < to <= {LIMIT:g}")
        if self.time_unit not in TIME_UNITS_MS:
            problems.append(f"time unit must be 's' or 'ms', got {self.time_unit!r}")
        if self.delay is not None and self.time_unit in TIME_UNITS_MS:
            try:
                self.delay.max_ticks(1000 // TIME_UNITS_MS[self.time_unit])
            except OptionError as err:
                problems.append(err.message)
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
        self._profile = stream.rate_profile
        if self._profile is not None:
            self._n0 = math.ceil(float(self._profile.cumulative(stream.start)) - 1e-9)
        self._cdfs: dict[tuple[int, float], np.ndarray] = {}
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
        if self._profile is not None:
            return self._index_before(self._ticks(stop) / self.tps)
        # Tuple i lies at tick start + floor(i * tps / rate): i < span * rate / tps.
        return math.ceil(Fraction(span) * self._rate / self.tps)

    def rows(self, seconds: float) -> int:
        """How many tuples ``batches(seconds)`` yields (without drawing them; at a constant
        rate in constant time, whatever the count)."""
        total = self._count(seconds)
        if not self.stream.silent:
            return total
        if self._profile is None:
            return total - self._silent_count(total)
        kept = total
        for i0 in range(0, total, 1 << 20):
            rel = self._offsets(i0, min(1 << 20, total - i0))
            kept -= int(np.count_nonzero(~self._audible(rel)))
        return kept

    def _silent_count(self, total: int) -> int:
        """At a constant rate: how many of the first ``total`` tuples fall in a silent
        period (the periods merged, so that overlaps count once)."""
        periods = sorted((self._ticks(lo), self._ticks(hi)) for lo, hi in self.stream.silent)
        merged: list[list[int]] = []
        for lo, hi in periods:
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        return sum(self._tuples_before(hi, total) - self._tuples_before(lo, total)
                   for lo, hi in merged)  # fmt: skip

    def _tuples_before(self, tick: int, total: int) -> int:
        """At a constant rate: how many of the first ``total`` tuples have an offset (ticks
        after the origin, as :meth:`_offsets`) below ``tick``."""
        num, den = self._rate.numerator, self._rate.denominator
        # offset(i) = floor(i * tps * den / num) + start < tick  <=>  i < (tick - start) * num
        # / (tps * den), the bound an integer difference of ticks makes exact
        span = tick - self._ticks(self.stream.start)
        if span <= 0:
            return 0
        return min(total, math.ceil(Fraction(span * num, self.tps * den)))

    def _index_before(self, t: float) -> int:
        """Rate profile: how many of the stream's tuples lie before offset ``t``."""
        assert self._profile is not None
        if t <= self.stream.start:
            return 0
        return max(0, math.ceil(float(self._profile.cumulative(t)) - 1e-9) - self._n0)

    def _offsets(self, i0: int, n: int) -> np.ndarray:
        """Ticks after the origin of tuples ``i0 .. i0+n-1``."""
        i = np.arange(i0, i0 + n, dtype=np.int64)
        if self._profile is not None:
            at = self._profile.inverse_cumulative((i + self._n0).astype(np.float64))
            at = np.maximum(at, self.stream.start)
            return np.floor(at * self.tps + 1e-6).astype(np.int64)
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
        origin = self.origin * self.tps
        keys = self.stream.keys
        delays = None if self.stream.delay is None else delay_rng(self.seed, self.stream.name)
        for i0, n in self._spans(total, max(1, batch_seconds)):
            rel = self._offsets(i0, n)
            draws = rng.random((n, 2))  # drawn for silent tuples too: batch-size independent
            ts_rel = rel  # the event timestamp: the arrival instant, or earlier when delayed
            if delays is not None:
                assert self.stream.delay is not None
                ts_rel = rel - self.stream.delay.draw(delays, n, self.tps)
            keep = self._audible(rel)
            if not keep.any():
                continue
            if self.stream.drifts:
                k = self._drifting_keys(rel, draws[:, 0])
            elif self._cdf is None:
                k = (draws[:, 0] * keys).astype(np.int64)
                k = np.minimum(k, keys - 1)
            else:
                k = np.searchsorted(self._cdf, draws[:, 0], side="right")
                k = np.minimum(k, keys - 1)
            if self.stream.selectivity is None:
                v = np.floor(draws[:, 1] * 10000.0) / 100.0
            else:
                v = self._shifted_values(rel, draws[:, 1])
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array((origin + ts_rel)[keep], pa.int64()),
                    pa.array(k[keep].astype(np.int32), pa.int32()),
                    pa.array(v[keep], pa.float64()),
                ],
                schema=SCHEMA,
            )

    def _spans(self, total: int, batch_seconds: int) -> Iterator[tuple[int, int]]:
        """(first index, count) of each batch: ``batch_seconds`` worth of tuples at the
        constant rate; with a rate profile, the tuples of each ``batch_seconds`` of event
        time (so a batch spans the same event time at 1000 and at 40000 tuples/s)."""
        if self._profile is None:
            per = max(1, math.ceil(float(self._rate) * batch_seconds))
            for i0 in range(0, total, per):
                yield i0, min(per, total - i0)
            return
        t = float(self.stream.start)
        i0 = 0
        while i0 < total:
            t = (math.floor(t / batch_seconds) + 1) * batch_seconds
            i1 = min(total, self._index_before(t))
            if i1 > i0:
                yield i0, i1 - i0
            i0 = max(i0, i1)

    def _cdf_of(self, keys: int, skew: float) -> np.ndarray:
        cdf = self._cdfs.get((keys, skew))
        if cdf is None:
            weights = 1.0 / np.arange(1, keys + 1, dtype=np.float64) ** skew
            cdf = self._cdfs[(keys, skew)] = np.cumsum(weights) / weights.sum()
        return cdf

    def _drifting_keys(self, rel: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Keys under key-domain, skew and hot-key profiles (piecewise constant)."""
        st = self.stream
        at = rel / self.tps
        keys = st.keys_profile.at(at).astype(np.int64) if st.keys_profile else None
        skew = st.skew_profile.at(at) if st.skew_profile else None
        hot = st.hot.at(at).astype(np.int64) if st.hot else None
        domain = keys if keys is not None else np.full(len(rel), st.keys, dtype=np.int64)
        expo = skew if skew is not None else np.full(len(rel), st.skew)
        k = np.empty(len(rel), dtype=np.int64)
        pairs = np.unique(np.stack([domain.astype(np.float64), expo]), axis=1)
        for d, z in pairs.T:
            mask = (domain == d) & (expo == z)
            if z > 0:
                k[mask] = np.searchsorted(self._cdf_of(int(d), float(z)), u[mask], side="right")
            else:
                k[mask] = (u[mask] * d).astype(np.int64)
        k = np.minimum(k, domain - 1)
        if hot is not None:
            k = (k + hot) % domain
        return k

    def _shifted_values(self, rel: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Values with a fraction ``selectivity(t)`` below 10, uniform on either side."""
        assert self.stream.selectivity is not None
        p = np.clip(self.stream.selectivity.at(rel / self.tps), 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            low = np.where(p > 0, u / p * 10.0, 0.0)
            high = np.where(p < 1, 10.0 + (u - p) / (1.0 - p) * 90.0, 10.0)
        v = np.where(u < p, np.minimum(low, 9.99), np.minimum(high, 99.99))
        return np.floor(v * 100.0) / 100.0


def generator_from_options(
    name: str,
    rate: float,
    time_unit: str,
    options: Sequence[tuple[str, object]],
    use_rate_profile: bool = True,
) -> KeyedGenerator:
    """The generator of a catalog's keyed source (``[streams.X.source]`` settings)."""
    o = dict(options)

    def profile(key: str, setting: str) -> Profile | None:
        text = o.get(key)
        return None if text is None else stream_profile(setting, str(text), f"{name}: {key}")

    silent = o.get("silent", ())
    spec = KeyedStream(
        name,
        rate=rate,
        keys=int(str(o.get("keys", 100))),
        skew=float(str(o.get("skew", 0.0))),
        start=float(str(o.get("start", 0.0))),
        end=float(str(o["end"])) if o.get("end") is not None else None,
        silent=silent if isinstance(silent, tuple) else (),
        time_unit=time_unit,
        rate_profile=profile("rate_profile", "rate") if use_rate_profile else None,
        keys_profile=profile("keys_profile", "keys"),
        skew_profile=profile("skew_profile", "skew"),
        hot=profile("hot", "hot"),
        selectivity=profile("selectivity", "sel"),
    )
    return KeyedGenerator(
        spec, seed=int(str(o.get("seed", 42))), origin=int(str(o.get("origin", DEFAULT_ORIGIN)))
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
        rate = s.rate_profile.text() if s.rate_profile is not None else f"{s.rate:g}"
        late = ""
        if s.delay is not None:
            late = f", arrival order with delays {s.delay.text()} (Zipf over 0..MAX, exponent)"
        out.append(f'doc = "{rate} tuples/s, keys 0..{s.max_keys - 1}, skew {s.skew:g}{late}"\n')
        if s.delay is not None:
            out.append(f"# delay = {s.delay.text()}: ts = arrival instant - a Zipf delay\n")
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
        out.append(f"keys = {s.max_keys}\n")
        if s.skew:
            out.append(f"skew = {s.skew:g}\n")
        if s.start:
            out.append(f"start = {s.start:g}\n")
        if s.end is not None:
            out.append(f"end = {s.end:g}\n")
        if s.silent:
            pairs = ", ".join(f"[{lo:g}, {hi:g}]" for lo, hi in s.silent)
            out.append(f"silent = [{pairs}]\n")
        for key, profile in (
            ("rate_profile", s.rate_profile),
            ("keys_profile", s.keys_profile),
            ("skew_profile", s.skew_profile),
            ("hot", s.hot),
            ("selectivity", s.selectivity),
        ):
            if profile is not None:
                out.append(f'{key} = "{profile.text()}"\n')
    return "".join(out)


def write_workload(
    folder: Path | str,
    streams: Sequence[KeyedStream],
    seconds: float,
    seed: int = 42,
    origin: int = DEFAULT_ORIGIN,
    fmt: str = "csv",
    before: Callable[[int], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Write one file per stream (``<name>.csv`` with a header row, or ``<name>.parquet``)
    and ``catalog.toml`` naming them into ``folder``; returns rows per stream. Each file
    appears atomically (written to a temporary file and renamed). ``before`` is called
    with the number of rows before anything is written (it may refuse them,
    engines/sources/budget.py), ``progress`` with the rows of every batch written."""
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
    gens = [KeyedGenerator(s, seed, origin) for s in streams]
    if before is not None:
        before(sum(g.rows(seconds) for g in gens))
    folder.mkdir(exist_ok=True)
    for s, gen in zip(streams, gens, strict=True):
        name = f"{s.name}.{fmt}"
        counts[s.name] = _write_stream(folder / name, gen, seconds, fmt, progress)
        files[s.name] = name
    write_bytes(folder / "catalog.toml", catalog_text(streams, seed, origin, files), "--out")
    return counts


def _write_stream(
    path: Path,
    gen: KeyedGenerator,
    seconds: float,
    fmt: str,
    progress: Callable[[int], None] | None = None,
) -> int:
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
                    if progress is not None:
                        progress(batch.num_rows)
        else:
            with pq.ParquetWriter(out.file("wb"), SCHEMA) as pq_writer:
                for batch in gen.batches(seconds, per_batch):
                    pq_writer.write_batch(batch)
                    rows += batch.num_rows
                    if progress is not None:
                        progress(batch.num_rows)
    return rows


#: ``--stream`` settings that take a profile (optimizer.ir.profile) as well as a number.
_PROFILE_SETTINGS = {
    "rate": ("rate_profile", {"high": MAX_RATE, "positive_somewhere": True}),
    "keys": ("keys_profile", {"low": 1, "high": MAX_KEYS, "integer": True, "steps_only": True}),
    "skew": ("skew_profile", {"high": MAX_SKEW, "steps_only": True}),
    "hot": ("hot", {"integer": True, "steps_only": True}),
    "sel": ("selectivity", {"high": 1.0}),
}


def stream_profile(setting: str, text: str, what: str) -> Profile:
    """Parse the profile of ``--stream`` / catalog setting ``setting`` (rate, keys, skew,
    hot, sel), with that setting's bounds."""
    return parse_profile(text, what, **_PROFILE_SETTINGS[setting][1])  # type: ignore[arg-type]


def parse_stream_spec(spec: str, defaults: KeyedStream) -> KeyedStream:
    """A ``KeyedStream`` from the CLI's ``NAME[:key=value,...]`` (keys rate, keys, skew,
    start, end, silent=FROM-TO[+FROM-TO...], unit, hot, sel, delay=zipf:MAX,SKEW), the rest
    taken from ``defaults``. ``rate``, ``keys``, ``skew``, ``hot`` and ``sel`` also take a profile
    (``SECONDS:VALUE`` points joined by ``,`` or ``~``; a comma followed by ``name=`` starts
    the next setting).

    >>> parse_stream_spec("s:rate=200,silent=30-60+90-95", KeyedStream("x")).silent
    ((30.0, 60.0), (90.0, 95.0))
    >>> parse_stream_spec("s:rate=0:10,60:400,keys=20", KeyedStream("x")).rate_profile.text()
    '0:10,60:400'
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
        "rate_profile": defaults.rate_profile,
        "keys_profile": defaults.keys_profile,
        "skew_profile": defaults.skew_profile,
        "hot": defaults.hot,
        "selectivity": defaults.selectivity,
        "delay": defaults.delay,
    }
    items = re.split(r",(?=\s*[A-Za-z_]+\s*=)", rest) if rest else []
    for item in filter(None, (p.strip() for p in items)):
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq:
            raise OptionError(
                f"--stream {spec}: '{item}' is not key=value",
                hint="e.g. --stream s:rate=200,start=10,silent=30-60",
            )
        try:
            if key in _PROFILE_SETTINGS and (":" in value or key in ("hot", "sel")):
                field_name = _PROFILE_SETTINGS[key][0]
                profile = stream_profile(key, value, f"--stream {spec}: {key}")
                values[field_name] = profile
                if key == "keys":
                    values["keys"] = int(profile.highest)
            elif key in ("rate", "skew", "start", "end"):
                values[key] = float(value)
                if key == "rate":
                    values["rate_profile"] = None
            elif key == "keys":
                values["keys"] = int(value)
                values["keys_profile"] = None
            elif key == "delay":
                values["delay"] = parse_delay(value, f"--stream {spec}: delay")
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
                    hint="settings: rate, keys, skew, start, end, silent, unit, hot, sel, delay",
                )
        except ValueError:
            raise OptionError(
                f"--stream {spec}: bad value '{value}' for {key}",
                hint="numbers; silent periods as FROM-TO seconds, several joined by +; "
                "rate, keys, skew, hot, sel also as a profile, e.g. rate=0:1000,60:40000",
            ) from None
    try:
        return KeyedStream(name=name.strip(), **values)  # type: ignore[arg-type]
    except OptionError as err:  # name the option the bad value came from
        raise OptionError(f"--stream {spec}: {err.message}", hint=err.hint) from None

"""Multiway raw-window join workloads: streams of several join attributes with tunable rates,
key domains and multiplicities (A-Caching section 7, JIT section VI).

A stream (``MultiwayStream``) has a timestamp column and any number of INTEGER join columns,
each drawn uniformly from ``0 .. keys-1``, independently (and DOUBLE columns, uniform in
``[0, 100)`` with two decimals). Its ``i``-th tuple lies at offset ``start + i / rate``
seconds, floored to a tick of its unit (as the keyed generator). The *multiplicity* of a
join value in a window of ``w`` seconds is ``rate * w / keys``: the workloads below choose
``keys`` from the multiplicities asked for.

Shapes (``workload``):

* ``q3``: A-Caching's Q3, ``r(ts, a)``, ``s(ts, a, b)``, ``t(ts, b)``; multiplicity 1 in ``r``
  and ``s`` and ``m`` in ``t`` (``rate(t) = m * rate(r)``), all over the same domain;
  query ``r.a = s.a AND s.b = t.b`` (queries/multiway/q3.sql).
* ``clique``: JIT's clique, ``n`` streams ``c1 .. cn``; stream ``ci`` has one column ``x_j``
  per other stream ``cj`` (``x`` named by the pair, e.g. ``c1.x2 = c2.x1``), values over
  ``keys`` (JIT's ``d_max``).
* ``star``: a hub ``h(ts, a1 .. a_{n-1})`` and spokes ``p_j(ts, a_j)``; spoke ``j`` joins
  the hub on ``a_j``; spokes may have their own rates (``spoke_rate``).

Determinism: a column's draws depend only on the seed, the stream's name and the column's
name: ``PCG64(SeedSequence([seed, crc32(stream), crc32(column)]))``.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from engines.sources.keyed import DEFAULT_ORIGIN
from optimizer.ir.catalog import TIME_UNITS_MS
from optimizer.ir.errors import OptionError

#: The shapes ``workload`` builds.
SHAPES = ("q3", "clique", "star")


@dataclass(frozen=True)
class MultiwayStream:
    """One stream: ``columns`` are ``(name, "INTEGER" | "DOUBLE")`` besides ``ts``."""

    name: str
    columns: tuple[tuple[str, str], ...]
    rate: float = 10.0
    keys: int = 100
    start: float = 0.0
    end: float | None = None
    time_unit: str = "s"
    #: Per-column domains overriding ``keys`` (``(column, keys)`` pairs).
    domains: tuple[tuple[str, int], ...] = ()

    def domain(self, column: str) -> int:
        return dict(self.domains).get(column, self.keys)

    def __post_init__(self) -> None:
        problems = []
        if not self.name.isidentifier():
            problems.append(f"name {self.name!r} must be an identifier")
        if not (math.isfinite(self.rate) and self.rate > 0):
            problems.append(f"rate must be positive, got {self.rate}")
        if isinstance(self.keys, bool) or not isinstance(self.keys, int) or self.keys < 1:
            problems.append(f"keys must be a positive integer, got {self.keys!r}")
        if self.time_unit not in TIME_UNITS_MS:
            problems.append(f"time unit must be 's' or 'ms', got {self.time_unit!r}")
        for col, typ in self.columns:
            if typ not in ("INTEGER", "DOUBLE"):
                problems.append(f"column {col} must be INTEGER or DOUBLE, got {typ}")
        if problems:
            raise OptionError(f"stream {self.name}: " + "; ".join(problems))

    def schema(self) -> pa.Schema:
        types = {"INTEGER": pa.int32(), "DOUBLE": pa.float64()}
        return pa.schema(
            [pa.field("ts", pa.int64())] + [pa.field(c, types[t]) for c, t in self.columns]
        )


def stream_rows(stream: MultiwayStream, seconds: float) -> int:
    """How many tuples :func:`stream_table` makes for ``seconds``."""
    stop = seconds if stream.end is None else min(seconds, stream.end)
    return max(0, math.ceil((stop - stream.start) * stream.rate - 1e-9))


def stream_table(
    stream: MultiwayStream, seconds: float, seed: int = 42, origin: int = DEFAULT_ORIGIN
) -> pa.Table:
    """The stream's tuples over ``[start, min(end, seconds))``, in event-time order."""
    tps = 1000 // TIME_UNITS_MS[stream.time_unit]
    n = stream_rows(stream, seconds)
    i = np.arange(n, dtype=np.int64)
    ticks = np.floor((stream.start + i / stream.rate) * tps + 1e-9).astype(np.int64)
    cols: list[pa.Array] = [pa.array(origin * tps + ticks, pa.int64())]
    for col, typ in stream.columns:
        rng = np.random.Generator(
            np.random.PCG64(
                np.random.SeedSequence(
                    [seed, zlib.crc32(stream.name.encode()), zlib.crc32(col.encode())]
                )
            )
        )
        if typ == "INTEGER":
            cols.append(
                pa.array(rng.integers(0, stream.domain(col), n).astype(np.int32), pa.int32())
            )
        else:
            cols.append(pa.array(np.round(rng.uniform(0, 100, n), 2), pa.float64()))
    return pa.Table.from_arrays(cols, schema=stream.schema())


def batches(
    stream: MultiwayStream,
    seconds: float,
    seed: int = 42,
    origin: int = DEFAULT_ORIGIN,
    batch_seconds: int = 1,
) -> Iterator[pa.RecordBatch]:
    table = stream_table(stream, seconds, seed, origin)
    chunk = max(1, int(stream.rate * max(1, batch_seconds)))
    return iter(table.to_batches(max_chunksize=chunk))


def workload(
    shape: str,
    n: int = 3,
    rate: float = 10.0,
    window: float = 10.0,
    multiplicity: float = 1.0,
    keys: int | None = None,
    spoke_rate: float | None = None,
) -> list[MultiwayStream]:
    """The streams of a shape (module docstring). ``keys`` (a domain) wins over the
    multiplicity; otherwise ``keys = rate * window`` (multiplicity 1 at ``rate``)."""
    if shape not in SHAPES:
        raise OptionError(f"unknown multiway shape '{shape}'", hint=f"one of {', '.join(SHAPES)}")
    domain = keys if keys is not None else max(1, round(rate * window))
    if shape == "q3":
        return [
            MultiwayStream("r", (("a", "INTEGER"),), rate, domain),
            MultiwayStream("s", (("a", "INTEGER"), ("b", "INTEGER")), rate, domain),
            MultiwayStream("t", (("b", "INTEGER"),), rate * multiplicity, domain),
        ]
    if not 2 <= n <= 8:
        raise OptionError(f"a {shape} has 2 to 8 streams, got {n}")
    if shape == "clique":
        return [
            MultiwayStream(
                f"c{i}",
                tuple((f"x{j}", "INTEGER") for j in range(1, n + 1) if j != i),
                rate,
                domain,
            )
            for i in range(1, n + 1)
        ]
    hub = MultiwayStream(
        "h", (*((f"a{j}", "INTEGER") for j in range(1, n)), ("v", "DOUBLE")), rate, domain
    )
    spokes = [
        MultiwayStream(f"p{j}", ((f"a{j}", "INTEGER"), ("v", "DOUBLE")), spoke_rate or rate, domain)
        for j in range(1, n)
    ]
    return [hub, *spokes]


def query_text(shape: str, streams: list[MultiwayStream], window: float, slide: float = 1) -> str:
    """The shape's join query: per window, the join's size (COUNT) and a sum over it."""
    src = ", ".join(
        f"{s.name} [RANGE {window:g} SECONDS SLIDE {slide:g} SECOND] AS {s.name}" for s in streams
    )
    if shape == "q3":
        cond = "r.a = s.a AND s.b = t.b"
    elif shape == "clique":
        names = [s.name for s in streams]
        cond = " AND ".join(
            f"{a}.x{b[1:]} = {b}.x{a[1:]}" for k, a in enumerate(names) for b in names[k + 1 :]
        )
    else:
        cond = " AND ".join(f"h.a{j} = p{j}.a{j}" for j in range(1, len(streams)))
    return f"SELECT COUNT(*) AS n FROM {src} WHERE {cond}"


def catalog_text(
    streams: list[MultiwayStream], seed: int, files: dict[str, str] | None = None, doc: str = ""
) -> str:
    """A catalog for ``streams``: generator sources, or file sources when ``files`` is given."""
    lines = [f'doc = "{doc or "multiway join workload (engines/sources/multiway.py)"}"\n']
    for s in streams:
        lines.append(f"\n[streams.{s.name}]\n")
        lines.append(f'timestamp = "ts"\ntime_unit = "{s.time_unit}"\nrate = {s.rate:g}\n')
        lines.append(f'\n[streams.{s.name}.columns]\nts = "BIGINT"\n')
        lines.extend(f'{c} = "{t}"\n' for c, t in s.columns)
        lines.append(f"\n[streams.{s.name}.source]\n")
        if files is not None:
            fmt = "parquet" if files[s.name].endswith(".parquet") else "csv"
            lines.append(f'kind = "file"\npath = "{files[s.name]}"\nformat = "{fmt}"\n')
        else:
            lines.append(
                f'kind = "generator"\ngenerator = "multiway"\nseed = {seed}\nkeys = {s.keys}\n'
            )
    return "".join(lines)


def write_workload(
    streams: list[MultiwayStream],
    out: Path,
    seconds: float,
    seed: int,
    fmt: str = "csv",
    before: Callable[[int], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Path]:
    """Write every stream to ``out/<name>.<fmt>`` and ``out/catalog.toml`` (file sources);
    each file appears atomically (engines/output_files.py). ``before`` is called with the
    number of rows before anything is written (it may refuse them,
    engines/sources/budget.py), ``progress`` with the rows of every stream written."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from engines.output_files import OutputFile, write_bytes

    if before is not None:
        before(sum(stream_rows(s, seconds) for s in streams))
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for s in streams:
        path = out / f"{s.name}.{fmt}"
        table = stream_table(s, seconds, seed)
        file = OutputFile(path, "--out")
        with file, file.errors():
            if fmt == "csv":
                pacsv.write_csv(table, file.file("wb"))
            else:
                pq.write_table(table, file.file("wb"))
        files[s.name] = path
        if progress is not None:
            progress(table.num_rows)
    text = catalog_text(streams, seed, {k: v.name for k, v in files.items()})
    write_bytes(out / "catalog.toml", text, "--out")
    return files

"""The synthetic join workloads of Ji's dissertation, section 4.3: x3 and x4.

Both are out-of-order streams written in arrival order (engines/sources/delays.py): each
stream arrives every 10 ms (100 tuples/s), timestamps in milliseconds, and a tuple's timestamp
is its arrival instant minus a delay drawn from Zipf over 0..20 s.

* **x3**: streams ``s1``, ``s2``, ``s3`` of ``(ts, a1)``; delay skews 2, 3, 3; ``a1`` drawn
  from Zipf over 1..100 whose skew starts at 1.0 and is re-drawn uniformly within [0, 5]
  after every U[1, 10] minutes (each stream its own schedule, from the seed). The query:
  5 s windows, an equi-join on ``a1`` (queries/qddh/x3.sql).
* **x4**: a star: the dissertation's S1..S4 are ``t1(ts, a1, a2, a3)``, ``t2(ts, a1)``,
  ``t3(ts, a2)``, ``t4(ts, a3)`` here (so one catalog, queries/qddh, holds both workloads);
  delay skews 3, 3, 3, 4; every join attribute drawn as x3's ``a1`` (independently); 3 s
  windows, ``t1`` joined with each other stream on its attribute (queries/qddh/x4.sql). The
  dissertation gives the delay maximum only for x3; x4 uses the same 20 s.

The key draws use the keyed generator (engines/sources/keyed.py: a key ``j`` in 0..99 stands
for the value ``j + 1``); the dissertation's 30 minutes are ``seconds=1800``.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from engines.output_files import OutputFile, write_bytes
from engines.sources.delays import DelaySpec, readme_text
from engines.sources.keyed import DEFAULT_ORIGIN, FORMATS, KeyedGenerator, KeyedStream
from optimizer.ir.errors import OptionError
from optimizer.ir.profile import Profile

#: Workload name -> (stream -> (join attributes, delay skew)), window seconds.
WORKLOADS: dict[str, tuple[dict[str, tuple[tuple[str, ...], float]], int]] = {
    "x3": ({"s1": (("a1",), 2.0), "s2": (("a1",), 3.0), "s3": (("a1",), 3.0)}, 5),
    "x4": (
        {
            "t1": (("a1", "a2", "a3"), 3.0),
            "t2": (("a1",), 3.0),
            "t3": (("a2",), 3.0),
            "t4": (("a3",), 4.0),
        },
        3,
    ),
}
#: Tuples per second of every stream, the delay maximum (s), the value domain.
RATE = 100.0
MAX_DELAY_S = 20.0
VALUES = 100


def skew_schedule(seed: int, name: str, seconds: float) -> Profile:
    """Zipf exponent over time: 1.0 at first, re-drawn in U[0, 5] after every U[1, 10]
    minutes (steps)."""
    rng = np.random.Generator(
        np.random.PCG64(np.random.SeedSequence([seed, zlib.crc32(name.encode()), 0x5CE3]))
    )
    times, values = [0.0], [1.0]
    t = 0.0
    while True:
        t += float(rng.uniform(60.0, 600.0))
        if t >= seconds:
            break
        times.append(round(t, 3))
        values.append(round(float(rng.uniform(0.0, 5.0)), 4))
    return Profile(tuple(times), tuple(values), (False,) * (len(times) - 1))


def stream_table(
    workload: str,
    name: str,
    seconds: float,
    seed: int = 42,
    origin: int = DEFAULT_ORIGIN,
    rate: float = RATE,
) -> pa.Table:
    """One stream of ``workload`` (x3 or x4) as a table in arrival order: ``ts`` (ms, delayed)
    and its join attributes. It depends only on the seed, the stream's name and the rate, so
    a stream generated alone equals the same stream of :func:`workload_tables`."""
    if workload not in WORKLOADS:
        raise OptionError(f"unknown workload {workload!r}", hint="x3 or x4")
    streams, _ = WORKLOADS[workload]
    if name not in streams:
        raise OptionError(
            f"workload {workload} has no stream {name!r}", hint=f"its streams: {', '.join(streams)}"
        )
    attrs, skew = streams[name]
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for i, attr in enumerate(attrs):
        key = f"{name}_{attr}"
        spec = KeyedStream(
            key,
            rate=rate,
            keys=VALUES,
            skew=1.0,
            skew_profile=skew_schedule(seed, key, seconds),
            time_unit="ms",
            delay=DelaySpec(MAX_DELAY_S, skew) if i == 0 else None,
        )
        t = KeyedGenerator(spec, seed=seed, origin=origin).table(seconds)
        if i == 0:
            columns["ts"] = t.column("ts")
        columns[attr] = pc.add(t.column("k"), 1)  # values 1..100
    return pa.table(columns)


def workload_tables(
    workload: str, seconds: float, seed: int = 42, origin: int = DEFAULT_ORIGIN, rate: float = RATE
) -> dict[str, pa.Table]:
    """Every stream of ``workload`` (x3 or x4) as a table in arrival order."""
    if workload not in WORKLOADS:
        raise OptionError(f"unknown workload {workload!r}", hint="x3 or x4")
    streams, _ = WORKLOADS[workload]
    return {name: stream_table(workload, name, seconds, seed, origin, rate) for name in streams}


def catalog_text(workload: str, files: dict[str, str], seconds: float, seed: int) -> str:
    """The catalog of a written workload (file sources)."""
    streams, window = WORKLOADS[workload]
    lines = [
        f"doc = \"Ji's {workload} join workload (dissertation section 4.3): {len(streams)} "
        f"streams in arrival order, 100 tuples/s, ms timestamps delayed by Zipf over 0..20 s; "
        f"join values Zipf over 1..100 with drifting skew; {window} s windows; {seconds:g} s, "
        f'seed {seed} (engines/sources/qddh_joins.py)."\n'
    ]
    for name, (attrs, skew) in streams.items():
        delay = DelaySpec(MAX_DELAY_S, skew).text()
        lines.append(f"\n[streams.{name}]\n")
        lines.append(f'doc = "arrival order; delays {delay}"\n')
        lines.append('timestamp = "ts"\ntime_unit = "ms"\n')
        lines.append(f"rate = {RATE:g}\n")
        lines.append(f"# delay = {delay}: ts = arrival instant - a Zipf delay\n")
        lines.append(f'\n[streams.{name}.columns]\nts = "BIGINT"\n')
        lines.extend(f'{a} = "INTEGER"\n' for a in attrs)
        fmt = "parquet" if files[name].endswith(".parquet") else "csv"
        lines.append(f'\n[streams.{name}.source]\nkind = "file"\npath = "{files[name]}"\n')
        lines.append(f'format = "{fmt}"\n')
    return "".join(lines)


def write_workload(
    folder: Path | str,
    workload: str,
    seconds: float,
    seed: int = 42,
    origin: int = DEFAULT_ORIGIN,
    fmt: str = "csv",
    rate: float = RATE,
    before: Callable[[int], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Write the streams of ``workload``, ``catalog.toml`` and ``README.md`` (the delays)
    into ``folder``; returns rows per stream. ``before`` is called with the number of rows
    before anything is written (it may refuse them, engines/sources/budget.py),
    ``progress`` with the rows of every stream written."""
    if fmt not in FORMATS:
        raise OptionError(f"unknown format {fmt!r}", hint="use csv or parquet")
    if workload not in WORKLOADS:
        raise OptionError(f"unknown workload {workload!r}", hint="x3 or x4")
    folder = Path(folder)
    if before is not None:  # every stream at ``rate``
        before(len(WORKLOADS[workload][0]) * math.ceil(rate * seconds))
    folder.mkdir(exist_ok=True)
    files: dict[str, str] = {}
    counts: dict[str, int] = {}
    for name in WORKLOADS[workload][0]:
        table = stream_table(workload, name, seconds, seed, origin, rate)
        files[name] = f"{name}.{fmt}"
        out = OutputFile(folder / files[name], "--out")
        with out, out.errors():
            if fmt == "csv":
                pacsv.write_csv(table, out.file("wb"))
            else:
                pq.write_table(table, out.file("wb"))
        counts[name] = table.num_rows
        if progress is not None:
            progress(table.num_rows)
    streams, _ = WORKLOADS[workload]
    write_bytes(folder / "catalog.toml", catalog_text(workload, files, seconds, seed), "--out")
    delays = {n: DelaySpec(MAX_DELAY_S, skew) for n, (_, skew) in streams.items()}
    note = readme_text(f"{workload} ({', '.join(files.values())})", delays, "ms", seed)
    schedules = "".join(
        f"- {n}.{a}: skew {skew_schedule(seed, f'{n}_{a}', seconds).text()} (SECONDS:SKEW)\n"
        for n, (attrs, _) in streams.items()
        for a in attrs
    )
    write_bytes(
        folder / "README.md", note + "\nJoin-value skew schedules:\n\n" + schedules, "--out"
    )
    return counts

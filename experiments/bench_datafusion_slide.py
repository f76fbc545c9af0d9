"""DataFusion against DuckDB: the time of one MIG slide of Q1 over windows of growing size.

For each window size (tuples), the window is a ring of one-second Arrow chunks at 40,000
tuples/s (as a MIG holds it, ``engines/mig/operator.py``). One *slide* is what a MIG does every
second: append the next chunk, expire the oldest, re-register the ring with the engine
(``ColumnarEngine.set_input``, both inputs of Q1's self-join) and re-run the group's SQL
(``ColumnarEngine.query``). Reported per engine: the median slide time over ``--repeat``
slides after one warm-up slide, and the median of the SQL alone over the same static window
(the measurement of the Spark table in experiments/README.md, ``bench_mig.py``). The SQL is
the generated SQL of Q1 placed wholly on the engine, in each engine's dialect.

    python experiments/bench_datafusion_slide.py --json experiments/results/datafusion_slide.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import pyarrow as pa

from engines import registry
from engines.sources.smartplug import SmartPlugGenerator
from engines.sqlgen import group_sql
from hycq.api import QUERIES, load_query
from optimizer.ir.placement import groups, uniform_placement

Q1 = QUERIES / "smartplug" / "q1.sql"
RATE = 40000
ENGINES = ("duckdb", "datafusion")


def _median_ms(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def _sql(engine: str) -> str:
    q = load_query(Q1)
    (g,) = groups(q.plan, uniform_placement(q.plan, engine))
    dialect = registry.get(engine).dialect
    assert dialect is not None
    return group_sql(q.plan, g.operators, dialect).sql


def _slider(
    engine: Any,
    sql: str,
    ring: deque[tuple[int, pa.Table]],
    per_second: list[pa.Table],
    first: int,
    schema: pa.Schema,
) -> Any:
    """One slide: append the next second's chunk, expire as many of the oldest tuples (the
    window keeps its size; a partly expired chunk is sliced, as the MIG does), re-register
    the ring and query."""
    nxt = [first]

    def slide() -> None:
        cid = nxt[0]
        chunk = per_second[cid % len(per_second)]
        ring.append((cid, chunk))
        nxt[0] += 1
        drop = chunk.num_rows
        while drop > 0:
            old_id, old = ring[0]
            if old.num_rows <= drop:
                ring.popleft()
                drop -= old.num_rows
            else:
                ring[0] = (old_id, old.slice(drop))
                drop = 0
        chunks = list(ring)
        engine.set_input("in0", chunks, schema)
        engine.set_input("in1", chunks, schema)
        engine.query(sql)

    return slide


def measure(sizes: list[int], repeat: int) -> dict[str, Any]:
    names = [f"c{i}" for i in range(7)]
    seconds = max(sizes) // RATE + repeat + 3
    full = SmartPlugGenerator(seed=7, rate=RATE).table(seconds).rename_columns(names)
    per_second = [full.slice(k * RATE, RATE) for k in range(seconds)]
    engines = {e: registry.make(e) for e in ENGINES}
    sqls = {e: _sql(e) for e in ENGINES}
    rows = []
    for n in sizes:
        row: dict[str, Any] = {"window_tuples": n}
        for name, engine in engines.items():
            # A ring of one-second chunks holding n tuples (the last chunk partial).
            ring: deque[tuple[int, pa.Table]] = deque()
            left, k = n, 0
            while left > 0:
                chunk = per_second[k].slice(0, min(RATE, left))
                ring.append((k, chunk))
                left -= chunk.num_rows
                k += 1
            slide = _slider(engine, sqls[name], ring, per_second, k, full.schema)
            slide()  # warm-up
            row[f"{name}_slide_ms"] = _median_ms(slide, repeat)
            row[f"{name}_sql_ms"] = _median_ms(lambda e=engine, q=sqls[name]: e.query(q), repeat)
        rows.append(row)
        print(
            f"  window {n:>10,}: "
            + "  ".join(f"{e} slide {row[f'{e}_slide_ms']:8.1f} ms" for e in ENGINES),
            file=sys.stderr,
        )
    for engine in engines.values():
        engine.close()
    return {"rate": RATE, "points": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000,4000000,12000000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    report: dict[str, Any] = {"command": " ".join(["python", *sys.argv])}
    report["slides"] = measure(sizes, args.repeat)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

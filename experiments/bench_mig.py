"""Columnar engines and MIG operators: overhead, sustained rate, window upkeep, Spark vs DuckDB.

Four measurements, each recorded with this command in the JSON output:

1. ``mig_overhead``: Q1 on DuckDB through a MIG (``--placement column``) over synthetic data at
   ``--rate`` tuples/s. After the 5-minute window is full, the median time of a MIG slide
   (ship the new chunk, expire the old one, run the SQL, hand the result back) is divided by
   the median time of the same SQL over the same window already loaded in DuckDB (a native
   table holding the MIG's final window contents). Target: <= 1.3 at 20k tuples/s.
2. ``sustained``: the same plan at ``--rate-high`` (40k tuples/s: 12 M tuples per window):
   the steady-state slide time must stay under the 1-second slide to keep up.
3. ``upkeep``: two ways to keep a sliding window in DuckDB, per slide: a ring of registered
   Arrow chunks (what the MIG does) against a native table maintained by INSERT + DELETE.
4. ``spark_vs_duckdb``: Q1's SQL over static windows of growing size on DuckDB and on Spark
   (local[*]), median of ``--repeat`` runs each: Spark's per-query overhead and the window
   size from which Spark beats DuckDB on this machine, if any.

    python experiments/bench_mig.py --json experiments/results/mig.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from engines.runtime import RunOptions
from engines.sources.smartplug import SmartPlugGenerator
from engines.sqlgen import group_sql
from hycq.api import QUERIES, execute, load_query
from optimizer.ir.placement import groups, uniform_placement

RANGE = 300
Q1 = QUERIES / "smartplug" / "q1.sql"


def _median_ms(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def run_q1_column(rate: float, measure: int) -> dict[str, Any]:
    """Q1 fully on DuckDB over RANGE+measure seconds at ``rate``; steady-state slide times."""
    q = load_query(Q1)
    batches = SmartPlugGenerator(seed=7, rate=rate).batches(RANGE + measure)
    result = execute(
        q.plan, q.catalog, {"readings": batches}, placement="column", options=RunOptions()
    )
    mig = result.extras["migs"][0]
    slides = mig.stats.slides
    t_full = slides[0][0] + RANGE  # first instant whose window is full
    steady = [t for instant, t in slides if instant > t_full]
    return {
        "result": result,
        "mig": mig,
        "steady_slide_ms": [1e3 * t for t in steady],
        "throughput": result.metrics["throughput"],
        "tuples_in": result.metrics["tuples_in"],
        "wall_s": result.metrics["wall_s"],
    }


def loaded_baseline(mig: Any, repeat: int) -> dict[str, float]:
    """The MIG's SQL over its final window, already loaded: native table and Arrow view."""
    con = duckdb.connect()
    con.execute("SET error_on_division_by_zero = false")
    for inp in mig.inputs:
        table = pa.concat_tables([t for _, t in inp.chunks])
        con.register("tmp_arrow", table)
        con.execute(f'CREATE TABLE "{inp.table_name}" AS SELECT * FROM tmp_arrow')
        con.unregister("tmp_arrow")
    native = _median_ms(lambda: con.sql(mig.sql).to_arrow_table(), repeat)
    con2 = duckdb.connect()
    con2.execute("SET error_on_division_by_zero = false")
    for inp in mig.inputs:
        con2.register(inp.table_name, pa.concat_tables([t for _, t in inp.chunks]))
    arrow = _median_ms(lambda: con2.sql(mig.sql).to_arrow_table(), repeat)
    rows = sum(i.rows for i in mig.inputs)
    return {"native_table_ms": native, "registered_arrow_ms": arrow, "window_tuples": rows}


def upkeep(rate: float, slides: int) -> dict[str, float]:
    """Per-slide cost of keeping a 5-minute window: Arrow ring vs native INSERT/DELETE."""
    chunks = list(SmartPlugGenerator(seed=7, rate=rate).batches(RANGE + slides))
    q = load_query(Q1)
    (g,) = groups(q.plan, uniform_placement(q.plan, "duckdb"))
    sql = group_sql(q.plan, g.operators, "duckdb").sql
    names = [f"c{i}" for i in range(7)]
    tables = [pa.Table.from_batches([c]).rename_columns(names) for c in chunks]

    con = duckdb.connect()
    ring = list(tables[:RANGE])
    ring_times, ring_query = [], []
    for k in range(RANGE, RANGE + slides):
        t0 = time.perf_counter()
        ring = [*ring[1:], tables[k]]
        view = pa.concat_tables(ring)
        con.register("in0", view)
        con.register("in1", view)
        t1 = time.perf_counter()
        con.sql(sql).to_arrow_table()
        ring_times.append(time.perf_counter() - t0)
        ring_query.append(time.perf_counter() - t1)

    con2 = duckdb.connect()
    con2.register("init", pa.concat_tables(tables[:RANGE]))
    con2.execute("CREATE TABLE w AS SELECT * FROM init")
    con2.unregister("init")
    con2.execute("CREATE VIEW in0 AS SELECT * FROM w")
    con2.execute("CREATE VIEW in1 AS SELECT * FROM w")
    native_times, native_query = [], []
    for k in range(RANGE, RANGE + slides):
        t0 = time.perf_counter()
        con2.register("chunk", tables[k])
        con2.execute("INSERT INTO w SELECT * FROM chunk")
        bound = chunks[k].column(1)[0].as_py() - RANGE
        con2.execute("DELETE FROM w WHERE c1 <= ?", [bound])
        t1 = time.perf_counter()
        con2.sql(sql).to_arrow_table()
        native_times.append(time.perf_counter() - t0)
        native_query.append(time.perf_counter() - t1)
    return {
        "rate": rate,
        "arrow_ring_slide_ms": 1e3 * statistics.median(ring_times),
        "arrow_ring_query_ms": 1e3 * statistics.median(ring_query),
        "native_table_slide_ms": 1e3 * statistics.median(native_times),
        "native_table_query_ms": 1e3 * statistics.median(native_query),
    }


def spark_vs_duckdb(sizes: list[int], repeat: int) -> dict[str, Any]:
    """Q1's SQL over a static window of each size on DuckDB and Spark (median ms)."""
    from engines.duckdb import DuckDBEngine
    from engines.spark import SparkEngine

    q = load_query(Q1)
    (g,) = groups(q.plan, uniform_placement(q.plan, "duckdb"))
    sqls = {d: group_sql(q.plan, g.operators, d).sql for d in ("duckdb", "spark")}
    names = [f"c{i}" for i in range(7)]
    gen = SmartPlugGenerator(seed=7, rate=40000)
    full = gen.table(max(sizes) / 40000 + 1).rename_columns(names)
    duck = DuckDBEngine()
    t0 = time.perf_counter()
    spark = SparkEngine()
    startup = time.perf_counter() - t0
    rows = []
    for n in sizes:
        window = full.slice(0, n)
        chunks = [(0, window)]
        for engine in (duck, spark):
            engine.set_input("in0", chunks, window.schema)
            engine.set_input("in1", chunks, window.schema)
        d = _median_ms(lambda: duck.query(sqls["duckdb"]), repeat)
        spark.query(sqls["spark"])  # warm: first execution compiles
        s = _median_ms(lambda: spark.query(sqls["spark"]), repeat)
        rows.append({"window_tuples": n, "duckdb_ms": d, "spark_ms": s})
        print(f"  window {n:>10,}: duckdb {d:8.1f} ms  spark {s:8.1f} ms", file=sys.stderr)
    crossover = next((r["window_tuples"] for r in rows if r["spark_ms"] < r["duckdb_ms"]), None)
    spark.close()
    return {"spark_startup_s": startup, "points": rows, "spark_beats_duckdb_from": crossover}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=20000)
    ap.add_argument("--rate-high", type=float, default=40000)
    ap.add_argument("--measure", type=int, default=30, help="steady-state seconds measured")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="10000,100000,1000000,4000000,12000000")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    skip = set(args.skip.split(",")) if args.skip else set()
    report: dict[str, Any] = {"command": " ".join(["python", *sys.argv])}

    if "mig_overhead" not in skip:
        r = run_q1_column(args.rate, args.measure)
        base = loaded_baseline(r["mig"], args.repeat)
        mig_ms = statistics.median(r["steady_slide_ms"])
        report["mig_overhead"] = {
            "rate": args.rate,
            "mig_slide_ms_median": mig_ms,
            **base,
            "overhead_vs_native": mig_ms / base["native_table_ms"],
            "overhead_vs_loaded_arrow": mig_ms / base["registered_arrow_ms"],
            "mig_breakdown_s": {
                k: r["mig"].mig_metrics()[k] for k in ("transfer_in_s", "sql_s", "transfer_out_s")
            },
        }
        print(f"mig_overhead: {json.dumps(report['mig_overhead'])}", file=sys.stderr)
    if "sustained" not in skip:
        r = run_q1_column(args.rate_high, args.measure)
        steady = r["steady_slide_ms"]
        report["sustained"] = {
            "rate": args.rate_high,
            "window_tuples": sum(i.rows for i in r["mig"].inputs) // 2,
            "slide_ms_p50": statistics.median(steady),
            "slide_ms_p99": sorted(steady)[int(0.99 * (len(steady) - 1))],
            "slide_ms_max": max(steady),
            "keeps_up": max(steady) < 1000.0,
            "whole_run_throughput": r["throughput"],
            "tuples_in": r["tuples_in"],
            "wall_s": r["wall_s"],
        }
        print(f"sustained: {json.dumps(report['sustained'])}", file=sys.stderr)
    if "upkeep" not in skip:
        report["upkeep"] = upkeep(args.rate, min(args.measure, 20))
        print(f"upkeep: {json.dumps(report['upkeep'])}", file=sys.stderr)
    if "spark" not in skip:
        sizes = [int(s) for s in args.sizes.split(",")]
        report["spark_vs_duckdb"] = spark_vs_duckdb(sizes, args.repeat)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

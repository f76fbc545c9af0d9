"""Slide time of Q1's columnar group on DuckDB, Spark local[2] and a 2-worker Spark
standalone cluster (issue 19), Arrow shipping included, side by side in one script.

For each window size N (tuples; 40,000 tuples per 1-second chunk, as the MIG keeps a
window), an engine holds the window as N / 40,000 chunks; one slide appends a new chunk,
drops the oldest (``set_input`` with the new chunk list, what a MIG does) and runs Q1's
group SQL (``query``, the result back as Arrow). Reported: the median of ``--slides``
slides after one warm slide, split into shipping (``set_input``) and SQL; and each
engine's start-up. Each Spark configuration runs in its own process (one SparkContext per
process); the cluster is started by the script (engines/spark/cluster.py) and stopped at
the end.

    python experiments/spark_cluster_bench.py --sizes 1000000,12000000 --slides 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHUNK = 40_000
OUT = ROOT / "experiments" / "results"


def _engine(config: str, master: str | None) -> Any:
    if config == "duckdb":
        from engines.duckdb import DuckDBEngine

        return DuckDBEngine()
    from engines.spark import SparkEngine

    conf = {"spark.master": master or "local[2]"}
    if master:
        conf["spark.executor.memory"] = "1g"
    conf["spark.driver.memory"] = "6g"
    return SparkEngine(conf=conf)


def measure(config: str, master: str | None, sizes: list[int], slides: int) -> dict[str, Any]:
    """In this process: every size on one engine."""
    from engines.sources.smartplug import SmartPlugGenerator
    from engines.sqlgen import group_sql
    from hycq.api import QUERIES, load_query
    from optimizer.ir.placement import groups, uniform_placement

    q = load_query(QUERIES / "smartplug" / "q1.sql")
    (g,) = groups(q.plan, uniform_placement(q.plan, "duckdb"))
    dialect = "duckdb" if config == "duckdb" else "spark"
    sql = group_sql(q.plan, g.operators, dialect).sql
    names = [f"c{i}" for i in range(7)]
    t0 = time.perf_counter()
    engine = _engine(config, master)
    startup = time.perf_counter() - t0
    gen = SmartPlugGenerator(seed=7, rate=CHUNK)
    batches = gen.batches(10**9, 1)
    next_id = 0

    def chunk() -> tuple[int, Any]:
        nonlocal next_id
        import pyarrow as pa

        b = next(batches)
        next_id += 1
        return next_id, pa.Table.from_batches([b]).rename_columns(names)

    points = []
    for n in sizes:
        window = [chunk() for _ in range(max(1, n // CHUNK))]
        schema = window[0][1].schema
        t1 = time.perf_counter()
        engine.set_input("in0", window, schema)
        engine.set_input("in1", window, schema)
        load_s = time.perf_counter() - t1
        ship, run = [], []
        for k in range(slides + 1):
            window = [*window[1:], chunk()]
            t1 = time.perf_counter()
            engine.set_input("in0", window, schema)
            engine.set_input("in1", window, schema)
            t2 = time.perf_counter()
            engine.query(sql)
            t3 = time.perf_counter()
            if k:  # the first slide warms (compiles) the query
                ship.append((t2 - t1) * 1e3)
                run.append((t3 - t2) * 1e3)
        total = [a + b for a, b in zip(ship, run, strict=True)]
        point = {
            "window_tuples": len(window) * CHUNK,
            "load_s": load_s,
            "slide_ms": statistics.median(total),
            "ship_ms": statistics.median(ship),
            "sql_ms": statistics.median(run),
            "slides_ms": [round(x, 1) for x in total],
        }
        print(json.dumps({"engine": config, **point}), file=sys.stderr, flush=True)
        points.append(point)
        del window
    engine.close()
    return {"engine": config, "startup_s": startup, "points": points}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000000,12000000")
    ap.add_argument("--slides", type=int, default=5)
    ap.add_argument("--engines", default="duckdb,spark-local,spark-cluster")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one engine, JSON out
    ap.add_argument("--master", help=argparse.SUPPRESS)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.worker:
        print(json.dumps(measure(args.worker, args.master, sizes, args.slides)))
        return 0
    from engines.spark.cluster import SparkCluster

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        cluster = None
        try:
            for name in args.engines.split(","):
                config, master = ("duckdb", None) if name == "duckdb" else ("spark", None)
                if name == "spark-cluster":
                    cluster = SparkCluster(Path(tmp) / "cluster", workers=2, worker_memory="2g")
                    cluster.start()
                    master = cluster.master_url
                cmd = [sys.executable, __file__, "--worker", config, "--sizes", args.sizes,
                       "--slides", str(args.slides)]  # fmt: skip
                if master:
                    cmd += ["--master", master]
                r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
                if r.returncode != 0:
                    raise RuntimeError(r.stderr[-3000:])
                result = json.loads(r.stdout.strip().splitlines()[-1])
                result["engine"] = name
                results.append(result)
        finally:
            if cluster is not None:
                cluster.stop()
    report = {
        "command": "python experiments/spark_cluster_bench.py " + " ".join(sys.argv[1:]),
        "chunk_tuples": CHUNK,
        "results": results,
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "spark_cluster_bench.json").write_text(json.dumps(report, indent=1) + "\n")
    for r in results:
        for p in r["points"]:
            print(
                f"{r['engine']:>14} {p['window_tuples']:>11,}: slide {p['slide_ms']:9.1f} ms "
                f"(ship {p['ship_ms']:8.1f}, sql {p['sql_ms']:8.1f}); start-up "
                f"{r['startup_s']:.1f} s"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

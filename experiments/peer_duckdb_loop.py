"""Peer (b): a plain DuckDB loop that re-runs the whole query over the window at
every slide (what a user would script by hand), against hycq's chosen plan, in one process.

Data: the smart-plug generator at ``--rate`` tuples per event-second, 5-minute windows
sliding 1 second. The loop keeps every tuple in one Arrow table registered with DuckDB and,
at each slide T, runs the query with ``ts > T - 300 AND ts <= T``; its throughput is the
tuples of ``--measure`` slides over the wall time of those queries (median of ``--repeat``
spans). hycq's number is ``hycq bench`` with the optimizer's plan (warm start, timed spans).

    python experiments/peer_duckdb_loop.py --rate 40000 --measure 10 --repeat 3 \\
        --json experiments/results/peer_duckdb_loop.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import duckdb

from engines.sources.smartplug import SmartPlugGenerator
from hycq.api import QUERIES, load_query
from hycq.bench import BenchOptions, bench

PLUG = "house_id, household_id, plug_id"
AVG_CQL = (
    f"SELECT {PLUG}, AVG(value) AS avg_load FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND] "
    f"WHERE property = 1 GROUP BY {PLUG}"
)
LOOP_SQL = {
    "avg": f"SELECT {PLUG}, AVG(value) AS avg_load FROM data "
    f"WHERE ts > $lo AND ts <= $hi AND property = 1 GROUP BY {PLUG}",
    "q1": f"""
        WITH w AS (SELECT * FROM data WHERE ts > $lo AND ts <= $hi AND property = 1),
             m AS (SELECT {PLUG}, MAX(value) AS max_load FROM w GROUP BY {PLUG})
        SELECT r.house_id, r.household_id, r.plug_id, COUNT(*) AS high_loads
        FROM w AS r JOIN m USING ({PLUG})
        WHERE r.value > 0.9 * m.max_load
        GROUP BY r.house_id, r.household_id, r.plug_id""",
}


def loop_throughput(name: str, rate: float, measure: int, repeat: int) -> list[float]:
    data = SmartPlugGenerator(rate=rate).table(300 + measure * repeat + 1)
    con = duckdb.connect()
    con.register("data", data)
    t0 = data.column("ts")[0].as_py()
    spans = []
    for k in range(repeat):
        start = t0 + 300 + k * measure
        tuples = 0
        wall = 0.0
        for t in range(start, start + measure):
            tuples += int(rate)
            s = time.perf_counter()
            sql = LOOP_SQL[name].replace("$lo", str(t - 300)).replace("$hi", str(t))
            con.sql(sql).to_arrow_table()
            wall += time.perf_counter() - s
        spans.append(tuples / wall)
    con.close()
    return spans


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=40000)
    ap.add_argument("--measure", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    tmp = Path(__file__).resolve().parent / "results" / "_avg_per_plug.sql"
    tmp.write_text(AVG_CQL + "\n")
    (tmp.parent / "catalog.toml").write_text((QUERIES / "smartplug" / "catalog.toml").read_text())
    queries = {"avg": tmp, "q1": QUERIES / "smartplug" / "q1.sql"}
    out = {"command": " ".join(["python", *sys.argv]), "rate": args.rate, "results": {}}
    try:
        for name, path in queries.items():
            loop = loop_throughput(name, args.rate, args.measure, args.repeat)
            rec = bench(
                [load_query(path)],
                BenchOptions(
                    rates=[args.rate],
                    plans=["auto"],
                    measure_seconds=args.measure,
                    repeat=args.repeat,
                ),
            )[0]
            hycq_tp = rec["measured"]["throughput"]
            loop_tp = statistics.median(loop)
            out["results"][name] = {
                "duckdb_loop": loop_tp,
                "duckdb_loop_spans": loop,
                "hycq": hycq_tp,
                "hycq_placement": rec["placement"],
                "ratio": hycq_tp / loop_tp,
            }
            print(
                f"{name}: DuckDB loop {loop_tp:,.0f} tuples/s, hycq {hycq_tp:,.0f} "
                f"({hycq_tp / loop_tp:.2f}x), placement {rec['placement']}",
                file=sys.stderr,
            )
    finally:
        tmp.unlink(missing_ok=True)
        (tmp.parent / "catalog.toml").unlink(missing_ok=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

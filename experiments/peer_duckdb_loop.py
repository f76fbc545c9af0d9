"""Peer (b): a plain DuckDB loop that re-runs the whole query over the window at every
slide (what a user would script by hand), against hycq's chosen plan, on Q1-Q6 and on
data shapes the cost model was not calibrated on.

For every data shape (plugs, load share; `hycq data generate --plugs N --load-share F`),
rate and query:

* the data is one generated Parquet file at that rate (so both sides read the same tuples);
* **the loop**: every tuple in one Arrow table registered with DuckDB; at each slide T the
  query's own SQL with every ``stream [RANGE n UNIT SLIDE 1 SECOND]`` replaced by
  ``(SELECT * FROM data WHERE ts > T - n AND ts <= T)`` (derived from the .sql file, not
  hand-tuned), timed per slide; throughput = tuples of ``--measure`` slides over the wall
  time of their queries, medians of spans;
* **hycq**: ``hycq bench --plans auto --data readings=FILE`` (warm start, interleaved
  spans to ``--precision``);
* the spans of both are bracketed by the machine-load probe of ``hycq.bench_stats``.

    python experiments/peer_duckdb_loop.py --rates 40000,10000 --shapes \\
        calib:1677:0.5,many:50000:0.5,few:800:0.5,loadheavy:10000:0.9,workheavy:20000:0.2 \\
        --json experiments/results/peer_duckdb_loop.json

A shape is NAME:PLUGS:LOAD_SHARE (the calibrated one: 1,677 plugs, 0.5).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from engines.sources.smartplug import generate_to_file
from hycq.api import QUERIES, load_query
from hycq.bench import ADAPT_S, SETTLE_S, BenchOptions, bench
from hycq.bench_stats import LoadProbe, is_clean, median_ci

UNIT_S = {"SECOND": 1, "SECONDS": 1, "MINUTE": 60, "MINUTES": 60, "HOUR": 3600, "HOURS": 3600}
WINDOW = re.compile(r"readings\s*\[RANGE\s+(\d+)\s+(\w+)\s+SLIDE\s+1\s+SECOND\]", re.I)


def loop_sql(cql: str) -> tuple[str, int]:
    """The query's SQL over the table ``data`` with ``$hi`` for the slide instant, and its
    longest window in seconds."""
    longest = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal longest
        n = int(m.group(1)) * UNIT_S[m.group(2).upper()]
        longest = max(longest, n)
        return f"(SELECT * FROM data WHERE ts > $hi - {n} AND ts <= $hi)"

    body = "\n".join(line for line in cql.splitlines() if not line.lstrip().startswith("--"))
    sql = WINDOW.sub(sub, body)
    if "[" in sql:
        raise SystemExit(f"cannot turn this query into a loop: {cql[:80]}...")
    return sql, longest


def loop_spans(path: Path, sql: str, window: int, measure: int, repeat: int) -> dict[str, Any]:
    data = pq.read_table(path)
    con = duckdb.connect()
    con.register("data", data)
    ts = data.column("ts")
    t0 = ts[0].as_py()
    counts = {r[0]: r[1] for r in con.sql("SELECT ts, COUNT(*) FROM data GROUP BY ts").fetchall()}
    spans, other = [], []
    probe = LoadProbe()
    for k in range(repeat):
        start = t0 + window + 2 + k * measure
        tuples, wall = 0, 0.0
        probe.start()
        w0 = time.perf_counter()
        for t in range(start, start + measure):
            tuples += counts.get(t, 0)
            s = time.perf_counter()
            con.sql(sql.replace("$hi", str(t))).to_arrow_table()
            wall += time.perf_counter() - s
        other.append(probe.other_cores(time.perf_counter() - w0))
        spans.append(tuples / wall)
    con.close()
    clean = [s for s, o in zip(spans, other, strict=True) if is_clean(o)]
    med, lo, hi = median_ci(clean if len(clean) >= 3 else spans)
    return {"throughput": med, "ci95": [lo, hi], "spans": spans, "other_cores": other}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="40000,10000")
    ap.add_argument(
        "--shapes",
        default="calib:1677:0.5,many:50000:0.5,few:800:0.5,loadheavy:10000:0.9,workheavy:20000:0.2",
    )
    ap.add_argument("--queries", default="q1,q2,q3,q4,q5,q6")
    ap.add_argument("--measure", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-repeat", type=int, default=8)
    ap.add_argument("--precision", type=float, default=0.03)
    ap.add_argument("--data-dir", type=Path, help="keep the generated files here")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    shapes = [s.split(":") for s in args.shapes.split(",")]
    names = args.queries.split(",")
    out: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "results": []}
    tmp = None if args.data_dir else tempfile.TemporaryDirectory()
    folder = args.data_dir or Path(tmp.name)  # type: ignore[union-attr]
    folder.mkdir(parents=True, exist_ok=True)
    seconds = 302 + SETTLE_S + ADAPT_S + args.measure * max(args.repeat, args.max_repeat) + 5
    try:
        for shape, plugs, share in shapes:
            for rate in rates:
                path = folder / f"{shape}_{int(rate)}.parquet"
                if not path.exists():
                    generate_to_file(
                        path, seconds, rate=rate, plugs=int(plugs), load_share=float(share)
                    )
                for name in names:
                    qpath = QUERIES / "smartplug" / f"{name}.sql"
                    sql, window = loop_sql(qpath.read_text())
                    loop = loop_spans(path, sql, window, args.measure, args.repeat)
                    rec = bench(
                        [load_query(qpath)],
                        BenchOptions(
                            rates=[rate],
                            plans=["auto"],
                            measure_seconds=args.measure,
                            repeat=args.repeat,
                            max_repeat=args.max_repeat,
                            precision=args.precision,
                            data={"readings": path},
                        ),
                    )[0]
                    m = rec["measured"]
                    row = {
                        "shape": shape,
                        "plugs": int(plugs),
                        "load_share": float(share),
                        "rate": rate,
                        "query": name,
                        "duckdb_loop": loop,
                        "hycq": {
                            "throughput": m["throughput"],
                            "ci95": m["ci95"],
                            "spans": m["spans"],
                            "placement": rec["placement"],
                            "other_cores": rec["load"]["other_cores"],
                        },
                        "ratio": m["throughput"] / loop["throughput"],
                    }
                    out["results"].append(row)
                    print(
                        f"{shape:10s} {rate:>7,.0f}/s {name}: loop {loop['throughput']:>10,.0f}"
                        f"  hycq {m['throughput']:>10,.0f}  {row['ratio']:5.2f}x  "
                        f"{sorted(set(rec['placement'].values())) or ['row']}",
                        file=sys.stderr,
                        flush=True,
                    )
                    if args.json:
                        args.json.write_text(json.dumps(out, indent=2) + "\n")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

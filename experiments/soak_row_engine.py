"""RSS over a long run of the row engine at a constant rate (does memory stay flat?).

Runs the per-plug sliding AVG (5-minute window, 1-second slide) and Q2-style plain window
contents over ``--seconds`` event-seconds of generated data at ``--rate`` through the same
code path as ``hycq run``, samples the resident set size every 10 event-seconds, and checks
that after the first window is full RSS stays within ``--tolerance`` of its first value there.

    python experiments/soak_row_engine.py --seconds 3600 --rate 2000 \
        --json experiments/results/row_soak.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engines.runtime import RunOptions
from hycq.api import QUERIES, load_query, run

QUERIES_RUN = {
    "sliding_avg": QUERIES.parent / "tests" / "golden" / "queries" / "avg_per_plug.sql",
    "q1": QUERIES / "smartplug" / "q1.sql",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3600)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--query", choices=sorted(QUERIES_RUN), default="sliding_avg")
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    q = load_query(QUERIES_RUN[args.query], QUERIES / "smartplug" / "catalog.toml")
    result = run(q, RunOptions(rate=args.rate, duration=args.seconds), "row")
    m = result.metrics
    timeline = m["rss_mb_timeline"]
    steady = [rss for t, rss in timeline if t >= 330]  # first 5-minute window full (+30 s)
    if not steady:
        raise SystemExit("error: the run ended before its first window was full (330 s)")
    base = steady[0]
    worst = max(abs(r - base) / base for r in steady)
    ok = worst <= args.tolerance
    report = {
        "command": " ".join(["python", *sys.argv]),
        "query": args.query,
        "rate": args.rate,
        "event_seconds": m["event_seconds"],
        "tuples_in": m["tuples_in"],
        "wall_s": m["wall_s"],
        "throughput": m["throughput"],
        "rss_after_first_window_mb": base,
        "rss_max_mb": max(steady) if steady else None,
        "rss_min_mb": min(steady) if steady else None,
        "max_relative_deviation": worst,
        "flat_within_tolerance": ok,
        "rss_mb_timeline": timeline,
    }
    print(
        f"{args.query}: {m['tuples_in']:,} tuples in {m['wall_s']:.1f} s; RSS after the first "
        f"window {base:.1f} MB, range {min(steady):.1f}-{max(steady):.1f} MB, max deviation "
        f"{100 * worst:.1f}% -> {'flat' if ok else 'NOT flat'}",
        file=sys.stderr,
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

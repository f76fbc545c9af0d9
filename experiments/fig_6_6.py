"""Fig. 6.6/6.7 on hycq: measured throughput of the chosen (auto), pure-row and pure-column
plans of Q1-Q6 against the requested rate, with the predicted cost of each.

    python experiments/fig_6_6.py --rates 1000,10000,40000 --measure 5 --repeat 3 \\
        --json experiments/results/fig_6_6.json --plot experiments/results/fig_6_6.png

Each point is ``hycq bench`` (hycq/bench.py): warm start to full windows, then ``--repeat``
timed spans of ``--measure`` event-seconds at max pace; median. Reports the ratios the
issue sets targets for: hybrid (auto) over pure row, hybrid over pure column, and whether
the optimizer's plan is within 5% of the best of the three measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hycq.api import QUERIES, load_query
from hycq.bench import BenchOptions, bench, plot
from hycq.planning import OptimizerOptions


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="1000,10000,40000")
    ap.add_argument("--queries", default="1,2,3,4,5,6")
    ap.add_argument("--measure", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cost-model", default=None)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    queries = [load_query(QUERIES / "smartplug" / f"q{i}.sql") for i in args.queries.split(",")]
    options = BenchOptions(
        rates=rates,
        plans=["auto", "row", "column"],
        measure_seconds=args.measure,
        repeat=args.repeat,
        optimizer=OptimizerOptions(cost_model=args.cost_model),
        progress=lambda m: print(f"measuring {m}", file=sys.stderr, flush=True),
    )
    records = bench(queries, options)
    points: list[dict[str, Any]] = []
    for q in queries:
        for rate in rates:
            by = {r["plan"]: r for r in records if r["query"] == q.name and r["rate"] == rate}
            t = {p: by[p]["measured"]["throughput"] for p in by}
            best = max(t.values())
            points.append(
                {
                    "query": Path(q.name).stem,
                    "rate": rate,
                    "throughput": t,
                    "auto_over_row": t["auto"] / t["row"],
                    "auto_over_column": t["auto"] / t["column"],
                    "auto_within_5pct_of_best": t["auto"] >= 0.95 * best,
                    "auto_placement": by["auto"]["placement"],
                    "predicted_cb": {p: by[p]["predicted"]["bottleneck"] for p in by},
                }
            )
            p = points[-1]
            print(
                f"{p['query']} {rate:>8,.0f}/s  auto {t['auto']:>11,.0f}  row {t['row']:>11,.0f}"
                f"  column {t['column']:>11,.0f}  auto/row {p['auto_over_row']:.2f}  "
                f"auto/column {p['auto_over_column']:.2f}  "
                f"{'best' if p['auto_within_5pct_of_best'] else 'NOT best'}",
                file=sys.stderr,
            )
    within = sum(p["auto_within_5pct_of_best"] for p in points)
    print(f"auto within 5% of the best measured: {within}/{len(points)}", file=sys.stderr)
    if args.json:
        args.json.write_text(
            json.dumps(
                {"command": " ".join(["python", *sys.argv]), "records": records, "points": points},
                indent=2,
            )
            + "\n"
        )
    if args.plot:
        plot(records, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

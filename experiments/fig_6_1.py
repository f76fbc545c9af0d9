"""Fig. 6.1 on hycq: a correlated aggregate (Q1's "loads above 90% of the plug's window
maximum") on the row engine against DuckDB, time per result against window size.

The window is 30 seconds sliding 1 second, so that a window of N tuples needs a density of
N / 30 tuples per second and fills in 30 event-seconds; one result relation per slide. Each
point is ``hycq bench`` (warm start to a full window, then timed spans at max pace): time
per result = tuples per slide / measured throughput.

    python experiments/fig_6_1.py --windows 10000,100000,1000000,5000000 \\
        --json experiments/results/fig_6_1.json --plot experiments/results/fig_6_1.png
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from hycq.api import QUERIES, load_query
from hycq.bench import BenchOptions, bench

RANGE_S = 30


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--windows", default="10000,100000,1000000,5000000")
    ap.add_argument("--measure", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hycq-fig61-"))
    text = (QUERIES / "smartplug" / "q1.sql").read_text().replace("5 MINUTES", f"{RANGE_S} SECONDS")
    (tmp / "q1_30s.sql").write_text(text)
    (tmp / "catalog.toml").write_text((QUERIES / "smartplug" / "catalog.toml").read_text())
    q = load_query(tmp / "q1_30s.sql")
    points: list[dict[str, Any]] = []
    for n in (int(w) for w in args.windows.split(",")):
        rate = n / RANGE_S
        recs = bench(
            [q],
            BenchOptions(
                rates=[rate],
                plans=["row", "column"],
                measure_seconds=args.measure,
                repeat=args.repeat,
                max_warm_wall=300.0,
                progress=lambda m: print(f"measuring {m}", file=sys.stderr, flush=True),
            ),
        )
        row = {r["plan"]: r for r in recs}
        pt: dict[str, Any] = {
            "window_tuples": n,
            "rate": rate,
            "ms_per_result": {
                p: 1e3 * rate / row[p]["measured"]["throughput"] for p in ("row", "column")
            },
            "warm_complete": {p: row[p]["warm_start"]["complete"] for p in ("row", "column")},
        }
        points.append(pt)
        ms = pt["ms_per_result"]
        print(
            f"window {n:>9,}: row {ms['row']:10.1f} ms  DuckDB {ms['column']:8.1f} ms  "
            f"({ms['row'] / ms['column']:.1f}x)",
            file=sys.stderr,
            flush=True,
        )
    if args.json:
        args.json.write_text(
            json.dumps({"command": " ".join(["python", *sys.argv]), "points": points}, indent=2)
            + "\n"
        )
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 4))
        for plan, label in (("row", "row engine"), ("column", "DuckDB (MIG)")):
            ax.plot(
                [p["window_tuples"] for p in points],
                [p["ms_per_result"][plan] for p in points],
                marker="o",
                label=label,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("window size (tuples)")
        ax.set_ylabel("time per result (ms)")
        ax.set_title("Correlated aggregate (Q1), 1-s slide")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

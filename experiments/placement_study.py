"""The placement study (issue 20): is the optimizer's choice the measured best, and does the
model rank placements the way the machine does?

For every data shape, rate and query, ``hycq bench --plans auto,row,column,all`` (every
placement when there are at most ``--candidates``, else the best predicted half plus random
ones), interleaved and to a precision (hycq/bench.py). Per point:

* **hit**: the chosen plan is within 5% of the measured best or tied with it (their 95%
  bootstrap intervals overlap; ``hycq.bench_stats.hit``);
* **rank** of the chosen plan among the distinct placements measured (1 = best);
* **Spearman** correlation of predicted C_b with measured 1/throughput over the placements
  (placements predicted infeasible and feasible alike: C_b orders them).

Data: one generated file per (shape, rate) (``--data-dir``; shapes NAME:PLUGS:LOAD_SHARE as
in experiments/peer_duckdb_loop.py), so every plan reads the same tuples.

    python experiments/placement_study.py --rates 1000,5000 --shapes many:50000:0.5 \\
        --queries 'queries/smartplug/*.sql,queries/unseen/*.sql' --json study.json
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from scipy import stats

from engines.sources.smartplug import generate_to_file
from hycq.api import load_query
from hycq.bench import ADAPT_S, SETTLE_S, BenchOptions, bench, warm_seconds
from hycq.bench_stats import hit

ROOT = Path(__file__).resolve().parents[1]


def point_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Hit, rank and Spearman of one (query, rate) point's records."""
    distinct: dict[str, dict[str, Any]] = {}
    for r in records:
        distinct.setdefault(json.dumps(r["placement"], sort_keys=True), r)
    auto = next(r for r in records if r["plan"] == "auto")
    ordered = sorted(distinct.values(), key=lambda r: -r["measured"]["throughput"])
    rank = 1 + next(i for i, r in enumerate(ordered) if r["placement"] == auto["placement"])
    pred = [r["predicted"]["bottleneck"] for r in distinct.values()]
    meas = [1.0 / max(r["measured"]["throughput"], 1e-9) for r in distinct.values()]
    rho = float(stats.spearmanr(pred, meas).statistic) if len(pred) >= 3 else None
    m = auto["measured"]
    best = ordered[0]
    return {
        "query": Path(auto["query"]).stem,
        "rate": auto["rate"],
        "placements": len(distinct),
        "chosen": auto["placement"],
        "best": best["placement"],
        "vs_best": m["vs_best"],
        "tied_with_best": m["tied_with_best"],
        "best_separable": m["best_separable"],
        "hit": hit(m["vs_best"], m["tied_with_best"]),
        "rank": rank,
        "spearman": rho,
        "clean": all(r["load"]["clean"] for r in distinct.values()),
    }


def data_file(directory: Path, shape: str, rate: float, seconds: float) -> Path:
    """``SHAPE_RATE_SECONDS.parquet`` in ``directory``: the shortest one there of at least
    ``seconds`` (a longer file serves: its tail is not read; earlier studies' files are
    measured again that way), else one that does not exist."""
    found = []
    for p in directory.glob(f"{shape}_{int(rate)}_*.parquet"):
        tail = p.stem.rsplit("_", 1)[-1]
        if tail.isdigit() and int(tail) >= int(seconds):
            found.append((int(tail), p))
    return min(found)[1] if found else directory / f"{shape}_{int(rate)}_{int(seconds)}.parquet"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument(
        "--queries",
        default="queries/smartplug/*.sql,queries/unseen/*.sql",
        help="comma-separated globs of query files, relative to the repository",
    )
    ap.add_argument(
        "--rates", default="1000,5000,10000,20000,40000", help="comma-separated tuples/s"
    )
    ap.add_argument(
        "--shapes",
        default="calib:1677:0.5",
        help="comma-separated NAME:PLUGS:LOAD_SHARE data shapes (hycq data generate)",
    )
    ap.add_argument(
        "--candidates",
        type=int,
        default=20,
        help="measure every placement up to this many, else the best predicted half "
        "plus random ones (hycq.bench.BenchOptions.max_candidates)",
    )
    ap.add_argument(
        "--warm-limit",
        type=float,
        default=120.0,
        help="wall seconds a plan's warm start may take (hycq bench --warm-limit)",
    )
    ap.add_argument("--measure", type=int, default=5, help="event seconds per timed span")
    ap.add_argument(
        "--preroll",
        type=int,
        default=1,
        help="event seconds each plan runs untimed before each of its spans "
        "(hycq.bench.BenchOptions.preroll)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="spans per plan at least")
    ap.add_argument("--max-repeat", type=int, default=8, help="spans per plan at most")
    ap.add_argument(
        "--precision",
        type=float,
        default=0.03,
        help="stop repeating once the median's 95%% interval is this narrow (relative)",
    )
    ap.add_argument(
        "--data-dir",
        type=Path,
        default=Path("/tmp/hycq-study"),
        help="generated data files, one per shape and rate, reused when present",
    )
    ap.add_argument("--json", type=Path, help="write points and every record here")
    args = ap.parse_args()
    paths = [
        Path(p)
        for pattern in args.queries.split(",")
        for p in sorted(
            glob.glob(str(ROOT / pattern) if not Path(pattern).is_absolute() else pattern)
        )
    ]
    rates = [float(r) for r in args.rates.split(",")]
    args.data_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "points": [], "records": []}
    for shape, plugs, share in (s.split(":") for s in args.shapes.split(",")):
        for rate in rates:
            # Long enough for the longest window's warm start, the untimed seconds after it
            # and the span budget.
            longest = max(warm_seconds(load_query(p).plan, rate) for p in paths)
            budget = (args.measure + args.preroll) * max(args.repeat, args.max_repeat)
            seconds = longest + SETTLE_S + ADAPT_S + budget
            path = data_file(args.data_dir, shape, rate, seconds)
            if not path.exists():
                path = args.data_dir / f"{shape}_{int(rate)}_{int(seconds + 5)}.parquet"
                generate_to_file(
                    path, seconds + 5, rate=rate, plugs=int(plugs), load_share=float(share)
                )
            for qp in paths:
                records = bench(
                    [load_query(qp)],
                    BenchOptions(
                        rates=[rate],
                        plans=["auto", "row", "column", "all"],
                        measure_seconds=args.measure,
                        repeat=args.repeat,
                        max_repeat=args.max_repeat,
                        precision=args.precision,
                        max_candidates=args.candidates,
                        max_warm_wall=args.warm_limit,
                        preroll=args.preroll,
                        data={"readings": path},
                    ),
                )
                for r in records:
                    r["shape"] = shape
                    r["data"] = str(path)
                summary = {"shape": shape, **point_summary(records)}
                out["points"].append(summary)
                out["records"].extend(records)
                rho = summary["spearman"]
                print(
                    f"{shape:10s} {rate:>7,.0f}/s {summary['query']:28s} "
                    f"{summary['placements']:2d} plans  chosen rank {summary['rank']:2d}  "
                    f"{summary['vs_best']:.2f}x of best"
                    f"{' (tied)' if summary['tied_with_best'] else ''}"
                    f"  {'HIT ' if summary['hit'] else 'MISS'}  "
                    f"rho {'-' if rho is None else f'{rho:.2f}'}",
                    file=sys.stderr,
                    flush=True,
                )
                if args.json:
                    args.json.write_text(json.dumps(out, indent=1) + "\n")
    pts = out["points"]
    rhos = [p["spearman"] for p in pts if p["spearman"] is not None]
    out["summary"] = {
        "points": len(pts),
        "hits": sum(p["hit"] for p in pts),
        "hit_rate": sum(p["hit"] for p in pts) / len(pts) if pts else None,
        "median_spearman": statistics.median(rhos) if rhos else None,
    }
    print(json.dumps(out["summary"]), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""JISC Figs. 7/8 on hycq's row engine: migration time against the number of joins, best
case (one incomplete state: the two top leaves swapped) and worst case (every intermediate
state incomplete: the chain reversed), for PT, JISC and MS.

For each size, the n-stream raw-window equi-join (experiments/migration_bench.py) runs in
its written order for ``window + 1`` seconds, migrates, and the time measured is the
transfer plus the processing of the same fixed input after it: every batch up to
``window + 2`` seconds past the migration, by which PT has dropped its old plan (checked).
``new_alone`` is the new plan run from scratch over the same span (no migration), and every
migrated run's result stream is compared with it, instant by instant.

    python experiments/jisc_fig_7_8.py --json experiments/results/jisc_fig_7_8.json \
        --plot experiments/results/jisc_fig_7_8.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script

from experiments.migration_bench import (
    STRATEGIES,
    batches,
    best_case,
    load_note,
    median,
    plan,
    run_migrated,
    run_plain,
    same_stream,
    uniform_inputs,
    worst_case,
)

SEED = {  # JISC Figs. 7/8 data labels at 100 joins (research summary, section 2)
    "joins": 100,
    "best": {"jisc_s": 14.48, "pt_s": 141.909, "pt_over_jisc": 9.8},
    "worst": {"jisc_s": 24.558, "pt_s": 141.909, "pt_over_jisc": 5.8},
}


def measure(
    joins: int, case: str, window: int, keys: int, reps: int, strategies: list[str], seed: int
) -> dict[str, Any]:
    n = joins + 1
    order = best_case(n) if case == "best" else worst_case(n)
    old, new = plan(n, window), plan(n, window, order)
    at, until = window + 1, 2 * window + 3
    feed = batches(uniform_inputs(n, 3 * window + 3, window, keys, seed))
    times: dict[str, list[float]] = {s: [] for s in ["new_alone", *strategies]}
    cpu: dict[str, list[float]] = {s: [] for s in times}
    extra: dict[str, Any] = {}
    for _ in range(reps):
        ref, busy = run_plain(new, feed, (at, until))
        times["new_alone"].append(busy)
        cpu["new_alone"].append(ref.span_cpu_s)
        for s in strategies:
            r = run_migrated(s, old, new, feed, at, until)
            same_stream(r.outputs, ref)  # raises on any lost, duplicate or wrong row
            if s == "pt" and (r.dropped_at is None or r.dropped_at >= until):
                raise AssertionError(f"PT did not drop its old plan before second {until}")
            times[s].append(r.span_s)
            cpu[s].append(r.span_cpu_s)
            extra[s] = {**r.stats, "transfer_s": round(r.transfer_s, 6)}
            if s in ("pt", "hybmig", "hybmig-lazy"):
                extra[s]["dropped_at"] = r.dropped_at
        extra["outputs"] = ref.count
    med = {s: round(median(v), 4) for s, v in times.items()}
    med_cpu = {s: round(median(v), 4) for s, v in cpu.items()}
    rec: dict[str, Any] = {
        "joins": joins,
        "case": case,
        "median_s": med,
        "runs_s": {s: [round(x, 4) for x in v] for s, v in times.items()},
        "median_cpu_s": med_cpu,
        "runs_cpu_s": {s: [round(x, 4) for x in v] for s, v in cpu.items()},
        "figures": extra,
        "oracle_checked": True,
    }
    if "pt" in med and "jisc" in med:
        rec["pt_over_jisc"] = round(med["pt"] / med["jisc"], 3)
        rec["pt_over_jisc_cpu"] = round(med_cpu["pt"] / med_cpu["jisc"], 3)
    if "hybmig" in med and "jisc" in med:
        rec["hybmig_over_jisc"] = round(med["hybmig"] / med["jisc"], 3)
    if "ms" in med and "jisc" in med:
        rec["ms_over_jisc"] = round(med["ms"] / med["jisc"], 3)
        rec["ms_over_jisc_cpu"] = round(med_cpu["ms"] / med_cpu["jisc"], 3)
    return rec


def plot(records: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    key = "median_cpu_s"
    for ax, case in zip(axes, ("best", "worst"), strict=True):
        rs = [r for r in records if r["case"] == case]
        xs = [r["joins"] for r in rs]
        for s in rs[0][key] if rs else []:
            ax.plot(xs, [r[key][s] for r in rs], marker="o", label=s)
        ax.set_title(f"{case} case (JISC Fig. {7 if case == 'best' else 8})")
        ax.set_xlabel("joins")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("CPU s: transfer + input until PT drops (median)")
    axes[0].legend()
    fig.suptitle(load_note(), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--joins", default="10,20,30,40", help="comma-separated join counts")
    ap.add_argument("--cases", default="best,worst")
    ap.add_argument("--strategies", default="ms,jisc,pt,hybmig", help=f"of {', '.join(STRATEGIES)}")
    ap.add_argument("--window", type=int, default=10, help="RANGE seconds per stream")
    ap.add_argument("--keys", type=int, default=200, help="keys (= tuples per window per stream)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    strategies = [s for s in args.strategies.split(",") if s]
    records = []
    for case in args.cases.split(","):
        for joins in (int(j) for j in args.joins.split(",")):
            rec = measure(joins, case, args.window, args.keys, args.reps, strategies, args.seed)
            print(
                json.dumps({k: rec[k] for k in ("joins", "case", "median_s", "median_cpu_s")}),
                file=sys.stderr,
            )
            records.append(rec)
    out = {
        "command": " ".join(["python", *sys.argv]),
        "note": load_note(),
        "setup": {
            "window_s": args.window,
            "keys": args.keys,
            "tuples_per_window_per_stream": args.keys,
            "migration_at_s": args.window + 1,
            "timed_until_s": 2 * args.window + 3,
            "reps": args.reps,
            "seed": args.seed,
        },
        "seed_paper": SEED,
        "records": records,
    }
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    if args.plot:
        plot(records, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

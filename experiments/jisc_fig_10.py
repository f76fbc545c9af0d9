"""JISC Fig. 10 on hycq's row engine: first-output latency after a plan switch (wall time
from the start of the transition to the first emitted result), MS against JISC, against the
window size.

The n-stream raw-window equi-join (experiments/migration_bench.py; 20 joins by default)
migrates to the reversed chain (worst case: every intermediate state is incomplete and MS
recomputes them all). Each stream carries ``rate`` tuples per second, so the states grow
with the window. Every migrated run's result stream is compared with the new plan run from
scratch over the same input, instant by instant; ``first_instant`` is the instant of that
first result (the same for both strategies: the data decide it).

    python experiments/jisc_fig_10.py --json experiments/results/jisc_fig_10.json \
        --plot experiments/results/jisc_fig_10.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script

from experiments.migration_bench import (
    batches,
    load_note,
    median,
    plan,
    run_migrated,
    run_plain,
    same_stream,
    uniform_inputs,
    worst_case,
)

SEED = {  # JISC Fig. 10 (research summary, section 2): 20 joins
    "joins": 20,
    "ms_nlj_at_100000_tuple_window_s": 4600,
    "ms_hash": "seconds",
    "jisc": "negligible",
}


def measure(
    joins: int, window: int, rate: int, copies: int, reps: int, strategies: list[str], seed: int
) -> dict[str, Any]:
    n = joins + 1
    keys = rate * window // copies
    old, new = plan(n, window), plan(n, window, worst_case(n))
    at = window + 1
    feed = batches(uniform_inputs(n, window + 4, window, keys, seed, copies=copies))
    ref, _ = run_plain(new, feed, (at, at))
    lat: dict[str, list[float]] = {s: [] for s in strategies}
    lat_cpu: dict[str, list[float]] = {s: [] for s in strategies}
    transfer: dict[str, list[float]] = {s: [] for s in strategies}
    first_instant: dict[str, int | None] = {}
    stats: dict[str, Any] = {}
    for _ in range(reps):
        for s in strategies:
            r = run_migrated(s, old, new, feed, at, at)
            same_stream(r.outputs, ref)
            if r.first_output_s is None:
                raise AssertionError("no output after the migration: lengthen the input")
            lat[s].append(r.first_output_s)
            lat_cpu[s].append(r.first_output_cpu_s or 0.0)
            transfer[s].append(r.transfer_s)
            after = [
                i for w, i, _ in r.outputs.emitted_at if r.outputs.mark and w >= r.outputs.mark
            ]
            first_instant[s] = after[0] if after else None
            stats[s] = r.stats
    med = {s: round(median(v), 5) for s, v in lat.items()}
    rec: dict[str, Any] = {
        "joins": joins,
        "window_s": window,
        "keys": keys,
        "tuples_per_window_per_stream": keys * copies,
        "largest_state_tuples": keys * copies ** (n - 1),
        "first_output_median_s": med,
        "first_output_median_cpu_s": {s: round(median(v), 5) for s, v in lat_cpu.items()},
        "transfer_median_s": {s: round(median(v), 5) for s, v in transfer.items()},
        "first_output_runs_s": {s: [round(x, 5) for x in v] for s, v in lat.items()},
        "first_instant": first_instant,
        "figures": stats,
        "oracle_checked": True,
    }
    if "ms" in med and "jisc" in med:
        rec["ms_over_jisc"] = round(med["ms"] / med["jisc"], 3)
        c = rec["first_output_median_cpu_s"]
        rec["ms_over_jisc_cpu"] = round(c["ms"] / c["jisc"], 3) if c["jisc"] else None
    return rec


def plot(records: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [r["tuples_per_window_per_stream"] for r in records]
    for s in records[0]["first_output_median_s"] if records else []:
        ax.plot(xs, [r["first_output_median_s"][s] for r in records], marker="o", label=s)
    ax.set_xlabel("window size (tuples per stream)")
    ax.set_ylabel("first output after the switch (wall s, median)")
    r0 = records[0] if records else {}
    copies = r0.get("tuples_per_window_per_stream", 0) // max(1, r0.get("keys", 1))
    ax.set_title(
        f"JISC Fig. 10 at Python scale ({r0.get('joins', '?')} joins, "
        f"{copies} tuple(s) per key per window and stream)",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend()
    fig.suptitle(load_note(), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--joins", type=int, default=20)
    ap.add_argument("--windows", default="5,10,20,40", help="RANGE seconds, comma-separated")
    ap.add_argument("--rate", type=int, default=20, help="tuples per second per stream")
    ap.add_argument(
        "--copies",
        type=int,
        default=1,
        help="tuples per key per window and stream (>1: states grow copies**j up the chain)",
    )
    ap.add_argument("--strategies", default="ms,jisc")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    strategies = [s for s in args.strategies.split(",") if s]
    records = []
    for w in (int(x) for x in args.windows.split(",")):
        rec = measure(args.joins, w, args.rate, args.copies, args.reps, strategies, args.seed)
        print(
            json.dumps({k: rec[k] for k in ("window_s", "first_output_median_s")}), file=sys.stderr
        )
        records.append(rec)
    out = {
        "command": " ".join(["python", *sys.argv]),
        "note": load_note(),
        "setup": {
            "joins": args.joins,
            "rate": args.rate,
            "copies": args.copies,
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

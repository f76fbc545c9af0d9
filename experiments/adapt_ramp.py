"""The hybrid case under a rate ramp: static row plan, static column plan and ``--adapt``.

A smart-plug stream whose rate changes in phases (default 1k -> 40k -> 2k tuples per
event-second, each phase longer than Q2's 5-minute window) is generated once
(``hycq data generate --rate-profile``) and replayed at max pace through

* ``row``: ``hycq run Q --placement row`` (everything on the row engine),
* ``column``: ``--placement column`` (every relational operator on DuckDB),
* ``auto``: ``--placement auto`` (the optimizer's plan for the first phase's rate, static),
* ``adapt``: ``--placement auto --adapt --reoptimize-every S`` (starts with the optimizer's
  plan for the first phase's rate and migrates when the measured statistics drift).

Per run and phase, from the run's per-event-second ``timeline`` (docs/migration.md): the
throughput (tuples over wall seconds) after the phase has settled (its first ``--settle``
event-seconds left out: the window refills at the new rate, and a migration settles), whether
that keeps up with the phase's rate, and the result latency (p50 of the per-second medians,
max). The migrations of the adaptive run are listed. The result streams are compared
(rows of one not in the other, as bags): equal up to the ulp-level AVG difference between
the row engine and DuckDB (``differing_rows``). The targets (issue 16): ``--adapt`` keeps
up wherever some static plan keeps up, and its throughput in each phase is >= 0.9x the best
static plan's.

``--workload keyed`` replaces the smart-plug stream by the keyed multi-stream generator
(streams r, s, t; ``--phases`` then gives the rate per stream) for the join queries of
``queries/keyed/`` (run with their catalog), where the best placement flips from row to
column as the rate grows. ``--repeat N`` runs the plans interleaved (ABCABC...) N times and
reports per-phase medians: one run of a 20-minute ramp varies by several percent here.

    python experiments/adapt_ramp.py --phases 1000:360,40000:360,2000:360 --repeat 3 \\
        --json experiments/results/adapt_ramp.json --plot experiments/results/adapt_ramp.png
    python experiments/adapt_ramp.py --workload keyed --query queries/keyed/j3.sql \\
        --phases 20:90,150:90,30:90 --settle 30 --repeat 3 \\
        --json experiments/results/adapt_ramp_j3.json --plot experiments/results/adapt_ramp_j3.png
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
PLANS = {
    "row": ["--placement", "row"],
    "column": ["--placement", "column"],
    "auto": ["--placement", "auto"],  # the optimizer's plan for the first phase, static
    "adapt": ["--placement", "auto", "--adapt"],
}


def parse_phases(spec: str) -> list[tuple[int, int]]:
    """``RATE:SECONDS,...`` -> [(rate, seconds), ...]."""
    out = []
    for part in spec.split(","):
        rate, seconds = part.split(":")
        out.append((int(float(rate)), int(float(seconds))))
    return out


def generate(phases: list[tuple[int, int]], work: Path, seed: int, workload: str) -> list[str]:
    """Write the ramp's data under ``work``; the ``hycq run`` arguments that read it.

    ``smartplug``: one file of readings whose rate follows the phases. ``keyed``: the keyed
    generator's streams r, s, t (each at the phase's rate) and a catalog that reads them."""
    total = sum(s for _, s in phases)
    points, at = [], 0
    for rate, seconds in phases:
        points.append(f"{at}:{rate}")
        at += seconds
    cmd = [sys.executable, "-m", "hycq.cli", "data", "generate"]
    cmd += ["--seconds", str(total), "--rate-profile", ",".join(points), "--seed", str(seed)]
    if workload == "keyed":
        folder = work / "keyed"
        cmd += ["--generator", "keyed", "--out", str(folder), "--format", "parquet"]
        run_args = ["--catalog", str(folder / "catalog.toml")]
    else:
        path = work / "ramp.parquet"
        cmd += ["--out", str(path)]
        run_args = ["--data", f"readings={path}"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return run_args


def run_plan(
    query: Path, data_args: list[str], plan: str, every: float, work: Path, rep: int = 0
) -> dict[str, Any]:
    metrics, out = work / f"{plan}-{rep}.json", work / f"{plan}-{rep}.parquet"
    cmd = [sys.executable, "-m", "hycq.cli", "run", str(query), *data_args]
    cmd += PLANS[plan] + ["--metrics", str(metrics), "--output", str(out)]
    if plan == "adapt":
        cmd += ["--reoptimize-every", str(every)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{plan}: exit {proc.returncode}\n{proc.stderr}")
    m = json.loads(metrics.read_text())
    m["_elapsed_s"] = time.perf_counter() - start
    m["_output"] = str(out)
    return m


def phase_figures(
    m: dict[str, Any], phases: list[tuple[int, int]], settle: int, streams: int = 1
) -> list[dict[str, Any]]:
    """Per phase: throughput over the settled part; kept up when it is at least the phase's
    rate times ``streams`` (the keyed workload's rate is per stream)."""
    tl = m["timeline"]
    res = tl["resolution_s"]
    out, start = [], 0
    for rate, seconds in phases:
        lo, hi = start + settle, start + seconds
        entries = [e for e in tl["entries"] if lo <= e["t_s"] and e["t_s"] + res <= hi]
        tuples = sum(e["tuples"] for e in entries)
        wall = sum(e["wall_s"] for e in entries)
        lat = [e["latency_ms"] for e in entries if e.get("latency_ms")]
        p50s = sorted(x["p50"] for x in lat if x.get("p50") is not None)
        maxes = [x["max"] for x in lat if x.get("max") is not None]
        thr = tuples / wall if wall > 0 else None
        out.append(
            {
                "rate": rate,
                "from_s": lo,
                "to_s": hi,
                "tuples": tuples,
                "wall_s": wall,
                "throughput": thr,
                "kept_up": bool(thr is not None and thr >= rate * streams),
                "latency_ms_p50": p50s[len(p50s) // 2] if p50s else None,
                "latency_ms_max": max(maxes) if maxes else None,
            }
        )
        start += seconds
    return out


def median_phases(reps: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per phase, the repetition with the median throughput (its figures), plus every
    repetition's throughput."""
    out = []
    for i in range(len(reps[0])):
        runs = sorted((r[i] for r in reps), key=lambda f: f["throughput"] or 0.0)
        mid = dict(runs[len(runs) // 2])
        mid["throughput_runs"] = [r[i]["throughput"] for r in reps]
        out.append(mid)
    return out


def differing_rows(a: str, b: str) -> int:
    """Result rows of one stream not matched in the other (both ways, as bags; floats
    rounded to 9 significant digits). Row and DuckDB plans can differ by one in a count of
    ``value > AVG(value)`` where the value is within an ulp of the window's mean: the row
    engine sums exactly (docs/semantics.md), DuckDB's AVG does not."""
    from collections import Counter

    def bag(path: str) -> Counter[tuple[Any, ...]]:
        t = pq.read_table(path)
        cols = []
        for c in t.columns:
            vals = c.to_pylist()
            if pa.types.is_floating(c.type):
                vals = [None if v is None else float(f"{v:.9g}") for v in vals]
            cols.append(vals)
        return Counter(zip(*cols, strict=True))

    x, y = bag(a), bag(b)
    return sum(((x - y) + (y - x)).values())


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for plan, run in report["runs"].items():
        tl = run["timeline"]
        xs = [e["t_s"] for e in tl["entries"] if e["throughput"]]
        ys = [e["throughput"] for e in tl["entries"] if e["throughput"]]
        ax1.plot(xs, ys, label=plan, lw=1)
        lat = [
            (e["t_s"], e["latency_ms"]["max"])
            for e in tl["entries"]
            if e.get("latency_ms") and e["latency_ms"].get("max") is not None
        ]
        ax2.plot([p[0] for p in lat], [p[1] for p in lat], label=plan, lw=1)
    start = 0
    for rate, seconds in report["phases"]:
        ax1.hlines(rate, start, start + seconds, colors="k", linestyles="dashed", lw=1)
        start += seconds
    for mig in report["runs"]["adapt"].get("migrations", []):
        if mig.get("at_s") is not None:
            for ax in (ax1, ax2):
                ax.axvline(mig["at_s"], color="r", lw=0.8, ls=":")
    ax1.set_yscale("log")
    ax1.set_ylabel("tuples per wall second")
    ax1.legend()
    ax1.set_title("throughput per event-second (dashed: the input rate; red: migrations)")
    ax2.set_yscale("log")
    ax2.set_ylabel("latency max (ms)")
    ax2.set_xlabel("event-seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--query", type=Path, default=ROOT / "queries/smartplug/q2.sql")
    ap.add_argument("--phases", default="1000:400,40000:400,2000:400", help="RATE:SECONDS,...")
    ap.add_argument("--settle", type=int, default=60, help="event-seconds left out per phase")
    ap.add_argument("--reoptimize-every", type=float, default=5.0)
    ap.add_argument("--plans", default="row,column,auto,adapt")
    ap.add_argument(
        "--workload",
        choices=("smartplug", "keyed"),
        default="smartplug",
        help="smartplug: one readings file (Q2 and the smart-plug queries); keyed: streams "
        "r, s, t of the keyed generator, each at the phase's rate (queries/keyed)",
    )
    ap.add_argument("--repeat", type=int, default=1, help="interleaved runs per plan (medians)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    phases = parse_phases(args.phases)
    plans = args.plans.split(",")
    report: dict[str, Any] = {
        "command": "python experiments/" + " ".join([Path(__file__).name, *sys.argv[1:]]),
        "query": str(args.query.relative_to(ROOT))
        if args.query.is_relative_to(ROOT)
        else str(args.query),
        "phases": phases,
        "workload": args.workload,
        "repeat": args.repeat,
        "settle_s": args.settle,
        "load_before": os.getloadavg()[0],
        "runs": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data_args = generate(phases, work, args.seed, args.workload)
        outputs: dict[str, str] = {}
        per_rep: dict[str, list[list[dict[str, Any]]]] = {p: [] for p in plans}
        for rep in range(args.repeat):  # interleaved: plan A, B, C, then again
            for plan in plans:
                m = run_plan(args.query, data_args, plan, args.reoptimize_every, work, rep)
                outputs.setdefault(plan, m["_output"])
                streams = 3 if args.workload == "keyed" else 1
                figures = phase_figures(m, phases, args.settle, streams)
                per_rep[plan].append(figures)
                if rep == 0:
                    report["runs"][plan] = {
                        "tuples_in": m["tuples_in"],
                        "wall_s": m["wall_s"],
                        "migrations": [
                            {
                                k: r.get(k)
                                for k in (
                                    "at_s",
                                    "strategy",
                                    "reason",
                                    "duration_ms",
                                    "output_gap_ms",
                                    "to",
                                )
                            }
                            for r in m.get("migrations", [])
                        ],
                        "timeline": m["timeline"],
                        "adapt_decisions": m.get("adapt_decisions", []),
                    }
                else:
                    report["runs"][plan].setdefault("migrations_per_repetition", []).append(
                        len(m.get("migrations", []))
                    )
                line = "  ".join(
                    f"{f['rate']:>6}/s: {f['throughput'] or 0:>9,.0f} "
                    f"({'ok' if f['kept_up'] else 'behind'})"
                    for f in figures
                )
                print(
                    f"{plan:>7} #{rep}  {line}  migrations: {len(m.get('migrations', []))}",
                    flush=True,
                )
        for plan in plans:
            report["runs"][plan]["phases"] = median_phases(per_rep[plan])
        base = plans[0]
        report["differing_rows"] = {p: differing_rows(outputs[base], outputs[p]) for p in plans[1:]}
    report["load_after"] = os.getloadavg()[0]
    if "adapt" in report["runs"]:
        statics = [p for p in report["runs"] if p != "adapt"]
        verdict = []
        for i, (rate, _) in enumerate(phases):
            best = max(
                (report["runs"][p]["phases"][i]["throughput"] or 0.0 for p in statics),
                default=math.nan,
            )
            a = report["runs"]["adapt"]["phases"][i]
            some_static_keeps_up = any(report["runs"][p]["phases"][i]["kept_up"] for p in statics)
            verdict.append(
                {
                    "rate": rate,
                    "adapt_over_best_static": (a["throughput"] or 0.0) / best if best else None,
                    "adapt_kept_up": a["kept_up"],
                    "some_static_kept_up": some_static_keeps_up,
                }
            )
        report["verdict"] = verdict
        print(json.dumps(verdict, indent=1))
    print(f"result rows differing from {plans[0]}:", report["differing_rows"])
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    if args.plot:
        plot(report, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

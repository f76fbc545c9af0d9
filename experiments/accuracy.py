"""Optimizer accuracy: which cost model predicts measured throughput best, and how close the
optimizer's plan comes to the measured best.

    python experiments/accuracy.py experiments/results/fig_6_6.json \\
        experiments/results/accuracy_all.json --json experiments/results/accuracy.json

Input: ``hycq bench --json`` files (records per CONTRACT, any plans: auto, row, column, all).
For every (query, rate) point and every cost model (analytical and calibrated, each with the
shared and the per-operator row core) it re-costs *every measured placement* under that model
on the same estimates and reports:

* the model's choice: is it among the measured placements, and is its measured throughput
  within 5% of the best measured one (else the loss);
* rank agreement: Spearman's rho between predicted C_b and measured 1/throughput;
* error factor: predicted maximum throughput (rate / C_b, the rate where C_b reaches 1)
  against the measured one, ``max(p/m, m/p)``, median over placements.

The bench itself chose with one model (recorded in each record); re-costing with the others
costs nothing, so all models are judged on the same measurements.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from scipy.stats import spearmanr

from hycq.api import load_query
from hycq.planning import OptimizerOptions, optimize

MODELS = [
    ("calibrated", "shared"),
    ("analytical", "shared"),
    ("calibrated", "per-operator"),
    ("analytical", "per-operator"),
]


def _key(placement: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in placement.items() if v != "row"))


def analyse(records: list[dict[str, Any]]) -> dict[str, Any]:
    points: dict[tuple[str, float], dict[tuple[tuple[str, str], ...], float]] = defaultdict(dict)
    placements: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for r in records:
        k = _key(r["placement"])
        placements[k] = r["placement"]
        pt = points[(r["query"], float(r["rate"]))]
        pt[k] = max(pt.get(k, 0.0), float(r["measured"]["throughput"]))
    out: dict[str, Any] = {"points": [], "models": {}}
    per_model: dict[str, dict[str, list[float]]] = {
        f"{m}/{c}": {"hit": [], "known": [], "loss": [], "rho": [], "err": []} for m, c in MODELS
    }
    for (query, rate), measured in sorted(points.items()):
        q = load_query(Path(query))
        best_k = max(measured, key=measured.__getitem__)
        best = measured[best_k]
        row: dict[str, Any] = {
            "query": Path(query).stem,
            "rate": rate,
            "placements_measured": len(measured),
            "best": {"placement": dict(best_k), "throughput": best},
            "models": {},
        }
        for model, core in MODELS:
            opt = optimize(q, OptimizerOptions(rate=rate, cost_model=model, row_core=core))
            name = f"{model}/{core}"
            chosen = _key(opt.placement)
            got = measured.get(chosen)
            pred = {k: opt.cost_of(placements[k]) for k in measured}
            ks = list(measured)
            rho = (
                float(spearmanr([pred[k].bottleneck for k in ks], [1 / measured[k] for k in ks])[0])
                if len(ks) >= 3
                else float("nan")
            )
            errs = [
                max(p, m) / min(p, m)
                for k in ks
                for p, m in [(rate / pred[k].bottleneck, measured[k])]
                if pred[k].bottleneck > 0
            ]
            s = per_model[name]
            s["known"].append(got is not None)
            if got is not None:
                s["hit"].append(got >= 0.95 * best)
                s["loss"].append(1 - got / best)
            if not math.isnan(rho):
                s["rho"].append(rho)
            s["err"].append(statistics.median(errs))
            row["models"][name] = {
                "chosen": dict(chosen),
                "chosen_measured": got,
                "within_5pct": None if got is None else got >= 0.95 * best,
                "loss": None if got is None else 1 - got / best,
                "spearman": rho,
                "median_error_factor": statistics.median(errs),
            }
        out["points"].append(row)
    for name, s in per_model.items():
        out["models"][name] = {
            "points": len(s["known"]),
            "choice_measured": sum(s["known"]),
            "within_5pct": sum(s["hit"]),
            "mean_loss_when_measured": statistics.fmean(s["loss"]) if s["loss"] else None,
            "median_spearman": statistics.median(s["rho"]) if s["rho"] else None,
            "median_error_factor": statistics.median(s["err"]) if s["err"] else None,
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench", nargs="+", type=Path, help="hycq bench --json files")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    records: list[dict[str, Any]] = []
    for path in args.bench:
        data = json.loads(path.read_text())
        records.extend(data["records"] if isinstance(data, dict) else data)
    result = analyse(records)
    for p in result["points"]:
        m = p["models"]["calibrated/shared"]
        got = m["chosen_measured"]
        shown = "unmeasured" if got is None else f"{got:,.0f}"
        print(
            f"{p['query']} {p['rate']:>8,.0f}/s  {p['placements_measured']:>2} placements  "
            f"best {p['best']['throughput']:>11,.0f}  calibrated choice {shown}"
            f"  rho {m['spearman']:.2f}",
            file=sys.stderr,
        )
    for name, s in result["models"].items():
        print(
            f"{name:26s} choice measured {s['choice_measured']}/{s['points']}, within 5% "
            f"{s['within_5pct']}, median rho {s['median_spearman']}, median error factor "
            f"{s['median_error_factor']:.2f}",
            file=sys.stderr,
        )
    if args.json:
        result["command"] = " ".join(["python", *sys.argv])
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

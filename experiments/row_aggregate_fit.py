"""How well the row aggregate's cost model fits busy times measured at steady state.

Reads ``operator_busy_at_steady_state.py`` JSON files (all-row points), pairs every row
aggregate's measured u with the estimator's view of it (groups, groups a slide touches,
calls) and prints, per aggregate, the ratio of the current model's u to the measured one,
and the same for the constants given with ``--try`` (the model's structure: per tuple
``agg_base + calls``, plus ``agg_group`` per touched group, without the large-group share
and scaled by ``1 + agg_group_call * (calls - 1)``):

    python experiments/row_aggregate_fit.py experiments/results/operator_busy_rowaggs_*.json \\
        --try 0.15,0.20,0.25,2.0,0.75

``--try`` is ``agg_base,agg_incremental,agg_minmax,agg_group,agg_group_call`` in us. The
summary is the median |log(model / measured)| and how many aggregates are within 1.5x.
``--fit`` fits the five constants (non-negative) by least squares on the log ratios and
tries them beside the others.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from scipy.optimize import least_squares

from hycq.api import load_query
from hycq.planning import Optimized, OptimizerOptions, optimize
from optimizer.ir.plan import Aggregate

ROOT = Path(__file__).resolve().parents[1]


def aggregates(paths: list[Path]) -> list[dict[str, Any]]:
    """Every row aggregate of the files' all-row points, with its estimates."""
    plans: dict[tuple[str, str, float], Optimized] = {}
    rows = []
    for path in paths:
        for p in json.loads(path.read_text())["points"]:
            if p["placement"] != "row":
                continue
            key = (p["query"], p["data"], p["rate"])
            if key not in plans:
                q = load_query(ROOT / "queries" / "smartplug" / f"{p['query']}.sql")
                opts = OptimizerOptions(rate=p["rate"], data={"readings": Path(p["data"])})
                plans[key] = optimize(q, opts)
            opt = plans[key]
            for o in p["operators"]:
                op = opt.plan.op(o["operator"])
                if not isinstance(op, Aggregate):
                    continue
                est = opt.estimates[o["operator"]]
                rows.append(
                    {
                        "file": path.stem,
                        "query": p["query"],
                        "op": o["operator"],
                        "calls": len(op.aggs),
                        "minmax": sum(c.func in ("MIN", "MAX") for c in op.aggs),
                        "in": o["in_per_s"],
                        "touched": (est.touched or 0.0) / max(est.slide_seconds, 1e-9),
                        "groups": est.groups.value if est.groups is not None else 0.0,
                        "measured": o["measured_u"],
                        "model": o["model_u"],
                    }
                )
    return rows


def tried(r: dict[str, Any], c: list[float]) -> float:
    base, inc, mm, group, per_call = c
    per_tuple = base + inc * (r["calls"] - r["minmax"]) + mm * r["minmax"]
    return 1e-6 * (r["in"] * per_tuple + group * (1 + per_call * (r["calls"] - 1)) * r["touched"])


def fit(rows: list[dict[str, Any]]) -> list[float]:
    """The five constants that minimise the squared log ratios of model to measured u."""

    def residuals(c: Any) -> list[float]:
        return [math.log(max(tried(r, list(c)), 1e-12) / r["measured"]) for r in rows]

    res = least_squares(residuals, [0.15, 0.20, 0.25, 2.0, 0.75], bounds=(0.0, 20.0))
    return [round(float(x), 3) for x in res.x]


def summary(ratios: list[float]) -> str:
    logs = [abs(math.log(x)) for x in ratios]
    within = sum(x < math.log(1.5) for x in logs)
    return f"median |log ratio| {statistics.median(logs):.2f}, within 1.5x {within}/{len(logs)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("files", type=Path, nargs="+", help="operator_busy_at_steady_state JSON")
    ap.add_argument("--try", dest="tries", action="append", default=[], metavar="CONSTANTS")
    ap.add_argument("--fit", action="store_true", help="fit the five constants and try them")
    args = ap.parse_args()
    rows = aggregates(args.files)
    tries = [[float(x) for x in t.split(",")] for t in args.tries]
    if args.fit:
        tries.append(fit(rows))
    for r in rows:
        extra = "".join(
            f"  try{i + 1} {tried(r, c) / r['measured']:.2f}" for i, c in enumerate(tries)
        )
        print(
            f"{r['file'][:28]:28s} {r['query']} {r['op']:11s} calls {r['calls']} "
            f"in/s {r['in']:6.0f} groups {r['groups']:6.0f} touched/s {r['touched']:6.0f} "
            f"measured {r['measured']:.4f}  model {r['model'] / r['measured']:.2f}{extra}"
        )
    print("model:", summary([r["model"] / r["measured"] for r in rows]))
    for i, c in enumerate(tries):
        print(f"try{i + 1} {c}:", summary([tried(r, c) / r["measured"] for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

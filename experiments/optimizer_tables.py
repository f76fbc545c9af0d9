"""Tables 6.1 and 6.2 of the dissertation on hycq's optimizer core (analytical cost model).

Table 6.1: for join_2/5/8, the R2R operator count of the Phase-One plan, plans examined in
Phase Two with and without pruning, and the time of each phase (median of ``--repeat``
runs). Exhaustive search is skipped above ``--exhaustive-limit`` placements (join_8 has
2^24). Also the 8-way join with the 15-operator decomposition. Table 6.2: optimization time
of Q1-Q6. Engines row and DuckDB, every stream at ``--rate``; statistics sampled from the
generator as ``hycq explain`` does (``hycq.planning.optimize``).

    python experiments/optimizer_tables.py --rate 2000 --repeat 3 --cost-model analytical \
        --json experiments/results/optimizer_tables.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from hycq.api import QUERIES, load_query
from hycq.planning import OptimizerOptions
from hycq.planning import optimize as hycq_optimize
from optimizer.phase_two import place

ENGINES = ("row", "duckdb")


def optimize(
    path: Path, rate: float, repeat: int, exhaustive_limit: int, cost_model: str | None
) -> dict[str, Any]:
    q = load_query(path)
    p1_ms, p2_ms, p2_dec_ms = [], [], []
    for _ in range(repeat):
        opt = hycq_optimize(q, OptimizerOptions(rate=rate, engines=ENGINES, cost_model=cost_model))
        model, one, est2 = opt.model, opt.phase_one, opt.estimates
        p1_ms.append(1e3 * one.seconds)
        two = place(one.plan, est2, model, ENGINES, decompose=False)
        p2_ms.append(1e3 * two.seconds)
        dec = place(one.plan, est2, model, ENGINES, decompose=True)
        p2_dec_ms.append(1e3 * dec.seconds)
    r2r = len(one.plan.r2r_ids())
    exhaustive: dict[str, Any] = {"skipped": True, "placements": 2**r2r}
    if 2**r2r <= exhaustive_limit:
        ex = place(one.plan, est2, model, ENGINES, exhaustive=True)
        exhaustive = {
            "plans_examined": ex.plans_examined,
            "ms": 1e3 * ex.seconds,
            # Equal up to float summation order (the same placement sums in another order).
            "same_cost_as_pruned": math.isclose(ex.cost.bottleneck, two.cost.bottleneck)
            and math.isclose(ex.cost.utilization, two.cost.utilization),
            "same_placement_as_pruned": ex.placement == two.placement,
        }
    return {
        "query": str(path.relative_to(QUERIES)),
        "cost_model": model.name,
        "r2r_operators": r2r,
        "phase_one_ms": statistics.median(p1_ms),
        "phase_one_plans": one.plans_examined,
        "phase_two_pruned_plans": two.plans_examined,
        "phase_two_pruned_ms": statistics.median(p2_ms),
        "phase_two_exhaustive": exhaustive,
        "total_ms": statistics.median(p1_ms) + statistics.median(p2_ms),
        "total_decomposed_ms": statistics.median(p1_ms) + statistics.median(p2_dec_ms),
        "decomposed": {
            "applied": dec.decomposed,
            "plans": dec.plans_examined,
            "ms": statistics.median(p2_dec_ms),
            "same_plan": dec.placement == two.placement,
        },
        "cost": {"bottleneck": two.cost.bottleneck, "utilization": two.cost.utilization},
        "feasible": two.feasible,
        "placement": {k: v for k, v in two.placement.items() if v != "row"},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--exhaustive-limit", type=int, default=2**15)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--cost-model", help="registry spec (default: hycq's default)")
    args = ap.parse_args()
    report: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "rate": args.rate}
    for table, names in (
        ("table_6_1", ["joins/join_2.sql", "joins/join_5.sql", "joins/join_8.sql"]),
        ("table_6_2", [f"smartplug/q{i}.sql" for i in range(1, 7)]),
    ):
        rows = []
        for name in names:
            row = optimize(
                QUERIES / name, args.rate, args.repeat, args.exhaustive_limit, args.cost_model
            )
            rows.append(row)
            ex = row["phase_two_exhaustive"].get("plans_examined", "skipped")
            dec = row["decomposed"]
            print(
                f"{row['query']:22s} R2R {row['r2r_operators']:3d}  "
                f"P1 {row['phase_one_ms']:8.1f} ms  P2 pruned {row['phase_two_pruned_plans']:6d} "
                f"plans {row['phase_two_pruned_ms']:8.1f} ms  exhaustive {ex}  "
                f"decomposed {dec['plans']} plans {dec['ms']:.1f} ms",
                file=sys.stderr,
            )
        report[table] = rows
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

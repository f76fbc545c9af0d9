"""Fig. 6.8 on hycq: does ranking plans with the feasibility check (Definition 6.1) choose
differently from ranking by total utilization alone (``--no-feasibility``), and what does
the difference cost in measured throughput?

For Q1-Q6, every cost model and row-core mode, and rates from 1k to 400k tuples/s, both
optimizations run; where the placements differ, both plans are measured with
``hycq bench`` (warm start, timed spans) at that rate.

    python experiments/fig_6_8.py --json experiments/results/fig_6_8.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hycq.api import QUERIES, load_query
from hycq.bench import BenchOptions, measure
from hycq.planning import OptimizerOptions, optimize


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="1000,10000,40000,100000,200000,400000")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    compared, differ = 0, []
    for model in ("analytical", "calibrated"):
        for core in ("shared", "per-operator"):
            for i in range(1, 7):
                q = load_query(QUERIES / "smartplug" / f"q{i}.sql")
                for rate in rates:
                    base = OptimizerOptions(rate=rate, cost_model=model, row_core=core)
                    a = optimize(q, base)
                    b = optimize(q, OptimizerOptions(**{**base.__dict__, "feasibility": False}))
                    compared += 1
                    if a.placement == b.placement:
                        continue
                    o = BenchOptions(rates=[rate], measure_seconds=5, repeat=3)
                    rec: dict[str, Any] = {
                        "query": f"q{i}",
                        "rate": rate,
                        "model": model,
                        "row_core": core,
                    }
                    for name, opt in (("feasibility", a), ("utilization_only", b)):
                        m = measure(q, opt.plan, opt.placement, rate, o)
                        rec[name] = {
                            "placement": opt.placement,
                            "throughput": m.throughput,
                            "bottleneck": opt.cost.bottleneck,
                            "utilization": opt.cost.utilization,
                        }
                    differ.append(rec)
    print(
        f"{len(differ)} of {compared} (query, rate, model) points choose differently",
        file=sys.stderr,
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "command": " ".join(["python", *sys.argv]),
                    "compared": compared,
                    "differ": differ,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

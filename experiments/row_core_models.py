"""Which cost model predicts measured throughput better: row operators as independent units
(the dissertation, ``--row-core per-operator``) or sharing the one Python thread
(``--row-core shared``), under the analytical and the calibrated constants?

For each query (Q1-Q6 with their windows shortened to 10 seconds, so that windows fill
within the run) and each placement (pure row, pure DuckDB, and the optimizer's choice), the
plan runs at max pace over generated data of density ``--rate``; the measured throughput is
set beside each model's predicted maximum throughput (the rate at which the placement's
predicted C_b reaches 1). Error: median over runs of |log(predicted / measured)|, reported
as a factor (1.0 = perfect).

    HYCQ_CALIBRATION=experiments/results/calibration.json \\
    python experiments/row_core_models.py --rate 40000 --seconds 40 --repeat 3 \\
        --json experiments/results/row_core_models.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from engines.runtime import RunOptions
from hycq.api import QUERIES, load_query, max_feasible_rate, resolve_placement, run
from hycq.planning import OptimizerOptions, optimize

MODELS = [
    ("analytical", "per-operator"),
    ("analytical", "shared"),
    ("calibrated", "per-operator"),
    ("calibrated", "shared"),
]


def shortened(path: Path, tmp: Path) -> Path:
    text = path.read_text().replace("5 MINUTES", "10 SECONDS").replace("1 MINUTE", "4 SECONDS")
    out = tmp / path.name
    out.write_text(text)
    (tmp / "catalog.toml").write_text((path.parent / "catalog.toml").read_text())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=40000)
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    records: list[dict[str, Any]] = []
    for i in range(1, 7):
        path = shortened(QUERIES / "smartplug" / f"q{i}.sql", tmp)
        q = load_query(path)
        opts = OptimizerOptions(rate=args.rate, cost_model="calibrated")
        opt = optimize(q, opts)
        placements = {
            "row": resolve_placement(opt.plan, "row"),
            "column": resolve_placement(opt.plan, "column"),
            "auto": opt.placement,
        }
        seen: list[dict[str, str]] = []
        for name, placement in placements.items():
            if placement in seen:
                continue
            seen.append(placement)
            measured = []
            for _ in range(args.repeat):
                res = run(
                    q, RunOptions(rate=args.rate, duration=args.seconds), placement, optimizer=opts
                )
                measured.append(res.metrics["throughput"])
            rec: dict[str, Any] = {
                "query": f"q{i}",
                "plan": name,
                "measured": statistics.median(measured),
                "placement": {k: v for k, v in placement.items() if v != "row"},
                "predicted": {},
            }
            for model, core in MODELS:
                o = optimize(q, OptimizerOptions(rate=args.rate, cost_model=model, row_core=core))
                rec["predicted"][f"{model}/{core}"] = max_feasible_rate(o, placement)
            records.append(rec)
            print(
                f"q{i} {name:6s} measured {rec['measured']:>12,.0f}  "
                + "  ".join(
                    f"{k} {v:,.0f}" if v else f"{k} -" for k, v in rec["predicted"].items()
                ),
                file=sys.stderr,
            )
    summary = {}
    for model, core in MODELS:
        key = f"{model}/{core}"
        errs = [
            abs(math.log(r["predicted"][key] / r["measured"]))
            for r in records
            if r["predicted"][key]
        ]
        summary[key] = {
            "median_error_factor": math.exp(statistics.median(errs)),
            "worst_error_factor": math.exp(max(errs)),
            "runs": len(errs),
        }
        print(
            f"{key:26s} median x{summary[key]['median_error_factor']:.2f}  "
            f"worst x{summary[key]['worst_error_factor']:.2f}",
            file=sys.stderr,
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "command": " ".join(["python", *sys.argv]),
                    "rate": args.rate,
                    "seconds": args.seconds,
                    "records": records,
                    "summary": summary,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

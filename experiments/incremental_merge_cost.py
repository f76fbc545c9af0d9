"""What one incremental merge costs in a DuckDB MIG, measured against the model (issue 20).

Runs Q5 (one 5-minute SUM) and Q6 (three AVGs over 1, 3 and 5 minutes) wholly on DuckDB over
the first 330 event-seconds of each shape's 40k file. Per kept aggregate it prints the
measured seconds per merge (the MIG's ``incremental`` metrics) beside the model's
``inc_fixed + inc_row * rows + inc_group * groups`` (cost_models.analytical), with
statistics sampled from the same file. Q5 is what the DuckDB constants were fitted to; Q6 is
held out.

    python experiments/incremental_merge_cost.py --data-dir /tmp/shapes \\
        --shapes many,workheavy,loadheavy,calib,few
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pyarrow.parquet as pq

from cost_models.analytical import AnalyticalCostModel, _kept_incrementally
from engines import registry
from hycq.api import QUERIES, execute, load_query
from optimizer.estimate import estimate
from optimizer.ir.placement import Group, groups, uniform_placement
from optimizer.statistics import measure


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/shapes"))
    ap.add_argument("--shapes", default="many,workheavy,loadheavy,calib,few")
    ap.add_argument("--queries", default="q5,q6")
    args = ap.parse_args()
    model = AnalyticalCostModel().with_engines(registry.cost_defaults())
    for name in args.queries.split(","):
        q = load_query(QUERIES / "smartplug" / f"{name}.sql")
        (g,) = groups(q.plan, uniform_placement(q.plan, "duckdb"))
        for shape in args.shapes.split(","):
            t = pq.read_table(args.data_dir / f"{shape}_40000.parquet")
            ts = t.column("ts").to_numpy()
            t = t.filter(ts < ts.min() + 330)
            est = estimate(
                q.plan,
                q.catalog,
                rates=40000.0,
                sample=measure(q.plan, {"readings": t.slice(0, 100_000)}),
            )
            r = execute(
                q.plan, q.catalog, {"readings": t}, placement=uniform_placement(q.plan, "duckdb")
            )
            for m in r.metrics["operators"].values():
                for agg, s in (m.get("incremental") or {}).items():
                    ops = tuple(o for o in g.operators if o in (agg, *q.plan.inputs(agg)))
                    cost, _ = _kept_incrementally(
                        Group("duckdb", ops, agg), est, model.engines["duckdb"]
                    )
                    per = s["seconds"] / max(1, s["merges"])
                    print(
                        f"{name} {shape:10s} {agg:11s} merges {s['merges']:4d}  "
                        f"measured {1e3 * per:5.1f} ms  model {1e3 * cost:5.1f} ms",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

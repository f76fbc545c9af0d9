"""Per-operator busy time at steady state against the cost model's per-operator u.

``hycq run --metrics`` reports every operator's busy time over a whole run, most of which
fills the windows (no tuple expires yet, every aggregate group is new); ``hycq bench``
times full windows but reports one throughput per plan. This script runs the bench
(:func:`hycq.bench.measure`: a warm start that fills the windows, one untimed settling
second, then timed spans, garbage collection off) for one placement at a time with
``BenchOptions.operator_metrics``, which sums the run metrics' per-operator ``busy_s`` over
the timed spans: the busy core-seconds per event-second of each operator with full
windows, beside the model's ``u`` for it (a MIG beside its group's u with the Arrow
credits added back, i.e. the group's own work). ``unattributed`` is the spans' wall time
no operator measured (the driver loop, reading and rescaling batches, the sink).

Each point is QUERY:PLACEMENT, the placement ``row``, ``column`` or comma-separated
operator ids placed on DuckDB (``+`` between them on the command line):

    python experiments/operator_busy_at_steady_state.py --rate 10000 \\
        --data /tmp/study/few_10000_325.parquet --points q5:row,q3:row,q4:row,q6:row,q1:row \\
        --json experiments/results/operator_busy_few_10k.json
    python experiments/operator_busy_at_steady_state.py --rate 40000 \\
        --data /tmp/study/few_40000_325.parquet \\
        --points q1:row,q1:column,q1:aggregate1+select1 \\
        --json experiments/results/operator_busy_few_40k.json

(the data files are those of ``experiments/placement_study.py --data-dir /tmp/study``, or
``hycq data generate --plugs 800 --load-share 0.5 --rate R --seconds 325``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hycq.api import load_query, resolve_placement
from hycq.bench import MIG_SECONDS, BenchOptions
from hycq.bench import measure as bench_measure
from hycq.planning import OptimizerOptions, optimize
from optimizer.ir.placement import complete_placement, groups

ROOT = Path(__file__).resolve().parent.parent


def placement_of(plan: Any, spec: str) -> dict[str, str]:
    if spec in ("row", "column"):
        return resolve_placement(plan, spec)
    base = dict.fromkeys(plan.topological(), "row")
    base.update(dict.fromkeys(spec.split("+"), "duckdb"))
    return complete_placement(plan, base)


def measure(query: str, spec: str, data: Path, rate: float, spans: int, span_s: int) -> dict:
    q = load_query(ROOT / "queries" / "smartplug" / f"{query}.sql")
    opt = optimize(q, OptimizerOptions(rate=rate, data={"readings": data}))
    plan = opt.plan
    placement = placement_of(plan, spec)
    coster = opt.coster
    options = BenchOptions(
        rates=[rate],
        measure_seconds=span_s,
        repeat=spans,
        max_repeat=spans,
        data={"readings": data},
        operator_metrics=True,
    )
    m = bench_measure(q, plan, placement, rate, options)
    tuples, wall = m.tuples_measured, m.spans_wall_s
    event_s = tuples / rate
    kinds = {i: plan.op(i).kind for i in plan.topological()}
    kinds.update({f"mig[{g.top}]": "mig" for g in groups(plan, placement)})
    by_group = {g.top: g for g in groups(plan, placement)}
    ops: list[dict[str, Any]] = []
    for op_id, d in m.operators.items():
        busy = d["busy_s"] / event_s
        if op_id.startswith("mig["):
            g = by_group[op_id[4:-1]]
            model = coster.columnar_cost(g.engine, g.operators, g.top).utilization
            model += sum(coster.arrow_credits(g).values())
        elif placement.get(op_id) == "row":
            model = coster.row_cost(op_id).utilization
        else:
            model = None
        ops.append(
            {
                "operator": op_id,
                "kind": kinds.get(op_id),
                "in_per_s": d["tuples_in"] / event_s,
                "out_per_s": d["tuples_out"] / event_s,
                "measured_u": busy,
                "model_u": model,
                # a MIG's busy time split: its SQL, and shipping rows in and out
                **{k[:-2] + "_u": d[k] / event_s for k in MIG_SECONDS if k in d},
            }
        )
    cost = coster.placement_cost(placement)
    return {
        "query": query,
        "placement": spec,
        "rate": rate,
        "data": str(data),
        "throughput": tuples / wall,
        "predicted": rate / cost.bottleneck if cost.bottleneck > 0 else None,
        "wall_per_event_s": wall / event_s,
        "unattributed_u": wall / event_s - sum(float(o["measured_u"]) for o in ops),
        "operators": ops,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--data", type=Path, required=True, help="a smart-plug Parquet file")
    ap.add_argument("--points", required=True, help="QUERY:PLACEMENT,... (see the docstring)")
    ap.add_argument("--spans", type=int, default=3, help="timed spans (default 3)")
    ap.add_argument("--span-seconds", type=int, default=5, help="event-seconds per span")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    out = []
    for point in a.points.split(","):
        query, spec = point.split(":")
        r = measure(query, spec, a.data, a.rate, a.spans, a.span_seconds)
        out.append(r)
        pred = f"{r['predicted'] / 1e3:.0f}k" if r["predicted"] else "-"
        print(
            f"{query} {spec} @{a.rate:.0f}: measured {r['throughput'] / 1e3:.0f}k, "
            f"predicted {pred} tuples/s"
        )
        for o in r["operators"]:
            model = "-" if o["model_u"] is None else f"{o['model_u']:.4f}"
            print(
                f"  {o['operator']:18s} {o['kind'] or '?':9s} in {o['in_per_s']:8.0f}/s "
                f"out {o['out_per_s']:8.0f}/s  measured u {o['measured_u']:.4f}  model {model}"
            )
        print(f"  unattributed {r['unattributed_u']:.4f}")
    if a.json:
        a.json.write_text(json.dumps({"command": " ".join(sys.argv), "points": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

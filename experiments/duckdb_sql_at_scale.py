"""DuckDB's per-row SQL costs over windows of 0.6 M to 12 M rows (issue 20, fifth stop).

``hycq calibrate`` measures windows up to 1.8 M rows; at 40k tuples/s a 5-minute window
holds 12 M. This script runs each query's all-DuckDB group SQL, re-evaluated (no kept
state), over the first ``n`` rows of a data file registered as its window inputs, for
several ``n``, and prints the median time beside the rows each SQL cost term of the model
applies to (``cost_models.analytical.sql_terms``, statistics sampled from the same file
at the rate that gives an ``n``-row 5-minute window). ``--fit`` fits the per-row constants
and one fixed cost per SQL operator (NNLS) to every point and prints the fit against the
engine's declared constants.

    python experiments/duckdb_sql_at_scale.py --data few=/tmp/shapes/few_40000.parquet \\
        --data many=/tmp/shapes/many_40000.parquet --fit --json X.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow.parquet as pq
from scipy.optimize import nnls

from cost_models.analytical import SQL_TERMS, AnalyticalCostModel, sql_terms
from engines import registry
from engines.sqlgen import group_sql
from hycq.api import QUERIES, load_query
from optimizer.estimate import estimate
from optimizer.ir.catalog import TIME_UNITS_MS
from optimizer.ir.placement import groups, uniform_placement
from optimizer.ir.plan import WindowKind
from optimizer.statistics import measure

WINDOW_S = 300.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", action="append", required=True, help="SHAPE=FILE")
    ap.add_argument("--queries", default="q1,q2,q3,q4,q5,q6")
    ap.add_argument("--rows", default="600000,3000000,6000000,12000000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    model = AnalyticalCostModel().with_engines(registry.cost_defaults())
    consts = model.engines["duckdb"]
    con = duckdb.connect()
    con.execute(f"SET threads={args.threads}")
    points: list[dict[str, Any]] = []
    for spec in args.data:
        shape, _, file = spec.partition("=")
        data = pq.read_table(file)
        data = data.rename_columns([f"c{i}" for i in range(data.num_columns)])
        sample = pq.read_table(file).slice(0, 100_000)
        for name in args.queries.split(","):
            q = load_query(QUERIES / "smartplug" / f"{name}.sql")
            (g,) = groups(q.plan, uniform_placement(q.plan, "duckdb"))
            gs = group_sql(q.plan, g.operators, "duckdb", "t_")
            stats = measure(q.plan, {"readings": sample})
            for n in (int(x) for x in args.rows.split(",")):
                if n > data.num_rows:
                    continue
                for op_id, table in gs.inputs:
                    con.register(table, data.slice(0, _window_rows(q.plan.op(op_id), n)))
                times = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    con.sql(gs.sql).to_arrow_table()
                    times.append(time.perf_counter() - t0)
                # a window of n rows: each input window's share at its own range
                est = estimate(q.plan, q.catalog, rates=n / WINDOW_S, sample=stats)
                terms = sql_terms(g, est)
                model_s = sum(getattr(consts, k) * r for k, r in terms.items())
                measured = statistics.median(times)
                point = {"shape": shape, "query": name, "rows": n, "measured_s": measured,
                         "model_sql_s": model_s, "operators": len(g.operators),
                         "terms": terms}  # fmt: skip
                points.append(point)
                print(f"{shape:6s} {name} {n / 1e6:5.1f} M rows  measured {measured * 1e3:7.1f} ms"
                      f"  model {model_s * 1e3:7.1f} ms  ({model_s / measured:.2f}x)",
                      file=sys.stderr, flush=True)  # fmt: skip
                for _op, table in gs.inputs:
                    con.unregister(table)
    out: dict[str, Any] = {"command": " ".join(sys.argv), "points": points}
    if args.fit:
        out["fit"] = _fit(points, consts)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


def _window_rows(window: Any, n: int) -> int:
    """Rows of a window whose 5-minute sibling holds ``n`` (RANGE windows scale by range)."""
    tick = TIME_UNITS_MS.get(window.time_unit, 1000) / 1000.0
    if window.window is WindowKind.RANGE and window.size:
        return int(n * window.size * tick / WINDOW_S)
    return n


def _fit(points: list[dict[str, Any]], consts: Any) -> dict[str, float]:
    """NNLS of measured seconds on (operators, rows per SQL term); relative errors weigh
    every point alike (each row divided by its measured time)."""
    # a projection reads a few hundred result rows here: too few to fit, kept as declared
    terms = [t for t in SQL_TERMS if t != "project" and any(p["terms"][t] for p in points)]
    a = np.array([[p["operators"], *(p["terms"][t] for t in terms)] for p in points], float)
    b = np.array([p["measured_s"] - consts.project * p["terms"]["project"] for p in points])
    w = 1.0 / b
    x, _ = nnls(a * w[:, None], b * w)
    fit = {
        "op_fixed_s": float(x[0]),
        **{f"{t}_s": float(v) for t, v in zip(terms, x[1:], strict=True)},
    }
    pred = a @ x
    errs = np.abs(pred - b) / b
    old = np.array([p["model_sql_s"] for p in points])
    shown = [
        f"{k} {v * 1e3:.2f} ms" if k == "op_fixed_s" else f"{k} {v * 1e9:.2f} ns"
        for k, v in fit.items()
    ]
    print("fit: " + ", ".join(shown), file=sys.stderr)
    declared = [f"{t} {getattr(consts, t) * 1e9:.2f} ns" for t in terms]
    print("declared: " + ", ".join(declared), file=sys.stderr)
    was = np.median(np.abs(old - b) / b)
    print(f"median |error|: fit {np.median(errs):.0%}, declared {was:.0%}", file=sys.stderr)
    return fit


if __name__ == "__main__":
    raise SystemExit(main())

"""What the correlated count's scan does as window chunks arrive, per row (issue 20,
thirteenth stop).

``engines.mig.count_scan.ScanCounter`` encodes every chunk once when it enters the window:
the left chain's selects as an Arrow filter, the join keys packed and given dense ids, the
compared columns kept. The slide's own work (``scan_fixed``, ``scan_row``, ``scan_key``,
``experiments/correlated_paths.py``) does not include it. This times it on real chunks of
a data file, one event-second each, fed to a ``ScanCounter`` the way a running MIG does
(a sliding window of chunks), for the group with its selects (the filter runs in the
scan) and for the group whose selects run before it (the chunks arrive filtered), and
reports, per arriving row, the filter's share and the encoding's share per row that
passes; then fits both, with a fixed part per chunk, to every file (NNLS):

    python experiments/scan_arrivals.py --query q2 \\
        --data /tmp/peerdata/calib_10000.parquet:10000 /tmp/peerdata/many_40000.parquet:40000

The DuckDB engine's ``scan_chunk``, ``scan_filter`` and ``scan_encode``
(``engines/duckdb/spec.py``) are that fit over the ten files of the peer comparison.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.optimize import nnls

from cost_models.analytical import _window_derived
from engines.mig.count_scan import ScanCounter
from hycq.api import load_query
from hycq.planning import OptimizerOptions, optimize
from optimizer.ir.correlated import correlated_count, scan_count
from optimizer.ir.plan import Aggregate, LogicalPlan

ROOT = Path(__file__).resolve().parents[1]


def scan_spec(plan: LogicalPlan, operators: list[str]) -> Any:
    """The ScanCount of the group ``operators`` (in topological order, the last on top)."""
    members = set(operators)
    kept = {o for o in operators[:-1] if isinstance(plan.op(o), Aggregate)}
    windows = {
        i
        for o in operators
        for i in plan.inputs(o)
        if i not in members and _window_derived(plan, i)
    }
    shape = correlated_count(plan, operators, operators[-1], kept, windows)
    if shape is None:
        raise SystemExit(f"not a correlated count: {operators}")
    spec = scan_count(plan, shape)
    if spec is None:
        raise SystemExit(f"the scan does not apply to {operators}")
    return spec


def per_chunk(spec: Any, chunks: list[pa.Table], window: int) -> float:
    """Mean seconds to encode one arriving chunk over a sliding window of ``window`` past
    the first quarter (a mean: every ``BLOCK``-th chunk also merges a block)."""
    counter = ScanCounter(spec)
    times = []
    for k in range(len(chunks)):
        live = [(j, chunks[j]) for j in range(max(0, k - window + 1), k + 1)]
        t = time.perf_counter()
        counter.follow(live)
        times.append(time.perf_counter() - t)
    return statistics.mean(times[len(times) // 4 :])


def fit(rows: list[dict[str, Any]]) -> dict[str, float]:
    """NNLS of every chunk time (both variants of every file) as a fixed part per chunk, the
    filter per arriving row (when the scan filters) and the encoding per row passing."""
    a, b = [], []
    for r in rows:
        a.append([1.0, r["rate"], r["rows_passing"]])
        b.append(r["ms_per_chunk_filtering"] / 1e3)
        a.append([1.0, 0.0, r["rows_passing"]])
        b.append(r["ms_per_chunk_prefiltered"] / 1e3)
    coef, _ = nnls(np.array(a), np.array(b))
    worst = max(abs(float(np.dot(x, coef)) / y - 1.0) for x, y in zip(a, b, strict=True))
    return {
        "scan_chunk_us": coef[0] * 1e6,
        "scan_filter_ns": coef[1] * 1e9,
        "scan_encode_ns": coef[2] * 1e9,
        "worst_relative_error": worst,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--query", default="q2", help="a smart-plug query name")
    ap.add_argument("--data", nargs="+", required=True, help="FILE:RATE ...")
    ap.add_argument("--seconds", type=int, default=200, help="event seconds to feed")
    ap.add_argument("--window", type=int, default=300, help="chunks the window holds")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    q = load_query(ROOT / "queries" / "smartplug" / f"{args.query}.sql")
    rows: list[dict[str, Any]] = []
    for item in args.data:
        path, rate = item.rsplit(":", 1)
        n = int(float(rate))
        opt = optimize(q, OptimizerOptions(rate=float(n), data={"readings": Path(path)}))
        plan = opt.plan
        kinds = ("select", "join", "aggregate")
        group = [o for o in plan.topological() if plan.op(o).kind in kinds]
        unfiltered = scan_spec(plan, group)
        bare = scan_spec(plan, [o for o in group if plan.op(o).kind != "select"])
        table = pq.read_table(path)
        raw = [table.slice(i * n, n) for i in range(args.seconds)]
        passed = [c.filter(unfiltered.filter) for c in raw]
        with_filter = per_chunk(unfiltered, raw, args.window)
        prefiltered = per_chunk(bare, passed, args.window)
        kept = statistics.mean(c.num_rows for c in passed)
        row = {
            "data": path,
            "rate": n,
            "rows_passing": kept,
            "ms_per_chunk_filtering": with_filter * 1e3,
            "ms_per_chunk_prefiltered": prefiltered * 1e3,
            "scan_filter_ns": (with_filter - prefiltered) / n * 1e9,
            "scan_encode_ns": prefiltered / kept * 1e9,
        }
        rows.append(row)
        print(
            f"{Path(path).name:28s} {n:>6d}/s  {with_filter * 1e3:6.2f} ms filtering, "
            f"{prefiltered * 1e3:6.2f} ms prefiltered ({kept:,.0f} rows pass): "
            f"filter {row['scan_filter_ns']:5.1f} ns per arrival, "
            f"encode {row['scan_encode_ns']:5.1f} ns per row passing"
        )
    summary = fit(rows)
    print(json.dumps(summary))
    if args.json:
        out = {"command": " ".join(["python", *sys.argv]), "points": rows, "summary": summary}
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

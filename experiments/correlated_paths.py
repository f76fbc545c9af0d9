"""The correlated count's three paths, timed inside a running MIG (issue 20, twelfth stop).

For each data file, one bench point of a query's placement (``hycq.bench.measure``: warm
start, untimed settling, timed spans), with every slide of the MIG's correlated count timed
by the path it took (``engines.mig.correlated_counts``: plain, kept, scan; ``--force``: the
one given, wherever it may) and, for the scan, the rows reaching the join and the keys of the inner
aggregate. With ``--fit``, the scan's constants (``scan_fixed``, ``scan_row``,
``scan_key``) are fitted (NNLS) to every file's scan slides, as ``engines/duckdb/spec.py``
records them:

    python experiments/correlated_paths.py --query q2 \\
        --placement select1+aggregate1+join1+aggregate2 \\
        --data /tmp/peerdata/many_40000.parquet:40000 /tmp/peerdata/few_10000.parquet:10000 \\
        --force scan --fit --json experiments/results/correlated_paths_scan.json

Each path's figure is the median of its slides past the first ``WARM`` (the first ones pay
for allocations that later ones reuse), or the least of them when fewer ran.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import nnls

import engines.mig.correlated_counts as ec
from hycq.api import load_query
from hycq.bench import BenchOptions
from hycq.bench import measure as bench_measure
from hycq.planning import OptimizerOptions, optimize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
from experiments.operator_busy_at_steady_state import placement_of

ROOT = Path(__file__).resolve().parents[1]


class _Timer:
    """Wraps the paths of ``CorrelatedState`` to time every slide (restored on exit)."""

    def __init__(self, force: str | None = None) -> None:
        self.force = force
        self.slides: dict[str, list[float]] = defaultdict(list)
        self.scans: list[tuple[int, int]] = []  # (rows reaching the join, keys) per scan
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> _Timer:
        for name in ("_plain", "_kept", "_scan"):
            self._saved[name] = fn = getattr(ec.CorrelatedState, name)
            setattr(ec.CorrelatedState, name, self._wrap(name[1:], fn))
        if self.force is not None:
            self._saved["_choose"] = choose = ec.CorrelatedState._choose
            force = self.force

            def forced(state: ec.CorrelatedState, paths: list[str]) -> str:
                return force if force in paths else choose(state, paths)

            setattr(ec.CorrelatedState, "_choose", forced)  # noqa: B010
        return self

    def __exit__(self, *_exc: object) -> None:
        for name, fn in self._saved.items():
            setattr(ec.CorrelatedState, name, fn)

    def _wrap(self, path: str, fn: Any) -> Any:
        timer = self

        def timed(state: ec.CorrelatedState, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = fn(state, *args, **kwargs)
            timer.slides[path].append(time.perf_counter() - start)
            if path == "scan" and state.scanner is not None:
                rows = state.scanner.rows
                timer.scans.append((rows, args[2].state.num_rows))  # (engine, sql, slide)
            return out

        return timed


def measure(
    query: str, spec: str, data: Path, rate: float, spans: int, force: str | None = None
) -> dict[str, Any]:
    q = load_query(ROOT / "queries" / "smartplug" / f"{query}.sql")
    opt = optimize(q, OptimizerOptions(rate=rate, data={"readings": data}))
    placement = placement_of(opt.plan, spec)
    options = BenchOptions(
        rates=[rate], measure_seconds=5, repeat=spans, max_repeat=spans, data={"readings": data}
    )
    with _Timer(force) as timer:
        m = bench_measure(q, opt.plan, placement, rate, options)
    paths = {p: _summary(v) for p, v in sorted(timer.slides.items())}
    rows = statistics.median(r for r, _ in timer.scans) if timer.scans else None
    keys = statistics.median(k for _, k in timer.scans) if timer.scans else None
    return {
        "query": query,
        "placement": spec,
        "data": str(data),
        "rate": rate,
        "throughput": m.tuples_measured / m.spans_wall_s,
        "paths": paths,
        "scan_rows": rows,
        "scan_keys": keys,
    }


def _summary(slides: list[float]) -> dict[str, Any]:
    """A path's slides: how many, and its steady milliseconds: the median past its first
    ``WARM`` slides (which pay for allocations later ones reuse) where at least three
    remain, else the least (as the runtime counts them)."""
    warm = ec.WARM
    steady = statistics.median(slides[warm:]) if len(slides) >= warm + 3 else min(slides)
    return {"slides": len(slides), "median_ms": 1e3 * steady}


def fit(points: list[dict[str, Any]]) -> dict[str, Any]:
    """``scan_fixed`` + ``scan_row`` * rows + ``scan_key`` * keys, NNLS over the points."""
    use = [p for p in points if "scan" in p["paths"] and p["scan_rows"]]
    a = np.array([[1.0, p["scan_rows"], p["scan_keys"]] for p in use])
    y = np.array([p["paths"]["scan"]["median_ms"] / 1e3 for p in use])
    coef, _ = nnls(a, y)
    model = a @ coef
    return {
        "scan_fixed_s": coef[0],
        "scan_row_s": coef[1],
        "scan_key_s": coef[2],
        "points": len(use),
        "ratios": [float(m / v) for m, v in zip(model, y, strict=True)],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--query", default="q2")
    ap.add_argument("--placement", default="select1+aggregate1+join1+aggregate2")
    ap.add_argument("--data", nargs="+", required=True, help="FILE:RATE ...")
    ap.add_argument("--spans", type=int, default=3)
    ap.add_argument("--fit", action="store_true")
    ap.add_argument(
        "--force", choices=["plain", "kept", "scan"], help="take this path wherever it may"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    out: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "points": []}
    for item in args.data:
        path, rate = item.rsplit(":", 1)
        p = measure(args.query, args.placement, Path(path), float(rate), args.spans, args.force)
        p["force"] = args.force
        out["points"].append(p)
        cells = "  ".join(
            f"{k} {v['median_ms']:6.1f} ms ({v['slides']})" for k, v in p["paths"].items()
        )
        print(f"{Path(path).name:28s} {p['throughput']:>10,.0f}/s  {cells}", flush=True)
        if args.json:
            args.json.write_text(json.dumps(out, indent=2) + "\n")
    if args.fit:
        out["fit"] = f = fit(out["points"])
        print(
            f"scan: {1e3 * f['scan_fixed_s']:.1f} ms + {1e9 * f['scan_row_s']:.2f} ns/row + "
            f"{1e9 * f['scan_key_s']:.0f} ns/key; model/measured "
            + ", ".join(f"{r:.2f}" for r in f["ratios"])
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

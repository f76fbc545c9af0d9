"""The row engine's grouped AVG alone, before and after exact sums, on Q2-like data.

Q2's inner aggregate, ``AVG(value)`` per (house, household, plug) over the load readings of
synthetic smart-plug data (``SmartPlugGenerator``, seed 7), fed to ``AggregateOp``
(engines.row.aggregate) directly, one slide per event-second over a 30-slide window, in
its three forms: ``paned`` (pane partials merged and unmerged per slide), ``fifo``
(tuple-level inserts and deletes, deletes oldest first) and ``derived`` (the same deltas
through the non-FIFO form, as after a join). It reports CPU nanoseconds (``process_time``,
so load from other processes weighs less than on wall time) per input tuple after the
window has filled, garbage collection off; the per-slide finishing of every touched group
is included (about one tuple per group and slide at this rate).

"Before" is the source tree of ``--baseline`` (``git archive``), "after" this checkout; the
two alternate in child processes, ``--repeat`` times, and the medians are printed:

    python experiments/row_exact_sum_micro.py --baseline e8c9de8 --repeat 5

``--child`` (internal) measures whatever ``engines`` PYTHONPATH resolves to.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLIDES, RANGE, RATE = 80, 30, 4000
MODES = ("paned", "fifo", "derived")


def child() -> dict[str, float]:
    from engines.row.aggregate import AggregateOp
    from engines.row.base import Delta
    from engines.sources.smartplug import SmartPlugGenerator
    from optimizer.ir.expr import AggCall, ColumnRef
    from optimizer.ir.types import DataType

    keys = [ColumnRef(i, f"k{i}", DataType.INTEGER) for i in range(3)]
    value = ColumnRef(3, "v", DataType.DOUBLE)
    steps = []
    for b in SmartPlugGenerator(seed=7, rate=RATE).batches(SLIDES):
        d = b.to_pydict()
        names = ("house_id", "household_id", "plug_id", "value", "property")
        cols = zip(*(d[c] for c in names), strict=True)
        steps.append([(h, hh, p, v) for h, hh, p, v, prop in cols if prop == 1])
    n_in = sum(len(s) for s in steps[RANGE:])
    out = {}
    for mode in MODES:
        call = AggCall("AVG", value, False, DataType.DOUBLE)
        op = AggregateOp(
            "a", keys, [call], [False] * 4, fifo=mode != "derived", replace_in=False,
            paned=mode == "paned",
        )  # fmt: skip
        live: deque[list[tuple[int, int, int, float]]] = deque()
        spent = 0.0
        gc.disable()
        for i, ins in enumerate(steps):
            if mode == "paned":
                delta = Delta(ins, [], expire=(i - RANGE,) if i >= RANGE else ())
            else:
                delta = Delta(ins, live.popleft() if i >= RANGE else [])
            live.append(ins)
            t = time.process_time()
            op.step(i, [delta])
            if i >= RANGE:
                spent += time.process_time() - t
        gc.enable()
        out[mode] = spent / n_in * 1e9
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", default="e8c9de8", help="commit measured as 'before'")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child()))
        return 0
    sys.path.insert(0, str(ROOT))
    from experiments.bench_window_sum import baseline_tree

    runs: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    with tempfile.TemporaryDirectory(prefix="hycq-baseline-") as tmp:
        trees = {"before": baseline_tree(args.baseline, Path(tmp)), "after": ROOT}
        for k in range(args.repeat):
            for version in ("before", "after") if k % 2 == 0 else ("after", "before"):
                env = dict(os.environ, PYTHONPATH=str(trees[version]))
                done = subprocess.run(
                    [sys.executable, __file__, "--child"], env=env, check=True,
                    capture_output=True, text=True, cwd=trees[version],
                )  # fmt: skip
                res = json.loads(done.stdout.strip().splitlines()[-1])
                for mode, ns in res.items():
                    runs[version].setdefault(mode, []).append(ns)
                print(f"{k + 1}/{args.repeat} {version:6s} " + "  ".join(
                    f"{m} {ns:.0f} ns" for m, ns in res.items()), file=sys.stderr)  # fmt: skip
    for mode in MODES:
        before = statistics.median(runs["before"][mode])
        after = statistics.median(runs["after"][mode])
        print(f"{mode:8s} before {before:6.0f} ns/tuple  after {after:6.0f} ns/tuple  "
              f"after/before {after / before:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

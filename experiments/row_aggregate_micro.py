"""The row engine's grouped aggregate alone: seconds per step against delta tuples and
touched groups, for window-fed (FIFO) and derived input, per aggregate function.

``AggregateOp`` (engines.row.aggregate) over a 3-column key, fed steps of ``n`` inserted and
``n`` deleted tuples (the tuples inserted 40 steps before) over ``G`` groups, garbage
collection off while timed; the median of 60 steps. The last lines fit seconds per step to
``a * delta tuples + b * touched groups`` per function and input (least squares over every
``G`` and ``n``; the cache misses of 50,000 groups weigh on ``b``). Issue 20's fifteenth stop
used it to see what COUNT(*) costs per tuple next to AVG (no state of its own: 0.18-0.20 us
per delta tuple at 100 groups, AVG 0.29-0.30):

    python experiments/row_aggregate_micro.py COUNT,AVG
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from collections import deque

import numpy as np

from engines.row.aggregate import AggregateOp
from engines.row.base import Delta, Row
from optimizer.ir.expr import AggCall, ColumnRef
from optimizer.ir.types import DataType

KEYS = [ColumnRef(i, f"k{i}", DataType.INTEGER) for i in range(3)]
VALUE = ColumnRef(3, "v", DataType.DOUBLE)


def make(func: str, fifo: bool) -> AggregateOp:
    arg = None if func == "COUNT" else VALUE
    dtype = DataType.BIGINT if func == "COUNT" else DataType.DOUBLE
    call = AggCall(func, arg, False, dtype)
    return AggregateOp("a", KEYS, [call], [False] * 4, fifo=fifo, replace_in=False)


def run(func: str, fifo: bool, groups: int, per_step: int, steps: int = 60) -> tuple[float, float]:
    """(median seconds per step, mean touched groups per step)."""
    rng = random.Random(1)
    op = make(func, fifo)
    keys = [(i // 100, i // 10 % 10, i) for i in range(groups)]
    live: deque[list[Row]] = deque()
    for _ in range(40):
        ins = [(*rng.choice(keys), rng.random() * 100) for _ in range(per_step)]
        op.step(0, [Delta(ins, [])])
        live.append(ins)
    times, touched = [], []
    gc.disable()
    try:
        for s in range(steps):
            ins = [(*rng.choice(keys), rng.random() * 100) for _ in range(per_step)]
            dels = live.popleft()
            live.append(ins)
            t = time.perf_counter()
            op.step(s + 1, [Delta(ins, dels)])
            times.append(time.perf_counter() - t)
            touched.append(len({r[:3] for r in ins} | {r[:3] for r in dels}))
    finally:
        gc.enable()
    return statistics.median(times), statistics.mean(touched)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument(
        "funcs", nargs="?", default="COUNT,AVG", help="aggregate functions (default COUNT,AVG)"
    )
    funcs = ap.parse_args(argv).funcs.split(",")
    rows = []
    for func in funcs:
        for fifo in (True, False):
            for g in (100, 800, 5000, 50000):
                for n in (500, 2000, 8000):
                    t, touched = run(func, fifo, g, n)
                    rows.append((func, fifo, g, n, touched, t))
                    print(
                        f"{func:6s} {'fifo' if fifo else 'derived':8s} groups {g:6d} "
                        f"n {n:5d} touched {touched:7.0f}  {t * 1e3:7.3f} ms  "
                        f"{t / (2 * n) * 1e6:.3f} us per delta tuple"
                    )
    for func in funcs:
        for fifo in (True, False):
            sel = [r for r in rows if r[0] == func and r[1] == fifo]
            a = np.array([[2 * r[3], r[4]] for r in sel])
            y = np.array([r[5] for r in sel])
            coef, *_ = np.linalg.lstsq(a, y, rcond=None)
            print(
                f"{func} {'fifo' if fifo else 'derived'}: {coef[0] * 1e6:.3f} us per delta "
                f"tuple, {coef[1] * 1e6:.3f} us per touched group"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Row-engine throughput against hand-written Python loops doing the same work, in one run.

Three workloads over synthetic smart-plug data (docs/data.md) at a given event-time density:

* ``filter_project``: ``SELECT RSTREAM id, plug_id, value * 2 FROM readings [NOW]
  WHERE property = 1 AND value > 10``;
* ``sliding_avg``: per-plug AVG load over ``[RANGE 5 MINUTES SLIDE 1 SECOND]``, RSTREAM;
* ``sliding_max``: the same with MAX (non-incremental in the dissertation's sense).

Each engine run and its hand-written twin consume the same pre-built Python tuples, one
event-second at a time, and produce the same result stream (checked). The sliding workloads
first fill the 5-minute window (warm-up, not timed) and then time ``--measure`` seconds of
steady state. Reported: median tuples/s of ``--repeat`` runs, the engine/hand ratio, and the
end-to-end rate of ``hycq run`` (Arrow ingest included) for context.

    python experiments/bench_row_engine.py --rate 20000 --repeat 5 \
        --json experiments/results/row_engine.json
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engines.row.executor import RowExecutor, batch_to_rows
from engines.sources.smartplug import SmartPlugGenerator
from hycq.api import QUERIES
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog

Rows = list[tuple[Any, ...]]
# Column positions in the DEBS schema.
ID, TS, VALUE, PROP, PLUG, HOUSEHOLD, HOUSE = range(7)
RANGE = 300

QUERY = {
    "filter_project": "SELECT RSTREAM id, plug_id, value * 2 AS doubled FROM readings [NOW] "
    "WHERE property = 1 AND value > 10",
    "sliding_avg": "SELECT house_id, household_id, plug_id, AVG(value) AS a FROM readings "
    "[RANGE 5 MINUTES SLIDE 1 SECOND] WHERE property = 1 GROUP BY house_id, household_id, plug_id",
    "sliding_max": "SELECT house_id, household_id, plug_id, MAX(value) AS m FROM readings "
    "[RANGE 5 MINUTES SLIDE 1 SECOND] WHERE property = 1 GROUP BY house_id, household_id, plug_id",
}


# -- the hand-written loops --------------------------------------------------------------------


def hand_filter_project(seconds: list[Rows], sink: Callable[[int, Rows], None]) -> None:
    for chunk in seconds:
        out = [(r[ID], r[PLUG], r[VALUE] * 2) for r in chunk if r[PROP] == 1 and r[VALUE] > 10]
        sink(chunk[0][TS], out)


def hand_sliding_avg(seconds: list[Rows], sink: Callable[[int, Rows], None]) -> None:
    window: deque[tuple[Any, ...]] = deque()
    groups: dict[tuple[int, int, int], list[Any]] = {}
    for chunk in seconds:
        t = chunk[0][TS]
        window.extend(chunk)
        for r in chunk:
            if r[PROP] == 1:
                k = (r[HOUSE], r[HOUSEHOLD], r[PLUG])
                st = groups.get(k)
                if st is None:
                    groups[k] = [1, r[VALUE]]
                else:
                    st[0] += 1
                    st[1] += r[VALUE]
        bound = t - RANGE
        while window and window[0][TS] <= bound:
            r = window.popleft()
            if r[PROP] == 1:
                k = (r[HOUSE], r[HOUSEHOLD], r[PLUG])
                st = groups[k]
                st[0] -= 1
                if st[0] == 0:
                    del groups[k]
                else:
                    st[1] -= r[VALUE]
        sink(t, [(*k, st[1] / st[0]) for k, st in groups.items()])


def hand_sliding_max(seconds: list[Rows], sink: Callable[[int, Rows], None]) -> None:
    window: deque[tuple[Any, ...]] = deque()
    groups: dict[tuple[int, int, int], list[Any]] = {}  # [count, monotonic deque]
    for chunk in seconds:
        t = chunk[0][TS]
        window.extend(chunk)
        for r in chunk:
            if r[PROP] == 1:
                k = (r[HOUSE], r[HOUSEHOLD], r[PLUG])
                st = groups.get(k)
                if st is None:
                    st = groups[k] = [0, deque()]
                st[0] += 1
                d, v = st[1], r[VALUE]
                while d and d[-1] < v:
                    d.pop()
                d.append(v)
        bound = t - RANGE
        while window and window[0][TS] <= bound:
            r = window.popleft()
            if r[PROP] == 1:
                k = (r[HOUSE], r[HOUSEHOLD], r[PLUG])
                st = groups[k]
                st[0] -= 1
                if st[0] == 0:
                    del groups[k]
                elif st[1][0] == r[VALUE]:
                    st[1].popleft()
        sink(t, [(*k, st[1][0]) for k, st in groups.items()])


HAND = {
    "filter_project": hand_filter_project,
    "sliding_avg": hand_sliding_avg,
    "sliding_max": hand_sliding_max,
}


# -- the engine ----------------------------------------------------------------------------


def engine_run(name: str, seconds: list[Rows], sink: Callable[[int, Rows], None]) -> None:
    catalog = load_catalog(QUERIES / "smartplug" / "catalog.toml")
    ex = RowExecutor(plan_query(QUERY[name], catalog), sink)
    for chunk in seconds:
        ex.ingest_rows("readings", chunk, TS, True)
    ex.finish()


class _Timed:
    """A sink that counts rows and starts the clock when the measured part begins."""

    def __init__(self, measure_from: int) -> None:
        self.measure_from = measure_from
        self.rows = 0
        self.start: float | None = None
        self.result: dict[int, list[Any]] = {}

    def __call__(self, t: int, rows: Rows) -> None:
        if self.start is None and t >= self.measure_from - 1:
            self.start = time.perf_counter()
        self.rows += len(rows)
        if t >= self.measure_from:
            self.result[t] = sorted(rows)


def _measure(
    fn: Callable[[list[Rows], Callable[[int, Rows], None]], None],
    warm: list[Rows],
    timed: list[Rows],
) -> tuple[float, dict[int, list[Any]]]:
    sink = _Timed(timed[0][0][TS])
    fn(warm + timed, sink)
    end = time.perf_counter()
    assert sink.start is not None
    n = sum(len(c) for c in timed)
    return n / (end - sink.start), sink.result


def _same(a: dict[int, list[Any]], b: dict[int, list[Any]]) -> bool:
    if a.keys() != b.keys():
        return False
    for t in a:
        if len(a[t]) != len(b[t]):
            return False
        for x, y in zip(a[t], b[t], strict=True):
            if x[:-1] != y[:-1] or abs(x[-1] - y[-1]) > 1e-9 * max(1.0, abs(y[-1])):
                return False
    return True


def end_to_end(name: str, rate: float, seconds: float) -> float:
    """tuples/s of what ``hycq run`` does: Arrow batches -> validation -> tuples -> engine."""
    from engines.runtime import RunOptions
    from hycq.api import execute

    catalog = load_catalog(QUERIES / "smartplug" / "catalog.toml")
    batches = list(SmartPlugGenerator(seed=7, rate=rate).batches(seconds))
    result = execute(
        plan_query(QUERY[name], catalog), catalog, {"readings": batches}, options=RunOptions()
    )
    return float(result.metrics["throughput"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=20000, help="tuples per event-second")
    ap.add_argument("--measure", type=int, default=30, help="timed event-seconds")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    gen = SmartPlugGenerator(seed=7, rate=args.rate)
    t0 = time.perf_counter()
    seconds = [batch_to_rows(b) for b in gen.batches(RANGE + args.measure)]
    ingest_rate = sum(map(len, seconds)) / (time.perf_counter() - t0)
    # The input tuples live for the whole benchmark: keep the cyclic GC from re-scanning
    # millions of them in every full collection (it would slow engine and hand loops alike).
    gc.freeze()
    print(
        f"data: {sum(map(len, seconds)):,} tuples, {gen.plugs} plugs, rate {args.rate:,.0f}/s; "
        f"generator + Arrow->tuples {ingest_rate:,.0f} rows/s",
        file=sys.stderr,
    )
    report: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]),
        "rate": args.rate,
        "plugs": gen.plugs,
        "measured_event_seconds": args.measure,
        "repeat": args.repeat,
        "arrow_to_tuples_rows_per_s": ingest_rate,
        "workloads": {},
    }
    for name in QUERY:
        warm = [] if name == "filter_project" else seconds[:RANGE]
        timed = seconds[RANGE:] if warm else seconds
        engine_runs, hand_runs = [], []
        for _ in range(args.repeat):  # interleaved, so drift affects both alike
            e, e_res = _measure(functools.partial(engine_run, name), warm, timed)
            h, h_res = _measure(HAND[name], warm, timed)
            engine_runs.append(e)
            hand_runs.append(h)
        same = _same(e_res, h_res)
        e2e = end_to_end(name, args.rate, 60 if name == "filter_project" else RANGE + 30)
        rec = {
            "query": QUERY[name],
            "engine_tuples_per_s": statistics.median(engine_runs),
            "hand_tuples_per_s": statistics.median(hand_runs),
            "engine_over_hand": statistics.median(engine_runs) / statistics.median(hand_runs),
            "engine_runs": engine_runs,
            "hand_runs": hand_runs,
            "same_results": same,
            "end_to_end_tuples_per_s": e2e,
        }
        report["workloads"][name] = rec
        print(
            f"{name:15s} engine {rec['engine_tuples_per_s']:>12,.0f}/s  hand "
            f"{rec['hand_tuples_per_s']:>12,.0f}/s  ratio {rec['engine_over_hand']:.2f}  "
            f"same={same}  end-to-end {e2e:,.0f}/s",
            file=sys.stderr,
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

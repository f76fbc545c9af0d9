"""Accurate window sums: row-engine throughput before and after, in one command.

The row engine used to keep a DOUBLE SUM/AVG as a running sum (add on arrival, subtract on
expiry), which forgets small values next to large ones. It now sums without subtracting
(two stacks per group over FIFO windows and panes) or exactly (integer sums after a join).
This script measures what that costs on three workloads, at ``--rate`` tuples per
event-second of synthetic smart-plug data (docs/data.md), 5-minute windows sliding 1 second:

* ``avg_panes``: per-plug AVG load, the engine's default plan (panes; the per-plug sliding
  AVG of experiments/bench_row_engine.py and peer_duckdb_loop.py);
* ``avg_fifo``: the same query with panes off (tuple-at-a-time window, two stacks per plug);
* ``q1_sum``: Q1 with ``SUM(r.value)`` added: an aggregate over a join (exact sums).

"Before" is the source tree of ``--baseline`` (a commit, default 4347e99, the last one with
running sums), extracted with ``git archive``; "after" is this checkout. Each repetition runs
one child process per version, alternating, so drift hits both alike. A child pushes the
same data (seeded generator) one event-second at a time, as Python tuples built outside the
timed part: it fills the window first (not timed), then times ``--measure`` event-seconds
of pushes per workload. Reported: median tuples/s per version and workload (timed tuples
over timed seconds), after/before, and the time of one instant (p50/p99/max).

Measure a whole window (``--measure 300``, the default): the two stacks move a group's
values from the back to the front stack once per window length, and right after the window
first fills every group does so at the same instant, so a short span right after the fill
(bench_row_engine.py's 10 seconds) would charge one window's worth of that work to a few
seconds. Over a whole window it is counted exactly once, as in a long run; its latency
shows in ``instant_ms.max``.

    python experiments/bench_window_sum.py --rate 40000 --measure 300 --repeat 5 \\
        --json experiments/results/window_sum.json

``--child`` (internal) runs one measurement with whatever ``engines`` PYTHONPATH resolves to.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RANGE = 300
TS = 1  # the timestamp column of the DEBS schema
PLUG = "house_id, household_id, plug_id"
AVG = (
    f"SELECT {PLUG}, AVG(value) AS a FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND] "
    f"WHERE property = 1 GROUP BY {PLUG}"
)
Q1_SUM = """
SELECT r.house_id, r.household_id, r.plug_id, COUNT(*) AS high_loads, SUM(r.value) AS total
FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND] AS r,
     (SELECT house_id, household_id, plug_id, MAX(value) AS max_load
      FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND]
      WHERE property = 1
      GROUP BY house_id, household_id, plug_id) AS m
WHERE r.property = 1
  AND r.house_id = m.house_id AND r.household_id = m.household_id AND r.plug_id = m.plug_id
  AND r.value > 0.9 * m.max_load
GROUP BY r.house_id, r.household_id, r.plug_id
"""
#: workload -> (query, panes)
WORKLOADS: dict[str, tuple[str, bool]] = {
    "avg_panes": (AVG, True),
    "avg_fifo": (AVG, False),
    "q1_sum": (Q1_SUM, True),
}


# -- one child: one code version, every workload ---------------------------------------------


def child(rate: float, measure: int, workloads: list[str]) -> dict[str, Any]:
    import engines
    from engines.row.executor import RowExecutor, batch_to_rows
    from engines.sources.smartplug import SmartPlugGenerator
    from optimizer.sql import plan_query
    from optimizer.sql.catalog import load_catalog

    catalog = load_catalog(ROOT / "queries" / "smartplug" / "catalog.toml")
    out: dict[str, Any] = {"engines": str(Path(engines.__file__).parent), "workloads": {}}
    # As in ``hycq run``: window contents are long-lived and acyclic, keep the cyclic GC off.
    gc.disable()
    for name in workloads:
        query, panes = WORKLOADS[name]
        rows = [0]

        def count(_t: int, r: list[Any], n: list[int] = rows) -> None:
            n[0] += len(r)

        ex = RowExecutor(
            plan_query(query, catalog),
            count,
            panes=panes,
        )
        gen = SmartPlugGenerator(seed=7, rate=rate)
        per_second: list[float] = []
        timed_tuples = 0
        # One event-second at a time, built just before it is pushed (only the push is
        # timed). The push of second t fires instant t - 1: its time is that instant's work.
        for k, batch in enumerate(gen.batches(RANGE + measure)):
            chunk = batch_to_rows(batch)
            t0 = time.perf_counter()
            ex.ingest_rows("readings", chunk, TS, True)
            dt = time.perf_counter() - t0
            if k >= RANGE:
                per_second.append(dt)
                timed_tuples += len(chunk)
        wall = sum(per_second)
        per_second.sort()
        out["workloads"][name] = {
            "tuples_per_s": timed_tuples / wall,
            "instant_ms": {
                "p50": 1e3 * per_second[len(per_second) // 2],
                "p99": 1e3 * per_second[min(len(per_second) - 1, int(0.99 * len(per_second)))],
                "max": 1e3 * per_second[-1],
            },
            "result_rows": rows[0],
        }
        del ex
        gc.collect()
    return out


# -- the parent: alternate versions, collect medians -----------------------------------------


def baseline_tree(commit: str, into: Path) -> Path:
    """The repository's source tree at ``commit`` (``git archive``), under ``into``."""
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def run_child(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable, __file__, "--child", "--rate", str(args.rate),
        "--measure", str(args.measure), "--workloads", ",".join(args.workloads),
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=tree)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(result["engines"]).resolve() != (tree / "engines").resolve():
        raise SystemExit(f"child imported {result['engines']}, not {tree / 'engines'}")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=40000, help="tuples per event-second")
    ap.add_argument("--measure", type=int, default=RANGE, help="timed event-seconds")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", default="4347e99", help="commit measured as 'before'")
    ap.add_argument("--workloads", type=lambda s: s.split(","), default=list(WORKLOADS))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.rate, args.measure, args.workloads)))
        return 0

    runs: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    rows: dict[str, dict[str, set[int]]] = {"before": {}, "after": {}}
    latency: dict[str, dict[str, list[dict[str, float]]]] = {"before": {}, "after": {}}
    with tempfile.TemporaryDirectory(prefix="hycq-baseline-") as tmp:
        trees = {"before": baseline_tree(args.baseline, Path(tmp)), "after": ROOT}
        for k in range(args.repeat):
            for version in ("before", "after") if k % 2 == 0 else ("after", "before"):
                res = run_child(trees[version], args)
                for name, rec in res["workloads"].items():
                    runs[version].setdefault(name, []).append(rec["tuples_per_s"])
                    rows[version].setdefault(name, set()).add(rec["result_rows"])
                    latency[version].setdefault(name, []).append(rec["instant_ms"])
                    ms = rec["instant_ms"]
                    print(f"{k + 1}/{args.repeat} {version:6s} {name:10s} "
                          f"{rec['tuples_per_s']:>12,.0f} tuples/s  instant ms p50 "
                          f"{ms['p50']:.1f} p99 {ms['p99']:.1f} max {ms['max']:.1f}",
                          file=sys.stderr)  # fmt: skip
    report: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]),
        "baseline": args.baseline,
        "rate": args.rate,
        "measured_event_seconds": args.measure,
        "repeat": args.repeat,
        "workloads": {},
    }
    median: Callable[[list[float]], float] = statistics.median
    for name in args.workloads:
        before, after = median(runs["before"][name]), median(runs["after"][name])
        report["workloads"][name] = {
            "query": WORKLOADS[name][0].strip(),
            "panes": WORKLOADS[name][1],
            "before_tuples_per_s": before,
            "after_tuples_per_s": after,
            "after_over_before": after / before,
            "before_runs": runs["before"][name],
            "after_runs": runs["after"][name],
            "before_instant_ms": latency["before"][name],
            "after_instant_ms": latency["after"][name],
            "same_result_rows": rows["before"][name] == rows["after"][name],
        }
        print(f"{name:10s} before {before:>12,.0f}/s  after {after:>12,.0f}/s  "
              f"after/before {after / before:.3f}", file=sys.stderr)  # fmt: skip
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

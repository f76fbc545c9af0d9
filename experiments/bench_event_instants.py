"""Instants per second with event-driven instants (after) against stepping every instant
(before), on the row engine, over streams in milliseconds.

A window without SLIDE over a stream in milliseconds has 1000 instants per event-second.
Before, the row engine stepped every operator at each; now it steps only where a window
changes and RSTREAM re-emits its kept relation at the others (docs/engines.md, "How data
moves"). Workloads (streams of ``(ts, k, v)`` from the keyed generator, time unit ms):

* ``sparse_istream``: ``ISTREAM k, COUNT(*)`` per key over ``[RANGE 500 MILLISECONDS]`` of a
  stream with 2 tuples/s;
* ``sparse_rstream``: ``RSTREAM k, v`` over ``[RANGE 1 SECOND]`` of the same stream (the
  relation is emitted at every instant either way);
* ``join_densities``: ``ISTREAM`` key join of that stream (``[RANGE 1 SECOND]``) with one of
  200 tuples/s (``[RANGE 100 MILLISECONDS]``);
* ``dense``: ``ISTREAM`` per-key SUM over ``[RANGE 1 SECOND]`` of a stream of 5,000 tuples/s
  (every instant has input: event-driven instants must not cost more here).

Each workload runs both ways through the run loop (``engines.runtime.run_plan``, results
counted, not kept) and the two result counts must agree. Reported: event-time instants per
wall second (the query's instants, ticks from the first to the last timestamp, over the run's
wall time), the operator steps, and the ratio after/before.

    python experiments/bench_event_instants.py --seconds 60 --json results/event_instants.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from engines.row.executor import RowExecutor
from engines.runtime import RunOptions, StreamInput
from engines.runtime.loop import run_plan
from engines.sources.keyed import KeyedGenerator, KeyedStream
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text

CATALOG = parse_catalog_text(
    "".join(
        f"""
[streams.{name}]
timestamp = "ts"
time_unit = "ms"
rate = 1
[streams.{name}.columns]
ts = "BIGINT"
k = "INTEGER"
v = "DOUBLE"
"""
        for name in ("a", "b", "d")
    )
)
STREAMS = {
    "a": KeyedStream("a", rate=2, keys=10, time_unit="ms"),
    "b": KeyedStream("b", rate=200, keys=10, time_unit="ms"),
    "d": KeyedStream("d", rate=5000, keys=100, time_unit="ms"),
}
WORKLOADS = {
    "sparse_istream": "SELECT ISTREAM k, COUNT(*) AS n FROM a [RANGE 500 MILLISECONDS] GROUP BY k",
    "sparse_rstream": "SELECT RSTREAM k, v FROM a [RANGE 1 SECOND]",
    "join_densities": "SELECT ISTREAM a.k, a.v, b.v AS bv FROM a [RANGE 1 SECOND] AS a, "
    "b [RANGE 100 MILLISECONDS] AS b WHERE a.k = b.k",
    "dense": "SELECT ISTREAM k, SUM(v) AS s FROM d [RANGE 1 SECOND] GROUP BY k",
}


def run_once(sql: str, seconds: float, dense: bool) -> dict[str, Any]:
    plan = plan_query(sql, CATALOG)
    used = sorted({op.stream for op in plan.operators() if hasattr(op, "stream")})
    inputs = []
    for name in used:
        stream = CATALOG.get(name)
        assert stream is not None
        batches = KeyedGenerator(STREAMS[name], seed=1).batches(seconds)
        inputs.append(StreamInput(stream, batches, STREAMS[name].rate, "keyed generator"))

    class RowOnly:
        """The whole plan on one RowExecutor (``dense`` chosen here, not by the assembly)."""

        def __init__(self) -> None:
            self.placement: dict[str, str] = {}
            self.executor: RowExecutor | None = None

        def make_engine(self, emit: Any, on_late: Any) -> RowExecutor:
            self.executor = RowExecutor(plan, emit, on_late, dense=dense)
            return self.executor

        def operator_metrics(self, engine: Any = None) -> dict[str, dict[str, Any]]:
            assert self.executor is not None
            return self.executor.operator_metrics()

        def extra_metrics(self) -> dict[str, Any]:
            return {}

    result = run_plan(plan, CATALOG, RunOptions(), RowOnly(), inputs)
    m = result.metrics
    ticks = m["event_seconds"] * 1000
    return {
        "wall_s": m["wall_s"],
        "instants_per_s": ticks / m["wall_s"],
        "tuples_in": m["tuples_in"],
        "results": m["results"],
        "steps": max(op["steps"] for op in m["operators"].values()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="event-seconds per run")
    ap.add_argument("--only", choices=sorted(WORKLOADS), action="append", help="workloads")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    report: dict[str, Any] = {"seconds": args.seconds, "workloads": {}}
    for name in args.only or list(WORKLOADS):
        before = run_once(WORKLOADS[name], args.seconds, dense=True)
        after = run_once(WORKLOADS[name], args.seconds, dense=False)
        if before["results"] != after["results"]:
            print(f"{name}: result counts differ: {before} vs {after}", file=sys.stderr)
            return 1
        ratio = after["instants_per_s"] / before["instants_per_s"]
        report["workloads"][name] = {"before": before, "after": after, "speedup": ratio}
        print(
            f"{name:16s} instants/s before {before['instants_per_s']:>12,.0f}  after "
            f"{after['instants_per_s']:>12,.0f}  x{ratio:6.1f}   steps {before['steps']:,} -> "
            f"{after['steps']:,}   tuples {after['tuples_in']:,}  results {after['results']:,}"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

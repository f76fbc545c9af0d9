"""Two engines of the same plan, interleaved in one bench point (issue 20, tenth stop).

The bench's spans of one point interleave its plans (``hycq.bench.measure_point``); this
lists each placement twice, so the spread between twins is the bench's own noise within a
process, to set beside the spread between processes (one placement measured alone by
``operator_busy_at_steady_state.py``, run several times):

    python experiments/bench_twins.py --query q4 --rate 10000 \\
        --data /tmp/study/calib_10000_325.parquet --spans 6 \\
        --placements row,row,$DUCK,$DUCK
    # DUCK=aggregate1+aggregate2+join1+project1+select1 (the model's choice there)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hycq.api import load_query
from hycq.bench import BenchOptions, measure_point
from hycq.planning import OptimizerOptions, optimize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
from experiments.operator_busy_at_steady_state import placement_of

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--query", default="q4", help="a smart-plug query name")
    ap.add_argument("--rate", type=float, default=10_000.0)
    ap.add_argument("--data", type=Path, required=True, help="a smart-plug Parquet file")
    ap.add_argument("--placements", required=True, help="PLACEMENT,... (repeat one for twins)")
    ap.add_argument("--spans", type=int, default=6)
    ap.add_argument("--span-seconds", type=int, default=3)
    args = ap.parse_args(argv)
    q = load_query(ROOT / "queries" / "smartplug" / f"{args.query}.sql")
    opt = optimize(q, OptimizerOptions(rate=args.rate, data={"readings": args.data}))
    specs = args.placements.split(",")
    placements = [placement_of(opt.plan, s) for s in specs]
    options = BenchOptions(
        rates=[args.rate],
        measure_seconds=args.span_seconds,
        repeat=args.spans,
        max_repeat=args.spans,
        data={"readings": args.data},
    )
    for spec, m in zip(
        specs, measure_point(q, opt.plan, placements, args.rate, options), strict=True
    ):
        spans = [round(s / 1e3) for s in m.spans]
        lo, hi = m.ci[0] / 1e3, m.ci[1] / 1e3
        print(f"{spec[:44]:44s} {m.throughput / 1e3:6.0f}k  ci {lo:.0f}-{hi:.0f}k  spans {spans}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

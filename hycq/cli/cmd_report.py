"""``hycq report``: the plan, its placement and the alternatives as one HTML file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hycq.cli.common import (
    check_outputs,
    input_files,
    load_query,
)
from hycq.cli.flag_groups import (
    optimizer_flags,
    plan_flags,
)


def register(sub: Any) -> None:
    """Add the command's parser to ``sub`` (the top-level subparsers)."""
    rp = sub.add_parser(
        "report",
        help="write a self-contained HTML report of the plan, its placement and alternatives",
        description="Optimize QUERY as explain does and write one HTML file (no script, "
        "nothing fetched): the plan graph coloured by engine with each group's SQL, the cost "
        "vector and feasibility, the rate where the plan stops keeping up, the alternatives "
        "and the Definition 6.1 condition each lost on, the optimizer trace, and with --bench "
        "measured against predicted throughput.",
    )
    plan_flags(rp)
    optimizer_flags(rp)
    rp.add_argument(
        "--bench", type=Path, metavar="PATH.json", help="a 'hycq bench --json' file to compare"
    )
    rp.add_argument("--out", type=Path, required=True, metavar="PATH.html", help="report file")


def run(args: argparse.Namespace) -> int:
    from hycq import api
    from hycq.planning import OptimizerOptions, optimize
    from hycq.reporting import build_report, check_out_path, write_report

    check_out_path(args.out)
    q = load_query(args.query, args.catalog)
    inputs = input_files(args.query, args.catalog, q.catalog, [], args.cost_model)
    check_outputs([*inputs, ("--bench", args.bench)], [("--out", args.out)])
    opt = optimize(
        q,
        OptimizerOptions(
            rate=args.rate,
            engines=api.parse_engines(args.engines),
            cost_model=args.cost_model,
            exhaustive=args.exhaustive,
            feasibility=not args.no_feasibility,
            row_core=args.row_core,
        ),
    )
    write_report(build_report(opt, bench=args.bench), args.out)
    sys.stderr.write(f"wrote {args.out}\n")
    return 0

"""``hycq bench``: measured sustained throughput of plans against their predicted cost
(hycq/bench.py measures).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hycq.cli.arguments import (
    engine_names,
    non_negative_int,
    positive_float,
    positive_int,
    rate_float,
)
from hycq.cli.common import (
    STDIN,
    check_data_flags,
    check_outputs,
    input_files,
    load_query,
    parse_data,
)
from hycq.cli.flag_groups import (
    engine_settings_flags,
    optimizer_flags,
    settings_of,
)
from optimizer.ir.errors import OptionError


def register(sub: Any) -> None:
    """Add the command's parser to ``sub`` (the top-level subparsers)."""
    bn = sub.add_parser(
        "bench",
        help="measure sustained throughput of plans against their predicted cost",
        description="For every query, rate and plan: the predicted cost vector and "
        "feasibility, and the measured maximum sustained throughput at max pace over data of "
        "that event-time density, after a warm start that fills every window (see "
        "hycq/bench.py). kept_up = throughput >= rate.",
    )
    bn.add_argument("queries", nargs="+", metavar="QUERY", help=".sql files")
    bn.add_argument(
        "--catalog", type=Path, help="catalog TOML (default: catalog.toml beside each QUERY)"
    )
    bn.add_argument(
        "--rates",
        default="1000,5000,10000,20000,40000",
        help="requested rates, tuples/s, comma-separated (default: 1000,5000,10000,20000,40000)",
    )
    bn.add_argument(
        "--plans",
        default="auto,row,column",
        help="plans to measure, from auto,row,column,all (default: auto,row,column); all = "
        "every placement of the optimizer's join order, or the 10 best predicted and 10 "
        "random ones",
    )
    bn.add_argument(
        "--column-engine",
        default="duckdb",
        metavar="ENGINE",
        help=f"the columnar engine, one of {engine_names(columnar=True)} (default: duckdb)",
    )
    bn.add_argument(
        "--measure",
        type=positive_int,
        default=10,
        metavar="S",
        help="event-seconds per timed span (default: 10)",
    )
    bn.add_argument(
        "--preroll",
        type=non_negative_int,
        default=1,
        metavar="S",
        help="event-seconds each plan runs untimed just before each of its timed spans when "
        "plans are measured side by side, so it does not pay for the caches the plan before "
        "it used (default: 1; 0: none)",
    )
    bn.add_argument(
        "--repeat",
        type=positive_int,
        default=3,
        help="timed spans per plan at least; the median counts (3)",
    )
    bn.add_argument(
        "--max-repeat",
        type=positive_int,
        default=12,
        metavar="N",
        help="timed spans per plan at most: the span budget while a median is less precise "
        "than --precision (12)",
    )
    bn.add_argument(
        "--precision",
        type=positive_float,
        default=0.03,
        metavar="P",
        help="stop when every plan's median has a 95%% bootstrap interval within +-P of it "
        "(default 0.03; spans disturbed by other processes do not count)",
    )
    bn.add_argument(
        "--interleave",
        type=positive_int,
        default=4,
        metavar="N",
        help="plans measured side by side, span by span, each with its own engine (4); "
        "more placements are measured in groups of N, the first plan asked (auto) in "
        "every group and the others scaled by their ratio to it round by round",
    )
    bn.add_argument(
        "--no-runoff",
        action="store_true",
        help="with placements in several groups, do not measure the fastest of them once "
        "more side by side in one group of their own (the run-off)",
    )
    bn.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="STREAM=PATH",
        help="replay STREAM from a file (rescaled to each rate) instead of the generator",
    )
    bn.add_argument(
        "--warm-limit",
        type=positive_float,
        default=120.0,
        metavar="S",
        help="wall seconds the warm start may take (a quarter of it per timed span); a plan "
        "that needs longer is measured from where it got to and marked incomplete "
        "(default: 120)",
    )
    engine_settings_flags(bn)
    optimizer_flags(bn, placement=True)
    bn.add_argument("--json", type=Path, metavar="PATH", help="write the records as JSON")
    bn.add_argument("--plot", type=Path, metavar="PATH.png", help="plot throughput against rate")


def run(args: argparse.Namespace) -> int:
    from engines import registry
    from engines.output_files import check_writable, write_bytes
    from engines.runtime import json_text
    from hycq import api
    from hycq.bench import PLANS, BenchOptions, bench, check_plan_name, plot

    registry.get_columnar(args.column_engine, "--column-engine")
    rates = []
    for text in args.rates.split(","):
        try:
            rates.append(rate_float(text.strip()))
        except argparse.ArgumentTypeError as err:
            raise OptionError(f"--rates: {err}", hint="e.g. --rates 1000,5000,40000") from None
    plans = [p.strip() for p in args.plans.split(",") if p.strip()]
    if not plans:
        raise OptionError(
            f"--plans names no plan: '{args.plans}'", hint=f"plans: {', '.join(PLANS)}"
        )
    for p in plans:  # before the queries load (BenchOptions checks them again)
        check_plan_name(p)
    if args.plot is not None and args.plot.suffix.lower() != ".png":
        raise OptionError(f"--plot must end in .png, got '{args.plot}'")
    queries = [load_query(q, args.catalog) for q in args.queries]
    data = parse_data(args.data)
    check_data_flags(queries, data)
    if any(p == STDIN or not isinstance(p, Path) for p in data.values()):
        raise OptionError(
            "hycq bench replays its data at every rate and repeat: stdin (--data STREAM=-) "
            "and MQTT subscriptions can be read only once",
            hint="save the input to a file and pass its path",
        )
    inputs = [
        item
        for name, q in zip(args.queries, queries, strict=True)
        for item in input_files(name, args.catalog, q.catalog, data.values(), args.cost_model)
    ]
    outputs = [("--json", args.json), ("--plot", args.plot)]
    check_outputs(inputs, outputs)
    for option, path in outputs:
        if path is not None:
            check_writable(path, option)  # before minutes of measuring

    def progress(message: str) -> None:
        sys.stderr.write(f"measuring {message}\n")

    options = BenchOptions(
        rates=rates,
        plans=plans,
        column_engine=args.column_engine,
        measure_seconds=args.measure,
        preroll=args.preroll,
        repeat=args.repeat,
        max_repeat=args.max_repeat,
        precision=args.precision,
        interleave=args.interleave,
        runoff=not args.no_runoff,
        optimizer=api.OptimizerOptions(
            cost_model=args.cost_model,
            row_core=args.row_core,
            incremental=not getattr(args, "no_incremental", False),
        ),
        settings=settings_of(args),
        data=data,
        progress=progress,
        max_warm_wall=args.warm_limit,
    )
    records = bench(queries, options)
    for r in records:
        m, pr = r["measured"], r["predicted"]
        print(
            f"{Path(r['query']).stem:10s} {r['rate']:>9,.0f}/s  {r['plan']:8s} "
            f"predicted C_b {pr['bottleneck']:8.3g} "
            f"{'feasible' if pr['feasible'] else 'infeasible':10s} "
            f"measured {m['throughput']:>12,.0f} tuples/s "
            f"[{m['ci95'][0]:,.0f}, {m['ci95'][1]:,.0f}] "
            f"{len(m['spans'])} spans  {_verdict(m):14s} "
            f"{'kept up' if m['kept_up'] else 'did NOT keep up'}"
        )
        if r["load"]["warning"]:
            where = f"{Path(r['query']).stem} {r['plan']}"
            sys.stderr.write(f"warning: {where}: {r['load']['warning']}\n")
    if args.json is not None:
        write_bytes(args.json, json_text(records), "--json")
    if args.plot is not None:
        plot(records, args.plot)
    return 0


def _verdict(m: dict[str, Any]) -> str:
    if m["vs_best"] >= 1.0:
        return "best" if m["best_separable"] else "best (tied)"
    if m["tied_with_best"]:
        return "tied with best"
    return f"{m['vs_best']:.2f}x of best"

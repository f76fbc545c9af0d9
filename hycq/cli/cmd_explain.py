"""``hycq explain``: the logical plan and where every operator runs, and why."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hycq.cli.common import (
    STDIN,
    check_data_flags,
    join_order_of,
    load_query,
    parse_data,
    print_json,
)
from hycq.cli.flag_groups import (
    optimizer_flags,
    plan_flags,
)
from optimizer.ir.errors import OptionError
from optimizer.ir.join_chains import JOIN_IMPLS


def register(sub: Any) -> None:
    """Add the command's parser to ``sub`` (the top-level subparsers)."""
    ex = sub.add_parser(
        "explain",
        help="print the logical plan and the placement of every operator",
        description="Parse, bind and explain a continuous query. Operator ids are stable for "
        "the same query text and options; placement files use them.",
    )
    plan_flags(ex)
    optimizer_flags(ex, join_order=True)
    ex.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="STREAM=PATH",
        help="measure the statistics on this file instead of the catalog's source (as "
        "'run' and 'bench' do with --data), so the plan is the one chosen for that data (a "
        "file that cannot be read or gives no valid row is exit 2, as for 'run')",
    )
    ex.add_argument(
        "--join-impl",
        choices=(*JOIN_IMPLS, "auto"),
        help="also show, per chain of joins, the row engine's join implementation for this "
        "setting and every alternative's predicted cost (docs/joins.md; JSON: join_impls)",
    )
    ex.add_argument(
        "--json", action="store_true", help="print one JSON object (fields: docs/interface.md)"
    )
    ex.add_argument("--schema", action="store_true", help="show every operator's output schema")


def run(args: argparse.Namespace) -> int:
    from hycq import api
    from hycq.planning import OptimizerOptions, optimize
    from hycq.reporting.text import engine_tag
    from optimizer.ir.display import render_plan

    engines = api.parse_engines(args.engines)
    q = load_query(args.query, args.catalog)
    data = _explain_data(args, q)
    opt = optimize(
        q,
        OptimizerOptions(
            rate=args.rate,
            engines=engines,
            cost_model=args.cost_model,
            exhaustive=args.exhaustive,
            feasibility=not args.no_feasibility,
            row_core=args.row_core,
            join_order=join_order_of(args),
            data=data,
            strict_data=True,
        ),
    )
    info = api.explain(q, args.rate, engines, optimized=opt)
    if args.join_impl is not None:
        from engines.runtime import RunOptions

        impl = "auto" if args.join_impl == "tree" else args.join_impl
        joins = api.join_settings(opt, RunOptions(join_impl=impl))
        info["join_impls"] = [] if joins is None else joins[1]
        if args.join_impl == "tree":
            for c in info["join_impls"]:
                c["chosen"] = "tree"
    if args.json:
        print_json(info)
        return 0
    tag = engine_tag(info["operators"])
    print(f"query: {q.name}")
    rate = info["rate"]
    print(f"rate: {rate:g} tuples/s" if rate is not None else "rate: (streams differ)")
    print(
        f"engines: {', '.join(engines)}; cost model: {info['cost_model']} "
        f"(row core: {info['row_core']})"
    )
    print(f"statistics: {info['statistics']['source']}")
    print()
    print(render_plan(opt.plan, annotate=tag, show_schema=args.schema))
    print()
    cost = info["cost"]
    verdict = "feasible (keeps up)" if info["feasible"] else "NOT feasible (cannot keep up)"
    print(f"cost: <C_b={cost['bottleneck']:.4g}, C_u={cost['utilization']:.4g}>  {verdict}")
    line = _bottleneck_line(info)
    if line:
        print(line)
    limit = info["max_feasible_rate"]
    print(
        "feasible up to: "
        + (f"{limit:,.0f} tuples/s (predicted)" if limit is not None else "any rate")
    )
    for k, g in enumerate(info["groups"]):
        print(
            f"group g{k} on {g['engine']}: {', '.join(g['operators'])} "
            f"({1e3 * g['seconds_per_invocation']:.3g} ms per slide)"
        )
    pe, ms = info["plans_examined"], info["optimization_ms"]
    search = "exhaustive" if info["search"]["exhaustive"] else "pruned"
    if info["search"]["decomposed"]:
        search += ", decomposed"
    print(
        f"plans examined: phase one {pe['phase_one']}, phase two {pe['phase_two']} ({search}); "
        f"optimization {ms['phase_one']:.1f} + {ms['phase_two']:.1f} = {ms['total']:.1f} ms"
    )
    print(f"R2R operators: {info['r2r_operators']}")
    for c in info.get("join_impls", ()):
        costs = ", ".join(
            f"{k} {1e3 * v:.3g}" for k, v in c["predicted_seconds_per_second"].items()
        )
        print(
            f"join chain {c['root']} ({', '.join(c['leaves'])}): {c['chosen']}; predicted "
            f"row-engine ms per second: {costs}"
        )
    return 0


def _bottleneck_line(info: dict[str, Any]) -> str | None:
    """What the operators tagged ``bottleneck`` are: the costliest unit, which is C_b, or
    with a shared row core the largest share of the row thread's load, which is."""
    marked = [op for op in info["operators"] if op["bottleneck"]]
    if not marked:
        return None
    units: dict[str, list[dict[str, Any]]] = {}
    for op in marked:
        units.setdefault(str(op["unit"]), []).append(op)
    names = "; ".join(
        f"group {unit} on {ops[0]['engine']} ({', '.join(op['id'] for op in ops)})"
        if unit.startswith("g")
        else ", ".join(op["id"] for op in ops)
        for unit, ops in units.items()
    )
    u = marked[0]["u"]
    if info["row_core"] == "shared":
        return (
            f"bottleneck: {names}, u={u:.3g}: the largest share of C_b, the load of the row "
            "engine's one thread (it runs every row operator and waits for every group's "
            "query, so C_b is their sum)"
        )
    return f"bottleneck: {names}, u={u:.3g} (= C_b, the costliest unit)"


def _explain_data(args: argparse.Namespace, q: Any) -> dict[str, Any]:
    """The ``--data`` files explain samples (those of streams the query reads)."""
    from engines.runtime.inputs import unread_data

    data = parse_data(args.data)
    check_data_flags([q], data)
    ignored = set(unread_data([q.plan], data))
    data = {k: v for k, v in data.items() if k not in ignored}
    for stream, path in data.items():
        if path == STDIN or not isinstance(path, Path):
            raise OptionError(
                f"explain --data {stream}=...: only files can be sampled here (stdin and "
                "MQTT are read once, by the run)",
                hint="save a sample to a file and pass its path",
            )
        if not path.exists():
            raise OptionError(f"--data {stream}={path}: no such file")
    return data

"""``hycq run Q1.sql Q2.sql ... --output-dir DIR``: queries over one stream sharing its
source, filters and K-slack buffers (hycq/shared_run.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from pathlib import Path
from typing import Any

from hycq.cli.common import (
    check_data_flags,
    check_outputs,
    input_files,
    load_query,
    parse_data,
)
from hycq.cli.flag_groups import (
    settings_of,
)
from optimizer.ir.errors import OptionError

#: ``hycq run`` flags a shared run of several queries does not take, with their defaults.
_SINGLE_QUERY_FLAGS: dict[str, tuple[str, Any]] = {
    "output": ("--output", None),
    "metrics": ("--metrics", None),
    "report": ("--report", None),
    "migrate": ("--migrate", []),
    "adapt": ("--adapt", False),
    "join_order": ("--join-order", None),
    "join_impl": ("--join-impl", "tree"),
    "join_memory": ("--join-memory", None),
    "max_error": ("--max-error", None),
    "min_recall": ("--min-recall", None),
    "idle_timeout": ("--idle-timeout", None),
    "checkpoint": ("--checkpoint", None),
    "resume": ("--resume", None),
}


def run_shared(args: argparse.Namespace) -> int:
    """``hycq run Q1.sql Q2.sql ... --output-dir DIR`` (hycq/shared_run.py)."""
    from engines.disorder.spec import parse_disorder
    from engines.runtime import RunOptions
    from hycq import api
    from hycq.flags import CLI_OPTION_NAMES
    from hycq.shared_run import SharedQuery, run_queries

    if args.output_dir is None:
        raise OptionError(
            "several queries need --output-dir DIR for their results",
            hint="e.g. hycq run q1.sql q2.sql --output-dir out/",
        )
    for attr, (flag, default) in _SINGLE_QUERY_FLAGS.items():
        if getattr(args, attr, default) not in (default, None):
            raise OptionError(
                f"{flag} is for runs of one query",
                hint="a run of several queries writes each one's results and metrics into "
                "--output-dir",
            )
    if args.placement not in ("auto", "row", "column"):
        raise OptionError("a run of several queries takes --placement auto, row or column")
    if args.pace != "max":
        raise OptionError("a run of several queries replays at --pace max")
    if "-" in args.query:
        raise OptionError("a run of several queries reads each query from a .sql file, not -")
    names: dict[str, str] = {}
    for path in args.query:
        name = Path(path).stem
        if name in names:
            raise OptionError(
                f"queries {names[name]} and {path} would both write {name}.jsonl",
                hint="give the query files different names",
            )
        names[name] = path
    per_query: dict[str, str] = {}
    for item in args.disorder_of:
        name, sep, spec = item.partition("=")
        if not sep or name not in names:
            raise OptionError(
                f"--disorder-of {item}: expected NAME=SPEC with NAME one of {', '.join(names)}"
            )
        per_query[name] = spec
    out_dir: Path = args.output_dir
    if out_dir.exists() and not out_dir.is_dir():
        raise OptionError(f"--output-dir {out_dir} is not a folder")
    data = parse_data(args.data)
    options = RunOptions(
        late=args.late,
        rate=args.rate,
        duration=args.duration,
        data=data,
        dead_letter=args.dead_letter,
        progress=args.progress,
        stop_on_signal=True,
        memory_limit_mb=args.memory_limit,
        names=CLI_OPTION_NAMES,
    )
    from engines import registry

    registry.get_columnar(args.column_engine, "--column-engine")
    settings = settings_of(args)
    queries = []
    inputs: list[tuple[str, Path | str | None]] = []
    catalog = None
    loaded = {name: load_query(path, args.catalog) for name, path in names.items()}
    check_data_flags(list(loaded.values()), data)
    for name, path in names.items():
        q = loaded[name]
        catalog = catalog or q.catalog
        inputs += input_files(path, args.catalog, q.catalog, data.values(), args.cost_model)
        text = per_query.get(name, args.disorder)
        spec = parse_disorder(text, f"--disorder-of {name}" if name in per_query else "--disorder")
        if spec.kind not in ("none", "kslack", "max"):
            raise OptionError(
                f"query {name}: a run of several queries takes --disorder none, kslack:K or "
                f"max, not {spec.kind}",
                hint="a quality target needs the query's own feedback: run that query alone",
            )
        optimizer = api.OptimizerOptions(
            engines=("row", args.column_engine),
            cost_model=args.cost_model,
            incremental=not getattr(args, "no_incremental", False),
            row_core=args.row_core,
            disorder=spec.buffered,
        )
        from hycq.planning import optimize
        from hycq.shared_run import source_stream

        opt = optimize(q, dataclasses.replace(optimizer, rate=args.rate, data=dict(data)))
        chosen = opt.placement if args.placement == "auto" else args.placement
        engines = api.resolve_placement(opt.plan, chosen, args.column_engine)
        src = source_stream(opt.plan)
        tps = 1000 if src.time_unit == "ms" else 1
        queries.append(
            SharedQuery(
                name=name,
                plan=opt.plan,
                placement=engines,
                disorder=spec,
                kappa=spec.k_ticks(tps) if spec.kind == "kslack" else 0,
                output=out_dir / f"{name}.jsonl",
                metrics=out_dir / f"{name}.metrics.json",
            )
        )
    outputs: list[tuple[str, Path | str | None]] = [("--dead-letter", args.dead_letter)]
    for sq in queries:
        outputs += [(f"{sq.name}'s output", sq.output), (f"{sq.name}'s metrics", sq.metrics)]
    outputs.append(("shared.json", out_dir / "shared.json"))
    check_outputs(inputs, outputs)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = run_queries(
        queries, catalog, options, args.shared_buffers, settings, out_dir / "shared.json"
    )
    shared = summary["shared"]
    sys.stderr.write(
        f"{summary['tuples_in']} tuples of {summary['stream']} in {summary['wall_s']:.2f} s "
        f"({summary['throughput']:,.0f} tuples/s) for {len(queries)} "
        f"{'query' if len(queries) == 1 else 'queries'}; "
        f"K-slack buffers ({shared['algorithm']}): {shared['buffered_mean']:,.0f} tuples held "
        f"on average, peak {shared['buffered_peak']:,} (unshared predicted "
        f"{shared['predicted_unshared']:,.0f}); {summary['dead_letter']} rows dead-lettered\n"
    )
    for name, m in summary["metrics"].items():
        sys.stderr.write(
            f"  {name}: {m['results']} result rows over {m['instants']} instants, "
            f"{m['tuples_in']} tuples after its shared filters -> {out_dir / name}.jsonl\n"
        )
    if summary["interrupted"]:
        return 128 + int(getattr(signal, summary["interrupted"]))
    return 0

"""``hycq run`` of one query (several queries: hycq/cli/cmd_run_shared.py)."""

from __future__ import annotations

import argparse
import signal
import sys
import warnings
from pathlib import Path
from typing import Any

from hycq.cli.arguments import (
    default_duration,
    engine_names,
    non_negative_float,
    positive_float,
    rate_float,
)
from hycq.cli.cmd_run_shared import run_shared
from hycq.cli.common import (
    check_data_flags,
    check_outputs,
    input_files,
    join_order_of,
    load_query,
    parse_data,
)
from hycq.cli.flag_groups import (
    engine_settings_flags,
    migration_flags,
    optimizer_flags,
    quality_flags,
    quality_options,
    settings_of,
)
from hycq.cli.run_options import (
    check_quality_flags,
    checkpoint_files,
    checkpoint_options,
    load_placement,
    migration_options,
    reachable_engines,
)
from optimizer.ir.errors import OptionError
from optimizer.ir.join_chains import JOIN_IMPLS


def register(sub: Any) -> None:
    """Add the command's parser to ``sub`` (the top-level subparsers)."""
    rn = sub.add_parser(
        "run",
        help="run a continuous query over generated or replayed data",
        description="Run a continuous query and write its result stream (the query's columns "
        "plus _ts, the slide instant). Without --data, streams come from the catalog's source: "
        "the smart-plug generator, which stops after --duration event-seconds (default "
        f"{default_duration():g}).",
    )
    rn.add_argument(
        "query",
        nargs="+",
        metavar="QUERY",
        help="a .sql file, or - for stdin; several .sql files over one stream run together, "
        "sharing the source, its filters and their K-slack buffering (--output-dir)",
    )
    rn.add_argument(
        "--catalog", type=Path, help="catalog TOML (default: catalog.toml beside QUERY)"
    )
    rn.add_argument(
        "--output-dir",
        type=Path,
        metavar="DIR",
        help="with several QUERY files (docs/shared-queries.md): DIR/<name>.jsonl holds the "
        "result stream of the query in <name>.sql, DIR/<name>.metrics.json its metrics, "
        "DIR/shared.json the shared filter tree and K-slack buffers; names must differ",
    )
    rn.add_argument(
        "--shared-buffers",
        choices=("opt", "greedy", "chained", "unshared"),
        default="opt",
        help="with several queries: how their K-slack buffering is laid out over the shared "
        "filters (Ji ch. 5): opt (fewest buffered tuples, default), greedy, chained (chains "
        "at the branches, nothing below a filter), unshared (one buffer per query)",
    )
    rn.add_argument(
        "--disorder-of",
        action="append",
        default=[],
        metavar="NAME=none|kslack:K|max",
        help="with several queries: the --disorder of the query in NAME.sql (repeatable; the "
        "others take --disorder)",
    )
    rn.add_argument(
        "--rate",
        type=rate_float,
        help="input rate, tuples per event-second: the generator's density, or a file replayed "
        "at this rate by rescaling its timestamps",
    )
    rn.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="STREAM=PATH",
        help="read STREAM from a CSV (raw DEBS without header, or with a header row) or "
        "Parquet file, from standard input as lines arrive (PATH '-'), or from an MQTT "
        "subscription (mqtt://HOST:PORT/TOPIC, docs/live.md); repeatable. A CSV row is one "
        "line of at most 1 MiB: a longer line, or one that leaves a quote open, is a dead "
        "letter; an input without rows is exit 2; a stream the query does not read is "
        "ignored (a warning)",
    )
    rn.add_argument(
        "--duration",
        type=positive_float,
        help=f"event-seconds to process (generated streams default to {default_duration():g})",
    )
    rn.add_argument(
        "--pace",
        choices=("max", "realtime"),
        default="max",
        help="max: push input as fast as the plan takes it (default); realtime: replay event "
        "time against the wall clock",
    )
    rn.add_argument(
        "--disorder",
        default="none",
        metavar="none|kslack:K|max|quality",
        help="disorder handling in front of the windows (docs/disorder.md): none (default: no "
        "buffer; a tuple not after an instant already fired is late and dead-lettered), "
        "kslack:K (each stream held back K, e.g. kslack:2s or kslack:500ms, released in "
        "timestamp order), max (K = the largest delay seen so far per stream), quality (K "
        "adapted to a result-quality target: --max-error for a windowed SUM, COUNT or AVG, "
        "--min-recall for a window join; docs/disorder-quality.md)",
    )
    rn.add_argument(
        "--late",
        choices=("insert", "drop"),
        help="a late tuple (not after an instant already emitted) that still falls into an "
        "open row-engine window: insert it so later results count it, or drop it to the dead "
        "letters (default: insert with a --disorder buffer, drop with none; windows feeding a "
        "columnar engine, and runs with --migrate/--adapt, always drop)",
    )
    rn.add_argument(
        "--idle-timeout",
        type=positive_float,
        metavar="S",
        help="event-seconds a silent stream may hold the others back: once the most advanced "
        "stream is more than S past its progress it counts as progressed to that stream's "
        "progress minus S, and its tuples behind that are late (docs/disorder.md); and wall "
        "seconds a live source (MQTT, stdin) may be quiet before it counts as past its last "
        "timestamp, so its last instants fire (docs/live.md; default: wait for it)",
    )
    rn.add_argument(
        "--checkpoint",
        type=Path,
        metavar="DIR",
        help="persist the run's state in DIR every --checkpoint-every seconds, at a point "
        "between two instants (and when interrupted), so that --resume DIR continues it "
        "after a crash; the output file (.jsonl or .csv) is written in DIR and moved into "
        "place when the run ends (docs/checkpoints.md)",
    )
    rn.add_argument(
        "--checkpoint-every",
        type=positive_float,
        default=None,
        metavar="S",
        help="wall-clock seconds between checkpoints, however large the input's batches "
        "(default: 10; a resumed run keeps the interval its run was started with unless "
        "given anew)",
    )
    rn.add_argument(
        "--resume",
        type=Path,
        metavar="DIR",
        help="continue the run checkpointed in DIR (same query and options): the output "
        "after its last checkpoint is exactly what an uninterrupted run writes to a file; "
        "stdout and MQTT outputs repeat the instants after it (docs/checkpoints.md)",
    )
    rn.add_argument(
        "--placement",
        default="auto",
        metavar="auto|row|column|FILE.json",
        help="operator placement: auto (the optimizer's plan over row and --column-engine), "
        "row, column, or a JSON file "
        '{"<op id>": "<engine>"} with ids from explain and engines from '
        f"{engine_names()} (default: auto)",
    )
    optimizer_flags(rn, placement=True, join_order=True)
    rn.add_argument(
        "--join-impl",
        choices=(*JOIN_IMPLS, "auto"),
        default="tree",
        help="how the row engine runs each chain of joins: tree (binary symmetric hash "
        "joins, Phase One's order), mjoin (one n-ary join, no intermediate state), acaching "
        "(MJoin with adaptive subresult caches), jit (the tree with just-in-time suspension "
        "of partial results no consumer can use), auto (the cost model's cheapest per chain; "
        "metrics list the predictions) (default: tree; docs/joins.md)",
    )
    rn.add_argument(
        "--join-memory",
        type=non_negative_float,
        metavar="MB",
        help="memory for A-Caching's caches (default: unlimited)",
    )
    migration_flags(rn)
    quality_flags(rn)
    rn.add_argument(
        "--output",
        metavar="PATH",
        help="result file: .parquet, .csv or .jsonl, - for JSON lines on stdout, or "
        "mqtt://HOST:PORT/TOPIC to publish each instant's JSON lines (QoS 1) "
        "(default: results are counted, not written)",
    )
    rn.add_argument(
        "--column-engine",
        default="duckdb",
        metavar="ENGINE",
        help="the columnar engine of --placement column and auto, one of "
        f"{engine_names(columnar=True)} (default: duckdb, embedded)",
    )
    engine_settings_flags(rn)
    rn.add_argument("--metrics", type=Path, metavar="PATH", help="write run metrics as JSON")
    rn.add_argument(
        "--report",
        type=Path,
        metavar="PATH.html",
        help="after the run, write an HTML placement report with the run's measurements and "
        "its timeline (throughput and latency per event-second, migrations marked, migration "
        "records, --adapt decisions)",
    )
    rn.add_argument(
        "--dead-letter",
        type=Path,
        metavar="PATH",
        help="write rejected input rows with the reason (JSON lines)",
    )
    rn.add_argument(
        "--memory-limit",
        type=positive_float,
        metavar="MB",
        help="stop with an error when the run's resident memory passes MB (default: 90%% of "
        "the memory available at the start)",
    )
    rn.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar (default: when stderr is a terminal)",
    )


def run(args: argparse.Namespace) -> int:
    from engines.runtime import RunOptions
    from hycq import api
    from hycq.flags import CLI_OPTION_NAMES

    if len(args.query) > 1 or args.output_dir is not None:
        return run_shared(args)
    if args.disorder_of:
        raise OptionError(
            "--disorder-of is for runs of several queries", hint="use --disorder for one query"
        )
    args.query = args.query[0]

    placement = load_placement(args.placement)
    join_order = join_order_of(args)
    migration = migration_options(args)
    if args.report is not None:
        from hycq.reporting import check_out_path

        check_out_path(args.report, "--report")
    data = parse_data(args.data)
    from engines.disorder.policies import check_available
    from engines.disorder.spec import parse_disorder

    disorder = parse_disorder(args.disorder)
    check_available(disorder)
    quality = quality_options(args)
    check_quality_flags(disorder.kind, quality)
    options = RunOptions(
        disorder=disorder,
        idle_timeout=args.idle_timeout,
        late=args.late,
        rate=args.rate,
        duration=args.duration,
        pace=args.pace,
        data=data,
        output=args.output,
        metrics=args.metrics,
        dead_letter=args.dead_letter,
        progress=args.progress,
        stop_on_signal=True,
        memory_limit_mb=args.memory_limit,
        names=CLI_OPTION_NAMES,
        quality=quality,
        join_impl=args.join_impl,
        join_memory_mb=args.join_memory,
        checkpoint=checkpoint_options(args),
    )
    from engines import registry

    registry.get_columnar(args.column_engine, "--column-engine")
    settings = settings_of(args)
    q = load_query(args.query, args.catalog)
    check_data_flags([q], data)
    inputs = input_files(args.query, args.catalog, q.catalog, data.values(), args.cost_model)
    if isinstance(placement, dict):
        inputs.append(("--placement", Path(args.placement)))
    inputs += [("--migrate", path) for _, path in migration.migrate]
    check_outputs(
        inputs,
        [
            ("--output", args.output),
            ("--metrics", args.metrics),
            ("--dead-letter", args.dead_letter),
            ("--report", args.report),
            *checkpoint_files(options.checkpoint),
        ],
    )
    optimizer = api.OptimizerOptions(
        engines=reachable_engines(migration, args.placement, placement, args.column_engine),
        cost_model=args.cost_model,
        incremental=not getattr(args, "no_incremental", False),
        row_core=args.row_core,
        join_order=join_order,
        disorder=disorder.buffered,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        result = api.run(q, options, placement, args.column_engine, settings, optimizer, migration)
    for w in caught:
        sys.stderr.write(f"warning: {w.message}\n")
    m = result.metrics
    if args.output != "-":
        sys.stderr.write(_run_summary(m) + "\n")
        for rec in m.get("migrations", []):
            sys.stderr.write(_migration_line(rec) + "\n")
    if m["interrupted"]:  # SIGINT/SIGTERM: what was computed is committed (engines/runtime/loop.py)
        done = f"up to instant {m['last_instant']}" if m["last_instant"] is not None else "none"
        where = f" ({args.output})" if args.output not in (None, "-") else ""
        sys.stderr.write(f"interrupted by {m['interrupted']}: complete results {done}{where}\n")
        return 128 + int(getattr(signal, m["interrupted"]))
    if args.report is not None:
        from hycq.reporting import report_after_run

        report_after_run(q, optimizer, options, m, args.placement, args.report)
        sys.stderr.write(f"wrote report {args.report}\n")
    return 0


def _run_summary(m: dict[str, Any]) -> str:
    """The one-line summary of a run. A resumed run (``--resume``) says which part each
    figure describes: tuples, time, throughput and rate are this process's part (after the
    checkpoint), results and instants the whole output."""
    pace = (
        f"{m['tuples_in']} tuples in {m['wall_s']:.2f} s ({m['throughput']:,.0f} tuples/s, "
        f"{_kept_up(m)})"
    )
    totals = (
        f"{m['results']} result rows over {m['instants']} instants; "
        f"{m['dead_letter']} rows dead-lettered"
    )
    resumed = (m.get("checkpoint") or {}).get("resumed")
    if resumed is None:
        return f"{pace}; {totals}"
    at = resumed["instant"]
    before = int(resumed["tuples_before"])
    return (
        f"resumed from {resumed['checkpoint']} (instant {'none' if at is None else at}, "
        f"{before} tuples taken before); this part: {pace}; whole stream: "
        f"{before + int(m['tuples_in'])} tuples, {totals}"
    )


def _kept_up(m: dict[str, Any]) -> str:
    """The summary's verdict: a live source by its lag (engines/runtime/live_lag.py), any
    other input by its rate."""
    verdict = "kept up" if m["kept_up"] else "did NOT keep up"
    if m.get("kept_up_rule") == "lag":
        lag = m["live_lag_s"]
        how = f"lag grew by at most {lag:.2g} s" if m["kept_up"] else f"fell {lag:.3g} s behind"
        return f"live source, {verdict}: {how}"
    return f"rate {m['rate']:,.4g}/s, {verdict}"


def _migration_line(rec: dict[str, Any]) -> str:
    """One stderr line per migration record."""
    where = rec.get("source") or "adaptive"
    if not rec.get("happened"):
        return f"migration ({where}) did not happen: {rec.get('note')}"
    if rec.get("strategy") == "none":
        return f"migration ({where}) at instant {rec['at']}: nothing to change"
    state = "completed" if rec.get("completed") else "NOT completed"
    return (
        f"migration ({where}) at instant {rec['at']} by {rec['strategy']}: {state} in "
        f"{rec.get('duration_ms', 0):.1f} ms, output gap {rec.get('output_gap_ms') or 0:.1f} ms, "
        f"old plan dropped after instant {rec.get('old_plan_dropped_at')}"
    )

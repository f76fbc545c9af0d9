"""The ``hycq`` command line's arguments: the parser of every command and its flags, the
value checks of option arguments, and the engine-settings flags generated from the engine
registry. The commands themselves are in ``hycq/cli.py``.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

from optimizer.ir.errors import HycqError, OptionError, did_you_mean
from optimizer.ir.limits import (
    LIMIT,
    MAX_EPOCH_S,
    MAX_HOUSES,
    MAX_KEYS,
    MAX_PLUGS,
    MAX_RATE,
    MAX_SEED,
    MAX_SKEW,
)


class _Parser(argparse.ArgumentParser):
    """argparse with the errors of docs/interface.md: ``error: ...`` and exit status 2."""

    def error(self, message: str) -> NoReturn:
        hint = f"see '{self.prog} --help'"
        m = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)", message)
        if m:
            choices = [c.strip(" '") for c in m.group(2).split(",")]
            hint = did_you_mean(m.group(1), choices) or hint
        sys.stderr.write(f"error: {message}\n  hint: {hint}\n")
        raise SystemExit(2)


class _DebugParser(_Parser):
    """A subcommand's parser: takes ``--debug`` too, so it may come after the subcommand
    (the top-level default stays when it is not given here)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument(
            "--debug",
            action="store_true",
            default=argparse.SUPPRESS,
            help="show tracebacks of internal errors",
        )


def _bounded_float(high: float) -> Any:
    """An argparse type: a number in (0, high]."""

    def parse(text: str) -> float:
        value = _float(text)
        if not (math.isfinite(value) and 0 < value <= high):
            raise argparse.ArgumentTypeError(
                f"must be a positive number up to {high:g}, got '{text}'"
            )
        return value

    return parse


#: A number in (0, LIMIT] (optimizer/ir/limits.py): spans, intervals, sizes, factors.
positive_float = _bounded_float(LIMIT)
#: A rate, tuples per event-second, in (0, MAX_RATE].
rate_float = _bounded_float(MAX_RATE)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None


def _bounded_int(low: int, high: int, what: str = "") -> Any:
    """An argparse type: an integer in [low, high] (``what`` says what it counts)."""

    def parse(text: str) -> int:
        value = _int(text)
        if not low <= value <= high:
            kind = "a positive integer" if low == 1 else f"an integer >= {low}"
            raise argparse.ArgumentTypeError(f"must be {kind} up to {high:,}{what}, got '{text}'")
        return value

    return parse


#: A positive count (rows, repeats, plugs...) up to LIMIT.
_positive_int = _bounded_int(1, int(LIMIT))
_non_negative_int = _bounded_int(0, int(LIMIT))
_seed = _bounded_int(0, MAX_SEED)


def _skew(text: str) -> float:
    """A Zipf exponent in [0, MAX_SKEW]."""
    value = _float(text)
    if not (math.isfinite(value) and 0 <= value <= MAX_SKEW):
        raise argparse.ArgumentTypeError(f"must be a number in [0, {MAX_SKEW:g}], got '{text}'")
    return value


def _non_negative_float(text: str) -> float:
    """A number in [0, LIMIT]."""
    value = _float(text)
    if not (math.isfinite(value) and 0 <= value <= LIMIT):
        raise argparse.ArgumentTypeError(
            f"must be a number >= 0 and at most {LIMIT:g}, got '{text}'"
        )
    return value


def package_version() -> str:
    """The installed package's version (its metadata); ``hycq.__version__`` when hycq runs
    from a source tree that is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hycq")
    except PackageNotFoundError:
        from hycq import __version__

        return __version__


def engine_names(columnar: bool = False) -> str:
    """The registered engine names for help texts (built-ins and installed plugins)."""
    from engines import registry

    try:
        names = registry.columnar_names() if columnar else registry.names()
    except HycqError:  # a broken plugin: reported when an engine is looked up
        from engines.registry import BUILTIN_MODULES

        names = tuple(m.split(".")[1] for m in BUILTIN_MODULES)
    return ",".join(names)


def _engine_settings(p: argparse.ArgumentParser) -> None:
    """Every registered engine's settings (engines/registry.py), e.g. --spark-conf."""
    from engines import registry

    p.add_argument(
        "--no-incremental",
        action="store_true",
        help="re-evaluate every aggregate of a DuckDB group over its whole window at each "
        "slide instead of keeping SUM/COUNT/AVG incrementally with exact sums, MIN/MAX "
        "from pane partials and the counts of a window joined with its own per-key "
        "aggregate per key (docs/engines.md)",
    )

    try:
        specs = list(registry.table().values())
    except HycqError:  # a broken plugin: reported when an engine is looked up
        return
    for spec in specs:
        for setting in spec.settings:
            dest = f"engine__{spec.name}__{setting.key}"
            if setting.kind == "pairs":
                p.add_argument(
                    setting.flag,
                    action="append",
                    default=[],
                    dest=dest,
                    metavar=setting.metavar or "KEY=VALUE",
                    help=setting.help,
                )
            else:
                high = setting.maximum if setting.maximum is not None else LIMIT
                int_kind = setting.kind == "int"
                kind = _bounded_int(1, int(high)) if int_kind else _bounded_float(high)
                metavar = setting.metavar or ("N" if setting.kind == "int" else "S")
                p.add_argument(
                    setting.flag, type=kind, dest=dest, metavar=metavar, help=setting.help
                )


def settings_of(args: argparse.Namespace) -> Any:
    """The api.EngineSettings of the parsed engine settings (KEY=VALUE pairs checked)."""
    from engines import registry
    from hycq import api

    values: dict[str, dict[str, Any]] = {}
    for spec in registry.table().values():
        for setting in spec.settings:
            value = getattr(args, f"engine__{spec.name}__{setting.key}", None)
            if setting.kind == "pairs":
                pairs: dict[str, str] = {}
                for item in value or []:
                    key, sep, text = item.partition("=")
                    if not sep or not key.startswith(setting.prefix) or key == setting.prefix:
                        example = f"{setting.prefix}KEY=VALUE"
                        raise OptionError(
                            f"{setting.flag} expects {example}, got '{item}'",
                            hint=f"e.g. {setting.flag} {_EXAMPLES.get(setting.flag, example)}",
                        )
                    pairs[key] = text
                value = pairs or None
            if value is not None:
                values.setdefault(spec.name, {})[setting.key] = value
    return api.EngineSettings(values, incremental=not getattr(args, "no_incremental", False))


#: Examples in the hints of KEY=VALUE settings.
_EXAMPLES = {
    "--spark-conf": "spark.master=local[2]",
    "--datafusion-conf": "datafusion.execution.batch_size=16384",
}


def _plan_flags(p: argparse.ArgumentParser) -> None:
    """QUERY and the flags that say what to plan for, shared by explain and report."""
    p.add_argument("query", metavar="QUERY", help="a .sql file, or - for stdin")
    p.add_argument("--catalog", type=Path, help="catalog TOML (default: catalog.toml beside QUERY)")
    p.add_argument("--rate", type=rate_float, help="arrival rate of every input stream, tuples/s")
    p.add_argument(
        "--engines",
        default="row,duckdb",
        help="engines the placement may use, comma-separated from the registered engines "
        f"{engine_names()} (default: row,duckdb)",
    )


def _optimizer_flags(
    p: argparse.ArgumentParser, placement: bool = False, join_order: bool = False
) -> None:
    """The optimizer's flags, shared by explain and run (for --placement auto)."""
    p.add_argument(
        "--cost-model",
        metavar="NAME|PATH",
        help="cost model: analytical, calibrated, an installed plugin name, a module:attr "
        "path, or a .toml file (default: calibrated when 'hycq calibrate' has written a "
        "profile, else analytical)",
    )
    p.add_argument(
        "--row-core",
        choices=("per-operator", "shared"),
        default="shared",
        help="how row operators are charged: shared (they share the row engine's one "
        "Python thread; predicts measured throughput better, experiments/README.md) or "
        "per-operator (each its own unit, the dissertation's model) (default: shared)",
    )
    if join_order:
        p.add_argument(
            "--join-order",
            metavar="A,B,C",
            help="run the joins in this left-deep order of FROM aliases instead of the "
            "optimizer's (several join chains: separate their orders with ';', e.g. 'a,b;c,d'); "
            "operator ids follow it",
        )
    if placement:
        return
    p.add_argument(
        "--exhaustive",
        action="store_true",
        help="cost every placement instead of the pruned search (small plans only)",
    )
    p.add_argument(
        "--no-feasibility",
        action="store_true",
        help="rank plans by total utilization only, ignoring whether they keep up (section 6.4.3)",
    )


def _migration_flags(p: argparse.ArgumentParser) -> None:
    """Live plan migration (docs/migration.md)."""
    from engines.migration import strategies

    g = p.add_argument_group("live plan migration (docs/migration.md)")
    g.add_argument(
        "--migrate",
        action="append",
        default=[],
        metavar="AT=TARGET.json",
        help="at AT event-seconds after the first tuple, migrate to the plan of TARGET.json "
        '{"join_order": [FROM aliases] (optional), "placement": "auto"|"row"|"column"|'
        '{"<op id>": "<engine>"}} (ids as \'explain --join-order ... --json\' prints them); '
        "repeatable; checked before the run starts",
    )
    g.add_argument(
        "--migration",
        default="auto",
        choices=strategies.names(),
        help="migration strategy (default auto). Any two plans: gms (replay the window "
        "horizon into the new plan, then switch), gpt (run both plans until the old plan's "
        "tuples expired: no output gap), ghm (replay in the background while the old plan "
        "answers). All-row plans (row states moved by signature): ms (moved, the rest "
        "recomputed at once), jisc (the rest completed lazily per key), pt (both plans, each "
        "result from one), hybmig / hybmig-lazy (shared leaf states, the old plan restricted "
        "to its share; with / without background state computation). auto: no change -> "
        "none; a join-order change of an all-row plan -> jisc; a placement change -> gpt "
        "(gms with a ROWS window, or when --adapt asks: GPT would keep the old plan, and "
        "the controller waiting, for a window horizon); an "
        "UNBOUNDED window or a tuple-count slide -> jisc or ms only",
    )
    g.add_argument(
        "--adapt",
        action="store_true",
        help="monitor the run, re-optimize on measured statistics and migrate automatically",
    )
    g.add_argument(
        "--reoptimize-every",
        type=positive_float,
        metavar="S",
        help="with --adapt: event-seconds between re-optimization checks (default 10)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="hycq",
        description="Hybrid row/column continuous-query optimizer and executor for CQL.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    parser.add_argument(
        "--version",
        action="version",
        version=f"hycq {package_version()}",
        help="print 'hycq VERSION' and exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_DebugParser)
    sub.required = True

    ex = sub.add_parser(
        "explain",
        help="print the logical plan and the placement of every operator",
        description="Parse, bind and explain a continuous query. Operator ids are stable for "
        "the same query text and options; placement files use them.",
    )
    _plan_flags(ex)
    _optimizer_flags(ex, join_order=True)
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
        choices=("tree", "mjoin", "acaching", "jit", "auto"),
        help="also show, per chain of joins, the row engine's join implementation for this "
        "setting and every alternative's predicted cost (docs/joins.md; JSON: join_impls)",
    )
    ex.add_argument(
        "--json", action="store_true", help="print one JSON object (fields: docs/interface.md)"
    )
    ex.add_argument("--schema", action="store_true", help="show every operator's output schema")

    rn = sub.add_parser(
        "run",
        help="run a continuous query over generated or replayed data",
        description="Run a continuous query and write its result stream (the query's columns "
        "plus _ts, the slide instant). Without --data, streams come from the catalog's source: "
        "the smart-plug generator, which stops after --duration event-seconds (default "
        f"{_default_duration():g}).",
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
        help=f"event-seconds to process (generated streams default to {_default_duration():g})",
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
    _optimizer_flags(rn, placement=True, join_order=True)
    rn.add_argument(
        "--join-impl",
        choices=("tree", "mjoin", "acaching", "jit", "auto"),
        default="tree",
        help="how the row engine runs each chain of joins: tree (binary symmetric hash "
        "joins, Phase One's order), mjoin (one n-ary join, no intermediate state), acaching "
        "(MJoin with adaptive subresult caches), jit (the tree with just-in-time suspension "
        "of partial results no consumer can use), auto (the cost model's cheapest per chain; "
        "metrics list the predictions) (default: tree; docs/joins.md)",
    )
    rn.add_argument(
        "--join-memory",
        type=_non_negative_float,
        metavar="MB",
        help="memory for A-Caching's caches (default: unlimited)",
    )
    _migration_flags(rn)
    _quality_flags(rn)
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
    _engine_settings(rn)
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

    rp = sub.add_parser(
        "report",
        help="write a self-contained HTML report of the plan, its placement and alternatives",
        description="Optimize QUERY as explain does and write one HTML file (no script, "
        "nothing fetched): the plan graph coloured by engine with each group's SQL, the cost "
        "vector and feasibility, the rate where the plan stops keeping up, the alternatives "
        "and the Definition 6.1 condition each lost on, the optimizer trace, and with --bench "
        "measured against predicted throughput.",
    )
    _plan_flags(rp)
    _optimizer_flags(rp)
    rp.add_argument(
        "--bench", type=Path, metavar="PATH.json", help="a 'hycq bench --json' file to compare"
    )
    rp.add_argument("--out", type=Path, required=True, metavar="PATH.html", help="report file")

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
        type=_positive_int,
        default=10,
        metavar="S",
        help="event-seconds per timed span (default: 10)",
    )
    bn.add_argument(
        "--preroll",
        type=_non_negative_int,
        default=1,
        metavar="S",
        help="event-seconds each plan runs untimed just before each of its timed spans when "
        "plans are measured side by side, so it does not pay for the caches the plan before "
        "it used (default: 1; 0: none)",
    )
    bn.add_argument(
        "--repeat",
        type=_positive_int,
        default=3,
        help="timed spans per plan at least; the median counts (3)",
    )
    bn.add_argument(
        "--max-repeat",
        type=_positive_int,
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
        type=_positive_int,
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
    _engine_settings(bn)
    _optimizer_flags(bn, placement=True)
    bn.add_argument("--json", type=Path, metavar="PATH", help="write the records as JSON")
    bn.add_argument("--plot", type=Path, metavar="PATH.png", help="plot throughput against rate")

    cal = sub.add_parser(
        "calibrate",
        help="measure this machine's unit costs for the calibrated cost model",
        description="Micro-benchmark the row engine's operators, Arrow conversion and the "
        "columnar engines over growing windows, fit the cost model's unit-cost functions "
        "(scipy NNLS) and write a profile. The 'calibrated' cost model reads it, and is the "
        "default whenever the profile exists.",
    )
    cal.add_argument(
        "--out",
        type=Path,
        metavar="PATH",
        help="profile path (default: $HYCQ_CALIBRATION, else ~/.config/hycq/calibration.json)",
    )
    cal.add_argument(
        "--engines",
        default="row,duckdb,spark",
        help=f"what to measure, from {engine_names()} (default: row,duckdb,spark; Spark adds "
        "about a minute)",
    )
    cal.add_argument(
        "--quick", action="store_true", help="smaller data and fewer points (about 10 s)"
    )
    # e.g. --spark-conf spark.master=spark://HOST:7077: the profile then holds the cluster's
    # costs (write it to its own --out and pass it to runs on that cluster: --cost-model)
    _engine_settings(cal)
    refit = cal.add_argument_group(
        "refit from runs (no new measurements)",
        "--from refits an existing profile with what runs measured: the row operators' busy "
        "time per tuple and the columnar groups' SQL seconds per slide. Observations count "
        "--weight times as much as a calibration point; outliers (beyond 3.5 robust standard "
        "deviations of a first fit's relative residuals) are rejected; a --holdout fraction "
        "is left out of the fit and the old and new profiles' median relative error on it is "
        "printed and recorded in the profile.",
    )
    refit.add_argument(
        "--from",
        dest="from_paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="run metrics (hycq run --metrics) or bench (hycq bench --json) JSON files",
    )
    refit.add_argument(
        "--profile",
        type=Path,
        metavar="IN.json",
        help="the profile to start from (default: the calibrated profile's path); --out "
        "defaults to it",
    )
    refit.add_argument(
        "--weight",
        type=positive_float,
        default=1.0,
        metavar="W",
        help="weight of one observation relative to one calibration point (default: 1)",
    )
    refit.add_argument(
        "--holdout",
        type=float,
        default=0.25,
        metavar="F",
        help="fraction of the observations held out to compare the errors (default: 0.25; "
        "0 fits on all and reports none)",
    )
    refit.add_argument(
        "--seed", type=_seed, default=0, help="seed of the held-out split (default: 0)"
    )

    _quality_parser(sub)

    data = sub.add_parser("data", help="synthetic data: smart-plug readings, keyed streams")
    data_sub = data.add_subparsers(dest="data_command", metavar="ACTION", parser_class=_DebugParser)
    data_sub.required = True
    gen = data_sub.add_parser(
        "generate",
        help="write deterministic synthetic data (smart-plug readings or keyed streams)",
        description="Write synthetic data. --generator smartplug (default): smart-plug "
        "readings in the DEBS 2014 format, .csv (raw, no header) or .parquet, chosen by the "
        "extension of --out. --generator keyed: a keyed multi-stream workload (columns ts, "
        "k, v; one file per stream plus catalog.toml) into the folder --out, e.g. "
        "'--generator keyed --out data/ --seconds 150 --rate 20' writes data/r.csv, "
        "data/s.csv, data/t.csv and data/catalog.toml; per-stream settings with --stream, "
        "e.g. --stream r:rate=2000 --stream s:start=10,end=100 --stream t:silent=30-60. "
        "Drifting workloads: --rate-profile (both generators) makes the rate change over "
        "event time, e.g. 0:1000,60:40000,120:5000 (steps) or 0:1000~60:40000 (a linear "
        "ramp); keyed streams also take profiles for keys, skew, hot (the hot key) and sel "
        "(the fraction of tuples with v < 10), e.g. --stream s:sel=0:0.1,60:0.9,skew=0:0,60:1.5; "
        "--join-streams N writes the n-stream join workload of queries/drift (rare keys move "
        "from stream a to stream z at --shift-at, so the best join order changes). Bad "
        "profiles exit 2. docs/data.md has the details.",
    )
    gen.add_argument(
        "--generator",
        choices=("smartplug", "keyed", "multiway", "x3", "x4"),
        default="smartplug",
        help="what to generate (default smartplug); multiway: a multiway join workload "
        "(--shape q3|clique|star, --ways, --multiplicity, --window; streams with several "
        "join columns, into the folder --out with catalog.toml and query.sql); x3, x4: Ji's "
        "out-of-order join workloads "
        "(section 4.3: 100 tuples/s per stream, ms timestamps, Zipf delays up to 20 s, join "
        "values Zipf over 1..100 with drifting skew; x3 3 streams, x4 a 4-stream star) into "
        "the folder --out with catalog.toml and README.md, for queries/qddh (the "
        "dissertation's 30 minutes: --seconds 1800)",
    )
    gen.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output file (.csv or .parquet); for keyed, a folder (created if missing)",
    )
    gen.add_argument("--seconds", type=positive_float, default=60.0, help="event-time span (60)")
    gen.add_argument(
        "--rate",
        type=rate_float,
        help="tuples per event-second (smartplug default: the rate of the shipped catalog's "
        "readings, 2000, as for 'hycq run'; keyed: per stream, default 20)",
    )
    gen.add_argument(
        "--rate-profile",
        metavar="PROFILE",
        help="a rate that drifts over event time, instead of --rate: SECONDS:RATE points "
        "joined by ',' (hold, then step) or '~' (linear ramp), the first at 0, e.g. "
        "0:1000,60:40000,120:5000 or 0:1000~60:40000; keyed: every stream's default",
    )
    gen.add_argument(
        "--delay",
        metavar="zipf:MAX,SKEW",
        help="induced disorder (Ji's synthetic method): rows are written in arrival order and "
        "each timestamp is its arrival instant minus a delay drawn from Zipf over 0..MAX "
        "ticks with exponent SKEW (P(d) ~ (d+1)^-SKEW), e.g. zipf:20s,2; keyed: every "
        "stream's default (per stream: --stream r:delay=zipf:20s,3); recorded in the "
        "catalog (keyed) or in OUT.README.md (smartplug)",
    )
    gen.add_argument(
        "--houses",
        type=_bounded_int(1, MAX_HOUSES),
        help=f"smartplug: number of houses (40; at most {MAX_HOUSES:,})",
    )
    shape = gen.add_argument_group(
        "smart-plug data shapes (--generator smartplug; the real data: 1,677 plugs in 40 "
        "houses, 2 readings per plug per second, half load, half work)"
    )
    shape.add_argument(
        "--plugs",
        type=_bounded_int(1, MAX_PLUGS),
        metavar="N",
        help=f"exactly N plugs (e.g. 100 to 50,000; at most {MAX_PLUGS:,}), instead of --houses",
    )
    shape.add_argument(
        "--plug-rate",
        type=rate_float,
        metavar="R",
        help="readings per plug per event-second (e.g. 0.05 to 50), instead of --rate: the "
        "rate becomes plugs x R",
    )
    shape.add_argument(
        "--load-share",
        type=float,
        metavar="F",
        help="fraction of readings that are load (property 1) rather than work (0.5)",
    )
    gen.add_argument("--seed", type=_seed, default=42, help="random seed (42)")
    mw = gen.add_argument_group("multiway join workloads (--generator multiway)")
    mw.add_argument(
        "--shape",
        choices=("q3", "clique", "star"),
        default="q3",
        help="q3: A-Caching's r(a) join s(a,b) join t(b); clique: every pair of --ways streams "
        "equal on its own column (JIT's shape); star: a hub and --ways - 1 spokes (default q3)",
    )
    mw.add_argument(
        "--ways", type=_positive_int, default=4, help="streams of a clique or star (2-8; 4)"
    )
    mw.add_argument(
        "--multiplicity",
        type=positive_float,
        default=5.0,
        help="q3: tuples of t per join value in a window (t's rate is this times r's; 5)",
    )
    mw.add_argument(
        "--window",
        type=positive_float,
        default=10.0,
        help="the query's window in seconds: join values range over rate x window (1 tuple "
        "per value and window) unless --keys is given (10)",
    )
    keyed = gen.add_argument_group("keyed streams (--generator keyed)")
    keyed.add_argument(
        "--stream",
        action="append",
        default=[],
        metavar="NAME[:KEY=VALUE,...]",
        help="a stream and its own settings: rate, keys, skew, start, end (offsets in "
        "seconds), silent=FROM-TO[+FROM-TO], unit=s|ms, hot (an offset added to every key: "
        "moves the hot key), sel (fraction of tuples with v < 10; default 0.1); rate, keys, "
        "skew, hot and sel also take a profile, e.g. rate=0:10,60:400 or sel=0:0.1~30:0.9; "
        "delay=zipf:MAX,SKEW (induced disorder, as --delay); "
        "repeat for each stream (default: r, s, t with the settings below)",
    )
    keyed.add_argument(
        "--join-streams",
        type=_positive_int,
        metavar="N",
        help="write the N-stream (3..8) raw-window join workload of queries/drift: streams "
        "a, b, ... and z, keys from a domain of 20, except rare keys (domain 400) in stream "
        "a before --shift-at and in stream z after it (HybMig section 5); --rate per stream "
        "(default 1)",
    )
    keyed.add_argument(
        "--shift-at",
        type=positive_float,
        metavar="S",
        help="with --join-streams: when the rare keys move from a to z (default: half of "
        "--seconds)",
    )
    keyed.add_argument(
        "--uniform",
        action="store_true",
        help="with --join-streams: uniform keys in every stream, no shift (JISC section 6)",
    )
    keyed.add_argument(
        "--keys",
        type=_bounded_int(1, MAX_KEYS),
        default=100,
        help=f"key domain 0..KEYS-1 (100; at most {MAX_KEYS:,})",
    )
    keyed.add_argument(
        "--skew",
        type=_skew,
        default=0.0,
        help=f"Zipf exponent of the key distribution (0: uniform; at most {MAX_SKEW:g})",
    )
    keyed.add_argument("--time-unit", choices=("s", "ms"), default="s", help="timestamp unit (s)")
    keyed.add_argument(
        "--origin",
        type=_bounded_int(0, MAX_EPOCH_S),
        help="epoch seconds of offset 0 (default 1400000000)",
    )
    keyed.add_argument(
        "--format", choices=("csv", "parquet"), default="csv", help="file format (csv, with header)"
    )
    _publish_parser(data_sub)
    return parser


def _publish_parser(data_sub: Any) -> None:
    pub = data_sub.add_parser(
        "publish",
        help="replay a stream to an MQTT broker (QoS 1), as live devices would send it",
        description="Publish a stream to mqtt://HOST:PORT/TOPIC: the stream a query reads "
        "(QUERY.sql; --stream when it reads several), a catalog's stream (CATALOG.toml), "
        "or a data file (.csv/.parquet smart-plug readings; other streams with --catalog "
        "and --stream). Messages hold up to --batch rows as raw CSV lines (what hycq run "
        "--data STREAM=mqtt://... reads) or a JSON array (--format json), then the "
        'end-of-stream message {"end_of_stream": true}. e.g. hycq data publish '
        "queries/smartplug/q1.sql --to mqtt://127.0.0.1:1883/plugs --rate 2000 "
        "--duration 60 --pace realtime. docs/live.md has the details.",
    )
    pub.add_argument("source", type=Path, metavar="QUERY|CATALOG|FILE")
    pub.add_argument("--to", required=True, metavar="mqtt://HOST:PORT/TOPIC", help="where")
    pub.add_argument("--catalog", type=Path, help="the catalog (default: beside the query)")
    pub.add_argument("--stream", help="the stream to publish (when there are several)")
    pub.add_argument(
        "--rate",
        type=rate_float,
        help="tuples per event-second: the generator's density, or a file's timestamps "
        "rescaled to it",
    )
    pub.add_argument(
        "--duration",
        type=positive_float,
        help=f"event-seconds to publish (generated streams default to {_default_duration():g})",
    )
    pub.add_argument(
        "--pace",
        choices=("max", "realtime"),
        default="max",
        help="max: as fast as the broker acknowledges; realtime: each message when its "
        "first timestamp is due (default max)",
    )
    pub.add_argument("--batch", type=_positive_int, default=1000, help="rows per message (1000)")
    pub.add_argument(
        "--format",
        choices=("csv", "json"),
        default="csv",
        dest="payload_format",
        help="payload: raw CSV lines or a JSON array of objects (csv)",
    )
    pub.add_argument("--no-end", action="store_true", help="do not send the end-of-stream message")
    pub.add_argument(
        "--dead-letter",
        type=Path,
        metavar="PATH",
        help="write the rows that fit no column of the stream, with the reason (JSON lines); "
        "they are not published (none valid at all: exit 2, nothing sent)",
    )


def _fraction(text: str) -> float:
    """A number in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None
    if not (math.isfinite(value) and 0 < value <= 1):
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got '{text}'")
    return value


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names and text.strip():
        raise argparse.ArgumentTypeError(f"expected column names, got '{text}'")
    return names


def _open_fraction(text: str) -> float:
    """A number in (0, 1)."""
    value = _fraction(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got '{text}'")
    return value


def _quality_flags(p: argparse.ArgumentParser) -> None:
    """The result-quality target of quality-driven disorder handling (docs/disorder-quality.md)."""
    g = p.add_argument_group(
        "result-quality target (only with --disorder quality, which needs one; "
        "docs/disorder-quality.md)"
    )
    g.add_argument(
        "--max-error",
        type=positive_float,
        metavar="EPS",
        help="windowed aggregates (SUM, COUNT, AVG): keep each window's relative error "
        "|A - A^| / |A| at most EPS with probability --confidence",
    )
    g.add_argument(
        "--confidence",
        type=_open_fraction,
        metavar="1-DELTA",
        help="with --max-error: P(error <= EPS) >= 1-DELTA (default 0.95, Table 4.2)",
    )
    g.add_argument(
        "--min-recall",
        type=_fraction,
        metavar="GAMMA",
        help="window joins: produce at least a share GAMMA of the true results of every "
        "--recall-period",
    )
    g.add_argument(
        "--recall-period",
        type=positive_float,
        metavar="S",
        help="with --min-recall: the period P_meas recall is measured over, seconds (default "
        "60, Table 4.2)",
    )
    g.add_argument(
        "--adapt-method",
        choices=("am", "pd"),
        default=None,
        help="how K adapts: am (the analytical model, default) or pd (the PD controller)",
    )
    g.add_argument(
        "--quality-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a model parameter (Table 4.2 defaults): b=0.01 (basic window, s), "
        "g=0.01 (K step, s), q=0.99 (retrospect quantile), up / ud (PD gains; aggregates "
        "0.2 / 4, joins 0.6 / 0.8), p_meas=60, l_adt=1 (adaptation interval, s), "
        "stat_window=20000 (delays kept per stream), warmup=1, recalc=1 (s); repeatable",
    )


def quality_options(args: argparse.Namespace) -> Any:
    """The run's QualityOptions from the parsed flags, None when none was given (exit 2 on
    a bad combination or parameter)."""
    from engines.disorder.params import parse_overrides
    from engines.disorder.quality_options import QualityOptions

    given = (
        args.max_error,
        args.confidence,
        args.min_recall,
        args.recall_period,
        args.adapt_method,
    )
    if all(v is None for v in given) and not args.quality_param:
        return None
    return QualityOptions(
        max_error=args.max_error,
        confidence=args.confidence,
        min_recall=args.min_recall,
        recall_period=args.recall_period,
        method=args.adapt_method or "am",
        params=parse_overrides(args.quality_param),
    )


def _quality_parser(sub: Any) -> None:
    qp = sub.add_parser(
        "quality",
        help="measure a result file's quality against the true result stream",
        description="Compare RESULT (a 'hycq run --output' file of a run with a disorder "
        "buffer) with TRUTH (the same query's result stream over the in-order input, or with "
        "a buffer >= the largest delay): recall per period and Phi(Gamma) (joins; Eqs. 4.3, "
        "4.11), relative error per result and Phi(eps) (aggregates; Eq. 4.10), and window "
        "coverage from a COUNT column. Rows are matched by _ts and the group key. "
        "docs/disorder-quality.md has the definitions.",
    )
    qp.add_argument("result", type=Path, metavar="RESULT", help=".parquet, .csv or .jsonl")
    qp.add_argument("--truth", type=Path, required=True, metavar="TRUTH", help="the true results")
    qp.add_argument(
        "--recall-period",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="P_meas, seconds: recall is measured over the last P at every true instant, and "
        "per tumbling period of P (default 60, Table 4.2)",
    )
    qp.add_argument(
        "--time-unit",
        choices=("s", "ms", "us"),
        default="s",
        help="the unit of _ts (the query's time base; default s)",
    )
    qp.add_argument(
        "--max-error",
        type=positive_float,
        metavar="EPS",
        help="Phi(EPS): share of results with relative error <= EPS",
    )
    qp.add_argument(
        "--min-recall",
        type=_fraction,
        metavar="GAMMA",
        help="Phi(GAMMA) and Phi(0.99 GAMMA): share of recall measurements >= the value",
    )
    qp.add_argument(
        "--key",
        type=_names,
        metavar="COLS",
        help="group-key columns (default: the columns that are not --value)",
    )
    qp.add_argument(
        "--value",
        type=_names,
        metavar="COLS",
        help="aggregate columns (default: the floating-point ones)",
    )
    qp.add_argument(
        "--count",
        metavar="COL",
        help="a COUNT column among the values: window coverage = produced / true count",
    )
    qp.add_argument(
        "--any-instant",
        action="store_true",
        help="recall: a true row counts as produced when RESULT has it at any instant (ISTREAM "
        "joins whose rows carry their tuples' timestamps: a result completed by a late tuple "
        "comes at a later instant)",
    )
    qp.add_argument("--json", action="store_true", help="print one JSON object")


def _default_duration() -> float:
    from engines.defaults import DEFAULT_DURATION_S

    return DEFAULT_DURATION_S

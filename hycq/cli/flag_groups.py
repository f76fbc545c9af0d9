"""Flag groups several commands share (the optimizer's, the engines' settings, migration, the
quality target) and the option objects made from them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hycq.cli.arguments import (
    bounded_float,
    bounded_int,
    engine_names,
    fraction,
    open_fraction,
    positive_float,
    rate_float,
)
from optimizer.ir.errors import HycqError, OptionError
from optimizer.ir.limits import (
    LIMIT,
)


def engine_settings_flags(p: argparse.ArgumentParser) -> None:
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
                kind = bounded_int(1, int(high)) if int_kind else bounded_float(high)
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


def plan_flags(p: argparse.ArgumentParser) -> None:
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


def optimizer_flags(
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
        "Python thread; predicts measured throughput better, docs/performance.md) or "
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


def migration_flags(p: argparse.ArgumentParser) -> None:
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


def quality_flags(p: argparse.ArgumentParser) -> None:
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
        type=open_fraction,
        metavar="1-DELTA",
        help="with --max-error: P(error <= EPS) >= 1-DELTA (default 0.95, Table 4.2)",
    )
    g.add_argument(
        "--min-recall",
        type=fraction,
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

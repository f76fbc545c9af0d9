"""``hycq calibrate``: measure this machine's unit costs, or refit a profile from runs
(``--from``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from hycq.cli.arguments import (
    engine_names,
    positive_float,
    seed_int,
)
from hycq.cli.common import (
    check_outputs,
)
from hycq.cli.flag_groups import (
    engine_settings_flags,
    settings_of,
)
from optimizer.ir.errors import OptionError


def register(sub: Any) -> None:
    """Add the command's parser to ``sub`` (the top-level subparsers)."""
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
    engine_settings_flags(cal)
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
        "--seed", type=seed_int, default=0, help="seed of the held-out split (default: 0)"
    )


def run(args: argparse.Namespace) -> int:

    from hycq import api
    from hycq.calibrate import Settings, calibrate, quick

    if args.from_paths is not None:
        return _refit(args)
    for flag, given in (
        ("--profile", args.profile is not None),
        ("--weight", args.weight != 1.0),
        ("--holdout", args.holdout != 0.25),
        ("--seed", args.seed != 0),
    ):
        if given:
            raise OptionError(f"{flag} is for refitting", hint="add --from PATH ...")
    engines = api.parse_engines(args.engines)
    base = quick() if args.quick else Settings()

    def progress(message: str) -> None:
        sys.stderr.write(f"measuring {message}\n")

    settings = dataclasses.replace(
        base, engines=engines, progress=progress, engine_settings=settings_of(args)
    )
    summary = calibrate(args.out, settings)
    for warning in summary["warnings"]:
        sys.stderr.write(f"warning: {warning}\n")
    us = {k: v * 1e6 for k, v in summary["parameters"].items()}
    print(f"wrote {summary['profile']} in {summary['seconds']:.1f} s")
    print("row engine, us per tuple: " + ", ".join(f"{k} {v:.3g}" for k, v in us.items()))
    for engine, c in summary["engines"].items():
        if engine in engines:
            print(
                f"{engine}: fixed {1e3 * c['fixed']:.3g} ms per query; ns per row: "
                + ", ".join(
                    f"{k} {1e9 * v:.3g}"
                    for k, v in c.items()
                    if k != "fixed" and not k.startswith("inc_") and v is not None
                )
            )
    for engine, e in summary["sql_prediction_error"].items():
        print(
            f"{engine} SQL time, median relative error over {e['points']} slides: "
            f"calibrated {100 * e['calibrated']:.0f}%, analytical {100 * e['analytical']:.0f}%"
        )
    return 0


def _refit(args: argparse.Namespace) -> int:
    """``hycq calibrate --from PATH...``: refit a profile with what runs measured."""
    import datetime as dt

    from cost_models.calibrated import default_profile_path, load_profile
    from cost_models.refit import refit
    from engines.output_files import check_read_once, check_writable, same_file, write_bytes
    from hycq.observations import extract_all
    from optimizer.ir.errors import ConfigError

    if args.quick:
        raise OptionError("--quick measures; --from takes no new measurements")
    if not 0.0 <= args.holdout < 1.0:
        raise OptionError(f"--holdout must be in [0, 1), got {args.holdout}")
    path = args.profile if args.profile is not None else default_profile_path()
    if not path.exists():
        raise ConfigError(
            f"no calibration profile at {path} to refit",
            hint="run 'hycq calibrate' first (or pass --profile IN.json)",
        )
    out = args.out if args.out is not None else path
    # The profile may be refit in place (--out defaults to it; a --from naming it is refused
    # as a profile when read); the metrics it reads may not be written over, nor counted twice.
    check_read_once("--from", args.from_paths)
    if not same_file(out, path):
        check_outputs([("--from", p) for p in args.from_paths], [("--out", out)])
    profile = load_profile(path)
    check_writable(out, "--out")
    observations, _ = extract_all(args.from_paths, lambda m: sys.stderr.write(f"warning: {m}\n"))
    new, report = refit(
        profile, observations, weight=args.weight, holdout=args.holdout, seed=args.seed
    )
    record = new["refit"]["history"][-1]
    record["created"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    record["profile"] = str(path)
    record["sources"] = [str(p) for p in args.from_paths]
    write_bytes(out, json.dumps(new, indent=2) + "\n", "--out")

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    print(
        f"wrote {out}: {report.observations} observations from {len(args.from_paths)} "
        f"file(s), {report.used} used, {report.rejected} rejected as outliers, "
        f"{report.held_out} held out"
    )
    print(
        f"{'fit':16s} {'obs':>5s} {'used':>5s} {'rej':>4s} {'held':>5s} {'before':>8s} "
        f"{'after':>8s}"
    )
    for name, f in report.fits.items():
        print(
            f"{name:16s} {f.observations:5d} {f.used:5d} {f.rejected:4d} {f.held_out:5d} "
            f"{pct(f.error_before):>8s} {pct(f.error_after):>8s}"
            + (f"  ({f.note})" if f.note else "")
        )
    print(
        f"{'overall':16s} {report.observations:5d} {report.used:5d} {report.rejected:4d} "
        f"{report.held_out:5d} {pct(report.error_before):>8s} {pct(report.error_after):>8s}"
    )
    print(
        "before/after: median relative error of the old and the refit profile on the "
        "held-out observations"
    )
    return 0

"""``hycq data generate``'s generators: smart-plug readings into one file, keyed, multiway
and the dissertation's out-of-order join workloads into a folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

from hycq.cli.common import (
    check_folder_files,
    check_outputs,
)
from optimizer.ir.errors import OptionError
from optimizer.ir.limits import (
    MAX_RATE,
)


def generate_smartplug(args: argparse.Namespace) -> int:
    """Smart-plug readings in the DEBS 2014 format into one .csv or .parquet file."""
    from engines.output_files import check_writable
    from engines.sources.budget import Budget
    from engines.sources.delays import parse_delay
    from engines.sources.smartplug import generate_to_file
    from optimizer.ir.profile import parse_profile

    keyed_only = [
        flag
        for flag, given in (
            ("--stream", bool(args.stream)),
            ("--join-streams", args.join_streams is not None),
            ("--shift-at", args.shift_at is not None),
            ("--uniform", args.uniform),
            ("--keys", args.keys != 100),
            ("--skew", args.skew != 0.0),
            ("--time-unit", args.time_unit != "s"),
            ("--origin", args.origin is not None),
            ("--format", args.format != "csv"),
        )
        if given
    ]
    if keyed_only:
        raise OptionError(
            f"{', '.join(keyed_only)}: only for --generator keyed",
            hint="add --generator keyed, or drop the option",
        )
    suffix = args.out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise OptionError(
            f"--out must end in .csv or .parquet, got '{args.out}'",
            hint="e.g. --out readings.parquet",
        )
    profile = None
    if args.rate_profile is not None:
        if args.rate is not None:
            raise OptionError("--rate and --rate-profile exclude each other", hint="drop one")
        profile = parse_profile(
            args.rate_profile, "--rate-profile", high=MAX_RATE, positive_somewhere=True
        )
    delay = None if args.delay is None else parse_delay(args.delay, "--delay")
    if delay is not None:
        delay.max_ticks(1)  # the smart-plug stream is in whole seconds
    if args.plugs is not None and args.houses is not None:
        raise OptionError("--plugs and --houses exclude each other", hint="drop one")
    rate = args.rate
    if args.plug_rate is not None:
        if args.rate is not None or profile is not None:
            raise OptionError(
                "--plug-rate sets the rate (plugs x R): it excludes --rate and --rate-profile",
                hint="drop one",
            )
        plugs = args.plugs if args.plugs is not None else _default_plugs(args.houses)
        rate = plugs * args.plug_rate
        if rate > MAX_RATE:
            raise OptionError(
                f"--plug-rate {args.plug_rate:g} x {plugs:,} plugs is {rate:g} tuples/s, above "
                f"the largest rate hycq accepts ({MAX_RATE:g})",
                hint="lower --plug-rate, --plugs or --houses",
            )
    if rate is None and profile is None:
        rate = _smartplug_rate()
    load_share = 0.5 if args.load_share is None else args.load_share
    if not 0.0 <= load_share <= 1.0:
        raise OptionError(f"--load-share must be in [0, 1], got {load_share:g}", hint="e.g. 0.9")
    note = Path(f"{args.out}.README.md")
    check_outputs([], [("--out", args.out), ("its delay note", note if delay else None)])
    check_writable(args.out, "--out")
    budget = Budget(
        args.out,
        suffix[1:],
        "lower --seconds or the rate (--rate, --plug-rate, --rate-profile), or write elsewhere",
    )
    rows = generate_to_file(
        args.out,
        seconds=args.seconds,
        rate=rate,
        houses=args.houses if args.houses is not None else 40,
        seed=args.seed,
        rate_profile=profile,
        delay=delay,
        plugs=args.plugs,
        load_share=load_share,
        before=budget.before,
        progress=budget.add,
    )
    sys.stderr.write(f"wrote {rows} rows to {args.out}\n")
    if delay is not None:
        from engines.output_files import write_bytes
        from engines.sources.delays import readme_text

        write_bytes(note, readme_text(args.out.name, {"readings": delay}, "s", args.seed), "--out")
        sys.stderr.write(f"wrote {note} (the delay parameters)\n")
    return 0


def _smartplug_rate() -> float:
    """The default rate of generated smart-plug data: the shipped catalog's, the rate 'hycq
    run' gives its generator (one default for both)."""
    from optimizer.sql.catalog import load_catalog

    catalog = Path(__file__).resolve().parents[2] / "queries" / "smartplug" / "catalog.toml"
    stream = load_catalog(catalog).get("readings")
    assert stream is not None and stream.rate is not None
    return float(stream.rate)


def refuse_smartplug_flags(args: argparse.Namespace) -> None:
    for flag, given in (
        ("--houses", args.houses),
        ("--plugs", args.plugs),
        ("--plug-rate", args.plug_rate),
        ("--load-share", args.load_share),
    ):
        if given is not None:
            raise OptionError(f"{flag} is for --generator smartplug", hint=f"drop {flag}")


def _default_plugs(houses: int | None) -> int:
    from engines.sources.smartplug import SmartPlugGenerator

    return SmartPlugGenerator(houses=houses if houses is not None else 40).plugs


def generate_multiway(args: argparse.Namespace) -> int:
    from engines.output_files import write_bytes
    from engines.sources.budget import Budget
    from engines.sources.multiway import query_text, workload, write_workload

    refuse_smartplug_flags(args)

    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise OptionError(f"--out {out} is a file; --generator multiway writes a folder")
    if not out.parent.exists():
        raise OptionError(f"output folder does not exist: {out.parent}")
    rate = args.rate if args.rate is not None else 100.0
    keys = args.keys if args.keys != 100 else None
    _check_multiway(args, rate, keys)
    streams = workload(args.shape, args.ways, rate, args.window, args.multiplicity, keys)
    check_folder_files(out, [f"{s.name}.{args.format}" for s in streams], "query.sql")
    budget = Budget(out, args.format, "lower --seconds, --rate or --multiplicity", in_memory=True)
    files = write_workload(
        streams, out, args.seconds, args.seed, args.format, budget.before, budget.add
    )
    write_bytes(out / "query.sql", query_text(args.shape, streams, args.window) + "\n", "--out")
    names = ", ".join(p.name for p in files.values())
    sys.stderr.write(f"wrote {names}, catalog.toml and query.sql to {out}\n")
    return 0


def _check_multiway(args: argparse.Namespace, rate: float, keys: int | None) -> None:
    """The multiway workload's derived numbers stay in range: t's rate (q3: --rate x
    --multiplicity) and the join values' domain (rate x --window, INTEGER columns)."""
    if args.shape == "q3" and rate * args.multiplicity > MAX_RATE:
        raise OptionError(
            f"--rate {rate:g} x --multiplicity {args.multiplicity:g} gives stream t "
            f"{rate * args.multiplicity:g} tuples/s, above the largest rate hycq accepts "
            f"({MAX_RATE:g})",
            hint="lower --rate or --multiplicity",
        )
    domain = keys if keys is not None else round(rate * args.window)
    if domain > 2**31 - 1:
        raise OptionError(
            f"--rate {rate:g} x --window {args.window:g} makes the join values range over "
            f"{domain:,} keys, more than an INTEGER column holds (2^31 - 1)",
            hint="lower --rate or --window, or give --keys",
        )


def generate_qddh(args: argparse.Namespace) -> int:
    from engines.sources.budget import Budget
    from engines.sources.keyed import DEFAULT_ORIGIN
    from engines.sources.qddh_joins import RATE, WORKLOADS, write_workload

    fixed = [
        flag
        for flag, given in (
            ("--stream", bool(args.stream)),
            ("--join-streams", args.join_streams is not None),
            ("--shift-at", args.shift_at is not None),
            ("--uniform", args.uniform),
            ("--keys", args.keys != 100),
            ("--skew", args.skew != 0.0),
            ("--time-unit", args.time_unit != "s"),
            ("--houses", args.houses is not None),
            ("--plugs", args.plugs is not None),
            ("--plug-rate", args.plug_rate is not None),
            ("--load-share", args.load_share is not None),
            ("--rate-profile", args.rate_profile is not None),
            ("--delay", args.delay is not None),
        )
        if given
    ]
    if fixed:
        raise OptionError(
            f"{', '.join(fixed)}: not for --generator {args.generator} (its streams, keys and "
            "delays are fixed by the dissertation; --seconds, --rate, --seed, --origin and "
            "--format apply)",
            hint="drop the option, or use --generator keyed",
        )
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise OptionError(f"--out {out} is a file; --generator {args.generator} writes a folder")
    if not out.parent.exists():
        raise OptionError(f"output folder does not exist: {out.parent}")
    names = [f"{name}.{args.format}" for name in WORKLOADS[args.generator][0]]
    check_folder_files(out, names, "README.md")
    origin = args.origin if args.origin is not None else DEFAULT_ORIGIN
    rate = args.rate if args.rate is not None else RATE
    budget = Budget(out, args.format, "lower --seconds or --rate", in_memory=True)
    counts = write_workload(
        out,
        args.generator,
        args.seconds,
        args.seed,
        origin,
        args.format,
        rate,
        budget.before,
        budget.add,
    )
    files = ", ".join(f"{name}.{args.format} ({n} rows)" for name, n in counts.items())
    sys.stderr.write(f"wrote {files}, catalog.toml and README.md to {out}\n")
    return 0


def generate_keyed(args: argparse.Namespace) -> int:
    from engines.sources.budget import Budget
    from engines.sources.delays import parse_delay
    from engines.sources.joins import join_workload
    from engines.sources.keyed import DEFAULT_ORIGIN, KeyedStream, parse_stream_spec, write_workload
    from optimizer.ir.profile import parse_profile

    refuse_smartplug_flags(args)
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise OptionError(
            f"--out {out} is a file; the keyed generator writes a folder",
            hint="give a folder, e.g. --out data/",
        )
    if not out.parent.exists():
        raise OptionError(f"output folder does not exist: {out.parent}")
    profile = None
    if args.rate_profile is not None:
        if args.rate is not None:
            raise OptionError("--rate and --rate-profile exclude each other", hint="drop one")
        profile = parse_profile(
            args.rate_profile, "--rate-profile", high=MAX_RATE, positive_somewhere=True
        )
    if args.join_streams is None and (args.shift_at is not None or args.uniform):
        raise OptionError("--shift-at and --uniform go with --join-streams N")
    delay = None if args.delay is None else parse_delay(args.delay, "--delay")
    if delay is not None:
        delay.max_ticks(1 if args.time_unit == "s" else 1000)  # whole ticks of --time-unit
    if args.join_streams is not None:
        if args.stream:
            raise OptionError(
                "--join-streams writes its own streams: drop --stream",
                hint="or drop --join-streams",
            )
        shift = args.shift_at if args.shift_at is not None else args.seconds / 2
        streams = join_workload(
            args.join_streams,
            rate=args.rate if args.rate is not None else 1.0,
            shift_at=shift,
            uniform=args.uniform,
            time_unit=args.time_unit,
        )
        if profile is not None:
            streams = [dataclasses.replace(s, rate_profile=profile) for s in streams]
        if delay is not None:
            streams = [dataclasses.replace(s, delay=delay) for s in streams]
    else:
        defaults = KeyedStream(
            "x",
            rate=args.rate if args.rate is not None else 20.0,
            keys=args.keys,
            skew=args.skew,
            time_unit=args.time_unit,
            rate_profile=profile,
            delay=delay,
        )
        specs = args.stream or ["r", "s", "t"]
        streams = [parse_stream_spec(spec, defaults) for spec in specs]
    check_folder_files(out, [f"{s.name}.{args.format}" for s in streams])
    origin = args.origin if args.origin is not None else DEFAULT_ORIGIN
    budget = Budget(
        out, args.format, "lower --seconds or the streams' rates (--rate, --stream NAME:rate=R)"
    )
    counts = write_workload(
        out, streams, args.seconds, args.seed, origin, args.format, budget.before, budget.add
    )
    files = ", ".join(f"{name}.{args.format} ({n} rows)" for name, n in counts.items())
    sys.stderr.write(f"wrote {files} and catalog.toml to {out}\n")
    return 0


#: ``--generator NAME`` -> what writes its data (a new generator: a function here and its
#: flags in hycq/cli/cmd_data.py).
GENERATORS: dict[str, Callable[[argparse.Namespace], int]] = {
    "smartplug": generate_smartplug,
    "keyed": generate_keyed,
    "multiway": generate_multiway,
    "x3": generate_qddh,
    "x4": generate_qddh,
}


def generate(args: argparse.Namespace) -> int:
    """``hycq data generate``: the chosen generator."""
    return GENERATORS[args.generator](args)

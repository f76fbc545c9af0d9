"""``hycq data generate`` and ``hycq data publish``: synthetic data into files, a stream to an
MQTT broker. The generators are in hycq/cli/generators.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hycq.cli.arguments import (
    CommandParser,
    bounded_int,
    default_duration,
    positive_float,
    positive_int,
    rate_float,
    seed_int,
    skew_float,
)
from hycq.cli.common import (
    check_outputs,
)
from hycq.cli.generators import GENERATORS, generate
from optimizer.ir.limits import (
    MAX_EPOCH_S,
    MAX_HOUSES,
    MAX_KEYS,
    MAX_PLUGS,
    MAX_SKEW,
)


def register(sub: Any) -> None:
    """Add the command's parser to ``sub`` (the top-level subparsers)."""
    data = sub.add_parser("data", help="synthetic data: smart-plug readings, keyed streams")
    data_sub = data.add_subparsers(
        dest="data_command", metavar="ACTION", parser_class=CommandParser
    )
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
        choices=tuple(GENERATORS),
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
        type=bounded_int(1, MAX_HOUSES),
        help=f"smartplug: number of houses (40; at most {MAX_HOUSES:,})",
    )
    shape = gen.add_argument_group(
        "smart-plug data shapes (--generator smartplug; the real data: 1,677 plugs in 40 "
        "houses, 2 readings per plug per second, half load, half work)"
    )
    shape.add_argument(
        "--plugs",
        type=bounded_int(1, MAX_PLUGS),
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
    gen.add_argument("--seed", type=seed_int, default=42, help="random seed (42)")
    mw = gen.add_argument_group("multiway join workloads (--generator multiway)")
    mw.add_argument(
        "--shape",
        choices=("q3", "clique", "star"),
        default="q3",
        help="q3: A-Caching's r(a) join s(a,b) join t(b); clique: every pair of --ways streams "
        "equal on its own column (JIT's shape); star: a hub and --ways - 1 spokes (default q3)",
    )
    mw.add_argument(
        "--ways", type=positive_int, default=4, help="streams of a clique or star (2-8; 4)"
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
        type=positive_int,
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
        type=bounded_int(1, MAX_KEYS),
        default=100,
        help=f"key domain 0..KEYS-1 (100; at most {MAX_KEYS:,})",
    )
    keyed.add_argument(
        "--skew",
        type=skew_float,
        default=0.0,
        help=f"Zipf exponent of the key distribution (0: uniform; at most {MAX_SKEW:g})",
    )
    keyed.add_argument("--time-unit", choices=("s", "ms"), default="s", help="timestamp unit (s)")
    keyed.add_argument(
        "--origin",
        type=bounded_int(0, MAX_EPOCH_S),
        help="epoch seconds of offset 0 (default 1400000000)",
    )
    keyed.add_argument(
        "--format", choices=("csv", "parquet"), default="csv", help="file format (csv, with header)"
    )
    _publish_parser(data_sub)


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
        help=f"event-seconds to publish (generated streams default to {default_duration():g})",
    )
    pub.add_argument(
        "--pace",
        choices=("max", "realtime"),
        default="max",
        help="max: as fast as the broker acknowledges; realtime: each message when its "
        "first timestamp is due (default max)",
    )
    pub.add_argument("--batch", type=positive_int, default=1000, help="rows per message (1000)")
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


def _data_publish(args: argparse.Namespace) -> int:
    from engines.output_files import check_writable
    from hycq.publish import publish

    if args.dead_letter is not None:
        inputs = [("the source", args.source), ("--catalog", args.catalog)]
        if args.source.suffix.lower() == ".sql":
            from hycq.api import find_catalog

            inputs.append(("catalog", find_catalog(str(args.source), args.catalog)))
        check_outputs(inputs, [("--dead-letter", args.dead_letter)])
        check_writable(args.dead_letter, "--dead-letter")
    done = publish(
        args.source,
        args.to,
        catalog=args.catalog,
        stream=args.stream,
        rate=args.rate,
        duration=args.duration,
        pace=args.pace,
        batch=args.batch,
        fmt=args.payload_format,
        end=not args.no_end,
        dead_letter=args.dead_letter,
    )
    rate = done.rows / done.wall_s if done.wall_s > 0 else 0.0
    rejected = ""
    if done.rejected:
        where = "pass --dead-letter PATH to see them"
        if args.dead_letter is not None:
            where = f"dead letters: {args.dead_letter}"
        rejected = f"; {done.rejected:,} row{'s' if done.rejected != 1 else ''} rejected ({where})"
    print(
        f"published {done.rows:,} rows in {done.messages:,} messages to {args.to} "
        f"in {done.wall_s:.2f} s ({rate:,.0f} rows/s); source: {done.source}{rejected}"
    )
    return 0


def run(args: argparse.Namespace) -> int:
    if args.data_command == "publish":
        return _data_publish(args)
    return generate(args)

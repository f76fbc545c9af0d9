"""The ``hycq`` command line (docs/interface.md is the interface scripts rely on).

Exit status: 0 success; 2 bad user input (one ``error: ...`` message on stderr, no
traceback); 1 internal failure (traceback only with ``--debug``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hycq.cli_args import (
    build_parser,
    engine_names,
    quality_options,
    rate_float,
    settings_of,
)
from optimizer.ir.errors import HycqError, OptionError, UserError, did_you_mean
from optimizer.ir.limits import MAX_RATE

if TYPE_CHECKING:
    from engines.sources.mqtt import MqttUrl


def main(argv: Sequence[str] | None = None) -> int:
    from engines import interrupts

    previous = interrupts.install_default()  # SIGTERM/SIGHUP too unwind through cleanup
    code = 1
    try:
        args = build_parser().parse_args(argv)
        code = _main(args)
    except KeyboardInterrupt as err:  # a signal outside the command (argument parsing)
        code = _interrupted(getattr(err, "signum", None))
    finally:
        late = _clean_up(previous)
    return _interrupted(late) if late is not None else code


def _clean_up(previous: dict[int, Any]) -> int | None:
    """Remove every temporary file and restore the signal handlers, even when a signal
    interrupts this; returns the number of such a signal."""
    from engines import interrupts
    from engines.output_files import remove_temporaries

    caught: int | None = None
    while True:
        try:
            remove_temporaries()
            interrupts.restore(previous)
            return caught
        except KeyboardInterrupt as err:
            caught = getattr(err, "signum", None) or signal.SIGINT


def _main(args: argparse.Namespace) -> int:
    from engines import interrupts

    try:
        return _dispatch(args)
    except HycqError as err:
        if not isinstance(err, UserError) and interrupts.received() is not None:
            return _interrupted(interrupts.received())  # e.g. an engine cut short by it
        sys.stderr.write(err.render() + "\n")
        if args.debug and not isinstance(err, UserError):
            traceback.print_exc()
        return err.exit_code
    except KeyboardInterrupt as err:
        return _interrupted(getattr(err, "signum", None) or signal.SIGINT)
    except BrokenPipeError:
        return 0
    except MemoryError:
        sys.stderr.write(
            "error: out of memory\n  hint: the work does not fit this machine: lower --rate, "
            "the window range or the data size (hycq run stops itself earlier: "
            "--memory-limit MB)\n"
        )
        return 2
    except Exception as err:  # noqa: BLE001 - the one place that turns bugs into exit 1
        if interrupts.received() is not None:
            # A signal cut a call short and it reported that as its own error (DuckDB:
            # "Query interrupted"): the process was stopped, it did not fail.
            if args.debug:
                traceback.print_exc()
            return _interrupted(interrupts.received())
        if args.debug:
            traceback.print_exc()
        else:
            sys.stderr.write(
                f"internal error: {type(err).__name__}: {err}\n"
                "  this is a bug in hycq; rerun with --debug for the traceback\n"
            )
        return 1


def _interrupted(signum: int | None) -> int:
    sig = signal.Signals(signum or signal.SIGINT)
    sys.stderr.write(f"interrupted by {sig.name}\n")
    return 128 + int(sig)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "explain":
        return _explain(args)
    if args.command == "run":
        return _run(args)
    if args.command == "data":
        if args.data_command == "publish":
            return _data_publish(args)
        return _data_generate(args)
    if args.command == "calibrate":
        return _calibrate(args)
    if args.command == "bench":
        return _bench(args)
    if args.command == "report":
        return _report(args)
    if args.command == "quality":
        return _quality(args)
    raise OptionError(f"unknown command {args.command}")  # pragma: no cover


def _load_query(query: str | Path, catalog: Path | None) -> Any:
    """``hycq.api.load_query``, its binder's notes (a renamed result column) on stderr."""
    from hycq import api

    q = api.load_query(query, catalog)
    for note in q.notes:
        sys.stderr.write(f"note: {note}\n")
    return q


def _explain(args: argparse.Namespace) -> int:
    from hycq import api
    from hycq.planning import OptimizerOptions, optimize
    from hycq.reporting.text import engine_tag
    from optimizer.ir.display import render_plan

    engines = api.parse_engines(args.engines)
    q = _load_query(args.query, args.catalog)
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
            join_order=_join_order(args),
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
        _print_json(info)
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

    data = _parse_data(args.data)
    _check_data_streams([q], data)
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


def _join_order(args: argparse.Namespace) -> tuple[tuple[str, ...], ...] | None:
    from optimizer.phase_one import parse_join_order

    return parse_join_order(args.join_order) if args.join_order is not None else None


def _migration_options(args: argparse.Namespace) -> Any:
    from hycq.migrations import MigrationOptions, check_options, parse_migrate

    options = MigrationOptions(
        migrate=tuple(parse_migrate(m) for m in args.migrate),
        strategy=args.migration,
        adapt=args.adapt,
        reoptimize_every=args.reoptimize_every,
    )
    check_options(options)
    return options


def _check_data_streams(queries: list[Any], data: dict[str, Path | MqttUrl]) -> None:
    """``--data`` names: a stream the catalog does not have is exit 2; one that no query
    reads is ignored, with one warning line each (at once: a live run may be long)."""
    from engines.runtime.inputs import check_data_streams, unread_data

    plans = [q.plan for q in queries]
    for q in queries:
        check_data_streams(q.catalog, plans, data, "--data")
    for name in unread_data(plans, data):
        sys.stderr.write(
            f"warning: --data names stream '{name}', which the query does not read: ignored\n"
        )
        sys.stderr.flush()


#: ``--data STREAM=-``: the stream's raw CSV lines from standard input.
STDIN = Path("/dev/stdin")


def _checkpoint_options(args: argparse.Namespace) -> Any:
    """``--checkpoint``/``--checkpoint-every``/``--resume`` as CheckpointOptions (or None)."""
    from engines.runtime.checkpoint import CheckpointOptions

    if args.resume is not None:
        if args.checkpoint is not None and args.checkpoint.resolve() != args.resume.resolve():
            raise OptionError(
                "--resume DIR continues writing checkpoints to DIR: --checkpoint names another "
                "folder",
                hint="drop --checkpoint",
            )
        return CheckpointOptions(args.resume, args.checkpoint_every, resume=True)
    if args.checkpoint is not None:
        return CheckpointOptions(args.checkpoint, args.checkpoint_every)
    return None


def _checkpoint_files(checkpoint: Any) -> list[tuple[str, Path]]:
    """The files a checkpointed run writes into its folder under fixed names (its output and
    dead letters as they grow): outputs too, never an input or another output."""
    from engines.runtime.checkpoint_store import DEAD_LETTER_PARTIAL, OUTPUT_PARTIAL

    if checkpoint is None:
        return []
    flag = "--resume" if checkpoint.resume else "--checkpoint"
    return [(flag, checkpoint.directory / n) for n in (OUTPUT_PARTIAL, DEAD_LETTER_PARTIAL)]


def _kept_up(m: dict[str, Any]) -> str:
    """The summary's verdict: a live source by its lag (engines/runtime/live_lag.py), any
    other input by its rate."""
    verdict = "kept up" if m["kept_up"] else "did NOT keep up"
    if m.get("kept_up_rule") == "lag":
        lag = m["live_lag_s"]
        how = f"lag grew by at most {lag:.2g} s" if m["kept_up"] else f"fell {lag:.3g} s behind"
        return f"live source, {verdict}: {how}"
    return f"rate {m['rate']:,.4g}/s, {verdict}"


def _parse_data(specs: list[str]) -> dict[str, Path | MqttUrl]:
    from engines.sources.mqtt import MqttUrl, is_mqtt

    data: dict[str, Path | MqttUrl] = {}
    for spec in specs:
        stream, sep, path = spec.partition("=")
        if not sep or not stream or not path:
            raise OptionError(
                f"--data expects STREAM=PATH, got '{spec}'",
                hint="e.g. --data readings=readings.parquet",
            )
        if stream in data:
            raise OptionError(f"--data given twice for stream '{stream}'")
        if path == "-":  # standard input: read once, as lines arrive (a pipe or a terminal)
            if STDIN in data.values():
                raise OptionError(
                    f"--data {stream}=- : standard input is already read by another stream",
                    hint="only one stream can read stdin; give the others a file",
                )
            data[stream] = STDIN
        elif is_mqtt(path):
            data[stream] = MqttUrl.parse(path, f"--data {stream}=")
        else:
            data[stream] = Path(path)
    return data


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's dict; a key given twice raises (json keeps the last one silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _load_placement(spec: str) -> str | dict[str, str]:
    if spec in ("auto", "row", "column"):
        return spec
    path = Path(spec)
    if path.suffix.lower() != ".json":
        raise OptionError(f"--placement must be auto, row, column or a .json file, got '{spec}'")
    try:
        obj = json.loads(path.read_text(encoding="utf-8-sig"), object_pairs_hook=_unique_keys)
    except _DuplicateKey as dup:
        raise OptionError(
            f"placement file {path}: operator '{dup.key}' is given twice",
            hint="give each operator id once",
        ) from None
    except FileNotFoundError:
        raise OptionError(f"placement file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise OptionError(f"cannot read placement file {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise OptionError(
            f"placement file {path}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}"
        ) from None
    if not isinstance(obj, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in obj.items()
    ):
        raise OptionError(
            f"placement file {path} must be a JSON object mapping operator ids to engine "
            f"names ({', '.join(engine_names().split(','))})",
            hint='e.g. {"aggregate1": "duckdb"}',
        )
    from engines import registry

    for op_id, engine in obj.items():
        registry.get(engine, f"placement file {path} (operator '{op_id}')")
    return obj


def _run(args: argparse.Namespace) -> int:
    from engines.runtime import RunOptions
    from hycq import api
    from hycq.flags import CLI_OPTION_NAMES

    if len(args.query) > 1 or args.output_dir is not None:
        return _run_shared(args)
    if args.disorder_of:
        raise OptionError(
            "--disorder-of is for runs of several queries", hint="use --disorder for one query"
        )
    args.query = args.query[0]

    placement = _load_placement(args.placement)
    join_order = _join_order(args)
    migration = _migration_options(args)
    if args.report is not None:
        from hycq.reporting import check_out_path

        check_out_path(args.report, "--report")
    data = _parse_data(args.data)
    from engines.disorder.policies import check_available
    from engines.disorder.spec import parse_disorder

    disorder = parse_disorder(args.disorder)
    check_available(disorder)
    quality = quality_options(args)
    _check_quality_flags(disorder.kind, quality)
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
        checkpoint=_checkpoint_options(args),
    )
    from engines import registry

    registry.get_columnar(args.column_engine, "--column-engine")
    settings = settings_of(args)
    q = _load_query(args.query, args.catalog)
    _check_data_streams([q], data)
    inputs = _inputs(args.query, args.catalog, q.catalog, data.values(), args.cost_model)
    if isinstance(placement, dict):
        inputs.append(("--placement", Path(args.placement)))
    inputs += [("--migrate", path) for _, path in migration.migrate]
    _check_outputs(
        inputs,
        [
            ("--output", args.output),
            ("--metrics", args.metrics),
            ("--dead-letter", args.dead_letter),
            ("--report", args.report),
            *_checkpoint_files(options.checkpoint),
        ],
    )
    optimizer = api.OptimizerOptions(
        engines=_reachable_engines(migration, args.placement, placement, args.column_engine),
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


def _reachable_engines(
    migration: Any, flag: str, placement: str | dict[str, str], column_engine: str
) -> tuple[str, ...]:
    """The engines the run's plans may use. A forced strategy that moves row-engine state
    (``--migration ms|jisc|pt|hybmig|hybmig-lazy``) can only migrate between all-row plans:
    then ``--placement auto`` plans over the row engine alone, at the start as at every
    re-optimization (a note says so), and a placement with columnar operators is refused
    before the run (the first migration could only fail)."""
    from engines.migration import strategies

    engines = ("row", column_engine)
    if migration.strategy == "auto" or not migration.requested:
        return engines
    if not strategies.get(migration.strategy).row_only:
        return engines
    if placement == "auto":
        sys.stderr.write(
            f"note: --migration {migration.strategy} moves row-engine state: the run plans "
            "over the row engine only (--placement auto, and every re-optimization of "
            "--adapt)\n"
        )
        return ("row",)
    columnar = placement == "column" or (
        isinstance(placement, dict) and any(e != "row" for e in placement.values())
    )
    if columnar:
        raise OptionError(
            f"--migration {migration.strategy} moves row-engine state, but --placement "
            f"{flag} runs operators on a columnar engine: no migration of this run could "
            "happen",
            hint="use --placement row or auto, or --migration gpt, gms or ghm",
        )
    return engines


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


def _run_shared(args: argparse.Namespace) -> int:
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
    data = _parse_data(args.data)
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
    loaded = {name: _load_query(path, args.catalog) for name, path in names.items()}
    _check_data_streams(list(loaded.values()), data)
    for name, path in names.items():
        q = loaded[name]
        catalog = catalog or q.catalog
        inputs += _inputs(path, args.catalog, q.catalog, data.values(), args.cost_model)
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
    _check_outputs(inputs, outputs)
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


def _report(args: argparse.Namespace) -> int:
    from hycq import api
    from hycq.planning import OptimizerOptions, optimize
    from hycq.reporting import build_report, check_out_path, write_report

    check_out_path(args.out)
    q = _load_query(args.query, args.catalog)
    inputs = _inputs(args.query, args.catalog, q.catalog, [], args.cost_model)
    _check_outputs([*inputs, ("--bench", args.bench)], [("--out", args.out)])
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


def _bench(args: argparse.Namespace) -> int:
    from engines import registry
    from engines.output_files import check_writable, write_bytes
    from engines.runtime import json_text
    from hycq import api
    from hycq.bench import PLANS, BenchOptions, bench, plot

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
    for p in plans:
        if p not in PLANS:
            raise OptionError(
                f"unknown plan '{p}' in --plans",
                hint=did_you_mean(p, PLANS) or f"plans: {', '.join(PLANS)}",
            )
    if args.plot is not None and args.plot.suffix.lower() != ".png":
        raise OptionError(f"--plot must end in .png, got '{args.plot}'")
    queries = [_load_query(q, args.catalog) for q in args.queries]
    data = _parse_data(args.data)
    _check_data_streams(queries, data)
    if any(p == STDIN or not isinstance(p, Path) for p in data.values()):
        raise OptionError(
            "hycq bench replays its data at every rate and repeat: stdin (--data STREAM=-) "
            "and MQTT subscriptions can be read only once",
            hint="save the input to a file and pass its path",
        )
    inputs = [
        item
        for name, q in zip(args.queries, queries, strict=True)
        for item in _inputs(name, args.catalog, q.catalog, data.values(), args.cost_model)
    ]
    outputs = [("--json", args.json), ("--plot", args.plot)]
    _check_outputs(inputs, outputs)
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


def _calibrate(args: argparse.Namespace) -> int:
    import dataclasses

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
        _check_outputs([("--from", p) for p in args.from_paths], [("--out", out)])
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


def _data_publish(args: argparse.Namespace) -> int:
    from engines.output_files import check_writable
    from hycq.publish import publish

    if args.dead_letter is not None:
        inputs = [("the source", args.source), ("--catalog", args.catalog)]
        if args.source.suffix.lower() == ".sql":
            from hycq.api import find_catalog

            inputs.append(("catalog", find_catalog(str(args.source), args.catalog)))
        _check_outputs(inputs, [("--dead-letter", args.dead_letter)])
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


def _data_generate(args: argparse.Namespace) -> int:
    if args.generator == "keyed":
        return _generate_keyed(args)
    if args.generator == "multiway":
        return _generate_multiway(args)
    if args.generator in ("x3", "x4"):
        return _generate_qddh(args)
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
    _check_outputs([], [("--out", args.out), ("its delay note", note if delay else None)])
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

    catalog = Path(__file__).resolve().parents[1] / "queries" / "smartplug" / "catalog.toml"
    stream = load_catalog(catalog).get("readings")
    assert stream is not None and stream.rate is not None
    return float(stream.rate)


def _refuse_smartplug_flags(args: argparse.Namespace) -> None:
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


def _generate_multiway(args: argparse.Namespace) -> int:
    from engines.output_files import write_bytes
    from engines.sources.budget import Budget
    from engines.sources.multiway import query_text, workload, write_workload

    _refuse_smartplug_flags(args)

    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise OptionError(f"--out {out} is a file; --generator multiway writes a folder")
    if not out.parent.exists():
        raise OptionError(f"output folder does not exist: {out.parent}")
    rate = args.rate if args.rate is not None else 100.0
    keys = args.keys if args.keys != 100 else None
    _check_multiway(args, rate, keys)
    streams = workload(args.shape, args.ways, rate, args.window, args.multiplicity, keys)
    _check_folder_files(out, [f"{s.name}.{args.format}" for s in streams], "query.sql")
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


def _generate_qddh(args: argparse.Namespace) -> int:
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
    _check_folder_files(out, names, "README.md")
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


def _generate_keyed(args: argparse.Namespace) -> int:
    from engines.sources.budget import Budget
    from engines.sources.delays import parse_delay
    from engines.sources.joins import join_workload
    from engines.sources.keyed import DEFAULT_ORIGIN, KeyedStream, parse_stream_spec, write_workload
    from optimizer.ir.profile import parse_profile

    _refuse_smartplug_flags(args)
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
    _check_folder_files(out, [f"{s.name}.{args.format}" for s in streams])
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


def _check_folder_files(folder: Path, streams: list[str], *others: str) -> None:
    """A generator's files in its --out folder (the streams, catalog.toml and ``others``) are
    distinct files: a symlink or hard link between two of them would make one overwrite the
    other."""
    names = [*streams, "catalog.toml", *others]
    _check_outputs([], [(f"--out file {name}", folder / name) for name in names])


def _check_quality_flags(kind: str, quality: Any) -> None:
    """A quality target goes with ``--disorder quality`` and that policy needs one (exit 2);
    whether the query is one the models serve is checked when the run builds the policy,
    before any tuple is read (engines/disorder/quality.py)."""
    if kind == "quality" and (quality is None or quality.target is None):
        raise OptionError(
            "--disorder quality needs a quality target",
            hint="add --max-error EPS [--confidence C] for a windowed aggregate, or "
            "--min-recall GAMMA for a window join (docs/disorder-quality.md)",
        )
    if kind != "quality" and quality is not None:
        raise OptionError(
            "--max-error, --confidence, --min-recall, --recall-period, --adapt-method and "
            f"--quality-param only apply to --disorder quality (this run has --disorder {kind})",
            hint="add --disorder quality, or drop the quality flags",
        )


def _quality(args: argparse.Namespace) -> int:
    from hycq.quality import QualitySpec, measure_quality, read_result_file

    ticks = {"s": 1, "ms": 1000, "us": 1_000_000}[args.time_unit]
    period = round(args.recall_period * ticks)
    if period < 1:
        raise OptionError(
            f"--recall-period {args.recall_period:g} is below one tick ({args.time_unit})"
        )
    spec = QualitySpec(
        recall_period=period,
        max_error=args.max_error,
        min_recall=args.min_recall,
        keys=args.key,
        values=args.value,
        count=args.count,
        any_instant=args.any_instant,
    )
    result = read_result_file(args.result, "RESULT")
    truth = read_result_file(args.truth, "--truth")
    q = measure_quality(result, truth, spec)
    if args.json:
        _print_json(q)
        return 0
    r = q["recall"]
    lines = [f"{q['results']} result rows, {q['truth_rows']} true rows"]
    overall = "n/a" if r["overall"] is None else f"{r['overall']:.6f}"
    lines.append(
        f"recall {overall} ({r['matched']} matched, {r['missing']} missing, {r['extra']} "
        f"extra); gamma over {args.recall_period:g} s: {r['measurements']} measurements, "
        f"min {_fmt(r['min_gamma'])}; periods after the first: least "
        f"{_fmt(r['worst_period_after_first'])}"
    )
    if "phi_gamma" in r:
        lines.append(
            f"Phi({r['gamma']:g}) = {_fmt(r['phi_gamma'])}, "
            f"Phi(0.99*{r['gamma']:g}) = {_fmt(r['phi_099_gamma'])}"
        )
    if "error" in q:
        e = q["error"]
        lines.append(
            f"relative error over {e['true_results']} true results "
            f"({', '.join(q['columns']['values'])}): "
            f"mean {_fmt(e['mean'])}, p95 {_fmt(e['p95'])}, max {_fmt(e['max'])}, "
            f"{e['wrong']} wrong, {e['missing']} missing, {e['extra']} extra"
        )
        if "phi_eps" in e:
            lines.append(f"Phi({e['max_error']:g}) = {_fmt(e['phi_eps'])}")
        c = q.get("coverage")
        if c is not None:
            lines.append(
                f"coverage ({c['column']}): mean {_fmt(c['mean'])}, min {_fmt(c['min'])}, "
                f"full in {_fmt(c['full'])} of results"
            )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.6g}"


def _inputs(
    query: str, catalog_arg: Path | None, catalog: Any, data: Any, cost_model: str | None
) -> list[tuple[str, Path | str | None]]:
    """Every file a command reads: no output may be written over one of them."""
    from cost_models.registry import files_read
    from hycq.api import find_catalog

    found: list[tuple[str, Path | str | None]] = [("query file", query)]
    found.append(("catalog", find_catalog(query, catalog_arg)))
    found += [("--data", p) for p in data if isinstance(p, Path)]  # not MQTT
    found += [
        (f"the catalog's source of '{s.name}'", s.source.path)
        for s in catalog.streams.values()
        if s.source.path is not None
    ]
    found += [("cost model file", p) for p in files_read(cost_model)]
    return found


def _check_outputs(
    inputs: Sequence[tuple[str, Path | str | None]],
    outputs: Sequence[tuple[str, Path | str | None]],
) -> None:
    from engines.output_files import check_distinct

    check_distinct(inputs, outputs)


def _print_json(obj: Any) -> None:
    from engines.runtime import json_text

    sys.stdout.write(json_text(obj))  # strict JSON: NaN and infinities as null


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

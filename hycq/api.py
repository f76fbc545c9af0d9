"""The public Python API: load a query, explain it (optimized plan and placement), and run it
(``execute`` over given Arrow tables, ``run`` over its sources).

The ``hycq`` package is the composition root: its modules (this one, ``planning``, ``bench``,
``calibrate``, ``cli``, ``reporting``) wire the optimizer, the engines and the cost models
together; nothing below it imports it. The CLI is a thin layer over these functions.

Example:
    >>> q = load_query(QUERIES / "smartplug" / "q5.sql")
    >>> [op["kind"] for op in explain(q)["operators"]][:3]
    ['source', 'window', 'select']
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from engines import registry
from engines.assembly import Assembly, EngineSettings, MigratingAssembly
from engines.migration import strategies
from engines.row.lowering import JoinSettings
from engines.runtime import RunOptions, StreamInput, run_plan
from engines.runtime.inputs import plan_time_unit
from hycq import migrations
from hycq.migrations import MigrationOptions, order_label, same_order
from hycq.planning import SAMPLE_ROWS, Optimized, OptimizerOptions, optimize, sample_streams
from hycq.query import (
    PLACEMENTS,
    QUERIES,
    LoadedQuery,
    PlacementRequest,
    ResolvedPlan,
    find_catalog,
    load_query,
    read_query_text,
    resolve_placement,
    resolve_plan,
)
from optimizer.costmodel import PlanCoster
from optimizer.estimate import estimate
from optimizer.ir.catalog import TIME_UNITS_MS, Catalog
from optimizer.ir.errors import OptionError, QueryError, UserError
from optimizer.ir.join_chains import JOIN_IMPLS
from optimizer.ir.plan import LogicalPlan
from optimizer.ir.plan import Source as SourceOp
from optimizer.join_impl import choose_all
from optimizer.phase_one import _ChainModel


def parse_engines(spec: str) -> tuple[str, ...]:
    """``row,duckdb`` -> ('row', 'duckdb'); the row engine is always included. Names are
    those of the engine registry (an unknown one is an OptionError naming them)."""
    names = [s.strip().lower() for s in spec.split(",") if s.strip()]
    if not names:
        raise OptionError(
            f"--engines names no engine: '{spec}'",
            hint=f"e.g. --engines {','.join(registry.names())}",
        )
    for n in names:
        registry.get(n, "--engines")
    if "row" not in names:
        names.insert(0, "row")
    return tuple(dict.fromkeys(names))


def explain(
    q: LoadedQuery,
    rate: float | None = None,
    engines: tuple[str, ...] = ("row", "duckdb"),
    *,
    cost_model: str | None = None,
    exhaustive: bool = False,
    feasibility: bool = True,
    row_core: str = "shared",
    optimized: Optimized | None = None,
) -> dict[str, Any]:
    """The CONTRACT's ``explain --json`` object: the optimizer's plan and how it was found.

    Operators are those of the Phase-One plan (joins reordered); their ids are what
    placement files and ``run --placement`` use. See :mod:`hycq.planning` for the
    per-operator fields.
    """
    opt = optimized or optimize(
        q,
        OptimizerOptions(
            rate=rate,
            engines=engines,
            cost_model=cost_model,
            exhaustive=exhaustive,
            feasibility=feasibility,
            row_core=row_core,
        ),
    )
    one, two = opt.phase_one, opt.phase_two
    p1_ms, p2_ms = 1e3 * one.seconds, 1e3 * two.seconds
    stream_rates = opt.estimates.rates
    return {
        "query": q.name,
        "rate": rate if rate is not None else _default_rate(q),
        "stream_rates": dict(stream_rates),
        "engines": list(opt.options.engines),
        "cost_model": opt.model.name,
        "row_core": opt.options.row_core,
        "feasibility_check": opt.options.feasibility,
        "operators": opt.operator_rows(),
        "groups": [
            {
                "engine": g.engine,
                "operators": list(g.operators),
                "top": g.top,
                "u": opt.coster.group_own_u(g.engine, g.operators),
                "seconds_per_invocation": opt.model.group_cost(g, opt.estimates),
            }
            for g in opt.groups
        ],
        "r2r_operators": len(opt.plan.r2r_ids()),
        "cost": {"bottleneck": opt.cost.bottleneck, "utilization": opt.cost.utilization},
        "feasible": opt.cost.feasible,
        "max_feasible_rate": max_feasible_rate(opt),
        "join_orders": [list(o) for o in one.orders],
        "plans_examined": {
            "phase_one": one.plans_examined,
            "phase_two": two.plans_examined,
            "phase_two_partial": two.partial_plans,
        },
        "search": {"exhaustive": two.exhaustive, "decomposed": two.decomposed},
        "statistics": {
            "source": opt.statistics_note,
            **(opt.statistics.to_json() if opt.statistics is not None else {}),
        },
        "optimization_ms": {
            "bind": round(q.bind_ms, 3),
            "sample": round(opt.sample_ms, 3),
            "phase_one": round(p1_ms, 3),
            "phase_two": round(p2_ms, 3),
            "total": round(p1_ms + p2_ms, 3),
        },
    }


def max_feasible_rate(opt: Optimized, placement: dict[str, str] | None = None) -> float | None:
    """The input rate at which a placement's (default: the chosen one's) predicted C_b
    reaches 1: the predicted maximum sustainable throughput (None if unbounded).

    Every unit's u scales with the rate except the per-invocation overheads, so this
    searches the rate (bisection on re-estimated costs of the same placement).
    """

    def cb(rate: float) -> float:
        est = estimate(opt.plan, opt.query.catalog, rates=rate, sample=opt.statistics)
        coster = PlanCoster(est, opt.model, opt.coster.shared_row_core)
        return coster.placement_cost(chosen).bottleneck

    chosen = placement if placement is not None else opt.placement

    base = opt.options.rate or _default_rate(opt.query) or 1000.0
    lo, hi = 0.0, base
    if cb(hi) <= 1.0:
        while cb(hi) <= 1.0:
            lo, hi = hi, hi * 4
            if hi > 1e10:
                return None
    for _ in range(40):
        mid = (lo + hi) / 2
        if cb(mid) <= 1.0:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-3 * hi:
            break
    return round(lo, 1)


def _default_rate(q: LoadedQuery) -> float | None:
    """The catalog rate of the query's input streams when they agree, else None."""
    rates = set()
    for op_id in q.plan.sources:
        op = q.plan.op(op_id)
        assert isinstance(op, SourceOp)
        stream = q.catalog.get(op.stream)
        assert stream is not None
        rates.add(stream.rate)
    return rates.pop() if len(rates) == 1 else None


__all__ = [
    "PLACEMENTS",
    "QUERIES",
    "EngineSettings",
    "LoadedQuery",
    "PlacementRequest",
    "QueryError",
    "ResolvedPlan",
    "execute",
    "explain",
    "find_catalog",
    "join_settings",
    "load_query",
    "max_feasible_rate",
    "parse_engines",
    "read_query_text",
    "resolve_placement",
    "resolve_plan",
    "run",
]


# -- running ---------------------------------------------------------------------------------


def execute(
    plan: LogicalPlan,
    catalog: Catalog,
    inputs: dict[str, Any],
    placement: PlacementRequest = "row",
    options: Any = None,
    column_engine: str = "duckdb",
    settings: EngineSettings | None = None,
    optimizer: OptimizerOptions | None = None,
    schedule: Any = None,
    join: Any = None,
) -> Any:
    """Run ``plan`` over in-memory Arrow tables (one per stream) and return a RunResult.

    ``join`` (``engines.row.lowering.JoinSettings``) chooses the row engine's join
    implementations (default: binary trees).

    The result table holds the query's output columns plus ``_ts``. With ``placement="auto"``
    the plan is optimized first (``optimizer`` options; statistics from the tables) and the
    optimizer's plan and placement run. ``schedule``: scripted migrations
    (``engines.migration.ScheduledMigration``, targets already resolved): the run goes
    through the migration driver.
    """
    opts = options if options is not None else RunOptions(keep_results=True)
    extra = None
    if placement == "auto":
        tables = {
            n: t if isinstance(t, pa.Table) else pa.Table.from_batches(list(t))
            for n, t in inputs.items()
        }
        inputs = dict(tables)
        q = LoadedQuery("", "<plan>", catalog, plan, 0.0)
        samples = {n: t.slice(0, SAMPLE_ROWS) for n, t in tables.items()}
        base = optimizer or OptimizerOptions(engines=("row", column_engine))
        opt = optimize(q, base, samples=samples)
        plan, placement = opt.plan, opt.placement
        extra = {"cost_model": opt.model.name, "optimized": opt}
    streams = []
    for name, table in inputs.items():
        stream = catalog.get(name)
        if stream is None:
            raise OptionError(f"no stream '{name}' in the catalog")
        batches = iter(table.to_batches()) if isinstance(table, pa.Table) else iter(table)
        streams.append(StreamInput(stream, batches, stream.rate, "in-memory table"))
    setup = _MigrationSetup(list(schedule)) if schedule is not None else None
    resolved = resolve_plan(plan, placement, column_engine)
    return _run(resolved, catalog, opts, streams, settings, extra, setup, join=join)


def run(
    q: LoadedQuery,
    options: Any,
    placement: PlacementRequest = "auto",
    column_engine: str = "duckdb",
    settings: EngineSettings | None = None,
    optimizer: OptimizerOptions | None = None,
    migration: MigrationOptions | None = None,
) -> Any:
    """Run a loaded query with ``hycq run`` options (sources from --data or the catalog).

    The plan that runs is always the optimizer's Phase-One plan (so operator ids match
    ``explain`` with the same rate and ``--join-order``); ``auto`` runs its Phase-Two
    placement over the row engine and ``column_engine``. Metrics carry the placement's
    predicted cost. ``migration`` (``--migrate``, ``--migration``, ``--adapt``): the run
    goes through the migration driver (engines/migration/driver.py); every target is
    resolved and checked before the run starts.
    """
    base = optimizer or OptimizerOptions(engines=("row", column_engine))
    base = dataclasses.replace(base, rate=options.rate, data=dict(options.data))
    opt = optimize(q, base)
    chosen: PlacementRequest = opt.placement if placement == "auto" else placement
    ckpt = getattr(options, "checkpoint", None)
    if ckpt is not None:
        if migration is not None and migration.requested:
            raise OptionError(
                "--checkpoint cannot be combined with plan migration (--migrate, --adapt) yet",
                hint="drop one of them",
            )
        if ckpt.resume and placement == "auto":  # the plan that ran, not a new choice
            from engines.runtime.checkpoint_store import stored_placement

            chosen = stored_placement(ckpt.directory) or chosen
    resolved = resolve_plan(opt.plan, chosen, column_engine)
    engines = resolved.engines
    cost = opt.cost_of(engines)

    predicted: dict[str, Any] = {
        # what ``hycq calibrate --from`` needs to plan the query again
        "query": {
            "path": str(Path(q.name).resolve()) if Path(q.name).is_file() else None,
            "catalog": str(q.catalog.path.resolve()) if q.catalog.path is not None else None,
            "join_order": order_label(opt.plan),
        },
        "cost_model": opt.model.name,
        "predicted": {
            "bottleneck": cost.bottleneck,
            "utilization": cost.utilization,
            "feasible": cost.feasible,
        },
    }
    setup = None
    if migration is not None and migration.requested:
        if getattr(options, "join_impl", "tree") != "tree":
            raise OptionError(
                "--join-impl other than tree cannot be combined with plan migration",
                hint="drop --join-impl, or drop --migrate/--adapt",
            )
        setup = _migration_setup(q, opt, base, engines, migration, column_engine)
    join = join_settings(opt, options)
    if join is not None:
        predicted["join_impls"] = join[1]
    return _run(
        resolved,
        q.catalog,
        options,
        None,
        settings,
        predicted,
        setup,
        join=None if join is None else join[0],
    )


def join_settings(opt: Optimized, options: Any) -> tuple[Any, list[dict[str, Any]]] | None:
    """The row engine's join settings for ``options.join_impl`` (None: plain trees) and, per
    join chain, the implementation chosen with every alternative's predicted cost."""
    impl = getattr(options, "join_impl", "tree")
    if impl not in (*JOIN_IMPLS, "auto"):
        raise OptionError(
            f"unknown --join-impl '{impl}'", hint="use auto, tree, mjoin, acaching or jit"
        )
    if impl == "tree":
        return None
    shared = opt.options.row_core == "shared"

    def model(chain: Any) -> Any:
        return _ChainModel(opt.plan, chain, opt.estimates, opt.model, shared)

    choices = choose_all(opt.plan, model, None if impl == "auto" else impl)
    memory = getattr(options, "join_memory_mb", None)
    settings = JoinSettings(
        default="tree",
        impls={c.root: c.chosen for c in choices},
        memory_bytes=None if memory is None else int(memory * 1024 * 1024),
    )
    return settings, [c.as_json() for c in choices]


@dataclass
class _MigrationSetup:
    """What the migration driver of a run needs (see hycq/migrations.py)."""

    schedule: list[Any]
    controller: Any = None
    monitor: Any = None
    check_every: int | None = None


def _migration_setup(
    q: LoadedQuery,
    opt: Optimized,
    base: OptimizerOptions,
    engines: dict[str, str],
    migration: MigrationOptions,
    column_engine: str,
) -> _MigrationSetup:
    samples = None
    if migration.migrate and base.sample:
        try:
            samples, _ = sample_streams(q, base.rate, base.data)
        except UserError:
            samples = None
    schedule = migrations.plan_schedule(
        q, (opt.plan, engines), migration, base, samples, column_engine
    )
    setup = _MigrationSetup(schedule)
    if migration.adapt and migration.strategy != "auto":
        _check_adaptable(migration.strategy, opt.plan, engines)
    if migration.adapt:
        tps = 1000 // TIME_UNITS_MS[plan_time_unit(opt.plan)]
        setup.controller, setup.monitor, setup.check_every = migrations.make_adaptive(
            q, opt, base, migration, tps, engines
        )
    return setup


def _check_adaptable(strategy: str, plan: Any, engines: dict[str, str]) -> None:
    """``--adapt`` with a forced strategy: UserError before the run when the strategy cannot
    migrate this query's plans at all (its windows or the starting placement rule it out),
    instead of at the first migration the controller asks for. Which targets the strategy
    reaches (their join trees) the controller checks per target (hycq/adapt.py)."""
    try:
        strategies.check(strategy, (plan, engines), (plan, engines), precheck=False)
    except UserError as err:
        raise type(err)(
            f"--adapt --migration {strategy}: no migration of this run is possible: {err.message}",
            hint=err.hint,
        ) from None


def _run(
    resolved: ResolvedPlan,
    catalog: Catalog,
    options: Any,
    inputs: Any,
    settings: EngineSettings | None = None,
    extra: dict[str, Any] | None = None,
    migration: _MigrationSetup | None = None,
    join: Any = None,
) -> Any:
    """Run a resolved plan: through one :class:`Assembly`, or through the migration driver
    (one Assembly per plan, one shared engine pool) when migrations are set up."""
    plan, engines = resolved.plan, resolved.engines
    asm: Assembly | MigratingAssembly
    if migration is not None:
        asm = MigratingAssembly(
            plan,
            engines,
            settings,
            1000 // TIME_UNITS_MS[plan_time_unit(plan)],
            label_of=lambda p: {"join_order": order_label(p)},
            schedule=migration.schedule,
            controller=migration.controller,
            check_every=migration.check_every,
            monitor=migration.monitor,
            same_order=same_order,
        )
    else:
        asm = Assembly.of(resolved, settings, late_insert=options.late_insert, join=join)
    try:
        result = run_plan(plan, catalog, options, asm, inputs=inputs, extra=extra)
        result.extras["migs"] = asm.migs
        if isinstance(asm, MigratingAssembly) and asm.driver is not None:
            result.extras["driver"] = asm.driver
    finally:
        asm.close()
    return result

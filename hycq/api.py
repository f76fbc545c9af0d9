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
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hycq.planning import OptimizerOptions
from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import OptionError, QueryError, UserError
from optimizer.ir.plan import Category, LogicalPlan
from optimizer.ir.plan import Source as SourceOp
from optimizer.sql import bind_query
from optimizer.sql.catalog import load_catalog

if TYPE_CHECKING:  # pragma: no cover
    from hycq.migrations import MigrationOptions
    from hycq.planning import Optimized

#: The shipped queries (present in a source checkout).
QUERIES = Path(__file__).resolve().parent.parent / "queries"


@dataclass(frozen=True)
class LoadedQuery:
    """A bound query with everything needed to explain or run it."""

    text: str
    name: str
    catalog: Catalog
    plan: LogicalPlan
    bind_ms: float
    notes: tuple[str, ...] = ()
    """The binder's notes (``FILE:LINE:COL: text``): the CLI shows each as ``note: ...``."""


def read_query_text(query: str | Path) -> tuple[str, str]:
    """(text, display name) of a query path, or of stdin for ``-``."""
    if str(query) == "-":
        return sys.stdin.read().removeprefix("\ufeff"), "<stdin>"
    path = Path(query)
    try:
        return path.read_text(encoding="utf-8-sig"), str(query)  # a BOM is not query text
    except FileNotFoundError:
        raise UserError(
            f"query file not found: {query}", hint="give a .sql path, or - to read stdin"
        ) from None
    except IsADirectoryError:
        raise UserError(f"query path is a directory: {query}", hint="give a .sql file") from None
    except UnicodeDecodeError:
        raise UserError(f"query file is not UTF-8 text: {query}") from None
    except OSError as err:
        raise UserError(f"cannot read query file {query}: {err.strerror}") from None


def find_catalog(query: str | Path, catalog: Path | None) -> Path:
    """The catalog for a query: ``catalog`` if given, else catalog.toml beside the query."""
    if catalog is not None:
        return catalog
    if str(query) == "-":
        here = Path("catalog.toml")
        if here.exists():
            return here
        raise UserError(
            "no catalog for a query read from stdin",
            hint="pass --catalog PATH (e.g. queries/smartplug/catalog.toml)",
        )
    return Path(query).parent / "catalog.toml"


def load_query(query: str | Path, catalog: Path | None = None) -> LoadedQuery:
    """Read, parse and bind a query against its catalog."""
    text, name = read_query_text(query)
    cat = load_catalog(find_catalog(query, catalog))
    start = time.perf_counter()
    plan, notes = bind_query(text, cat, name)
    return LoadedQuery(text, name, cat, plan, (time.perf_counter() - start) * 1e3, notes)


def parse_engines(spec: str) -> tuple[str, ...]:
    """``row,duckdb`` -> ('row', 'duckdb'); the row engine is always included. Names are
    those of the engine registry (an unknown one is an OptionError naming them)."""
    from engines import engine_registry as registry

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
    from hycq.planning import OptimizerOptions, optimize

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
    from optimizer.costmodel import PlanCoster
    from optimizer.estimate import estimate

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
    "QUERIES",
    "LoadedQuery",
    "QueryError",
    "explain",
    "find_catalog",
    "load_query",
    "parse_engines",
]


# -- running ---------------------------------------------------------------------------------

PLACEMENTS = ("auto", "row", "column")


def resolve_placement(
    plan: LogicalPlan, placement: str | dict[str, str], column_engine: str = "duckdb"
) -> dict[str, str]:
    """Engine per operator id for a placement request (auto, row, column, or a mapping).

    Engine names are the engine registry's: an unknown ``column_engine`` or engine in the
    mapping is an error naming the registered ones (exit 2).
    """
    from engines import engine_registry as registry
    from optimizer.ir.placement import ROW, complete_placement, uniform_placement

    registry.get_columnar(column_engine)
    if isinstance(placement, dict):
        return complete_placement(plan, placement, registry.capabilities())
    if placement == "auto":
        raise OptionError(
            "placement 'auto' needs the optimizer", hint="use hycq.api.run, which optimizes first"
        )
    if placement == "row":
        return uniform_placement(plan, ROW)
    if placement == "column":
        uniform = uniform_placement(plan, column_engine)
        return complete_placement(plan, uniform, registry.capabilities())
    raise OptionError(
        f"unknown placement '{placement}'",
        hint="use auto, row, column, or a JSON file mapping operator ids to engines",
    )


@dataclass
class EngineSettings:
    """How columnar engines are set up for a run: per engine name, the values of its
    registered settings (``engines.registry.Setting.key`` -> value), e.g.
    ``{"duckdb": {"threads": 2}, "spark": {"conf": {"spark.master": "local[2]"}}}``.
    Engines and keys not given take the engine's defaults."""

    values: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: Keep SUM/COUNT/AVG over windows incrementally in DuckDB MIGs (engines/incremental.py);
    #: False re-evaluates every aggregate over its whole window at each slide.
    incremental: bool = True

    def of(self, engine: str) -> dict[str, Any]:
        return dict(self.values.get(engine, {}))


def execute(
    plan: LogicalPlan,
    catalog: Catalog,
    inputs: dict[str, Any],
    placement: str | dict[str, str] = "row",
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
    import pyarrow as pa

    from engines.runtime import RunOptions, StreamInput

    opts = options if options is not None else RunOptions(keep_results=True)
    extra = None
    if placement == "auto":
        from hycq.planning import SAMPLE_ROWS, optimize

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
    return _run(
        plan, catalog, opts, placement, streams, column_engine, settings, extra, setup, join=join
    )


def run(
    q: LoadedQuery,
    options: Any,
    placement: str | dict[str, str] = "auto",
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
    from hycq.planning import optimize

    base = optimizer or OptimizerOptions(engines=("row", column_engine))
    base = dataclasses.replace(base, rate=options.rate, data=dict(options.data))
    opt = optimize(q, base)
    chosen: str | dict[str, str] = opt.placement if placement == "auto" else placement
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
    engines = resolve_placement(opt.plan, chosen, column_engine)
    cost = opt.cost_of(engines)
    from hycq.migrations import order_label

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
        opt.plan,
        q.catalog,
        options,
        engines,
        None,
        column_engine,
        settings,
        predicted,
        setup,
        join=None if join is None else join[0],
    )


def join_settings(opt: Optimized, options: Any) -> tuple[Any, list[dict[str, Any]]] | None:
    """The row engine's join settings for ``options.join_impl`` (None: plain trees) and, per
    join chain, the implementation chosen with every alternative's predicted cost."""
    from engines.row.lowering import JOIN_IMPLS, JoinSettings
    from optimizer.join_impl import choose_all
    from optimizer.phase_one import _ChainModel

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
    from engines.runtime.inputs import plan_time_unit
    from hycq import migrations
    from optimizer.ir.catalog import TIME_UNITS_MS

    migrations.check_options(migration)
    samples = None
    if migration.migrate and base.sample:
        from hycq.planning import sample_streams

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
    from engines.migration import strategies

    try:
        strategies.check(strategy, (plan, engines), (plan, engines), precheck=False)
    except UserError as err:
        raise type(err)(
            f"--adapt --migration {strategy}: no migration of this run is possible: {err.message}",
            hint=err.hint,
        ) from None


class _Engines:
    """The columnar engines of one run, created on first use and closed at the end."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self._made: dict[str, Any] = {}
        self._groups = 0

    def next_prefix(self) -> str:
        """A fresh MIG table prefix ``g<k>_``: every MIG of the run (of every plan, when a
        migration keeps two alive) shares one connection/session per engine."""
        prefix = f"g{self._groups}_"
        self._groups += 1
        return prefix

    def get(self, name: str) -> Any:
        from engines import engine_registry as registry

        if name not in self._made:
            self._made[name] = registry.make(name, self.settings.of(name))
        return self._made[name]

    def close(self) -> None:
        for engine in self._made.values():
            engine.close()

    def info(self) -> dict[str, Any]:
        return {name: e.info() for name, e in self._made.items()}


class Assembly:
    """One plan wired for execution: the row executor, its MIG operators and the columnar
    engines they use (created on first use, closed by :meth:`close`).

    ``run`` and ``bench`` both build plans through this, so they execute the same thing.
    """

    def __init__(
        self,
        plan: LogicalPlan,
        placement: dict[str, str],
        settings: EngineSettings | None = None,
        pool: _Engines | None = None,
        late_insert: bool = False,
        join: Any = None,
    ) -> None:
        from engines.mig.operator import MigOp
        from optimizer.ir.placement import groups

        self.late_insert = late_insert
        self.join = join  # engines.row.lowering.JoinSettings, None: binary trees
        self.plan = plan
        self.placement = placement
        self.groups = groups(plan, placement)
        self.owns_pool = pool is None
        self.pool = pool if pool is not None else _Engines(settings or EngineSettings())
        self.migs: list[MigOp] = []
        self.executor: Any = None

    def make_group(self, group: Any, group_inputs: list[Any]) -> Any:
        from engines import engine_registry as registry
        from engines.mig.operator import MigOp
        from engines.sqlgen import group_sql

        plan, pool = self.plan, self.pool
        # Every MIG names its inputs g<k>_in<n>: MIGs share one connection/session per engine.
        prefix = pool.next_prefix()
        dialect = registry.get(group.engine).dialect
        assert dialect is not None  # a columnar engine's registration names its dialect
        main = group_sql(plan, group.operators, dialect, prefix)
        tables = dict(main.inputs)
        # SUM/COUNT/AVG over window inputs kept incrementally (engines/incremental.py),
        # unless the engine settings turn it off (``--no-incremental``).
        windows = (
            [gi.op_id for gi in group_inputs if gi.arrow or gi.fifo]
            if self.pool.settings.incremental
            else []
        )
        inc = group_sql(plan, group.operators, dialect, prefix, windows) if windows else main

        def sql_for(other: str) -> str:
            if other == dialect:
                return main.sql
            return group_sql(plan, group.operators, other, prefix).sql  # the fallback's SQL

        correlated = scan = None
        if inc.incremental:  # a count per key of a kept aggregate (engines.correlated)
            from engines.sqlgen.correlated import CorrelatedSQL
            from optimizer.ir.correlated import correlated_count, scan_count

            kept = {k.op_id: k for k in inc.incremental}
            shape = correlated_count(plan, group.operators, group.top, kept, windows)
            if shape is not None:
                correlated = CorrelatedSQL(
                    shape, tables[shape.window], kept[shape.inner].state_table
                )
                scan = scan_count(plan, shape)
        consumer = plan.consumers(group.top)[0]
        spare = registry.get(group.engine).fallback
        fallback = (lambda: pool.get(spare)) if spare is not None else None
        mig = MigOp(
            group,
            sql_for,
            pool.get(group.engine),
            group_inputs,
            [tables[gi.op_id] for gi in group_inputs],
            to_arrow=plan.op(consumer).category is Category.R2S,
            fallback=fallback,
            incremental=inc.incremental,
            incremental_sql=(
                (lambda keep: group_sql(plan, group.operators, dialect, prefix, windows, keep).sql)
                if inc.incremental
                else None
            ),
            correlated=correlated,
            correlated_scan=scan,
        )
        self.migs.append(mig)
        return mig

    def make_engine(self, emit: Any, on_late: Any = None) -> Any:
        from engines.row.executor import RowExecutor

        self.executor = RowExecutor(
            self.plan,
            emit,
            on_late=on_late,
            groups=self.groups,
            make_group=self.make_group,
            late_insert=self.late_insert,
            join=self.join,
        )
        return self.executor

    def operator_metrics(self, engine: Any = None) -> dict[str, dict[str, Any]]:
        ops: dict[str, dict[str, Any]] = (engine or self.executor).operator_metrics()
        for mig in self.migs:
            ops.setdefault(mig.op_id, {}).update(mig.mig_metrics())
        return ops

    def extra_metrics(self) -> dict[str, Any]:
        return {
            "groups": [{"engine": g.engine, "operators": list(g.operators)} for g in self.groups],
            "faults": [f for mig in self.migs for f in mig.stats.faults],
            "engines": self.pool.info(),
        }

    def close(self) -> None:
        """Release the MIGs' inputs; close the engines if this assembly created them."""
        for mig in self.migs:
            mig.close()
        if self.owns_pool:
            self.pool.close()


def _run(
    plan: LogicalPlan,
    catalog: Catalog,
    options: Any,
    placement: str | dict[str, str],
    inputs: Any,
    column_engine: str = "duckdb",
    settings: EngineSettings | None = None,
    extra: dict[str, Any] | None = None,
    migration: _MigrationSetup | None = None,
    join: Any = None,
) -> Any:
    from engines.runtime import run_plan

    engines = resolve_placement(plan, placement, column_engine)
    if migration is not None:
        return _run_migrating(plan, catalog, options, engines, inputs, settings, extra, migration)
    asm = Assembly(plan, engines, settings, late_insert=options.late_insert, join=join)
    try:
        result = run_plan(
            plan,
            catalog,
            options,
            make_engine=asm.make_engine,
            placement=engines,
            inputs=inputs,
            operator_metrics=asm.operator_metrics,
            extra_metrics=lambda: {**asm.extra_metrics(), **(extra or {})},
        )
    finally:
        asm.close()
    result.extras["migs"] = asm.migs
    return result


def _run_migrating(
    plan: LogicalPlan,
    catalog: Catalog,
    options: Any,
    engines: dict[str, str],
    inputs: Any,
    settings: EngineSettings | None,
    extra: dict[str, Any] | None,
    setup: _MigrationSetup,
) -> Any:
    """``_run`` through the migration driver: one Assembly per plan, all sharing one
    columnar-engine pool (MIG input names are unique across them)."""
    from engines.migration.driver import MigratingExecutor
    from engines.runtime import run_plan
    from engines.runtime.inputs import plan_time_unit
    from hycq.migrations import order_label, same_order
    from optimizer.ir.catalog import TIME_UNITS_MS

    pool = _Engines(settings or EngineSettings())
    tps = 1000 // TIME_UNITS_MS[plan_time_unit(plan)]

    def build(p: LogicalPlan, placement: dict[str, str], emit: Any, on_late: Any) -> Assembly:
        asm = Assembly(p, placement, settings, pool=pool)
        asm.make_engine(emit, on_late)
        return asm

    made: list[MigratingExecutor] = []

    def make_engine(emit: Any, on_late: Any) -> MigratingExecutor:
        driver = MigratingExecutor(
            build,
            plan,
            engines,
            emit,
            on_late,
            ticks_per_second=tps,
            label_of=lambda p: {"join_order": order_label(p)},
            schedule=setup.schedule,
            controller=setup.controller,
            check_every=setup.check_every,
            monitor=setup.monitor,
            same_order=same_order,
        )
        made.append(driver)
        return driver

    try:
        result = run_plan(
            plan,
            catalog,
            options,
            make_engine=make_engine,
            placement=engines,
            inputs=inputs,
            operator_metrics=lambda _engine: made[0].operator_metrics(),
            extra_metrics=lambda: {**made[0].extra_metrics(), **(extra or {})},
        )
        if made:
            handle = made[0].current.handle
            result.extras["migs"] = list(getattr(handle, "migs", []))
            result.extras["driver"] = made[0]
    finally:
        if made:
            made[0].close()
        pool.close()
    return result

"""Engine wiring: how one plan becomes running engines.

:class:`Assembly` wires a placed plan for execution: the row executor, one MIG operator per
group of columnar operators (its SQL generated for the group's engine, its incremental and
correlated state when the settings allow it) and the columnar engines the MIGs share,
created on first use from the engine registry and closed at the end (:class:`EnginePool`).
:class:`MigratingAssembly` does the same for a run under the migration driver: one
Assembly per plan, all sharing one pool. Both are what ``engines.runtime.run_plan`` takes
(:class:`engines.runtime.engine.Assembled`); ``hycq run``, ``hycq bench`` and the shared
runs all build plans through here, so they execute the same thing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engines import registry
from engines.mig.operator import MigOp
from engines.migration.driver import MigratingExecutor
from engines.row.executor import RowExecutor
from engines.runtime.engine import OnLate, PlanExecutor
from engines.sqlgen import group_sql
from optimizer.ir.placement import Group, ResolvedPlan, groups
from optimizer.ir.plan import Category, LogicalPlan


@dataclass
class EngineSettings:
    """How columnar engines are set up for a run: per engine name, the values of its
    registered settings (``engines.registry.Setting.key`` -> value), e.g.
    ``{"duckdb": {"threads": 2}, "spark": {"conf": {"spark.master": "local[2]"}}}``.
    Engines and keys not given take the engine's defaults."""

    values: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: Keep SUM/COUNT/AVG over windows incrementally in DuckDB MIGs
    #: (engines/mig/kept_aggregates.py);
    #: False re-evaluates every aggregate over its whole window at each slide.
    incremental: bool = True

    def of(self, engine: str) -> dict[str, Any]:
        return dict(self.values.get(engine, {}))


class EnginePool:
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
        pool: EnginePool | None = None,
        late_insert: bool = False,
        join: Any = None,
        plan_groups: Sequence[Group] | None = None,
    ) -> None:
        self.late_insert = late_insert
        self.join = join  # engines.row.lowering.JoinSettings, None: binary trees
        self.plan = plan
        self.placement = placement
        self.groups = list(plan_groups) if plan_groups is not None else groups(plan, placement)
        self.owns_pool = pool is None
        self.pool = pool if pool is not None else EnginePool(settings or EngineSettings())
        self.migs: list[MigOp] = []
        self.executor: Any = None

    @classmethod
    def of(
        cls, resolved: ResolvedPlan, settings: EngineSettings | None = None, **kw: Any
    ) -> Assembly:
        """The assembly of a plan whose placement and groups were resolved once, at the
        boundary (``hycq.query.resolve_plan``): the groups are not derived again."""
        return cls(resolved.plan, resolved.engines, settings, plan_groups=resolved.groups, **kw)

    def make_group(self, group: Any, group_inputs: list[Any]) -> Any:
        plan, pool = self.plan, self.pool
        # Every MIG names its inputs g<k>_in<n>: MIGs share one connection/session per engine.
        prefix = pool.next_prefix()
        dialect = registry.get(group.engine).dialect
        assert dialect is not None  # a columnar engine's registration names its dialect
        main = group_sql(plan, group.operators, dialect, prefix)
        tables = dict(main.inputs)
        # SUM/COUNT/AVG over window inputs kept incrementally (engines/mig/kept_aggregates.py),
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
        if inc.incremental:  # a count per key of a kept aggregate (engines.mig.correlated_counts)
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


class MigratingAssembly:
    """A run under the migration driver (``engines.migration.driver``): one :class:`Assembly`
    per plan the driver builds, all sharing one :class:`EnginePool` (MIG input names are
    unique across them), so a migration can keep two plans alive on the same engines.

    ``options`` are the driver's keyword arguments (schedule, controller, check_every,
    monitor, label_of, same_order); ``ticks_per_second`` is the plan's time base.
    """

    def __init__(
        self,
        plan: LogicalPlan,
        placement: dict[str, str],
        settings: EngineSettings | None,
        ticks_per_second: int,
        **options: Any,
    ) -> None:
        self.plan = plan
        self.placement = placement
        self.settings = settings
        self.tps = ticks_per_second
        self.options = options
        self.pool = EnginePool(settings or EngineSettings())
        self.driver: MigratingExecutor | None = None

    def _build(
        self, plan: LogicalPlan, placement: dict[str, str], emit: Any, on_late: OnLate
    ) -> Assembly:
        asm = Assembly(plan, placement, self.settings, pool=self.pool)
        asm.make_engine(emit, on_late)
        return asm

    def make_engine(self, emit: Callable[[int, Any], None], on_late: OnLate) -> PlanExecutor:
        self.driver = MigratingExecutor(
            self._build,
            self.plan,
            self.placement,
            emit,
            on_late,
            ticks_per_second=self.tps,
            **self.options,
        )
        return self.driver

    def operator_metrics(self, engine: Any = None) -> dict[str, dict[str, Any]]:
        assert self.driver is not None, "make_engine first"
        return self.driver.operator_metrics()

    def extra_metrics(self) -> dict[str, Any]:
        assert self.driver is not None, "make_engine first"
        return self.driver.extra_metrics()

    @property
    def migs(self) -> list[MigOp]:
        """The MIGs of the plan that is live at the end of the run."""
        if self.driver is None:
            return []
        return list(getattr(self.driver.current.handle, "migs", []))

    def close(self) -> None:
        if self.driver is not None:
            self.driver.close()
        self.pool.close()

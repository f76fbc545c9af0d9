"""The public Python API: load a query, explain it, (later) optimize, run and benchmark it.

This package is the composition root: the only place that wires the optimizer, the engines
and the cost models together. The CLI is a thin layer over these functions.

Example:
    >>> q = load_query(QUERIES / "smartplug" / "q5.sql")
    >>> [op["kind"] for op in explain(q)["operators"]][:3]
    ['source', 'window', 'select']
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import OptionError, QueryError, UserError
from optimizer.ir.plan import Category, LogicalPlan
from optimizer.ir.plan import Source as SourceOp
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog

#: The shipped queries (present in a source checkout).
QUERIES = Path(__file__).resolve().parent.parent / "queries"

#: Engines hycq knows; ``row`` is always enabled.
ENGINES = ("row", "duckdb", "spark")


@dataclass(frozen=True)
class LoadedQuery:
    """A bound query with everything needed to explain or run it."""

    text: str
    name: str
    catalog: Catalog
    plan: LogicalPlan
    bind_ms: float


def read_query_text(query: str | Path) -> tuple[str, str]:
    """(text, display name) of a query path, or of stdin for ``-``."""
    if str(query) == "-":
        return sys.stdin.read(), "<stdin>"
    path = Path(query)
    try:
        return path.read_text(encoding="utf-8"), str(query)
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
    plan = plan_query(text, cat, name)
    return LoadedQuery(text, name, cat, plan, (time.perf_counter() - start) * 1e3)


def parse_engines(spec: str) -> tuple[str, ...]:
    """``row,duckdb`` -> ('row', 'duckdb'); the row engine is always included."""
    names = [s.strip().lower() for s in spec.split(",") if s.strip()]
    for n in names:
        if n not in ENGINES:
            from optimizer.ir.errors import did_you_mean

            raise OptionError(
                f"unknown engine '{n}' in --engines",
                hint=did_you_mean(n, ENGINES) or f"engines: {', '.join(ENGINES)}",
            )
    if "row" not in names:
        names.insert(0, "row")
    return tuple(dict.fromkeys(names))


def explain(
    q: LoadedQuery,
    rate: float | None = None,
    engines: tuple[str, ...] = ("row", "duckdb"),
) -> dict[str, Any]:
    """The CONTRACT's ``explain --json`` object for a query.

    Until the cost-based optimizer lands (issue 5) every operator is placed on the row
    engine; fields that need cost estimation (``lambda_out``, ``u``, ``cost``,
    ``feasible``) are null rather than invented.
    """
    plan = q.plan
    placement = dict.fromkeys(plan.topological(), "row")
    operators = [
        {
            "id": op.id,
            "kind": op.kind,
            "engine": placement[op.id],
            "inputs": plan.inputs(op.id),
            "detail": op.describe(),
            "schema": [{"name": f.name, "type": f.dtype.value} for f in op.schema],
            "lambda_out": None,
            "u": None,
        }
        for op in plan.operators()
    ]
    return {
        "query": q.name,
        "rate": rate if rate is not None else _default_rate(q),
        "engines": list(engines),
        "operators": operators,
        "groups": [],
        "r2r_operators": len([o for o in plan.operators() if o.category is Category.R2R]),
        "cost": {"bottleneck": None, "utilization": None},
        "feasible": None,
        "plans_examined": {"phase_one": 0, "phase_two": 0},
        "optimization_ms": {
            "bind": round(q.bind_ms, 3),
            "phase_one": 0.0,
            "phase_two": 0.0,
            "total": round(q.bind_ms, 3),
        },
        "cost_model": None,
    }


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
    "ENGINES",
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
    """Engine per operator id for a placement request (auto, row, column, or a mapping)."""
    from optimizer.ir.placement import ROW, complete_placement, uniform_placement

    if column_engine not in ("duckdb", "spark"):
        raise OptionError(f"unknown column engine '{column_engine}'", hint="use duckdb or spark")
    if isinstance(placement, dict):
        return complete_placement(plan, placement)
    if placement in ("auto", "row"):
        # Until the cost-based optimizer exists (issue 5), auto runs everything on the row
        # engine, which is also what explain reports.
        return uniform_placement(plan, ROW)
    if placement == "column":
        return complete_placement(plan, uniform_placement(plan, column_engine))
    raise OptionError(
        f"unknown placement '{placement}'",
        hint="use auto, row, column, or a JSON file mapping operator ids to engines",
    )


@dataclass
class EngineSettings:
    """How columnar engines are set up for a run (threads, Spark conf)."""

    duckdb_threads: int | None = None
    spark_conf: dict[str, str] | None = None


def execute(
    plan: LogicalPlan,
    catalog: Catalog,
    inputs: dict[str, Any],
    placement: str | dict[str, str] = "row",
    options: Any = None,
    column_engine: str = "duckdb",
    settings: EngineSettings | None = None,
) -> Any:
    """Run ``plan`` over in-memory Arrow tables (one per stream) and return a RunResult.

    The result table holds the query's output columns plus ``_ts``.
    """
    import pyarrow as pa

    from engines.runtime import RunOptions, StreamInput

    opts = options if options is not None else RunOptions(keep_results=True)
    streams = []
    for name, table in inputs.items():
        stream = catalog.get(name)
        if stream is None:
            raise OptionError(f"no stream '{name}' in the catalog")
        batches = iter(table.to_batches()) if isinstance(table, pa.Table) else iter(table)
        streams.append(StreamInput(stream, batches, stream.rate, "in-memory table"))
    return _run(plan, catalog, opts, placement, streams, column_engine, settings)


def run(
    q: LoadedQuery,
    options: Any,
    placement: str | dict[str, str] = "auto",
    column_engine: str = "duckdb",
    settings: EngineSettings | None = None,
) -> Any:
    """Run a loaded query with ``hycq run`` options (sources from --data or the catalog)."""
    return _run(q.plan, q.catalog, options, placement, None, column_engine, settings)


class _Engines:
    """The columnar engines of one run, created on first use and closed at the end."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self._made: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        if name not in self._made:
            if name == "duckdb":
                from engines.duckdb import DuckDBEngine

                self._made[name] = DuckDBEngine(self.settings.duckdb_threads)
            else:
                from engines.spark import SparkEngine

                self._made[name] = SparkEngine(self.settings.spark_conf)
        return self._made[name]

    def close(self) -> None:
        for engine in self._made.values():
            engine.close()

    def info(self) -> dict[str, Any]:
        return {name: e.info() for name, e in self._made.items()}


def _run(
    plan: LogicalPlan,
    catalog: Catalog,
    options: Any,
    placement: str | dict[str, str],
    inputs: Any,
    column_engine: str = "duckdb",
    settings: EngineSettings | None = None,
) -> Any:
    from engines.mig import MigOp
    from engines.row.executor import GroupInput, RowExecutor
    from engines.runtime import run_plan
    from engines.sqlgen import group_sql
    from optimizer.ir.placement import Group, groups

    engines = resolve_placement(plan, placement, column_engine)
    migration = groups(plan, engines)
    pool = _Engines(settings or EngineSettings())
    migs: list[MigOp] = []

    def make_group(group: Group, group_inputs: list[GroupInput]) -> MigOp:
        # Every MIG names its inputs g<k>_in<n>: MIGs share one connection/session per engine.
        prefix = f"g{len(migs)}_"
        main = group_sql(plan, group.operators, group.engine, prefix)
        tables = dict(main.inputs)

        def sql_for(dialect: str) -> str:
            if dialect == group.engine:
                return main.sql
            return group_sql(plan, group.operators, dialect, prefix).sql  # the fallback's SQL

        consumer = plan.consumers(group.top)[0]
        fallback = (lambda: pool.get("duckdb")) if group.engine == "spark" else None
        mig = MigOp(
            group,
            sql_for,
            pool.get(group.engine),
            group_inputs,
            [tables[gi.op_id] for gi in group_inputs],
            to_arrow=plan.op(consumer).category is Category.R2S,
            fallback=fallback,
        )
        migs.append(mig)
        return mig

    def op_metrics(engine: Any) -> dict[str, dict[str, Any]]:
        ops: dict[str, dict[str, Any]] = engine.operator_metrics()
        for mig in migs:
            ops.setdefault(mig.op_id, {}).update(mig.mig_metrics())
        return ops

    try:
        result = run_plan(
            plan,
            catalog,
            options,
            make_engine=lambda emit, on_late: RowExecutor(
                plan, emit, on_late=on_late, groups=migration, make_group=make_group
            ),
            placement=engines,
            inputs=inputs,
            operator_metrics=op_metrics,
            extra_metrics=lambda: {
                "groups": [{"engine": g.engine, "operators": list(g.operators)} for g in migration],
                "faults": [f for mig in migs for f in mig.stats.faults],
                "engines": pool.info(),
            },
        )
    finally:
        pool.close()
    result.extras["migs"] = migs
    return result

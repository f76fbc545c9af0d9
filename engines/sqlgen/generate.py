"""One SQL statement for a migration candidate, in the DuckDB or Spark SQL dialect.

The statement is a chain of common table expressions, one per operator of the group in
topological order (``t0``, ``t1``, ...), each a single SELECT over its input(s): the group's
input tables ``in0``, ``in1``, ... or earlier CTEs. Every relation has positional column names
``c0 .. c{n-1}``, matching the IR's positional column references::

    select     SELECT s.c0 AS c0, ..., s.c{n-1} AS c{n-1} FROM <in> AS s WHERE <predicate>
    project    SELECT <e0> AS c0, ... FROM <in> AS s
    join       SELECT l.c0 AS c0, ..., r.c0 AS c{w}, ... FROM <left> AS l
               JOIN <right> AS r ON <condition>            (CROSS JOIN without a condition)
    aggregate  SELECT s.c<k> AS c0, ..., CAST(<agg> AS <type>) AS c{g}, ... FROM <in> AS s
               GROUP BY s.c<k>, ...                         (no GROUP BY: one row, as SQL)

An aggregate with computed (non-column) keys first computes them in an extra CTE, so that
GROUP BY only ever names columns. The final SELECT casts every output column to its IR type
(``CAST(s.c0 AS INT) AS c0``), so result types are exact on both engines (DuckDB's SUM of an
integer is a HUGEINT otherwise). DuckDB inlines a CTE used once and materialises one used
several times (a DAG shared inside the group); Spark inlines them.

Example:
    >>> from optimizer.sql import plan_query
    >>> from optimizer.sql.catalog import parse_catalog_text
    >>> cat = parse_catalog_text('''
    ... [streams.readings]
    ... timestamp = "ts"
    ... [streams.readings.columns]
    ... ts = "BIGINT"
    ... value = "DOUBLE"
    ... ''')
    >>> plan = plan_query("SELECT COUNT(*) AS n FROM readings [RANGE 2 SECONDS] WHERE value > 1",
    ...                   cat)
    >>> g = group_sql(plan, ["select1", "aggregate1"], "duckdb")
    >>> g.inputs
    [('window1', 'in0')]
    >>> print(g.sql)  # doctest: +NORMALIZE_WHITESPACE
    WITH t0 AS (SELECT s.c0 AS c0, s.c1 AS c1 FROM in0 AS s WHERE s.c1 > CAST(1 AS BIGINT)),
    t1 AS (SELECT CAST(COUNT(*) AS BIGINT) AS c0 FROM t0 AS s)
    SELECT CAST(s.c0 AS BIGINT) AS c0 FROM t1 AS s
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from engines.sqlgen.dialect_table import get_dialect
from engines.sqlgen.dialects import SqlDialect, cast, sql_type
from engines.sqlgen.expressions import ExprTranslator
from engines.sqlgen.group import GroupShape, analyse_group
from engines.sqlgen.incremental import KeptAggregate, incremental_aggregates
from optimizer.ir.dispatch import KindTable
from optimizer.ir.errors import InternalError, PlanError
from optimizer.ir.expr import ColumnRef, Expr, columns_used
from optimizer.ir.plan import Aggregate, Join, LogicalPlan, Operator, Project, Select
from optimizer.ir.schema import Schema
from optimizer.ir.types import DataType


@dataclass(frozen=True)
class GroupSQL:
    """The SQL of one migration candidate.

    ``sql`` is one SELECT statement in the target dialect. ``inputs`` lists, in a stable
    order, ``(id of the external input operator, table name used in the SQL)``; each table
    must have the columns ``c0 .. c{n-1}`` of that operator's output schema. The result has
    the columns ``c0 .. c{k-1}`` of ``output_schema`` (the top operator's schema), each cast
    to its IR type.
    """

    sql: str
    inputs: list[tuple[str, str]]
    output_schema: Schema
    #: Aggregates read from incrementally kept state tables (engines.sqlgen.incremental);
    #: the MIG maintains them before running ``sql``.
    incremental: tuple[KeptAggregate, ...] = ()


def group_sql(
    plan: LogicalPlan,
    group: Sequence[str],
    dialect: str,
    table_prefix: str = "",
    window_inputs: Collection[str] = (),
    keep: Collection[str] | None = None,
) -> GroupSQL:
    """Generate the SQL of a migration candidate ``group`` of ``plan`` for ``dialect``.

    ``dialect`` is ``"duckdb"`` or ``"spark"``. Raises PlanError for an invalid group (empty,
    not connected, a non-R2R operator, several outputs) and UnsupportedError for an
    expression the dialect cannot evaluate with the IR's semantics. ``window_inputs`` names
    the external operators whose changes arrive as whole chunks in and out (windows): with
    DuckDB, the SUM/COUNT/AVG aggregates over them read incrementally kept state tables
    (``GroupSQL.incremental``); ``keep`` limits those to the aggregates it names (the
    others are re-evaluated).
    """
    d = get_dialect(dialect)
    shape = analyse_group(plan, group, table_prefix)
    incremental = (
        incremental_aggregates(plan, shape, d, window_inputs, _key_sql) if window_inputs else {}
    )
    if keep is not None:
        incremental = {k: v for k, v in incremental.items() if k in keep}
    builder = _Builder(plan, shape, d, incremental)
    statement = builder.build()
    return GroupSQL(
        sql=statement.sql(dialect=d.name),
        inputs=list(shape.inputs),
        output_schema=plan.op(shape.top).schema,
        incremental=tuple(incremental.values()),
    )


def _col(table: str, index: int) -> exp.Column:
    return exp.Column(this=exp.to_identifier(f"c{index}"), table=exp.to_identifier(table))


def _named_col(table: str, name: str) -> exp.Column:
    return exp.Column(this=exp.to_identifier(name), table=exp.to_identifier(table))


def _table(name: str, alias: str) -> exp.Table:
    return exp.Table(
        this=exp.to_identifier(name), alias=exp.TableAlias(this=exp.to_identifier(alias))
    )


def _alias(e: exp.Expr, index: int) -> exp.Alias:
    return exp.Alias(this=e, alias=exp.to_identifier(f"c{index}"))


class _Builder:
    """Builds the CTE chain of one group."""

    def __init__(
        self,
        plan: LogicalPlan,
        shape: GroupShape,
        dialect: SqlDialect,
        incremental: dict[str, KeptAggregate] | None = None,
    ) -> None:
        self.plan = plan
        self.shape = shape
        self.dialect = dialect
        self.incremental = incremental or {}
        self.ctes: list[tuple[str, exp.Select]] = []
        self.relation: dict[str, str] = dict(shape.inputs)

    def build(self) -> exp.Select:
        for op_id in self.shape.operators:
            op = self.plan.op(op_id)
            ins = [self.relation[i] for i in self.plan.inputs(op_id)]
            self._check_inputs(op, self.plan.inputs(op_id))
            inc = self.incremental.get(op_id)
            if inc is not None:  # read from the MIG's state table
                types = [f.dtype for f in op.schema]
                self.relation[op_id] = self.add_cte(inc.finish_select(types))
                continue
            translate = TRANSLATIONS.get(type(op))
            if translate is None:  # analyse_group admits R2R operators only
                raise PlanError(f"{op_id} ({op.kind}) has no SQL translation")
            self.relation[op_id] = self.add_cte(translate(self, op, ins))
        top = self.plan.op(self.shape.top)
        final = exp.select(
            *[
                _alias(_col("s", i) if f.dtype is DataType.NULL else cast(_col("s", i), f.dtype), i)
                for i, f in enumerate(top.schema)
            ]
        ).from_(_table(self.relation[self.shape.top], "s"), copy=False)
        ctes = [
            exp.CTE(this=body, alias=exp.TableAlias(this=exp.to_identifier(name)))
            for name, body in self.ctes
        ]
        final.set("with_", exp.With(expressions=ctes))  # built once, not copied per CTE
        return final

    def add_cte(self, select: exp.Select) -> str:
        name = f"t{len(self.ctes)}"
        self.ctes.append((name, select))
        return name

    def _check_inputs(self, op: Operator, inputs: list[str]) -> None:
        """The operator's positional columns must match its inputs' and its own schema.

        A violation is a bug in whoever built the plan (InternalError): generating SQL from it
        would read the wrong columns or fail in the engine.
        """
        widths = [len(self.plan.op(i).schema) for i in inputs]
        exprs = op.expressions()
        ok = op.schema_fits(widths)
        if not ok:
            raise InternalError(
                f"{op.id} ({op.kind}): its schema does not fit its inputs' widths {widths}"
            )
        used = {i for e in exprs for i in columns_used(e)}
        if used and (min(used) < 0 or max(used) >= sum(widths)):
            raise InternalError(
                f"{op.id} ({op.kind}) reads column {max(used)} of an input with {sum(widths)}"
            )

    def translator(self, alias: str) -> ExprTranslator:
        return ExprTranslator(self.dialect, lambda i: _col(alias, i))

    def output(self, t: ExprTranslator, e: Expr, dtype: DataType) -> exp.Expr:
        return _output(t, e, dtype)


def _output(t: ExprTranslator, e: Expr, dtype: DataType) -> exp.Expr:
    """An output column: cast to its IR type where the SQL type could differ."""
    if dtype is DataType.NULL or (isinstance(e, ColumnRef) and e.dtype == dtype):
        return t.scalar(e)
    if not dtype.is_numeric:
        return t.typed(e, dtype)
    out = t.scalar(e)
    return out if isinstance(out, exp.Cast) and out.to == sql_type(dtype) else cast(out, dtype)


def _key_sql(t: ExprTranslator, k: Expr) -> exp.Expr:
    """A GROUP BY key as the aggregate groups by it: the column itself, or a computed key at
    its IR type; under the dialect's NaN rule, and with ``-0.0`` as ``+0.0``, either way."""
    if isinstance(k, ColumnRef):
        return t.dialect.canonical(t.scalar(k), k.dtype)
    return t.dialect.canonical(_output(t, k, k.dtype), k.dtype)


# -- one translation per operator kind ---------------------------------------------------------

#: ``translate(builder, op, input relations) -> SELECT`` per logical operator kind: one CTE
#: computing the operator from its inputs' relations (CTE or input table names).
Translation = Callable[[_Builder, Any, list[str]], exp.Select]
TRANSLATIONS: KindTable[Translation] = KindTable("SQL translation")


@TRANSLATIONS.register(Select)
def _select(b: _Builder, op: Select, ins: list[str]) -> exp.Select:
    (source,) = ins
    t = b.translator("s")
    predicate = t.typed(op.predicate, DataType.BOOLEAN)
    cols = [_alias(_col("s", i), i) for i in range(len(op.schema))]
    return exp.select(*cols).from_(_table(source, "s"), copy=False).where(predicate, copy=False)


@TRANSLATIONS.register(Project)
def _project(b: _Builder, op: Project, ins: list[str]) -> exp.Select:
    (source,) = ins
    if not op.exprs:
        raise PlanError(f"{op.id}: a projection without columns has no SQL form")
    t = b.translator("s")
    cols = [
        _alias(b.output(t, e, f.dtype), i)
        for i, (e, f) in enumerate(zip(op.exprs, op.schema, strict=True))
    ]
    return exp.select(*cols).from_(_table(source, "s"), copy=False)


@TRANSLATIONS.register(Join)
def _join(b: _Builder, op: Join, ins: list[str]) -> exp.Select:
    left, right = ins
    w = op.left_width

    def column(i: int) -> exp.Column:
        return _col("l", i) if i < w else _col("r", i - w)

    cols = [_alias(column(i), i) for i in range(len(op.schema))]
    select = exp.select(*cols).from_(_table(left, "l"), copy=False)
    if op.condition is None:
        return select.join(_table(right, "r"), join_type="CROSS", copy=False)
    t = ExprTranslator(b.dialect, column)
    on = t.typed(op.condition, DataType.BOOLEAN)
    return select.join(_table(right, "r"), on=on, copy=False)


@TRANSLATIONS.register(Aggregate)
def _aggregate(b: _Builder, op: Aggregate, ins: list[str]) -> exp.Select:
    (source,) = ins
    if not op.group_by and not op.aggs:
        raise PlanError(f"{op.id}: an aggregate without keys or aggregates has no SQL form")
    t = b.translator("s")
    keys: list[exp.Expr]
    if all(isinstance(k, ColumnRef) for k in op.group_by):
        keys = [_key_sql(t, k) for k in op.group_by]
    else:
        # Computed keys: compute them first (as k0, k1, ...) so GROUP BY names columns.
        width = len(b.plan.op(b.plan.inputs(op.id)[0]).schema)
        pre = [_alias(_col("s", i), i) for i in range(width)]
        pre += [
            exp.Alias(this=_key_sql(t, k), alias=exp.to_identifier(f"k{j}"))
            for j, k in enumerate(op.group_by)
        ]
        source = b.add_cte(exp.select(*pre).from_(_table(source, "s"), copy=False))
        keys = [_named_col("s", f"k{j}") for j in range(len(op.group_by))]
    cols: list[exp.Expr] = [_alias(k.copy(), i) for i, k in enumerate(keys)]
    n = len(keys)
    for j, (call, f) in enumerate(zip(op.aggs, op.schema.fields[n:], strict=True)):
        agg = t.aggregate(call)
        cols.append(_alias(agg if f.dtype is DataType.NULL else cast(agg, f.dtype), n + j))
    select = exp.select(*cols).from_(_table(source, "s"), copy=False)
    if keys:
        select = select.group_by(*keys, copy=False)
    return select

"""Statistics measured on a sample of the input streams.

The estimator (``optimizer.estimate``) uses, in this order: the catalog's declared statistics
(``selectivity`` and ``distinct`` tables: Exact), statistics measured here on a sample of
each source (Estimated: a sample is not the stream), then the documented defaults
(Estimated) or nothing (Absent).

Measured on a pyarrow sample per stream:

* the selectivity of every Select whose input is its stream's window (directly or through
  other Selects), i.e. every filter over source columns, by the predicate's display text;
* the distinct count of every single source column, and of every composite key the plan
  groups or joins on (traced back to one stream through windows, selects, plain-column
  projections and joins). A count that is not *saturated* in the sample (more than half of
  the sample rows are distinct) grows with the relation, so it is recorded as ``inf`` and the
  estimator caps it by the relation's cardinality.

Example:
    >>> import pyarrow as pa
    >>> from pathlib import Path
    >>> from optimizer.sql import plan_query
    >>> from optimizer.sql.catalog import load_catalog
    >>> cat = load_catalog(Path(__file__).parents[1] / "queries/smartplug/catalog.toml")
    >>> plan = plan_query("SELECT plug_id, MAX(value) AS m FROM readings [RANGE 1 MINUTE] "
    ...                   "WHERE property = 1 GROUP BY plug_id", cat)
    >>> sample = pa.table({"property": [1, 1, 0, 1], "plug_id": [1, 2, 1, 1],
    ...                    "value": [1.0, 2.0, 3.0, 4.0]})
    >>> stats = measure(plan, {"readings": sample})
    >>> stats.selectivities, stats.distinct[("readings", ("plug_id",))]
    ({'property = 1': 0.75}, 2.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from optimizer.estimate import equi_pair, sample_selectivity
from optimizer.ir.expr import ColumnRef, conjuncts
from optimizer.ir.plan import Aggregate, Join, LogicalPlan, Project, Select, Source, Window

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

#: A distinct count above this fraction of the sample rows is not saturated (see above).
SATURATION = 0.5


@dataclass(frozen=True)
class SampleStatistics:
    """Selectivities (predicate text -> fraction) and distinct counts ((stream, sorted column
    names) -> count, ``inf`` when not saturated) measured on samples of the streams."""

    selectivities: dict[str, float] = field(default_factory=dict)
    distinct: dict[tuple[str, tuple[str, ...]], float] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    """Sample rows per stream."""

    def distinct_of(self, stream: str, columns: tuple[str, ...]) -> float | None:
        return self.distinct.get((stream, tuple(sorted(columns))))

    def to_json(self) -> dict[str, object]:
        return {
            "rows": dict(self.rows),
            "selectivities": dict(self.selectivities),
            "distinct": {
                f"{s}.{'+'.join(cols)}": (None if math.isinf(d) else d)
                for (s, cols), d in self.distinct.items()
            },
        }


def source_column(plan: LogicalPlan, op_id: str, column: int) -> tuple[str, str] | None:
    """``(stream, column name)`` that column ``column`` of ``op_id`` carries unchanged from a
    source, or None if it is computed (an expression or an aggregate value)."""
    while True:
        op = plan.op(op_id)
        ins = plan.inputs(op_id)
        if isinstance(op, Source):
            return op.stream, op.schema[column].name
        if isinstance(op, Window | Select) or (not ins):
            if not ins:
                return None
            op_id = ins[0]
        elif isinstance(op, Project):
            e = op.exprs[column]
            if not isinstance(e, ColumnRef):
                return None
            op_id, column = ins[0], e.index
        elif isinstance(op, Join):
            if column < op.left_width:
                op_id = ins[0]
            else:
                op_id, column = ins[1], column - op.left_width
        elif isinstance(op, Aggregate):
            if column >= len(op.group_by):
                return None
            g = op.group_by[column]
            if not isinstance(g, ColumnRef):
                return None
            op_id, column = ins[0], g.index
        else:
            op_id = ins[0]


def _filter_stream(plan: LogicalPlan, op_id: str) -> str | None:
    """The stream a Select filters directly (through windows and selects only)."""
    cur = plan.inputs(op_id)[0]
    while True:
        op = plan.op(cur)
        if isinstance(op, Source):
            return op.stream
        if not isinstance(op, Window | Select):
            return None
        cur = plan.inputs(cur)[0]


def key_sets(plan: LogicalPlan) -> set[tuple[str, tuple[str, ...]]]:
    """Composite keys (stream, sorted column names) the plan groups or equi-joins on."""
    keys: set[tuple[str, tuple[str, ...]]] = set()

    def add(op_id: str, columns: list[int]) -> None:
        origins = [source_column(plan, op_id, c) for c in columns]
        if not origins or any(o is None for o in origins):
            return
        streams = {o[0] for o in origins if o is not None}
        if len(streams) == 1:
            keys.add((streams.pop(), tuple(sorted({o[1] for o in origins if o is not None}))))

    for op in plan.operators():
        ins = plan.inputs(op.id)
        if isinstance(op, Aggregate) and op.group_by:
            cols = [g.index for g in op.group_by if isinstance(g, ColumnRef)]
            if len(cols) == len(op.group_by):
                add(ins[0], cols)
        if isinstance(op, Join) and op.condition is not None:
            pairs = [p for c in conjuncts(op.condition) if (p := equi_pair(c, op.left_width))]
            left = [lc for lc, _ in pairs]
            right = [rc for _, rc in pairs]
            if left:
                add(ins[0], left)
                add(ins[1], right)
    return keys


def measure(plan: LogicalPlan, samples: Mapping[str, pa.Table]) -> SampleStatistics:
    """Measure selectivities and distinct counts of ``plan`` on per-stream samples."""
    stats = SampleStatistics(rows={s: t.num_rows for s, t in samples.items()})
    for op in plan.operators():
        if isinstance(op, Select):
            stream = _filter_stream(plan, op.id)
            sample = samples.get(stream) if stream is not None else None
            f = sample_selectivity(op.predicate, sample) if sample is not None else None
            if f is not None:
                stats.selectivities[op.predicate.display()] = f
    wanted = {(s, (c,)) for s, t in samples.items() for c in t.column_names} | key_sets(plan)
    for stream, cols in sorted(wanted):
        sample = samples.get(stream)
        if sample is None or not sample.num_rows or any(c not in sample.column_names for c in cols):
            continue
        n = _distinct(sample, cols)
        stats.distinct[(stream, cols)] = n if n <= SATURATION * sample.num_rows else math.inf
    return stats


def _distinct(sample: pa.Table, cols: tuple[str, ...]) -> float:
    if len(cols) == 1:
        import pyarrow.compute as pc

        return float(pc.count_distinct(sample.column(cols[0]), mode="all").as_py())
    return float(sample.select(list(cols)).group_by(list(cols)).aggregate([]).num_rows)

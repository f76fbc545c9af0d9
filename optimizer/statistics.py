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

Predicates are evaluated on the sample with pyarrow compute (:func:`sample_selectivity`);
a predicate using something that evaluator lacks keeps its default selectivity.

Given an evaluator (:data:`SubplanKeys`; the optimizer passes ``hycq.sample_eval``'s, which
runs SQL in DuckDB), also the share of a key's values that reach each aggregate over a
derived input (a join, another aggregate): the operators below it are run over the sample
(:func:`derived_signature`, ``SampleStatistics.reaching``).

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from optimizer.ir.catalog import TIME_UNITS_MS
from optimizer.ir.dispatch import KindTable
from optimizer.ir.expr import ARROW_COMPARISONS, Binary, ColumnRef, Expr, InList, Literal, Unary
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
    per_second: dict[tuple[str, tuple[str, ...]], float] = field(default_factory=dict)
    """Distinct values of each group/join key among one event-second's tuples, averaged over
    the sample's seconds: how many groups a second of arrivals touches. Balls into bins
    assumes arrivals spread over the groups at random; a stream that visits its keys in
    order (a sensor sweep, a sorted replay) touches far fewer."""

    static: dict[str, float] = field(default_factory=dict)
    """Per aggregate over a window (keyed by :func:`aggregate_signature`): the share of its
    groups whose value no arrival or expiration can change, measured on the sample's groups
    with two or more rows (see :func:`_static_share`)."""

    reaching: dict[str, float] = field(default_factory=dict)
    """Per aggregate over a derived input (keyed by :func:`derived_signature`): the share of
    its key's distinct values in the stream's sample that reach it, measured by evaluating
    the operators below it over the sample (:data:`SubplanKeys`). Q1's count over the join
    with the per-plug MAX: only plugs with a reading above 0.9 of their maximum (not the
    idle ones) ever reach it, 267 of 800 plugs."""

    def distinct_of(self, stream: str, columns: tuple[str, ...]) -> float | None:
        return self.distinct.get((stream, tuple(sorted(columns))))

    def per_second_of(self, stream: str, columns: tuple[str, ...]) -> float | None:
        return self.per_second.get((stream, tuple(sorted(columns))))

    def to_json(self) -> dict[str, object]:
        return {
            "rows": dict(self.rows),
            "selectivities": dict(self.selectivities),
            "distinct": {
                f"{s}.{'+'.join(cols)}": (None if math.isinf(d) else d)
                for (s, cols), d in self.distinct.items()
            },
            "distinct_per_second": {
                f"{s}.{'+'.join(cols)}": d for (s, cols), d in self.per_second.items()
            },
            "static_groups": dict(self.static),
            "reaching_keys": dict(self.reaching),
        }


@dataclass(frozen=True)
class Origin:
    """Where a column of an operator comes from unchanged: a column of a stream, reached
    through ``path``, the (operator, input port) of every operator with several inputs
    passed on the way down. Two columns come from one tuple of the stream only if their
    paths agree: the two sides of a self-join read one stream but pair different tuples."""

    stream: str
    name: str
    path: tuple[tuple[str, int], ...]


def source_origin(plan: LogicalPlan, op_id: str, column: int) -> Origin | None:
    """The :class:`Origin` of column ``column`` of ``op_id``, or None if it is computed (an
    expression or an aggregate value)."""
    path: list[tuple[str, int]] = []
    while True:
        op = plan.op(op_id)
        if isinstance(op, Source):
            return Origin(op.stream, op.schema[column].name, tuple(path))
        lineage = op.input_column(column)
        if lineage is None:
            return None
        port, column = lineage
        ins = plan.inputs(op_id)
        if len(ins) > 1:
            path.append((op_id, port))
        op_id = ins[port]


def source_column(plan: LogicalPlan, op_id: str, column: int) -> tuple[str, str] | None:
    """``(stream, column name)`` that column ``column`` of ``op_id`` carries unchanged from a
    source, or None if it is computed (an expression or an aggregate value)."""
    origin = source_origin(plan, op_id, column)
    return None if origin is None else (origin.stream, origin.name)


def relation_key(
    plan: LogicalPlan, op_id: str, columns: list[int]
) -> tuple[str, tuple[str, ...]] | None:
    """``(stream, sorted distinct column names)`` when ``columns`` of ``op_id`` all carry
    columns of one tuple of one stream unchanged (one :class:`Origin` path), so that the
    key's distinct values are the stream's; None when one is computed, or they come from
    different tuples (two streams, or both sides of a self-join: ``GROUP BY x.k, y.k``)."""
    origins = [source_origin(plan, op_id, c) for c in columns]
    if not origins or any(o is None for o in origins):
        return None
    if len({(o.stream, o.path) for o in origins if o is not None}) != 1:
        return None
    stream = origins[0].stream if origins[0] is not None else ""
    return stream, tuple(sorted({o.name for o in origins if o is not None}))


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


#: ``keys(op) -> [(input port, columns)]``: the composite keys an operator of a kind groups
#: or equi-joins on, per input (kinds without an entry have none).
KeysFn = Callable[[Any], list[tuple[int, list[int]]]]
KEYS: KindTable[KeysFn] = KindTable("grouping keys")


@KEYS.register(Aggregate)
def _aggregate_keys(op: Aggregate) -> list[tuple[int, list[int]]]:
    cols = [g.index for g in op.group_by if isinstance(g, ColumnRef)]
    return [(0, cols)] if op.group_by and len(cols) == len(op.group_by) else []


@KEYS.register(Join)
def _join_keys(op: Join) -> list[tuple[int, list[int]]]:
    pairs = op.equi_keys()
    if not pairs:
        return []
    return [(0, [lc for lc, _ in pairs]), (1, [rc for _, rc in pairs])]


def key_sets(plan: LogicalPlan) -> set[tuple[str, tuple[str, ...]]]:
    """Composite keys (stream, sorted column names) the plan groups or equi-joins on."""
    keys: set[tuple[str, tuple[str, ...]]] = set()

    for op in plan.operators():
        fn = KEYS.get(type(op))
        if fn is None:
            continue
        ins = plan.inputs(op.id)
        for port, columns in fn(op):
            key = relation_key(plan, ins[port], columns)
            if key is not None:
                keys.add(key)
    return keys


#: ``evaluate(plan, operators, key columns, samples)``: the distinct values of ``key
#: columns`` (of the last of ``operators``) when ``operators`` (a connected subplan whose
#: external inputs are windows) run over the samples, each window holding its stream's
#: whole sample; None when it cannot say (an unsupported expression, too slow). The caller
#: supplies it (``hycq.sample_eval``: DuckDB), so this module needs no engine.
SubplanKeys = Callable[[LogicalPlan, list[str], list[int], Mapping[str, "pa.Table"]], float | None]


def measure(
    plan: LogicalPlan,
    samples: Mapping[str, pa.Table],
    wide: Mapping[str, pa.Table] | None = None,
    evaluate: SubplanKeys | None = None,
) -> SampleStatistics:
    """Measure selectivities and distinct counts of ``plan`` on per-stream samples.

    ``wide`` (stream -> a longer sample, e.g. the first million rows, of which ``samples``
    are a prefix) is used only for the aggregates' static shares, which need groups seen
    more than once (:func:`_static_share`). ``evaluate`` (:data:`SubplanKeys`) measures the
    share of keys reaching each aggregate over a derived input (:func:`derived_signature`);
    without it those shares are not measured (taken as 1)."""
    stats = SampleStatistics(rows={s: t.num_rows for s, t in samples.items()})
    for op in plan.operators():
        if isinstance(op, Select):
            stream = _filter_stream(plan, op.id)
            sample = samples.get(stream) if stream is not None else None
            f = sample_selectivity(op.predicate, sample) if sample is not None else None
            if f is not None:
                stats.selectivities[op.predicate.display()] = f
    keys = key_sets(plan)
    wanted = {(s, (c,)) for s, t in samples.items() for c in t.column_names} | keys
    for stream, cols in sorted(wanted):
        sample = samples.get(stream)
        if sample is None or not sample.num_rows or any(c not in sample.column_names for c in cols):
            continue
        n = _distinct(sample, cols)
        stats.distinct[(stream, cols)] = n if n <= SATURATION * sample.num_rows else math.inf
    clocks = {
        op.stream: (op.schema[op.time_column].name, 1000 // TIME_UNITS_MS[op.time_unit])
        for op in plan.operators()
        if isinstance(op, Source)
    }
    for stream, cols in sorted(keys):
        sample = samples.get(stream)
        clock = clocks.get(stream)
        if sample is None or clock is None or not sample.num_rows:
            continue
        if any(c not in sample.column_names for c in (*cols, clock[0])):
            continue
        d = _per_second(sample, cols, *clock)
        if d is not None:
            stats.per_second[(stream, cols)] = d
    for op in plan.operators():
        if isinstance(op, Aggregate):
            shape = aggregate_signature(plan, op.id)
            if shape is None:
                continue
            sample = (wide or {}).get(shape.stream, samples.get(shape.stream))
            if sample is None or not sample.num_rows:
                continue
            share = _static_share(shape, sample)
            if share is not None:
                stats.static[shape.key] = share
    if evaluate is not None:
        _measure_reaching(plan, wide or samples, evaluate, stats)
    return stats


#: Groups with two or more sample rows needed before a static share is believed.
STATIC_MIN_GROUPS = 20

#: Aggregates whose value stays put while their argument is one constant (COUNT and SUM
#: move with the group's size; SUM of zeros, handled apart, does not).
_CONSTANT_INVARIANT = frozenset({"MIN", "MAX", "AVG", "MEDIAN", "STDDEV", "VARIANCE", "MODE"})


@dataclass(frozen=True)
class AggregateShape:
    """What :func:`_static_share` needs of a grouped aggregate over one stream's window:
    the filters between them, the group key and the calls, all by source column name."""

    stream: str
    predicates: tuple[Expr, ...]
    keys: tuple[str, ...]
    calls: tuple[tuple[str, str | None, bool], ...]
    """(function, argument column or None for ``*``, DISTINCT) per call."""

    @property
    def key(self) -> str:
        filters = " AND ".join(sorted(p.display() for p in self.predicates))
        calls = ",".join(f"{f}({'DISTINCT ' if d else ''}{a or '*'})" for f, a, d in self.calls)
        return f"{self.stream}[{filters}] BY {'+'.join(self.keys)}: {calls}"


def aggregate_signature(plan: LogicalPlan, op_id: str) -> AggregateShape | None:
    """The :class:`AggregateShape` of aggregate ``op_id`` if it groups on plain columns of a
    window (through selects and projects) of one source and its calls read plain columns;
    None otherwise (a derived input, computed keys or arguments)."""
    op = plan.op(op_id)
    if not isinstance(op, Aggregate) or not op.group_by:
        return None
    (inp,) = plan.inputs(op_id)
    predicates: list[Expr] = []
    cur = inp
    while not isinstance(plan.op(cur), Window):
        node = plan.op(cur)
        if isinstance(node, Select):
            predicates.append(node.predicate)
        elif not isinstance(node, Project):
            return None
        (cur,) = plan.inputs(cur)
    keys = [_plain_source(plan, inp, e) for e in op.group_by]
    calls = []
    for call in op.aggs:
        arg = None if call.arg is None else _plain_source(plan, inp, call.arg)
        if call.arg is not None and arg is None:
            return None
        calls.append((call.func, None if arg is None else arg[1], call.distinct))
    args = [a for a in (_plain_source(plan, inp, c.arg) for c in op.aggs if c.arg) if a]
    streams = {k[0] for k in keys if k is not None} | {a[0] for a in args}
    if any(k is None for k in keys) or len(streams) != 1:
        return None
    return AggregateShape(
        streams.pop(),
        tuple(predicates),
        tuple(sorted({k[1] for k in keys if k is not None})),
        tuple(calls),
    )


def _plain_source(plan: LogicalPlan, op_id: str, e: Expr) -> tuple[str, str] | None:
    return source_column(plan, op_id, e.index) if isinstance(e, ColumnRef) else None


def _static_share(shape: AggregateShape, sample: pa.Table) -> float | None:
    """Share of the aggregate's groups whose value no arrival or expiration changes: every
    call's argument is one constant over the group (zero for a SUM; a COUNT other than
    COUNT(DISTINCT) always moves). Idle smart plugs report one load value (0 W) for hours: on
    the generated shapes two thirds of the plugs, whose AVG, MIN and MAX never change.

    Measured over the sample's groups with two or more rows that pass the filters (a group
    seen once shows nothing); None when fewer than :data:`STATIC_MIN_GROUPS` such groups
    exist, or a column or filter cannot be evaluated on the sample. A group constant over
    the sample may vary over a longer window, so this is an upper bound; the estimator uses
    it as it is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    args = sorted({a for _, a, _ in shape.calls if a is not None})
    if any(c not in sample.column_names for c in (*shape.keys, *args)):
        return None
    t = sample
    for p in shape.predicates:
        try:
            mask = _arrow_eval(p, t, pc)
        except (KeyError, _NotSampleable, pa.ArrowException):
            return None
        t = t.filter(pc.fill_null(mask, False))
    # Grouped by position (k0.. the keys, a0.. the arguments): a key may also be an
    # argument (MAX(k) ... GROUP BY k), and no stream column can clash with "a0_min".
    keys = _unique(shape.keys)
    columns = [t.column(c) for c in (*keys, *args)]
    positional = [*(f"k{i}" for i in range(len(keys))), *(f"a{i}" for i in range(len(args)))]
    specs: list[tuple[Any, ...]] = [([], "count_all")]
    for i in range(len(args)):
        specs += [(f"a{i}", "min"), (f"a{i}", "max")]
    g = pa.Table.from_arrays(columns, positional).group_by(positional[: len(keys)]).aggregate(specs)
    g = g.filter(pc.greater_equal(g.column("count_all"), 2))
    if g.num_rows < STATIC_MIN_GROUPS:
        return None
    still = pa.array([True] * g.num_rows)
    for func, arg, distinct in shape.calls:
        if arg is None or (func == "COUNT" and not distinct):
            return 0.0  # a count moves whenever its group's size does
        a = args.index(arg)
        lo, hi = g.column(f"a{a}_min"), g.column(f"a{a}_max")
        same = pc.fill_null(pc.equal(lo, hi), False)
        if func == "SUM" and not distinct:
            same = pc.and_(same, pc.fill_null(pc.equal(lo, 0), False))
        elif func not in _CONSTANT_INVARIANT and not (distinct or func == "COUNT"):
            return 0.0  # an aggregate this rule does not know: assume it moves
        still = pc.and_(still, same)
    return float(pc.sum(still).as_py() or 0) / g.num_rows


def _per_second(sample: pa.Table, cols: tuple[str, ...], ts: str, tps: int) -> float | None:
    """Mean distinct ``cols`` per event-second of ``sample`` (its first and last second,
    maybe cut by the sample, left out when there are others). ``cols`` may hold the
    timestamp column itself (``GROUP BY ts``): the table grouped here names its columns by
    position, so no name is there twice."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sec = pc.floor(pc.divide(pc.cast(sample.column(ts), pa.float64()), float(tps)))
    keys = _unique(cols)
    names = [f"k{i}" for i in range(len(keys))]
    t = pa.Table.from_arrays([sec, *(sample.column(c) for c in keys)], ["sec", *names])
    pairs = t.group_by(["sec", *names]).aggregate([])
    per = pairs.group_by(["sec"]).aggregate([([], "count_all")]).sort_by("sec")
    counts = per.column("count_all").to_pylist()
    if len(counts) > 2:
        counts = counts[1:-1]
    return float(sum(counts)) / len(counts) if counts else None


def _distinct(sample: pa.Table, cols: tuple[str, ...]) -> float:
    """Distinct values of the key ``cols`` (a column named twice counts once) in ``sample``."""
    keys = _unique(cols)
    if len(keys) == 1:
        import pyarrow.compute as pc

        return float(pc.count_distinct(sample.column(keys[0]), mode="all").as_py())
    return float(sample.select(keys).group_by(keys).aggregate([]).num_rows)


def _unique(names: tuple[str, ...] | list[str]) -> list[str]:
    """``names`` without repeats, in order (a table selected by them names each once)."""
    return list(dict.fromkeys(names))


# -- selectivities measured on a sample ----------------------------------------------------


def sample_selectivities(plan: LogicalPlan, sample: pa.Table) -> dict[str, float]:
    """Measure each Select predicate of ``plan`` on a pyarrow sample of its input stream.

    Only predicates built from comparisons, AND/OR/NOT, IS [NOT] NULL over columns named in
    the sample and literals are measured; others are left to the defaults. The result maps
    predicate display text to the fraction of sample rows that satisfy it (pass it as
    ``estimate(..., selectivities=...)``). pyarrow is imported only when this is called.
    """
    out: dict[str, float] = {}
    for op in plan.operators():
        if isinstance(op, Select):
            f = sample_selectivity(op.predicate, sample)
            if f is not None:
                out[op.predicate.display()] = f
    return out


def sample_selectivity(predicate: Expr, sample: pa.Table) -> float | None:
    """Fraction of ``sample`` rows satisfying ``predicate`` (columns matched by name), or
    None if the predicate uses columns or functions the sample evaluator does not have."""
    import pyarrow.compute as pc

    if sample.num_rows == 0:
        return None
    try:
        mask = _arrow_eval(predicate, sample, pc)
    except (KeyError, _NotSampleable):
        return None
    hits = pc.sum(pc.fill_null(mask, False)).as_py() or 0
    return float(hits) / sample.num_rows


_ARROW_OPS = {
    **ARROW_COMPARISONS,
    "AND": "and_kleene",
    "OR": "or_kleene",
    "+": "add",
    "-": "subtract",
    "*": "multiply",
    "/": "divide",
}


class _NotSampleable(Exception):
    """A predicate the sample evaluator cannot compute: its selectivity stays estimated."""


def _arrow_eval(e: Expr, table: Any, pc: Any) -> Any:
    if isinstance(e, ColumnRef):
        name = e.name.split(".")[-1]
        if name not in table.column_names:
            raise KeyError(name)
        return table.column(name)
    if isinstance(e, Literal):
        return e.value
    if isinstance(e, Binary) and e.op in _ARROW_OPS:
        return pc.call_function(
            _ARROW_OPS[e.op], [_arrow_eval(e.left, table, pc), _arrow_eval(e.right, table, pc)]
        )
    if isinstance(e, InList) and all(isinstance(i, Literal) for i in e.items):
        import pyarrow as pa

        values = [i.value for i in e.items if i.value is not None]  # type: ignore[attr-defined]
        try:
            column = _arrow_eval(e.value, table, pc)
            found = pc.is_in(column, value_set=pa.array(values).cast(column.type))
        except (pa.ArrowException, AttributeError, TypeError, ValueError):
            raise _NotSampleable(e.display()) from None
        if len(values) < len(e.items):  # a NULL item: not found is NULL, not false
            found = pc.if_else(found, True, pa.scalar(None, pa.bool_()))
        return found
    if isinstance(e, Unary):
        inner = _arrow_eval(e.operand, table, pc)
        if e.op == "NOT":
            return pc.invert(inner)
        if e.op == "IS NULL":
            return pc.is_null(inner)
        if e.op == "IS NOT NULL":
            return pc.is_valid(inner)
    raise _NotSampleable(e.display())


# -- keys reaching an aggregate over a derived input ---------------------------------------


@dataclass(frozen=True)
class DerivedShape:
    """An aggregate over a derived input (a join or an aggregate, not a window's filtered
    tuples) whose group key is plain columns of one stream: the operators below it down to
    the windows, and the key."""

    stream: str
    keys: tuple[str, ...]
    operators: tuple[str, ...]
    """The subplan below the aggregate, topologically ordered, its input last."""
    columns: tuple[int, ...]
    """The key's columns in the input's schema."""
    key: str
    """Stable across join orders (Phase One): the stream, the key and each operator's
    description, conjuncts split and sides of an equality sorted."""


def derived_signature(plan: LogicalPlan, op_id: str) -> DerivedShape | None:
    """The :class:`DerivedShape` of aggregate ``op_id``, or None (a window-fed input,
    computed keys, keys of several streams)."""
    op = plan.op(op_id)
    if not isinstance(op, Aggregate) or not op.group_by:
        return None
    if not all(isinstance(e, ColumnRef) for e in op.group_by):
        return None
    (inp,) = plan.inputs(op_id)
    cur = inp
    while isinstance(plan.op(cur), Select | Project):
        (cur,) = plan.inputs(cur)
    if isinstance(plan.op(cur), Window | Source):
        return None  # window-fed: per_second and static shares cover it
    columns = [e.index for e in op.group_by if isinstance(e, ColumnRef)]
    relation = relation_key(plan, inp, columns)
    if relation is None:
        return None
    below: list[str] = []
    seen: set[str] = set()
    stack = [inp]
    while stack:
        o = stack.pop()
        if o in seen:
            continue
        seen.add(o)
        node = plan.op(o)
        if isinstance(node, Window | Source):
            continue
        if not isinstance(node, Select | Project | Join | Aggregate):
            return None  # an R2S or another operator below: not a relational subplan
        below.append(o)
        stack.extend(plan.inputs(o))
    order = [o for o in plan.topological() if o in seen and o in below]
    parts = sorted(_described(plan.op(o)) for o in order)
    stream, names = relation
    key = f"{stream} BY {'+'.join(names)} OVER " + " | ".join(parts)
    return DerivedShape(stream, names, tuple(order), tuple(columns), key)


def _described(op: Any) -> str:
    text: str = op.describe()
    if isinstance(op, Join) and text.startswith("ON "):
        conjuncts = []
        for c in text[3:].split(" AND "):
            sides = c.split(" = ")
            conjuncts.append(" = ".join(sorted(sides)) if len(sides) == 2 else c)
        return f"{op.kind}: " + " AND ".join(sorted(conjuncts))
    return f"{op.kind}: {text}"


#: The fewest sample tuples per key for a reaching share: a predicate comparing a tuple with
#: its key's aggregate (Q2: value > the plug's AVG) passes no tuple of a key seen once, and
#: on 50,000 plugs a 100,000-row sample holds two per plug, where a 5-minute window holds
#: hundreds. The wide sample (a million rows) is used when there is one.
REACHING_ROWS_PER_KEY = 10
#: The subplan runs over a prefix of each sample holding about this many tuples per key of
#: the aggregate's stream (every stream cut to the same fraction): a join of whole samples
#: over few keys has 10^8 rows (the keyed templates: 100 keys, 100,000 rows a stream) and
#: took 1-2 s an aggregate; the prefix, milliseconds.
REACHING_SAMPLE_PER_KEY = 30
#: Subplans with more joins are not run: the multiway and QDDH templates (three and four
#: streams over few keys) ran into :data:`hycq.sample_eval.BUDGET_S` even on the prefix, a
#: quarter of a second lost per optimization, and the test suite optimizes them hundreds of
#: times (its time grew by a fifth).
REACHING_MAX_JOINS = 1


def reaching_samples(
    samples: Mapping[str, pa.Table], shape: DerivedShape
) -> tuple[dict[str, pa.Table], float] | None:
    """The samples a reaching share of ``shape`` is measured on (a prefix of each, see
    :data:`REACHING_SAMPLE_PER_KEY`) and the key's distinct values in the prefix of its
    stream's; None when the samples hold too few tuples per key
    (:data:`REACHING_ROWS_PER_KEY`) or lack the key."""
    sample = samples.get(shape.stream)
    if sample is None or any(c not in sample.column_names for c in shape.keys):
        return None
    total = _distinct(sample, shape.keys)
    if total <= 0 or sample.num_rows < REACHING_ROWS_PER_KEY * total:
        return None  # too few tuples per key to stand for a window's (see the constant)
    share = min(1.0, REACHING_SAMPLE_PER_KEY * total / sample.num_rows)
    cut = {s: t.slice(0, math.ceil(share * t.num_rows)) for s, t in samples.items()}
    return cut, _distinct(cut[shape.stream], shape.keys)


def _measure_reaching(
    plan: LogicalPlan,
    samples: Mapping[str, pa.Table],
    evaluate: SubplanKeys,
    stats: SampleStatistics,
) -> None:
    for op in plan.operators():
        shape = derived_signature(plan, op.id)
        if shape is None or shape.key in stats.reaching:
            continue
        joins = sum(isinstance(plan.op(o), Join) for o in shape.operators)
        if joins > REACHING_MAX_JOINS:
            continue
        cut = reaching_samples(samples, shape)
        if cut is None or cut[1] <= 0:
            continue
        reached = evaluate(plan, list(shape.operators), list(shape.columns), cut[0])
        if reached is not None:
            stats.reaching[shape.key] = min(1.0, reached / cut[1])

"""Source-driven estimation (dissertation section 6.3.2), shared by every cost model.

For each operator of a logical plan this computes, from the sources' arrival rates:

* ``lambda_in``: per input port, tuples arriving per unit (second) of source time;
* ``lambda_out``: the source-driven output size, output tuples per second of source
  arrivals (*not* an output rate): Eq. 6.1 ``f * lambda_in`` for select/project (f = 1 for
  projections); Eq. 6.2 ``lambda_L * f * |w_R| + lambda_R * f * |w_L|`` for joins; Eq. 6.3
  ``n_slide * n_group`` for aggregates, refined to the groups that change per slide
  (:func:`aggregate_output`);
* ``cardinality`` (|w|): the size of the operator's relation at one slide instant, cascaded
  from the windows as in [AN04]: RANGE ``rate * size_seconds``; ROWS ``n``; NOW
  ``rate * one tick``; UNBOUNDED ``rate * horizon`` (configurable, default one hour); select
  ``f * |w|``; join ``f * |w_L| * |w_R|``; aggregate ``n_group``;
* ``slide_seconds``: how often the relation changes (the smallest slide upstream; count-based
  slides are ``slide_rows / rate`` seconds, so ``n_slide = r / beta``);
* ``selectivity`` and ``groups`` where they apply.

Every number is an :class:`~optimizer.ir.cost.Estimate` carrying its precision: declared
rates and catalog statistics are Exact, defaults and anything derived from them Estimated.

Defaults (used when neither the catalog's ``selectivity`` table, keyed by the predicate's
display text, nor a measured sample gives a selectivity):

* ``col = literal`` 0.1; ``<>`` 0.9; ranges ``< <= > >=`` 1/3; ``IS NULL`` 0.1,
  ``IS NOT NULL`` 0.9; ``NOT p`` 1 - s(p); ``p AND q`` s(p) * s(q); ``p OR q``
  s(p) + s(q) - s(p) * s(q) (inclusion-exclusion, independence); TRUE 1, FALSE 0; anything
  else 1/3.
* Equi-join conjuncts ``l = r`` across the two sides are grouped by the pair of operators
  their columns come from (looking through joins); each group is one composite key with
  selectivity ``1 / max(d_l, d_r)``, ``d`` being the key's distinct count: the product of its
  columns' distinct counts (traced to the catalog, else ``default_distinct``) capped by that
  operator's cardinality. Other join conjuncts use the predicate defaults. Because every
  group depends only on the operators it connects, the selectivity of a multi-way join does
  not depend on the join order (Phase One relies on this).
* Group counts: the product over the GROUP BY columns of their distinct counts (catalog
  ``distinct`` traced through the plan, else ``default_distinct`` = 100 per column), capped
  by the input cardinality; 1 without GROUP BY.

Example:
    >>> from pathlib import Path
    >>> from optimizer.sql import plan_query
    >>> from optimizer.sql.catalog import load_catalog
    >>> cat = load_catalog(Path(__file__).parents[1] / "queries/smartplug/catalog.toml")
    >>> plan = plan_query("SELECT plug_id, AVG(value) AS a FROM readings [RANGE 1 MINUTE] "
    ...                   "WHERE property = 1 GROUP BY plug_id", cat)
    >>> est = estimate(plan, cat)
    >>> print(est["window1"].cardinality, est["select1"].lambda_out, est["aggregate1"].groups)
    1.2e+05 ~200 ~100
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from optimizer.ir.catalog import TIME_UNITS_MS, Catalog
from optimizer.ir.cost import Estimate
from optimizer.ir.costing import Estimates, OpEstimate
from optimizer.ir.dispatch import KindTable
from optimizer.ir.expr import Binary, ColumnRef, Expr, InList, Literal, Unary, conjuncts
from optimizer.ir.measured import MeasuredStatistics
from optimizer.ir.plan import (
    Aggregate,
    Join,
    LogicalPlan,
    Operator,
    Project,
    Select,
    Source,
    Window,
    WindowKind,
    equi_pair,
)
from optimizer.statistics import (
    SampleStatistics,
    aggregate_signature,
    derived_signature,
    relation_key,
)

#: Default selectivities of section "Defaults" above.
EQUALITY = 0.1
INEQUALITY = 0.9
RANGE = 1.0 / 3.0
IS_NULL = 0.1
OTHER = 1.0 / 3.0
#: Default distinct count of a column nobody told us about.
DEFAULT_DISTINCT = 100.0
#: Seconds of history an UNBOUNDED window is assumed to hold.
DEFAULT_HORIZON = 3600.0


def estimate(
    plan: LogicalPlan,
    catalog: Catalog | None = None,
    rates: Mapping[str, float] | float | None = None,
    selectivities: Mapping[str, float] | None = None,
    horizon: float = DEFAULT_HORIZON,
    default_distinct: float = DEFAULT_DISTINCT,
    distinct: Mapping[str, float] | None = None,
    sample: SampleStatistics | None = None,
    measured: MeasuredStatistics | None = None,
) -> Estimates:
    """Estimate every operator of ``plan`` bottom-up from the sources.

    ``rates`` overrides the catalog rate: one number for every stream, or a mapping stream
    name -> tuples per second. ``selectivities`` (predicate display text -> fraction, e.g.
    from :func:`optimizer.statistics.sample_selectivities`) override the catalog's table and
    the defaults;
    ``distinct`` (source column name -> distinct count) overrides the catalog's counts.
    ``sample`` (:func:`optimizer.statistics.measure`) supplies Estimated selectivities and
    distinct counts where the catalog declares none.
    ``measured`` (statistics measured while the query runs,
    :class:`~optimizer.ir.measured.MeasuredStatistics`) wins over all of these: its rates
    over ``rates`` and the catalog, its selectivities over ``selectivities``, the catalog and
    the sample, its distinct counts over ``distinct``, the catalog and the sample (for the
    streams and keys it has figures for; the rest is estimated as without it).
    """
    est = _Estimator(plan, catalog, rates, selectivities, horizon, default_distinct)
    est.distinct_override = dict(distinct or {})
    est.sample = sample
    if measured is not None:
        est.measured.update(measured.selectivities)
        est.runtime = measured
    return est.run()


class _Estimator:
    def __init__(
        self,
        plan: LogicalPlan,
        catalog: Catalog | None,
        rates: Mapping[str, float] | float | None,
        selectivities: Mapping[str, float] | None,
        horizon: float,
        default_distinct: float,
    ) -> None:
        self.plan = plan
        self.catalog = catalog
        self.rate_override = rates
        self.measured = dict(selectivities or {})
        self.horizon = horizon
        self.default_distinct = default_distinct
        self.out: dict[str, OpEstimate] = {}
        self.stream_rates: dict[str, float] = {}
        self._distinct: dict[tuple[str, int], Estimate] = {}
        self.distinct_override: dict[str, float] = {}
        self.sample: SampleStatistics | None = None
        self.runtime: MeasuredStatistics | None = None

    # -- driver ---------------------------------------------------------------------------

    def run(self) -> Estimates:
        for op_id in self.plan.topological():
            self.out[op_id] = self._op(op_id, self.plan.op(op_id))
        declared: dict[str, float] = {}
        for sink in [self.plan.sink]:
            declared.update(self._declared(sink))
        return Estimates(
            self.plan, dict(self.out), dict(self.stream_rates), declared, self.key_distinct
        )

    def _op(self, op_id: str, op: Operator) -> OpEstimate:
        ins = [self.out[i] for i in self.plan.inputs(op_id)]
        return ESTIMATORS.of(op)(self, op_id, op, ins)

    def _rate(self, stream: str) -> Estimate:
        if self.runtime is not None and stream in self.runtime.rates:
            self.stream_rates[stream] = self.runtime.rates[stream]
            return Estimate.estimated(self.runtime.rates[stream])
        override = self.rate_override
        if isinstance(override, int | float):
            value: float | None = float(override)
        elif override is not None and stream in override:
            value = float(override[stream])
        else:
            sdef = self.catalog.get(stream) if self.catalog is not None else None
            value = sdef.rate if sdef is not None else None
        if value is None:
            raise ValueError(f"no arrival rate for stream '{stream}': give rates= or a catalog")
        self.stream_rates[stream] = value
        return Estimate.exact(value)

    def _window(self, op: Window, rate: Estimate) -> tuple[Estimate, float]:
        tick = TIME_UNITS_MS.get(op.time_unit, 1000) / 1000.0
        if op.slide_rows:
            slide = op.slide / rate.value if rate.value > 0 else float("inf")
        else:
            slide = op.slide * tick
        if op.window is WindowKind.RANGE:
            card = rate * ((op.size or 0) * tick)
        elif op.window is WindowKind.ROWS:
            card = Estimate.exact(float(op.size or 0))
        elif op.window is WindowKind.NOW:
            card = rate * tick
        else:
            card = (rate * self.horizon).to_estimated()
        return card, slide

    # -- selectivities --------------------------------------------------------------------

    def _declared(self, op_id: str) -> dict[str, float]:
        """Catalog selectivities of every stream upstream of ``op_id``, then measured ones."""
        table: dict[str, float] = {}
        if self.catalog is not None:
            for src in self._upstream_streams(op_id):
                sdef = self.catalog.get(src)
                if sdef is not None:
                    table.update(dict(sdef.selectivity))
        table.update(self.measured)
        return table

    def _upstream_streams(self, op_id: str) -> list[str]:
        out: list[str] = []
        stack = [op_id]
        seen: set[str] = set()
        while stack:
            cur = stack.pop()
            if cur in seen:
                continue
            seen.add(cur)
            op = self.plan.op(cur)
            if isinstance(op, Source):
                out.append(op.stream)
            stack.extend(self.plan.inputs(cur))
        return sorted(out)

    def predicate_selectivity(self, op_id: str, predicate: Expr) -> Estimate:
        return predicate_selectivity(predicate, self._declared(op_id), self._sampled())

    def _sampled(self) -> Mapping[str, float]:
        return self.sample.selectivities if self.sample is not None else {}

    def join_selectivity(self, op_id: str, op: Join) -> Estimate:
        """Product over conjuncts; equi-conjuncts are grouped by the pair of operators their
        columns come from (through joins) and each group is one composite key."""
        return self.join_selectivities(op_id, op)[0]

    def join_selectivities(self, op_id: str, op: Join) -> tuple[Estimate, Estimate | None]:
        """``(f, f_equi)``: the join's selectivity (:meth:`join_selectivity`) and that of its
        equi-keys alone when a residual predicate tests the pairs they match (the row hash
        join evaluates it on ``f_equi * |w|`` stored tuples per probe; with no equi-key that
        is every stored tuple), else None (every matched pair is output)."""
        if op.condition is None:
            return Estimate.exact(1.0), None
        declared = self._declared(op_id)
        if op.condition.display() in declared:
            return Estimate.exact(declared[op.condition.display()]), None
        left, right = self.plan.inputs(op_id)
        keys: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
        f = Estimate.exact(1.0)
        residual = False
        for c in conjuncts(op.condition):
            pair = equi_pair(c, op.left_width)
            if pair is None or c.display() in declared:
                f = f * predicate_selectivity(c, declared, self._sampled())
                residual = residual or pair is None
                continue
            lo, lc = self.origin(left, pair[0])
            ro, rc = self.origin(right, pair[1])
            cols = keys.setdefault((lo, ro), ([], []))
            cols[0].append(lc)
            cols[1].append(rc)
        f_equi = Estimate.exact(1.0)
        for (lo, ro), (lcols, rcols) in keys.items():
            f_equi = f_equi * key_selectivity(
                self.key_distinct(lo, lcols), self.key_distinct(ro, rcols)
            )
        return f * f_equi, (f_equi if residual else None)

    def origin(self, op_id: str, column: int) -> tuple[str, int]:
        """The first non-join operator (and its column) a join column comes from."""
        op = self.plan.op(op_id)
        while isinstance(op, Join):
            left, right = self.plan.inputs(op_id)
            if column < op.left_width:
                op_id = left
            else:
                op_id, column = right, column - op.left_width
            op = self.plan.op(op_id)
        return op_id, column

    def key_distinct(self, op_id: str, columns: list[int]) -> Estimate:
        """Distinct values of a composite key of ``op_id``: measured on the sample when the
        key comes from one stream, else the product of the columns' distinct counts
        (default ``default_distinct``), capped by the cardinality."""
        sampled = self._sampled_key(op_id, columns)
        if sampled is not None:
            return sampled
        return composite_distinct(
            [self.distinct(op_id, c) for c in columns],
            self.out[op_id].cardinality,
            self.default_distinct,
        )

    # -- distinct counts and groups -------------------------------------------------------

    def distinct(self, op_id: str, column: int) -> Estimate:
        """Distinct values of ``column`` of ``op_id``'s output, traced to the catalog."""
        key = (op_id, column)
        if key not in self._distinct:
            self._distinct[key] = self._trace_distinct(op_id, column)
        return self._distinct[key]

    def _sampled_key(self, op_id: str, columns: list[int]) -> Estimate | None:
        """The measured (run-time) or sampled distinct count of a multi-column key of
        ``op_id`` (capped by its cardinality)."""
        if (self.sample is None and self.runtime is None) or len(columns) < 2:
            return None
        relation = relation_key(self.plan, op_id, columns)
        if relation is None:
            return None
        stream, names = relation
        d = self.runtime.distinct_of(stream, names) if self.runtime is not None else None
        if d is None:
            sdef = self.catalog.get(stream) if self.catalog is not None else None
            if sdef is not None and any(n in dict(sdef.distinct) for n in names):
                return None  # declared statistics win over a sample
            d = self.sample.distinct_of(stream, names) if self.sample is not None else None
        if d is None:
            return None
        cap = self.out[op_id].cardinality if op_id in self.out else Estimate.absent()
        value = Estimate.estimated(d)
        return value if cap.is_absent else value.min(cap.max(1.0))

    def per_second_key(self, op_id: str, columns: list[int]) -> float | None:
        """Distinct values of a key of ``op_id`` per event-second of the sample (None
        without a sample or when the key is computed or spans streams)."""
        if self.sample is None or not columns:
            return None
        relation = relation_key(self.plan, op_id, columns)
        return None if relation is None else self.sample.per_second_of(*relation)

    def _trace_distinct(self, op_id: str, column: int) -> Estimate:
        op = self.plan.op(op_id)
        ins = self.plan.inputs(op_id)
        est = self.out.get(op_id)
        cap = est.cardinality if est is not None else Estimate.absent()

        def capped(d: Estimate) -> Estimate:
            return d if d.is_absent or cap.is_absent else d.min(cap)

        if isinstance(op, Source):
            name = op.schema[column].name
            runtime = self.runtime.distinct_of(op.stream, (name,)) if self.runtime else None
            if runtime is not None:
                return Estimate.estimated(runtime)
            sdef = self.catalog.get(op.stream) if self.catalog is not None else None
            known: dict[str, float] = dict(sdef.distinct) if sdef is not None else {}
            known.update(self.distinct_override)
            name = op.schema[column].name
            if name in known:
                return Estimate.exact(known[name])
            d = self.sample.distinct_of(op.stream, (name,)) if self.sample is not None else None
            return Estimate.estimated(d) if d is not None else Estimate.absent()
        lineage = op.input_column(column)
        if lineage is None:
            return Estimate.absent()  # computed: an expression or an aggregate value
        port, col = lineage
        return capped(self.distinct(ins[port], col))

    def static_share(self, op_id: str) -> float:
        """Share of aggregate ``op_id``'s groups whose value never changes, measured on the
        sample (:func:`optimizer.statistics.aggregate_signature`); 0 without a measurement."""
        if self.sample is None or not self.sample.static:
            return 0.0
        shape = aggregate_signature(self.plan, op_id)
        return self.sample.static.get(shape.key, 0.0) if shape is not None else 0.0

    def reaching_share(self, op_id: str) -> float:
        """Share of the key values of aggregate ``op_id``'s stream that reach it through
        its derived input, measured on the sample
        (:func:`optimizer.statistics.derived_signature`); 1 without a measurement."""
        if self.sample is None or not self.sample.reaching:
            return 1.0
        shape = derived_signature(self.plan, op_id)
        return self.sample.reaching.get(shape.key, 1.0) if shape is not None else 1.0

    def group_count(self, op_id: str, op: Aggregate) -> Estimate:
        (inp,) = self.plan.inputs(op_id)
        card_in = self.out[inp].cardinality
        if not op.group_by:
            return Estimate.exact(1.0)
        if all(isinstance(e, ColumnRef) for e in op.group_by):
            cols = [e.index for e in op.group_by if isinstance(e, ColumnRef)]
            sampled = self._sampled_key(inp, cols)
            if sampled is not None:
                return sampled
        return composite_distinct(
            [
                self.distinct(inp, e.index) if isinstance(e, ColumnRef) else Estimate.absent()
                for e in op.group_by
            ],
            card_in,
            self.default_distinct,
        )


def aggregate_output(
    op: Aggregate,
    lam_in: Estimate,
    card_in: Estimate,
    groups: Estimate,
    slide: float,
    touched: float | None = None,
    static: float = 0.0,
) -> Estimate:
    """Output tuples per second of source time of a grouped aggregate over a sliding window.

    Eq. 6.3 charges ``n_slide * n_group``: every group re-emitted at every slide. Our
    aggregates (row engine and the deltas a MIG hands to row operators) emit only the groups
    whose value changed, as a delete and an insert, so this refines it:

    * ``touched`` groups per slide (given by the estimator: measured on the sample where it
      can, see :func:`_aggregate`), else ``e = 2 * lambda_in * slide`` tuple events per
      slide (arrivals and, once the window is
      full, as many expirations) touch ``G * (1 - exp(-e / G))`` of the ``G`` groups
      (balls into bins);
    * COUNT/SUM/AVG and the other aggregates change whenever their group is touched;
      MIN/MAX only when the extreme arrives or leaves: a group of ``n = |w| / G`` tuples
      receiving ``a = lambda_in * slide / G`` of them per slide changes with probability
      about ``2a / n = 2 * lambda_in * slide / |w|`` (the rate cancels: a per-plug MAX over
      5 minutes sliding 1 second changes for ~0.7% of the plugs per slide at any rate);
    * a ``static`` share of the groups (measured on the sample: their argument is one
      constant, e.g. an idle plug's 0 W) never changes, whatever touches it;
    * ``lambda_out = 2 * changed / slide``, never more than Eq. 6.3's two rows per group.

    Measured on Q1's per-plug MAX: 21-26 rows/s at 1k-40k tuples/s against 1,677 by Eq. 6.3
    (docs/optimizer.md).
    """
    g = groups.value
    lam = lam_in.value
    if groups.is_absent or lam_in.is_absent or g <= 0 or slide <= 0:
        return groups * (1.0 / slide) if slide > 0 else groups
    precision = (groups * lam_in).to_estimated()
    if touched is None:
        events = 2.0 * lam * slide
        touched = g * -math.expm1(-events / g)
    if op.aggs and all(c.func in ("MIN", "MAX") for c in op.aggs) and op.group_by:
        window = card_in.value if not card_in.is_absent else 0.0
        p = min(1.0, 2.0 * lam * slide / window) if window > 0 else 1.0
        changed = min(touched, g * p)
    else:
        changed = touched
    changed *= 1.0 - min(max(static, 0.0), 1.0)
    value = 2.0 * max(changed, 1.0 if not op.group_by else 0.0) / slide
    return Estimate(value, precision.precision)


def join_output(
    lam_l: Estimate, card_l: Estimate, lam_r: Estimate, card_r: Estimate, f: Estimate
) -> tuple[Estimate, Estimate]:
    """Eq. 6.2: ``(lambda_out, |w_out|)`` of a windowed join with selectivity ``f``.

    Every left arrival probes the right relation (``f * |w_R|`` matches) and vice versa; the
    joined relation holds ``f * |w_L| * |w_R|`` tuples.
    """
    lam_out = lam_l * f * card_r + lam_r * f * card_l
    return lam_out, f * card_l * card_r


def predicate_selectivity(
    predicate: Expr, declared: Mapping[str, float], sampled: Mapping[str, float] | None = None
) -> Estimate:
    """Selectivity of a filter predicate: a declared value for its display text (Exact), a
    sampled one (Estimated), recursively for each conjunct / disjunct, else the defaults of
    the module docstring."""
    text = predicate.display()
    if text in declared:
        return Estimate.exact(declared[text])
    if sampled and text in sampled:
        return Estimate.estimated(sampled[text])
    if isinstance(predicate, Binary):
        if predicate.op == "AND":
            return predicate_selectivity(predicate.left, declared, sampled) * (
                predicate_selectivity(predicate.right, declared, sampled)
            )
        if predicate.op == "OR":
            a = predicate_selectivity(predicate.left, declared, sampled)
            b = predicate_selectivity(predicate.right, declared, sampled)
            return a + b - a * b
        if predicate.op == "=":
            return Estimate.estimated(EQUALITY)
        if predicate.op == "<>":
            return Estimate.estimated(INEQUALITY)
        if predicate.op in ("<", "<=", ">", ">="):
            return Estimate.estimated(RANGE)
    if isinstance(predicate, InList):  # as the OR of its equalities, each EQUALITY
        return Estimate.estimated(1.0 - (1.0 - EQUALITY) ** len(predicate.items))
    if isinstance(predicate, Unary):
        if predicate.op == "NOT":
            return 1.0 - predicate_selectivity(predicate.operand, declared, sampled)
        if predicate.op == "IS NULL":
            return Estimate.estimated(IS_NULL)
        if predicate.op == "IS NOT NULL":
            return Estimate.estimated(1.0 - IS_NULL)
    if isinstance(predicate, Literal) and isinstance(predicate.value, bool):
        return Estimate.exact(1.0 if predicate.value else 0.0)
    return Estimate.estimated(OTHER)


def composite_distinct(
    distincts: list[Estimate], cardinality: Estimate, default: float = DEFAULT_DISTINCT
) -> Estimate:
    """Distinct values of a composite key: product of per-column counts (absent ones get
    ``default``, as an estimate), capped by the relation's cardinality when known."""
    n = Estimate.exact(1.0)
    for d in distincts:
        n = n * d.or_default(Estimate.estimated(default))
    return n if cardinality.is_absent else n.min(cardinality.max(1.0))


def key_selectivity(d_left: Estimate, d_right: Estimate) -> Estimate:
    """Selectivity of an equi-join on a (composite) key: ``1 / max(d_l, d_r)``."""
    return 1.0 / d_left.max(d_right)


# -- one estimator per operator kind ----------------------------------------------------------

#: ``estimator(est, op_id, op, inputs) -> OpEstimate`` per logical operator kind, given the
#: inputs' estimates in port order. Kinds without an entry (R2S, sink) pass their input on.
Estimator = Callable[[_Estimator, str, Any, list[OpEstimate]], OpEstimate]


def _flows(ins: list[OpEstimate]) -> tuple[tuple[Estimate, ...], tuple[Estimate, ...], float]:
    """The inputs' ``(lambda_out, cardinality)`` in port order and the smallest slide."""
    lam_in = tuple(e.lambda_out for e in ins)
    card_in = tuple(e.cardinality for e in ins)
    return lam_in, card_in, min((e.slide_seconds for e in ins), default=1.0)


def _pass_through(est: _Estimator, op_id: str, op: Operator, ins: list[OpEstimate]) -> OpEstimate:
    lam_in, card_in, slide = _flows(ins)
    return OpEstimate(lam_in, lam_in[0], card_in[0], card_in, slide)


ESTIMATORS: KindTable[Estimator] = KindTable("estimator", default=_pass_through)


@ESTIMATORS.register(Source)
def _source(est: _Estimator, op_id: str, op: Source, ins: list[OpEstimate]) -> OpEstimate:
    return OpEstimate((), est._rate(op.stream), Estimate.absent(), (), 1.0)


@ESTIMATORS.register(Window)
def _window(est: _Estimator, op_id: str, op: Window, ins: list[OpEstimate]) -> OpEstimate:
    lam_in, card_in, _ = _flows(ins)
    rate = lam_in[0]
    card, slide = est._window(op, rate)
    return OpEstimate(lam_in, rate, card, card_in, slide)


@ESTIMATORS.register(Select)
def _select(est: _Estimator, op_id: str, op: Select, ins: list[OpEstimate]) -> OpEstimate:
    """Eq. 6.1: ``f * lambda_in``."""
    lam_in, card_in, slide = _flows(ins)
    f = est.predicate_selectivity(op_id, op.predicate)
    return OpEstimate(lam_in, lam_in[0] * f, card_in[0] * f, card_in, slide, f)


@ESTIMATORS.register(Project)
def _project(est: _Estimator, op_id: str, op: Project, ins: list[OpEstimate]) -> OpEstimate:
    lam_in, card_in, slide = _flows(ins)
    one = Estimate.exact(1.0)
    return OpEstimate(lam_in, lam_in[0], card_in[0], card_in, slide, one)


@ESTIMATORS.register(Join)
def _join(est: _Estimator, op_id: str, op: Join, ins: list[OpEstimate]) -> OpEstimate:
    """Eq. 6.2 (:func:`join_output`)."""
    lam_in, card_in, slide = _flows(ins)
    f, f_equi = est.join_selectivities(op_id, op)
    lam_out, card = join_output(lam_in[0], card_in[0], lam_in[1], card_in[1], f)
    examined = None
    if f_equi is not None:
        examined = join_output(lam_in[0], card_in[0], lam_in[1], card_in[1], f_equi)[0].value
    return OpEstimate(lam_in, lam_out, card, card_in, slide, f, examined=examined)


@ESTIMATORS.register(Aggregate)
def _aggregate(est: _Estimator, op_id: str, op: Aggregate, ins: list[OpEstimate]) -> OpEstimate:
    """Eq. 6.3, refined (:func:`aggregate_output`)."""
    lam_in, card_in, slide = _flows(ins)
    groups = est.group_count(op_id, op)
    share = est.reaching_share(op_id)
    if share < 1.0 and not groups.is_absent:
        # Keys that no tuple of the derived input carries are no groups (Q1: idle plugs).
        groups = groups * max(share, 1.0 / max(groups.value, 1.0))
    touched = None
    if op.group_by and not groups.is_absent and not lam_in[0].is_absent and groups.value > 0:
        g = groups.value
        (inp,) = est.plan.inputs(op_id)
        fed = _window_fed(est.plan, inp)
        cols = [e.index for e in op.group_by if isinstance(e, ColumnRef)]
        d_s = est.per_second_key(inp, cols) if len(cols) == len(op.group_by) else None
        # Balls into bins. A window's arrivals each bring an expiration once it is full;
        # a derived input's deltas (a delete and an insert per changed row) are already
        # all its events.
        events = (2.0 if fed else 1.0) * lam_in[0].value * slide
        touched = g * -math.expm1(-events / g)
        if d_s is not None:
            # Measured on the sample: a slide's arrivals carry d keys (no more than the
            # tuples that reach the aggregate), the expiring slide as many; their union
            # (independent sets) is what the slide touches. A derived input (a join or an
            # aggregate over windows) changes because tuples of its windows' stream arrived
            # or expired, so its deltas carry those keys too: no more groups than that
            # union, nor than its deltas touch by balls into bins. (Q1's count over the
            # join touched a median 103 of 800 plugs per slide at 10k; balls into bins
            # said 794, this union with the reaching share 261: still high, since a slide
            # carries the keys of every arrival, not only of those passing the join.)
            d = min(g, d_s * share * max(slide, 1.0), lam_in[0].value * slide)
            union = min(g, 2.0 * d - d * d / g)
            touched = union if fed else min(touched, union)
    lam_out = aggregate_output(
        op, lam_in[0], card_in[0], groups, slide, touched, est.static_share(op_id)
    )
    return OpEstimate(lam_in, lam_out, groups, card_in, slide, None, groups, touched)


def _window_fed(plan: LogicalPlan, op_id: str) -> bool:
    """Whether ``op_id`` is a window, or selects/projects over one (a FIFO relation)."""
    op = plan.op(op_id)
    while isinstance(op, Select | Project):
        (op_id,) = plan.inputs(op_id)
        op = plan.op(op_id)
    return isinstance(op, Window)

"""The dissertation's analytical cost model (section 6.3.2), calibrated for this machine.

Row engine (tuple-at-a-time, one Python thread), seconds per input tuple:

* select 0.03 us (a select over a window is pushed into the window and tests each arrival
  there), project 0.15 us (measured);
* aggregate: 0.15 us hashing/grouping plus, per aggregate call, 0.25 us for an incremental
  one (COUNT/SUM/AVG) and 0.10 us for the pane-based MIN/MAX, per tuple; plus 1.9 us per
  group a slide touches (re-finalise, merge and unmerge its pane partials, emit its delete
  and insert) and 0.65 of that again per further call, spread over the slide's arrivals,
  whatever the number of groups. Fitted to the busy times of 59 row aggregates at steady
  state (Q3-Q6 all-row on 800 plugs at 1k, 10k and 40k tuples/s and on 1,677, 10,000,
  20,000 and 50,000 plugs at 10k; issue 20, ninth stop): within 1.5x of 57 (35 before).
  The per-group term used to apply only past 2,000 groups, on the premise that the
  per-tuple constants held a small group table's work; once those were re-measured at
  steady state they did not, and on 1,677 plugs every row aggregate measured 1.9-2.8x its
  model (on 800 plugs at 1k, 5-9x). Non-incremental calls (MEDIAN,
  DISTINCT) recompute over the whole window once per slide: 0.25 us per window tuple per
  slide, spread over the tuples that arrived in that slide ("f(|w|)" of the dissertation);
* join (symmetric hash join): 0.75 us per input tuple (its insert and probe, and for a
  window's tuple the probe and delete when it expires), 0.1 us per output
  tuple (the pair built, tested, appended), and 1.65 us per residual test that fails: the
  stored tuples a probe tests a residual predicate on (``examined`` of the estimates: the
  equi-key's bucket, or the whole other side without equi-keys) less the output. Q1's join
  re-tests a plug's bucket of thousands of window tuples each time its MAX changes.
  Fitted to 39 row joins' busy times at steady state (Q1 over its window, Q3, Q4 and Q6
  joining aggregates; 800 to 50,000 plugs, 1k to 40k tuples/s; issue 20, tenth stop,
  ``experiments/component_fits.py join``: 0.83-0.89 / 0 / 1.64-1.80 us, by NNLS on relative
  residuals or least squares on log ratios): within 1.5x of 36 (7 at the sixth stop's
  1.2 / 0.4 / 0.45 us, which priced the joins of two aggregates at 1.6-3x what they
  measured, 0.7-1.2 us per input, and Q1's window join on 50,000 plugs at half). Input and
  output terms cannot be told apart (a join of two aggregates emits about one row per
  input): 0.1 us per output row is a choice, the fit is as good from 0 to 0.2;
* gateway: arrivals come as Arrow batches; while any window of a stream feeds a row
  operator, the gateway converts each batch of that stream to tuples once and drives them
  through the row engine's instants: 0.4 us per arriving tuple (``ingest``), charged to the
  stream's windows (shared among them) and taken back only when none of them reads tuples
  (``PlanCoster._ingest``). Per-operator busy times at steady state put the conversion with
  the driver loop at 0.26-0.67 us per arrival (windows plus unattributed time; issue 20,
  ninth stop), and the same with one window of Q3's two feeding DuckDB as with none: the
  conversion was shared per window before, so a plan that moved one window to Arrow was
  credited half a conversion it still paid. Select, ingest and MIN/MAX were 0.1, 0.55 and
  0.55 us until the sixth stop's per-operator busy times measured a window's select at
  0.02-0.06 us per arrival and a MAX at 0.4-0.6 us per tuple with few groups;
* Arrow at the gateway (``PlanCoster.columnar_cost``, with a shared row core): a window
  feeding a columnar group keeps Arrow chunks, 0.02 us per tuple (``arrow_window``) instead
  of the row window's 0.04; a row select over a window whose only consumer is in a group
  runs as an Arrow filter, 0.19 us per row it passes (``arrow_select``: the filtered
  chunk and its window's bookkeeping of it) instead of ``select``;
* a group's query runs on the row thread (a MIG waits for it), so with a shared row core
  its u adds to the row core's load (``PlanCoster.columnar_cost``);
* gateway operators: window 0.04 us per tuple (insert and evict, the conversion aside);
  ISTREAM/DSTREAM 0.27 us per input tuple; RSTREAM 0.27 us per input tuple plus 0.03 us
  per *output* row (it emits the whole relation every slide: ``|w| * n_slide`` rows per
  second; fitted to 37 RSTREAMs' busy times, issue 20, tenth stop: it was 0.3 us per output
  row, 2-3x too much on 50,000 plugs); sources and sink free (the same in every plan);
* an R2S operator fed by a columnar group takes its Arrow result (``PlanCoster``, with a
  shared row core): RSTREAM passes it on (free), ISTREAM/DSTREAM take the bag difference
  with the previous result through tuples, 2.5 us per result row (``arrow_r2s_diff``);

Columnar group (DB-op), seconds per invocation (one per slide):

* transfer in: 1 ms per input (``ship_input``: the engine is handed each input anew), and
  the rows that reached the group's inputs since the previous slide
  (``lambda_out(input) * slide``; the columnar side keeps the window as a table) at 0.5 us per
  row for tuple -> Arrow when the input is a row select/project over a window, 0.0025 us per
  row when it is a window (windows feeding a MIG hold Arrow chunks already: only references
  move), or an Arrow select's (a row select over a window that only feeds the group runs as
  an Arrow filter: 0.1 us per arrival instead of its tuple costs); an aggregate or join
  input is re-shipped whole (``|w|`` rows at 0.5 us);
* SQL: the group re-evaluates over whole relations each slide: per input row of each member
  operator (DuckDB, ``engines/duckdb/spec.py``: select 1.65 ns, project 0.4, aggregate 4.1
  plus 3.75 more in a group table past the caches, join 6 ns per input plus 1.5 per output
  row) and ``op_fixed`` per member operator re-evaluated (DuckDB 1.1 ms: each operator's
  pipeline costs about that whatever the window, measured on Q1-Q6's group SQL over 0.6 M
  to 12 M-row windows, experiments/duckdb_sql_at_scale.py); Spark's are its own;
* fixed overhead per invocation: DuckDB 2.6 ms, Spark 450 ms;
  (these per-engine constants are declared by each engine's registration, e.g.
  ``engines/duckdb/spec.py``, and given to the model by hycq: :meth:`with_engines`;
  a model without constants for an engine costs its groups as infinite);
* incremental aggregates (``optimizer.ir.incremental``): a SUM/COUNT/AVG that a DuckDB
  MIG keeps with exact running totals costs, instead of its (and its selects') per-row
  terms, ``inc_fixed`` + ``inc_row`` per row reaching it that entered or left the window +
  ``inc_group`` per group of its state, where the rule says it pays (large windows);
* transfer out, when a row operator reads the group's result: the result relation (``|w|``
  of its top) at 0.55 us per row for Arrow -> tuple (1.8 M rows/s) plus 2.3 us per row
  for the bag difference against the previous result that the MIG hands on as a delta
  (``bag_diff``; measured with 50,000-row results, issue 20). A result read by an R2S
  operator goes to the sink as Arrow and costs nothing here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from optimizer.ir.arrow_filter import arrow_selected
from optimizer.ir.correlated import (
    CorrelatedPrices,
    CorrelatedShape,
    ScanCount,
    correlated_count,
    scan_count,
)
from optimizer.ir.costing import Estimates, OpEstimate
from optimizer.ir.dispatch import KindTable
from optimizer.ir.expr import AggCall
from optimizer.ir.incremental import (
    ExactStatePrices,
    block_size,
    incremental_input,
    large_group_share,
    paned_input,
    paned_pays,
    paned_rows,
    worth_it,
)
from optimizer.ir.placement import Group, external_inputs
from optimizer.ir.plan import R2S, Aggregate, Join, LogicalPlan, Operator, Project, Select, Window

US = 1e-6
NS = 1e-9


@dataclass(frozen=True)
class ColumnarConstants:
    """Per-row SQL costs (seconds) and the fixed per-invocation overhead of one engine."""

    select: float
    project: float
    aggregate: float
    join_input: float
    join_output: float
    fixed: float
    #: Keeping a SUM/COUNT/AVG incrementally (optimizer.ir.incremental), per slide: a fixed
    #: cost (its extra queries), per row that entered or left the window, per group of the
    #: state. None: the engine does not keep aggregates incrementally.
    inc_fixed: float | None = None
    inc_row: float = 0.0
    inc_group: float = 0.0
    #: Keeping an aggregate with a MIN/MAX from pane partials
    #: (engines.mig.kept_aggregates.PanedState), per slide: a fixed cost (its four small
    #: queries and registrations) and per partial row the final merge reads (few rows per key:
    #: the hash table's work dominates). None: the engine does not keep pane partials.
    pane_fixed: float | None = None
    pane_row: float = 0.0
    #: Recounting a correlated count in Arrow at every slide (engines.mig.count_scan), per
    #: slide: a fixed cost (its calls and the window's chunks), per row reaching the join,
    #: per key of the inner aggregate. None: the engine's MIGs do not scan.
    scan_fixed: float | None = None
    scan_row: float = 0.0
    scan_key: float = 0.0
    #: The scan's work as the window's chunks arrive (each encoded once): per chunk, per
    #: arriving row its filter reads (the left chain's selects, when they run in the MIG)
    #: and per row passing it (keys packed and given ids).
    scan_chunk: float = 0.0
    scan_filter: float = 0.0
    scan_encode: float = 0.0
    #: Per row an aggregate reads, on top of ``aggregate``, when its group table outgrows the
    #: caches (scaled by :func:`large_group_share` of the groups it outputs: nothing up to
    #: 2,000 groups, all of it from 50,000). Re-aggregating 6 M rows in DuckDB (3 keys) took
    #: 7 ns per row in 1,677 groups and 12 in 50,000. 0 in profiles fitted before it
    #: existed, whose ``aggregate`` holds it.
    aggregate_large: float = 0.0
    #: Per SQL operator of a group's query re-evaluated every slide (its pipeline's setup
    #: and finalisation), on top of ``fixed``. 0 in profiles fitted before it existed,
    #: whose per-row constants and ``fixed`` hold it.
    op_fixed: float = 0.0
    #: Per value a re-evaluated SUM/AVG of DOUBLE adds exactly (the group's values gathered
    #: into a list and summed by hycq's exact-sum function, engines.kernels.exact_sum), on
    #: top of ``aggregate``: per row an aggregate reads, per such call.
    exact_sum: float = 0.0


@dataclass(frozen=True)
class AnalyticalCostModel:
    """Row unit costs and columnar group costs with the constants of the module docstring."""

    name: str = "analytical"
    select: float = 0.03 * US
    project: float = 0.15 * US
    agg_base: float = 0.15 * US
    agg_incremental: float = 0.25 * US
    agg_minmax: float = 0.10 * US
    agg_recompute_per_window_tuple: float = 0.25 * US
    agg_group: float = 1.9 * US
    """Per group the slide touched, per slide, beyond the per-tuple constants: re-finalising
    it, merging and unmerging its pane partials and emitting its delete and insert, at any
    number of groups (1,677 plugs pay it as 50,000 do). Spread over that slide's arrivals;
    it dominates when each group gets few tuples per slide."""
    agg_group_call: float = 0.65
    """Each aggregate call after the first adds this share of ``agg_group`` per touched
    group (a group's MAX and AVG are merged, unmerged and finalised one after the other).
    Only Q3's aggregates have two calls, so the busy times fit any share from 0.6 to 0.95
    about equally; 0.65 was chosen among those by re-scoring the placement studies
    (docs/placement-study.md, issue 20, ninth stop)."""
    join_input: float = 0.75 * US
    join_output: float = 0.1 * US
    join_examine: float = 1.65 * US
    """Per residual test that fails: stored tuples a probe tests the join's residual
    predicate on (``examined``), less the output."""
    window: float = 0.04 * US
    r2s: float = 0.27 * US
    """Per input tuple (a delta) of ISTREAM, DSTREAM and RSTREAM over row input: the bag
    difference, or RSTREAM's update of the relation it keeps as a bag."""
    rstream_row: float = 0.03 * US
    """Per row RSTREAM emits (the whole relation, every slide) over row input: copying the
    bag's keys out. With ``r2s`` fitted to 37 RSTREAMs' busy times at steady state (Q1 and
    Q3-Q6 all-row on 139-row to 50,000-row relations; issue 20, tenth stop): within 1.5x of
    21 (11 at the old 0.3 us per emitted row, which priced a 50,000-row relation at 15 ms
    per slide where it measured 1-7 ms)."""
    arrow_r2s_diff: float = 2.5 * US
    """Per result row per slide of ISTREAM/DSTREAM fed by a columnar group: the bag
    difference of its Arrow result with the previous one, through Python tuples
    (``engines.row.arrow_ops.arrow_bag_difference``: 2.4-3.9 us per row on 800 to 50,000
    rows). RSTREAM passes such a result to the sink untouched: 0 (measured 0-0.05 ms per
    second where the row price was 0.2-3 ms). Charged instead of the row price by
    ``PlanCoster.columnar_cost`` with a shared row core."""
    to_arrow: float = 0.5 * US
    ship_arrow: float = 0.0025 * US
    ship_input: float = 1.0e-3
    """Per input of a columnar group per invocation: handing the input's rows to the engine
    (``engines.duckdb``: the ring of Arrow chunks concatenated into one table view and
    registered again), whatever its size. Fitted with ``ship_arrow`` to the MIGs' seconds
    in shipping rows at steady state (Q1-Q6 wholly on DuckDB and two hybrids, on 800 plugs
    at 1k, 10k and 40k and 50,000 plugs at 10k, 32 MIGs with 1 to 3 inputs; issue 20, tenth
    stop): 1.04 ms per input plus 2.5 ns per Arrow row; they measured 1.0-1.7 ms with one
    input, 1.7-2.9 with two, 2.4-3.5 with three, where ``ship_arrow`` alone (0.01 us per
    row) priced 0.01-1.2 ms."""
    from_arrow: float = 0.55 * US
    bag_diff: float = 2.3 * US
    """Per result row of a MIG read by a row operator, on top of ``from_arrow``: the two
    bag differences against the previous result (``engines.mig.operator.MigOp.step``). Found by the
    placement study: Q3 with only its projection on the row engine measured 23k tuples/s
    against 154k with it in DuckDB, predicted equal."""
    arrow_window: float = 0.02 * US
    """Per tuple of a window that keeps Arrow chunks because its consumer is a columnar
    group (or an Arrow select feeding one): appending and expiring chunk references.
    Charged instead of ``window`` by ``PlanCoster.columnar_cost`` with a shared row core."""
    arrow_select: float = 0.19 * US
    """Per row a row select filtering as Arrow passes (``optimizer.ir.arrow_filter``: a
    select over a window feeding only a columnar group): the filtered chunk's copy and its
    window's bookkeeping of it; the mask over the arrivals costs next to nothing beside
    them. ``arrow_window`` (0.02 us per arrival) is charged beside it. Per-operator busy
    times of Q4 at 40k (issue 20, sixteenth stop): the select and its window took
    0.0042-0.0053 s per second on 800 plugs with half the readings loads (20,000 rows
    passed per second) and 0.0018-0.0024 on 20,000 plugs with a fifth (8,000 passed):
    0.17-0.20 us per passed row once ``arrow_window`` is taken out. It was 0.15 us per
    *arrival*, fitted side by side on 800 and 1,677 plugs, where half the readings pass:
    3x too much where a fifth pass, so the optimizer kept Q4's selects in DuckDB on
    20,000 plugs at 40k, where Arrow filters measured 1.27x faster. Charged instead of
    ``select`` by ``PlanCoster.columnar_cost`` with a shared row core; its rows reach the
    group as Arrow (``ship_arrow``), not as tuples."""
    ingest: float = 0.40 * US
    """Per arriving tuple of a stream any row operator reads through a window: the
    gateway's Arrow -> tuple conversion of its batches (once, whatever the number of row
    windows) and the row engine's driving of them through the instants (charged by
    ``PlanCoster._ingest``; the calibrated model uses its measured ``from_arrow``)."""
    buffering: float = 0.0
    """Per source tuple through a K-slack buffer, charged by ``PlanCoster`` to the gateway
    only in runs with ``--disorder`` other than none (``optimizer.costmodel.with_buffering``
    sets it then: this value if a cost-model file gives one, else 0.3 us)."""
    engines: dict[str, ColumnarConstants] = field(default_factory=dict)
    """Constants per columnar engine name (see :meth:`with_engines`)."""

    def with_engines(self, defaults: Mapping[str, Mapping[str, float]]) -> AnalyticalCostModel:
        """This model with default constants for the engines it has none for (an engine's
        registration declares them; constants the model has, e.g. calibrated, are kept)."""
        missing = {e: c for e, c in defaults.items() if e not in self.engines}
        # A profile measured before incremental aggregates existed takes their defaults.
        unpriced = {
            e: c
            for e, c in defaults.items()
            if e in self.engines
            and any(getattr(self.engines[e], f) is None and f in c for f in KEPT_FIXED)
        }
        # A profile measured before exact sums existed (0: unpriced) takes the default.
        stale = [
            e
            for e, c in defaults.items()
            if e in self.engines and not self.engines[e].exact_sum and c.get("exact_sum")
        ]
        if not missing and not unpriced and not stale:
            return self
        engines = dict(self.engines)
        for engine, consts in missing.items():
            engines[engine] = ColumnarConstants(**consts)
        for engine, consts in unpriced.items():
            have = engines[engine]
            kept = {
                k: v
                for k, v in consts.items()
                if k.startswith(KEPT_PREFIXES) and getattr(have, k.split("_")[0] + "_fixed") is None
            }
            engines[engine] = replace(have, **kept)
        for engine in stale:
            engines[engine] = replace(engines[engine], exact_sum=defaults[engine]["exact_sum"])
        return replace(self, engines=engines)

    # -- row engine -----------------------------------------------------------------------

    def unit_cost(self, op: Operator, engine: str, estimates: OpEstimate) -> float:
        fn = ROW_COSTS.get(type(op))
        return fn(self, op, estimates) if fn is not None else 0.0  # sources and sink: free

    def _aggregate(self, op: Aggregate, est: OpEstimate) -> float:
        c = self.agg_base
        recompute = 0
        for call in op.aggs:
            if count_star(call):
                continue  # no state of its own: the group's tuple count (agg_base) is it
            if not call.incremental and call.func not in ("MIN", "MAX"):
                recompute += 1
            elif call.func in ("MIN", "MAX"):
                c += self.agg_minmax
            else:
                c += self.agg_incremental
        arrivals = est.total_in.value * est.slide_seconds
        if recompute:
            # One pass over the window per slide, spread over that slide's arrivals.
            window = est.input_cardinality[0].value
            per_slide = recompute * window * self.agg_recompute_per_window_tuple
            c += per_slide / arrivals if arrivals > 0 else per_slide
        if est.touched is not None and arrivals > 0:
            # The groups a slide touches (optimizer.estimate), each re-finalised per call.
            calls = 1.0 + self.agg_group_call * max(0, len(op.aggs) - 1)
            c += self.agg_group * calls * est.touched / arrivals
        return c

    # -- columnar groups ------------------------------------------------------------------

    def group_cost(self, group: Group, estimates: Estimates) -> float:
        consts = self.engines.get(group.engine)
        if consts is None:
            return float("inf")
        per_op = _per_op_terms(estimates)
        sql = consts.fixed
        kept, replaced = _kept_incrementally(group, estimates, consts)
        sql += kept - _correlated_saving(group, estimates, consts, replaced, per_op)
        for op_id in group.operators:
            if op_id in replaced:
                continue
            sql += consts.op_fixed
            for k, rows in per_op[op_id]:
                sql += getattr(consts, k) * rows
        ship_tuples, ship_arrow, rows_out = transfer_rows(group, estimates)
        return (
            len(external_inputs(group, estimates.plan)) * self.ship_input
            + ship_tuples * self.to_arrow
            + ship_arrow * self.ship_arrow
            + sql
            + rows_out * (self.from_arrow + self.bag_diff)
        )


def count_star(call: AggCall) -> bool:
    """Whether a row aggregate's call is ``COUNT(*)``: it keeps no state and runs no code per
    tuple (``engines.row.aggregate``, mode ``count_star``: its value is the group's tuple
    count, which every group keeps), so it adds nothing to ``agg_base``. Priced as an
    incremental call it cost Q1's count over the join 0.25 us per delta tuple, and the
    count measured 0.22-0.27 us per delta tuple in all (issue 20, fifteenth stop)."""
    return call.func == "COUNT" and call.arg is None and not call.distinct


def without_incremental(model: Any) -> Any:
    """``model`` pricing every columnar aggregate as re-evaluated over its window (runs with
    ``--no-incremental``); a model of another structure is returned as it is."""
    if not isinstance(model, AnalyticalCostModel):
        return model
    engines = {e: replace(c, inc_fixed=None, pane_fixed=None) for e, c in model.engines.items()}
    return replace(model, engines=engines)


#: The constants of kept aggregates (exact sums: ``inc_*``; pane partials: ``pane_*``), and
#: the fixed cost of each, None where an engine (or an older profile) lacks them.
KEPT_PREFIXES = ("inc_", "pane_", "scan_")
KEPT_FIXED = ("inc_fixed", "pane_fixed", "scan_fixed")

_TERMS_CACHE: dict[int, tuple[Estimates, dict[str, tuple[tuple[str, float], ...]]]] = {}


def _per_op_terms(estimates: Estimates) -> dict[str, tuple[tuple[str, float], ...]]:
    """Each operator's (SQL term, rows) pairs, computed once per Estimates object (the
    optimizer costs thousands of groups over the same estimates)."""
    hit = _TERMS_CACHE.get(id(estimates))
    if hit is not None and hit[0] is estimates:
        return hit[1]
    plan = estimates.plan
    table = {
        op_id: tuple(
            (k, v) for k, v in sql_terms(Group("", (op_id,), op_id), estimates).items() if v
        )
        for op_id in plan.topological()
    }
    if len(_TERMS_CACHE) > 64:
        _TERMS_CACHE.clear()
    _TERMS_CACHE[id(estimates)] = (estimates, table)
    return table


#: The per-row SQL cost terms of a DB-op (the fields of :class:`ColumnarConstants`).
SQL_TERMS = (
    "select",
    "project",
    "aggregate",
    "aggregate_large",
    "exact_sum",
    "join_input",
    "join_output",
)


def sql_terms(group: Group, estimates: Estimates) -> dict[str, float]:
    """Rows each per-row SQL constant applies to in one invocation of ``group``: the input
    cardinality of its selects, projects, aggregates and joins, and the joins' output."""
    plan = estimates.plan
    terms = dict.fromkeys(SQL_TERMS, 0.0)
    for op_id in group.operators:
        op = plan.op(op_id)
        fn = SQL_ROWS.get(type(op))
        if fn is None:
            continue
        for term, rows in fn(op, estimates[op_id]):
            terms[term] += rows
    return terms


def _kept_incrementally(
    group: Group, estimates: Estimates, consts: ColumnarConstants
) -> tuple[float, set[str]]:
    """The per-slide cost of the group's aggregates a MIG keeps incrementally (the rule of
    ``optimizer.ir.incremental``, where it pays), and the operators whose re-evaluation
    that replaces (each such aggregate and the selects feeding it inside the group)."""
    if consts.inc_fixed is None:
        return 0.0, set()
    plan = estimates.plan
    members = set(group.operators)
    cost, replaced = 0.0, set()
    for op_id in group.operators:
        reads = incremental_input(plan, members, op_id)
        paned = reads is None
        if paned:
            reads = paned_input(plan, members, op_id)
        if reads is None or not _window_derived(plan, reads[0]):
            continue
        ext, chain = reads
        window = estimates[ext].cardinality.value
        entering = estimates[ext].lambda_out.value * estimates[ext].slide_seconds
        if not worth_it(window, 2.0 * entering):
            continue
        agg = estimates[op_id]
        groups = agg.cardinality.value
        if paned:
            kept = _paned_cost(consts, window, entering, agg, bool(chain))
            if kept is None:
                continue
            cost += kept
        else:
            # the rows that reach the aggregate (past its selects), entering and leaving;
            # kept only where the merge costs less than re-aggregating (as the MIG decides)
            prices = ExactStatePrices.of(consts)
            assert prices is not None
            rows = 2.0 * agg.total_in.value * agg.slide_seconds
            kept = prices.kept(rows, groups)
            reached = _input_rows(agg)
            op = plan.op(op_id)
            assert isinstance(op, Aggregate)
            doubles = sum(1 for c in op.aggs if c.sums_doubles)
            if kept >= prices.reevaluated(window, reached, groups, bool(chain), doubles):
                continue
            cost += kept
        replaced.update([op_id, *chain])
    return cost, replaced


def _correlated_saving(
    group: Group,
    estimates: Estimates,
    consts: ColumnarConstants,
    replaced: set[str],
    per_op: Mapping[str, tuple[tuple[str, float], ...]],
) -> float:
    """Per slide, what the cheaper of the correlated count's paths saves over the group's
    plain statement: the counts kept per key (``optimizer.ir.correlated``) or recounted by
    a scan in Arrow (:func:`_scan_saving`). The MIG times its paths and takes the fastest,
    so a negative saving is 0."""
    plan = estimates.plan
    kept = {o for o in replaced if isinstance(plan.op(o), Aggregate)}
    if not kept:
        return 0.0
    members = set(group.operators)
    windows = {
        i
        for o in group.operators
        for i in plan.inputs(o)
        if i not in members and _window_derived(plan, i)
    }
    shape = correlated_count(plan, group.operators, group.top, kept, windows)
    if shape is None:
        return 0.0
    inner = estimates[shape.inner]
    groups = max(1.0, inner.cardinality.value)
    share = min(1.0, inner.lambda_out.value * inner.slide_seconds / 2.0 / groups)
    window = estimates[shape.window]
    changed = 2.0 * window.lambda_out.value * window.slide_seconds
    left_rows = estimates[shape.join].input_cardinality[0].value
    saving = CorrelatedPrices.of(consts).saving(left_rows, changed, share, len(shape.left) + 2)
    scan = _scan_saving(shape, estimates, consts, per_op)
    return max(0.0, saving, scan)


def _scan_saving(
    shape: CorrelatedShape,
    estimates: Estimates,
    consts: ColumnarConstants,
    per_op: Mapping[str, tuple[tuple[str, float], ...]],
) -> float:
    """Per slide, what the scan (``engines.mig.count_scan``) saves: the group's statement
    (its fixed cost and the SQL of the count, the join and the selects and projects before
    it) against ``scan_fixed`` plus ``scan_row`` per row reaching the join and ``scan_key``
    per key of the inner aggregate, and the encoding of the chunks that entered
    (``scan_chunk`` each, one per event-second; ``scan_filter`` per arriving row when the
    left chain's selects run in the scan; ``scan_encode`` per row passing them). 0 where the
    engine does not scan or the shape does not allow it
    (``optimizer.ir.correlated.scan_count``)."""
    spec = None if consts.scan_fixed is None else _scan_shape(estimates.plan, shape)
    if spec is None or consts.scan_fixed is None:
        return 0.0
    plain = consts.fixed
    for op_id in (shape.top, shape.join, *shape.left):
        plain += consts.op_fixed + sum(getattr(consts, k) * rows for k, rows in per_op[op_id])
    left_rows = estimates[shape.join].input_cardinality[0].value
    keys = estimates[shape.inner].cardinality.value
    scan = consts.scan_fixed + consts.scan_row * left_rows + consts.scan_key * keys
    window = estimates[shape.window]
    seconds = window.slide_seconds
    arriving = window.lambda_out.value * seconds
    passing = estimates[shape.join].lambda_in[0].value * seconds
    scan += consts.scan_chunk * max(1.0, seconds) + consts.scan_encode * passing
    if spec.filter is not None:
        scan += consts.scan_filter * arriving
    return plain - scan


_SCAN_CACHE: dict[tuple[int, CorrelatedShape], tuple[LogicalPlan, ScanCount | None]] = {}


def _scan_shape(plan: LogicalPlan, shape: CorrelatedShape) -> ScanCount | None:
    """``scan_count`` of a shape, once per plan (the optimizer costs thousands of groups)."""
    key = (id(plan), shape)
    hit = _SCAN_CACHE.get(key)
    if hit is not None and hit[0] is plan:
        return hit[1]
    if len(_SCAN_CACHE) > 256:
        _SCAN_CACHE.clear()
    scan = scan_count(plan, shape)
    _SCAN_CACHE[key] = (plan, scan)
    return scan


def paned_partial_rows(window: float, entering: float, agg: OpEstimate) -> tuple[float, float]:
    """(the new pane's partial rows, the rows a slide's final merge reads) of an aggregate
    kept from pane partials over a window of ``window`` rows, ``entering`` per slide.

    A pane of ``r`` rows (past the selects) over ``G`` keys holds about ``G (1 - exp(-r /
    G))`` partial rows (keys drawn uniformly), a block of ``b`` panes ``G (1 - exp(-b r /
    G))``; the final merge reads the blocks' and the loose panes' (``paned_rows``)."""
    g = max(1.0, agg.cardinality.value)
    r = agg.total_in.value * agg.slide_seconds
    panes = max(1.0, window / entering)
    pane_rows = g * -math.expm1(-r / g)
    block_rows = g * -math.expm1(-block_size(int(panes)) * r / g)
    return pane_rows, paned_rows(panes, pane_rows, block_rows)


def _paned_cost(
    consts: ColumnarConstants, window: float, entering: float, agg: OpEstimate, selects: bool
) -> float | None:
    """Per slide, an aggregate kept from pane partials (``engines.mig.kept_aggregates.PanedState``):
    the new pane's scan and partial (at the engine's per-row SQL costs), a block's merge
    (amortised: a pane's partial rows) and the final merge of the blocks' and loose panes'
    partials (``pane_row`` each, :func:`paned_partial_rows`); None when the partials would
    not be several times fewer rows than the window (the MIG then re-aggregates,
    ``optimizer.ir.incremental.paned_pays``)."""
    if entering <= 0 or consts.pane_fixed is None:
        return None
    pane_rows, merged = paned_partial_rows(window, entering, agg)
    if not paned_pays(window, merged):
        return None
    g = max(1.0, agg.cardinality.value)
    r = agg.total_in.value * agg.slide_seconds
    per_row = consts.aggregate + consts.aggregate_large * large_group_share(g)
    scan = consts.select * entering if selects else 0.0
    # the new pane's partial from its rows; a block's merge, amortised; the final merge
    return consts.pane_fixed + scan + per_row * r + consts.pane_row * (pane_rows + merged)


def transfer_rows(group: Group, estimates: Estimates) -> tuple[float, float, float]:
    """(tuples converted to Arrow, Arrow rows referenced, rows converted back) per invocation.

    What a MIG ships per slide depends on the input (``engines.mig.operator``): a window's Arrow
    chunks are referenced as they are; a window-derived ("FIFO") row input (selects and
    projects over a window) ships only the slide's new tuples; any other row input (an
    aggregate, a join) is kept as a bag and re-shipped whole, ``|w|`` tuples, when it changes.
    A select the row engine runs as an Arrow filter (``optimizer.ir.arrow_filter``) hands
    on the window's filtered chunks: its rows are referenced, like a window's.
    The result comes back as tuples only to a row operator; an R2S operator takes the Arrow
    table as it is (no rows converted back).
    """
    plan = estimates.plan
    ops = estimates.ops
    slide = ops[group.top].slide_seconds
    members = set(group.operators)
    tuples = arrow = 0.0
    for o in group.operators:
        for i in plan.inputs(o):
            if i in members:
                continue
            if plan.op(i).kind == "window" or arrow_selected(plan, i):
                arrow += ops[i].lambda_out.value * slide
            elif _window_derived(plan, i):
                tuples += ops[i].lambda_out.value * slide
            else:
                tuples += ops[i].cardinality.value
    consumers = plan.consumers(group.top)
    to_r2s = bool(consumers) and all(isinstance(plan.op(c), R2S) for c in consumers)
    back = 0.0 if to_r2s else estimates[group.top].cardinality.value
    return tuples, arrow, back


def _window_derived(plan: LogicalPlan, op_id: str) -> bool:
    """Whether ``op_id`` is a chain of selects/projects over a window (a FIFO relation)."""
    op = plan.op(op_id)
    while isinstance(op, Select | Project):
        (op_id,) = plan.inputs(op_id)
        op = plan.op(op_id)
    return isinstance(op, Window)


# -- per operator kind --------------------------------------------------------------------------

#: ``cost(model, op, estimates) -> seconds per input tuple`` of a kind on the row engine
#: (kinds without an entry cost nothing: sources and the sink are the same in every plan).
RowCost = Callable[[AnalyticalCostModel, Any, OpEstimate], float]
ROW_COSTS: KindTable[RowCost] = KindTable("row unit cost")

#: ``rows(op, estimates) -> [(SQL term, rows)]``: what one invocation of a DB-op costs in
#: rows, per field of :class:`ColumnarConstants` (kinds without an entry cost no SQL).
SqlRows = Callable[[Any, OpEstimate], list[tuple[str, float]]]
SQL_ROWS: KindTable[SqlRows] = KindTable("SQL cost terms")


def _input_rows(est: OpEstimate) -> float:
    return sum(c.value for c in est.input_cardinality)


@ROW_COSTS.register(Select)
def _select_cost(m: AnalyticalCostModel, op: Select, est: OpEstimate) -> float:
    return m.select


@ROW_COSTS.register(Project)
def _project_cost(m: AnalyticalCostModel, op: Project, est: OpEstimate) -> float:
    return m.project


@ROW_COSTS.register(Join)
def _join_cost(m: AnalyticalCostModel, op: Join, est: OpEstimate) -> float:
    lam = est.total_in.value
    if lam <= 0:
        return m.join_input
    fanout = est.lambda_out.value / lam
    failed = max(0.0, (est.examined or 0.0) - est.lambda_out.value) / lam
    return m.join_input + m.join_output * fanout + m.join_examine * failed


@ROW_COSTS.register(Aggregate)
def _aggregate_cost(m: AnalyticalCostModel, op: Aggregate, est: OpEstimate) -> float:
    return m._aggregate(op, est)


@ROW_COSTS.register(Window)
def _window_cost(m: AnalyticalCostModel, op: Window, est: OpEstimate) -> float:
    return m.window


@ROW_COSTS.register(R2S)
def _r2s_cost(m: AnalyticalCostModel, op: R2S, est: OpEstimate) -> float:
    if op.kind == "rstream":  # keeps the bag per delta, emits |w| rows per slide
        lam = est.total_in.value
        rows = est.cardinality.value * est.invocations_per_second
        return m.r2s + (m.rstream_row * rows / lam if lam > 0 else 0.0)
    return m.r2s


@SQL_ROWS.register(Select)
def _select_rows(op: Select, est: OpEstimate) -> list[tuple[str, float]]:
    return [("select", _input_rows(est))]


@SQL_ROWS.register(Project)
def _project_rows(op: Project, est: OpEstimate) -> list[tuple[str, float]]:
    return [("project", _input_rows(est))]


@SQL_ROWS.register(Aggregate)
def _aggregate_rows(op: Aggregate, est: OpEstimate) -> list[tuple[str, float]]:
    rows = _input_rows(est)
    large = rows * large_group_share(est.cardinality.value)
    doubles = sum(1 for c in op.aggs if c.sums_doubles)
    return [("aggregate", rows), ("aggregate_large", large), ("exact_sum", rows * doubles)]


@SQL_ROWS.register(Join)
def _join_rows(op: Join, est: OpEstimate) -> list[tuple[str, float]]:
    return [("join_input", _input_rows(est)), ("join_output", est.cardinality.value)]

"""Optimizing a loaded query: statistics, estimation, Phase One, Phase Two (section 6.3).

This is where the optimizer meets its inputs: the sample that statistics are measured on
comes from the engines' sources (the catalog's generator or a ``--data`` file), and the cost
model from the registry. ``optimize`` returns an :class:`Optimized` plan that ``explain``,
``run --placement auto`` and the reports share, so all three show the same placement.

Per operator it reports (``Optimized.operator_rows``): ``lambda_in``/``lambda_out``
(source-driven sizes per second), the window cardinality, the unit cost (row operators:
seconds per input tuple; group members: seconds per invocation of their group), ``u`` and
the *unit* it belongs to (an operator id, or ``g<k>`` for a columnar group, whose ``u`` is
charged once: every member shows the group's u), and whether that unit is the bottleneck.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hycq.sample_eval import subplan_keys
from optimizer.costmodel import PlanCoster, with_buffering
from optimizer.estimate import estimate
from optimizer.ir.cost import Cost
from optimizer.ir.costing import CostModel, Estimates
from optimizer.ir.errors import OptionError, UserError
from optimizer.ir.measured import MeasuredStatistics
from optimizer.ir.placement import ROW, EngineCapabilities, Group, groups
from optimizer.ir.plan import LogicalPlan
from optimizer.phase_one import PhaseOneResult, fixed_join_order, optimize_join_order
from optimizer.phase_two import PhaseTwoResult, place
from optimizer.statistics import SampleStatistics, measure

if TYPE_CHECKING:  # pragma: no cover
    from engines.sources.mqtt import MqttUrl
    from hycq.query import LoadedQuery

#: How the row engine's operators are charged (see optimizer.costmodel.PlanCoster).
ROW_CORE_MODES = ("per-operator", "shared")
#: Sample taken from each input stream for statistics: event-seconds and a row cap.
SAMPLE_SECONDS = 10.0
SAMPLE_ROWS = 100_000
#: Rows read to measure which groups never change (``optimizer.statistics``, static
#: shares): the first 100,000 rows hold about one load reading per plug on 50,000 plugs.
WIDE_SAMPLE_ROWS = 1_000_000
#: ``--exhaustive`` refuses to cost more placements than this (join_8 has 2^24).
EXHAUSTIVE_LIMIT = 2**20


@dataclass(frozen=True)
class OptimizerOptions:
    """The optimizer's knobs (the ``explain`` flags, shared by ``run --placement auto``)."""

    rate: float | None = None
    engines: tuple[str, ...] = ("row", "duckdb")
    cost_model: str | None = None
    """A registry spec (name, entry point, module:attr, .toml path); None = the default."""
    exhaustive: bool = False
    feasibility: bool = True
    row_core: str = "shared"
    sample: bool = True
    data: Mapping[str, Path | MqttUrl] = field(default_factory=dict)
    """Files to sample streams from (the run's ``--data``); else the catalog's sources."""
    strict_data: bool = False
    """A ``data`` file that cannot be sampled, or gives no valid row, is an error (``explain
    --data``: no plan for data the run would refuse) instead of a fall-back to catalog
    statistics (a run reports it itself, with its dead letters)."""
    disorder: bool = False
    """The run puts K-slack buffers in front of the windows (``--disorder`` other than
    none): the gateway's cost includes their per-tuple work."""
    join_order: tuple[tuple[str, ...], ...] | None = None
    """A fixed left-deep order per join chain (FROM aliases, ``--join-order``): Phase One
    then only rewires the joins (optimizer.phase_one.fixed_join_order) instead of searching."""
    incremental: bool = True
    """DuckDB groups keep SUM/COUNT/AVG (exact sums) and MIN/MAX (pane partials)
    incrementally (``--no-incremental`` turns it off, and the model then prices
    re-evaluation: ``cost_models.analytical.without_incremental``)."""
    correction: tuple[tuple[str, float], ...] = ()
    """Per-engine factors on the cost model's costs (engine, factor), measured by ``hycq run
    --adapt`` on the running plan (cost_models.corrected.CorrectedModel); () = none."""


@dataclass(frozen=True)
class Optimized:
    """The optimizer's result for one query and one set of options."""

    query: LoadedQuery
    options: OptimizerOptions
    model: CostModel
    statistics: SampleStatistics | None
    statistics_note: str
    estimates: Estimates
    phase_one: PhaseOneResult
    phase_two: PhaseTwoResult
    coster: PlanCoster
    sample_ms: float
    measured: MeasuredStatistics | None = None
    """Run-time statistics the estimates were made with (``optimize(measured=...)``)."""

    @property
    def plan(self) -> LogicalPlan:
        """The Phase-One plan (joins reordered); its ids are the ones placements use."""
        return self.phase_one.plan

    @property
    def placement(self) -> dict[str, str]:
        return self.phase_two.placement

    @property
    def cost(self) -> Cost:
        return self.phase_two.cost

    @property
    def capabilities(self) -> dict[str, EngineCapabilities]:
        """What each enabled engine can run (the engine registry's declarations)."""
        from engines import registry

        return registry.capabilities(self.options.engines)

    @property
    def groups(self) -> list[Group]:
        return groups(self.plan, self.placement)

    def cost_of(self, placement: Mapping[str, str]) -> Cost:
        """The cost vector of any complete placement of the same plan and estimates."""
        return self.coster.placement_cost(placement)

    def operator_rows(self, placement: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """Per-operator estimates and costs of ``placement`` (default: the chosen one).

        ``bottleneck`` marks the operators of the costliest unit (an operator, or a columnar
        group's members): the one whose u is C_b, or, with a shared row core (where C_b is
        the row thread's load, the sum of every row operator's u and the queries of the
        groups it waits for), the largest share of it. Ties mark every unit tied."""
        placement = dict(placement or self.placement)
        plan = self.plan
        units: dict[str, tuple[str, float, float]] = {}  # op -> (unit id, u, unit cost)
        for k, g in enumerate(groups(plan, placement)):
            u = self.coster.group_own_u(g.engine, g.operators)
            per_call = self.model.group_cost(g, self.estimates)
            for op_id in g.operators:
                units[op_id] = (f"g{k}", u, per_call)
        # windows and selects that work on Arrow for a group, at their Arrow prices
        arrow = self.coster.arrow_row_u(placement)
        for op_id in plan.topological():
            if op_id not in units:
                est = self.estimates[op_id]
                u = arrow.get(op_id, self.coster.row_cost(op_id).utilization)
                c = self.model.unit_cost(plan.op(op_id), ROW, est)
                units[op_id] = (op_id, u, c)
        shared = self.coster.shared_row_core
        peak = max((u for _, u, _ in units.values()), default=0.0)
        rows = []
        for op in plan.operators():
            est = self.estimates[op.id]
            unit, u, c = units[op.id]
            is_bottleneck = u == peak
            if shared and not unit.startswith("g"):
                unit = "row-core"  # every row operator shares the one Python thread
            rows.append(
                {
                    "id": op.id,
                    "kind": op.kind,
                    "engine": placement.get(op.id, ROW),
                    "inputs": plan.inputs(op.id),
                    "detail": op.describe(),
                    "schema": [{"name": f.name, "type": f.dtype.value} for f in op.schema],
                    "lambda_in": [_num(x.value) for x in est.lambda_in],
                    "lambda_out": _num(est.lambda_out.value),
                    "cardinality": _num(est.cardinality.value),
                    "precision": est.lambda_out.precision.value,
                    "unit": unit,
                    "unit_cost": _num(c),
                    "u": _num(u),
                    "bottleneck": bool(peak > 0 and is_bottleneck),
                }
            )
        return rows


def _num(x: float) -> float | None:
    """JSON-safe number: None for an absent (NaN) or unbounded (inf) value."""
    if x is None or math.isnan(x) or math.isinf(x):
        return None
    return float(x)


def sample_streams(
    q: LoadedQuery,
    rate: float | None,
    data: Mapping[str, Path | MqttUrl],
    rows_wanted: int = SAMPLE_ROWS,
    strict: bool = False,
) -> tuple[dict[str, Any], str]:
    """A sample of each input stream (Arrow): its first ``rows_wanted`` rows, and a note on
    where it came from; ``strict``: a ``data`` file without a valid row is a DataError."""
    import pyarrow as pa

    from engines.runtime import DeadLetters, RunOptions, open_inputs
    from hycq.flags import CLI_OPTION_NAMES

    # A pipe or device is read once, by the run: it is not sampled (catalog statistics).
    piped = {
        k.lower()
        for k, p in data.items()
        if not isinstance(p, Path) or (p.exists() and not p.is_file() and not p.is_dir())
    }
    options = RunOptions(
        rate=rate, duration=SAMPLE_SECONDS, data=dict(data), names=CLI_OPTION_NAMES
    )
    dead = DeadLetters(None)
    samples: dict[str, Any] = {}
    notes = [
        f"{k}: not sampled ({p} is read once, by the run)"
        for k, p in data.items()
        if k.lower() in piped
    ]
    for inp in open_inputs(q.plan, q.catalog, options, dead, skip=piped):
        got, rows = [], 0
        for batch in inp.batches:
            got.append(batch)
            rows += batch.num_rows
            if rows >= rows_wanted:
                break
        close = getattr(inp.batches, "close", None)
        if close is not None:
            close()
        if strict and not rows and dead.by_stream.get(inp.stream.name):
            _no_valid_row(inp, dead, data)  # read to its end: every row was rejected
        table = pa.Table.from_batches(got) if got else None
        if table is not None:
            samples[inp.stream.name] = table.slice(0, rows_wanted)
            notes.append(f"{inp.stream.name}: {min(rows, rows_wanted)} rows of {inp.description}")
    return samples, "; ".join(notes)


def _no_valid_row(inp: Any, dead: Any, data: Mapping[str, Path | MqttUrl]) -> None:
    """DataError when a file the user named (``--data``) gave no valid row in its sample:
    the run would stop on it (engines/runtime/dead_letters.py), so must what plans for it."""
    from optimizer.ir.errors import DataError

    if inp.stream.name.lower() not in {k.lower() for k in data}:
        return  # the catalog's own source: the plan falls back to catalog statistics
    bad = dead.by_stream[inp.stream.name]
    raise DataError(
        f"no valid row in {inp.description}: all {bad} rows were rejected "
        f"(first: {dead.first_reason.get(inp.stream.name, '?')})",
        hint="check the catalog's columns against the file ('hycq run --dead-letter PATH' "
        "writes every rejected row and why)",
    )


def optimize(
    q: LoadedQuery,
    options: OptimizerOptions | None = None,
    samples: Mapping[str, Any] | None = None,
    measured: MeasuredStatistics | None = None,
    statistics: SampleStatistics | None = None,
) -> Optimized:
    """Measure statistics, estimate, reorder joins (Phase One) and place (Phase Two).

    ``samples`` (stream -> Arrow table) replaces sampling the query's sources;
    ``statistics`` (an earlier optimization's ``Optimized.statistics``) replaces both.
    ``measured`` (statistics measured while the query runs, e.g. by
    ``engines.migration.monitor.RuntimeMonitor.statistics()``) is used instead of sampling:
    its rates, selectivities and distinct counts win over the sample's (``statistics``), the
    catalog's and the defaults (see :func:`optimizer.estimate.estimate`); what it lacks is
    taken from ``statistics`` or estimated as usual. A run-time re-optimization passes the
    start's sample as ``statistics``: the monitor measures only what the running plan
    counts (no distinct count of a key a columnar group groups by), and without the sample
    such figures fall back to defaults (Q2's plug count: the controller priced the running
    mixed plan at 13x what the same optimizer predicted at start).
    """
    from cost_models.analytical import without_incremental
    from cost_models.corrected import CorrectedModel
    from cost_models.registry import load_cost_model
    from engines import registry

    opts = options or OptimizerOptions()
    capabilities = registry.capabilities(opts.engines)  # an unknown name: OptionError
    if opts.row_core not in ROW_CORE_MODES:
        raise OptionError(
            f"unknown row-core mode '{opts.row_core}'", hint=f"use {' or '.join(ROW_CORE_MODES)}"
        )
    model = load_cost_model(opts.cost_model, registry.cost_defaults())
    if not opts.incremental:
        model = without_incremental(model)
    model = with_buffering(model, opts.disorder)
    if opts.correction:
        model = CorrectedModel(model, dict(opts.correction))
    shared = opts.row_core == "shared"
    stats: SampleStatistics | None = None
    note = "none (defaults and catalog statistics)"
    start = time.perf_counter()
    if statistics is not None:
        stats = statistics
        note = "an earlier sample"
        if measured is not None:
            note = (
                f"measured at run time over {measured.seconds:g} event-seconds, over an "
                "earlier sample"
            )
    elif samples is not None:
        stats = measure(q.plan, samples, evaluate=subplan_keys)
        note = "sample of the given input tables"
    elif measured is not None:
        note = f"measured at run time over {measured.seconds:g} event-seconds"
    elif opts.sample:
        try:
            wide, where = sample_streams(
                q, opts.rate, opts.data, WIDE_SAMPLE_ROWS, strict=opts.strict_data
            )
        except UserError as err:
            if opts.strict_data and opts.data:
                raise  # a file the user named (--data) that cannot be read: as the run would
            note = f"none: could not sample the input ({err.message})"  # the catalog's source
        else:
            samples = {s: t.slice(0, SAMPLE_ROWS) for s, t in wide.items()}
            stats = measure(q.plan, samples, wide=wide, evaluate=subplan_keys)
            where = re.sub(
                r"(\d+) rows of",
                lambda m: f"{min(int(m[1]), SAMPLE_ROWS)} rows (static groups: {m[1]}) of",
                where,
            )
            note = f"sample of {where}" if where else note
    sample_ms = 1e3 * (time.perf_counter() - start)

    est = estimate(q.plan, q.catalog, rates=opts.rate, sample=stats, measured=measured)
    if opts.join_order is not None:
        one = fixed_join_order(q.plan, est, model, opts.join_order, shared_row_core=shared)
    else:
        one = optimize_join_order(
            q.plan, est, model, shared_row_core=shared, utilization_only=not opts.feasibility
        )
    est2 = (
        est
        if one.plan is q.plan
        else estimate(one.plan, q.catalog, opts.rate, sample=stats, measured=measured)
    )
    if opts.exhaustive:
        n = len(opts.engines) ** len(one.plan.r2r_ids())
        if n > EXHAUSTIVE_LIMIT:
            raise OptionError(
                f"--exhaustive would cost about {n:,} placements ({len(one.plan.r2r_ids())} "
                f"R2R operators over {len(opts.engines)} engines), more than the limit "
                f"{EXHAUSTIVE_LIMIT:,}",
                hint="drop --exhaustive: the pruned search returns the same optimum",
            )
    two = place(
        one.plan,
        est2,
        model,
        opts.engines,
        capabilities=capabilities,
        shared_row_core=shared,
        utilization_only=not opts.feasibility,
        exhaustive=opts.exhaustive,
    )
    coster = PlanCoster(est2, model, shared)
    return Optimized(q, opts, model, stats, note, est2, one, two, coster, sample_ms, measured)


def plan_estimates(opt: Optimized, plan: LogicalPlan) -> Estimates:
    """Estimates of ``plan`` (any join order of ``opt``'s query, with its own operator ids)
    on the same statistics as ``opt``."""
    if plan is opt.plan:
        return opt.estimates
    return estimate(
        plan, opt.query.catalog, opt.options.rate, sample=opt.statistics, measured=opt.measured
    )


def plan_cost(opt: Optimized, plan: LogicalPlan, placement: Mapping[str, str]) -> Cost:
    """The predicted cost of running ``plan`` under ``placement``, on the same statistics,
    model and options as ``opt``: how a running plan compares with the one the optimizer
    would choose now."""
    if plan is opt.plan:
        return opt.cost_of(placement)
    est = plan_estimates(opt, plan)
    return PlanCoster(est, opt.model, opt.options.row_core == "shared").placement_cost(placement)

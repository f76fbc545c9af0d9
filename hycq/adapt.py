"""Drift detection for ``hycq run --adapt``: when to move a running query to another plan.

At every check (an instant boundary, every ``--reoptimize-every`` event-seconds) the
:class:`AdaptiveController` re-runs the two-phase optimizer (``hycq.planning.optimize``) on
the statistics the run-time monitor measured (``RuntimeMonitor.statistics()``: smoothed
arrival rates, selectivities, distinct keys), prices the *running* plan on the same
statistics (``hycq.planning.plan_cost``) and compares (docs/adaptivity.md):

* **infeasible**: the running plan cannot keep up (C_b > 1) and the best plan can, or has a
  bottleneck lower by the margin: staying costs without bound (the input backs up), so the
  migration's own cost is not weighed;
* **better**: both keep up and the best plan's total utilisation C_u is lower by at least
  ``margin`` (relative) *and* what it saves over ``horizon_s`` event-seconds, ``horizon_s *
  (C_u(running) - C_u(best))`` core-seconds, exceeds the migration's estimated cost, the
  replay of the new plan's largest window at the measured rates: ``replay_s * C_u(best)``
  core-seconds (what the generic strategies GMS/GHM do; the state-moving ones cost less, so
  this errs towards staying).

Both plans are priced with the cost model **corrected by measurement**: at each check the
running plan's busy time per event-second, measured per operator by the monitor and summed
per engine (the row engine; each columnar engine's MIG slides), is divided by the model's
prediction for the same plan on the same measured statistics, and the model's costs on that
engine are scaled by the ratio for every candidate (cost_models.corrected.CorrectedModel).
A model fitted on other rates and window sizes can be several times optimistic about a
plan (Q2 all-row at 20k tuples/s: 3x); uncorrected, the optimizer keeps choosing that plan
while it falls behind. A factor is updated only from an engine the running plan gives at
least ``MIN_PREDICTED_U`` of predicted work, not within ``warmup_s`` event-seconds of a
migration being asked for or completed (the monitor's figures of the new plan restart when
it completes; the replay's work is not the plan's), not while the windows fill or drain
(``RuntimeMonitor.windows_steady``: the model prices full windows at the current rate; on
the ramp, correcting during the first 5-minute fill made the all-row and DuckDB plans
trade places four times in 350 s), and clamped to
``[1/CORRECTION_LIMIT, CORRECTION_LIMIT]``; an engine never measured keeps factor 1.

Hysteresis: a target is adopted only once the same target (join orders and placement) has
won ``dwell_checks`` consecutive checks, not before ``warmup_s`` event-seconds were
measured, and not within ``min_spacing_s`` event-seconds of the previous migration. Because
the margin is relative to the running plan's cost, a workload hovering around the point
where two plans cost the same never crosses it in either direction.

The controller assumes the driver performs every request it returns (the request's plan is
then the running plan); after a scripted migration the driver tells it with
:meth:`AdaptiveController.adopt`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from cost_models.corrected import uncorrected
from engines.migration.request import MigrationRequest
from hycq.planning import Optimized, OptimizerOptions, optimize, plan_cost, plan_estimates
from optimizer.costmodel import PlanCoster
from optimizer.estimate import estimate
from optimizer.ir.cost import Cost
from optimizer.ir.costing import CostModel
from optimizer.ir.errors import OptionError, UserError
from optimizer.ir.measured import MeasuredStatistics
from optimizer.ir.plan import Join, LogicalPlan, Select
from optimizer.phase_one import join_chains
from optimizer.statistics import SampleStatistics

if TYPE_CHECKING:  # pragma: no cover
    from engines.migration.monitor import RuntimeMonitor
    from hycq.query import LoadedQuery

_SINGULAR = {"rates": "rate", "selectivities": "selectivity", "distinct": "distinct"}
#: A measured figure this far from the planned one (ratio) is reported as drifted.
DRIFT_RATIO = 1.25


@dataclass(frozen=True)
class Policy:
    """The drift policy's knobs (docs/adaptivity.md says how the defaults were chosen)."""

    margin: float = 0.2
    """Relative improvement of C_u (or of C_b when the running plan is infeasible) needed."""
    dwell_checks: int = 3
    """Consecutive checks the same target must win."""
    min_spacing_s: float = 30.0
    """Event-seconds after a migration before the next one."""
    horizon_s: float = 600.0
    """Event-seconds a migration's saving is counted over (amortisation)."""
    settle: float = 0.1
    """A "better" target must have won with predicted savings (fractions of the running
    plan's C_u) within this spread over the dwell checks: the drift has settled."""
    warmup_s: float = 10.0
    """Event-seconds the monitor must have measured before the first decision."""
    strategy: str = "auto"
    """The strategy named in the requests (the driver resolves ``auto``)."""
    correct: bool = True
    """Correct the cost model by the running plan's measured busy time (module docstring);
    False prices plans with the model alone (tests of drift in the statistics only)."""
    gate: float = 0.1
    """A check skips the optimizer while every measured figure (rate, selectivity, distinct
    count) and correction factor is within this relative distance of those of the last
    check that found the running plan best: the optimizer is deterministic in them, and the
    ``margin`` already ignores moves this small. 0 re-optimizes at every check."""

    def __post_init__(self) -> None:
        for name in ("margin", "settle", "min_spacing_s", "horizon_s", "warmup_s", "gate"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                raise OptionError(f"adaptivity policy: {name} must be a number >= 0, got {v!r}")
        if not isinstance(self.dwell_checks, int) or self.dwell_checks < 1:
            raise OptionError(
                f"adaptivity policy: dwell_checks must be an integer >= 1, got "
                f"{self.dwell_checks!r}"
            )


@dataclass(frozen=True)
class _Running:
    plan: LogicalPlan
    placement: dict[str, str]
    label: dict[str, Any]
    planned: MeasuredStatistics
    """The figures the running plan was chosen on (rates, selectivities, distinct)."""


def make_controller(
    query: LoadedQuery,
    optimizer_options: OptimizerOptions | None,
    plan: LogicalPlan,
    placement: Mapping[str, str],
    join_orders: Sequence[Sequence[str]] | None,
    every_ticks: int,
    tps: int,
    *,
    planned_on: Optimized | None = None,
    **policy: Any,
) -> AdaptiveController:
    """The controller for ``hycq run --adapt``.

    * ``query``: the loaded query (``hycq.api.load_query``); its catalog and original plan
      are what the optimizer re-plans from;
    * ``optimizer_options``: the run's optimizer options (engines, cost model, row-core
      mode, feasibility; ``None``: the defaults); re-planning never samples the sources;
    * ``plan``, ``placement``: the plan the run starts with (any join order of the query,
      e.g. ``Optimized.plan``) and its complete placement (every operator id -> engine);
    * ``join_orders``: that plan's join orders as ``Optimized.phase_one.orders`` gives them
      (leaf operator ids per join chain), or None to read them off ``plan``; used only for
      the ``from`` label of the first migration;
    * ``every_ticks``: ticks of the query's time base between checks (the driver's
      ``--reoptimize-every`` times ``tps``): the dwell time in seconds is ``dwell_checks *
      every_ticks / tps``;
    * ``tps``: ticks per second of the query's time base;
    * ``planned_on``: the optimizer result the starting plan was chosen from (e.g. the
      run's ``--placement auto`` optimization): its statistics are the *planned* figures a
      migration's ``reason`` compares the measured ones with. None: one optimizer run with
      ``optimizer_options`` (sampling the sources as ``explain`` does) gives them;
    * ``policy``: the fields of :class:`Policy` (``margin``, ``dwell_checks``,
      ``min_spacing_s``, ``horizon_s``, ``warmup_s``, ``strategy``); an unknown name or a
      bad value raises OptionError.
    """
    known = {f.name for f in fields(Policy)}
    unknown = sorted(set(policy) - known)
    if unknown:
        raise OptionError(
            f"unknown adaptivity policy option(s): {', '.join(unknown)}",
            hint=f"use {', '.join(sorted(known))}",
        )
    if every_ticks <= 0 or tps <= 0:
        raise OptionError(
            f"the re-optimization interval must be positive (got {every_ticks} ticks at "
            f"{tps} ticks per second)"
        )
    opts = optimizer_options or OptimizerOptions()
    initial = planned_on if planned_on is not None else optimize(query, opts)
    planned = _figures(initial, plan)
    label = _label(plan, placement, join_orders)
    running = _Running(plan, dict(placement), label, planned)
    controller = AdaptiveController(
        query, opts, running, int(every_ticks), int(tps), Policy(**policy)
    )
    controller.base_statistics = initial.statistics
    return controller


class AdaptiveController:
    """Decides at each check whether the running query should migrate (module docstring).

    ``decisions`` keeps one JSON-safe record per check (what was compared and why nothing
    or something happened), for the run's metrics.
    """

    def __init__(
        self,
        query: LoadedQuery,
        options: OptimizerOptions,
        running: _Running,
        every_ticks: int,
        tps: int,
        policy: Policy,
    ) -> None:
        self.query = query
        self.options = options
        self.running = running
        self.every_ticks = every_ticks
        self.tps = tps
        self.policy = policy
        self.last_migration: int | None = None
        self._streak_target: tuple[Any, ...] | None = None
        self._streak = 0
        self._savings: list[float] = []
        self.decisions: list[dict[str, Any]] = []
        self.correction: dict[str, float] = {}
        """Measured-over-predicted busy time per engine (module docstring)."""
        self._base_model: CostModel | None = None
        self._settled: dict[str, float] | None = None
        """The figures of the last check that found the running plan best (``gate``)."""
        self.base_statistics: SampleStatistics | None = None
        """The sample the starting plan was chosen on: re-optimizations overlay the measured
        figures on it (hycq.planning.optimize), so what the monitor cannot measure (a key
        grouped inside a columnar group) keeps its sampled value, not a default."""

    # -- the driver's calls -------------------------------------------------------------------

    def adopt(
        self,
        plan: LogicalPlan,
        placement: Mapping[str, str],
        now_tick: int,
        join_orders: Sequence[Sequence[str]] | None = None,
        planned: MeasuredStatistics | None = None,
    ) -> None:
        """The query now runs ``plan`` under ``placement`` (a scripted migration at
        ``now_tick``): later checks compare against it, and the spacing restarts."""
        figures = planned if planned is not None else self.running.planned
        self.running = _Running(
            plan, dict(placement), _label(plan, placement, join_orders), figures
        )
        self.last_migration = now_tick
        self._streak_target, self._streak, self._savings = None, 0, []
        self._settled = None

    def check(self, now_tick: int, monitor: RuntimeMonitor) -> MigrationRequest | None:
        """One check at instant boundary ``now_tick``: a request to migrate, or None."""
        p = self.policy
        record: dict[str, Any] = {"at": now_tick, "decision": "stay"}
        self.decisions.append(record)
        if monitor.seconds < p.warmup_s:
            record["why"] = f"warming up ({monitor.seconds} of {p.warmup_s:g} event-seconds)"
            return None
        measured = monitor.statistics()
        missing = [s for s in monitor.streams if s not in measured.rates]
        if missing:
            record["why"] = f"no arrival rate measured yet for {', '.join(missing)}"
            return None
        run = self.running
        self._correct(now_tick, measured, monitor, record)
        inputs = _gate_figures(measured, self.correction)
        if self._settled is not None and _within(inputs, self._settled, p.gate):
            record["why"] = (
                f"the running plan is the best plan (no measured figure moved {p.gate:.0%} "
                "since that was last found)"
            )
            return None
        options = replace(
            self.options,
            correction=tuple(sorted(self.correction.items())),
            engines=self._engines(),
        )
        best = optimize(self.query, options, measured=measured, statistics=self.base_statistics)
        run_cost = plan_cost(best, run.plan, run.placement)
        target = _target(best.plan, best.placement)
        record.update(
            running=_cost_json(run_cost), best=_cost_json(best.cost), target_differs=False
        )
        if target != _target(run.plan, run.placement) and not self._reachable(best, record):
            self._streak_target, self._streak, self._savings = None, 0, []
            return None
        if target == _target(run.plan, run.placement):
            self._streak_target, self._streak, self._savings = None, 0, []
            record["why"] = "the running plan is the best plan"
            self._settled = inputs if p.gate > 0 else None
            return None
        self._settled = None
        record["target_differs"] = True
        measured_u = _measured_utilization(monitor)
        record["measured_u"] = measured_u
        verdict = self._verdict(best, run_cost, measured_u)
        record.update(verdict)
        if verdict["trigger"] is None:
            self._streak_target, self._streak, self._savings = None, 0, []
            return None
        if target != self._streak_target:
            self._streak_target, self._streak, self._savings = target, 0, []
        self._streak += 1
        if verdict["trigger"] == "better":
            # the streak counts only checks since the predicted saving settled
            self._savings.append(verdict["saving"])
            while max(self._savings) - min(self._savings) > p.settle:
                self._savings.pop(0)
            self._streak = len(self._savings)
        record["streak"] = self._streak
        if self._streak < p.dwell_checks:
            record["why"] = f"dwell: {self._streak} of {p.dwell_checks} checks"
            return None
        since = None if self.last_migration is None else (now_tick - self.last_migration)
        if since is not None and since < p.min_spacing_s * self.tps:
            record["why"] = (
                f"spacing: {since / self.tps:g} of {p.min_spacing_s:g} event-seconds since "
                "the last migration"
            )
            return None
        record["decision"] = "migrate"
        label_to = _label(best.plan, best.placement, best.phase_one.orders)
        reason = self._reason(verdict, measured, best, run_cost)
        request = MigrationRequest(
            plan=best.plan,
            placement=dict(best.placement),
            strategy=p.strategy,
            reason=reason,
            label_from=run.label,
            label_to=label_to,
        )
        self.running = _Running(
            best.plan, dict(best.placement), label_to, _figures(best, best.plan)
        )
        self.last_migration = now_tick
        self._streak_target, self._streak, self._savings = None, 0, []
        self._settled = None
        return request

    def _engines(self) -> tuple[str, ...]:
        """The engines re-optimization may place on: a forced strategy that moves row-engine
        state reaches only all-row plans (engines/migration/strategies.py)."""
        if self.policy.strategy == "auto":
            return self.options.engines
        from engines.migration import strategies

        if strategies.get(self.policy.strategy).row_only:
            return ("row",)
        return self.options.engines

    def _reachable(self, best: Optimized, record: dict[str, Any]) -> bool:
        """Whether the forced strategy can migrate the running plan to ``best`` (its
        windows, join trees and states allow it); if not, the check stays, saying why."""
        if self.policy.strategy == "auto":
            return True
        from engines.migration import strategies

        run = self.running
        try:
            strategies.check(
                self.policy.strategy, (run.plan, run.placement), (best.plan, best.placement)
            )
        except UserError as err:
            record["why"] = (
                f"the best plan is out of reach of --migration {self.policy.strategy} "
                f"({err.message}): staying on the running plan"
            )
            return False
        return True

    def _correct(
        self,
        now_tick: int,
        measured: MeasuredStatistics,
        monitor: RuntimeMonitor,
        record: dict[str, Any],
    ) -> None:
        """Update the per-engine correction factors from the running plan's measured busy
        time (module docstring); the figures compared go into ``record``."""
        if self._base_model is None:
            from cost_models.registry import load_cost_model
            from engines import registry
            from optimizer.costmodel import with_buffering

            loaded = load_cost_model(self.options.cost_model, registry.cost_defaults())
            self._base_model = uncorrected(with_buffering(loaded, self.options.disorder))
        run = self.running
        since = None if self.last_migration is None else (now_tick - self.last_migration)
        fresh = since is None or since >= self.policy.warmup_s * self.tps
        # the monitor's figures of the plan running now (they restart when a migration
        # completes, which may be long after it was asked for)
        fresh = fresh and getattr(monitor, "plan_seconds", math.inf) >= self.policy.warmup_s
        # and only once the windows hold what the rate says (not while they fill)
        steady = getattr(monitor, "windows_steady", None)
        if steady is not None and not steady():
            fresh = False
            record["correction_held"] = "the windows are filling or draining"
        busy = _measured_by_engine(monitor, run.placement, _engine_u(monitor))
        if busy and fresh and self.policy.correct:
            est = estimate(
                run.plan,
                self.query.catalog,
                rates=self.options.rate,
                sample=self.base_statistics,
                measured=measured,
            )
            coster = PlanCoster(est, self._base_model, self.options.row_core == "shared")
            predicted = coster.utilization_by_class(run.placement)
            by_class = _measured_by_class(monitor, run.plan, run.placement, _engine_u(monitor))
            # every row class together: the factor of row work not measured on its own
            row_keys = [k for k in predicted if k.startswith("row:")]
            predicted["row"] = sum(predicted[k] for k in row_keys)
            by_class["row"] = sum(v for k, v in by_class.items() if k.startswith("row:"))
            record["predicted_u"] = {k: _num(u) for k, u in predicted.items()}
            record["measured_u_by_class"] = {k: _num(u) for k, u in by_class.items()}
            lo, hi = 1.0 / CORRECTION_LIMIT, CORRECTION_LIMIT
            for key, m in by_class.items():
                p = predicted.get(key)
                if p is None or not math.isfinite(p) or p < MIN_PREDICTED_U or m <= 0:
                    continue
                self.correction[key] = min(hi, max(lo, m / p))
        record["measured_u_by_engine"] = {e: _num(u) for e, u in busy.items()}
        record["correction"] = dict(self.correction)

    # -- the policy -------------------------------------------------------------------------

    def _verdict(
        self, best: Optimized, run_cost: Cost, measured_u: float | None = None
    ) -> dict[str, Any]:
        """Whether the best plan beats the running one by enough: ``trigger`` is
        ``infeasible``, ``better`` or None, with the figures compared.

        The running plan is infeasible when the model says so on the measured statistics,
        or when it is *measured* to fall behind: its operators' busy time per event-second
        (``measured_u``, summed over the plan: the row engine is one thread, and a MIG's
        slides run in it) exceeds one core-second. The model can be optimistic about a
        plan (a cost model fitted elsewhere); the measurement is not."""
        p = self.policy
        new = best.cost
        feasibility = self.options.feasibility
        replay_s = _replay_seconds(best)
        out: dict[str, Any] = {"trigger": None, "replay_s": replay_s}
        overloaded = measured_u is not None and measured_u > OVERLOAD_U
        if overloaded and new.feasible:
            out["trigger"] = "infeasible"
            out["why_infeasible"] = (
                f"measured: the running plan needs {measured_u:.2f} core-seconds per event-second"
            )
            return out
        if feasibility and not run_cost.feasible:
            if new.feasible or new.bottleneck <= (1.0 - p.margin) * run_cost.bottleneck:
                out["trigger"] = "infeasible"
            else:
                out["why"] = "the running plan cannot keep up, and no plan is enough better"
            return out
        if feasibility and not new.feasible:
            out["why"] = "the best plan would not keep up"
            return out
        saving = run_cost.utilization - new.utilization
        gain = p.horizon_s * saving
        cost = replay_s * new.utilization
        out.update(
            gain_core_s=gain,
            migration_cost_core_s=cost,
            saving=saving / run_cost.utilization if run_cost.utilization > 0 else 0.0,
        )
        if saving < p.margin * run_cost.utilization:
            out["why"] = (
                f"saving {_pct(saving, run_cost.utilization)} of C_u is below the margin "
                f"{p.margin:.0%}"
            )
        elif gain <= cost:
            out["why"] = (
                f"the saving over {p.horizon_s:g} s ({gain:.3g} core-s) does not outweigh the "
                f"migration ({cost:.3g} core-s)"
            )
        else:
            out["trigger"] = "better"
        return out

    def _reason(
        self,
        verdict: Mapping[str, Any],
        measured: MeasuredStatistics,
        best: Optimized,
        run_cost: Cost,
    ) -> dict[str, Any]:
        """What drifted, with measured and planned figures, and the costs compared."""
        p = self.policy
        planned = self.running.planned
        figures: dict[str, Any] = {"rates": {}, "selectivities": {}, "distinct": {}}
        drifted = []
        named: list[tuple[str, dict[str, float], dict[str, float]]] = [
            ("rates", measured.rates, planned.rates),
            ("selectivities", measured.selectivities, planned.selectivities),
            ("distinct", _by_name(measured.distinct), _by_name(planned.distinct)),
        ]
        for group, now, then in named:
            for name, value in now.items():
                before = then.get(name)
                figures[group][name] = {"measured": _num(value), "planned": _num(before)}
                if before is not None and _ratio_off(value, before) > DRIFT_RATIO:
                    drifted.append(f"{_SINGULAR[group]} {name}")
        return {
            "kind": "drift",
            "trigger": verdict["trigger"],
            "drifted": drifted,
            "figures": figures,
            "cost": {"running": _cost_json(run_cost), "new": _cost_json(best.cost)},
            "gain_core_s": _num(verdict.get("gain_core_s")),
            "migration_cost_core_s": _num(verdict.get("migration_cost_core_s")),
            "replay_s": _num(verdict.get("replay_s")),
            "policy": asdict(p),
            "dwell_s": p.dwell_checks * self.every_ticks / self.tps,
            "measured_over_s": measured.seconds,
        }


# -- helpers ---------------------------------------------------------------------------------

#: Measured busy core-seconds per event-second above which the running plan is falling
#: behind its input (one row-engine thread; with a little slack for measurement noise).
OVERLOAD_U = 1.05


def _measured_utilization(monitor: Any) -> float | None:
    """The running plan's smoothed busy time per event-second: the engine thread's whole
    time where the driver measures it, else its operators' sum (None before anything was
    measured)."""
    figures = getattr(monitor, "operator_figures", None)
    if figures is None:
        return None
    us = [f.get("u") for f in figures().values()]
    known = [float(u) for u in us if isinstance(u, int | float)]
    ops = sum(known) if known else None
    whole = _engine_u(monitor)
    if whole is None:
        return ops
    return whole if ops is None else max(whole, ops)


#: Predicted busy core-seconds per second an engine must have in the running plan for its
#: measured busy time to update that engine's correction factor (less is mostly noise).
MIN_PREDICTED_U = 0.002
#: The correction factors stay within [1/CORRECTION_LIMIT, CORRECTION_LIMIT].
CORRECTION_LIMIT = 20.0


def _engine_u(monitor: Any) -> float | None:
    """The engine thread's smoothed busy time per event-second, if the monitor has it."""
    get = getattr(monitor, "engine_utilization", None)
    return get() if get is not None else None


def _measured_by_engine(
    monitor: Any, placement: Mapping[str, str], engine_u: float | None = None
) -> dict[str, float]:
    """The running plan's smoothed busy time per event-second per engine: a MIG operator
    (``mig[<top>]``) counts for the engine of its group's top, every other operator for
    the row engine, and so does the engine thread's time outside every operator
    (``engine_u``, the driver's measure of the whole thread, minus the operators' sum):
    the clock, the deltas between operators, the output. {} before anything was
    measured."""
    out = _operator_busy(monitor, placement)
    if engine_u is not None and out:
        outside = engine_u - sum(out.values())
        if outside > 0:
            out["row"] = out.get("row", 0.0) + outside
    return out


def _measured_by_class(
    monitor: Any, plan: LogicalPlan, placement: Mapping[str, str], engine_u: float | None
) -> dict[str, float]:
    """As :func:`_measured_by_engine`, the row engine's part split by correction class
    (``row:<kind>`` of an R2R operator, ``row:gateway`` for the rest and the thread's time
    outside every operator)."""
    from optimizer.ir.costing import GATEWAY, cost_class, factor_key

    figures = getattr(monitor, "operator_figures", None)
    if figures is None:
        return {}
    ids = set(plan.topological())
    out: dict[str, float] = {}
    total = 0.0
    for op_id, f in figures().items():
        u = f.get("u")
        if not isinstance(u, int | float):
            continue
        total += float(u)
        if f.get("kind") == "mig" and op_id.startswith("mig[") and op_id.endswith("]"):
            key = placement.get(op_id[4:-1], "row")
        elif op_id in ids:
            key = factor_key("row", cost_class(plan.op(op_id)))
        else:
            key = factor_key("row", GATEWAY)
        out[key] = out.get(key, 0.0) + float(u)
    if engine_u is not None and out and engine_u > total:
        gateway = factor_key("row", GATEWAY)
        out[gateway] = out.get(gateway, 0.0) + engine_u - total
    return out


def _operator_busy(monitor: Any, placement: Mapping[str, str]) -> dict[str, float]:
    figures = getattr(monitor, "operator_figures", None)
    if figures is None:
        return {}
    out: dict[str, float] = {}
    for op_id, f in figures().items():
        u = f.get("u")
        if not isinstance(u, int | float):
            continue
        engine = "row"
        if f.get("kind") == "mig" and op_id.startswith("mig[") and op_id.endswith("]"):
            engine = placement.get(op_id[4:-1], "row")
        out[engine] = out.get(engine, 0.0) + float(u)
    return out


def _figures(opt: Optimized, plan: LogicalPlan) -> MeasuredStatistics:
    """The figures ``plan`` is estimated with under ``opt``'s statistics: rates, each
    Select's and one-conjunct join's selectivity, and the measured distinct counts used."""
    est = plan_estimates(opt, plan)
    sel: dict[str, float] = {}
    for op in plan.operators():
        f = est[op.id].selectivity
        if f is None or f.is_absent:
            continue
        if isinstance(op, Select):
            sel[op.predicate.display()] = f.value
        elif isinstance(op, Join) and op.condition is not None:
            sel[op.condition.display()] = f.value
    distinct = dict(opt.measured.distinct) if opt.measured is not None else {}
    if opt.statistics is not None:
        for k, v in opt.statistics.distinct.items():
            distinct.setdefault(k, v)
    return MeasuredStatistics(dict(est.rates), sel, distinct)


def _gate_figures(
    measured: MeasuredStatistics, correction: Mapping[str, float]
) -> dict[str, float]:
    """Everything a re-optimization depends on that changes during a run, flat."""
    out = {f"rate {k}": v for k, v in measured.rates.items()}
    out.update({f"selectivity {k}": v for k, v in measured.selectivities.items()})
    out.update({f"distinct {k}": v for k, v in _by_name(measured.distinct).items()})
    out.update({f"correction {k}": v for k, v in correction.items()})
    return out


def _within(now: Mapping[str, float], then: Mapping[str, float], gate: float) -> bool:
    """Whether the same figures are measured and each is within ``gate`` (relative) of
    its value then (``gate`` 0: never)."""
    if gate <= 0 or now.keys() != then.keys():
        return False
    return all(_ratio_off(now[k], then[k]) <= 1.0 + gate for k in now)


def _by_name(distinct: Mapping[tuple[str, tuple[str, ...]], float]) -> dict[str, float]:
    return {f"{s}.{'+'.join(cols)}": d for (s, cols), d in distinct.items()}


def _target(plan: LogicalPlan, placement: Mapping[str, str]) -> tuple[Any, ...]:
    """What identifies a plan choice: its join orders (leaf ids per chain) and placement."""
    orders = tuple(c.leaves for c in join_chains(plan))
    return orders, tuple(sorted(placement.items()))


def _aliases(plan: LogicalPlan) -> dict[str, str]:
    """Leaf operator id -> the FROM alias its columns carry in its join chain (the chain
    root's schema holds each leaf's columns with the qualifier they were bound under)."""
    out = {}
    for chain in join_chains(plan):
        fields = plan.op(chain.root).schema.fields
        start = 0
        for leaf in _left_to_right(plan, chain.root):
            width = len(plan.op(leaf).schema)
            qualifiers = {f.qualifier for f in fields[start : start + width]}
            start += width
            q = qualifiers.pop() if len(qualifiers) == 1 else None
            out[leaf] = q if q is not None else leaf
    return out


def _left_to_right(plan: LogicalPlan, op_id: str) -> list[str]:
    """The leaves of a join tree, left to right (the column order of its root)."""
    if not isinstance(plan.op(op_id), Join):
        return [op_id]
    left, right = plan.inputs(op_id)
    return _left_to_right(plan, left) + _left_to_right(plan, right)


def _label(
    plan: LogicalPlan,
    placement: Mapping[str, str],
    join_orders: Sequence[Sequence[str]] | None = None,
) -> dict[str, Any]:
    """``{"join_order", "placement"}`` of a plan: the FROM aliases in left-deep order (a list
    of lists when the plan has several join chains; [] without joins) and the placement."""
    orders = (
        [list(o) for o in join_orders]
        if join_orders is not None
        else [list(c.leaves) for c in join_chains(plan)]
    )
    alias = _aliases(plan)
    named = [[alias.get(leaf, leaf) for leaf in o] for o in orders]
    order: list[Any] = named[0] if len(named) == 1 else named
    return {"join_order": order, "placement": dict(sorted(placement.items()))}


def _replay_seconds(opt: Optimized) -> float:
    """Event-seconds of input the largest window holds (its tuples / its arrival rate)."""
    span = 0.0
    for w in opt.plan.ids_of("window"):
        e = opt.estimates[w]
        card, lam = e.cardinality.value, e.lambda_out.value
        if lam > 0 and math.isfinite(card):
            span = max(span, card / lam)
    return span


def _cost_json(c: Cost) -> dict[str, Any]:
    return {
        "bottleneck": _num(c.bottleneck),
        "utilization": _num(c.utilization),
        "feasible": c.feasible,
    }


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole > 0 else "n/a"


def _ratio_off(a: float, b: float) -> float:
    """How far apart two positive figures are, as a ratio >= 1 (inf if one is 0)."""
    lo, hi = sorted((abs(a), abs(b)))
    if hi == 0:
        return 1.0
    return math.inf if lo == 0 else hi / lo

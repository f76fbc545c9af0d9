"""The drift policy on synthetic monitor figures, and measured statistics in the estimator.

The figures are what a ``RuntimeMonitor`` reports (``seconds``, ``streams``,
``statistics()``), scripted per check, so each rule of the policy is exercised on its own:
warm-up, margin, dwell, minimum spacing, the settled-saving rule and the infeasible trigger;
a workload oscillating around the point where two plans cost the same never migrates back
and forth. The optimizer, the cost model and the plans are real.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hycq.adapt import AdaptiveController, make_controller
from hycq.api import LoadedQuery, load_query
from hycq.planning import OptimizerOptions, optimize
from optimizer.estimate import estimate
from optimizer.ir.cost import Precision
from optimizer.ir.errors import OptionError
from optimizer.ir.measured import MeasuredStatistics

ROOT = Path(__file__).resolve().parents[3]
JOIN_AGGS = ROOT / "queries" / "keyed" / "join_aggs.sql"
KEYS = {("r", ("k",)): 100.0, ("s", ("k",)): 100.0}
#: A per-stream rate well past the break-even (about 8k per stream at the default constants):
#: the columnar plan saves about 60% of C_u there.
HIGH = 30_000


@dataclass
class Figures:
    """A monitor's reading, scripted: per-stream rate (both streams) for the next check."""

    seconds: int = 60
    streams: list[str] = field(default_factory=lambda: ["r", "s"])
    rate: float = 500.0

    def statistics(self) -> MeasuredStatistics:
        return MeasuredStatistics({"r": self.rate, "s": self.rate}, {}, KEYS, self.seconds)


def controller(rate: float = 500.0, **policy: object) -> tuple[AdaptiveController, LoadedQuery]:
    q = load_query(JOIN_AGGS)
    opts = OptimizerOptions()
    opt = optimize(q, opts, measured=Figures(rate=rate).statistics())
    ctl = make_controller(q, opts, opt.plan, opt.placement, None, 1, 1, planned_on=opt, **policy)
    return ctl, q


def drive(ctl: AdaptiveController, rates: list[float], start: int = 100) -> list[int]:
    """Check once per second with the given rates; the seconds at which it migrated."""
    out = []
    fig = Figures()
    for k, r in enumerate(rates):
        fig.rate = r
        fig.seconds = start + k
        if ctl.check(start + k, fig) is not None:  # type: ignore[arg-type]
            out.append(start + k)
    return out


def test_dwell_counts_consecutive_checks_of_the_same_target() -> None:
    ctl, _ = controller(dwell_checks=4)
    # 30k tuples/s makes DuckDB pay (about 60% of C_u saved); a dip back to 500 resets
    assert drive(ctl, [HIGH] * 3 + [500] + [HIGH] * 3) == []
    assert [d.get("streak") for d in ctl.decisions[-3:]] == [1, 2, 3]
    assert drive(ctl, [HIGH], start=107) == [107]
    assert ctl.decisions[-1]["decision"] == "migrate"


def break_even(lo: float = 200.0, hi: float = 20_000.0) -> float:
    """The per-stream rate above which the optimizer places join_aggs off the row engine
    (bisection over the model's choice at measured rates; where exactly depends on the cost
    model's constants, which these tests should not restate)."""
    q = load_query(JOIN_AGGS)

    def columnar(rate: float) -> bool:
        opt = optimize(q, OptimizerOptions(), measured=Figures(rate=rate).statistics())
        return any(e != "row" for e in opt.placement.values())

    assert not columnar(lo) and columnar(hi)
    while hi / lo > 1.02:
        mid = (lo * hi) ** 0.5
        lo, hi = (lo, mid) if columnar(mid) else (mid, hi)
    return hi


def test_spacing_and_no_return_while_hovering_around_the_break_even() -> None:
    ctl, _ = controller(min_spacing_s=30, dwell_checks=2)
    migrated = drive(ctl, [20_000] * 3)
    assert migrated == [101]
    # Now off the row engine. The rate falls to where the all-row plan is best, then
    # hovers within 15% of the break-even: neither direction saves the 20% margin there.
    be = break_even()
    hovering = [be * f for f in (0.9, 1.1, 0.85, 1.05, 0.95, 0.88, 1.15, 0.92)] * 6
    assert drive(ctl, hovering, start=110) == []
    # A real drop (the row plan saves ~45% at 200/s) migrates back only after the dwell.
    back = drive(ctl, [200] * 4, start=200)
    assert back == [201]


def test_spacing_holds_a_second_migration_back() -> None:
    ctl, _ = controller(min_spacing_s=30, dwell_checks=1)
    assert drive(ctl, [HIGH]) == [100]
    assert drive(ctl, [200] * 40, start=101) == [130]  # not before 30 s after the first
    reasons = [d["why"] for d in ctl.decisions if d.get("why", "").startswith("spacing")]
    assert len(reasons) == 29


def test_warmup_and_missing_rates_wait() -> None:
    ctl, _ = controller(dwell_checks=1, warmup_s=20)
    fig = Figures(seconds=5, rate=10_000)
    assert ctl.check(5, fig) is None  # type: ignore[arg-type]
    assert ctl.decisions[-1]["why"].startswith("warming up")
    fig = Figures(seconds=30, rate=10_000, streams=["r", "s", "x"])
    assert ctl.check(30, fig) is None  # type: ignore[arg-type]
    assert "x" in ctl.decisions[-1]["why"]


def test_the_migration_cost_must_be_earned_over_the_horizon() -> None:
    # A 60% saving over a 1-second horizon does not pay for replaying a 30-second window.
    ctl, _ = controller(dwell_checks=1, horizon_s=1)
    assert drive(ctl, [HIGH] * 5) == []
    assert "does not outweigh" in ctl.decisions[-1]["why"]


def test_settled_saving_rule_waits_for_a_moving_figure() -> None:
    ctl, _ = controller(dwell_checks=3, settle=0.05)
    # the saving climbs ~10% -> 25% -> 35% -> 41% -> 47% -> 54% -> 60%: not settled at 5 pts
    ramp = [9_000, 12_000, 15_000, 18_000, 21_000, 24_000, HIGH, HIGH, HIGH]
    migrated = drive(ctl, ramp)
    assert migrated and migrated[0] >= 106


def test_an_infeasible_plan_migrates_without_weighing_the_cost() -> None:
    q = load_query(ROOT / "queries" / "keyed" / "j2.sql")
    opts = OptimizerOptions()
    low = MeasuredStatistics({"r": 20, "s": 20}, {}, KEYS, 60)
    opt = optimize(q, opts, measured=low)
    ctl = make_controller(
        q,
        opts,
        opt.plan,
        opt.placement,
        None,
        1,
        1,
        planned_on=opt,
        dwell_checks=2,
        horizon_s=0,
    )

    class High(Figures):
        def statistics(self) -> MeasuredStatistics:
            return MeasuredStatistics({"r": 5_000, "s": 5_000}, {}, KEYS, 60)

    fig = High()
    got = [ctl.check(t, fig) for t in (100, 101)]  # type: ignore[arg-type]
    assert got[0] is None and got[1] is not None
    req = got[1]
    assert req.reason["trigger"] == "infeasible"
    assert req.reason["cost"]["running"]["feasible"] is False
    assert req.reason["figures"]["rates"]["r"] == {"measured": 5_000.0, "planned": 20.0}


def test_policy_options_are_checked() -> None:
    q = load_query(JOIN_AGGS)
    opt = optimize(q, OptimizerOptions(), measured=Figures().statistics())
    args = (q, OptimizerOptions(), opt.plan, opt.placement, None, 1, 1)
    with pytest.raises(OptionError, match="unknown adaptivity policy option"):
        make_controller(*args, planned_on=opt, margn=0.1)
    with pytest.raises(OptionError, match="margin"):
        make_controller(*args, planned_on=opt, margin=-1)
    with pytest.raises(OptionError, match="dwell_checks"):
        make_controller(*args, planned_on=opt, dwell_checks=0)
    with pytest.raises(OptionError, match="interval"):
        make_controller(q, None, opt.plan, opt.placement, None, 0, 1, planned_on=opt)


def test_measured_statistics_win_in_the_estimator() -> None:
    q = load_query(ROOT / "queries" / "keyed" / "j2.sql")
    m = MeasuredStatistics({"r": 777.0}, {"r.k = s.k": 0.5}, {("s", ("k",)): 7.0}, 10)
    est = estimate(q.plan, q.catalog, rates=50, measured=m)
    assert est.rates == {"r": 777.0, "s": 50.0}  # measured where known, else the override
    (join,) = [o.id for o in q.plan.operators() if o.kind == "join"]
    f = est[join].selectivity
    assert f is not None and f.value == 0.5
    (agg,) = [o.id for o in q.plan.operators() if o.kind == "aggregate"]
    blind = estimate(q.plan, q.catalog, rates=50)
    assert est[agg].groups is not None and blind[agg].groups is not None
    window_s = [o.id for o in q.plan.operators() if o.kind == "window"][1]
    d = est.key_distinct(window_s, [1]) if est.key_distinct else None
    assert d is not None and d.value == 7.0 and d.precision is Precision.ESTIMATED


def test_a_plan_measured_to_fall_behind_is_infeasible_whatever_the_model_says() -> None:
    """The model may call the running plan feasible (and a move not worth its cost) while
    the plan is measured to need more than one core-second per event-second: that is the
    infeasible trigger (and ``auto`` then replaces it by replay, not GPT)."""

    class Busy(Figures):
        u = 0.5

        def operator_figures(self) -> dict[str, dict[str, float]]:
            return {"join1": {"u": self.u * 0.75}, "aggregate1": {"u": self.u * 0.25}}

    ctl, _ = controller(500.0, dwell_checks=1, horizon_s=0)
    fig = Busy(rate=20_000.0)
    first = ctl.check(100, fig)  # type: ignore[arg-type]
    assert first is None  # the model's best differs, but the saving does not pay (horizon 0)
    assert ctl.decisions[-1]["target_differs"] and ctl.decisions[-1]["measured_u"] == 0.5
    fig.u = 1.6
    req = ctl.check(101, fig)  # type: ignore[arg-type]
    assert req is not None
    assert req.reason["trigger"] == "infeasible"
    assert ctl.decisions[-1]["measured_u"] == pytest.approx(1.6)


class RowBusy(Figures):
    """Every operator of the running (all-row) plan measured at ``u`` core-seconds per
    event-second in total, spread over the plan's operators."""

    u = 0.0
    ops: tuple[str, ...] = ()

    def operator_figures(self) -> dict[str, dict[str, object]]:
        return {o: {"kind": "x", "u": self.u / len(self.ops)} for o in self.ops}


def test_the_model_is_corrected_by_the_running_plans_measured_busy_time() -> None:
    """The optimizer on measured statistics calls the running all-row plan the best one;
    uncorrected, the controller would stay on it however far it falls behind (the ramp of
    docs/performance.md). Measured at several times its predicted busy time, the row
    engine's costs are scaled by measured/predicted for every candidate: the best plan
    moves work to DuckDB, and the measured overload migrates to it."""
    ctl, q = controller(500.0, dwell_checks=1)
    assert set(ctl.running.placement.values()) == {"row"}
    # 1,200 tuples/s per stream: enough predicted row work to correct (MIN_PREDICTED_U), and
    # below the rate where DuckDB's fixed costs per slide pay for this query
    fig = RowBusy(rate=1_200.0)
    fig.ops = tuple(o.id for o in q.plan.operators())
    fig.u = 0.0025  # about what the model predicts: no reason to move
    assert ctl.check(100, fig) is None  # type: ignore[arg-type]
    first = ctl.decisions[-1]
    # the all-row plan is the best, or a plan saving less than the margin: no reason to move
    # either way
    assert first["why"] == "the running plan is the best plan" or first["why"].endswith(
        "of C_u is below the margin 20%"
    )
    predicted = first["predicted_u"]["row"]
    assert ctl.correction["row"] == pytest.approx(0.0025 / predicted)
    fig.u = 1.6  # falls behind: far more than predicted
    req = ctl.check(101, fig)  # type: ignore[arg-type]
    last = ctl.decisions[-1]
    assert last["correction"]["row"] == pytest.approx(min(20.0, 1.6 / last["predicted_u"]["row"]))
    assert req is not None, last
    assert req.reason["trigger"] == "infeasible"
    assert "duckdb" in req.placement.values()


def test_a_correction_needs_enough_predicted_work_and_waits_after_a_migration() -> None:
    """An engine the running plan barely uses, or a reading just after a migration (the
    replay's work), leaves the factors alone."""
    ctl, q = controller(500.0, dwell_checks=1)
    fig = RowBusy(rate=1.0)  # next to no predicted work
    fig.ops = tuple(o.id for o in q.plan.operators())
    fig.u = 0.5
    ctl.check(100, fig)  # type: ignore[arg-type]
    assert ctl.correction == {}
    ctl.adopt(ctl.running.plan, ctl.running.placement, 200)
    fig.rate, fig.u = 1000.0, 1.6
    ctl.check(205, fig)  # type: ignore[arg-type]  # within warmup_s (10) of the migration
    assert ctl.correction == {}
    ctl.check(211, fig)  # type: ignore[arg-type]
    assert ctl.correction["row"] > 1.0


def test_the_engine_threads_whole_time_counts_not_only_its_operators() -> None:
    """The operators time their own steps; the clock, the deltas between them and the
    output are the engine thread's too. Q2 all-row at 20k tuples/s: operators 0.5-0.9
    core-seconds per event-second, the thread over 1 (it fell behind). The driver's
    measure of the whole thread decides, and the time outside the operators is the row
    engine's."""

    class Thread(RowBusy):
        whole = 0.0

        def engine_utilization(self) -> float:
            return self.whole

    ctl, q = controller(500.0, dwell_checks=1, correct=False)
    fig = Thread(rate=1000.0)
    fig.ops = tuple(o.id for o in q.plan.operators())
    fig.u, fig.whole = 0.6, 1.4
    ctl.check(100, fig)  # type: ignore[arg-type]
    last = ctl.decisions[-1]
    assert last["measured_u_by_engine"] == {"row": pytest.approx(1.4)}
    from hycq.adapt import _measured_utilization

    assert _measured_utilization(fig) == pytest.approx(1.4)
    fig.whole = 0.3  # a thread reading below its operators' sum: the operators' sum
    assert _measured_utilization(fig) == pytest.approx(0.6)


@dataclass
class _Q2Figures:
    """What the monitor measures of Q2 when its join and count run on DuckDB: the rate and
    the selection's selectivity, no distinct count (the plug key is grouped inside the
    columnar group, where the monitor counts nothing)."""

    rate: float
    seconds: int = 60
    streams: list[str] = field(default_factory=lambda: ["readings"])

    def statistics(self) -> MeasuredStatistics:
        return MeasuredStatistics({"readings": self.rate}, {"property = 1": 0.5}, {}, self.seconds)


def test_re_optimization_keeps_the_sampled_statistics_the_monitor_cannot_measure() -> None:
    """Priced on measured figures alone, Q2's running mixed plan cost 13x what the optimizer
    predicted at start for the same rate (the plug count fell back to a default), and the
    controller moved a plan that was the measured best to the all-row one. Overlaid on the
    start's sample, the re-optimization agrees with the start at an unchanged rate."""
    q = load_query(ROOT / "queries" / "smartplug" / "q2.sql")
    opts = OptimizerOptions(rate=1000.0)
    start = optimize(q, opts)
    assert start.statistics is not None
    ctl = make_controller(
        q,
        opts,
        start.plan,
        start.placement,
        None,
        1,
        1,
        planned_on=start,
        correct=False,
        gate=0.0,
    )
    for k in range(5):
        assert ctl.check(100 + k, _Q2Figures(1000.0, 60 + k)) is None  # type: ignore[arg-type]
    record = ctl.decisions[-1]
    assert record["why"] == "the running plan is the best plan"
    assert record["running"]["utilization"] == pytest.approx(start.cost.utilization, rel=0.05)


def test_checks_skip_the_optimizer_while_no_figure_moves_past_the_gate() -> None:
    """Once a check found the running plan best, later checks re-optimize only when some
    measured figure moved more than ``gate`` (relative) from that check's; a rate step
    past it re-optimizes, and a step large enough moves the plan."""
    q = load_query(ROOT / "queries" / "smartplug" / "q2.sql")
    opts = OptimizerOptions(rate=1000.0)
    start = optimize(q, opts)
    ctl = make_controller(
        q,
        opts,
        start.plan,
        start.placement,
        None,
        1,
        1,
        planned_on=start,
        correct=False,
        dwell_checks=1,
        min_spacing_s=0.0,
    )
    rates = [1000.0, 1050.0, 950.0, 1090.0, 800.0, 810.0]
    for k, rate in enumerate(rates):
        assert ctl.check(100 + k, _Q2Figures(rate, 60 + k)) is None  # type: ignore[arg-type]
    full = ["running" in d for d in ctl.decisions]
    # within 10% of 1000 three times; 800 is 20% off (re-optimized: the running plan is still
    # the best), 810 within 10% of it
    assert full == [True, False, False, False, True, False]
    assert all(d["decision"] == "stay" for d in ctl.decisions)
    # far past the gate, the optimizer prices the plan at the new rate (40x the tuples; the
    # per-group work of the aggregates, exact sums included, grows less, as their groups are
    # all touched already: about 5x)
    ctl.check(200, _Q2Figures(40_000.0, 200))  # type: ignore[arg-type]
    last, first = ctl.decisions[-1], ctl.decisions[0]
    assert last["running"]["utilization"] > 3 * first["running"]["utilization"]


@pytest.mark.parametrize("strategy", ["jisc", "ms", "hybmig"])
def test_a_forced_row_strategy_considers_only_the_plans_it_can_reach(strategy: str) -> None:
    """At 5,000 tuples/s the all-row plan of j2 cannot keep up and the best plan puts the
    join on DuckDB (what gms is asked to reach); a strategy that moves row-engine state
    cannot get there, so the controller re-plans over the row engine only and never asks
    for a columnar plan (which would stop the run with exit 2 at the migration point)."""
    q = load_query(ROOT / "queries" / "keyed" / "j2.sql")
    opts = OptimizerOptions()
    low = MeasuredStatistics({"r": 20, "s": 20}, {}, KEYS, 60)
    opt = optimize(q, opts, measured=low)
    all_row = dict.fromkeys(opt.plan.topological(), "row")

    class High(Figures):
        def statistics(self) -> MeasuredStatistics:
            return MeasuredStatistics({"r": 5_000, "s": 5_000}, {}, KEYS, 60)

    def requests(name: str) -> list[object]:
        ctl = make_controller(q, opts, opt.plan, all_row, None, 1, 1, planned_on=opt,
                              dwell_checks=2, horizon_s=0, strategy=name)  # fmt: skip
        got = [ctl.check(t, High()) for t in range(100, 106)]  # type: ignore[arg-type]
        assert any("best" in d for d in ctl.decisions)  # it re-optimized
        return [r for r in got if r is not None]

    generic = requests("gms")
    assert generic and set(generic[0].placement.values()) != {"row"}  # type: ignore[attr-defined]
    for req in requests(strategy):
        assert set(req.placement.values()) == {"row"}, req  # type: ignore[attr-defined]

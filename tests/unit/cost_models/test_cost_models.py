"""The cost-model registry: built-in names, installed entry points, module:attr paths, TOML
files, calibration profiles; and the scipy fit behind ``hycq calibrate``."""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path

import pytest

from cost_models.analytical import AnalyticalCostModel, ColumnarConstants
from cost_models.calibrated import (
    calibrated_model,
    fit_linear,
    model_parameters,
    write_profile,
)
from cost_models.registry import available, default_spec, load_cost_model
from engines import registry
from optimizer.ir.errors import ConfigError

PLUGIN = textwrap.dedent(
    """
    class FlatModel:
        name = "flat"

        def unit_cost(self, op, engine, estimates):
            return 1e-6

        def group_cost(self, group, estimates):
            return 1e-3

    NOT_A_MODEL = object()
    """
)


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "hycq_test_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("hycq_test_plugin", None)


def test_builtin_names_and_default() -> None:
    assert load_cost_model("analytical").name == "analytical"
    assert default_spec() == "analytical"  # tests point HYCQ_CALIBRATION at nothing
    assert {"analytical", "calibrated"} <= set(available())


def test_module_path_plugin(plugin_dir: Path) -> None:
    model = load_cost_model("hycq_test_plugin:FlatModel")
    assert model.name == "flat"
    with pytest.raises(ConfigError, match="is not a cost model"):
        load_cost_model("hycq_test_plugin:NOT_A_MODEL")
    with pytest.raises(ConfigError, match="has no attribute 'Flat'"):
        load_cost_model("hycq_test_plugin:Flat")
    with pytest.raises(ConfigError, match="cannot import module 'no_such_module_x'"):
        load_cost_model("no_such_module_x:Model")


def test_entry_point_plugin(plugin_dir: Path) -> None:
    """An installed distribution declaring ``hycq.cost_models`` is found by name."""
    dist = plugin_dir / "hycq_test_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hycq-test-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[hycq.cost_models]\nflat = hycq_test_plugin:FlatModel\n"
    )
    assert "flat" in available()
    assert load_cost_model("flat").name == "flat"


def test_toml_overrides_parameters(tmp_path: Path) -> None:
    path = tmp_path / "tuned.toml"
    path.write_text(
        "[cost_model]\nbase = 'analytical'\n[cost_model.parameters]\nselect = 2e-7\n"
        "[cost_model.parameters.engines.duckdb]\nfixed = 0.01\n"
    )
    defaults = registry.cost_defaults()  # the engines' declared constants, as hycq passes them
    model = load_cost_model(str(path), defaults)
    assert isinstance(model, AnalyticalCostModel)
    assert model.name == "tuned" and model.select == 2e-7
    assert model.engines["duckdb"].fixed == 0.01
    assert model.engines["spark"] == ColumnarConstants(**defaults["spark"])
    assert model.engines["datafusion"] == ColumnarConstants(**defaults["datafusion"])
    with pytest.raises(ConfigError, match=r"unknown columnar engine 'engines\.duckdb'"):
        load_cost_model(str(path))  # no engine declared: nothing to override


def test_toml_parameters_need_a_parametrized_base(tmp_path: Path, plugin_dir: Path) -> None:
    path = tmp_path / "x.toml"
    path.write_text(
        "[cost_model]\nbase = 'hycq_test_plugin:FlatModel'\n[cost_model.parameters]\nselect = 1\n"
    )
    with pytest.raises(ConfigError, match="no settable parameters"):
        load_cost_model(str(path))


def test_profile_round_trip_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "calibration.json"
    with pytest.raises(ConfigError, match="no calibration profile") as err:
        calibrated_model(path)
    assert "hycq calibrate" in (err.value.hint or "")
    tuned = AnalyticalCostModel(select=3e-7)
    fit = fit_linear([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])
    write_profile(path, tuned, {"select": fit}, {"cores": 2}, "2026-11-21T00:00:00+00:00")
    model = calibrated_model(path)
    assert model.name == "calibrated" and model.select == 3e-7
    assert model_parameters(model) == model_parameters(tuned)
    monkeypatch.setenv("HYCQ_CALIBRATION", str(path))
    assert default_spec() == "calibrated"
    assert load_cost_model(None).name == "calibrated"
    doc = json.loads(path.read_text())
    doc["format"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="not a version-1"):
        calibrated_model(path)
    path.write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        calibrated_model(path)


def test_fit_linear_recovers_slope_and_intercept() -> None:
    xs = [1e5, 3e5, 1e6, 3e6]
    ys = [0.002 + 40e-9 * x for x in xs]
    fit = fit_linear(xs, ys)
    assert math.isclose(fit.slope, 40e-9, rel_tol=1e-6)
    assert math.isclose(fit.intercept, 0.002, rel_tol=1e-6)
    assert fit.r2 > 0.999999
    # Costs are never negative: a decreasing series fits a zero slope.
    assert fit_linear([1, 2, 3], [3, 2, 1]).slope == 0.0
    with pytest.raises(ValueError):
        fit_linear([1.0], [1.0])


def test_calibrate_measures_fits_and_becomes_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``hycq calibrate --quick`` on the real row engine and DuckDB writes a profile that the
    ``calibrated`` model loads and ``explain`` then uses by default."""
    import subprocess

    root = Path(__file__).resolve().parents[3]
    profile = tmp_path / "cal.json"
    env = {**__import__("os").environ, "HYCQ_CALIBRATION": str(profile)}
    # with an engine's setting: what a Spark cluster's master is to a cluster profile
    cmd = ["calibrate", "--quick", "--engines", "row,duckdb", "--duckdb-threads", "1"]
    r = subprocess.run(
        [sys.executable, "-m", "hycq.cli", *cmd],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert f"wrote {profile}" in r.stdout and "duckdb SQL time" in r.stdout
    doc = json.loads(profile.read_text())
    assert doc["machine"]["duckdb_settings"] == {"threads": 1}
    params = doc["parameters"]
    # Measured, not the analytical defaults; positive where the engine does work.
    assert params["join_input"] > 0 and params["agg_base"] > 0 and params["from_arrow"] > 0
    assert params["agg_group"] >= 0  # fitted from the 50,000-plug runs (floored if noisy)
    assert params["engines"]["duckdb"]["fixed"] > 0
    assert params != model_parameters(AnalyticalCostModel())
    # the fit's quality is a benchmark's business (a loaded machine scatters the points):
    # here, that the MAX aggregate's per-tuple cost was measured at all
    assert doc["fits"]["row.aggregate.max"]["slope"] > 0
    r = subprocess.run(
        [sys.executable, "-m", "hycq.cli", "explain", "queries/smartplug/q1.sql", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cost_model"] == "calibrated"


def test_unit_costs_fitted_to_zero_fall_back_to_scaled_analytical_values() -> None:
    """A noisy calibration that fits a per-tuple cost to 0 keeps a positive value, scaled by
    the machine speed the other fits measured, and says so."""
    from hycq.calibrate import floor_unit_costs

    base = AnalyticalCostModel()
    params = {"select": 2 * base.select, "project": 2 * base.project, "join_input": 0.0}
    warnings = floor_unit_costs(params, base)
    assert params["join_input"] == pytest.approx(2 * base.join_input)
    assert params["select"] == 2 * base.select  # fitted values are kept
    assert len(warnings) == 1 and "join_input fitted to 0" in warnings[0]
    assert floor_unit_costs({"select": base.select}, base) == []


def test_an_aggregate_over_many_small_groups_costs_more_per_tuple() -> None:
    """The per-touched-group term (agg_group): at the same rate, 50,000 plugs that each get a
    tuple now and then cost far more per tuple than 1,677 plugs with many each, and the
    difference is the balls-into-bins count of touched groups times agg_group, at any
    number of groups (1,677 plugs pay it too: issue 20, ninth stop)."""
    from hycq.api import QUERIES, load_query
    from optimizer.estimate import estimate
    from optimizer.ir.plan import Aggregate
    from optimizer.statistics import SampleStatistics

    q = load_query(QUERIES / "smartplug" / "q5.sql")
    agg = next(op for op in q.plan.operators() if isinstance(op, Aggregate) and op.group_by)
    assert len(agg.aggs) == 1
    model = AnalyticalCostModel()
    costs = {}
    for plugs in (1677, 50_000):
        key = ("readings", tuple(sorted(("house_id", "household_id", "plug_id"))))
        stats = SampleStatistics({"property = 1": 0.5}, {key: float(plugs)})
        est = estimate(q.plan, q.catalog, rates=40000.0, sample=stats)[agg.id]
        assert est.groups is not None and est.groups.value == plugs
        costs[plugs] = model.unit_cost(agg, "row", est)
        arrivals = est.total_in.value * est.slide_seconds
        touched = plugs * -math.expm1(-2 * arrivals / plugs)
        base = AnalyticalCostModel(agg_group=0.0).unit_cost(agg, "row", est)
        assert costs[plugs] - base == pytest.approx(model.agg_group * touched / arrivals)
        assert costs[plugs] > base
    assert costs[50_000] > 3 * costs[1677]


def test_each_further_aggregate_call_adds_its_share_of_the_per_group_cost() -> None:
    """Q3's aggregate keeps a MAX and an AVG: per touched group it pays agg_group once and
    agg_group_call of it again for the second call."""
    from hycq.api import QUERIES, load_query
    from optimizer.estimate import estimate
    from optimizer.ir.plan import Aggregate

    q = load_query(QUERIES / "smartplug" / "q3.sql")
    agg = next(op for op in q.plan.operators() if isinstance(op, Aggregate))
    assert len(agg.aggs) == 2
    est = estimate(q.plan, q.catalog, rates=10000.0)[agg.id]
    assert est.touched is not None and est.touched > 0
    arrivals = est.total_in.value * est.slide_seconds
    model = AnalyticalCostModel()
    grouped = model.unit_cost(agg, "row", est) - AnalyticalCostModel(agg_group=0.0).unit_cost(
        agg, "row", est
    )
    assert grouped == pytest.approx(
        model.agg_group * (1 + model.agg_group_call) * est.touched / arrivals
    )


@pytest.mark.parametrize("rate", [40000.0, 200.0])
def test_a_duckdb_group_keeping_its_averages_costs_the_changes_not_the_window(rate: float) -> None:
    """Q4 wholly on DuckDB, 50,000 plugs: over 5-minute windows at 40k tuples/s the two AVGs
    are kept incrementally (optimizer.ir.incremental.worth_it), and the group costs inc_fixed +
    inc_row * changed rows + inc_group * groups per aggregate instead of re-aggregating the
    windows; at 200 tuples/s (60,000-row windows) re-evaluation is kept and so is its cost."""
    from dataclasses import replace

    from cost_models.analytical import without_incremental
    from hycq.api import QUERIES, load_query
    from optimizer.estimate import estimate
    from optimizer.ir.placement import groups, uniform_placement
    from optimizer.statistics import SampleStatistics

    q = load_query(QUERIES / "smartplug" / "q4.sql")
    (group,) = groups(q.plan, uniform_placement(q.plan, "duckdb"))
    key = ("readings", tuple(sorted(("house_id", "household_id", "plug_id"))))
    stats = SampleStatistics({"property = 1": 0.5}, {key: 50_000.0})
    est = estimate(q.plan, q.catalog, rates=rate, sample=stats)
    model = AnalyticalCostModel().with_engines(registry.cost_defaults())
    consts = model.engines["duckdb"]
    assert consts.inc_fixed is not None
    plain = replace(model, engines={"duckdb": replace(consts, inc_fixed=None)})
    kept, full = model.group_cost(group, est), plain.group_cost(group, est)
    assert without_incremental(model).group_cost(group, est) == full  # --no-incremental
    if rate == 200.0:
        assert kept == full
        return
    assert kept < full / 2


def test_the_scan_pays_for_filtering_and_encoding_its_chunks_as_they_arrive() -> None:
    """Q2's group under the scan (``_scan_saving``): the encoding of each entering chunk is
    part of the scan's price, and the left select's Arrow filter is charged per arriving
    row only when it runs in the scan (before, a select moved into the MIG cost nothing
    there, while on the row engine it was charged as an Arrow filter)."""
    from dataclasses import replace

    from hycq.api import QUERIES, load_query
    from optimizer.estimate import estimate
    from optimizer.ir.placement import groups, uniform_placement
    from optimizer.statistics import SampleStatistics

    q = load_query(QUERIES / "smartplug" / "q2.sql")
    plan = q.plan
    whole = uniform_placement(plan, "duckdb")
    selects_on_row = {k: ("row" if plan.op(k).kind == "select" else v) for k, v in whole.items()}
    key = ("readings", tuple(sorted(("house_id", "household_id", "plug_id"))))
    stats = SampleStatistics({"property = 1": 0.5}, {key: 1_677.0})
    est = estimate(plan, q.catalog, rates=10_000.0, sample=stats)
    model = AnalyticalCostModel().with_engines(registry.cost_defaults())
    consts = model.engines["duckdb"]
    assert consts.scan_fixed is not None and consts.scan_filter > 0 and consts.scan_encode > 0
    free = replace(model, engines={"duckdb": replace(consts, scan_chunk=0.0, scan_filter=0.0,
                                                     scan_encode=0.0)})  # fmt: skip
    costs = {}
    for name, placement in (("whole", whole), ("selects on row", selects_on_row)):
        group = next(g for g in groups(plan, placement) if g.engine == "duckdb")
        costs[name] = model.group_cost(group, est) - free.group_cost(group, est)
    arriving, passing = 10_000.0, 5_000.0  # per 1-second slide; property = 1 passes half
    encode = consts.scan_chunk + consts.scan_encode * passing
    assert costs["selects on row"] == pytest.approx(encode)
    assert costs["whole"] == pytest.approx(encode + consts.scan_filter * arriving)

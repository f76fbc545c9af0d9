"""Keys reaching an aggregate over a derived input, measured by running the subplan below it
over the sample (optimizer.statistics.derived_signature, hycq.sample_eval), and what the
estimator and the row cost model make of them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hycq.sample_eval as sample_eval
from cost_models.analytical import AnalyticalCostModel, count_star
from engines.sources.keyed import KeyedGenerator, KeyedStream
from engines.sources.smartplug import SmartPlugGenerator
from hycq.sample_eval import subplan_keys
from optimizer.estimate import estimate
from optimizer.ir.catalog import Catalog
from optimizer.ir.plan import Aggregate
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from optimizer.statistics import (
    REACHING_ROWS_PER_KEY,
    _described,
    derived_signature,
    measure,
    reaching_samples,
)

ROOT = Path(__file__).resolve().parents[3]
Q1 = (ROOT / "queries" / "smartplug" / "q1.sql").read_text()
Q2 = (ROOT / "queries" / "smartplug" / "q2.sql").read_text()
PLUG = ["house_id", "household_id", "plug_id"]


def _above(sample: pa.Table, share: float | None) -> int:
    """Oracle, in pyarrow alone: plugs with a load reading above ``share`` of their maximum
    load (Q1's residual; None: above their average, Q2's)."""
    load = sample.filter(pc.equal(sample["property"], 1))
    func = "max" if share is not None else "mean"
    per = load.group_by(PLUG).aggregate([("value", func)])
    joined = load.join(per, PLUG)
    bound = joined[f"value_{func}"]
    if share is not None:
        bound = pc.multiply(bound, share)
    passing = joined.filter(pc.greater(joined["value"], bound))
    return passing.select(PLUG).group_by(PLUG).aggregate([]).num_rows


def _plugs(sample: pa.Table) -> int:
    return sample.select(PLUG).group_by(PLUG).aggregate([]).num_rows


@pytest.mark.parametrize(("query", "share"), [(Q1, 0.9), (Q2, None)], ids=["q1", "q2"])
@pytest.mark.parametrize("plugs", [300, 1000])
def test_the_keys_reaching_the_count_over_the_join_are_those_of_the_oracle(
    smartplug: Catalog, query: str, share: float | None, plugs: int
) -> None:
    plan = plan_query(query, smartplug)
    sample = SmartPlugGenerator(rate=10000, plugs=plugs).table(40.0)
    stats = measure(plan, {"readings": sample}, evaluate=subplan_keys)
    top = [o for o in plan.topological() if isinstance(plan.op(o), Aggregate)][-1]
    shape = derived_signature(plan, top)
    assert shape is not None and shape.stream == "readings"
    cut = reaching_samples({"readings": sample}, shape)
    assert cut is not None
    prefix = cut[0]["readings"]
    assert prefix.num_rows < sample.num_rows  # about 30 tuples per plug, not 40 s of them
    reached, total = _above(prefix, share), _plugs(prefix)
    assert cut[1] == total == _plugs(sample)
    assert 0 < reached < total  # idle plugs (always 0 W) never pass: a real share
    assert stats.reaching[shape.key] == pytest.approx(reached / total)
    # The estimator: as many groups as keys reach the count, no more touched per slide.
    est = estimate(plan, smartplug, rates=10000, sample=stats)[top]
    assert est.groups is not None and est.groups.value == pytest.approx(reached)
    assert est.touched is not None and est.touched <= reached + 1e-9
    # Without the evaluator nothing is measured: every plug counts as a group.
    blind = measure(plan, {"readings": sample})
    assert blind.reaching == {}
    groups = estimate(plan, smartplug, rates=10000, sample=blind)[top].groups
    assert groups is not None and groups.value == pytest.approx(total)


def test_a_sample_with_too_few_tuples_per_key_measures_no_share(smartplug: Catalog) -> None:
    """Q2's residual (value > the plug's AVG) passes no tuple of a plug seen once: a sample
    of one or two tuples per plug would say no plug reaches the count."""
    plan = plan_query(Q2, smartplug)
    gen = SmartPlugGenerator(rate=10000, plugs=5000)
    sample = gen.table(2.0)
    assert sample.num_rows < REACHING_ROWS_PER_KEY * _plugs(sample)
    assert measure(plan, {"readings": sample}, evaluate=subplan_keys).reaching == {}
    wide = gen.table(60.0)  # a longer sample (the wide one) is used when given
    stats = measure(plan, {"readings": sample}, wide={"readings": wide}, evaluate=subplan_keys)
    (share,) = stats.reaching.values()
    shape = derived_signature(plan, "aggregate2")
    assert shape is not None
    cut = reaching_samples({"readings": wide}, shape)
    assert cut is not None
    prefix = cut[0]["readings"]
    assert share == pytest.approx(_above(prefix, None) / _plugs(prefix))


def test_the_signature_does_not_depend_on_the_order_a_join_was_written_in(
    smartplug: Catalog,
) -> None:
    """Phase One may swap a join's inputs: the statistics are measured on the plan as
    written and read on the reordered one."""
    swapped = Q1.replace(
        "r.house_id = m.house_id AND r.household_id = m.household_id AND r.plug_id = m.plug_id",
        "m.plug_id = r.plug_id AND m.house_id = r.house_id AND m.household_id = r.household_id",
    )
    assert swapped != Q1
    keys = []
    for text in (Q1, swapped):
        plan = plan_query(text, smartplug)
        top = [o for o in plan.topological() if isinstance(plan.op(o), Aggregate)][-1]
        shape = derived_signature(plan, top)
        assert shape is not None
        keys.append(shape.key)
    assert keys[0] == keys[1]
    # A window-fed aggregate has no derived signature (per_second covers it).
    plan = plan_query(Q1, smartplug)
    assert derived_signature(plan, "aggregate1") is None
    assert "join: " in _described(plan.op("join1"))


def test_an_evaluation_past_its_budget_measures_nothing(
    smartplug: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A theta join of two samples can take minutes: it is interrupted, not waited for."""
    query = (
        "SELECT a.plug_id, COUNT(*) AS n FROM readings [RANGE 1 MINUTE] AS a, "
        "readings [RANGE 1 MINUTE] AS b WHERE a.value < b.value GROUP BY a.plug_id"
    )
    plan = plan_query(query, smartplug)
    top = [o for o in plan.topological() if isinstance(plan.op(o), Aggregate)][-1]
    shape = derived_signature(plan, top)
    assert shape is not None
    sample = SmartPlugGenerator(rate=100000, plugs=50).table(3.0)
    monkeypatch.setattr(sample_eval, "BUDGET_S", 0.05)
    got = subplan_keys(plan, list(shape.operators), list(shape.columns), {"readings": sample})
    assert got is None


def test_count_star_adds_nothing_per_tuple_to_a_row_aggregate(smartplug: Catalog) -> None:
    """COUNT(*) keeps no state (engines.row.aggregate, mode count_star); SUM does."""
    model = AnalyticalCostModel()
    prices = {}
    for call in ("COUNT(*)", "SUM(value)", "COUNT(*) AS n, SUM(value)"):
        plan = plan_query(
            f"SELECT plug_id, {call} AS x FROM readings [RANGE 1 MINUTE] GROUP BY plug_id",
            smartplug,
        )
        est = estimate(plan, smartplug, rates=1000)
        op = plan.op("aggregate1")
        assert isinstance(op, Aggregate)
        prices[call] = (model.unit_cost(op, "row", est["aggregate1"]), op)
    star, star_op = prices["COUNT(*)"]
    total, _ = prices["SUM(value)"]
    assert count_star(star_op.aggs[0])
    assert total - star == pytest.approx(model.agg_incremental)
    # A further call adds its per-group share, and COUNT(*) nothing per tuple.
    both, _ = prices["COUNT(*) AS n, SUM(value)"]
    assert both > total


KEYED = load_catalog(ROOT / "queries" / "keyed" / "catalog.toml")


@pytest.mark.parametrize(("r_keys", "s_keys", "bound"), [(100, 100, 30), (60, 200, 45)])
def test_the_keys_reaching_a_count_over_a_two_stream_join_are_those_of_the_oracle(
    r_keys: int, s_keys: int, bound: int
) -> None:
    """The key is r's; only keys that s also holds, below ``bound``, pass the equi-join. The
    prefix cuts both samples at the same share of their span; the oracle intersects the
    keys of the two prefixes in pyarrow, with no window and no SQL."""
    query = (
        "SELECT r.k, COUNT(*) AS pairs FROM r [RANGE 10 SECONDS SLIDE 1 SECOND] AS r, "
        f"s [RANGE 10 SECONDS SLIDE 1 SECOND] AS s WHERE r.k = s.k AND s.k < {bound} "
        "GROUP BY r.k"
    )
    plan = plan_query(query, KEYED)
    samples = {
        "r": KeyedGenerator(KeyedStream("r", rate=50, keys=r_keys), seed=3).table(400.0),
        "s": KeyedGenerator(KeyedStream("s", rate=50, keys=s_keys), seed=4).table(400.0),
    }
    stats = measure(plan, samples, evaluate=subplan_keys)
    top = [o for o in plan.topological() if isinstance(plan.op(o), Aggregate)][-1]
    shape = derived_signature(plan, top)
    assert shape is not None and shape.stream == "r" and shape.keys == ("k",)
    cut = reaching_samples(samples, shape)
    assert cut is not None
    r, s = cut[0]["r"], cut[0]["s"]
    assert r.num_rows < samples["r"].num_rows and s.num_rows < samples["s"].num_rows
    r_set = set(pc.unique(r["k"]).to_pylist())
    s_set = {k for k in pc.unique(s["k"]).to_pylist() if k < bound}
    reached = len(r_set & s_set)
    assert cut[1] == len(r_set)
    assert 0 < reached < len(r_set)
    assert stats.reaching[shape.key] == pytest.approx(reached / len(r_set))
    est = estimate(plan, KEYED, rates={"r": 50, "s": 50}, sample=stats)[top]
    assert est.groups is not None and est.groups.value == pytest.approx(reached)

"""Statistics measured on a sample of the input."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa

from engines.sources.smartplug import SmartPlugGenerator
from optimizer.estimate import estimate
from optimizer.ir.catalog import Catalog
from optimizer.ir.cost import Precision
from optimizer.ir.plan import Join
from optimizer.sql import plan_query
from optimizer.statistics import key_sets, measure

ROOT = Path(__file__).resolve().parents[3]
Q1 = (ROOT / "queries" / "smartplug" / "q1.sql").read_text()


def test_sampled_key_distinct_and_selectivity_feed_the_estimates(smartplug: Catalog) -> None:
    plan = plan_query(Q1, smartplug)
    gen = SmartPlugGenerator(rate=20000)
    sample = gen.table(5.0)
    stats = measure(plan, {"readings": sample})
    key = ("readings", ("house_id", "household_id", "plug_id"))
    assert key in key_sets(plan)
    assert stats.distinct[key] == gen.plugs  # every plug reports within 5 s
    assert math.isinf(stats.distinct[("readings", ("id",))])  # unique ids: not saturated
    frac = stats.selectivities["property = 1"]
    assert 0.4 < frac < 0.6
    est = estimate(plan, smartplug, rates=40000, sample=stats)
    groups = est["aggregate1"].groups
    assert groups is not None and groups.value == gen.plugs
    assert groups.precision is Precision.ESTIMATED
    sel = est["select1"].selectivity
    assert sel is not None and sel.value == frac and sel.precision is Precision.ESTIMATED
    # Without a sample: the per-column default product, capped by the window.
    blind = estimate(plan, smartplug, rates=40000)["aggregate1"].groups
    assert blind is not None and blind.value > 100 * gen.plugs


def test_declared_statistics_win_over_the_sample(smartplug: Catalog) -> None:
    from dataclasses import replace

    stream = smartplug.get("readings")
    assert stream is not None
    declared = replace(stream, selectivity=(("property = 1", 0.25),), distinct=(("plug_id", 7),))
    cat = Catalog({"readings": declared})
    plan = plan_query(Q1, cat)
    sample = pa.table(
        {
            "property": [1, 1, 0, 1],
            "plug_id": [1, 2, 3, 4],
            "house_id": [0, 0, 0, 0],
            "household_id": [0, 0, 0, 0],
            "value": [1.0, 2.0, 3.0, 4.0],
        }
    )
    est = estimate(plan, cat, sample=measure(plan, {"readings": sample}))
    sel = est["select1"].selectivity
    assert sel is not None and sel.value == 0.25 and sel.precision is Precision.EXACT


def test_a_key_of_both_sides_of_a_self_join_is_no_key_of_the_stream() -> None:
    """``GROUP BY x.k, y.v`` over a self-join of r pairs two tuples: its distinct values are
    not r's distinct (k, v) pairs, so neither the sample nor the estimator takes them as
    such; one side's columns still are (the join keys). Same-named columns (both sides'
    ``ts``, a key that is the timestamp or an aggregate's argument) measure without error."""
    from optimizer.sql.catalog import load_catalog
    from optimizer.statistics import relation_key

    cat = load_catalog(ROOT / "queries" / "keyed" / "catalog.toml")
    text = (
        "SELECT x.k, y.v, COUNT(*) AS n FROM r [RANGE 2 SECONDS] AS x, r [RANGE 4 SECONDS] "
        "AS y WHERE x.ts = y.ts AND x.k = y.k GROUP BY x.k, y.v"
    )
    plan = plan_query(text, cat)
    (join,) = [op.id for op in plan.operators() if isinstance(op, Join)]
    assert relation_key(plan, join, [1, 4]) is None  # x.k, y.v: two tuples
    assert relation_key(plan, join, [1, 2]) == ("r", ("k", "v"))  # x.k, x.v: one tuple
    assert relation_key(plan, join, [1, 1]) == ("r", ("k",))
    assert key_sets(plan) == {("r", ("k", "ts"))}
    sample = pa.table(
        {
            "ts": list(range(100)),
            "k": [i % 5 for i in range(100)],
            "v": [1.0 * i for i in range(100)],
        }
    )
    stats = measure(plan, {"r": sample})
    assert stats.distinct[("r", ("k", "ts"))] == math.inf  # 100 distinct of 100 rows
    for grouped in (
        "SELECT ts, COUNT(*) AS n FROM r [RANGE 3 SECONDS] GROUP BY ts",
        "SELECT k, MAX(k) AS m FROM r [RANGE 3 SECONDS] GROUP BY k, ts",
    ):
        stats = measure(plan_query(grouped, cat), {"r": sample})
        assert stats.per_second_of("r", ("ts",) if "BY ts" in grouped else ("k", "ts")) == 1.0

"""Groups whose aggregate never changes (issue 20): idle smart plugs report one load value
for hours, so their AVG, MIN and MAX (and a SUM of zeros) never move, and a row aggregate
emits nothing for them. The estimator measures their share on the sample
(``optimizer.statistics``, static shares) and scales the aggregate's output rate by the
rest; without it, Q4's per-plug AVGs on 50,000 plugs were estimated at 19,000 output
tuples/s and emitted 3,351."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from engines.sources.smartplug import generate_to_file
from optimizer.estimate import aggregate_output, estimate
from optimizer.ir.cost import Estimate
from optimizer.ir.plan import Aggregate
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog
from optimizer.statistics import STATIC_MIN_GROUPS, aggregate_signature, measure

ROOT = Path(__file__).resolve().parents[4]
SMARTPLUG = ROOT / "queries" / "smartplug"
CATALOG = load_catalog(SMARTPLUG / "catalog.toml")


def _plan(select: str, where: str = "property = 1", window: str = "RANGE 5 MINUTES"):  # type: ignore[no-untyped-def]
    return plan_query(
        f"SELECT plug_id, {select} FROM readings [{window} SLIDE 1 SECOND] "
        f"WHERE {where} GROUP BY plug_id",
        CATALOG,
    )


def _table(groups: dict[int, list[float]], property_of_extra: int = 0) -> pa.Table:
    """Readings per plug (property 1), plus one row of another property per plug whose
    value differs (a filter below the aggregate must drop it)."""
    rows = [(p, 1, v) for p, vs in groups.items() for v in vs]
    rows += [(p, property_of_extra, 1e6 + p) for p in groups]
    plug, prop, value = zip(*rows, strict=True)
    n = len(rows)
    return pa.table(
        {
            "id": list(range(n)),
            "ts": [1_377_986_401 + i // 10 for i in range(n)],
            "value": list(value),
            "property": list(prop),
            "plug_id": list(plug),
            "household_id": [0] * n,
            "house_id": [0] * n,
        }
    )


def _share(plan, table: pa.Table) -> float | None:  # type: ignore[no-untyped-def]
    (agg,) = plan.ids_of("aggregate")
    shape = aggregate_signature(plan, agg)
    assert shape is not None
    return measure(plan, {"readings": table}).static.get(shape.key)


def test_constant_groups_are_static_for_avg_min_max_and_zero_sums() -> None:
    # 30 constant plugs (10 of them at 0 W), 10 varying ones, 5 seen once (not counted)
    groups = {p: [5.0, 5.0, 5.0] for p in range(20)}
    groups |= {p: [0.0, 0.0] for p in range(20, 30)}
    groups |= {p: [1.0, 2.0, 3.0] for p in range(30, 40)}
    groups |= {p: [7.0] for p in range(40, 45)}
    t = _table(groups)
    assert _share(_plan("AVG(value) AS a"), t) == pytest.approx(30 / 40)
    assert _share(_plan("MIN(value) AS a, MAX(value) AS b"), t) == pytest.approx(30 / 40)
    # a SUM of a constant moves with the group's size, unless the constant is 0
    assert _share(_plan("SUM(value) AS s"), t) == pytest.approx(10 / 40)
    assert _share(_plan("AVG(value) AS a, SUM(value) AS s"), t) == pytest.approx(10 / 40)
    # a count moves whenever its group's size does; COUNT(DISTINCT) of a constant does not
    assert _share(_plan("COUNT(*) AS n"), t) == 0.0
    assert _share(_plan("COUNT(DISTINCT value) AS n"), t) == pytest.approx(30 / 40)


def test_the_filters_below_the_aggregate_apply_and_too_few_groups_give_nothing() -> None:
    groups = {p: [5.0, 5.0] for p in range(STATIC_MIN_GROUPS)}
    t = _table(groups)
    # the other property's rows (different values) are filtered out: all static
    assert _share(_plan("AVG(value) AS a"), t) == 1.0
    # without the filter every plug sees two values
    assert _share(_plan("AVG(value) AS a", where="plug_id >= 0"), t) == 0.0
    few = _table({p: [5.0, 5.0] for p in range(STATIC_MIN_GROUPS - 1)})
    assert _share(_plan("AVG(value) AS a"), few) is None


def test_a_computed_argument_or_key_is_not_measured() -> None:
    plan = plan_query(
        "SELECT plug_id, AVG(value * 2) AS a FROM readings [RANGE 1 MINUTE SLIDE 1 SECOND] "
        "GROUP BY plug_id",
        CATALOG,
    )
    (agg,) = plan.ids_of("aggregate")
    assert aggregate_signature(plan, agg) is None


def test_the_output_rate_counts_only_groups_that_can_change() -> None:
    plan = _plan("AVG(value) AS a")
    (agg,) = plan.ids_of("aggregate")
    op = plan.op(agg)
    assert isinstance(op, Aggregate)
    lam, card, groups = Estimate.exact(5000.0), Estimate.exact(1.5e6), Estimate.exact(800.0)
    base = aggregate_output(op, lam, card, groups, 1.0, touched=600.0)
    third = aggregate_output(op, lam, card, groups, 1.0, touched=600.0, static=2 / 3)
    assert base.value == pytest.approx(1200.0)
    assert third.value == pytest.approx(400.0)


def test_the_share_on_generated_plugs_is_the_share_duckdb_counts(tmp_path: Path) -> None:
    """On the project's generator (800 plugs, 40 event-seconds), the measured share equals
    what DuckDB counts over the same rows: plugs whose load readings are all one value,
    among plugs with at least two of them."""
    path = tmp_path / "plugs.parquet"
    generate_to_file(path, 40, rate=10_000.0, plugs=800, load_share=0.5)
    q4 = (SMARTPLUG / "q4.sql").read_text()
    plan = plan_query(q4, CATALOG)
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    stats = measure(plan, {"readings": table.slice(0, 20_000)}, wide={"readings": table})
    con = duckdb.connect()
    con.register("r", table)
    static, seen = con.sql(
        "SELECT count(*) FILTER (WHERE lo = hi), count(*) FROM ("
        "  SELECT min(value) AS lo, max(value) AS hi FROM r WHERE property = 1"
        "  GROUP BY house_id, household_id, plug_id HAVING count(*) >= 2)"
    ).fetchall()[0]
    assert seen >= STATIC_MIN_GROUPS
    shares = set(stats.static.values())
    assert len(shares) == 1  # Q4's two AVGs have the same filter, key and call
    assert shares.pop() == pytest.approx(static / seen)
    assert 0.3 < static / seen < 0.95  # idle plugs are common, not all

    # the estimator uses it: each AVG's output rate falls by the static share
    est = estimate(plan, CATALOG, rates=10_000.0, sample=stats)
    bare = estimate(plan, CATALOG, rates=10_000.0, sample=replace(stats, static={}))
    for agg in plan.ids_of("aggregate"):
        ratio = est[agg].lambda_out.value / bare[agg].lambda_out.value
        assert ratio == pytest.approx(1 - static / seen, rel=1e-9)

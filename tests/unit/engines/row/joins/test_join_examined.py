"""The row join's residual tests: counted by the join, estimated by the optimizer, priced by
the analytical model and read back from run metrics (issue 20: Q1's join re-tests a plug's
bucket of window tuples each time its MAX changes, which the model used to miss)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from cost_models.analytical import AnalyticalCostModel
from engines.row.base import Delta
from engines.row.compile import compile_key
from engines.row.joins.tree import HashJoinOp
from hycq.observations import failed_tests
from optimizer.estimate import estimate
from optimizer.ir.catalog import Catalog
from optimizer.ir.plan import Join
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[5]
SMARTPLUG = ROOT / "queries" / "smartplug"
UNSEEN = ROOT / "queries" / "unseen"
JOINS = ROOT / "queries" / "joins"


def _join(plan_dir: Path, sql: str, rate: float = 1000.0) -> tuple[Join, object]:
    cat: Catalog = load_catalog(plan_dir / "catalog.toml")
    plan = plan_query(sql, cat)
    est = estimate(plan, cat, rates=rate)
    (jid,) = plan.ids_of("join")
    op = plan.op(jid)
    assert isinstance(op, Join)
    return op, est[jid]


def test_a_residual_is_tested_on_every_pair_the_equi_keys_match() -> None:
    """Q1: the equi-keys match ``f_equi * |w|`` stored tuples per probe, the threshold is
    tested on each; ``examined`` is Eq. 6.2 with the equi-keys' selectivity alone."""
    _op, e = _join(SMARTPLUG, (SMARTPLUG / "q1.sql").read_text())
    (l_in, r_in), (l_w, r_w) = e.lambda_in, e.input_cardinality
    assert e.examined is not None and e.selectivity is not None
    f_equi = e.examined / (l_in.value * r_w.value + r_in.value * l_w.value)
    assert f_equi > e.selectivity.value  # the threshold passes only some of them
    assert e.examined > e.lambda_out.value
    assert math.isclose(e.lambda_out.value / e.examined, e.selectivity.value / f_equi)


def test_an_equi_join_tests_nothing_and_a_theta_join_tests_the_whole_other_side() -> None:
    _op, e = _join(JOINS, (JOINS / "join_2.sql").read_text())
    assert e.examined is None  # every matched pair is output
    _op, t = _join(UNSEEN, (UNSEEN / "u3_houses_above_average.sql").read_text())
    (l_in, r_in), (l_w, r_w) = t.lambda_in, t.input_cardinality
    assert t.examined is not None
    assert math.isclose(t.examined, l_in.value * r_w.value + r_in.value * l_w.value)


def test_failed_tests_cost_the_row_join_on_top_of_its_output() -> None:
    _op, e = _join(SMARTPLUG, (SMARTPLUG / "q1.sql").read_text())
    m = AnalyticalCostModel()
    without = AnalyticalCostModel(join_examine=0.0)
    lam = e.total_in.value
    assert e.examined is not None
    extra = m.join_examine * (e.examined - e.lambda_out.value) / lam
    op, _ = _join(SMARTPLUG, (SMARTPLUG / "q1.sql").read_text())
    got = m.unit_cost(op, "row", e) - without.unit_cost(op, "row", e)
    assert got == pytest.approx(extra) and got > 0


def test_the_hash_join_counts_the_stored_tuples_its_residual_tests() -> None:
    """Keyed on column 0, residual ``left.v > right.v``: a probe tests its whole bucket."""
    op = HashJoinOp("j", compile_key([0]), compile_key([0]), lambda r: r[1] > r[3], (False, False))
    op.step(0, [Delta([(1, 5), (1, 7), (1, 9), (2, 1)], []), Delta()])
    assert op.examined == 0  # nothing stored on the right yet
    out = op.step(1, [Delta(), Delta([(1, 6), (3, 0)], [])])
    assert sorted(out.ins) == [(1, 7, 1, 6), (1, 9, 1, 6)]
    assert op.examined == 3  # key 1's bucket; key 3 has none
    metrics = {"tuples_out": 2, "join": op.join_metrics()}
    assert failed_tests(metrics) == 1
    plain = HashJoinOp("p", compile_key([0]), compile_key([0]), None, (False, False))
    plain.step(0, [Delta([(1, 5)], []), Delta([(1, 6)], [])])
    assert plain.examined == 0
    assert failed_tests({"tuples_out": 1, "join": plain.join_metrics()}) == 0

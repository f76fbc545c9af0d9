"""Placements: validation against engine capabilities, groups (migration candidates)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from hycq.api import LoadedQuery, load_query, resolve_placement
from optimizer.ir.errors import OptionError, PlanError
from optimizer.ir.placement import groups, uniform_placement
from optimizer.phase_two import allowed_engines
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text
from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[4]
Q1 = ROOT / "queries" / "smartplug" / "q1.sql"
Q3 = ROOT / "queries" / "smartplug" / "q3.sql"


def test_column_placement_puts_every_r2r_operator_in_one_group() -> None:
    q = load_query(Q1)
    p = resolve_placement(q.plan, "column")
    (g,) = groups(q.plan, p)
    assert g.engine == "duckdb" and g.top == "aggregate2"
    assert set(g.operators) == {"select1", "select2", "aggregate1", "join1", "aggregate2"}
    assert p["window1"] == p["source1"] == p["rstream1"] == p["sink1"] == "row"


def test_mixed_placement_splits_groups_at_row_operators() -> None:
    q = load_query(Q3)
    p = resolve_placement(
        q.plan, {"aggregate1": "duckdb", "aggregate2": "spark", "select1": "duckdb"}
    )
    gs = groups(q.plan, p)
    assert [(g.engine, g.operators) for g in gs] == [
        ("duckdb", ("select1", "aggregate1")),
        ("spark", ("aggregate2",)),
    ]


@pytest.mark.parametrize(
    ("placement", "message"),
    [
        ({"window1": "duckdb"}, "duckdb cannot run window1 (window)"),
        ({"rstream1": "spark"}, "spark cannot run rstream1"),
        ({"sink1": "duckdb"}, "duckdb cannot run sink1"),
        ({"joinn1": "duckdb"}, "unknown operator 'joinn1'"),
        ({"join1": "postgres"}, "unknown engine 'postgres'"),
    ],
)
def test_invalid_placements_are_rejected_before_running(placement: dict, message: str) -> None:
    q = load_query(Q1)
    with pytest.raises(PlanError, match=re.escape(message)):
        resolve_placement(q.plan, placement)


def test_unknown_column_engine() -> None:
    q = load_query(Q1)
    with pytest.raises(OptionError, match="unknown columnar engine 'hana'") as err:
        resolve_placement(q.plan, "column", "hana")
    assert err.value.hint == "registered columnar engines: duckdb, spark, datafusion"
    with pytest.raises(OptionError, match="not a columnar engine: 'row'"):
        resolve_placement(q.plan, "column", "row")


def test_capabilities_keep_unsupported_casts_off_an_engine() -> None:
    """DataFusion declares CAST(VARCHAR AS BIGINT) unsupported: a placement file putting it
    there is refused, and the optimizer never places the operator there."""
    from hycq.planning import OptimizerOptions, optimize

    text = "SELECT CAST(label AS BIGINT) AS n FROM events [RANGE 10 SECONDS] WHERE v > 0"
    cat = parse_catalog_text(
        '[streams.events]\ntimestamp = "ts"\ntime_unit = "s"\nrate = 1000\n'
        '[streams.events.columns]\nts = "BIGINT"\nlabel = "VARCHAR"\nv = "DOUBLE"\n'
    )
    plan = plan_query(text, cat)
    (project,) = plan.ids_of("project")
    with pytest.raises(PlanError, match="datafusion cannot evaluate CAST from VARCHAR to BIGINT"):
        resolve_placement(plan, {project: "datafusion"})
    assert resolve_placement(plan, {project: "duckdb"})[project] == "duckdb"
    q = LoadedQuery(text, "<test>", cat, plan, 0.0)
    opts = OptimizerOptions(rate=1e6, engines=("row", "datafusion"), sample=False)
    opt = optimize(q, opts)
    assert opt.placement[project] == "row"
    engines, caps = opts.engines, opt.capabilities
    (select,) = plan.ids_of("select")
    assert allowed_engines(opt.plan, project, engines, caps) == ["row"]
    assert allowed_engines(opt.plan, select, engines, caps) == ["row", "datafusion"]


def test_uniform_placement_keeps_gateway_on_row() -> None:
    q = load_query(Q1)
    p = uniform_placement(q.plan, "spark")
    assert {q.plan.op(i).kind for i, e in p.items() if e == "row"} == {
        "source",
        "window",
        "rstream",
        "sink",
    }


def _hycq(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def test_cli_placement_file(tmp_path: Path) -> None:
    good = tmp_path / "p.json"
    good.write_text(json.dumps({"aggregate1": "duckdb", "join1": "duckdb", "aggregate2": "duckdb"}))
    m = tmp_path / "m.json"
    r = _hycq("run", str(Q1), "--placement", str(good), "--duration", "10", "--metrics", str(m))
    assert r.returncode == 0, r.stderr
    metrics = json.loads(m.read_text())
    assert metrics["groups"] == [
        {"engine": "duckdb", "operators": ["aggregate1", "join1", "aggregate2"]}
    ]
    assert metrics["placement"]["select1"] == "row"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"window2": "duckdb"}))
    r = _hycq("run", str(Q1), "--placement", str(bad), "--duration", "10")
    assert r.returncode == 2 and r.stderr.startswith("error: duckdb cannot run window2")
    assert "Traceback" not in r.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    r = _hycq("run", str(Q1), "--placement", str(broken))
    assert r.returncode == 2 and "invalid JSON" in r.stderr

"""``hycq explain`` and ``run --placement auto`` with the cost-based optimizer.

Real subprocesses of the command line. The tests pin ``--cost-model analytical`` where a
decision is asserted, so they do not depend on a calibration profile.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.e2e.test_cli_errors import QUERIES, assert_user_error, hycq

SMARTPLUG = sorted((QUERIES / "smartplug").glob("q*.sql"))
JOINS = QUERIES / "joins"


def explain_json(path: Path, *args: str) -> dict:
    r = hycq("explain", path, "--json", "--cost-model", "analytical", *args)
    assert r.returncode == 0, r.stderr
    info: dict = json.loads(r.stdout)
    return info


@pytest.mark.parametrize("path", SMARTPLUG, ids=lambda p: p.stem)
def test_explain_json_carries_the_optimizer_result(path: Path) -> None:
    info = explain_json(path, "--rate", "40000")
    assert info["cost_model"] == "analytical" and info["rate"] == 40000
    assert isinstance(info["feasible"], bool)
    assert info["feasible"] == (info["cost"]["bottleneck"] <= 1.0)
    assert 0 < info["cost"]["bottleneck"] <= info["cost"]["utilization"]
    assert info["plans_examined"]["phase_one"] >= 1 and info["plans_examined"]["phase_two"] >= 1
    ms = info["optimization_ms"]
    assert ms["total"] == pytest.approx(ms["phase_one"] + ms["phase_two"], abs=1e-2)
    by_id = {op["id"]: op for op in info["operators"]}
    for op in info["operators"]:
        assert op["kind"] == "source" or isinstance(op["lambda_out"], float), op
        assert isinstance(op["u"], float) and op["u"] >= 0, op
    # Groups are exactly the connected columnar operators, and their members share one u.
    placed = {i for i, op in by_id.items() if op["engine"] != "row"}
    assert placed == {i for g in info["groups"] for i in g["operators"]}
    for g in info["groups"]:
        assert len({by_id[i]["u"] for i in g["operators"]}) == 1
    assert any(op["bottleneck"] for op in info["operators"])
    assert info["statistics"]["source"].startswith("sample of readings")


@pytest.mark.parametrize("path", [*SMARTPLUG, JOINS / "join_2.sql"], ids=lambda p: p.stem)
def test_exhaustive_search_finds_the_pruned_optimum(path: Path) -> None:
    pruned = explain_json(path, "--rate", "40000")
    full = explain_json(path, "--rate", "40000", "--exhaustive")
    assert full["search"]["exhaustive"] and not pruned["search"]["exhaustive"]
    # the same optimum (costs summed in another order may differ in the last bits)
    assert full["cost"] == pytest.approx(pruned["cost"], rel=1e-12)
    assert full["plans_examined"]["phase_two"] >= pruned["plans_examined"]["phase_two"]


def test_exhaustive_refuses_a_search_that_would_not_finish() -> None:
    r = hycq("explain", JOINS / "join_8.sql", "--exhaustive", "--cost-model", "analytical")
    assert_user_error(r, "--exhaustive would cost", "limit")


@pytest.mark.parametrize("path", SMARTPLUG, ids=lambda p: p.stem)
def test_no_feasibility_minimizes_total_utilization(path: Path) -> None:
    ranked = explain_json(path, "--rate", "40000")
    blind = explain_json(path, "--rate", "40000", "--no-feasibility")
    assert blind["feasibility_check"] is False
    assert blind["cost"]["utilization"] <= ranked["cost"]["utilization"] + 1e-12


def test_text_explain_tags_engines_and_prints_the_cost() -> None:
    r = hycq(
        "explain", QUERIES / "smartplug" / "q2.sql", "--rate", "40000", "--cost-model", "analytical"
    )
    assert r.returncode == 0, r.stderr
    assert "[duckdb u=" in r.stdout and "[row u=" in r.stdout and "bottleneck" in r.stdout
    assert "cost: <C_b=" in r.stdout and "feasible" in r.stdout
    assert "plans examined: phase one" in r.stdout and "group g0 on duckdb" in r.stdout


def test_cost_model_from_a_toml_file_changes_the_plan(tmp_path: Path) -> None:
    q1 = QUERIES / "smartplug" / "q2.sql"
    toml = tmp_path / "slow_duckdb.toml"
    toml.write_text(
        '[cost_model]\nname = "slow-duckdb"\nbase = "analytical"\n'
        "[cost_model.parameters.engines.duckdb]\nfixed = 5.0\n"
    )
    info = explain_json(q1, "--rate", "2000")
    assert any(op["engine"] == "duckdb" for op in info["operators"])
    r = hycq("explain", q1, "--json", "--rate", "2000", "--cost-model", str(toml))
    assert r.returncode == 0, r.stderr
    slow = json.loads(r.stdout)
    assert slow["cost_model"] == "slow-duckdb"
    assert {op["engine"] for op in slow["operators"]} == {"row"}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "[cost_model]\nbase = 'analytical'\n[cost_model.parameters]\nselekt = 1e-7\n",
            "did you mean 'select'",
        ),
        (
            "[cost_model]\nbase = 'analytical'\n[cost_model.parameters]\nselect = -1\n",
            "non-negative",
        ),
        ("[cost_model]\nbase = 'nosuch'\n", "unknown cost model 'nosuch'"),
        ("[cost_model\n", "invalid TOML"),
        ("[model]\n", "no [cost_model] table"),
        ("[cost_model]\nbsae = 'analytical'\n", "did you mean 'base'"),
    ],
)
def test_bad_cost_model_files_are_user_errors(tmp_path: Path, text: str, needle: str) -> None:
    toml = tmp_path / "m.toml"
    toml.write_text(text)
    assert_user_error(
        hycq("explain", QUERIES / "smartplug" / "q1.sql", "--cost-model", toml), needle
    )


def test_unknown_cost_model_names_the_choices() -> None:
    r = hycq("explain", QUERIES / "smartplug" / "q1.sql", "--cost-model", "analytic")
    assert_user_error(r, "unknown cost model 'analytic'", "did you mean 'analytical'")


def test_run_auto_runs_the_explained_plan(tmp_path: Path) -> None:
    q1 = QUERIES / "smartplug" / "q2.sql"  # a hybrid plan at 40k
    info = explain_json(q1, "--rate", "40000")
    metrics = tmp_path / "m.json"
    r = hycq(
        "run",
        q1,
        "--rate",
        "40000",
        "--duration",
        "4",
        "--cost-model",
        "analytical",
        "--metrics",
        metrics,
    )
    assert r.returncode == 0, r.stderr
    m = json.loads(metrics.read_text())
    assert m["placement"] == {op["id"]: op["engine"] for op in info["operators"]}
    assert "duckdb" in m["placement"].values()
    assert m["predicted"] == {
        "bottleneck": info["cost"]["bottleneck"],
        "utilization": info["cost"]["utilization"],
        "feasible": info["feasible"],
    }
    assert [g["operators"] for g in m["groups"]] == [g["operators"] for g in info["groups"]]


def test_max_feasible_rate_is_where_the_plan_stops_keeping_up() -> None:
    from hycq.api import load_query, max_feasible_rate
    from hycq.planning import OptimizerOptions, optimize

    q = load_query(QUERIES / "smartplug" / "q1.sql")
    opt = optimize(q, OptimizerOptions(rate=2000, cost_model="analytical"))
    limit = max_feasible_rate(opt)
    assert limit is not None and limit > 2000
    for factor, feasible in ((0.95, True), (1.05, False)):
        o = optimize(q, OptimizerOptions(rate=limit * factor, cost_model="analytical"))
        assert o.cost_of(opt.placement).feasible is feasible


def test_explain_measures_statistics_on_a_given_data_file(tmp_path: Path) -> None:
    """--data STREAM=FILE: the statistics come from that file (here 20,000 plugs, so the
    per-plug aggregate has 20,000 groups, not the catalog's 1,677); a missing file exits 2."""
    from engines.sources.smartplug import generate_to_file

    data = tmp_path / "many.parquet"
    generate_to_file(data, 5, rate=40000, plugs=20_000)
    q2 = QUERIES / "smartplug" / "q2.sql"
    r = hycq("explain", q2, "--rate", "40000", "--json", "--data", f"readings={data}")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert str(data) in info["statistics"]["source"]
    card = {o["id"]: o["cardinality"] for o in info["operators"]}
    default = json.loads(hycq("explain", q2, "--rate", "40000", "--json").stdout)
    base = {o["id"]: o["cardinality"] for o in default["operators"]}
    assert card["aggregate1"] == 20_000 and base["aggregate1"] == 1677
    assert_user_error(hycq("explain", q2, "--data", f"readings={tmp_path / 'nope.csv'}"), "nope")


@pytest.mark.parametrize("row_core", ["shared", "per-operator"])
@pytest.mark.parametrize("path", SMARTPLUG, ids=lambda p: p.stem)
def test_bottleneck_marks_only_the_costliest_unit(
    path: Path, row_core: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bottleneck`` marks the operators of the unit with the largest u (a group's members
    together, ties all), not every operator of the row engine; without a shared row core
    that u is C_b itself. The text output tags the same operators and says what they are."""
    from hycq.cli import main

    args = ["explain", str(path), "--cost-model", "analytical", "--row-core", row_core]
    assert main([*args, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    ops = [op for op in info["operators"] if op["u"] is not None]
    peak = max(op["u"] for op in ops)
    marked = {op["id"] for op in info["operators"] if op["bottleneck"]}
    assert marked == {op["id"] for op in ops if op["u"] == peak}, (peak, ops)
    if row_core == "per-operator":
        assert peak == pytest.approx(info["cost"]["bottleneck"], rel=1e-9)
    assert main(args) == 0
    text = capsys.readouterr().out
    tagged = {
        re.match(r"^[\s│├└─]*(\S+)", line).group(1)  # type: ignore[union-attr]
        for line in text.splitlines()
        if "bottleneck]" in line
    }
    assert tagged == marked
    assert sum(line.startswith("bottleneck: ") for line in text.splitlines()) == 1

"""The placement report's content, without a browser (the browser test is tests/e2e).

The report is built in-process from ``planning.optimize``: every operator id and every
group's generated SQL appear, the cost vector and feasibility are the optimizer's, each
alternative carries the Definition 6.1 condition it lost on, nothing would be fetched from
the network, hostile identifiers are escaped, and a bench file adds the measured section.
"""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from engines.sqlgen import group_sql
from hycq import api
from hycq.planning import Optimized, OptimizerOptions, optimize
from hycq.reporting import Report, build_report, render
from hycq.reporting.compare import compare
from hycq.reporting.measured import run_units
from optimizer.ir.cost import Cost
from optimizer.ir.errors import DataError

ROOT = Path(__file__).resolve().parents[4]
Q2 = ROOT / "queries" / "smartplug" / "q2.sql"
CATALOG = ROOT / "queries" / "smartplug" / "catalog.toml"
RATE = 40_000.0


def _optimize(path: Path, rate: float = RATE) -> Optimized:
    q = api.load_query(path)
    return optimize(q, OptimizerOptions(rate=rate, cost_model="analytical"))


@pytest.fixture(scope="module")
def q2() -> Optimized:
    return _optimize(Q2)


@pytest.fixture(scope="module")
def q2_report(q2: Optimized) -> Report:
    return build_report(q2)


@pytest.fixture(scope="module")
def q2_html(q2_report: Report) -> str:
    return render(q2_report)


class _Page(HTMLParser):
    """Tags, attributes and visible text of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("style", "title"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "title") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)


def parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    p.close()
    return p


# -- content ------------------------------------------------------------------------------


def test_every_operator_is_drawn_and_listed(q2: Optimized, q2_html: str) -> None:
    page = parse(q2_html)
    ids = {attrs.get("id") for _, attrs in page.tags}
    text = " ".join(page.text)
    for op_id in q2.plan.topological():
        assert f"op-{op_id}" in ids, op_id  # the SVG node
        assert op_id in text, op_id


def test_every_group_shows_its_generated_sql(
    q2: Optimized, q2_report: Report, q2_html: str
) -> None:
    assert q2_report.groups, "Q2 at 40k should place something on DuckDB"
    for k, g in enumerate(q2.groups):
        sql = group_sql(q2.plan, g.operators, g.engine, f"g{k}_").sql
        view = q2_report.groups[k]
        assert (view.operators, view.engine, view.sql) == (list(g.operators), g.engine, sql)
        assert f'id="sql-g{k}"' in q2_html and f'href="#sql-g{k}"' in q2_html
        assert html.escape(sql, quote=True) in q2_html


def test_cost_vector_feasibility_and_limit_are_the_optimizers(
    q2: Optimized, q2_report: Report, q2_html: str
) -> None:
    assert q2_report.cost == q2.cost
    assert q2_report.rate == RATE and "rate 40,000 tuples/s" in q2_html
    assert q2_report.max_rate == api.max_feasible_rate(q2)
    assert f"C_b = {q2.cost.bottleneck:.4g}, C_u = {q2.cost.utilization:.4g}" in q2_html
    assert ("keeps up" if q2.cost.feasible else "does not keep up") in q2_html
    assert f"{q2_report.max_rate:,.0f} tuples/s" in q2_html


def test_the_text_plan_is_explains(q2_report: Report, capsys: pytest.CaptureFixture[str]) -> None:
    from hycq.cli import main

    args = ["explain", str(Q2), "--rate", str(RATE), "--cost-model", "analytical"]
    assert main(args) == 0
    assert q2_report.plan_text in capsys.readouterr().out
    assert html.escape(q2_report.plan_text, quote=True) in render(q2_report)


def _expected_condition(shown: Cost, other: Cost) -> str:
    """Definition 6.1 restated independently of hycq.reporting.compare."""
    if (shown.bottleneck <= 1) != (other.bottleneck <= 1):
        return "1°"
    if shown.bottleneck <= 1:
        return "2°" if shown.utilization != other.utilization else "tie-break"
    return "3°" if shown.bottleneck != other.bottleneck else "tie-break"


def test_alternatives_say_which_condition_they_lost_on(q2: Optimized, q2_report: Report) -> None:
    alts = q2_report.alternatives
    names = [a.name for a in alts.items]
    assert names[:2] == ["pure row", "pure duckdb"]
    assert any(n.startswith("next best") for n in names)
    assert alts.space == 2 ** len(q2.plan.r2r_ids()) and alts.rank == 1
    for a in alts.items:
        assert a.cost == q2.cost_of(a.placement)
        assert a.max_rate == api.max_feasible_rate(q2, a.placement)
        if a.placement == q2.placement:  # a pure plan the optimizer chose is no rival
            assert a.verdict.outcome == "same", (a.name, a.verdict)
            continue
        assert a.verdict.outcome in ("loses", "ties"), (a.name, a.verdict)
        assert a.verdict.condition == _expected_condition(q2.cost, a.cost), (a.name, a.verdict)
    page = render(q2_report)
    for a in alts.items:
        assert html.escape(a.verdict.reason, quote=True) in page


def test_a_plan_that_cannot_keep_up_loses_on_condition_one() -> None:
    opt = _optimize(Q2)
    report = build_report(opt)
    row = next(a for a in report.alternatives.items if a.name == "pure row")
    # The premise (the analytical model at 40k tuples/s): a change of the model's answer
    # fails here, visibly, rather than skipping the check below.
    assert opt.cost.feasible and not row.cost.feasible, (opt.cost, row.cost)
    assert row.verdict.condition == "1°" and "infeasible" in row.verdict.reason


@pytest.mark.parametrize(
    ("shown", "other", "outcome", "condition", "words"),
    [
        (Cost.unit(0.5), Cost.unit(2.0), "loses", "1°", "infeasible"),
        (Cost.unit(2.0), Cost.unit(0.5), "wins", "1°", "keeps up"),
        (Cost(0.6, 0.5, 0), Cost(0.8, 0.5, 0), "loses", "2°", "higher total utilization"),
        (Cost(3.0, 2.0, 0), Cost(2.5, 2.5, 0), "loses", "3°", "higher bottleneck"),
        (Cost(0.6, 0.5, 0), Cost(0.6, 0.55, 0), "loses", "tie-break", "equal C_u"),
    ],
)
def test_definition_6_1_conditions(
    shown: Cost, other: Cost, outcome: str, condition: str, words: str
) -> None:
    v = compare(shown, 1, other, 1)
    assert (v.outcome, v.condition) == (outcome, condition)
    assert words in v.reason


def test_equal_costs_tie_break_on_operators_off_the_row_engine() -> None:
    c = Cost.unit(0.3)
    assert compare(c, 1, c, 2).outcome == "loses"
    assert compare(c, 2, c, 1).outcome == "wins"
    assert compare(c, 1, c, 1).outcome == "ties"
    blind = compare(Cost.unit(0.5), 0, Cost.unit(3.0), 0, utilization_only=True)
    assert (blind.outcome, blind.condition) == ("loses", "C_u only")


def test_the_sweep_finds_where_the_placement_switches(q2: Optimized, q2_report: Report) -> None:
    sweep = q2_report.sweep
    assert sweep is not None
    at_rate = next(p for p in sweep.points if abs(p.rate - RATE) < 1e-6 * RATE)
    assert at_rate.placement == {k: v for k, v in q2.placement.items() if v != "row"}
    for s in sweep.switches:
        assert s.before != s.after
        assert sweep.points[0].rate < s.rate < sweep.points[-1].rate


def test_the_trace_shows_both_phases(q2: Optimized, q2_html: str) -> None:
    assert f"{q2.phase_one.plans_examined} plans examined" in q2_html
    assert f"{q2.phase_two.plans_examined} complete plans costed" in q2_html
    assert "The Phase-One plan" in q2_html


# -- offline and safe ---------------------------------------------------------------------

FETCHING_TAGS = {"script", "link", "img", "iframe", "object", "embed", "base", "source", "video"}


def assert_offline(page: str) -> None:
    """Nothing the browser would fetch or run: no such tags, only in-page references."""
    parsed = parse(page)
    for tag, attrs in parsed.tags:
        assert tag not in FETCHING_TAGS, tag
        for name in ("src", "href", "xlink:href", "action", "srcset"):
            value = attrs.get(name)
            assert value is None or value.startswith("#"), (tag, name, value)
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)  # no event handlers
            if value and "url(" in value:
                assert "url(#" in value, (tag, name, value)
    assert "@import" not in page and "url(http" not in page
    csp = [a for t, a in parsed.tags if t == "meta" and a.get("http-equiv")]
    assert csp and "default-src 'none'" in (csp[0].get("content") or "")


def test_the_report_fetches_nothing(q2_html: str) -> None:
    assert_offline(q2_html)


HOSTILE = "</pre><script>alert('x')</script><img src=http://evil/x onerror=alert(1)>"


def test_hostile_identifiers_are_escaped(tmp_path: Path) -> None:
    (tmp_path / "catalog.toml").write_text(CATALOG.read_text(encoding="utf-8"), encoding="utf-8")
    query = tmp_path / "evil&<b>.sql"
    query.write_text(
        f'SELECT plug_id AS "{HOSTILE}", AVG(value) AS "a&b<c>"\n'
        "FROM readings [RANGE 1 MINUTE SLIDE 1 SECOND]\n"
        "WHERE property = 1\nGROUP BY plug_id\n",
        encoding="utf-8",
    )
    opt = optimize(api.load_query(query), OptimizerOptions(cost_model="analytical"))
    page = render(build_report(opt))
    assert_offline(page)
    assert "<script" not in page and "<img" not in page and "<b>.sql" not in page
    text = "".join(parse(page).text)
    assert HOSTILE in text  # shown literally (query text, output columns)
    assert "a&b<c>" in text and "evil&<b>.sql" in text


# -- bench and run ------------------------------------------------------------------------


def _record(query: str, rate: float, plan: str, placement: dict[str, str], cb: float) -> Any:
    return {
        "query": query,
        "rate": rate,
        "plan": plan,
        "placement": placement,
        "predicted": {"bottleneck": cb, "utilization": cb * 1.1, "feasible": cb <= 1},
        "measured": {"throughput": 3.0 * rate / cb / 4, "kept_up": True},
        "warm_start": {"complete": True},
        "cost_model": "analytical",
    }


def test_bench_file_adds_measured_against_predicted(q2: Optimized, tmp_path: Path) -> None:
    low = {"aggregate1": "duckdb", "join1": "duckdb", "aggregate2": "duckdb"}
    high = {"join1": "duckdb", "aggregate2": "duckdb"}
    records = [
        _record(str(Q2), 1000.0, "auto", low, 0.02),
        _record(str(Q2), 10000.0, "auto", high, 0.08),
        _record(str(Q2), 40000.0, "auto", high, 0.3),
        _record(str(Q2), 1000.0, "row", {}, 0.06),
        _record(str(Q2), 40000.0, "row", {}, 2.3),
        _record("queries/smartplug/q5.sql", 1000.0, "auto", {}, 0.01),
    ]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"records": records}), encoding="utf-8")
    report = build_report(q2, bench=path)
    assert report.bench is not None
    assert len(report.bench.records) == 5  # Q5's record is not this query's
    (switch,) = report.bench.switches
    assert (switch.rate_before, switch.rate_after) == (1000.0, 10000.0)
    assert (switch.before, switch.after) == (low, high)
    page = render(report)
    assert_offline(page)
    assert 'id="bench"' in page and 'class="chart"' in page
    assert "between 1,000 and 10,000 tuples/s" in page
    assert f"{1000.0 / 0.02:,.0f}" in page  # predicted throughput = rate / C_b
    assert f"{3.0 * 40000 / 2.3 / 4:,.0f}" in page  # measured


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "bench file not found"),
        ("[{", "invalid JSON"),
        ('{"rows": []}', "must hold a list of records"),
        ("[1]", "record 0: not an object"),
        ('[{"query": "q2.sql", "plan": "auto", "predicted": {}, "measured": {}}]', "'rate'"),
        (
            '[{"query": "other.sql", "rate": 5, "plan": "auto", "measured": {"throughput": 1},'
            ' "predicted": {"bottleneck": 1, "utilization": 1}}]',
            "no records for",
        ),
    ],
)
def test_bad_bench_files_are_user_errors(
    q2: Optimized, tmp_path: Path, content: str | None, needle: str
) -> None:
    path = tmp_path / "bench.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=needle) as err:
        build_report(q2, bench=path)
    assert err.value.exit_code == 2


def test_run_metrics_are_set_against_the_prediction(q2: Optimized) -> None:
    rows = q2.operator_rows()
    (g,) = q2.groups
    metrics = {
        "throughput": 12345.0,
        "kept_up": True,
        "rate": RATE,
        "placement": q2.placement,
        "operators": {
            "select1": {"engine": "row", "busy_s": 0.5, "u": 0.05},
            f"mig[{g.top}]": {
                "engine": g.engine,
                "operators": list(g.operators),
                "busy_s": 1.0,
                "u": 0.1,
            },
        },
    }
    units = run_units(metrics, rows, [("g0", list(g.operators))], shared_core=True)
    by_name = {u.name: u for u in units}
    assert by_name["select1"].predicted_u == next(r["u"] for r in rows if r["id"] == "select1")
    mig = by_name[f"g0 (mig[{g.top}])"]
    assert (mig.measured_u, mig.operators) == (0.1, list(g.operators))
    assert by_name["row-core (all row operators)"].measured_u == 0.05
    page = render(build_report(q2, run_metrics=metrics))
    assert 'id="run"' in page and "12,345" in page and "mig[" in page

"""``hycq run --metrics --report`` through the CLI: the per-second ``timeline`` adds up to the
run's totals, and after two scripted migrations (one by JISC, one by GPT) the report marks
both on the timeline and lists their records (the page parsed, and opened in headless
Chromium); the result stream is still the oracle's; ``--adapt`` decisions are listed.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from hycq.cli import main
from optimizer.sql.catalog import load_catalog
from tests.oracle import assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
J3 = ROOT / "queries" / "keyed" / "j3.sql"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("keyed")
    code = main(
        ["data", "generate", "--generator", "keyed", "--out", str(folder), "--seconds", "40",
         "--rate", "10", "--keys", "15", "--seed", "3"]
    )  # fmt: skip
    assert code == 0
    return folder


class _Page(HTMLParser):
    """Tags with attributes, and text by the innermost open tag (tooltips included)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def _assert_adds_up(m: dict[str, Any]) -> list[dict[str, Any]]:
    tl = m["timeline"]
    entries = tl["entries"]
    assert tl["resolution_s"] == 1 and len(entries) == 40
    assert sum(e["tuples"] for e in entries) == m["tuples_in"]
    assert sum(e["results"] for e in entries) == m["results"]
    assert sum(e["instants"] for e in entries) == m["instants"]
    assert sum(e["wall_s"] for e in entries) == pytest.approx(m["wall_s"], abs=1e-4)
    return list(entries)


def test_a_run_without_migrations_has_the_timeline(data: Path, tmp_path: Path) -> None:
    metrics, report = tmp_path / "m.json", tmp_path / "r.html"
    code = main(["run", str(J3), "--catalog", str(data / "catalog.toml"), "--placement", "row",
                 "--metrics", str(metrics), "--report", str(report)])  # fmt: skip
    assert code == 0
    m = json.loads(metrics.read_text())
    entries = _assert_adds_up(m)
    assert all("plan" not in e for e in entries)  # no driver, no plans
    assert all(e["tuples"] == 30 for e in entries)  # 3 streams x 10 tuples per second
    page = _parse(report)
    assert ("svg", {"class": "timeline"}) in [(t, {"class": a.get("class")}) for t, a in page.tags]
    assert not [a for t, a in page.tags if a.get("class") == "marker"]


@pytest.fixture(scope="module")
def migrated(data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A run with two scripted migrations (auto: JISC for the new join order of the all-row
    plan, then GPT for the move to DuckDB), its output, metrics and report."""
    tmp = tmp_path_factory.mktemp("migrated")
    # a hostile file name: it is the record's `source`, shown in the table and tooltips
    reorder = tmp / "<b>o&'r\".json"
    reorder.write_text(json.dumps({"join_order": ["t", "s", "r"], "placement": "row"}))
    column = tmp / "column.json"
    column.write_text(json.dumps({"placement": "column"}))
    out, metrics, report = tmp / "o.parquet", tmp / "m.json", tmp / "r.html"
    code = main(
        ["run", str(J3), "--catalog", str(data / "catalog.toml"), "--placement", "row",
         "--migrate", f"8={reorder}", "--migrate", f"12={column}", "--output", str(out),
         "--metrics", str(metrics), "--report", str(report)]
    )  # fmt: skip
    assert code == 0
    return {"reorder": reorder, "out": out, "metrics": metrics, "report": report}


def test_two_scripted_migrations_on_the_timeline_and_in_the_table(
    data: Path, migrated: dict[str, Path]
) -> None:
    reorder, out, metrics, report = (migrated[k] for k in ("reorder", "out", "metrics", "report"))
    tables = {n: pacsv.read_csv(data / f"{n}.csv") for n in "rst"}
    expected = oracle(J3.read_text(), load_catalog(data / "catalog.toml"), tables)
    assert_same_stream(pq.read_table(out), expected)

    m = json.loads(metrics.read_text())
    recs = m["migrations"]
    assert [r["strategy"] for r in recs] == ["jisc", "gpt"]  # auto: order on row; placement
    assert all(r["completed"] for r in recs)
    # JISC's new plan fires nothing at the switch: it continues after the old plan's instant
    assert recs[0]["switched_at"] == recs[0]["old_plan_dropped_at"] == recs[0]["at"] is not None
    assert m["plans"][1]["from_instant"] == recs[0]["switched_at"]
    entries = _assert_adds_up(m)
    plans = [e["plan"] for e in entries]
    assert plans == sorted(plans) and plans[0] == 0 and plans[-1] == 2 == len(m["plans"]) - 1

    raw = report.read_text(encoding="utf-8")
    assert "<b>o&" not in raw and "<script" not in raw
    page = _parse(report)
    text = "".join(page.text)
    markers = [a for t, a in page.tags if t == "g" and a.get("class") == "marker"]
    assert len(markers) == 2
    assert "M1 jisc" in text and "M2 gpt" in text
    assert "r,s,t -> t,s,r" in text  # M1's tooltip: from -> to join orders
    dropped = (recs[1]["old_plan_dropped_at"] - m["timeline"]["origin"]) / 1
    assert f"old plan dropped at {dropped:g} s" in text
    rows = {r[0]: r for r in page.rows if r and r[0] in ("M1", "M2")}
    assert set(rows) == {"M1", "M2"}
    m1, m2 = rows["M1"], rows["M2"]
    assert m1[2] == f"--migrate 8={reorder}" and m1[3].startswith("jisc")
    assert m1[4].startswith("r ⋈ s ⋈ t") and m1[5].startswith("t ⋈ s ⋈ r")
    assert m2[3].startswith("gpt") and "duckdb" in m2[5] and m2[4].endswith("all on row")
    assert float(m2[7].replace(",", "")) == pytest.approx(recs[1]["output_gap_ms"], rel=0.01)
    assert "Plans in charge" in text


def test_adapt_decisions_are_in_the_report(data: Path, tmp_path: Path) -> None:
    metrics, report = tmp_path / "m.json", tmp_path / "r.html"
    code = main(["run", str(J3), "--catalog", str(data / "catalog.toml"), "--placement", "row",
                 "--adapt", "--reoptimize-every", "5", "--metrics", str(metrics),
                 "--report", str(report)])  # fmt: skip
    assert code == 0
    m = json.loads(metrics.read_text())
    _assert_adds_up(m)
    page = _parse(report)
    text = "".join(page.text)
    assert "Adaptive decisions (--adapt)" in text
    decided = [r for r in page.rows if len(r) == 5 and r[2] in ("stay", "migrate")]
    assert sum(int(r[1]) for r in decided) == len(m["adapt_decisions"])  # folded, none lost
    assert any("warming up" in r[3] for r in decided)


def test_the_timeline_shows_in_chromium(migrated: dict[str, Path], tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from tests.e2e.test_report import _chrome, _chromium

    browser, driver = _chromium()
    chrome = _chrome(browser, driver)
    try:
        chrome.get(migrated["report"].as_uri())
        problems = [e for e in chrome.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert problems == [], problems
        assert chrome.execute_script("return document.scripts.length") == 0
        chart = chrome.find_element(By.CSS_SELECTOR, "svg.timeline")
        assert chart.is_displayed()
        markers = chrome.find_elements(By.CSS_SELECTOR, "svg.timeline g.marker")
        assert len(markers) == 2 and all(m.is_displayed() for m in markers)
        shot = tmp_path / "timeline.png"
        chart.screenshot(str(shot))
    finally:
        chrome.quit()
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000, len(data)

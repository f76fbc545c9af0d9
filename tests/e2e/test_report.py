"""``hycq report`` and ``hycq run --report`` end to end, and the report in a real browser.

The browser test opens the written file from disk in headless Chromium (Selenium driving
``chromedriver``) and checks what a reader would: the page loads with no failed or blocked
resource (browser log, Resource Timing entries), no script exists, every operator id that
``hycq explain --json`` lists is visible text, and a screenshot is taken (saved under the
test's tmp_path). Chromium is a system package: ``.ci/run`` installs it; elsewhere the test
skips and says how to install it.

Content (ids, SQL, alternatives, escaping, bench section) is unit-tested without a browser
in tests/unit/hycq/reporting/test_report_content.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
Q1 = ROOT / "queries" / "smartplug" / "q2.sql"  # hybrid at 40k: row is an alternative
INSTALL = (
    "install Chromium and its WebDriver (Debian: apt-get install -y chromium chromium-driver; "
    ".ci/run does this) and Selenium (pip install -e '.[dev]')"
)


def hycq(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hycq.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def assert_user_error(proc: subprocess.CompletedProcess[str], *parts: str) -> None:
    """Exit 2 with one ``error: ...`` message and no traceback (CONTRACT "Commands")."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert proc.stderr.count("error: ") == 1, proc.stderr
    for part in parts:
        assert part in proc.stderr, (part, proc.stderr)


def bench_file(tmp_path: Path) -> Path:
    """A small bench file in the CONTRACT's record format (measuring takes minutes)."""
    records = [
        {
            "query": str(Q1),
            "rate": rate,
            "plan": plan,
            "placement": placement,
            "predicted": {"bottleneck": cb, "utilization": cb, "feasible": cb <= 1},
            "measured": {"throughput": measured, "kept_up": measured >= rate},
        }
        for rate, plan, placement, cb, measured in [
            (1000.0, "auto", {"join1": "duckdb", "aggregate2": "duckdb"}, 0.02, 40_000.0),
            (40000.0, "auto", {"join1": "duckdb", "aggregate2": "duckdb"}, 0.3, 290_000.0),
            (1000.0, "row", {}, 0.06, 130_000.0),
            (40000.0, "row", {}, 2.3, 250_000.0),
        ]
    ]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


# -- the browser --------------------------------------------------------------------------


def _chromium() -> tuple[str, str]:
    """Paths of Chromium and chromedriver (and Selenium importable), or skip with how to
    get them."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip(f"Selenium is not installed: {INSTALL}")
    browser = next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p),
        None,
    )
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip(f"no headless Chromium here (browser {browser}, driver {driver}): {INSTALL}")
    return browser, driver


def _chrome(browser: str, driver: str) -> Any:
    """A headless Chromium WebDriver that records the browser log."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,2400",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


def test_report_opens_offline_in_chromium_with_every_operator_visible(tmp_path: Path) -> None:
    browser, driver = _chromium()
    out = tmp_path / "q1 report.html"  # a space: the file URL must be quoted properly
    r = hycq("report", Q1, "--rate", "40000", "--bench", bench_file(tmp_path), "--out", out)
    assert r.returncode == 0, r.stderr
    explained = hycq("explain", Q1, "--rate", "40000", "--json")
    assert explained.returncode == 0, explained.stderr
    ids = [op["id"] for op in json.loads(explained.stdout)["operators"]]

    from selenium.webdriver.common.by import By

    chrome = _chrome(browser, driver)
    try:
        chrome.get(out.as_uri())
        assert chrome.title.startswith("hycq report")
        problems = [e for e in chrome.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert problems == [], problems  # failed loads and CSP violations are logged here
        fetched = chrome.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        assert fetched == [], fetched
        assert chrome.execute_script("return document.scripts.length") == 0
        body = chrome.find_element(By.TAG_NAME, "body").text
        for op_id in ids:
            assert op_id in body, op_id
            node = chrome.find_element(By.ID, f"op-{op_id}")  # its box in the plan graph
            assert node.is_displayed(), op_id
        for section in ("plan", "alternatives", "trace", "bench"):
            assert chrome.find_element(By.ID, section).is_displayed(), section
        shot = tmp_path / "report.png"
        assert chrome.save_screenshot(str(shot))
        graph = tmp_path / "plan.png"
        chrome.find_element(By.CSS_SELECTOR, "svg.plan").screenshot(str(graph))
    finally:
        chrome.quit()
    for png in (shot, graph):
        data = png.read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000, (png, len(data))


# -- the commands -------------------------------------------------------------------------


def test_run_writes_a_report_with_its_measurements(tmp_path: Path) -> None:
    out = tmp_path / "run.html"
    r = hycq("run", Q1, "--duration", "8", "--placement", "row", "--report", out)
    assert r.returncode == 0, r.stderr
    page = out.read_text(encoding="utf-8")
    assert "the run&#x27;s placement (--placement row)" in page
    assert 'id="run"' in page and "measured u" in page and "optimizer&#x27;s choice (auto)" in page
    assert "<script" not in page


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        (["report", "missing.sql", "--out", "{tmp}/r.html"], ["query file not found", "hint:"]),
        (["report", Q1], ["--out"]),
        (["report", Q1, "--out", "{tmp}/no/such/folder/r.html"], ["output folder does not"]),
        (["report", Q1, "--out", "{tmp}/r.txt"], ["must end in .html", "hint:"]),
        (["report", Q1, "--out", "{tmp}/adir.html"], ["is a directory"]),
        (
            ["report", Q1, "--bench", "{tmp}/none.json", "--out", "{tmp}/r.html"],
            ["bench file not found", "hycq bench"],
        ),
        (
            ["report", Q1, "--bench", "{tmp}/broken.json", "--out", "{tmp}/r.html"],
            ["broken.json:1:3: invalid JSON"],
        ),
        (
            ["run", Q1, "--duration", "1", "--report", "{tmp}/no/such/r.html"],
            ["output folder does not exist"],
        ),
    ],
)
def test_bad_input_is_a_user_error(tmp_path: Path, args: list[Any], parts: list[str]) -> None:
    (tmp_path / "adir.html").mkdir()
    (tmp_path / "broken.json").write_text("[{", encoding="utf-8")
    argv = [str(a).replace("{tmp}", str(tmp_path)) for a in args]
    assert_user_error(hycq(*argv), *parts)
    assert not (tmp_path / "r.html").exists()

"""Golden plan files: query text -> the plan printer's output (with schemas).

Every shipped query (queries/**/*.sql) and every extra query in tests/golden/queries/ has
its expected plan in tests/golden/plans/<name>.txt. After an intended change, regenerate with
``HYCQ_UPDATE_GOLDEN=1 pytest tests/golden`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from optimizer.ir.display import render_plan
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CASES = sorted((ROOT / "queries").glob("*/*.sql")) + sorted((HERE / "queries").glob("*.sql"))


def _golden_name(path: Path) -> str:
    if path.is_relative_to(HERE):
        return f"extra_{path.stem}"
    return f"{path.parent.name}_{path.stem}"


def _catalog_for(path: Path) -> Path:
    if path.is_relative_to(HERE):
        return ROOT / "queries" / "smartplug" / "catalog.toml"
    return path.parent / "catalog.toml"


@pytest.mark.parametrize("path", CASES, ids=_golden_name)
def test_plan_matches_golden(path: Path) -> None:
    plan = plan_query(path.read_text(), load_catalog(_catalog_for(path)), path.name)
    text = render_plan(plan, show_schema=True) + "\n"
    golden = HERE / "plans" / f"{_golden_name(path)}.txt"
    if os.environ.get("HYCQ_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}; run with HYCQ_UPDATE_GOLDEN=1"
    assert text == golden.read_text()


def test_every_golden_file_has_a_query() -> None:
    expected = {f"{_golden_name(p)}.txt" for p in CASES}
    present = {p.name for p in (HERE / "plans").glob("*.txt")}
    assert present <= expected, f"stale golden files: {sorted(present - expected)}"


@pytest.mark.parametrize("path", CASES, ids=_golden_name)
def test_ids_are_stable(path: Path) -> None:
    catalog = load_catalog(_catalog_for(path))
    a = plan_query(path.read_text(), catalog)
    b = plan_query(path.read_text(), catalog)
    assert a.topological() == b.topological()
    assert [a.op(i) for i in a.topological()] == [b.op(i) for i in b.topological()]

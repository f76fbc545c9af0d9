"""The documentation stays inside the repository: no link or path in README.md or docs/
leads out of it (a clone has nothing beside it), and every relative link inside it
resolves to a file or folder that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Markdown link targets: ``[text](target)``.
_LINK = re.compile(r"\]\(([^)\s]+)\)")
#: Relative paths written out in the text, e.g. ``../shared/x.md`` or `./a/b`.
_PATH = re.compile(r"(?<![\w/.])(\.\.?/[\w./-]+)")


def _links(text: str) -> list[str]:
    """A document's Markdown link targets, without URLs (``https:``, ``mailto:``...)."""
    return [t for t in _LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def _outside(path: Path) -> bool:
    return not path.resolve().is_relative_to(ROOT)


def _leaves(doc: Path, target: str, written: bool) -> bool:
    """Whether ``target`` names something outside the repository. A link is read relative to
    its document; a path written out in the text may also mean the repository root (as
    "the samples are in ../shared/data" does), so it leaves unless it names something
    that exists inside, read from the document's folder."""
    path = target.split("#")[0]
    if not path:
        return False
    here = doc.parent / path
    if not written:
        return _outside(here)
    return _outside(here) or (not here.exists() and _outside(ROOT / path))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_links_outside_the_repository(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    outside = [t for t in _links(text) if _leaves(doc, t, written=False)]
    outside += [t for t in _PATH.findall(text) if _leaves(doc, t, written=True)]
    assert outside == [], f"{doc.relative_to(ROOT)} points outside the repository: {outside}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    broken = [
        t for t in _links(text) if t.split("#")[0] and not (doc.parent / t.split("#")[0]).exists()
    ]
    assert broken == [], f"{doc.relative_to(ROOT)} links to missing files: {broken}"


def test_the_interface_reference_is_in_the_repository() -> None:
    """The README names the project's own interface reference (docs/interface.md)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/interface.md)" in readme
    assert (ROOT / "docs" / "interface.md").is_file()


def test_the_readme_states_the_row_engines_ingest_cap_as_the_model_applies_it() -> None:
    """The README's row-engine cap is the cost model's ``ingest``: 1 / ingest tuples/s,
    and no shipped query's all-row plan is predicted to keep up beyond it (explain's
    "feasible up to", the reports' max feasible rate: ``api.max_feasible_rate``)."""
    from cost_models.analytical import AnalyticalCostModel
    from hycq import api
    from hycq.planning import OptimizerOptions, optimize

    ingest = AnalyticalCostModel().ingest
    cap = 1.0 / ingest
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"`ingest`, {ingest * 1e6:.1f} µs per" in readme
    assert f"keep up past {cap / 1e6:.1f} M tuples/s" in readme
    for path in [*sorted((ROOT / "queries" / "smartplug").glob("q*.sql"))]:
        q = api.load_query(path, None)
        opt = optimize(q, OptimizerOptions(cost_model="analytical"))
        row = dict.fromkeys(opt.plan.topological(), "row")
        limit = api.max_feasible_rate(opt, row)
        assert limit is not None and limit <= cap, (path.name, limit)

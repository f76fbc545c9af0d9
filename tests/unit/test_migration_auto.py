"""How ``--migration auto`` chooses (engines/migration/strategies.py::choose_auto)."""

from __future__ import annotations

from pathlib import Path

from engines.migration import strategies
from hycq.api import LoadedQuery, resolve_placement
from hycq.migrations import plan_with_order
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog(ROOT / "queries" / "keyed" / "catalog.toml")


def _pp(order: str, placement: str) -> tuple[object, dict[str, str]]:
    text = (ROOT / "queries/keyed/j3.sql").read_text()
    q = LoadedQuery(text, "j3.sql", CATALOG, plan_query(text, CATALOG), 0.0)
    plan = plan_with_order(q, order)
    return plan, resolve_placement(plan, placement)


def test_auto_choices() -> None:
    row, row2, col = _pp("r,s,t", "row"), _pp("t,s,r", "row"), _pp("r,s,t", "column")
    assert strategies.choose_auto(row, row, True)[0] == "none"  # type: ignore[arg-type]
    assert strategies.choose_auto(row, row2, False)[0] == "jisc"  # type: ignore[arg-type]
    assert strategies.choose_auto(row, col, True)[0] == "gpt"  # type: ignore[arg-type]
    # the running plan cannot keep up: do not keep it running for a horizon
    assert strategies.choose_auto(row, col, True, overloaded=True)[0] == "gms"  # type: ignore[arg-type]
    # asked by --adapt: replay at once rather than tie the controller up for a horizon
    assert strategies.choose_auto(row, col, True, adaptive=True)[0] == "gms"  # type: ignore[arg-type]
    assert strategies.choose_auto(row, row2, False, adaptive=True)[0] == "jisc"  # type: ignore[arg-type]
    # a join-order change of an all-row plan stays JISC even when overloaded
    assert strategies.choose_auto(row, row2, False, overloaded=True)[0] == "jisc"  # type: ignore[arg-type]

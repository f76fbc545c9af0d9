"""How ``--migration auto`` chooses (engines/migration/strategies.py::choose_auto)."""

from __future__ import annotations

from pathlib import Path

from engines.migration import strategies
from hycq.api import LoadedQuery, resolve_placement
from hycq.migrations import plan_with_order
from optimizer.sql import plan_query
from optimizer.sql.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[4]
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


def test_row_strategies_refuse_plan_shapes_before_the_run() -> None:
    """A row-level strategy that cannot migrate between two plans whatever the data is
    refused by ``check`` (exit 2 before the run), not at the migration point: PT over an
    UNBOUNDED window (its old tuples never expire; found by the random migration test, where
    the run failed half-way), HybMig towards a bushy join tree. The others still apply."""
    import pytest

    from optimizer.ir.errors import PlanError
    from tests.migration.harness import CATALOG as RSTU
    from tests.migration.harness import reshape

    text = (
        "SELECT r.k, COUNT(*) AS n FROM r [UNBOUNDED] AS r, s [RANGE 5 SECONDS] AS s "
        "WHERE r.k = s.k GROUP BY r.k"
    )
    q = LoadedQuery(text, "u.sql", CATALOG, plan_query(text, CATALOG), 0.0)
    a, b = plan_with_order(q, "r,s"), plan_with_order(q, "s,r")
    old, new = (a, resolve_placement(a, "row")), (b, resolve_placement(b, "row"))
    with pytest.raises(PlanError, match=r"^--migration pt: parallel track cannot run window"):
        strategies.check("pt", old, new)
    for name in ("ms", "jisc", "hybmig", "hybmig-lazy"):
        strategies.check(name, old, new)

    j4 = (
        "SELECT r.k, COUNT(*) AS n FROM r [RANGE 4 SECONDS] AS r, s [RANGE 3 SECONDS] AS s, "
        "t [RANGE 5 SECONDS] AS t, u [RANGE 2 SECONDS] AS u "
        "WHERE r.k = s.k AND s.k = t.k AND t.k = u.k GROUP BY r.k"
    )
    deep = plan_query(j4, RSTU)
    bushy = reshape(deep, ((0, 1), (2, 3)))
    old, new = (deep, resolve_placement(deep, "row")), (bushy, resolve_placement(bushy, "row"))
    for name in ("hybmig", "hybmig-lazy"):
        with pytest.raises(
            PlanError, match=rf"^--migration {name}: hybmig: the new plan joins two joins"
        ):
            strategies.check(name, old, new)
        strategies.check(name, new, old)  # from a bushy plan to a chain: fine
    for name in ("ms", "jisc", "pt"):
        strategies.check(name, old, new)

"""Query and plan types of the composition root: loading a query (its text, its catalog,
the bound plan) and resolving a placement request into an engine per operator.

A leaf of ``hycq``: it imports the optimizer and the engine registry, never another ``hycq``
module, so the API, planning, migration policy, benchmarks and reports all share it without
importing each other. A placement is resolved here once, at the boundary (``auto``, ``row``,
``column`` or a mapping from the CLI or a caller), into a :class:`ResolvedPlan`; everything
below takes the resolved form.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engines import registry
from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import OptionError, UserError
from optimizer.ir.placement import (
    ROW,
    ResolvedPlan,
    complete_placement,
    uniform_placement,
)
from optimizer.ir.plan import LogicalPlan
from optimizer.sql import bind_query
from optimizer.sql.catalog import load_catalog

#: A placement as a user asks for it: ``auto``, ``row``, ``column``, or operator id -> engine.
#: Only the boundary (the CLI, the public API's entry points) holds one; see
#: :func:`resolve_placement`.
PlacementRequest = str | Mapping[str, str]

#: The shipped queries (present in a source checkout).
QUERIES = Path(__file__).resolve().parent.parent / "queries"


@dataclass(frozen=True)
class LoadedQuery:
    """A bound query with everything needed to explain or run it."""

    text: str
    name: str
    catalog: Catalog
    plan: LogicalPlan
    bind_ms: float
    notes: tuple[str, ...] = ()
    """The binder's notes (``FILE:LINE:COL: text``): the CLI shows each as ``note: ...``."""


def read_query_text(query: str | Path) -> tuple[str, str]:
    """(text, display name) of a query path, or of stdin for ``-``."""
    if str(query) == "-":
        return sys.stdin.read().removeprefix("\ufeff"), "<stdin>"
    path = Path(query)
    try:
        return path.read_text(encoding="utf-8-sig"), str(query)  # a BOM is not query text
    except FileNotFoundError:
        raise UserError(
            f"query file not found: {query}", hint="give a .sql path, or - to read stdin"
        ) from None
    except IsADirectoryError:
        raise UserError(f"query path is a directory: {query}", hint="give a .sql file") from None
    except UnicodeDecodeError:
        raise UserError(f"query file is not UTF-8 text: {query}") from None
    except OSError as err:
        raise UserError(f"cannot read query file {query}: {err.strerror}") from None


def find_catalog(query: str | Path, catalog: Path | None) -> Path:
    """The catalog for a query: ``catalog`` if given, else catalog.toml beside the query."""
    if catalog is not None:
        return catalog
    if str(query) == "-":
        here = Path("catalog.toml")
        if here.exists():
            return here
        raise UserError(
            "no catalog for a query read from stdin",
            hint="pass --catalog PATH (e.g. queries/smartplug/catalog.toml)",
        )
    return Path(query).parent / "catalog.toml"


def load_query(query: str | Path, catalog: Path | None = None) -> LoadedQuery:
    """Read, parse and bind a query against its catalog."""
    text, name = read_query_text(query)
    cat = load_catalog(find_catalog(query, catalog))
    start = time.perf_counter()
    plan, notes = bind_query(text, cat, name)
    return LoadedQuery(text, name, cat, plan, (time.perf_counter() - start) * 1e3, notes)


def resolve_plan(
    plan: LogicalPlan, placement: PlacementRequest, column_engine: str = "duckdb"
) -> ResolvedPlan:
    """:func:`resolve_placement`, with the groups: what the engines are built from."""
    return ResolvedPlan.of(plan, resolve_placement(plan, placement, column_engine))


PLACEMENTS = ("auto", "row", "column")


def resolve_placement(
    plan: LogicalPlan, placement: PlacementRequest, column_engine: str = "duckdb"
) -> dict[str, str]:
    """Engine per operator id for a placement request (auto, row, column, or a mapping).

    Engine names are the engine registry's: an unknown ``column_engine`` or engine in the
    mapping is an error naming the registered ones (exit 2).
    """
    registry.get_columnar(column_engine)
    if not isinstance(placement, str):
        return complete_placement(plan, dict(placement), registry.capabilities())
    if placement == "auto":
        raise OptionError(
            "placement 'auto' needs the optimizer", hint="use hycq.api.run, which optimizes first"
        )
    if placement == "row":
        return uniform_placement(plan, ROW)
    if placement == "column":
        uniform = uniform_placement(plan, column_engine)
        return complete_placement(plan, uniform, registry.capabilities())
    raise OptionError(
        f"unknown placement '{placement}'",
        hint="use auto, row, column, or a JSON file mapping operator ids to engines",
    )

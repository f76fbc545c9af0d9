"""The engines the differential suite runs on: ONE list, read by the ``engine`` fixture
(tests/conftest.py) and by every test that mixes engines in one plan.

``row`` runs a plan on the row engine alone (placement ``row``); a columnar engine runs every
operator it can (placement ``column``, ``column_engine=<name>``), and mixed placements put
random operators on it. To add an engine, add its name here with the marks its tests need
(e.g. ``spark``: a local Spark session, Java 17).

What an engine cannot run is marked on the test with ``@pytest.mark.notimpl([names],
raises=<the exception it must raise>)``: the ``engine`` fixture turns it into a strict xfail
for those engines, so the case fails when the engine starts to work or fails differently.
"""

from __future__ import annotations

import pytest

#: Engine name -> the marks its cases carry.
ENGINES: dict[str, tuple[pytest.MarkDecorator, ...]] = {
    "row": (),
    "duckdb": (),
    "spark": (pytest.mark.spark,),
    "datafusion": (),
}
#: The columnar engines (MIG targets).
COLUMNAR = [name for name in ENGINES if name != "row"]


def engine_params(names: list[str] | None = None) -> list[object]:
    """``pytest.param`` per engine (all, or ``names``), with its marks and its name as id."""
    return [
        pytest.param(name, marks=ENGINES[name], id=name)
        for name in (names if names is not None else list(ENGINES))
    ]


def placement_of(engine: str) -> tuple[str, str]:
    """(placement, column engine) that runs a whole plan on ``engine`` (as far as it can)."""
    return ("row", "duckdb") if engine == "row" else ("column", engine)


def marks_of(engines: tuple[str, ...] | list[str]) -> list[pytest.MarkDecorator]:
    """The marks of a case that uses all of ``engines`` (e.g. a mixed placement)."""
    return [m for name in dict.fromkeys(engines) for m in ENGINES[name]]

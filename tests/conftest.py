"""Shared fixtures: paths to the shipped queries, catalogs and (when present) the real data."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from optimizer.ir.catalog import Catalog
from optimizer.sql.catalog import load_catalog
from tests.engines import COLUMNAR, engine_params

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "queries"
SHARED_DATA = ROOT.parent / "shared" / "data"

# Tests never read this machine's calibration profile (the default cost model would then
# depend on whether 'hycq calibrate' was run here): point it at a path that does not exist.
# Tests of the calibrated model set HYCQ_CALIBRATION themselves.
os.environ["HYCQ_CALIBRATION"] = str(
    Path(tempfile.gettempdir()) / f"hycq-tests-{os.getpid()}" / "no-calibration.json"
)


#: The folders of the fast tier (``python -m pytest -q -n 2 -m fast``): unit tests and the
#: golden plans, minus what needs Spark or is marked slow or long.
FAST_FOLDERS = ("unit", "golden")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``-n 2 --dist loadgroup``, the README's test command), every
    Spark case runs on one worker, so the suite starts one local Spark session, not one per
    worker (two JVMs would share the two cores with the other worker's tests). The cases of
    the fast tier get the ``fast`` mark."""
    root = Path(__file__).resolve().parent
    for item in items:
        if item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.xdist_group("spark"))
            continue
        if any(item.get_closest_marker(m) is not None for m in ("slow", "long")):
            continue
        try:
            folder = Path(str(item.path)).resolve().relative_to(root).parts[0]
        except ValueError:
            continue
        if folder in FAST_FOLDERS:
            item.add_marker(pytest.mark.fast)


@pytest.fixture(scope="session")
def smartplug() -> Catalog:
    return load_catalog(QUERIES / "smartplug" / "catalog.toml")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data (real DEBS samples) is not present")
    return SHARED_DATA


@pytest.fixture(params=engine_params())
def engine(request: pytest.FixtureRequest) -> str:
    """Each engine of tests/engines.py in turn; ``notimpl`` marks become strict xfails."""
    name: str = request.param
    for mark in request.node.iter_markers("notimpl"):
        if name in mark.args[0]:
            request.applymarker(
                pytest.mark.xfail(
                    raises=mark.kwargs["raises"],
                    strict=True,
                    reason=mark.kwargs.get("reason", f"not implemented on {name}"),
                )
            )
    return name


@pytest.fixture(params=engine_params(COLUMNAR))
def column_engine(request: pytest.FixtureRequest) -> str:
    """Each columnar engine of tests/engines.py in turn."""
    return str(request.param)

"""Shared fixtures: paths to the shipped queries, catalogs and (when present) the real data."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.ir.catalog import Catalog
from optimizer.sql.catalog import load_catalog

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ROOT / "queries"
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def smartplug() -> Catalog:
    return load_catalog(QUERIES / "smartplug" / "catalog.toml")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data (real DEBS samples) is not present")
    return SHARED_DATA

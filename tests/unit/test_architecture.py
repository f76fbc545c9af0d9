"""Dependency directions of STYLE.md, checked by walking the imports of every module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", _modules("optimizer/ir"), ids=lambda p: p.name)
def test_ir_is_a_leaf(path: Path) -> None:
    project = {"optimizer", "engines", "cost_models", "hycq"}
    for name in _imports(path):
        top = name.split(".")[0]
        if top in project:
            assert name.startswith("optimizer.ir"), f"{path} imports {name}"


@pytest.mark.parametrize("path", _modules("engines/row"), ids=lambda p: p.name)
def test_row_engine_imports_neither_duckdb_nor_spark(path: Path) -> None:
    for name in _imports(path):
        assert name.split(".")[0] not in ("duckdb", "pyspark"), f"{path} imports {name}"
        assert not name.startswith(("optimizer.sql", "hycq", "cost_models")), name


@pytest.mark.parametrize("path", _modules("optimizer"), ids=lambda p: str(p.relative_to(ROOT)))
def test_optimizer_never_imports_engines(path: Path) -> None:
    for name in _imports(path):
        assert name.split(".")[0] not in ("engines", "hycq", "duckdb", "pyspark"), name

"""Dependency directions of STYLE.md, checked by walking the imports of every module.

Every import counts: module level, inside functions and under ``TYPE_CHECKING`` (a lazy
import is still a dependency). Relative imports are resolved against the importing module.

The rules:

* ``optimizer.ir`` is a leaf: it imports no other project package (only the standard
  library, third-party packages and itself);
* the optimizer never imports ``engines``, ``hycq`` or ``cost_models`` (it is handed a cost
  model and the engines' capabilities);
* ``engines`` imports only ``optimizer.ir`` from the optimizer (``engines.sqlgen`` too: the
  SQL generator needs nothing else: the plan, expressions, types and errors are all IR), and
  never ``hycq`` or ``cost_models``;
* ``cost_models`` imports only ``optimizer.ir`` (and itself) from the project;
* ``engines.row`` never imports duckdb or pyspark.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("optimizer", "engines", "cost_models", "hycq")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str | None = None) -> set[str]:
    """Every module ``path`` imports (absolute names), at any depth of its syntax tree.

    ``module`` is the file's dotted name (default: from its place in the repository)."""
    tree = ast.parse(path.read_text())
    package = (module or _module_name(path)).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names.add(module)
            # ``from optimizer import estimate`` imports the module optimizer.estimate.
            names |= {f"{module}.{a.name}" for a in node.names if a.name != "*"}
    return names


def _project_imports(path: Path, module: str | None = None) -> set[str]:
    """The project modules ``path`` imports, without those that are only a package's
    ``__init__`` reached on the way (``from optimizer.ir.plan import X`` also names
    ``optimizer.ir.plan.X``, which is not a module: keep names whose top is a project package
    and drop the attribute forms that do not exist as files)."""
    out: set[str] = set()
    for name in _imports(path, module):
        if name.split(".")[0] not in PROJECT:
            continue
        as_path = ROOT / name.replace(".", "/")
        if as_path.with_suffix(".py").is_file() or (as_path / "__init__.py").is_file():
            out.add(name)
    return out


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _within(name: str, *allowed: str) -> bool:
    return any(name == a or name.startswith(a + ".") for a in allowed)


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_walker_sees_lazy_relative_and_type_checking_imports(tmp_path: Path) -> None:
    """The checks below would pass vacuously if the walker missed an import form."""
    probe = ROOT / "engines" / "row" / "executor.py"
    names = _project_imports(probe)
    assert "optimizer.ir.plan" in names and "engines.row.base" in names
    text = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from optimizer.estimate import estimate\n"
        "def f():\n    import hycq.api\n    from . import base\n"
    )
    fake = tmp_path / "probe.py"
    fake.write_text(text)
    got = _project_imports(fake, "engines.row.probe")
    assert {"optimizer.estimate", "hycq.api", "engines.row.base"} <= got


@pytest.mark.parametrize("path", _modules("optimizer/ir"), ids=_id)
def test_ir_is_a_leaf(path: Path) -> None:
    for name in _project_imports(path):
        assert name == "optimizer" or _within(name, "optimizer.ir"), (
            f"{_id(path)} imports {name}: optimizer.ir imports no other project package"
        )


@pytest.mark.parametrize("path", _modules("optimizer"), ids=_id)
def test_optimizer_never_imports_engines_hycq_or_cost_models(path: Path) -> None:
    for name in _project_imports(path):
        assert not _within(name, "engines", "hycq", "cost_models"), f"{_id(path)} imports {name}"


@pytest.mark.parametrize("path", _modules("engines"), ids=_id)
def test_engines_import_only_the_ir_of_the_optimizer(path: Path) -> None:
    for name in _project_imports(path):
        assert not _within(name, "hycq", "cost_models"), f"{_id(path)} imports {name}"
        if _within(name, "optimizer"):
            assert name == "optimizer" or _within(name, "optimizer.ir"), (
                f"{_id(path)} imports {name}: engines see the optimizer through optimizer.ir"
            )


@pytest.mark.parametrize("path", _modules("cost_models"), ids=_id)
def test_cost_models_import_only_the_ir(path: Path) -> None:
    for name in _project_imports(path):
        assert name == "optimizer" or _within(name, "optimizer.ir", "cost_models"), (
            f"{_id(path)} imports {name}: cost models import optimizer.ir only"
        )


@pytest.mark.parametrize("path", _modules("engines/row"), ids=_id)
def test_row_engine_imports_neither_duckdb_nor_spark(path: Path) -> None:
    for name in _imports(path):
        assert name.split(".")[0] not in ("duckdb", "pyspark"), f"{_id(path)} imports {name}"


def _graph() -> dict[str, set[str]]:
    """The project's module import graph: every import (lazy, TYPE_CHECKING and relative
    ones too). ``from pkg import submodule`` is an edge to the submodule only: Python runs
    ``pkg/__init__`` for every submodule import, which is not a dependency of the design;
    ``from pkg import name`` (a name ``__init__`` defines) is an edge to ``pkg``."""
    graph: dict[str, set[str]] = {}
    for top in PROJECT:
        for path in _modules(top):
            module = _module_name(path)
            names = _project_imports(path)
            packages = {n.rsplit(".", 1)[0] for n in names if "." in n}
            edges = set()
            for name in names:
                if name in packages and _only_submodules(path, name, names):
                    continue
                edges.add(name)
            graph[module] = edges - {module}
    return graph


def _only_submodules(path: Path, package: str, names: set[str]) -> bool:
    """Whether every ``from package import ...`` in ``path`` names submodules only."""
    tree = ast.parse(path.read_text())
    own = _module_name(path).split(".")
    base = own if path.name == "__init__.py" else own[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                head = base[: len(base) - node.level + 1]
                module = ".".join([*head, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module == package and any(f"{package}.{a.name}" not in names for a in node.names):
                return False
        elif isinstance(node, ast.Import) and any(a.name == package for a in node.names):
            return False
    return True


def test_the_import_graph_has_no_cycle() -> None:
    """No module imports, directly or through others, a module that imports it back, not
    even through a function-level import: every dependency points one way, so each module
    can be read, tested and changed knowing only what is below it."""
    import networkx as nx

    graph = nx.DiGraph([(m, n) for m, edges in _graph().items() for n in edges])
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def test_the_cycle_check_sees_a_cycle(tmp_path: Path) -> None:
    """The check above would pass vacuously if a lazy import back were not an edge."""
    import networkx as nx

    a = tmp_path / "a.py"
    a.write_text("from hycq import api\n")
    b = tmp_path / "b.py"
    b.write_text("def f():\n    from hycq import planning\n")
    edges = [("hycq.planning", n) for n in _project_imports(a, "hycq.planning")]
    edges += [("hycq.api", n) for n in _project_imports(b, "hycq.api")]
    graph = nx.DiGraph(edges)
    assert any(len(c) > 1 for c in nx.strongly_connected_components(graph))


def test_no_module_is_over_800_lines() -> None:
    """Small modules named for what they do: a module past 800 lines holds more than one
    concept and is split by concept."""
    long = {
        _id(p): n
        for top in (*PROJECT, "experiments")
        for p in _modules(top)
        if (n := len(p.read_text().splitlines())) > 800
    }
    assert not long, f"modules over 800 lines: {long}"


def test_the_cli_is_one_small_module_per_command() -> None:
    """hycq/cli/ is a package: every command is a module with ``register`` and ``run`` in the
    command table (no if-chain), and no CLI module passes 400 lines."""
    import argparse

    from hycq.cli import app

    long = {
        p.name: n
        for p in (ROOT / "hycq" / "cli").glob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert not long, f"CLI modules over 400 lines: {long}"
    parser = app.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == list(app.COMMANDS)
    for name, module in app.COMMANDS.items():
        assert module.__name__ == f"hycq.cli.cmd_{name}"
        assert callable(module.register) and callable(module.run)


def test_query_types_are_a_leaf_of_hycq() -> None:
    """hycq/query.py (LoadedQuery, ResolvedPlan, placement resolution) imports no other hycq
    module: the API, planning, migration policy, benchmarks and reports all share it."""
    for name in _project_imports(ROOT / "hycq" / "query.py"):
        assert not _within(name, "hycq"), f"hycq/query.py imports {name}"


def test_the_run_loop_is_handed_its_engines() -> None:
    """``run_plan`` takes the assembled engines as an argument (engines.assembly) and never
    reaches up into hycq for them; the assembly lives in engines/, beside the protocol."""
    for name in _project_imports(ROOT / "engines" / "assembly.py"):
        assert not _within(name, "hycq", "cost_models"), f"engines/assembly.py imports {name}"
    text = (ROOT / "engines" / "runtime" / "loop.py").read_text()
    assert "assembly: Assembled" in text


def test_an_assembly_is_built_from_the_plan_resolved_once() -> None:
    """``Assembly.of`` takes the resolved plan's groups as they are: the placement is
    resolved once, at the boundary, and nothing below derives it again."""
    from engines.assembly import Assembly
    from hycq.query import load_query, resolve_plan

    q = load_query(ROOT / "queries" / "smartplug" / "q1.sql")
    resolved = resolve_plan(q.plan, "column")
    assert resolved.groups, "a column placement has MIG groups"
    asm = Assembly.of(resolved)
    try:
        assert asm.groups == list(resolved.groups)
        assert all(a is b for a, b in zip(asm.groups, resolved.groups, strict=True))
        assert asm.placement == resolved.engines and asm.plan is resolved.plan
    finally:
        asm.close()

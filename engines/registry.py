"""The engine registry: every engine hycq can place operators on, declared as data.

An engine is one :class:`EngineSpec`: its name, what builds it (``factory``), the SQL dialect
its MIG queries are generated in (``engines.sqlgen``), what it can run
(:class:`optimizer.ir.placement.EngineCapabilities`), its command-line settings, the default
constants of the analytical cost model and how ``hycq calibrate`` measures it, and its colours
in reports. Everything that used to spell engine names (the CLI's choices, placement files,
the placement checker, the cost models, calibration, the report) reads this table.

Built-in engines (``row``, ``duckdb``, ``spark``, ``datafusion``) are declared in their
packages (``ENGINE`` in ``engines/<name>/spec.py``). Third-party engines are installed
packages declaring an entry point in the group ``hycq.engines`` whose object is an
:class:`EngineSpec` (or a callable returning one)::

    [project.entry-points."hycq.engines"]
    mine = "my_package.engine:SPEC"

The factory of a columnar engine returns a :class:`engines.columnar.ColumnarEngine`; the
generated SQL uses the spec's ``dialect``, one of ``engines.sqlgen.DIALECTS``. Entry points
are looked up among installed packages only (never the working directory), as cost-model
plugins are (cost_models/registry.py).

Example:
    >>> names()[:4]
    ('row', 'duckdb', 'spark', 'datafusion')
    >>> get("duckdb").dialect
    'duckdb'
    >>> get("postgres")
    Traceback (most recent call last):
    ...
    optimizer.ir.errors.OptionError: unknown engine 'postgres'
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from optimizer.ir.errors import ConfigError, OptionError, did_you_mean
from optimizer.ir.placement import ROW, EngineCapabilities

ENTRY_POINT_GROUP = "hycq.engines"

#: The packages declaring the built-in engines (``ENGINE`` in each), in display order.
BUILTIN_MODULES = (
    "engines.row.spec",
    "engines.duckdb.spec",
    "engines.spark.spec",
    "engines.datafusion.spec",
)

#: The fields of the analytical cost model's per-engine constants (seconds; see
#: cost_models/analytical.py): per-row SQL costs and the fixed cost of one query; the
#: ``inc_*`` ones price incrementally kept aggregates (engines whose MIGs keep them).
COST_FIELDS = (
    "select",
    "project",
    "aggregate",
    "aggregate_large",
    "join_input",
    "join_output",
    "fixed",
    "inc_fixed",
    "inc_row",
    "inc_group",
    "pane_fixed",
    "pane_row",
    "scan_fixed",
    "scan_row",
    "scan_key",
    "scan_chunk",
    "scan_filter",
    "scan_encode",
)


@dataclass(frozen=True)
class Setting:
    """One command-line setting of an engine (``hycq run``), e.g. ``--spark-conf``.

    ``key`` is the keyword the factory receives; ``kind`` is ``int`` (a positive integer),
    ``float`` (a positive number) or ``pairs`` (repeatable ``KEY=VALUE``, given to the
    factory as a dict; ``prefix`` is what every KEY must start with). ``maximum`` bounds an
    ``int`` or ``float`` (default: optimizer.ir.limits.LIMIT, e.g. MAX_THREADS for threads).
    """

    flag: str
    key: str
    kind: str
    help: str
    metavar: str | None = None
    prefix: str = ""
    maximum: float | None = None


@dataclass(frozen=True)
class Calibration:
    """How ``hycq calibrate`` measures a columnar engine: event-seconds of data per
    calibration query and its rate (a slow-starting engine gets fewer, shorter runs), and
    what to record about the installed engine (``version``: a callable returning its
    version text)."""

    seconds: int = 90
    quick_seconds: int = 25
    rate: float = 20000.0
    version: Callable[[], str] | None = None


@dataclass(frozen=True)
class EngineSpec:
    """One engine, as data. ``factory(**settings)`` builds a columnar engine from the values
    of its :class:`Setting` keys (None when not given); the row engine has none."""

    name: str
    description: str
    capabilities: EngineCapabilities
    colours: tuple[str, str]
    """(fill, stroke) of its operators in reports."""
    factory: Callable[..., Any] | None = None
    dialect: str | None = None
    settings: tuple[Setting, ...] = ()
    costs: Mapping[str, float] = field(default_factory=dict)
    """Default constants of the analytical cost model (:data:`COST_FIELDS`, seconds)."""
    calibration: Calibration | None = None
    fallback: str | None = None
    """An engine to move a group to when this one keeps failing (Spark -> DuckDB)."""
    extra: str | None = None
    """The pip extra that installs it (``hycq[datafusion]``), for error hints."""
    module: str | None = None
    """A Python module the engine needs; :func:`missing` says whether it is installed."""

    @property
    def columnar(self) -> bool:
        return self.name != ROW


# -- the table --------------------------------------------------------------------------------

_TABLE: dict[str, EngineSpec] | None = None


def _builtin() -> dict[str, EngineSpec]:
    out: dict[str, EngineSpec] = {}
    for module in BUILTIN_MODULES:
        spec = importlib.import_module(module).ENGINE
        out[spec.name] = spec
    return out


@contextlib.contextmanager
def _installed_only() -> Iterator[None]:
    """``sys.path`` without the implicit current directory while plugins are looked up
    (as cost_models.registry does; nothing is imported from where hycq happens to run)."""
    cwd = os.path.realpath(os.getcwd())
    named = {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    saved = list(sys.path)
    if cwd not in named:
        sys.path[:] = [p for p in saved if p and os.path.realpath(p) != cwd]
    try:
        yield
    finally:
        sys.path[:] = saved


def _plugins(known: Mapping[str, EngineSpec]) -> dict[str, EngineSpec]:
    out: dict[str, EngineSpec] = {}
    with _installed_only():
        eps = list(entry_points(group=ENTRY_POINT_GROUP))
    for ep in eps:
        if ep.name in known:
            continue  # a built-in name is never replaced by a plugin
        try:
            with _installed_only():
                target = ep.load()
            spec = target() if callable(target) and not isinstance(target, EngineSpec) else target
        except Exception as err:  # noqa: BLE001 - a broken plugin is the user's input
            raise ConfigError(
                f"engine plugin '{ep.name}' ({ep.value}) failed to load: "
                f"{type(err).__name__}: {err}",
                hint=f"fix or uninstall the package with the '{ENTRY_POINT_GROUP}' entry point",
            ) from None
        check_spec(spec, f"engine plugin '{ep.name}' ({ep.value})")
        out[spec.name] = spec
    return out


def check_spec(spec: object, where: str) -> None:
    """Raise ConfigError unless ``spec`` is a usable EngineSpec."""
    if not isinstance(spec, EngineSpec):
        raise ConfigError(f"{where} is not an engines.registry.EngineSpec: {spec!r}"[:300])
    if spec.columnar and (spec.factory is None or spec.dialect is None):
        raise ConfigError(f"{where}: a columnar engine needs a factory and a SQL dialect")
    if spec.dialect is not None:
        from engines.sqlgen import DIALECTS

        if spec.dialect not in DIALECTS:
            raise ConfigError(
                f"{where}: unknown SQL dialect '{spec.dialect}'",
                hint=f"dialects: {', '.join(sorted(DIALECTS))}",
            )
    unknown = set(spec.costs) - set(COST_FIELDS)
    if unknown:
        raise ConfigError(f"{where}: unknown cost constants {sorted(unknown)}")


def table() -> dict[str, EngineSpec]:
    """Every registered engine by name: the built-ins, then installed plugins."""
    global _TABLE
    if _TABLE is None:
        builtin = _builtin()
        _TABLE = {**builtin, **_plugins(builtin)}
    return _TABLE


def names() -> tuple[str, ...]:
    """The registered engine names (the row engine first)."""
    return tuple(table())


def columnar_names() -> tuple[str, ...]:
    return tuple(n for n, s in table().items() if s.columnar)


def get(name: str, where: str = "") -> EngineSpec:
    """The engine called ``name``; an unknown name is an OptionError (exit 2) naming the
    registered ones. ``where`` says where the name came from (``--engines``)."""
    spec = table().get(name)
    if spec is None:
        known = names()
        raise OptionError(
            f"unknown engine '{name}'" + (f" in {where}" if where else ""),
            hint=did_you_mean(name, known) or f"registered engines: {', '.join(known)}",
        )
    return spec


def get_columnar(name: str, where: str = "") -> EngineSpec:
    """Like :func:`get`, for a name that must be a columnar engine."""
    spec = table().get(name)
    if spec is None or not spec.columnar:
        known = columnar_names()
        what = "unknown columnar engine" if spec is None else "not a columnar engine:"
        raise OptionError(
            f"{what} '{name}'" + (f" in {where}" if where else ""),
            hint=did_you_mean(name, known) or f"registered columnar engines: {', '.join(known)}",
        )
    return spec


def capabilities(engines: tuple[str, ...] | None = None) -> dict[str, EngineCapabilities]:
    """Capabilities by engine name (of ``engines``, default every registered one): the
    optimizer's and the placement checker's view of the registry."""
    chosen = names() if engines is None else engines
    return {n: get(n).capabilities for n in chosen}


def cost_defaults() -> dict[str, dict[str, float]]:
    """Every columnar engine's default analytical cost constants, by engine name."""
    return {n: dict(s.costs) for n, s in table().items() if s.columnar and s.costs}


def colours() -> dict[str, tuple[str, str]]:
    return {n: s.colours for n, s in table().items()}


def missing(name: str) -> str | None:
    """Why engine ``name`` cannot be built here (its package is not installed), or None."""
    spec = get(name)
    if spec.module is None:
        return None
    try:
        importlib.import_module(spec.module)
    except ImportError:
        extra = f"pip install 'hycq[{spec.extra}]'" if spec.extra else f"pip install {spec.module}"
        return f"the {name} engine needs the {spec.module} package: {extra}"
    return None


def make(name: str, settings: Mapping[str, Any] | None = None) -> Any:
    """Build columnar engine ``name`` with ``settings`` (its Setting keys; others ignored)."""
    spec = get_columnar(name)
    assert spec.factory is not None
    given = settings or {}
    kwargs = {s.key: given[s.key] for s in spec.settings if given.get(s.key) is not None}
    return spec.factory(**kwargs)

"""Finding a cost model by name, entry point, dotted path or TOML file.

``load_cost_model(spec)`` accepts:

* ``None``: the default: ``calibrated`` when a calibration profile exists (see
  ``cost_models.calibrated.default_profile_path``), else ``analytical``;
* a built-in name: ``analytical``, ``calibrated``;
* the name of an entry point in the group ``hycq.cost_models`` (installed plugins), e.g. a
  package declaring ``[project.entry-points."hycq.cost_models"] mine = "pkg.mod:MyModel"``;
* a dotted path ``package.module:attr`` (or ``package.module.attr``) of a class or factory
  callable taking no arguments, or of a model object, imported from the installed packages
  and ``PYTHONPATH``;
* a Python file and an attribute, ``path/to/model.py:attr`` (the file is loaded as it is);
* a path to a ``.toml`` file::

      [cost_model]
      name = "tuned"              # optional; default: the file's stem
      base = "analytical"         # any spec above except another TOML file
      [cost_model.parameters]     # overrides of the base's constants, in seconds
      select = 1.2e-7
      [cost_model.parameters.engines.duckdb]
      fixed = 0.004

Plugins are only ever imported from an installed entry point or a module path the user
names (CLI or config); nothing is loaded from the working directory implicitly. ``python -m``
and ``python -c`` put the current directory first on ``sys.path``; entry points and dotted
paths are looked up without it (unless it is listed in ``PYTHONPATH``), so a file ``evil.py``
or an ``evil.dist-info`` folder where hycq happens to run is never imported, whether hycq was
started as ``hycq`` or ``python -m hycq.cli``. To use a model file of the current directory,
name it: ``--cost-model ./model.py:Model``.

A loaded object must provide ``name``, ``unit_cost`` and ``group_cost`` (the
protocol :class:`optimizer.ir.costing.CostModel`), else ConfigError.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import math
import os
import re
import sys
import tomllib
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, cast

from cost_models.analytical import AnalyticalCostModel
from cost_models.calibrated import calibrated_model, default_profile_path, with_parameters
from optimizer.ir.costing import CostModel
from optimizer.ir.errors import ConfigError, did_you_mean

ENTRY_POINT_GROUP = "hycq.cost_models"

#: Engine cost defaults (engine name -> analytical constants, as the engine registry
#: declares them) -> model.
BUILTIN: dict[str, Callable[[Mapping[str, Mapping[str, float]]], Any]] = {
    "analytical": lambda engines: AnalyticalCostModel().with_engines(engines),
    "calibrated": lambda engines: calibrated_model(engine_costs=engines),
}


def default_spec() -> str:
    """``calibrated`` if a calibration profile is present, else ``analytical``."""
    return "calibrated" if default_profile_path().is_file() else "analytical"


@contextlib.contextmanager
def _installed_only() -> Iterator[None]:
    """``sys.path`` without the implicit current directory while plugins are looked up.

    ``python -m``/``-c`` insert the working directory (or '') at the front of ``sys.path``; it
    is dropped here unless the user listed it in ``PYTHONPATH``. Restored afterwards.
    """
    cwd = os.path.realpath(os.getcwd())
    named = {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    saved = list(sys.path)
    if cwd not in named:
        sys.path[:] = [p for p in saved if p and os.path.realpath(p) != cwd]
    try:
        yield
    finally:
        sys.path[:] = saved


def _entry_points() -> list[Any]:
    with _installed_only():
        return list(entry_points(group=ENTRY_POINT_GROUP))


def available() -> dict[str, str]:
    """Names that ``load_cost_model`` accepts -> where they come from."""
    out = dict.fromkeys(BUILTIN, "built-in")
    for ep in _entry_points():
        out.setdefault(ep.name, f"entry point {ep.value}")
    return out


def load_cost_model(
    spec: str | None = None, engine_costs: Mapping[str, Mapping[str, float]] | None = None
) -> CostModel:
    """The cost model named by ``spec`` (see the module docstring).

    ``engine_costs`` are the columnar engines' default analytical constants (hycq passes the
    engine registry's, ``engines.registry.cost_defaults()``): an analytical-structured model
    gets them for every engine it has no constants for, before a TOML file's or a
    calibration profile's parameters apply.
    """
    if spec is None:
        spec = default_spec()
    spec = spec.strip()
    costs = engine_costs or {}
    if not spec:
        raise ConfigError("empty cost-model name", hint=_names_hint())
    if spec.lower().endswith(".toml"):
        return _from_toml(Path(spec), costs)
    return _from_name(spec, costs)


#: ``path/to/file.py:attr``
_PY_FILE = re.compile(r"(?P<path>.+\.py):(?P<attr>[A-Za-z_][\w.]*)")


def files_read(spec: str | None) -> list[Path]:
    """The files loading ``spec`` reads (a TOML file and its base, a model file, the
    calibration profile), so that no output can be written over them."""
    spec = default_spec() if spec is None else spec.strip()
    files: list[Path] = []
    folder: Path | None = None
    if spec.lower().endswith(".toml"):
        path = Path(spec)
        files.append(path)
        with contextlib.suppress(OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            table = tomllib.loads(path.read_text(encoding="utf-8-sig")).get("cost_model")
            base = table.get("base") if isinstance(table, dict) else None
            spec, folder = (base if isinstance(base, str) else "analytical"), path.parent
    m = _PY_FILE.fullmatch(spec)
    if m:
        path = Path(m["path"])
        files.append(folder / path if folder and not path.is_absolute() else path)
    elif spec == "calibrated":
        files.append(default_profile_path())
    return files


def _from_name(
    spec: str, costs: Mapping[str, Mapping[str, float]], folder: Path | None = None
) -> CostModel:
    """Any spec but a TOML file; relative .py paths are relative to ``folder`` if given."""
    if spec in BUILTIN:
        return _check(BUILTIN[spec](costs), spec)
    m = _PY_FILE.fullmatch(spec)
    if m:
        path = Path(m["path"])
        return _from_file(
            folder / path if folder and not path.is_absolute() else path, m["attr"], spec
        )
    if spec.lower().endswith(".py") or "/" in spec or "\\" in spec:
        raise ConfigError(
            f"bad cost-model path '{spec}'",
            hint="name a TOML file (PATH.toml) or a Python file and its model (PATH.py:Model)",
        )
    eps = [ep for ep in _entry_points() if ep.name == spec]
    if eps:
        try:
            with _installed_only():
                target = eps[0].load()
        except Exception as err:  # noqa: BLE001 - a broken plugin is the user's input
            raise ConfigError(
                f"cost-model plugin '{spec}' ({eps[0].value}) failed to load: "
                f"{type(err).__name__}: {err}"
            ) from None
        return _instantiate(target, spec)
    if ":" in spec or "." in spec:
        return _from_dotted(spec)
    raise ConfigError(
        f"unknown cost model '{spec}'",
        hint=did_you_mean(spec, available()) or _names_hint(),
    )


def _names_hint() -> str:
    return (
        f"cost models: {', '.join(sorted(available()))}; or a module:attr path, a "
        "file.py:attr, or a .toml file"
    )


def _from_dotted(spec: str) -> CostModel:
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
    else:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"bad cost-model path '{spec}'", hint="use package.module:attr")
    try:
        with _installed_only():
            module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(
            f"cannot import module '{module_name}' for cost model '{spec}': {err}",
            hint="is the package installed (pip install -e .) or on PYTHONPATH?",
        ) from None
    except Exception as err:  # noqa: BLE001 - the plugin module itself is broken
        raise ConfigError(
            f"importing '{module_name}' for cost model '{spec}' failed: {type(err).__name__}: {err}"
        ) from None
    return _instantiate(_attribute(module, attr, f"module '{module_name}'", spec), spec)


def _from_file(path: Path, attr: str, spec: str) -> CostModel:
    """The model ``attr`` of the Python file ``path``, which the user named."""
    if not path.is_file():
        raise ConfigError(f"cost-model file not found: {path}", hint="PATH.py:Model")
    name = f"hycq_cost_model_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ConfigError(f"cannot load {path} as a Python module (cost model '{spec}')")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - the user's plugin file is broken
        sys.modules.pop(name, None)
        raise ConfigError(
            f"loading {path} for cost model '{spec}' failed: {type(err).__name__}: {err}"
        ) from None
    return _instantiate(_attribute(module, attr, str(path), spec), spec)


def _attribute(module: Any, attr: str, where: str, spec: str) -> Any:
    """``module.attr`` (dotted), or a ConfigError naming ``where`` with a did-you-mean."""
    target = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ConfigError(
                f"{where} has no attribute '{attr}' (cost model '{spec}')",
                hint=did_you_mean(part, [n for n in dir(target) if not n.startswith("_")]),
            )
        target = getattr(target, part)
    return target


def _instantiate(target: Any, spec: str) -> CostModel:
    if isinstance(target, type) or (callable(target) and not _is_model(target)):
        try:
            target = target()
        except Exception as err:  # noqa: BLE001 - the plugin's constructor failed
            raise ConfigError(
                f"creating cost model '{spec}' failed: {type(err).__name__}: {err}"
            ) from None
    return _check(target, spec)


def _is_model(obj: Any) -> bool:
    return all(callable(getattr(obj, m, None)) for m in ("unit_cost", "group_cost")) and (
        isinstance(getattr(obj, "name", None), str)
    )


def _check(obj: Any, spec: str) -> CostModel:
    if not _is_model(obj):
        raise ConfigError(
            f"'{spec}' is not a cost model: it needs a str 'name' and methods "
            "'unit_cost(op, engine, estimates)' and 'group_cost(group, estimates)'",
            hint="see optimizer/ir/costing.py (the CostModel protocol)",
        )
    if isinstance(obj, AnalyticalCostModel):  # the built-in models (frozen dataclasses)
        model: CostModel = cast(CostModel, obj)
        return model
    return GuardedModel(obj, spec)


class GuardedModel:
    """A plugin cost model whose failures are reported as the plugin's (exit 2, naming it):
    an exception it raises, or a cost that is not a number >= 0 (NaN, negative, a string).
    ``inf`` stays allowed: it means "cannot run this"."""

    def __init__(self, model: Any, spec: str) -> None:
        self.model = model
        self.spec = spec
        self.name: str = model.name

    def __getattr__(self, attr: str) -> Any:  # e.g. ``ingest``
        return getattr(self.model, attr)

    def unit_cost(self, op: Any, engine: str, estimates: Any) -> float:
        what = f"unit_cost({op.kind} {op.id}, {engine})"
        return self._checked(what, lambda: self.model.unit_cost(op, engine, estimates))

    def group_cost(self, group: Any, estimates: Any) -> float:
        what = f"group_cost({group.engine} group of {', '.join(group.operators)})"
        return self._checked(what, lambda: self.model.group_cost(group, estimates))

    def _checked(self, what: str, call: Callable[[], Any]) -> float:
        where = f"cost model '{self.name}' ({self.spec})"
        try:
            value = call()
        except Exception as err:  # noqa: BLE001 - the plugin's bug, reported as such
            raise ConfigError(
                f"{where} failed in {what}: {type(err).__name__}: {err}",
                hint="the cost-model plugin raised: fix it or choose another --cost-model",
            ) from None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or math.isnan(value)
            or value < 0
        ):
            raise ConfigError(
                f"{where} returned {value!r} from {what}",
                hint="a cost is a number of seconds >= 0 (inf: cannot run)",
            )
        return float(value)


def _from_toml(path: Path, costs: Mapping[str, Mapping[str, float]]) -> CostModel:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError(f"cost-model file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read cost-model file {path}: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: invalid TOML: {err}") from None
    table = doc.get("cost_model")
    if not isinstance(table, dict):
        raise ConfigError(
            f"{path}: no [cost_model] table", hint='start the file with [cost_model] base = "..."'
        )
    unknown = set(table) - {"name", "base", "parameters"}
    if unknown:
        key = sorted(unknown)[0]
        raise ConfigError(
            f"{path}: unknown key '{key}' in [cost_model]",
            hint=did_you_mean(key, ["name", "base", "parameters"])
            or "keys: name, base, parameters",
        )
    base_spec = table.get("base", "analytical")
    if not isinstance(base_spec, str) or base_spec.lower().endswith(".toml"):
        raise ConfigError(f"{path}: 'base' must name a cost model (not another TOML file)")
    name = table.get("name", path.stem)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}: 'name' must be a non-empty string")
    model: Any = _from_name(base_spec, costs, path.parent)
    if isinstance(model, AnalyticalCostModel):
        model = model.with_engines(costs)
    params = table.get("parameters", {})
    if not isinstance(params, dict):
        raise ConfigError(f"{path}: [cost_model.parameters] must be a table")
    if params:
        if not isinstance(model, AnalyticalCostModel):
            raise ConfigError(
                f"{path}: base model '{base_spec}' has no settable parameters",
                hint="parameters apply to analytical-structured models (analytical, calibrated)",
            )
        model = with_parameters(model, params, str(path))
    if dataclasses.is_dataclass(model) and "name" in {f.name for f in dataclasses.fields(model)}:
        model = dataclasses.replace(model, name=name)  # type: ignore[type-var]
    else:
        with contextlib.suppress(AttributeError):
            model.name = name
    return _check(model, str(path))

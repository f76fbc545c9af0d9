"""The ``calibrated`` cost model: the analytical model's unit-cost functions with constants
fitted on this machine by ``hycq calibrate``.

The structure of every unit-cost function is the analytical model's (see
``cost_models.analytical``): per-tuple row costs, per-row Arrow conversion, and per DB-op
``fixed + sum(per-row cost * rows)``. ``hycq calibrate`` measures the real engines and fits
those constants with scipy (``fit_linear`` below); the result is a *profile* (JSON) that this
module turns back into a model. A profile is used by default when present at
:func:`default_profile_path`.

Profile format (version 1)::

    {"format": 1, "created": "...", "machine": {...},
     "parameters": {"select": 1.1e-7, ..., "engines": {"duckdb": {"fixed": 0.002, ...}}},
     "fits": {"<what was fitted>": {"x": [...], "y": [...], "slope": ..., "intercept": ...,
                                      "r2": ...}}}

Example:
    >>> fit = fit_linear([1e5, 2e5, 4e5], [0.012, 0.022, 0.042])
    >>> round(fit.slope * 1e9, 3), round(fit.intercept * 1e3, 3)   # ns per row, ms fixed
    (100.0, 2.0)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cost_models.analytical import AnalyticalCostModel, ColumnarConstants
from optimizer.ir.errors import ConfigError

PROFILE_FORMAT = 1
#: Environment variable naming the calibration profile (overrides the default location).
PROFILE_ENV = "HYCQ_CALIBRATION"


def default_profile_path() -> Path:
    """Where ``hycq calibrate`` writes, and the ``calibrated`` model reads, the profile:
    ``$HYCQ_CALIBRATION``, else ``$XDG_CONFIG_HOME/hycq/calibration.json`` (default
    ``~/.config/hycq/calibration.json``)."""
    env = os.environ.get(PROFILE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "hycq" / "calibration.json"


@dataclass(frozen=True)
class LinearFit:
    """``y = intercept + slope * x`` by non-negative least squares, with its R^2."""

    slope: float
    intercept: float
    r2: float
    x: tuple[float, ...]
    y: tuple[float, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "slope": self.slope,
            "intercept": self.intercept,
            "r2": self.r2,
            "x": list(self.x),
            "y": list(self.y),
        }


def fit_linear(x: Sequence[float], y: Sequence[float], intercept: bool = True) -> LinearFit:
    """Fit ``y = b + a * x`` with ``a, b >= 0`` (scipy NNLS): costs are never negative."""
    import numpy as np
    from scipy.optimize import nnls

    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if len(xs) < 2 or len(xs) != len(ys):
        raise ValueError("a linear fit needs at least two (x, y) points")
    cols = [xs, np.ones_like(xs)] if intercept else [xs]
    design = np.column_stack(cols)
    # Scale columns so NNLS is well conditioned over micro- to milliseconds.
    scale = np.maximum(np.abs(design).max(axis=0), 1e-300)
    coef, _ = nnls(design / scale, ys)
    coef = coef / scale
    pred = design @ coef
    ss_res = float(((ys - pred) ** 2).sum())
    ss_tot = float(((ys - ys.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    b = float(coef[1]) if intercept else 0.0
    return LinearFit(float(coef[0]), b, r2, tuple(map(float, xs)), tuple(map(float, ys)))


# -- profiles ---------------------------------------------------------------------------


def model_parameters(model: AnalyticalCostModel) -> dict[str, Any]:
    """The settable constants of an analytical-structured model, as a JSON-able dict."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(model):
        if f.name == "name":
            continue
        value = getattr(model, f.name)
        if f.name == "engines":
            # A constant an engine does not have (None: no incremental aggregates) is left out.
            out["engines"] = {
                e: {k: v for k, v in dataclasses.asdict(c).items() if v is not None}
                for e, c in value.items()
            }
        else:
            out[f.name] = value
    return out


def with_parameters(
    model: AnalyticalCostModel, parameters: Mapping[str, Any], where: str
) -> AnalyticalCostModel:
    """``model`` with some constants replaced; unknown names or bad values raise ConfigError
    naming ``where`` (the file they came from)."""
    from optimizer.ir.errors import did_you_mean

    known = model_parameters(model)
    changes: dict[str, Any] = {}
    for key, value in parameters.items():
        if key not in known:
            raise ConfigError(
                f"{where}: unknown cost-model parameter '{key}'",
                hint=did_you_mean(key, known) or f"parameters: {', '.join(sorted(known))}",
            )
        if key == "engines":
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: 'engines' must be a table of engine tables")
            engines = dict(model.engines)
            for engine, consts in value.items():
                base = engines.get(engine)
                if base is None:
                    raise ConfigError(
                        f"{where}: unknown columnar engine 'engines.{engine}'",
                        hint=did_you_mean(engine, engines)
                        or f"columnar engines: {', '.join(sorted(engines))} (the row engine's "
                        "costs are the top-level parameters)",
                    )
                if not isinstance(consts, Mapping):
                    raise ConfigError(f"{where}: engines.{engine} must be a table")
                fields = dataclasses.asdict(base)
                for k, v in consts.items():
                    if k not in fields:
                        raise ConfigError(
                            f"{where}: unknown parameter 'engines.{engine}.{k}'",
                            hint=did_you_mean(k, fields) or f"parameters: {', '.join(fields)}",
                        )
                    fields[k] = _cost_value(v, f"{where}: engines.{engine}.{k}")
                engines[engine] = ColumnarConstants(**fields)
            changes["engines"] = engines
        else:
            changes[key] = _cost_value(value, f"{where}: {key}")
    return dataclasses.replace(model, **changes)


def _cost_value(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{what} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{what} must be a finite non-negative number, got {value!r}")
    return float(value)


def profile_text(
    model: AnalyticalCostModel,
    fits: Mapping[str, LinearFit],
    machine: Mapping[str, Any],
    created: str,
) -> str:
    """A version-1 profile as JSON text."""
    doc = {
        "format": PROFILE_FORMAT,
        "created": created,
        "machine": dict(machine),
        "parameters": model_parameters(model),
        "fits": {k: f.to_json() for k, f in fits.items()},
    }
    return json.dumps(doc, indent=2) + "\n"


def write_profile(
    path: Path,
    model: AnalyticalCostModel,
    fits: Mapping[str, LinearFit],
    machine: Mapping[str, Any],
    created: str,
) -> None:
    """Write a version-1 profile atomically (``hycq calibrate`` writes ``profile_text``
    through engines.output_files instead, which also refuses unsafe paths)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(profile_text(model, fits, machine, created), encoding="utf-8")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed write leaves nothing behind
        raise


def load_profile(path: Path) -> dict[str, Any]:
    """Read and validate a profile (ConfigError with the path on any problem)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError(
            f"no calibration profile at {path}",
            hint="run 'hycq calibrate' first, or choose --cost-model analytical",
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read calibration profile {path}: {err}") from None
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{path}:{err.lineno}:{err.colno}: calibration profile is not valid JSON: {err.msg}",
            hint="rerun 'hycq calibrate' to rewrite it",
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != PROFILE_FORMAT:
        raise ConfigError(
            f"{path}: not a version-{PROFILE_FORMAT} hycq calibration profile",
            hint="rerun 'hycq calibrate' to rewrite it",
        )
    if not isinstance(doc.get("parameters"), dict):
        raise ConfigError(f"{path}: the profile has no 'parameters' table")
    return doc


def calibrated_model(
    path: Path | None = None, engine_costs: Mapping[str, Mapping[str, float]] | None = None
) -> AnalyticalCostModel:
    """The ``calibrated`` cost model from the profile at ``path`` (default location if None);
    ``engine_costs`` are the defaults of columnar engines the profile did not measure."""
    path = path if path is not None else default_profile_path()
    doc = load_profile(path)
    base = AnalyticalCostModel(name="calibrated").with_engines(engine_costs or {})
    params = dict(doc["parameters"])
    if "ingest" not in params and "from_arrow" in params:
        params["ingest"] = params["from_arrow"]  # the gateway's conversion is the same one
    # Profiles from before issue 20's tenth stop priced shipping per row only (their
    # ship_arrow holds the per-input part) and RSTREAM per row emitted (their r2s).
    if "ship_input" not in params and "ship_arrow" in params:
        params["ship_input"] = 0.0
    if "rstream_row" not in params and "r2s" in params:
        params["rstream_row"] = params["r2s"]
    return with_parameters(base, params, str(path))

"""Refit a calibrated profile with measurements from runs (``hycq calibrate --from``).

A calibration profile (cost_models/calibrated.py) keeps the points every constant was fitted
to. :func:`refit` adds *observations* (what a run or a bench measured: an operator's busy
seconds against the rows it processed, a columnar group's SQL seconds per slide against the
analytical model's ``sql_terms``) to those points and fits the same functions again:

* ``row.select``, ``row.project``, ``row.window``, ``row.r2s``: seconds per tuple (for
  ``row.r2s`` an R2S operator's input tuple; RSTREAM's ``rstream_row`` per row emitted is kept
  and subtracted);
* ``row.aggregate``: ``agg_base``, ``agg_incremental`` and ``agg_minmax`` jointly (an
  aggregate with ``i`` incremental and ``m`` MIN/MAX calls over ``n`` tuples costs
  ``n * (agg_base + i * agg_incremental + m * agg_minmax)``, plus ``agg_group`` per group its
  slides touched, which is kept: an observation's ``agg_group`` term (half its rows out:
  a changed group emits a delete and an insert) is priced at the profile's value and
  subtracted, as every term of a parameter a fit does not estimate is);
* ``row.join``: ``join_input``, ``join_output`` and ``join_examine`` jointly (the last
  from metrics that count the stored tuples a residual was tested on);
* ``sql.<engine>``: the per-row SQL constants and the fixed per-invocation overhead.

Every fit is non-negative least squares on *relative* residuals (each point's equation is
divided by its measured seconds), so a slide of 2 ms counts as much as one of 200 ms; an
observation counts ``weight`` times as much as an original calibration point. Outliers: after
a first fit, a new observation whose relative residual is more than ``k`` robust standard
deviations (1.4826 * MAD of all the group's residuals, at least :data:`MIN_SCALE`) from the
median residual is rejected, and the group is fitted again without it. Groups without new
observations keep their constants.

The report compares the old and the new profile on held-out observations: a seeded random
``holdout`` fraction of the new observations is left out of the fit, and the median relative
error of both profiles' predictions on them is reported per fit and overall. The returned
profile is the one fitted without them (so the report describes it).

No file IO here: a runtime monitor can call :func:`refit` on a profile dict it holds.

Example:
    >>> profile = {"format": 1, "parameters": {"select": 1e-7}, "fits": {
    ...     "row.select": {"slope": 1e-7, "intercept": 0.0, "r2": 1.0,
    ...                    "x": [1e5, 2e5], "y": [0.01, 0.02]}}}
    >>> obs = [Observation("row.select", {"select": n}, 2e-7 * n) for n in (1e5, 2e5, 3e5)]
    >>> new, report = refit(profile, obs, weight=1.0, holdout=0.0)
    >>> round(new["parameters"]["select"] * 1e9)   # ns per tuple: 2 points at 100, 3 at 200
    127
"""

from __future__ import annotations

import copy
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cost_models.analytical import SQL_TERMS

#: Row fits: the parameters each one fits (top-level profile parameters).
ROW_GROUPS: dict[str, tuple[str, ...]] = {
    "row.select": ("select",),
    "row.project": ("project",),
    "row.window": ("window",),
    "row.r2s": ("r2s",),
    "row.aggregate": ("agg_base", "agg_incremental", "agg_minmax"),
    "row.join": ("join_input", "join_output", "join_examine"),
}
#: The columnar fits are ``sql.<engine>``: these per-row constants plus ``fixed``.
SQL_PREFIX = "sql."
FIXED = "fixed"
#: The smallest robust scale of relative residuals used for outlier rejection (a fit that
#: matches its points to 0.1% must not reject every point 1% off).
MIN_SCALE = 0.02
#: Per-call multipliers of the calibration's aggregate queries (hycq/calibrate.py).
_AGGREGATE_FITS = {
    "row.aggregate.avg": {"agg_base": 1.0, "agg_incremental": 1.0},
    "row.aggregate.count_sum_avg": {"agg_base": 1.0, "agg_incremental": 2.0},  # not COUNT(*)
    "row.aggregate.max": {"agg_base": 1.0, "agg_minmax": 1.0},
}


@dataclass(frozen=True)
class Observation:
    """One measurement: ``seconds = sum(value[p] * terms[p])`` (+ ``fixed`` for SQL fits).

    ``fit`` is a key of :data:`ROW_GROUPS` or ``sql.<engine>``. ``terms`` maps parameter
    names to their multipliers (rows): the fit's own parameters are fitted, any other
    (e.g. ``to_arrow`` for a bench slide that includes shipping) is a known offset at the
    profile's value. ``source`` says where it came from (a file, a run).
    """

    fit: str
    terms: Mapping[str, float]
    seconds: float
    source: str = ""

    def to_json(self, weight: float) -> dict[str, Any]:
        return {
            "fit": self.fit,
            "terms": dict(self.terms),
            "seconds": self.seconds,
            "source": self.source,
            "weight": weight,
        }


@dataclass
class FitReport:
    """What happened to one fit."""

    observations: int = 0
    used: int = 0
    rejected: int = 0
    held_out: int = 0
    error_before: float | None = None
    """Median relative error of the old profile on the held-out observations."""
    error_after: float | None = None
    changed: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Parameter -> (old value, new value)."""
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "observations": self.observations,
            "used": self.used,
            "rejected": self.rejected,
            "held_out": self.held_out,
            "error_before": self.error_before,
            "error_after": self.error_after,
            "changed": {k: list(v) for k, v in self.changed.items()},
            **({"note": self.note} if self.note else {}),
        }


@dataclass
class RefitReport:
    """Counts and held-out errors, per fit and overall."""

    fits: dict[str, FitReport]
    weight: float
    holdout: float
    seed: int
    k: float
    ignored: int = 0
    """Observations for fits the profile cannot hold (unknown fit, non-positive seconds)."""

    def _all(self, attr: str) -> int:
        return sum(getattr(f, attr) for f in self.fits.values())

    @property
    def observations(self) -> int:
        return self._all("observations") + self.ignored

    @property
    def used(self) -> int:
        return self._all("used")

    @property
    def rejected(self) -> int:
        return self._all("rejected")

    @property
    def held_out(self) -> int:
        return self._all("held_out")

    error_before: float | None = None
    error_after: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "weight": self.weight,
            "holdout": self.holdout,
            "seed": self.seed,
            "outlier_k": self.k,
            "observations": self.observations,
            "used": self.used,
            "rejected": self.rejected,
            "held_out": self.held_out,
            "ignored": self.ignored,
            "error_before": self.error_before,
            "error_after": self.error_after,
            "fits": {k: f.to_json() for k, f in self.fits.items()},
        }


@dataclass(frozen=True)
class _Point:
    terms: Mapping[str, float]
    seconds: float
    weight: float
    new: bool
    source: str = ""


def fit_parameters(fit: str) -> tuple[str, ...]:
    """The parameters ``fit`` estimates (ValueError for an unknown fit)."""
    if fit in ROW_GROUPS:
        return ROW_GROUPS[fit]
    if fit.startswith(SQL_PREFIX) and len(fit) > len(SQL_PREFIX):
        return (*SQL_TERMS, FIXED)
    raise ValueError(f"unknown fit {fit!r}")


def _values(params: Mapping[str, Any], fit: str) -> dict[str, float]:
    """The profile's current value of every parameter a point of ``fit`` may name."""
    out = {k: float(v) for k, v in params.items() if isinstance(v, int | float)}
    if fit.startswith(SQL_PREFIX):
        engine = fit[len(SQL_PREFIX) :]
        consts = params.get("engines", {}).get(engine, {})
        out.update({k: float(v) for k, v in consts.items()})
    return out


def predict(params: Mapping[str, Any], fit: str, terms: Mapping[str, float]) -> float:
    """The seconds a profile's ``parameters`` predict for one point of ``fit``."""
    values = _values(params, fit)
    total = sum(values.get(k, 0.0) * rows for k, rows in terms.items())
    if fit.startswith(SQL_PREFIX):
        total += values.get(FIXED, 0.0)
    return total


def profile_points(profile: Mapping[str, Any]) -> dict[str, list[_Point]]:
    """The points a profile's constants were fitted to, per fit (weight 1), plus the
    observations earlier refits added (with their weights)."""
    fits = profile.get("fits", {})
    out: dict[str, list[_Point]] = {}

    def add(fit: str, terms: Mapping[str, float], y: float, w: float = 1.0) -> None:
        out.setdefault(fit, []).append(_Point(dict(terms), float(y), w, False))

    for fit, (param,) in ((f, p) for f, p in ROW_GROUPS.items() if len(p) == 1 and f in fits):
        for x, y in zip(fits[fit]["x"], fits[fit]["y"], strict=True):
            add(fit, {param: x}, y)
    for key, per in _AGGREGATE_FITS.items():
        if key in fits:
            for x, y in zip(fits[key]["x"], fits[key]["y"], strict=True):
                add("row.aggregate", {p: m * x for p, m in per.items()}, y)
    if "row.join" in fits and "row.join.output" in fits:
        j, o = fits["row.join"], fits["row.join.output"]
        # Profiles from before ``join_examine`` have no examined column.
        e = fits.get("row.join.examined", {"x": [0.0] * len(j["x"])})
        for x_in, x_out, x_ex, y in zip(j["x"], o["x"], e["x"], j["y"], strict=True):
            terms = {"join_input": x_in, "join_output": x_out}
            if x_ex:
                terms["join_examine"] = x_ex
            add("row.join", terms, y)
    for engine in profile.get("parameters", {}).get("engines", {}):
        keys = [k for k in SQL_TERMS if f"{engine}.{k}" in fits]
        if not keys:
            continue
        ys = fits[f"{engine}.{keys[0]}"]["y"]
        for i, y in enumerate(ys):
            add(f"{SQL_PREFIX}{engine}", {k: fits[f"{engine}.{k}"]["x"][i] for k in keys}, y)
    for p in profile.get("refit", {}).get("points", []):
        add(p["fit"], p["terms"], p["seconds"], float(p.get("weight", 1.0)))
    return out


def _nnls(
    points: Sequence[_Point], params: Sequence[str], fixed: bool, values: Mapping[str, float]
) -> dict[str, float]:
    """Weighted NNLS on relative residuals; parameters no point uses keep their values."""
    import numpy as np
    from scipy.optimize import nnls

    used = [p for p in params if p != FIXED and any(pt.terms.get(p, 0.0) > 0 for pt in points)]
    cols = [*used, FIXED] if fixed else used
    rows, ys = [], []
    for pt in points:
        offset = sum(values.get(k, 0.0) * r for k, r in pt.terms.items() if k not in params)
        scale = np.sqrt(pt.weight) / pt.seconds
        rows.append([pt.terms.get(c, 0.0) if c != FIXED else 1.0 for c in cols])
        ys.append((pt.seconds - offset) * scale)
        rows[-1] = [v * scale for v in rows[-1]]
    a = np.asarray(rows, dtype=float)
    col_scale = np.maximum(np.abs(a).max(axis=0), 1e-300)
    coef, _ = nnls(a / col_scale, np.asarray(ys, dtype=float))
    coef = coef / col_scale
    out = {p: values.get(p, 0.0) for p in params}
    out.update({c: float(v) for c, v in zip(cols, coef, strict=True)})
    return out


def _rel_error(pred: float, seconds: float) -> float:
    return abs(pred - seconds) / seconds


def _apply(params: dict[str, Any], fit: str, new: Mapping[str, float]) -> None:
    if fit.startswith(SQL_PREFIX):
        engine = fit[len(SQL_PREFIX) :]
        params.setdefault("engines", {}).setdefault(engine, {}).update(new)
    else:
        params.update(new)


def refit(
    profile: Mapping[str, Any],
    observations: Sequence[Observation],
    *,
    weight: float = 1.0,
    holdout: float = 0.25,
    seed: int = 0,
    k: float = 3.5,
) -> tuple[dict[str, Any], RefitReport]:
    """Refit ``profile`` (a version-1 profile dict) with ``observations``.

    Returns the new profile (a copy; its ``refit`` entry keeps the observations used, for
    later refits, and a history of refits with this report) and the report. ``weight``: how
    much one observation counts against one calibration point; ``holdout``: the fraction of
    observations held out for the before/after error (0: fit on all, no error reported);
    ``k``: the outlier threshold in robust standard deviations.
    """
    if weight <= 0:
        raise ValueError("weight must be positive")
    if not 0.0 <= holdout < 1.0:
        raise ValueError("holdout must be in [0, 1)")
    old_params = profile.get("parameters", {})
    new_profile: dict[str, Any] = copy.deepcopy(dict(profile))
    params: dict[str, Any] = new_profile.setdefault("parameters", {})
    report = RefitReport({}, weight, holdout, seed, k)

    by_fit: dict[str, list[Observation]] = {}
    for ob in observations:
        try:
            fit_parameters(ob.fit)
        except ValueError:
            report.ignored += 1
            continue
        if not ob.seconds > 0 or any(v < 0 for v in ob.terms.values()):
            report.ignored += 1
            continue
        by_fit.setdefault(ob.fit, []).append(ob)

    # One seeded split over all observations, so a fit's share follows its count.
    flat = [(fit, i) for fit in sorted(by_fit) for i in range(len(by_fit[fit]))]
    n_hold = round(holdout * len(flat))
    if n_hold >= len(flat):
        n_hold = len(flat) - 1
    held = set(random.Random(seed).sample(flat, max(0, n_hold)))

    base = profile_points(profile)
    kept_points: list[dict[str, Any]] = list(profile.get("refit", {}).get("points", []))
    errors_before: list[float] = []
    errors_after: list[float] = []
    for fit in sorted(by_fit):
        obs = by_fit[fit]
        names = fit_parameters(fit)
        fr = FitReport(observations=len(obs))
        report.fits[fit] = fr
        test = [ob for i, ob in enumerate(obs) if (fit, i) in held]
        train = [ob for i, ob in enumerate(obs) if (fit, i) not in held]
        fr.held_out = len(test)
        values = _values(old_params, fit)
        fixed = fit.startswith(SQL_PREFIX)
        old_points = [p for p in base.get(fit, []) if p.seconds > 0]
        new_points = [_Point(dict(o.terms), o.seconds, weight, True, o.source) for o in train]
        new_values = {p: values.get(p, 0.0) for p in names}
        if new_points:
            points = old_points + new_points
            first = _nnls(points, names, fixed, values)
            trial = {**values, **first}
            resid = [(p.seconds - _pred(trial, p.terms, fixed)) / p.seconds for p in points]
            med = statistics.median(resid)
            mad = statistics.median(abs(r - med) for r in resid)
            scale = max(1.4826 * mad, MIN_SCALE)
            keep = [
                p
                for p, r in zip(points, resid, strict=True)
                if not p.new or abs(r - med) <= k * scale
            ]
            fr.rejected = len(points) - len(keep)
            fr.used = len(new_points) - fr.rejected
            used_params = [p for p in names if any(pt.terms.get(p, 0) > 0 for pt in keep)]
            if fixed:
                used_params.append(FIXED)
            if len(keep) < len(used_params):
                fr.note = f"{len(keep)} points for {len(used_params)} parameters: constants kept"
                fr.used = 0
            else:
                new_values = _nnls(keep, names, fixed, values)
                kept_points += [
                    Observation(fit, p.terms, p.seconds, p.source).to_json(weight)
                    for p in keep
                    if p.new
                ]
        changed = {
            p: (values.get(p, 0.0), new_values[p])
            for p in names
            if new_values[p] != values.get(p, 0.0)
        }
        fr.changed = changed
        _apply(params, fit, {p: v for p, v in new_values.items() if p in changed})
        after = {**values, **new_values}
        if test:
            before_e = [_rel_error(_pred(values, o.terms, fixed), o.seconds) for o in test]
            after_e = [_rel_error(_pred(after, o.terms, fixed), o.seconds) for o in test]
            fr.error_before = statistics.median(before_e)
            fr.error_after = statistics.median(after_e)
            errors_before += before_e
            errors_after += after_e
        _update_fits(new_profile.setdefault("fits", {}), fit, params, train, fr)
    if errors_before:
        report.error_before = statistics.median(errors_before)
        report.error_after = statistics.median(errors_after)
    refit_doc = new_profile.setdefault("refit", {})
    refit_doc["points"] = kept_points
    refit_doc.setdefault("history", []).append(report.to_json())
    return new_profile, report


def _pred(values: Mapping[str, float], terms: Mapping[str, float], fixed: bool) -> float:
    total = sum(values.get(k, 0.0) * rows for k, rows in terms.items())
    return total + (values.get(FIXED, 0.0) if fixed else 0.0)


def _update_fits(
    fits: dict[str, Any],
    fit: str,
    params: Mapping[str, Any],
    train: Sequence[Observation],
    fr: FitReport,
) -> None:
    """Keep the profile's per-constant fit records in step with the new constants."""
    if not fr.changed:
        return
    if fit in ROW_GROUPS and len(ROW_GROUPS[fit]) == 1 and fit in fits:
        fits[fit]["slope"] = params[ROW_GROUPS[fit][0]]
    elif fit == "row.join":
        for key, p in (
            ("row.join", "join_input"),
            ("row.join.output", "join_output"),
            ("row.join.examined", "join_examine"),
        ):
            if key in fits:
                fits[key]["slope"] = params[p]
    elif fit == "row.aggregate":
        if "row.aggregate.calls" in fits:
            fits["row.aggregate.calls"]["slope"] = params["agg_incremental"]
            fits["row.aggregate.calls"]["intercept"] = params["agg_base"]
        for key, per in _AGGREGATE_FITS.items():
            if key in fits:
                fits[key]["slope"] = sum(params[p] * m for p, m in per.items())
    elif fit.startswith(SQL_PREFIX):
        engine = fit[len(SQL_PREFIX) :]
        consts = params.get("engines", {}).get(engine, {})
        for k in SQL_TERMS:
            if f"{engine}.{k}" in fits:
                fits[f"{engine}.{k}"]["slope"] = consts.get(k, 0.0)
                fits[f"{engine}.{k}"]["intercept"] = consts.get(FIXED, 0.0)

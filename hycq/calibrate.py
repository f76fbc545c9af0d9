"""``hycq calibrate``: measure this machine's unit costs and write the ``calibrated`` profile.

Every measurement runs the real engines on generated smart-plug data (the catalog is
embedded, so an installed hycq calibrates without the source checkout):

* **row operators**: small queries run entirely on the row engine; each operator's busy time
  (the executor's per-operator metrics) against the tuples it consumed gives seconds per
  tuple. Filter/project/window/RSTREAM from a filter query; the aggregate base and the
  per-call incremental cost from one- and three-call aggregates (a linear fit in the number
  of calls); MIN/MAX from a MAX query; MEDIAN's per-window-tuple rescan from a MEDIAN query;
  the join's per-input and per-output costs from two joins with different fan-outs (NNLS);
* **Arrow conversion**: Python tuples -> Arrow and Arrow -> tuples over growing row counts;
* **columnar engines** (each one of ``--engines``, as the engine registry declares how:
  event-seconds and rate of its runs, engines/*/spec.py): whole queries placed on the engine
  over 5-minute windows that grow while they fill; every slide is one point (window rows,
  SQL seconds). The per-row SQL constants and the fixed per-invocation overhead are fitted
  jointly by NNLS to the analytical model's own terms (``cost_models.analytical.sql_terms``
  of the estimator at that window size), so the fit is exactly the function the optimizer
  evaluates.

The profile records every fit with its points and R^2, and how well the calibrated and the
analytical models predict the measured slide times (median relative error).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cost_models.analytical import (
    KEPT_PREFIXES,
    SQL_TERMS,
    AnalyticalCostModel,
    ColumnarConstants,
    sql_terms,
)
from cost_models.calibrated import LinearFit, default_profile_path, fit_linear, profile_text
from engines import registry
from engines.output_files import check_writable, write_bytes
from engines.registry import Calibration
from hycq.observations import failed_tests
from optimizer.estimate import estimate
from optimizer.ir.catalog import Catalog
from optimizer.ir.errors import OptionError
from optimizer.ir.placement import external_inputs, groups, uniform_placement
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text
from optimizer.statistics import measure

CATALOG = """
[streams.readings]
timestamp = "ts"
time_unit = "s"
rate = 20000

[streams.readings.columns]
id = "BIGINT"
ts = "BIGINT"
value = "DOUBLE"
property = "INTEGER"
plug_id = "INTEGER"
household_id = "INTEGER"
house_id = "INTEGER"

[streams.readings.source]
kind = "generator"
generator = "smartplug"
"""

PLUG = "house_id, household_id, plug_id"
ROW_QUERIES = {
    "filter": "SELECT plug_id, value * 2 AS v FROM readings [RANGE 10 SECONDS] WHERE property = 1",
    "avg": f"SELECT {PLUG}, AVG(value) AS a FROM readings [RANGE 1 MINUTE SLIDE 1 SECOND] "
    f"GROUP BY {PLUG}",
    "count_sum_avg": f"SELECT {PLUG}, COUNT(*) AS n, SUM(value) AS s, AVG(value) AS a "
    f"FROM readings [RANGE 1 MINUTE SLIDE 1 SECOND] GROUP BY {PLUG}",
    "max": f"SELECT {PLUG}, MAX(value) AS m FROM readings [RANGE 1 MINUTE SLIDE 1 SECOND] "
    f"GROUP BY {PLUG}",
    "median": f"SELECT {PLUG}, MEDIAN(value) AS m FROM readings [RANGE 10 SECONDS SLIDE 1 "
    f"SECOND] GROUP BY {PLUG}",
}
#: Q1's correlated join with two thresholds: different fan-outs separate the join's
#: per-input from its per-output cost.
JOIN = (
    "SELECT r.house_id, COUNT(*) AS n FROM readings [RANGE {range} SECONDS SLIDE 1 SECOND] AS r "
    "JOIN (SELECT {plug}, MAX(value) AS m FROM readings [RANGE {range} SECONDS SLIDE 1 SECOND] "
    "WHERE property = 1 GROUP BY {plug}) AS x ON r.house_id = x.house_id AND "
    "r.household_id = x.household_id AND r.plug_id = x.plug_id AND r.value > {f} * x.m "
    "WHERE r.property = 1 GROUP BY r.house_id"
)
COLUMN_QUERIES = {
    "max": f"SELECT {PLUG}, MAX(value) AS m FROM readings [RANGE 5 MINUTES SLIDE 1 SECOND] "
    f"GROUP BY {PLUG}",
    "filter_max": f"SELECT {PLUG}, MAX(value) AS m FROM readings [RANGE 5 MINUTES SLIDE 1 "
    f"SECOND] WHERE property = 1 GROUP BY {PLUG}",
    "project_max": f"SELECT {PLUG}, MAX(v) AS m FROM (SELECT {PLUG}, value * 2 AS v FROM "
    f"readings [RANGE 5 MINUTES SLIDE 1 SECOND]) AS p GROUP BY {PLUG}",
    "join": JOIN.format(range=300, plug=PLUG, f=0.9),
}
#: Q1's join and the aggregate above it on the columnar engine, fed by the row engine (the
#: hybrid plan the optimizer considers for Q1): the only point whose SQL is a hash join of a
#: large window-derived input with a small relation, which separates the join's per-row cost
#: from the scans, selects and aggregates that come with it in the all-columnar queries.
PARTIAL_JOIN = JOIN.format(range=300, plug=PLUG, f=0.9)
#: Q1's join without its threshold (every matched pair is output).
JOIN_EQUI = JOIN.replace(" AND r.value > {f} * x.m", "")
#: Q2's join: the per-plug AVG changes at every slide.
JOIN_AVG = JOIN.replace("MAX(value)", "AVG(value)")
#: The plug count of the join point with large buckets (``join_examine``).
FEW_PLUGS = 100
#: The other plug count of the per-group aggregate cost (``agg_group``): many groups with
#: a few tuples each per slide, where that cost dominates.
MANY_PLUGS = 50_000


@dataclass
class Settings:
    """How much to measure (``quick`` for tests: smaller data, fewer points)."""

    engines: tuple[str, ...] = ("row", "duckdb", "spark")
    rate: float = 20000.0
    row_seconds: Sequence[int] = (15, 30)
    quick: bool = False
    """Columnar engines run their registration's ``quick_seconds`` instead of ``seconds``."""
    conversions: Sequence[int] = (20_000, 100_000, 300_000)
    progress: Callable[[str], None] = field(default=lambda _m: None)
    #: the columnar engines' settings (api.EngineSettings: ``--spark-conf`` etc.; a Spark
    #: cluster's master makes the profile the cluster's)
    engine_settings: Any = None


def quick() -> Settings:
    return Settings(
        engines=("row", "duckdb"), row_seconds=(5, 10), quick=True, conversions=(10_000, 50_000)
    )


def _catalog() -> Catalog:
    return parse_catalog_text(CATALOG, "<calibration catalog>")


def _data(rate: float, seconds: float, plugs: int | None = None) -> Any:
    from engines.sources.smartplug import SmartPlugGenerator

    return SmartPlugGenerator(rate=rate, plugs=plugs).table(seconds)


def _execute(
    query: str,
    data: Any,
    placement: str,
    engine: str = "duckdb",
    partial: Callable[[Any], dict[str, str]] | None = None,
    engine_settings: Any = None,
) -> Any:
    """Run ``query`` over ``data``; ``partial(plan)`` gives an explicit placement instead."""
    from engines.runtime import RunOptions
    from hycq.api import execute

    cat = _catalog()
    plan = plan_query(query, cat)
    return plan, execute(
        plan,
        cat,
        {"readings": data},
        placement=partial(plan) if partial is not None else placement,
        options=RunOptions(),
        column_engine=engine,
        settings=engine_settings,
    )


# -- row engine -----------------------------------------------------------------------------


def _busy(
    name: str, settings: Settings, plugs: int | None = None
) -> list[tuple[str, int, int, float]]:
    """(operator kind, tuples in, tuples out, busy seconds) per operator, over all sizes."""
    out = []
    for seconds in settings.row_seconds:
        data = _data(settings.rate, seconds, plugs)
        query = ROW_QUERIES.get(name, name)
        _, result = _execute(query, data, "row")
        for op_id, m in result.metrics["operators"].items():
            tuples_in = m["tuples_in"] if m["kind"] != "window" else data.num_rows
            out.append((op_id, tuples_in, m["tuples_out"], m["busy_s"]))
    return out


def _per_tuple(rows: list[tuple[str, int, int, float]], prefix: str) -> LinearFit:
    pts = [(n, b) for op, n, _, b in rows if op.startswith(prefix) and n > 0]
    return fit_linear([p[0] for p in pts], [p[1] for p in pts], intercept=False)


def calibrate_row(settings: Settings, fits: dict[str, LinearFit]) -> dict[str, float]:
    """Row-engine constants (seconds per tuple) of the analytical model's structure."""
    p: dict[str, float] = {}
    say = settings.progress
    say("row engine: filter / project / window / rstream")
    f = _busy("filter", settings)
    for key, prefix in (("select", "select"), ("project", "project"), ("window", "window")):
        fits[f"row.{key}"] = _per_tuple(f, prefix)
        p[key] = fits[f"row.{key}"].slope
    # RSTREAM keeps the relation as a bag (r2s per input delta) and emits it whole each
    # slide (rstream_row per output row). Here the two move together (the relation is the
    # filtered window), so the per-row share is kept at the model's value and subtracted,
    # as hycq calibrate --from does with every term a fit does not estimate.
    per_row = AnalyticalCostModel.rstream_row
    r = [(n_in, b - per_row * n_out) for o, n_in, n_out, b in f if o.startswith("rstream")]
    fits["row.r2s"] = fit_linear([x[0] for x in r], [max(0.0, x[1]) for x in r], intercept=False)
    p["r2s"] = fits["row.r2s"].slope
    say("row engine: aggregates")
    # Per group a slide touches (agg_group), at any number of groups: the AVG query over the
    # real plug count and over many plugs with few tuples each; busy = tuples x a + touched
    # groups x g, where a changed group emits a delete and an insert (tuples out / 2).
    xs_in, xs_touch, ys = [], [], []
    for plugs in (None, MANY_PLUGS):
        for op, n_in, n_out, busy in _busy("avg", settings, plugs):
            if op.startswith("aggregate"):
                xs_in.append(n_in)
                xs_touch.append(n_out / 2)
                ys.append(busy)
    coef, r2 = _nnls([xs_in, xs_touch], ys)
    fits["row.aggregate.group"] = LinearFit(
        coef[1], 0.0, r2, tuple(map(float, xs_touch)), tuple(ys)
    )
    p["agg_group"] = coef[1]
    share = AnalyticalCostModel.agg_group_call

    def net(rows: list[tuple[str, int, int, float]], calls: int) -> list[Any]:
        """The aggregates' busy seconds less their touched groups' (agg_group per call)."""
        per_touch = p["agg_group"] * (1.0 + share * (calls - 1)) / 2.0
        return [(o, n, m, max(0.0, b - per_touch * m)) for o, n, m, b in rows]

    per_call = {}
    # (query, its calls, the calls priced per tuple: COUNT(*) is not, cost_models.analytical
    # .count_star)
    for name, calls, priced in (("avg", 1, 1), ("count_sum_avg", 3, 2)):
        rows = net(_busy(name, settings), calls)
        fits[f"row.aggregate.{name}"] = _per_tuple(rows, "aggregate")
        per_call[priced] = fits[f"row.aggregate.{name}"].slope
    inc = fit_linear(list(per_call), list(per_call.values()))
    fits["row.aggregate.calls"] = inc
    p["agg_incremental"] = inc.slope
    p["agg_base"] = inc.intercept
    fits["row.aggregate.max"] = _per_tuple(net(_busy("max", settings), 1), "aggregate")
    p["agg_minmax"] = max(0.0, fits["row.aggregate.max"].slope - p["agg_base"])
    # MEDIAN rescans the window each slide: busy vs (window tuples x slides).
    med = _busy("median", settings)
    pts = []
    for op, n_in, _, busy in med:
        if op.startswith("aggregate"):
            seconds = round(n_in / settings.rate)
            # Slide T rescans the window: min(T, 10) seconds of tuples.
            rescanned = settings.rate * sum(min(t, 10) for t in range(1, seconds + 1))
            pts.append((rescanned, max(0.0, busy - n_in * p["agg_base"])))
    fits["row.aggregate.median_rescan"] = fit_linear(
        [x for x, _ in pts], [y for _, y in pts], intercept=False
    )
    p["agg_recompute_per_window_tuple"] = fits["row.aggregate.median_rescan"].slope
    say("row engine: joins")
    xs_in, xs_out, xs_ex, ys = [], [], [], []
    # Two thresholds and no threshold separate the per-output cost; a per-plug AVG that no
    # reading exceeds twice, on few plugs, is all residual tests that fail (every slide
    # changes every plug's AVG, and each change re-tests its bucket of thousands of tuples).
    for query, plugs in (
        (JOIN.format(range=30, plug=PLUG, f=0.9), None),
        (JOIN.format(range=30, plug=PLUG, f=0.1), None),
        (JOIN_EQUI.format(range=30, plug=PLUG), None),
        (JOIN_AVG.format(range=30, plug=PLUG, f=2.0), FEW_PLUGS),
    ):
        for seconds in settings.row_seconds:
            _, result = _execute(query, _data(settings.rate, seconds, plugs), "row")
            for op_id, m in result.metrics["operators"].items():
                if op_id.startswith("join"):
                    xs_in.append(m["tuples_in"])
                    xs_out.append(m["tuples_out"])
                    xs_ex.append(failed_tests(m))
                    ys.append(m["busy_s"])
    coef, r2 = _nnls([xs_in, xs_out, xs_ex], ys)
    fits["row.join"] = LinearFit(coef[0], 0.0, r2, tuple(map(float, xs_in)), tuple(ys))
    fits["row.join.output"] = LinearFit(coef[1], 0.0, r2, tuple(map(float, xs_out)), tuple(ys))
    fits["row.join.examined"] = LinearFit(coef[2], 0.0, r2, tuple(map(float, xs_ex)), tuple(ys))
    p["join_input"], p["join_output"], p["join_examine"] = coef
    return p


def _nnls(columns: Sequence[Sequence[float]], y: Sequence[float]) -> tuple[list[float], float]:
    """Non-negative least squares of ``y`` on ``columns`` (scaled), and R^2."""
    import numpy as np
    from scipy.optimize import nnls

    a = np.column_stack([np.asarray(c, dtype=float) for c in columns])
    ys = np.asarray(y, dtype=float)
    scale = np.maximum(np.abs(a).max(axis=0), 1e-300)
    coef, _ = nnls(a / scale, ys)
    coef = coef / scale
    pred = a @ coef
    ss_tot = float(((ys - ys.mean()) ** 2).sum())
    r2 = 1.0 - float(((ys - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else 1.0
    return [float(c) for c in coef], r2


# -- Arrow conversion -------------------------------------------------------------------------


def calibrate_conversion(settings: Settings, fits: dict[str, LinearFit]) -> dict[str, float]:
    from engines.arrow_types import arrow_schema
    from engines.row.arrow_ops import table_of
    from engines.row.executor import batch_to_rows
    from optimizer.ir.catalog import Catalog as _Cat

    settings.progress("Arrow conversion")
    cat: _Cat = _catalog()
    stream = cat.get("readings")
    assert stream is not None
    schema = arrow_schema(stream.schema)
    to_x, to_y, from_x, from_y = [], [], [], []
    for n in settings.conversions:
        data = _data(settings.rate, max(1.0, n / settings.rate)).slice(0, n)
        rows = batch_to_rows(data)
        from_x.append(len(rows))
        from_y.append(_best_of(3, batch_to_rows, data))
        to_x.append(len(rows))
        to_y.append(_best_of(3, table_of, rows, schema))
    fits["arrow.to_arrow"] = fit_linear(to_x, to_y)
    fits["arrow.from_arrow"] = fit_linear(from_x, from_y)
    return {"to_arrow": fits["arrow.to_arrow"].slope, "from_arrow": fits["arrow.from_arrow"].slope}


def _best_of(n: int, fn: Callable[..., object], *args: Any) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times)


# -- columnar engines -------------------------------------------------------------------------


@dataclass
class _Point:
    query: str
    rows_in: int
    terms: dict[str, float]
    sql_s: float
    ship_s: float
    inputs: int = 1
    """The group's inputs (``optimizer.ir.placement.external_inputs``)."""


def _column_points(
    engine: str, seconds: int, rate: float, engine_settings: Any = None
) -> list[_Point]:
    """One point per slide of each calibration query placed wholly on ``engine``."""
    points: list[_Point] = []
    cat = _catalog()
    data = _data(rate, seconds)
    many = _data(rate, seconds, MANY_PLUGS)
    runs: list[tuple[str, str, Callable[[Any], dict[str, str]] | None, Any]] = [
        (name, query, None, data) for name, query in COLUMN_QUERIES.items()
    ]
    runs.append(("join_partial", PARTIAL_JOIN, lambda plan: _join_and_above(plan, engine), data))
    # The same aggregate over MANY_PLUGS groups: what separates the per-group cost
    # (``aggregate_large``) from the per-row one.
    runs.append(("filter_max_many", COLUMN_QUERIES["filter_max"], None, many))
    # The per-row SQL constants are those of re-evaluating the window (what the model's
    # terms count), so the calibration queries run without incremental aggregates.
    from engines.assembly import EngineSettings

    plain = EngineSettings(engine_settings.values if engine_settings else {}, incremental=False)
    for name, query, partial, data in runs:
        plan, result = _execute(query, data, "column", engine, partial, plain)
        (mig,) = result.extras["migs"]
        placement = partial(plan) if partial is not None else uniform_placement(plan, engine)
        (group,) = groups(plan, placement)
        # Cardinalities from statistics measured on the data, as the optimizer does (the
        # catalog's defaults would put 10% of the rows through ``property = 1``, not 50%).
        stats = measure(plan, {"readings": data.slice(0, 100_000)})
        first = mig.stats.trace[0].instant if mig.stats.trace else 0
        for t in mig.stats.trace[1:]:  # the first query includes engine warm-up
            # The 5-minute windows hold every tuple since the start, at ``rate`` per second.
            window_rows = rate * min(300.0, float(t.instant - first) + 1.0)  # ts in seconds
            est = estimate(plan, cat, rates=window_rows / 300.0, sample=stats)
            terms = sql_terms(group, est)
            n_in = len(external_inputs(group, plan))
            points.append(_Point(name, t.rows_in, terms, t.sql_s, t.ship_s, n_in))
    return points


def _join_and_above(plan: Any, engine: str) -> dict[str, str]:
    """The placement of :data:`PARTIAL_JOIN`: its join and the aggregate above on ``engine``."""
    (join,) = plan.ids_of("join")
    above = [c for c in plan.consumers(join) if plan.op(c).kind == "aggregate"]
    return {join: engine, **dict.fromkeys(above, engine)}


def calibrate_columnar(
    engine: str, settings: Settings, fits: dict[str, LinearFit]
) -> tuple[ColumnarConstants, list[_Point]]:
    spec = registry.get_columnar(engine, "--engines")
    how = spec.calibration or Calibration()
    seconds = how.quick_seconds if settings.quick else how.seconds
    rate = how.rate
    settings.progress(f"{engine}: queries over growing 5-minute windows ({seconds} slides each)")
    points = _column_points(engine, seconds, rate, settings.engine_settings)
    used = [k for k in SQL_TERMS if any(p.terms[k] > 0 for p in points)]
    cols = [[p.terms[k] for p in points] for k in used] + [[1.0] * len(points)]
    coef, r2 = _nnls(cols, [p.sql_s for p in points])
    defaults = spec.costs
    values = {k: defaults.get(k, 0.0) for k in SQL_TERMS}
    values.update(dict(zip(used, coef[:-1], strict=True)))
    # Incremental aggregates and correlated scans are not measured here (the queries run
    # without them): the engine's declared constants are kept.
    inc = {k: v for k, v in defaults.items() if k.startswith(KEPT_PREFIXES)}
    consts = ColumnarConstants(**values, fixed=coef[-1], **inc)
    for k in used:
        fits[f"{engine}.{k}"] = LinearFit(
            values[k],
            coef[-1],
            r2,
            tuple(p.terms[k] for p in points),
            tuple(p.sql_s for p in points),
        )
    return consts, points


def prediction_error(model: AnalyticalCostModel, engine: str, points: list[_Point]) -> float:
    """Median relative error of ``model``'s SQL time against the measured slides."""
    c = model.engines[engine]
    errs = []
    for p in points:
        pred = c.fixed + sum(getattr(c, k) * rows for k, rows in p.terms.items())
        errs.append(abs(pred - p.sql_s) / p.sql_s if p.sql_s > 0 else 0.0)
    return statistics.median(errs) if errs else float("nan")


# -- driver -----------------------------------------------------------------------------------


def machine(engines: Sequence[str] = ("duckdb",)) -> dict[str, Any]:
    """This machine and the versions of pyarrow and the measured engines."""
    import pyarrow

    out: dict[str, Any] = {
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pyarrow": pyarrow.__version__,
    }
    for engine in engines:
        how = registry.get(engine).calibration
        if how is not None and how.version is not None:
            with contextlib.suppress(ImportError):
                out[engine] = how.version()
    return out


def calibrate(out: Path | None = None, settings: Settings | None = None) -> dict[str, Any]:
    """Measure, fit, write the profile; return a summary (also what the CLI prints)."""
    s = settings or Settings()
    columnar = [e for e in registry.columnar_names() if e in s.engines]
    for engine in columnar:  # before minutes of measuring
        why = registry.missing(engine)
        if why is not None:
            raise OptionError(f"cannot calibrate {engine}: {why}")
    path = out or default_profile_path()
    if out is None:
        with contextlib.suppress(OSError):  # else check_writable says why not
            path.parent.mkdir(parents=True, exist_ok=True)
    check_writable(path, "--out")  # before minutes of measuring
    fits: dict[str, LinearFit] = {}
    start = time.perf_counter()
    params: dict[str, Any] = {}
    if "row" in s.engines:
        params.update(calibrate_row(s, fits))
    params.update(calibrate_conversion(s, fits))
    base = AnalyticalCostModel().with_engines(registry.cost_defaults())
    warnings = floor_unit_costs(params, base)
    model = replace(base, name="calibrated", **params)
    engines = dict(base.engines)
    errors: dict[str, dict[str, float]] = {}
    for engine in columnar:
        consts, points = calibrate_columnar(engine, s, fits)
        engines[engine] = consts
        shipped = [p for p in points if p.rows_in]
        if engine == columnar[0] and shipped:  # Arrow shipping: from the first engine
            # per input handed to the engine, and per Arrow row
            coef, _ = _nnls([[p.inputs for p in shipped], [p.rows_in for p in shipped]],
                            [p.ship_s for p in shipped])  # fmt: skip
            params["ship_input"], params["ship_arrow"] = coef
        model = replace(
            model,
            engines=dict(engines),
            ship_arrow=params.get("ship_arrow", 0.0),
            ship_input=params.get("ship_input", 0.0),
        )
        errors[engine] = {
            "calibrated": prediction_error(model, engine, points),
            "analytical": prediction_error(base, engine, points),
            "points": len(points),
        }
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    where = machine(columnar)
    if s.engine_settings is not None:  # e.g. the Spark master the costs were measured on
        for engine in columnar:
            given = {k: v for k, v in s.engine_settings.of(engine).items() if v is not None}
            if given:
                where[f"{engine}_settings"] = given
    write_bytes(path, profile_text(model, fits, where, created), "--out")
    return {
        "profile": str(path),
        "seconds": time.perf_counter() - start,
        "parameters": dict(params),
        "engines": {e: dataclasses.asdict(c) for e, c in engines.items()},
        "fits": {
            k: {"slope": f.slope, "intercept": f.intercept, "r2": f.r2} for k, f in fits.items()
        },
        "sql_prediction_error": errors,
        "warnings": warnings,
    }


#: Per-tuple costs that are never free: a fit of zero means noise swamped the signal (a
#: busy machine, too few points), not that the work costs nothing.
POSITIVE_UNIT_COSTS = (
    "select",
    "project",
    "window",
    "agg_base",
    "agg_incremental",
    "agg_group",
    "join_input",
    "to_arrow",
    "from_arrow",
)


def floor_unit_costs(params: dict[str, Any], base: AnalyticalCostModel) -> list[str]:
    """Replace unit costs fitted to zero by the analytical value scaled to this machine.

    The scale is the median ratio measured/analytical over the costs that did fit, so a fast
    machine's fallback stays fast. Returns one warning per replaced constant (the CLI prints
    them; rerun ``hycq calibrate`` on a quiet machine to measure them instead).
    """
    fitted = {k: float(params[k]) for k in POSITIVE_UNIT_COSTS if k in params}
    ratios = [v / getattr(base, k) for k, v in fitted.items() if v > 0 and getattr(base, k) > 0]
    speed = statistics.median(ratios) if ratios else 1.0
    warnings = []
    for name, value in fitted.items():
        if value <= 0:
            params[name] = getattr(base, name) * speed
            warnings.append(
                f"{name} fitted to 0 (measurements too noisy); using the analytical "
                f"{1e6 * getattr(base, name):.3g} us x machine speed {speed:.2f} = "
                f"{1e6 * params[name]:.3g} us; rerun hycq calibrate on a quiet machine"
            )
    return warnings

"""Fit cost-model components to per-operator busy times at steady state (issue 20, tenth stop).

Reads ``operator_busy_at_steady_state.py`` JSON files, pairs each measured operator (or a
MIG's parts: its SQL, its kept aggregates, its shipping) with the terms the estimator gives
it, fits the component's constants (least squares on the log ratios, non-negative, so a
0.1 ms operator counts as much as a 20 ms one) and prints each point's measured seconds
beside the current model's and the fit's, with the summary: median |log(model / measured)|
and how many points are within 1.5x.

    python experiments/component_fits.py rstream experiments/results/operator_busy_*.json
    python experiments/component_fits.py join experiments/results/operator_busy_*.json
    python experiments/component_fits.py ship experiments/results/operator_busy_migs_*.json
    python experiments/component_fits.py kept experiments/results/operator_busy_migs_*.json
    python experiments/component_fits.py pane experiments/results/operator_busy_migs_*.json \
        experiments/results/operator_busy_panes_*.json \
        experiments/results/operator_busy_q1_few_10k.json
    python experiments/component_fits.py sql experiments/results/operator_busy_migs_*.json

* ``rstream``: RSTREAM over row input, ``r2s`` per input delta (as measured) and
  ``rstream_row`` per row emitted (the relation, every slide);
* ``join``: row joins, ``join_input`` per input, ``join_output`` per output, ``join_examine``
  per failed residual test (``examined`` less output);
* ``ship``: a MIG's seconds shipping rows in (``transfer_in``), ``ship_input`` per input
  per slide and ``ship_arrow`` per Arrow row;
* ``kept``: a MIG's kept exact-sum aggregates (``kept``, Q4-Q6), ``inc_fixed`` per kept
  aggregate, ``inc_row`` per row entering or leaving, ``inc_group`` per group;
* ``pane`` (eleventh stop): a MIG's kept seconds where it keeps pane partials (Q1, Q3),
  ``pane_fixed`` per paned aggregate and ``pane_row`` per partial row merged; the new
  pane's scan and any exact sums of the same group are priced by the model (``offset``);
* ``sql`` (eleventh stop): a MIG's whole SQL seconds per slide (kept aggregates and the
  statement) against every term the model charges it: DuckDB's ``fixed``, ``op_fixed``,
  per-row terms and ``inc_*``. Eleven constants over some thirty points: read it for where
  the model is off (e.g. by plugs), not as a fit to adopt.

Files written before the tenth stop lack the MIG parts (``sql_u``, ``transfer_in_u``,
``kept_u``); ``ship`` and ``kept`` skip them. Points whose data file is gone are skipped.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from cost_models.analytical import AnalyticalCostModel, transfer_rows
from engines import registry
from hycq.api import load_query
from hycq.planning import Optimized, OptimizerOptions, optimize
from optimizer.ir.placement import external_inputs, groups
from optimizer.ir.plan import Aggregate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script
from experiments.operator_busy_at_steady_state import placement_of

ROOT = Path(__file__).resolve().parents[1]
US = 1e-6

#: A point: (label, terms per constant, measured seconds per second or per slide).
Point = tuple[str, dict[str, float], float]


def _optimized(cache: dict[Any, Optimized], p: dict[str, Any]) -> Optimized | None:
    key = (p["query"], p["rate"], p["data"])
    if key not in cache:
        if not Path(p["data"]).exists():
            return None
        q = load_query(ROOT / "queries" / "smartplug" / f"{p['query']}.sql")
        opts = OptimizerOptions(rate=p["rate"], data={"readings": Path(p["data"])})
        cache[key] = optimize(q, opts)
    return cache[key]


def _label(path: Path, p: dict[str, Any], what: str) -> str:
    return (
        f"{path.stem[14:32]:18s} {p['query']} {p['placement'][:24]:24s} {int(p['rate']):6d} {what}"
    )


def _operator_points(
    paths: list[Path],
    kind: str,
    terms: Callable[[dict[str, Any], Any], dict[str, float]],
    row_plans_only: bool = False,
) -> list[Point]:
    """Every measured operator of ``kind``, its terms from ``terms(measured, estimate)``."""
    out: list[Point] = []
    cache: dict[Any, Optimized] = {}
    for path in paths:
        for p in json.loads(path.read_text())["points"]:
            if row_plans_only and any(o["kind"] == "mig" for o in p["operators"]):
                continue
            opt = _optimized(cache, p)
            if opt is None:
                continue
            for o in p["operators"]:
                if o["kind"] == kind and o["measured_u"] > 0:
                    t = terms(o, opt.estimates[o["operator"]])
                    out.append((_label(path, p, o["operator"]), t, o["measured_u"]))
    return out


def rstream_points(paths: list[Path]) -> list[Point]:
    def terms(o: dict[str, Any], e: Any) -> dict[str, float]:
        # the deltas as measured: the estimator's are 3-6x what runs for Q1 and Q5 (the
        # known over-count of their inner results), which is not RSTREAM's
        emitted = e.cardinality.value * e.invocations_per_second
        return {"r2s": float(o["in_per_s"]), "rstream_row": emitted}

    # over a MIG's Arrow result there are no tuples (arrow_r2s_diff): row plans only
    return _operator_points(paths, "rstream", terms, row_plans_only=True)


def join_points(paths: list[Path]) -> list[Point]:
    def terms(o: dict[str, Any], e: Any) -> dict[str, float]:
        lam, produced = e.total_in.value, e.lambda_out.value
        failed = max(0.0, (e.examined or 0.0) - produced)
        return {"join_input": lam, "join_output": produced, "join_examine": failed}

    return _operator_points(paths, "join", terms)


def _mig_points(paths: list[Path], fn: Callable[..., Point | None]) -> list[Point]:
    out: list[Point] = []
    cache: dict[Any, Optimized] = {}
    for path in paths:
        for p in json.loads(path.read_text())["points"]:
            opt = _optimized(cache, p)
            if opt is None:
                continue
            placement = placement_of(opt.plan, p["placement"])
            for g in groups(opt.plan, placement):
                o = next((o for o in p["operators"] if o["operator"] == f"mig[{g.top}]"), None)
                if o is None:
                    continue
                slides = opt.estimates[g.top].invocations_per_second
                point = fn(path, p, opt, g, o, slides)
                if point is not None:
                    out.append(point)
    return out


def ship_points(paths: list[Path]) -> list[Point]:
    def one(path: Path, p: Any, opt: Optimized, g: Any, o: Any, slides: float) -> Point | None:
        if "transfer_in_u" not in o:
            return None
        tuples, arrow, _ = transfer_rows(g, opt.estimates)
        if tuples:  # tuple inputs: their conversion is priced apart (to_arrow)
            return None
        terms = {"ship_input": float(len(external_inputs(g, opt.plan))), "ship_arrow": arrow}
        return _label(path, p, "transfer in"), terms, o["transfer_in_u"] / slides

    return _mig_points(paths, one)


def kept_points(paths: list[Path]) -> list[Point]:
    from cost_models.analytical import _kept_incrementally

    def one(path: Path, p: Any, opt: Optimized, g: Any, o: Any, slides: float) -> Point | None:
        if "kept_u" not in o or p["query"] not in ("q4", "q5", "q6"):
            return None  # exact sums only (Q1-Q3: correlated counts and pane partials)
        est = opt.estimates
        model: Any = opt.model
        _, replaced = _kept_incrementally(g, est, model.engines[g.engine])
        aggs = [a for a in replaced if isinstance(opt.plan.op(a), Aggregate)]
        if not aggs:
            return None
        terms = {
            "inc_fixed": float(len(aggs)),
            "inc_row": sum(2 * est[a].total_in.value * est[a].slide_seconds for a in aggs),
            "inc_group": sum(est[a].cardinality.value for a in aggs),
        }
        return _label(path, p, f"{len(aggs)} kept"), terms, o["kept_u"] / slides

    return _mig_points(paths, one)


def _paned(opt: Optimized, g: Any, replaced: set[str]) -> list[tuple[str, float, float]]:
    """The group's aggregates kept from pane partials, each with the model's price per
    slide and the partial rows a slide merges (the new pane's and the final merge's)."""
    from cost_models.analytical import _paned_cost, _window_derived, paned_partial_rows
    from optimizer.ir.incremental import paned_input

    est, plan = opt.estimates, opt.plan
    consts = opt.model.engines[g.engine]  # type: ignore[attr-defined]
    out = []
    for a in sorted(replaced):
        reads = paned_input(plan, set(g.operators), a)
        if reads is None or not _window_derived(plan, reads[0]):
            continue
        ext, chain = reads
        window = est[ext].cardinality.value
        entering = est[ext].lambda_out.value * est[ext].slide_seconds
        cost = _paned_cost(consts, window, entering, est[a], bool(chain))
        if cost is not None:
            out.append((a, cost, sum(paned_partial_rows(window, entering, est[a]))))
    return out


def pane_points(paths: list[Path]) -> list[Point]:
    """A MIG's kept seconds per slide where pane partials are kept (Q1, Q3): ``pane_fixed``
    per paned aggregate, ``pane_row`` per partial row the final merge reads; the new pane's
    scan and partial (at the SQL per-row prices) and any exact sums of the group enter at
    the model's price as an ``offset``."""
    from cost_models.analytical import _kept_incrementally

    def one(path: Path, p: Any, opt: Optimized, g: Any, o: Any, slides: float) -> Point | None:
        if "kept_u" not in o:
            return None
        consts = opt.model.engines[g.engine]  # type: ignore[attr-defined]
        total, replaced = _kept_incrementally(g, opt.estimates, consts)
        paned = _paned(opt, g, replaced)
        if not paned:
            return None
        rows = sum(r for _, _, r in paned)
        terms = {
            "pane_fixed": float(len(paned)),
            "pane_row": rows,
            "offset": total - len(paned) * consts.pane_fixed - consts.pane_row * rows,
        }
        return _label(path, p, f"{len(paned)} paned"), terms, o["kept_u"] / slides

    return _mig_points(paths, one)


def sql_points(paths: list[Path]) -> list[Point]:
    """A MIG's whole SQL seconds per slide (``sql``: its kept aggregates' upkeep and the
    statement), against every term the model charges it: the group's ``fixed``, ``op_fixed``
    per re-evaluated operator, the per-row terms of those operators and the ``inc_*`` terms
    of its kept exact sums. What is not fitted here (pane partials, the correlated count's
    saving) enters at the model's price as an ``offset``."""
    from cost_models.analytical import _correlated_saving, _kept_incrementally, _per_op_terms

    def one(path: Path, p: Any, opt: Optimized, g: Any, o: Any, slides: float) -> Point | None:
        if "sql_u" not in o:
            return None
        est = opt.estimates
        consts = opt.model.engines[g.engine]  # type: ignore[attr-defined]
        _, replaced = _kept_incrementally(g, est, consts)
        paned = _paned(opt, g, replaced)
        terms: dict[str, float] = {"fixed": 1.0, "offset": sum(c for _, c, _ in paned)}
        terms["offset"] -= _correlated_saving(g, est, consts, replaced, _per_op_terms(est))
        for a in replaced - {a for a, _, _ in paned}:
            if not isinstance(opt.plan.op(a), Aggregate):
                continue
            terms["inc_fixed"] = terms.get("inc_fixed", 0.0) + 1.0
            rows = 2 * est[a].total_in.value * est[a].slide_seconds
            terms["inc_row"] = terms.get("inc_row", 0.0) + rows
            terms["inc_group"] = terms.get("inc_group", 0.0) + est[a].cardinality.value
        per_op = _per_op_terms(est)
        for op_id in g.operators:
            if op_id in replaced:
                continue
            terms["op_fixed"] = terms.get("op_fixed", 0.0) + 1.0
            for k, rows in per_op[op_id]:
                terms[k] = terms.get(k, 0.0) + rows
        return _label(path, p, "sql"), terms, o["sql_u"] / slides

    return _mig_points(paths, one)


#: The constants a MIG's SQL seconds are priced by (``sql``).
SQL_CONSTANTS = (
    *("fixed", "op_fixed", "select", "project", "aggregate", "aggregate_large"),
    *("join_input", "join_output", "inc_fixed", "inc_row", "inc_group"),
)

COMPONENTS: dict[str, tuple[Callable[[list[Path]], list[Point]], tuple[str, ...]]] = {
    "rstream": (rstream_points, ("r2s", "rstream_row")),
    "join": (join_points, ("join_input", "join_output", "join_examine")),
    "ship": (ship_points, ("ship_input", "ship_arrow")),
    "kept": (kept_points, ("inc_fixed", "inc_row", "inc_group")),
    "pane": (pane_points, ("pane_fixed", "pane_row")),
    "sql": (sql_points, SQL_CONSTANTS),
}


def current(names: tuple[str, ...], engine_first: bool = False) -> dict[str, float]:
    """The constants' values in the analytical model (DuckDB's for the engine's; with
    ``engine_first`` DuckDB's wherever both have one, e.g. ``select``)."""
    model = AnalyticalCostModel().with_engines(registry.cost_defaults())
    duck = model.engines["duckdb"]
    first, then = (duck, model) if engine_first else (model, duck)
    return {n: float(getattr(first, n, None) or getattr(then, n)) for n in names}


def fit(points: list[Point], names: tuple[str, ...], start: dict[str, float]) -> dict[str, float]:
    """Least squares on the log ratios (non-negative constants, from ``start``): a point
    priced at half and one at twice what it measured weigh the same."""
    a = np.array([[t.get(n, 0.0) for n in names] for _, t, _ in points])
    y = np.array([s for _, _, s in points])
    offset = np.array([t.get("offset", 0.0) for _, t, _ in points])
    scale = np.array([max(start[n], 1e-12) for n in names])

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(a @ (x * scale) + offset, 1e-15) / y)

    res = least_squares(residuals, np.ones(len(names)), bounds=(0.0, np.inf))
    return dict(zip(names, (res.x * scale).tolist(), strict=True))


def _predict(values: dict[str, float], terms: dict[str, float]) -> float:
    """Seconds the constants ``values`` give a point; its ``offset`` (a price not fitted)
    is added as it is."""
    return sum(values.get(n, 1.0 if n == "offset" else 0.0) * v for n, v in terms.items())


def summary(points: list[Point], values: dict[str, float]) -> tuple[float, int]:
    logs = [abs(math.log(max(_predict(values, t), 1e-12) / s)) for _, t, s in points]
    return statistics.median(logs), sum(x < math.log(1.5) for x in logs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("component", choices=sorted(COMPONENTS))
    ap.add_argument("files", type=Path, nargs="+", help="operator_busy_at_steady_state.py JSON")
    ap.add_argument("--json", type=Path, help="write the points and both fits here")
    args = ap.parse_args(argv)
    collect, names = COMPONENTS[args.component]
    points = collect(args.files)
    if not points:
        print("no points (files from before the tenth stop lack the MIG parts)")
        return 1
    now = current(names, engine_first=args.component == "sql")
    fitted = fit(points, names, now)
    for label, terms, seconds in points:
        print(
            f"{label}  measured {seconds * 1e3:8.3f} ms  model {_predict(now, terms) * 1e3:8.3f}"
            f"  fit {_predict(fitted, terms) * 1e3:8.3f}"
        )
    for name, values in (("model", now), ("fit", fitted)):
        med, within = summary(points, values)
        consts = ", ".join(f"{n} {v / US:.4g} us" for n, v in values.items())
        print(
            f"{name:5s} {consts}: median |log ratio| {med:.2f}, {within}/{len(points)} within 1.5x"
        )
    if args.json:
        doc = {
            "command": " ".join(["experiments/component_fits.py", *(argv or sys.argv[1:])]),
            "component": args.component,
            "model": now,
            "fit": fitted,
            "points": [{"label": lb, "terms": t, "seconds": s} for lb, t, s in points],
        }
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

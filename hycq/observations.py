"""Observations for ``hycq calibrate --from``: what run metrics and bench records measured.

* a **run metrics** file (``hycq run --metrics PATH.json``; a run of several queries writes
  one per query, ``DIR/<name>.metrics.json``, in the same format): every row operator's busy
  seconds against the tuples it processed (select, project, window, RSTREAM, tree joins,
  aggregates without MEDIAN-like calls), and every columnar group's per-slide trace (rows,
  SQL seconds), against the analytical model's ``sql_terms`` at that slide's window fill;
* a **bench** file (``hycq bench --json PATH.json``, a list of records): for each record
  whose plan has one columnar group, the median slide time (shipping + SQL + hand-back) at
  full windows; shipping and hand-back are known terms (the profile's Arrow constants).

Planning again needs the query: run metrics name it (``query.path``, ``query.catalog``,
``query.join_order``; metrics from before that have only their row operators' select,
project, RSTREAM and join observations), bench records by their ``query`` path. Statistics
come from a sample of the catalog's sources, as ``hycq explain`` measures them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cost_models.analytical import AnalyticalCostModel, count_star, sql_terms, transfer_rows
from cost_models.refit import SQL_PREFIX, Observation
from optimizer.ir.errors import OptionError, UserError
from optimizer.ir.plan import Aggregate, LogicalPlan, Window, WindowKind

#: Row operators' busy times under this many seconds are timer noise, not a cost.
MIN_BUSY_S = 1e-5


@dataclass
class Extracted:
    """The observations of one file and what was skipped (for warnings)."""

    path: Path
    kind: str
    observations: list[Observation] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise OptionError(f"--from {path}: no such file") from None
    except IsADirectoryError:
        raise OptionError(
            f"--from {path}: is a directory", hint="name the metrics or bench JSON files in it"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise OptionError(f"--from {path}: cannot read: {err}") from None
    except json.JSONDecodeError as err:
        raise OptionError(
            f"--from {path}:{err.lineno}:{err.colno}: not JSON ({err.msg})",
            hint="give files written by 'hycq run --metrics' or 'hycq bench --json'",
        ) from None


def extract(path: Path, planner: Planner | None = None) -> Extracted:
    """The observations in one run-metrics or bench file (OptionError for anything else)."""
    doc = read_json(path)
    planner = planner or Planner()
    hint = "give files written by 'hycq run --metrics' or 'hycq bench --json'"
    if isinstance(doc, list):
        if not all(isinstance(r, dict) and {"query", "rate", "measured"} <= r.keys() for r in doc):
            raise OptionError(
                f"--from {path}: a list, but not of 'hycq bench --json' records "
                "(each needs 'query', 'rate' and 'measured')",
                hint=hint,
            )
        out = Extracted(path, "bench")
        for i, record in enumerate(doc):
            _bench_record(record, f"{path}[{i}]", planner, out)
        return out
    if isinstance(doc, dict) and isinstance(doc.get("operators"), dict):
        out = Extracted(path, "metrics")
        _metrics(doc, str(path), planner, out)
        return out
    if isinstance(doc, dict) and doc.get("format") == 1 and "fits" in doc:
        raise OptionError(
            f"--from {path}: is a calibration profile, not measurements",
            hint="start from it with --profile; --from takes run metrics and bench files",
        )
    raise OptionError(
        f"--from {path}: neither run metrics (an object with 'operators') nor bench records "
        "(a list)",
        hint=hint,
    )


def extract_all(
    paths: Iterable[Path], warn: Callable[[str], object]
) -> tuple[list[Observation], list[Extracted]]:
    """Every file's observations; a file without any is a warning, not an error."""
    planner = Planner()
    done = [extract(Path(p), planner) for p in paths]
    obs: list[Observation] = []
    for e in done:
        if not e.observations:
            why = "; ".join(e.skipped[:3]) or "nothing measured per operator or slide"
            warn(f"{e.path}: no usable observations ({why})")
        obs += e.observations
    return obs, done


# -- planning the measured query again ---------------------------------------------------------


class Planner:
    """Plans and estimates per (query, catalog, rate, engine, join order), cached."""

    def __init__(self) -> None:
        self._opt: dict[tuple[Any, ...], Any] = {}
        self._est: dict[tuple[Any, ...], Any] = {}

    def optimized(
        self, query: str, catalog: str | None, rate: float, engine: str, order: Any
    ) -> Any:
        from hycq import api
        from hycq.planning import OptimizerOptions, optimize

        join_order = _join_order(order)
        key = (query, catalog, rate, engine, join_order)
        if key not in self._opt:
            q = api.load_query(query, Path(catalog) if catalog else None)
            opts = OptimizerOptions(
                rate=rate,
                engines=("row", engine),
                cost_model="analytical",
                join_order=join_order,
            )
            self._opt[key] = optimize(q, opts)
        return self._opt[key]

    def estimates(self, opt: Any, rate: float) -> Any:
        from optimizer.estimate import estimate

        key = (id(opt), round(rate, 6))
        if key not in self._est:
            self._est[key] = estimate(
                opt.plan,
                opt.query.catalog,
                rates=rate,
                sample=opt.statistics,
                measured=opt.measured,
            )
        return self._est[key]


def _join_order(order: Any) -> tuple[tuple[str, ...], ...] | None:
    if not order:
        return None
    if all(isinstance(a, str) for a in order):
        return (tuple(order),)
    return tuple(tuple(chain) for chain in order)


# -- run metrics --------------------------------------------------------------------------------


def _metrics(m: Mapping[str, Any], where: str, planner: Planner, out: Extracted) -> None:
    ops: Mapping[str, Any] = m["operators"]
    query = m.get("query") or {}
    rate = _rate(m)
    opt = None
    mig_engines = {o.get("engine") for o in ops.values() if o.get("kind") == "mig"}
    engine = next(iter(sorted(e for e in mig_engines if e)), "duckdb")
    if query.get("path"):
        try:
            opt = planner.optimized(
                query["path"], query.get("catalog"), rate, engine, query.get("join_order")
            )
        except UserError as err:
            out.skipped.append(f"cannot plan {query['path']} again: {err.message}")
        if opt is not None and not set(m.get("placement", {})) <= set(opt.plan.topological()):
            out.skipped.append("the planned query's operator ids differ from the run's")
            opt = None
    else:
        out.skipped.append("no 'query' in the metrics (aggregates and columnar groups skipped)")
    plan: LogicalPlan | None = opt.plan if opt is not None else None
    streams = m.get("inputs") or {}
    for op_id, o in ops.items():
        if o.get("kind") == "mig":
            if opt is None:
                continue
            _mig(op_id, o, m, opt, rate, planner, where, out)
            continue
        if o.get("engine", "row") != "row":
            continue
        ob = _row_op(op_id, o, plan, m.get("tuples_in"), len(streams), where)
        if ob is not None:
            out.observations.append(ob)


def _rate(m: Mapping[str, Any]) -> float:
    rate = m.get("rate")
    if isinstance(rate, int | float) and rate > 0:
        return float(rate)
    seconds = m.get("event_seconds") or 0
    return float(m.get("tuples_in", 0)) / seconds if seconds else 0.0


def failed_tests(metrics: Mapping[str, Any]) -> int:
    """Residual tests a row join's probes made that failed: the stored tuples tested
    (``join.examined`` of its run metrics) less those output; 0 for a join without a
    residual, or metrics from before the count."""
    examined = int((metrics.get("join") or {}).get("examined") or 0)
    return max(0, examined - int(metrics.get("tuples_out") or 0)) if examined else 0


def _row_op(
    op_id: str,
    o: Mapping[str, Any],
    plan: LogicalPlan | None,
    stream_tuples: Any,
    n_streams: int,
    where: str,
) -> Observation | None:
    busy = float(o.get("busy_s") or 0.0)
    n_in = float(o.get("tuples_in") or 0)
    n_out = float(o.get("tuples_out") or 0)
    kind = o.get("kind")
    if busy < MIN_BUSY_S:
        return None
    source = f"{where}:{op_id}"
    if kind in ("select", "project") and n_in > 0:
        return Observation(f"row.{kind}", {kind: n_in}, busy, source)
    if kind == "rstream" and n_in > 0:
        # per input delta (fitted) and per row emitted (rstream_row, kept at its value)
        return Observation("row.r2s", {"r2s": n_in, "rstream_row": n_out}, busy, source)
    if kind == "join" and n_in > 0 and (o.get("join") or {}).get("impl", "tree") == "tree":
        terms = {"join_input": n_in, "join_output": n_out}
        failed = failed_tests(o)
        if failed:
            terms["join_examine"] = float(failed)
        return Observation("row.join", terms, busy, source)
    if kind == "window" and n_streams == 1 and stream_tuples:
        # a window's input is its stream (the calibration counts it the same way)
        return Observation("row.window", {"window": float(stream_tuples)}, busy, source)
    if kind == "aggregate" and plan is not None and n_in > 0:
        op = plan.op(op_id)
        if not isinstance(op, Aggregate):
            return None
        stars = sum(1 for c in op.aggs if count_star(c))  # no cost of their own
        inc = sum(1 for c in op.aggs if c.incremental and c.func not in ("MIN", "MAX")) - stars
        mm = sum(1 for c in op.aggs if c.func in ("MIN", "MAX"))
        if inc + mm + stars != len(op.aggs):  # MEDIAN-like calls rescan the window
            return None
        terms = {"agg_base": n_in, "agg_incremental": inc * n_in, "agg_minmax": mm * n_in}
        # The groups its slides touched: a changed group emits a delete and an insert. The
        # refit subtracts the profile's agg_group for them (it does not fit agg_group).
        calls = 1.0 + AnalyticalCostModel.agg_group_call * max(0, len(op.aggs) - 1)
        if n_out > 0:
            terms["agg_group"] = calls * n_out / 2.0
        return Observation("row.aggregate", terms, busy, source)
    return None


def _range_seconds(plan: LogicalPlan, tick_s: float) -> float | None:
    sizes = []
    for op_id in plan.topological():
        op = plan.op(op_id)
        if isinstance(op, Window):
            if op.window is not WindowKind.RANGE or op.size is None:
                return None
            sizes.append(op.size * tick_s)
    return max(sizes) if sizes else None


def _tick_seconds(plan: LogicalPlan) -> float:
    from engines.runtime.inputs import plan_time_unit
    from optimizer.ir.catalog import TIME_UNITS_MS

    return TIME_UNITS_MS[plan_time_unit(plan)] / 1000.0


def _mig(
    op_id: str,
    o: Mapping[str, Any],
    m: Mapping[str, Any],
    opt: Any,
    rate: float,
    planner: Planner,
    where: str,
    out: Extracted,
) -> None:
    from optimizer.ir.placement import Group

    trace = o.get("trace")
    engine = o.get("engine")
    members = tuple(o.get("operators") or ())
    if not trace and any(v.get("merges") for v in (o.get("incremental") or {}).values()):
        # Slides that read incrementally kept aggregates are not re-evaluations of the
        # window, which is what the SQL constants price (engines.mig.MigOp._trace).
        out.skipped.append(f"{op_id}: its aggregates were kept incrementally at every slide")
        return
    if not trace or not engine or not members:
        out.skipped.append(f"{op_id}: no per-slide trace (metrics of an older hycq)")
        return
    plan = opt.plan
    top = op_id[4:-1] if op_id.startswith("mig[") and op_id.endswith("]") else members[-1]
    if top not in members or not set(members) <= set(plan.topological()):
        out.skipped.append(f"{op_id}: its operators are not in the planned query")
        return
    tick_s = _tick_seconds(plan)
    range_s = _range_seconds(plan, tick_s)
    if range_s is None or rate <= 0:
        out.skipped.append(f"{op_id}: window fill unknown (not all windows are RANGE)")
        return
    group = Group(engine, members, top)
    origin = (m.get("timeline") or {}).get("origin", trace[0][0])
    for instant, _rows, sql_s in trace[1:]:  # the first query includes engine warm-up
        filled = min(1.0, (float(instant - origin) + 1.0) * tick_s / range_s)
        est = planner.estimates(opt, rate * filled)
        terms = {k: v for k, v in sql_terms(group, est).items() if v > 0}
        if terms and sql_s > 0:
            out.observations.append(
                Observation(f"{SQL_PREFIX}{engine}", terms, float(sql_s), f"{where}:{op_id}")
            )


# -- bench records ------------------------------------------------------------------------------


def _bench_record(r: Mapping[str, Any], where: str, planner: Planner, out: Extracted) -> None:
    from hycq.query import resolve_placement
    from optimizer.ir.placement import external_inputs, groups

    placement = r.get("placement") or {}
    slide_ms = (r.get("measured") or {}).get("slide_ms_p50")
    engines = {e for e in placement.values() if e != "row"}
    if not engines or slide_ms is None:
        out.skipped.append(f"{where}: a row-engine plan (bench records no per-operator times)")
        return
    if len(engines) > 1:
        out.skipped.append(f"{where}: several columnar engines")
        return
    if not (r.get("warm_start") or {}).get("complete", True):
        out.skipped.append(f"{where}: the warm start did not fill the windows")
        return
    (engine,) = engines
    query = str(r["query"])
    if not Path(query).is_file():
        out.skipped.append(f"{where}: query file {query} not found")
        return
    try:
        opt = planner.optimized(query, None, float(r["rate"]), engine, None)
        full = resolve_placement(opt.plan, dict(placement), engine)
    except UserError as err:
        out.skipped.append(f"{where}: cannot plan {query} again: {err.message}")
        return
    found = groups(opt.plan, full)
    if len(found) != 1:
        out.skipped.append(f"{where}: {len(found)} columnar groups (one slide time for all)")
        return
    (group,) = found
    est = planner.estimates(opt, float(r["rate"]))
    terms = {k: v for k, v in sql_terms(group, est).items() if v > 0}
    ship_tuples, ship_arrow, rows_out = transfer_rows(group, est)
    terms.update(
        ship_input=len(external_inputs(group, opt.plan)),
        to_arrow=ship_tuples,
        ship_arrow=ship_arrow,
        from_arrow=rows_out,
    )
    out.observations.append(
        Observation(f"{SQL_PREFIX}{engine}", terms, float(slide_ms) / 1e3, where)
    )

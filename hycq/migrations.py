"""Planning a run's migrations: ``--migrate AT=TARGET.json``, ``--migration``, ``--adapt``.

Everything is checked before the run starts (exit 2 with what, where and how to fix):
each TARGET.json is read and resolved to a plan of the query (its join order rewired from
the query as ``explain --join-order`` does, so op ids match what explain prints) and a
complete placement, and the strategy is checked against the plans it moves between.

TARGET.json::

    {"join_order": ["s", "r", "t"],            optional: FROM aliases, left-deep order
                                                (several join chains: a list of lists);
                                                absent: the order of the plan migrated from
     "placement": "auto" | "row" | "column" | {"<op id>": "<engine>", ...}}   required

``auto`` runs Phase Two on the target's plan; ``column`` is the run's --column-engine;
a mapping names operators of the *target* plan (unnamed ones run on the row engine).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engines.migration.request import MigrationRequest, ScheduledMigration
from optimizer.ir.errors import OptionError, UserError
from optimizer.ir.limits import LIMIT
from optimizer.ir.plan import LogicalPlan
from optimizer.phase_one import chain_aliases, join_chains

if TYPE_CHECKING:  # pragma: no cover
    from hycq.planning import Optimized, OptimizerOptions
    from hycq.query import LoadedQuery, PlacementRequest

TARGET_KEYS = ("join_order", "placement")


@dataclass(frozen=True)
class MigrationOptions:
    """The run's migration flags. ``migrate``: (AT seconds, TARGET.json) in the order given."""

    migrate: tuple[tuple[float, Path], ...] = ()
    strategy: str = "auto"
    adapt: bool = False
    reoptimize_every: float | None = None

    def __post_init__(self) -> None:
        """Flag combinations that cannot mean anything (exit 2), for every caller."""
        if self.reoptimize_every is not None and not self.adapt:
            raise OptionError(
                "--reoptimize-every is only for --adapt", hint="add --adapt or drop it"
            )
        if self.strategy != "auto" and not self.requested:
            raise OptionError(
                f"--migration {self.strategy} without a migration",
                hint="add --migrate AT=TARGET.json or --adapt",
            )

    @property
    def requested(self) -> bool:
        return bool(self.migrate) or self.adapt


#: Event-seconds between the controller's checks when --reoptimize-every is not given.
DEFAULT_REOPTIMIZE_EVERY_S = 10.0


def parse_migrate(spec: str) -> tuple[float, Path]:
    """``AT=TARGET.json`` -> (AT, path); AT event-seconds after the first tuple, >= 0."""
    at_text, sep, path = spec.partition("=")
    if not sep or not at_text.strip() or not path:
        raise OptionError(
            f"--migrate expects AT=TARGET.json, got '{spec}'",
            hint="e.g. --migrate 30=target.json (30 event-seconds after the first tuple)",
        )
    try:
        at = float(at_text)
    except ValueError:
        raise OptionError(
            f"--migrate {spec}: AT '{at_text}' is not a number",
            hint="AT is event-seconds after the first tuple, e.g. --migrate 30=target.json",
        ) from None
    if not math.isfinite(at) or not 0 <= at <= LIMIT:
        raise OptionError(
            f"--migrate {spec}: AT must be a number >= 0 and at most {LIMIT:g}, got '{at_text}'",
            hint="AT is event-seconds after the first tuple, e.g. --migrate 30=target.json",
        )
    if Path(path).suffix.lower() != ".json":
        raise OptionError(
            f"--migrate {spec}: the target must be a .json file, got '{path}'",
            hint='write the target as JSON, e.g. {"join_order": ["s", "r"], "placement": "row"}',
        )
    return at, Path(path)


def order_label(plan: LogicalPlan) -> list[Any] | None:
    """A plan's join order as FROM aliases: one list for one join chain, a list of lists
    for several, None without joins."""
    orders = [list(chain_aliases(plan, c)) for c in join_chains(plan)]
    if not orders:
        return None
    return orders[0] if len(orders) == 1 else orders


def same_order(a: LogicalPlan, b: LogicalPlan) -> bool:
    return order_label(a) == order_label(b)


def read_target(path: Path) -> dict[str, Any]:
    """A TARGET.json object with its keys checked (values are checked when resolved)."""
    where = f"migration target {path}"
    try:
        obj = json.loads(path.read_text(encoding="utf-8-sig"), object_pairs_hook=_unique)
    except _Dup as dup:
        raise OptionError(f"{where}: key '{dup.key}' is given twice", hint="give it once") from None
    except FileNotFoundError:
        raise OptionError(
            f"{where} not found", hint="give the path of a TARGET.json file"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise OptionError(f"cannot read {where}: {err}", hint="check the file") from None
    except json.JSONDecodeError as err:
        raise OptionError(
            f"{where}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}",
            hint='e.g. {"join_order": ["s", "r"], "placement": "row"}',
        ) from None
    example = '{"join_order": ["s", "r"], "placement": "row"}'
    if not isinstance(obj, dict):
        raise OptionError(f"{where} must be a JSON object", hint=f"e.g. {example}")
    unknown = sorted(set(obj) - set(TARGET_KEYS))
    if unknown:
        raise OptionError(
            f"{where}: unknown key {', '.join(repr(k) for k in unknown)}",
            hint=f"the keys are {' and '.join(TARGET_KEYS)}, e.g. {example}",
        )
    if "placement" not in obj:
        raise OptionError(
            f"{where}: 'placement' is missing",
            hint='give "placement": "auto", "row", "column" or {"<op id>": "<engine>"}',
        )
    return obj


class _Dup(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Dup(k)
        out[k] = v
    return out


def _join_order(value: Any, where: str) -> tuple[tuple[str, ...], ...]:
    if isinstance(value, list) and value and all(isinstance(a, str) for a in value):
        return (tuple(a.strip().lower() for a in value),)
    if (
        isinstance(value, list)
        and value
        and all(isinstance(c, list) and c and all(isinstance(a, str) for a in c) for c in value)
    ):
        return tuple(tuple(a.strip().lower() for a in c) for c in value)
    raise OptionError(
        f"{where}: 'join_order' must be a list of FROM aliases (or a list of such lists, one "
        "per join chain)",
        hint='e.g. "join_order": ["s", "r", "t"]',
    )


def resolve_target(
    q: LoadedQuery,
    path: Path,
    base: OptimizerOptions,
    samples: Mapping[str, Any] | None,
    current_order: tuple[tuple[str, ...], ...] | None,
    column_engine: str,
) -> tuple[LogicalPlan, dict[str, str], dict[str, Any]]:
    """(plan, complete placement, label) of a TARGET.json; UserError naming the file."""
    from hycq.planning import optimize
    from hycq.query import resolve_placement

    obj = read_target(path)
    where = f"migration target {path}"
    order = _join_order(obj["join_order"], where) if "join_order" in obj else current_order
    try:
        opt = optimize(q, dataclasses.replace(base, join_order=order), samples=samples)
    except UserError as err:
        raise type(err)(f"{where}: {err.message}", hint=err.hint) from None
    placement = obj["placement"]
    if isinstance(placement, str) and placement in ("auto", "row", "column"):
        chosen: PlacementRequest = opt.placement if placement == "auto" else placement
    elif isinstance(placement, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in placement.items()
    ):
        chosen = placement
    else:
        some = (opt.plan.r2r_ids() or ["join1"])[0]
        raise OptionError(
            f'{where}: \'placement\' must be "auto", "row", "column" or an object mapping '
            "operator ids to engines",
            hint=f'e.g. "placement": {{"{some}": "duckdb"}} (ids as '
            "'hycq explain --join-order ... --json' prints them)",
        )
    try:
        engines = resolve_placement(opt.plan, chosen, column_engine)
    except UserError as err:
        raise type(err)(
            f"{where}: {err.message}",
            hint=(err.hint or "")
            + (" (" if err.hint else "(")
            + "op ids of the target plan: "
            + ", ".join(opt.plan.topological())
            + ")",
        ) from None
    return opt.plan, engines, {"join_order": order_label(opt.plan)}


def plan_schedule(
    q: LoadedQuery,
    initial: tuple[LogicalPlan, dict[str, str]],
    options: MigrationOptions,
    base: OptimizerOptions,
    samples: Mapping[str, Any] | None,
    column_engine: str,
) -> list[ScheduledMigration]:
    """Every ``--migrate`` resolved and its strategy checked, in event-time order (a
    target without ``join_order`` keeps the order of the plan before it)."""
    from engines.migration import strategies

    if options.strategy != "auto":
        strategies.get(options.strategy)  # unknown / not available: exit 2 now
    out = []
    current_plan, current_placement = initial
    for at, path in sorted(options.migrate, key=lambda m: m[0]):
        order = _order_key(current_plan)
        plan, placement, label = resolve_target(q, path, base, samples, order, column_engine)
        old = (current_plan, current_placement)
        new = (plan, placement)
        try:
            if options.strategy == "auto":
                strategies.choose_auto(old, new, same_order(current_plan, plan))
            else:
                strategies.check(options.strategy, old, new)
        except UserError as err:
            raise type(err)(f"--migrate {at:g}={path}: {err.message}", hint=err.hint) from None
        request = MigrationRequest(
            plan,
            placement,
            options.strategy,
            {"kind": "scripted"},
            label_to=label,
        )
        out.append(ScheduledMigration(at, request, f"--migrate {at:g}={path}"))
        current_plan, current_placement = plan, placement
    return out


def _order_key(plan: LogicalPlan) -> tuple[tuple[str, ...], ...] | None:
    orders = tuple(tuple(a.lower() for a in chain_aliases(plan, c)) for c in join_chains(plan))
    return orders or None


def make_adaptive(
    q: LoadedQuery,
    opt: Optimized,
    base: OptimizerOptions,
    options: MigrationOptions,
    ticks_per_second: int,
    engines: dict[str, str],
) -> tuple[Any, Any, int]:
    """(controller, monitor, check_every ticks) for ``--adapt``: the drift policy of
    ``hycq.adapt`` over the run's starting plan ``opt.plan`` placed as ``engines``, and the
    run-time statistics monitor the driver feeds."""
    from engines.migration.monitor import RuntimeMonitor
    from hycq import adapt

    every = options.reoptimize_every or DEFAULT_REOPTIMIZE_EVERY_S
    every_ticks = max(1, round(every * ticks_per_second))
    controller = adapt.make_controller(
        q,
        base,
        opt.plan,
        engines,
        opt.phase_one.orders,
        every_ticks,
        ticks_per_second,
        planned_on=opt,
        strategy=options.strategy,
    )
    monitor = RuntimeMonitor(opt.plan, ticks_per_second)
    return controller, monitor, every_ticks


def plan_with_order(
    q: LoadedQuery, join_order: str | None, base: OptimizerOptions | None = None
) -> LogicalPlan:
    """The query's plan with the joins in ``join_order`` (``--join-order`` syntax; None:
    the optimizer's order), without sampling: for building targets in code and tests."""
    from hycq.planning import OptimizerOptions, optimize
    from optimizer.phase_one import parse_join_order

    opts = base or OptimizerOptions(sample=False)
    order = parse_join_order(join_order) if join_order is not None else None
    return optimize(q, dataclasses.replace(opts, join_order=order)).plan

"""The migration strategies by name, and how ``auto`` chooses among them.

Each strategy is a :class:`StrategySpec`; ``start(ctx)`` begins a migration from the
context (old and new plan, replay buffer, streams' progress) and returns the
:class:`~engines.migration.generic.ActiveMigration` the driver runs until it is done.

The row-level strategies of the research spec (MS, JISC, PT, HybMig: state moved between
two row executors by signature) are listed but not available until their implementation
is registered; wiring one is one call, e.g.::

    register(StrategySpec("ms", "...", start=transfer_strategy(move_states), row_only=True))

``auto`` (:func:`choose_auto`) picks, for what changes between the two plans:

* nothing: no migration (recorded as ``none``);
* a placement change (any operator moved between engines, with or without a new join
  order): **gms** when the running plan cannot keep up (the controller's ``infeasible``
  trigger: GPT would keep it running for a window horizon) or when ``--adapt`` asked (GPT
  would keep the controller waiting for a window horizon); else **gpt** when every window
  is time-based (no output gap, nothing replayed: the
  old plan keeps answering while the new one fills its windows, for one window horizon);
  **gms** when a ROWS window makes GPT inapplicable;
* a join-order change of a plan that runs entirely on the row engine: **jisc** when
  available (no gap, states completed lazily per key), else **ms** when available (states
  moved, the changed joins recomputed), else **gms**;
* an UNBOUNDED window (or a tuple-count slide) rules the replay-based strategies out:
  jisc or ms if available, else the run is refused before it starts (exit 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engines.migration.generic import (
    ActiveMigration,
    MigrationContext,
    ParallelMigration,
    ReplayMigration,
)
from engines.migration.replay import replay_horizons
from optimizer.ir.errors import OptionError, PlanError, did_you_mean
from optimizer.ir.plan import LogicalPlan, Window, WindowKind

StartMigration = Callable[[MigrationContext], ActiveMigration]

#: GHM replays at most this many tuples per call into the driver.
GHM_CHUNK_ROWS = 2048


@dataclass(frozen=True)
class StrategySpec:
    """One migration strategy. ``start`` None: named but not available (yet)."""

    name: str
    summary: str
    start: StartMigration | None
    replay: bool = False
    """Rebuilds state from the replay buffer (needs bounded, time-sliding windows)."""
    time_windows_only: bool = False
    """Needs every window to be RANGE/NOW (GPT waits for tuples to expire by time)."""
    row_only: bool = False
    """Moves row-engine state: both plans must run every operator on the row engine."""
    precheck: Callable[[LogicalPlan, LogicalPlan], None] | None = None
    """Raises PlanError when the strategy cannot migrate from the first plan to the second
    whatever the data (their shapes: windows, join trees, stateful operators), so that
    :func:`check` refuses before the run instead of at the migration point."""


_REGISTRY: dict[str, StrategySpec] = {}


def register(spec: StrategySpec) -> None:
    """Add or replace a strategy (the row-level ones are wired this way)."""
    _REGISTRY[spec.name] = spec


def names() -> tuple[str, ...]:
    return ("auto", *_REGISTRY)


def available(name: str) -> bool:
    spec = _REGISTRY.get(name)
    return spec is not None and spec.start is not None


def get(name: str, option: str = "--migration") -> StrategySpec:
    """The strategy called ``name``; OptionError (exit 2) if unknown or not available."""
    spec = _REGISTRY.get(name)
    if spec is None:
        raise OptionError(
            f"{option}: unknown migration strategy '{name}'",
            hint=did_you_mean(name, names()) or f"strategies: {', '.join(names())}",
        )
    if spec.start is None:
        ready = [n for n in _REGISTRY if available(n)]
        raise OptionError(
            f"{option}: migration strategy '{name}' is not available in this build",
            hint=f"use auto or one of {', '.join(ready)}",
        )
    return spec


def transfer_strategy(
    transfer: Callable[[Any, Any], Any],
) -> StartMigration:
    """A strategy from a state-transfer function ``transfer(old, new) -> TransferStats``
    over two row executors (MS, JISC): done at the migration point."""

    def start(ctx: MigrationContext) -> ActiveMigration:
        stats = transfer(ctx.old.executor, ctx.new.executor)
        active = ActiveMigration(ctx, done=True)
        for key in ("states_moved", "states_recomputed", "keys_completed"):
            active.stats[key] = getattr(stats, key, active.stats[key])
        active.stats["tuples_replayed"] = 0
        return active

    return start


def _unavailable(name: str, summary: str, row_only: bool = True) -> StrategySpec:
    return StrategySpec(name, summary, None, row_only=row_only)


register(
    StrategySpec(
        "gms",
        "generic moving state: replay the buffered input into the new plan, then switch",
        lambda ctx: ReplayMigration(ctx, None),
        replay=True,
    )
)
register(
    StrategySpec(
        "gpt",
        "generic parallel track: run both plans until the old plan's tuples have expired",
        ParallelMigration,
        replay=False,
        time_windows_only=True,
    )
)
register(
    StrategySpec(
        "ghm",
        "generic hybrid: replay in the background while the old plan answers",
        lambda ctx: ReplayMigration(ctx, GHM_CHUNK_ROWS),
        replay=True,
    )
)
register(_unavailable("ms", "moving state: row states moved by signature, the rest recomputed"))
register(_unavailable("jisc", "JISC: states completed lazily per key"))
register(_unavailable("pt", "parallel track: both plans, each result from exactly one"))
register(_unavailable("hybmig", "hybrid migration"))


# -- checking and choosing ---------------------------------------------------------------------


def check(
    name: str,
    old: tuple[LogicalPlan, dict[str, str]],
    new: tuple[LogicalPlan, dict[str, str]],
    precheck: bool = True,
) -> StrategySpec:
    """The strategy ``name`` if it can migrate between the two plans, else a UserError
    saying why (exit 2, before the run starts). ``precheck`` False checks only what holds
    for every target of these plans' query (windows, engines), not the pair's shapes."""
    spec = get(name)
    for plan, placement in (old, new):
        if spec.replay:
            replay_horizons(plan)  # PlanError for UNBOUNDED windows and count slides
        if spec.time_windows_only:
            for op in plan.operators():
                if isinstance(op, Window) and (
                    op.window not in (WindowKind.RANGE, WindowKind.NOW) or op.slide_rows
                ):
                    raise PlanError(
                        f"--migration {name}: {op.id} [{op.spec}] is not a time-based window; "
                        f"{name} waits for the old plan's tuples to leave every window by time",
                        hint="use --migration gms or ghm",
                    )
        if spec.row_only and any(e != "row" for e in placement.values()):
            raise PlanError(
                f"--migration {name} moves row-engine state: every operator of both plans "
                "must run on the row engine",
                hint="use --migration gpt, gms or ghm for placements with columnar engines",
            )
    if precheck and spec.precheck is not None:
        try:
            spec.precheck(old[0], new[0])
        except PlanError as err:
            raise PlanError(f"--migration {name}: {err.message}", hint=err.hint) from None
    return spec


def choose_auto(
    old: tuple[LogicalPlan, dict[str, str]],
    new: tuple[LogicalPlan, dict[str, str]],
    same_order: bool,
    overloaded: bool = False,
    adaptive: bool = False,
) -> tuple[str, str]:
    """(strategy name, why) for ``auto`` (see the module docstring); ``none`` when the two
    plans are the same. PlanError when no available strategy applies.

    ``overloaded``: the migration is asked because the running plan cannot keep up (the
    adaptive controller's ``infeasible`` trigger). GPT would keep that plan running for a
    whole window horizon, so a placement change then replays instead (GMS: one output gap
    while the buffered horizon is recomputed by the new plan, then only the new plan runs).
    ``adaptive``: the controller of ``--adapt`` asked (for any trigger). GMS is preferred
    for the same reason: while a migration runs the controller does not look, and GPT
    would tie it for a window horizon (Q2's 5-minute windows under a 1k -> 20k ramp: the
    whole 20k phase passed inside one GPT migration); and the controller priced the move
    as a replay of the horizon, which GMS is.
    """
    same_placement = old[1] == new[1]
    if same_order and same_placement:
        return "none", "the target is the running plan"
    all_row = all(e == "row" for p in (old[1], new[1]) for e in p.values())
    order = []
    if (same_placement or (all_row and not same_order)) and all_row:
        order = [("jisc", "join order change of an all-row plan: JISC")]
        order.append(("ms", "join order change of an all-row plan: MS (JISC not available)"))
    if overloaded:
        order.append(
            (
                "gms",
                "the running plan cannot keep up: GMS replaces it at once (GPT would "
                "keep it running for a window horizon)",
            )
        )
    elif adaptive:
        order.append(
            (
                "gms",
                "asked by --adapt: GMS replaces the plan at once (GPT would keep the old "
                "plan running, and the controller waiting, for a window horizon)",
            )
        )
    order += [
        ("gpt", "placement or plan change: GPT answers throughout (no output gap, no replay)"),
        ("gms", "GPT does not apply (a ROWS window): GMS replays the window horizon"),
        ("ms", "replay impossible (UNBOUNDED window or count slide): MS"),
        ("jisc", "replay impossible (UNBOUNDED window or count slide): JISC"),
    ]
    reasons = []
    for name, why in order:
        if not available(name):
            continue
        try:
            check(name, old, new)
        except PlanError as err:
            reasons.append(f"{name}: {err.message}")
            continue
        return name, why
    raise PlanError(
        "--migration auto: no available strategy can migrate between these plans",
        hint="; ".join(reasons)[:500] or None,
    )

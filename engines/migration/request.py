"""What a migration is asked to do, and the hooks that ask for one.

A migration replaces the running plan by another plan of the same query (another join
order, another placement, or both) while the run goes on. It is asked for either by a
script (``hycq run --migrate AT=TARGET.json``: a :class:`ScheduledMigration`) or by a
controller (``--adapt``: :class:`Controller.check` returns a :class:`MigrationRequest`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from optimizer.ir.plan import LogicalPlan


@dataclass(frozen=True)
class MigrationRequest:
    """Migrate to ``plan`` placed as ``placement`` (engine per operator id, complete).

    ``strategy`` is a registry name (``engines.migration.strategies``) or ``auto``;
    ``reason`` goes to the metrics record as it is (``{"kind": "scripted"}`` or what
    drifted, with measured and planned figures); ``label_from`` / ``label_to`` describe the
    two plans for the record (``{"join_order": [...], "placement": {...}}``).
    """

    plan: LogicalPlan
    placement: dict[str, str]
    strategy: str = "auto"
    reason: dict[str, Any] = field(default_factory=lambda: {"kind": "scripted"})
    label_from: dict[str, Any] = field(default_factory=dict)
    label_to: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScheduledMigration:
    """A scripted migration: at ``at_s`` event-seconds after the run's first tuple."""

    at_s: float
    request: MigrationRequest
    source: str = ""
    """Where it was given (e.g. ``--migrate 30=target.json``), for the record."""


class RuntimeMonitorHook(Protocol):
    """What the driver feeds (the "adapt" work implements it as
    ``engines.migration.monitor.RuntimeMonitor``).

    ``on_input``: a batch of ``n_rows`` accepted tuples of ``stream`` with timestamps in
    [lo, hi] (ticks of the query's time base) went into the running plan. ``on_instant``:
    instant ``instant`` has fired in the running plan ``executor`` (its
    ``operator_metrics()`` may be read). Called between calls into the executor.
    ``engine_busy_s``: the driver adds the wall time each call kept the engine busy.
    """

    engine_busy_s: float

    def on_input(self, stream: str, n_rows: int, lo: int, hi: int) -> None: ...

    def on_instant(self, instant: int, executor: Any) -> None: ...


class Controller(Protocol):
    """Decides migrations at run time (``--adapt``): called every ``check_every`` ticks of
    event time, at an instant boundary; returns a request or None."""

    def check(
        self, now_tick: int, monitor: RuntimeMonitorHook | None
    ) -> MigrationRequest | None: ...

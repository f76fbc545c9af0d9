"""What an adaptive controller asks the migration driver to do."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.ir.plan import LogicalPlan


@dataclass(frozen=True)
class MigrationRequest:
    """Migrate the running query to ``plan`` under ``placement`` using ``strategy``.

    ``plan`` is a plan of the same query (its own operator ids); ``placement`` maps every
    operator id of ``plan`` to an engine; ``strategy`` names a registered migration strategy
    (``auto`` lets the driver choose). ``reason`` says why (JSON-safe: ``{"kind":
    "scripted"}`` or what drifted, with measured and planned figures); ``label_from`` and
    ``label_to`` describe the old and new plan for the metrics (``{"join_order": [...],
    "placement": {...}}``).
    """

    plan: LogicalPlan
    placement: dict[str, str]
    strategy: str
    reason: dict
    label_from: dict
    label_to: dict

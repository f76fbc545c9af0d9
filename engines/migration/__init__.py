"""Live plan migration: moving a running query to another plan (join order, placement)
without changing its result stream (docs/adaptivity.md; research/plan-migration.md)."""

# The row-level strategies (MS, JISC, PT) register themselves with the strategy registry.
from engines.migration import row_strategies as _row_strategies  # noqa: F401

"""Live plan migration: moving a running query to another plan (join order, placement)
without changing its result stream (docs/adaptivity.md; research/plan-migration.md)."""

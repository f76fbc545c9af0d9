"""Binder: a parsed CQL SELECT + a catalog -> a typed LogicalPlan.

How a query becomes a plan (one SELECT level; derived tables recurse):

1. Each FROM item becomes a relation: a stream reference gives ``source -> window`` (one
   source per stream per query, shared by all its windows); a derived table is bound
   recursively. The FROM items' columns, concatenated in order, form the *combined schema*
   that names resolve against (``alias.column`` or an unambiguous ``column``).
2. The ON and WHERE predicates are split into conjuncts. A conjunct over one FROM item
   becomes a ``select`` right above that item (filters near the windows, as the
   dissertation's plans place them); the others become the condition of the first join at
   which all their inputs are present. Joins are left-deep in FROM order: Phase One of the
   optimizer reorders them.
3. GROUP BY / aggregates / DISTINCT give an ``aggregate`` (keys, then aggregate calls),
   HAVING a ``select`` above it, and the SELECT list a ``project``.
4. The top level adds the R2S operator (RSTREAM unless ISTREAM/DSTREAM is written) and the
   ``sink``.

Every user mistake raises a positioned QueryError subclass.

One module per part: ``scope`` (FROM scopes and shared state), ``features`` (refused query
shapes), ``relations`` (FROM items, windows, join and filter placement), ``aggregates``
(GROUP BY, aggregates, HAVING, SELECT list), ``scalars`` (scalar expressions); ``binder``
assembles them into ``Binder``.
"""

from optimizer.sql.bind.binder import Binder
from optimizer.sql.bind.features import INSTANT_COLUMN, MAX_DEPTH
from optimizer.sql.bind.scope import span

__all__ = ["INSTANT_COLUMN", "MAX_DEPTH", "Binder", "span"]

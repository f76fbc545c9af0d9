"""The MIG: a migration candidate (a group of R2R operators) run as SQL on a columnar engine.

* ``operator``: ``MigOp``, the row-engine operator wrapping the group's query (inputs
  mirrored as Arrow, the query re-run per instant, the result handed back as a delta;
  engine restarts and fallbacks);
* ``kept_aggregates``: the runtime half of incrementally kept aggregates (exact-sum state
  tables, pane partials); ``engines.sqlgen.incremental`` writes their SQL;
* ``correlated_counts``: a correlated count kept per key (the plain, kept and scan paths);
  ``engines.sqlgen.correlated`` writes its SQL;
* ``count_scan``: the scan path, the count recounted in Arrow at every slide without a join.
"""

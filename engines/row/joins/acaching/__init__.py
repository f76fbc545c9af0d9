"""A-Caching (Babu, Munagala, Widom, Motwani; ICDE'05; seed 002): adaptive caching of
subresults inside an MJoin (``engines.row.joins.mjoin``), per research/acaching-and-jit.md
section 1.

One module per part of the algorithm, each with its section of the paper:

* ``candidates``: which segments of which pipelines can be cached (the prefix invariant,
  Def. 3.2) and which candidates are one shared cache (Def. 4.1);
* ``cache``: the direct-mapped storage of a cache (section 3.3) and its sizing;
* ``estimator``: the profiler (section 1.4), the miss estimator, the cost constants and
  each candidate's benefit and cost (section 1.3);
* ``codegen``: the Lookup and Update operators of a cache in use, the Lookup as generated code;
* ``selection``: the compatible cache set of largest net gain (section 1.5, Thm. 4.3);
* ``join_op``: ``ACachingJoinOp``, the operator: its adaptive loop (section 1.6), memory
  (section 5) and the trials that revert a selection measured slower (ours).

Not built: globally-consistent caches (section 1.8); re-profiling a used cache that hides an
unused subset.
"""

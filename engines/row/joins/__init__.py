"""The row engine's join operators, one module per algorithm (docs/joins.md, ``--join-impl``).

* ``tree``: binary symmetric hash joins (and nested-loop theta joins) in the plan's order;
* ``mjoin``: one n-ary MJoin per join chain, one store per input, one probe pipeline each;
* ``acaching``: MJoin with adaptive subresult caches (a package: candidates, cache storage,
  miss estimation, generated Lookups, cache selection and the operator);
* ``jit``: the tree with just-in-time suspension of partial results no consumer can use.

``engines/row/lowering.py`` picks one per join chain (``JoinSettings``).
"""

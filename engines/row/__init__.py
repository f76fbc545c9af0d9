"""The row engine: push-based, tuple-at-a-time execution of any SPJA plan in pure Python.

This package never imports duckdb or pyspark (a test walks the imports). Operators exchange
*deltas* (inserted and deleted tuples) of time-varying relations at slide instants; see
``engines/row/executor.py`` for how a plan runs and ``docs/semantics.md`` for what it computes.
"""

"""Evaluate a subplan over the streams' samples in DuckDB, for the optimizer's statistics.

``optimizer.statistics.measure`` asks, for each aggregate over a derived input (a join or
another aggregate), how many of its key's values reach it (:data:`SubplanKeys`): Q1's count
over the join of the window with its per-plug MAX has a group for each plug with a reading
above 0.9 of its maximum, and idle plugs (always 0 W) never get one. Neither distinct counts
nor selectivities can say that; running the operators below the aggregate over the sample
can. Each window holds its stream's sample (a prefix of it with about 30 tuples per key,
``optimizer.statistics.reaching_samples``): seconds of stream, shorter than most windows,
so the share of keys reaching, not their number, is what the estimator takes from it.

The SQL is the one a MIG would run (``engines.sqlgen.group_sql``); a subplan it cannot
express, or one slower than :data:`BUDGET_S` (a theta join of two samples), gives None and
the estimator keeps its share of 1.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from optimizer.ir.plan import LogicalPlan

#: Wall-clock seconds one evaluation may take before it is interrupted (and not used).
BUDGET_S = 0.25


def subplan_keys(
    plan: LogicalPlan, operators: list[str], columns: list[int], samples: Mapping[str, Any]
) -> float | None:
    """Distinct values of ``columns`` of the last of ``operators`` over the samples
    (:data:`optimizer.statistics.SubplanKeys`)."""
    import duckdb

    from engines.duckdb.exact_sums import prepare, run_sql
    from engines.sqlgen import group_sql
    from optimizer.ir.errors import HycqError

    try:
        g = group_sql(plan, operators, "duckdb")
    except (HycqError, ValueError, NotImplementedError):
        return None
    top = plan.op(operators[-1]).schema
    if not columns or any(c >= len(top) for c in columns):
        return None
    con = duckdb.connect()
    prepare(con)  # the generated SQL sums DOUBLEs exactly with its macro
    timer = threading.Timer(BUDGET_S, con.interrupt)
    try:
        con.execute("SET threads = 1")
        for op_id, table in g.inputs:
            stream = _stream_of(plan, op_id)
            sample = samples.get(stream) if stream is not None else None
            names = plan.op(op_id).schema.names
            if sample is None or any(n not in sample.column_names for n in names):
                return None
            t = sample.select(names).rename_columns([f"c{i}" for i in range(len(names))])
            con.register(table, t)
        keys = ", ".join(f"c{c}" for c in columns)
        timer.start()
        counted = run_sql(con, f"SELECT COUNT(*) FROM (SELECT DISTINCT {keys} FROM ({g.sql}) AS t)")
        got = counted.column(0)[0].as_py() if counted.num_rows else None
    except duckdb.Error:
        return None  # interrupted (too slow) or an engine error: no measurement
    finally:
        timer.cancel()
        con.close()
    return float(got) if got is not None else None


def _stream_of(plan: LogicalPlan, op_id: str) -> str | None:
    """The stream a window (the subplan's external input) reads."""
    from optimizer.ir.plan import Source

    cur = op_id
    while True:
        op = plan.op(cur)
        if isinstance(op, Source):
            return op.stream
        ins = plan.inputs(cur)
        if len(ins) != 1:
            return None
        cur = ins[0]

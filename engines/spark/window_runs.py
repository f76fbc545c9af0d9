"""A MIG input's window on Spark as a few materialized runs of chunks (LSM-style).

A sliding window arrives as Arrow chunks (one per slide): each slide adds a chunk and drops
the oldest. Registering every chunk as its own DataFrame and the window as their union
makes each slide's view a union of as many relations as the window has chunks: at 100
chunks, re-registering and planning it took most of a minute (experiments/README.md, "Spark
on a standalone cluster"). Here a new chunk becomes a *run* of its own (one DataFrame with a
chunk-id column), and whenever there are more than ``max_runs`` runs the two smallest are
merged into one, materialized on the executors with ``localCheckpoint`` (its plan is then a
scan, not a union). Expired chunks are filtered out of a run by their chunk id until the
whole run expires (or is merged, which drops them). The view is the union of at most
``max_runs`` frames, whatever the window's length; a row is re-shipped only by merges
(logarithmically often, as in a log-structured merge tree), not every slide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

import pyarrow as pa

#: the chunk-id column the runs carry (not part of the view)
CID = "__hycq_cid"
#: runs per input before the two smallest are merged
MAX_RUNS = 6


@dataclass
class _Run:
    """Consecutive or not, the chunks one DataFrame holds, and which of them are live."""

    df: Any
    cids: list[int]
    live: list[int] = field(default_factory=list)

    def view(self, col: Any) -> Any:
        """The run's live rows (filtered by chunk id when some have expired)."""
        if len(self.live) == len(self.cids):
            return self.df
        return self.df.where(col(CID).isin(self.live))


class WindowRuns:
    """One input's runs (module docstring)."""

    def __init__(self, spark: Any, max_runs: int = MAX_RUNS) -> None:
        self.spark = spark
        self.max_runs = max_runs
        self.runs: list[_Run] = []
        self.rows: dict[int, int] = {}  # chunk id -> rows
        self.merges = 0

    def update(self, chunks: Sequence[tuple[int, pa.Table]], schema: pa.Schema) -> Any:
        """Hold exactly ``chunks``; returns the view's DataFrame (without the id column)."""
        from pyspark.sql.functions import col

        live = {cid for cid, _ in chunks}
        kept: list[_Run] = []
        for run in self.runs:
            run.live = [c for c in run.cids if c in live]
            if run.live:
                kept.append(run)
        self.runs = kept
        known = {c for run in self.runs for c in run.cids}
        new = [(cid, chunk) for cid, chunk in chunks if cid not in known]
        if new:  # one run for them all (a slide adds one; a first fill or restart many)
            parts = []
            for cid, chunk in new:
                self.rows[cid] = chunk.num_rows
                ids = pa.array([cid] * chunk.num_rows, type=pa.int64())
                parts.append(chunk.cast(schema).append_column(CID, ids))
            df = self.spark.createDataFrame(pa.concat_tables(parts))
            cids = [cid for cid, _ in new]
            self.runs.append(_Run(df, cids, list(cids)))
        self.rows = {c: n for c, n in self.rows.items() if c in live}
        while len(self.runs) > self.max_runs:
            self._merge_smallest(col)
        if not self.runs:
            return self.spark.createDataFrame(schema.empty_table())
        parts = [run.view(col) for run in self.runs]
        return reduce(lambda a, b: a.unionByName(b), parts).drop(CID)

    def _merge_smallest(self, col: Any) -> None:
        by_size = sorted(range(len(self.runs)), key=lambda i: self._live_rows(self.runs[i]))
        i, j = sorted(by_size[:2])
        a, b = self.runs[i], self.runs[j]
        merged = a.view(col).unionByName(b.view(col)).localCheckpoint(eager=True)
        cids = a.live + b.live
        self.runs[i] = _Run(merged, cids, list(cids))
        del self.runs[j]
        self.merges += 1

    def _live_rows(self, run: _Run) -> int:
        return sum(self.rows.get(c, 0) for c in run.live)

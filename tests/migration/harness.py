"""Drives RowExecutors through scripted row-level migrations, for differential tests.

The input streams are merged in event-time order (ties by stream name) and fed in batches;
at each migration point (a position in the merged tuple sequence, so inside a batch as well
as at a batch boundary) the running executor hands over to one freshly built for the target
plan with a strategy of ``engines.row.migration``. The outputs of all executors are
concatenated and compared with the oracle (the query from scratch, tests/oracle.py).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from engines.row.executor import RowExecutor
from engines.row.migration import (
    HybridMigration,
    ParallelTrack,
    TransferStats,
    jisc_transfer,
    move_states,
)
from engines.sources.keyed import KeyedGenerator, KeyedStream
from optimizer.ir.plan import LogicalPlan
from optimizer.phase_one import join_chains, rewire_chain
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text
from tests.oracle import TS, assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
STREAMS = "rstu"
CATALOG = parse_catalog_text(
    "\n".join(
        f'[streams.{n}]\ntimestamp = "ts"\ntime_unit = "s"\n'
        f'[streams.{n}.columns]\nts = "BIGINT"\nk = "INTEGER"\nv = "DOUBLE"\n'
        for n in STREAMS
    )
)


def keyed_data(
    seconds: int = 30, rate: float = 3.0, keys: int = 4, seed: int = 7, streams: str = STREAMS
) -> dict[str, pa.Table]:
    return {
        n: KeyedGenerator(KeyedStream(n, rate=rate, keys=keys), seed=seed).table(seconds)
        for n in streams
    }


def plan_of(text: str) -> LogicalPlan:
    return plan_query(text, CATALOG)


def reorder(plan: LogicalPlan, order: Sequence[int]) -> LogicalPlan:
    """``plan`` with its (single) join chain rebuilt left-deep in ``order`` (leaf indexes)."""
    (chain,) = join_chains(plan)
    widths = [len(plan.op(leaf).schema) for leaf in chain.leaves]
    starts = [sum(widths[:k]) for k in range(len(widths))]
    owner = {c: k for k in range(len(widths)) for c in range(starts[k], starts[k] + widths[k])}
    cm = SimpleNamespace(starts=starts, widths=widths, owner=owner)
    if list(order) == list(range(len(order))):
        return plan
    return rewire_chain(plan, chain, cm, order)  # type: ignore[arg-type]


def leaf_count(plan: LogicalPlan) -> int:
    (chain,) = join_chains(plan)
    return len(chain.leaves)


def merged(inputs: dict[str, pa.Table]) -> list[tuple[str, int]]:
    """(stream, row index) of every tuple, in event-time order (ties: stream name)."""
    events = []
    for name, table in inputs.items():
        for i, ts in enumerate(table.column("ts").to_pylist()):
            events.append((ts, name, i))
    events.sort()
    return [(n, i) for _, n, i in events]


STRATEGIES = {"ms": move_states, "jisc": jisc_transfer}
_BOTH = (ParallelTrack, HybridMigration)  # strategies that run two plans for a while


@dataclass
class Run:
    """Outcome of a driven run: result rows with their instants, transfer records."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    stats: list[TransferStats] = field(default_factory=list)
    executors: list[Any] = field(default_factory=list)
    pts: list[ParallelTrack] = field(default_factory=list)
    hybs: list[HybridMigration] = field(default_factory=list)

    def emit(self, instant: int, rows: Any) -> None:
        self.rows.extend((*r, instant) for r in rows)

    def table(self, like: pa.Table) -> pa.Table:
        cols = list(zip(*self.rows, strict=True)) if self.rows else [[]] * like.num_columns
        return pa.table(
            {f.name: pa.array(list(c), type=f.type) for f, c in zip(like.schema, cols, strict=True)}
        )


def drive(
    inputs: dict[str, pa.Table],
    first: LogicalPlan,
    migrations: Sequence[tuple[int, LogicalPlan, str]],
    batch: int = 7,
    seed: int = 0,
    panes: bool = True,
    on_result: Any = None,
) -> Run:
    """Run ``first`` over ``inputs``; at merged position ``at`` of each ``(at, plan,
    strategy)`` migrate to ``plan``. A PT or HybMig migration runs until the old plan is
    dropped; a migration due meanwhile waits for that. ``on_result`` goes to every
    HybridMigration (each plan's contribution per instant)."""
    run = Run()
    current: Any = RowExecutor(first, run.emit, panes=panes)
    run.executors.append(current)
    events = merged(inputs)
    rng = random.Random(seed)
    todo = sorted(migrations, key=lambda m: m[0])
    pos = 0
    pending: list[tuple[int, LogicalPlan, str]] = []
    while pos < len(events) or todo or pending:
        if isinstance(current, _BOTH) and current.done:
            current = current.successor
        while todo and todo[0][0] <= pos:
            pending.append(todo.pop(0))
        if pending and not isinstance(current, _BOTH):
            _, plan, strategy = pending.pop(0)
            new = RowExecutor(plan, run.emit, panes=panes)
            if strategy == "pt":
                current = ParallelTrack(current, new)
                run.pts.append(current)
            elif strategy in ("hybmig", "hybmig+bsc"):
                current = HybridMigration(current, new, on_result, bsc=strategy == "hybmig+bsc")
                run.hybs.append(current)
            else:
                run.stats.append(STRATEGIES[strategy](current, new))
                current = new
            run.executors.append(new)
            continue
        if pos >= len(events):
            break
        stop = min(len(events), pos + rng.randint(1, batch))
        if todo:
            stop = min(stop, max(todo[0][0], pos + 1))
        stream = events[pos][0]
        end = pos
        while end < stop and events[end][0] == stream:
            end += 1
        idx = [i for _, i in events[pos:end]]
        table = inputs[stream].take(pa.array(idx, pa.int64()))
        current.ingest(stream, table, 0)
        pos = end
    for name in sorted(inputs):
        current.end_stream(name)
    current.finish()
    return run


def check(
    text: str,
    inputs: dict[str, pa.Table],
    first: LogicalPlan,
    migrations: Sequence[tuple[int, LogicalPlan, str]],
    expected: pa.Table | None = None,
    **kw: Any,
) -> Run:
    """Drive and compare with the oracle as bags per ``_ts``."""
    if expected is None:
        expected = oracle(text, CATALOG, inputs)
    run = drive(inputs, first, migrations, **kw)
    assert_same_stream(run.table(expected), expected)
    return run


__all__ = ["CATALOG", "TS", "check", "drive", "keyed_data", "merged", "plan_of", "reorder"]

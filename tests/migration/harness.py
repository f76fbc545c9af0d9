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

import networkx as nx
import pyarrow as pa
from hypothesis import strategies as st

from engines.row.executor import RowExecutor
from engines.row.migration import (
    HybridMigration,
    ParallelTrack,
    TransferStats,
    jisc_transfer,
    move_states,
)
from engines.sources.keyed import KeyedGenerator, KeyedStream
from optimizer.ir.expr import ColumnRef, columns_used, conjoin, remap_columns
from optimizer.ir.plan import Join, LogicalPlan, Project
from optimizer.ir.schema import Schema
from optimizer.phase_one import join_chains, rewire_chain
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text
from tests.oracle import TS, assert_same_stream, oracle

ROOT = Path(__file__).resolve().parents[2]
STREAMS = "rstuvw"
CATALOG = parse_catalog_text(
    "\n".join(
        f'[streams.{n}]\ntimestamp = "ts"\ntime_unit = "s"\n'
        f'[streams.{n}.columns]\nts = "BIGINT"\nk = "INTEGER"\nv = "DOUBLE"\n'
        for n in STREAMS
    )
)


def keyed_data(
    seconds: int = 30, rate: float = 3.0, keys: int = 4, seed: int = 7, streams: str = "rstu"
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


Tree = int | tuple["Tree", "Tree"]


def _tree_leaves(tree: Tree) -> list[int]:
    return [tree] if isinstance(tree, int) else [*_tree_leaves(tree[0]), *_tree_leaves(tree[1])]


def reshape(plan: LogicalPlan, tree: Tree) -> LogicalPlan:
    """``plan`` with its (single) join chain rebuilt as the join tree ``tree``: nested pairs
    of leaf indexes, e.g. ``((0, 1), (2, 3))`` (bushy) or ``(((3, 1), 0), 2)`` (left-deep).

    The optimizer builds left-deep chains only (``rewire_chain``; ``--join-order`` and
    TARGET.json name left-deep orders), so bushy plans exist for the row engine's tests
    only. As ``rewire_chain``: every conjunct at the lowest join holding all its leaves,
    join ids reused bottom-up, the chain's column order restored by a Project on top.
    """
    (chain,) = join_chains(plan)
    order = _tree_leaves(tree)
    if sorted(order) != list(range(len(chain.leaves))):
        raise ValueError(f"{tree} is not a tree over leaves 0..{len(chain.leaves) - 1}")
    widths = [len(plan.op(leaf).schema) for leaf in chain.leaves]
    starts = [sum(widths[:k]) for k in range(len(widths))]
    owner = {c: k for k in range(len(widths)) for c in range(starts[k], starts[k] + widths[k])}
    new_pos: dict[int, int] = {}
    for k in order:
        for c in range(starts[k], starts[k] + widths[k]):
            new_pos[c] = len(new_pos)
    g = nx.DiGraph(plan.graph)
    seqs = [g.nodes[j]["seq"] for j in chain.joins]
    root = plan.op(chain.root)
    consumers = [(c, g.edges[chain.root, c]["port"]) for c in plan.consumers(chain.root)]
    g.remove_nodes_from(chain.joins)
    fields = root.schema.fields
    leaf_schema = [Schema(fields[starts[k] : starts[k] + widths[k]]) for k in range(len(widths))]
    placed: set[int] = set()
    joins = iter(zip(chain.joins, seqs, strict=True))

    def build(t: Tree) -> tuple[str, Schema, list[int]]:
        """(op id, schema, leaves in column order) of subtree ``t``."""
        if isinstance(t, int):
            return chain.leaves[t], leaf_schema[t], [t]
        lid, lschema, lleaves = build(t[0])
        rid, rschema, rleaves = build(t[1])
        have = lleaves + rleaves
        # Columns of this subtree's output, from the chain's global positions.
        local: dict[int, int] = {}
        for k in have:
            for c in range(starts[k], starts[k] + widths[k]):
                local[c] = len(local)
        preds = []
        for i, conj in enumerate(chain.conjuncts):
            if i not in placed and {owner[c] for c in columns_used(conj)} <= set(have):
                placed.add(i)
                preds.append(remap_columns(conj, local))
        op_id, seq = next(joins)
        schema = lschema.concat(rschema)
        g.add_node(op_id, op=Join(op_id, schema, conjoin(preds), len(lschema)), seq=seq)
        g.add_edge(lid, op_id, port=0)
        g.add_edge(rid, op_id, port=1)
        return op_id, schema, have

    top, _, _ = build(tree)
    pid = "project" + str(
        1
        + max(
            (int(i[7:]) for i in plan.topological() if i[7:].isdigit() and i.startswith("project")),
            default=0,
        )
    )
    exprs = tuple(ColumnRef(new_pos[i], f.display(), f.dtype) for i, f in enumerate(fields))
    g.add_node(pid, op=Project(pid, root.schema, exprs), seq=seqs[-1] + 0.5)
    g.add_edge(top, pid, port=0)
    for consumer, port in consumers:
        g.add_edge(pid, consumer, port=port)
    return LogicalPlan(g, plan.sink)


def trees(leaves: Sequence[int]) -> st.SearchStrategy[Tree]:
    """Every binary join tree over ``leaves`` in this order (left-deep, right-deep, zigzag
    and bushy), as a Hypothesis strategy."""
    if len(leaves) == 1:
        return st.just(leaves[0])

    @st.composite
    def split(draw: st.DrawFn) -> Tree:
        cut = draw(st.integers(1, len(leaves) - 1))
        return (draw(trees(leaves[:cut])), draw(trees(leaves[cut:])))

    return split()


def is_bushy(tree: Tree) -> bool:
    """Whether some join of ``tree`` joins two joins (not a left-, right-deep or zigzag
    chain: what HybMig cannot take as its new plan)."""
    if isinstance(tree, int):
        return False
    left, right = tree
    if not isinstance(left, int) and not isinstance(right, int):
        return True
    return is_bushy(left) or is_bushy(right)


def is_left_deep(tree: Tree) -> bool:
    return isinstance(tree, int) or (isinstance(tree[1], int) and is_left_deep(tree[0]))


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


__all__ = [
    "CATALOG",
    "TS",
    "check",
    "drive",
    "is_bushy",
    "is_left_deep",
    "keyed_data",
    "merged",
    "plan_of",
    "reorder",
    "reshape",
    "trees",
]

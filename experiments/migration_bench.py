"""Shared driver of the plan-migration experiments (jisc_fig_7_8.py, jisc_fig_10.py,
hybmig_fig_15_16.py): an n-stream raw-window equi-join on seeded uniform keys, run on
RowExecutors and migrated with the row-level strategies of ``engines.row.migration``.

The query joins streams ``s0 .. s{n-1}`` (columns ``ts``, ``k``) on ``k`` along a chain
(``a_i.k = a_{i+1}.k``) plus one closing predicate ``a_{n-3}.k = a_{n-1}.k``, so that both
the reversed left-deep order and the order with the two top leaves swapped join on a key at
every level (Phase One does not derive transitive equalities). Join orders are built with
``optimizer.phase_one.rewire_chain``, as the migration tests do.

Input is fed in event-time order, one batch per (second, stream). A migration happens after
every tuple before second ``at`` has been ingested (the old plan holds the tuples of second
``at - 1`` pending, as the design's migration point allows). Every migrated run is checked
against the new plan run from scratch over the same input: the result bags per instant must
be equal, or the run raises.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa

from engines.row.executor import RowExecutor
from engines.row.migration import (
    HybridMigration,
    ParallelTrack,
    jisc_progress,
    jisc_transfer,
    move_states,
)
from optimizer.ir.plan import LogicalPlan
from optimizer.phase_one import join_chains, rewire_chain
from optimizer.sql import plan_query
from optimizer.sql.catalog import parse_catalog_text


def load_note() -> str:
    """The machine's load when a result is written (1-minute load average over 2 cores):
    read it before trusting wall times (above ~0.3, something else ran)."""
    import datetime
    import os

    day = datetime.datetime.now(tz=datetime.UTC).date().isoformat()
    return f"{day}, load average {os.getloadavg()[0]:.2f} (1 min, 2 cores) when written"


Batch = tuple[int, str, pa.Table]


def catalog_text(n: int) -> str:
    return "\n".join(
        f'[streams.s{i}]\ntimestamp = "ts"\ntime_unit = "s"\n'
        f'[streams.s{i}.columns]\nts = "BIGINT"\nk = "INTEGER"\n'
        for i in range(n)
    )


def query(n: int, window: int) -> str:
    """The n-stream raw-window equi-join (ISTREAM of every component's timestamp)."""
    if n < 3:
        raise ValueError("the experiments need at least 3 streams")
    cols = ", ".join(f"a{i}.ts AS t{i}" for i in range(n))
    frm = ", ".join(f"s{i} [RANGE {window} SECONDS SLIDE 1 SECOND] AS a{i}" for i in range(n))
    preds = [f"a{i}.k = a{i + 1}.k" for i in range(n - 1)] + [f"a{n - 3}.k = a{n - 1}.k"]
    return f"SELECT ISTREAM a0.k AS k, {cols} FROM {frm} WHERE {' AND '.join(preds)}"


def plan(n: int, window: int, order: Sequence[int] | None = None) -> LogicalPlan:
    """The query's plan, its join chain left-deep in ``order`` (leaf indexes; None: as
    written, s0 first)."""
    p = plan_query(query(n, window), parse_catalog_text(catalog_text(n)))
    if order is None or list(order) == list(range(n)):
        return p
    (chain,) = join_chains(p)
    widths = [len(p.op(leaf).schema) for leaf in chain.leaves]
    starts = [sum(widths[:k]) for k in range(len(widths))]
    owner = {c: k for k in range(len(widths)) for c in range(starts[k], starts[k] + widths[k])}
    cm = SimpleNamespace(starts=starts, widths=widths, owner=owner)
    return rewire_chain(p, chain, cm, list(order))  # type: ignore[arg-type]


def best_case(n: int) -> list[int]:
    """One incomplete state (JISC Fig. 5): the two top leaves swapped."""
    return [*range(n - 2), n - 1, n - 2]


def worst_case(n: int) -> list[int]:
    """Every intermediate state incomplete: the chain reversed."""
    return list(range(n - 1, -1, -1))


def uniform_inputs(
    n: int,
    seconds: int,
    window: int,
    keys: int,
    seed: int,
    rare: Callable[[int, int], int] | None = None,
    copies: int = 1,
) -> dict[str, pa.Table]:
    """Per stream, every key of ``[0, keys)`` once per ``window`` seconds, at a seeded random
    slot (second modulo ``window``) per key and stream: uniform keys whose every RANGE
    ``window`` window holds exactly one tuple per key and stream, so each join state holds
    ``keys`` entries at every level (random uniform keys would make an n-way equi-join's
    states vanish or explode with n). ``rare(stream, second) = R > 1`` shifts each key of
    that stream and second to ``key + keys * j`` with ``j`` uniform in ``[0, R)``: only one
    in R still matches (the HybMig drift). ``copies`` > 1: each key ``copies`` times per
    window and stream, so a state ``j`` joins up holds ``keys * copies**j`` entries."""
    if keys * copies % window:
        raise ValueError(f"keys * copies ({keys * copies}) must be a multiple of the window")
    per = keys * copies // window
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(n):
        slots = rng.permutation(np.tile(np.arange(keys), copies)).reshape(
            window, per
        )  # slot s holds these keys
        ts = np.repeat(np.arange(seconds, dtype=np.int64), per)
        k = np.concatenate([rng.permutation(slots[s % window]) for s in range(seconds)])
        if rare is not None:
            r = np.repeat(np.array([rare(i, s) for s in range(seconds)]), per)
            k = k + keys * (rng.random(len(k)) * r).astype(np.int64)
        out[f"s{i}"] = pa.table({"ts": ts, "k": k.astype(np.int32)})
    return out


def batches(inputs: dict[str, pa.Table]) -> list[Batch]:
    """One batch per (second, stream), in event-time order (ties: stream name)."""
    out: list[Batch] = []
    per: dict[str, dict[int, pa.Table]] = {}
    seconds: set[int] = set()
    for name, t in inputs.items():
        ts = t.column("ts").to_numpy()
        uniq, first = np.unique(ts, return_index=True)
        bounds = [*first.tolist(), len(ts)]
        per[name] = {
            int(s): t.slice(bounds[j], bounds[j + 1] - bounds[j]) for j, s in enumerate(uniq)
        }
        seconds.update(int(s) for s in uniq)
    for s in sorted(seconds):
        out.extend((s, name, per[name][s]) for name in sorted(per) if s in per[name])
    return out


@dataclass
class Outputs:
    """Result bags per instant, and per instant the wall time of the first emit."""

    bags: dict[int, Counter[tuple[Any, ...]]] = field(default_factory=dict)
    count: int = 0
    first_after: float | None = None
    first_after_cpu: float | None = None
    mark: float | None = None
    mark_cpu: float = 0.0
    emitted_at: list[tuple[float, int, int]] = field(default_factory=list)
    span_cpu_s: float = 0.0  # run_plain: process CPU seconds over the timed span
    cpu_by_second: dict[int, float] = field(default_factory=dict)  # run_plain

    def emit(self, instant: int, rows: Any) -> None:
        rows = [tuple(r.values()) for r in rows.to_pylist()] if hasattr(rows, "to_pylist") else rows
        if not rows:
            return
        now = time.perf_counter()
        if self.mark is not None and self.first_after is None:
            self.first_after = now - self.mark
            self.first_after_cpu = time.process_time() - self.mark_cpu
        self.bags.setdefault(instant, Counter()).update(tuple(r) for r in rows)
        self.count += len(rows)
        self.emitted_at.append((now, instant, len(rows)))


def same_stream(a: Outputs, b: Outputs) -> None:
    """Raise unless ``a`` and ``b`` hold the same bag at every instant."""
    instants = sorted(set(a.bags) | set(b.bags))
    for t in instants:
        if a.bags.get(t, Counter()) != b.bags.get(t, Counter()):
            x, y = a.bags.get(t, Counter()), b.bags.get(t, Counter())
            raise AssertionError(
                f"instant {t}: {sum((x - y).values())} extra, {sum((y - x).values())} missing "
                "rows against the new plan from scratch"
            )


def state_tuples(ex: Any) -> int:
    """Tuples held in join stores (both inputs of every join) of one executor, or of both
    plans of a two-plan strategy (PT, HybMig) while it runs both; a store the two plans share
    (HybMig's leaf states) counts once."""
    stores: dict[int, Any] = {}
    _collect_stores(ex, stores)
    return sum(int(s.size) for s in stores.values())


def _collect_stores(ex: Any, out: dict[int, Any]) -> None:
    if hasattr(ex, "successor"):  # a two-plan strategy: the old plan until dropped, the new
        if not ex.done and getattr(ex, "old", None) is not None:
            _collect_stores(ex.old, out)
        _collect_stores(ex.successor, out)
        return
    for node in ex.nodes:
        op = node.op
        if hasattr(op, "left") and hasattr(op.left, "size"):
            out[id(op.left)] = op.left
            out[id(op.right)] = op.right


@dataclass
class Migrated:
    """A run through one migration: timings (wall seconds), transfer figures, outputs."""

    strategy: str
    outputs: Outputs
    transfer_s: float = 0.0
    span_s: float = 0.0
    span_cpu_s: float = 0.0
    first_output_s: float | None = None
    first_output_cpu_s: float | None = None
    dropped_at: int | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    per_second: list[dict[str, Any]] = field(default_factory=list)


def _pt(old: RowExecutor, new: RowExecutor) -> tuple[Any, dict[str, Any]]:
    pt = ParallelTrack(old, new)
    return pt, {"strategy": "pt", "at": pt.at, "states_moved": pt.states_moved}


#: name -> hand-over of a running executor to a freshly built one: (the executor to feed
#: from now on, transfer figures). A strategy that runs both plans returns an object with
#: ``done``, ``dropped_at`` and ``successor`` (as ParallelTrack); adding one is one entry.
def _hybmig(bsc: bool) -> Callable[[RowExecutor, RowExecutor], tuple[Any, dict[str, Any]]]:
    def go(old: RowExecutor, new: RowExecutor) -> tuple[Any, dict[str, Any]]:
        h = HybridMigration(old, new, bsc=bsc)
        return h, {
            "strategy": "hybmig" if bsc else "hybmig-lazy",
            "at": h.at,
            "states_moved": h.states_moved,
            "states_shared": h.states_shared,
            "states_recomputed": h.states_recomputed,
        }

    return go


REGISTRY: dict[str, Callable[[RowExecutor, RowExecutor], tuple[Any, dict[str, Any]]]] = {
    "ms": lambda old, new: (new, move_states(old, new).as_dict()),
    "jisc": lambda old, new: (new, jisc_transfer(old, new).as_dict()),
    "pt": _pt,
    "hybmig": _hybmig(bsc=True),  # with background state computation (hycq's `hybmig`)
    "hybmig-lazy": _hybmig(bsc=False),
}
STRATEGIES = tuple(REGISTRY)


def migrate(strategy: str, old: RowExecutor, new: RowExecutor) -> tuple[Any, dict[str, Any]]:
    """Hand ``old`` over to ``new`` with ``strategy``; the executor to feed on, and figures."""
    if strategy not in REGISTRY:
        raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(REGISTRY)}")
    return REGISTRY[strategy](old, new)


def run_plain(
    p: LogicalPlan, feed: Sequence[Batch], span: tuple[int, int]
) -> tuple[Outputs, float]:
    """Run ``p`` from scratch over ``feed``; the outputs and the wall time spent on the
    batches whose second lies in ``span`` = [lo, hi). ``outputs.cpu_by_second`` has the
    process CPU time of every second."""
    _quiet_gc()
    out = Outputs()
    ex = RowExecutor(p, out.emit)
    busy = cpu = 0.0
    for s, name, t in feed:
        c0, t0 = time.process_time(), time.perf_counter()
        ex.ingest(name, t, 0)
        dc = time.process_time() - c0
        out.cpu_by_second[s] = out.cpu_by_second.get(s, 0.0) + dc
        if span[0] <= s < span[1]:
            busy += time.perf_counter() - t0
            cpu += dc
    _finish(ex, feed)
    out.span_cpu_s = cpu
    return out, busy


def _quiet_gc() -> None:
    """Collect, then freeze what survives, so that a run does not pay for the garbage of
    the previous one (as bench_row_engine.py does)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _finish(ex: Any, feed: Iterable[Batch]) -> None:
    for name in sorted({b[1] for b in feed}):
        ex.end_stream(name)
    ex.finish()


def run_migrated(
    strategy: str,
    old_plan: LogicalPlan,
    new_plan: LogicalPlan,
    feed: Sequence[Batch],
    at: int,
    until: int,
    per_second: bool = False,
) -> Migrated:
    """Run ``old_plan``, migrate to ``new_plan`` when second ``at`` is reached, announce
    every stream's progress to ``at`` (the pending instant ``at - 1`` fires at once, in the
    new plan), time all that plus every batch of seconds [at, until), then run to the end
    (untimed). ``first_output_s``: from the start of the transfer to the first result."""
    _quiet_gc()
    out = Outputs()
    cur: Any = RowExecutor(old_plan, out.emit)
    res = Migrated(strategy, out)
    migrated = False
    streams = sorted({b[1] for b in feed})
    sec_busy: dict[int, float] = {}
    sec_cpu: dict[int, float] = {}
    sec_out: dict[int, int] = {}
    sec_state: dict[int, int] = {}
    for s, name, t in feed:
        before = out.count
        if not migrated and s >= at:
            migrated = True
            new = RowExecutor(new_plan, out.emit)
            out.mark_cpu = c0 = time.process_time()
            out.mark = t0 = time.perf_counter()
            cur, res.stats = migrate(strategy, cur, new)
            res.transfer_s = time.perf_counter() - t0
            for stream in streams:  # as the run-time loop does on reading second `at`
                cur.advance_stream(stream, s)
            res.span_s += time.perf_counter() - t0
            res.span_cpu_s += time.process_time() - c0
            if per_second:
                sec_busy[s] = sec_busy.get(s, 0.0) + res.span_s
                sec_cpu[s] = sec_cpu.get(s, 0.0) + res.span_cpu_s
        if _both_done(cur):
            res.dropped_at = cur.dropped_at
            cur = cur.successor
        c0, t0 = time.process_time(), time.perf_counter()
        cur.ingest(name, t, 0)
        dt = time.perf_counter() - t0
        dc = time.process_time() - c0
        if migrated and s < until:
            res.span_s += dt
            res.span_cpu_s += dc
        if per_second:
            sec_busy[s] = sec_busy.get(s, 0.0) + dt
            sec_cpu[s] = sec_cpu.get(s, 0.0) + dc
            sec_out[s] = sec_out.get(s, 0) + out.count - before
            sec_state[s] = state_tuples(cur)
    if _both_done(cur):
        res.dropped_at = cur.dropped_at
    _finish(cur, feed)
    res.first_output_s = out.first_after
    res.first_output_cpu_s = out.first_after_cpu
    if strategy == "jisc" and isinstance(cur, RowExecutor):
        prog = jisc_progress(cur)
        res.stats["keys_completed"] = prog.keys_completed
        res.stats["full_recomputes"] = prog.full_recomputes
        res.stats["incomplete_states_at_end"] = prog.incomplete_states
    if per_second:
        res.per_second = [
            {
                "second": s,
                "outputs": sec_out.get(s, 0),
                "state_tuples": sec_state.get(s, 0),
                "busy_s": round(sec_busy.get(s, 0.0), 6),
                "cpu_s": round(sec_cpu.get(s, 0.0), 6),
            }
            for s in sorted(sec_busy)
        ]
    return res


def _both_done(ex: Any) -> bool:
    """A two-plan strategy (PT, HybMig) that has dropped its old plan."""
    return hasattr(ex, "successor") and bool(ex.done)


def median(xs: Sequence[float]) -> float:
    return float(np.median(np.asarray(xs, dtype=float)))

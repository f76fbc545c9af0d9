"""Running a shared-filter subplan with its K-slack configuration (Ji, Ch. 5) on Arrow batches.

One source's arriving batches go down the tree of :mod:`engines.disorder.shared_plan`:
filters drop rows (a pyarrow compute expression each), K-slack chains hold them, and each
query's leaf receives its released stream. Every buffer runs on the *source's* clock: with
``T_j`` the source's largest timestamp after its ``j``-th arrival and ``K_a`` the buffer
sizes from the source down to and including a buffer, the buffer releases a held tuple at
the first arrival ``j`` (not before the tuple reached it) with ``T_j - K_a >= ts``. Hence a
chain releases exactly what one buffer of its summed size on the source would, filters
commute with buffers, and every configuration of a subplan delivers the same stream to each
leaf: the tuples of its query that pass its filters, released as one K-slack buffer of the
query's ``kappa`` on the source releases them (at the same arrival, in timestamp order, ties
in arrival order; a tuple later than ``kappa`` goes out at once, behind). Only the number of
tuples held differs, which is what the configuration algorithms minimise.

A buffer's own local clock (its largest timestamp seen) would not do: below a selective
filter it moves only with the tuples that pass, and a chain's second buffer only with what
the first released, so both would release later than one buffer of the summed size.

Vectorised per arriving batch (one running maximum, per buffer one ``searchsorted``, one
Arrow ``take``); rows carry their arrival sequence number for the ties.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from engines.disorder.shared_plan import Buffer, Configuration, Node, check_configuration

_INDEX = "__shared_row"


@dataclass
class _Flow:
    """Rows moving down the tree during one arriving batch: the rows, the arrival index in
    the batch at which each reached the current point, its timestamp and sequence number,
    and the leaves it is still due at (a bit per leaf: all for a new row; after an
    adaptation, only those a migrated row had not yet reached)."""

    table: pa.Table
    at: np.ndarray
    ts: np.ndarray
    seq: np.ndarray
    due: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.ts)

    def take(self, idx: np.ndarray) -> _Flow:
        return _Flow(
            self.table.take(pa.array(idx)), self.at[idx], self.ts[idx], self.seq[idx],
            self.due[idx],
        )  # fmt: skip


def _concat(flows: list[_Flow]) -> _Flow:
    """Rows of several flows as one (held rows first: they are there before any arrival)."""
    if len(flows) == 1:
        return flows[0]
    return _Flow(
        pa.concat_tables([f.table for f in flows]),
        np.concatenate([f.at for f in flows]),
        np.concatenate([f.ts for f in flows]),
        np.concatenate([f.seq for f in flows]),
        np.concatenate([f.due for f in flows]),
    )


class _SlackBuffer:
    """One buffer of a chain, on the source clock (module docstring).

    It holds *runs*: the tuples that stayed at one step, sorted by timestamp then arrival.
    A step releases a prefix of each run (a zero-copy slice) and adds at most one run, so a
    tuple is copied once on its way in and once on its way out, not at every arrival it
    waits through. Runs are merged when there are many (:data:`MAX_RUNS`)."""

    MAX_RUNS = 32

    def __init__(self, on: str, index: int, buffer: Buffer, k_acc: int) -> None:
        self.on, self.index, self.buffer, self.k_acc = on, index, buffer, k_acc
        self.runs: list[_Flow] = []
        #: The leaves this buffer's tuples are still due at (its targets' and the chain's
        #: later buffers'), as bits; set when the configuration is placed.
        self.serves = np.uint64(0)

    @property
    def count(self) -> int:
        return sum(r.rows for r in self.runs)

    def step(self, flow: _Flow | None, tops: np.ndarray | None) -> _Flow | None:
        """Take ``flow`` (None: nothing arrived here); release what the source's running
        maxima ``tops`` (one per arrival of the batch; None: the end of the stream) allow."""
        if flow is not None and flow.rows:
            due_here = (flow.due & self.serves) != 0
            if not due_here.all():  # migrated rows: keep only those still due past here
                flow = flow.take(np.flatnonzero(due_here))
        if flow is not None and not flow.rows:
            flow = None
        if tops is None:  # end of the stream: all out, at one final arrival
            parts = [*self.runs, *([flow] if flow is not None else [])]
            self.runs = []
            if not parts:
                return None
            whole = _concat(parts)
            return _Flow(whole.table, np.zeros(whole.rows, np.int64), whole.ts, whole.seq,
                         whole.due)  # fmt: skip
        bounds = tops - self.k_acc
        last = int(bounds[-1])
        out: list[_Flow] = []
        kept: list[_Flow] = []
        for run in self.runs:  # a sorted run releases a prefix
            k = int(np.searchsorted(run.ts, last, side="right"))
            if k:
                head = run.ts[:k]
                at_head = np.searchsorted(bounds, head, side="left")
                out.append(_Flow(run.table.slice(0, k), at_head, head, run.seq[:k], run.due[:k]))
            if k == 0:
                kept.append(run)
            elif k < run.rows:
                rest = _Flow(run.table.slice(k), run.at[k:], run.ts[k:], run.seq[k:], run.due[k:])
                kept.append(rest)
        if flow is not None:
            at = np.maximum(flow.at, np.searchsorted(bounds, flow.ts, side="left"))
            go = at < len(tops)
            if go.all():  # a new flow object: ``flow`` also goes to other consumers
                out.append(_Flow(flow.table, at, flow.ts, flow.seq, flow.due))
            else:
                idx = np.flatnonzero(go)
                if len(idx):
                    released = flow.take(idx)
                    released.at = at[idx]
                    out.append(released)
                stay = np.flatnonzero(~go)
                order = stay[np.lexsort((flow.seq[stay], flow.ts[stay]))]
                kept.append(flow.take(order))
        if len(kept) > self.MAX_RUNS:
            whole = _concat(kept)
            kept = [whole.take(np.lexsort((whole.seq, whole.ts)))]
        self.runs = kept
        if not out:
            return None
        return _concat(out)


@dataclass
class Adaptation:
    """What one :meth:`SharedSubplan.reconfigure` did: buffers taken over as they were,
    held tuples moved through the new configuration, and its wall time."""

    reuse: str
    buffers_reused: int
    buffers_new: int
    tuples_kept: int
    tuples_migrated: int
    #: Re-targeting: the new buffers placed, old ones taken over, the rest collected.
    micros: float
    #: The migrated tuples sent through the new configuration and what the new sizes
    #: release at once (work the next arrival would otherwise do in part).
    release_micros: float


class SharedSubplan:
    """A subplan (the source's tree) running a configuration. :meth:`push` each arriving
    batch (arrival order), :meth:`flush` at the end; both return, per leaf name, the rows it
    received (a RecordBatch in release order) or nothing for a leaf that received none.
    ``time_column``: the timestamp column's name (int64 ticks). ``held_peak`` and
    :meth:`held_mean` measure the buffered tuples (sampled after each arriving batch).
    :meth:`reconfigure` adapts to new kappas and a new configuration while running."""

    def __init__(
        self,
        root: Node,
        config: Configuration,
        kappa: Mapping[str, int],
        time_column: str,
    ) -> None:
        check_configuration(root, kappa, config)
        self.root = root
        self.config = config
        self.kappa = dict(kappa)
        self.time_column = time_column
        self.top: int | None = None
        self.seq = 0
        self.held_peak = 0
        self._held_sum = 0
        self._samples = 0
        leaves = [v for v in root.walk() if v.is_leaf]
        if len(leaves) > 63:
            raise ValueError("a shared subplan serves at most 63 queries")
        self.bit = {v.name: np.uint64(1 << i) for i, v in enumerate(leaves)}
        self.all_bits = np.uint64((1 << len(leaves)) - 1)
        self.below: dict[str, np.uint64] = {}
        self._below(root)
        self.buffers: dict[str, list[_SlackBuffer]] = self._place(config)
        self.adaptations: list[Adaptation] = []

    def _below(self, v: Node) -> np.uint64:
        """The bits of the leaves under ``v`` (``v`` itself for a leaf)."""
        bits = self.bit[v.name] if v.is_leaf else np.uint64(0)
        for c in v.children:
            bits = bits | self._below(c)
        self.below[v.name] = bits
        return bits

    def _place(self, config: Configuration) -> dict[str, list[_SlackBuffer]]:
        """The buffers of ``config`` with their accumulated sizes (source down to and
        including each) and the leaves each is still due to serve."""
        made: dict[str, list[_SlackBuffer]] = {}

        def go(v: Node, above: int) -> None:
            chain = config.chains.get(v.name, [])
            acc = above
            child_acc = {c.name: above for c in v.children}
            bufs = []
            for i, b in enumerate(chain):
                acc += b.size
                bufs.append(_SlackBuffer(v.name, i, b, acc))
                for t in b.targets:
                    child_acc[t] = acc
            serves = np.uint64(0)
            for buf in reversed(bufs):  # a buffer serves its targets and the chain after it
                for t in buf.buffer.targets:
                    serves = serves | self.below[t]
                buf.serves = serves
            if bufs:
                made[v.name] = bufs
            for c in v.children:
                go(c, child_acc[c.name])

        go(self.root, 0)
        return made

    @property
    def held(self) -> int:
        return sum(b.count for chain in self.buffers.values() for b in chain)

    def held_by_buffer(self) -> dict[str, int]:
        return {f"{b.on}#{b.index}": b.count for ch in self.buffers.values() for b in ch}

    def held_mean(self) -> float:
        return self._held_sum / self._samples if self._samples else 0.0

    def push(self, batch: pa.RecordBatch) -> dict[str, pa.RecordBatch]:
        n = batch.num_rows
        if n == 0:
            return {}
        ts = np.asarray(
            batch.column(self.time_column).to_numpy(zero_copy_only=False), dtype=np.int64
        )
        tops = np.maximum.accumulate(ts)
        if self.top is not None:
            tops = np.maximum(tops, self.top)
        self.top = int(tops[-1])
        seq = np.arange(self.seq, self.seq + n, dtype=np.int64)
        self.seq += n
        due = np.full(n, self.all_bits, dtype=np.uint64)
        flow = _Flow(pa.Table.from_batches([batch]), np.arange(n, dtype=np.int64), ts, seq, due)
        out: dict[str, pa.RecordBatch] = {}
        self._visit(self.root, flow, tops, out)
        held = self.held
        self.held_peak = max(self.held_peak, held)
        self._held_sum += held
        self._samples += 1
        return out

    def flush(self) -> dict[str, pa.RecordBatch]:
        out: dict[str, pa.RecordBatch] = {}
        self._visit(self.root, None, None, out)
        return out

    def reconfigure(
        self, config: Configuration, kappa: Mapping[str, int], reuse: str = "smart"
    ) -> tuple[dict[str, pa.RecordBatch], Adaptation]:
        """Adapt to new kappas and their ``config`` (Ji, Sec. 5.5) between two arrivals.

        A buffer of the new configuration on the same node and serving the same leaves as an
        old one takes the old one's tuples as they are (its size may change): with ``reuse``
        ``smart`` any such buffer, with ``naive`` only the tail of an old chain (the
        dissertation's naive buffer reuse), with ``none`` no buffer. Every other held tuple
        is migrated: sent through the new configuration from the source, due only at the
        leaves it had not reached (no duplicate release) and released at once where the new
        kappas already allow it (no missing release). Returns, per leaf, the rows released
        by the adaptation itself, and what it did.

        Semantics: from the adaptation on, a tuple reaches query ``c`` at the first arrival
        with ``T - kappa_c >= ts`` under the kappa then in force (a kappa that grows holds
        back tuples that arrive after the change; what was released stays released).
        """
        t0 = time.perf_counter()
        check_configuration(self.root, kappa, config)
        if reuse not in ("smart", "naive", "none"):
            raise ValueError(f"reuse must be smart, naive or none, not {reuse!r}")
        new = self._place(config)
        old = [b for chain in self.buffers.values() for b in chain]
        tails = {id(chain[-1]) for chain in self.buffers.values()}
        spare: dict[tuple[str, int], list[_SlackBuffer]] = {}
        for b in old:
            if b.runs:
                spare.setdefault((b.on, int(b.serves)), []).append(b)
        reused = kept = 0
        for chain in new.values():
            for b in chain:
                candidates = spare.get((b.on, int(b.serves)), [])
                if not candidates or reuse == "none":
                    continue
                prev = candidates[-1]
                if reuse == "naive" and id(prev) not in tails:
                    continue
                candidates.pop()
                b.runs = prev.runs
                kept += prev.count
                reused += 1
        moving = []
        for group in spare.values():
            for b in group:
                for run in b.runs:
                    run.due = run.due & b.serves
                    moving.append(run)
        migrated = sum(f.rows for f in moving)
        t1 = time.perf_counter()
        self.buffers = new
        self.config = config
        self.kappa = dict(kappa)
        out: dict[str, pa.RecordBatch] = {}
        if self.top is not None:
            flow = _concat(moving) if moving else None
            if flow is not None:
                flow.at = np.zeros(flow.rows, np.int64)
            # One arrival without a tuple at the current T: what the new sizes release now.
            self._visit(self.root, flow, np.array([self.top], dtype=np.int64), out)
        adaptation = Adaptation(
            reuse, reused, sum(len(c) for c in new.values()) - reused, kept, migrated,
            (t1 - t0) * 1e6, (time.perf_counter() - t1) * 1e6,
        )  # fmt: skip
        self.adaptations.append(adaptation)
        return out, adaptation

    def _visit(
        self,
        v: Node,
        flow: _Flow | None,
        tops: np.ndarray | None,
        out: dict[str, pa.RecordBatch],
    ) -> None:
        if flow is not None and flow.rows:
            if v.is_filter and v.predicate is not None:
                flow = flow.take(_mask_rows(flow.table, v.predicate))
            if flow.rows and not (flow.due == self.all_bits).all():
                flow = flow.take(np.flatnonzero(flow.due & self.below[v.name]))
        chain = self.buffers.get(v.name, [])
        fed: dict[str, _Flow | None] = {}
        current = flow
        for buf in chain:
            current = buf.step(current, tops)
            for t in buf.buffer.targets:
                fed[t] = current
        if v.is_leaf:
            got = current if chain else flow
            if got is not None and got.rows:
                order = np.lexsort((got.seq, got.ts, got.at))
                out[v.name] = got.table.take(pa.array(order)).combine_chunks().to_batches()[0]
            return
        for c in v.children:
            self._visit(c, fed.get(c.name, flow), tops, out)


def _mask_rows(table: pa.Table, predicate: Any) -> np.ndarray:
    """Row indices of ``table`` that pass ``predicate``: a callable returning them, or a
    pyarrow compute Expression (a null result does not pass)."""
    if callable(predicate):
        return np.asarray(predicate(table), dtype=np.int64)
    indexed = table.append_column(_INDEX, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    kept = indexed.filter(predicate).column(_INDEX)
    return np.asarray(kept.to_numpy(), dtype=np.int64)


def run_shared(
    root: Node,
    config: Configuration,
    kappa: Mapping[str, int],
    batches: Any,
    time_column: str,
) -> tuple[dict[str, pa.Table], SharedSubplan]:
    """Every batch of ``batches`` through a :class:`SharedSubplan`; per leaf its whole
    released stream (the arrivals' releases in order, then the flush)."""
    sub = SharedSubplan(root, config, kappa, time_column)
    parts: dict[str, list[pa.RecordBatch]] = {v.name: [] for v in root.walk() if v.is_leaf}
    schema = None
    for b in batches:
        schema = b.schema
        for name, rb in sub.push(b).items():
            parts[name].append(rb)
    for name, rb in sub.flush().items():
        parts[name].append(rb)
    tables = {
        name: pa.Table.from_batches(rbs, schema=schema) if schema is not None else pa.table({})
        for name, rbs in parts.items()
    }
    return tables, sub


__all__ = ["SharedSubplan", "run_shared"]

"""Inner joins over deltas: symmetric hash join (equi-keys) and nested-loop join (theta).

Both keep each input's current relation. A change of the left input is joined with the
right relation as it was, then the left relation is updated, then the right change is joined
with the *new* left relation: ``(L+dL)(R+dR) - LR = dL.R + (L+dL).dR`` (bag algebra), so
window expiration on either side produces exactly the deletions of the joined tuples.

The hash join keeps, per side, a dict from key to a deque of tuples; window expiration
deletes in arrival order, so a delete almost always hits the head of its deque (O(1)).
The nested-loop join is the same with a single bucket. A residual (non-equi) predicate is
evaluated on each matched pair. When an input is replaced wholesale (tumbling/NOW window),
the join recomputes its full output and emits a replacing delta.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from engines.row.base import NO_CHANGE, Delta, Row, RowOperator, Rows

Key = Callable[[Row], Any]


class _Store:
    """One side's relation: key -> deque of tuples (a bag)."""

    __slots__ = ("buckets", "key", "size")

    def __init__(self, key: Key) -> None:
        self.key = key
        self.buckets: dict[Any, deque[Row]] = {}
        self.size = 0

    def add_all(self, rows: Rows) -> None:
        key, buckets = self.key, self.buckets
        for r in rows:
            k = key(r)
            b = buckets.get(k)
            if b is None:
                buckets[k] = deque((r,))
            else:
                b.append(r)
        self.size += len(rows)

    def remove(self, r: Row, k: Any) -> None:
        b = self.buckets[k]
        if b[0] == r:
            b.popleft()
        else:
            b.remove(r)
        if not b:
            del self.buckets[k]
        self.size -= 1

    def clear(self) -> None:
        self.buckets.clear()
        self.size = 0

    def rows(self) -> Rows:
        return [r for b in self.buckets.values() for r in b]


class HashJoinOp(RowOperator):
    """Symmetric hash join on equi-keys, with an optional residual predicate.

    ``left_key``/``right_key`` extract the join key; ``residual`` (or None) tests the
    concatenated tuple. With no equi-keys both key functions return ``()`` and this is the
    nested-loop join.
    """

    kind = "join"
    impl = "tree"

    def __init__(
        self,
        op_id: str,
        left_key: Key,
        right_key: Key,
        residual: Callable[[Row], bool] | None,
        replace_in: tuple[bool, bool],
        nested_loop: bool = False,
    ) -> None:
        super().__init__(op_id, replace_out=any(replace_in))
        self.left = _Store(left_key)
        self.right = _Store(right_key)
        self.residual = residual
        self.replace_in = replace_in
        self.nested_loop = nested_loop
        self.probes = 0
        #: Stored tuples the residual was tested on (the probes' bucket rows).
        self.examined = 0
        #: Per side: rows probed, and rows that found no partner (JIT's signal).
        self.probed = [0, 0]
        self.unmatched = [0, 0]
        self.peak_stored = 0

    # probe one delta list of one side against the other side's store
    def _probe(self, rows: Rows, key: Key, other: _Store, left_side: bool, out: Rows) -> None:
        buckets = other.buckets
        residual = self.residual
        append = out.append
        self.probes += len(rows)
        missed = 0
        examined = 0
        for r in rows:
            b = buckets.get(key(r))
            if not b:
                missed += 1
                continue
            if residual is not None:
                examined += len(b)
            if left_side:
                if residual is None:
                    out.extend([r + o for o in b])
                else:
                    for o in b:
                        j = r + o
                        if residual(j):
                            append(j)
            elif residual is None:
                out.extend([o + r for o in b])
            else:
                for o in b:
                    j = o + r
                    if residual(j):
                        append(j)
        self.examined += examined
        side = 0 if left_side else 1
        self.probed[side] += len(rows)
        self.unmatched[side] += missed

    def _remove_all(self, store: _Store, rows: Rows) -> None:
        key = store.key
        for r in rows:
            store.remove(r, key(r))

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        dl, dr = inputs
        if dl.empty and dr.empty:
            return NO_CHANGE
        if self.replace_out:
            return self._step_replace(dl, dr)
        ins: Rows = []
        dels: Rows = []
        left, right = self.left, self.right
        # dL joins the old R; then L is updated (inserts before deletes: a derived input may
        # delete a tuple it inserts in the same delta); then dR joins the new L.
        if dl.ins:
            self._probe(dl.ins, left.key, right, True, ins)
        if dl.dels:
            self._probe(dl.dels, left.key, right, True, dels)
        if dl.ins:
            left.add_all(dl.ins)
        if dl.dels:
            self._remove_all(left, dl.dels)
        if dr.ins:
            self._probe(dr.ins, right.key, left, False, ins)
        if dr.dels:
            self._probe(dr.dels, right.key, left, False, dels)
        if dr.ins:
            right.add_all(dr.ins)
        if dr.dels:
            self._remove_all(right, dr.dels)
        stored = left.size + right.size
        if stored > self.peak_stored:
            self.peak_stored = stored
        if not ins and not dels:
            return NO_CHANGE
        return Delta(ins, dels)

    def _apply(self, store: _Store, d: Delta) -> None:
        if d.replace:
            store.clear()
            store.add_all(d.ins)
            return
        if d.ins:
            store.add_all(d.ins)
        if d.dels:
            self._remove_all(store, d.dels)

    def _step_replace(self, dl: Delta, dr: Delta) -> Delta:
        """An input was replaced wholesale: update both sides and emit the full join."""
        self._apply(self.left, dl)
        self._apply(self.right, dr)
        out: Rows = []
        # Probe with the smaller side.
        if self.left.size <= self.right.size:
            self._probe(self.left.rows(), self.left.key, self.right, True, out)
        else:
            self._probe(self.right.rows(), self.right.key, self.left, False, out)
        return Delta(out, [], replace=True)

    def state(self) -> dict[str, Any]:
        return {
            "left_tuples": self.left.size,
            "right_tuples": self.right.size,
            "left_keys": len(self.left.buckets),
            "right_keys": len(self.right.buckets),
        }

    def join_metrics(self) -> dict[str, Any]:
        """Per-join figures for the run metrics (probes, tuples stored)."""
        return {
            "impl": self.impl,
            "probes": self.probes,
            "examined": self.examined,
            "tuples_stored": self.left.size + self.right.size,
            "peak_tuples_stored": self.peak_stored,
        }

    def snapshot(self) -> dict[str, Any]:
        return {"left": self.left.rows(), "right": self.right.rows()}

    def restore(self, snap: dict[str, Any]) -> None:
        self.left.clear()
        self.right.clear()
        self.left.add_all(list(snap["left"]))
        self.right.add_all(list(snap["right"]))

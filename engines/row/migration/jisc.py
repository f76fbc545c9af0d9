"""JISC-aware joins: a join whose left input state starts incomplete and is completed lazily,
one join key at a time, when something reads it (Aly et al., EDBT'14, with the fixes of
research/plan-migration.md section 1.5).

The incomplete state ``A`` is the left store of a join ``P``; ``A`` holds the output relation
of the join ``J`` below it (``A = C join D``). After the transition at instant ``T0`` the
store holds exactly the entries that normal processing produced since then: every entry that
has at least one component shown after ``T0`` ("new"). The entries made of old components
only are missing until their key is completed. Invariant, per key ``k`` not yet completed::

    store[k] = A[k] - old(A[k])        (bags)

Deltas stay exact (the operators above see what the from-scratch plan would give them)
because no bucket is *read* before it is exact:

* a change of the right input probes ``A``: each probed key is completed first;
* a change of ``A`` itself probes the right store (complete: a leaf) and is applied to ``A``:
  inserts are new entries (always inserted); a delete of an entry missing from the bucket is
  an old entry never inserted (tolerated: nothing to remove); a delete of an entry present
  in the bucket may be a new entry or an equal old one, so the key is completed first (the
  completion already reflects the delete).

Completing key ``k`` replaces the bucket with ``A[k]`` recomputed from ``J``'s stores at the
current instant (recursively completing ``C``'s key when ``C`` is incomplete too); by the
invariant this adds exactly the all-old entries (the spec's "insert only all-pre-T_trans
entries"), and it stays exact even if the invariant were off. Which keys need it: the
*candidates*, the keys of ``A`` that had old entries at ``T0`` (``keys(C) & keys(D)`` at
``T0``, mapped to ``P``'s key); any other key is exact already and costs nothing (research
scenario JISC-7). A state is marked complete when every candidate is completed (the counter
of section 4.3) or once every old tuple has expired (``deadline``: ``T0`` plus the largest
window, rounded up to that window's next slide instant; only when every leaf under the state
is a time-based window seen through selects, projects and joins).

Keys. Per-key completion needs ``P``'s key to determine ``J``'s key and back ("aligned":
every column of ``P``'s key is equal, through the equi-predicates applied below ``P``, to a
column of ``J``'s key, and every pair of ``J``'s key is covered). Otherwise (multi-attribute
keys that do not line up, a theta join below an equi-join) the state is completed whole, from
``J``'s stores, the first time it is read ("eager recompute of the affected state", the
spec's caveat 2).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from engines.row.base import NO_CHANGE, Delta, Rows
from engines.row.joins.tree import HashJoinOp, _Store


class LazyStore:
    """The completion state of one incomplete join store (see the module docstring)."""

    def __init__(
        self,
        store: _Store,
        complete_key: Callable[[Any], Rows] | None,
        complete_all: Callable[[], Rows],
        candidates: set[Any] | None,
        deadline: int | None,
    ) -> None:
        self.store = store
        self._complete_key = complete_key  # None: not aligned, complete whole on first read
        self._complete_all = complete_all
        self.candidates = candidates
        self.deadline = deadline
        self.completed: set[Any] = set()
        self.keys_completed = 0
        self.full_recomputes = 0
        self.complete = False
        self._remaining = len(candidates) if candidates is not None else -1
        if candidates is not None and not candidates:
            self.finish()

    def needs(self, k: Any) -> bool:
        """Whether bucket ``k`` may miss old entries."""
        if self.complete:
            return False
        if self.candidates is None:
            return True
        return k in self.candidates and k not in self.completed

    def ensure(self, k: Any) -> bool:
        """Make bucket ``k`` exact; True when that completed the whole store."""
        if not self.needs(k):
            return False
        if self._complete_key is None:
            self.fill_all()
            return True
        rows = self._complete_key(k)
        store = self.store
        old = store.buckets.pop(k, None)
        if old is not None:
            store.size -= len(old)
        if rows:
            store.buckets[k] = deque(rows)
            store.size += len(rows)
        self.completed.add(k)
        self.keys_completed += 1
        self._remaining -= 1
        if self._remaining == 0:
            self.finish()
        return False

    def fill_all(self) -> None:
        """Recompute the whole store from the join below (exact at the current instant)."""
        if self.complete:
            return
        rows = self._complete_all()
        self.store.clear()
        self.store.add_all(rows)
        self.full_recomputes += 1
        self.finish()

    def finish(self) -> None:
        self.complete = True
        self.candidates = None
        self.completed = set()

    def after_instant(self, instant: int) -> None:
        """Every old tuple has expired once ``deadline`` has been processed."""
        if not self.complete and self.deadline is not None and instant >= self.deadline:
            self.finish()


class JiscJoinOp(HashJoinOp):
    """A hash join whose left store is completed lazily (:class:`LazyStore`)."""

    def __init__(self, base: HashJoinOp, lazy: LazyStore) -> None:
        super().__init__(
            base.op_id,
            base.left.key,
            base.right.key,
            base.residual,
            base.replace_in,
            base.nested_loop,
        )
        self.metrics = base.metrics
        self.left = base.left
        self.right = base.right
        self.lazy = lazy
        assert lazy.store is self.left

    def left_complete(self) -> bool:
        return self.lazy.complete

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        lz = self.lazy
        if lz.complete:
            return super().step(instant, inputs)
        dl, dr = inputs
        if dl.empty and dr.empty:
            out = NO_CHANGE
        elif self.replace_out:
            out = self._step_replace_lazy(dl, dr)
        else:
            out = self._step_lazy(dl, dr)
        lz.after_instant(instant)
        return out

    def _step_lazy(self, dl: Delta, dr: Delta) -> Delta:
        ins: Rows = []
        dels: Rows = []
        left, right, lz = self.left, self.right, self.lazy
        if dl.ins:
            self._probe(dl.ins, left.key, right, True, ins)
        if dl.dels:
            self._probe(dl.dels, left.key, right, True, dels)
        if dl.ins:
            left.add_all(dl.ins)  # entries shown after T0: new, always kept
        if dl.dels:
            self._remove_lazy(dl.dels)
        if dr.ins or dr.dels:
            key = right.key
            for rows in (dr.ins, dr.dels):
                for r in rows:
                    if lz.complete:
                        break
                    lz.ensure(key(r))  # complete every probed key before the probe
        if dr.ins:
            self._probe(dr.ins, right.key, left, False, ins)
        if dr.dels:
            self._probe(dr.dels, right.key, left, False, dels)
        if dr.ins:
            right.add_all(dr.ins)
        if dr.dels:
            self._remove_all(right, dr.dels)
        if not ins and not dels:
            return NO_CHANGE
        return Delta(ins, dels)

    def _remove_lazy(self, rows: Rows) -> None:
        """Apply deletes to the left store (see the module docstring for the rules)."""
        left, lz = self.left, self.lazy
        key = left.key
        done: set[Any] = set()  # keys completed during this delete pass: already exact
        for r in rows:
            k = key(r)
            if k in done:
                continue
            if not lz.needs(k):
                left.remove(r, k)
                continue
            b = left.buckets.get(k)
            if b is not None and r in b:
                if lz.ensure(k):
                    return  # recomputed whole: every delete is reflected
                done.add(k)
            # else: an all-old entry that was never inserted; nothing to delete

    def _step_replace_lazy(self, dl: Delta, dr: Delta) -> Delta:
        if dl.replace:
            self._apply(self.left, dl)
            self.lazy.finish()
        else:
            self.lazy.fill_all()  # the join below is already at this instant: dl included
        self._apply(self.right, dr)
        out: Rows = []
        if self.left.size <= self.right.size:
            self._probe(self.left.rows(), self.left.key, self.right, True, out)
        else:
            self._probe(self.right.rows(), self.right.key, self.left, False, out)
        return Delta(out, [], replace=True)

    def state(self) -> dict[str, Any]:
        lz = self.lazy
        return {
            **super().state(),
            "left_complete": lz.complete,
            "keys_completed": lz.keys_completed,
            "keys_left": (len(lz.candidates - lz.completed) if lz.candidates is not None else None),
        }


def join_rows(op: HashJoinOp) -> Rows:
    """The whole output relation of a join, from its two stores (both must be exact)."""
    out: Rows = []
    residual = op.residual
    rb = op.right.buckets
    for k, lrows in op.left.buckets.items():
        rrows = rb.get(k)
        if not rrows:
            continue
        for left in lrows:
            if residual is None:
                out.extend([left + r for r in rrows])
            else:
                for r in rrows:
                    j = left + r
                    if residual(j):
                        out.append(j)
    return out


def key_rows(op: HashJoinOp, k: Any) -> Rows:
    """The output rows of a join whose join key is ``k`` (its stores' buckets ``k``)."""
    lrows = op.left.buckets.get(k)
    rrows = op.right.buckets.get(k)
    if not lrows or not rrows:
        return []
    residual = op.residual
    out: Rows = []
    for left in lrows:
        for r in rrows:
            j = left + r
            if residual is None or residual(j):
                out.append(j)
    return out

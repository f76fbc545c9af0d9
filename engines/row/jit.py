"""Just-in-time processing between the joins of a tree (Yang & Papadias, ICDE'08; seed 003),
per research/acaching-and-jit.md section 2, in the row engine's delta model.

A *consumer* join ``P`` reads a *producer* join ``C`` on one side. A partial result of ``C``
whose key for ``P`` has no partner in ``P``'s opposite store is a non-productive result (NPR);
JIT stops ``C`` from producing it until a partner arrives.

The minimal non-productive sub-tuples (MNS) are found by exact hash checks (the spec's advice
for hash joins: level-1 checks): ``P``'s key on ``C``'s output must come from one input side
of ``C`` (a Type I MNS; keys spanning both sides are Type II, which the paper allows to skip),
so the MNS of a partial is its component on that side, identified by its key value ``v``.
Feedback is a synchronous call (the spec's advice for Python). Suspension and blacklists are
keyed by ``v`` (the spec's fix of the MNS-expiry gap: a younger similar tuple stays covered).

Protocol, with ``suspended`` the set of keys ``C`` does not produce:

* ``P`` receives partials of key ``v`` and, after the step, its opposite store has no ``v``:
  ``P`` drops its stored partials of ``v`` (they cannot produce output) and calls
  ``C.suspend(v)``: ``C`` moves its side-store tuples of key ``v`` to a blacklist. Opposite
  arrivals at ``C`` no longer see them; their own deletes leave the blacklist silently; new
  tuples of key ``v`` go straight to it. ``C`` emits no partial of key ``v`` any more.
* an opposite arrival at ``P`` with a suspended key ``v`` (before ``P`` probes): ``C.resume(v)``
  moves the blacklisted tuples back and returns their join with ``C``'s other store, i.e.
  every current partial of key ``v``; ``P`` adds them to its store, then processes the instant
  as usual (the resumed partials are part of the relation the arrival joins).

Invariant: ``P``'s store = the full producer relation restricted to unsuspended keys, and no
suspended key has a partner in ``P``'s opposite store. Hence every output is exact; the
delete of a suspended partial is never emitted because its insert was dropped with it. DOE
(the empty-state case) is the per-key rule applied to every key that arrives.

Restrictions (lowering enforces them; ``links_for_chain``): one producer per consumer (two
producers of one consumer could each wait for the other), a producer is not also a consumer
(its blacklist would hide tuples from its own producer's feedback), equi-joins only, no
wholesale-replaced inputs. ``snapshot`` returns full states (suspended partials recomputed,
blacklisted tuples included) so migration and checkpoints see exact relations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engines.row.base import Delta, Row, Rows
from engines.row.compile import compile_key
from engines.row.join import HashJoinOp, _Store

Key = Callable[[Row], Any]


class JitJoinOp(HashJoinOp):
    """A hash join that can be a JIT producer, a JIT consumer, or plain (no link)."""

    impl = "jit"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # producer role
        self.pk_side: int | None = None
        self.pk: Key | None = None
        self.suspended: set[Any] = set()
        self.blacklist: dict[Any, Rows] = {}
        self.active_by_pk: dict[Any, Rows] = {}
        # consumer role
        self.child: JitJoinOp | None = None
        self.child_side = 0
        # figures
        self.suspensions = 0
        self.resumptions = 0
        self.partials_dropped = 0
        self.partials_recomputed = 0
        self.blacklisted_arrivals = 0
        self.peak_stored = 0

    # -- producer -------------------------------------------------------------------------------

    def make_producer(self, side: int, cols: Sequence[int]) -> None:
        """Produce for a consumer whose key is ``cols`` of this join's ``side`` input."""
        self.pk_side = side
        self.pk = compile_key(list(cols))
        store = self.left if side == 0 else self.right
        for r in store.rows():
            self.active_by_pk.setdefault(self.pk(r), []).append(r)

    def _side_store(self) -> _Store:
        return self.left if self.pk_side == 0 else self.right

    def suspend(self, v: Any) -> None:
        if v in self.suspended:
            return
        self.suspended.add(v)
        self.suspensions += 1
        rows = self.active_by_pk.pop(v, None)
        store = self._side_store()
        if rows:
            key = store.key
            for r in rows:
                store.remove(r, key(r))
        self.blacklist[v] = rows or []

    def resume(self, v: Any) -> Rows:
        """Every current partial of key ``v``; ``v`` is produced again from now on."""
        self.suspended.discard(v)
        self.resumptions += 1
        rows = self.blacklist.pop(v, [])
        out: Rows = []
        if rows:
            store = self._side_store()
            store.add_all(rows)
            self.active_by_pk.setdefault(v, []).extend(rows)
            self._probe_side(rows, out)
        self.partials_recomputed += len(out)
        return out

    def recompute(self, v: Any) -> Rows:
        """The partials of a suspended key, without resuming it (snapshots)."""
        out: Rows = []
        self._probe_side(self.blacklist.get(v, []), out)
        return out

    def _probe_side(self, rows: Rows, out: Rows) -> None:
        if self.pk_side == 0:
            self._probe(rows, self.left.key, self.right, True, out)
        else:
            self._probe(rows, self.right.key, self.left, False, out)

    def _split(self, d: Delta) -> Delta:
        """The producer side's delta without the suspended keys' tuples (which go to, or
        leave, the blacklist)."""
        pk = self.pk
        assert pk is not None
        susp = self.suspended
        ins: Rows = []
        dels: Rows = []
        by_pk = self.active_by_pk
        for r in d.ins:
            v = pk(r)
            if v in susp:
                self.blacklist[v].append(r)
                self.blacklisted_arrivals += 1
            else:
                ins.append(r)
                b = by_pk.get(v)
                if b is None:
                    by_pk[v] = [r]
                else:
                    b.append(r)
        for r in d.dels:
            v = pk(r)
            if v in susp:
                self.blacklist[v].remove(r)
            else:
                dels.append(r)
                b = by_pk[v]
                b.remove(r)
                if not b:
                    del by_pk[v]
        return Delta(ins, dels)

    # -- consumer -------------------------------------------------------------------------------

    def make_consumer(self, side: int, child: JitJoinOp) -> None:
        self.child = child
        self.child_side = side

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        if self.pk_side is not None:
            d = inputs[self.pk_side]
            if not d.empty:
                inputs = list(inputs)
                inputs[self.pk_side] = self._split(d)
        child = self.child
        if child is None:
            out = super().step(instant, inputs)
            self._peak()
            return out
        c = self.child_side
        mine = self.left if c == 0 else self.right
        other = self.right if c == 0 else self.left
        dother = inputs[1 - c]
        if dother.ins and child.suspended:
            okey = other.key
            susp = child.suspended
            wake = {k for k in map(okey, dother.ins) if k in susp}
            for v in wake:
                rows = child.resume(v)
                if rows:
                    mine.add_all(rows)
        out = super().step(instant, inputs)
        dchild = inputs[c]
        if dchild.ins:
            key = mine.key
            partners = other.buckets
            susp = child.suspended
            for v in {key(r) for r in dchild.ins}:
                if v not in partners and v not in susp:
                    b = mine.buckets.pop(v, None)
                    if b is not None:
                        mine.size -= len(b)
                        self.partials_dropped += len(b)
                    child.suspend(v)
        self._peak()
        return out

    def _peak(self) -> None:
        n = self.left.size + self.right.size + sum(len(b) for b in self.blacklist.values())
        if n > self.peak_stored:
            self.peak_stored = n

    # -- state ----------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        left, right = self.left.rows(), self.right.rows()
        extra = [r for rows in self.blacklist.values() for r in rows]
        if self.pk_side == 0:
            left += extra
        elif self.pk_side == 1:
            right += extra
        if self.child is not None:
            full = [r for v in self.child.suspended for r in self.child.recompute(v)]
            if self.child_side == 0:
                left += full
            else:
                right += full
        return {"left": left, "right": right}

    def restore(self, snap: dict[str, Any]) -> None:
        super().restore(snap)
        self.suspended.clear()
        self.blacklist.clear()
        self.active_by_pk.clear()
        if self.pk_side is not None and self.pk is not None:
            for r in self._side_store().rows():
                self.active_by_pk.setdefault(self.pk(r), []).append(r)

    def join_metrics(self) -> dict[str, Any]:
        m = super().join_metrics()
        m.update(
            {
                "impl": "jit",
                "role": ("producer " if self.pk_side is not None else "")
                + ("consumer" if self.child is not None else ""),
                "suspensions": self.suspensions,
                "resumptions": self.resumptions,
                "suspended_keys": len(self.suspended),
                "blacklisted_tuples": sum(len(b) for b in self.blacklist.values()),
                "partials_dropped": self.partials_dropped,
                "partials_recomputed": self.partials_recomputed,
                "blacklisted_arrivals": self.blacklisted_arrivals,
                "peak_tuples_stored": self.peak_stored,
            }
        )
        return m


def link(
    parent: JitJoinOp,
    side: int,
    child: JitJoinOp,
    parent_cols: Sequence[int],
    child_left_width: int,
) -> bool:
    """Make ``child`` (on ``parent``'s ``side``) a JIT producer for ``parent`` when allowed:
    ``parent_cols`` are the parent's key columns on that side (columns of the child's
    output). Returns whether the link was made."""
    if parent.child is not None or child.child is not None or parent.pk_side is not None:
        return False
    if not parent_cols or parent.nested_loop or any(parent.replace_in) or any(child.replace_in):
        return False
    if all(c < child_left_width for c in parent_cols):
        child.make_producer(0, parent_cols)
    elif all(c >= child_left_width for c in parent_cols):
        child.make_producer(1, [c - child_left_width for c in parent_cols])
    else:
        return False  # a Type II MNS: skipped
    parent.make_consumer(side, child)
    return True

"""Just-in-time processing between the joins of a tree (Yang & Papadias, ICDE'08; seed 003),
per research/acaching-and-jit.md section 2, in the row engine's delta model.

A *consumer* join ``P`` reads a *producer* join ``C`` on one side. A partial result of ``C``
with no partner in ``P``'s opposite store is a non-productive result (NPR); JIT stops ``C``
from producing it until a partner may exist.

MNS detection (section 2.4, with the spec's advice for hash joins: exact level-1 checks).
``P``'s join key on ``C``'s output is a list of equalities ``C.col_a = other.col'_a``; each
``col_a`` comes from one input side of ``C``. A partial is certainly an NPR when, for some
``a``, no tuple of ``P``'s opposite store has ``col'_a`` equal to the partial's ``col_a``: the
component of ``C``'s side that carries ``col_a`` is then a level-1 MNS, identified by the pair
``(a, value)``. ``P`` keeps, per ``a``, a count of its opposite store's values of ``col'_a``.
Feedback is a synchronous call (the spec's advice for Python), and suspensions are keyed by
``(a, value)``, not by tuples (the spec's fix of the MNS-expiry gap: a younger tuple with the
same value stays covered).

Protocol (``C.suspended`` is the set of suspended pairs):

* after a step, a partial that arrived at ``P`` has a value of ``col_a`` with no partner: ``P``
  drops its stored partials with that value (they can produce nothing) and calls
  ``C.suspend(a, value)``. ``C`` moves the tuples of that side carrying the value to a
  blacklist: arrivals on ``C``'s other side no longer see them, their own deletes leave the
  blacklist silently, and new tuples carrying a suspended value go straight to it. A tuple is
  blacklisted while any of its values is suspended.
* before a step, an arrival on ``P``'s other side whose ``col'_a`` value is suspended for
  ``a``: ``C.resume(a, value)`` releases the tuples no other suspended value holds back and
  returns their join with ``C``'s other (active) store; ``P`` adds these partials to its store,
  then processes the instant as usual (they belong to the relation the arrival joins).

Invariant: ``P``'s store is ``C``'s full result restricted to partials with no suspended value,
and no suspended ``(a, value)`` has a partner in ``P``'s opposite store. So every output is
exact, and the delete of a suspended partial is never emitted because its insert was dropped
with it. DOE (the empty-state case) is the rule applied to every value that arrives.

Restrictions (``link`` enforces them): one producer per consumer (two producers of one
consumer could each wait for the other), a producer is not also a consumer (its blacklist
would hide tuples from its own producer's feedback), equi-joins only, no wholesale-replaced
inputs. ``snapshot`` returns full states (suspended partials recomputed, blacklisted tuples
included) so migration and checkpoints see exact relations.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from engines.row.base import Delta, Row, Rows
from engines.row.joins.tree import HashJoinOp, _Store

Key = Callable[[Row], Any]


#: Input tuples (consumer's and producer's) per measuring epoch of the on/off controller.
EPOCH_TUPLES = 4000
#: Epochs in the better mode before the other mode is probed again (quadrupling each time a
#: probe loses).
PROBE_EVERY = 6
#: In plain mode, JIT is probed again only if at least this fraction of the producer's new
#: partials found no partner in the consumer (what JIT avoids producing).
NPR_MIN = 0.5
#: Epochs a probe lasts; only the last is judged (switching leaves a transient: relinking
#: suspends every value without a partner at once, unlinking recomputes held partials).
PROBE_EPOCHS = 2
#: The other mode must be faster per tuple by this fraction to be switched to.
SWITCH_MARGIN = 0.05


class JitJoinOp(HashJoinOp):
    """A hash join that can be a JIT producer, a JIT consumer, or plain (no link).

    A consumer can also decide whether JIT pays (``adaptive``, off by default;
    ``JoinSettings.jit_adaptive``): JIT's bookkeeping (value
    counts, per-value indexes, the blacklist checks) costs on every tuple, and saves only
    where partners are rare. Every ``EPOCH_TUPLES`` input tuples of the pair it measures the
    pair's seconds per tuple. It probes the other mode for ``PROBE_EPOCHS`` epochs
    (``unlink``: every held-back partial released, the bookkeeping dropped; ``relink``:
    rebuilt from the stores) and keeps it when its last epoch is faster by ``SWITCH_MARGIN``
    than the epoch before the probe; a probe that loses quadruples the wait before the next
    (``PROBE_EVERY`` epochs after a win), and in plain mode JIT is probed only while at least
    ``NPR_MIN`` of the producer's partials find no partner (``HashJoinOp.unmatched``, counted
    by the probe loop). Adjacent epochs are compared, so a window still
    filling biases little; the switches' own work is timed apart (``switch_s``)."""

    impl = "jit"

    def __init__(self, *args: Any, adaptive: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.adaptive = adaptive
        self.clock = 0.0  # seconds in step
        self.seen = 0  # input tuples
        self._link_args: tuple[int, JitJoinOp, list[tuple[int, int]], int] | None = None
        self.consumer: JitJoinOp | None = None  # the join this one produces for (linked)
        self.jit_on = True
        self.epoch_mark = (0.0, 0)
        self.epochs: list[dict[str, Any]] = []
        self.since_probe = 0
        self.probing = False
        self.probe_left = 0
        self.baseline = 0.0
        self.wait = 2  # the first probe (of plain) after two epochs
        self.npr_mark = (0, 0)  # (unmatched, probed) on the producer's side at the epoch's start
        self.switches = 0
        self.switch_s = 0.0
        # producer role: attrs[s] = [(a, column of side s's tuples)]
        self.producing = False
        self.attrs: tuple[list[tuple[int, int]], list[tuple[int, int]]] = ([], [])
        self.suspended: set[tuple[int, Any]] = set()
        self.blacklist: dict[tuple[int, Any], Rows] = {}
        self.active_by: dict[int, dict[Any, Rows]] = {}  # a -> value -> active tuples
        # consumer role
        self.child: JitJoinOp | None = None
        self.child_side = 0
        self.child_cols: list[int] = []  # per a: column of the child's output
        self.other_cols: list[int] = []  # per a: column of the other input
        self.other_counts: list[dict[Any, int]] = []
        self.by_value: list[dict[Any, set[Any]]] = []  # per a: value -> keys of my store
        # figures
        self.suspensions = 0
        self.resumptions = 0
        self.partials_dropped = 0
        self.partials_recomputed = 0
        self.blacklisted_arrivals = 0
        self.held_tuples = 0  # tuples in the blacklist (kept, not summed per step)

    # -- producer -------------------------------------------------------------------------------

    def make_producer(self, attrs: Sequence[tuple[int, int, int]]) -> None:
        """Produce for a consumer: ``attrs`` are ``(a, side, column of that side)``."""
        self.producing = True
        for a, side, col in attrs:
            self.attrs[side].append((a, col))
            index: dict[Any, Rows] = {}
            for r in (self.left if side == 0 else self.right).rows():
                index.setdefault(r[col], []).append(r)
            self.active_by[a] = index

    def _store(self, side: int) -> _Store:
        return self.left if side == 0 else self.right

    def _side_of(self, a: int) -> tuple[int, int]:
        for side in (0, 1):
            for b, col in self.attrs[side]:
                if b == a:
                    return side, col
        raise KeyError(a)

    def _index_add(self, side: int, rows: Rows) -> None:
        for a, col in self.attrs[side]:
            index = self.active_by[a]
            for r in rows:
                b = index.get(r[col])
                if b is None:
                    index[r[col]] = [r]
                else:
                    b.append(r)

    def _index_remove(self, side: int, rows: Rows, skip: int | None = None) -> None:
        for a, col in self.attrs[side]:
            if a == skip:
                continue
            index = self.active_by[a]
            for r in rows:
                b = index[r[col]]
                b.remove(r)
                if not b:
                    del index[r[col]]

    def _held(self, side: int, r: Row) -> tuple[int, Any] | None:
        """The first suspended pair holding ``r`` back, or None."""
        susp = self.suspended
        for a, col in self.attrs[side]:
            pair = (a, r[col])
            if pair in susp:
                return pair
        return None

    def suspend(self, a: int, v: Any) -> None:
        pair = (a, v)
        if pair in self.suspended:
            return
        self.suspended.add(pair)
        self.suspensions += 1
        side, _ = self._side_of(a)
        rows = self.active_by[a].pop(v, None)
        self.blacklist[pair] = rows or []
        self.held_tuples += len(rows or ())
        if rows:
            store = self._store(side)
            key = store.key
            for r in rows:
                store.remove(r, key(r))
            self._index_remove(side, rows, skip=a)

    def resume(self, a: int, v: Any) -> Rows:
        """Every partial the release of ``(a, v)`` makes producible again."""
        pair = (a, v)
        self.suspended.discard(pair)
        self.resumptions += 1
        side, _ = self._side_of(a)
        back: Rows = []
        for r in self.blacklist.pop(pair, []):
            held = self._held(side, r)
            if held is None:
                back.append(r)
            else:
                self.blacklist[held].append(r)
        out: Rows = []
        if back:
            self.held_tuples -= len(back)
            self._store(side).add_all(back)
            self._index_add(side, back)
            self._probe_side(side, back, out)
        self.partials_recomputed += len(out)
        return out

    def recompute(self) -> Rows:
        """Every partial held back (snapshots): blacklisted left tuples joined with the whole
        right relation, plus active left tuples joined with blacklisted right tuples."""
        held: tuple[Rows, Rows] = ([], [])
        for pair, rows in self.blacklist.items():
            held[self._side_of(pair[0])[0]].extend(rows)
        out: Rows = []
        if held[0]:
            whole = _Store(self.right.key)
            whole.add_all(self.right.rows() + held[1])
            self._probe(held[0], self.left.key, whole, True, out)
        if held[1]:
            self._probe(held[1], self.right.key, self.left, False, out)
        return out

    def _probe_side(self, side: int, rows: Rows, out: Rows) -> None:
        if side == 0:
            self._probe(rows, self.left.key, self.right, True, out)
        else:
            self._probe(rows, self.right.key, self.left, False, out)

    def _split(self, side: int, d: Delta) -> Delta:
        """Side ``side``'s delta without the tuples a suspended value holds back (they go
        to, or leave, the blacklist)."""
        ins: Rows = []
        dels: Rows = []
        for r in d.ins:
            held = self._held(side, r)
            if held is None:
                ins.append(r)
            else:
                self.blacklist[held].append(r)
                self.blacklisted_arrivals += 1
                self.held_tuples += 1
        for r in d.dels:
            if self.suspended and self._unlist(side, r):
                continue
            dels.append(r)
        if ins:
            self._index_add(side, ins)
        if dels:
            self._index_remove(side, dels)
        return Delta(ins, dels)

    def _unlist(self, side: int, r: Row) -> bool:
        """Remove ``r`` from the blacklist if it is there."""
        for a, col in self.attrs[side]:
            rows = self.blacklist.get((a, r[col]))
            if rows:
                try:
                    rows.remove(r)
                except ValueError:
                    continue
                self.held_tuples -= 1
                return True
        return False

    # -- consumer -------------------------------------------------------------------------------

    def make_consumer(self, side: int, child: JitJoinOp, pairs: Sequence[tuple[int, int]]) -> None:
        """Consume ``child`` (on ``side``); ``pairs``: ``(child output column, other input
        column)`` per equality of this join's key."""
        self.child = child
        self.child_side = side
        self.child_cols = [c for c, _ in pairs]
        self.other_cols = [o for _, o in pairs]
        other = self.right if side == 0 else self.left
        self.other_counts = [{} for _ in pairs]
        for r in other.rows():
            for a, col in enumerate(self.other_cols):
                cnt = self.other_counts[a]
                cnt[r[col]] = cnt.get(r[col], 0) + 1
        mine = self.left if side == 0 else self.right
        self.by_value = [{} for _ in pairs]
        self._note(mine.rows(), mine.key)

    def _note(self, rows: Rows, key: Key) -> None:
        for a, col in enumerate(self.child_cols):
            index = self.by_value[a]
            for r in rows:
                s = index.get(r[col])
                if s is None:
                    index[r[col]] = {key(r)}
                else:
                    s.add(key(r))

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        ctl = self if self._link_args is not None else self.consumer
        if ctl is None or not ctl.adaptive:  # no controller: nothing to time
            return self._step_jit(instant, inputs)
        t0 = time.perf_counter()
        out = self._step_jit(instant, inputs)
        self.clock += time.perf_counter() - t0
        self.seen += sum(len(d.ins) + len(d.dels) for d in inputs)
        if ctl is self:
            self._control()
        return out

    # -- the on/off controller (consumer) ---------------------------------------------------------

    def _pair_totals(self) -> tuple[float, int]:
        assert self._link_args is not None
        child = self._link_args[1]
        return self.clock + child.clock, self.seen + child.seen

    def _control(self) -> None:
        spent, seen = self._pair_totals()
        t_mark, n_mark = self.epoch_mark
        n = seen - n_mark
        if n < EPOCH_TUPLES:
            return
        cost = (spent - t_mark) / n
        mode = "jit" if self.jit_on else "plain"
        self.epochs.append({"at_tuples": seen, "mode": mode, "s_per_tuple": cost})
        del self.epochs[:-40]
        if self.probing:
            self.probe_left -= 1
            if self.probe_left == 0:  # judge the probe's last epoch (past its transient)
                self.probing = False
                if cost < self.baseline * (1 - SWITCH_MARGIN):
                    self.wait = PROBE_EVERY  # the probed mode won: it is the mode now
                else:
                    self._switch()  # it lost: back, and probe it a quarter as often
                    self.wait *= 4
                self.since_probe = 0
        else:
            self.since_probe += 1
            if self.since_probe >= self.wait:
                # the producer's partials that found no partner here this epoch (counted by
                # the hash join's probe): what JIT would have avoided producing
                side = self._link_args[0] if self._link_args else 0
                npr_n = self.unmatched[side] - self.npr_mark[0]
                arrivals = self.probed[side] - self.npr_mark[1]
                npr = npr_n / arrivals if arrivals else 0.0
                if not self.jit_on and npr < NPR_MIN:
                    self.since_probe = 0  # few results JIT could avoid: stay plain
                else:
                    self.baseline = cost
                    self.probing = True
                    self.probe_left = PROBE_EPOCHS
                    self._switch()
        side = self._link_args[0] if self._link_args else 0
        self.npr_mark = (self.unmatched[side], self.probed[side])
        spent, seen = self._pair_totals()
        self.epoch_mark = (spent, seen)

    def _switch(self) -> None:
        t0 = time.perf_counter()
        if self.jit_on:
            self.unlink()
        else:
            self.relink()
        self.switches += 1
        dt = time.perf_counter() - t0
        self.switch_s += dt
        self.clock -= dt  # the switch's work is not either mode's per-tuple cost

    def unlink(self) -> None:
        """Stop JIT between this consumer and its producer: every partial held back joins my
        store again, the producer's blacklisted tuples return to its stores, and the
        bookkeeping is dropped (both joins are then plain hash joins)."""
        child = self.child
        if child is None:
            return
        mine = self.left if self.child_side == 0 else self.right
        back = child.release_all()
        if back:
            mine.add_all(back)
            self.partials_recomputed += len(back)
        self.child = None
        self.other_counts = []
        self.by_value = []
        self.jit_on = False

    def relink(self) -> None:
        """Start JIT again (after ``unlink``), the bookkeeping rebuilt from the stores."""
        if self._link_args is None or self.child is not None:
            return
        side, child, pairs, width = self._link_args
        attrs = _attrs(pairs, width)
        child.make_producer(attrs)
        self.make_consumer(side, child, pairs)
        self.jit_on = True

    def release_all(self) -> Rows:
        """Producer: give up every suspension; return the partials they held back (the
        blacklisted tuples' joins) and put those tuples back in the stores."""
        out = self.recompute()
        held: tuple[Rows, Rows] = ([], [])
        for pair, rows in self.blacklist.items():
            held[self._side_of(pair[0])[0]].extend(rows)
        for side in (0, 1):
            if held[side]:
                self._store(side).add_all(held[side])
        self.suspended.clear()
        self.blacklist.clear()
        self.held_tuples = 0
        self.producing = False
        self.attrs = ([], [])
        self.active_by = {}
        return out

    def _step_jit(self, instant: int, inputs: list[Delta]) -> Delta:
        if self.producing:
            inputs = list(inputs)
            for side in (0, 1):
                if self.attrs[side] and not inputs[side].empty:
                    inputs[side] = self._split(side, inputs[side])
        child = self.child
        if child is None:
            return self._stepped(instant, inputs)
        c = self.child_side
        mine = self.left if c == 0 else self.right
        dother = inputs[1 - c]
        counts = self.other_counts
        ocols = self.other_cols
        if dother.ins:
            susp = child.suspended
            for r in dother.ins:
                for a, col in enumerate(ocols):
                    v = r[col]
                    cnt = counts[a]
                    cnt[v] = cnt.get(v, 0) + 1
                    if susp and (a, v) in susp:
                        rows = child.resume(a, v)
                        if rows:
                            mine.add_all(rows)
                            self._note(rows, mine.key)
        if dother.dels:
            for r in dother.dels:
                for a, col in enumerate(ocols):
                    cnt = counts[a]
                    v = r[col]
                    n = cnt[v] - 1
                    if n:
                        cnt[v] = n
                    else:
                        del cnt[v]
        out = self._stepped(instant, inputs)
        dchild = inputs[c]
        if dchild.ins:
            self._note(dchild.ins, mine.key)
            ccols = self.child_cols
            for r in dchild.ins:
                for a, col in enumerate(ccols):
                    v = r[col]
                    if v not in counts[a]:
                        if (a, v) not in child.suspended:
                            self._drop(a, v)
                            child.suspend(a, v)
                        break
        return out

    def _drop(self, a: int, v: Any) -> None:
        """Drop my stored partials whose column ``a`` is ``v``."""
        mine = self.left if self.child_side == 0 else self.right
        col = self.child_cols[a]
        for k in self.by_value[a].pop(v, ()):
            b = mine.buckets.get(k)
            if not b:
                continue
            keep = [r for r in b if r[col] != v]
            dropped = len(b) - len(keep)
            if dropped:
                self.partials_dropped += dropped
                mine.size -= dropped
                if keep:
                    b.clear()
                    b.extend(keep)
                else:
                    del mine.buckets[k]

    def _stepped(self, instant: int, inputs: list[Delta]) -> Delta:
        out = super().step(instant, inputs)
        n = self.left.size + self.right.size + self.held_tuples
        if n > self.peak_stored:
            self.peak_stored = n
        return out

    # -- state ----------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        left, right = self.left.rows(), self.right.rows()
        for pair, rows in self.blacklist.items():
            (left if self._side_of(pair[0])[0] == 0 else right).extend(rows)
        if self.child is not None:
            (left if self.child_side == 0 else right).extend(self.child.recompute())
        return {"left": left, "right": right}

    def restore(self, snap: dict[str, Any]) -> None:
        super().restore(snap)
        self.suspended.clear()
        self.blacklist.clear()
        self.held_tuples = 0
        for side in (0, 1):
            for a, _ in self.attrs[side]:
                self.active_by[a] = {}
            self._index_add(side, self._store(side).rows())
        if self.child is not None:
            self.make_consumer(
                self.child_side,
                self.child,
                list(zip(self.child_cols, self.other_cols, strict=True)),
            )

    def join_metrics(self) -> dict[str, Any]:
        m = super().join_metrics()
        m.update(
            {
                "impl": "jit",
                # the link's roles, kept while the controller has JIT off (``jit_on``)
                "role": ("producer " if self.consumer is not None else "")
                + ("consumer" if self._link_args is not None else ""),
                "suspensions": self.suspensions,
                "resumptions": self.resumptions,
                "suspended_values": len(self.suspended),
                "blacklisted_tuples": self.held_tuples,
                "partials_dropped": self.partials_dropped,
                "partials_recomputed": self.partials_recomputed,
                "blacklisted_arrivals": self.blacklisted_arrivals,
            }
        )
        if self._link_args is not None or self.consumer is not None:
            ctl = self if self._link_args is not None else self.consumer
            assert ctl is not None
            m.update(
                {
                    "jit_on": ctl.jit_on,
                    "switches": ctl.switches,
                    "switch_s": ctl.switch_s,
                    "epochs": ctl.epochs[-20:],
                }
            )
        return m


def link(
    parent: JitJoinOp,
    side: int,
    child: JitJoinOp,
    pairs: Sequence[tuple[int, int]],
    child_left_width: int,
) -> bool:
    """Make ``child`` (on ``parent``'s ``side``) a JIT producer for ``parent`` when allowed.
    ``pairs`` are the parent's key equalities as ``(child output column, other input
    column)``. Returns whether the link was made."""
    if parent.child is not None or child.child is not None or parent.producing or child.producing:
        return False
    if not pairs or parent.nested_loop or any(parent.replace_in) or any(child.replace_in):
        return False
    child.make_producer(_attrs(pairs, child_left_width))
    parent.make_consumer(side, child, pairs)
    parent._link_args = (side, child, list(pairs), child_left_width)
    child.consumer = parent
    return True


def _attrs(pairs: Sequence[tuple[int, int]], child_left_width: int) -> list[tuple[int, int, int]]:
    """``(a, side, column of that side)`` per key equality of the consumer."""
    return [
        (a, 0, c) if c < child_left_width else (a, 1, c - child_left_width)
        for a, (c, _) in enumerate(pairs)
    ]

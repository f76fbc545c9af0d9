"""HybMig inside the row engine: both plans run on shared leaf states, each result made once.

Yang et al., TKDE'07, section 3 (research/plan-migration.md section 1.3), in the row engine's
terms. At the migration (between two calls, after instant ``T0``) a tuple is *old* when its
window had shown it by ``T0`` (its timestamp is at most the window's last fired instant) and
*new* otherwise (pending at the migration, or arriving later). The new plan's join chain is
left-deep (Phase One builds no other), so its lowest join reads two leaves ``I1`` and ``I2``
and the predicate of the paper is::

    C = "I1 old AND I2 old"

* P_old (the running plan) produces exactly the results satisfying ``C``. Its joins prune,
  at every join output, the tuples whose ``I1`` or ``I2`` component is new (lineage pruning:
  such a tuple can only take part in results that violate ``C``); its top join then emits
  the ``C`` results (inserts and, as old tuples expire, their deletions).
* P_new produces all the others: its lowest join keeps only ``NOT C`` ("I1 new OR I2 new").
  Every intermediate state of P_new contains ``I1`` and ``I2``, so it holds the ``NOT C``
  part of its relation, which at ``T0`` is *empty* (every tuple shown by ``T0`` is old):
  nothing is recomputed at the switch. These states fill with results that involve old
  tuples as well (a new ``I1`` with an old ``I2``, an old third stream...), because the
  leaf states they probe are complete.
* Leaf states are shared, stored once: the windows (one operator instance, stepped once per
  instant, its delta handed to both plans) and the join stores over them, when the two
  plans key them alike (one ``_Store`` object referenced by a join of each plan, updated once
  per instant; a join that must probe a store's state *before* this instant's change, which
  the other plan has applied already, corrects the bucket by the change).
* Both top deltas, the old one permuted to the new column order, feed the new plan's
  operators above the chain (aggregate, R2S), whose state moved from the old plan: each
  result is counted once.

The old plan is dropped once ``I1``'s or ``I2``'s window holds no old tuple (from then on no
result satisfies ``C``, and every ``C`` result was deleted when its old component expired);
for RANGE windows that is at the latest ``T0`` plus the *smaller* of the two ranges (hence
within ``ts_start + w`` for the largest window ``w``); a ROWS window waits for enough newer
tuples.
``done`` turns True, ``dropped_at`` records the instant and ``successor`` (the new
``RowExecutor``, which owns the shared states) continues alone with exactly the state a
from-scratch run would have.

Background State Computation (``bsc=True``; research 1.3, BSC): after each instant one stage
runs. At level ``k`` (``C`` = the first ``k+1`` leaves of the chain old, ``NOT C`` filtered at
the chain's ``k``-th join) the ``C`` part of the ``k``-th join's relation (its old parts
joined) goes into the ``(k+1)``-th join's input store, which is then complete; that part
joined with the next leaf's *new* tuples goes into the ``(k+2)``-th join's input store (its
share under the grown ``C``) and, joined with each higher leaf, into every store above it up
to the top join's input (the paper's BSC fills only the parent state, which loses results
with five or more leaves: a later arrival of a higher leaf would probe a state lacking
them); ``C`` gains that leaf, the old plan's pruning follows, and the
``NOT C`` filter moves up one join. When ``C`` spans the whole chain every new state is
complete and the old plan is dropped: at ``min(BSC finish, ts_start + w)``. Not with
replacing (NOW/tumbling) inputs under the top join: there the stages are skipped.

Requirements (PlanError otherwise): one join chain per plan with the same output relation,
the new one a chain (every join but the lowest over one join); every leaf a RANGE, NOW or
ROWS window seen through selects and projects that keep its timestamp column up to the top
join; time-based slides; no columnar group.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from engines.row.base import NO_CHANGE, Delta, Row, RowOperator, Rows
from engines.row.executor import RowExecutor, charge_step
from engines.row.joins.tree import HashJoinOp, _Store
from engines.row.migration.forwarding import ForwardsToNew
from engines.row.migration.jisc import JiscJoinOp, join_rows
from engines.row.migration.signature import key_descriptor, permutation, permute, require
from engines.row.migration.transfer import ExecutorView
from engines.row.stateless import ProjectOp, PushedSelectOp, SelectOp
from engines.row.windows import (
    RowsWindow,
    SlidingRangeWindow,
    TumblingWindow,
    UnboundedWindow,
    _WindowBase,
)
from optimizer.ir.errors import PlanError
from optimizer.ir.plan import Join, Window

_FALLBACK = "use pt, ms or jisc, or a generic strategy (gpt, gms, ghm)"
_STATELESS = (SelectOp, ProjectOp, PushedSelectOp)
_EXPIRING = (SlidingRangeWindow, TumblingWindow, RowsWindow)

#: ``on_result(instant, plan, delta)``: what each plan contributed at an instant ("old" or
#: "new"), in the new top join's column order (for tests and tracing).
OnResult = Callable[[int, str, Delta], None]


class HybridMigration(ForwardsToNew):
    """Runs ``old`` restricted to ``C`` and ``new`` on shared leaf states (see the module
    docstring); a PlanExecutor. ``on_result`` sees each plan's contribution per instant."""

    def __init__(
        self,
        old: RowExecutor,
        new: RowExecutor,
        on_result: OnResult | None = None,
        bsc: bool = False,
    ):
        require(
            new.clock.instants_fired == 0 and new.clock.min_ts is None,
            "the new executor must be freshly built (nothing ingested)",
        )
        require(
            old.count_slide is None,
            "hybmig needs time-based slides (a tuple-count SLIDE cannot be split into old "
            "and new tuples)",
            hint=_FALLBACK,
        )
        self.old, self.new = old, new
        self.on_result = on_result
        self.at = old.clock.last_fired
        ov, nv = ExecutorView(old, "running"), ExecutorView(new, "new")
        self.old_top, self.new_top = _top_join(ov), _top_join(nv)
        p = permutation(ov.sig(self.old_top), nv.sig(self.new_top))
        require(
            p is not None,
            "hybmig: the two plans' join chains do not compute the same relation",
            hint=_FALLBACK,
        )
        assert p is not None
        self._perm = p
        self.old_track = sorted(_subtree(ov, self.old_top))
        self.new_track = sorted(_subtree(nv, self.new_top))
        for pos in self.old_track:  # an old JISC state still incomplete: complete it now
            op = ov.op(pos)
            if isinstance(op, JiscJoinOp):
                op.lazy.fill_all()
        self.bottom = self._bottom_join(nv)
        self.states_moved = self.states_shared = self.states_copied = 0
        self.states_started_empty = 0
        self.states_recomputed = 0  # HybMig recomputes nothing at the switch
        self.chain, leaves = self._chain(nv)
        bottom_leaves = leaves[:2]
        new_ids = [nv.op(i).op_id for i in leaves]
        window_map = self._share_windows(ov, nv)
        # C's two leaves, as the (shared) window instances and their last instant at T0
        pair = [window_map[i] for i in bottom_leaves]
        self._check_leaves(ov, pair)
        if not any(isinstance(ov.op(j), _EXPIRING) for j in pair):
            raise PlanError(
                "hybmig: both leaves of the new plan's lowest join are UNBOUNDED windows: "
                "their old tuples never expire, so the old plan would run for ever (a join "
                "order with another lowest pair may do)",
                hint=_FALLBACK,
            )
        self._leaves: list[tuple[_WindowBase, int | None]] = []
        for i in leaves:
            w = ov.op(window_map[i])
            assert isinstance(w, _WindowBase)
            self._leaves.append((w, w.last_instant))
        old_ids = [ov.op(window_map[i]).op_id for i in leaves]
        # per level k (C = the first k+1 leaves old): the old joins' pruning checks and the
        # NOT C checks at the new chain's k-th join (level 1 without BSC)
        self._levels: list[tuple[dict[int, list[tuple[int, float]]], list[tuple[int, float]]]]
        self._levels = []
        for k in range(1, len(self.chain) + 1 if bsc else 2):
            self.pair = self._leaves[: k + 1]
            prune = {
                pos: self._checks(ov, pos, old_ids[: k + 1])
                for pos in self.old_track
                if isinstance(ov.op(pos), HashJoinOp)
            }
            self._levels.append((prune, self._checks(nv, self.chain[k - 1], new_ids[: k + 1])))
        self._ov, self._nv = ov, nv
        self.bsc = bsc
        self._set_level(1)
        self._share_stores(ov, nv)
        self.replace = nv.op(self.new_top).replace_out
        top = ov.op(self.old_top)
        assert isinstance(top, HashJoinOp)
        self._last_old: Rows = permute(join_rows(top), p) if self.replace else []
        self._last_new: Rows = []
        self.done = False
        self.dropped_at: int | None = None
        for w, op_id in self._renames:  # the shared windows answer to the new plan's ids
            w.op_id = op_id
        new.clock.step = self._step
        self._maybe_drop(None)

    # -- set-up -----------------------------------------------------------------------------

    def _chain(self, nv: ExecutorView) -> tuple[list[int], list[int]]:
        """The new chain's joins bottom-up and its leaf windows in that order (the lowest
        join's two, then one per join above)."""
        chain = [self.bottom]
        leaves = [_leaf_window(nv, i) for i in nv.ex.nodes[self.bottom].inputs]
        while chain[-1] != self.new_top:
            up = next(
                c
                for c in self.new_track
                if isinstance(nv.op(c), HashJoinOp)
                and any(_below_join(nv, i) == chain[-1] for i in nv.ex.nodes[c].inputs)
            )
            ins = nv.ex.nodes[up].inputs
            leaf = ins[1] if _below_join(nv, ins[0]) is not None else ins[0]
            chain.append(up)
            leaves.append(_leaf_window(nv, leaf))
        return chain, leaves

    def _bottom_join(self, nv: ExecutorView) -> int:
        """The new chain's lowest join (both inputs leaves); every other join must read
        exactly one join (a left- or right-deep chain: every intermediate state then contains
        both leaves of C)."""
        bottoms = []
        for pos in self.new_track:
            if not isinstance(nv.op(pos), HashJoinOp):
                continue
            below = [_below_join(nv, i) for i in nv.ex.nodes[pos].inputs]
            joins = sum(1 for b in below if b is not None)
            if joins == 0:
                bottoms.append(pos)
            elif joins == 2:
                raise PlanError(
                    f"hybmig: the new plan joins two joins at {nv.op(pos).op_id} (bushy); the "
                    "row engine's HybMig runs left- or right-deep new plans",
                    hint=_FALLBACK,
                )
        require(len(bottoms) == 1, "hybmig: the new chain has no single lowest join")
        return bottoms[0]

    def _share_windows(self, ov: ExecutorView, nv: ExecutorView) -> dict[int, int]:
        """The new plan's chain windows become the old plan's window instances (one state,
        stepped once per instant); the other stateful operators move by signature; the
        clock moves. Returns new window position -> old position."""
        pool: dict[Hashable, list[int]] = {}
        for i in range(len(ov.ex.nodes)):
            if not isinstance(ov.op(i), HashJoinOp):
                key = ov.state_key(i)
                if key is not None:
                    pool.setdefault(key, []).append(i)
        window_map: dict[int, int] = {}
        self._renames: list[tuple[_WindowBase, str]] = []
        new_track = set(self.new_track)
        for i in range(len(nv.ex.nodes)):
            op = nv.op(i)
            if isinstance(op, HashJoinOp):
                require(i in new_track, f"join {op.op_id} lies outside the changed chain")
                continue
            key = nv.state_key(i)
            if key is None:
                continue
            olds = pool.get(key)
            if not olds:
                raise PlanError(
                    f"hybmig: {op.kind} {op.op_id} of the new plan has no counterpart with "
                    "the same state in the running plan",
                    hint=_FALLBACK,
                )
            j = olds.pop(0)
            src = ov.op(j)
            if isinstance(op, _WindowBase):
                window_map[i] = j
            if i in new_track and isinstance(op, _WindowBase):
                require(j in set(self.old_track), f"window {op.op_id} outside the old chain")
                assert isinstance(src, _WindowBase)
                nv.ex.nodes[i].op = src  # shared: the one instance
                self._renames.append((src, op.op_id))
            else:
                op.restore(src.snapshot())
                self.states_moved += 1
        new = self.new
        snap = self.old.clock.snapshot()
        old_pos = {id(w): k for k, w in enumerate(self.old.windows)}
        if snap["next"] is not None:
            snap["next"] = [
                snap["next"][old_pos[id(ov.op(window_map[nv.pos[w.op_id]]))]] for w in new.windows
            ]
        swap: dict[int, _WindowBase] = {}
        for w in new.windows:
            i = nv.pos[w.op_id]
            if i in new_track:
                src = nv.ex.nodes[i].op
                assert isinstance(src, _WindowBase)
                swap[id(w)] = src
        new.windows[:] = [swap.get(id(w), w) for w in new.windows]
        for ws in new.windows_by_stream.values():
            ws[:] = [swap.get(id(w), w) for w in ws]
        new.clock.restore(snap)
        new.clock.late_count = self.old.clock.late_count
        return window_map

    def _check_leaves(self, ov: ExecutorView, pair: list[int]) -> None:
        """The chain's windows: expiring ones or UNBOUNDED (one of C's leaves at least must
        expire, checked by the caller)."""
        for pos in self.old_track:
            w = ov.op(pos)
            if not isinstance(w, _WindowBase):
                continue
            if not isinstance(w, (*_EXPIRING, UnboundedWindow)):
                raise PlanError(
                    f"hybmig cannot run window {w.op_id} ({type(w).__name__}) in a join chain",
                    hint=_FALLBACK,
                )

    def _checks(
        self, view: ExecutorView, pos: int, window_ids: list[str]
    ) -> list[tuple[int, float]]:
        """(column, T0 bound) of each of C's leaves present in node ``pos``'s output: a
        component is old iff its value in that column is at most the bound."""
        traced = _ts_columns(view, pos)
        out: list[tuple[int, float]] = []
        for wid, (_, t0) in zip(window_ids, self.pair, strict=True):
            cols = traced.get(wid)
            if cols is None:
                below = {view.op(i).op_id for i in _subtree(view, pos)}
                if wid in below:
                    raise PlanError(
                        f"hybmig needs the timestamp of every join input, but the input from "
                        f"window {wid} loses it below join {view.op(pos).op_id}",
                        hint=_FALLBACK,
                    )
                continue
            out.append((cols[0], float("-inf") if t0 is None else t0))
        return out

    def _share_stores(self, ov: ExecutorView, nv: ExecutorView) -> None:
        """Each leaf store of the new chain is the old plan's store of that leaf (same
        relation, same column order, same key) or, failing that, a copy of it; the stores
        over joins start empty (their NOT C part is empty at T0)."""
        olds: list[tuple[Any, tuple[Hashable, ...], _Store]] = []
        for pos in self.old_track:
            op = ov.op(pos)
            if not isinstance(op, HashJoinOp):
                continue
            for side, store in ((0, op.left), (1, op.right)):
                i = ov.store_input(pos, side)
                if _below_join(ov, i) is None:
                    olds.append((ov.sig(i), _key_desc(ov, pos, side), store))
        used: set[int] = set()
        for pos in self.new_track:
            op = nv.op(pos)
            if not isinstance(op, HashJoinOp):
                continue
            for side in (0, 1):
                i = nv.store_input(pos, side)
                if _below_join(nv, i) is not None:
                    self.states_started_empty += 1
                    continue
                sig, key = nv.sig(i), _key_desc(nv, pos, side)
                copy: tuple[tuple[int, ...], _Store] | None = None
                for old_sig, old_key, store in olds:
                    q = permutation(old_sig, sig)
                    if q is None:
                        continue
                    if q == tuple(range(len(q))) and old_key == key and id(store) not in used:
                        used.add(id(store))
                        setattr(op, ("left", "right")[side], store)
                        self.states_shared += 1
                        break
                    copy = copy or (q, store)
                else:
                    require(copy is not None, f"hybmig: no old state for an input of {op.op_id}")
                    assert copy is not None
                    mine = op.left if side == 0 else op.right
                    mine.clear()
                    mine.add_all(permute(copy[1].rows(), copy[0]))
                    self.states_copied += 1

    # -- running ----------------------------------------------------------------------------

    def _step(self, instant: int) -> None:
        perf = time.perf_counter
        applied: dict[int, Delta] = {}  # shared-store id -> this instant's change
        stepped: dict[int, Delta] = {}  # window instance id -> its delta this instant
        old_nodes = self.old.nodes
        old_deltas: dict[int, Delta] = {}
        for pos in self.old_track:
            node = old_nodes[pos]
            op = node.op
            inputs = [old_deltas[i] for i in node.inputs]
            t0 = perf()
            if isinstance(op, HashJoinOp):
                out = _prune(join_step(op, inputs, applied), self._prune[pos])
            else:
                out = op.step(instant, inputs)
                if isinstance(op, _WindowBase):
                    stepped[id(op)] = out
            op.metrics.busy_s += perf() - t0
            old_deltas[pos] = out
        od = self._permuted(old_deltas[self.old_top])
        new = self.new
        track = set(self.new_track)
        deltas: list[Delta] = []
        for k, node in enumerate(new.nodes):
            op = node.op
            inputs = [deltas[i] for i in node.inputs]
            t0 = perf()
            if id(op) in stepped:
                deltas.append(stepped[id(op)])
                continue
            if k in track and isinstance(op, HashJoinOp):
                out = join_step(op, inputs, applied)
                if k == self.filter_pos:
                    out = _keep_not_c(out, self._not_c)
            else:
                out = op.step(instant, inputs)
            if k == self.new_top:
                if self.on_result is not None:
                    self.on_result(instant, "new", out)
                    self.on_result(instant, "old", od)
                out = self._merge(out, od)
            charge_step(node, inputs, out, t0)
            deltas.append(out)
        new.fired_emit(instant, deltas)
        self._maybe_drop(instant)
        if self.bsc and not self.done and not self.replace:
            self._bsc_stage(instant)

    def _permuted(self, d: Delta) -> Delta:
        if d.empty:
            return NO_CHANGE
        p = self._perm
        return Delta(permute(d.ins, p), permute(d.dels, p) if d.dels else [], d.replace)

    def _merge(self, nd: Delta, od: Delta) -> Delta:
        if self.replace:
            if nd.empty and od.empty:
                return NO_CHANGE
            if not nd.empty:
                self._last_new = list(nd.ins)
            if not od.empty:
                self._last_old = list(od.ins)
            return Delta(self._last_new + self._last_old, [], replace=True)
        if od.empty:
            return nd
        if nd.empty:
            return od
        return Delta(nd.ins + od.ins, nd.dels + od.dels)

    # -- Background State Computation (one stage per instant) --------------------------------

    def _set_level(self, k: int) -> None:
        """C := the first k+1 leaves of the new chain old; NOT C filtered at its k-th join."""
        self.level = k
        self.pair = self._leaves[: k + 1]
        self._prune, self._not_c = self._levels[k - 1]
        self.filter_pos = self.chain[k - 1]

    def _bsc_stage(self, instant: int) -> None:
        """One BSC step (research 1.3, BSC) between two instants, at level k: the k-th join's
        output part satisfying C (all its C leaves old) goes into the (k+1)-th join's input
        store, which is then complete; that part joined with the *new* tuples of the next
        leaf goes into the (k+2)-th join's input store (its NOT C' part, C' = one more leaf
        old), and joined on up the chain into every store above (:meth:`_push_up`); C grows
        by that leaf. When C covers the whole chain, every new state is
        complete and the old plan is dropped (min(BSC finish, ts_start + w))."""
        k, nv, chain = self.level, self._nv, self.chain
        if k < len(chain):
            a = self._join_old_part(chain[k - 1], k + 1)
            up = chain[k]
            side = self._join_side(up)
            a = _through(nv, nv.ex.nodes[up].inputs[side], chain[k - 1], a)
            op = nv.op(up)
            assert isinstance(op, HashJoinOp)
            (op.left if side == 0 else op.right).add_all(a)
            self.states_recomputed += 1
            if k + 1 < len(chain):
                leaf_in = nv.ex.nodes[up].inputs[1 - side]
                w, t0 = self._leaves[k + 1]
                leaf = op.right if side == 0 else op.left
                new_rows = _rows_where(leaf.rows(), _ts_columns(nv, leaf_in), w.op_id, t0, False)
                tmp = _Store(leaf.key)
                tmp.add_all(new_rows)
                b: Rows = []
                own = op.left if side == 0 else op.right
                op._probe(a, own.key, tmp, side == 0, b)
                self._push_up(k, b)
            self._set_level(k + 1)
        if self.level == len(chain):  # every new state complete
            self.done = True
            self.dropped_at = instant
            self.new.clock.step = self.new._step

    def _push_up(self, j: int, rows: Rows) -> None:
        """``rows``, just added to the relation of chain join ``chain[j]``, go into every
        store above it: the store join ``chain[j + 1]`` reads them from, then (joined with
        that join's other input, a complete leaf store) the store of ``chain[j + 2]``, and so
        on up to the top join's input. After C grows by leaf ``L``, the rows with every
        earlier leaf old and ``L`` new belong to the new plan at *every* level above ``L``'s
        join, not only the next one: a later arrival of any higher leaf probes them."""
        nv, chain = self._nv, self.chain
        while rows and j + 1 < len(chain):
            up = chain[j + 1]
            side = self._join_side(up)
            rows = _through(nv, nv.ex.nodes[up].inputs[side], chain[j], rows)
            op = nv.op(up)
            assert isinstance(op, HashJoinOp)
            own, other = (op.left, op.right) if side == 0 else (op.right, op.left)
            own.add_all(rows)
            if j + 2 == len(chain):  # ``up`` is the top join: its output is not stored
                return
            out: Rows = []
            op._probe(rows, own.key, other, side == 0, out)
            rows, j = out, j + 1

    def _join_side(self, pos: int) -> int:
        """Which input of chain join ``pos`` is the join below it."""
        ins = self._nv.ex.nodes[pos].inputs
        return 0 if _below_join(self._nv, ins[0]) is not None else 1

    def _join_old_part(self, pos: int, n: int) -> Rows:
        """The rows of join ``pos``'s relation whose first ``n`` chain leaves are all old."""
        nv = self._nv
        op = nv.op(pos)
        assert isinstance(op, HashJoinOp)
        parts = []
        for side, store in ((0, op.left), (1, op.right)):
            rows = store.rows()
            cols = _ts_columns(nv, nv.ex.nodes[pos].inputs[side])
            for w, t0 in self._leaves[:n]:
                rows = _rows_where(rows, cols, w.op_id, t0, True)
            parts.append(rows)
        right = _Store(op.right.key)
        right.add_all(parts[1])
        out: Rows = []
        op._probe(parts[0], op.left.key, right, True, out)
        return out

    def _maybe_drop(self, instant: int | None) -> None:
        """Drop the old plan once one of C's leaves holds no old tuple."""
        if self.done:
            return
        if all(_holds_old(w, t0) for w, t0 in self.pair):
            return
        self.done = True
        self.dropped_at = instant if instant is not None else self.at
        self.new.clock.step = self.new._step


# -- the join step over shared stores ---------------------------------------------------------


def join_step(op: HashJoinOp, inputs: list[Delta], applied: dict[int, Delta]) -> Delta:
    """``op.step`` where a store may be shared with a join of the other plan: each store is
    changed once per instant (``applied`` records which, with the change), and a probe of
    the right store's state before the change corrects a bucket changed already."""
    dl, dr = inputs
    if dl.empty and dr.empty:
        return NO_CHANGE
    left, right = op.left, op.right
    if op.replace_out:
        for store, d in ((left, dl), (right, dr)):
            if id(store) not in applied:
                op._apply(store, d)
                applied[id(store)] = d
        out: Rows = []
        if left.size <= right.size:
            op._probe(left.rows(), left.key, right, True, out)
        else:
            op._probe(right.rows(), right.key, left, False, out)
        return Delta(out, [], replace=True)
    ins: Rows = []
    dels: Rows = []
    right_done = applied.get(id(right))
    for rows, out in ((dl.ins, ins), (dl.dels, dels)):
        if not rows:
            continue
        if right_done is None:
            op._probe(rows, left.key, right, True, out)
        else:
            _probe_before(op, rows, right, right_done, out)
    if id(left) not in applied:
        if dl.ins:
            left.add_all(dl.ins)
        if dl.dels:
            op._remove_all(left, dl.dels)
        applied[id(left)] = dl
    if dr.ins:
        op._probe(dr.ins, right.key, left, False, ins)
    if dr.dels:
        op._probe(dr.dels, right.key, left, False, dels)
    if right_done is None:
        if dr.ins:
            right.add_all(dr.ins)
        if dr.dels:
            op._remove_all(right, dr.dels)
        applied[id(right)] = dr
    if not ins and not dels:
        return NO_CHANGE
    return Delta(ins, dels)


def _probe_before(op: HashJoinOp, rows: Rows, right: _Store, change: Delta, out: Rows) -> None:
    """Left rows probing the right store as it was before ``change`` (applied already)."""
    key = right.key
    changed: dict[Any, tuple[Rows, Rows]] = {}
    for rows_, side in ((change.ins, 0), (change.dels, 1)):
        for r in rows_:
            changed.setdefault(key(r), ([], []))[side].append(r)
    before: dict[Any, list[Row]] = {}
    for k, (added, removed) in changed.items():
        bucket = list(right.buckets.get(k, ()))
        for r in added:
            bucket.remove(r)
        bucket.extend(removed)
        before[k] = bucket
    tmp = _Store(key)
    tmp.buckets = {k: deque(v) for k, v in before.items() if v}
    lkey = op.left.key
    plain = [r for r in rows if lkey(r) not in before]
    fixed = [r for r in rows if lkey(r) in before]
    if plain:
        op._probe(plain, lkey, right, True, out)
    if fixed:
        op._probe(fixed, lkey, tmp, True, out)


def _prune(d: Delta, checks: list[tuple[int, float]]) -> Delta:
    """Keep the rows whose C-leaf components present are all old (lineage pruning)."""
    if d.empty or not checks:
        return d
    ins = [r for r in d.ins if all(r[c] <= t for c, t in checks)]
    if d.replace:
        return Delta(ins, [], replace=True)
    dels = [r for r in d.dels if all(r[c] <= t for c, t in checks)]
    if not ins and not dels:
        return NO_CHANGE
    return Delta(ins, dels)


def _keep_not_c(d: Delta, checks: list[tuple[int, float]]) -> Delta:
    """Keep the rows violating C (some C-leaf component is new)."""
    if d.empty:
        return d
    ins = [r for r in d.ins if any(r[c] > t for c, t in checks)]
    if d.replace:
        return Delta(ins, [], replace=True)
    dels = [r for r in d.dels if any(r[c] > t for c, t in checks)]
    if not ins and not dels:
        return NO_CHANGE
    return Delta(ins, dels)


def _rows_where(
    rows: Rows, cols: dict[str, list[int]], window_id: str, t0: int | None, old: bool
) -> Rows:
    """The rows whose component from ``window_id`` (if present) is old (or new)."""
    c = cols.get(window_id)
    if c is None:
        return rows
    col = c[0]
    if old:
        return [] if t0 is None else [r for r in rows if r[col] <= t0]
    return rows if t0 is None else [r for r in rows if r[col] > t0]


def _through(view: ExecutorView, pos: int, below: int, rows: Rows) -> Rows:
    """``rows`` of node ``below``'s output carried up through the stateless operators
    between it and node ``pos``."""
    path = []
    while pos != below:
        path.append(view.op(pos))
        pos = view.ex.nodes[pos].inputs[0]
    for op in reversed(path):
        if isinstance(op, SelectOp):
            rows = op.keep(rows)
        elif isinstance(op, ProjectOp):
            rows = op.fn(rows)
        else:
            raise PlanError(f"hybmig: cannot carry rows through {op.kind} {op.op_id}")
    return rows


def _holds_old(w: _WindowBase, t0: int | None) -> bool:
    if t0 is None:
        return False
    if isinstance(w, UnboundedWindow):
        return True  # what it had shown stays (the other leaf of C ends the old plan)
    if isinstance(w, TumblingWindow):
        return w._nonempty and (w.last_instant is None or w.last_instant <= t0)
    assert isinstance(w, SlidingRangeWindow | RowsWindow)
    return bool(w.contents) and w.contents[0][w.ts] <= t0


# -- plan navigation --------------------------------------------------------------------------


def _top_join(view: ExecutorView) -> int:
    tops = [
        i
        for i, n in enumerate(view.ex.nodes)
        if isinstance(n.op, HashJoinOp)
        and not any(isinstance(view.op(c), HashJoinOp) for c in view.consumers.get(i, []))
    ]
    if len(tops) != 1:
        raise PlanError(
            f"hybmig needs exactly one join chain in the {view.role} plan ({len(tops)} found)",
            hint=_FALLBACK,
        )
    return tops[0]


def _subtree(view: ExecutorView, pos: int) -> set[int]:
    out = {pos}
    for i in view.ex.nodes[pos].inputs:
        out |= _subtree(view, i)
    return out


def _below_join(view: ExecutorView, pos: int) -> int | None:
    """The join whose output node ``pos`` is, seen through stateless operators."""
    op: RowOperator = view.op(pos)
    while isinstance(op, _STATELESS):
        pos = view.ex.nodes[pos].inputs[0]
        op = view.op(pos)
    return pos if isinstance(op, HashJoinOp) else None


def _leaf_window(view: ExecutorView, pos: int) -> int:
    """The window below a leaf input (through stateless operators)."""
    op: RowOperator = view.op(pos)
    while isinstance(op, _STATELESS):
        pos = view.ex.nodes[pos].inputs[0]
        op = view.op(pos)
    if not isinstance(op, _WindowBase):
        raise PlanError(
            f"hybmig needs windows as the leaves of the new chain's lowest join, found "
            f"{op.kind} {op.op_id}",
            hint=_FALLBACK,
        )
    return pos


def _ts_columns(view: ExecutorView, pos: int) -> dict[str, list[int]]:
    """Window op id -> the columns of node ``pos``'s output holding its timestamp."""
    plan = view.plan
    top_id = view.op(pos).op_id
    width = len(plan.op(top_id).schema)
    traced: dict[str, list[int]] = {}
    for c in range(width):
        op_id, col = top_id, c
        while True:
            op = plan.op(op_id)
            if isinstance(op, Window):
                if col == op.time_column:
                    traced.setdefault(op_id, []).append(c)
                break
            step = op.input_column(col)
            if step is None:
                break
            op_id, col = plan.inputs(op_id)[step[0]], step[1]
    return traced


def _key_desc(view: ExecutorView, pos: int, side: int) -> tuple[Hashable, ...]:
    join = view.plan.op(view.op(pos).op_id)
    assert isinstance(join, Join)
    cols = [pair[side] for pair in join.equi_keys()]
    return key_descriptor(view.sig(view.store_input(pos, side)), cols)

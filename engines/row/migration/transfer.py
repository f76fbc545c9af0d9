"""Row-engine state transfer between two RowExecutors: Moving State (MS) and JISC.

Both functions make ``new`` (freshly built for the new plan, nothing ingested) an
*equivalent continuation* of ``old`` at the current point, which lies between two calls into
``old`` (design note, seam 1): from here on ``new`` produces exactly the output ``old`` (or
the query run from scratch) would have produced, instant by instant.

What moves, matched by signature (``engines.row.migration.signature``), never by op id:

* windows: contents, panes and the *pending* tuples not shown yet (same stream, spec,
  physical form and pushed-down filter);
* the clock: per-stream progress, the ended streams, the next instant of every window;
* aggregates and R2S operators: their state as is (same input relation and column order,
  same aggregate calls, same physical modes);
* join stores: a new store whose relation equals (up to a column permutation) an old store's
  relation gets that store's tuples, permuted. An old store that is incomplete (a JISC
  store not completed yet) matches nothing: a state is complete in the new plan only if it
  was complete in the old one (JISC Def. 1, overlapping transitions).

The other join stores are rebuilt from the stores below them: MS recomputes them now,
bottom-up (``S_CD = S_C join S_D``, then ``S_BCD = S_B join S_CD``); JISC leaves the left
store of a join over a join incomplete and completes it key by key as it is read
(``engines.row.migration.jisc``); a store JISC cannot complete lazily (a right input that is
a join, in a bushy plan, or an input reached through selects or projects) is recomputed now
as MS does.

Not supported (PlanError): plans with columnar groups (MIGs and their Arrow windows: the
generic gms/gpt/ghm strategies move those), a stateful operator of the new plan with no
counterpart in the old one (e.g. an aggregate that changed), count-mode plans whose windows
differ.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass
from typing import Any

from engines.row.aggregate import AggregateOp
from engines.row.arrow_window import ArrowWindow
from engines.row.base import RowOperator, Rows
from engines.row.executor import RowExecutor
from engines.row.joins.tree import HashJoinOp, _Store
from engines.row.migration.jisc import JiscJoinOp, LazyStore, join_rows, key_rows
from engines.row.migration.signature import (
    RelSig,
    canon,
    equal_column_classes,
    permutation,
    permute,
    plan_signatures,
    require,
)
from engines.row.r2s import DStreamOp, IStreamOp, RStreamOp
from engines.row.stateless import ProjectOp, PushedSelectOp, SelectOp
from engines.row.windows import (
    PanedRangeWindow,
    SlidingRangeWindow,
    TumblingWindow,
    _WindowBase,
)
from optimizer.ir.errors import PlanError
from optimizer.ir.expr import conjuncts
from optimizer.ir.plan import Join, Select

_STATELESS = (SelectOp, ProjectOp, PushedSelectOp)
_FALLBACK = "use a generic strategy (gms, gpt or ghm), which replays the input instead"


@dataclass
class TransferStats:
    """What a transfer did. ``at`` is T_trans: the last instant the old plan fired (None if
    none had fired). ``states_incomplete``: JISC stores left to complete lazily (their
    progress: :func:`jisc_progress`)."""

    strategy: str
    at: int | None
    states_moved: int = 0
    states_recomputed: int = 0
    states_incomplete: int = 0
    tuples_moved: int = 0
    tuples_recomputed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class JiscProgress:
    """Lazy completion of a JISC executor: keys completed so far, stores recomputed whole
    on first read, stores still incomplete."""

    keys_completed: int
    full_recomputes: int
    incomplete_states: int

    @property
    def complete(self) -> bool:
        return self.incomplete_states == 0


def jisc_progress(executor: RowExecutor) -> JiscProgress:
    """The JISC completion figures of an executor (all zero for one without JISC joins)."""
    lazies = [n.op.lazy for n in executor.nodes if isinstance(n.op, JiscJoinOp)]
    return JiscProgress(
        keys_completed=sum(z.keys_completed for z in lazies),
        full_recomputes=sum(z.full_recomputes for z in lazies),
        incomplete_states=sum(1 for z in lazies if not z.complete),
    )


def move_states(old: RowExecutor, new: RowExecutor) -> TransferStats:
    """Moving State: ``new`` continues ``old``; unmatched join stores recomputed now."""
    return _Transfer(old, new, lazy=False).run()


def jisc_transfer(old: RowExecutor, new: RowExecutor) -> TransferStats:
    """JISC: ``new`` continues ``old``; unmatched join states start incomplete and are
    completed lazily per key (the affected joins of ``new`` become :class:`JiscJoinOp`)."""
    return _Transfer(old, new, lazy=True).run()


# -- the executors as signatures --------------------------------------------------------------


class ExecutorView:
    """A RowExecutor's nodes with their relation signatures and consumers."""

    def __init__(self, ex: RowExecutor, role: str) -> None:
        self.ex = ex
        self.role = role
        self.plan = ex.plan
        for n in ex.nodes:
            if isinstance(n.op, ArrowWindow) or n.op.kind == "mig":
                raise PlanError(
                    f"the {role} plan runs {n.op.op_id} in a columnar group (MIG): row-level "
                    "migration moves row-engine state only",
                    hint=_FALLBACK,
                )
        self.sigs = plan_signatures(ex.plan)
        self.pos = {n.op.op_id: i for i, n in enumerate(ex.nodes)}
        self.consumers: dict[int, list[int]] = {}
        for i, n in enumerate(ex.nodes):
            for j in n.inputs:
                self.consumers.setdefault(j, []).append(i)

    def op(self, i: int) -> RowOperator:
        return self.ex.nodes[i].op

    def sig(self, i: int) -> RelSig:
        return self.sigs[self.op(i).op_id]

    def store_input(self, i: int, side: int) -> int:
        """Node position of a join's input ``side`` (0 left, 1 right)."""
        return self.ex.nodes[i].inputs[side]

    def state_key(self, i: int) -> Hashable | None:
        """What must be equal for a non-join operator's state to move as is; None for a
        stateless operator."""
        op = self.op(i)
        sig = self.sig(i)
        if isinstance(op, _STATELESS):
            return None
        if isinstance(op, _WindowBase):
            return ("window", sig, type(op).__name__, op.count_mode, self._prefilter(i))
        if isinstance(op, AggregateOp):
            modes = tuple(s.mode for s in op.slots)
            return ("aggregate", sig, op.paned, op.fifo, op.replace_in, modes)
        if isinstance(op, IStreamOp | DStreamOp | RStreamOp):
            return (type(op).__name__, sig, op.replace_in)
        raise PlanError(
            f"row-level migration does not know how to move the state of {op.op_id} ({op.kind})",
            hint=_FALLBACK,
        )

    def _prefilter(self, i: int) -> Hashable:
        for c in self.consumers.get(i, []):
            if isinstance(self.op(c), PushedSelectOp):
                sel = self.plan.op(self.op(c).op_id)
                assert isinstance(sel, Select)
                cols = self.sig(i).cols
                return frozenset(canon(x, cols) for x in conjuncts(sel.predicate))
        return None


def store_complete(op: HashJoinOp, side: int) -> bool:
    """Whether a join's store holds its whole input relation."""
    return not (side == 0 and isinstance(op, JiscJoinOp) and not op.lazy.complete)


# -- the transfer ---------------------------------------------------------------------------


class _Transfer:
    def __init__(self, old: RowExecutor, new: RowExecutor, lazy: bool) -> None:
        require(
            new.clock.instants_fired == 0 and new.clock.min_ts is None,
            "the new executor must be freshly built (nothing ingested)",
        )
        self.old = ExecutorView(old, "running")
        self.new = ExecutorView(new, "new")
        self.lazy = lazy
        self.t0 = old.clock.last_fired
        self.stats = TransferStats("jisc" if lazy else "ms", self.t0)

    def run(self) -> TransferStats:
        self._move_operator_states()
        self._move_clock()
        self._join_stores()
        return self.stats

    # -- windows, aggregates, R2S -----------------------------------------------------------

    def _move_operator_states(self) -> None:
        old, new = self.old, self.new
        pool: dict[Hashable, list[int]] = {}
        for i in range(len(old.ex.nodes)):
            if not isinstance(old.op(i), HashJoinOp):
                key = old.state_key(i)
                if key is not None:
                    pool.setdefault(key, []).append(i)
        self.window_map: dict[int, int] = {}  # new window position -> old
        for i in range(len(new.ex.nodes)):
            op = new.op(i)
            if isinstance(op, HashJoinOp):
                continue
            key = new.state_key(i)
            if key is None:
                continue
            olds = pool.get(key)
            if not olds:
                raise PlanError(
                    f"{op.kind} {op.op_id} of the new plan has no counterpart with the same "
                    "state in the running plan (its input, calls or physical form differ)",
                    hint=_FALLBACK,
                )
            j = olds.pop(0)
            src = old.op(j)
            op.restore(src.snapshot())
            self.stats.states_moved += 1
            if isinstance(op, _WindowBase):
                self.window_map[i] = j
                self.stats.tuples_moved += _window_tuples(op)

    def _move_clock(self) -> None:
        old, new = self.old.ex, self.new.ex
        snap = old.clock.snapshot()
        old_pos = {id(w): k for k, w in enumerate(old.windows)}
        if snap["next"] is not None:
            nxt = []
            for w in new.windows:
                i = self.new.pos[w.op_id]
                j = self.window_map.get(i)
                require(j is not None, f"window {w.op_id} has no counterpart")
                assert j is not None
                nxt.append(snap["next"][old_pos[id(self.old.op(j))]])
            snap["next"] = nxt
        new.clock.restore(snap)
        new.clock.late_count = old.clock.late_count

    # -- join stores ------------------------------------------------------------------------

    def _join_stores(self) -> None:
        old, new = self.old, self.new
        complete_olds: list[tuple[RelSig, _Store]] = []
        for i in range(len(old.ex.nodes)):
            op = old.op(i)
            if isinstance(op, HashJoinOp):
                for side, store in ((0, op.left), (1, op.right)):
                    if store_complete(op, side):
                        complete_olds.append((old.sig(old.store_input(i, side)), store))
        for i in range(len(new.ex.nodes)):
            op = new.op(i)
            if not isinstance(op, HashJoinOp):
                continue
            for side, store in ((0, op.left), (1, op.right)):
                sig = new.sig(new.store_input(i, side))
                for old_sig, old_store in complete_olds:
                    p = permutation(old_sig, sig)
                    if p is not None:
                        rows = permute(old_store.rows(), p)
                        store.clear()
                        store.add_all(rows)
                        self.stats.states_moved += 1
                        self.stats.tuples_moved += len(rows)
                        break
                else:
                    self._rebuild(i, side, store)

    def _rebuild(self, i: int, side: int, store: _Store) -> None:
        new = self.new
        producer = new.store_input(i, side)
        child = new.op(producer)
        if self.lazy and side == 0 and isinstance(child, HashJoinOp):
            parent = new.op(i)
            assert isinstance(parent, HashJoinOp)
            lazy = self._lazy_store(i, producer, store)
            if not lazy.complete:
                self.stats.states_incomplete += 1
            new.ex.nodes[i].op = JiscJoinOp(parent, lazy)
            return
        rows = relation_rows(new, producer)
        store.clear()
        store.add_all(rows)
        self.stats.states_recomputed += 1
        self.stats.tuples_recomputed += len(rows)

    def _lazy_store(self, i: int, producer: int, store: _Store) -> LazyStore:
        new = self.new
        nodes = new.ex.nodes
        parent = new.plan.op(new.op(i).op_id)
        below = new.plan.op(new.op(producer).op_id)
        assert isinstance(parent, Join) and isinstance(below, Join)

        def complete_all() -> Rows:
            return relation_rows(new, producer)

        align = _alignment(parent, below, new.sig(producer))
        child = nodes[producer].op
        assert isinstance(child, HashJoinOp)
        if self.t0 is None:  # nothing shown yet: every store is empty, hence exact
            return LazyStore(store, None, complete_all, set(), None)
        deadline = _deadline(new, producer, self.t0)
        if align is None:
            return LazyStore(store, None, complete_all, None, deadline)
        fwd, rev = align
        n_key, n_below = len(rev), len(fwd)

        def complete_key(k: Any) -> Rows:
            c = nodes[producer].op
            assert isinstance(c, HashJoinOp)
            vals = _unpack(k, n_key)
            k2 = _pack([vals[j] for j in fwd], n_below)
            if isinstance(c, JiscJoinOp):
                c.lazy.ensure(k2)
            return key_rows(c, k2)

        if isinstance(child, JiscJoinOp) and not child.lazy.complete:
            keys_c = child.lazy.candidates
        else:
            keys_c = set(child.left.buckets)
        keys_d = set(child.right.buckets)
        base = keys_d if keys_c is None else keys_d & set(keys_c)
        candidates = set()
        for k2 in base:
            vals = _unpack(k2, n_below)
            candidates.add(_pack([vals[i] for i in rev], n_key))
        return LazyStore(store, complete_key, complete_all, candidates, deadline)


# -- helpers ----------------------------------------------------------------------------------


def relation_rows(view: ExecutorView, pos: int) -> Rows:
    """The current output relation of node ``pos``, computed from the join stores below it
    (joins, selects and projects only; the stores are completed first when lazy)."""
    op = view.op(pos)
    if isinstance(op, HashJoinOp):
        if isinstance(op, JiscJoinOp):
            op.lazy.fill_all()
        return join_rows(op)
    if isinstance(op, SelectOp):
        return op.keep(relation_rows(view, view.ex.nodes[pos].inputs[0]))
    if isinstance(op, ProjectOp):
        return op.fn(relation_rows(view, view.ex.nodes[pos].inputs[0]))
    raise PlanError(
        f"cannot rebuild a join input from {op.kind} {op.op_id}: its relation is kept by no "
        "join store of the running plan",
        hint=_FALLBACK,
    )


def _window_tuples(w: _WindowBase) -> int:
    n = len(w._pending)
    contents = getattr(w, "contents", None)
    if contents is not None:
        n += len(contents)
    if isinstance(w, PanedRangeWindow):
        n += sum(c for _, c in w.panes)
    return n


def _unpack(k: Any, n: int) -> tuple[Any, ...]:
    if n == 0:
        return ()
    return (k,) if n == 1 else tuple(k)


def _pack(vals: list[Any], n: int) -> Any:
    if n == 0:
        return ()
    return vals[0] if n == 1 else tuple(vals)


def _alignment(parent: Join, below: Join, sig: RelSig) -> tuple[list[int], list[int]] | None:
    """How ``parent``'s left key and ``below``'s key determine each other on ``below``'s
    output (signature ``sig``): ``(fwd, rev)`` with ``below_key[i] = parent_key[fwd[i]]``
    and ``parent_key[j] = below_key[rev[j]]``; None when they do not (see jisc.py, Keys)."""
    classes = equal_column_classes(sig)
    key = [a for a, _ in parent.equi_keys()]
    pairs = below.equi_keys()
    pair_class = [classes[lc] for lc, _ in pairs]
    key_class = [classes[a] for a in key]
    fwd: list[int] = []
    for c in pair_class:
        if c not in key_class:
            return None
        fwd.append(key_class.index(c))
    rev: list[int] = []
    for c in key_class:
        if c not in pair_class:
            return None
        rev.append(pair_class.index(c))
    return fwd, rev


def _deadline(view: ExecutorView, pos: int, t0: int) -> int | None:
    """The first instant by which every tuple shown at ``t0`` under node ``pos`` has left its
    window, when all leaves are time-based windows seen through selects, projects and joins
    (None otherwise: no such bound)."""
    op = view.op(pos)
    if isinstance(op, SlidingRangeWindow | TumblingWindow):
        size = op.size if isinstance(op, SlidingRangeWindow) else op.slide
        if op.count_mode:
            return None
        return -(-(t0 + size) // op.slide) * op.slide
    if isinstance(op, HashJoinOp | SelectOp | ProjectOp | PushedSelectOp):
        bounds = [_deadline(view, j, t0) for j in view.ex.nodes[pos].inputs]
        if not bounds or any(b is None for b in bounds):
            return None
        return max(b for b in bounds if b is not None)
    return None


#: The signature of what the functions above accept, for the strategy registry.
Transfer = Callable[[RowExecutor, RowExecutor], TransferStats]

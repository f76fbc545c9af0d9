"""MJoin: one n-ary window join with one store per input and one probe pipeline per input.

Where the binary tree (``engines.row.joins.tree.HashJoinOp`` chained) keeps every intermediate
result, MJoin (Viglas et al.; seed 002 section 2) keeps none: a change of input ``i`` is joined
with the other ``n - 1`` stores in the pipeline's *probe order* and the results leave at once.
Subresults shared by many tuples are recomputed; A-Caching (``engines.row.joins.acaching``) caches
exactly the ones that pay off.

Semantics (bags, explicit deletes, as every row operator): the inputs' deltas are processed
one input at a time in port order. Input ``i``'s inserts then deletes run through pipeline
``i`` against the stores as they are (inputs ``< i`` already updated, inputs ``> i`` not yet),
then store ``i`` is updated. This is ``d(R_0 ... R_n-1) = sum_i R'_0..R'_i-1 dR_i R_i+1..``, so
the output is exactly the change of the join, whatever the probe orders.

Pipelines. Pipeline ``i`` starts with the delta tuple of input ``i`` and joins the other inputs
in ``order[1:]``. A partial result is the flat concatenation of its components in pipeline
order; at each step the partial's key (the columns equal, through non-nullable equi
predicates, to columns of the input joined) looks up a hash index of that input's store on
those columns, and every predicate whose inputs are now all bound and that is not a used
index key is checked on the extended tuple (theta predicates, nullable equalities). With no
usable equality the step scans the store (nested loops). At the end a permutation puts the
components back in input order: the output layout of the join tree it replaces.

A wholesale-replaced input (tumbling / NOW windows) makes the join recompute its whole result
and emit a replacing delta, as the binary join does.
"""

from __future__ import annotations

import operator
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from engines.row.base import NO_CHANGE, Delta, Row, RowOperator, Rows
from engines.row.compile import compile_key, compile_predicate
from optimizer.ir.errors import PlanError
from optimizer.ir.expr import Expr, column_equality, columns_used, conjoin, remap_columns

Key = Callable[[Row], Any]


@dataclass(frozen=True)
class NarySpec:
    """An n-ary join: the inputs' widths and the conjuncts over their concatenated columns
    (input 0's columns first), with which columns may be NULL and which are never NaN or
    infinite (``finite``; empty: not known, comparisons as IEEE's)."""

    widths: tuple[int, ...]
    conjuncts: tuple[Expr, ...]
    nullable: tuple[bool, ...]
    finite: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        if len(self.widths) < 2:
            raise PlanError("an n-ary join needs at least two inputs")
        if len(self.nullable) != sum(self.widths):
            raise PlanError("an n-ary join's nullability must cover every input column")

    @property
    def n(self) -> int:
        return len(self.widths)

    @cached_property
    def starts(self) -> tuple[int, ...]:
        return tuple(sum(self.widths[:k]) for k in range(self.n))

    @cached_property
    def _owners(self) -> tuple[int, ...]:
        return tuple(k for k, w in enumerate(self.widths) for _ in range(w))

    def owner(self, column: int) -> int:
        """The input a global column belongs to."""
        if 0 <= column < len(self._owners):
            return self._owners[column]
        raise PlanError(f"column {column} is outside the n-ary join's {sum(self.widths)} columns")

    def inputs_of(self, conjunct: Expr) -> frozenset[int]:
        return frozenset(self.owner(c) for c in columns_used(conjunct))

    def hashable(self, conjunct: Expr) -> tuple[int, int] | None:
        """``(a, b)`` global columns of an equality usable as a hash key (both non-nullable,
        on two different inputs), else None."""
        eq = column_equality(conjunct)
        if eq is None:
            return None
        a, b = eq
        if self.owner(a) == self.owner(b) or self.nullable[a] or self.nullable[b]:
            return None
        return a, b

    def connected(self, bound: frozenset[int], p: int) -> bool:
        """Whether some hashable equality links input ``p`` to the ``bound`` inputs."""
        for c in self.conjuncts:
            eq = self.hashable(c)
            ends = {self.owner(eq[0]), self.owner(eq[1])} if eq else set()
            if eq and ends <= bound | {p} and p in ends:
                return True
        return False


@dataclass
class Step:
    """Joining input ``p`` at one pipeline position: the index used and what is checked."""

    p: int
    index_cols: tuple[int, ...]  # columns of input p (local) forming the hash key; () = scan
    probe_cols: tuple[int, ...]  # the partial's (flat) columns giving that key
    probe: Key
    residual: Callable[[Row], bool] | None
    residual_text: str


@dataclass
class Pipeline:
    """The probe pipeline of one input: its order, steps and output permutation.

    ``pre`` filters the delta tuples first (conjuncts reading the pipeline's own input only);
    ``flat_starts[p]`` is where input ``p``'s columns start in the pipeline's flat layout."""

    order: tuple[int, ...]
    steps: list[Step]
    flat_starts: dict[int, int]
    to_output: Callable[[Row], Row] | None  # None: already in input order
    pre: Callable[[Row], bool] | None = None
    #: Output column k is the flat column ``out_perm[k]`` (identity: None).
    out_perm: tuple[int, ...] | None = None
    #: Widths of the inputs in pipeline order.
    widths: list[int] = field(default_factory=list)
    #: Compiled runners (``compile_runner``) by ``(first, last, final)``, built on first use.
    runners: dict[tuple[int, int, bool], Runner] = field(default_factory=dict)
    #: ``run_pipeline``'s runners with their stores' index ``get``s and residuals bound.
    bound: dict[tuple[int, int, bool], tuple[Any, Runner, list[Any], list[Any]]] = field(
        default_factory=dict
    )

    def runner(self, first: int, last: int, final: bool) -> Runner:
        """Steps ``first..last`` as one compiled loop; ``final``: emit the output layout."""
        r = self.runners.get((first, last, final))
        if r is None:
            r = self.runners[(first, last, final)] = compile_runner(self, first, last, final)
        return r


def compile_pipeline(spec: NarySpec, order: Sequence[int]) -> Pipeline:
    """Compile pipeline ``order[0]`` with probe order ``order[1:]``."""
    order = tuple(order)
    if sorted(order) != list(range(spec.n)):
        raise PlanError(f"probe order {order} is not a permutation of the join's inputs")
    starts = spec.starts
    flat: dict[int, int] = {}
    pos = 0
    for p in order:
        flat[p] = pos
        pos += spec.widths[p]
    g2f = {starts[p] + c: flat[p] + c for p in order for c in range(spec.widths[p])}
    steps: list[Step] = []
    bound = {order[0]}
    own = [c for c in spec.conjuncts if spec.inputs_of(c) <= {order[0]}]
    applied: set[int] = {k for k, c in enumerate(spec.conjuncts) if spec.inputs_of(c) <= {order[0]}}
    pre = None
    if own:
        base = starts[order[0]]
        width = spec.widths[order[0]]
        own_cols = {base + c: c for c in range(width)}
        pre = compile_predicate(
            conjoin([remap_columns(c, own_cols) for c in own]),  # type: ignore[arg-type]
            list(spec.nullable[base : base + width]),
            list(spec.finite[base : base + width]) if spec.finite else None,
        )
    for p in order[1:]:
        idx: list[int] = []
        prb: list[int] = []
        rest: list[Expr] = []
        for k, c in enumerate(spec.conjuncts):
            if k in applied or not spec.inputs_of(c) <= bound | {p}:
                continue
            applied.add(k)
            eq = spec.hashable(c)
            if eq is not None:
                a, b = eq
                if spec.owner(b) != p:
                    a, b = b, a
                if spec.owner(b) == p and spec.owner(a) in bound:
                    local = b - starts[p]
                    if local not in idx:
                        idx.append(local)
                        prb.append(g2f[a])
                        continue
            rest.append(c)
        bound.add(p)
        layout = {
            g: g2f[g] for p2 in bound for g in range(starts[p2], starts[p2] + spec.widths[p2])
        }
        nullable = [False] * (flat[p] + spec.widths[p])
        finite = [True] * len(nullable)
        for g, f in layout.items():
            nullable[f] = spec.nullable[g]
            finite[f] = spec.finite[g] if spec.finite else True
        residual = conjoin([remap_columns(c, layout) for c in rest])
        steps.append(
            Step(
                p,
                tuple(idx),
                tuple(prb),
                compile_key(prb),
                compile_predicate(residual, nullable, finite if spec.finite else None)
                if residual is not None
                else None,
                residual.display() if residual is not None else "",
            )
        )
    perm = [g2f[g] for g in range(sum(spec.widths))]
    to_output: Callable[[Row], Row] | None = None  # >= 2 columns: itemgetter gives tuples
    if perm != list(range(len(perm))):
        to_output = operator.itemgetter(*perm)
    widths = [spec.widths[p] for p in order]
    return Pipeline(
        order,
        steps,
        flat,
        to_output,
        pre,
        tuple(perm) if to_output is not None else None,
        widths=widths,
    )


#: ``runner(partials, out, counts, gets, residuals)``: joins ``partials`` through some steps,
#: appending results to ``out`` and the number of index probes to ``counts[0]``; ``gets[k]`` is
#: the ``get`` of the index step ``k`` probes, ``residuals[k]`` its residual check (or None).
Runner = Callable[[Rows, Rows, list[int], Sequence[Any], Sequence[Any]], None]


def compile_runner(pipe: Pipeline, first: int, last: int, final: bool) -> Runner:
    """Steps ``first..last`` of ``pipe`` as one generated loop nest.

    ``run_steps`` materializes every partial result (a tuple per step) and the pipeline then
    permutes the results into the output layout. The runner instead binds each matched tuple
    to a loop variable (``q`` the incoming partial, ``o1``, ``o2``, ... the inputs joined) and
    builds one tuple per result, in the output layout when ``final`` (the steps end the
    pipeline), else flat. A partial is materialized only where a residual must see it."""
    steps = pipe.steps[first : last + 1]
    base = sum(pipe.widths[: first + 1])  # flat width of the incoming partials
    spans: list[tuple[str, int, int]] = [("q", 0, base)]
    pos = base
    for k in range(1, len(steps) + 1):
        w = pipe.widths[first + k]
        spans.append((f"o{k}", pos, w))
        pos += w

    def col(f: int, upto: int) -> str:
        for var, start, w in spans[: upto + 1]:
            if start <= f < start + w:
                return f"{var}[{f - start}]"
        raise PlanError(f"pipeline column {f} is not bound yet")

    def key(k: int) -> str:
        cols = steps[k - 1].probe_cols
        if not cols:
            return "()"
        if len(cols) == 1:
            return col(cols[0], k - 1)
        return "(" + ", ".join(col(c, k - 1) for c in cols) + ",)"

    def flat(upto: int) -> str:
        return " + ".join(var for var, _, _ in spans[: upto + 1])

    m = len(steps)
    if final and pipe.out_perm is not None:
        result = "(" + ", ".join(col(f, m) for f in pipe.out_perm) + ",)"
    else:
        result = flat(m)
    lines = ["def _run(partials, out, counts, gets, residuals):"]
    lines += [f"    G{k} = gets[{k - 1}]" for k in range(1, m + 1)]
    lines += [f"    R{k} = residuals[{k - 1}]" for k in range(1, m + 1) if steps[k - 1].residual]
    lines += ["    append = out.append", "    extend = out.extend", "    n = len(partials)"]
    lines.append("    for q in partials:")
    ind = "        "
    for k in range(1, m + 1):
        lines.append(f"{ind}b{k} = G{k}({key(k)})")
        lines.append(f"{ind}if not b{k}:")
        lines.append(f"{ind}    continue")
        if k == m and steps[k - 1].residual is None:
            lines.append(f"{ind}extend([{result} for o{k} in b{k}])")
            break
        lines.append(f"{ind}for o{k} in b{k}:")
        ind += "    "
        if steps[k - 1].residual is not None:
            lines.append(f"{ind}if not R{k}({flat(k)}):")
            lines.append(f"{ind}    continue")
        if k < m:
            lines.append(f"{ind}n += 1")
        else:
            lines.append(f"{ind}append({result})")
    lines.append("    counts[0] += n")
    src = "\n".join(lines) + "\n"
    namespace: dict[str, Any] = {}
    exec(compile(src, f"<hycq:mjoin-runner {pipe.order} {first}..{last}>", "exec"), namespace)
    fn: Runner = namespace["_run"]
    fn.__hycq_source__ = src  # type: ignore[attr-defined]
    return fn


def run_pipeline(
    pipe: Pipeline,
    stores: Sequence[IndexedStore],
    partials: Rows,
    counts: list[int],
    first: int = 0,
    last: int | None = None,
    final: bool = True,
) -> Rows:
    """Steps ``first..last`` (default: to the end) of ``pipe`` over ``partials`` through the
    compiled runner; in the output layout when ``final`` and the steps end the pipeline."""
    if last is None:
        last = len(pipe.steps) - 1
    if not partials:
        return []
    final = final and last == len(pipe.steps) - 1
    bound = pipe.bound.get((first, last, final))
    if bound is None or bound[0] is not stores:
        steps = pipe.steps[first : last + 1]
        # the index dicts live as long as the stores (cleared in place), so their ``get``s
        # are bound once per runner, not per call
        bound = pipe.bound[(first, last, final)] = (
            stores,
            pipe.runner(first, last, final),
            [stores[st.p].indexes[st.index_cols].get for st in steps],
            [st.residual for st in steps],
        )
    out: Rows = []
    bound[1](partials, out, counts, bound[2], bound[3])
    return out


def greedy_order(
    spec: NarySpec, first: int, fanout: Callable[[int, tuple[int, ...]], float]
) -> tuple[int, ...]:
    """A-Greedy style probe order for pipeline ``first``: repeatedly join the input with the
    smallest expected fan-out (``fanout(p, index_cols)``), preferring inputs linked to the
    bound ones by an equality (no cross products while a linked input remains)."""
    order = [first]
    left = set(range(spec.n)) - {first}
    while left:
        bound = frozenset(order)
        linked = [p for p in sorted(left) if spec.connected(bound, p)]
        pool = linked or sorted(left)
        best = min(pool, key=lambda p: (fanout(p, index_cols(spec, bound, p)), p))
        order.append(best)
        left.discard(best)
    return tuple(order)


def index_cols(spec: NarySpec, bound: frozenset[int], p: int) -> tuple[int, ...]:
    cols: list[int] = []
    for c in spec.conjuncts:
        eq = spec.hashable(c)
        if eq is None:
            continue
        a, b = eq
        if spec.owner(a) == p:
            a, b = b, a
        if spec.owner(b) == p and spec.owner(a) in bound:
            local = b - spec.starts[p]
            if local not in cols:
                cols.append(local)
    return tuple(cols)


class IndexedStore:
    """One input's relation (a bag) with one hash index per column set a pipeline probes on.

    Every index maps a key to a deque of tuples; window expiry deletes the oldest tuples, so a
    delete almost always hits a deque's head. The index on ``()`` is the whole store (scans)."""

    __slots__ = ("indexes", "keys", "size")

    def __init__(self) -> None:
        #: Probes use ``.get`` (a missing key is not created); only inserts index with ``[]``.
        self.indexes: dict[tuple[int, ...], defaultdict[Any, deque[Row]]] = {}
        self.keys: dict[tuple[int, ...], Key] = {}
        self.size = 0

    def ensure_index(self, cols: tuple[int, ...]) -> defaultdict[Any, deque[Row]]:
        index = self.indexes.get(cols)
        if index is None:
            key = compile_key(cols)
            index = defaultdict(deque)
            for r in self.rows():
                index[key(r)].append(r)
            self.indexes[cols] = index
            self.keys[cols] = key
        return index

    def rows(self) -> Rows:
        if not self.indexes:
            return []
        first = next(iter(self.indexes.values()))
        return [r for b in first.values() for r in b]

    def add_all(self, rows: Rows) -> None:
        for cols, index in self.indexes.items():
            key = self.keys[cols]
            for k, r in zip(map(key, rows), rows, strict=True):  # new keys get a deque
                index[k].append(r)
        self.size += len(rows)

    def remove_all(self, rows: Rows) -> None:
        for cols, index in self.indexes.items():
            key = self.keys[cols]
            for k, r in zip(map(key, rows), rows, strict=True):
                b = index[k]
                h = b[0]
                if h is r or h == r:  # window expiry: almost always the oldest, same object
                    b.popleft()
                else:
                    b.remove(r)
                if not b:
                    del index[k]
        self.size -= len(rows)

    def clear(self) -> None:
        for index in self.indexes.values():
            index.clear()
        self.size = 0

    def distinct(self, cols: tuple[int, ...]) -> int:
        index = self.indexes.get(cols)
        return len(index) if index is not None else 0


def run_steps(
    steps: Sequence[Step],
    stores: Sequence[IndexedStore],
    partials: Rows,
    counts: list[int] | None = None,
) -> Rows:
    """Join ``partials`` through ``steps`` (hash probes, residual checks); ``counts`` gets the
    number of index probes."""
    for st in steps:
        index = stores[st.p].indexes[st.index_cols]
        get = index.get
        key = st.probe
        res = st.residual
        out: Rows = []
        if counts is not None:
            counts[0] += len(partials)
        if res is None:
            for q in partials:
                b = get(key(q))
                if b:
                    out.extend([q + o for o in b])
        else:
            append = out.append
            for q in partials:
                b = get(key(q))
                if b:
                    for o in b:
                        j = q + o
                        if res(j):
                            append(j)
        partials = out
        if not partials:
            return partials
    return partials


class MJoinOp(RowOperator):
    """The n-ary window join (module docstring): one store and one probe pipeline per input.

    ``orders[i]`` is pipeline ``i``'s probe order (``orders[i][0] == i``); None chooses them
    greedily from the key structure (``greedy_order`` with unit fan-outs). ``reorder`` changes
    a pipeline's order mid-run (results stay exact: the stores do not depend on the orders).
    Subclasses hook ``_pipeline`` (A-Caching runs its caches there).
    """

    kind = "join"
    impl = "mjoin"

    def __init__(
        self,
        op_id: str,
        spec: NarySpec,
        replace_in: Sequence[bool],
        orders: Sequence[Sequence[int]] | None = None,
    ) -> None:
        super().__init__(op_id, replace_out=any(replace_in))
        self.spec = spec
        self.replace_in = tuple(replace_in)
        self.stores = [IndexedStore() for _ in range(spec.n)]
        if orders is None:
            orders = [
                greedy_order(spec, i, lambda p, cols: 0.0 if cols else 1.0) for i in range(spec.n)
            ]
        self.pipelines: list[Pipeline] = []
        for i, order in enumerate(orders):
            if order[0] != i:
                raise PlanError(f"pipeline {i}'s probe order must start with input {i}")
            self.pipelines.append(self._compile(order))
        self.probes = 0
        self.reorders = 0
        self.peak_stored = 0

    def _compile(self, order: Sequence[int]) -> Pipeline:
        pipe = compile_pipeline(self.spec, order)
        for st in pipe.steps:
            self.stores[st.p].ensure_index(st.index_cols)
        return pipe

    def reorder(self, i: int, order: Sequence[int]) -> None:
        """Give pipeline ``i`` a new probe order."""
        if tuple(order) == self.pipelines[i].order:
            return
        self.pipelines[i] = self._compile(order)
        self.reorders += 1

    # -- processing ---------------------------------------------------------------------------

    def _pipeline(self, i: int, rows: Rows, deleting: bool) -> Rows:
        """Results (in output layout) of joining input ``i``'s delta ``rows``."""
        pipe = self.pipelines[i]
        if pipe.pre is not None:
            rows = [r for r in rows if pipe.pre(r)]
        counts = [0]
        out = run_pipeline(pipe, self.stores, rows, counts)
        self.probes += counts[0]
        return out

    @staticmethod
    def _output(pipe: Pipeline, rows: Rows) -> Rows:
        if pipe.to_output is None or not rows:
            return rows
        f = pipe.to_output
        return [f(r) for r in rows]

    def step(self, instant: int, inputs: list[Delta]) -> Delta:
        if all(d.empty for d in inputs):
            return NO_CHANGE
        if self.replace_out:
            return self._step_replace(inputs)
        ins: Rows = []
        dels: Rows = []
        for i, d in enumerate(inputs):
            if d.empty:
                continue
            if d.ins:
                ins.extend(self._pipeline(i, d.ins, False))
            if d.dels:
                dels.extend(self._pipeline(i, d.dels, True))
            self._apply(i, d)
        stored = sum(s.size for s in self.stores)
        if stored > self.peak_stored:
            self.peak_stored = stored
        if not ins and not dels:
            return NO_CHANGE
        return Delta(ins, dels)

    def _apply(self, i: int, d: Delta) -> None:
        store = self.stores[i]
        if d.replace:
            store.clear()
            store.add_all(d.ins)
            return
        if d.ins:  # inserts before deletes: a derived input may delete what it inserts
            store.add_all(d.ins)
        if d.dels:
            store.remove_all(d.dels)

    def _step_replace(self, inputs: list[Delta]) -> Delta:
        """An input was replaced wholesale: update every store and emit the whole join."""
        for i, d in enumerate(inputs):
            if not d.empty:
                self._apply(i, d)
        self._reset_derived()
        smallest = min(range(self.spec.n), key=lambda i: self.stores[i].size)
        pipe = self.pipelines[smallest]
        out = run_steps(pipe.steps, self.stores, _pre(pipe, self.stores[smallest].rows()))
        return Delta(self._output(pipe, out), [], replace=True)

    def _reset_derived(self) -> None:
        """Hook: every store changed at once (caches must be emptied)."""

    # -- state and metrics ------------------------------------------------------------------

    def full_result(self) -> Rows:
        """The join of the current stores (for checks and migration)."""
        pipe = self.pipelines[0]
        return self._output(
            pipe, run_steps(pipe.steps, self.stores, _pre(pipe, self.stores[0].rows()))
        )

    def state(self) -> dict[str, Any]:
        return {
            "impl": self.impl,
            "inputs": self.spec.n,
            "tuples_stored": sum(s.size for s in self.stores),
            "per_input_tuples": [s.size for s in self.stores],
            "probe_orders": [list(p.order) for p in self.pipelines],
        }

    def join_metrics(self) -> dict[str, Any]:
        """Per-join figures for the run metrics (issue 18: probes, tuples stored, ...)."""
        return {
            "impl": self.impl,
            "probes": self.probes,
            "tuples_stored": sum(s.size for s in self.stores),
            "peak_tuples_stored": self.peak_stored,
            "reorders": self.reorders,
            "probe_orders": [list(p.order) for p in self.pipelines],
        }

    def snapshot(self) -> dict[str, Any]:
        return {"stores": [s.rows() for s in self.stores]}

    def restore(self, snap: dict[str, Any]) -> None:
        for s, rows in zip(self.stores, snap["stores"], strict=True):
            s.clear()
            s.add_all(list(rows))
        self._reset_derived()


def _pre(pipe: Pipeline, rows: Rows) -> Rows:
    return rows if pipe.pre is None else [r for r in rows if pipe.pre(r)]

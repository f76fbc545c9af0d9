"""State signatures: which relation a row-engine node holds, independent of op ids.

Phase One reuses join ids for different leaf sets, and ``rewire_chain`` may add or fuse a
column-restoring Project above a reordered chain, so nodes of two plans are never matched by
id. Every relation a plan computes is written in a normal form instead::

    relation = PROJECT[cols] ( SELECT[preds] ( atom_1 x atom_2 x ... ) )

* an *atom* is a relation whose state is opaque to reordering: a window (stream + window
  spec), an aggregate (its input's signature + group keys + aggregate calls), an R2S node;
* ``preds`` is the set of applied predicates (join conditions and selections), each written
  over canonical column descriptors;
* ``cols`` names every output column canonically: ``("col", atom, i)`` for the i-th column
  of an atom, ``("expr", ...)`` for a computed one.

Two relations are the same bag up to a column permutation exactly when their bases (atoms +
predicates) are equal and their column tuples are permutations of each other
(:func:`permutation`). Selections and projections commute with joins in bag algebra, so a
pushed-down select or a projection below a join lands in the same normal form as above it.

Two windows of one plan over the same stream with the same spec (a self-join) would be one
atom twice; each of them is then told apart by its op id (the FROM item's window, which
``rewire_chain`` keeps): their contents are equal at every instant, so this never pairs
relations whose contents differ.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from optimizer.ir.errors import PlanError
from optimizer.ir.expr import ColumnRef, Expr, conjuncts
from optimizer.ir.plan import (
    R2S,
    Aggregate,
    Join,
    LogicalPlan,
    Project,
    Select,
    Sink,
    Source,
    Window,
)


@dataclass(frozen=True)
class RelSig:
    """A relation in normal form: ``base`` (atoms + predicates) and canonical ``cols``."""

    base: Hashable
    cols: tuple[Hashable, ...]

    def same_bag(self, other: RelSig) -> bool:
        """Equal relations up to a column permutation."""
        return permutation(other, self) is not None


def permutation(old: RelSig, new: RelSig) -> tuple[int, ...] | None:
    """``p`` with ``new_row = tuple(old_row[i] for i in p)``, or None when the two signatures
    do not describe the same bag (different atoms, predicates or kept columns)."""
    if old.base != new.base or len(old.cols) != len(new.cols):
        return None
    if Counter(old.cols) != Counter(new.cols):
        return None
    where: dict[Hashable, list[int]] = {}
    for i, c in enumerate(old.cols):
        where.setdefault(c, []).append(i)
    return tuple(where[c].pop(0) for c in new.cols)


def permute(rows: Sequence[tuple[Any, ...]], p: tuple[int, ...]) -> list[tuple[Any, ...]]:
    """Rows reordered by :func:`permutation` (the identity costs a list copy only)."""
    if p == tuple(range(len(p))):
        return list(rows)
    return [tuple(r[i] for i in p) for r in rows]


def canon(expr: Expr, cols: Sequence[Hashable]) -> Hashable:
    """``expr`` with every column reference replaced by its canonical descriptor (names
    dropped); ``a = b`` is ordered so that it reads the same from both sides."""
    if isinstance(expr, ColumnRef):
        return ("ref", cols[expr.index])
    parts: list[Hashable] = [type(expr).__name__]
    for f in dataclasses.fields(expr):  # type: ignore[arg-type]
        v = getattr(expr, f.name)
        parts.append(_canon_value(v, cols))
    if type(expr).__name__ == "Binary" and parts[1] == "=":
        a, b = parts[2], parts[3]
        if repr(a) > repr(b):
            parts[2], parts[3] = b, a
    return tuple(parts)


def _canon_value(v: Any, cols: Sequence[Hashable]) -> Hashable:
    if isinstance(v, Expr):
        return canon(v, cols)
    if isinstance(v, tuple | list):
        return tuple(_canon_value(x, cols) for x in v)
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, Hashable):
        return v
    return repr(v)


def _spj(atoms: Counter[Hashable], preds: frozenset[Hashable]) -> Hashable:
    return ("spj", frozenset(atoms.items()), preds)


@dataclass
class _Parts:
    """A relation under construction: atom multiset, predicates and columns."""

    atoms: Counter[Hashable]
    preds: frozenset[Hashable]
    cols: tuple[Hashable, ...]

    def sig(self) -> RelSig:
        return RelSig(_spj(self.atoms, self.preds), self.cols)


def _atom(atom: Hashable, width: int) -> _Parts:
    return _Parts(Counter({atom: 1}), frozenset(), tuple(("col", atom, i) for i in range(width)))


def plan_signatures(plan: LogicalPlan) -> dict[str, RelSig]:
    """The relation signature of every operator's output (sources, windows, R2R operators
    and R2S nodes; the sink has none)."""
    window_atoms: dict[str, Hashable] = {}
    for op_id in plan.ids_of("window"):
        w = plan.op(op_id)
        assert isinstance(w, Window)
        (src,) = plan.inputs(op_id)
        s = plan.op(src)
        assert isinstance(s, Source)
        window_atoms[op_id] = (
            "window",
            s.stream,
            w.window.value,
            w.size,
            w.slide,
            w.slide_rows,
            w.time_column,
            w.time_unit,
        )
    seen = Counter(window_atoms.values())
    for op_id, atom in list(window_atoms.items()):
        if seen[atom] > 1:  # a self-join over equal windows: tell the FROM items apart
            window_atoms[op_id] = (*atom, op_id)  # type: ignore[misc]

    parts: dict[str, _Parts] = {}
    out: dict[str, RelSig] = {}
    for op_id in plan.topological():
        op = plan.op(op_id)
        ins = [parts[i] for i in plan.inputs(op_id) if i in parts]
        p: _Parts
        if isinstance(op, Source):
            p = _atom(("source", op.stream), len(op.schema))
        elif isinstance(op, Window):
            p = _atom(window_atoms[op_id], len(op.schema))
        elif isinstance(op, Select):
            (c,) = ins
            preds = frozenset(canon(x, c.cols) for x in conjuncts(op.predicate))
            p = _Parts(c.atoms, c.preds | preds, c.cols)
        elif isinstance(op, Project):
            (c,) = ins
            p = _Parts(
                c.atoms,
                c.preds,
                tuple(
                    c.cols[e.index] if isinstance(e, ColumnRef) else ("expr", canon(e, c.cols))
                    for e in op.exprs
                ),
            )
        elif isinstance(op, Join):
            a, b = ins
            cols = a.cols + b.cols
            preds = (
                frozenset(canon(x, cols) for x in conjuncts(op.condition))
                if op.condition is not None
                else frozenset()
            )
            p = _Parts(a.atoms + b.atoms, a.preds | b.preds | preds, cols)
        elif isinstance(op, Aggregate):
            (c,) = ins
            atom = (
                "aggregate",
                c.sig(),
                tuple(canon(g, c.cols) for g in op.group_by),
                tuple(canon(a, c.cols) for a in op.aggs),
            )
            p = _atom(atom, len(op.schema))
        elif isinstance(op, R2S):
            (c,) = ins
            p = _atom(("r2s", op.mode.value, c.sig()), len(op.schema))
        elif isinstance(op, Sink):
            continue
        else:  # an operator kind this module does not know: opaque, by its description
            atom = ("opaque", op.kind, op.describe(), tuple(x.sig() for x in ins))
            p = _atom(atom, len(op.schema))
        parts[op_id] = p
        out[op_id] = p.sig()
    return out


def key_descriptor(sig: RelSig, key_columns: Sequence[int]) -> tuple[Hashable, ...]:
    """The canonical descriptors of a store's key columns (a store's key function in a form
    comparable across plans)."""
    return tuple(sig.cols[i] for i in key_columns)


def require(cond: bool, message: str, hint: str | None = None) -> None:
    """Raise :class:`PlanError` with ``message`` unless ``cond``."""
    if not cond:
        raise PlanError(message, hint=hint)


def equal_column_classes(sig: RelSig) -> list[int]:
    """Per column of ``sig``: a class id; two columns share it when every row holds equal
    values in them (the same descriptor twice, or linked by ``a = b`` predicates applied to
    the relation, transitively)."""
    parent: dict[Hashable, Hashable] = {}

    def find(x: Hashable) -> Hashable:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    base = sig.base
    preds = base[2] if isinstance(base, tuple) and len(base) == 3 else frozenset()
    for p in preds:
        if (
            isinstance(p, tuple)
            and len(p) == 5
            and p[0] == "Binary"
            and p[1] == "="
            and isinstance(p[2], tuple)
            and p[2][:1] == ("ref",)
            and isinstance(p[3], tuple)
            and p[3][:1] == ("ref",)
        ):
            a, b = find(p[2][1]), find(p[3][1])
            if a != b:
                parent[a] = b
    roots: dict[Hashable, int] = {}
    return [roots.setdefault(find(c), len(roots)) for c in sig.cols]

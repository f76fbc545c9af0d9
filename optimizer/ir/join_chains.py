"""Join chains: the maximal trees of joins of a plan, with their conjuncts over the leaves'
concatenated columns (what Phase One reorders and the row engine may run as one n-ary
join)."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.ir.expr import Expr, conjuncts, remap_columns
from optimizer.ir.plan import Join, LogicalPlan

#: How the row engine may run a chain of joins (``--join-impl``; ``auto`` chooses among
#: them by cost, optimizer/join_impl.py): the binary hash-join tree, one n-ary MJoin, MJoin
#: with adaptive subresult caches (A-Caching), the tree with just-in-time suspension (JIT).
JOIN_IMPLS = ("tree", "mjoin", "acaching", "jit")


@dataclass(frozen=True)
class JoinChain:
    """A maximal tree of joins: its leaves (left to right), joins (bottom-up) and root."""

    root: str
    leaves: tuple[str, ...]
    joins: tuple[str, ...]
    conjuncts: tuple[Expr, ...]
    """The chain's conjuncts over the concatenation of the leaves' columns in leaf order."""


def join_chains(plan: LogicalPlan) -> list[JoinChain]:
    """Every maximal join tree of ``plan`` with at least one join."""
    out = []
    for op_id in plan.ids_of("join"):
        if any(isinstance(plan.op(c), Join) for c in plan.consumers(op_id)):
            continue
        leaves: list[str] = []
        joins: list[str] = []
        conj: list[Expr] = []
        _collect(plan, op_id, leaves, joins, conj)
        out.append(JoinChain(op_id, tuple(leaves), tuple(joins), tuple(conj)))
    return out


def _collect(
    plan: LogicalPlan, node: str, leaves: list[str], joins: list[str], conj: list[Expr]
) -> None:
    """Walk a join tree left to right, collecting leaves, joins and shifted conjuncts."""
    op = plan.op(node)
    if not isinstance(op, Join):
        leaves.append(node)
        return
    offset = sum(len(plan.op(leaf).schema) for leaf in leaves)
    left, right = plan.inputs(node)
    _collect(plan, left, leaves, joins, conj)
    _collect(plan, right, leaves, joins, conj)
    joins.append(node)
    if op.condition is not None:
        shift = {i: i + offset for i in range(len(op.schema))}
        conj.extend(remap_columns(c, shift) for c in conjuncts(op.condition))

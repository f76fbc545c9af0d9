"""Phase One (section 6.3.3): System-R dynamic programming over join orders, all on the row
engine.

The binder produces left-deep join chains in FROM order whose leaves are the (filtered,
aggregated) windowed inputs. For each maximal chain of joins this module finds the
Definition-6.1-best left-deep order with every operator on the row engine, and rewires the
plan accordingly:

* ``best[S]`` for a set S of leaves is the cheapest left-deep join of S; it extends
  ``best[S - {j}]`` by a join with leaf j. The new join's ``u`` depends only on S - {j} and j,
  because Eq. 6.2's output size and the cascaded window cardinality of a set of joined
  leaves do not depend on their order (the estimator's join selectivity is a product of
  per-leaf-pair key selectivities), and C_b (max) and C_u (sum) are monotone under adding a
  unit. So the principle of optimality holds (the dissertation's proof, Case 1.2 read as
  condition 2 [fix]).
* Every conjunct of the chain's join conditions is applied at the first join that has all
  the leaves it references; its column indexes are renumbered for the new column order.
* The rewired joins reuse the chain's join ids, bottom-up, so ids stay stable and
  deterministic; if the leaf order changed, the chain's original column order is restored by
  remapping the consumer when it is a Project, else by a new Project (next free
  ``projectN`` id) on top, so nothing above it changes.

Not done: aggregate push-down / pull-up across joins, bushy trees.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx

from optimizer.costmodel import operator_utilization
from optimizer.estimate import (
    DEFAULT_DISTINCT,
    join_output,
    key_selectivity,
    predicate_selectivity,
)
from optimizer.ir.cost import ZERO, Cost, Estimate, sort_key
from optimizer.ir.costing import CostModel, Estimates, OpEstimate
from optimizer.ir.errors import OptionError
from optimizer.ir.expr import (
    ColumnRef,
    column_equality,
    columns_used,
    conjoin,
    remap_columns,
)
from optimizer.ir.join_chains import JoinChain, join_chains
from optimizer.ir.plan import Join, LogicalPlan, Project
from optimizer.ir.schema import Schema


@dataclass(frozen=True)
class PhaseOneResult:
    """The reordered plan, the row-engine cost of its join chains and how it was found."""

    plan: LogicalPlan
    join_cost: Cost
    plans_examined: int
    seconds: float
    orders: tuple[tuple[str, ...], ...]
    """Per chain, the chosen left-deep order of its leaves (operator ids)."""


class _ChainModel:
    """Estimates and costs of left-deep joins over subsets of one chain's leaves."""

    def __init__(
        self,
        plan: LogicalPlan,
        chain: JoinChain,
        estimates: Estimates,
        model: CostModel,
        shared_row_core: bool,
    ) -> None:
        self.chain = chain
        self.model = model
        self.shared = shared_row_core
        self.est = [estimates[leaf] for leaf in chain.leaves]
        widths = [len(plan.op(leaf).schema) for leaf in chain.leaves]
        self.starts = [sum(widths[:k]) for k in range(len(widths))]
        self.widths = widths
        owner = {}
        for k, (s, w) in enumerate(zip(self.starts, widths, strict=True)):
            for c in range(s, s + w):
                owner[c] = k
        self.owner = owner
        # Each conjunct: its leaf set; equi-conjuncts between two leaves grouped per pair.
        self.filters: list[tuple[frozenset[int], Estimate]] = []
        #: Per filter: whether it is an equi-key (else a residual the probes test).
        self.equi: list[bool] = []
        pairs: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
        for conj in chain.conjuncts:
            leaves = frozenset(owner[i] for i in columns_used(conj))
            eq = column_equality(conj)
            if eq is not None and len(leaves) == 2 and conj.display() not in estimates.declared:
                a, b = sorted(eq, key=lambda i: owner[i])
                pa, pb = owner[a], owner[b]
                cols = pairs.setdefault((pa, pb), ([], []))
                cols[0].append(a - self.starts[pa])
                cols[1].append(b - self.starts[pb])
            else:
                self.filters.append((leaves, predicate_selectivity(conj, estimates.declared)))
                self.equi.append(eq is not None and len(leaves) == 2)
        for (pa, pb), (ca, cb) in pairs.items():
            da = self._key_distinct(estimates, pa, ca)
            db = self._key_distinct(estimates, pb, cb)
            self.filters.append((frozenset((pa, pb)), key_selectivity(da, db)))
            self.equi.append(True)
        self._set_cache: dict[frozenset[int], tuple[Estimate, Estimate, float]] = {}
        self._join = Join("join?", Schema(()), None, 0)

    def _key_distinct(self, estimates: Estimates, leaf: int, cols: list[int]) -> Estimate:
        if estimates.key_distinct is None:  # pragma: no cover - estimates from elsewhere
            return Estimate.estimated(DEFAULT_DISTINCT)
        return estimates.key_distinct(self.chain.leaves[leaf], cols)

    def applied(self, s: frozenset[int]) -> list[int]:
        """Indexes of the filters applied inside a left-deep join of ``s`` (|s| >= 2)."""
        if len(s) < 2:
            return []
        return [k for k, (leaves, _) in enumerate(self.filters) if leaves <= s]

    def join_step(self, left: frozenset[int], j: int) -> tuple[Cost, OpEstimate]:
        """Cost and estimates of joining the set ``left`` with leaf ``j``."""
        lam_l, card_l, slide_l = self.of_set(left)
        e = self.est[j]
        new = left | {j}
        done = set(self.applied(left))
        f = f_equi = Estimate.exact(1.0)
        residual = False
        for k in self.applied(new):
            if k not in done:
                f = f * self.filters[k][1]
                if self.equi[k]:
                    f_equi = f_equi * self.filters[k][1]
                else:
                    residual = True
        lam_out, card = join_output(lam_l, card_l, e.lambda_out, e.cardinality, f)
        examined = None
        if residual:
            examined = join_output(lam_l, card_l, e.lambda_out, e.cardinality, f_equi)[0].value
        slide = min(slide_l, e.slide_seconds)
        op_est = OpEstimate(
            (lam_l, e.lambda_out),
            lam_out,
            card,
            (card_l, e.cardinality),
            slide,
            f,
            examined=examined,
        )
        u = operator_utilization(self.model, self._join, op_est)
        return (Cost.on_core(u) if self.shared else Cost.unit(u)), op_est

    def of_set(self, s: frozenset[int]) -> tuple[Estimate, Estimate, float]:
        """(lambda_out, |w|, slide) of the join of ``s``, independent of the order."""
        if len(s) == 1:
            (k,) = s
            e = self.est[k]
            return e.lambda_out, e.cardinality, e.slide_seconds
        if s not in self._set_cache:
            j = max(s)
            _, op_est = self.join_step(s - {j}, j)
            self._set_cache[s] = (op_est.lambda_out, op_est.cardinality, op_est.slide_seconds)
        return self._set_cache[s]

    def order_cost(self, order: Sequence[int]) -> Cost:
        """Row-engine cost of the left-deep join of the leaves in ``order``."""
        total = ZERO
        for k in range(1, len(order)):
            cost, _ = self.join_step(frozenset(order[:k]), order[k])
            total = total + cost
        return total


def best_order(
    cm: _ChainModel, utilization_only: bool = False
) -> tuple[tuple[int, ...], Cost, int]:
    """System-R DP over left-deep orders: (order, cost, (set, leaf) extensions examined)."""
    m = len(cm.chain.leaves)
    best: dict[frozenset[int], tuple[tuple[float, ...], tuple[int, ...], Cost]] = {
        frozenset({k}): ((0.0, 0.0, 0.0), (k,), ZERO) for k in range(m)
    }
    examined = 0
    for size in range(2, m + 1):
        for combo in itertools.combinations(range(m), size):
            s = frozenset(combo)
            cands = []
            for j in combo:
                rest = s - {j}
                _, order, cost = best[rest]
                step, _ = cm.join_step(rest, j)
                total = cost + step
                examined += 1
                cands.append(((*sort_key(total, utilization_only), *order, j), (*order, j), total))
            key, order, cost = min(cands)
            best[s] = (key, order, cost)
    _, order, cost = best[frozenset(range(m))]
    return order, cost, examined


def exhaustive_order(
    cm: _ChainModel, utilization_only: bool = False
) -> tuple[tuple[int, ...], Cost, int]:
    """Every left-deep order (for tests): (order, cost, orders examined)."""
    best = None
    n = 0
    for order in itertools.permutations(range(len(cm.chain.leaves))):
        if len(order) > 1 and order[0] > order[1]:
            continue  # the first two leaves commute
        n += 1
        cost = cm.order_cost(order)
        key = sort_key(cost, utilization_only)
        if best is None or key < best[0]:
            best = (key, order, cost)
    assert best is not None
    return best[1], best[2], n


def optimize_join_order(
    plan: LogicalPlan,
    estimates: Estimates,
    model: CostModel,
    *,
    shared_row_core: bool = False,
    utilization_only: bool = False,
) -> PhaseOneResult:
    """Phase One: reorder every join chain of ``plan`` (all operators on the row engine)."""
    start = time.perf_counter()
    examined = 0
    total = ZERO
    orders = []
    new_plan = plan
    for chain in join_chains(plan):
        cm = _ChainModel(plan, chain, estimates, model, shared_row_core)
        order, cost, n = best_order(cm, utilization_only)
        examined += n
        total = total + cost
        orders.append(tuple(chain.leaves[k] for k in order))
        if list(order) != list(range(len(order))):
            new_plan = rewire_chain(new_plan, chain, cm, order)
    # A plan without joins has one order: itself.
    examined = max(examined, 1)
    return PhaseOneResult(new_plan, total, examined, time.perf_counter() - start, tuple(orders))


def rewire_chain(
    plan: LogicalPlan, chain: JoinChain, cm: _ChainModel, order: Sequence[int]
) -> LogicalPlan:
    """``plan`` with ``chain`` rebuilt as the left-deep join of its leaves in ``order``."""
    g = nx.DiGraph(plan.graph)
    seqs = [g.nodes[j]["seq"] for j in chain.joins]
    root_op = plan.op(chain.root)
    consumers = [(c, g.edges[chain.root, c]["port"]) for c in plan.consumers(chain.root)]
    g.remove_nodes_from(chain.joins)
    # New position of each original (global) column.
    new_pos: dict[int, int] = {}
    pos = 0
    for k in order:
        for c in range(cm.starts[k], cm.starts[k] + cm.widths[k]):
            new_pos[c] = pos
            pos += 1
    # Leaf columns as the chain root saw them (with their qualifiers), in leaf order.
    root_fields = root_op.schema.fields
    leaf_schema = [
        Schema(root_fields[cm.starts[k] : cm.starts[k] + cm.widths[k]])
        for k in range(len(chain.leaves))
    ]
    prev = chain.leaves[order[0]]
    schema = leaf_schema[order[0]]
    placed: set[int] = set()
    for step in range(1, len(order)):
        k = order[step]
        have = frozenset(order[: step + 1])
        preds = []
        for key, conj in enumerate(chain.conjuncts):
            idx = {cm.owner[i] for i in columns_used(conj)}
            if key in placed or not idx <= have:
                continue
            placed.add(key)
            preds.append(remap_columns(conj, new_pos))
        left_width = len(schema)
        schema = schema.concat(leaf_schema[k])
        op_id = chain.joins[step - 1]
        g.add_node(op_id, op=Join(op_id, schema, conjoin(preds), left_width), seq=seqs[step - 1])
        g.add_edge(prev, op_id, port=0)
        g.add_edge(chain.leaves[k], op_id, port=1)
        prev = op_id
    top = prev
    fields = root_op.schema.fields
    if all(new_pos[i] == i for i in range(len(fields))):
        for consumer, port in consumers:
            g.add_edge(top, consumer, port=port)
        return LogicalPlan(g, plan.sink)
    sole = plan.op(consumers[0][0]) if len(consumers) == 1 else None
    if isinstance(sole, Project):
        # Fuse the column restore into the consumer projection: no new operator.
        exprs = tuple(remap_columns(e, new_pos) for e in sole.exprs)
        g.nodes[sole.id]["op"] = Project(sole.id, sole.schema, exprs)
        g.add_edge(top, sole.id, port=0)
        return LogicalPlan(g, plan.sink)
    pid = _next_id(plan, "project")
    exprs = tuple(ColumnRef(new_pos[i], f.display(), f.dtype) for i, f in enumerate(fields))
    g.add_node(pid, op=Project(pid, root_op.schema, exprs), seq=seqs[-1] + 0.5)
    g.add_edge(top, pid, port=0)
    for consumer, port in consumers:
        g.add_edge(pid, consumer, port=port)
    return LogicalPlan(g, plan.sink)


def _next_id(plan: LogicalPlan, kind: str) -> str:
    numbers = [
        int(m.group(1)) for i in plan.topological() if (m := re.fullmatch(kind + r"(\d+)", i))
    ]
    return f"{kind}{max(numbers, default=0) + 1}"


# -- a join order given by the user ------------------------------------------------------------


def chain_aliases(plan: LogicalPlan, chain: JoinChain) -> tuple[str, ...]:
    """The FROM alias of each leaf of ``chain``, in leaf order (the qualifier its columns
    carry at the chain's root; ``?k`` for a leaf without one)."""
    fields = plan.op(chain.root).schema.fields
    out: list[str] = []
    pos = 0
    for k, leaf in enumerate(chain.leaves):
        width = len(plan.op(leaf).schema)
        qualifiers = {f.qualifier for f in fields[pos : pos + width] if f.qualifier is not None}
        out.append(qualifiers.pop() if len(qualifiers) == 1 else f"?{k}")
        pos += width
    return tuple(out)


def parse_join_order(spec: str) -> tuple[tuple[str, ...], ...]:
    """``a,b,c`` -> (('a','b','c'),); several join chains are separated by ``;``
    (``a,b;c,d``). Aliases are compared case-insensitively."""
    chains = []
    for part in spec.split(";"):
        names = tuple(n.strip().lower() for n in part.split(","))
        if not part.strip() or any(not n for n in names):
            raise OptionError(
                f"--join-order '{spec}' has an empty alias",
                hint="give the FROM aliases separated by commas, e.g. --join-order s,r,t",
            )
        chains.append(names)
    return tuple(chains)


def fixed_join_order(
    plan: LogicalPlan,
    estimates: Estimates,
    model: CostModel,
    orders: Sequence[Sequence[str]],
    *,
    shared_row_core: bool = False,
) -> PhaseOneResult:
    """Phase One replaced by a given left-deep order per join chain (FROM aliases, as
    :func:`parse_join_order` reads them). A chain is matched by its set of aliases; chains
    not named keep the order the query wrote. Joins are rewired as Phase One does
    (:func:`rewire_chain`), so operator ids are the ones ``explain --join-order`` prints.

    An order naming an unknown alias, leaving one out, repeating one, or a query without
    joins is an OptionError (exit 2) that lists the chains' aliases.
    """
    start = time.perf_counter()
    chains = join_chains(plan)
    aliases = [tuple(a.lower() for a in chain_aliases(plan, c)) for c in chains]
    listing = "; ".join(",".join(a) for a in aliases)
    if not chains:
        raise OptionError(
            "--join-order: the query has no join",
            hint="drop --join-order (it orders the joins of a query's FROM list)",
        )
    used: set[int] = set()
    chosen: dict[int, tuple[int, ...]] = {}
    for order in orders:
        dup = sorted({a for a in order if order.count(a) > 1})
        if dup:
            raise OptionError(
                f"--join-order names {', '.join(dup)} twice in '{','.join(order)}'",
                hint=f"name each FROM alias once; the query's join aliases: {listing}",
            )
        match = [k for k, a in enumerate(aliases) if set(a) == set(order)]
        if not match:
            near = [k for k, a in enumerate(aliases) if set(a) & set(order)]
            if near:
                have = aliases[near[0]]
                unknown = sorted(set(order) - set(have))
                missing = [a for a in have if a not in order]
                what = []
                if unknown:
                    what.append(f"unknown alias {', '.join(unknown)}")
                if missing:
                    what.append(f"missing {', '.join(missing)}")
                raise OptionError(
                    f"--join-order '{','.join(order)}': {'; '.join(what)}",
                    hint=f"give every alias of the join once, e.g. --join-order "
                    f"{','.join(have)}" + (f" (joins: {listing})" if len(chains) > 1 else ""),
                )
            raise OptionError(
                f"--join-order '{','.join(order)}' names no join of the query",
                hint=f"the query's join aliases: {listing}",
            )
        k = match[0]
        if k in used:
            raise OptionError(
                f"--join-order orders the join of {','.join(aliases[k])} twice",
                hint="give each join chain one order, separated by ';'",
            )
        used.add(k)
        chosen[k] = tuple(aliases[k].index(a) for a in order)
    new_plan = plan
    total = ZERO
    final_orders = []
    for k, chain in enumerate(chains):
        cm = _ChainModel(plan, chain, estimates, model, shared_row_core)
        positions = chosen.get(k, tuple(range(len(chain.leaves))))
        total = total + cm.order_cost(positions)
        final_orders.append(tuple(chain.leaves[i] for i in positions))
        if list(positions) != list(range(len(positions))):
            new_plan = rewire_chain(new_plan, chain, cm, positions)
    return PhaseOneResult(new_plan, total, 1, time.perf_counter() - start, tuple(final_orders))

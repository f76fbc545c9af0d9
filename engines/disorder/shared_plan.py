"""Shared disorder handling for concurrent queries over one source (Ji, Ch. 5).

Several queries read one source; their selections are pulled up, shared and fused into a
tree (a *subplan* ``G^i``): the source at the root, filters inside (a filter with several
children is a *branch operator*), and each query's consumer (its window, aggregate or join
input: not shared) as a leaf. Each query ``Q_j`` needs its tuples K-slack-buffered by its own
``kappa_j`` (from its quality policy, Ch. 4) between the source and its leaf.

A *configuration* places chains of K-slack buffers in the tree. A chain ``B_1 .. B_u`` sits
on the output of a node ``v``; ``B_l`` forwards what it releases to its *targets* (children
of ``v``) and to ``B_{l+1}``. The constraint (latency minimization): on every path from the
source to the leaf of ``Q_j`` the buffer sizes add up to exactly ``kappa_j``. The objective:
the fewest buffered tuples, ``mem = sum_B r_in(B) * K(B)`` with ``r_in`` the rate of the
tuples the buffer holds (the source's rate times the selectivities above it).

Algorithms, as in the dissertation with two fixes to the printed pseudo-code:

- :func:`chain_at` builds a K-slack chain from a set of distinct kappa values (Sec. 5.3).
- :func:`greedy` is Alg. 5.2 (Alg. 5.1 applied at every branch operator in one depth-first
  pass, ``kappa^s(v) = min kappa over Q(v)``).
- :func:`opt` is Alg. 5.3 (placement bottom-up with the coalesced selectivity ``f_cs``,
  sizes top-down): memory-optimal.
- :func:`exhaustive` enumerates every candidate (``prod (N_F(v) + 1)``): the ``NAIVE``
  baseline of Fig. 5.8 and the tests' check that OPT is optimal.
- :func:`unshared`: one buffer of ``kappa_j`` in front of each leaf (no sharing);
  :func:`chained`: full chains, nothing pushed below a filter (sharing without Sec. 5.4).

Fixes: (1) Alg. 5.3's ``DetermineBufSizeAtOp`` as printed recurses into the children only
when ``v.hasBuf``; the children of a node without a buffer still need theirs, so it
recurses with ``localBufSize = 0`` (as GREEDY does). (2) Alg. 5.1/5.2 line 14's ``break``
belongs to the ``else`` (the loop goes on while pushing down pays); the indentation of the
text lost it.

The K-slack buffers of :mod:`engines.disorder.shared_runtime` all run on the *source's*
clock (its largest timestamp), so a chain whose sizes add up to ``k`` releases exactly what
one buffer of ``k`` on the source would, and a filter commutes with a buffer: every
configuration gives every leaf the same stream, and only the memory differs. That is the
property Sec. 5.3 relies on; the runtime makes it exact.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from optimizer.ir.errors import OptionError


@dataclass
class Node:
    """One operator of a subplan: the source (``kind="source"``), a filter, or a query's
    leaf (``kind="leaf"``, ``query`` names the query). ``selectivity``: the share of its
    input a filter passes (monitored at run time; 1 for the source and leaves).
    ``predicate``: what the runtime evaluates (a pyarrow compute expression) for a filter."""

    name: str
    kind: str
    children: list[Node] = field(default_factory=list)
    selectivity: float = 1.0
    query: str | None = None
    predicate: Any = None

    @property
    def is_filter(self) -> bool:
        return self.kind == "filter"

    @property
    def is_leaf(self) -> bool:
        return self.kind == "leaf"

    def walk(self) -> Iterator[Node]:
        """This node and every node below it, depth-first pre-order."""
        yield self
        for c in self.children:
            yield from c.walk()


def source(name: str, *children: Node) -> Node:
    return Node(name, "source", list(children))


def filt(name: str, selectivity: float, *children: Node, predicate: Any = None) -> Node:
    return Node(name, "filter", list(children), selectivity=selectivity, predicate=predicate)


def leaf(query: str, name: str | None = None) -> Node:
    return Node(name or f"leaf:{query}", "leaf", query=query)


@dataclass(frozen=True)
class Buffer:
    """One K-slack buffer of a chain: its size (ticks) and the children it feeds."""

    size: int
    targets: tuple[str, ...]


@dataclass
class Configuration:
    """Chains of buffers by the node whose output they sit on (a leaf's chain sits in front
    of the leaf). ``algorithm`` says who made it."""

    chains: dict[str, list[Buffer]]
    algorithm: str

    def buffers(self) -> int:
        return sum(len(c) for c in self.chains.values())


def check_subplan(root: Node, kappa: Mapping[str, int]) -> None:
    """A usable subplan: a source root, uniquely named nodes, filters with children and a
    selectivity in (0, 1], leaves without children, a kappa >= 0 for every leaf's query."""
    if root.kind != "source":
        raise OptionError(
            f"a shared subplan starts at its source, not at {root.kind} {root.name!r}"
        )
    seen: set[str] = set()
    for v in root.walk():
        if v.name in seen:
            raise OptionError(f"two operators of the shared subplan are named {v.name!r}")
        seen.add(v.name)
        if v.is_leaf:
            if v.children:
                raise OptionError(f"leaf {v.name!r} has children")
            if v.query is None or v.query not in kappa:
                raise OptionError(f"no K-slack size (kappa) for the query of leaf {v.name!r}")
            if int(kappa[v.query]) < 0:
                raise OptionError(f"kappa of {v.query!r} is negative")
        elif not v.children:
            raise OptionError(f"{v.kind} {v.name!r} feeds no query")
        if v.is_filter and not 0.0 < v.selectivity <= 1.0:
            raise OptionError(
                f"filter {v.name!r} has selectivity {v.selectivity}, not in (0, 1]",
                hint="a filter that passes nothing feeds no query: drop it",
            )


def queries_below(v: Node) -> set[str]:
    """``Q(v)``: the queries whose leaves are under ``v``."""
    return {n.query for n in v.walk() if n.is_leaf and n.query is not None}


def kappa_s(v: Node, kappa: Mapping[str, int]) -> int:
    """``kappa^s(v)``: the largest buffer size all queries sharing ``v`` can share."""
    return min(int(kappa[q]) for q in queries_below(v))


def chain_at(v: Node, values: list[int], above: int, kappa: Mapping[str, int]) -> list[Buffer]:
    """The K-slack chain on ``v``'s output for the distinct ``values`` (accumulated sizes
    from the source, all >= ``above``): ``B_l`` has size ``values[l] - values[l-1]``
    (``values[0] - above`` for the first) and feeds the children whose ``kappa^s`` is
    ``values[l]``; children with a larger ``kappa^s`` (pushed down below them) hang off the
    tail. A buffer of size 0 (the first, when ``values[0] == above``) is kept: it is where
    the children with ``kappa^s == above`` are fed from."""
    vals = sorted(set(values))
    if not vals:
        return []
    chain: list[Buffer] = []
    prev = above
    for i, val in enumerate(vals):
        last = i == len(vals) - 1
        targets = tuple(
            c.name
            for c in v.children
            if kappa_s(c, kappa) == val or (last and kappa_s(c, kappa) > val)
        )
        chain.append(Buffer(val - prev, targets))
        prev = val
    return chain


def _child_sel(c: Node, coalesced: Mapping[str, float] | None = None) -> float:
    if not c.is_filter:
        return 1.0
    if coalesced is not None and c.name in coalesced:
        return coalesced[c.name]
    return c.selectivity


def _kept_values(
    v: Node, kappa: Mapping[str, int], coalesced: Mapping[str, float] | None = None
) -> tuple[list[int], float]:
    """Alg. 5.1 lines 4-14 (and Alg. 5.3 lines 8-20): walk the distinct ``kappa^s`` of
    ``v``'s children from the largest down, adding the (coalesced) selectivities of the
    children that have it; while the sum stays below 1, pushing that buffer down below
    those children saves memory. Returns the values kept in the chain on ``v`` (empty: all
    pushed down) and the selectivity sum reached."""
    values = sorted({kappa_s(c, kappa) for c in v.children})
    total = 0.0
    while values:
        top = values[-1]
        total += sum(_child_sel(c, coalesced) for c in v.children if kappa_s(c, kappa) == top)
        if total < 1.0:
            values.pop()
        else:
            break
    return values, total


def greedy(root: Node, kappa: Mapping[str, int]) -> Configuration:
    """Alg. 5.2 GREEDY: Alg. 5.1 at each branch operator in isolation, sizes top-down."""
    check_subplan(root, kappa)
    chains: dict[str, list[Buffer]] = {}

    def process(v: Node, above: int) -> None:
        if v.is_leaf:
            return
        kept, _ = _kept_values(v, kappa)
        local = max(kept) - above if kept else 0
        if local > 0:
            chains[v.name] = chain_at(v, kept, above, kappa)
        for c in v.children:
            ks = kappa_s(c, kappa)
            process(c, ks if ks < above + local else above + local)

    process(root, 0)
    return Configuration(chains, "greedy")


def opt(root: Node, kappa: Mapping[str, int]) -> Configuration:
    """Alg. 5.3 OPT: buffer placement bottom-up with coalesced selectivities (a filter
    without a buffer below it passes on ``sel * sum f_cs(children)``), sizes top-down."""
    check_subplan(root, kappa)
    coalesced: dict[str, float] = {}
    kept_at: dict[str, list[int]] = {}
    order: list[Node] = []

    def post(v: Node) -> None:
        for c in v.children:
            post(c)
        if not v.is_leaf:
            order.append(v)

    post(root)
    for v in order:  # children before parents
        kept, total = _kept_values(v, kappa, coalesced)
        if kept:
            kept_at[v.name] = kept
        if v.is_filter:
            coalesced[v.name] = v.selectivity * (1.0 if kept else total)
    return Configuration(_sizes(root, kappa, kept_at), "opt")


def _sizes(
    root: Node, kappa: Mapping[str, int], kept_at: Mapping[str, list[int]]
) -> dict[str, list[Buffer]]:
    """Alg. 5.3 ``DetermineBufSizeAtOp`` (with fix (1) of the module docstring): chains
    for the placement ``kept_at`` (node -> kappa values its chain keeps)."""
    chains: dict[str, list[Buffer]] = {}

    def size(v: Node, above: int) -> None:
        if v.is_leaf:
            return
        local = 0
        kept = kept_at.get(v.name)
        if kept:
            local = max(kept) - above
            if local > 0:
                chains[v.name] = chain_at(v, kept, above, kappa)
            else:
                local = 0
        for c in v.children:
            ks = kappa_s(c, kappa)
            size(c, ks if ks < above + local else above + local)

    size(root, 0)
    return chains


def unshared(root: Node, kappa: Mapping[str, int]) -> Configuration:
    """Unshared disorder handling: one buffer of ``kappa_j`` right in front of each leaf."""
    check_subplan(root, kappa)
    chains = {
        v.name: [Buffer(int(kappa[v.query or ""]), (v.name,))]
        for v in root.walk()
        if v.is_leaf and int(kappa[v.query or ""]) > 0
    }
    return Configuration(chains, "unshared")


def chained(root: Node, kappa: Mapping[str, int]) -> Configuration:
    """Sharing without push-down (Sec. 5.3, Fig. 5.3c): a full K-slack chain on every
    non-leaf node, nothing moved below a filter."""
    check_subplan(root, kappa)
    kept_at = {
        v.name: sorted({kappa_s(c, kappa) for c in v.children})
        for v in root.walk()
        if not v.is_leaf
    }
    return Configuration(_sizes(root, kappa, kept_at), "chained")


def exhaustive(root: Node, kappa: Mapping[str, int]) -> Configuration:
    """Every candidate configuration (each non-leaf node pushes down 0 .. all of its chain's
    largest values, as far as only filter children hold them), the cheapest by
    :func:`memory` with unit rate; the first found among equals. ``prod (N_F(v)+1)``
    candidates: the NAIVE baseline."""
    check_subplan(root, kappa)
    nodes = [v for v in root.walk() if not v.is_leaf]
    options: list[list[list[int]]] = []
    for v in nodes:
        values = sorted({kappa_s(c, kappa) for c in v.children})
        opts = [values]
        while values:
            top = values[-1]
            if any(not c.is_filter for c in v.children if kappa_s(c, kappa) == top):
                break
            values = values[:-1]
            opts.append(values)
        options.append(opts)
    best: tuple[float, dict[str, list[Buffer]]] | None = None
    for combo in itertools.product(*options):
        kept_at = {v.name: kept for v, kept in zip(nodes, combo, strict=True) if kept}
        chains = _sizes(root, kappa, kept_at)
        cost = memory(root, Configuration(chains, "exhaustive"), 1.0)
        if best is None or cost < best[0] - 1e-12:
            best = (cost, chains)
    assert best is not None
    return Configuration(best[1], "exhaustive")


def candidates(root: Node, kappa: Mapping[str, int]) -> int:
    """How many configurations :func:`exhaustive` compares."""
    count = 1
    for v in root.walk():
        if v.is_leaf:
            continue
        values = sorted({kappa_s(c, kappa) for c in v.children})
        n = 1
        while values:
            top = values.pop()
            if any(not c.is_filter for c in v.children if kappa_s(c, kappa) == top):
                break
            n += 1
        count *= n
    return count


def _paths(root: Node) -> Iterator[list[Node]]:
    """Every path from the source to a leaf."""

    def go(v: Node, path: list[Node]) -> Iterator[list[Node]]:
        path = [*path, v]
        if v.is_leaf:
            yield path
        for c in v.children:
            yield from go(c, path)

    yield from go(root, [])


def accumulated(path: list[Node], chains: Mapping[str, list[Buffer]]) -> int:
    """The buffer sizes on ``path`` (source .. leaf) added up: along each node's chain up to
    the buffer that feeds the next node on the path (a leaf's own chain in full)."""
    total = 0
    for i, v in enumerate(path):
        chain = chains.get(v.name, [])
        if v.is_leaf:
            total += sum(b.size for b in chain)
            continue
        nxt = path[i + 1].name
        for b in chain:
            total += b.size
            if nxt in b.targets:
                break
        else:
            if chain:
                raise ValueError(f"no buffer of the chain on {v.name!r} feeds {nxt!r}")
    return total


def check_configuration(root: Node, kappa: Mapping[str, int], config: Configuration) -> None:
    """Every leaf's path adds up to its query's kappa, every buffer size is >= 0 and every
    chain feeds each child of its node exactly once (ValueError otherwise)."""
    for name, chain in config.chains.items():
        if any(b.size < 0 for b in chain):
            raise ValueError(f"a buffer on {name!r} has a negative size")
    nodes = {v.name: v for v in root.walk()}
    for name, chain in config.chains.items():
        v = nodes[name]
        fed = [t for b in chain for t in b.targets]
        want = [v.name] if v.is_leaf else [c.name for c in v.children]
        if sorted(fed) != sorted(want):
            raise ValueError(f"the chain on {name!r} feeds {fed}, not each of {want} once")
    for path in _paths(root):
        lf = path[-1]
        got = accumulated(path, config.chains)
        if got != int(kappa[lf.query or ""]):
            raise ValueError(
                f"{config.algorithm}: the path to {lf.name!r} buffers {got}, "
                f"not kappa = {kappa[lf.query or '']}"
            )


def memory(root: Node, config: Configuration, rate: float) -> float:
    """The configuration's expected buffered tuples: each buffer holds ``r_in * K`` tuples,
    ``r_in`` the source's ``rate`` (tuples per tick) times the selectivities of the filters
    from the source down to, and including, the node the chain sits on (Sec. 5.4)."""
    total = 0.0

    def go(v: Node, r: float) -> None:
        nonlocal total
        out = r * (v.selectivity if v.is_filter else 1.0)
        for b in config.chains.get(v.name, []):
            total += out * b.size
        for c in v.children:
            go(c, out)

    go(root, rate)
    return total


def describe(config: Configuration) -> list[dict[str, Any]]:
    """The chains as JSON-ready records (node, buffer index, size, targets)."""
    return [
        {"on": name, "index": i, "size": b.size, "targets": list(b.targets)}
        for name, chain in sorted(config.chains.items())
        for i, b in enumerate(chain)
    ]


ALGORITHMS = {
    "unshared": unshared,
    "chained": chained,
    "greedy": greedy,
    "opt": opt,
    "exhaustive": exhaustive,
}

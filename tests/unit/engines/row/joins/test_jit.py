"""JIT between tree joins against a naive recomputation (research/acaching-and-jit.md section
4, cases 6-12): after every update, the root's output delta equals the change of the naive
join; suspensions and resumptions happen; snapshots are the full relations; the JIT plan
never stores more partial results than the plain tree.

Trees of ``JitJoinOp`` are driven directly: left-deep and bushy, over cliques (every pair of
inputs equal on its own columns: multi-attribute keys, so level-1 MNSs on either side of a
producer) and chains, with random inserts, FIFO deletes, duplicates and bursts.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

import engines.row.joins.jit as jit_mod
from engines.row.base import Delta, Row
from engines.row.compile import compile_key
from engines.row.joins.jit import JitJoinOp, link
from engines.row.joins.tree import HashJoinOp

W = 3  # columns per input


def naive(rels: list[list[Row]], pairs: list[tuple[int, int, int, int]]) -> Counter[Row]:
    """The n-way join: (input, column) = (input, column) for every pair."""
    out: Counter[Row] = Counter()
    for combo in itertools.product(*rels):
        if all(combo[a][ca] == combo[b][cb] for a, ca, b, cb in pairs):
            out[tuple(v for r in combo for v in r)] += 1
    return out


class Tree:
    """A join tree over leaves 0..n-1: ``shape`` "left" ((0 1) 2) 3 ... or "bushy"
    (0 1)(2 3); each join keyed by every pair between its two sides."""

    def __init__(
        self, n: int, pairs: list[tuple[int, int, int, int]], shape: str, jit: bool
    ) -> None:
        self.n = n
        cls = JitJoinOp if jit else HashJoinOp
        if shape == "left":
            self.nodes = []
            cur = [0]
            for k in range(1, n):
                self.nodes.append(self._make(cls, cur, [k], pairs))
                cur = [*cur, k]
            self.shape = "left"
        else:
            assert n == 4
            self.nodes = [
                self._make(cls, [0], [1], pairs),
                self._make(cls, [2], [3], pairs),
                self._make(cls, [0, 1], [2, 3], pairs),
            ]
            self.shape = "bushy"
        self.links = 0
        if jit:
            self._link(pairs)

    @staticmethod
    def _cols(leaves: list[int]) -> dict[tuple[int, int], int]:
        return {(p, c): k * W + c for k, p in enumerate(leaves) for c in range(W)}

    def _make(self, cls: type, left: list[int], right: list[int], pairs: list) -> HashJoinOp:
        lc, rc = self._cols(left), self._cols(right)
        keys = []
        for a, ca, b, cb in pairs:
            if a in left and b in right:
                keys.append((lc[(a, ca)], rc[(b, cb)]))
            elif b in left and a in right:
                keys.append((lc[(b, cb)], rc[(a, ca)]))
        op = cls(
            "j",
            compile_key([k for k, _ in keys]),
            compile_key([k for _, k in keys]),
            None,
            (False, False),
        )
        op.keys = keys  # type: ignore[attr-defined]
        op.left_width = len(left) * W  # type: ignore[attr-defined]
        return op

    def _link(self, pairs: list) -> None:
        if self.shape == "left":
            for k in range(len(self.nodes) - 1, 0, -1):  # top-down
                parent, child = self.nodes[k], self.nodes[k - 1]
                if link(parent, 0, child, [(a, b) for a, b in parent.keys], child.left_width):
                    self.links += 1
        else:
            parent = self.nodes[2]
            if link(parent, 0, self.nodes[0], [(a, b) for a, b in parent.keys], W):
                self.links += 1

    def step(self, t: int, deltas: list[Delta]) -> Delta:
        if self.shape == "left":
            d = deltas[0]
            for k, op in enumerate(self.nodes):
                d = op.step(t, [d, deltas[k + 1]])
            return d
        a = self.nodes[0].step(t, [deltas[0], deltas[1]])
        b = self.nodes[1].step(t, [deltas[2], deltas[3]])
        return self.nodes[2].step(t, [a, b])


def make_pairs(n: int, shape: str) -> list[tuple[int, int, int, int]]:
    if shape == "clique":  # input a's column (b % W) = input b's column (a % W)
        return [(a, b % W, b, a % W) for a, b in itertools.combinations(range(n), 2)]
    return [(p, 1, p + 1, 0) for p in range(n - 1)]  # chain


def updates(
    rng: random.Random, n: int, steps: int, domain: int
) -> list[tuple[int, list[Row], list[Row]]]:
    rels: list[list[Row]] = [[] for _ in range(n)]
    out = []
    for _ in range(steps):
        i = rng.randrange(n)
        k = rng.randint(0, 8 if rng.random() < 0.1 else 2)
        ins = [tuple(rng.randrange(domain) for _ in range(W)) for _ in range(k)]
        if rels[i] and rng.random() < 0.2:
            ins.append(rng.choice(rels[i]))
        d = rng.randint(0, min(2, len(rels[i])))
        out.append((i, ins, rels[i][:d]))
        rels[i] = rels[i][d:] + ins
    return out


@pytest.mark.parametrize("switching", [False, True])
@pytest.mark.parametrize("seed", range(30))
def test_jit_equals_naive(seed: int, switching: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random trees, clique and chain keys: the JIT tree's output is the naive join's change
    at every step; with ``switching`` the on/off controller unlinks and relinks every few
    tuples (held-back partials released, bookkeeping rebuilt) and the output stays exact."""
    if switching:
        monkeypatch.setattr(jit_mod, "EPOCH_TUPLES", 3)
        monkeypatch.setattr(jit_mod, "PROBE_EVERY", 1)
        monkeypatch.setattr(jit_mod, "PROBE_EPOCHS", 1)
        monkeypatch.setattr(jit_mod, "NPR_MIN", 0.0)
        monkeypatch.setattr(jit_mod, "SWITCH_MARGIN", -10.0)  # every probe wins: keep switching
    rng = random.Random(seed)
    n = rng.choice([3, 4, 4, 5])
    shape = "bushy" if n == 4 and rng.random() < 0.4 else "left"
    pairs = make_pairs(n, rng.choice(["clique", "clique", "chain"]))
    tree = Tree(n, pairs, shape, jit=True)
    ref = Tree(n, pairs, shape, jit=False)
    assert tree.links >= 1
    for node in tree.nodes:
        node.adaptive = switching  # type: ignore[attr-defined]
    rels: list[list[Row]] = [[] for _ in range(n)]
    before: Counter[Row] = Counter()
    for t, (i, ins, dels) in enumerate(updates(rng, n, 60, rng.choice([2, 3, 5]))):
        deltas = [Delta() for _ in range(n)]
        deltas[i] = Delta(list(ins), list(dels))
        out = tree.step(t, deltas)
        ref.step(t, deltas)
        rels[i] = rels[i] + list(ins)
        for r in dels:
            rels[i].remove(r)
        after = naive(rels, pairs)
        got = Counter(out.ins)
        got.subtract(Counter(out.dels))
        want = Counter(after)
        want.subtract(before)
        assert +got == +want and -got == -want, t
        before = after
        for op in tree.nodes:  # the kept count is the blacklist's size
            assert op.held_tuples == sum(len(b) for b in op.blacklist.values())
        # snapshots are full relations: the JIT tree's equal the plain tree's
        for j, r in zip(tree.nodes, ref.nodes, strict=True):
            sj, sr = j.snapshot(), r.snapshot()
            assert Counter(sj["left"]) == Counter(sr["left"]), t
            assert Counter(sj["right"]) == Counter(sr["right"]), t
    jit_partials = sum(j.left.size + j.right.size for j in tree.nodes)
    ref_partials = sum(r.left.size + r.right.size for r in ref.nodes)
    assert jit_partials <= ref_partials
    if switching:
        assert sum(getattr(op, "switches", 0) for op in tree.nodes) >= 2


def test_jit_suspends_and_resumes() -> None:
    """No partner for a while (case 7), then a partner arrives (case 9): suspensions, then a
    resumption that recomputes the partial results exactly once."""
    pairs = make_pairs(3, "clique")
    tree = Tree(3, pairs, "left", jit=True)
    z = Delta()
    # inputs 0 and 1 join (col 1 of 0 == col 0 of 1); input 2 empty: partials are NPRs
    tree.step(0, [Delta([(0, 1, 2), (0, 1, 3)], []), z, z])
    out = tree.step(1, [z, Delta([(1, 9, 2)], []), z])
    assert out.empty
    op1, op2 = tree.nodes
    assert op1.suspensions >= 1 and op2.left.size == 0  # nothing stored above
    # a partner: input 2 with col 0 == input 0's col 2 and col 1 == input 1's col 2
    out = tree.step(2, [z, z, Delta([(2, 2, 7)], [])])
    assert op1.resumptions >= 1
    assert sorted(out.ins) == [(0, 1, 2, 1, 9, 2, 2, 2, 7)]


def test_controller_probes_backs_off_and_waits_for_non_productive_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The opt-in on/off controller: after two JIT epochs it probes plain for two epochs and
    keeps the faster; in plain mode it probes JIT only while half the producer's partials
    find no partner; a losing JIT probe switches back and quadruples the wait."""
    monkeypatch.setattr(jit_mod, "EPOCH_TUPLES", 10)
    tree = Tree(3, make_pairs(3, "clique"), "left", jit=True)
    c = tree.nodes[1]
    assert isinstance(c, JitJoinOp) and c._link_args is not None
    c.adaptive = True

    side = c._link_args[0]

    def epoch(seconds_per_tuple: float, npr: int = 0) -> None:
        c.probed[side] += 10  # the producer's partials probed here, and those unmatched
        c.unmatched[side] += npr
        c.clock += seconds_per_tuple * 10
        c.seen += 10
        c._control()

    epoch(1e-6)
    epoch(1e-6)
    assert not c.jit_on and c.probing  # probing plain
    epoch(0.5e-6)
    epoch(0.5e-6)
    assert not c.jit_on and not c.probing and c.wait == jit_mod.PROBE_EVERY
    for _ in range(2 * jit_mod.PROBE_EVERY):  # partners everywhere: JIT is not probed
        epoch(0.5e-6, npr=1)
    assert not c.jit_on and c.switches == 1
    for _ in range(jit_mod.PROBE_EVERY):
        epoch(0.5e-6, npr=9)
        if c.jit_on:
            break
    assert c.jit_on and c.probing
    epoch(2e-6)
    epoch(2e-6)
    assert not c.jit_on and c.wait == 4 * jit_mod.PROBE_EVERY and c.switches == 3


def test_hash_join_counts_probes_without_a_partner_per_side() -> None:
    """``HashJoinOp.probed`` / ``unmatched`` (the JIT controller's signal), per side."""
    op = HashJoinOp("j", compile_key([0]), compile_key([0]), None, (False, False))
    op.step(0, [Delta([(1, "a"), (2, "b")], []), Delta()])  # nothing on the right yet
    out = op.step(1, [Delta(), Delta([(1, "x"), (3, "y"), (4, "z")], [])])
    assert sorted(out.ins) == [(1, "a", 1, "x")]
    assert op.probed == [2, 3] and op.unmatched == [2, 2]

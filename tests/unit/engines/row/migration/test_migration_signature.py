"""State signatures (engines/row/migration/signature.py): the same relation under another
join order matches with a column permutation; other predicates, columns or leaves do not;
reused op ids do not fool the matching."""

from __future__ import annotations

from engines.row.migration.signature import permutation, permute, plan_signatures
from optimizer.ir.plan import Join
from tests.migration.harness import plan_of, reorder

Q = (
    "SELECT r.k, COUNT(*) AS n FROM r [RANGE 4 SECONDS] AS r, s [RANGE 3 SECONDS] AS s, "
    "t [RANGE 5 SECONDS] AS t WHERE r.k = s.k AND s.k = t.k GROUP BY r.k"
)


def _joins(plan):  # type: ignore[no-untyped-def]
    sigs = plan_signatures(plan)
    return {i: sigs[i] for i in plan.ids_of("join")}, sigs


def test_same_leaf_set_under_another_order_matches_with_a_permutation() -> None:
    base = plan_of(Q)
    other = reorder(base, (2, 1, 0))  # ((t s) r)
    old, old_all = _joins(base)
    new, new_all = _joins(other)
    # the top joins compute the same relation, columns in another order
    p = permutation(old["join2"], new["join2"])
    assert p is not None and p != tuple(range(9))
    row = tuple(range(9))  # r.ts r.k r.v s.ts s.k s.v t.ts t.k t.v
    assert permute([row], p) == [(6, 7, 8, 3, 4, 5, 0, 1, 2)]
    # what sits above the chain (aggregate, R2S) is identical, although a Project was added
    assert old_all["aggregate1"] == new_all["aggregate1"]
    assert old_all["rstream1"] == new_all["rstream1"]


def test_reused_join_ids_do_not_match_different_leaf_sets() -> None:
    base = plan_of(Q)
    other = reorder(base, (2, 1, 0))
    old, _ = _joins(base)
    new, _ = _joins(other)
    # join1 is (r s) in the old plan and (t s) in the new one: same id, other relation
    assert permutation(old["join1"], new["join1"]) is None
    assert permutation(old["join1"], new["join2"]) is None


def test_different_predicates_or_columns_do_not_match() -> None:
    a = plan_of(Q)
    b = plan_of(Q.replace("s.k = t.k", "s.k = t.k AND r.v < t.v"))
    c = plan_of(Q.replace("s [RANGE 3 SECONDS]", "s [RANGE 2 SECONDS]"))
    d = plan_of(
        Q.replace("r [RANGE 4 SECONDS] AS r", "(SELECT ts, k FROM r [RANGE 4 SECONDS]) AS r")
    )
    sa = plan_signatures(a)
    for other in (b, c, d):
        so = plan_signatures(other)
        assert permutation(sa["join2"], so["join2"]) is None
    # the bottom join (r s) is unaffected by a predicate applied higher up
    assert permutation(sa["join1"], plan_signatures(b)["join1"]) is not None


def test_pushed_down_selection_equals_selection_above() -> None:
    pushed = plan_of(
        "SELECT COUNT(*) AS n FROM (SELECT ts, k, v FROM r [RANGE 4 SECONDS] WHERE v > 3) AS r, "
        "s [RANGE 3 SECONDS] AS s WHERE r.k = s.k"
    )
    above = plan_of(
        "SELECT COUNT(*) AS n FROM r [RANGE 4 SECONDS] AS r, s [RANGE 3 SECONDS] AS s "
        "WHERE r.k = s.k AND r.v > 3"
    )
    sp = plan_signatures(pushed)
    sa = plan_signatures(above)
    (jp,) = pushed.ids_of("join")
    (ja,) = above.ids_of("join")
    # the binder may place the filter below or at the join: either way the same relation
    assert isinstance(pushed.op(jp), Join)
    assert permutation(sp[jp], sa[ja]) is not None


def test_self_join_windows_are_told_apart() -> None:
    q = (
        "SELECT COUNT(*) AS n FROM r [RANGE 4 SECONDS] AS a, r [RANGE 4 SECONDS] AS b, "
        "s [RANGE 3 SECONDS] AS s WHERE a.k = s.k AND b.v < s.v"
    )
    base = plan_of(q)
    sigs = plan_signatures(base)
    wa, wb = base.ids_of("window")[:2]
    assert sigs[wa] != sigs[wb]
    other = reorder(base, (1, 2, 0))
    assert permutation(sigs["join2"], plan_signatures(other)["join2"]) is not None

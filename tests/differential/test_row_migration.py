"""Row-level live plan migration (engines/row/migration) against the oracle.

Each case runs the old plan over the first part of the merged input, migrates at a point in
the merged tuple sequence (between two batches, or inside one: the batch is split there) to
a reordered plan built by ``optimizer.phase_one.rewire_chain``, continues with the new
executor, and compares the concatenated output with the query from scratch (tests/oracle.py)
as bags per ``_ts``. The scenarios of research/plan-migration.md section 3 that apply to MS,
JISC and PT are named after it.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engines.row.executor import RowExecutor
from engines.row.joins.tree import HashJoinOp
from engines.row.migration import ParallelTrack, jisc_progress, jisc_transfer, move_states
from optimizer.ir.errors import PlanError
from tests.migration.harness import (
    CATALOG,
    check,
    drive,
    keyed_data,
    leaf_count,
    merged,
    plan_of,
    reorder,
)
from tests.oracle import oracle

W = "RANGE {} SECONDS SLIDE 1 SECOND"

QUERIES = {
    # 2-way under aggregates (no panes above a join)
    "j2_sum_avg": f"SELECT r.k, COUNT(*) AS n, SUM(r.v - s.v) AS d, AVG(s.v) AS a "
    f"FROM r [{W.format(5)}] AS r, s [{W.format(3)}] AS s WHERE r.k = s.k GROUP BY r.k",
    # 3-way raw join, whole relation at every instant
    "j3_rstream": "SELECT RSTREAM r.v, s.v, t.v, t.ts FROM r [RANGE 4 SECONDS] AS r, "
    "s [RANGE 3 SECONDS] AS s, t [RANGE 5 SECONDS] AS t WHERE r.k = s.k AND s.k = t.k",
    "j3_istream": "SELECT ISTREAM r.k, r.v, s.v, t.v FROM r [RANGE 4 SECONDS] AS r, "
    "s [RANGE 3 SECONDS] AS s, t [RANGE 5 SECONDS] AS t WHERE r.k = s.k AND s.k = t.k",
    "j3_dstream": "SELECT DSTREAM r.k, r.v, s.v, t.v FROM r [RANGE 4 SECONDS] AS r, "
    "s [RANGE 3 SECONDS] AS s, t [RANGE 5 SECONDS] AS t WHERE r.k = s.k AND s.k = t.k",
    # theta residual on top of the keys
    "j3_theta": "SELECT COUNT(*) AS n, SUM(r.v) AS sr FROM r [RANGE 4 SECONDS] AS r, "
    "s [RANGE 3 SECONDS] AS s, t [RANGE 5 SECONDS] AS t "
    "WHERE r.k = s.k AND s.k = t.k AND r.v < t.v + 20",
    # pushed-down selections and projections (timestamps kept)
    "j3_pushed": "SELECT a.k, COUNT(*) AS n, SUM(a.w + c.v) AS x "
    "FROM (SELECT ts, k, v * 2 AS w FROM r [RANGE 5 SECONDS] WHERE v > 30) AS a, "
    "(SELECT ts, k FROM s [RANGE 4 SECONDS] WHERE v < 80) AS b, t [RANGE 3 SECONDS] AS c "
    "WHERE a.k = b.k AND b.k = c.k GROUP BY a.k",
    # 4-way with NOW and ROWS windows
    "j4_mixed": "SELECT k, n FROM (SELECT r.k AS k, COUNT(*) AS n FROM r [RANGE 4 SECONDS] AS r, "
    "s [ROWS 6] AS s, t [RANGE 3 SECONDS] AS t, u [NOW] AS u "
    "WHERE r.k = s.k AND s.k = t.k AND t.k = u.k GROUP BY r.k) AS g",
    "j4": "SELECT r.k, COUNT(*) AS n, AVG(r.v + u.v) AS a FROM r [RANGE 4 SECONDS] AS r, "
    "s [RANGE 3 SECONDS] AS s, t [RANGE 5 SECONDS] AS t, u [RANGE 2 SECONDS] AS u "
    "WHERE r.k = s.k AND s.k = t.k AND t.k = u.k GROUP BY r.k",
}

#: Queries PT cannot run (PlanError), with MS/JISC they must work.
NOT_PT = {
    # projections drop the timestamps below the join
    "j3_no_ts": "SELECT a.k, COUNT(*) AS n FROM (SELECT k, v FROM r [RANGE 4 SECONDS]) AS a, "
    "(SELECT k FROM s [RANGE 3 SECONDS]) AS b, t [RANGE 5 SECONDS] AS c "
    "WHERE a.k = b.k AND b.k = c.k GROUP BY a.k",
    # an aggregate as a join input, its window paned (no old/new split of its rows)
    "j3_agg_leaf": "SELECT a.k, a.n, COUNT(*) AS m, SUM(s.v) AS x "
    "FROM (SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM r [RANGE 6 SECONDS SLIDE 2 SECONDS] "
    "GROUP BY k) AS a, s [RANGE 3 SECONDS] AS s, t [RANGE 4 SECONDS] AS t "
    "WHERE a.k = s.k AND s.k = t.k GROUP BY a.k, a.n",
}

MULTI_KEY = {
    # keys (k, ts) everywhere: per-key completion with 2-column keys
    "aligned": "SELECT r.k, r.ts, COUNT(*) AS n FROM r [RANGE 4 SECONDS] AS r, "
    "s [RANGE 3 SECONDS] AS s, t [RANGE 5 SECONDS] AS t "
    "WHERE r.k = s.k AND r.ts = s.ts AND s.k = t.k AND s.ts = t.ts GROUP BY r.k, r.ts",
    # keys that do not line up: the state is recomputed whole on first read
    "unaligned": "SELECT r.k, COUNT(*) AS n FROM r [RANGE 4 SECONDS] AS r, "
    "s [RANGE 3 SECONDS] AS s, t [RANGE 5 SECONDS] AS t "
    "WHERE r.k = s.k AND r.ts = s.ts AND s.k = t.k GROUP BY r.k",
}

ALL = {**QUERIES, **NOT_PT, **MULTI_KEY}


def _streams(text: str) -> str:
    return "".join(n for n in "rstuvw" if f" {n} [" in text)


@functools.cache
def _data(name: str, seconds: int = 16) -> dict[str, pa.Table]:
    text = ALL[name]
    keys = 3 if name.startswith("j4") else 4
    return keyed_data(seconds=seconds, rate=3, keys=keys, streams=_streams(text))


@functools.cache
def _expected(name: str) -> pa.Table:
    return oracle(ALL[name], CATALOG, _data(name))


def _orders(n: int) -> list[tuple[int, ...]]:
    return [o for o in itertools.permutations(range(n)) if o != tuple(range(n))]


@pytest.mark.parametrize("strategy", ["ms", "jisc", "pt"])
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_order_at_two_points(name: str, strategy: str) -> None:
    text = ALL[name]
    base = plan_of(text)
    data = _data(name)
    n = len(merged(data))
    orders = _orders(leaf_count(base))
    if len(orders) > 6:
        orders = orders[:: len(orders) // 6]
    for k, order in enumerate(orders):
        at = (n // 3, n // 2 + 1)[k % 2]  # a batch boundary or inside a batch
        check(text, data, base, [(at, reorder(base, order), strategy)], _expected(name), seed=k)


@pytest.mark.parametrize("strategy", ["ms", "jisc"])
@pytest.mark.parametrize("name", sorted(NOT_PT) + sorted(MULTI_KEY))
def test_ms_and_jisc_where_pt_cannot(name: str, strategy: str) -> None:
    text = ALL[name]
    base = plan_of(text)
    n = len(merged(_data(name)))
    for k, order in enumerate(_orders(3)):
        check(
            text,
            _data(name),
            base,
            [(n // 2, reorder(base, order), strategy)],
            _expected(name),
            seed=k,
        )


@pytest.mark.parametrize("name", sorted(NOT_PT))
def test_pt_refuses_what_it_cannot_split(name: str) -> None:
    base = plan_of(ALL[name])
    data = _data(name)
    with pytest.raises(PlanError, match="parallel track"):
        drive(data, base, [(40, reorder(base, (2, 1, 0)), "pt")])


def test_panes_off_and_on_agree() -> None:
    name = "j3_agg_leaf"
    base = plan_of(ALL[name])
    for panes in (True, False):
        check(
            ALL[name],
            _data(name),
            base,
            [(50, reorder(base, (1, 2, 0)), "jisc")],
            _expected(name),
            panes=panes,
        )


def test_overlapping_transitions_before_completion() -> None:
    """JISC-6: a -> b -> c while b's state is still incomplete; c treats it as incomplete
    (complete only if it was complete in b), and the output matches the oracle."""
    name = "j4"
    base = plan_of(ALL[name])
    data = _data(name)
    n = len(merged(data))
    b, c = reorder(base, (3, 2, 1, 0)), reorder(base, (2, 3, 0, 1))
    run = check(
        ALL[name], data, base, [(n // 3, b, "jisc"), (n // 3 + 3, c, "jisc")], _expected(name)
    )
    first, second = run.stats
    assert first.states_incomplete >= 1 and second.states_incomplete >= 1
    # and mixed strategies over the same plans
    for s1, s2 in (("jisc", "ms"), ("ms", "jisc"), ("jisc", "pt"), ("pt", "jisc")):
        check(ALL[name], data, base, [(n // 3, b, s1), (n // 3 + 3, c, s2)], _expected(name))


def test_ms_states_equal_from_scratch() -> None:
    """MS (research 10): after the move, every state of the new executor equals, as a
    multiset, the state of the new plan run from scratch up to the same point."""
    name = "j4"
    base = plan_of(ALL[name])
    data = _data(name)
    for order in ((3, 2, 1, 0), (1, 3, 0, 2)):
        target = reorder(base, order)
        events = merged(data)
        cut = len(events) // 2
        {
            s: t.take(pa.array([i for n, i in events[:cut] if n == s], pa.int64()))
            for s, t in data.items()
        }
        old = RowExecutor(base, lambda t, r: None)
        scratch = RowExecutor(target, lambda t, r: None)
        for ex in (old, scratch):
            for s, i in _runs(events[:cut]):
                ex.ingest(s, data[s].take(pa.array(i, pa.int64())), 0)
        new = RowExecutor(target, lambda t, r: None)
        stats = move_states(old, new)
        assert stats.states_recomputed >= 1
        for a, b in zip(new.nodes, scratch.nodes, strict=True):
            if isinstance(a.op, HashJoinOp):
                assert Counter(a.op.left.rows()) == Counter(b.op.left.rows())
                assert Counter(a.op.right.rows()) == Counter(b.op.right.rows())
            else:
                assert _bag(a.op.snapshot()) == _bag(b.op.snapshot()), a.op.op_id
        assert new.clock.snapshot() == scratch.clock.snapshot()


def _runs(events: list[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    out: list[tuple[str, list[int]]] = []
    for s, i in events:
        if out and out[-1][0] == s:
            out[-1][1].append(i)
        else:
            out.append((s, [i]))
    return out


def _bag(snap: dict) -> dict:
    return {k: Counter(v) if isinstance(v, list) else v for k, v in snap.items()}


def test_pt_drops_old_plan_by_the_window_and_never_emits_all_new() -> None:
    """PT (research 11): the old plan emits no all-new result and is dropped by T0 + w."""
    name = "j3_rstream"
    base = plan_of(ALL[name])
    data = _data(name)
    n = len(merged(data))
    seen: list[tuple] = []
    original = ParallelTrack._old_delta

    def spy(self: ParallelTrack, d):  # type: ignore[no-untyped-def]
        out = original(self, d)
        seen.extend([*out.ins, *out.dels])
        return out

    ParallelTrack._old_delta = spy  # type: ignore[method-assign]
    try:
        run = check(
            ALL[name], data, base, [(n // 2, reorder(base, (2, 0, 1)), "pt")], _expected(name)
        )
    finally:
        ParallelTrack._old_delta = original  # type: ignore[method-assign]
    (pt,) = run.pts
    assert pt.done and pt.at is not None and pt.dropped_at is not None
    assert pt.at < pt.dropped_at <= pt.at + 5  # the largest window: 5 s
    assert seen  # the old plan did contribute results meanwhile, each with an old component
    for row in seen:  # the timestamps are the only integers of the chain's rows
        assert min(v for v in row if isinstance(v, int) and v >= T) <= pt.at


def test_jisc_completion_counts_and_marks_complete() -> None:
    """JISC-7/8: completion work only for keys with old entries; the state is complete after
    T_trans plus the largest window at the latest, and no completion follows."""
    name = "j3_rstream"
    base = plan_of(ALL[name])
    data = _data(name)
    n = len(merged(data))
    run = check(
        ALL[name], data, base, [(n // 2, reorder(base, (2, 1, 0)), "jisc")], _expected(name)
    )
    new = run.executors[-1]
    progress = jisc_progress(new)
    assert progress.complete
    assert 0 < progress.keys_completed <= 4  # at most one completion per key (4 keys)
    # unchanged bottom join (swap of the top leaf only): nothing incomplete
    run = check(
        ALL[name], data, base, [(n // 2, reorder(base, (1, 0, 2)), "jisc")], _expected(name)
    )
    assert run.stats[0].states_incomplete == 0 and jisc_progress(run.executors[-1]).complete


# -- hand-made JISC scenarios (research section 3) --------------------------------------------

Q4 = (
    "SELECT {mode} r.v, s.v, t.v, u.v FROM r [RANGE 10 SECONDS] AS r, s [{sw}] AS s, "
    "t [RANGE 10 SECONDS] AS t, u [RANGE 10 SECONDS] AS u "
    "WHERE r.k = s.k AND s.k = t.k AND t.k = u.k"
)
T = 1_400_000_000


def _tables(rows: dict[str, list[tuple[int, int, float]]]) -> dict[str, pa.Table]:
    return {
        n: pa.table(
            {
                "ts": pa.array([T + r[0] for r in rows.get(n, [])], pa.int64()),
                "k": pa.array([r[1] for r in rows.get(n, [])], pa.int32()),
                "v": pa.array([r[2] for r in rows.get(n, [])], pa.float64()),
            }
        )
        for n in "rstu"
    }


def _filler(upto: int, stream: str) -> list[tuple[int, int, float]]:
    """Tuples that move the clock on and join nothing (a key per stream)."""
    return [(t, 10 + "rstu".index(stream), 100.0 + t) for t in range(1, upto)]


def _scenario(text: str, rows: dict, switch_after: int, strategy: str = "jisc"):  # type: ignore[no-untyped-def]
    data = _tables(rows)
    base = plan_of(text)
    new = reorder(base, (1, 2, 0, 3))  # ((RS)T)U -> ((ST)R)U
    return check(text, data, base, [(switch_after, new, strategy)], batch=1)


def test_jisc_1_new_r_finds_old_s_t_u_once() -> None:
    rows = {"s": [(1, 1, 1.0)], "t": [(2, 1, 2.0)], "u": [(3, 1, 3.0)], "r": [(6, 1, 4.0)]}
    for n in "rstu":
        rows[n] = rows.get(n, []) + _filler(12, n)
    text = Q4.format(mode="ISTREAM", sw="RANGE 10 SECONDS")
    run = _scenario(text, rows, switch_after=4 * 4)
    hits = [r for r in run.rows if r[:4] == (4.0, 1.0, 2.0, 3.0)]
    assert len(hits) == 1
    assert jisc_progress(run.executors[-1]).keys_completed >= 1


def test_jisc_2_and_3_expiry_after_the_switch() -> None:
    # 2: the result was out before the switch; s expires after it: retracted exactly once
    rows = {n: [(1, 1, float(i)), *_filler(12, n)] for i, n in enumerate("rstu")}
    text = Q4.format(mode="DSTREAM", sw="RANGE 3 SECONDS")
    run = _scenario(text, rows, switch_after=4 * 3)
    assert [r for r in run.rows if r[:4] == (0.0, 1.0, 2.0, 3.0)] == [(0.0, 1.0, 2.0, 3.0, T + 4)]
    # 3: r, s, t before the switch; s expires; u arrives: no output
    rows = {n: [(1, 1, float(i)), *_filler(12, n)] for i, n in enumerate("rst")}
    rows["u"] = [(6, 1, 3.0), *_filler(12, "u")]
    run = _scenario(Q4.format(mode="RSTREAM", sw="RANGE 3 SECONDS"), rows, switch_after=4 * 3)
    assert not [r for r in run.rows if r[3] == 3.0]


def test_jisc_4_partially_populated_key() -> None:
    """A post-switch s' joins the old t (a new ST entry), then r of that key arrives: both
    (r, s_old, t_old, u) and (r, s', t_old, u) come out."""
    rows = {
        "s": [(1, 1, 1.0), (7, 1, 1.5)],
        "t": [(1, 1, 2.0)],
        "u": [(1, 1, 3.0)],
        "r": [(8, 1, 4.0)],
    }
    for n in "rstu":
        rows[n] = sorted(rows.get(n, []) + _filler(12, n))
    run = _scenario(Q4.format(mode="ISTREAM", sw="RANGE 10 SECONDS"), rows, switch_after=4 * 4)
    got = {r[:4] for r in run.rows if r[0] == 4.0}
    assert got == {(4.0, 1.0, 2.0, 3.0), (4.0, 1.5, 2.0, 3.0)}


def test_jisc_5_tuples_pending_at_the_switch() -> None:
    """Tuples accepted but not shown yet when the switch happens are processed once, by the
    new plan."""
    name = "j3_istream"
    base = plan_of(ALL[name])
    data = _data(name)
    old = RowExecutor(base, lambda t, r: None)
    events = merged(data)
    runs = _runs(events[: len(events) // 2])
    for s, i in runs:
        old.ingest(s, data[s].take(pa.array(i, pa.int64())), 0)
    assert sum(len(w._pending) for w in old.windows) > 0
    for strategy in ("ms", "jisc", "pt"):
        check(
            ALL[name],
            data,
            base,
            [(len(events) // 2, reorder(base, (2, 1, 0)), strategy)],
            _expected(name),
            batch=10**6,
        )


# -- random data, orders and transition points (research 15) ---------------------------------


@settings(
    max_examples=12,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_random_orders_and_transitions(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(["j3_rstream", "j4", "j3_theta", "j3_pushed", "j2_sum_avg"]))
    text = ALL[name]
    seed = data.draw(st.integers(0, 10**6))
    inputs = keyed_data(
        seconds=12,
        rate=data.draw(st.sampled_from([1, 2, 4])),
        keys=data.draw(st.integers(1, 5)),
        seed=seed,
        streams=_streams(text),
    )
    base = plan_of(text)
    m = leaf_count(base)
    n = len(merged(inputs))
    count = data.draw(st.integers(1, 3))
    points = sorted(data.draw(st.lists(st.integers(0, n), min_size=count, max_size=count)))
    migrations = []
    for at in points:
        order = data.draw(st.permutations(list(range(m))))
        strategy = data.draw(st.sampled_from(["ms", "jisc", "pt"]))
        migrations.append((at, reorder(base, order), strategy))
    first = reorder(base, data.draw(st.permutations(list(range(m)))))
    check(
        text,
        inputs,
        first,
        migrations,
        oracle(text, CATALOG, inputs),
        batch=data.draw(st.integers(1, 20)),
        seed=seed,
    )


def test_strategies_refuse_a_used_executor() -> None:
    base = plan_of(ALL["j2_sum_avg"])
    data = _data("j2_sum_avg")
    old = RowExecutor(base, lambda t, r: None)
    used = RowExecutor(base, lambda t, r: None)
    used.ingest("r", data["r"].slice(0, 3), 0)
    for fn in (move_states, jisc_transfer, ParallelTrack):
        with pytest.raises(PlanError, match="freshly built"):
            fn(old, used)

"""Buffer-side join counts (engines/disorder/join_counts.py) against brute force: for each
arriving tuple, the arrived tuples of each other stream with its key within the windows;
the product over the other streams; and, for two streams, every true join result counted
exactly once (by the member that arrives last)."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.disorder.join_counts import JoinCounter


@st.composite
def arrivals(draw: st.DrawFn):
    streams = draw(st.sampled_from([("r", "s"), ("r", "s", "t")]))
    windows = {s: draw(st.integers(1, 30)) for s in streams}
    n = draw(st.integers(1, 80))
    rows = []
    for _ in range(n):
        stream = draw(st.sampled_from(streams))
        ts = draw(st.integers(0, 200))
        key = draw(st.one_of(st.integers(0, 4), st.none()))
        rows.append((stream, ts, key))
    cuts = draw(st.lists(st.integers(1, n), max_size=6))
    return streams, windows, rows, sorted(set(cuts))


def _brute(streams, windows, rows):
    """Per arrival: (cross, join) against the tuples of other streams that arrived before."""
    out = []
    for i, (s, ts, key) in enumerate(rows):
        cross = join = 1
        for o in streams:
            if o == s:
                continue
            partners = [
                r for r in rows[:i] if r[0] == o and ts - windows[o] < r[1] < ts + windows[s]
            ]
            cross *= len(partners)
            join *= sum(1 for r in partners if key is not None and r[2] == key)
        out.append((cross, join))
    return out


@settings(max_examples=200, deadline=None)
@given(arrivals())
def test_counts_equal_brute_force_for_any_batching(case):
    streams, windows, rows, cuts = case
    counter = JoinCounter(windows, dict.fromkeys(streams, 0), horizon=1000)
    got: list[tuple[int, int]] = [(0, 0)] * len(rows)
    # Batches: runs of one stream's consecutive arrivals, cut further at ``cuts``.
    start = 0
    bounds = sorted(set(cuts) | {len(rows)})
    for end in bounds:
        i = start
        while i < end:
            j = i
            while j < end and rows[j][0] == rows[i][0]:
                j += 1
            chunk = rows[i:j]
            batch = pa.record_batch([pa.array([r[2] for r in chunk], pa.int64())], names=["k"])
            ts = np.array([r[1] for r in chunk], dtype=np.int64)
            cross, join, _ = counter.arrived(rows[i][0], batch, ts)
            for m in range(j - i):
                got[i + m] = (int(cross[m]), int(join[m]))
            i = j
        start = end
    # Within one batch a tuple does not see its own stream, so batching never changes counts.
    assert got == _brute(streams, windows, rows)


def test_two_streams_count_every_true_result_once():
    rng = np.random.default_rng(2)
    n = 300
    rows = [(("r", "s")[rng.integers(2)], int(rng.integers(0, 500)), int(rng.integers(0, 5)))
            for _ in range(n)]  # fmt: skip
    windows = {"r": 20, "s": 35}
    counter = JoinCounter(windows, {"r": 0, "s": 0}, horizon=1000)
    total = 0
    for stream, ts, key in rows:
        batch = pa.record_batch([pa.array([key], pa.int64())], names=["k"])
        _, join, _ = counter.arrived(stream, batch, np.array([ts]))
        total += int(join[0])
    r = [(ts, k) for s, ts, k in rows if s == "r"]
    s_ = [(ts, k) for s, ts, k in rows if s == "s"]
    # True results of the symmetric window join: some instant sees both in their windows.
    truth = sum(
        1
        for (a, ka), (b, kb) in itertools.product(r, s_)
        if ka == kb and max(a, b) - a < windows["r"] and max(a, b) - b < windows["s"]
    )
    assert total == truth


def test_forgetting_keeps_every_partner_a_future_tuple_can_meet():
    counter = JoinCounter({"r": 10, "s": 10}, {"r": 0, "s": 0}, horizon=5)
    one = pa.record_batch([pa.array([1], pa.int64())], names=["k"])
    for t in range(0, 1000, 3):
        counter.arrived("r", one, np.array([t]))
    assert len(counter.ts["r"]) < 50  # old tuples dropped
    _, join, _ = counter.arrived("s", one, np.array([992]))  # delay 5 behind top 997
    assert join[0] == len([t for t in range(0, 1000, 3) if 982 < t < 1002])


@pytest.mark.parametrize("key", ["a", 1.5, True])
def test_any_key_type(key):
    counter = JoinCounter({"r": 5, "s": 5}, {"r": 0, "s": 0}, horizon=0)
    batch = pa.record_batch([pa.array([key])], names=["k"])
    counter.arrived("r", batch, np.array([10]))
    _, join, _ = counter.arrived("s", batch, np.array([12]))
    assert join[0] == 1


@settings(max_examples=150, deadline=None)
@given(arrivals(), st.data())
def test_produced_follows_what_the_engine_does_with_late_tuples(case, data):
    """``produced`` against brute force, per arrival: a late tuple of a dropping stream, or
    one whose own window has closed by the instant it would count in (``opens``), produces
    nothing and meets no later partner; an inserted late tuple meets the kept partners
    still in their windows at ``opens``; any other tuple meets every kept partner."""
    streams, windows, rows, _ = case
    drop = set(data.draw(st.sets(st.sampled_from(streams))))
    late = [data.draw(st.booleans()) for _ in rows]
    opens = [ts + data.draw(st.integers(0, 40)) for _, ts, _ in rows]
    counter = JoinCounter(windows, dict.fromkeys(streams, 0), horizon=1000, drop=drop)
    kept: list[tuple[str, int, int | None]] = []
    for n, (stream, ts, key) in enumerate(rows):
        batch = pa.record_batch([pa.array([key], pa.int64())], names=["k"])
        _, _, got = counter.arrived(
            stream, batch, np.array([ts]), np.array([late[n]]), np.array([opens[n]])
        )
        gone = late[n] and (stream in drop or opens[n] >= ts + windows[stream])
        expect = 0
        if not gone:
            expect = 1
            for other in streams:
                if other == stream:
                    continue
                low = ts - windows[other]
                if late[n]:
                    low = max(low, opens[n] - windows[other])
                expect *= sum(
                    1
                    for s, t, k in kept
                    if s == other
                    and key is not None
                    and k == key
                    and low < t < ts + windows[stream]
                )
            kept.append((stream, ts, key))
        assert got[0] == expect, (n, stream, ts, key, late[n], opens[n])

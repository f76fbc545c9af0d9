"""The K-slack buffer (engines/disorder/kslack.py) against the tuple-by-tuple reference
(tests/kslack_reference.py): same released order for any K and any batch split, nothing lost,
sorted output once K covers the largest delay, bounded holding; the --disorder spec and
the policies' registry."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.disorder.kslack import KSlackBuffer, released
from engines.disorder.policies import FixedSlack, MaxSlack, make_policy, register_policy
from engines.disorder.policy import SlackPolicy
from engines.disorder.spec import DisorderSpec, parse_disorder
from optimizer.ir.errors import OptionError
from tests.kslack_reference import delays, released_order, released_with_tops
from tests.kslack_reference import released_order as reference


@st.composite
def disordered(draw: st.DrawFn) -> list[int]:
    """Timestamps of a stream with bounded delays: event times shuffled locally."""
    n = draw(st.integers(1, 120))
    max_delay = draw(st.integers(0, 15))
    event = sorted(draw(st.lists(st.integers(0, 200), min_size=n, max_size=n)))
    arrival = [t + draw(st.integers(0, max_delay)) for t in event]  # network delay
    order = sorted(range(n), key=lambda i: (arrival[i], i))
    return [event[i] for i in order]


def _batches(ts: list[int], cuts: list[int]) -> list[pa.RecordBatch]:
    table = pa.table({"ts": pa.array(ts, pa.int64()), "pos": pa.array(range(len(ts)))})
    out, start = [], 0
    for c in sorted({c % (len(ts) + 1) for c in cuts} | {len(ts)}):
        if c > start:
            out.append(table.slice(start, c - start).to_batches()[0])
            start = c
    return out


def _run(ts: list[int], policy: SlackPolicy, cuts: list[int]) -> tuple[list[int], KSlackBuffer]:
    buf = KSlackBuffer("s", 0, policy, 1)
    got: list[int] = []
    for b in released(buf, iter(_batches(ts, cuts))):
        got += b.column("pos").to_pylist()
    return got, buf


@settings(max_examples=200, deadline=None)
@given(disordered(), st.integers(0, 20), st.lists(st.integers(0, 200), max_size=8))
def test_fixed_k_releases_as_the_reference(ts: list[int], k: int, cuts: list[int]) -> None:
    got, buf = _run(ts, FixedSlack(k), cuts)
    assert got == reference(ts, k)
    assert sorted(got) == list(range(len(ts)))  # nothing lost, nothing twice
    assert buf.stats.max_delay == max(delays(ts))
    if k >= max(delays(ts)):
        assert [ts[i] for i in got] == sorted(ts)
        assert buf.stats.released_behind == 0
    # The buffer never holds more than the tuples within K of the stream's maximum.
    assert buf.stats.buffered_peak <= max(
        sum(1 for t in ts[: j + 1] if t > max(ts[: j + 1]) - k) for j in range(len(ts))
    )


@settings(max_examples=100, deadline=None)
@given(disordered(), st.integers(0, 20), st.lists(st.integers(0, 200), max_size=8))
def test_arrival_that_moved_progress_past_an_instant(
    ts: list[int], k: int, cuts: list[int]
) -> None:
    """``arrived_when_past(T)``: the stream's largest timestamp when the first tuple after T
    was released (reference: tuple by tuple), for increasing T."""
    _, buf = _run(ts, FixedSlack(k), cuts)
    ref = released_with_tops(ts, k)
    for instant in range(min(ts) - 1, max(ts) + 2):
        want = next((top for i, top in ref if ts[i] > instant), None)
        assert buf.arrived_when_past(instant) == want


@settings(max_examples=100, deadline=None)
@given(disordered())
def test_max_k_slack_tuple_by_tuple(ts: list[int]) -> None:
    """Max-K-slack with one tuple per batch: K is the largest delay seen so far."""
    got, _ = _run(ts, MaxSlack(), list(range(len(ts))))
    ks = list(np.maximum.accumulate(delays(ts)))
    assert got == released_order(ts, [int(k) for k in ks])


def test_max_k_slack_never_holds_back_its_bound() -> None:
    """K grows to 6 at t=4 but the bound stays at 10: 4 and 9 go out at once, behind 10."""
    ts = [10, 4, 11, 12, 9, 13, 14, 15]
    got, buf = _run(ts, MaxSlack(), list(range(len(ts))))
    assert [ts[i] for i in got] == [10, 4, 9, 11, 12, 13, 14, 15]
    assert (buf.stats.released_behind, buf.k(), buf.stats.max_delay) == (2, 6, 6)


def test_released_behind_counts_tuples_beyond_k() -> None:
    ts = [0, 1, 2, 10, 11, 12, 3, 13]  # 3 arrives 9 behind, after 10 went out: beyond K = 2
    got, buf = _run(ts, FixedSlack(2), [])
    assert [ts[i] for i in got] == [0, 1, 2, 10, 3, 11, 12, 13]
    assert buf.stats.released_behind == 1


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("none", DisorderSpec("none")),
        ("max", DisorderSpec("max")),
        ("quality", DisorderSpec("quality")),
        ("kslack:2s", DisorderSpec("kslack", 2000.0)),
        ("kslack:500ms", DisorderSpec("kslack", 500.0)),
        ("KSLACK:1.5min", DisorderSpec("kslack", 90000.0)),
        ("kslack:0s", DisorderSpec("kslack", 0.0)),
    ],
)
def test_parse_disorder(text: str, spec: DisorderSpec) -> None:
    assert parse_disorder(text) == spec


@pytest.mark.parametrize("text", ["kslack", "kslack:2", "kslack:-1s", "kslack:2h", "fast", ""])
def test_parse_disorder_rejects(text: str) -> None:
    with pytest.raises(OptionError):
        parse_disorder(text)


def test_k_in_ticks_rounds_up() -> None:
    assert DisorderSpec("kslack", 1500.0).k_ticks(1) == 2
    assert DisorderSpec("kslack", 1500.0).k_ticks(1000) == 1500
    assert DisorderSpec("kslack", 0.0).k_ticks(1) == 0


def test_policy_registry() -> None:
    assert make_policy(DisorderSpec("none"), 1) is None
    fixed = make_policy(DisorderSpec("kslack", 2000.0), 1000)
    assert fixed is not None and fixed.k("x") == 2000
    assert isinstance(make_policy(DisorderSpec("max"), 1), MaxSlack)
    with pytest.raises(OptionError, match="quality"):
        make_policy(DisorderSpec("quality"), 1)
    register_policy("quality", lambda spec, tps, params: FixedSlack(int(params["k"])))
    try:
        made = make_policy(DisorderSpec("quality"), 1, {"k": 3})
        assert made is not None and made.k("x") == 3
    finally:
        from engines.disorder import policies

        policies._REGISTRY.pop("quality")

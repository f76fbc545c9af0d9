"""The exact-sum kernel (engines/kernels/exact_sum.py) against exact rational arithmetic.

The reference adds the values as ``fractions.Fraction`` and converts once (``float`` of a
Fraction is correctly rounded); it shares nothing with the kernel's limbs."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.kernels.exact_sum import ExactSums


def reference(values: list[float]) -> float:
    """IEEE's answer for the non-finite cases, else the exact sum rounded once."""
    nan = any(math.isnan(v) for v in values)
    pinf = any(v == math.inf for v in values)
    ninf = any(v == -math.inf for v in values)
    if nan or (pinf and ninf):
        return math.nan
    if pinf or ninf:
        return math.inf if pinf else -math.inf
    exact = sum((Fraction(v) for v in values), Fraction(0))
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def same(a: float, b: float) -> bool:
    """Bit-identical (NaN equal to NaN)."""
    return (math.isnan(a) and math.isnan(b)) or np.float64(a).tobytes() == np.float64(b).tobytes()


doubles = st.floats(allow_nan=True, allow_infinity=True, width=64)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
#: Values of few magnitudes with many ties and cancellations (a constant plug, a mean).
clustered = st.sampled_from(
    [0.0, -0.0, 1.0, -1.0, 0.1, 0.2, 0.3, 1e16, -1e16, 2.0**-1074, 2.0**1023, 12.345, 3e-310]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.one_of(doubles, clustered)), max_size=60))
def test_sums_equal_the_exact_reference(pairs: list[tuple[int, float]]) -> None:
    s = ExactSums()
    if pairs:
        ids, values = zip(*pairs, strict=True)
        s.add(np.array(ids), np.array(values))
    got = s.sums(np.arange(5))
    for g in range(5):
        want = reference([v for i, v in pairs if i == g])
        assert same(got[g], want), (g, got[g], want)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(finite, clustered), min_size=1, max_size=40),
    st.lists(st.one_of(finite, clustered), max_size=40),
    st.randoms(use_true_random=False),
)
def test_deletes_leave_exactly_what_remains(
    stay: list[float], leave: list[float], rnd: object
) -> None:
    """Insert everything in one order (several batches), delete some in another: the result
    is the exact sum of what stayed, and a group emptied is exactly zero again."""
    s = ExactSums()
    values = stay + leave
    order = list(range(len(values)))
    rnd.shuffle(order)  # type: ignore[attr-defined]
    for start in range(0, len(order), 7):
        part = [values[i] for i in order[start : start + 7]]
        s.add(np.zeros(len(part), np.int64), np.array(part))
    s.add(np.zeros(len(leave), np.int64), np.array(leave), sign=-1)
    assert same(s.sums(np.array([0]))[0], reference(stay))
    assert s.count[0] == len(stay)
    s.add(np.zeros(len(stay), np.int64), np.array(stay), sign=-1)
    assert same(s.sums(np.array([0]))[0], 0.0)


def test_order_and_batching_do_not_change_a_bit() -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.normal(0, 1e3, 20_000), rng.normal(0, 1e-9, 20_000)])
    ids = rng.integers(0, 50, values.size)
    results = []
    for batch in (1, 13, 4096, values.size):
        perm = rng.permutation(values.size)
        s = ExactSums()
        for start in range(0, values.size, batch):
            part = perm[start : start + batch]
            s.add(ids[part], values[part])
        results.append(s.sums(np.arange(50)).tobytes())
    assert len(set(results)) == 1
    want = [reference(values[ids == g].tolist()) for g in range(50)]
    assert np.frombuffer(results[0]).tolist() == want


def test_many_values_force_normalisation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the load limit the limbs are carried; nothing is lost."""
    import engines.kernels.exact_sum as mod

    monkeypatch.setattr(mod, "_LOAD_LIMIT", 64)
    rng = np.random.default_rng(3)
    values = rng.uniform(-(2.0**60), 2.0**60, 5_000)
    s = ExactSums()
    for start in range(0, values.size, 50):
        s.add(np.zeros(50, np.int64), values[start : start + 50])
    assert same(s.sums(np.array([0]))[0], reference(values.tolist()))


def test_merge_and_snapshot_round_trip() -> None:
    rng = np.random.default_rng(11)
    a, b = ExactSums(), ExactSums()
    va, vb = rng.normal(0, 1, 1000), rng.normal(0, 1e10, 1000)
    ia, ib = rng.integers(0, 7, 1000), rng.integers(0, 9, 1000)
    a.add(ia, va)
    b.add(ib, vb)
    c = ExactSums.restore(a.snapshot())
    c.merge(b)
    for g in range(9):
        assert same(c.sums(np.array([g]))[0], reference([*va[ia == g], *vb[ib == g]]))
    c.merge(b, sign=-1)
    assert c.sums(np.arange(9)).tobytes() == a.sums(np.arange(9)).tobytes()


def test_extremes() -> None:
    big = np.finfo(np.float64).max
    cases = [
        [big, big, -big],  # an intermediate overflow that IEEE addition would keep
        [big, big],  # the exact sum rounds to infinity
        [big, 2.0**970],  # exactly half an ulp above the largest double: rounds to inf
        [big, 2.0**969],  # below half an ulp: stays
        [5e-324, 5e-324, 5e-324],
        [2.0**-1022, -(2.0**-1074)],  # into the subnormals
        [1.0, 2.0**-53],  # a tie: to even (1.0)
        [1.0 + 2.0**-52, 2.0**-53],  # a tie: to even (up)
        [1.0, 2.0**-53, 2.0**-1074],  # just above the tie: up
        [-0.0, -0.0],
    ]
    s = ExactSums()
    for g, values in enumerate(cases):
        s.add(np.full(len(values), g), np.array(values))
    got = s.sums(np.arange(len(cases)))
    for g, values in enumerate(cases):
        assert same(got[g], reference(values)), (values, got[g], reference(values))

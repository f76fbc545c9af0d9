"""The quality models of disorder handling against worked numbers and independent
computations (brute force, Monte Carlo, bisection): engines/disorder/delay_model.py,
aggregate_quality.py, join_quality.py, pd.py, params.py."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.disorder import aggregate_quality, delay_model, join_quality, params, pd
from engines.disorder.aggregate_quality import (
    CoverageMonitor,
    ValueStats,
    am_slack,
    coverage_threshold,
    critical_value,
    error_bound,
)
from engines.disorder.delay_model import DelayStats, expected_coverage, in_order_share
from engines.disorder.join_quality import (
    SelectivityMonitor,
    SyncSlack,
    am_join_slack,
    expected_recall,
    instant_requirement,
    pair_recall,
    produced_results,
    same_k,
    true_results,
)
from engines.disorder.params import QualityParams, parse_overrides
from engines.disorder.pd import PDController
from optimizer.ir.errors import OptionError


@pytest.mark.parametrize("module", [aggregate_quality, delay_model, join_quality, params, pd])
def test_docstring_examples(module: object) -> None:
    assert doctest.testmod(module).failed == 0  # type: ignore[arg-type]


def _zipf(rng: np.random.Generator, n: int, top: int, skew: float) -> np.ndarray:
    w = 1.0 / np.arange(1, top + 2) ** skew
    return rng.choice(top + 1, size=n, p=w / w.sum())


# -- Eq. 4.1: the coverage threshold ---------------------------------------------------------


def test_critical_value() -> None:
    assert critical_value(0.05) == pytest.approx(1.959964, abs=1e-6)
    assert critical_value(0.01) == pytest.approx(2.575829, abs=1e-6)


def test_threshold_worked_numbers() -> None:
    # COUNT over 10000 tuples, eps 1%, delta 5%: x = 1 - C solves x + 0.0196 sqrt(x(1-x)) = .01
    c = coverage_threshold(0.01, 0.05, 10000, 1.0, 0.0, "count")
    x = 1 - c
    assert x + 1.959964 * math.sqrt(x * (1 - x) / 10000) == pytest.approx(0.01, abs=1e-9)
    assert c == pytest.approx(0.99177, abs=1e-5)
    # Without sampling error (N huge) the threshold is 1 - eps.
    assert coverage_threshold(0.05, 0.05, 1e15, 3.0, 4.0) == pytest.approx(0.95, abs=1e-6)
    # Any coverage will do when eps >= 1; no tuples or mu = 0: only a full window.
    assert coverage_threshold(1.0, 0.05, 100, 1.0, 1.0) == 0.0
    assert coverage_threshold(0.1, 0.05, 0, 1.0, 1.0) == 1.0
    assert coverage_threshold(0.1, 0.05, 100, 0.0, 1.0) == 1.0


@settings(max_examples=200, deadline=None)
@given(
    eps=st.floats(1e-4, 0.5),
    delta=st.floats(0.001, 0.3),
    n=st.floats(10, 1e7),
    mu=st.floats(0.01, 100),
    cv=st.floats(0, 5),
)
def test_threshold_is_the_least_coverage_meeting_eq_4_1(
    eps: float, delta: float, n: float, mu: float, cv: float
) -> None:
    """The closed form against bisection on Eq. 4.1's left side (decreasing in C near 1)."""
    var = (cv * mu) ** 2
    c = coverage_threshold(eps, delta, n, mu, var)
    cd = critical_value(delta)
    assert error_bound(c, cd, n, mu, var) <= eps + 1e-9
    lo, hi = 0.5, 1.0  # f(0.5) >= 0.5 > eps: the crossing is above 0.5
    for _ in range(100):
        mid = (lo + hi) / 2
        if error_bound(mid, cd, n, mu, var) <= eps:
            hi = mid
        else:
            lo = mid
    assert c == pytest.approx(hi, abs=1e-7)


def test_avg_threshold() -> None:
    # c sqrt(cv^2 (1-C)/(C N)) = eps at C = 1/(1 + eps^2 N / (c^2 cv^2)).
    c = coverage_threshold(0.01, 0.05, 1000, 10.0, 25.0, "avg")  # cv = 0.5
    cd = critical_value(0.05)
    assert cd * 0.5 * math.sqrt((1 - c) / (c * 1000)) == pytest.approx(0.01, rel=1e-9)
    assert coverage_threshold(0.01, 0.05, 1000, 10.0, 0.0, "avg") == 0.0


# -- Eqs. 3.4-3.6: expected coverage ----------------------------------------------------------


def test_delay_stats() -> None:
    s = DelayStats(granularity=10, capacity=5)
    s.add(np.array([0, 5, 10, 11, 40]))
    assert s.max_recent == 40 and s.max_ever == 40
    # coarse: 0, 1, 1, 2, 4 -> F = [.2, .6, .8, .8, 1]
    assert np.allclose(s.cdf(), [0.2, 0.6, 0.8, 0.8, 1.0])
    s.add(np.array([1, 1, 1]))  # the window keeps the latest 5: 11, 40, 1, 1, 1
    assert sorted(s.latest().tolist()) == [1, 1, 1, 11, 40]
    s.add(np.zeros(7, np.int64))
    assert s.max_recent == 0 and s.max_ever == 40


def test_expected_coverage_worked_numbers() -> None:
    # g = 10, b = 20, W = 50: basic windows of 20, 20, 10 ticks with allowances 0, 2, 4 coarse
    # delays. F_D = [.5, .7, .9, 1]. K = 0: (20*.5 + 20*.9 + 10*1)/50 = 0.76; K = 10: shift 1:
    # (20*.7 + 20*1 + 10*1)/50 = 0.88.
    cdf = np.array([0.5, 0.7, 0.9, 1.0])
    got = expected_coverage(cdf, 50, 20, 10, np.array([0, 10]))
    assert np.allclose(got, [0.76, 0.88])
    # the sync slack shifts like K: K = 0 with K_sync = 10 equals K = 10
    assert expected_coverage(cdf, 50, 20, 10, np.array([0]), 10)[0] == pytest.approx(0.88)


@pytest.mark.parametrize(("top", "skew", "window"), [(200, 2.0, 100), (50, 1.0, 30), (400, 3.0, 7)])
def test_expected_coverage_matches_a_simulated_k_slack(top: int, skew: float, window: int) -> None:
    """b = g = 1 tick, one tuple per tick: the window at T is produced when the arrival
    schedule reaches T + K; its coverage is the share of its tuples (ts in (T - W, T])
    that arrived by then. Simulated, against Eq. 3.5 / 3.6."""
    rng = np.random.default_rng(11)
    n = 60000
    arrival = np.arange(n)
    delay = _zipf(rng, n, top, skew)
    ts = arrival - delay
    stats = DelayStats(1, n)
    stats.add(delay)
    for k in (0, 3, top // 4):
        covered = []
        for t in range(2 * top + window, n - 2 * top, 97):
            inside = (ts > t - window) & (ts <= t)
            covered.append(np.mean(arrival[inside] <= t + k))
        model = expected_coverage(stats.cdf(), window, 1, 1, np.array([k]))[0]
        assert model == pytest.approx(np.mean(covered), abs=0.01), k


def test_am_slack_is_the_least_k_reaching_the_threshold() -> None:
    rng = np.random.default_rng(3)
    stats = DelayStats(10, 100000)
    stats.add(_zipf(rng, 100000, 2000, 2.0))
    cdf = stats.cdf()
    for thr in (0.5, 0.9, 0.99, 0.999):
        k = am_slack(cdf, thr, 1000, 10, 10, stats.max_recent)
        assert k % 10 == 0
        ks = np.arange(0, stats.max_recent + 10, 10)
        cover = expected_coverage(cdf, 1000, 10, 10, ks)
        assert cover[k // 10] >= thr - 1e-12
        assert k == 0 or cover[k // 10 - 1] < thr
    # an unreachable threshold stops at MaxD^R rounded up to g
    assert am_slack(cdf, 1.01, 1000, 10, 10, 1995) == 2000


def test_am_slack_with_dropped_late_tuples_is_the_least_k_keeping_them_in_order() -> None:
    """A dropped late tuple counts in no window: the coverage of every window is the share
    in order after the buffer, which needs more K than Eq. 3.5's (late tuples inserted)."""
    rng = np.random.default_rng(4)
    stats = DelayStats(10, 100000)
    stats.add(_zipf(rng, 100000, 2000, 1.0))
    cdf = stats.cdf()
    ks = np.arange(0, stats.max_recent + 10, 10)
    share = in_order_share(cdf, 10, ks)
    for thr in (0.5, 0.9, 0.99):
        k = am_slack(cdf, thr, 1000, 10, 10, stats.max_recent, drop=True)
        assert share[k // 10] >= thr - 1e-12 and (k == 0 or share[k // 10 - 1] < thr)
        assert k > am_slack(cdf, thr, 1000, 10, 10, stats.max_recent)


def test_coverage_monitor_against_brute_force() -> None:
    rng = np.random.default_rng(5)
    rng_range, slide = 50, 10
    mon = CoverageMonitor(rng_range, slide, q=1.0)
    rcv: dict[int, int] = {}
    miss: dict[int, int] = {}
    for step in range(100):
        ts = rng.integers(step * 10 - 40, step * 10 + 10, size=20)
        closed = step * 10 - 15
        mon.arrive(ts, closed)
        for x in ts.tolist():
            for t in range(-(-x // slide) * slide, x + rng_range, slide):
                book = miss if t <= closed else rcv
                book[t] = book.get(t, 0) + 1
    # measure at now = 1000 with late delays whose max is 200: the window at 800
    got = mon.measure(1000, np.array([5, 200]), max_delay=200)
    assert got == pytest.approx(rcv.get(800, 0) / (rcv.get(800, 0) + miss.get(800, 0)))


def test_value_stats_merge() -> None:
    rng = np.random.default_rng(1)
    v = rng.normal(5, 2, 1000)
    s = ValueStats()
    for part in np.array_split(v, 7):
        s.add(part)
    assert s.mean == pytest.approx(v.mean()) and s.var == pytest.approx(v.var())


# -- Section 4.2: joins -----------------------------------------------------------------------


def test_same_k() -> None:
    # progress 10 and 12, buffers 2 and 5: releases up to 8 and 7; common K = 10 - 7 = 3
    assert same_k([10, 12], [2, 5]) == 3
    assert same_k([100, 100, 100], [4, 4, 4]) == 4


def test_sync_slack() -> None:
    s = SyncSlack()
    s.sample({"a": 100, "b": 90})
    s.sample({"a": 110, "b": 104})
    # averages: a 8, b 0 -> a has 8 ticks of implicit slack
    assert s.slack() == {"a": 8, "b": 0}


def test_expected_recall_worked_three_streams() -> None:
    # F = [.5, 1], W = 2, b = g = 1: V = 1.5, f0 = .5; gamma = 3 * .5 * 1.5^2 / (3 * 4)
    cdf = np.array([0.5, 1.0])
    got = expected_recall([cdf] * 3, [2, 2, 2], 1, 1, np.array([0]))
    assert got[0] == pytest.approx(0.28125)
    # the selectivity ratio scales it
    assert expected_recall([cdf] * 2, [2, 2], 1, 1, np.array([0]), sel_ratio=0.5)[0] == (
        pytest.approx(0.1875)
    )


@pytest.mark.parametrize(("top", "skew", "window"), [(100, 2.0, 60), (300, 3.0, 40)])
def test_expected_recall_matches_monte_carlo(top: int, skew: float, window: int) -> None:
    """Two streams, b = g = 1: a true result pairs a later tuple L and an earlier tuple E of
    the other stream, ts_L - ts_E = u uniform in [0, W). It is produced when L is in order
    after the buffer (d_L <= K) and E had arrived when L was processed (d_E <= K + u)."""
    rng = np.random.default_rng(2)
    n = 400000
    cdfs = []
    d = []
    for _ in range(2):
        x = _zipf(rng, n, top, skew)
        st_ = DelayStats(1, n)
        st_.add(x)
        cdfs.append(st_.cdf())
        d.append(x)
    u = rng.integers(0, window, size=n)
    later_first = rng.random(n) < 0.5
    d_late = np.where(later_first, d[0], d[1])
    d_early = np.where(later_first, d[1], d[0])
    for k in (0, 5, 30):
        sim = np.mean((d_late <= k) & (d_early <= k + u))
        model = expected_recall(cdfs, [window, window], 1, 1, np.array([k]))[0]
        assert model == pytest.approx(sim, abs=0.005), k


def _pair_simulation(
    rng: np.random.Generator,
    d: list[np.ndarray],
    windows: list[int],
    k: int,
    slide: int,
    drop: list[bool],
) -> float:
    """The row engine's rule for a two-stream join, tuple pair by tuple pair (b = g = 1): a
    true result pairs a later tuple of stream i and an earlier one of j, ts_i - ts_j = u
    uniform in [0, W_j) (the results with i later: a share W_j / (W_i + W_j)). A tuple of
    delay d > K is late: dropped on a dropping stream, else it counts from instant ts + (d -
    K) + slide - 1 (the next instant after the last that can have fired) on; on time, from
    ts. Produced when some instant sees both in their windows (ts <= X < ts + W) after both
    count."""
    n = len(d[0])
    i_later = rng.random(n) < windows[1] / sum(windows)  # stream 0 later with share W_1
    i = np.where(i_later, 0, 1)
    j = 1 - i
    w = np.asarray(windows)
    u = (rng.random(n) * w[j]).astype(np.int64)
    ts = np.stack([np.zeros(n, np.int64), np.zeros(n, np.int64)])
    ts[i, np.arange(n)] = u  # the later member at u, the earlier at 0
    delay = np.stack([d[0], d[1]])
    late = delay > k
    counts = np.where(late, ts + (delay - k) + slide - 1, ts)
    dropped = late & np.asarray(drop)[:, None]
    closes = np.min(ts + w[:, None], axis=0)
    produced = (np.max(counts, axis=0) < closes) & ~dropped.any(axis=0)
    return float(produced.mean())


@pytest.mark.parametrize("drop", [[False, False], [True, False], [False, True], [True, True]])
@pytest.mark.parametrize(("top", "skew", "window", "slide"), [(50, 1.0, 50, 5), (200, 1.5, 100, 1)])
def test_pair_recall_matches_the_row_engine_rule(
    drop: list[bool], top: int, skew: float, window: int, slide: int
) -> None:
    rng = np.random.default_rng(5)
    n = 300000
    d = [_zipf(rng, n, top, skew), _zipf(rng, n, top, skew + 0.5)]
    cdfs = []
    for x in d:
        st_ = DelayStats(1, n)
        st_.add(x)
        cdfs.append(st_.cdf())
    for k in (0, 5, 20):
        sim = _pair_simulation(rng, d, [window, window], k, slide, drop)
        model = pair_recall(cdfs, [window, window], 1, np.array([k]), [0, 0], drop, slide)[0]
        assert model == pytest.approx(sim, abs=0.005), (k, model, sim)
        # the row engine loses a subset of what Alg. 4.6 loses (Eq. 4.6, same drop flags)
        alg46 = expected_recall(cdfs, [window, window], 1, 1, np.array([k]), drop=drop)[0]
        assert model >= alg46 - 1e-9
    # unequal windows: the earlier member's allowance is taken at its least (errs low)
    for k in (0, 10):
        sim = _pair_simulation(rng, d, [window, 2 * window], k, slide, drop)
        model = pair_recall(cdfs, [window, 2 * window], 1, np.array([k]), [0, 0], drop, slide)
        assert model[0] <= sim + 0.005, (k, model, sim)


def test_drop_flags_lower_the_expected_recall() -> None:
    """Eq. 4.6 with dropping streams: an earlier member must be in order, not only have
    arrived; for the row engine's rule (reinsert) dropping loses more as well."""
    rng = np.random.default_rng(6)
    cdfs = []
    for skew in (1.0, 2.0):
        st_ = DelayStats(10, 50000)
        st_.add(_zipf(rng, 50000, 3000, skew))
        cdfs.append(st_.cdf())
    ks = np.arange(0, 3010, 10)
    for reinsert in (False, True):
        args = (cdfs, [1000, 1000], 10, 10, ks)
        none = expected_recall(*args, drop=[False, False], reinsert=reinsert, slide=100)
        one = expected_recall(*args, drop=[True, False], reinsert=reinsert, slide=100)
        both = expected_recall(*args, drop=[True, True], reinsert=reinsert, slide=100)
        assert np.all(both <= one + 1e-12) and np.all(one <= none + 1e-12)
        assert both[0] < none[0] and both[-1] == pytest.approx(1.0)
    # both dropping: f_1(0) f_2(0), the product of the in-order shares
    f = [in_order_share(c, 10, ks) for c in cdfs]
    both = expected_recall(cdfs, [1000, 1000], 10, 10, ks, drop=[True, True])
    assert both == pytest.approx(f[0] * f[1])


def test_result_counts_eqs_4_4_and_4_5() -> None:
    # sel .01, rates 2 and 3 per tick, windows 10 and 20, L = 5:
    # N_true = .01 * 6 * 5 * (20 + 10) = 9
    assert true_results(0.01, [2, 3], [10, 20], 5) == pytest.approx(9.0)
    # all in order, full windows: N_prod = .01 * (2*5*1*60 + 3*5*1*20) = .01 * 900 = 9
    assert produced_results(0.01, [2, 3], [1, 1], [20, 60], 5) == pytest.approx(9.0)


def test_instant_requirement_uses_min() -> None:
    # past 900 true, 870 produced; next 100 true: (0.95 * 1000 - 870) / 100 = 0.8
    assert instant_requirement(0.95, 900, 870, 100) == pytest.approx(0.8)
    # behind target: would need 1.04 -> min(., 1) = 1 (the text's max would give 1.04)
    assert instant_requirement(0.95, 900, 846, 100) == 1.0
    # far ahead: clamped at 0
    assert instant_requirement(0.5, 900, 900, 10) == 0.0
    assert instant_requirement(0.95, 0, 0, 0) == 0.95


def test_nonequal_selectivity() -> None:
    m = SelectivityMonitor(granularity=10)
    # coarse delays 0, 0, 1 (delay 7), 2 (delay 15); the last one late and not probed
    m.record(
        np.array([0, 0, 7, 15]),
        np.array([100, 50, 40, 0]),
        np.array([10, 2, 8, 0]),
        np.array([True, True, True, False]),
    )
    # the late tuple gets the largest counts seen: 100 and 10
    assert m.m_cross.tolist() == [150, 40, 100] and m.m_join.tolist() == [12, 8, 10]
    assert m.true_count == 30
    assert m.selectivity(0) == pytest.approx(12 / 150)
    assert m.selectivity() == pytest.approx(30 / 290)
    assert np.allclose(
        m.ratio(np.array([0, 10, 25])), [(12 / 150) / (30 / 290), (20 / 190) / (30 / 290), 1.0]
    )


def test_am_join_slack() -> None:
    rng = np.random.default_rng(9)
    cdfs = []
    for skew in (2.0, 3.0, 3.0):
        s = DelayStats(10, 50000)
        s.add(_zipf(rng, 50000, 20000, skew))
        cdfs.append(s.cdf())
    ks = np.arange(0, 20010, 10)
    gamma = expected_recall(cdfs, [5000] * 3, 10, 10, ks)
    for target in (0.9, 0.95, 0.99):
        k = am_join_slack(cdfs, [5000] * 3, 10, 10, target, 20000)
        assert gamma[k // 10] >= target and (k == 0 or gamma[k // 10 - 1] < target)


# -- Eq. 3.7 and the parameters ---------------------------------------------------------------


def test_pd_law_and_clamp() -> None:
    c = PDController(up=0.6, ud=0.8)
    assert c.step(0.95, 0.75) == pytest.approx(0.12)  # 0.6 * 0.2
    assert c.step(0.95, 0.85) == pytest.approx(0.12 + 0.06 - 0.08)  # derr = -0.1
    for _ in range(50):
        c.step(1.0, 0.0)
    assert c.alpha == 1.0 and c.slack(1234, 10) == 1240
    for _ in range(50):
        c.step(0.0, 1.0)
    assert c.alpha == 0.0 and c.slack(1234, 10) == 0


def test_params_defaults_and_overrides() -> None:
    p = QualityParams()
    assert (p.b, p.g, p.q, p.p_meas, p.l_adt) == (0.01, 0.01, 0.99, 60.0, 1.0)
    assert p.gains("aggregate") == (0.2, 4.0) and p.gains("join") == (0.6, 0.8)
    assert p.ticks(p.g, 1) == 1 and p.ticks(p.g, 1000) == 10
    q = parse_overrides(["ud=1.5", "stat_window=100", "q=0.9"])
    assert q.ud == 1.5 and q.stat_window == 100 and q.q == 0.9 and q.gains("join") == (0.6, 1.5)
    for bad in ("g=0", "q=1.5", "nope=1", "b", "g=x", "stat_window=2.5", "up=-1"):
        with pytest.raises(OptionError):
            parse_overrides([bad])


@settings(max_examples=150, deadline=None)
@given(
    counts=st.lists(st.integers(0, 50), min_size=1, max_size=40),
    window=st.integers(1, 300),
    basic_steps=st.integers(1, 5),
    g=st.integers(1, 7),
    ks=st.lists(st.integers(0, 400), min_size=1, max_size=10),
    k_sync=st.integers(0, 30),
)
def test_fast_coverage_equals_the_term_by_term_sum(
    counts: list[int], window: int, basic_steps: int, g: int, ks: list[int], k_sync: int
) -> None:
    """The running-sum path (b a multiple of g) against Eq. 3.5 summed term by term."""
    c = np.asarray(counts, dtype=float) + 1e-3
    cdf = np.cumsum(c) / c.sum()
    b = basic_steps * g
    k = np.asarray(ks)
    fast = expected_coverage(cdf, window, b, g, k, k_sync)
    slow = delay_model.coverage_direct(cdf, window, b, g, k, k_sync)
    assert np.allclose(fast, slow, rtol=1e-12, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(
    batches=st.lists(st.lists(st.integers(0, 500), max_size=30), max_size=20),
    capacity=st.integers(1, 40),
    g=st.integers(1, 20),
)
def test_delay_stats_histogram_follows_the_window(
    batches: list[list[int]], capacity: int, g: int
) -> None:
    """The incrementally kept histogram gives the CDF of the latest ``capacity`` delays."""
    s = DelayStats(g, capacity)
    seen: list[int] = []
    for b in batches:
        s.add(np.asarray(b, dtype=np.int64))
        seen += b
    latest = np.asarray(seen[-capacity:], dtype=np.int64)
    assert sorted(s.latest().tolist()) == sorted(latest.tolist())
    if len(latest):
        counts = np.bincount(-(-latest // g))
        assert np.allclose(s.cdf(), np.cumsum(counts) / counts.sum())
    else:
        assert s.cdf().tolist() == [1.0]

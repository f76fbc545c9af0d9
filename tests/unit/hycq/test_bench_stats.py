"""hycq.bench_stats: the bootstrap interval, the verdict between plans, and the load probe
that tells a clean span from one another process disturbed."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from hycq.bench import Measurement
from hycq.bench_stats import LoadProbe, _family_cpu, hit, is_clean, judge, median_ci

SPIN = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass\n"


def test_the_interval_contains_the_median_and_narrows_with_more_spans() -> None:
    few = [100.0, 90.0, 110.0, 95.0, 105.0]
    med, lo, hi = median_ci(few)
    assert med == 100.0 and lo < med < hi
    many = few * 8
    _, lo2, hi2 = median_ci(many)
    assert hi2 - lo2 < hi - lo
    assert median_ci([5.0]) == (5.0, 5.0, 5.0)
    assert median_ci(few) == median_ci(few)  # seeded: a record can be recomputed


def test_overlapping_intervals_are_ties_and_separated_ones_are_not() -> None:
    v = judge({"a": (100.0, 97.0, 103.0), "b": (98.0, 95.0, 101.0), "c": (80.0, 78.0, 82.0)})
    assert v["a"].vs_best == 1.0 and v["a"].tied_with_best
    assert v["b"].tied_with_best and not v["b"].best_separable
    assert not v["c"].tied_with_best and v["c"].vs_best == pytest.approx(0.8)
    v = judge({"a": (100.0, 99.0, 101.0), "b": (90.0, 89.0, 91.0)})
    assert v["a"].best_separable and not v["b"].tied_with_best
    assert hit(0.96, False) and hit(0.5, True) and not hit(0.9, False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_another_process_taking_a_core_makes_a_span_unclean() -> None:
    # The shell exits at once; the spinner it started is re-parented away from this
    # process, so its CPU time is someone else's.
    subprocess.run(
        ["sh", "-c", f"{sys.executable} -c '{SPIN.format(s=1.5)}' >/dev/null 2>&1 &"],
        check=True,
    )
    time.sleep(0.2)
    probe = LoadProbe()
    probe.start()
    time.sleep(1.0)
    other = probe.other_cores(1.0)
    assert other is not None and other > 0.7 and not is_clean(other)
    time.sleep(0.5)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_child_process_counts_as_this_process_work() -> None:
    """A Spark JVM is the driver's child: its CPU is the plan's, not interference."""
    child = subprocess.Popen([sys.executable, "-c", SPIN.format(s=1.5)])
    try:
        time.sleep(0.2)
        before = _family_cpu()
        time.sleep(1.0)
        after = _family_cpu()
        assert before is not None and after is not None
        assert after - before > 0.7  # the child's second of spinning is in this family's time
    finally:
        child.wait()


def test_anchored_spans_are_ratios_to_the_anchor_of_the_same_round() -> None:
    """A group that ran on a machine twice as slow measures both plans at half speed; the
    ratio to the anchor of the same round, times the anchor's pooled median, is the same."""
    from hycq.bench_stats import CLEAN_OTHER_CORES, anchored

    slow = anchored([50.0, 60.0, 40.0], [0.0] * 3, [100.0, 120.0, 80.0], [0.0] * 3, 200.0)
    assert slow == [100.0, 100.0, 100.0]
    # a disturbed round (either side) is left out; too few pairs keep the raw spans
    busy = CLEAN_OTHER_CORES + 0.1
    kept = anchored([50.0, 60.0, 40.0], [busy, 0.0, 0.0], [100.0, 100.0, 80.0], [0.0] * 3, 100.0)
    assert kept == [60.0, 50.0]
    assert anchored([50.0, 60.0], [0.0, busy], [100.0, 100.0], [0.0, 0.0], 100.0) is None
    assert anchored([50.0, 60.0], [0.0, 0.0], [0.0, 100.0], [0.0, 0.0], 100.0) is None


def test_groups_put_the_first_placement_in_every_group_when_they_do_not_fit() -> None:
    from hycq.bench import _groups

    assert _groups(list("abc"), 4) == [list("abc")]
    assert _groups(list("abcdefg"), 4) == [list("abcd"), list("aefg")]
    assert _groups(list("abcde"), 3) == [list("abc"), list("ade")]
    assert _groups(list("abc"), 1) == [["a"], ["b"], ["c"]]  # nothing to pair with


def _m(spans: list[float]) -> Measurement:
    m = Measurement(0.0, spans, 0.0, 0.0, 0, 0, None, other_cores=[0.0] * len(spans))
    m.throughput, lo, hi = median_ci(spans)
    m.ci = (lo, hi)
    return m


def test_the_runoff_takes_the_plans_near_the_best_unless_a_group_held_exactly_them() -> None:
    """The regression of issue 20's fourteenth stop: the anchor measured half as fast in the
    group beside two plans 50x slower, and a hybrid as fast as the anchor came out 1.6x
    faster when anchored to those spans. The run-off takes the anchor and the plans within
    ``RUNOFF_WITHIN`` of the best (up to ``size - 1``) into one group of their own."""
    from hycq.bench import _anchor, _runoff

    a1, b, c = _m([700.0, 720.0, 740.0]), _m([650.0] * 3), _m([660.0, 670.0, 680.0])
    a2, hybrid, slow1, slow2 = (
        _m([350.0, 360.0, 370.0]),
        _m([560.0, 580.0, 600.0]),
        _m([8.0] * 3),
        _m([9.0] * 3),
    )
    d = _m([300.0] * 3)  # within the group of a1 but below RUNOFF_WITHIN of the best
    runs = [
        (["a", "b", "c", "d"], [a1, b, c, d]),
        (["a", "h", "s1", "s2"], [a2, hybrid, slow1, slow2]),
    ]
    done = {"a": a1, "b": b, "c": c, "d": d, "h": hybrid, "s1": slow1, "s2": slow2}
    _anchor(runs, done)
    assert done["h"].throughput > 1.5 * done["a"].throughput  # the artefact
    assert _runoff(runs, done, 4) == ["a", "h", "c", "b"]  # fastest first, slow ones out
    assert _runoff(runs, done, 2) == ["a", "h"]
    # a group that held exactly the anchor and the near plans compared them directly
    near_only = [(["a", "b", "c"], [a1, b, c]), (["a", "s1", "s2"], [a2, slow1, slow2])]
    done = {"a": a1, "b": b, "c": c, "s1": slow1, "s2": slow2}
    _anchor(near_only, done)
    assert _runoff(near_only, done, 3) is None
    # nothing near the anchor: nothing to run off
    far = [(["a", "s1"], [a1, slow1]), (["a", "s2"], [a2, slow2])]
    done = {"a": a1, "s1": slow1, "s2": slow2}
    _anchor(far, done)
    assert _runoff(far, done, 2) is None

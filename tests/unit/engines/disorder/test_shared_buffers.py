"""Shared disorder handling's configuration algorithms (engines/disorder/shared_plan.py,
Ji Ch. 5): every configuration meets each query's kappa on every path; OPT equals the
exhaustive optimum on random subplans; GREEDY and unshared never beat it; the worked
equations of Figs. 5.4 and 5.5, including the case where GREEDY is not optimal."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.disorder.shared_plan import (
    ALGORITHMS,
    Buffer,
    Configuration,
    Node,
    candidates,
    check_configuration,
    check_subplan,
    exhaustive,
    filt,
    greedy,
    leaf,
    memory,
    opt,
    source,
    unshared,
)
from optimizer.ir.errors import OptionError

SELECTIVITIES = [0.05, 0.2, 0.35, 0.5, 0.7, 0.9, 1.0]


@st.composite
def subplans(draw: st.DrawFn, max_depth: int = 3) -> tuple[Node, dict[str, int]]:
    """A random subplan (branching filters, leaves at any depth) and a kappa per query."""
    counter = [0]

    def children(depth: int) -> list[Node]:
        out = []
        for _ in range(draw(st.integers(1, 3))):
            counter[0] += 1
            me = counter[0]
            if depth >= max_depth or draw(st.booleans()):
                out.append(leaf(f"Q{me}"))
            else:
                sel = draw(st.sampled_from(SELECTIVITIES))
                out.append(filt(f"F{me}", sel, *children(depth + 1)))
        return out

    root = source("S", *children(0))
    kappa = {
        v.query: draw(st.sampled_from([0, 1, 2, 3, 5, 8, 13, 40]))
        for v in root.walk()
        if v.is_leaf and v.query is not None
    }
    return root, kappa


@settings(max_examples=300, deadline=None)
@given(subplans())
def test_opt_is_the_exhaustive_optimum_and_nothing_beats_it(case: tuple[Node, dict[str, int]]):
    root, kappa = case
    costs = {}
    for name, algorithm in ALGORITHMS.items():
        config = algorithm(root, kappa)
        check_configuration(root, kappa, config)
        costs[name] = memory(root, config, 1.0)
    assert costs["opt"] == pytest.approx(costs["exhaustive"], abs=1e-9)
    assert costs["greedy"] >= costs["opt"] - 1e-9
    assert costs["unshared"] >= costs["opt"] - 1e-9


@settings(max_examples=100, deadline=None)
@given(subplans())
def test_candidates_are_at_most_the_product_of_filter_children_plus_one(case):
    root, kappa = case
    bound = 1
    for v in root.walk():
        if not v.is_leaf:
            bound *= sum(c.is_filter for c in v.children) + 1
    assert 1 <= candidates(root, kappa) <= bound


def _fig_5_4(f1: float, f2: float, f3: float) -> tuple[Node, dict[str, int]]:
    """Fig. 5.4: a branch operator with three filter children, kappa_3 < kappa_1 < kappa_2."""
    root = source(
        "v",
        filt("F1", f1, leaf("Q1")),
        filt("F2", f2, leaf("Q2")),
        filt("F3", f3, leaf("Q3")),
    )
    return root, {"Q1": 5, "Q2": 9, "Q3": 2}


@pytest.mark.parametrize(
    "fs", [(0.9, 0.9, 0.9), (0.3, 0.5, 0.9), (0.2, 0.3, 0.3), (0.6, 0.9, 0.1), (0.1, 0.95, 0.5)]
)
def test_the_four_candidates_of_fig_5_4(fs: tuple[float, float, float]):
    f1, f2, f3 = fs
    root, kappa = _fig_5_4(*fs)
    k1, k2, k3 = kappa["Q1"], kappa["Q2"], kappa["Q3"]
    mems = [
        k2,
        k1 + f2 * (k2 - k1),
        k3 + f1 * (k1 - k3) + f2 * (k2 - k3),
        f1 * k1 + f2 * k2 + f3 * k3,
    ]
    assert memory(root, opt(root, kappa), 1.0) == pytest.approx(min(mems))
    assert memory(root, greedy(root, kappa), 1.0) == pytest.approx(min(mems))
    assert memory(root, unshared(root, kappa), 1.0) == pytest.approx(mems[3])
    assert candidates(root, kappa) == 4


def _g3(f6: float, f7: float, f8: float, f9: float) -> tuple[Node, dict[str, int]]:
    """Fig. 5.5's subplan G^3: S3 -> F6 -> Q3, S3 -> F7 -> {F8 -> Q4, F9 -> Q5};
    kappa_5 < kappa_3 < kappa_4."""
    root = source(
        "S3",
        filt("F6", f6, leaf("Q3")),
        filt("F7", f7, filt("F8", f8, leaf("Q4")), filt("F9", f9, leaf("Q5"))),
    )
    return root, {"Q3": 6, "Q4": 10, "Q5": 2}


def test_greedy_misses_the_optimum_where_the_text_says_it_does():
    # f8 + f9 < 1, f6 < 1 and f6 + f7 >= 1, but f6 + f7 (f8 + f9) < 1: GREEDY keeps a
    # buffer on S3 (C8), OPT pushes everything down (C9, here unshared).
    root, kappa = _g3(0.5, 0.6, 0.3, 0.3)
    g, o = greedy(root, kappa), opt(root, kappa)
    assert memory(root, o, 1.0) < memory(root, g, 1.0)
    assert memory(root, o, 1.0) == pytest.approx(memory(root, exhaustive(root, kappa), 1.0))
    assert "S3" in g.chains and "S3" not in o.chains
    assert candidates(root, kappa) == 9  # (N_F(S3) + 1) (N_F(F7) + 1)


def test_a_non_filter_child_with_the_largest_kappa_pins_the_whole_chain():
    root = source("S", filt("F1", 0.1, leaf("Q1")), leaf("Q2"))
    kappa = {"Q1": 3, "Q2": 7}
    config = opt(root, kappa)
    assert [b.size for b in config.chains["S"]] == [3, 4]
    assert candidates(root, kappa) == 1


def test_zero_kappa_queries_need_no_buffer():
    root = source("S", filt("F1", 0.5, leaf("Q1")), leaf("Q2"))
    for algorithm in ALGORITHMS.values():
        config = algorithm(root, {"Q1": 0, "Q2": 0})
        check_configuration(root, {"Q1": 0, "Q2": 0}, config)
        assert memory(root, config, 1.0) == 0


def test_memory_scales_with_the_rate_and_the_selectivities_above():
    root = source("S", filt("F1", 0.25, filt("F2", 0.5, leaf("Q1")), leaf("Q2")))
    config = unshared(root, {"Q1": 8, "Q2": 4})
    assert memory(root, config, 10.0) == pytest.approx(10 * (0.125 * 8 + 0.25 * 4))


def test_a_configuration_that_misses_a_kappa_is_refused():
    root = source("S", filt("F1", 0.5, leaf("Q1")))
    wrong = Configuration({"S": [Buffer(2, ("F1",))]}, "hand")
    with pytest.raises(ValueError, match="buffers 2, not kappa = 3"):
        check_configuration(root, {"Q1": 3}, wrong)
    unfed = Configuration({"S": [Buffer(3, ())]}, "hand")
    with pytest.raises(ValueError, match="feeds"):
        check_configuration(root, {"Q1": 3}, unfed)


@pytest.mark.parametrize(
    ("root", "kappa", "message"),
    [
        (filt("F", 0.5, leaf("Q1")), {"Q1": 1}, "starts at its source"),
        (
            source("S", filt("F", 0.5, leaf("Q1")), filt("F", 0.5, leaf("Q2"))),
            {"Q1": 1, "Q2": 1},
            "named",
        ),
        (source("S", filt("F", 0.0, leaf("Q1"))), {"Q1": 1}, "selectivity"),
        (source("S", filt("F", 0.5)), {}, "feeds no query"),
        (source("S", leaf("Q1")), {}, "no K-slack size"),
        (source("S", leaf("Q1")), {"Q1": -1}, "negative"),
    ],
)
def test_bad_subplans_are_clear_errors(root: Node, kappa: dict[str, int], message: str):
    with pytest.raises(OptionError, match=message):
        check_subplan(root, kappa)

"""optimizer/join_impl.py's work counts on a chain whose estimates are known exactly: Q3
``r(a) join s(a, b) join t(b)`` with independent uniform keys."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from optimizer.join_impl import UNIT_S, cache_gain, chain_work, seconds

RATE = {0: 100.0, 1: 200.0, 2: 400.0}  # r, s, t tuples/s
WINDOW = 5.0
KEYS = {(0, 1): 50.0, (1, 2): 80.0}  # a's and b's domains


@dataclass
class _Value:
    value: float


@dataclass
class _Est:
    lambda_out: _Value
    cardinality: _Value
    slide_seconds: float = 1.0


class _Q3Model:
    """The chain model's interface: per leaf estimates, ``of_set`` and ``filters``."""

    def __init__(self) -> None:
        self.est = [_Est(_Value(r), _Value(r * WINDOW)) for r in RATE.values()]
        self.filters = [(frozenset(p), _Value(1 / k)) for p, k in KEYS.items()]

    def sel(self, s: frozenset[int]) -> float:
        f = 1.0
        for leaves, v in self.filters:
            if leaves <= s:
                f *= v.value
        return f

    def of_set(self, s: frozenset[int]) -> tuple[_Value, _Value]:
        card = 1.0
        for i in s:
            card *= RATE[i] * WINDOW
        size = card * self.sel(s)
        # a change of leaf i joins the window of the others
        lam = sum(RATE[i] * size / (RATE[i] * WINDOW) for i in s)
        return _Value(lam), _Value(size)


def test_tree_and_mjoin_counts() -> None:
    cm = _Q3Model()
    w = chain_work(cm).work
    lam_rs = cm.of_set(frozenset({0, 1}))[0].value
    lam_rst = cm.of_set(frozenset({0, 1, 2}))[0].value
    assert w["tree"]["probe"] == pytest.approx(2 * (RATE[0] + RATE[1]) + 2 * (lam_rs + RATE[2]))
    assert w["tree"]["store"] == pytest.approx(w["tree"]["probe"])
    assert w["tree"]["out"] == pytest.approx(2 * (lam_rs + lam_rst))
    assert w["tree"]["step"] == pytest.approx(2.0)  # two joins, one instant a second
    # MJoin: every change is taken once; s, probed on a and on b, keeps one extra index
    assert w["mjoin"]["probe"] == pytest.approx(2 * sum(RATE.values()))
    assert w["mjoin"]["store_m"] == pytest.approx(2 * RATE[1])
    assert w["mjoin"]["step"] == pytest.approx(1.0)
    # every pipeline ends in the full join's results: their sum is the result rate
    assert w["mjoin"]["out"] == pytest.approx(2 * lam_rst)
    # A-Caching is MJoin plus its per-tuple work; JIT the tree plus bookkeeping
    for unit in ("probe", "probe_inner", "bind", "out", "store_m"):
        assert w["acaching"][unit] == pytest.approx(w["mjoin"][unit])
    assert w["acaching"]["ac_tuple"] == pytest.approx(2 * sum(RATE.values()))
    assert w["jit"]["book"] > 0 and w["jit"]["out"] == pytest.approx(w["tree"]["out"])
    assert w["jit"]["probe"] <= w["tree"]["probe"]


def test_cache_gain_saves_probes_not_results() -> None:
    """A cache hit still builds every result: making results dearer must not change the
    gain; making probes dearer raises it; making updates dear enough removes it."""
    cw = chain_work(_Q3Model())
    base = cache_gain(cw)
    assert base >= 0
    dear_out = dict(UNIT_S, out=UNIT_S["out"] * 100)
    assert cache_gain(cw, dear_out) == pytest.approx(base)
    dear_probe = dict(UNIT_S, probe_inner=UNIT_S["probe_inner"] * 10)
    assert cache_gain(cw, dear_probe) > base
    assert cache_gain(cw, dict(UNIT_S, update=1.0)) == 0.0


def test_seconds_is_linear_in_units() -> None:
    w = chain_work(_Q3Model()).work["tree"]
    double = {k: 2 * v for k, v in UNIT_S.items()}
    assert seconds(w, double) == pytest.approx(2 * seconds(w))

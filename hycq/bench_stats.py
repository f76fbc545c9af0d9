"""Statistics that make ``hycq bench`` trustworthy on a small, shared machine.

* :func:`median_ci`: the median of a plan's span throughputs and its 95% bootstrap
  confidence interval (percentile method, seeded, so a record can be recomputed).
* :class:`LoadProbe`: how much CPU *other* processes took while a span was timed, from
  ``/proc``: the machine's busy time (``/proc/stat``) minus this process's and its
  descendants' (a Spark JVM is a child of the Python driver, and its work is the plan's).
  A span during which others took half a core or more is not *clean*: on two cores that
  is a quarter of the machine, far above the precision asked for.
* :func:`judge`: within one (query, rate) point, which plans are tied with the fastest
  (their intervals overlap) and whether the fastest is separable from the runner-up.

Linux only for the load probe; elsewhere it reports ``None`` and every span counts as clean
(with the record saying the load was not measured).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: A span is clean when other processes used less than this many cores during it.
CLEAN_OTHER_CORES = 0.5
BOOTSTRAP_RESAMPLES = 2000


def median_ci(values: list[float], seed: int = 0) -> tuple[float, float, float]:
    """(median, low, high): the 95% percentile-bootstrap interval of the median."""
    if not values:
        return 0.0, 0.0, 0.0
    a = np.asarray(values, dtype=float)
    med = float(np.median(a))
    if len(a) == 1:
        return med, med, med
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(BOOTSTRAP_RESAMPLES, len(a)))
    meds = np.median(a[idx], axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return med, float(lo), float(hi)


def half_width(values: list[float]) -> float:
    """The interval's half-width relative to the median (inf with fewer than 2 values)."""
    if len(values) < 2:
        return float("inf")
    med, lo, hi = median_ci(values)
    return (hi - lo) / 2 / med if med > 0 else float("inf")


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_busy() -> float | None:
    """CPU seconds all cores spent not idle since boot (``/proc/stat``)."""
    try:
        line = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    v = [int(x) for x in line[1:]]
    # user nice system idle iowait irq softirq steal (guest time is inside user)
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
    return busy / _TICK


def _family_cpu() -> float | None:
    """CPU seconds used by this process and every live descendant (``/proc/*/stat``)."""
    me = os.getpid()
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for name in entries:
        if not name.isdigit():
            continue
        try:
            text = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = text[text.rfind(")") + 2 :].split()
        pid = int(name)
        parent[pid] = int(fields[1])
        # utime stime cutime cstime: fields 14-17 of stat, 12-15 after the comm
        cpu[pid] = sum(int(x) for x in fields[11:15]) / _TICK
    total = 0.0
    for pid, c in cpu.items():
        p, hops = pid, 0
        while p > 1 and hops < 64:
            if p == me:
                total += c
                break
            p, hops = parent.get(p, 0), hops + 1
    return total


@dataclass
class LoadProbe:
    """Brackets a timed span: ``start()`` before, ``other_cores(wall)`` after."""

    busy0: float | None = None
    own0: float | None = None

    def start(self) -> None:
        self.busy0, self.own0 = _machine_busy(), _family_cpu()

    def other_cores(self, wall: float) -> float | None:
        """Cores other processes used on average during the span (None: not measurable)."""
        busy, own = _machine_busy(), _family_cpu()
        if None in (busy, own, self.busy0, self.own0) or wall <= 0:
            return None
        assert busy is not None and own is not None
        assert self.busy0 is not None and self.own0 is not None
        # Both counters tick in 1/CLK_TCK steps, read at slightly different moments: up to
        # two ticks of the difference are reading error, not load (it matters for spans of
        # tens of milliseconds). A descendant that exited during the span takes its CPU
        # time with it; never report below zero because of that.
        other = (busy - self.busy0) - (own - self.own0) - 2.0 / _TICK
        return max(0.0, other / wall)


def is_clean(other: float | None) -> bool:
    return other is None or other < CLEAN_OTHER_CORES


def anchored(
    spans: list[float],
    other: list[float | None],
    anchor_spans: list[float],
    anchor_other: list[float | None],
    reference: float,
) -> list[float] | None:
    """A plan's spans as ratios to the anchor plan's span of the same round, times the
    anchor's ``reference`` throughput (its median over every group it ran in).

    Placements measured in different groups ran minutes apart, in engines created after
    other groups' engines were closed: on Q5 (1,677 plugs, 10k tuples/s), 26 medians of the
    same all-row plan, each from a run of one to four plans within ten minutes, ranged from
    0.63 M to 1.74 M tuples/s. Within a round the plans run back to back over the same
    tuples, so the ratio to the anchor cancels what the group and the minute share. Pairs
    where either span was disturbed by another process are left out; None when fewer than 2
    pairs remain (the caller keeps the raw spans)."""
    pairs = [
        s / a * reference
        for s, o, a, ao in zip(spans, other, anchor_spans, anchor_other, strict=False)
        if a > 0 and is_clean(o) and is_clean(ao)
    ]
    return pairs if len(pairs) >= 2 else None


@dataclass
class Verdict:
    """One plan's standing at its point."""

    vs_best: float
    tied_with_best: bool
    best_separable: bool


def judge(cis: dict[str, tuple[float, float, float]]) -> dict[str, Verdict]:
    """Per plan: its median over the best median, whether its interval overlaps the best
    plan's (a tie: the measurement cannot order them), and whether the best is separable
    from the second best at all."""
    if not cis:
        return {}
    order = sorted(cis, key=lambda k: -cis[k][0])
    best = order[0]
    b_med, b_lo, _ = cis[best]
    separable = len(order) < 2 or b_lo > cis[order[1]][2]
    out = {}
    for k, (med, _lo, hi) in cis.items():
        out[k] = Verdict(
            vs_best=med / b_med if b_med > 0 else 1.0,
            tied_with_best=k == best or hi >= b_lo,
            best_separable=separable,
        )
    return out


def hit(vs_best: float, tied: bool, tolerance: float = 0.05) -> bool:
    """The issue's criterion: within ``tolerance`` of the measured best, or tied with it."""
    return tied or vs_best >= 1.0 - tolerance

"""Profiles: a generator setting that changes over event time (drifting workloads).

A profile is a list of points ``SECONDS:VALUE`` (seconds after the workload's start) joined
by ``,`` (the value holds until the next point, then *steps* to it) or ``~`` (the value moves
*linearly* from one point to the next: a ramp). The first point is at 0; after the last one
the value stays. A bare number is a constant profile. Examples::

    1000                          constant 1000
    0:1000,60:40000,120:5000      1000 for a minute, 40000 for a minute, then 5000
    0:1000~60:40000               a ramp from 1000 to 40000 over the first minute, then 40000
    0:0.1,30:0.1~40:0.9           0.1 until 30 s, a ramp to 0.9 by 40 s, then 0.9

Rates (tuples per event-second) may ramp; so may selectivities. Key domains, Zipf exponents
and hot keys are piecewise constant (``steps_only``). :meth:`Profile.cumulative` and
:meth:`Profile.inverse_cumulative` turn a rate profile into tuple times: tuple ``i`` of a
stream lies where the integral of the rate reaches ``i``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from optimizer.ir.errors import OptionError
from optimizer.ir.limits import LIMIT

#: The profile syntax, for error hints.
SYNTAX = "SECONDS:VALUE points joined by ',' (step) or '~' (linear ramp), the first at 0"


@dataclass(frozen=True)
class Profile:
    """A value over event time: ``times`` (seconds, first 0, increasing), ``values`` and per
    segment between two points whether it ramps (``ramps[i]``: points i to i+1)."""

    times: tuple[float, ...]
    values: tuple[float, ...]
    ramps: tuple[bool, ...]

    @classmethod
    def constant(cls, value: float) -> Profile:
        return cls((0.0,), (float(value),), ())

    @property
    def first(self) -> float:
        return self.values[0]

    @property
    def highest(self) -> float:
        return max(self.values)

    @property
    def is_constant(self) -> bool:
        return len(set(self.values)) == 1

    def at(self, t: np.ndarray | float) -> np.ndarray:
        """The value at offsets ``t`` (seconds)."""
        t = np.asarray(t, dtype=np.float64)
        times = np.asarray(self.times)
        seg = np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(times) - 1)
        out = np.asarray(self.values, dtype=np.float64)[seg]
        for i, ramp in enumerate(self.ramps):
            if ramp:
                t0, t1 = self.times[i], self.times[i + 1]
                v0, v1 = self.values[i], self.values[i + 1]
                inside = seg == i
                out = np.where(inside, v0 + (v1 - v0) * (t - t0) / (t1 - t0), out)
        return out

    def segment(self, t: np.ndarray) -> np.ndarray:
        """Index of the point at or before each offset (for piecewise-constant profiles)."""
        times = np.asarray(self.times)
        return np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(times) - 1)

    def _knots(self) -> np.ndarray:
        """The integral at every point."""
        c = [0.0]
        for i in range(len(self.times) - 1):
            dt = self.times[i + 1] - self.times[i]
            v0 = self.values[i]
            v1 = self.values[i + 1] if self.ramps[i] else v0
            c.append(c[-1] + dt * (v0 + v1) / 2.0)
        return np.asarray(c)

    def cumulative(self, t: np.ndarray | float) -> np.ndarray:
        """The integral of the value from 0 to ``t`` (for a rate: tuples before ``t``)."""
        t = np.maximum(np.asarray(t, dtype=np.float64), 0.0)
        knots = self._knots()
        seg = self.segment(t)
        tau = t - np.asarray(self.times)[seg]
        v0 = np.asarray(self.values)[seg]
        slope = np.zeros(len(self.values))
        for i, ramp in enumerate(self.ramps):
            if ramp:
                slope[i] = (self.values[i + 1] - self.values[i]) / (
                    self.times[i + 1] - self.times[i]
                )
        return knots[seg] + v0 * tau + slope[seg] * tau * tau / 2.0

    def inverse_cumulative(self, n: np.ndarray) -> np.ndarray:
        """The smallest offsets where the integral reaches ``n`` (``inf`` where it never
        does: a rate that ends at 0)."""
        n = np.asarray(n, dtype=np.float64)
        knots = self._knots()
        seg = np.clip(np.searchsorted(knots, n, side="right") - 1, 0, len(knots) - 1)
        # A segment of zero rate has no tuple: a value at its knot belongs to the next one.
        m = n - knots[seg]
        v0 = np.asarray(self.values)[seg]
        slope = np.zeros(len(self.values))
        for i, ramp in enumerate(self.ramps):
            if ramp:
                slope[i] = (self.values[i + 1] - self.values[i]) / (
                    self.times[i + 1] - self.times[i]
                )
        a = slope[seg]
        # v0 * tau + a * tau^2 / 2 = m  ->  tau = 2m / (v0 + sqrt(v0^2 + 2 a m)) (stable).
        root = np.sqrt(np.maximum(v0 * v0 + 2.0 * a * m, 0.0))
        denom = v0 + root
        with np.errstate(divide="ignore", invalid="ignore"):
            tau = np.where(m == 0, 0.0, np.where(denom > 0, 2.0 * m / denom, np.inf))
        return np.asarray(self.times)[seg] + tau

    def text(self) -> str:
        """The profile in its own syntax (round-trips through :func:`parse_profile`)."""
        if len(self.times) == 1:
            return f"{self.values[0]:g}"
        out = f"{self.times[0]:g}:{self.values[0]:g}"
        for i in range(1, len(self.times)):
            out += ("~" if self.ramps[i - 1] else ",") + f"{self.times[i]:g}:{self.values[i]:g}"
        return out


def parse_profile(
    text: str,
    what: str,
    low: float = 0.0,
    high: float = LIMIT,
    integer: bool = False,
    steps_only: bool = False,
    positive_somewhere: bool = False,
) -> Profile:
    """Parse a profile (module docstring) for setting ``what``; values in [low, high].

    Raises OptionError naming the setting, the bad part and the syntax.
    """

    def bad(problem: str) -> OptionError:
        example = "0:1000,60:40000,120:5000" if not steps_only else "0:20,60:400"
        return OptionError(
            f"{what}: {problem} in profile '{text}'",
            hint=f"{SYNTAX}{'' if not steps_only else ' (steps only: no ~)'}, e.g. {example}",
        )

    if not isinstance(text, str) or not text.strip():
        raise bad("empty")
    s = text.strip().replace(" ", "")
    parts: list[str] = []
    seps: list[str] = []
    cur = ""
    for ch in s:
        if ch in ",~":
            parts.append(cur)
            seps.append(ch)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    times: list[float] = []
    values: list[float] = []
    for p in parts:
        if ":" not in p:
            if len(parts) == 1:
                t_s, v_s = "0", p
            else:
                raise bad(f"'{p}' is not SECONDS:VALUE")
        else:
            t_s, _, v_s = p.partition(":")
        try:
            t, v = float(t_s), float(v_s)
        except ValueError:
            raise bad(f"'{p}' is not SECONDS:VALUE with numbers") from None
        if not (math.isfinite(t) and math.isfinite(v)):
            raise bad(f"'{p}' is not finite")
        if abs(t) > LIMIT:
            raise bad(f"{t:g} s is beyond {LIMIT:g} s, the longest span hycq accepts")
        if not low <= v <= high:
            raise bad(f"value {v:g} is outside [{low:g}, {high:g}]")
        if integer and v != int(v):
            raise bad(f"value {v:g} must be a whole number")
        times.append(t)
        values.append(v)
    if times[0] != 0:
        raise bad(f"the first point is at {times[0]:g} s, not 0")
    for a, b in itertools.pairwise(times):
        if not b > a:
            raise bad(f"times must increase ({a:g} then {b:g})")
    if steps_only and "~" in seps:
        raise bad("a ramp '~' where only steps are allowed")
    if positive_somewhere and max(values) <= 0:
        raise bad("every value is 0")
    return Profile(tuple(times), tuple(values), tuple(c == "~" for c in seps))
